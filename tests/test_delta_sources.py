"""Delta Lake tables as index sources, by path and by name (run in the table-format lanes:
``-m delta`` on a Spark line with a Delta release; the ``spark`` fixture loads Delta's jar).

What a user relies on: the index is used where it is sound for the version read and the rows
are always those of vanilla Spark; the files come from the Delta log, so files of removed
versions are never read; deletion vectors never let a deleted row through."""
from __future__ import annotations

import shutil
import uuid

import pytest
from pyspark.sql import functions as F

from accelerator import (
    CacheRequestError,
    DataSkippingIndexConfig,
    IndexConfig,
    MinMaxSketch,
    SourceNotFoundError,
    TextIndexConfig,
)
from tests.helpers import rows, session_conf, vanilla

pytestmark = pytest.mark.delta


def write(spark, path, ids, mode="overwrite", files=4):
    (spark.createDataFrame([(i, i % 13, f"s{i}") for i in ids], "id long, k long, s string")
     .repartitionByRange(files, "id").write.format("delta").mode(mode).save(path))


@pytest.fixture
def table(spark, tmp_path):
    """A Delta table of 400 rows in 4 files (ids ranged per file), by path."""
    path = str(tmp_path / "delta")
    write(spark, path, range(400))
    return path


def read(spark, path, **options):
    return spark.read.format("delta").options(**options).load(path)


def index_files(df, index):
    return [f for f in df.inputFiles() if f"/{index}/v__=" in f]


def why(hs, df, index):
    (r,) = hs.whyNot(df, index, redirectFunc=lambda _: None)
    return r


def lookup(spark, path, k=3, **options):
    return read(spark, path, **options).filter(F.col("k") == k).select("id", "s")


def point(spark, path, i=7, **options):
    return read(spark, path, **options).filter(F.col("id") == i).select("id", "k")


def covering(hs, spark, path, name="cov", lineage=False):
    with session_conf(spark, **{"spark.accelerator.index.lineage.enabled": str(lineage).lower()}):
        hs.createIndex(read(spark, path), IndexConfig(name, ["k"], ["id", "s"]))


def skipping(hs, spark, path, name="skip"):
    hs.createIndex(read(spark, path), DataSkippingIndexConfig(name, MinMaxSketch("id")))


def test_covering_index_over_a_delta_path_serves_dataframe_and_sql(spark, hs, table):
    covering(hs, spark, table)
    df = lookup(spark, table)
    assert rows(df) == vanilla(spark, lambda: lookup(spark, table))
    assert len(rows(df)) == 31
    assert df.inputFiles() and df.inputFiles() == index_files(df, "cov")
    sql = f"SELECT id, s FROM delta.`{table}` WHERE k = 3"
    assert rows(spark.sql(sql)) == rows(df) and index_files(spark.sql(sql), "cov")
    entry = hs.index("cov").first()
    assert entry["state"] == "ACTIVE"


def test_data_skipping_over_a_delta_path_reads_only_the_matching_files(spark, hs, table):
    skipping(hs, spark, table)
    df = point(spark, table)
    assert rows(df) == vanilla(spark, lambda: point(spark, table)) == [(7, 7)]
    assert len(df.inputFiles()) == 1
    assert why(hs, df, "skip").code == "APPLIED"


def test_files_of_removed_versions_are_never_indexed_or_read(spark, hs, table):
    write(spark, table, range(1000, 1100), files=2)   # overwrite: the old files stay on disk
    covering(hs, spark, table)
    skipping(hs, spark, table)
    assert hs.index("cov").first()["numFiles"] > 0
    for q in (lambda: lookup(spark, table), lambda: point(spark, table, 1007)):
        assert rows(q()) == vanilla(spark, q)
    assert rows(point(spark, table, 7)) == []
    assert len(point(spark, table, 1007).inputFiles()) == 1
    listed = read(spark, table).inputFiles()
    assert len(listed) == 2


