"""The analyzer: which index kind each demand gets, scores, budgets, existing indexes, cooldown
and drops. Demand and profiles are built by hand; no JVM."""
from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rules.analyzer import analyze
from rules.extractor import Demand
from rules.instructions import engine_index_name
from rules.profiles import ColumnProfile, ExistingIndex, SourceProfile
from rules.terms import Priority
from rules.user_rules import Budget, RuleSet, load_rules

GiB = 2 ** 30
ROOT = str(Path(__file__).resolve().parents[1])
EVENTS = "file:/lake/events"
COLS = tuple(f"c{i}" for i in range(27)) + ("id", "ts", "message")


def unique_id(files: int, distinct: int = 100_000) -> ColumnProfile:
    """Random ids: every file spans (almost) all of them, each value in one file."""
    return ColumnProfile("id", "long", ((0, 10 ** 12),) * files, distinct_per_file=distinct,
                         rows_per_file=distinct, avg_bytes=8)


def hourly(files: int) -> ColumnProfile:
    """Timestamps written in order: file i holds hour i."""
    start = dt.datetime(2026, 1, 5)
    return ColumnProfile("ts", "timestamp", tuple(
        (start + dt.timedelta(hours=i), start + dt.timedelta(hours=i, minutes=59))
        for i in range(files)), distinct_per_file=50_000, rows_per_file=100_000, avg_bytes=8)


def profile(*columns: ColumnProfile, source=EVENTS, files=100, size=10 * GiB, fmt="parquet",
            all_columns=COLS) -> SourceProfile:
    return SourceProfile(source, fmt, files, size, {c.column: c for c in columns}, all_columns)


def demand(column, use, queries=40, seconds=10.0, samples=(), read=COLS, source=EVENTS,
           partners=()) -> Demand:
    return Demand(source, column, use, queries, float(queries), 0, queries, seconds * queries,
                  0, tuple(samples), None, frozenset(), frozenset(read), frozenset(partners))


LOOKUPS = [("EqualTo", "123456"), ("In", "42"), ("In", "77")]
RANGE = [("GreaterThanOrEqual", "2026-01-05 10:00:00"), ("LessThan", "2026-01-05 12:00:00")]


def kinds(instructions) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(i.action, i.kind, i.columns) for i in instructions]


def test_unclustered_unique_ids_get_a_bloom_filter():
    [i] = analyze([demand("id", "lookup", samples=LOOKUPS)],
                  {EVENTS: profile(unique_id(100))}, RuleSet(), now_ms=3 * 3600_000)
    assert (i.action, i.kind, i.source, i.columns) == ("create", "bloom", EVENTS, ("id",))
    assert i.name == engine_index_name("bloom", EVENTS, ("id",))
    assert (i.priority, i.origin, i.ttl_seconds, i.queries) == (Priority.MEDIUM, "engine", None, 40)
    assert i.estimated_seconds_saved == pytest.approx(10 * (1 - 0.02))
    assert i.estimated_bytes == 100 * 100_000 * 1.2
    assert i.reason == ("40 lookups of id (10.0 s each, timed over 40 runs) would read over 90% "
                        "less with a Bloom filter: unclustered, ~100,000 values per file (the "
                        "what-if keeps ~2 of 100 files a query); last used 3 h ago")


def test_clustered_timestamps_filtered_by_ranges_get_min_max():
    [i] = analyze([demand("ts", "range", samples=RANGE)], {EVENTS: profile(hourly(100))},
                  RuleSet())
    assert kinds([i]) == [("create", "minmax", ("ts",))]
    assert i.estimated_seconds_saved == pytest.approx(10 * 0.98)     # 2 files of 100 read
    assert "min/max" in i.reason and "over 90% less" in i.reason
    assert "keeps ~2 of 100 files" in i.reason


def test_few_values_per_file_unclustered_get_a_value_list():
    customers = ColumnProfile("c0", "long", ((0, 10_000),) * 100, distinct_per_file=20,
                              rows_per_file=100_000, distinct_total=10_000, avg_bytes=8)
    [i] = analyze([demand("c0", "lookup", samples=[("EqualTo", "4711")])],
                  {EVENTS: profile(customers)}, RuleSet())
    assert kinds([i]) == [("create", "valuelist", ("c0",))]
    assert "~20 values per file" in i.reason


