"""What-if estimates: literals, keep fractions per index kind, costs. Without a JVM."""
from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal

import pytest

from rules.extractor import Demand
from rules.literals import parse_literal
from rules.profiles import ColumnProfile, SourceProfile
from rules.whatif import BLOOM_FPP, COVERING_BUCKETS, FILE_TIME_SHARE, Candidate, Estimate, \
    estimate, files_per_value, keep_fraction, minmax_keep, text_keep

SRC = "file:/lake/t"
#: ten files holding 0-9, 10-19, ... 90-99
CLUSTERED = ColumnProfile("x", "long", tuple((10 * i, 10 * i + 9) for i in range(10)))


def lookup(column="x", samples=(), use="lookup", **kw) -> Demand:
    return Demand(SRC, column, use, 10, 10.0, 0, samples=tuple(samples), **kw)


@pytest.mark.parametrize("text, type_, value", [
    ("abc ", "string", "abc "),
    ("x", "varchar(3)", "x"),
    ("42", "long", 42), ("-7", "integer", -7), ("3", "short", 3), ("1", "byte", 1),
    ("1.5", "double", 1.5), ("1.0E10", "float", 1e10),
    ("12.30", "decimal(10,2)", Decimal("12.30")),
    ("true", "boolean", True), ("FALSE", "boolean", False),
    ("2026-01-05", "date", dt.date(2026, 1, 5)),
    ("20458", "date", dt.date(2026, 1, 5)),                       # days, as an InSet holds it
    ("1767571200000000", "timestamp", dt.datetime(2026, 1, 5)),   # microseconds
    ("2026-01-05 10:30:00.5", "timestamp", dt.datetime(2026, 1, 5, 10, 30, 0, 500000)),
    ("2026-01-05T12:00:00+02:00", "timestamp", dt.datetime(2026, 1, 5, 10)),
    ("2026-01-05 10:00:00", "timestamp_ntz", dt.datetime(2026, 1, 5, 10)),
])
def test_literals_parse_to_the_profiles_types(text, type_, value):
    parsed = parse_literal(text, type_)
    assert parsed == value and type(parsed) is type(value)


@pytest.mark.parametrize("text, type_", [
    ("abc", "long"), ("1.5", "integer"), ("", "double"), ("maybe", "boolean"),
    ("NaN", "decimal(10,2)"), ("2026-13-01", "date"), ("yesterday", "timestamp"),
    ("00ff", "binary"),
])
def test_unparsable_literals_raise_value_error(text, type_):
    with pytest.raises(ValueError):
        parse_literal(text, type_)


def test_minmax_keeps_files_whose_range_holds_the_values():
    assert minmax_keep(CLUSTERED, [("EqualTo", "15")]) == 0.1
    assert minmax_keep(CLUSTERED, [("EqualTo", "500")]) == 0.0
    assert minmax_keep(CLUSTERED, [("In", "5"), ("In", "95"), ("In", "500")]) == \
        pytest.approx(0.2 / 3)


@pytest.mark.parametrize("op, value, keep", [
    ("GreaterThan", "89", 0.1), ("GreaterThan", "90", 0.1), ("GreaterThanOrEqual", "89", 0.2),
    ("LessThan", "10", 0.1), ("LessThanOrEqual", "10", 0.2), ("LessThan", "0", 0.0),
])
def test_minmax_keeps_files_meeting_a_range_either_way(op, value, keep):
    assert minmax_keep(CLUSTERED, [(op, value)]) == pytest.approx(keep)


def test_a_lower_and_an_upper_bound_recorded_together_are_one_interval():
    assert minmax_keep(CLUSTERED, [("GreaterThanOrEqual", "20"), ("LessThan", "40")]) == 0.2
    # an empty "interval" is two queries, each scored alone
    assert minmax_keep(CLUSTERED, [("GreaterThan", "50"), ("LessThan", "10")]) == \
        pytest.approx((0.5 + 0.1) / 2)


