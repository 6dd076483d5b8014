"""Skipping below the file: a data-skipping index over Parquet files of several row groups keeps
statistics per row group, a text index knows the rows holding its literals, and a query reads
only the row groups of kept files that may hold its rows (Spark's own Parquet reader, given
each kept row group's byte range). Results are always vanilla Spark's; the rows the scan reads
show which row groups were read (with Spark's own Parquet filter pushdown off where it would
prune the same row groups by their footers)."""
from __future__ import annotations

import os
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from accelerator import (BloomFilterSketch, DataSkippingIndexConfig, MinMaxSketch,
                         TextIndexConfig, ValueListSketch)
from indexes.skipping.footers import row_group_layout
from indexes.skipping.ir import Cmp, Lit, Sketched
from indexes.skipping.match import kept_row_groups
from indexes.skipping.stats import ColumnStats, FileStats, SketchSpec
from indexes.skipping.store import FileEntry, RowGroup, decode, encode
from tests.helpers import own_copy, row_groups_of, rows, session_conf, vanilla

ROW_GROUP = 1000


# --- without a JVM ----------------------------------------------------------------------------
@pytest.mark.parametrize("dictionary", [True, False])
def test_layout_places_each_midpoint_in_its_own_range(tmp_path, dictionary):
    path = str(tmp_path / "f.parquet")
    table = pa.table({"k": [i // 7 for i in range(5000)], "s": [f"v{i % 50}" for i in range(5000)]})
    pq.write_table(table, path, row_group_size=1200, use_dictionary=dictionary)
    meta = pq.ParquetFile(path).metadata
    layout = row_group_layout(meta, os.path.getsize(path))
    assert layout.first_rows == (0, 1200, 2400, 3600, 4800)
    assert layout.ranges[0][0] == 4   # after the magic bytes
    for (start, end), (next_start, _) in zip(layout.ranges, layout.ranges[1:]):
        assert end == next_start
    for g, (start, end) in enumerate(layout.ranges):
        group = meta.row_group(g)
        midpoint = start + sum(group.column(j).total_compressed_size
                               for j in range(group.num_columns)) // 2
        assert start <= midpoint < end


def test_layout_of_one_row_group_is_none(tmp_path):
    path = str(tmp_path / "f.parquet")
    pq.write_table(pa.table({"k": list(range(100))}), path)
    assert row_group_layout(pq.ParquetFile(path).metadata, 1000) is None


def _stats(lo: int, hi: int, rows: int = 10) -> FileStats:
    return FileStats(rows, {"k": ColumnStats("long", lo, hi, 0)})


def test_row_groups_survive_the_store_and_old_tables_have_none():
    specs = [SketchSpec("k", "long", minmax=True)]
    groups = (RowGroup(4, 100, _stats(0, 9)), RowGroup(100, 250, _stats(10, 19)))
    files = {"file:/a": FileEntry(300, 7, _stats(0, 19, 20), groups),
             "file:/b": FileEntry(50, 8, _stats(30, 39))}
    back = decode(specs, encode(specs, files))
    assert back == files
    old = pq.read_table(pa.BufferReader(encode(specs, files)))
    old = old.filter(pa.compute.is_null(old.column("row_group"))).drop_columns(
        ["row_group", "start", "end"])
    sink = pa.BufferOutputStream()
    pq.write_table(old, sink)
    assert decode(specs, sink.getvalue().to_pybytes()) == {
        p: FileEntry(e.size, e.mtime, e.stats) for p, e in files.items()}


def test_kept_row_groups_only_where_some_are_skipped():
    key = Sketched("k", "long")
    equal_15 = Cmp("=", key, Lit(15, "long"))
    groups = (RowGroup(4, 100, _stats(0, 9)), RowGroup(100, 250, _stats(10, 19)),
              RowGroup(250, 400, FileStats(None, {})))
    judged = {"a": FileEntry(400, 1, _stats(0, 19), groups),
              "b": FileEntry(400, 1, _stats(0, 19), groups[:2]),
              "c": FileEntry(400, 1, _stats(10, 19), (groups[1], groups[1])),
              "d": FileEntry(400, 1, _stats(0, 19))}
    assert kept_row_groups(equal_15, judged, ["a", "b", "c", "d"]) == {
        "a": groups[1:], "b": groups[1:2]}
    equal_25 = Cmp("=", key, Lit(25, "long"))
    assert kept_row_groups(equal_25, judged, ["b"]) == {"b": ()}


# --- with Spark -------------------------------------------------------------------------------
def scan_rows(df) -> int:
    """The rows the query's file scans output (what the Parquet reader read)."""
    df.collect()
    total, pending = 0, [df._jdf.queryExecution().executedPlan()]
    while pending:
        node = pending.pop()
        if node.nodeName().startswith("Scan") or "FileScan" in node.nodeName():
            total += int(node.metrics().apply("numOutputRows").value())
        children = node.children()
        pending.extend(children.apply(i) for i in range(children.size()))
    return total


def physical(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


@pytest.fixture(scope="module")
def written(spark, tmp_path_factory):
    """The clustered events, written once for the module (see ``clustered_path``)."""
    base = tmp_path_factory.mktemp("written")
    path = str(base / "clustered")
    for condition in ("id < 2000 or id between 4000 and 7999", "id >= 8000"):
        ids = spark.range(0, 14000, 1, 1).where(condition)
        df = ids.select("id", (F.col("id") % 97).alias("bucket"),
                        F.to_json(F.struct(F.col("id").alias("t"), F.lit("x").alias("kind")))
                        .alias("payload"))
        (df.write.mode("append").options(**row_groups_of(ROW_GROUP))
         .parquet(path))
    return base


@pytest.fixture
def clustered_path(written, tmp_path):
    """A test's copy of two files of 6,000 events, each in row groups of ROW_GROUP rows,
    clustered by id, with a JSON payload holding the id as text; file 0 has a gap of ids
    (2,000-3,999)."""
    (path,) = own_copy(written, tmp_path, "clustered")
    return path


@pytest.mark.compat
def test_plain_column_reads_only_matching_row_groups(spark, hs, clustered_path):
    hs.createIndex(spark.read.parquet(clustered_path),
                   DataSkippingIndexConfig("rg_plain", MinMaxSketch("id")))
    assert hs.context.lifecycle().get("rg_plain").content["rowGroupFiles"] == 2

    def q(condition):
        return spark.read.parquet(clustered_path).where(condition)
    with session_conf(spark, **{"spark.sql.parquet.filterPushdown": "false"}):
        narrow = "id between 4500 and 4600"
        assert rows(q(narrow)) == vanilla(spark, lambda: q(narrow))
        assert scan_rows(q(narrow)) == ROW_GROUP
        assert "row groups selected in 1 files" in physical(q(narrow))
        assert "1 row groups read in 1 files" in hs.explain(
            q(narrow), redirectFunc=lambda _: None)
        wide = "id between 5500 and 9500"
        assert rows(q(wide)) == vanilla(spark, lambda: q(wide))
        assert scan_rows(q(wide)) == 5 * ROW_GROUP
        with session_conf(spark, **{"spark.accelerator.enabled": "false"}):
            assert scan_rows(q(wide)) == 12 * ROW_GROUP


def test_a_file_whose_row_groups_all_miss_is_not_read(spark, hs, clustered_path):
    hs.createIndex(spark.read.parquet(clustered_path),
                   DataSkippingIndexConfig("rg_gap", MinMaxSketch("id")))
    q = spark.read.parquet(clustered_path).where("id = 3000")   # in file 0's bounds, no group
    assert rows(q) == [] == vanilla(spark, lambda: spark.read.parquet(clustered_path)
                                    .where("id = 3000"))
    assert q.inputFiles() == []


def test_json_path_statistics_per_row_group_from_the_scan(spark, hs, clustered_path):
    hs.createIndex(spark.read.parquet(clustered_path), DataSkippingIndexConfig(
        "rg_json", MinMaxSketch("cast(get_json_object(payload, '$.t') as bigint)"),
        ValueListSketch("bucket", maxValues=200)))
    entry = hs.context.lifecycle().get("rg_json")
    assert entry.content["scannedSketches"] and entry.content["rowGroupFiles"] == 2

    def window():
        return spark.read.parquet(clustered_path).where(
            "cast(get_json_object(payload, '$.t') as bigint) between 10100 and 10200")
    assert rows(window()) == vanilla(spark, window)
    assert scan_rows(window()) == ROW_GROUP
    both = lambda: window().where("bucket = 5")   # noqa: E731
    assert rows(both()) == vanilla(spark, both)


def test_bloom_filters_per_row_group_read_only_the_group_holding_the_value(spark, hs,
                                                                          clustered_path):
    """A hash of the id: unclustered, so no row group's min/max excludes it; each row group
    has its own Bloom filter (sized by its rows), so a lookup reads the one holding it."""
    df = spark.read.parquet(clustered_path).withColumn("h", F.sha1(F.col("id").cast("string")))
    path = clustered_path + "_hashed"
    df.write.options(**row_groups_of(ROW_GROUP)).parquet(path)
    hs.createIndex(spark.read.parquet(path), DataSkippingIndexConfig(
        "rg_bloom", BloomFilterSketch("h", expectedDistinctCountPerFile=20000, fpp=0.001)))
    target = spark.read.parquet(path).where("id = 4321").first().h

    def q(value):
        return spark.read.parquet(path).where(F.col("h") == value)
    with session_conf(spark, **{"spark.sql.parquet.filterPushdown": "false"}):
        assert rows(q(target)) == vanilla(spark, lambda: q(target)) != []
        assert scan_rows(q(target)) == ROW_GROUP
        assert "1 row groups read in 1 files" in hs.explain(q(target), redirectFunc=lambda _: None)
        missing = "0" * 40
        assert rows(q(missing)) == [] == vanilla(spark, lambda: q(missing))
        assert q(missing).inputFiles() == []


@pytest.mark.parametrize("vectorized", ["true", "false"])
@pytest.mark.compat
def test_splits_of_a_file_read_each_kept_row_group_once(spark, hs, clustered_path, vectorized):
    hs.createIndex(spark.read.parquet(clustered_path),
                   DataSkippingIndexConfig("rg_split", MinMaxSketch("id")))
    with session_conf(spark, **{"spark.sql.files.maxPartitionBytes": "4096",
                                "spark.sql.files.openCostInBytes": "0",
                                "spark.sql.parquet.filterPushdown": "false",
                                "spark.sql.parquet.enableVectorizedReader": vectorized}):
        def q():
            return spark.read.parquet(clustered_path).where(
                "id between 4900 and 5100 or id between 12500 and 12600")
        assert rows(q()) == vanilla(spark, q)
        assert q().rdd.getNumPartitions() > 4
        assert scan_rows(q()) == 3 * ROW_GROUP


def test_metadata_columns_read_whole_files(spark, hs, clustered_path):
    hs.createIndex(spark.read.parquet(clustered_path),
                   DataSkippingIndexConfig("rg_meta", MinMaxSketch("id")))

    def q():
        return (spark.read.parquet(clustered_path).where("id between 4500 and 4600")
                .select("id", "_metadata.file_block_start", "_metadata.file_block_length",
                        "_metadata.row_index"))
    assert rows(q()) == vanilla(spark, q)
    assert "row groups selected" not in physical(q())
    reasons = hs.whyNot(q(), "rg_meta")
    assert [r.code for r in reasons] == ["SOURCE_CHANGED"]
    assert "reads the file metadata column _metadata" in reasons[0].reason


def test_incremental_refresh_keeps_row_groups_of_unchanged_files(spark, hs, clustered_path):
    hs.createIndex(spark.read.parquet(clustered_path),
                   DataSkippingIndexConfig("rg_refresh", MinMaxSketch("id")))
    (spark.range(20000, 23000).select("id", (F.col("id") % 97).alias("bucket"),
                                      F.lit("{}").alias("payload"))
     .coalesce(1).write.mode("append").options(**row_groups_of(ROW_GROUP))
     .parquet(clustered_path))
    hs.refreshIndex("rg_refresh", "incremental")
    entry = hs.context.lifecycle().get("rg_refresh")
    assert entry.content["reusedFiles"] == 2 and entry.content["rowGroupFiles"] == 1

    def q():
        return spark.read.parquet(clustered_path).where("id = 4321 or id = 21500")
    assert rows(q()) == vanilla(spark, q)
    with session_conf(spark, **{"spark.sql.parquet.filterPushdown": "false"}):
        assert scan_rows(q()) == 2 * ROW_GROUP


def test_random_layouts_and_windows_equal_vanilla(spark, hs, tmp_path):
    """Files written by pyarrow with random row group sizes, dictionaries on or off, values
    sorted or shuffled, nulls; random ranges and IN lists: always vanilla's rows, and never
    more rows read than vanilla."""
    rnd = random.Random(20261125)
    path = tmp_path / "random"
    path.mkdir()
    for f in range(4):
        n = rnd.randrange(500, 4000)
        values = [None if rnd.random() < 0.05 else v
                  for v in (rnd.randrange(f * 10000, f * 10000 + 20000) for _ in range(n))]
        if rnd.random() < 0.7:
            values.sort(key=lambda v: (v is None, v))
        pq.write_table(pa.table({"v": pa.array(values, pa.int64()),
                                 "s": [f"s{i % 13}" for i in range(n)]}),
                       str(path / f"part-{f}.parquet"), row_group_size=rnd.randrange(100, 900),
                       use_dictionary=rnd.random() < 0.5)
    source = str(path)
    hs.createIndex(spark.read.parquet(source), DataSkippingIndexConfig("rg_random", MinMaxSketch("v")))
    selected = 0
    for _ in range(12):
        lo = rnd.randrange(0, 50000)
        condition = rnd.choice([f"v between {lo} and {lo + rnd.randrange(1, 3000)}",
                                f"v in ({lo}, {lo + 777}, {lo + 15000})",
                                f"v = {lo} or v is null"])

        def q():
            return spark.read.parquet(source).where(condition)

        def found(df):
            return sorted(df.collect(), key=lambda r: (r.v is None, r.v or 0, r.s))
        with session_conf(spark, **{"spark.accelerator.enabled": "false"}):
            expected = found(q())
        assert found(q()) == expected, condition
        with session_conf(spark, **{"spark.accelerator.enabled": "false"}):
            read_vanilla = scan_rows(q())
        assert len(expected) <= scan_rows(q()) <= read_vanilla, condition
        selected += "row groups selected" in physical(q())
    assert selected >= 3


def test_text_index_reads_only_row_groups_holding_its_literals(spark, hs, tmp_path):
    path = str(tmp_path / "logs")
    for first in (0, 6000):
        (spark.range(first, first + 6000, 1, 1)
         .select("id", F.expr("CASE WHEN id = 1234 THEN 'disk ERR-4711 full' "
                              "WHEN id % 500 = 7 THEN 'rare-token seen' "
                              "WHEN id % 3 = 0 THEN NULL ELSE concat('ok request ', id) END")
                 .alias("msg"))
         .write.mode("append").options(**row_groups_of(ROW_GROUP)).parquet(path))
    hs.createIndex(spark.read.parquet(path), TextIndexConfig("rg_text", column="msg"))
    assert len(hs.context.lifecycle().get("rg_text").content["rowGroups"]) == 2

    def q(condition):
        return spark.read.parquet(path).where(condition)
    with session_conf(spark, **{"spark.sql.parquet.filterPushdown": "false"}):
        for condition, groups in [("msg like '%ERR-4711%'", 1),
                                  ("msg like '%ERR-4711%' or msg = 'rare-token seen'", 12),
                                  ("msg like '%ERR-4711%' or id = 9000", 12),
                                  ("msg like '%ERR-4711%' and id < 5000", 1),
                                  ("contains(msg, 'ERR-4711') or contains(msg, 'ok request 11999')", 2)]:
            assert rows(q(condition)) == vanilla(spark, lambda: q(condition)), condition
            assert scan_rows(q(condition)) == groups * ROW_GROUP, condition
        assert "1 row groups read in 1 files" in hs.explain(
            q("msg like '%ERR-4711%'"), redirectFunc=lambda _: None)
        negated = "not (msg like '%ERR-4711%')"
        assert rows(q(negated)) == vanilla(spark, lambda: q(negated))