def test_a_partition_column_gets_no_skipping_index():
    days = ColumnProfile("c0", "date", tuple((dt.date(2026, 1, 1 + i % 28),) * 2
                                            for i in range(100)), distinct_per_file=1,
                         rows_per_file=100_000, distinct_total=28, avg_bytes=4)
    looked_up = [demand("c0", "lookup", samples=[("EqualTo", "2026-01-05")])]
    assert kinds(analyze(looked_up, {EVENTS: profile(days)}, RuleSet())) == [
        ("create", "valuelist", ("c0",))]
    partitioned = dataclasses.replace(profile(days), partition_columns=("c0",))
    assert analyze(looked_up, {EVENTS: partitioned}, RuleSet()) == []


def test_like_on_a_string_column_gets_a_text_index():
    sample = tuple(("request timed out",) if f % 10 == 0 else ("ok", "fine") for f in range(100))
    message = ColumnProfile("message", "string", (("a", "z"),) * 100, text_sample=sample)
    [i] = analyze([demand("message", "text", samples=[("Like", "%timed out%")])],
                  {EVENTS: profile(message)}, RuleSet())
    assert kinds([i]) == [("create", "text", ("message",))]
    assert "about 90% less with a text index" in i.reason
    # the same searches of a column that is not a string get nothing
    number = ColumnProfile("message", "long", (("a", "z"),) * 100, text_sample=sample)
    assert analyze([demand("message", "text", samples=[("Like", "%timed out%")])],
                   {EVENTS: profile(number)}, RuleSet()) == []


def test_lookups_reading_few_columns_get_a_covering_index_when_it_beats_bloom():
    few = demand("id", "lookup", samples=LOOKUPS, read={"id", "c3"})
    # 10 files: a Bloom filter still reads 11% of the files, the index one bucket in 64
    [i] = analyze([few], {EVENTS: profile(unique_id(10), files=10)}, RuleSet())
    assert (i.kind, i.columns, i.included_columns) == ("covering", ("id",), ("c3",))
    assert "holding 2 of 30 columns" in i.reason
    # 1000 files: the Bloom filter reads 1.1% of the files, fewer than a bucket of the index
    [i] = analyze([few], {EVENTS: profile(unique_id(1000), files=1000)}, RuleSet())
    assert i.kind == "bloom"
    # queries reading 20 of the 30 columns get no covering index
    wide = demand("id", "lookup", samples=LOOKUPS, read=COLS[:20] + ("id",))
    [i] = analyze([wide], {EVENTS: profile(unique_id(10), files=10)}, RuleSet())
    assert i.kind == "bloom"


ORDERS, CUSTOMERS = "file:/lake/orders", "file:/lake/customers"


def join_setup(queries=50):
    demands = [
        demand("customer_id", "join", queries, read={"customer_id", "amount"}, source=ORDERS,
               partners={(CUSTOMERS, "customer_id")}),
        demand("customer_id", "join", queries, read={"customer_id", "name"}, source=CUSTOMERS,
               partners={(ORDERS, "customer_id")}),
    ]
    profiles = {   # indexes of 2 GiB (2 of 10 columns) and 0.5 GiB (2 of 4)
        ORDERS: profile(source=ORDERS, all_columns=("customer_id", "amount") + COLS[:8]),
        CUSTOMERS: profile(source=CUSTOMERS, size=GiB,
                           all_columns=("customer_id", "name", "city", "email")),
    }
    return demands, profiles


def test_a_hot_join_gets_paired_covering_indexes_on_both_sides():
    demands, profiles = join_setup()
    found = analyze(demands, profiles, RuleSet())
    assert [(i.source, i.kind, i.columns, i.included_columns) for i in found] == [
        (CUSTOMERS, "covering", ("customer_id",), ("name",)),
        (ORDERS, "covering", ("customer_id",), ("amount",)),
    ]
    customers, orders = found
    assert customers.score == orders.score and customers.queries == 50
    assert f"paired with {orders.name}" in customers.reason
    assert f"paired with {customers.name}" in orders.reason


