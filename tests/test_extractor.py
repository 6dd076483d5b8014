"""The extractor without a JVM: demand per (source, column, use) from query records, decayed
by age, exploration queries ignored."""
from __future__ import annotations

import dataclasses
import logging
import random

import pytest

from rules.extractor import Demand, extract, extract_with_skips, is_exploration
from rules.history.records import JoinedPair, Predicate, QueryRecord, RelationUsage

DAY_MS = 86400 * 1000
NOW = 100 * DAY_MS


def record(ts, *, preds=(), filters=(), joins=(), groups=(), outputs=(), source="file:/lake/e",
           exploration=False):
    rel = RelationUsage(source, [source], "parquet", None, [], list(filters), list(joins),
                        list(groups), list(outputs))
    return QueryRecord(ts, f"q{ts}", [source], ["parquet"], list(filters), list(outputs),
                       list(joins), list(groups),
                       [Predicate(0, source, c, shape, op, fn) for c, shape, op, fn in preds],
                       [], [rel], exploration=exploration)


def test_uses_of_each_predicate_shape_join_group_and_projection():
    rows = extract([
        record(NOW, preds=[("id", "equality", "EqualTo", None), ("ts", "range", "GreaterThan",
                                                                  None),
                           ("msg", "contains", "Contains", None), ("msg", "other", "RLike", None),
                           ("name", "equality", "EqualTo", "Lower"),
                           ("x", "isnull", "IsNull", None)],
               filters=["id", "ts", "msg", "name", "x"], joins=["k"], groups=["g"],
               outputs=["id", "ts", "msg", "name", "x", "k", "g", "payload"]),
    ], NOW)
    assert {(d.column, d.use) for d in rows} == {
        ("id", "lookup"), ("ts", "range"), ("msg", "text"), ("k", "join"), ("g", "group"),
        ("payload", "projection")}
    assert all(d.queries == 1 and d.weight == 1.0 and d.last_seen == NOW for d in rows)


def test_demand_decays_by_half_lives_and_sorts_heaviest_first():
    rows = extract([
        record(NOW, preds=[("a", "equality", "EqualTo", None)], filters=["a"]),
        record(NOW - 7 * DAY_MS, preds=[("a", "equality", "EqualTo", None)], filters=["a"]),
        record(NOW - 14 * DAY_MS, preds=[("b", "in", "In", None)], filters=["b"]),
        record(NOW - 14 * DAY_MS, preds=[("b", "in", "In", None)], filters=["b"]),
        record(NOW - 14 * DAY_MS, preds=[("b", "in", "In", None)], filters=["b"]),
    ], NOW, half_life_s=7 * 86400)
    assert rows == [Demand("file:/lake/e", "a", "lookup", 2, 1.5, NOW),
                    Demand("file:/lake/e", "b", "lookup", 3, 0.75, NOW - 14 * DAY_MS)]
    with pytest.raises(ValueError, match="half-life"):
        extract([], NOW, half_life_s=0)


def test_exploration_queries_never_count():
    browse = record(NOW, outputs=["id", "ts", "msg"], exploration=True)
    assert is_exploration(browse)
    assert extract([browse, browse], NOW) == []
    assert not is_exploration(record(NOW, groups=["g"], outputs=["g"]))


def test_a_self_join_counts_once_per_query():
    rows = extract([record(NOW, joins=["id"], outputs=["id"])], NOW)
    assert rows == [Demand("file:/lake/e", "id", "join", 1, 1.0, NOW,
                           columns_read=frozenset({"id"}))]


def _timed(ts, query_id, duration_ms, literal, template="t1", rows_read=None, served_by=None):
    rel = RelationUsage("file:/lake/e", ["file:/lake/e"], "json", None, [], ["id"], [], [],
                        ["id", "msg"], served_by, bytes_read=1000, rows_read=rows_read)
    pred = Predicate(0, "file:/lake/e", "id", "equality", "EqualTo", None, None, [literal],
                     "bigint")
    return QueryRecord(ts, query_id, ["file:/lake/e"], ["json"], ["id"], ["id", "msg"], [], [],
                       [pred], [], [rel], template=template, duration_ms=duration_ms)


