"""The extractor: query history → demand, one :class:`Demand` per (source, column, use).

Pure Python over :class:`rules.history.records.QueryRecord` values (read by :mod:`rules.history.reader`, or
aggregated by Spark into the same shape). A use says what kind of acceleration could serve the
column: ``lookup`` (equality or IN: Bloom filters, value lists, covering indexes), ``range``
(min/max), ``text`` (LIKE, contains, prefixes, suffixes), ``join`` (join keys: paired covering
indexes), ``group`` (grouping keys) and ``projection`` (read but never filtered, joined or grouped
on: covering indexes' included columns, the cache). Demand decays with age: a query ``h`` half-lives
old weighs ``0.5 ** h``. Each demand also carries what its queries cost (seconds, bytes read from
the source), the values they looked up (for what-if estimates) and their templates.

Exploration queries (no filter, join or grouping, every column: ``SELECT *``, ``df.show()``)
never count as demand. A plan recorded at planning and again per execution counts once per
execution.
"""
from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable

from rules.history.records import QueryRecord
from rules.literals import parse_literal
from rules.skipped import Skipped

log = logging.getLogger("accelerator.rules.extractor")

USES = ("lookup", "range", "text", "join", "group", "projection")

#: predicate shape → use (shapes not listed, e.g. IS NULL, are served by no index kind)
_SHAPE_USE = {"equality": "lookup", "in": "lookup", "range": "range", "like": "text",
              "startswith": "text", "endswith": "text", "contains": "text"}
#: Catalyst predicate classes that are text uses whatever their shape says
_TEXT_OPS = {"RLike", "Like", "ILike", "LikeAll", "LikeAny", "NotLikeAll", "NotLikeAny"}

DEFAULT_HALF_LIFE_S = 7 * 86400.0
#: at most this many (op, literal) samples are kept per demand, the latest ones
MAX_SAMPLES = 64


@dataclass(frozen=True)
class Demand:
    """How much the history asks for one column of one source, used one way.

    ``seconds`` and ``bytes_read`` sum what the ``timed`` queries among ``queries`` (those whose
    execution was recorded) spent on the source (of a query reading several, the share of its
    time its bytes read were: :func:`_time_share`) and the sizes of the source's files they
    read;
    ``scanned_bytes`` and ``scanned_rows`` sum, over those of them that read the source itself
    (no index or cache served it) and whose scans counted their rows, the sizes of the files
    scanned and the rows the scans gave (for Parquet, the rows of the row groups its own
    statistics did not skip); ``samples`` are ``(op, literal)``
    pairs of the latest predicates (``("EqualTo", "42")``, ``("GreaterThan", "2026-01-01")``,
    ``("Like", "%timeout%")``) with ``literal_type`` their Catalyst type; ``templates`` the query
    templates that asked. For a join key, ``partners`` are the ``(source, column)`` it was
    joined with: as recorded (``paired``), else, for a query recorded before the history kept
    join pairs, every join column of the query's other relations (a guess); ``paired`` holds
    ``(partner source, partner column, template, partner filtered)`` of each recorded pair
    (filtered: the query filtered the partner's relation too); ``joined_by`` counts the executed
    queries whose join with each partner source was a ``broadcast`` or a ``shuffle`` join:
    ``(partner source, strategy, queries)``.
    """

    source: str
    column: str
    use: str
    queries: int            # queries that used it so (exploration queries excluded)
    weight: float           # the same, each decayed by its age
    last_seen: int          # epoch milliseconds of the latest of them
    timed: int = 0
    seconds: float = 0.0
    bytes_read: int = 0
    samples: tuple[tuple[str, str], ...] = ()
    literal_type: str | None = None
    templates: frozenset[str] = field(default_factory=frozenset)
    columns_read: frozenset[str] = field(default_factory=frozenset)
    partners: frozenset[tuple[str, str]] = field(default_factory=frozenset)
    partition_window: tuple[str, str, str] | None = None
    joined_by: tuple[tuple[str, str, int], ...] = ()
    scanned_bytes: int = 0
    scanned_rows: int = 0
    paired: tuple[tuple[str, str, str, bool], ...] = ()

    @property
    def seconds_per_query(self) -> float | None:
        """Mean recorded duration of the queries asking (None when none was timed)."""
        return self.seconds / self.timed if self.timed else None


