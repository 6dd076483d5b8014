"""optimizeIndex compacts a covering index's data files per bucket (level-wise in quick mode,
every bucket in full mode) and keeps results; refreshes and optimizations write events
readable through hs.events(); vacuumIndex on an ACTIVE index removes unreferenced versions
replaced longer ago than its retention; a query running during a refresh reads one version,
never a mix."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from accelerator import IndexConfig, InvalidIndexConfigError
from tests.helpers import own_copy, rows, session_conf, vanilla
from tests.test_hybrid_scan import SCHEMA, append, data, split_files

REPO = str(Path(__file__).resolve().parent.parent)


@pytest.fixture(scope="module")
def written(spark, tmp_path_factory):
    """The source, written once for the module (each test gets a copy: ``source``)."""
    base = tmp_path_factory.mktemp("written")
    spark.createDataFrame(data(range(600)), SCHEMA).repartition(3).write.parquet(str(base / "src"))
    return base


@pytest.fixture
def source(written, tmp_path):
    (path,) = own_copy(written, tmp_path, "src")
    return path


def index_files(hs, name="ix"):
    """The data files the index's current version reads, relative to its directory."""
    return sorted(f[0] for f in hs.context.lifecycle().get(name).content["files"])


def query(spark, path):
    return spark.read.parquet(path).filter("id % 7 = 3").select("id", "payload.size")


def assert_query(spark, path):
    df = query(spark, path)
    assert rows(df) == vanilla(spark, lambda: query(spark, path))
    return df


def create(spark, hs, path, buckets):
    hs.createIndex(spark.read.parquet(path),
                   IndexConfig("ix", ["id"], ["payload.size"], numBuckets=buckets))


@pytest.mark.compat
def test_quick_optimize_compacts_level_groups_and_converges(spark, hs, source):
    create(spark, hs, source, 2)
    for start in (1000, 3000):
        append(spark, source, range(start, start + 1000))
        hs.refreshIndex("ix", mode="incremental")
    # per bucket one ~300-row file (level 2); each refresh added one 1000-row delta file
    files = index_files(hs)
    assert len(files) == 4 and sum("/delta-" in n for n in files) == 2
    hs.optimizeIndex("ix")      # the deltas, ~1000 rows per bucket, folded with the level-2 files
    entry = hs.context.lifecycle().get("ix")
    assert entry.content["dataVersion"] == 3 and len(index_files(hs)) == 2
    assert entry.content["numRows"] == 2600 and entry.content["numFiles"] == 2
    df = assert_query(spark, source)
    assert len(split_files(df, "ix")[0]) == 2
    hs.optimizeIndex("ix")                    # nothing qualifies now: a no-op
    assert hs.context.lifecycle().get("ix").content["dataVersion"] == 3

    events = hs.events().collect()
    assert [(e["operation"], e["mode"], e["dataVersion"]) for e in events] == [
        ("create", "full", 0), ("refresh", "incremental", 1), ("refresh", "incremental", 2),
        ("optimize", "quick", 3)]
    optimize = events[-1]
    assert optimize["input"]["files"] == 4 and optimize["output"]["files"] == 2
    assert optimize["input"]["rows"] == optimize["output"]["rows"] == 2600
    assert optimize["input"]["levels"] == [2, 2, 3, 3] and optimize["output"]["levels"] == [3, 3]
    assert events[1]["input"]["rows"] == 600 and events[1]["output"]["rows"] == 1600
    assert all(e["finished"] >= e["started"] for e in events)
    assert os.listdir(os.path.join(hs.context.settings().system_path, "_events"))


def test_quick_optimize_folds_delta_files_oldest_first_within_its_byte_budget(spark, hs, source):
    create(spark, hs, source, 2)
    for start in (1000, 3000):
        append(spark, source, range(start, start + 1000))
        hs.refreshIndex("ix", mode="incremental")
    with session_conf(spark, spark__accelerator__index__optimize__bytesPerIteration="1"):
        hs.optimizeIndex("ix")       # the first refresh's delta file only
        files = index_files(hs)
        assert [n for n in files if "/delta-" in n] and len(files) == 3
        df = assert_query(spark, source)
        assert len(split_files(df, "ix")[0]) == 3
        hs.optimizeIndex("ix")       # then the second one's
    assert not [n for n in index_files(hs) if "/delta-" in n]
    assert hs.context.lifecycle().get("ix").content["numRows"] == 2600
    assert_query(spark, source)
    events = hs.events().collect()
    assert [e["input"]["rows"] for e in events if e["operation"] == "optimize"] == [
        600 + 1000, 1600 + 1000]


