"""The ``accelerator`` command line: every verb in process on the shared session (exit codes,
output, what it did to the indexes), spec files, and real runs of the installed command
(``--version``, a usage error, a missing system path, ``demo``, ``jar``)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from accelerator import Hyperspace
from accelerator.commands.cli import main
from accelerator.runtime.settings import ENABLED, SYSTEM_PATH
from tests.helpers import own_copy, using_system_path

REPO = str(Path(__file__).resolve().parent.parent)
COMMAND = str(Path(sys.executable).parent / "accelerator")   # the installed console script


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accelerator.commands.cli", *args],
                          capture_output=True, text=True, timeout=600, cwd=REPO)


def cli(capsys, *args: str) -> tuple[int, str, str]:
    """Runs ``main(args)`` in this process: (exit code, stdout, stderr)."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def json_rows(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def sql(path: str, where: str) -> str:
    return f"SELECT id FROM parquet.`{path}` WHERE {where}"


@pytest.fixture(scope="module")
def written(spark, tmp_path_factory):
    """The source, written once for the module (each test gets a copy: ``source``)."""
    base = tmp_path_factory.mktemp("written")
    (spark.range(200, numPartitions=4)
        .selectExpr("id", "id % 7 AS k", "concat('message ', id) AS msg")
        .write.parquet(str(base / "source")))
    return base


@pytest.fixture
def source(written, tmp_path):
    """A Parquet source of 200 rows in 4 files (ids 0-49, 50-99, ... one range per file)."""
    (path,) = own_copy(written, tmp_path, "source")
    return path