def is_exploration(record: QueryRecord) -> bool:
    """Whether a query only looks at data (no filter, join or grouping, every column): as
    recorded in its ``exploration`` flag."""
    return record.exploration


def executions(records: Iterable[QueryRecord]) -> list[QueryRecord]:
    """One record per execution: a plan's planning-time record (no ``duration_ms``) is dropped
    when an execution of the same ``query_id`` was recorded too."""
    records = list(records)
    executed = {r.query_id for r in records if r.duration_ms is not None}
    return [r for r in records if r.duration_ms is not None or r.query_id not in executed]


def _uses(record: QueryRecord) -> dict[tuple[str, str, str], list[tuple[str, str, str | None]]]:
    """(source, column, use) of one query, each once, with its (op, literal, type) samples."""
    out: dict[tuple[str, str, str], list[tuple[str, str, str | None]]] = {}
    sources = {i: r.source for i, r in enumerate(record.relations)}
    for p in record.predicates:
        use = "text" if p.op in _TEXT_OPS else _SHAPE_USE.get(p.shape)
        if use is not None and p.function is None:
            found = out.setdefault((sources.get(p.relation, p.source), p.column, use), [])
            found.extend((p.op, v, p.literal_type) for v in p.literals)
    for r in record.relations:
        for c in r.join_columns:
            out.setdefault((r.source, c, "join"), [])
        for c in r.group_columns:
            out.setdefault((r.source, c, "group"), [])
        used = set(r.filter_columns) | set(r.join_columns) | set(r.group_columns)
        for c in r.output_columns:
            if c not in used:
                out.setdefault((r.source, c, "projection"), [])
    return out


_POINTS = ("EqualTo", "EqualNullSafe", "In", "InSet")
_LOWER = ("GreaterThan", "GreaterThanOrEqual")
_UPPER = ("LessThan", "LessThanOrEqual")
Bound = tuple[Any, str] | None   # (typed value, text) of one end of a window; None: open


def _windows(record: QueryRecord) -> dict[str, tuple[str, Bound, Bound] | None]:
    """Per source of the record, the partitions its filters kept, ``(column, low, high)``, or
    None when a relation of the source read every partition. Values looked up give both ends;
    otherwise the bounds of its ranges do (a filter's conditions taken together)."""
    out: dict[str, tuple[str, Bound, Bound] | None] = {}
    for i, r in enumerate(record.relations):
        found = None
        for column in r.partition_columns:
            named = [(p.op, (_typed(v, p.literal_type), v)) for p in record.predicates
                     if p.relation == i and p.column == column for v in p.literals]
            points = [v for op, v in named if op in _POINTS]
            lows = [v for op, v in named if op in _LOWER]
            highs = [v for op, v in named if op in _UPPER]
            if points:
                found = (column, min(points), max(points))
            elif lows or highs:
                found = (column, max(lows) if lows else None, min(highs) if highs else None)
            if found is not None:
                break
        out[r.source] = _widen(out[r.source], found) if r.source in out else found
    return out


def _typed(value: str, type_: str | None) -> Any:
    """A literal as a comparable value (its text when it cannot be parsed)."""
    try:
        return (0, parse_literal(value, type_)) if type_ else (1, value)
    except ValueError:
        return (1, value)


def _widen(a: tuple | None, b: tuple | None) -> tuple | None:
    """The window holding both (None: every partition)."""
    if a is None or b is None or a[0] != b[0]:
        return None
    low = None if a[1] is None or b[1] is None else min(a[1], b[1])
    high = None if a[2] is None or b[2] is None else max(a[2], b[2])
    return None if low is None and high is None else (a[0], low, high)


def _shown(window: tuple | None) -> tuple[str, str | None, str | None] | None:
    if window is None:
        return None
    column, low, high = window
    return column, None if low is None else low[1], None if high is None else high[1]


