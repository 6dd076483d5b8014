"""Bugs the differential fuzzer (tests/fuzz) found, each as a plain deterministic test."""
from __future__ import annotations

import datetime as dt

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
