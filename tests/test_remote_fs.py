"""The accelerator on non-local file systems: HDFS (a MiniDFSCluster) and S3 (``s3a://`` on a local
S3-compatible server), started once per test session (tests/services/, fixtures ``hdfs`` and
``s3`` in tests/conftest.py).

Every test runs on both, with the system path and the sources on the remote file system: the
lifecycle of each index kind (create, refresh full/incremental/quick, optimize, delete, restore,
vacuum), queries equal to vanilla Spark and served by the index, the query history written and
read back, and the index log's one winner of racing writers (``HadoopFs.create_exclusive``:
a rename on HDFS, a conditional PUT on S3)."""
from __future__ import annotations

import threading
import uuid

import pytest
from pyspark.sql import functions as F

from accelerator import (
    DataSkippingIndexConfig,
    Hyperspace,
    IndexConfig,
    MinMaxSketch,
    TextIndexConfig,
)
from indexes.fs import HadoopFs
from indexes.log import IndexLogEntry, IndexLogManager, IndexState
from tests.helpers import rows, using_system_path, vanilla

FILE_SYSTEMS = [pytest.param("hdfs", marks=pytest.mark.hdfs),
                pytest.param("s3", marks=pytest.mark.s3)]
BUCKET = "accelerator-tests"


@pytest.fixture(scope="module", params=FILE_SYSTEMS)
def remote(request):
    """The name of the file system under test and a directory on it for this module."""
    if request.param == "hdfs":
        return "hdfs", f"{request.getfixturevalue('hdfs').url}/accelerator-tests"
    return "s3", request.getfixturevalue("s3").create_bucket(BUCKET)


@pytest.fixture
def root(remote) -> str:
    """A fresh directory on the remote file system for one test."""
    return f"{remote[1]}/{uuid.uuid4().hex[:8]}"


@pytest.fixture
def hs(spark, root):
    """A Hyperspace whose system path is on the remote file system, the rewrite enabled."""
    with using_system_path(spark, f"{root}/indexes"):
        Hyperspace.enable(spark)
        yield Hyperspace(spark)
        Hyperspace.disable(spark)
        Hyperspace.flushHistory(spark)   # now, not at exit, when the file system may be gone


def write_events(spark, path: str, start: int, end: int, files: int) -> None:
    """Rows ``start..end-1`` (id, k = id % 7, a message holding ``ERR-<id>`` for ids divisible
    by 50) appended to ``path`` as ``files`` Parquet files of consecutive ids."""
    (spark.range(start, end, numPartitions=files)
     .selectExpr("id", "id % 7 AS k",
                 "concat('msg ', id, CASE WHEN id % 50 = 0 THEN concat(' ERR-', id) ELSE '' END)"
                 " AS message")
     .write.mode("append").parquet(path))


def summary(df) -> dict:
    """The one row of an operation's summary."""
    [row] = df.collect()
    return row.asDict()


def served_by_index(spark, system: str, build) -> list[str]:
    """Checks that the query ``build()`` returns vanilla Spark's rows and reads only files under
    the system path; returns those files."""
    qualified = HadoopFs(spark).qualify(system)
    df = build()
    assert rows(df) == vanilla(spark, build)
    files = df.inputFiles()
    assert files and all(f.startswith(qualified + "/") for f in files), files
    return files


def test_covering_index_lifecycle_and_history(spark, hs, root):
    lake, system = f"{root}/lake/events", f"{root}/indexes"
    write_events(spark, lake, 0, 400, files=2)
    query = lambda: spark.read.parquet(lake).filter(F.col("k") == 3).select("id", "k")  # noqa: E731
    assert summary(hs.createIndex(spark.read.parquet(lake),
                                  IndexConfig("ix", ["k"], ["id"])))["status"] == "succeeded"
    served_by_index(spark, system, query)

    # the query history: written under the system path, read back
    assert Hyperspace.flushHistory(spark) >= 1
    source = HadoopFs(spark).qualify(lake)
    assert any(r["sources"] == [source] and r["filter_columns"] == ["k"]
               for r in hs.history().collect())

    write_events(spark, lake, 400, 450, files=1)
    assert summary(hs.refreshIndex("ix", mode="quick"))["status"] == "succeeded"
    df = query()
    assert rows(df) == vanilla(spark, query)     # hybrid scan: the index plus the new file
    assert any(f.startswith(HadoopFs(spark).qualify(system)) for f in df.inputFiles())
    assert summary(hs.refreshIndex("ix", mode="incremental"))["status"] == "succeeded"
    served_by_index(spark, system, query)
    assert summary(hs.optimizeIndex("ix", mode="full"))["status"] == "succeeded"
    served_by_index(spark, system, query)
    write_events(spark, lake, 450, 500, files=1)
    refreshed = summary(hs.refreshIndex("ix", mode="full"))
    assert (refreshed["status"], refreshed["dataVersion"]) == ("succeeded", 3)
    served_by_index(spark, system, query)

    hs.deleteIndex("ix")
    df = query()
    assert rows(df) == vanilla(spark, query)
    assert all(f.startswith(source) for f in df.inputFiles())
    hs.restoreIndex("ix")
    served_by_index(spark, system, query)
    vacuumed = summary(hs.vacuumIndex("ix", retentionSeconds=0))
    assert "removed 3 unreferenced data versions" in vacuumed["message"], vacuumed
    served_by_index(spark, system, query)
    hs.deleteIndex("ix")
    hs.vacuumIndex("ix")
    assert hs.indexes().count() == 0
    assert not HadoopFs(spark).exists(f"{system}/ix")
    assert [(e["operation"], e["status"]) for e in hs.events().collect()] == [
        (op, "succeeded") for op in ("create", "refresh", "refresh", "optimize", "refresh",
                                     "delete", "restore", "vacuum", "delete", "vacuum")]


