"""What-if estimates: what an index (or the cache) would save the queries of a demand, and
what it would cost, from a :class:`~rules.profiles.SourceProfile` and the literals the queries
looked up. Pure Python.

The estimates are a model, not truths: every constant below is a guess, named and documented.
A query's *keep fraction* is the share of its work left with the candidate: the share of files
it still reads with a data-skipping kind (``minmax``, ``bloom``, ``valuelist``), of groups of
rows with a ``text`` index, the share of its reading time left with a ``covering`` index or
the ``cache``. Each sample literal
is scored as one query (an ``IN`` list is recorded as one sample per value, so its values are
scored one by one), and a lower bound next to an upper bound of the same column (``x >= a`` then
``x < b``, as one query records them) as one interval. Without samples, a query is assumed to
look up one value the column holds (each profiled file's minimum in turn); a text search without
samples is assumed to keep every file (the substrings sought are unknown). A keep fraction
counts the kept files whole; where the history shows the scans of a Parquet source already
gave fewer rows than their files hold (row groups skipped by Parquet's own statistics), the
share of the reading left is scaled up by that ratio, for the share of the time that goes with
the rows read (:func:`work_left`).
"""
from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass
from typing import Any, Sequence

from rules.extractor import Demand
from rules.literals import parse_literal
from rules.profiles import ColumnProfile, SourceProfile

#: formats read column by column (a query reads only the columns it needs)
COLUMNAR_FORMATS = frozenset({"parquet", "orc"})
#: bytes per second a scan reads from a columnar source, and from any other (JSON, CSV, text)
COLUMNAR_SCAN_BYTES_PER_S = 200e6
ROW_SCAN_BYTES_PER_S = 50e6
#: how much smaller Parquet holds the data of a row format (index and cache bytes of JSON/CSV)
PARQUET_COMPRESSION = 4.0
#: places an interval is put at, over a column's span, to estimate the files it meets
SPAN_PLACEMENTS = 16
#: bytes of a min/max entry, per file and column
MINMAX_BYTES_PER_FILE_COLUMN = 64
#: false-positive probability of the Bloom filters, and their bytes per distinct value at it
BLOOM_FPP = 0.01
BLOOM_BYTES_PER_VALUE = 1.2
#: a value list holds at most this many values per file (more prunes nothing)
VALUELIST_MAX_DISTINCT = 64
#: bytes of a value when the profile does not say
DEFAULT_VALUE_BYTES = 8.0
#: a text index's bytes per byte of the text it indexes, and per byte of that column as
#: compressed Parquet when the text's own size is unknown: measured on high-entropy text (random
#: characters: 0.12 of the text), an upper bound of text like the event log's messages (0.2 MB
#: for 439 MB of text, 117 MB as Parquet)
TEXT_INDEX_SHARE = 0.12
TEXT_INDEX_PER_STORED_BYTE = 0.15
#: rows of one group of a text index (its documents: see indexes/text/shards.py) and the length
#: of the strings its postings hold: a group is kept when it holds every trigram sought
TEXT_GROUP_ROWS = 10_000
TEXT_GRAM = 3
#: buckets of a covering index: a lookup reads about one of them
COVERING_BUCKETS = 64
#: share of a join's time spent shuffling, which covering indexes on both sides avoid
JOIN_SHUFFLE_SHARE = 0.5
#: share of a query's time that goes with the files it opens (a task, a footer, each), the rest
#: going with the rows it reads: what is left of the time when the format already skipped
#: most row groups inside the files (see :func:`work_left`)
FILE_TIME_SHARE = 0.5
#: how many times faster a query reads the Parquet cache than its source, by source format
#: (no entry: the cache brings nothing, e.g. Parquet on a local path)
CACHE_SPEEDUP = {"json": 5.0, "csv": 5.0, "text": 5.0}

_LOWER = {"GreaterThan": False, "GreaterThanOrEqual": True}
_UPPER = {"LessThan": False, "LessThanOrEqual": True}
_POINT = frozenset({"EqualTo", "EqualNullSafe", "In", "InSet"})
_SUBSTRING = frozenset({"StartsWith", "EndsWith", "Contains"})
_LIKE = frozenset({"Like", "LikeAll", "LikeAny"})