def test_minmax_keeps_what_it_cannot_judge():
    partly = ColumnProfile("x", "long", ((0, 9), None))
    assert minmax_keep(partly, [("EqualTo", "50")]) == 0.5          # unknown range: kept
    assert minmax_keep(CLUSTERED, [("EqualTo", "abc")]) == 1.0      # unparsable: kept
    assert minmax_keep(CLUSTERED, [("Like", "1%")]) == 1.0
    # no samples: a value the column holds (each file's minimum) is looked up
    assert minmax_keep(CLUSTERED, []) == pytest.approx(0.1)
    spread = ColumnProfile("x", "long", ((0, 99),) * 10)
    assert minmax_keep(spread, []) == 1.0


def test_dates_and_timestamps_compare_with_the_profiles_values():
    days = ColumnProfile("d", "date", tuple((dt.date(2026, 1, i), dt.date(2026, 1, i))
                                            for i in range(1, 11)))
    assert minmax_keep(days, [("GreaterThanOrEqual", "2026-01-09")]) == 0.2
    hours = ColumnProfile("ts", "timestamp", tuple(
        (dt.datetime(2026, 1, 5, h), dt.datetime(2026, 1, 5, h, 59)) for h in range(10)))
    assert minmax_keep(hours, [("EqualTo", "1767578400000000")]) == 0.1    # 02:00 in micros
    assert minmax_keep(hours, [("LessThan", "2026-01-05 05:00:00")]) == 0.5


def test_bloom_and_value_lists_find_the_files_holding_a_value():
    unique = ColumnProfile("id", "long", ((0, 10 ** 9),) * 100, distinct_per_file=1000,
                           rows_per_file=1000)
    assert files_per_value(unique, 100) == 1.0
    bloom = Candidate("bloom", SRC, ("id",))
    p = SourceProfile(SRC, "parquet", 100, 10 ** 9, {"id": unique})
    assert keep_fraction(bloom, p, lookup("id")) == pytest.approx(0.01 + BLOOM_FPP)
    # a status column: 5 values, each in every file
    status = ColumnProfile("s", "string", (("a", "e"),) * 100, distinct_per_file=5,
                           rows_per_file=1000)
    assert files_per_value(status, 100) == pytest.approx(100)
    # 20 of 10,000 customers per file: each customer in about one file
    few = ColumnProfile("c", "long", ((0, 10_000),) * 100, distinct_per_file=20,
                        rows_per_file=1000, distinct_total=10_000)
    assert files_per_value(few, 100) == 1.0
    p = SourceProfile(SRC, "parquet", 100, 10 ** 9, {"c": few, "id": unique})
    assert keep_fraction(Candidate("valuelist", SRC, ("c",)), p, lookup("c")) == 0.01
    assert keep_fraction(Candidate("valuelist", SRC, ("id",)), p, lookup("id")) == 1.0  # > 64
    assert keep_fraction(bloom, p, lookup("id", use="range")) == 1.0


def test_a_date_per_file_is_in_one_file_whatever_its_repeats():
    dates = ColumnProfile("d", "date", tuple((dt.date(2026, 1, i), dt.date(2026, 1, i))
                                             for i in range(1, 11)),
                          distinct_per_file=1, rows_per_file=10 ** 6)
    assert files_per_value(dates, 10) == 1.0


def test_text_keeps_files_whose_sample_holds_the_substrings():
    sample = (("disk full", "ok"), ("read timeout after 5 s",), ("timeout",), ("fine",))
    col = ColumnProfile("m", "string", (), text_sample=sample)
    assert text_keep(col, [("Like", "%timeout%")], 4) == 0.5
    assert text_keep(col, [("Like", "%time_ut after%")], 4) == 0.25   # both parts needed
    assert text_keep(col, [("StartsWith", "disk")], 4) == 0.25
    assert text_keep(col, [("Like", "100\\%%")], 40) == 1 / 40        # never seen: rare
    assert text_keep(col, [("RLike", "time(out)?")], 4) == 0.5
    assert text_keep(col, [("Like", "%")], 4) == 1.0                  # seeks nothing
    assert text_keep(col, [], 4) == 1.0                               # unknown
    assert text_keep(ColumnProfile("m", "string", ()), [("Contains", "x")], 4) == 1.0