def test_covering_index_over_a_delta_table_by_name(spark, hs, tmp_path):
    name = f"default.d_{uuid.uuid4().hex[:8]}"
    spark.createDataFrame([(i, i % 13, f"s{i}") for i in range(300)], "id long, k long, s string") \
        .repartition(3).write.format("delta").saveAsTable(name)
    try:
        hs.createIndex(spark.table(name), IndexConfig("byname", ["k"], ["id", "s"]))
        sql = f"SELECT id, s FROM {name} WHERE k = 5"
        assert rows(spark.sql(sql)) == vanilla(spark, lambda: spark.sql(sql))
        assert index_files(spark.sql(sql), "byname")
        assert why(hs, spark.sql(sql), "byname").source.startswith(f"table spark_catalog.{name}")
        spark.sql(f"INSERT INTO {name} VALUES (5000, 5, 's5000')")
        assert rows(spark.sql(sql)) == vanilla(spark, lambda: spark.sql(sql))
        assert (5000, "s5000") in rows(spark.sql(sql))
        spark.sql(f"DROP TABLE {name}")
        assert "no longer exists" in hs.indexes().first()["warning"]
        with pytest.raises(SourceNotFoundError, match="no longer exists"):
            hs.refreshIndex("byname")
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {name}")


def test_append_is_read_by_hybrid_scan_then_folded_in_by_incremental_refresh(spark, hs, table):
    covering(hs, spark, table)
    write(spark, table, [2005, 2018], mode="append", files=1)
    assert rows(lookup(spark, table)) == vanilla(spark, lambda: lookup(spark, table))
    assert (2005, "s2005") in rows(lookup(spark, table))
    df = lookup(spark, table)
    assert index_files(df, "cov") and len(df.inputFiles()) == len(index_files(df, "cov")) + 1
    assert "hybrid scan: 1 appended source files" in why(hs, df, "cov").reason
    result = hs.refreshIndex("cov", mode="incremental").first()
    assert result["status"] == "succeeded" and result["filesRead"] == 1
    assert rows(lookup(spark, table)) == vanilla(spark, lambda: lookup(spark, table))
    assert lookup(spark, table).inputFiles() == index_files(lookup(spark, table), "cov")


@pytest.mark.parametrize("statement, skipping_code", [
    ("DELETE FROM delta.`{p}` WHERE id = 16", "APPLIED"),
    ("UPDATE delta.`{p}` SET s = 'changed' WHERE id = 16", "APPLIED"),
    ("MERGE INTO delta.`{p}` t USING (SELECT 16L AS id, 3L AS k, 'merged' AS s "
     "UNION ALL SELECT 9001L, 3L, 'new') u ON t.id = u.id "
     "WHEN MATCHED THEN UPDATE SET s = u.s WHEN NOT MATCHED THEN INSERT *", "APPLIED"),
    ("OPTIMIZE delta.`{p}`", "NO_FILE_SKIPPED"),   # compacted into one file: nothing to skip
])
def test_rewrites_of_files_give_vanillas_rows_before_and_after_refresh(spark, hs, table,
                                                                       statement, skipping_code):
    covering(hs, spark, table, lineage=True)
    skipping(hs, spark, table)
    spark.sql(statement.format(p=table))
    queries = [lambda: lookup(spark, table), lambda: point(spark, table, 16),
               lambda: point(spark, table, 9001)]
    for q in queries:
        assert rows(q()) == vanilla(spark, q)
    hs.refreshIndex("cov", mode="incremental")
    hs.refreshIndex("skip", mode="incremental")
    for q in queries:
        assert rows(q()) == vanilla(spark, q)
    assert index_files(lookup(spark, table), "cov")
    assert why(hs, point(spark, table, 16), "skip").code == skipping_code


def deletion_vectors(spark, path):
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES "
              "('delta.enableDeletionVectors' = 'true')")