@pytest.mark.compat
def test_full_optimize_compacts_every_bucket(spark, hs, source):
    create(spark, hs, source, 4)
    append(spark, source, range(1000, 1040))
    hs.refreshIndex("ix", mode="incremental")
    assert len(index_files(hs)) == 5           # 4 buckets' files and one delta file
    # quick: the delta's ~10 rows per bucket are a level below the 150-row files; folding
    # them in would write up to 4 files to replace one: it waits
    hs.optimizeIndex("ix", mode="quick")
    files = index_files(hs)
    assert len(files) == 5 and sum("/delta-" in n for n in files) == 1
    df = assert_query(spark, source)
    assert len(split_files(df, "ix")[0]) == 5
    hs.optimizeIndex("ix", mode="full")
    assert len(index_files(hs)) == 4
    df = assert_query(spark, source)
    assert len(split_files(df, "ix")[0]) == 4


def test_quick_optimize_never_leaves_more_files_than_it_found(spark, hs, tmp_path):
    path = str(tmp_path / "src")
    spark.createDataFrame(data(range(8000)), SCHEMA).repartition(4).write.parquet(path)
    create(spark, hs, path, 8)                  # 8 buckets of ~1000 rows
    append(spark, path, range(10_000, 10_080))
    hs.refreshIndex("ix", mode="incremental")
    assert len(index_files(hs)) == 9            # and one delta file of 80 rows
    # the delta's ~10 rows per bucket would make 8 files next to the 8 kept: it waits
    hs.optimizeIndex("ix", mode="quick")
    assert len(index_files(hs)) == 9 and hs.context.lifecycle().get("ix").content["dataVersion"] == 1
    assert_query(spark, path)
    append(spark, path, range(20_000, 28_000))
    hs.refreshIndex("ix", mode="incremental")
    assert len(index_files(hs)) == 10
    # now each bucket's share of the delta rows reaches its files' level: all folded in
    hs.optimizeIndex("ix", mode="quick")
    files = index_files(hs)
    assert len(files) == 8 and not any("/delta-" in n for n in files)
    df = assert_query(spark, path)
    assert split_files(df, "ix")[0] and not split_files(df, "ix")[1]
    assert hs.context.lifecycle().get("ix").content["dataVersion"] == 3


def test_failed_operations_roll_back_and_are_events_too(spark, hs, source, monkeypatch):
    import indexes.covering.kind as covering_kind
    from accelerator import IndexOperationError

    def crash(*args, **kwargs):
        raise RuntimeError("executor lost")

    monkeypatch.setattr(covering_kind, "write_buckets", crash)
    with pytest.raises(IndexOperationError, match="'ix'.*RuntimeError: executor lost"):
        create(spark, hs, source, 2)
    monkeypatch.undo()
    create(spark, hs, source, 2)
    append(spark, source, range(1000, 1040))
    monkeypatch.setattr(covering_kind, "write_delta", crash)
    with pytest.raises(IndexOperationError, match="'ix'.*RuntimeError: executor lost"):
        hs.refreshIndex("ix", mode="incremental")
    entry = hs.context.lifecycle().get("ix")    # rolled back: the version it started from
    assert entry.state.name == "ACTIVE" and entry.data_version == 0
    monkeypatch.undo()
    hs.refreshIndex("ix", mode="incremental")
    events = hs.events().collect()
    assert [(e["operation"], e["mode"], e["status"], e["dataVersion"]) for e in events] == [
        ("create", "full", "failed", None), ("create", "full", "succeeded", 0),
        ("refresh", "incremental", "failed", None), ("refresh", "incremental", "succeeded", 1)]
    assert [e["error"] for e in events] == [
        "RuntimeError: executor lost", None, "RuntimeError: executor lost", None]
    # a failed refresh read the version it started from and wrote nothing
    assert events[2]["input"] == events[3]["input"] and events[2]["input"]["rows"] == 600
    assert events[2]["output"]["files"] == 0
    # a create's input is the source files it read
    source_files = len(spark.read.parquet(source).inputFiles()) - 1   # before the append
    assert events[0]["input"]["files"] == events[1]["input"]["files"] == source_files
    assert rows(query(spark, source)) == vanilla(spark, lambda: query(spark, source))


