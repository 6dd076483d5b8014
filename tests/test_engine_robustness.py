"""The rule engine never crashes on the queries Spark runs (issue 47): histories recorded from the
differential fuzzer's queries (filters, aggregates, joins, self-joins, unions, IN/EXISTS
subqueries, outer joins, set operations, windows) and from hand-written decision-support shapes
(a self-join through a CTE, a source joined with itself on two columns, a three-way join through
CTEs, a correlated subquery) give advice on the sources and columns those queries use only, the
same advice however the history is ordered, and advice that, carried out, leaves every answer
equal to vanilla Spark's."""
from __future__ import annotations

import dataclasses
import random
import time

import pytest

from accelerator import Hyperspace
from accelerator.engine.advisor import Advisor
from rules.analyzer import analyze
from rules.extractor import extract, extract_with_skips
from rules.history.records import QueryRecord, is_expression
from rules.instructions import Instruction
from rules.profiles import SourceProfile
from rules.user_rules import Budget, RuleSet
from tests.fuzz import data
from tests.fuzz.queries import random_query
from tests.helpers import rows, vanilla

SEED = 20261129
QUERIES = 40          # per round: t and u apart, then u the same source as t (self-joins)
#: budgets so wide that every viable candidate is proposed (the property is about all of them)
WIDE = RuleSet(budget=Budget(index_bytes=10 ** 15, cache_bytes=10 ** 15,
                             max_indexes_per_source=10 ** 6, build_seconds_per_run=10 ** 9))


def _used(records: list[QueryRecord]) -> dict[str, set[str]]:
    """Per source, every column (and top-level column) the recorded queries use."""
    out: dict[str, set[str]] = {}
    for r in records:
        for rel in r.relations:
            found = out.setdefault(rel.source, set())
            for c in (rel.filter_columns + rel.join_columns + rel.group_columns
                      + rel.output_columns):
                found |= {c, c.split(".", 1)[0]}
        for p in r.predicates:
            if 0 <= p.relation < len(r.relations):
                out[r.relations[p.relation].source].add(p.column)
    return out


def _assert_within(instructions: list[Instruction], used: dict[str, set[str]]) -> None:
    for i in instructions:
        if i.origin == "engine" and i.action in ("create", "cache"):
            assert i.source in used, i
            assert set(i.columns) | set(i.included_columns) <= used[i.source], i


def _profiles(records: list[QueryRecord]) -> dict[str, SourceProfile]:
    """Per source the records read, a 10 MB source of 10 files in its recorded format holding
    the columns they use (no column statistics: covering indexes, join pairs and the cache are
    what it can propose; small, so that they pay for themselves)."""
    formats = {rel.source: rel.format for r in records for rel in r.relations}
    return {s: SourceProfile(s, formats[s], 10, 10 ** 7, {}, tuple(sorted(
        c for c in cols if not is_expression(c))))
        for s, cols in _used(records).items()}


@pytest.fixture(scope="module")
def fuzz_history(spark, tmp_path_factory):
    """The records of the fuzzer's random queries over two generated datasets (``t`` and
    ``u``, read by path), each query run once; then as many with ``u`` the same source as
    ``t``, so that its joins, IN/EXISTS subqueries and set operations become self-joins."""
    root = str(tmp_path_factory.mktemp("robust_fuzz"))
    rng = random.Random(SEED)
    datasets = {name: dataclasses.replace(data.generate(rng, name, start_id=n * 1000),
                                          access="path") for n, name in enumerate(("t", "u"))}
    for d in datasets.values():
        data.write(spark, d, root)
    system = str(tmp_path_factory.mktemp("robust_fuzz_indexes"))
    spark.conf.set("spark.accelerator.system.path", system)
    Hyperspace.enable(spark)
    try:
        for views in (("t", "u"), ("t", "t")):
            for view, name in zip(("t", "u"), views):
                data.source(spark, datasets[name], root).createOrReplaceTempView(view)
            for _ in range(QUERIES):
                q = random_query(rng, datasets[views[0]], datasets[views[1]])
                try:
                    spark.sql(q.sql()).collect()
                except Exception:  # noqa: BLE001 - a query vanilla Spark rejects too: no record
                    continue
        hs = Hyperspace(spark)
        Hyperspace.flushHistory(spark)
        records = Advisor(hs.context).records()
        yield hs, records
    finally:
        Hyperspace.disable(spark)
        spark.conf.unset("spark.accelerator.system.path")