def _source_reads(record: QueryRecord) -> dict[str, tuple[int, int, int]]:
    """Per source of the record: the sizes of the files its scans read, and the sizes and rows
    of those of its scans that read the source itself and counted their rows."""
    read: dict[str, tuple[int, int, int]] = {}
    for r in record.relations:
        listed, scanned, rows = read.get(r.source, (0, 0, 0))
        if r.served_by is None and r.rows_read is not None and r.bytes_read:
            scanned, rows = scanned + r.bytes_read, rows + r.rows_read
        read[r.source] = (listed + (r.bytes_read or 0), scanned, rows)
    return read


def _time_share(record: QueryRecord, source: str) -> float:
    """The share of a query's time that goes with ``source``: the share of the bytes its scans
    read that came from the source's files, when the query read several sources and some of
    the source's bytes were recorded (a join of a large fact with a small dimension spends its
    time on the fact, not the dimension; a relation read again from a reused exchange records
    none); else all of it."""
    read: dict[str, int] = defaultdict(int)
    known: set[str] = set()
    for r in record.relations:
        read[r.source] += r.bytes_read or 0
        if r.bytes_read is not None:
            known.add(r.source)
    total = sum(read.values())
    if len(read) < 2 or source not in known or total <= 0:
        return 1.0
    return read[source] / total


def _partners(record: QueryRecord, relation: int, column: str
              ) -> tuple[set[tuple[str, str]], set[tuple[str, str, str, bool]]]:
    """The (source, column) partners of ``column`` of the record's relation ``relation``, and
    the recorded pairs as :attr:`Demand.paired` holds them (none for a record without pairs,
    whose partners are every join column of its other relations)."""
    if record.join_pairs is None:
        return {(o.source, c) for k, o in enumerate(record.relations) if k != relation
                for c in o.join_columns}, set()
    paired = set()
    for p in record.join_pairs:
        for mine, other in (p.sides(), p.sides()[::-1]):
            if mine[0] == relation and mine[2] == column:
                paired.add((other[1], other[2], record.template, other[3]))
    return {(s, c) for s, c, _, _ in paired}, {p for p in paired if p[2]}


def _joined_by(record: QueryRecord, source: str, column: str) -> set[tuple[str, str]]:
    """(partner source, strategy) of each executed join of ``record`` between a relation of
    ``source`` joined on ``column`` and another relation."""
    rels = record.relations
    out = set()
    for j in record.executed_joins:
        for mine, other in ((j.left, j.right), (j.right, j.left)):
            if (0 <= mine < len(rels) and 0 <= other < len(rels) and rels[mine].source == source
                    and column in rels[mine].join_columns):
                out.add((rels[other].source, j.strategy))
    return out


@dataclass
class _Tally:
    """What the queries of one (source, column, use) add up to, while they are counted."""

    queries: int = 0
    weight: float = 0.0
    last: int = 0
    timed: int = 0
    seconds: float = 0.0
    read: int = 0
    scanned_bytes: int = 0
    scanned_rows: int = 0
    samples: list[tuple[int, str, str, str | None]] = field(default_factory=list)
    templates: set[str] = field(default_factory=set)
    columns_read: set[str] = field(default_factory=set)
    partners: set[tuple[str, str]] = field(default_factory=set)
    paired: set[tuple[str, str, str, bool]] = field(default_factory=set)
    window: tuple | None = None
    strategies: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))

    @classmethod
    def of(cls, record: QueryRecord, key: tuple[str, str, str], weight: float,
           found: list[tuple[str, str, str | None]], read: tuple[int, int, int],
           window: tuple | None) -> "_Tally":
        """What one query adds to the tally of ``key``."""
        source, column, use = key
        timed = record.duration_ms is not None
        seconds = record.duration_ms / 1000.0 * _time_share(record, source) if timed else 0.0
        one = cls(1, weight, int(record.timestamp), int(timed), seconds,
                  *(read if timed else (0, 0, 0)),
                  samples=[(int(record.timestamp), op, v, t) for op, v, t in found],
                  templates={record.template} if record.template else set(), window=window)
        for i, r in enumerate(record.relations):
            if r.source != source:
                continue
            one.columns_read.update(r.output_columns)
            if use == "join" and column in r.join_columns:
                partners, paired = _partners(record, i, column)
                one.partners |= partners
                one.paired |= paired
        if use == "join":
            for partner in _joined_by(record, source, column):
                one.strategies[partner] += 1
        return one

    def add(self, other: "_Tally") -> None:
        """Counts the queries of ``other`` too."""
        self.window = other.window if self.queries == 0 else _widen(self.window, other.window)
        self.queries += other.queries
        self.weight += other.weight
        self.last = max(self.last, other.last)
        self.timed += other.timed
        self.seconds += other.seconds
        self.read += other.read
        self.scanned_bytes += other.scanned_bytes
        self.scanned_rows += other.scanned_rows
        self.samples.extend(other.samples)
        self.templates |= other.templates
        self.columns_read |= other.columns_read
        self.partners |= other.partners
        self.paired |= other.paired
        for partner, n in other.strategies.items():
            self.strategies[partner] += n

    def demand(self, key: tuple[str, str, str]) -> Demand:
        latest = sorted(self.samples, key=lambda x: -x[0])[:MAX_SAMPLES]
        types = [t for _, _, _, t in latest if t]
        return Demand(*key, self.queries, self.weight, self.last, self.timed, self.seconds,
                      self.read, tuple((op, v) for _, op, v, _ in latest),
                      types[0] if types else None, frozenset(self.templates),
                      frozenset(self.columns_read), frozenset(self.partners),
                      _shown(self.window),
                      tuple(sorted((p, s, n) for (p, s), n in self.strategies.items())),
                      scanned_bytes=self.scanned_bytes, scanned_rows=self.scanned_rows,
                      paired=tuple(sorted(self.paired)))