@dataclass(frozen=True)
class Candidate:
    """An index (or the cache) that could be built: ``kind`` over ``columns`` of ``source``
    (a covering index also holds ``included_columns``)."""

    kind: str
    source: str
    columns: tuple[str, ...]
    included_columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class Estimate:
    """What a candidate would bring its demand (per query, weighted by decayed demand and
    time) and what it would cost (its bytes, and the seconds to build it). For the kinds that
    skip files, ``files_kept`` is how many of the source's files a query still reads (None for
    the others)."""

    keep_fraction: float
    seconds_saved_per_query: float
    bytes_skipped_per_query: float
    index_bytes: float
    build_seconds: float
    files_kept: float | None = None


#: the kinds whose keep fraction is a share of the source's files
FILE_SKIPPING_KINDS = frozenset({"minmax", "bloom", "valuelist"})


# --- costs ---------------------------------------------------------------------------------

def scan_rate(profile: SourceProfile) -> float:
    """Bytes per second a scan of the source reads."""
    return COLUMNAR_SCAN_BYTES_PER_S if profile.format in COLUMNAR_FORMATS \
        else ROW_SCAN_BYTES_PER_S


def column_share(profile: SourceProfile, columns: Sequence[str]) -> float:
    """The share of a row's bytes held by ``columns``: their mean bytes (``avg_bytes``, else the
    mean of the known ones) over those of all the source's columns; 1 when the source's columns
    are unknown."""
    if not profile.all_columns:
        return 1.0
    known = [c.avg_bytes for c in profile.columns.values() if c.avg_bytes]
    default = sum(known) / len(known) if known else 1.0

    def width(name: str) -> float:
        found = profile.columns.get(name)
        return found.avg_bytes if found is not None and found.avg_bytes else default

    total = sum(width(c) for c in profile.all_columns)
    return min(1.0, sum(width(c) for c in sorted(set(columns))) / total)   # one order: one sum


def _read_share(profile: SourceProfile, columns: Sequence[str]) -> float:
    """The share of the source's bytes a scan of ``columns`` reads."""
    return column_share(profile, columns) if profile.format in COLUMNAR_FORMATS else 1.0


def _columns_read(demand: Demand) -> tuple[str, ...]:
    return tuple(sorted(demand.columns_read | {demand.column}))


def query_bytes(profile: SourceProfile, demand: Demand) -> float:
    """Bytes a query of ``demand`` reads from the source: as recorded, else the columns it
    reads (all of a row format)."""
    if demand.timed and demand.bytes_read:
        return demand.bytes_read / demand.timed
    return profile.bytes * _read_share(profile, _columns_read(demand))


def pruned_in_files(profile: SourceProfile, demand: Demand) -> float:
    """How many times fewer rows the scans of a columnar source gave the queries of ``demand``
    than the files they scanned hold (at least 1; 1 when not recorded, or for a row format):
    the row groups the format's own statistics (Parquet's min/max, dictionaries) already skip
    inside the files. The keep fractions count the kept files whole."""
    per_file = next((c.rows_per_file for c in profile.columns.values() if c.rows_per_file), None)
    if profile.format not in COLUMNAR_FORMATS or not (
            demand.scanned_rows and demand.scanned_bytes and profile.bytes and per_file):
        return 1.0
    held = demand.scanned_bytes / profile.bytes * profile.files * per_file
    return max(1.0, held / demand.scanned_rows)


def seconds_per_query(profile: SourceProfile, demand: Demand) -> float:
    """Seconds a query of ``demand`` takes: as recorded, else its bytes at the scan rate."""
    recorded = demand.seconds_per_query
    return recorded if recorded is not None else query_bytes(profile, demand) / scan_rate(profile)