def test_deletion_vectors_never_let_a_deleted_row_through(spark, hs, table):
    deletion_vectors(spark, table)
    covering(hs, spark, table, lineage=True)
    skipping(hs, spark, table)
    spark.sql(f"DELETE FROM delta.`{table}` WHERE id IN (7, 16)")
    history = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").first()
    assert int(history["operationMetrics"]["numDeletionVectorsAdded"]) > 0
    assert rows(point(spark, table, 7)) == vanilla(spark, lambda: point(spark, table, 7)) == []
    assert (16, "s16") not in rows(lookup(spark, table))
    assert rows(lookup(spark, table)) == vanilla(spark, lambda: lookup(spark, table))
    assert why(hs, point(spark, table, 7), "skip").code == "DELETION_VECTORS"
    assert not index_files(lookup(spark, table), "cov")
    # a full refresh builds the index over the live rows: the covering index serves again
    hs.refreshIndex("cov", mode="full")
    assert index_files(lookup(spark, table), "cov")
    assert rows(lookup(spark, table)) == vanilla(spark, lambda: lookup(spark, table))
    assert (16, "s16") not in rows(lookup(spark, table))


def test_time_travel_uses_an_index_only_for_the_version_it_holds(spark, hs, table):
    covering(hs, spark, table)
    write(spark, table, [4995], mode="append", files=1)      # version 1
    old = lambda: lookup(spark, table, versionAsOf=0)
    new = lambda: lookup(spark, table, versionAsOf=1)
    assert rows(old()) == vanilla(spark, old) and (4995, "s4995") not in rows(old())
    assert old().inputFiles() == index_files(old(), "cov")
    assert rows(new()) == vanilla(spark, new) and (4995, "s4995") in rows(new())
    hs.refreshIndex("cov", mode="full")                          # now over version 1
    assert rows(old()) == vanilla(spark, old) and not index_files(old(), "cov")
    assert rows(new()) == vanilla(spark, new) and index_files(new(), "cov")


def test_a_delta_table_is_not_taken_for_its_directory_of_parquet_files(spark, hs, table):
    covering(hs, spark, table)
    write(spark, table, range(10), files=1)   # overwrite: old files stay in the directory
    plain = lambda: spark.read.parquet(table).filter(F.col("k") == 3).select("id", "s")
    assert rows(plain()) == vanilla(spark, plain)
    assert not index_files(plain(), "cov")


def served_from_cache(df) -> bool:
    return "CachedFileIndex" in df._jdf.queryExecution().executedPlan().toString()


def test_the_cache_serves_a_delta_tables_files_and_never_a_file_of_another_version(
        spark, hs, table):
    q = lambda: read(spark, table).filter(F.col("k") < 5).select("id", "s")
    summary = hs.cache(read(spark, table).select("id", "k", "s")).first()
    assert summary.files == 4
    assert served_from_cache(q()) and rows(q()) == vanilla(spark, q)
    write(spark, table, range(500, 600), files=2)   # a new version: other files
    assert not served_from_cache(q()) and rows(q()) == vanilla(spark, q)
    assert all(r[0] >= 500 for r in rows(q()))
    old = lambda: read(spark, table, versionAsOf=0).filter(F.col("k") < 5).select("id", "s")
    assert served_from_cache(old()) and rows(old()) == vanilla(spark, old)


def test_the_cache_leaves_files_with_deletion_vectors_to_deltas_own_scan(spark, hs, table):
    q = lambda: read(spark, table).filter(F.col("k") == 3).select("id", "s")
    hs.cache(read(spark, table).select("id", "k", "s"))
    deletion_vectors(spark, table)
    spark.sql(f"DELETE FROM delta.`{table}` WHERE id = 16")
    assert (16, "s16") not in rows(q()) and rows(q()) == vanilla(spark, q)
    assert not served_from_cache(q())
    (r,) = [r for r in hs.whyNot(q(), "cache", redirectFunc=lambda _: None)]
    assert r.code == "TABLE_FORMAT" and "carry deletion vectors" in r.reason
    with pytest.raises(CacheRequestError, match="carry deletion vectors"):
        hs.cache(read(spark, table))


