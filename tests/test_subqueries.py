"""Plans holding subqueries: IN, NOT IN, EXISTS, NOT EXISTS and scalar subqueries. Spark
optimizes a subquery's plan on its own first (its relations are rewritten then), and the plan
holding it next, with the correlation among the subquery expression's children, so the outer
relation is served by its index too. Results always equal vanilla Spark's."""
from __future__ import annotations

import json

import pytest

from accelerator import DataSkippingIndexConfig, IndexConfig, MinMaxSketch
from indexes.plan import parse_plan, unsupported_reason
from tests.helpers import rows, vanilla


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("subqueries")
    t, o = str(root / "t"), str(root / "o")
    (spark.range(1000).selectExpr("id", "id % 10 AS k", "named_struct('a', id % 7, 'b', 'x') AS s")
     .repartition(4).write.parquet(t))
    spark.range(100).selectExpr("id AS oid", "id % 5 AS g").repartition(2).write.parquet(o)
    return t, o


def as_views(spark, t: str, o: str) -> None:
    """The two tables as SQL views ``t`` and ``o``."""
    for name, path in (("t", t), ("o", o)):
        spark.read.parquet(path).createOrReplaceTempView(name)


@pytest.fixture
def views(spark, hs, tables):
    """Both tables as SQL views, with a covering index on each."""
    t, o = tables
    hs.createIndex(spark.read.parquet(t), IndexConfig("ti", ["k"], ["id"]))
    hs.createIndex(spark.read.parquet(o), IndexConfig("oi", ["g"], ["oid"]))
    as_views(spark, t, o)
    return hs


def indexes_read(df) -> set[str]:
    return {f.split("/indexes/")[1].split("/")[0] for f in df.inputFiles() if "/indexes/" in f}


def why_not(hs, df, index: str) -> list:
    """whyNot's verdicts on the outer table ``t``."""
    return [r for r in hs.whyNot(df, index) if r.source.endswith("/t")]


def assert_same(spark, sql: str):
    df = spark.sql(sql)
    got = rows(df)
    assert got == vanilla(spark, lambda: spark.sql(sql)) and got
    return df


@pytest.mark.parametrize("condition", [
    "id IN (SELECT oid FROM o WHERE g = 3)",
    "id NOT IN (SELECT oid FROM o WHERE g = 3)",
    "EXISTS (SELECT 1 FROM o WHERE g = 3 AND o.oid = t.id)",
    "NOT EXISTS (SELECT 1 FROM o WHERE g = 3 AND o.oid = t.id)",
])
@pytest.mark.compat
def test_predicate_subqueries_read_both_indexes(spark, views, condition):
    df = assert_same(spark, f"SELECT id FROM t WHERE k = 3 AND {condition}")
    assert indexes_read(df) == {"ti", "oi"}
    assert all("/indexes/" in f for f in df.inputFiles())


@pytest.mark.compat
def test_scalar_subquery_reads_both_indexes(spark, views):
    df = assert_same(spark, "SELECT id FROM t WHERE k = 3 AND id > (SELECT avg(oid) FROM o WHERE g = 4)")
    assert indexes_read(df) == {"ti"}     # inputFiles() leaves out the subquery's scans
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "/indexes/oi/v__=0" in plan and "/indexes/ti/v__=0" in plan
    (why,) = why_not(views, spark.sql(
        "SELECT id FROM t WHERE k = 3 AND id > (SELECT avg(oid) FROM o WHERE g = 4)"), "ti")
    assert why.code == "APPLIED"


def test_correlation_over_a_nested_field_uses_the_flattened_column(spark, hs, tables):
    t, o = tables
    hs.createIndex(spark.read.parquet(t), IndexConfig("ts", ["id"], ["s.a"]))
    as_views(spark, t, o)
    df = assert_same(spark, "SELECT id FROM t WHERE id < 50 AND s.a IN "
                            "(SELECT g FROM o WHERE o.oid > t.id + 60)")
    assert indexes_read(df) == {"ts"}


def test_correlated_subquery_needing_an_uncovered_column_leaves_the_index_unused(spark, hs, tables):
    t, o = tables
    hs.createIndex(spark.read.parquet(t), IndexConfig("ti", ["k"], ["id"]))
    as_views(spark, t, o)
    sql = "SELECT id FROM t WHERE k = 3 AND EXISTS (SELECT 1 FROM o WHERE o.g = t.s.a)"
    df = assert_same(spark, sql)
    assert indexes_read(df) == set()
    (why,) = why_not(hs, spark.sql(sql), "ti")
    assert why.code == "MISSING_COLUMNS" and "s, s.a" in why.reason


def test_data_skipping_prunes_by_the_other_conjuncts(spark, hs, tmp_path, tables):
    _, o = tables
    path = str(tmp_path / "ranged")
    spark.range(400).selectExpr("id", "id % 3 AS k").repartitionByRange(8, "id") \
        .write.parquet(path)
    hs.createIndex(spark.read.parquet(path), DataSkippingIndexConfig("ds", MinMaxSketch("id")))
    spark.read.parquet(path).createOrReplaceTempView("ranged")
    spark.read.parquet(o).createOrReplaceTempView("o")
    df = assert_same(spark, "SELECT id FROM ranged WHERE id BETWEEN 10 AND 20 "
                            "AND k IN (SELECT g FROM o WHERE oid < 3)")
    read = [f for f in df.inputFiles() if "/ranged/" in f]
    assert 1 <= len(read) < 8


def _plan(condition: dict) -> str:
    """Filter(condition) over a LocalRelation, as toJSON prints it."""
    return json.dumps([{"class": "org.apache.spark.sql.catalyst.plans.logical.Filter",
                        "num-children": 1, "condition": [condition]},
                       {"class": "org.apache.spark.sql.catalyst.plans.logical.LocalRelation",
                        "num-children": 0, "output": []}])


def _attr(i: int) -> dict:
    return {"class": "org.apache.spark.sql.catalyst.expressions.AttributeReference",
            "num-children": 0, "name": f"c{i}", "dataType": "long", "exprId": {"id": i}}


def test_an_outer_reference_left_inside_a_subquery_plan_stops_the_rewrite():
    outer = {"class": "org.apache.spark.sql.catalyst.expressions.OuterReference", "num-children": 1}
    equal = {"class": "org.apache.spark.sql.catalyst.expressions.EqualTo", "num-children": 2}
    inner = json.loads(_plan(equal))
    inner[0]["condition"] = [equal, outer, _attr(1), _attr(2)]
    exists = {"class": "org.apache.spark.sql.catalyst.expressions.Exists", "num-children": 0,
              "plan": inner}
    assert "inside its plan" in unsupported_reason(parse_plan(_plan(exists)))
    # correlation pulled up into the expression's children: fine
    exists["plan"] = json.loads(_plan(_attr(2)))
    assert unsupported_reason(parse_plan(_plan(exists))) is None