def write_spec(tmp_path, text: str, name: str = "spec.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def covering_spec(tmp_path, source: str) -> str:
    return write_spec(tmp_path, f"""
source:
  path: {source}
  format: parquet
index:
  kind: covering
  name: idx_k
  indexedColumns: [k]
  includedColumns: [id]
  numBuckets: 2
""")


def verdicts(capsys, system_path: str, query: str, *args: str) -> list[tuple[str, str]]:
    code, out, err = cli(capsys, "whynot", query, "--system-path", system_path, "--json", *args)
    assert code == 0, err
    return [(r["index"], r["code"]) for r in json_rows(out)]


def index_row(capsys, system_path: str, name: str) -> dict:
    code, out, err = cli(capsys, "index", name, "--system-path", system_path, "--json")
    assert code == 0, err
    [row] = json_rows(out)
    return row


def test_covering_index_through_every_verb(spark, tmp_path, capsys, source):
    system_path = str(tmp_path / "indexes")
    before = {key: spark.conf.get(key, None) for key in (SYSTEM_PATH, ENABLED)}
    lookup = sql(source, "k = 3")

    code, out, err = cli(capsys, "create", covering_spec(tmp_path, source),
                         "--system-path", system_path)
    assert code == 0, err
    code, out, err = cli(capsys, "indexes", "--system-path", system_path)
    assert code == 0, err
    assert "|name" in out and "idx_k" in out and "ACTIVE" in out   # a table
    code, out, err = cli(capsys, "indexes", "--system-path", system_path, "--json")
    [row] = json_rows(out)
    assert (row["name"], row["state"], row["numBuckets"]) == ("idx_k", "ACTIVE", 2)
    # the session is the shared one, still running, with its settings as they were
    assert SparkSession.getActiveSession() is spark
    assert {key: spark.conf.get(key, None) for key in (SYSTEM_PATH, ENABLED)} == before

    assert verdicts(capsys, system_path, lookup) == [("idx_k", "APPLIED")]
    code, out, err = cli(capsys, "whynot", lookup, "--system-path", system_path)
    assert code == 0, err
    assert "idx_k [APPLIED]" in out
    assert verdicts(capsys, system_path, sql(source, "id = 3")) == [
        ("idx_k", "NO_FIRST_INDEXED_COLUMN_IN_FILTER")]
    code, out, err = cli(capsys, "explain", lookup, "--system-path", system_path)
    assert code == 0, err
    assert "idx_k" in out.split("Indexes used:")[1]
    code, out, err = cli(capsys, "explain", lookup, "--system-path", system_path, "--json")
    assert code == 0, err
    [plan] = json_rows(out)
    assert "idx_k" in plan["explain"].split("Indexes used:")[1]
    assert {key: spark.conf.get(key, None) for key in (SYSTEM_PATH, ENABLED)} == before

    (spark.range(200, 240, numPartitions=1)
        .selectExpr("id", "id % 7 AS k", "concat('message ', id) AS msg")
        .write.mode("append").parquet(source))
    assert verdicts(capsys, system_path, lookup) == [("idx_k", "APPLIED")]   # hybrid scan
    code, out, err = cli(capsys, "indexes", "--system-path", system_path, "--json")
    [row] = json_rows(out)
    assert row["warning"] == ("its source changed since the index was built: 1 appended file; "
                              "refreshIndex('idx_k', mode='incremental') brings it up to date")
    code, _, err = cli(capsys, "refresh", "idx_k", "--mode", "incremental",
                       "--system-path", system_path)
    assert code == 0, err
    assert index_row(capsys, system_path, "idx_k")["dataVersion"] == 1
    code, _, err = cli(capsys, "optimize", "idx_k", "--mode", "full", "--system-path", system_path)
    assert code == 0, err
    assert index_row(capsys, system_path, "idx_k")["dataVersion"] == 2

    code, out, err = cli(capsys, "events", "--system-path", system_path, "--json")
    assert code == 0, err
    assert [(e["operation"], e["status"]) for e in json_rows(out)][:3] == [
        ("create", "succeeded"), ("refresh", "succeeded"), ("optimize", "succeeded")]

    code, _, err = cli(capsys, "vacuum", "idx_k", "--retention-seconds", "0",
                       "--system-path", system_path)
    assert code == 0, err
    versions = sorted(p.name for p in (Path(system_path) / "idx_k").glob("v__=*"))
    assert versions == ["v__=2"]   # the versions optimize replaced are gone
    assert verdicts(capsys, system_path, lookup) == [("idx_k", "APPLIED")]

    code, _, err = cli(capsys, "delete", "idx_k", "--system-path", system_path)
    assert code == 0, err
    assert index_row(capsys, system_path, "idx_k")["state"] == "DELETED"
    assert verdicts(capsys, system_path, lookup) == [("idx_k", "NOT_ACTIVE")]
    code, _, err = cli(capsys, "restore", "idx_k", "--system-path", system_path)
    assert code == 0, err
    assert index_row(capsys, system_path, "idx_k")["state"] == "ACTIVE"
    assert verdicts(capsys, system_path, lookup, "--index", "idx_k") == [("idx_k", "APPLIED")]

    code, _, err = cli(capsys, "cancel", "idx_k", "--system-path", system_path)
    assert code == 1 and "nothing to cancel" in err   # no operation is in progress

    code, _, err = cli(capsys, "delete", "idx_k", "--system-path", system_path)
    assert code == 0, err
    code, _, err = cli(capsys, "vacuum", "idx_k", "--system-path", system_path)
    assert code == 0, err
    code, out, err = cli(capsys, "indexes", "--system-path", system_path, "--json")
    assert code == 0 and json_rows(out) == []
    code, _, err = cli(capsys, "index", "idx_k", "--system-path", system_path)
    assert code == 1 and "no index named 'idx_k'" in err
    assert {key: spark.conf.get(key, None) for key in (SYSTEM_PATH, ENABLED)} == before

    # queries that ran (explain and whynot only plan them) are in the history
    with using_system_path(spark, system_path):
        Hyperspace.enable(spark)
        spark.sql(lookup).collect()
        Hyperspace.disable(spark)
        Hyperspace.flushHistory(spark)
        code, out, err = cli(capsys, "history", "--json")   # the session's system path
    assert code == 0, err
    [record] = json_rows(out)
    assert record["filter_columns"] == ["k"] and record["indexes_applied"] == []   # vacuumed
    assert [source in s for s in record["sources"]] == [True]


def test_operations_print_their_summary(spark, tmp_path, capsys, source):
    system_path = str(tmp_path / "indexes")
    code, out, err = cli(capsys, "create", covering_spec(tmp_path, source),
                         "--system-path", system_path, "--json")
    assert code == 0, err
    [summary] = json_rows(out)
    assert (summary["index"], summary["operation"], summary["status"]) == (
        "idx_k", "create", "succeeded")
    code, out, err = cli(capsys, "delete", "idx_k", "--system-path", system_path)
    assert code == 0, err
    assert "|index" in out and "delete" in out


def test_cancel_rolls_back_what_a_dead_process_left(spark, tmp_path, capsys, source):
    from indexes.fs import HadoopFs
    from indexes.lifecycle import IndexLifecycle
    from indexes.log import IndexState

    system_path = str(tmp_path / "indexes")
    code, _, err = cli(capsys, "create", covering_spec(tmp_path, source),
                       "--system-path", system_path)
    assert code == 0, err
    lifecycle = IndexLifecycle(HadoopFs(spark), system_path)
    entry = lifecycle.get("idx_k")
    # a process that died mid-refresh leaves the transient state behind
    assert lifecycle.log_manager("idx_k").write(entry.derive(entry.id + 1, IndexState.REFRESHING))
    assert index_row(capsys, system_path, "idx_k")["state"] == "REFRESHING"
    code, out, err = cli(capsys, "cancel", "idx_k", "--system-path", system_path, "--json")
    assert code == 0, err
    [summary] = json_rows(out)
    assert (summary["operation"], summary["status"]) == ("cancel", "succeeded")
    assert index_row(capsys, system_path, "idx_k")["state"] == "ACTIVE"


def test_skipping_index_from_a_json_spec(spark, tmp_path, capsys, source):
    system_path = str(tmp_path / "indexes")
    spec = write_spec(tmp_path, json.dumps({
        "source": {"paths": [source]},
        "index": {"kind": "skipping", "name": "ds_ids", "sketches": [
            {"kind": "MinMax", "expression": "id"},
            {"kind": "bloomfilter", "expression": "msg", "fpp": 0.05,
             "expectedDistinctCountPerFile": 1000}]}}), "spec.json")
    code, _, err = cli(capsys, "create", spec, "--system-path", system_path)
    assert code == 0, err
    row = index_row(capsys, system_path, "ds_ids")
    assert row["kind"] == "DataSkippingIndex"
    assert row["indexedColumns"] == ["MinMax(id)", "BloomFilter(msg)"]
    assert verdicts(capsys, system_path, sql(source, "id = 70")) == [("ds_ids", "APPLIED")]
    assert verdicts(capsys, system_path, sql(source, "msg = 'message 70'")) == [
        ("ds_ids", "APPLIED")]
    assert verdicts(capsys, system_path, sql(source, "k = 3")) == [("ds_ids", "NO_FILE_SKIPPED")]


def test_text_index_and_read_options_and_schema(spark, tmp_path, capsys):
    system_path = str(tmp_path / "indexes")
    csv = str(tmp_path / "csv")
    (spark.range(100, numPartitions=2).selectExpr("id", "concat('line ', id, ' ok') AS msg")
        .write.option("header", "true").csv(csv))
    # the schema renames the columns, the header line is skipped
    spec = write_spec(tmp_path, f"""
source:
  path: {csv}
  format: csv
  options: {{header: true}}
  schema: "ident INT, text STRING"
index: {{kind: text, name: txt_text, column: text}}
""")
    code, _, err = cli(capsys, "create", spec, "--system-path", system_path)
    assert code == 0, err
    row = index_row(capsys, system_path, "txt_text")
    assert (row["kind"], row["sourceFormat"], row["indexedColumns"]) == (
        "TextIndex", "csv", ["text"])
    assert row["numRows"] == 100   # no header line indexed

    json_source = str(tmp_path / "json")
    spark.range(100, numPartitions=2).selectExpr("id", "concat('line ', id) AS msg").write.json(
        json_source)
    spec = write_spec(tmp_path, f"""
source: {{path: {json_source}, format: json}}
index: {{kind: text, name: txt_msg, column: msg, scoring: true}}
""", "text.yaml")
    code, _, err = cli(capsys, "create", spec, "--system-path", system_path)
    assert code == 0, err
    query = f"SELECT id FROM json.`{json_source}` WHERE msg LIKE '%line 42%'"
    assert ("txt_msg", "APPLIED") in verdicts(capsys, system_path, query)


BAD_SPECS = {
    "source: [": "cannot read spec file",
    "- just a list": "must be a mapping",
    "source: {path: SOURCE}\nindex: {kind: covering, name: i, indexedColumns: [k]}\nextra: 1":
        "unknown keys extra",
    "source: {path: SOURCE}": "lacks index",
    "source: {path: SOURCE, paths: [SOURCE]}\nindex: {kind: covering, name: i, indexedColumns: [k]}":
        "exactly one of path",
    "source: {path: SOURCE, colour: red}\nindex: {kind: covering, name: i, indexedColumns: [k]}":
        "unknown keys colour",
    "source: {path: SOURCE}\nindex: {kind: btree, name: i}": "kind must be one of covering",
    "source: {path: SOURCE}\nindex: {kind: text, name: i, column: m, scoring: maybe}":
        "scoring must be True or False, not 'maybe'",
    "source: {path: SOURCE}\nindex: {kind: covering, name: i}": "lacks indexedColumns",
    "source: {path: SOURCE}\nindex: {kind: covering, name: i, indexColumns: [k]}":
        "unknown keys indexColumns",
    "source: {path: SOURCE}\nindex: {kind: skipping, name: i, sketches: {kind: MinMax}}":
        "sketches must be a list",
    "source: {path: SOURCE}\nindex: {kind: skipping, name: i, sketches: [{kind: Max, expression: k}]}":
        "sketches[0]: kind must be one of MinMax",
    "source: {path: SOURCE}\nindex: {kind: skipping, name: i, sketches: [{kind: MinMax, expression: k, fpp: 1}]}":
        "unknown keys fpp",
    "source: {path: SOURCE}\nindex: {kind: covering, name: i, indexedColumns: [kk]}":
        "column 'kk' does not exist",   # the API's own validation
    "source: {path: SOURCE/missing}\nindex: {kind: covering, name: i, indexedColumns: [k]}":
        "PATH_NOT_FOUND",               # Spark's AnalysisException
}


@pytest.mark.parametrize("text", BAD_SPECS)
def test_bad_spec_files_are_user_errors(spark, tmp_path, capsys, source, text):
    system_path = str(tmp_path / "indexes")
    spec = write_spec(tmp_path, text.replace("SOURCE", source))
    code, out, err = cli(capsys, "create", spec, "--system-path", system_path)
    assert code == 1
    assert BAD_SPECS[text] in err and err.startswith("accelerator create: error:")
    assert out == ""


def test_missing_spec_file_is_a_user_error(tmp_path, capsys, spark):
    code, _, err = cli(capsys, "create", str(tmp_path / "nope.yaml"),
                       "--system-path", str(tmp_path / "indexes"))
    assert code == 1 and "cannot read spec file" in err and "nope.yaml" in err


@pytest.mark.parametrize("args", [
    ["indexes"], ["index", "i"], ["events"], ["history"], ["refresh", "i"], ["optimize", "i"],
    ["delete", "i"], ["restore", "i"], ["vacuum", "i"], ["cancel", "i"],
    ["explain", "SELECT 1"], ["whynot", "SELECT 1"],
])
def test_a_missing_system_path_is_reported_not_listed(spark, tmp_path, capsys, args):
    missing = str(tmp_path / "no-such-dir")
    code, out, err = cli(capsys, *args, "--system-path", missing)
    assert code == 1
    assert "does not exist" in err and "no-such-dir" in err
    assert out == ""
    assert not Path(missing).exists()


def test_user_errors_of_the_api_and_of_spark(spark, tmp_path, capsys, source):
    system_path = str(tmp_path / "indexes")
    code, _, err = cli(capsys, "create", covering_spec(tmp_path, source),
                       "--system-path", system_path)
    assert code == 0, err
    for args, message in [
        (["refresh", "nope"], "no index named 'nope'"),
        (["optimize", "nope"], "no index named 'nope'"),
        (["vacuum", "idx_k", "--retention-seconds", "-1"], "retention"),
        (["whynot", sql(source, "k = 1"), "--index", "nope"], "no index named 'nope'"),
        (["explain", f"SELECT nope FROM parquet.`{source}`"], "UNRESOLVED_COLUMN"),
        (["whynot", "SELEC id"], "PARSE_SYNTAX_ERROR"),
    ]:
        code, out, err = cli(capsys, *args, "--system-path", system_path)
        assert code == 1, args
        assert message in err and "Traceback" not in err, (args, err)
    assert verdicts(capsys, system_path, sql(source, "k = 1")) == [("idx_k", "APPLIED")]


def test_the_system_path_can_come_from_the_environment(spark, tmp_path, capsys, monkeypatch):
    missing = str(tmp_path / "from-env")
    monkeypatch.setenv("ACCELERATOR_SYSTEM_PATH", missing)
    code, out, err = cli(capsys, "indexes")
    assert code == 1 and f"system path {missing} does not exist" in err
    given = str(tmp_path / "given")
    code, out, err = cli(capsys, "indexes", "--system-path", given)   # the flag wins
    assert code == 1 and f"system path {given} does not exist" in err


@pytest.mark.parametrize("args", [
    ["bogus"], ["refresh"], ["vacuum", "i", "--retention-seconds", "soon"], ["indexes", "--jsn"],
    ["refresh", "i", "--mode", "sideways"], ["optimize", "i", "--mode", "incremental"],
])
def test_usage_errors_exit_2(capsys, args):
    with pytest.raises(SystemExit) as exit_:
        main(args)
    assert exit_.value.code == 2
    assert "usage: accelerator" in capsys.readouterr().err


def test_modes_are_checked_and_listed_by_the_parser(capsys):
    with pytest.raises(SystemExit):
        main(["refresh", "i", "--mode", "sideways"])
    assert ("argument --mode: invalid choice: 'sideways' (choose from full, incremental, quick)"
            in capsys.readouterr().err.replace("'full', 'incremental', 'quick'",
                                               "full, incremental, quick"))
    with pytest.raises(SystemExit):
        main(["optimize", "--help"])
    assert "--mode {quick,full}" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["demo", "jar", "serve", "jobs", "run-job", "rules",
                                     "config", "indexes", "refresh"])