def test_no_pair_when_a_side_is_filtered_in_every_join():
    demands, profiles = join_setup()
    joins = [dataclasses.replace(d, templates=frozenset({"t1"})) for d in demands]
    assert len(analyze(joins, profiles, RuleSet())) == 2
    # the orders of a quarter, joined: adaptive execution broadcasts them; no bucketed pair
    quarter = dataclasses.replace(demand("date", "range", source=ORDERS),
                                  templates=frozenset({"t1"}))
    assert [i.kind for i in analyze(joins + [quarter], profiles, RuleSet())
            if i.kind == "covering"] == []
    # unless Spark never broadcasts
    assert len([i for i in analyze(joins + [quarter], profiles, RuleSet(), broadcasts=False)
                if i.kind == "covering"]) == 2
    # the recorded pairs say the orders joined were not the ones filtered (a self-join of
    # orders with a quarter of them, say): the pair is proposed; filtered, it is not
    for filtered, pairs in ((False, 2), (True, 0)):
        recorded = [dataclasses.replace(joins[0], paired=((CUSTOMERS, "customer_id", "t1",
                                                           False),)),
                    dataclasses.replace(joins[1], paired=((ORDERS, "customer_id", "t1",
                                                           filtered),))]
        assert len([i for i in analyze(recorded + [quarter], profiles, RuleSet())
                    if i.kind == "covering"]) == pairs


def test_executed_joins_decide_the_pair_over_the_heuristic():
    demands, profiles = join_setup()
    quarter = dataclasses.replace(demand("date", "range", source=ORDERS),
                                  templates=frozenset({"t1"}))

    def joined(strategies):
        return [dataclasses.replace(d, templates=frozenset({"t1"}), joined_by=tuple(
            (CUSTOMERS if d.source == ORDERS else ORDERS, s, n) for s, n in strategies))
            for d in demands]

    def covering(found):
        return sorted(i.source for i in found if i.kind == "covering")

    # filtered in every join, but the recorded joins shuffled: the pair spares the exchanges
    assert covering(analyze(joined([("shuffle", 30)]) + [quarter], profiles,
                            RuleSet())) == [CUSTOMERS, ORDERS]
    # the recorded joins broadcast: no pair, even where Spark is said never to broadcast
    assert covering(analyze(joined([("broadcast", 30)]), profiles, RuleSet(),
                            broadcasts=False)) == []
    # mostly broadcast (adaptive execution turned most of them into broadcasts): no pair
    assert covering(analyze(joined([("broadcast", 20), ("shuffle", 10)]), profiles,
                            RuleSet())) == []
    # joins recorded with another source say nothing about this pair: the heuristic decides
    other = [dataclasses.replace(d, joined_by=(("file:/lake/other", "broadcast", 9),))
             for d in demands]
    assert covering(analyze(other, profiles, RuleSet())) == [CUSTOMERS, ORDERS]


def test_a_self_join_on_one_column_gets_one_covering_index_serving_both_sides():
    # orders joined with itself on customer_id (a CTE used twice): the demand's partner is itself
    [me] = [dataclasses.replace(d, partners=frozenset({(ORDERS, "customer_id")}))
            for d in join_setup()[0] if d.source == ORDERS]
    profiles = join_setup()[1]
    [i] = analyze([me], profiles, RuleSet())
    assert (i.action, i.kind, i.source, i.columns, i.included_columns) == (
        "create", "covering", ORDERS, ("customer_id",), ("amount",))
    assert i.reason.startswith(f"50 self-joins of {ORDERS} on customer_id (10.0 s each, timed "
                               "over 50 runs) would take about")
    assert "serving both sides" in i.reason and "paired" not in i.reason
    # its executed joins decide as for two sources: broadcast ones get nothing
    broadcast = dataclasses.replace(me, joined_by=((ORDERS, "broadcast", 50),))
    assert analyze([broadcast], profiles, RuleSet(), broadcasts=False) == []
    shuffled = dataclasses.replace(me, joined_by=((ORDERS, "shuffle", 50),))
    assert len(analyze([shuffled], profiles, RuleSet())) == 1
    # the index exists: nothing more
    existing = [ExistingIndex("o", "covering", ORDERS, ("customer_id",), "user")]
    assert analyze([me], profiles, RuleSet(), existing) == []


