"""The README's main job: ``accelerator demo`` end to end, then ``accelerator indexes``."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = str(Path(__file__).resolve().parent.parent)


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accelerator.cli", *args],
                          capture_output=True, text=True, timeout=600, cwd=REPO)


def test_demo_then_list_indexes(tmp_path):
    work = str(tmp_path / "demo")
    demo = run_cli("demo", "--work-dir", work, "--rows", "20000", "--files", "4", "--runs", "1")
    assert demo.returncode == 0, demo.stderr[-3000:]
    out = demo.stdout
    assert "results identical: True" in out
    assert "rows: 0 " not in out
    used = out.split("Indexes used:")[1]
    assert "idx_nested: file:" in used
    with_plan = out.split("Plan with indexes:")[1].split("Plan without indexes:")[0]
    assert "nested__nst__field1" in with_plan and "idx_nested/v__=0" in with_plan

    listing = run_cli("indexes", "--system-path", f"{work}/indexes")
    assert listing.returncode == 0, listing.stderr[-3000:]
    assert "idx_nested" in listing.stdout and "ACTIVE" in listing.stdout


EXTENSIONS_SCRIPT = """
import sys
from pyspark.sql import SparkSession
from accelerator import Hyperspace, IndexConfig
jar, data, system_path = sys.argv[1:4]
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.jars", jar)
         .config("spark.sql.extensions", "accelerator.jvm.AcceleratorExtensions")
         .config("spark.accelerator.system.path", system_path)
         .config("spark.accelerator.index.numBuckets", "2").getOrCreate())
spark.range(100).selectExpr("id", "id % 5 AS k").write.parquet(data)
df = spark.read.parquet(data)
Hyperspace(spark).createIndex(df, IndexConfig("idx_k", ["k"], ["id"]))
query = lambda: spark.read.parquet(data).filter("k = 3").select("id")
vanilla = sorted(query().collect())
Hyperspace.enable(spark)
q = query()
print("USES_INDEX", all("/idx_k/v__=0/" in f for f in q.inputFiles()))
print("IDENTICAL", sorted(q.collect()) == vanilla)
rules = spark._jsparkSession.sessionState().optimizer().preCBORules()
print("RULES", sum(rules.apply(i).ruleName() == "accelerator.jvm.AcceleratorRule" for i in range(rules.size())))
"""


def test_rule_installed_through_spark_sql_extensions(tmp_path):
    jar = run_cli("jar")
    assert jar.returncode == 0, jar.stderr[-3000:]
    jar_path = jar.stdout.strip().splitlines()[-1]
    assert jar_path.endswith(".jar")
    script = tmp_path / "ext.py"
    script.write_text(EXTENSIONS_SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([sys.executable, str(script), jar_path, str(tmp_path / "data"),
                          str(tmp_path / "indexes")], capture_output=True, text=True, timeout=600,
                         env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "USES_INDEX True" in run.stdout
    assert "IDENTICAL True" in run.stdout
    assert "RULES 1" in run.stdout   # injected once, by the extension, not again by enable