def test_fuzz_histories_give_advice_on_what_they_use_in_any_order(fuzz_history):
    hs, records = fuzz_history
    assert len(records) >= QUERIES
    assert any(len({rel.source for rel in r.relations}) < len(r.relations) for r in records)
    used = _used(records)
    now = int(time.time() * 1000)
    profiles = _profiles(records)
    demand, skipped = extract_with_skips(records, now)
    first = analyze(demand, profiles, WIDE, cache_capacity_bytes=10 ** 15, skipped=skipped)
    assert skipped == [], "every recorded query and source is understood, none skipped"
    assert first, "the property holds of some advice"
    _assert_within(first, used)
    for seed in range(4):
        shuffled = list(records)
        random.Random(seed).shuffle(shuffled)
        assert analyze(extract(shuffled, now), profiles, WIDE,
                       cache_capacity_bytes=10 ** 15) == first
    # the whole engine over the real sources (profiled) returns, on used columns, the same
    # advice twice (the scores decay with the seconds between the two)
    advised = Advisor(hs.context).recommend()
    _assert_within(advised, used)
    assert [_what(i) for i in advised] == [_what(i) for i in Advisor(hs.context).recommend()]


def _what(i: Instruction) -> tuple:
    return i.action, i.kind, i.source, i.columns, i.included_columns, i.name


# --- decision-support shapes, recorded, advised, applied ---------------------------------

SHAPES = {
    "self-join through a CTE": """
        WITH big AS (SELECT store, item, qty FROM sales WHERE qty > 2)
        SELECT a.store, count(*) AS n FROM big a JOIN big b ON a.item = b.item
        GROUP BY a.store""",
    "self-join on two columns": """
        SELECT s.store, sum(r.qty) AS q FROM sales s JOIN sales r ON s.item = r.store
        GROUP BY s.store""",
    "three-way join through CTEs": """
        WITH s AS (SELECT item, store, qty FROM sales),
             i AS (SELECT item, category FROM items WHERE category < 5),
             again AS (SELECT item, qty AS q2 FROM sales)
        SELECT i.category, sum(s.qty + again.q2) AS total
        FROM s JOIN i ON s.item = i.item JOIN again ON again.item = s.item
        GROUP BY i.category""",
    "correlated subquery": """
        SELECT store, item, qty FROM sales s
        WHERE qty > (SELECT avg(qty) FROM sales t WHERE t.item = s.item)""",
    "window over a join": """
        SELECT item, store, rank() OVER (PARTITION BY store ORDER BY qty) AS r
        FROM sales WHERE item IN (SELECT item FROM items WHERE category = 3)""",
    "union of lookups": """
        SELECT item, qty FROM sales WHERE store = 4
        UNION ALL SELECT item, category FROM items WHERE item = 17""",
}


@pytest.fixture
def star(spark, tmp_path):
    """``sales`` (Parquet, 8 files) and ``items`` (JSON), as views."""
    sales, items = str(tmp_path / "sales"), str(tmp_path / "items")
    spark.range(0, 16000, numPartitions=8).selectExpr(
        "id", "id % 97 AS store", "(id * 7919) % 500 AS item", "id % 11 AS qty").write.parquet(
        sales)
    spark.range(0, 500, numPartitions=2).selectExpr("id AS item", "id % 10 AS category") \
        .write.json(items)
    spark.read.parquet(sales).createOrReplaceTempView("sales")
    spark.read.schema("item BIGINT, category BIGINT").json(items).createOrReplaceTempView("items")
    yield


def test_decision_support_shapes_are_advised_applied_and_equal_vanilla(spark, hs, star):
    no_broadcast = {"spark.sql.autoBroadcastJoinThreshold": "-1",
                    "spark.sql.adaptive.autoBroadcastJoinThreshold": "-1"}
    old = {k: spark.conf.get(k, None) for k in no_broadcast}
    for k, v in no_broadcast.items():
        spark.conf.set(k, v)
    try:
        for _ in range(3):
            for sql in SHAPES.values():
                spark.sql(sql).collect()
        records = Advisor(hs.context).records()
        found = hs.recommend().collect()
        assert found, "the shapes call for some advice"
        _assert_within(Advisor(hs.context).recommend(), _used(records))
        applied = hs.applyRecommendations().collect()
        assert {r["status"] for r in applied} == {"applied"}, [r.asDict() for r in applied]
        for name, sql in SHAPES.items():
            assert rows(spark.sql(sql)) == vanilla(spark, lambda: spark.sql(sql)), name
    finally:
        for k, v in old.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)
