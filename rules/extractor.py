"""The extractor: query history → demand, one :class:`Demand` per (source, column, use).

Pure Python over :class:`rules.history.QueryRecord` values (read by :mod:`rules.reader`, or
aggregated by Spark into the same shape). A use says what kind of acceleration could serve the
column: ``lookup`` (equality or IN: Bloom filters, value lists, covering indexes), ``range``
(min/max), ``text`` (LIKE, contains, prefixes, suffixes), ``join`` (join keys: paired covering
indexes), ``group`` (grouping keys) and ``projection`` (read but never filtered, joined or grouped
on: covering indexes' included columns, the cache). Demand decays with age: a query ``h`` half-lives
old weighs ``0.5 ** h``.

Exploration queries (no filter, no join, no grouping: ``SELECT *``, ``df.show()``) never count
as demand.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable

from rules.history import QueryRecord

USES = ("lookup", "range", "text", "join", "group", "projection")

#: predicate shape → use (shapes not listed, e.g. IS NULL, are served by no index kind)
_SHAPE_USE = {"equality": "lookup", "in": "lookup", "range": "range", "like": "text",
              "startswith": "text", "endswith": "text", "contains": "text"}
#: Catalyst predicate classes that are text uses whatever their shape says
_TEXT_OPS = {"RLike", "Like", "ILike", "LikeAll", "LikeAny", "NotLikeAll", "NotLikeAny"}

DEFAULT_HALF_LIFE_S = 7 * 86400.0


@dataclass(frozen=True)
class Demand:
    """How much the history asks for one column of one source, used one way."""

    source: str
    column: str
    use: str
    queries: int            # queries that used it so (exploration queries excluded)
    weight: float           # the same, each decayed by its age
    last_seen: int          # epoch milliseconds of the latest of them


def is_exploration(record: QueryRecord) -> bool:
    """Whether a query only looks at data: no filter, join or grouping on any relation."""
    return not (record.predicates or record.join_columns or record.group_columns
                or any(r.filter_columns or r.join_columns or r.group_columns
                       for r in record.relations))


def _uses(record: QueryRecord) -> set[tuple[str, str, str]]:
    """(source, column, use) of one query, each once."""
    out: set[tuple[str, str, str]] = set()
    sources = {i: r.source for i, r in enumerate(record.relations)}
    for p in record.predicates:
        use = "text" if p.op in _TEXT_OPS else _SHAPE_USE.get(p.shape)
        if use is not None and p.function is None:
            out.add((sources.get(p.relation, p.source), p.column, use))
    for r in record.relations:
        out.update((r.source, c, "join") for c in r.join_columns)
        out.update((r.source, c, "group") for c in r.group_columns)
        used = set(r.filter_columns) | set(r.join_columns) | set(r.group_columns)
        out.update((r.source, c, "projection") for c in r.output_columns if c not in used)
    return out


def extract(records: Iterable[QueryRecord], now_ms: int,
            half_life_s: float = DEFAULT_HALF_LIFE_S) -> list[Demand]:
    """The demand of ``records`` at ``now_ms``, heaviest first (then by source, column, use)."""
    if half_life_s <= 0:
        raise ValueError(f"the half-life must be positive, got {half_life_s}")
    queries: dict[tuple[str, str, str], int] = defaultdict(int)
    weight: dict[tuple[str, str, str], float] = defaultdict(float)
    last: dict[tuple[str, str, str], int] = {}
    for record in records:
        if is_exploration(record):
            continue
        age_s = max(0.0, (now_ms - record.timestamp) / 1000.0)
        w = 0.5 ** (age_s / half_life_s)
        for key in _uses(record):
            queries[key] += 1
            weight[key] += w
            last[key] = max(last.get(key, record.timestamp), record.timestamp)
    out = [Demand(s, c, u, queries[(s, c, u)], weight[(s, c, u)], last[(s, c, u)])
           for (s, c, u) in queries]
    return sorted(out, key=lambda d: (-d.weight, d.source, d.column, USES.index(d.use)))