def test_costs_samples_and_templates_of_executions():
    planned = _timed(NOW - 5, "q1", None, "7")        # the planning record of q1 ...
    ran = _timed(NOW, "q1", 2000, "7")                # ... and its execution: counted once
    again = _timed(NOW, "q1", 1000, "7", rows_read=300)   # the same DataFrame run again
    never_ran = _timed(NOW, "q2", None, "9", "t2")    # planned (explain) and not executed
    served = _timed(NOW, "q3", 10, "8", rows_read=2, served_by="idx")
    (row,) = [d for d in extract([planned, ran, again, never_ran, served], NOW)
              if d.use == "lookup"]
    assert (row.queries, row.timed, row.seconds, row.bytes_read) == (4, 3, 3.01, 3000)
    # the source's own scans that counted their rows (not the index's)
    assert (row.scanned_bytes, row.scanned_rows) == (1000, 300)
    assert row.seconds_per_query == pytest.approx(3.01 / 3)
    assert sorted(row.samples) == [("EqualTo", "7"), ("EqualTo", "7"), ("EqualTo", "8"),
                                   ("EqualTo", "9")]
    assert row.literal_type == "bigint"
    assert row.templates == {"t1", "t2"}
    assert row.columns_read == {"id", "msg"}


def test_join_demand_names_the_other_side():
    left = RelationUsage("file:/lake/orders", [], "parquet", None, [], [], ["o_key"], [],
                         ["o_key"])
    right = RelationUsage("file:/lake/items", [], "parquet", None, [], [], ["l_key"], [],
                          ["l_key", "price"])
    rec = QueryRecord(NOW, "j", [left.source, right.source], ["parquet"] * 2, [], [],
                      ["l_key", "o_key"], [], [], [], [left, right])
    joins = {(d.source, d.column): d for d in extract([rec], NOW) if d.use == "join"}
    assert joins[("file:/lake/orders", "o_key")].partners == {("file:/lake/items", "l_key")}
    assert joins[("file:/lake/items", "l_key")].partners == {("file:/lake/orders", "o_key")}


def test_recorded_join_pairs_name_the_partners_an_old_record_guesses():
    """A star query: the fact's date key joined to a filtered date dimension, its item key to
    an unfiltered item dimension. Recorded pairs name each key's own partner and whether it was
    filtered; a record written before pairs were kept (``join_pairs`` None) guesses every join
    key of the other relations."""
    fact, dates, items = "file:/lake/sales", "file:/lake/dates", "file:/lake/items"
    rels = [RelationUsage(fact, [], "parquet", None, [], [], ["date_sk", "item_sk"], [], []),
            RelationUsage(dates, [], "parquet", None, [], ["year"], ["d_sk"], [], []),
            RelationUsage(items, [], "parquet", None, [], [], ["i_sk"], [], [])]
    pairs = [JoinedPair(0, fact, "date_sk", False, 1, dates, "d_sk", True),
             JoinedPair(0, fact, "item_sk", False, 2, items, "i_sk", False)]
    rec = QueryRecord(NOW, "s", [r.source for r in rels], ["parquet"] * 3, ["year"], [],
                      ["d_sk", "date_sk", "i_sk", "item_sk"], [], [], [], rels, template="t",
                      join_pairs=pairs)
    joins = {(d.source, d.column): d for d in extract([rec], NOW) if d.use == "join"}
    assert joins[(fact, "date_sk")].partners == {(dates, "d_sk")}
    assert joins[(fact, "date_sk")].paired == ((dates, "d_sk", "t", True),)
    assert joins[(fact, "item_sk")].paired == ((items, "i_sk", "t", False),)
    assert joins[(dates, "d_sk")].paired == ((fact, "date_sk", "t", False),)
    old = extract([dataclasses.replace(rec, join_pairs=None)], NOW)
    guessed = {(d.source, d.column): d for d in old if d.use == "join"}
    assert guessed[(fact, "date_sk")].partners == {(dates, "d_sk"), (items, "i_sk")}
    assert guessed[(fact, "date_sk")].paired == ()


def _on_days(ts, *predicates):
    rel = RelationUsage("file:/lake/clicks", ["file:/lake/clicks"], "json", None, ["day"],
                        ["url"], [], [], ["url", "day"])
    preds = [Predicate(0, rel.source, "url", "equality", "EqualTo", None, None, ["/a"], "string")]
    preds += [Predicate(0, rel.source, "day", shape, op, None, None, list(values), "date")
              for shape, op, values in predicates]
    return QueryRecord(ts, f"d{ts}", [rel.source], ["json"], ["day", "url"], ["day", "url"],
                       [], [], preds, [], [rel])


