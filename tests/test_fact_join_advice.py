"""The rule engine proposes dynamic file pruning's sketches: a min/max sketch on a fact table's
key joined to a filtered dimension, when the fact's files hold narrow ranges of the key; with a
reason naming the evidence. Demand and profiles are built by hand; no JVM."""
from __future__ import annotations

import dataclasses

import pytest

from rules.analyzer import analyze
from rules.extractor import Demand
from rules.join_pruning import fact_joins
from rules.profiles import ColumnProfile, ExistingIndex, SourceProfile
from rules.user_rules import RuleSet
from rules.whatif import row_share, span_keep

GiB = 2 ** 30
SALES, DATES, ITEMS = "file:/lake/sales", "file:/lake/dates", "file:/lake/items"
FILES, DAYS = 100, 18          # fact file i holds the date keys 2450000 + 18i .. + 17
START = 2_450_000
TEMPLATES = frozenset({"t1", "t2"})


def clustered_key() -> ColumnProfile:
    return ColumnProfile("ss_sold_date_sk", "int",
                         tuple((START + DAYS * i, START + DAYS * i + DAYS - 1)
                               for i in range(FILES)),
                         distinct_per_file=DAYS, rows_per_file=100_000, distinct_total=DAYS * 16)


def unclustered_key() -> ColumnProfile:
    return ColumnProfile("ss_item_sk", "int", ((1, 20_000),) * FILES,
                         distinct_per_file=20_000, rows_per_file=100_000, distinct_total=20_000)


def profiles(fact_key=None) -> dict[str, SourceProfile]:
    fact_key = fact_key or clustered_key()
    return {
        SALES: SourceProfile(SALES, "parquet", FILES, 10 * GiB, {fact_key.column: fact_key},
                             ("ss_sold_date_sk", "ss_item_sk", "amt")),
        DATES: SourceProfile(DATES, "parquet", 1, 2 ** 20, {
            "d_date_sk": ColumnProfile("d_date_sk", "bigint", ((START - 1000, START + 3000),),
                                       distinct_per_file=4001, distinct_total=4001),
            "d_moy": ColumnProfile("d_moy", "int", ((1, 12),), distinct_per_file=12,
                                   distinct_total=12),
            "d_year": ColumnProfile("d_year", "int", ((1997, 2007),), distinct_per_file=11,
                                    distinct_total=11),
            "d_dow": ColumnProfile("d_dow", "int", ((0, 6),), distinct_per_file=7,
                                   distinct_total=7)}, ("d_date_sk", "d_year", "d_moy")),
        ITEMS: SourceProfile(ITEMS, "parquet", 1, 2 ** 20, {
            "i_item_sk": ColumnProfile("i_item_sk", "int", ((1, 20_000),),
                                       distinct_per_file=20_000, distinct_total=20_000),
            "i_category": ColumnProfile("i_category", "string", (("A", "J"),),
                                        distinct_per_file=10, distinct_total=10)},
            ("i_item_sk", "i_category")),
    }


def row(source, column, use, samples=(), templates=TEMPLATES, partners=(), queries=40,
        seconds=10.0) -> Demand:
    return Demand(source, column, use, queries, float(queries), 0, queries, seconds * queries,
                  0, tuple(samples), None, frozenset(templates), frozenset({column}),
                  frozenset(partners))


def star(month=(("EqualTo", "11"),), fact_column="ss_sold_date_sk") -> list[Demand]:
    """Joins of the fact's date key with the date dimension filtered on a month and a year."""
    return [row(SALES, fact_column, "join", partners={(DATES, "d_date_sk")}),
            row(DATES, "d_date_sk", "join", partners={(SALES, fact_column)}),
            row(DATES, "d_moy", "lookup", month),
            row(DATES, "d_year", "lookup", [("EqualTo", "2001")])]


def test_a_clustered_fact_key_joined_to_a_filtered_dimension_gets_a_min_max_sketch():
    [i] = analyze(star(), profiles(), RuleSet(), now_ms=3600_000)
    assert (i.action, i.kind, i.source, i.columns) == ("create", "minmax", SALES,
                                                      ("ss_sold_date_sk",))
    assert i.queries == 40 and i.estimated_seconds_saved > 5
    assert ("40 joins of ss_sold_date_sk of file:/lake/sales with d_date_sk of "
            "file:/lake/dates filtered on d_moy, d_year (2 of 2 templates; 10.0 s each, timed "
            "over 40 runs) would read over 90% less with min/max statistics on "
            "ss_sold_date_sk pruning its files through the join: its filters keep at most "
            "~8.3% of its rows on average (~150 keys); the what-if keeps ~10 (keys contiguous, as a date "
            "dimension's) to ~78 (keys scattered) of 100 files a query") in i.reason, i.reason
    assert "100%" not in i.reason and i.reason.endswith("last used 1 h ago")


def test_filters_on_the_dimension_key_itself_give_the_files_kept():
    demands = star()[:2] + [row(DATES, "d_date_sk", "range",
                                [("GreaterThanOrEqual", str(START + 180)),
                                 ("LessThanOrEqual", str(START + 215))])]
    [j] = fact_joins(demands, profiles())
    assert (j.dimension, j.dimension_key, j.share) == (DATES, "d_date_sk", None)
    assert j.keep == j.keep_high == 2 / FILES       # keys 180..215: files 10 and 11
    [i] = analyze(demands, profiles(), RuleSet())
    assert "its filters bound d_date_sk itself; the what-if keeps ~2 of 100 files" in i.reason


def test_no_sketch_when_the_fact_files_span_every_key():
    demands = [row(SALES, "ss_item_sk", "join", partners={(ITEMS, "i_item_sk")}),
               row(ITEMS, "i_item_sk", "join", partners={(SALES, "ss_item_sk")}),
               row(ITEMS, "i_category", "lookup", [("EqualTo", "Books")])]
    assert analyze(demands, profiles(unclustered_key()), RuleSet()) == []


