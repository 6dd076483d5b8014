"""Join rule: an equi-join of two indexed sources reads both covering indexes with their bucket
spec, so the physical plan has no Exchange; results equal vanilla Spark's; each ineligible join
form is left alone, and whyNot says why."""
from __future__ import annotations

import re

import pytest
from pyspark.sql import functions as F

from accelerator import Hyperspace, IndexConfig
from tests.helpers import bucket_union, own_copy, rows, session_conf, vanilla

LEFT = "id long, k long, v string, nested struct<cnt:int, tag:string>"
RIGHT = "rid long, k2 long, w string, nested struct<cnt:int, note:string>"


@pytest.fixture
def no_broadcast(spark):
    """Spark would broadcast these small tables; the join rule serves sort-merge joins."""
    previous = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    yield
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", previous)


@pytest.fixture(scope="module")
def written(spark, tmp_path_factory):
    """The two tables, written once for the module (each test gets copies: ``tables``)."""
    base = tmp_path_factory.mktemp("written")
    spark.createDataFrame([(i, i % 50, f"v{i}", (i % 20, f"t{i % 3}")) for i in range(400)],
                          LEFT).repartition(4).write.parquet(str(base / "left"))
    spark.createDataFrame([(i, i % 70, f"w{i}", (i % 20, f"n{i % 4}")) for i in range(300)],
                          RIGHT).repartition(3).write.parquet(str(base / "right"))
    return base


@pytest.fixture
def tables(written, tmp_path, no_broadcast):
    left, right = own_copy(written, tmp_path, "left", "right")
    return left, right


def exchanges(df) -> int:
    return df._jdf.queryExecution().executedPlan().toString().count("Exchange")


def applied(hs, df) -> set[str]:
    return {r.index for r in hs.whyNot(df) if r.code == "APPLIED"}


def joined(hs, df) -> set[str]:
    """The indexes the join rule applied."""
    return {r.index for r in hs.whyNot(df) if r.code == "APPLIED" and "(join rule" in r.reason}


def assert_same(spark, df):
    assert rows(df) == vanilla(spark, lambda: df)


@pytest.mark.compat
def test_join_of_two_indexed_sources_has_no_exchange(spark, hs, tables):
    left, right = tables
    hs.createIndex(spark.read.parquet(left), IndexConfig("li", ["k"], ["v"]))
    hs.createIndex(spark.read.parquet(right), IndexConfig("ri", ["k2"], ["w"]))
    query = lambda: (spark.read.parquet(left).filter(F.col("v") != "v7")  # noqa: E731
                     .join(spark.read.parquet(right), F.col("k") == F.col("k2"))
                     .select("k", "v", "w"))
    df = query()
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert plan.count("Exchange") == 0
    assert_same(spark, df)
    assert joined(hs, df) == {"li", "ri"}
    assert "SortMergeJoin" in plan and "SelectedBucketsCount: 4 out of 4" in plan
    Hyperspace.disable(spark)
    try:
        assert exchanges(query()) == 2      # vanilla Spark shuffles both sides
    finally:
        Hyperspace.enable(spark)


def test_join_on_nested_keys_aliased_by_spark(spark, hs, tables):
    left, right = tables
    hs.createIndex(spark.read.parquet(left), IndexConfig("li_n", ["nested.cnt"], ["v"]))
    hs.createIndex(spark.read.parquet(right), IndexConfig("ri_n", ["nested.cnt"], ["w", "nested.note"]))
    a = spark.read.parquet(left).filter("nested.cnt > 3").select(F.col("nested.cnt").alias("cnt"), "v")
    b = spark.read.parquet(right).select(F.col("nested.cnt").alias("cnt"), "w", "nested.note")
    df = a.join(b, "cnt")           # both sides output a 'cnt': identity is by exprId
    assert exchanges(df) == 0
    assert_same(spark, df)
    assert joined(hs, df) == {"li_n", "ri_n"}


@pytest.mark.compat
def test_sql_join_with_two_keys_in_index_order(spark, hs, tables):
    left, right = tables
    hs.createIndex(spark.read.parquet(left), IndexConfig("li2", ["k", "id"], ["v"]))
    hs.createIndex(spark.read.parquet(right), IndexConfig("ri2", ["k2", "rid"], ["w"]))
    spark.read.parquet(left).createOrReplaceTempView("l")
    spark.read.parquet(right).createOrReplaceTempView("r")
    df = spark.sql("SELECT l.v, r.w FROM l JOIN r ON r.rid = l.id AND l.k = r.k2")
    assert exchanges(df) == 0
    assert_same(spark, df)
    assert joined(hs, df) == {"li2", "ri2"}
    # the same keys paired the other way round do not match the buckets: the filter rule
    # still reads each index (the join's inferred isnotnull filters use their first columns),
    # and Spark shuffles one side
    crossed = spark.sql("SELECT l.v, r.w FROM l JOIN r ON l.id = r.k2 AND l.k = r.rid")
    assert exchanges(crossed) == 1
    assert_same(spark, crossed)
    assert joined(hs, crossed) == set()
    assert "another order" in " ".join(r.reason for r in hs.whyNot(crossed, "li2"))


