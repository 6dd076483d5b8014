"""Operations a user can trust: each returns a one-row summary and writes an event; bad input
and broken state get clear errors; listings show every kind the same way."""
from __future__ import annotations

import os
import shutil

import pytest

from accelerator import (
    BloomFilterSketch,
    DataSkippingIndexConfig,
    IndexConfig,
    IndexStateError,
    MinMaxSketch,
    SourceNotFoundError,
    TextIndexConfig,
    UnsupportedSourceError,
)
from indexes.log import IndexState
from tests.helpers import rows, vanilla

SUMMARY = ["index", "operation", "status", "dataVersion", "filesRead", "bytesRead",
           "filesWritten", "bytesWritten", "seconds", "message"]


@pytest.fixture
def source(spark, tmp_path):
    path = str(tmp_path / "src")
    (spark.range(400).selectExpr("id", "id % 7 AS k", "concat('msg ', id) AS message")
     .repartition(4).write.parquet(path))
    return path


def summary(df):
    assert df.columns == SUMMARY
    [row] = df.collect()
    return row


@pytest.mark.compat
def test_every_operation_returns_a_summary_and_writes_an_event(spark, hs, source):
    created = summary(hs.createIndex(spark.read.parquet(source),
                                     IndexConfig("ix", ["id"], ["k"])))
    assert (created["index"], created["operation"], created["status"],
            created["dataVersion"]) == ("ix", "create", "succeeded", 0)
    assert created["filesRead"] == 4 and created["bytesRead"] > 0
    assert created["filesWritten"] == 4 and created["bytesWritten"] > 0   # 4 buckets
    noop = summary(hs.refreshIndex("ix"))
    assert (noop["status"], noop["dataVersion"], noop["filesWritten"]) == ("noop", 0, 0)
    assert "up to date" in noop["message"]
    assert summary(hs.optimizeIndex("ix", mode="full"))["status"] == "noop"
    spark.range(400, 450).selectExpr("id", "id % 7 AS k", "concat('msg ', id) AS message") \
        .coalesce(1).write.mode("append").parquet(source)
    refreshed = summary(hs.refreshIndex("ix", mode="incremental"))
    assert (refreshed["status"], refreshed["dataVersion"], refreshed["filesRead"]) == (
        "succeeded", 1, 1)
    optimized = summary(hs.optimizeIndex("ix", mode="full"))
    assert optimized["status"] == "succeeded" and optimized["filesRead"] == 5
    assert summary(hs.deleteIndex("ix"))["operation"] == "delete"
    assert summary(hs.restoreIndex("ix"))["message"].startswith("restored")
    vacuumed = summary(hs.vacuumIndex("ix", retentionSeconds=0))
    assert "removed 2 unreferenced data versions" in vacuumed["message"]
    hs.deleteIndex("ix")
    assert summary(hs.vacuumIndex("ix"))["message"].startswith("removed the index")
    events = hs.events().collect()
    assert [(e["operation"], e["index"], e["status"]) for e in events] == [
        (op, "ix", "succeeded") for op in ("create", "refresh", "optimize", "delete",
                                           "restore", "vacuum", "delete", "vacuum")]
    assert events[0]["input"]["files"] == 4     # what the create read: the source files


def test_cancel_rolls_back_a_crashed_operation_and_reports_it(spark, hs, source):
    hs.createIndex(spark.read.parquet(source), IndexConfig("ix", ["k"], ["id"]))
    lifecycle = hs.context.lifecycle()
    entry = lifecycle.get("ix")
    # a process that died mid-refresh leaves the transient state behind
    assert lifecycle.log_manager("ix").write(entry.derive(entry.id + 1, IndexState.REFRESHING))
    cancelled = summary(hs.cancel("ix"))
    assert (cancelled["operation"], cancelled["status"]) == ("cancel", "succeeded")
    assert "ACTIVE" in cancelled["message"]
    assert lifecycle.get("ix").state is IndexState.ACTIVE
    assert [e["operation"] for e in hs.events().collect()] == ["create", "cancel"]


def test_a_path_string_is_not_a_dataframe(hs, source):
    with pytest.raises(UnsupportedSourceError, match=r"DataFrame.*got str '.*src'"):
        hs.createIndex(source, IndexConfig("ix", ["k"], ["id"]))
    assert hs.indexes().count() == 0


def test_a_deleted_source_directory_is_named(spark, hs, source, tmp_path):
    hs.createIndex(spark.read.parquet(source), IndexConfig("ix", ["k"], ["id"]))
    shutil.rmtree(source)
    with pytest.raises(SourceNotFoundError, match=r"index 'ix'.*no longer exists.*src"):
        hs.refreshIndex("ix")
    [row] = hs.indexes().collect()
    assert row["state"] == "ACTIVE" and "no longer exists" in row["warning"]
    assert "src" in row["warning"]


