"""Apache Iceberg tables as index sources, by name in a Hadoop catalog and by path (run in the
table-format lanes: ``-m iceberg`` on a Spark line with an Iceberg release; the ``spark``
fixture loads Iceberg's jar and the catalog ``ice``).

What a user relies on: an index is used only where it is sound for the snapshot read and the
rows are always those of vanilla Spark; the files come from the table's manifests, so files of
other snapshots are never read; delete files never let a deleted row through; a table whose
older files hold columns under other names (or whose query needs Iceberg's own scan) runs on
Iceberg's scan, unaccelerated."""
from __future__ import annotations

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
    UnsupportedSourceError,
)
from tests.helpers import rows, session_conf, vanilla
from tests.services.table_formats import ICEBERG_CATALOG

pytestmark = pytest.mark.iceberg


def write(spark, name, ids, files=4):
    """Appends rows ``ids`` to table ``name`` in ``files`` files (ids ranged per file)."""
    (spark.createDataFrame([(i, i % 13, f"s{i}") for i in ids], "id long, k long, s string")
     .repartitionByRange(files, "id").writeTo(name).append())


@pytest.fixture
def table(spark):
    """An Iceberg table of 400 rows in 4 files (ids ranged per file), by name; dropped after."""
    name = f"{ICEBERG_CATALOG}.db.t_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE TABLE {name} (id bigint, k bigint, s string) USING iceberg "
              "TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'merge-on-read', "
              "'write.update.mode' = 'merge-on-read', 'write.merge.mode' = 'merge-on-read')")
    write(spark, name, range(400))
    yield name
    spark.sql(f"DROP TABLE IF EXISTS {name}")


def index_files(df, index):
    return [f for f in df.inputFiles() if f"/{index}/v__=" in f]


def why(hs, df, index):
    (r,) = hs.whyNot(df, index, redirectFunc=lambda _: None)
    return r


def lookup(spark, name, k=3):
    return spark.table(name).filter(F.col("k") == k).select("id", "s")


def point(spark, name, i=7):
    return spark.table(name).filter(F.col("id") == i).select("id", "k")


def covering(hs, spark, name, index="cov", lineage=False):
    with session_conf(spark, **{"spark.accelerator.index.lineage.enabled": str(lineage).lower()}):
        hs.createIndex(spark.table(name), IndexConfig(index, ["k"], ["id", "s"]))


def skipping(hs, spark, name, index="skip"):
    hs.createIndex(spark.table(name), DataSkippingIndexConfig(index, MinMaxSketch("id")))


def test_covering_index_over_an_iceberg_table_serves_dataframe_and_sql(spark, hs, table):
    covering(hs, spark, table)
    df = lookup(spark, table)
    assert rows(df) == vanilla(spark, lambda: lookup(spark, table))
    assert len(rows(df)) == 31
    assert df.inputFiles() and df.inputFiles() == index_files(df, "cov")
    sql = f"SELECT id, s FROM {table} WHERE k = 3"
    assert rows(spark.sql(sql)) == rows(df) and index_files(spark.sql(sql), "cov")
    assert why(hs, df, "cov").source.startswith(f"table {table}")
    assert hs.index("cov").first()["state"] == "ACTIVE"


def snapshots(spark, name):
    return [r[0] for r in spark.sql(f"SELECT snapshot_id FROM {name}.snapshots "
                                    "ORDER BY committed_at").collect()]


def test_data_skipping_over_an_iceberg_table_reads_only_the_matching_files(spark, hs, table):
    skipping(hs, spark, table)
    df = point(spark, table)
    assert rows(df) == vanilla(spark, lambda: point(spark, table)) == [(7, 7)]
    assert len(df.inputFiles()) == 1
    assert why(hs, df, "skip").code == "APPLIED"


def test_an_iceberg_table_by_path_is_indexed_and_served(spark, hs, table):
    location = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").where("col_name = 'Location'") \
        .first()["data_type"]
    by_path = lambda: spark.read.format("iceberg").load(location).filter(F.col("k") == 3) \
        .select("id", "s")
    hs.createIndex(spark.read.format("iceberg").load(location),
                   IndexConfig("bypath", ["k"], ["id", "s"]))
    assert rows(by_path()) == vanilla(spark, by_path) and index_files(by_path(), "bypath")
    write(spark, table, [2005], files=1)
    assert (2005, "s2005") in rows(by_path()) and rows(by_path()) == vanilla(spark, by_path)
    assert hs.refreshIndex("bypath", mode="incremental").first()["filesRead"] == 1
    assert rows(by_path()) == vanilla(spark, by_path)
    assert by_path().inputFiles() == index_files(by_path(), "bypath")