def test_data_skipping_and_text_index(spark, hs, root):
    lake = f"{root}/lake/logs"
    write_events(spark, lake, 0, 400, files=4)
    df = lambda: spark.read.parquet(lake)  # noqa: E731
    hs.createIndex(df(), DataSkippingIndexConfig("ds", MinMaxSketch("id")))
    hs.createIndex(df(), TextIndexConfig("txt", column="message"))
    shards = hs.context.lifecycle().get("txt").content["shards"]
    assert len(shards) >= 2 and all(s["path"].startswith(HadoopFs(spark).qualify(root))
                                    for s in shards)

    def check(condition: str, files: int) -> None:
        build = lambda: df().where(condition)  # noqa: E731
        q = build()
        assert rows(q) == vanilla(spark, build)
        assert len(q.inputFiles()) == files, (condition, q.inputFiles())

    check("id = 123", 1)                    # data skipping: one source file of four
    check("message LIKE '%ERR-150%'", 1)    # the text index: the file holding it
    assert [r["id"] for r in hs.search(df(), "txt", '"err 150"').collect()] == [150]

    write_events(spark, lake, 400, 500, files=1)
    for name in ("ds", "txt"):
        assert summary(hs.refreshIndex(name, mode="incremental"))["status"] == "succeeded"
    check("id = 450", 1)
    check("message LIKE '%ERR-450%'", 1)
    for name in ("ds", "txt"):
        hs.deleteIndex(name)
        hs.vacuumIndex(name)
    assert hs.indexes().count() == 0 and not HadoopFs(spark).list(f"{root}/indexes/txt")


def race(contenders: int, attempt) -> dict[int, bool]:
    """Runs ``attempt(i)`` in ``contenders`` threads released at once; their results by i."""
    barrier = threading.Barrier(contenders)
    results: dict[int, bool] = {}
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=60)
            results[i] = attempt(i)
        except BaseException as exc:   # reported by the test, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(contenders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    return results


def test_exactly_one_of_racing_writers_wins(spark, root, remote, request):
    fs = HadoopFs(spark)
    for round in range(4):
        path = f"{root}/race/{round}.json"
        results = race(4, lambda i: fs.create_exclusive(path, f"writer {i}"))
        assert sorted(results.values()) == [False, False, False, True], results
        winner = next(i for i, won in results.items() if won)
        assert fs.read_text(path) == f"writer {winner}"
        assert fs.create_exclusive(path, "late") is False
        assert fs.read_text(path) == f"writer {winner}"
    assert sorted(info.name for info in fs.list(f"{root}/race")) == [
        f"{round}.json" for round in range(4)]          # no temporary file left behind
    if remote[0] == "s3":   # losers lost at the PUT itself, not only at the exists check
        served = request.getfixturevalue("s3").log.read_text(errors="replace").splitlines()
        race_dir = root.split("://", 1)[1] + "/race/"
        assert any(race_dir in line and '" 412 ' in line for line in served)

    # a log commit: writers of the same entry id, one wins and the log holds its entry
    log = IndexLogManager(fs, f"{root}/indexes/ix")
    entries = [IndexLogEntry(id=0, name="ix", kind="covering", state=IndexState.CREATING,
                             properties={"writer": i}) for i in range(4)]
    results = race(4, lambda i: log.write(entries[i]))
    assert sorted(results.values()) == [False, False, False, True], results
    winner = next(i for i, won in results.items() if won)
    assert log.get(0) == entries[winner] and log.ids() == [0]
