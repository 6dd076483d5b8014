"""Hybrid scan: a covering index over a source that got new files since it was built is still
used for filters, unioned with a scan of just the appended files (flattened to the index's
columns), within spark.accelerator.index.hybridScan.maxAppendedRatio; deleted files and the
setting turned off leave the index unused. Results always equal vanilla Spark's."""
from __future__ import annotations

import os

import pytest
from pyspark.sql import functions as F

from accelerator import IndexConfig
from tests.helpers import own_copy, rows, vanilla

SCHEMA = "id long, part string, payload struct<code:string, size:int>"


def data(ids, part=lambda i: f"p{i % 3}"):
    return [(i, part(i), (f"c{i % 10}", i)) for i in ids]


@pytest.fixture(scope="module")
def written(spark, tmp_path_factory):
    """The source, written once for the module (each test gets a copy: ``source``)."""
    base = tmp_path_factory.mktemp("written")
    spark.createDataFrame(data(range(600)), SCHEMA).repartition(6).write.parquet(str(base / "src"))
    return base


@pytest.fixture
def source(written, tmp_path):
    (path,) = own_copy(written, tmp_path, "src")
    return path


def append(spark, path, ids, **kw):
    before = set(os.listdir(path))
    spark.createDataFrame(data(ids), SCHEMA).coalesce(1).write.mode("append").parquet(path, **kw)
    return set(os.listdir(path)) - before


def split_files(df, index: str) -> tuple[list[str], list[str]]:
    """(index files, source files) the query reads."""
    files = df.inputFiles()
    return ([f for f in files if f"/{index}/v__=" in f], [f for f in files if f"/{index}/v__=" not in f])


def why(hs, df, index) -> tuple[str, str]:
    (r,) = [r for r in hs.whyNot(df, index)]
    return r.code, r.reason


def query(spark, path):
    df = spark.read.parquet(path)
    return df.filter(F.col("payload.code") == "c3").select("id", "payload.size")


@pytest.mark.compat
def test_appended_files_are_read_next_to_the_index(spark, hs, source):
    hs.createIndex(spark.read.parquet(source), IndexConfig("ix", ["payload.code"], ["id", "payload.size"]))
    new = append(spark, source, range(1000, 1040))
    df = query(spark, source)
    assert rows(df) == vanilla(spark, lambda: query(spark, source))
    assert (1003, 1003) in rows(df)
    indexed, appended = split_files(df, "ix")
    assert indexed and [os.path.basename(f) for f in appended] == [n for n in new if n.endswith(".parquet")]
    code, reason = why(hs, df, "ix")
    assert code == "APPLIED" and "hybrid scan: 1 appended source files" in reason


def test_hybrid_scan_keeps_the_source_column_order(spark, hs, source):
    hs.createIndex(spark.read.parquet(source), IndexConfig("ix_all", ["id"], ["part", "payload"]))
    append(spark, source, range(1000, 1010))
    build = lambda: spark.read.parquet(source).filter("id IN (3, 1003)")  # noqa: E731
    df = build()
    assert df.columns == ["id", "part", "payload"]
    assert rows(df) == vanilla(spark, build) and len(rows(df)) == 2
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "Union" in plan and "ix_all/v__=0" in plan


def test_partitioned_source_with_appended_partition(spark, hs, tmp_path):
    path = str(tmp_path / "parted")
    spark.createDataFrame(data(range(300)), SCHEMA).write.partitionBy("part").parquet(path)
    hs.createIndex(spark.read.parquet(path), IndexConfig("ix_p", ["payload.code"], ["id", "part"]))
    more = data(range(2000, 2030), part=lambda i: "p9")
    spark.createDataFrame(more, SCHEMA).write.mode("append").partitionBy("part").parquet(path)
    build = lambda: (spark.read.parquet(path)  # noqa: E731
                     .filter(F.col("payload.code") == "c3").select("id", "part"))
    df = build()
    assert rows(df) == vanilla(spark, build)
    assert (2003, "p9") in rows(df)
    indexed, appended = split_files(df, "ix_p")
    assert indexed and appended and all("/part=p9/" in f for f in appended)


def test_appended_share_over_the_threshold_disables_the_index(spark, hs, source):
    hs.createIndex(spark.read.parquet(source), IndexConfig("ix", ["payload.code"], ["id", "payload.size"]))
    append(spark, source, range(1000, 3000))           # more bytes than the source
    df = query(spark, source)
    assert rows(df) == vanilla(spark, lambda: query(spark, source))
    assert split_files(df, "ix")[0] == []
    code, reason = why(hs, df, "ix")
    assert code == "SOURCE_CHANGED" and "maxAppendedRatio (0.3)" in reason
    spark.conf.set("spark.accelerator.index.hybridScan.maxAppendedRatio", "0.9")
    try:
        df = query(spark, source)
        assert rows(df) == vanilla(spark, lambda: query(spark, source))
        assert why(hs, df, "ix")[0] == "APPLIED"
    finally:
        spark.conf.unset("spark.accelerator.index.hybridScan.maxAppendedRatio")


def test_hybrid_scan_turned_off(spark, hs, source):
    hs.createIndex(spark.read.parquet(source), IndexConfig("ix", ["payload.code"], ["id", "payload.size"]))
    append(spark, source, range(1000, 1010))
    spark.conf.set("spark.accelerator.index.hybridScan.enabled", "false")
    try:
        df = query(spark, source)
        assert rows(df) == vanilla(spark, lambda: query(spark, source))
        assert split_files(df, "ix")[0] == []
        assert why(hs, df, "ix")[0] == "SOURCE_CHANGED"
    finally:
        spark.conf.unset("spark.accelerator.index.hybridScan.enabled")