def test_files_of_other_snapshots_are_never_indexed_or_read(spark, hs, table):
    (spark.createDataFrame([(i, i % 13, f"s{i}") for i in range(1000, 1100)],
                           "id long, k long, s string")
     .repartitionByRange(2, "id").writeTo(table).overwrite(F.lit(True)))
    covering(hs, spark, table)
    skipping(hs, spark, table)
    for q in (lambda: lookup(spark, table), lambda: point(spark, table, 1007)):
        assert rows(q()) == vanilla(spark, q)
    assert rows(point(spark, table, 7)) == []
    assert len(point(spark, table, 1007).inputFiles()) == 1
    assert spark.sql(f"SELECT count(*) FROM {table}.files").first()[0] == 2


def test_append_is_read_by_hybrid_scan_then_folded_in_by_incremental_refresh(spark, hs, table):
    covering(hs, spark, table)
    write(spark, table, [2005, 2018], files=1)
    assert rows(lookup(spark, table)) == vanilla(spark, lambda: lookup(spark, table))
    assert (2005, "s2005") in rows(lookup(spark, table))
    df = lookup(spark, table)
    assert index_files(df, "cov") and len(df.inputFiles()) == len(index_files(df, "cov")) + 1
    assert "hybrid scan: 1 appended source files" in why(hs, df, "cov").reason
    result = hs.refreshIndex("cov", mode="incremental").first()
    assert result["status"] == "succeeded" and result["filesRead"] == 1
    assert rows(lookup(spark, table)) == vanilla(spark, lambda: lookup(spark, table))
    assert lookup(spark, table).inputFiles() == index_files(lookup(spark, table), "cov")


def copy_on_write(spark, name):
    spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('write.delete.mode' = 'copy-on-write', "
              "'write.update.mode' = 'copy-on-write', 'write.merge.mode' = 'copy-on-write')")


@pytest.mark.parametrize("statement, skipping_code", [
    ("DELETE FROM {t} WHERE id = 16", "APPLIED"),
    ("UPDATE {t} SET s = 'changed' WHERE id = 16", "APPLIED"),
    ("MERGE INTO {t} t USING (SELECT 16L AS id, 3L AS k, 'merged' AS s "
     "UNION ALL SELECT 9001L, 3L, 'new') u ON t.id = u.id "
     "WHEN MATCHED THEN UPDATE SET s = u.s WHEN NOT MATCHED THEN INSERT *", "APPLIED"),
    ("CALL ice.system.rewrite_data_files(table => '{short}', "
     "options => map('rewrite-all', 'true'))", "NO_FILE_SKIPPED"),   # one file: nothing skipped
])
def test_rewrites_of_files_give_vanillas_rows_before_and_after_refresh(spark, hs, table,
                                                                       statement, skipping_code):
    copy_on_write(spark, table)
    covering(hs, spark, table, lineage=True)
    skipping(hs, spark, table)
    spark.sql(statement.format(t=table, short=table.split(".", 1)[1]))
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


def test_delete_files_never_let_a_deleted_row_through(spark, hs, table):
    covering(hs, spark, table, lineage=True)
    skipping(hs, spark, table)
    spark.sql(f"DELETE FROM {table} WHERE id IN (7, 16)")   # merge-on-read: position deletes
    deletes = spark.sql(f"SELECT count(*) FROM {table}.delete_files").first()[0]
    assert deletes > 0
    assert rows(point(spark, table, 7)) == vanilla(spark, lambda: point(spark, table, 7)) == []
    assert (16, "s16") not in rows(lookup(spark, table))
    assert rows(lookup(spark, table)) == vanilla(spark, lambda: lookup(spark, table))
    assert why(hs, point(spark, table, 7), "skip").code == "DELETION_VECTORS"
    assert not index_files(lookup(spark, table), "cov")
    assert "carry delete files" in why(hs, lookup(spark, table), "cov").reason
    # an index is not built over files whose deleted rows only Iceberg's scan hides
    with pytest.raises(UnsupportedSourceError, match="carry delete files"):
        hs.refreshIndex("cov", mode="full")
    spark.sql(f"CALL ice.system.rewrite_data_files(table => '{table.split('.', 1)[1]}', "
              "options => map('delete-file-threshold', '1'))")
    hs.refreshIndex("cov", mode="full")
    assert index_files(lookup(spark, table), "cov")
    assert rows(lookup(spark, table)) == vanilla(spark, lambda: lookup(spark, table))
    assert (16, "s16") not in rows(lookup(spark, table))


