"""The joins dynamic file pruning could serve, found in the demand: a fact table's join key
joined to a filtered dimension, where a min/max sketch on the key would let the dimension's
keys skip most of the fact's files (docs/architecture.md §11). Pure Python.

The evidence is demand rows. The fact's ``join`` row names the keys its queries joined it
with (its partners): the history records which column of which relation an equi-join compares
with which, and whether the query filtered that relation (``Demand.paired``); a partner's
``lookup`` and ``range`` rows in the templates where it was joined to the key and filtered are
the dimension's filters. The dimension is the smaller source. A history written before pairs
were recorded names only the columns each relation joins on: then every join key of the
query's other relations is a partner, taken for the key's dimension only when the fact's key
values lie within the partner key's range (a foreign key holds the dimension's keys), over the
templates both join in. When several partners qualify, the one keeping the most files is
scored.

Which of the dimension's keys its filters keep:

- known, when they bound the dimension's key itself (``d_date_sk BETWEEN a AND b``): the fact
  files those intervals meet (:func:`~rules.whatif.minmax_keep`);
- else estimated, template by template: its filters keep at most the share of the dimension's
  rows their most selective column keeps (:func:`~rules.whatif.row_share`), so about that share of the fact's
  keys (as many as its files' distinct keys over the files a key is in). The fact files those
  keys meet are as few as if the keys were one interval of that share of the key's span
  (:func:`~rules.whatif.span_keep`), as many as if they were scattered (each in
  :func:`~rules.whatif.files_per_value` files). The interval is scored: a fact whose files
  hold narrow ranges of a key was written in the key's order, a time's, and a time
  dimension's filters (a year, a month) keep keys that follow each other; both figures are
  reported, and probation reverts a sketch that made its queries slower.

A join whose templates bound the dimension's key in some templates and not in others weighs
the two by their templates.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from rules.extractor import Demand
from rules.history.records import is_expression
from rules.profiles import ColumnProfile, SourceProfile
from rules.whatif import files_per_value, minmax_keep, row_share, span_keep

__all__ = ["FactJoin", "fact_join", "fact_joins"]

#: the share of the fact key's span that must lie within a partner key's range for the partner
#: to be taken for the key's dimension
MIN_KEY_OVERLAP = 0.9
_FILTERS = ("lookup", "range")
_INTEGERS = frozenset({"tinyint", "smallint", "int", "bigint", "byte", "short", "integer",
                       "long"})


@dataclass(frozen=True)
class FactJoin:
    """A fact table's join key (``fact``, its ``join`` demand) joined to a filtered dimension:
    ``dimension`` and its key, the columns ``filters`` its queries filter it on, in
    ``filtered`` of the fact's ``len(fact.templates)`` join templates. ``keep`` is the share of
    the fact's files a query would still read with a min/max sketch on the key (as scored;
    ``keep_high`` as many as it may be, equal when the keys' bounds are known); ``share`` and
    ``keys`` the share of the dimension's rows and the number of the fact's keys its filters
    keep (None when the filters bound the key itself); ``bounded`` the templates among the
    ``filtered`` whose filters bound the dimension's key itself."""

    fact: Demand
    dimension: str
    dimension_key: str
    filters: tuple[str, ...]
    filtered: int
    keep: float
    keep_high: float
    share: float | None = None
    keys: float | None = None
    bounded: int = 0


def _bounds(column: ColumnProfile) -> tuple | None:
    known = [r for r in column.ranges if r is not None and None not in r]
    try:
        return (min(lo for lo, _ in known), max(hi for _, hi in known)) if known else None
    except TypeError:
        return None


def _family(type_: str) -> str:
    """A Catalyst type name, the integer types as one (a join casts one to the other)."""
    return "integer" if type_ in _INTEGERS else type_


def _references(fact: ColumnProfile, key: ColumnProfile | None) -> bool:
    """Whether the fact key's values lie within the dimension key's range (at least
    :data:`MIN_KEY_OVERLAP` of the fact key's span), both of the same type."""
    if key is None or _family(key.type) != _family(fact.type):
        return False
    mine, theirs = _bounds(fact), _bounds(key)
    if mine is None or theirs is None:
        return False
    try:
        inside = min(mine[1], theirs[1]) - max(mine[0], theirs[0])
        span = mine[1] - mine[0]
        return inside >= span * MIN_KEY_OVERLAP if span else theirs[0] <= mine[0] <= theirs[1]
    except TypeError:
        return False


def _estimated(fact: SourceProfile, key: ColumnProfile, dimension: SourceProfile,
               filters: Sequence[Demand]) -> tuple[float, float, float, float] | None:
    """(keep, keep_high, share, keys) of the fact's files for filters that do not bound the
    dimension's key, None when nothing can be judged."""
    shares = [s for f in filters if (c := dimension.columns.get(f.column)) is not None
              and (s := row_share(c, f.samples)) is not None]
    per_value = files_per_value(key, fact.files)
    if not shares or per_value is None or not fact.files:
        return None
    share = min(shares)
    keys = max(1.0, share * key.distinct_per_file * fact.files / per_value)
    scattered = 1.0 - (1.0 - min(1.0, per_value / fact.files)) ** keys
    return min(scattered, span_keep(key, share)), scattered, share, keys


