"""Deleted and modified source files: a covering index with the lineage column
(spark.accelerator.index.lineage.enabled) filters their rows out at query time (hybrid scan,
within maxDeletedRatio), for filter and join queries; incremental refresh drops them; quick
refresh records appended and deleted files in the log only. Results always equal vanilla
Spark's."""
from __future__ import annotations

import os

import pytest
from pyspark.sql import functions as F

from accelerator import (
    DataSkippingIndexConfig,
    IndexConfig,
    InvalidIndexConfigError,
    MinMaxSketch,
    TextIndexConfig,
)
from tests.helpers import bucket_union, own_copy, rows, session_conf, vanilla
from tests.test_hybrid_scan import SCHEMA, append, data, query, split_files, why
from tests.test_join_rule import assert_same, joined

LINEAGE = {"spark__accelerator__index__lineage__enabled": "true"}


@pytest.fixture(scope="module")
def written(spark, tmp_path_factory):
    """The sources, written once for the module (each test gets copies: ``source``,
    ``join_tables``)."""
    base = tmp_path_factory.mktemp("written")
    spark.createDataFrame(data(range(1000)), SCHEMA).repartition(10) \
        .write.parquet(str(base / "src"))
    spark.createDataFrame([(i, i % 50, f"v{i}") for i in range(400)],
                          "id long, k long, v string").repartition(8) \
        .write.parquet(str(base / "left"))
    spark.createDataFrame([(i, i % 70, f"w{i}") for i in range(300)],
                          "rid long, k2 long, w string").repartition(6) \
        .write.parquet(str(base / "right"))
    return base


@pytest.fixture
def source(written, tmp_path):
    (path,) = own_copy(written, tmp_path, "src")
    return path


def parquet_files(path):
    return sorted(f for f in os.listdir(path) if f.endswith(".parquet"))


def create(spark, hs, path, name="ix", lineage=True, **kw):
    config = IndexConfig(name, kw.get("indexed", ["payload.code"]),
                         kw.get("included", ["id", "payload.size"]))
    with session_conf(spark, **(LINEAGE if lineage else {})):
        hs.createIndex(spark.read.parquet(path), config)


def assert_query(spark, path, build=query):
    df = build(spark, path)
    assert rows(df) == vanilla(spark, lambda: build(spark, path))
    return df


@pytest.mark.compat
def test_deleted_and_appended_files_with_lineage(spark, hs, source):
    create(spark, hs, source)
    os.remove(os.path.join(source, parquet_files(source)[0]))
    append(spark, source, range(5000, 5050))
    df = assert_query(spark, source)
    indexed, appended = split_files(df, "ix")
    assert indexed and len(appended) == 1
    code, reason = why(hs, df, "ix")
    assert code == "APPLIED"
    assert "rows of 1 deleted or modified source files filtered out" in reason
    assert "NOT _data_file_id" in df._jdf.queryExecution().executedPlan().toString()


def test_select_star_after_a_delete_hides_the_lineage_column(spark, hs, source):
    create(spark, hs, source, indexed=["id"], included=["part", "payload"])
    os.remove(os.path.join(source, parquet_files(source)[3]))
    build = lambda s, p: s.read.parquet(p).filter("id < 500")  # noqa: E731
    df = assert_query(spark, source, build)
    assert df.columns == ["id", "part", "payload"]
    assert why(hs, df, "ix")[0] == "APPLIED"


def test_modified_file_is_deleted_and_appended(spark, hs, source):
    create(spark, hs, source)
    victim = parquet_files(source)[0]
    other = os.path.join(source + "-other")
    spark.createDataFrame(data(range(7000, 7020)), SCHEMA).coalesce(1).write.parquet(other)
    os.remove(os.path.join(source, f".{victim}.crc"))
    os.replace(os.path.join(other, parquet_files(other)[0]), os.path.join(source, victim))
    df = assert_query(spark, source)
    assert (7003, 7003) in rows(df)
    assert "1 appended source files" in why(hs, df, "ix")[1]