def test_the_partitions_queries_touched():
    recent = [_on_days(NOW, ("range", "GreaterThanOrEqual", ["2026-11-09"]),
                       ("range", "LessThanOrEqual", ["2026-11-10"])),
              _on_days(NOW - 1, ("equality", "EqualTo", ["2026-11-08"])),
              _on_days(NOW - 2, ("in", "In", ["2026-11-10", "2026-11-07"]))]
    (url,) = [d for d in extract(recent, NOW) if d.column == "url"]
    assert url.partition_window == ("day", "2026-11-07", "2026-11-10")
    # typed, not text: 9 < 10 for numbers
    numbers = [_on_days(NOW, ("equality", "EqualTo", ["9"])),
               _on_days(NOW, ("equality", "EqualTo", ["10"]))]
    for r in numbers:
        r.predicates[1].literal_type = "integer"
    (url,) = [d for d in extract(numbers, NOW) if d.column == "url"]
    assert url.partition_window == ("day", "9", "10")
    # one query over every partition: the whole source is hot
    everything = recent + [_on_days(NOW - 3)]
    (url,) = [d for d in extract(everything, NOW) if d.column == "url"]
    assert url.partition_window is None
    # "the last days": an open end
    since = recent + [_on_days(NOW - 4, ("range", "GreaterThan", ["2026-11-05"]))]
    (url,) = [d for d in extract(since, NOW) if d.column == "url"]
    assert url.partition_window == ("day", "2026-11-05", None)


def test_a_query_it_cannot_read_is_skipped_counted_and_the_others_still_count(caplog):
    good = [record(NOW - i, preds=[("a", "equality", "EqualTo", None)], filters=["a"])
            for i in range(2)]
    bad = record(NOW, joins=["k"])
    broken = dataclasses.replace(bad, query_id="odd", relations=[
        dataclasses.replace(bad.relations[0], join_columns=None)])   # a shape it cannot read
    with caplog.at_level(logging.WARNING, logger="accelerator.rules.extractor"):
        rows, [skip] = extract_with_skips(good[:1] + [broken] + good[1:], NOW)
    assert [(d.column, d.use, d.queries) for d in rows] == [("a", "lookup", 2)]
    [message] = [r.getMessage() for r in caplog.records]
    assert "skipped 1 of 3 recorded queries" in message and "odd: TypeError" in message
    assert (skip.code, skip.queries, skip.source) == ("unreadable-record", 1, None)
    i = skip.instruction()
    assert (i.action, i.kind, i.queries) == ("skip", "unreadable-record", 1)
    assert i.reason.startswith("1 recorded query skipped (unreadable-record): the engine could "
                               "not read their records; first: odd: TypeError")


def test_the_same_history_in_any_order_gives_the_same_demand():
    records = [record(NOW - (i % 4) * DAY_MS, preds=[(c, "equality", "EqualTo", None)],
                      filters=[c], joins=["k"] if i % 3 == 0 else [], outputs=[c, "p"])
               for i, c in enumerate("abcabcabcabc")]
    records = [dataclasses.replace(r, query_id=f"q{i}", predicates=[dataclasses.replace(
        p, literals=[str(i)]) for p in r.predicates]) for i, r in enumerate(records)]
    first = extract(records, NOW)
    for seed in range(5):
        shuffled = list(records)
        random.Random(seed).shuffle(shuffled)
        assert extract(shuffled, NOW) == first


def test_a_joins_time_goes_to_its_sources_by_the_bytes_each_read():
    """A fact of 990 bytes read joined with a dimension of 10: the query's 2 s count 1.98 s
    on the fact's join key and 0.02 s on the dimension's (whose index could save no more),
    also when a CTE reads them again from a reused exchange (no bytes recorded); a query of
    one source, or a source whose bytes are unknown, counts whole."""
    def rel(source, read):
        return RelationUsage(source, [source], "parquet", None, [], [], ["k"], [], ["k"],
                             bytes_read=read)
    fact, dim = "file:/lake/fact", "file:/lake/dim"
    star = QueryRecord(NOW, "q1", [fact, dim], ["parquet"] * 2, [], ["k"], ["k"], [], [], [],
                       [rel(fact, 990), rel(dim, 10)], duration_ms=2000)
    alone = dataclasses.replace(star, query_id="q2", relations=[rel(dim, 10)])
    unknown = dataclasses.replace(star, query_id="q3", relations=[rel(fact, None),
                                                                  rel(dim, 10)])
    reused = dataclasses.replace(star, query_id="q4", relations=[
        rel(fact, 990), rel(dim, 10), rel(fact, None), rel(dim, None)])   # a CTE read twice
    seconds = {d.source: d.seconds for d in extract([star], NOW) if d.use == "join"}
    assert seconds == {fact: pytest.approx(1.98), dim: pytest.approx(0.02)}
    assert [d.seconds for d in extract([alone], NOW) if d.use == "join"] == [2.0]
    assert {d.source: d.seconds for d in extract([reused], NOW) if d.use == "join"} == \
        {fact: pytest.approx(1.98), dim: pytest.approx(0.02)}
    # the fact's bytes unknown: it may take any of the time, the dimension's share unknown too
    assert {d.source: d.seconds for d in extract([unknown], NOW) if d.use == "join"} == \
        {fact: 2.0, dim: 2.0}