def _query_tallies(record: QueryRecord, now_ms: int,
                   half_life_s: float) -> dict[tuple[str, str, str], _Tally]:
    """What one query adds to each (source, column, use) it uses."""
    age_s = max(0.0, (now_ms - record.timestamp) / 1000.0)
    weight = 0.5 ** (age_s / half_life_s)
    source_reads = _source_reads(record)
    touched = _windows(record)
    return {key: _Tally.of(record, key, weight, found, source_reads.get(key[0], (0, 0, 0)),
                           touched.get(key[0]))
            for key, found in _uses(record).items()}


def extract(records: Iterable[QueryRecord], now_ms: int,
            half_life_s: float = DEFAULT_HALF_LIFE_S) -> list[Demand]:
    """The demand of ``records`` at ``now_ms`` (see :func:`extract_with_skips`)."""
    return extract_with_skips(records, now_ms, half_life_s)[0]


def extract_with_skips(records: Iterable[QueryRecord], now_ms: int,
                       half_life_s: float = DEFAULT_HALF_LIFE_S
                       ) -> tuple[list[Demand], list[Skipped]]:
    """The demand of ``records`` at ``now_ms``, heaviest first (then by source, column, use),
    and the queries skipped.

    The records are counted in the order of their timestamps and query ids, so the same
    history gives the same demand however it was read. A record that cannot be read (a shape
    the history does not know) is skipped whole: it is counted (``unreadable-record``, with the
    first error) and a warning says so, and the other queries still count."""
    if half_life_s <= 0:
        raise ValueError(f"the half-life must be positive, got {half_life_s}")
    tallies: dict[tuple[str, str, str], _Tally] = defaultdict(_Tally)
    skipped: list[str] = []
    ordered = sorted(executions(records), key=lambda r: (r.timestamp, str(r.query_id)))
    for record in ordered:
        if is_exploration(record):
            continue
        try:
            found = _query_tallies(record, now_ms, half_life_s)
        except Exception as exc:  # noqa: BLE001 - one query unread must not lose the others
            skipped.append(f"{record.query_id}: {type(exc).__name__}: {exc}")
            continue
        for key, one in found.items():
            tallies[key].add(one)
    skips = []
    if skipped:
        log.warning("rule engine: skipped %d of %d recorded queries it could not read "
                    "(unreadable-record; first: %s)", len(skipped), len(ordered), skipped[0])
        skips.append(Skipped("unreadable-record", len(skipped), None, skipped[0]))
    out = [t.demand(key) for key, t in tallies.items()]
    return sorted(out, key=lambda d: (-d.weight, d.source, d.column, USES.index(d.use))), skips