def _keeps(fact: SourceProfile, key: ColumnProfile, dimension: SourceProfile,
           dimension_key: str, filters: Sequence[Demand], shared: frozenset[str]
           ) -> tuple[float, float, float | None, float | None, int] | None:
    """(keep, keep_high, share, keys, bounded) of the fact's files over the joins of the
    ``shared`` templates its dimension's ``filters`` filter: the ``bounded`` templates bounding
    the dimension's key itself keep the files its bounds meet, each of the others what
    :func:`_estimated` gives for its filters (None when it cannot judge one); ``share`` and
    ``keys`` are the latter's means (None without any)."""
    bounded = [f for f in filters if f.column == dimension_key and f.samples]
    on_key = set().union(*(f.templates & shared for f in bounded))
    rest = set().union(*(f.templates & shared for f in filters)) - on_key
    parts = []
    if on_key:   # the keys' type is the fact key's (_references)
        known = minmax_keep(key, [s for f in bounded for s in f.samples])
        parts.append((len(on_key), (known, known, None, None)))
    for template in sorted(rest):   # each template's filters together
        found = _estimated(fact, key, dimension, [f for f in filters if template in f.templates])
        if found is None:
            return None
        parts.append((1, found))
    if not parts:
        return None
    n = sum(w for w, _ in parts)
    mean = [sum(w * p[i] for w, p in parts) / n for i in (0, 1)]
    estimated = [p for _, p in parts if p[2] is not None]
    share, keys = (sum(p[2] for p in estimated) / len(estimated),
                   sum(p[3] for p in estimated) / len(estimated)) if estimated else (None, None)
    return mean[0], mean[1], share, keys, len(on_key)


def _joined(fact: Demand, source: str, column: str, partner: Demand, key: ColumnProfile,
            dimension: SourceProfile) -> frozenset[str] | None:
    """The templates of ``fact``'s joins with ``column`` of ``source`` in which that side was
    filtered: as the recorded pairs say (the partner's type that of the fact key), else, when
    none was recorded, the templates both join in, when the fact key's values lie within the
    partner key's range (:func:`_references`); None when it is not the key's dimension."""
    recorded = [(t, f) for s, c, t, f in fact.paired if (s, c) == (source, column)]
    theirs = dimension.columns.get(column)
    if recorded:
        same = theirs is not None and _family(theirs.type) == _family(key.type)
        return frozenset(t for t, f in recorded if f) if same else None
    if not _references(key, theirs):
        return None
    return fact.templates & partner.templates


def _joins_of(fact: Demand, demands: Sequence[Demand],
              profiles: Mapping[str, SourceProfile]) -> list[FactJoin]:
    """The filtered dimensions the fact key of ``fact`` is joined to, judged one by one."""
    profile = profiles.get(fact.source)
    key = profile.columns.get(fact.column) if profile is not None else None
    if key is None or fact.column in profile.partition_columns or not fact.templates:
        return []
    rows = {(d.source, d.column, d.use): d for d in demands}
    out = []
    for source, column in sorted(fact.partners):
        dimension, partner = profiles.get(source), rows.get((source, column, "join"))
        if source == fact.source or dimension is None or partner is None \
                or dimension.bytes >= profile.bytes:
            continue
        shared = _joined(fact, source, column, partner, key, dimension)
        if not shared:
            continue
        filters = [d for d in demands if d.source == source and d.use in _FILTERS
                   and d.templates & shared]
        filtered = len(set().union(*(d.templates & shared for d in filters)))
        found = _keeps(profile, key, dimension, column, filters, shared) \
            if filters else None
        if found is None:
            continue
        t = filtered / len(fact.templates)   # the rest of the joins keep every file
        keep, high, share, keys, bounded = found
        out.append(FactJoin(fact, source, column, tuple(sorted({d.column for d in filters})),
                            filtered, 1 - t + t * keep, 1 - t + t * high, share, keys, bounded))
    return out


def fact_join(fact: Demand, demands: Sequence[Demand],
              profiles: Mapping[str, SourceProfile]) -> FactJoin | None:
    """The filtered dimension scored for the fact key of ``fact`` (a ``join`` demand row), if
    any: of those it is joined to, the one keeping the most files (ties by the dimension's name
    and key)."""
    if fact.use != "join" or is_expression(fact.column):
        return None
    found = _joins_of(fact, demands, profiles)
    return max(found, key=lambda j: (j.keep, j.dimension, j.dimension_key), default=None)


def fact_joins(demands: Sequence[Demand],
               profiles: Mapping[str, SourceProfile]) -> list[FactJoin]:
    """Per fact key joined to a filtered dimension (in the order of the keys' sources and
    columns), the dimension scored (:func:`fact_join`)."""
    out = [fact_join(d, demands, profiles)
           for d in sorted(demands, key=lambda d: (d.source, d.column, d.use))]
    return [j for j in out if j is not None]