def test_text_keeps_groups_holding_every_trigram_sought_even_when_no_value_holds_the_substring():
    """A text index keeps a group of rows when it holds each trigram sought: a rare user's
    ``user=1221 action=`` is made of trigrams other users' messages hold in every file."""
    files = tuple(("user=1220 action=view", "user=5221 action=buy", "level INFO")
                  for _ in range(4))
    many = ColumnProfile("m", "string", (), text_sample=files, rows_per_file=10 ** 6)
    assert text_keep(many, [("Like", "%user=1221 action=%")], 4) == 1.0
    assert text_keep(many, [("Contains", "user=9")], 4) == 1 / 4     # '=9' in no sampled value
    # groups of one row each: a group holds '=12'-and-'221' only as often as one row holds both
    one_row = ColumnProfile("m", "string", (), text_sample=files, rows_per_file=1)
    assert text_keep(one_row, [("Like", "%user=1221 action=%")], 4) == pytest.approx(1 / 3)
    assert text_keep(one_row, [("Contains", "ACTION=")], 4) == pytest.approx(2 / 3)  # folded


def test_covering_reads_one_bucket_of_an_index_holding_the_queried_columns():
    cols = tuple(f"c{i}" for i in range(30))
    parquet = SourceProfile(SRC, "parquet", 10, 30 * 10 ** 6, {}, cols)
    covering = Candidate("covering", SRC, ("c0",), ("c1",))
    served = lookup("c0", columns_read=frozenset({"c0", "c1"}))
    assert keep_fraction(covering, parquet, served) == pytest.approx(1 / COVERING_BUCKETS)
    # JSON reads whole rows; the index is Parquet of 2 of 30 columns
    json = SourceProfile(SRC, "json", 10, 30 * 10 ** 6, {}, cols)
    assert keep_fraction(covering, json, served) == pytest.approx(2 / 30 / 4 / COVERING_BUCKETS)
    wider = lookup("c0", columns_read=frozenset({"c0", "c1", "c2"}))
    assert keep_fraction(covering, parquet, wider) == 1.0          # c2 is not in the index


def test_a_covering_lookup_of_a_common_value_reads_its_rows_not_one_bucket():
    cols = tuple(f"c{i}" for i in range(30))
    # "INFO" in 9 of 10 sampled values, "ERROR" in 1
    level = ColumnProfile("c0", "string", (), text_sample=(("INFO",) * 9 + ("ERROR",),),
                          distinct_total=2)
    parquet = SourceProfile(SRC, "parquet", 10, 30 * 10 ** 6, {"c0": level}, cols)
    covering = Candidate("covering", SRC, ("c0",), ("c1",))
    read = frozenset({"c0", "c1"})
    common = lookup("c0", samples=[("EqualTo", "INFO")], columns_read=read)
    rare = lookup("c0", samples=[("EqualTo", "ERROR")], columns_read=read)
    assert keep_fraction(covering, parquet, common) == pytest.approx(0.9)
    assert keep_fraction(covering, parquet, rare) == pytest.approx(0.1)
    # without sampled strings: one over the distinct values; never below one bucket
    ids = ColumnProfile("c0", "long", (), distinct_total=4)
    by_id = SourceProfile(SRC, "parquet", 10, 30 * 10 ** 6, {"c0": ids}, cols)
    point = lookup("c0", samples=[("EqualTo", "3")], columns_read=read)
    assert keep_fraction(covering, by_id, point) == pytest.approx(0.25)
    many = SourceProfile(SRC, "parquet", 10, 30 * 10 ** 6, {"c0": ColumnProfile(
        "c0", "long", (), distinct_total=10 ** 6)}, cols)
    assert keep_fraction(covering, many, point) == pytest.approx(1 / COVERING_BUCKETS)