def test_an_interrupted_create_rolls_back_and_is_an_event(spark, hs, source, monkeypatch):
    import indexes.covering.kind as covering_kind

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt()

    monkeypatch.setattr(covering_kind, "write_buckets", ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        create(spark, hs, source, 2)
    assert hs.indexes().count() == 0                  # rolled back
    [event] = hs.events().collect()
    assert (event["operation"], event["index"], event["status"], event["error"]) == (
        "create", "ix", "interrupted", "KeyboardInterrupt")


CTRL_C_SCRIPT = """
import sys
from pyspark.sql import SparkSession
import indexes.covering.kind as covering_kind
from accelerator import Hyperspace, IndexConfig

data, system_path = sys.argv[1:3]
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.accelerator.system.path", system_path).getOrCreate())
spark.range(100).selectExpr("id", "id % 5 AS k").write.parquet(data)

def slow_build(*args, **kwargs):   # waits in a py4j call, as a build's write does
    print("BUILDING", flush=True)
    spark.range(0, 10 ** 12, numPartitions=1).where("id % 7 = 8").count()

covering_kind.write_buckets = slow_build
hs = Hyperspace(spark)
try:
    hs.createIndex(spark.read.parquet(data), IndexConfig("ix", ["k"], ["id"]))
except KeyboardInterrupt:
    print("INTERRUPTED", [(e.operation, e.status) for e in hs.events().collect()],
          hs.indexes().count(), flush=True)
"""


def test_ctrl_c_during_a_build_cancels_it_quietly_and_is_an_event(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [REPO, os.environ.get("PYTHONPATH")]))}
    child = subprocess.Popen([sys.executable, "-c", CTRL_C_SCRIPT, str(tmp_path / "data"),
                              str(tmp_path / "indexes")], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    try:
        assert child.stdout.readline().strip() == "BUILDING", child.stderr.read()[-3000:]
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=180)
    finally:
        child.kill()
    assert child.returncode == 0, err[-3000:]
    assert out.strip() == "INTERRUPTED [('create', 'interrupted')] 0"
    assert "Traceback" not in err and "py4j" not in err.lower(), err[-3000:]


def test_optimize_errors(spark, hs, source):
    create(spark, hs, source, 2)
    with pytest.raises(InvalidIndexConfigError, match="'all' is not supported.*quick, full"):
        hs.optimizeIndex("ix", mode="all")
    hs.deleteIndex("ix")
    with pytest.raises(Exception, match="DELETED.*ACTIVE"):
        hs.optimizeIndex("ix")


@pytest.mark.compat
def test_vacuum_of_an_active_index_removes_unreferenced_versions(spark, hs, source):
    create(spark, hs, source, 2)
    append(spark, source, range(1000, 1040))
    hs.refreshIndex("ix", mode="incremental")
    hs.optimizeIndex("ix", mode="full")
    index_dir = os.path.join(hs.context.settings().system_path, "ix")
    assert sorted(d for d in os.listdir(index_dir) if d.startswith("v__")) == \
        ["v__=0", "v__=1", "v__=2"]
    hs.vacuumIndex("ix", retentionSeconds=0)
    assert [d for d in os.listdir(index_dir) if d.startswith("v__")] == ["v__=2"]
    entry = hs.context.lifecycle().get("ix")
    assert entry.state.name == "ACTIVE" and entry.content["dataVersion"] == 2
    df = assert_query(spark, source)
    assert split_files(df, "ix")[0]


def test_vacuum_keeps_versions_replaced_within_the_retention(spark, hs, source):
    create(spark, hs, source, 2)
    planned = query(spark, source)
    planned._jdf.queryExecution().executedPlan()      # planned on v__=0, run after the vacuum
    expected = rows(planned)
    append(spark, source, range(1000, 1040))
    hs.refreshIndex("ix", mode="full")
    index_dir = os.path.join(hs.context.settings().system_path, "ix")
    versions = lambda: sorted(d for d in os.listdir(index_dir) if d.startswith("v__"))  # noqa: E731
    hs.vacuumIndex("ix")                    # v__=0 was replaced just now: within the hour
    assert versions() == ["v__=0", "v__=1"]
    assert rows(planned) == expected
    with pytest.raises(InvalidIndexConfigError, match="retention must be 0 seconds or more"):
        hs.vacuumIndex("ix", retentionSeconds=-1)
    with session_conf(spark, spark__accelerator__index__vacuum__retentionSeconds="0"):
        hs.vacuumIndex("ix")
    assert versions() == ["v__=1"]
    assert_query(spark, source)


def test_query_during_a_refresh_reads_one_version(spark, hs, source):
    create(spark, hs, source, 2)
    append(spark, source, range(1000, 1200))
    expected = vanilla(spark, lambda: query(spark, source))
    failure: list[BaseException] = []

    def refresh():
        try:
            hs.refreshIndex("ix", mode="incremental")
        except BaseException as e:   # reported by the main thread
            failure.append(e)

    worker = threading.Thread(target=refresh)
    worker.start()
    old = index_files(hs)
    seen = []
    while True:
        done = not worker.is_alive()
        df = query(spark, source)
        assert rows(df) == expected
        seen.append(sorted("v__=" + f.split("/v__=")[1] for f in split_files(df, "ix")[0]))
        if done:
            break
    worker.join()
    assert not failure
    new = index_files(hs)
    assert new != old and seen[-1] == new
    assert all(files in (old, new) for files in seen)   # one version or the other, never a mix
