"""Bugs the differential fuzzer (tests/fuzz) found, each as a plain deterministic test."""
from __future__ import annotations

import datetime as dt
import uuid

import pytest

from accelerator import IndexConfig
from tests.helpers import rows, session_conf, vanilla

SCHEMA = "id long, day date, w double, n struct<y:string, z:struct<w:double>>"
ZEROS = ["CAST('-0.0' AS DOUBLE)", "0.0"]


def signed_zero_rows(spark, path, values):
    """Three single-file appends; each file holds ``values`` four times."""
    data = [(i, dt.date(2024, 1, 1 + i % 28), w, (f"y{i}", (w,)))
            for i, w in enumerate(values * 4)]
    for part in range(3):
        spark.createDataFrame(data[part::3], SCHEMA).coalesce(1).write.mode("append").parquet(path)


def spark_semantics(spark, build):
    """Vanilla Spark's rows without Parquet filter pushdown. With pushdown, Spark itself loses
    rows equal to 0.0 for a -0.0 literal (and the reverse): Parquet's dictionary and statistics
    filters tell the two zeros apart, Spark's comparison does not."""
    with session_conf(spark, spark__sql__parquet__filterPushdown="false"):
        return vanilla(spark, build)


@pytest.mark.parametrize("literal", ZEROS)
@pytest.mark.parametrize("values", [[0.0, -0.0, 0.0, -0.0, 1.5, None], [0.0, 2.5], [-0.0, 2.5]],
                         ids=["both-zeros", "positive-zero", "negative-zero"])
def test_signed_zero_filtered_over_a_covering_index(spark, hs, tmp_path, literal, values):
    """Fuzz seed 8 (round 11, query 7): over a covering index on ``day`` including ``n.z.w``,
    ``n.z.w = -0.0 AND year(day) >= 2023`` lost rows vanilla Spark returns (the flattened
    column's comparison was pushed into Parquet). Every comparison with a zero must return
    Spark's answer, on the flattened nested column and on a top-level one."""
    path = str(tmp_path / "t")
    signed_zero_rows(spark, path, values)
    hs.createIndex(spark.read.parquet(path),
                   IndexConfig("fz_day", indexedColumns=["day"],
                               includedColumns=["id", "w", "n.y", "n.z.w"]))
    spark.read.parquet(path).createOrReplaceTempView("fz")
    for predicate in [f"n.z.w = {literal}", f"w = {literal}", f"n.z.w <= {literal}",
                      f"w >= {literal}", f"w <=> {literal}", f"n.z.w IN (1.5, {literal})"]:
        sql = f"SELECT id, n.y FROM fz WHERE {predicate} AND year(day) >= 2023"
        df = spark.sql(sql)
        assert "fz_day" in df._jdf.queryExecution().executedPlan().toString(), predicate
        assert rows(df) == spark_semantics(spark, lambda: spark.sql(sql)), predicate


def test_signed_zero_filtered_over_the_cache(spark, hs, tmp_path):
    """JSON read by vanilla Spark compares zeros as Spark does; the cache's Parquet copy of it
    must too."""
    src = str(tmp_path / "json")
    spark.createDataFrame([(i, w, (f"y{i}", (w,))) for i, w in enumerate([-0.0, 2.5] * 6)],
                          "id long, w double, n struct<y:string, z:struct<w:double>>") \
        .coalesce(1).write.json(src)
    hs.cache(spark.read.json(src))
    for predicate in ["w = 0.0", "n.z.w = 0.0", "w >= 0.0", "n.z.w IN (0.0, 7.0)"]:
        df = spark.read.json(src).filter(predicate)
        assert "CachedFileIndex" in df._jdf.queryExecution().executedPlan().toString()
        expected = vanilla(spark, lambda: spark.read.json(src).filter(predicate))
        assert rows(df) == expected and len(expected) >= 6, predicate


# --- Iceberg tables (the table-format lane: -m iceberg) ------------------------------------


def iceberg_table(spark, name, columns, values):
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {name.rsplit('.', 1)[0]}")
    spark.sql(f"CREATE TABLE {name} ({columns}) USING iceberg")
    spark.sql(f"INSERT INTO {name} VALUES {values}")


@pytest.mark.iceberg
@pytest.mark.parametrize("columns, values", [
    ("id bigint, k int, items array<struct<q:int, r:string>>",
     "(1, 3, array(named_struct('q', 1, 'r', 'a'))), (2, 4, array())"),
    ("id bigint, k int, m map<string, struct<q:int>>",
     "(1, 3, map('a', named_struct('q', 1))), (2, 4, map())"),
], ids=["array-of-structs", "map-of-structs"])
def test_an_iceberg_table_with_structs_in_an_array_or_a_map_is_indexed(spark, hs, columns,
                                                                       values):
    """Found drawing Iceberg datasets (ahead of any query): an index over a table never altered
    whose array column holds structs is refused with "column items.q was renamed since older
    files were written" (each schema's names are now compared in Iceberg's full form)."""
    name = f"ice.db.nested_{uuid.uuid4().hex[:8]}"
    iceberg_table(spark, name, columns, values)
    try:
        hs.createIndex(spark.table(name), IndexConfig("nested", ["k"], ["id"]))
        q = lambda: spark.table(name).filter("k = 3").select("id")
        assert rows(q()) == vanilla(spark, q) == [(1,)]
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {name}")


@pytest.mark.iceberg
def test_an_index_over_a_table_whose_name_needs_quotes_is_refreshed(spark, hs):
    """Found by the fuzzer's first Iceberg rounds (tables in namespace ``fuzz-<random>``): an
    incremental refresh after an append raised SourceNotFoundError "its table
    ice.fuzz-ak3qs15o.u no longer exists" (the name is now recorded quoted where needed)."""
    namespace = f"`fuzz-{uuid.uuid4().hex[:8]}`"
    name = f"ice.{namespace}.t"
    iceberg_table(spark, name, "id bigint, k int", "(1, 3), (2, 4)")
    try:
        hs.createIndex(spark.table(name), IndexConfig("quoted", ["k"], ["id"]))
        spark.sql(f"INSERT INTO {name} VALUES (3, 3)")
        hs.refreshIndex("quoted", mode="incremental")
        q = lambda: spark.table(name).filter("k = 3").select("id")
        assert rows(q()) == vanilla(spark, q) == [(1,), (3,)]
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {name}")
        spark.sql(f"DROP NAMESPACE IF EXISTS ice.{namespace}")