def test_help_pages_describe_their_command(capsys, command):
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    usage, description = capsys.readouterr().out.split("\n\n")[:2]
    assert usage.startswith(f"usage: accelerator {command}")
    assert not description.startswith(("options:", "positional arguments:")), description


BARE_COMMAND_SCRIPT = """
import os, sys
from pyspark import SparkContext
from accelerator.commands.cli import main
code = main([])
print("RC", code, "JVM", SparkContext._gateway is not None, "FILES", sorted(os.listdir(".")))
"""


def test_bare_command_prints_the_help_and_starts_nothing(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([sys.executable, "-c", BARE_COMMAND_SCRIPT], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.startswith("usage: accelerator")
    assert "demo" in run.stdout and "indexes" in run.stdout   # the commands are listed
    assert run.stdout.rstrip().endswith("RC 0 JVM False FILES []")   # no demo, no Spark
    assert run.stderr == ""


BAD_SPEC_SCRIPT = """
import sys
from pyspark import SparkContext
from accelerator.commands.cli import main
code = main(["create", sys.argv[1], "--system-path", sys.argv[2]])
print("RC", code, "JVM", SparkContext._gateway is not None)
"""


def test_a_bad_spec_file_is_reported_before_spark_starts(tmp_path):
    spec = write_spec(tmp_path, "source: {path: /data/x, fromat: json}\n"
                                "index: {kind: covering, name: i, indexedColumns: [k]}\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([sys.executable, "-c", BAD_SPEC_SCRIPT, spec, str(tmp_path / "ix")],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert run.stdout.strip() == "RC 1 JVM False", run.stderr[-3000:]
    assert run.stderr.strip() == (f"accelerator create: error: spec file {spec}: source has "
                                  "unknown keys fromat; known: format, options, path, paths, "
                                  "schema")


def test_a_read_leaves_no_spark_warehouse_behind(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    data, system_path, cwd = tmp_path / "data", tmp_path / "indexes", tmp_path / "cwd"
    for d in (data, system_path, cwd):
        d.mkdir()
    pq.write_table(pa.table({"id": [1, 2, 3]}), data / "part-0.parquet")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([sys.executable, "-m", "accelerator.commands.cli", "whynot",
                          sql(str(data), "id = 2"), "--system-path", str(system_path)],
                         capture_output=True, text=True, timeout=600, cwd=cwd, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert list(cwd.iterdir()) == []   # Spark's catalog made ./spark-warehouse for the SQL


def test_installed_command_version_usage_and_missing_system_path(tmp_path):
    version = subprocess.run([COMMAND, "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"accelerator {metadata.version('spark-accelerator')}"

    usage = subprocess.run([COMMAND, "refresh"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2
    assert "the following arguments are required: name" in usage.stderr

    missing = str(tmp_path / "no-such-dir")
    listing = subprocess.run([COMMAND, "indexes", "--system-path", missing],
                             capture_output=True, text=True, timeout=600)
    assert listing.returncode == 1
    assert f"accelerator indexes: error: system path {missing} does not exist" in listing.stderr
    assert "Traceback" not in listing.stderr and listing.stdout == ""


def test_demo_then_list_indexes(tmp_path):
    work = str(tmp_path / "demo")
    demo = run_cli("demo", "--covering", "--work-dir", work, "--rows", "20000", "--files", "4",
                   "--runs", "1")
    assert demo.returncode == 0, demo.stderr[-3000:]
    out = demo.stdout
    assert "results identical: True" in out
    assert "rows: 0 " not in out
    assert "created index idx_nested (1 bucket(s) for" in out   # fitted to the small sample
    used = out.split("Indexes used:")[1]
    assert "idx_nested: file:" in used
    with_plan = out.split("Plan with indexes:")[1].split("Plan without indexes:")[0]
    assert "nested__nst__field1" in with_plan and "idx_nested/v__=0" in with_plan
    vanilla = out.split("vanilla Spark read 4 file(s):")[1].split("with the index read")[0]
    assert "/nested/part-" in vanilla and "idx_nested" not in vanilla
    accelerated = out.split("with the index read 1 file(s):")[1].split("rows:")[0]
    assert "/indexes/idx_nested/v__=0/" in accelerated and "/nested/part-" not in accelerated

    listing = run_cli("indexes", "--system-path", f"{work}/indexes")
    assert listing.returncode == 0, listing.stderr[-3000:]
    assert "idx_nested" in listing.stdout and "ACTIVE" in listing.stdout
    assert "|numBuckets" in listing.stdout


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


@pytest.mark.compat
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