def test_deleted_files_of_a_partitioned_source(spark, hs, tmp_path):
    path = str(tmp_path / "parted")
    spark.createDataFrame(data(range(900)), SCHEMA).write.partitionBy("part").parquet(path)
    create(spark, hs, path, included=["id", "part"])
    part = os.path.join(path, "part=p1")
    for f in parquet_files(part)[:1]:
        os.remove(os.path.join(part, f))
    build = lambda s, p: (s.read.parquet(p).filter(F.col("payload.code") == "c4")  # noqa: E731
                          .select("id", "part"))
    df = assert_query(spark, path, build)
    assert why(hs, df, "ix")[0] == "APPLIED"


def test_deleted_share_over_the_threshold_disables_the_index(spark, hs, source):
    create(spark, hs, source)
    for f in parquet_files(source)[:3]:
        os.remove(os.path.join(source, f))
    df = assert_query(spark, source)
    assert split_files(df, "ix")[0] == []
    code, reason = why(hs, df, "ix")
    assert code == "SOURCE_CHANGED" and "maxDeletedRatio (0.2)" in reason
    with session_conf(spark, spark__accelerator__index__hybridScan__maxDeletedRatio="0.5"):
        df = assert_query(spark, source)
        assert why(hs, df, "ix")[0] == "APPLIED"


def test_deletes_without_lineage_disable_the_index(spark, hs, source):
    create(spark, hs, source, lineage=False)
    os.remove(os.path.join(source, parquet_files(source)[0]))
    df = assert_query(spark, source)
    code, reason = why(hs, df, "ix")
    assert code == "SOURCE_CHANGED" and "no lineage column" in reason


def test_lineage_column_name_taken_by_the_source(spark, hs, tmp_path):
    path = str(tmp_path / "clash")
    spark.range(10).withColumn("_data_file_id", F.col("id")).write.parquet(path)
    with session_conf(spark, **LINEAGE), pytest.raises(InvalidIndexConfigError,
                                                       match="'_data_file_id'.*lineage"):
        hs.createIndex(spark.read.parquet(path), IndexConfig("ix", ["id"]))


@pytest.fixture
def join_tables(written, tmp_path):
    left, right = own_copy(written, tmp_path, "left", "right")
    return left, right


def create_join_indexes(spark, hs, left, right):
    """Covering indexes with lineage on each side's join key: ``li`` on left, ``ri`` on right."""
    with session_conf(spark, **LINEAGE):
        hs.createIndex(spark.read.parquet(left), IndexConfig("li", ["k"], ["v"]))
        hs.createIndex(spark.read.parquet(right), IndexConfig("ri", ["k2"], ["w"]))


def lineage_join_plan(spark, hs, left, right) -> str:
    """Runs the join of the two tables (no broadcast), checks it against vanilla Spark, served
    by both indexes with rows of deleted files filtered out; returns its physical plan."""
    with session_conf(spark, spark__sql__autoBroadcastJoinThreshold="-1"):
        df = (spark.read.parquet(left).join(spark.read.parquet(right), F.col("k") == F.col("k2"))
              .select("k", "v", "w"))
        assert_same(spark, df)
        assert joined(hs, df) == {"li", "ri"}
        plan = df._jdf.queryExecution().executedPlan().toString().split("== Initial Plan ==")[-1]
    assert "NOT _data_file_id" in plan
    return plan


def append_left(spark, left, ids):
    """Appends one file of rows ``ids`` to the left join table; returns its name."""
    before = set(os.listdir(left))
    spark.createDataFrame([(i, i % 50, f"v{i}") for i in ids], "id long, k long, v string") \
        .coalesce(1).write.mode("append").parquet(left)
    (name,) = [f for f in set(os.listdir(left)) - before if f.endswith(".parquet")]
    return name