def test_the_cache_helps_json_not_parquet():
    cols = tuple(f"c{i}" for i in range(10))
    d = lookup("c0", columns_read=frozenset({"c0", "c1.x"}))       # c1.x: the cache holds c1
    cache = Candidate("cache", SRC, ("c0", "c1"))
    json = SourceProfile(SRC, "json", 10, 10 ** 9, {}, cols)
    assert keep_fraction(cache, json, d) == pytest.approx(0.2 / 5)
    assert keep_fraction(cache, SourceProfile(SRC, "parquet", 10, 10 ** 9, {}, cols), d) == 1.0


def test_estimates_use_recorded_seconds_else_the_scan_rate():
    p = SourceProfile(SRC, "parquet", 10, 4 * 10 ** 9, {"x": CLUSTERED}, ("x", "y"))
    minmax = Candidate("minmax", SRC, ("x",))
    timed = Demand(SRC, "x", "lookup", 4, 4.0, 0, timed=2, seconds=6.0, bytes_read=2000,
                   samples=(("EqualTo", "15"),))
    e = estimate(minmax, p, [timed])
    assert e.keep_fraction == pytest.approx(0.1)
    assert e.seconds_saved_per_query == pytest.approx(3.0 * 0.9)
    assert e.bytes_skipped_per_query == pytest.approx(1000 * 0.9)
    assert e.index_bytes == 10 * 64
    assert e.build_seconds == pytest.approx(2 * 10 ** 9 / 200e6)    # half the columns
    untimed = lookup(samples=[("EqualTo", "15")], columns_read=frozenset({"x"}))
    assert estimate(minmax, p, [untimed]).seconds_saved_per_query == pytest.approx(
        2 * 10 ** 9 / 200e6 * 0.9)                                  # x is half the bytes


def test_estimates_credit_what_the_format_already_skips_inside_the_files():
    # ten Parquet files of 400 MB and 1,000 rows, each holding ten values of x
    x = dataclasses.replace(CLUSTERED, rows_per_file=1000)
    p = SourceProfile(SRC, "parquet", 10, 4 * 10 ** 9, {"x": x}, ("x", "y"))
    minmax = Candidate("minmax", SRC, ("x",))

    def looked_up(rows_per_query: int, fmt: SourceProfile = p) -> Estimate:
        scanned = 2 * 4 * 10 ** 9
        return estimate(minmax, fmt, [Demand(
            SRC, "x", "lookup", 4, 4.0, 0, timed=2, seconds=6.0, bytes_read=scanned,
            samples=(("EqualTo", "15"),), scanned_bytes=scanned,
            scanned_rows=2 * rows_per_query)])

    # the scans gave every row: keeping one file of ten leaves a tenth of the work
    assert looked_up(10_000).keep_fraction == pytest.approx(0.1)
    # Parquet's row groups left 2,000 rows per query: the kept file's 1,000 are half of them;
    # the time that goes with the files opened still drops to a tenth
    e = looked_up(2_000)
    assert e.keep_fraction == pytest.approx(FILE_TIME_SHARE * 0.1 + (1 - FILE_TIME_SHARE) * 0.5)
    assert e.seconds_saved_per_query == pytest.approx(3.0 * (1 - e.keep_fraction))
    # fewer rows than the kept file holds: only the files opened are saved
    assert looked_up(500).keep_fraction == pytest.approx(
        FILE_TIME_SHARE * 0.1 + (1 - FILE_TIME_SHARE))
    # a JSON scan counts the rows its pushed filters kept, not what it read: not credited
    json = dataclasses.replace(p, format="json")
    assert looked_up(500, json).keep_fraction == pytest.approx(0.1)


def test_a_text_index_is_sized_by_the_text_it_indexes():
    message = ColumnProfile("message", "string", ((None, None),) * 4, rows_per_file=1_000_000,
                            avg_bytes=88)
    found = SourceProfile(SRC, "parquet", 4, 10 ** 9, {"message": message}, ("message", "id"))
    e = estimate(Candidate("text", SRC, ("message",)), found,
                 [Demand(SRC, "message", "text", 10, 10.0, 0)])
    assert e.index_bytes == pytest.approx(0.12 * 4 * 1_000_000 * 88)   # 42 MB of 352 MB