def index_bytes(candidate: Candidate, profile: SourceProfile) -> float:
    """Bytes the index (or the cache's entries) would take."""
    kind, files = candidate.kind, profile.files
    held = candidate.columns + candidate.included_columns
    column = profile.columns.get(candidate.columns[0])
    distinct = column.distinct_per_file if column and column.distinct_per_file else 1.0
    if kind == "minmax":
        return files * MINMAX_BYTES_PER_FILE_COLUMN * len(candidate.columns)
    if kind == "bloom":
        return files * distinct * BLOOM_BYTES_PER_VALUE
    if kind == "valuelist":
        width = column.avg_bytes if column and column.avg_bytes else DEFAULT_VALUE_BYTES
        return files * distinct * width
    if kind == "text":
        if column is not None and column.avg_bytes and column.rows_per_file:
            return TEXT_INDEX_SHARE * files * column.rows_per_file * column.avg_bytes
        return TEXT_INDEX_PER_STORED_BYTE * profile.bytes * column_share(profile, held)
    compression = 1.0 if profile.format in COLUMNAR_FORMATS else PARQUET_COMPRESSION
    return profile.bytes * column_share(profile, held) / compression   # covering, cache


def build_seconds(candidate: Candidate, profile: SourceProfile) -> float:
    """Seconds to build: reading the columns it holds (whole rows of a row format)."""
    held = candidate.columns + candidate.included_columns
    return profile.bytes * _read_share(profile, held) / scan_rate(profile)


# --- keep fractions ------------------------------------------------------------------------

class _Ranges:
    """Files' min/max of one column, sorted for counting the files a value interval meets."""

    def __init__(self, column: ColumnProfile):
        known = [r for r in column.ranges if r is not None and None not in r]
        self.total = len(column.ranges)
        self.unknown = self.total - len(known)
        try:
            self.mins = sorted(lo for lo, _ in known)
            self.maxes = sorted(hi for _, hi in known)
        except TypeError:   # values that do not compare: nothing known
            self.mins, self.maxes, self.unknown = [], [], self.total

    def keep(self, lo: Any = None, lo_incl: bool = True, hi: Any = None,
             hi_incl: bool = True) -> float:
        """The fraction of files whose [min, max] meets the interval (None: unbounded); files
        of unknown range are kept."""
        if not self.total:
            return 1.0
        try:   # files wholly below the interval, and wholly above it
            below = 0 if lo is None else (bisect.bisect_left(self.maxes, lo) if lo_incl
                                          else bisect.bisect_right(self.maxes, lo))
            above = 0 if hi is None else len(self.mins) - (
                bisect.bisect_right(self.mins, hi) if hi_incl
                else bisect.bisect_left(self.mins, hi))
        except TypeError:
            return 1.0
        return (len(self.mins) - below - above + self.unknown) / self.total

    def probe(self) -> float:
        """The mean fraction of files a value the column holds falls in (each file's minimum
        in turn): small when files hold narrow, disjoint ranges, 1 when every file spans all."""
        if not self.mins:
            return 1.0
        return sum(self.keep(v, True, v, True) for v in self.mins) / len(self.mins)


def _intervals(samples: Sequence[tuple[str, str]], type_: str) -> list[tuple | None]:
    """The samples as (lo, lo_incl, hi, hi_incl) intervals, a lower bound next to an upper one
    joined into one; None for a sample no min/max serves (or that does not parse)."""
    bounds: list[tuple | None] = []
    for op, text in samples:
        try:
            value = parse_literal(text, type_)
        except ValueError:
            bounds.append(None)
            continue
        if op in _POINT:
            bounds.append((value, True, value, True))
        elif op in _LOWER:
            bounds.append((value, _LOWER[op], None, True))
        elif op in _UPPER:
            bounds.append((None, True, value, _UPPER[op]))
        else:
            bounds.append(None)
    out: list[tuple | None] = []
    i = 0
    while i < len(bounds):
        a, b = bounds[i], bounds[i + 1] if i + 1 < len(bounds) else None
        joined = _join(a, b) if a and b else None
        out.append(joined or a)
        i += 2 if joined else 1
    return out


def _join(a: tuple, b: tuple) -> tuple | None:
    """One lower and one upper bound as a non-empty interval, else None."""
    lower, upper = (a, b) if a[2] is None else (b, a)
    if lower[2] is not None or upper[0] is not None or lower[0] is None or upper[2] is None:
        return None
    try:
        return (lower[0], lower[1], upper[2], upper[3]) if lower[0] <= upper[2] else None
    except TypeError:
        return None