def test_time_travel_uses_an_index_only_for_the_snapshot_it_holds(spark, hs, table):
    covering(hs, spark, table)
    write(spark, table, [4995], files=1)
    first, second = snapshots(spark, table)
    at = lambda snapshot: lambda: spark.sql(
        f"SELECT id, s FROM {table} VERSION AS OF {snapshot} WHERE k = 3")
    old, new = at(first), at(second)
    assert rows(old()) == vanilla(spark, old) and (4995, "s4995") not in rows(old())
    assert old().inputFiles() == index_files(old(), "cov")
    assert rows(new()) == vanilla(spark, new) and (4995, "s4995") in rows(new())
    hs.refreshIndex("cov", mode="full")                          # now over the second snapshot
    assert rows(old()) == vanilla(spark, old) and not index_files(old(), "cov")
    assert rows(new()) == vanilla(spark, new) and index_files(new(), "cov")


def test_a_dropped_table_leaves_its_index_unused_and_says_so(spark, hs, table):
    covering(hs, spark, table)
    spark.sql(f"DROP TABLE {table}")
    write_again = f"CREATE TABLE {table} (id bigint, k bigint, s string) USING iceberg"
    spark.sql(write_again)
    write(spark, table, range(1000, 1040), files=1)   # another table under the same name
    assert rows(lookup(spark, table)) == vanilla(spark, lambda: lookup(spark, table))
    assert rows(lookup(spark, table)) == [(1004, "s1004"), (1017, "s1017"), (1030, "s1030")]
    assert not index_files(lookup(spark, table), "cov")
    spark.sql(f"DROP TABLE {table}")
    assert "no longer exists" in hs.indexes().first()["warning"]
    with pytest.raises(SourceNotFoundError, match="no longer exists"):
        hs.refreshIndex("cov")


def served_from_cache(df) -> bool:
    return "CachedFileIndex" in df._jdf.queryExecution().executedPlan().toString()


def test_the_cache_serves_an_iceberg_tables_files_and_never_another_snapshots(spark, hs, table):
    q = lambda: spark.table(table).filter(F.col("k") < 5).select("id", "s")
    summary = hs.cache(spark.table(table).select("id", "k", "s")).first()
    assert summary.files == 4
    assert served_from_cache(q()) and rows(q()) == vanilla(spark, q)
    spark.sql(f"DELETE FROM {table} WHERE id = 16")   # a delete file on one data file
    assert (16, "s16") not in rows(q()) and rows(q()) == vanilla(spark, q)
    assert not served_from_cache(q())
    (r,) = hs.whyNot(q(), "cache", redirectFunc=lambda _: None)
    assert r.code == "TABLE_FORMAT" and "carry delete files" in r.reason
    with pytest.raises(CacheRequestError, match="carry delete files"):
        hs.cache(spark.table(table))


def test_renamed_columns_leave_the_table_to_icebergs_scan(spark, hs, table):
    spark.sql(f"ALTER TABLE {table} RENAME COLUMN k TO key")
    spark.sql(f"ALTER TABLE {table} ADD COLUMNS (k bigint)")
    spark.sql(f"INSERT INTO {table} VALUES (7000, 3, 's7000', 3)")
    # the old files hold `key` under the name `k`: read by name they would give wrong rows
    with pytest.raises(UnsupportedSourceError, match="column k was dropped and added again"):
        hs.createIndex(spark.table(table), IndexConfig("cov", ["k"], ["id", "s"]))
    by_k = lambda: spark.table(table).filter(F.col("k") == 3).select("id", "s")
    assert rows(by_k()) == vanilla(spark, by_k) == [(7000, "s7000")]


def test_an_index_whose_table_was_renamed_under_it_says_why_it_is_unused(spark, hs, table):
    covering(hs, spark, table)
    spark.sql(f"ALTER TABLE {table} RENAME COLUMN s TO name")
    spark.sql(f"ALTER TABLE {table} ADD COLUMNS (s string)")
    q = lambda: spark.table(table).filter(F.col("k") == 3).select("id", "s")
    assert rows(q()) == vanilla(spark, q) and all(s is None for _, s in rows(q()))
    assert not index_files(q(), "cov")
    reason = why(hs, q(), "cov")
    assert reason.code == "TABLE_FORMAT" and "column s was dropped and added again" in reason.reason


