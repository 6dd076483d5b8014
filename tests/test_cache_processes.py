"""The cache shared by processes: two processes warming the same source at once leave one entry
per file, and a warm-up killed before it commits leaves nothing served and files the demoter
deletes. Each process is a real PySpark driver (a subprocess with its own local JVM)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tests.helpers import rows, session_conf, vanilla

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORKER = textwrap.dedent("""
    import os, sys
    from pyspark.sql import SparkSession
    system_path, source, mode = sys.argv[1:4]
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.accelerator.system.path", system_path).getOrCreate())
    from accelerator import Hyperspace
    if mode == "crash":   # dies after writing the data, before committing any entry
        from accelerator.cache.manifest import CacheManifest
        CacheManifest.commit_all = lambda *args, **kwargs: os._exit(17)
    Hyperspace(spark).cache(spark.read.parquet(source))
    print("warmed")
""")


def worker(system_path: str, source: str, mode: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen([sys.executable, "-c", WORKER, system_path, source, mode],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=ROOT)


def test_two_processes_warming_one_source_leave_one_entry_per_file(spark, hs, system_path,
                                                                   tmp_path):
    src = str(tmp_path / "src")
    spark.range(0, 3000, numPartitions=6).selectExpr("id", "id % 11 AS k").write.parquet(src)
    procs = [worker(system_path, src, "warm") for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0 and "warmed" in out, err[-3000:]
    files = [f"file:{os.path.join(src, f)}" for f in os.listdir(src) if f.endswith(".parquet")]
    entries = hs.cacheEntries().collect()
    active = [e for e in entries if e.state == "ACTIVE"]
    assert sorted(e.file for e in active) == sorted(files)
    q = spark.read.parquet(src).filter("k = 3")
    assert "CachedFileIndex" in q._jdf.queryExecution().executedPlan().toString()
    assert rows(q) == vanilla(spark, lambda: spark.read.parquet(src).filter("k = 3"))


def test_a_warmup_killed_before_commit_leaves_nothing_served(spark, hs, system_path, tmp_path):
    src = str(tmp_path / "src")
    spark.range(0, 500, numPartitions=2).write.parquet(src)
    p = worker(system_path, src, "crash")
    _, err = p.communicate(timeout=300)
    assert p.returncode == 17, err[-3000:]
    data = os.path.join(system_path, "_cache", "data")
    assert os.listdir(data)                               # what the job wrote is left behind
    assert hs.cacheEntries().collect() == []
    q = spark.read.parquet(src)
    assert "CachedFileIndex" not in q._jdf.queryExecution().executedPlan().toString()
    assert q.count() == 500
    hs.evictCache()
    assert os.listdir(data)                               # within the grace period: kept
    with session_conf(spark, spark__accelerator__cache__deleteGraceSeconds="0"):
        hs.evictCache()
    assert os.listdir(data) == []
    hs.cache(spark.read.parquet(src))                     # and the cache works as before
    assert "CachedFileIndex" in spark.read.parquet(src)._jdf.queryExecution() \
        .executedPlan().toString()