def minmax_keep(column: ColumnProfile, samples: Sequence[tuple[str, str]]) -> float:
    """The mean fraction of files min/max statistics keep for the sampled predicates
    (equality and IN: files whose range holds the value; ranges: files whose range meets it)."""
    ranges = _Ranges(column)
    if not samples:
        return ranges.probe()
    keeps = [1.0 if i is None else ranges.keep(*i) for i in _intervals(samples, column.type)]
    return sum(keeps) / len(keeps)


def span_keep(column: ColumnProfile, share: float) -> float:
    """The mean fraction of files whose [min, max] meets one interval covering ``share`` of the
    column's span (its least minimum to its greatest maximum), the interval placed in turn at
    :data:`SPAN_PLACEMENTS` evenly spread places; 1 when the span is unknown or the values have
    no width (strings)."""
    ranges = _Ranges(column)
    if not ranges.mins:
        return 1.0
    low, high = ranges.mins[0], ranges.maxes[-1]
    try:
        width = (high - low) * min(1.0, max(0.0, share))
        step = (high - low - width) / max(1, SPAN_PLACEMENTS - 1)
        return sum(ranges.keep(low + step * i, True, low + step * i + width, True)
                   for i in range(SPAN_PLACEMENTS)) / SPAN_PLACEMENTS
    except TypeError:
        return 1.0


def row_share(column: ColumnProfile, samples: Sequence[tuple[str, str]]) -> float | None:
    """The mean share of the column's rows the sampled predicates keep (None when none can be
    judged): an equality or IN value's :func:`value_share`, an interval's share of the column's
    span (values assumed spread evenly over it)."""
    ranges = _Ranges(column)
    shares = []
    for i in _intervals(samples, column.type):
        if i is None:
            continue
        lo, _, hi, _ = i
        if lo is not None and lo == hi:
            share = value_share(column, [("EqualTo", str(lo))])
            if share > 0:
                shares.append(share)
            continue
        if not ranges.mins:
            continue
        low, high = ranges.mins[0], ranges.maxes[-1]
        try:
            start, end = max(low, lo if lo is not None else low), \
                min(high, hi if hi is not None else high)
            shares.append(max(0.0, min(1.0, (end - start) / (high - low))) if high > low
                          else 1.0)
        except (TypeError, ZeroDivisionError):
            continue
    return sum(shares) / len(shares) if shares else None


def _drawn_distinct(distinct: float, rows: float) -> float:
    """The distinct values of a column whose files' ``rows`` rows, drawn at random from them,
    show ``distinct`` values (solving d = D (1 - e^(-r/D)) for D); inf when all are distinct."""
    if distinct >= rows * 0.999:
        return math.inf
    lo, hi = distinct, distinct * 2
    while hi * (1 - math.exp(-rows / hi)) < distinct:
        lo, hi = hi, hi * 2
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mid * (1 - math.exp(-rows / mid)) < distinct else (lo, mid)
    return hi


def files_per_value(column: ColumnProfile, files: int) -> float | None:
    """How many files hold a value the column holds (at least 1): ``distinct_per_file * files /
    distinct_total``, the column's distinct values estimated as the most of ``distinct_total``,
    what the files' rows imply if drawn at random, and what their value ranges imply (a value
    can only be in the files whose range holds it). None when ``distinct_per_file`` is unknown.
    """
    d = column.distinct_per_file
    if not d or files <= 0:
        return None
    overlap = max(_Ranges(column).probe(), 1.0 / files)
    drawn = _drawn_distinct(d, column.rows_per_file) if column.rows_per_file else 0.0
    total = min(d * files, max(d / overlap, drawn, column.distinct_total or 0.0))
    return max(1.0, d * files / total)


