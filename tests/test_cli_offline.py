"""The command line without Spark: read-only verbs on a local system path answer without
starting a JVM (run in a subprocess whose ``java`` only leaves a mark, and whose pyspark
gateway must stay unset) and print what the same verb prints with Spark; inputs are checked
before Spark starts; the system path comes from the flag, the environment, the configuration
file, spark-defaults.conf or the default, and a read creates nothing; ``accelerator init``;
the DataSketches warning of sessions the command line starts."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from accelerator import Hyperspace, IndexConfig
from accelerator.api.frames import local_frame
from accelerator.commands import system_path as sp
from accelerator.commands import table
from accelerator.commands.cli import main
from accelerator.commands.init import FILES
from accelerator.runtime.settings import SYSTEM_PATH
from accelerator.scheduler.config import load_config_file
from indexes.fs import HadoopFs
from indexes.fs.local import LocalFs
from indexes.skipping.config import DataSkippingIndexConfig, MinMaxSketch
from tests.helpers import using_system_path

REPO = str(Path(__file__).resolve().parent.parent)

# Runs the command line in this process and reports whether pyspark ever launched its gateway.
NO_JVM_SCRIPT = """
import sys
from pyspark import SparkContext
from accelerator.commands.cli import main
code = main(sys.argv[1:])
sys.stdout.flush()
print("RC", code, "JVM", SparkContext._gateway is not None)
"""


@pytest.fixture
def no_java(tmp_path):
    """Runs the command line in a subprocess where starting Java fails and leaves a mark:
    ``run(*args, cwd=..., env=...)`` returns (exit code, stdout without the last line,
    stderr); the mark and a started gateway fail the test."""
    home = tmp_path / "no-java"
    (home / "bin").mkdir(parents=True)
    mark = tmp_path / "java-was-started"
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\ntouch '{mark}'\nexit 1\n")
    java.chmod(0o755)

    def run(*args: str, cwd: Path | None = None, env: dict | None = None
            ) -> tuple[int, str, str]:
        environ = {k: v for k, v in os.environ.items()
                   if k not in ("ACCELERATOR_SYSTEM_PATH", "ACCELERATOR_CONFIG")}
        environ.update({"JAVA_HOME": str(home), "PATH": f"{home / 'bin'}:{os.environ['PATH']}",
                        "PYTHONPATH": os.pathsep.join(
                            filter(None, [REPO, os.environ.get("PYTHONPATH")]))})
        environ.update(env or {})
        done = subprocess.run([sys.executable, "-c", NO_JVM_SCRIPT, *args], capture_output=True,
                              text=True, timeout=120, cwd=cwd or tmp_path, env=environ)
        *out, last = done.stdout.rstrip("\n").split("\n")
        assert last.endswith(f"RC {last.split()[-3]} JVM False"), (done.stdout, done.stderr)
        assert not mark.exists(), "java was started"
        return int(last.split()[-3]), "\n".join(out) + "\n" if out else "", done.stderr

    return run


def in_process(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def indexed(spark, tmp_path):
    """A system path with a covering index over a plain directory and a data-skipping index
    over a partitioned one, a recorded query, and their sources: (system path, source,
    partitioned source)."""
    system = str(tmp_path / "indexes")
    source, parted = str(tmp_path / "source"), str(tmp_path / "parted")
    spark.range(200, numPartitions=4).selectExpr("id", "id % 7 AS k").write.parquet(source)
    (spark.range(90, numPartitions=3).selectExpr("id", "id % 3 AS p")
        .write.partitionBy("p").parquet(parted))
    with using_system_path(spark, system):
        hs = Hyperspace(spark)
        hs.createIndex(spark.read.parquet(source), IndexConfig("idx_k", ["k"], ["id"]))
        hs.createIndex(spark.read.parquet(parted),
                       DataSkippingIndexConfig("ds_id", [MinMaxSketch("id")]))
        Hyperspace.enable(spark)
        try:
            spark.read.parquet(source).filter("k = 3").select("id").collect()
        finally:
            Hyperspace.disable(spark)
        Hyperspace.flushHistory(spark)
    return system, source, parted


LISTINGS = [["indexes"], ["indexes", "--json"], ["index", "idx_k"], ["index", "ds_id", "--json"],
            ["events"], ["events", "--json"], ["history", "--json"]]


def test_listings_start_no_jvm_and_print_what_spark_prints(spark, capsys, indexed, no_java):
    system, source, parted = indexed
    # the sources change: one file appended to the first, one deleted from the second
    first = sorted(Path(source).glob("*.parquet"))[0]
    shutil.copy(first, Path(source) / "part-99999-appended.parquet")
    next(Path(parted).glob("p=1/*.parquet")).unlink()
    for args in LISTINGS:
        code, offline, err = no_java(*args, "--system-path", system)
        assert code == 0, (args, err)
        code, with_spark, err = in_process(capsys, *args, "--system-path", system, "--spark")
        assert code == 0, (args, err)
        assert offline == with_spark, args
    code, out, _ = no_java("indexes", "--json", "--system-path", system)
    warnings = {r["name"]: r.get("warning") for r in map(json.loads, out.splitlines())}
    assert warnings == {
        "idx_k": "its source changed since the index was built: 1 appended file; "
                 "refreshIndex('idx_k', mode='incremental') brings it up to date",
        "ds_id": "its source changed since the index was built: 1 deleted file; "
                 "refreshIndex('ds_id', mode='incremental') brings it up to date"}
    code, out, _ = no_java("history", "--system-path", system)
    assert "|timestamp" in out and "[k]" in out   # the recorded query's filter column


def test_a_source_gone_and_a_table_source_without_spark(spark, capsys, indexed, no_java,
                                                        tmp_path):
    system, source, _ = indexed
    spark.range(10).write.saveAsTable("offline_listing_t")
    try:
        with using_system_path(spark, system):
            Hyperspace(spark).createIndex(spark.table("offline_listing_t"),
                                          IndexConfig("idx_t", ["id"]))
    finally:
        spark.sql("DROP TABLE offline_listing_t")
    shutil.rmtree(source)
    code, out, err = no_java("indexes", "--json", "--system-path", system)
    assert code == 0, err
    warnings = {r["name"]: r.get("warning") for r in map(json.loads, out.splitlines())}
    assert warnings["idx_k"].startswith("its source path no longer exists: file:" + source)
    assert warnings["idx_t"] == (
        "not checked without Spark: its source is the catalog table "
        "spark_catalog.default.offline_listing_t; `accelerator indexes --spark` (or "
        "hs.indexes()) checks it")
    code, out, err = in_process(capsys, "indexes", "--json", "--system-path", system, "--spark")
    spark_warnings = {r["name"]: r.get("warning") for r in map(json.loads, out.splitlines())}
    assert spark_warnings["idx_k"] == warnings["idx_k"]
    assert "table" in spark_warnings["idx_t"]   # Spark judged it: dropped


def test_jobs_on_a_local_system_path_start_no_jvm(tmp_path, no_java):
    config = tmp_path / "jobs.yaml"
    config.write_text(f"version: 1\nsystemPath: {tmp_path / 'indexes'}\njobs:\n"
                      "  - {name: evict, kind: evict, interval: PT5M}\n")
    code, out, err = no_java("jobs", "--config", str(config))
    assert code == 0, err
    assert out.startswith("service: none: no `accelerator serve")
    assert "evict" in out and "last run: never" in out
    assert not (tmp_path / "indexes").exists()


@pytest.mark.parametrize("args, message", [
    (["create", "SPEC"], "source has unknown keys fromat"),
    (["create", "TAKEN", "--system-path", "SYSTEM"], "index 'taken' already exists (state ACTIVE)"),
    (["refresh", "bad name"], "invalid index name 'bad name'"),
    (["refresh", "nope", "--system-path", "SYSTEM"], "no index named 'nope'"),
    (["vacuum", "idx", "--retention-seconds", "-5", "--system-path", "SYSTEM"],
     "vacuum retention must be 0 seconds or more, got -5"),
    (["advise", "--rules", "RULES", "--system-path", "SYSTEM"], "RULES:1:"),
    (["whynot", "  ", "--system-path", "SYSTEM"], "the SQL query is empty"),
    (["whynot", "SELECT 1", "--index", "nope", "--system-path", "SYSTEM"],
     "no index named 'nope'"),
    (["explain", "SELECT 1", "--system-path", "MISSING"], "system path MISSING does not exist"),
    (["indexes", "--system-path", "MISSING"], "system path MISSING does not exist"),
    (["serve", "--config", "RULES"], "RULES:1:"),
    (["run-job", "nope", "--config", "CONFIG"], "nope"),
])
def test_inputs_are_checked_before_spark_starts(tmp_path, no_java, args, message):
    system = tmp_path / "system"
    (system / "_events").mkdir(parents=True)
    spec = tmp_path / "spec.yaml"
    spec.write_text("source: {path: /data/x, fromat: json}\n"
                    "index: {kind: covering, name: i, indexedColumns: [k]}\n")
    rules = tmp_path / "rules.yaml"
    rules.write_text("version: 2\n")
    config = tmp_path / "c.yaml"
    config.write_text(f"version: 1\nsystemPath: {system}\njobs: [{{name: e, kind: evict, "
                      "interval: PT5M}]\n")
    taken = tmp_path / "taken.yaml"
    taken.write_text("source: {path: /data/x}\n"
                     "index: {kind: covering, name: taken, indexedColumns: [k]}\n")
    (system / "taken" / "_log").mkdir(parents=True)
    (system / "taken" / "_log" / "0.json").write_text(json.dumps({
        "id": 0, "name": "taken", "kind": "covering", "state": "ACTIVE", "config": {},
        "source": {}, "content": {}, "properties": {}, "timestamp": 0}))
    names = {"SPEC": str(spec), "TAKEN": str(taken), "SYSTEM": str(system), "RULES": str(rules),
             "CONFIG": str(config), "MISSING": str(tmp_path / "missing")}
    code, out, err = no_java(*[names.get(a, a) for a in args])
    assert code == 1, (out, err)
    for placeholder, name in names.items():
        message = message.replace(placeholder, name)
    assert message in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "missing").exists()


def test_the_system_path_comes_from_flag_environment_config_session_defaults(tmp_path,
                                                                              monkeypatch):
    monkeypatch.chdir(tmp_path)
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    env = {"SPARK_CONF_DIR": str(conf_dir)}
    default = sp.resolve(None, None, None, env)
    assert default == sp.SystemPath(f"file:{tmp_path}/spark-warehouse/indexes",
                                    "the default, <spark.sql.warehouse.dir>/indexes")
    (conf_dir / "spark-defaults.conf").write_text(
        "# comment\nspark.sql.warehouse.dir   /data/warehouse\n")
    assert sp.resolve(None, None, None, env).path == "file:/data/warehouse/indexes"
    (conf_dir / "spark-defaults.conf").write_text(f"{SYSTEM_PATH}=s3a://lake/_ix\n")
    found = sp.resolve(None, None, None, env)
    assert found.path == "s3a://lake/_ix" and not found.local
    assert str(conf_dir / "spark-defaults.conf") in found.origin
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "spark-defaults.conf").write_text(f"{SYSTEM_PATH} /from/home\n")
    assert sp.resolve(None, None, None, {"SPARK_HOME": str(home)}).path == "/from/home"

    class Session:   # an active session's own setting wins over spark-defaults.conf
        class conf:
            @staticmethod
            def get(key, default=None):
                return "/from/session" if key == SYSTEM_PATH else default
    assert sp.resolve(None, None, Session, env).path == "/from/session"
    config = tmp_path / "accelerator.yaml"
    config.write_text("version: 1\nsystemPath: /from/config\n"
                      "jobs:\n  - {name: e, kind: evict, interval: PT5M}\n")
    assert sp.config_file(None, {}) == "accelerator.yaml"   # found in the current directory
    assert sp.config_file(None, {"ACCELERATOR_CONFIG": "/x.yaml"}) == "/x.yaml"
    assert sp.resolve(None, sp.config_file(None, {}), Session, env).path == "/from/config"
    env["ACCELERATOR_SYSTEM_PATH"] = "/from/env"
    assert sp.resolve(None, "accelerator.yaml", Session, env).path == "/from/env"
    assert sp.resolve("/from/flag", "accelerator.yaml", Session, env) == sp.SystemPath(
        "/from/flag", "--system-path")


def test_a_read_creates_nothing(tmp_path, no_java):
    cwd, conf = tmp_path / "cwd", tmp_path / "conf"
    cwd.mkdir()
    conf.mkdir()
    code, out, err = no_java("indexes", cwd=cwd, env={"SPARK_CONF_DIR": str(conf)})
    assert code == 1
    assert f"system path file:{cwd}/spark-warehouse/indexes does not exist" in err
    assert list(cwd.iterdir()) == []
    (conf / "spark-defaults.conf").write_text(f"{SYSTEM_PATH} {tmp_path / 'ix'}\n")
    (tmp_path / "ix").mkdir()
    for verb in ("indexes", "events", "history"):
        code, out, err = no_java(verb, cwd=cwd, env={"SPARK_CONF_DIR": str(conf)})
        assert code == 0, err
    assert list((tmp_path / "ix").iterdir()) == [] and list(cwd.iterdir()) == []


def test_init_writes_a_starter_configuration_and_keeps_existing_files(tmp_path, no_java):
    target = tmp_path / "conf"
    code, out, err = no_java("init", str(target), "--system-path", str(tmp_path / "ix"))
    assert code == 0, err
    assert sorted(p.name for p in target.iterdir()) == sorted(FILES)
    config = load_config_file(target / "accelerator.yaml")   # valid as written
    assert config.system_path == str(tmp_path / "ix")
    assert dict(config.spark_conf)["spark.scheduler.allocation.file"] == str(
        (target / "fairscheduler.xml").resolve())
    assert "accelerator config validate" in out
    code, out, err = no_java("rules", "validate", str(target / "rules.yaml"))
    assert code == 0, err
    # the commands in that directory find its accelerator.yaml (and its system path)
    (tmp_path / "ix").mkdir()
    code, out, err = no_java("indexes", "--json", cwd=target)
    assert (code, out) == (0, ""), err
    code, out, err = no_java("jobs", cwd=target)
    # the example's jobs and rules over /lake sources are there commented out, the others run
    assert code == 0 and "advise" in out and "morning-report" not in out, err
    assert "#   - name: morning-report" in (target / "accelerator.yaml").read_text()
    assert not config.rules.rules

    (target / "rules.yaml").write_text("mine\n")
    code, out, err = no_java("init", str(target))
    assert code == 1 and "already exist" in err and "--force" in err
    assert (target / "rules.yaml").read_text() == "mine\n"
    code, out, err = no_java("init", str(target), "--force")
    assert code == 0, err
    assert (target / "rules.yaml").read_text() != "mine\n"


def test_local_fs_reads_globs_and_lists_as_hadoop_does(spark, tmp_path):
    import inspect

    from indexes.fs import FileSystem
    for name in ("qualify", "exists", "list", "list_each", "read_bytes", "read_text"):
        assert (inspect.signature(getattr(LocalFs, name)).parameters.keys()
                == inspect.signature(getattr(FileSystem, name)).parameters.keys()), name
    assert not hasattr(LocalFs, "write_text") and not hasattr(LocalFs, "mkdirs")   # reads only
    for d in ("a/x=1", "a/x=2", "b/x=1", "_tmp", ".hidden", "c{d}"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "a" / "x=1" / "f.parquet").write_bytes(b"12345")
    hadoop, local = HadoopFs(spark), LocalFs()
    for pattern in ("*/x=1", "{a,b}/x=?", "[ab]/x=[^2]", "a/*", "c\\{d\\}", "nope/*", "a",
                    "*"):
        full = f"{tmp_path}/{pattern}"
        assert local.glob(full) == sorted(hadoop.glob(full)), pattern
    assert local.qualify(str(tmp_path)) == hadoop.qualify(str(tmp_path))
    assert local.qualify("relative") == hadoop.qualify("relative")
    assert local.list(str(tmp_path / "a" / "x=1")) == hadoop.list(str(tmp_path / "a" / "x=1"))


def test_rows_print_as_spark_shows_them(spark, capsys):
    from datetime import datetime

    ddl = ("s string, n long, d double, a array<string>, t timestamp, "
           "st struct<files:long, levels:array<int>>, m map<string,string>")
    rows = [("line\none", 1, 0.25, ["x", None], datetime(2026, 1, 2, 3, 4, 5, 120000),
             (3, [0, 1]), {"k": "v"}),
            (None, None, 1e-05, [], None, None, None),
            ("x", 12345678901, 123456789.5, None, datetime(2026, 1, 2), (None, []), {})]
    frame = local_frame(spark, rows, ddl)
    for vertical in (False, True):
        frame.show(len(rows), truncate=False, vertical=vertical)
        assert table.show(rows, ddl, vertical) + "\n" == capsys.readouterr().out
    from pyspark.sql import functions as F
    expected = "".join(r[0] + "\n" for r in frame.select(F.to_json(F.struct("*"))).collect())
    assert table.json_lines(rows, ddl) == expected
    assert [table.java_double(x) for x in (1.0, 0.001, 1e-4, 1e7, -2.5e-10, 1234.5)] == [
        "1.0", "0.001", "1.0E-4", "1.0E7", "-2.5E-10", "1234.5"]


DATASKETCHES_SCRIPT = """
from pyspark.sql import functions as F
from accelerator.commands.cli import parser
from accelerator.commands.session import spark_session
args = parser().parse_args(["indexes", "--master", "local[1]"])
with spark_session(args, "quiet", None) as spark:
    sketched = spark.range(100).select(F.hll_sketch_estimate(F.hll_sketch_agg("id")))
    print("ESTIMATE", sketched.first()[0])
"""


def test_sessions_the_command_line_starts_print_no_datasketches_warning(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [REPO, os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([sys.executable, "-c", DATASKETCHES_SCRIPT], capture_output=True,
                         text=True, timeout=600, cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "ESTIMATE 100" in run.stdout
    assert "restricted mode" not in run.stderr + run.stdout