def test_a_self_join_on_two_columns_gets_an_index_bucketed_on_each():
    # orders joined with itself: o.customer_id = p.referrer_id
    read = {"customer_id", "referrer_id", "amount"}
    demands = [demand("customer_id", "join", 50, read=read, source=ORDERS,
                      partners={(ORDERS, "referrer_id")}),
               demand("referrer_id", "join", 50, read=read, source=ORDERS,
                      partners={(ORDERS, "customer_id")})]
    profiles = {ORDERS: profile(source=ORDERS, all_columns=tuple(sorted(read)) + COLS[:8])}
    # two indexes of 3 columns in 11 each: more than the default budget, a quarter of the source
    found = analyze(demands, profiles, RuleSet(budget=Budget(index_bytes=6 * GiB)))
    assert [(i.kind, i.columns, i.included_columns) for i in found] == [
        ("covering", ("customer_id",), ("amount", "referrer_id")),
        ("covering", ("referrer_id",), ("amount", "customer_id"))]
    assert f"paired with {found[1].name}" in found[0].reason


def test_reasons_round_estimates_and_never_promise_everything():
    # lookups of a value one file in 10,000 holds: the what-if keeps ~1 file of 10,000
    [i] = analyze([demand("id", "lookup", samples=LOOKUPS)],
                  {EVENTS: profile(unique_id(10_000), files=10_000)}, RuleSet())
    assert i.kind == "bloom" and "100%" not in i.reason
    assert "over 90% less" in i.reason and "keeps ~" in i.reason
    # not timed: the seconds are an estimate, and the reason says so
    untimed = dataclasses.replace(demand("ts", "range", samples=RANGE), timed=0, seconds=0.0)
    [i] = analyze([untimed], {EVENTS: profile(hourly(100))}, RuleSet())
    assert "each, estimated from the bytes read" in i.reason
    # a join's pair: rounded to the nearest 10%
    [customers, _] = analyze(*join_setup(), RuleSet())
    assert re.search(r"would take about \d0% less time", customers.reason), customers.reason


def test_the_order_of_the_demand_does_not_change_the_advice():
    demands, profiles = three_sources(queries=(20, 20, 20))        # equal scores: ties
    joins, join_profiles = join_setup()
    demands += joins
    profiles.update(join_profiles)
    first = analyze(demands, profiles, RuleSet())
    for seed in range(5):
        shuffled = list(demands)
        random.Random(seed).shuffle(shuffled)
        assert analyze(shuffled, dict(reversed(list(profiles.items()))), RuleSet()) == first


_SEEDED = """
import dataclasses
from rules.analyzer import analyze
from rules.profiles import ColumnProfile, SourceProfile
from rules.user_rules import RuleSet
from rules.whatif import column_share
from tests.test_analyzer import join_setup, three_sources
cols = tuple(f"c{i}" for i in range(30))   # columns of many widths: sums in some order
wide = SourceProfile("s", "parquet", 10, 10, {c: ColumnProfile(
    c, "string", (), avg_bytes=1.1 + 0.37 * i) for i, c in enumerate(cols)}, cols)
print(repr(column_share(wide, cols[3:25])))
demands, profiles = three_sources(queries=(20, 20, 20))
joins, join_profiles = join_setup()
for i in analyze(demands + joins, {**profiles, **join_profiles}, RuleSet()):
    print(i.name, repr(i.score), repr(i.estimated_seconds_saved), i.reason)
"""


def test_the_same_demand_gives_the_same_advice_whatever_the_hash_seed():
    """Python orders a set of strings by their hashes, randomized per process: the advice
    (its order, its scores to the last bit, its reasons) must not follow that order (seeds 1
    and 2 summed the widths of a set of columns in orders giving two different floats)."""
    runs = {subprocess.run([sys.executable, "-c", _SEEDED], capture_output=True, text=True,
                           check=True, cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": str(seed),
                                                      "PYTHONPATH": ROOT}).stdout
            for seed in (1, 2)}
    assert len(runs) == 1 and "auto_covering" in runs.pop()