def _like_parts(pattern: str) -> list[str]:
    """The substrings a SQL LIKE pattern requires (``%`` and ``_`` are wildcards, ``\\``
    escapes)."""
    parts, current, escaped = [], [], False
    for c in pattern:
        if escaped or c not in "\\%_":
            current.append(c)
            escaped = False
        elif c == "\\":
            escaped = True
        else:
            parts.append("".join(current))
            current = []
    parts.append("".join(current))
    return [p for p in parts if p]


def _text_parts(op: str, literal: str) -> list[str]:
    """The substrings a value must hold to meet a substring or LIKE predicate."""
    if op in _SUBSTRING:
        return [literal] if literal else []
    return _like_parts(literal) if op in _LIKE else []


def _regex_match(literal: str):
    """A test of one sampled value for a regular expression, None when it does not compile."""
    try:
        found = re.compile(literal)
    except re.error:
        return None
    return lambda v: found.search(v) is not None


def _trigrams(parts: Sequence[str]) -> frozenset[str]:
    """The case-folded trigrams a text index looks up for ``parts`` (its groups' postings)."""
    folded = [p.casefold() for p in parts]
    return frozenset(f[i:i + TEXT_GRAM] for f in folded for i in range(len(f) - TEXT_GRAM + 1))


def _group_keep(values: Sequence[str], grams: frozenset[str], group_rows: int) -> float:
    """The chance that a group of ``group_rows`` rows like a file's sampled (case-folded)
    ``values`` holds every trigram of ``grams``: for each, one minus the chance that none of
    its rows does, given the share of the values holding it; the least of them (0 when one is
    never seen)."""
    if not values:
        return 0.0
    return min(1.0 - (1.0 - sum(g in v for v in values) / len(values)) ** group_rows
               for g in grams)


def text_keep(column: ColumnProfile, samples: Sequence[tuple[str, str]], files: int) -> float:
    """The mean share of each sampled file's groups of rows a text index keeps for each text
    predicate: a group is kept when it holds every trigram of the substrings sought
    (:func:`_group_keep`), so a rare substring made of common trigrams (``user=1234 action=``)
    keeps them all; a regular expression keeps the files whose sampled values it matches. At
    least one file is kept (a substring the sample never shows is taken as rare); every file
    is kept when the values are unknown or the predicate seeks nothing an index can use."""
    if not samples or not column.text_sample:
        return 1.0
    group_rows = min(TEXT_GROUP_ROWS, int(column.rows_per_file or TEXT_GROUP_ROWS))
    folded = [[v.casefold() for v in values] for values in column.text_sample]
    keeps = []
    for op, literal in samples:
        if op == "RLike":
            match = _regex_match(literal)
            kept = [float(any(match(v) for v in values)) for values in column.text_sample] \
                if match is not None else []
        else:
            grams = _trigrams(_text_parts(op, literal))
            kept = [_group_keep(f, grams, group_rows) for f in folded] if grams else []
        if not kept:
            keeps.append(1.0)
            continue
        share = sum(kept) / len(kept)
        keeps.append(share if share > 0 else 1.0 / max(files, 1))
    return sum(keeps) / len(keeps)


def value_share(column: ColumnProfile | None, samples: Sequence[tuple[str, str]]) -> float:
    """The mean share of the rows an equality or IN lookup of the sampled literals matches
    (0 when unknown): each literal's share of the column's sampled string values, else one
    over the column's distinct values. A covering index's bucket holds all the rows of a
    value, so a lookup of a value most rows hold reads most of the index."""
    if column is None:
        return 0.0
    values = [v for file in column.text_sample for v in file]
    shares = []
    for op, literal in samples:
        if op not in _POINT:
            continue
        if values:
            shares.append(sum(v == literal for v in values) / len(values))
        elif column.distinct_total:
            shares.append(1.0 / column.distinct_total)
    return sum(shares) / len(shares) if shares else 0.0