@pytest.mark.compat
def test_join_with_appended_and_deleted_files_keeps_the_index_sides_unshuffled(
        spark, hs, join_tables):
    left, right = join_tables
    create_join_indexes(spark, hs, left, right)
    append_left(spark, left, range(1000, 1030))
    os.remove(os.path.join(right, parquet_files(right)[0]))
    plan = lineage_join_plan(spark, hs, left, right)
    if bucket_union(spark):
        # the only shuffle hashes the appended file into the index's buckets
        assert plan.count("Exchange") == 1 and "REPARTITION_BY_NUM" in plan
        assert "BucketUnion" in plan
        # Spark copies plan nodes by reflection (makeCopy, as clone does: Spark 4.1's planner
        # did, and failed the query while BucketUnion lacked the constructor it calls)
        with session_conf(spark, spark__sql__autoBroadcastJoinThreshold="-1"):
            joined_df = spark.read.parquet(left).join(spark.read.parquet(right),
                                                      F.col("k") == F.col("k2"))
            qe = joined_df.select("k", "v", "w")._jdf.queryExecution()
            for tree in (qe.optimizedPlan(), qe.sparkPlan()):
                copy = tree.clone()
                assert copy.equals(tree) and "BucketUnion" in copy.toString()
    else:   # Spark 3.5 and 4.0: the join shuffles the union of index and appended file
        assert plan.count("Exchange") == 1 and "REPARTITION_BY_NUM" not in plan


@pytest.mark.compat
def test_incremental_refresh_drops_the_rows_of_deleted_files(spark, hs, source):
    create(spark, hs, source)
    os.remove(os.path.join(source, parquet_files(source)[0]))
    append(spark, source, range(5000, 5050))
    hs.refreshIndex("ix", mode="incremental")
    content = hs.context.lifecycle().get("ix").content
    assert content["dataVersion"] == 1 and content["deletedFiles"] == 1
    assert content["numRows"] == spark.read.parquet(source).count()
    df = assert_query(spark, source)
    indexed, others = split_files(df, "ix")
    assert indexed and others == []
    assert why(hs, df, "ix") == ("APPLIED", "the index is used (filter rule)")


def test_delta_rows_of_a_file_deleted_after_the_refresh_are_filtered_out(spark, hs, source):
    create(spark, hs, source)
    (first,) = [f for f in append(spark, source, range(5000, 5050)) if f.endswith(".parquet")]
    hs.refreshIndex("ix", mode="incremental")          # the appended rows: a delta file
    os.remove(os.path.join(source, first))             # then that file is deleted ...
    append(spark, source, range(6000, 6030))           # ... and another appended
    for bucketed in ("true", "false"):
        with session_conf(spark, spark__accelerator__index__filterRule__useBucketSpec=bucketed):
            df = assert_query(spark, source)
            indexed, appended = split_files(df, "ix")
            assert len(appended) == 1
            assert sum(f.rsplit("/", 1)[1].startswith("delta-") for f in indexed) == 1
            plan = df._jdf.queryExecution().executedPlan().toString()
            # the bucketed read unions index, delta and appended files; each index part is
            # filtered by lineage
            assert plan.count("Not(In(_data_file_id") == (2 if bucketed == "true" else 1)
    # refreshing drops the deleted file's rows: the delta file's others are rewritten into
    # the buckets with the rest
    hs.refreshIndex("ix", mode="incremental")
    content = hs.context.lifecycle().get("ix").content
    assert all(f[1] is not None for f in content["files"])
    assert content["numRows"] == spark.read.parquet(source).count()
    df = assert_query(spark, source)
    assert split_files(df, "ix")[1] == []


def test_join_over_delta_appended_and_deleted_files(spark, hs, join_tables):
    left, right = join_tables
    create_join_indexes(spark, hs, left, right)
    first = append_left(spark, left, range(1000, 1030))
    hs.refreshIndex("li", mode="incremental")
    os.remove(os.path.join(left, first))
    append_left(spark, left, range(2000, 2020))
    plan = lineage_join_plan(spark, hs, left, right)
    if bucket_union(spark):
        # delta and appended rows are hashed into the buckets: one union of three parts
        assert plan.count("REPARTITION_BY_NUM") == 2 and plan.count("Exchange") == 2
        assert plan.count("BucketUnion") == 1
    else:   # Spark 4.0: the join shuffles the union of the three parts
        assert plan.count("REPARTITION_BY_NUM") == 0 and plan.count("Exchange") == 1