def test_a_pair_is_chosen_together_or_not_at_all():
    demands, profiles = join_setup()
    one_side = Budget(index_bytes=int(0.8 * GiB))      # the customers side alone would fit
    assert analyze(demands, profiles, RuleSet(budget=one_side)) == []
    # one side exists: the other is proposed alone
    existing = [ExistingIndex("by_hand", "covering", "/lake/orders", ("customer_id",), "user")]
    found = analyze(demands, profiles, RuleSet(), existing)
    assert [(i.source, i.kind) for i in found] == [(CUSTOMERS, "covering")]


def test_a_hot_json_source_gets_the_cache_a_parquet_one_does_not():
    raw = "file:/lake/raw"
    cols = tuple(f"c{i}" for i in range(10))
    demands = [demand("c0", "lookup", source=raw, read={"c0", "c1.x", "c3"}),   # no covering
               demand("c2", "group", 5, source=raw, read={"c2"})]
    json = {raw: profile(source=raw, fmt="json", all_columns=cols)}
    [i] = analyze(demands, json, RuleSet(), cache_capacity_bytes=100 * GiB)
    assert (i.action, i.kind, i.columns, i.name) == (
        "cache", "cache", ("c0", "c1", "c2", "c3"), None)
    assert (i.priority, i.queries) == (Priority.MEDIUM, 40)
    assert "Parquet cache" in i.reason
    assert analyze(demands, json, RuleSet()) == []          # no cache budget, no capacity
    assert analyze(demands, json, RuleSet(budget=Budget(cache_bytes=GiB // 100)),
                   cache_capacity_bytes=100 * GiB) == []    # does not fit
    parquet = {raw: profile(source=raw, all_columns=cols)}
    assert analyze(demands, parquet, RuleSet(), cache_capacity_bytes=100 * GiB) == []
    # a source only read (no filter): its reads are the demand the cache serves
    [read] = analyze([demand("c4", "projection", 12, source=raw, read={"c4"})], json, RuleSet(),
                     cache_capacity_bytes=100 * GiB)
    assert (read.kind, read.columns, read.queries) == ("cache", ("c4",), 12)
    assert read.reason.startswith("12 queries of file:/lake/raw (json")


def three_sources(distinct=(100_000, 200_000, 100_000), queries=(30, 20, 10)):
    """A bloom candidate on each of three sources, scored in the order given."""
    demands, profiles = [], {}
    for n, (d, q) in enumerate(zip(distinct, queries)):
        source = f"file:/lake/s{n}"
        demands.append(demand("id", "lookup", q, samples=LOOKUPS, source=source))
        profiles[source] = profile(unique_id(100, d), source=source)
    return demands, profiles


def test_greedy_by_score_within_the_index_bytes_budget():
    demands, profiles = three_sources()
    found = analyze(demands, profiles, RuleSet())
    assert [i.source for i in found] == ["file:/lake/s0", "file:/lake/s1", "file:/lake/s2"]
    assert found[0].score > found[1].score > found[2].score
    # 12 MB, 24 MB and 12 MB: with 30 MB the second does not fit, the third still does
    budget = Budget(index_bytes=30_000_000)
    found = analyze(demands, profiles, RuleSet(budget=budget))
    assert [i.source for i in found] == ["file:/lake/s0", "file:/lake/s2"]
    # the engine's indexes count with what they hold (a user's do not): 10 MB left
    made = [ExistingIndex("auto_x", "minmax", "file:/lake/other", ("a",), "engine", 20_000_000),
            ExistingIndex("by_hand", "minmax", "file:/lake/other", ("b",), "user", 10 ** 12)]
    still_used = [demand(c, "range", source="file:/lake/other") for c in "ab"]
    found = analyze(demands + still_used, profiles, RuleSet(budget=budget), made)
    assert found == []


def test_build_seconds_budget():
    demands, profiles = three_sources()
    # each build reads 1/30 of 10 GiB at 200 MB/s: about 1.8 s
    found = analyze(demands, profiles, RuleSet(budget=Budget(build_seconds_per_run=4.0)))
    assert [i.source for i in found] == ["file:/lake/s0", "file:/lake/s1"]


def test_indexes_per_source_count_existing_ones():
    demands = [demand("id", "lookup", 40, samples=LOOKUPS),
               demand("ts", "range", 20, samples=RANGE)]
    profiles = {EVENTS: profile(unique_id(100), hourly(100))}
    assert len(analyze(demands, profiles, RuleSet())) == 2
    existing = [ExistingIndex(f"mine{n}", "minmax", "/lake/events", (f"c{n}",), "user")
                for n in range(7)]
    [i] = analyze(demands, profiles, RuleSet(), existing)
    assert i.kind == "bloom"                                  # the higher score
    [i] = analyze(demands, profiles, RuleSet(budget=Budget(max_indexes_per_source=1)))
    assert i.kind == "bloom"


def test_a_never_source_gets_nothing():
    rules = load_rules("version: 1\nrules:\n  - {source: /lake/*, priority: NEVER}")
    demands, profiles = join_setup()
    demands.append(demand("id", "lookup", samples=LOOKUPS))
    profiles[EVENTS] = profile(unique_id(100), fmt="json")
    allowed = analyze(demands, profiles, RuleSet(), cache_capacity_bytes=100 * GiB)
    assert {(i.source, i.kind) for i in allowed} == {
        (ORDERS, "covering"), (CUSTOMERS, "covering"), (EVENTS, "bloom"), (EVENTS, "cache")}
    assert analyze(demands, profiles, rules, cache_capacity_bytes=100 * GiB) == []


def test_what_exists_is_not_proposed_again():
    demands = [demand("id", "lookup", samples=LOOKUPS), demand("ts", "range", samples=RANGE)]
    profiles = {EVENTS: profile(unique_id(100), hourly(100))}
    existing = [ExistingIndex("ids", "bloom", "hdfs://nn/lake/events", ("id",), "user"),
                ExistingIndex("auto_ts", "minmax", EVENTS, ("ts",), "engine")]
    assert analyze(demands, profiles, RuleSet(), existing) == []
    # a value list on the ids would serve the same lookups: none is proposed either
    existing = [ExistingIndex("ids", "valuelist", EVENTS, ("id",), "user")]
    assert kinds(analyze(demands, profiles, RuleSet(), existing)) == [
        ("create", "minmax", ("ts",))]


def test_cooldown_is_honoured():
    few = demand("id", "lookup", samples=LOOKUPS, read={"id", "c3"})
    profiles = {EVENTS: profile(unique_id(10), files=10)}
    cooling = [("/lake/events", "covering", ("id",))]
    [i] = analyze([few], profiles, RuleSet(), cooldown=cooling)
    assert i.kind == "bloom"                                   # the next best
    cooling.append(("/lake/events", "bloom", ("id",)))
    assert analyze([few], profiles, RuleSet(), cooldown=cooling) == []


def test_less_than_a_fifth_saved_is_not_proposed_however_hot():
    # every file holds a wide range, up to hour 100
    start = dt.datetime(2026, 1, 5)
    wide = ColumnProfile("ts", "timestamp", tuple(
        (start + dt.timedelta(hours=i // 10), start + dt.timedelta(hours=100))
        for i in range(100)))
    # file i starts at hour i // 10: ts < 09:00 keeps 90 files of 100, ts < 07:00 keeps 70
    hot = demand("ts", "range", 100_000, samples=[("LessThan", "2026-01-05 09:00:00")])
    assert analyze([hot], {EVENTS: profile(wide)}, RuleSet()) == []
    better = demand("ts", "range", 10, samples=[("LessThan", "2026-01-05 07:00:00")])
    [i] = analyze([better], {EVENTS: profile(wide)}, RuleSet())
    assert i.kind == "minmax" and i.estimated_seconds_saved == pytest.approx(3.0)


def test_engine_indexes_without_demand_are_dropped_never_user_ones():
    existing = [ExistingIndex("auto_old", "bloom", EVENTS, ("gone",), "engine"),
                ExistingIndex("mine", "bloom", EVENTS, ("gone",), "user"),
                ExistingIndex("auto_ts", "minmax", EVENTS, ("ts",), "engine")]
    found = analyze([demand("ts", "range", samples=RANGE)], {EVENTS: profile(hourly(100))},
                    RuleSet(), existing)
    assert [(i.action, i.name, i.origin) for i in found] == [("drop", "auto_old", "engine")]
    assert "no query in the history uses gone" in found[0].reason


def test_json_paths_get_skipping_sketches_and_never_covering_text_or_cached_names():
    at = "get_json_object(payload, '$.at')"
    start = dt.datetime(2026, 1, 5)
    hours = ColumnProfile(at, "string", tuple(
        (str(start + dt.timedelta(hours=i)), str(start + dt.timedelta(hours=i, minutes=59)))
        for i in range(100)), distinct_per_file=50_000, rows_per_file=100_000, avg_bytes=19)
    windows = [("GreaterThanOrEqual", "2026-01-05 10:00:00"),
               ("LessThanOrEqual", "2026-01-05 11:00:00")]
    demands = [demand(at, "range", samples=windows, read={"id", "payload"}),
               demand(at, "lookup", samples=[("EqualTo", "2026-01-05 10:30:00")],
                      read={"id", "payload"}),
               demand(at, "text", samples=[("Contains", "10:3")], read={"id", "payload"})]
    found = analyze(demands, {EVENTS: profile(hours)}, RuleSet())
    assert kinds(found) == [("create", "minmax", (at,))]
    # a JSON source's cache holds the columns read, never the expression as a column
    raw = {EVENTS: profile(hours, fmt="json")}
    cached = [i for i in analyze(demands, raw, RuleSet(), cache_capacity_bytes=100 * GiB)
              if i.kind == "cache"]
    assert [i.columns for i in cached] == [("id", "payload")]
    # partition columns are not cached columns (their values come with every entry)
    by_day = {EVENTS: dataclasses.replace(raw[EVENTS], partition_columns=("id",))}
    cached = [i for i in analyze(demands, by_day, RuleSet(), cache_capacity_bytes=100 * GiB)
              if i.kind == "cache"]
    assert [i.columns for i in cached] == [("payload",)]


def test_nothing_saving_under_min_seconds_a_query_is_proposed():
    """A small dimension's share of star joins' time (its bytes read against the fact's: a
    few ms a query) gets no covering index, even though the index would halve it; a lookup
    saving less than MIN_SECONDS_SAVED neither; the same demand with seconds to save does."""
    [me] = [dataclasses.replace(d, partners=frozenset({(ORDERS, "customer_id")}))
            for d in join_setup()[0] if d.source == ORDERS]
    profiles = join_setup()[1]
    assert len(analyze([me], profiles, RuleSet())) == 1
    small = dataclasses.replace(me, seconds=0.04 * me.timed)
    assert analyze([small], profiles, RuleSet()) == []
    fast = demand("id", "lookup", seconds=0.04, samples=LOOKUPS)
    assert analyze([fast], {EVENTS: profile(unique_id(100))}, RuleSet()) == []
    assert len(analyze([demand("id", "lookup", seconds=0.2, samples=LOOKUPS)],
                       {EVENTS: profile(unique_id(100))}, RuleSet())) == 1


def test_a_source_whose_analysis_fails_is_skipped_and_counted_the_others_advised(caplog):
    """A profile the analysis cannot read (ranges that are no list) fails its source's
    analysis: that source's advice is left out and counted (analysis-failed, with its queries
    and the error), the other source's advice stands."""
    other = "file:/lake/other"
    broken = dataclasses.replace(unique_id(100), ranges=None)
    demands = [demand("id", "lookup", 40, samples=LOOKUPS),
               demand("id", "lookup", 30, samples=LOOKUPS, source=other)]
    profiles = {EVENTS: profile(unique_id(100)), other: profile(broken, source=other)}
    skipped: list = []
    with caplog.at_level(logging.WARNING, logger="accelerator.rules.analyzer"):
        found = analyze(demands, profiles, RuleSet(), skipped=skipped)
    assert [(i.kind, i.source) for i in found] == [("bloom", EVENTS)]
    [skip] = skipped
    assert (skip.code, skip.source, skip.queries) == ("analysis-failed", other, 30)
    assert skip.example.startswith("id (lookup): TypeError")
    assert "analysis-failed" in caplog.text and other in caplog.text


def test_a_reason_counts_one_query_in_the_singular():
    [i] = analyze([demand("id", "lookup", 1, samples=LOOKUPS)],
                  {EVENTS: profile(unique_id(100))}, RuleSet(), min_seconds_saved=0)
    assert i.reason.startswith("1 lookup of id (10.0 s each, timed over 1 run) would read"), \
        i.reason