def test_an_added_column_is_null_in_older_files_under_the_indexes(spark, hs, table):
    spark.sql(f"ALTER TABLE {table} ADD COLUMNS (extra string)")
    spark.sql(f"INSERT INTO {table} VALUES (7000, 3, 's7000', 'x')")
    hs.createIndex(spark.table(table), IndexConfig("cov", ["k"], ["id", "extra"]))
    q = lambda: spark.table(table).filter(F.col("k") == 3).select("id", "extra")
    assert rows(q()) == vanilla(spark, q) and index_files(q(), "cov")
    assert (7000, "x") in rows(q()) and (3, None) in rows(q())


def test_hidden_partitioning_and_metadata_columns_give_vanillas_rows(spark, hs):
    name = f"{ICEBERG_CATALOG}.db.p_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE TABLE {name} (id bigint, k bigint, ts timestamp) USING iceberg "
              "PARTITIONED BY (days(ts))")
    try:
        spark.sql(f"INSERT INTO {name} SELECT id, id % 13, timestamp_seconds(1700000000 + "
                  "id * 36000) FROM range(600)")
        hs.createIndex(spark.table(name), IndexConfig("cov", ["k"], ["id", "ts"]))
        skipping(hs, spark, name)
        q = lambda: spark.table(name).filter(F.col("k") == 3).select("id", "ts")
        assert rows(q()) == vanilla(spark, q) and index_files(q(), "cov")
        one = lambda: spark.table(name).filter(F.col("id") == 301).select("id", "ts")
        assert rows(one()) == vanilla(spark, one) and len(rows(one())) == 1
        assert len(one().inputFiles()) == 1
        files = lambda: spark.sql(f"SELECT id, _file FROM {name} WHERE k = 3")
        assert rows(files()) == vanilla(spark, files) and not index_files(files(), "cov")
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {name}")


def test_text_index_over_an_iceberg_table_and_its_search(spark, hs, table):
    hs.createIndex(spark.table(table), TextIndexConfig("txt", column="s"))
    q = lambda: spark.table(table).filter(F.col("s").like("%s307%")).select("id")
    assert rows(q()) == vanilla(spark, q) == [(307,)]
    assert len(q().inputFiles()) == 1 and why(hs, q(), "txt").code == "APPLIED"
    found = hs.search(spark.table(table), "txt", "s307")
    assert [r["id"] for r in found.collect()] == [307]


def test_a_branch_runs_on_icebergs_scan_and_a_tag_is_served_as_its_snapshot(spark, hs, table):
    covering(hs, spark, table)
    spark.sql(f"ALTER TABLE {table} CREATE TAG first")
    spark.sql(f"ALTER TABLE {table} CREATE BRANCH dev")
    spark.sql(f"INSERT INTO {table}.branch_dev VALUES (4995, 3, 's4995')")
    branch = lambda: spark.table(f"{table}.branch_dev").filter(F.col("k") == 3).select("id", "s")
    assert rows(branch()) == vanilla(spark, branch) and (4995, "s4995") in rows(branch())
    assert not index_files(branch(), "cov")
    tag = lambda: spark.sql(f"SELECT id, s FROM {table} VERSION AS OF 'first' WHERE k = 3")
    assert rows(tag()) == vanilla(spark, tag) and (4995, "s4995") not in rows(tag())
    assert tag().inputFiles() == index_files(tag(), "cov")


def test_the_rule_engine_indexes_an_iceberg_table_by_name(spark, hs):
    name = f"{ICEBERG_CATALOG}.db.w_{uuid.uuid4().hex[:8]}"
    wide = (spark.range(0, 16000, numPartitions=8)
            .selectExpr("id", "sha2(cast(id AS string), 256) AS key",
                        *[f"repeat(concat('c{i}-', id), 4) AS c{i}" for i in range(18)]))
    wide.writeTo(name).using("iceberg").create()
    try:
        keys = [r.key for r in wide.where("id % 1999 = 1").select("key").collect()][:10]
        q = lambda key=keys[0]: spark.table(name).where(F.col("key") == key).select("id")
        for key in keys:
            q(key).collect()
        recs = hs.recommend().where("kind = 'covering'")
        assert recs.count() == 1
        hs.applyRecommendations(recs)
        assert rows(q()) == vanilla(spark, q)
        (used,) = [r for r in hs.whyNot(q(), redirectFunc=lambda _: None) if r.code == "APPLIED"]
        assert used.source.startswith(f"table {name}")
        spark.sql(f"INSERT INTO {name} SELECT * FROM {name} WHERE id = 1")   # a new snapshot
        assert rows(q(keys[0])) == vanilla(spark, lambda: q(keys[0]))
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {name}")