@pytest.mark.compat
def test_deleted_files_disable_the_index(spark, hs, source):
    hs.createIndex(spark.read.parquet(source), IndexConfig("ix", ["payload.code"], ["id", "payload.size"]))
    victim = sorted(f for f in os.listdir(source) if f.endswith(".parquet"))[0]
    append(spark, source, range(1000, 1010))
    os.remove(os.path.join(source, victim))
    df = query(spark, source)
    assert rows(df) == vanilla(spark, lambda: query(spark, source))
    assert split_files(df, "ix")[0] == []
    code, reason = why(hs, df, "ix")
    assert code == "SOURCE_CHANGED" and "1 indexed source files were deleted" in reason


@pytest.mark.compat
def test_incremental_refresh_indexes_only_the_appended_files(spark, hs, source):
    hs.createIndex(spark.read.parquet(source), IndexConfig("ix", ["payload.code"], ["id", "payload.size"]))
    before = hs.context.lifecycle().get("ix").content
    append(spark, source, range(1000, 1040))
    hs.refreshIndex("ix", mode="incremental")
    after = hs.context.lifecycle().get("ix").content
    assert after["dataVersion"] == 1 and after["appendedFiles"] == 1
    assert after["numRows"] == 640 and after["numFiles"] > before["numFiles"]
    df = query(spark, source)
    assert rows(df) == vanilla(spark, lambda: query(spark, source))
    indexed, others = split_files(df, "ix")
    # the new version reads the first version's files and its own (the appended rows)
    assert others == [] and {f.split("/v__=")[1][0] for f in indexed} == {"0", "1"}
    assert why(hs, df, "ix") == ("APPLIED", "the index is used (filter rule; 1 delta files of "
                                 "incremental refreshes read next to its buckets until "
                                 "optimizeIndex folds them in)")
    # the appended rows are one delta file of the new version, sorted by the indexed column
    deltas = [f for f in indexed if f.rsplit("/", 1)[1].startswith("delta-")]
    assert len(deltas) == 1 and "/v__=1/" in deltas[0]
    codes = [r[0] for r in spark.read.parquet(deltas[0]).select("payload__code").collect()]
    assert len(codes) == 40 and codes == sorted(codes)
    # every bucket file holds only rows of the bucket its name carries, as Spark computes ids
    stored = spark.read.parquet(*[f for f in indexed if f not in deltas])
    misplaced = stored.where(F.expr("pmod(hash(payload__code), 4)") != F.regexp_extract(
        F.col("_metadata.file_name"), r"_(\d+)\.c\d+", 1).cast("int"))
    assert misplaced.count() == 0
    hs.refreshIndex("ix", mode="incremental")          # nothing changed: a no-op
    assert hs.context.lifecycle().get("ix").content["dataVersion"] == 1


def test_incremental_refresh_after_a_delete_asks_for_a_full_one(spark, hs, source):
    from accelerator import InvalidIndexConfigError
    hs.createIndex(spark.read.parquet(source), IndexConfig("ix", ["payload.code"], ["id", "payload.size"]))
    victim = sorted(f for f in os.listdir(source) if f.endswith(".parquet"))[0]
    os.remove(os.path.join(source, victim))
    with pytest.raises(InvalidIndexConfigError, match="1 indexed source files were deleted.*mode='full'"):
        hs.refreshIndex("ix", mode="incremental")
    assert hs.context.lifecycle().get("ix").state.name == "ACTIVE"
    hs.refreshIndex("ix", mode="full")
    df = query(spark, source)
    assert rows(df) == vanilla(spark, lambda: query(spark, source))
    assert why(hs, df, "ix")[0] == "APPLIED"


def test_the_jvm_answers_only_the_difference_to_the_recorded_files(spark, source):
    """The fingerprint check of a changed source: the JVM names the appended, deleted and
    modified files against an index's recorded listing, and nothing else."""
    from types import SimpleNamespace

    from accelerator.query.relation_files import RelationFiles
    from accelerator.runtime.jvm import helpers

    files = RelationFiles(helpers(spark).plans)
    plan = lambda: spark.read.parquet(source)._jdf.queryExecution().analyzed()  # noqa: E731
    recorded = files.describe(plan(), 0, 2)
    assert files.describe(plan(), 0, 1).fingerprint == recorded.fingerprint
    parquet = sorted(f for f in os.listdir(source) if f.endswith(".parquet"))
    os.remove(os.path.join(source, parquet[0]))
    with open(os.path.join(source, parquet[1]), "ab") as f:   # modified: another size
        f.write(b"x")
    new = {n for n in append(spark, source, range(1000, 1010)) if n.endswith(".parquet")}
    now = plan()
    listed = files.describe(now, 0, 2)
    current = files.describe(now, 0, 1)
    assert current.fingerprint == listed.fingerprint != recorded.fingerprint
    changes = files.changes(now, SimpleNamespace(ordinal=0, description=current), recorded)
    name = lambda fs: sorted(os.path.basename(f.path) for f in fs)  # noqa: E731
    assert name(changes.appended) == sorted([parquet[1], *new])
    assert name(changes.deleted) == sorted(parquet[:2])
    assert set(changes.applied_to(recorded.files)) == set(listed.files)
    assert (changes.count, changes.bytes) == (len(listed.files), sum(f.size for f in listed.files))