@pytest.mark.parametrize("name, build, reason", [
    ("or", lambda l, r: l.join(r, (l.k == r.k2) | (l.v == r.w)).select("v", "w"), "not only equalities"),
    ("non_equi", lambda l, r: l.join(r, l.k < r.k2).select("v", "w"), "not only equalities"),
    ("computed", lambda l, r: l.join(r, (l.k + 1) == r.k2).select("v", "w"), "other than two columns"),
    ("broadcast", lambda l, r: l.join(F.broadcast(r), l.k == r.k2).select("v", "w"), "broadcast"),
    ("not_covered", lambda l, r: l.join(r, l.k == r.k2).select("v", "w", "id"), "does not have"),
])
def test_ineligible_joins_are_left_alone(spark, hs, tables, name, build, reason):
    left, right = tables
    hs.createIndex(spark.read.parquet(left), IndexConfig("li", ["k"], ["v"]))
    hs.createIndex(spark.read.parquet(right), IndexConfig("ri", ["k2"], ["w"]))
    df = build(spark.read.parquet(left), spark.read.parquet(right))
    assert_same(spark, df)
    assert joined(hs, df) == set()
    reasons = " ".join(r.reason for r in hs.whyNot(df, "li"))
    assert reason in reasons, reasons


def test_different_bucket_counts_are_left_alone(spark, hs, tables):
    left, right = tables
    hs.createIndex(spark.read.parquet(left), IndexConfig("li", ["k"], ["v"]))
    hs.createIndex(spark.read.parquet(right), IndexConfig("ri3", ["k2"], ["w"], numBuckets=3))
    df = spark.read.parquet(left).join(spark.read.parquet(right), F.col("k") == F.col("k2")).select("v", "w")
    assert_same(spark, df)
    assert joined(hs, df) == set()
    assert "bucket count" in " ".join(r.reason for r in hs.whyNot(df, "li"))


def test_small_sides_are_left_to_broadcast(spark, hs, tables):
    left, right = tables
    hs.createIndex(spark.read.parquet(left), IndexConfig("li", ["k"], ["v"]))
    hs.createIndex(spark.read.parquet(right), IndexConfig("ri", ["k2"], ["w"]))
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "10MB")
    df = spark.read.parquet(left).join(spark.read.parquet(right), F.col("k") == F.col("k2")).select("v", "w")
    assert_same(spark, df)
    assert joined(hs, df) == set()
    assert "autoBroadcastJoinThreshold" in " ".join(r.reason for r in hs.whyNot(df, "li"))


def test_point_lookup_side_keeps_the_filter_rule(spark, hs, tables):
    left, right = tables
    hs.createIndex(spark.read.parquet(left), IndexConfig("li_id", ["id"], ["k", "v"]))
    hs.createIndex(spark.read.parquet(left), IndexConfig("li", ["k"], ["v", "id"]))
    hs.createIndex(spark.read.parquet(right), IndexConfig("ri", ["k2"], ["w"]))
    df = (spark.read.parquet(left).filter(F.col("id") == 42)
          .join(spark.read.parquet(right), F.col("k") == F.col("k2")).select("v", "w"))
    assert_same(spark, df)
    assert "li_id" in applied(hs, df) and joined(hs, df) == set()
    assert "with literals" in " ".join(r.reason for r in hs.whyNot(df, "li_id"))


#: Join keys with nulls, and strings whose order is by bytes (upper case first, then "é").
KEYS = [
    ("long", lambda i: None if i % 13 == 0 else i % 40),
    ("string", lambda i: None if i % 11 == 0
     else ["b", "B", "a", "é", "", "zz", "a b"][i % 7] + str(i % 5)),
]


def keyed_tables(spark, tmp_path, key_type, key) -> tuple[str, str]:
    left, right = str(tmp_path / "l"), str(tmp_path / "r")
    spark.createDataFrame([(i, key(i), f"v{i}") for i in range(500)],
                          f"id long, k {key_type}, v string").repartition(3).write.parquet(left)
    spark.createDataFrame([(i, key(i * 7), f"w{i}") for i in range(300)],
                          f"rid long, k2 {key_type}, w string").repartition(2).write.parquet(right)
    return left, right