def test_incremental_refresh_without_lineage_asks_for_a_full_one(spark, hs, source):
    create(spark, hs, source, lineage=False)
    os.remove(os.path.join(source, parquet_files(source)[0]))
    with pytest.raises(InvalidIndexConfigError, match="no lineage column.*mode='full'"):
        hs.refreshIndex("ix", mode="incremental")
    with pytest.raises(InvalidIndexConfigError, match="no lineage column.*mode='full'"):
        hs.refreshIndex("ix", mode="quick")
    assert hs.context.lifecycle().get("ix").state.name == "ACTIVE"


@pytest.mark.compat
def test_quick_refresh_records_changes_for_hybrid_scan(spark, hs, source):
    create(spark, hs, source)
    os.remove(os.path.join(source, parquet_files(source)[0]))
    append(spark, source, range(5000, 5050))
    hs.refreshIndex("ix", mode="quick")
    entry = hs.context.lifecycle().get("ix")
    assert entry.content["dataVersion"] == 0
    pending = entry.content["quickRefresh"]
    assert len(pending["appended"]) == 1 and len(pending["deleted"]) == 1
    df = assert_query(spark, source)
    assert len(split_files(df, "ix")[1]) == 1
    hs.refreshIndex("ix", mode="quick")                 # nothing new: a no-op
    assert hs.context.lifecycle().get("ix").id == entry.id
    with session_conf(spark, spark__accelerator__index__hybridScan__enabled="false"):
        df = assert_query(spark, source)
        code, reason = why(hs, df, "ix")
        assert code == "SOURCE_CHANGED" and "mode='quick'" in reason
    hs.refreshIndex("ix", mode="incremental")           # applies the recorded changes
    entry = hs.context.lifecycle().get("ix")
    assert entry.content["dataVersion"] == 1 and "quickRefresh" not in entry.content
    df = assert_query(spark, source)
    assert split_files(df, "ix")[1] == []
    append(spark, source, range(6000, 6010))
    hs.refreshIndex("ix", mode="quick")
    hs.refreshIndex("ix", mode="full")
    entry = hs.context.lifecycle().get("ix")
    assert entry.content["dataVersion"] == 2 and "quickRefresh" not in entry.content
    assert split_files(assert_query(spark, source), "ix")[1] == []


@pytest.mark.compat
def test_quick_refresh_of_data_skipping_and_text_indexes(spark, hs, source):
    df = spark.read.parquet(source)
    hs.createIndex(df, DataSkippingIndexConfig("ds", MinMaxSketch("id")))
    hs.createIndex(df, TextIndexConfig("tx", "part"))
    spark.createDataFrame(data(range(5000, 5050), part=lambda i: "zzz"), SCHEMA) \
        .coalesce(1).write.mode("append").parquet(source)
    for name in ("ds", "tx"):
        hs.refreshIndex(name, mode="quick")
        entry = hs.context.lifecycle().get(name)
        assert entry.content["dataVersion"] == 0
        assert len(entry.content["quickRefresh"]["appended"]) == 1
    by_id = lambda s, p: s.read.parquet(p).filter("id >= 5003 AND id < 5005")  # noqa: E731
    by_text = lambda s, p: s.read.parquet(p).filter(F.col("part").like("%zzz%"))  # noqa: E731
    for build, name, expected in ((by_id, "ds", 2), (by_text, "tx", 50)):
        got = assert_query(spark, source, build)
        assert len(rows(got)) == expected
        assert why(hs, got, name)[0] == "APPLIED"
        assert len(got.inputFiles()) == 1          # only the file the index does not know


def test_refresh_mode_is_checked(spark, hs, source):
    create(spark, hs, source)
    with pytest.raises(InvalidIndexConfigError, match="'fast' is not supported.*quick"):
        hs.refreshIndex("ix", mode="fast")