def test_no_sketch_without_a_dimension_filter_in_the_join_templates():
    demands = star()
    demands[2:] = [dataclasses.replace(d, templates=frozenset({"other"})) for d in demands[2:]]
    assert fact_joins(demands, profiles()) == []
    assert analyze(demands, profiles(), RuleSet()) == []


def test_joins_without_the_filter_keep_their_files():
    demands = star()
    demands[0] = dataclasses.replace(demands[0], templates=TEMPLATES | {"t3", "t4"})
    [half] = fact_joins(demands, profiles())
    [full] = fact_joins(star(), profiles())
    assert half.filtered == 2 and half.keep == 0.5 + 0.5 * full.keep


def test_a_partner_whose_keys_do_not_hold_the_fact_keys_is_not_its_dimension():
    demands = star()
    demands[0] = dataclasses.replace(demands[0], partners=frozenset({(ITEMS, "i_item_sk")}))
    demands += [row(ITEMS, "i_item_sk", "join", partners={(SALES, "ss_sold_date_sk")}),
                row(ITEMS, "i_category", "lookup", [("EqualTo", "Books")])]
    assert fact_joins(demands, profiles()) == []


def test_an_existing_sketch_a_cooldown_or_a_partition_key_stops_the_proposal():
    existing = ExistingIndex("ds", "minmax", SALES, ("ss_sold_date_sk",), "user")
    assert analyze(star(), profiles(), RuleSet(), [existing]) == []
    partitioned = profiles()
    partitioned[SALES] = dataclasses.replace(partitioned[SALES],
                                             partition_columns=("ss_sold_date_sk",))
    assert analyze(star(), partitioned, RuleSet()) == []
    assert analyze(star(), profiles(), RuleSet(), cooldown=[
        (SALES, "minmax", ("ss_sold_date_sk",))]) == []


def test_row_share_and_span_keep():
    month = ColumnProfile("d_moy", "int", ((1, 12),), distinct_total=12)
    assert row_share(month, [("EqualTo", "3")]) == 1 / 12
    assert row_share(month, [("GreaterThanOrEqual", "1"), ("LessThan", "12")]) == 1.0
    assert row_share(month, [("Like", "x")]) is None
    key = clustered_key()
    assert 0.05 <= span_keep(key, 0.05) <= 0.07      # 90 of 1,800 days: 5 or 6 files
    assert span_keep(key, 1.0) == 1.0


def test_templates_bounding_the_key_and_the_others_are_weighed_apart():
    demands = star()
    demands[0] = dataclasses.replace(demands[0], templates=TEMPLATES | {"t3"})
    demands[1] = dataclasses.replace(demands[1], templates=TEMPLATES | {"t3"})
    day = dataclasses.replace(row(DATES, "d_date_sk", "lookup", [("EqualTo", str(START + 180))]),
                              templates=frozenset({"t3"}))
    [j] = fact_joins(demands + [day], profiles())
    [months] = fact_joins(star(), profiles())
    assert (j.filtered, j.bounded) == (3, 1)
    assert j.keep == pytest.approx((2 * months.keep + 1 / FILES) / 3)
    [i] = analyze(demands + [day], profiles(), RuleSet())
    assert ("its filters in 1 template bound d_date_sk itself, in the others keep at most "
            "~8.3% of its rows") in i.reason, i.reason


def test_each_template_is_estimated_with_its_own_filters():
    demands = star()
    demands[0] = dataclasses.replace(demands[0], templates=TEMPLATES | {"t3"})
    demands[1] = dataclasses.replace(demands[1], templates=TEMPLATES | {"t3"})
    weekend = dataclasses.replace(row(DATES, "d_dow", "lookup", [("In", "0"), ("In", "6")]),
                                  templates=frozenset({"t3"}))
    [j] = fact_joins(demands + [weekend], profiles())
    # a month (1/12, the more selective of month and year) in t1 and t2, weekends (1/7) in t3
    assert j.share == pytest.approx((1 / 12 + 1 / 12 + 1 / 7) / 3)


def test_recorded_pairs_say_which_dimension_a_key_joins_and_whether_it_was_filtered():
    """A second date key of the fact (a ship date), joined in the same templates to another,
    unfiltered relation of the date dimension: guessed from the join columns alone it looks
    joined to the filtered dates and gets a sketch too; the recorded pairs say its side was
    not filtered (none), and the sold date's was in one template of two."""
    ship = dataclasses.replace(clustered_key(), column="ss_ship_date_sk")
    found = profiles()
    found[SALES] = dataclasses.replace(found[SALES], columns={
        **found[SALES].columns, "ss_ship_date_sk": ship})
    guessed = star() + [row(SALES, "ss_ship_date_sk", "join", partners={(DATES, "d_date_sk")})]
    assert [j.fact.column for j in fact_joins(guessed, found)] == ["ss_ship_date_sk",
                                                                   "ss_sold_date_sk"]
    paired = list(guessed)
    paired[0] = dataclasses.replace(paired[0], paired=(
        (DATES, "d_date_sk", "t1", True), (DATES, "d_date_sk", "t2", False)))
    paired[-1] = dataclasses.replace(paired[-1], paired=(
        (DATES, "d_date_sk", "t1", False), (DATES, "d_date_sk", "t2", False)))
    [j] = fact_joins(paired, found)
    [both] = fact_joins(star(), profiles())
    assert (j.fact.column, j.filtered) == ("ss_sold_date_sk", 1)
    assert j.keep == pytest.approx(0.5 + 0.5 * both.keep)