@pytest.mark.parametrize("key_type, key", KEYS)
def test_far_more_buckets_than_cores_are_read_in_groups(spark, hs, tmp_path, no_broadcast,
                                                        key_type, key):
    """40 buckets on local[2]: the join reads them in 8 groups (bucket b in group b mod 8, as a
    hash partitioning into 8 puts them), sorted, still without any exchange."""
    left, right = keyed_tables(spark, tmp_path, key_type, key)
    hs.createIndex(spark.read.parquet(left), IndexConfig("lg", ["k"], ["v"], numBuckets=40))
    hs.createIndex(spark.read.parquet(right), IndexConfig("rg", ["k2"], ["w"], numBuckets=40))
    df = (spark.read.parquet(left).join(spark.read.parquet(right), F.col("k") == F.col("k2"))
          .select("k", "v", "w"))
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert exchanges(df) == 0 and sorts(df) == 2
    assert plan.count("SelectedBucketsCount: 40 out of 40 (Coalesced to 8)") == 2
    assert df.rdd.getNumPartitions() == 8
    assert_same(spark, df)
    assert joined(hs, df) == {"lg", "rg"}


def test_buckets_of_several_files_are_sorted_by_the_join(spark, hs, tables):
    """An index written under ``maxRecordsPerFile`` holds several sorted files per bucket: its
    buckets, read file after file, are not sorted, so the scan reports no order and the join
    sorts them (still no exchange)."""
    left, right = tables
    spark.conf.set("spark.sql.files.maxRecordsPerFile", "30")
    try:
        hs.createIndex(spark.read.parquet(left), IndexConfig("lf", ["k"], ["v"]))
        hs.createIndex(spark.read.parquet(right), IndexConfig("rf", ["k2"], ["w"]))
    finally:
        spark.conf.unset("spark.sql.files.maxRecordsPerFile")
    assert hs.index("lf").collect()[0].numFiles > 4
    df = (spark.read.parquet(left).join(spark.read.parquet(right), F.col("k") == F.col("k2"))
          .select("k", "v", "w"))
    assert exchanges(df) == 0 and sorts(df) == 2
    assert df.rdd.getNumPartitions() == 4
    assert_same(spark, df)
    assert joined(hs, df) == {"lf", "rf"}


def sorts(df) -> int:
    """Sort operators in the physical plan of ``df`` (sort-merge joins not counted)."""
    return len(re.findall(r"\bSort \[", df._jdf.queryExecution().executedPlan().toString()))


@pytest.mark.parametrize("key_type, key", KEYS)
@pytest.mark.compat
def test_index_buckets_of_one_sorted_file_join_without_sort(spark, hs, tmp_path, no_broadcast,
                                                           key_type, key):
    left, right = keyed_tables(spark, tmp_path, key_type, key)
    hs.createIndex(spark.read.parquet(left), IndexConfig("ls", ["k"], ["v"]))
    hs.createIndex(spark.read.parquet(right), IndexConfig("rs", ["k2"], ["w"]))
    query = lambda: (spark.read.parquet(left)  # noqa: E731
                     .join(spark.read.parquet(right), F.col("k") == F.col("k2"))
                     .select("k", "v", "w"))
    df = query()
    assert exchanges(df) == 0 and sorts(df) == 0
    assert df._jdf.queryExecution().executedPlan().toString().count("SortedBucketScan") == 2
    assert_same(spark, df)
    assert joined(hs, df) == {"ls", "rs"}
    # a lookup needs no buckets: the index is read as plain files (the one bucket's file)
    lookup = spark.read.parquet(left).filter(F.col("k") == key(1)).select("v")
    plan = lookup._jdf.queryExecution().executedPlan().toString()
    assert "SortedBucketScan" not in plan and "Bucketed: true" not in plan
    assert "PrunedFileIndex(1 paths)" in plan
    assert_same(spark, lookup)
    # an incremental refresh adds a delta file: its rows alone are hash-partitioned into the
    # buckets and joined with them through a bucket union, which the join sorts
    spark.createDataFrame([(1000 + i, key(i + 3), f"n{i}") for i in range(60)],
                          f"id long, k {key_type}, v string").write.mode("append").parquet(left)
    hs.refreshIndex("ls", mode="incremental")
    df = query()
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert exchanges(df) == 1 and sorts(df) == 1
    # (on Spark 4.0, through Spark's Union, which the join shuffles whole)
    assert ("BucketUnion" in plan and "REPARTITION_BY_NUM" in plan) == bucket_union(spark)
    assert_same(spark, df)
    assert joined(hs, df) == {"ls", "rs"}
    # a full optimization compacts each bucket into one sorted file again
    hs.optimizeIndex("ls", mode="full")
    df = query()
    assert exchanges(df) == 0 and sorts(df) == 0
    assert_same(spark, df)