def test_listing_shows_each_index_against_its_source_now_with_the_refresh_that_fixes_it(
        spark, hs, source):
    def warnings() -> dict:
        return {r["name"]: r["warning"] for r in hs.indexes().collect()}

    hs.createIndex(spark.read.parquet(source), IndexConfig("ix", ["k"], ["id"]))   # no lineage
    hs.createIndex(spark.read.parquet(source), DataSkippingIndexConfig("ds", MinMaxSketch("id")))
    assert warnings() == {"ix": None, "ds": None}   # up to date
    first = sorted(spark.read.parquet(source).inputFiles())[0]

    spark.range(400, 450).selectExpr("id", "id % 7 AS k", "concat('msg ', id) AS message") \
        .coalesce(1).write.mode("append").parquet(source)
    listed = warnings()
    for name in ("ix", "ds"):
        assert listed[name] == ("its source changed since the index was built: 1 appended "
                                f"file; refreshIndex('{name}', mode='incremental') brings it "
                                "up to date"), listed[name]
    assert hs.index("ix").first()["warning"] == listed["ix"]
    hs.refreshIndex("ix", mode="incremental")      # what the warning said
    assert warnings()["ix"] is None

    os.remove(first.removeprefix("file:"))
    listed = warnings()
    assert listed["ix"].startswith("its source changed since the index was built: 1 deleted "
                                   "file; refreshIndex('ix', mode='full') brings it up to date")
    assert "no lineage column" in listed["ix"]     # why not incremental
    assert listed["ds"].startswith("its source changed since the index was built: 1 appended "
                                   "file, 1 deleted file; refreshIndex('ds', mode='incremental')")
    hs.refreshIndex("ix", mode="full")
    hs.refreshIndex("ds", mode="incremental")
    assert warnings() == {"ix": None, "ds": None}

    shutil.rmtree(source)
    assert all("no longer exists" in w for w in warnings().values())


def test_a_corrupt_log_entry_is_listed_and_can_be_vacuumed(spark, hs, source):
    hs.createIndex(spark.read.parquet(source), IndexConfig("ix", ["k"], ["id"]))
    hs.createIndex(spark.read.parquet(source), IndexConfig("other", ["id"], ["k"]))
    log_dir = os.path.join(hs.context.settings().system_path, "ix", "_log")
    newest = max((f for f in os.listdir(log_dir) if f.endswith(".json")),
                 key=lambda f: int(f.split(".")[0]))
    with open(os.path.join(log_dir, newest), "w") as f:
        f.write("{not json")
    listed = {r["name"]: r for r in hs.indexes().collect()}
    assert listed["ix"]["state"] == "CORRUPT" and newest in listed["ix"]["warning"]
    assert listed["other"]["state"] == "ACTIVE" and listed["other"]["warning"] is None
    q = lambda: spark.read.parquet(source).where("k = 3").select("id")  # noqa: E731
    assert rows(q()) == vanilla(spark, q)
    for operation in (lambda: hs.refreshIndex("ix"), lambda: hs.optimizeIndex("ix")):
        with pytest.raises(IndexStateError, match=r"index 'ix': it is CORRUPT.*vacuum"):
            operation()
    hs.vacuumIndex("ix")
    assert [r["name"] for r in hs.indexes().collect()] == ["other"]


@pytest.mark.compat
def test_every_kind_is_listed_in_one_style_with_its_rows(spark, hs, source):
    df = spark.read.parquet(source)
    hs.createIndex(df, IndexConfig("cov", ["k"], ["id"]))
    hs.createIndex(df, DataSkippingIndexConfig("skip", MinMaxSketch("id"),
                                               BloomFilterSketch("k")))
    hs.createIndex(df, TextIndexConfig("txt", "message"))
    kinds = {r["name"]: r["kind"] for r in hs.indexes().collect()}
    assert kinds == {"cov": "CoveringIndex", "skip": "DataSkippingIndex", "txt": "TextIndex"}
    num_rows = {n: hs.index(n).collect()[0]["numRows"] for n in kinds}
    assert num_rows == {"cov": 400, "skip": 4, "txt": 400}   # skipping: one row per file


def test_explain_and_why_not_write_through_redirect_func(spark, hs, source):
    hs.createIndex(spark.read.parquet(source), IndexConfig("ix", ["k"], ["id"]))
    q = spark.read.parquet(source).where("k = 3").select("id")
    shown: list[str] = []
    text = hs.explain(q, redirectFunc=shown.append)
    assert shown == [text] and "Indexes used" in text and "ix" in text
    reasons = hs.whyNot(q, redirectFunc=shown.append)
    assert len(shown) == 2 and "[APPLIED]" in shown[1]
    assert [r.code for r in reasons] == ["APPLIED"]
