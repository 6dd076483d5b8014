"""Bucket pruning of covering-index lookups: an equality, IN or null-safe equality on the
(single) bucket column opens only the files of the buckets its values can be in. Where no
operator keys on that column, the accelerator chooses those files itself and reads the index as
plain files (a `PrunedFileIndex` in the plan); otherwise the filter rule reads the index as a
bucketed relation and Spark computes the buckets, even where it plans the scan unbucketed
(`Bucketed: false (disabled by query planner)` in the plan, no `SelectedBucketsCount`; the
scan's `numFiles` metric counts the files before pruning). These tests look at the files the
scan's partitions hold and compare them with the buckets Spark's own hash gives the looked-up
values; results always equal vanilla Spark's."""
from __future__ import annotations

import os
import re

import pytest
from pyspark.sql import functions as F

from accelerator import Hyperspace, IndexConfig
from tests.helpers import own_copy, rows, session_conf, vanilla

SCHEMA = "k long, s string, v string, n struct<b:int, c:string>"
BUCKETS = 4      # the test session's spark.accelerator.index.numBuckets
ALL = set(range(BUCKETS))


@pytest.fixture(scope="module")
def written(spark, tmp_path_factory):
    """The source, written once for the module (each test gets a copy: ``source``)."""
    base = tmp_path_factory.mktemp("written")
    data = [(i, f"s{i % 37}", f"v{i}", (i % 23, f"c{i}")) for i in range(400)]
    data += [(None, None, "null-key", None)]
    spark.createDataFrame(data, SCHEMA).repartition(3).write.parquet(str(base / "src"))
    return base


@pytest.fixture
def source(written, tmp_path):
    (path,) = own_copy(written, tmp_path, "src")
    return path


def scanned(df, index: str) -> tuple[set[int], list[str]]:
    """(bucket ids of the index's bucket files the plan's file scans open, the other files
    they open: source files, the index's delta files)."""
    buckets, others = set(), []
    pending = [df._jdf.queryExecution().executedPlan()]
    while pending:
        node = pending.pop()
        if node.getClass().getSimpleName() == "FileSourceScanExec":
            for partition in node.inputRDD().partitions():
                for f in partition.files():
                    path = str(f.filePath())
                    bucket = re.fullmatch(r"part-.*_(\d+)\..*", os.path.basename(path))
                    if f"/{index}/v__=" in path and bucket:
                        buckets.add(int(bucket.group(1)))
                    else:
                        others.append(path)
        children = node.children().iterator()
        while children.hasNext():
            pending.append(children.next())
    return buckets, others


def expected_buckets(spark, values, type_: str) -> set[int]:
    """The buckets Spark's bucketing hash puts ``values`` (as ``type_``) in."""
    df = spark.createDataFrame([(v,) for v in values], f"x {type_}")
    return {r[0] for r in df.select(F.expr(f"pmod(hash(x), {BUCKETS})")).collect()}


def lookup(spark, path, condition, columns=("k", "v")):
    return spark.read.parquet(path).where(condition).select(*columns)


@pytest.mark.parametrize("condition, keys", [
    ("k = 5", [5]),
    ("k IN (5, 17, 301)", [5, 17, 301]),
    ("k <=> 5", [5]),
    ("k <=> NULL", [None]),
    ("k IS NULL", [None]),
    ("k = CAST(5 AS INT)", [5]),          # an int literal against the long column
    ("k = '5'", [5]),                      # a string literal Spark casts to the column's type
])
def test_key_lookups_read_only_the_matching_buckets(spark, hs, source, condition, keys):
    hs.createIndex(spark.read.parquet(source), IndexConfig("ix", ["k"], ["v"]))
    build = lambda: lookup(spark, source, condition)  # noqa: E731
    assert rows(build()) == vanilla(spark, build)
    assert rows(build())                                 # the lookup finds rows
    buckets, others = scanned(build(), "ix")
    assert buckets == expected_buckets(spark, keys, "long") and others == []
    assert len(buckets) < BUCKETS