def test_bucket_groups_fit_the_cluster():
    from indexes.covering.join_match import bucket_groups
    assert bucket_groups(8, cores=2, index_bytes=10 << 20) == 8        # few: as they are
    assert bucket_groups(32, cores=2, index_bytes=10 << 20) == 32
    assert bucket_groups(200, cores=2, index_bytes=10 << 20) == 8      # 4 per core
    assert bucket_groups(200, cores=2, index_bytes=3 << 30) == 50      # <= 64 MB a task
    assert bucket_groups(210, cores=2, index_bytes=0) == 10            # a divisor of 210
    assert bucket_groups(200, cores=64, index_bytes=0) == 200          # a large cluster


@pytest.mark.parametrize("key_type, key", KEYS)
def test_bucket_counts_that_divide_join_in_the_smaller_counts_groups(spark, hs, tmp_path,
                                                                     no_broadcast, key_type, key):
    """8 buckets against 4: the 8-bucket side is read in 4 groups (bucket b in group b mod 4,
    the rows a hash partitioning into 4 puts in partition b mod 4) and sorted, the 4-bucket side
    as it is; no exchange. Appended files (hybrid scan) would be hashed into each side's own
    bucket count, so then the pair is left alone."""
    left, right = keyed_tables(spark, tmp_path, key_type, key)
    hs.createIndex(spark.read.parquet(left), IndexConfig("l8", ["k"], ["v"], numBuckets=8))
    hs.createIndex(spark.read.parquet(right), IndexConfig("r4", ["k2"], ["w"], numBuckets=4))
    query = lambda: (spark.read.parquet(left)  # noqa: E731
                     .join(spark.read.parquet(right), F.col("k") == F.col("k2"))
                     .select("k", "v", "w"))
    df = query()
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert exchanges(df) == 0 and sorts(df) == 1
    assert "SelectedBucketsCount: 8 out of 8 (Coalesced to 4)" in plan
    assert "SelectedBucketsCount: 4 out of 4" in plan and plan.count("Coalesced") == 1
    assert df.rdd.getNumPartitions() == 4
    assert_same(spark, df)
    assert joined(hs, df) == {"l8", "r4"}
    spark.createDataFrame([(1000 + i, key(i + 3), f"n{i}") for i in range(30)],
                          f"id long, k {key_type}, v string").write.mode("append").parquet(left)
    df = query()
    assert_same(spark, df)
    assert joined(hs, df) == set()
    assert "bucket count" in " ".join(r.reason for r in hs.whyNot(df, "l8"))


def test_default_bucket_count_fits_the_index_and_the_shuffle_partitions(spark, hs, tables):
    """Without numBuckets in the config or the session, a new index gets a power of two: the
    shuffle partitions while each bucket holds 1 MB, more where one would pass 128 MB (Spark's
    size estimates, scaled here by fileCompressionFactor); two such indexes join."""
    left, right = tables
    counts = {}
    with session_conf(spark, spark__accelerator__index__numBuckets="auto",
                      spark__sql__shuffle__partitions="2"):
        hs.createIndex(spark.read.parquet(right), IndexConfig("tiny", ["k2"], ["w"]))
        with session_conf(spark, spark__sql__sources__fileCompressionFactor="2000"):
            hs.createIndex(spark.read.parquet(right), IndexConfig("small", ["k2"], ["w"]))
        with session_conf(spark, spark__sql__sources__fileCompressionFactor="200000"):
            hs.createIndex(spark.read.parquet(left), IndexConfig("big", ["k"], ["v"]))
        counts = {r.name: r.numBuckets for r in hs.indexes().collect()}
        hs.deleteIndex("tiny")
        df = (spark.read.parquet(left).join(spark.read.parquet(right), F.col("k") == F.col("k2"))
              .select("k", "v", "w"))
        assert joined(hs, df) == {"big", "small"}
        assert exchanges(df) == 0 and df.rdd.getNumPartitions() == 2
        assert_same(spark, df)
    sizes = {r.name: r.sizeInBytes for r in hs.indexes().collect()}
    assert counts["tiny"] == 1                     # under 1 MB: one bucket
    assert counts["small"] == 2                    # the shuffle partitions
    assert counts["big"] > 2 and counts["big"] & (counts["big"] - 1) == 0, (counts, sizes)
    hs.createIndex(spark.read.parquet(left), IndexConfig("session", ["k"], ["v"]))
    assert hs.index("session").collect()[0].numBuckets == 4     # the session's setting