def test_column_mapping_indexes_address_the_logical_columns(spark, hs, table):
    spark.sql(f"ALTER TABLE delta.`{table}` SET TBLPROPERTIES ('delta.columnMapping.mode' = "
              "'name', 'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5')")
    # the old files hold the logical column `key` under the physical name `k`, and no `k`
    spark.sql(f"ALTER TABLE delta.`{table}` RENAME COLUMN k TO key")
    spark.sql(f"ALTER TABLE delta.`{table}` ADD COLUMNS (k long)")
    spark.sql(f"INSERT INTO delta.`{table}` VALUES (7000, 3, 's7000', 3)")
    hs.createIndex(read(spark, table), DataSkippingIndexConfig("skip", MinMaxSketch("k")))
    hs.createIndex(read(spark, table), IndexConfig("cov", ["key"], ["id", "s"]))
    nulls = lambda: read(spark, table).filter(F.col("k").isNull()).select("id")
    assert sorted(rows(nulls())) == sorted(vanilla(spark, nulls))
    assert len(rows(nulls())) == 400
    by_k = lambda: read(spark, table).filter(F.col("k") == 3).select("id", "s")
    assert rows(by_k()) == vanilla(spark, by_k) == [(7000, "s7000")]
    assert len(by_k().inputFiles()) == 1
    by_key = lambda: read(spark, table).filter(F.col("key") == 3).select("id", "s")
    assert rows(by_key()) == vanilla(spark, by_key)
    assert len(rows(by_key())) == 32 and index_files(by_key(), "cov")
    with pytest.raises(CacheRequestError, match="column mapping mode name"):
        hs.cache(read(spark, table))


def test_partitioned_delta_table_keeps_partition_pruning_under_the_indexes(spark, hs, tmp_path):
    path = str(tmp_path / "parted")
    (spark.createDataFrame([(i, i % 13, f"s{i}", f"p{i % 3}") for i in range(600)],
                           "id long, k long, s string, p string")
     .repartitionByRange(6, "id").write.format("delta").partitionBy("p").save(path))
    hs.createIndex(read(spark, path), IndexConfig("cov", ["k"], ["id", "s", "p"]))
    skipping(hs, spark, path)
    q = lambda: read(spark, path).filter((F.col("p") == "p1") & (F.col("k") == 3)).select("id", "s")
    assert rows(q()) == vanilla(spark, q) and index_files(q(), "cov")
    one = lambda: read(spark, path).filter((F.col("p") == "p1") & (F.col("id") == 301)).select("id")
    assert rows(one()) == vanilla(spark, one) == [(301,)]
    assert len(one().inputFiles()) == 1 and "/p=p1/" in one().inputFiles()[0]


def test_text_index_over_a_delta_table_and_its_search(spark, hs, table):
    hs.createIndex(read(spark, table), TextIndexConfig("txt", column="s"))
    q = lambda: read(spark, table).filter(F.col("s").like("%s307%")).select("id")
    assert rows(q()) == vanilla(spark, q) == [(307,)]
    assert len(q().inputFiles()) == 1 and why(hs, q(), "txt").code == "APPLIED"
    found = hs.search(read(spark, table), "txt", "s307")
    assert [r["id"] for r in found.collect()] == [307]


def test_a_table_created_again_at_its_path_is_not_served_by_the_old_index(spark, hs, table):
    covering(hs, spark, table)
    assert index_files(lookup(spark, table), "cov")   # version 0 of the first table, listed
    shutil.rmtree(table)
    write(spark, table, range(1000, 1040), files=1)     # version 0 of another table
    assert rows(lookup(spark, table)) == vanilla(spark, lambda: lookup(spark, table))
    assert rows(lookup(spark, table)) == [(1004, "s1004"), (1017, "s1017"), (1030, "s1030")]
    assert not index_files(lookup(spark, table), "cov")