@pytest.mark.parametrize("type_, values", [
    ("int", [0, 1, -7, 2147483647, None]),
    ("string", ["", "a", "ü€", "s17", None]),
    ("date", ["1970-01-01", "2024-02-29", "1899-12-31", None]),
    ("decimal(10,2)", ["0.00", "1.50", "-99999999.99", None]),
    ("double", ["0.0", "-0.0", "1.5", "NaN", None]),
    ("timestamp", ["2024-03-10 02:30:00", "1960-01-01 00:00:00.000001", None]),
])
def test_lookups_choose_their_buckets_as_spark_hashes_each_type(spark, hs, tmp_path, type_, values):
    """Where no operator keys on the column, the accelerator chooses the buckets of an
    equality's value itself (the index read as plain files): Spark's hash of every value."""
    path = str(tmp_path / "typed")
    literal = lambda v: "NULL" if v is None else f"CAST('{v}' AS {type_})"  # noqa: E731
    spark.sql(" UNION ALL ".join(f"SELECT {literal(v)} AS x, {i} AS n" for i, v in enumerate(values))) \
        .repartition(2).write.parquet(path)
    hs.createIndex(spark.read.parquet(path), IndexConfig("ix", ["x"], ["n"]))
    for v in values:
        condition = "x IS NULL" if v is None else f"x = {literal(v)}"
        build = lambda: spark.read.parquet(path).where(condition).select("x", "n")  # noqa: E731
        assert repr(rows(build())) == repr(vanilla(spark, build))    # NaN equal to NaN
        assert rows(build())
        plan = build()._jdf.queryExecution().executedPlan().toString()
        # IS NULL is left to Spark's bucket pruning
        assert ("PrunedFileIndex" in plan) == (v is not None)
        expected = expected_buckets(spark, [None if v is None else spark.sql(
            f"SELECT {literal(v)}").first()[0]], type_)
        assert scanned(build(), "ix") == (expected, [])


def test_a_lookup_an_operator_keys_on_stays_bucketed(spark, hs, source):
    """A grouping on the looked-up column reads the index bucketed (no shuffle): Spark then
    prunes the buckets."""
    hs.createIndex(spark.read.parquet(source), IndexConfig("ix", ["k"], ["v"]))
    build = lambda: spark.read.parquet(source).where("k IN (5, 17)").groupBy("k").count()  # noqa: E731
    assert rows(build()) == vanilla(spark, build)
    with session_conf(spark, spark__sql__adaptive__enabled="false"):   # the scan in the plan
        plan = build()._jdf.queryExecution().executedPlan().toString()
        assert "Exchange" not in plan and "PrunedFileIndex" not in plan
        assert scanned(build(), "ix") == (expected_buckets(spark, [5, 17], "long"), [])


def test_without_the_bucket_spec_every_bucket_is_read(spark, hs, source):
    hs.createIndex(spark.read.parquet(source), IndexConfig("ix", ["k"], ["v"]))
    build = lambda: lookup(spark, source, "k = 5")  # noqa: E731
    with session_conf(spark, spark__accelerator__index__filterRule__useBucketSpec="false"):
        assert scanned(build(), "ix")[0] == ALL
        assert rows(build()) == vanilla(spark, build)


@pytest.mark.parametrize("condition, keys", [
    ("s = 's3'", ["s3"]),
    ("s IN ('s3', 'S3', 'x')", ["s3", "S3", "x"]),     # Spark hashes every value it lists
    ("s <=> 's3'", ["s3"]),
])
def test_string_keys(spark, hs, source, condition, keys):
    hs.createIndex(spark.read.parquet(source), IndexConfig("ix", ["s"], ["v"]))
    build = lambda: lookup(spark, source, condition, ("s", "v"))  # noqa: E731
    assert rows(build()) == vanilla(spark, build)
    assert scanned(build(), "ix") == (expected_buckets(spark, keys, "string"), [])


def test_nested_key(spark, hs, source):
    hs.createIndex(spark.read.parquet(source), IndexConfig("ix", ["n.b"], ["v"]))
    build = lambda: spark.read.parquet(source).where("n.b = 7").select("n.b", "v")  # noqa: E731
    assert rows(build()) == vanilla(spark, build)
    assert scanned(build(), "ix")[0] == expected_buckets(spark, [7], "int")


@pytest.mark.parametrize("config, condition, read", [
    (("k", "s"), "s = 's3'", set()),           # not the first indexed column: index not used
    (("k", "s"), "k = 5 AND s = 's5'", ALL),   # two bucket columns: Spark prunes by one only
    (("k",), "k > 390", ALL),                  # a range
    (("k",), "k + 1 = 6", ALL),                # an expression of the column
    (("k",), "k = 5 OR v = 'v6'", ALL),        # a disjunction with another column
])
def test_other_filters_do_not_prune_and_stay_correct(spark, hs, source, config, condition, read):
    included = [c for c in ("k", "s", "v") if c not in config]
    hs.createIndex(spark.read.parquet(source), IndexConfig("ix", list(config), included))
    build = lambda: lookup(spark, source, condition, ("k", "s", "v"))  # noqa: E731
    assert rows(build()) == vanilla(spark, build)
    assert rows(build())
    assert scanned(build(), "ix")[0] == read


def test_appended_files_are_read_next_to_the_matching_bucket(spark, hs, source):
    hs.createIndex(spark.read.parquet(source), IndexConfig("ix", ["k"], ["v"]))
    spark.createDataFrame([(5, "s", "appended", (1, "c"))], SCHEMA).coalesce(1) \
        .write.mode("append").parquet(source)
    build = lambda: lookup(spark, source, "k = 5")  # noqa: E731
    assert rows(build()) == vanilla(spark, build) == [(5, "appended"), (5, "v5")]
    buckets, others = scanned(build(), "ix")
    assert buckets == expected_buckets(spark, [5], "long") and len(others) == 1