def keep_fraction(candidate: Candidate, profile: SourceProfile, demand: Demand) -> float:
    """The share of a query's work left with the candidate (1: it does not help): files read
    for the skipping kinds; reading time for a covering index (the index's bytes over those the
    query reads now, of one bucket for a lookup, or of the value's rows when more of them hold
    it (:func:`value_share`), without the shuffle for a join) or the cache
    (its share of the columns, sped up by :data:`CACHE_SPEEDUP`)."""
    kind = candidate.kind
    if kind == "cache":
        speedup = CACHE_SPEEDUP.get(profile.format)
        top = tuple({c.split(".", 1)[0] for c in _columns_read(demand)})
        return min(1.0, column_share(profile, top) / speedup) if speedup else 1.0
    if kind == "covering":
        held = candidate.columns + candidate.included_columns
        if demand.column != candidate.columns[0] or not set(_columns_read(demand)) <= set(held):
            return 1.0
        compression = 1.0 if profile.format in COLUMNAR_FORMATS else PARQUET_COMPRESSION
        ratio = min(1.0, column_share(profile, held) / compression
                    / _read_share(profile, _columns_read(demand)))
        if demand.use == "lookup":
            share = value_share(profile.columns.get(demand.column), demand.samples)
            return ratio * max(1.0 / COVERING_BUCKETS, share)
        return ratio * (1 - JOIN_SHUFFLE_SHARE) if demand.use == "join" else 1.0
    column = profile.columns.get(demand.column)
    if column is None or demand.column not in candidate.columns:
        return 1.0
    if kind == "minmax" and demand.use in ("lookup", "range"):
        return minmax_keep(column, demand.samples)
    if kind == "text" and demand.use == "text":
        return text_keep(column, demand.samples, profile.files)
    if kind in ("bloom", "valuelist") and demand.use == "lookup":
        per_value = files_per_value(column, profile.files)
        if per_value is None:
            return 1.0
        if kind == "bloom":
            return min(1.0, per_value / profile.files + BLOOM_FPP)
        if column.distinct_per_file <= VALUELIST_MAX_DISTINCT:
            return min(1.0, per_value / profile.files)
    return 1.0


def work_left(candidate: Candidate, profile: SourceProfile, demand: Demand,
              keep: float | None = None) -> float:
    """The share of a query's work the candidate leaves (1: it does not help): its
    :func:`keep_fraction` (or ``keep``, the share of files the caller estimated), unless the
    format's own pruning already made the query read less than the keep fraction's whole files
    (:func:`pruned_in_files`); then the share of its time that goes with the files opened
    (:data:`FILE_TIME_SHARE`) keeps the keep fraction, and the share that goes with the rows
    keeps what the kept files hold against what it reads now."""
    keep = keep_fraction(candidate, profile, demand) if keep is None else keep
    pruned = pruned_in_files(profile, demand)
    if pruned <= 1.0:
        return keep
    return FILE_TIME_SHARE * keep + (1 - FILE_TIME_SHARE) * min(1.0, keep * pruned)


def estimate(candidate: Candidate, profile: SourceProfile, demands: Sequence[Demand],
             file_keeps: Sequence[float] | None = None) -> Estimate:
    """What ``candidate`` brings the queries of ``demands`` (each demand weighted by its
    decayed query count, the keep fraction also by its queries' seconds) and what it costs;
    ``file_keeps``, one per demand, are the shares of files the caller estimated a skipping
    kind keeps (the joins dynamic file pruning serves: :mod:`rules.join_pruning`)."""
    shares = list(file_keeps) if file_keeps is not None else \
        [keep_fraction(candidate, profile, d) for d in demands]
    times = [d.weight * seconds_per_query(profile, d) for d in demands]
    keeps = [work_left(candidate, profile, d, k) for d, k in zip(demands, shares)]
    weight = sum(d.weight for d in demands)
    time = sum(times)
    keep = sum(t * k for t, k in zip(times, keeps)) / time if time > 0 else 1.0
    skipped = sum(d.weight * query_bytes(profile, d) * (1 - k) for d, k in zip(demands, keeps))
    files = None
    if candidate.kind in FILE_SKIPPING_KINDS:
        files = profile.files * (sum(t * k for t, k in zip(times, shares)) / time
                                 if time > 0 else 1.0)
    return Estimate(keep, time / weight * (1 - keep) if weight > 0 else 0.0,
                    skipped / weight if weight > 0 else 0.0,
                    index_bytes(candidate, profile), build_seconds(candidate, profile), files)