def test_deleted_files_and_delta_files_with_lineage(spark, hs, source):
    with session_conf(spark, spark__accelerator__index__lineage__enabled="true"):
        hs.createIndex(spark.read.parquet(source), IndexConfig("ix", ["k"], ["v"]))
    spark.createDataFrame([(5, "s", "appended", (1, "c"))], SCHEMA).coalesce(1) \
        .write.mode("append").parquet(source)
    hs.refreshIndex("ix", mode="incremental")          # the appended row: a delta file
    victim = next(f for f in sorted(os.listdir(source)) if f.endswith(".parquet")
                  and spark.read.parquet(os.path.join(source, f)).where("k = 6").count())
    os.remove(os.path.join(source, victim))            # key 6's rows are deleted
    with session_conf(spark, spark__accelerator__index__hybridScan__maxDeletedRatio="0.9"):
        for condition, keys in (("k = 5", [5]), ("k IN (5, 6)", [5, 6])):
            build = lambda: lookup(spark, source, condition)  # noqa: E731
            assert rows(build()) == vanilla(spark, build) == [(5, "appended"), (5, "v5")]
            buckets, others = scanned(build(), "ix")
            assert buckets == expected_buckets(spark, keys, "long")
            assert [os.path.basename(f)[:6] for f in others] == ["delta-"]
            plan = build()._jdf.queryExecution().executedPlan().toString()
            assert "Not(In(_data_file_id" in plan


@pytest.mark.parametrize("condition", ["v <> 'v7'", "k IN (3, 4)"])
def test_joins_of_two_indexes_stay_unshuffled(spark, hs, tmp_path, condition):
    left, right = str(tmp_path / "left"), str(tmp_path / "right")
    spark.createDataFrame([(i % 50, f"v{i}") for i in range(400)], "k long, v string") \
        .repartition(4).write.parquet(left)
    spark.createDataFrame([(i % 70, f"w{i}") for i in range(300)], "k2 long, w string") \
        .repartition(3).write.parquet(right)
    hs.createIndex(spark.read.parquet(left), IndexConfig("li", ["k"], ["v"]))
    hs.createIndex(spark.read.parquet(right), IndexConfig("ri", ["k2"], ["w"]))
    with session_conf(spark, spark__sql__autoBroadcastJoinThreshold="-1"):
        build = lambda: (spark.read.parquet(left).where(condition)  # noqa: E731
                         .join(spark.read.parquet(right), F.col("k") == F.col("k2"))
                         .select("k", "v", "w"))
        plan = build()._jdf.queryExecution().executedPlan().toString()
        assert rows(build()) == vanilla(spark, build)
        assert rows(build())
        assert plan.count("Exchange") == 0 and "SortMergeJoin" in plan
        assert {r.index for r in hs.whyNot(build()) if r.code == "APPLIED"} == {"li", "ri"}
        Hyperspace.disable(spark)
        try:
            assert build()._jdf.queryExecution().executedPlan().toString().count("Exchange") == 2
        finally:
            Hyperspace.enable(spark)


def test_a_lookup_reads_a_small_part_of_a_large_bucket_file(spark, hs, tmp_path):
    """One bucket file of ~14 MB whose included column has 500,000 distinct values, four rows
    each: the file is written in row groups of at most 8 MB, and a key lookup reads the page
    indexes, the dictionary page (at most 64 KB) and the data pages of one row group only, not
    a 1 MB dictionary page per row group."""
    import pyarrow.parquet as pq
    from bench.harness import scan_stats
    path = str(tmp_path / "large")
    value = lambda ids: F.xxhash64(F.floor(ids / 4))
    (spark.range(2_000_000).select(F.col("id").alias("k"), value(F.col("id")).alias("v"))
     .repartition(2).write.parquet(path))
    hs.createIndex(spark.read.parquet(path), IndexConfig("idx_large", ["k"], ["v"], numBuckets=1))
    query = lambda: lookup(spark, path, "k = 777777")
    buckets, others = scanned(query(), "idx_large")
    assert (buckets, others) == ({0}, [])
    files = [f for f in query().inputFiles() if "/idx_large/v__=" in f]
    local = [f.replace("file://", "").replace("file:", "") for f in files]
    size = sum(os.path.getsize(f) for f in local)
    assert size > 12 * 1024 * 1024
    assert all(pq.ParquetFile(f).metadata.num_row_groups >= 2 for f in local)
    expected = spark.range(777777, 777778).select("id", value(F.col("id")))
    assert rows(query()) == vanilla(spark, query) == rows(expected)
    assert scan_stats(spark, query())["bytes_read"] < 512 * 1024     # 1.3 MB before
