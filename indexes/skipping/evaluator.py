"""Abstract interpretation of a filter over one file's statistics (docs/architecture.md, section 8).

Every IR node evaluates to a :class:`ResultSpec`: whether some row may give null, whether some
row may raise, and a superset of the non-null values it may give (Empty, an inclusive range
Within(lo, hi) whose open ends are None, or an exact finite set Among). Monotonic functions map
range endpoints; anything unknown is All. A file may be skipped only when the filter can give
true on no row and raise on no row.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from indexes.skipping import bloom as B
from indexes.skipping import values as V
from indexes.skipping.ir import (
    And,
    Arith,
    Cast,
    Cmp,
    Func,
    In,
    IsNotNull,
    IsNull,
    Lit,
    Node,
    Not,
    Or,
    Sketched,
    StartsWith,
    Unknown,
)
from indexes.skipping.stats import ColumnStats, FileStats

DAY = V.MICROS_PER_DAY
_LONG = V.integral_range("long")
_DAYS = (_LONG[0] // DAY + 1, _LONG[1] // DAY - 1)     # days whose instants fit in a long
_ENUMERABLE = 64          # small integer-like ranges are enumerated into exact sets


@dataclass(frozen=True)
class Empty:
    """No non-null value."""


@dataclass(frozen=True)
class Within:
    """Non-null values within [lo, hi] in Spark's order; None = unbounded on that side."""

    lo: Any = None
    hi: Any = None


@dataclass(frozen=True)
class Among:
    """Non-null values within this non-empty finite set."""

    values: frozenset


EMPTY = Empty()
ALL = Within()
Values = Empty | Within | Among


@dataclass(frozen=True)
class ResultSpec:
    """What an expression may give over the rows of a file: null (``nullable``), an error
    (``fallible``), and non-null ``values``; ``bloom`` is a Bloom filter (either format of
    :mod:`indexes.skipping.bloom`, of values of ``type``) of every non-null value, when one
    is known."""

    type: str
    nullable: bool = True
    fallible: bool = False
    values: Values = ALL
    bloom: Any = None


def may_match(node: Node, stats: FileStats) -> bool:
    """False only when the filter ``node`` provably gives true on no row of the file described
    by ``stats`` and raises on no row."""
    if stats.rows == 0:
        return False
    spec = evaluate(node, stats)
    return spec.fallible or _truth(spec)[0]


def evaluate(node: Node, stats: FileStats) -> ResultSpec:
    """The ResultSpec of an IR node over the rows of a file."""
    return _EVAL[type(node)](node, stats)


# --- helpers ---------------------------------------------------------------------------------
def _among(type_: str, values) -> Values:
    vs = frozenset(V.normalize(v, type_) for v in values)
    return Among(vs) if vs else EMPTY


@functools.lru_cache(maxsize=None)
def _boolean(can_true: bool, can_false: bool, nullable: bool, fallible: bool) -> ResultSpec:
    return ResultSpec("boolean", nullable, fallible,
                      _among("boolean", [b for b, ok in ((True, can_true), (False, can_false)) if ok]))


def _truth(spec: ResultSpec) -> tuple[bool, bool, bool]:
    """(may be true, may be false, may be null) of a boolean spec."""
    v = spec.values
    if isinstance(v, Empty):
        return False, False, spec.nullable
    if isinstance(v, Among):
        return True in v.values, False in v.values, spec.nullable
    return v.hi is None or v.hi is True, v.lo is None or v.lo is False, spec.nullable


def _empty(spec: ResultSpec) -> bool:
    return isinstance(spec.values, Empty)


def _bounds(spec: ResultSpec) -> tuple[Any, Any]:
    v = spec.values
    if isinstance(v, Among):
        key = lambda x: V.order_key(x, spec.type)
        return min(v.values, key=key), max(v.values, key=key)
    return v.lo, v.hi


def _points(spec: ResultSpec) -> dict | None:
    """order key → value of every possible non-null value, when they are few and known (a
    Bloom filter rules out the values it does not hold)."""
    v, t = spec.values, spec.type
    if isinstance(v, Among):
        found = v.values
    elif isinstance(v, Within) and v.lo is not None and v.hi is not None and t == "boolean":
        found = [b for b in (False, True) if v.lo <= b <= v.hi]
    elif isinstance(v, Within) and v.lo is not None and v.hi is not None \
            and (V.integral_range(t) or t in ("date", "timestamp", "timestamp_ntz")) \
            and v.hi - v.lo < _ENUMERABLE:
        found = range(v.lo, v.hi + 1)
    else:
        return None
    if spec.bloom is not None:
        found = [x for x in found if B.may_hold(spec.bloom, x, t)]
    return {V.order_key(x, t): x for x in found}


def _only(spec: ResultSpec) -> Any:
    """The order key of the one possible non-null value, or None when there may be several."""
    lo, hi = _bounds(spec)
    if lo is None or hi is None or V.order_key(lo, spec.type) != V.order_key(hi, spec.type):
        return None
    return V.order_key(lo, spec.type)


def _le(a: Any, b: Any, type_: str, strict: bool = False) -> bool:
    """a <= b (a < b if strict) in Spark's order; an unbounded (None) side always may be."""
    if a is None or b is None:
        return True
    ka, kb = V.order_key(a, type_), V.order_key(b, type_)
    return ka < kb if strict else ka <= kb


def _comparable(a: str, b: str) -> bool:
    if V.decimal_type(a) and V.decimal_type(b):
        return True
    return a == b and V.is_orderable(a)


# --- statistics ------------------------------------------------------------------------------
def _from_stats(type_: str, cs: ColumnStats | None, rows: int | None) -> ResultSpec:
    if cs is None or cs.type != type_ or not V.is_orderable(type_):
        return ResultSpec(type_)
    nullable = cs.null_count is None or cs.null_count > 0
    if cs.null_count is not None and rows is not None and cs.null_count >= rows:
        values: Values = EMPTY
    elif cs.values is not None:
        values = _among(type_, cs.values)
        nullable = nullable or not cs.values
    else:
        values = Within(cs.min, cs.max)
    spec = ResultSpec(type_, nullable, False, values, cs.bloom)
    if type_ == "boolean" and isinstance(values, Within):
        spec = replace(spec, values=_among(type_, (_points(spec) or {b: b for b in (False, True)}).values()))
    return spec


def _sketched(node: Sketched, stats: FileStats) -> ResultSpec:
    cs = stats.columns.get(node.key)
    spec = _from_stats(cs.type if cs is not None and node.type == "unknown" else node.type,
                       cs, stats.rows)
    if node.guard is None or not evaluate(node.guard, stats).fallible:
        return spec
    # Some row may fail a cast or overflow: the sketch holds what the build made of it.
    guard = node.guard
    if isinstance(guard, Cast) and guard.from_type == "string" \
            and not evaluate(guard.child, stats).fallible:
        # A string that does not parse gives null (or failed the build, in ANSI mode).
        if not node.ansi:
            return spec
        child = stats.columns.get(guard.child.key) if isinstance(guard.child, Sketched) else None
        nulls = cs.null_count if cs is not None and cs.type == node.type else None
        if nulls == 0 or (nulls is not None and child is not None and child.null_count == nulls):
            return spec
        return replace(spec, fallible=True)
    if cs is not None and cs.null_count == 0 and _null_on_error(guard, stats):
        # Where the query's variant would raise, the build's gave null: none did in this file.
        return spec
    return ResultSpec(node.type, True, node.ansi)


def _null_on_error(node: Node, stats: FileStats) -> bool:
    """Whether ``node`` (struct field accesses over a ``null_on_error`` node whose inputs never
    raise) gives null on every row where a same-printing variant of it raises."""
    while isinstance(node, Unknown) and node.field and len(node.args) == 1 and not node.raises:
        node = node.args[0]
    return (isinstance(node, Unknown) and node.null_on_error
            and not any(evaluate(a, stats).fallible for a in node.args))


def _lit(node: Lit, stats: FileStats) -> ResultSpec:
    return _literal(node)


@functools.lru_cache(maxsize=1024)
def _literal(node: Lit) -> ResultSpec:
    if node.value is None:
        return ResultSpec(node.type, True, False, EMPTY)
    return ResultSpec(node.type, False, False, _among(node.type, [node.value]))


def _unknown(node: Unknown, stats: FileStats) -> ResultSpec:
    fallible = node.raises or any(evaluate(a, stats).fallible for a in node.args)
    values = _among("boolean", (False, True)) if node.type == "boolean" else ALL
    return ResultSpec(node.type, True, fallible, values)


# --- predicates ------------------------------------------------------------------------------
def _eq(a: ResultSpec, b: ResultSpec) -> tuple[bool, bool]:
    """(may be equal, may differ) for non-null values of a and b."""
    if _empty(a) or _empty(b):
        return False, False
    t = a.type
    pa, pb = _points(a), _points(b)
    (alo, ahi), (blo, bhi) = _bounds(a), _bounds(b)
    if pa is not None and pb is not None:
        equal = bool(pa.keys() & pb.keys())
    elif pa is not None:
        equal = any(_le(blo, x, t) and _le(x, bhi, t) for x in pa.values())
    elif pb is not None:
        equal = any(_le(alo, x, t) and _le(x, ahi, t) for x in pb.values())
    else:
        equal = _le(alo, bhi, t) and _le(blo, ahi, t)
    only = _only(a)
    differ = only is None or only != _only(b)
    for side, other in ((a, pb), (b, pa)):
        if equal and side.bloom is not None and other is not None:
            equal = any(B.may_hold(side.bloom, x, side.type) for x in other.values())
    return equal, differ


def _order(a: ResultSpec, b: ResultSpec, strict: bool) -> tuple[bool, bool]:
    """(may a < b (a <= b if not strict), may it not) for non-null values."""
    if _empty(a) or _empty(b):
        return False, False
    (alo, ahi), (blo, bhi) = _bounds(a), _bounds(b)
    return _le(alo, bhi, a.type, strict), _le(blo, ahi, a.type, not strict)


def _cmp(node: Cmp, stats: FileStats) -> ResultSpec:
    a, b = evaluate(node.left, stats), evaluate(node.right, stats)
    fallible, op = a.fallible or b.fallible, node.op
    if not _comparable(a.type, b.type):
        return _boolean(True, True, True, fallible)
    if op in (">", ">="):
        a, b, op = b, a, op.replace(">", "<")
    if op in ("<", "<="):
        t, f = _order(a, b, op == "<")
    else:
        t, f = _eq(a, b)
    if op == "<=>":
        some_a, some_b = not _empty(a), not _empty(b)
        return _boolean(t or (a.nullable and b.nullable),
                        f or (a.nullable and some_b) or (b.nullable and some_a), False, fallible)
    return _boolean(t, f, a.nullable or b.nullable, fallible)


def _in(node: In, stats: FileStats) -> ResultSpec:
    v = evaluate(node.value, stats)
    items = [evaluate(i, stats) for i in node.items]
    fallible = v.fallible or any(i.fallible for i in items)
    nullable = v.nullable or any(i.nullable for i in items)
    if not all(_comparable(v.type, i.type) for i in items):
        return _boolean(True, True, True, fallible)
    points = _points(v)
    cases = [ResultSpec(v.type, False, False, Among(frozenset([x]))) for x in points.values()] \
        if points is not None else [v]
    t = f = False
    for case in cases:
        results = [_eq(case, i) for i in items]
        t = t or any(equal for equal, _ in results)
        f = f or (not _empty(case) and all(differ for _, differ in results))
    return _boolean(t, f, nullable, fallible)


def _is_null(node: IsNull | IsNotNull, stats: FileStats) -> ResultSpec:
    c = evaluate(node.child, stats)
    null, some = c.nullable, not _empty(c)
    if isinstance(node, IsNotNull):
        null, some = some, null
    return _boolean(null, some, False, c.fallible)


def _not(node: Not, stats: FileStats) -> ResultSpec:
    c = evaluate(node.child, stats)
    t, f, n = _truth(c)
    return _boolean(f, t, n, c.fallible)


def not_null_when_not_false(node: Node) -> list[str]:
    """Keys of the sketched expressions that are not null on every row where node is not false
    (the IS NOT NULL conjuncts Spark puts first)."""
    if isinstance(node, IsNotNull) and isinstance(node.child, Sketched):
        return [node.child.key]
    if isinstance(node, And):
        return not_null_when_not_false(node.left) + not_null_when_not_false(node.right)
    return []


def _and(node: And, stats: FileStats) -> ResultSpec:
    # Spark evaluates the right side only when the left is not false: on those rows the left's
    # IS NOT NULL conjuncts hold.
    known = [k for k in not_null_when_not_false(node.left)
             if k in stats.columns and stats.columns[k].null_count != 0]
    right_stats = stats if not known else FileStats(stats.rows, {
        **stats.columns, **{k: replace(stats.columns[k], null_count=0) for k in known}})
    a, b = evaluate(node.left, stats), evaluate(node.right, right_stats)
    (at, af, an), (bt, bf, bn) = _truth(a), _truth(b)
    return _boolean(at and bt, af or ((at or an) and bf), (an and (bt or bn)) or (at and bn),
                    a.fallible or ((at or an) and b.fallible))


def _or(node: Or, stats: FileStats) -> ResultSpec:
    # Spark evaluates the right side only when the left is not true.
    a, b = evaluate(node.left, stats), evaluate(node.right, stats)
    (at, af, an), (bt, bf, bn) = _truth(a), _truth(b)
    return _boolean(at or ((af or an) and bt), af and bf, (an and (bf or bn)) or (af and bn),
                    a.fallible or ((af or an) and b.fallible))


def _starts_with(node: StartsWith, stats: FileStats) -> ResultSpec:
    c, p = evaluate(node.child, stats), evaluate(node.prefix, stats)
    fallible, nullable = c.fallible or p.fallible, c.nullable or p.nullable
    prefixes = _points(p)
    if _empty(c) or _empty(p):
        return _boolean(False, False, nullable, fallible)
    if c.type != "string" or p.type != "string" or prefixes is None or len(prefixes) != 1:
        return _boolean(True, True, nullable, fallible)
    prefix = next(iter(prefixes.values()))
    if prefix == "":
        return _boolean(True, False, nullable, fallible)
    points = _points(c)
    if points is not None:
        hits = [s.startswith(prefix) for s in points.values()]
        return _boolean(any(hits), not all(hits), nullable, fallible)
    lo, hi = _bounds(c)
    after = V.string_successor(prefix)     # strings with the prefix are exactly [prefix, after)
    t = (hi is None or hi >= prefix) and (lo is None or after is None or lo < after)
    f = not (lo is not None and lo >= prefix and (after is None or hi is not None and hi < after))
    return _boolean(t, f, nullable, fallible)


# --- monotonic maps --------------------------------------------------------------------------
def _map(spec: ResultSpec, type_: str, fn: Callable[[Any], Any], exact: bool = True,
         increasing: bool = True) -> Values:
    """The values of fn over spec's values, fn monotonic (``exact``: fn maps each value to
    exactly one value, so finite sets stay sets; else the endpoints are bounds)."""
    v = spec.values
    if isinstance(v, Empty):
        return EMPTY
    if isinstance(v, Among) and exact:
        return _among(type_, (fn(x) for x in v.values))
    lo, hi = _bounds(spec)
    lo, hi = (None if lo is None else fn(lo)), (None if hi is None else fn(hi))
    return Within(lo, hi) if increasing else Within(hi, lo)


def _within(spec: ResultSpec, lo: Any, hi: Any) -> bool:
    """Whether every value of spec is known to lie in [lo, hi]."""
    if _empty(spec):
        return True
    a, b = _bounds(spec)
    return a is not None and b is not None and lo <= a and b <= hi


def _float_bound(x: float, type_: str, up: bool) -> float:
    """A bound of an inexactly computed result: one float32 step (or two doubles) outward."""
    if type_ == "float":
        try:
            x = V.to_float32(x)
        except OverflowError:
            x = math.copysign(math.inf, x)
        return V.float32_step(x, up)
    for _ in range(2):
        x = math.nextafter(x, math.inf if up else -math.inf) if not math.isnan(x) else x
    return x


def _loose(spec: ResultSpec, type_: str, fn: Callable[[Any], float]) -> Values:
    """Bounds of a monotone non-decreasing float-valued fn that may be off by rounding."""
    w = _map(spec, type_, fn, exact=False)
    if isinstance(w, Empty):
        return w
    return Within(None if w.lo is None else _float_bound(w.lo, type_, False),
                  None if w.hi is None else _float_bound(w.hi, type_, True))


def _ts_to_date(lo: int | None, hi: int | None, tz: str) -> Within:
    least, most = V.offset_range(tz, lo, hi)
    return Within(None if lo is None else (lo + least) // DAY, None if hi is None else (hi + most) // DAY)


def _date_to_ts(lo: int | None, hi: int | None, tz: str) -> Within:
    """Bounds of the first instants of the days [lo, hi] in tz (Java's atStartOfDay)."""
    window = (None if lo is None else lo * DAY - 2 * DAY, None if hi is None else hi * DAY + 2 * DAY)
    least, most = V.offset_range(tz, *window)
    return Within(None if lo is None else lo * DAY - most, None if hi is None else hi * DAY - least)


def _cast_values(c: ResultSpec, src: str, dst: str, tz: str | None) -> Values | None:
    """The values of a cast that cannot fail on c's values and is monotonic, else None."""
    s_int, d_int = V.integral_range(src), V.integral_range(dst)
    if src == "float" and dst == "double":
        return c.values
    if s_int and d_int:
        return c.values if _within(c, *d_int) else None
    if (s_int or src == "boolean") and dst == "double":
        return _map(c, dst, float)
    if s_int and dst == "float" or V.decimal_type(src) and V.is_floating(dst):
        return _loose(c, dst, float)
    if src == "boolean" and d_int:
        return _map(c, dst, int)
    if s_int and V.decimal_type(dst):
        precision, scale = V.decimal_type(dst)
        limit = 10 ** (precision - scale) - 1
        return _map(c, dst, Decimal) if _within(c, -limit, limit) else None
    lo, hi = _bounds(c)
    if V.decimal_type(src) and V.decimal_type(dst):
        (_, s1), (p2, s2) = V.decimal_type(src), V.decimal_type(dst)
        limit = 10 ** (p2 - s2)
        fits = lo is not None and hi is not None and -limit < lo and hi < limit
        return c.values if s2 >= s1 and fits else None
    if src == "date" and dst == "timestamp_ntz":
        return _map(c, dst, lambda d: d * DAY) if _within(c, *_DAYS) else None
    if src == "timestamp_ntz" and dst == "date":
        return _map(c, dst, lambda t: t // DAY)
    if tz is None:
        return None
    if src == "date" and dst == "timestamp":
        return _date_to_ts(lo, hi, tz) if _within(c, *_DAYS) else None
    if src == "timestamp" and dst == "date":
        return _ts_to_date(lo, hi, tz)
    if src == "timestamp" and dst == "timestamp_ntz":
        least, most = V.offset_range(tz, lo, hi)
        return Within(None if lo is None else lo + least, None if hi is None else hi + most)
    if src == "timestamp_ntz" and dst == "timestamp":
        least, most = V.offset_range(tz, None if lo is None else lo - 2 * DAY,
                                     None if hi is None else hi + 2 * DAY)
        return Within(None if lo is None else lo - most, None if hi is None else hi - least)
    return None


def _cast(node: Cast, stats: FileStats) -> ResultSpec:
    c = evaluate(node.child, stats)
    if node.from_type == node.to_type:
        return c
    if _empty(c):
        return ResultSpec(node.to_type, c.nullable, c.fallible, EMPTY)
    values = _cast_values(c, node.from_type, node.to_type, node.tz)
    if values is not None:
        return ResultSpec(node.to_type, c.nullable, c.fallible, values)
    return ResultSpec(node.to_type, True, c.fallible or node.ansi)


def _single(spec: ResultSpec) -> Any:
    points = _points(spec) if isinstance(spec.values, Among) else None
    return next(iter(points.values())) if points is not None and len(points) == 1 else None


def _arith(node: Arith, stats: FileStats) -> ResultSpec:
    a, b = evaluate(node.left, stats), evaluate(node.right, stats)
    t, op = node.type, node.op
    fallible, nullable = a.fallible or b.fallible, a.nullable or b.nullable
    if _empty(a) or _empty(b):
        return ResultSpec(t, nullable, fallible, EMPTY)
    if _single(b) is not None:
        x, c = a, _single(b)
        fn = {"+": lambda v: v + c, "-": lambda v: v - c, "*": lambda v: v * c}[op]
        increasing = op != "*" or c >= 0
    elif _single(a) is not None:
        x, c = b, _single(a)
        fn = {"+": lambda v: c + v, "-": lambda v: c - v, "*": lambda v: c * v}[op]
        increasing = op == "+" or op == "*" and c >= 0
    else:
        return ResultSpec(t, True, fallible or (node.ansi and not V.is_floating(t)))
    if V.integral_range(t):
        w = ResultSpec(t, nullable, fallible, _map(x, t, fn, increasing=increasing))
        if not _within(w, *V.integral_range(t)):
            return ResultSpec(t, True, fallible or node.ansi)      # may overflow
        return w
    return ResultSpec(t, nullable, fallible, _float_arith(x, t, fn, c, op, increasing))


def _float_arith(x: ResultSpec, t: str, fn: Callable, c: float, op: str, increasing: bool) -> Values:
    """fn(x) = x op c (or c op x) over floats: monotone on [-inf, inf] for a finite c, NaN → NaN."""
    if not math.isfinite(c):
        return ALL
    lo, hi = _bounds(x)
    if op == "*" and c == 0:
        finite = lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi)
        return _among(t, [0.0]) if finite else Within(0.0, V.NAN)
    if increasing:
        w = _map(x, t, fn, exact=t == "double")
    elif lo is None or hi is None:
        return ALL
    elif math.isnan(lo):
        return _among(t, [V.NAN])
    else:
        top = V.NAN if math.isnan(hi) else fn(lo)
        w = Within(fn(math.inf if math.isnan(hi) else hi), top)
    if t == "double" or not isinstance(w, Within):
        return w
    return Within(None if w.lo is None else _float_bound(w.lo, t, False),
                  None if w.hi is None else _float_bound(w.hi, t, True))


# --- date and time functions -----------------------------------------------------------------
def _civil(days: int) -> date | None:
    try:
        return V.EPOCH_DATE + timedelta(days=days)
    except OverflowError:
        return None


def _days(d: date) -> int:
    return (d - V.EPOCH_DATE).days


def _trunc_date(days: int, unit: str) -> int | None:
    d = _civil(days)
    if d is None:
        return None
    if unit == "week":
        return days - d.weekday()
    month = {"month": d.month, "quarter": d.month - (d.month - 1) % 3, "year": 1}[unit]
    return _days(d.replace(month=month, day=1))


def _trunc_micros(t: int, unit: str) -> int:
    step = {"microsecond": 1, "millisecond": 1000, "second": V.MICROS_PER_SECOND,
            "minute": 60 * V.MICROS_PER_SECOND, "hour": 3600 * V.MICROS_PER_SECOND, "day": DAY}[unit]
    return t - t % step


def _func(node: Func, stats: FileStats) -> ResultSpec:
    c = evaluate(node.child, stats)
    result = lambda values: ResultSpec(node.type, c.nullable, c.fallible, values)
    if _empty(c):
        return result(EMPTY)
    lo, hi = _bounds(c)
    if node.name in ("year", "month", "trunc_date"):
        if lo is None or hi is None or _civil(lo) is None or _civil(hi) is None:
            return result(ALL)
        if node.name == "year":
            return result(_map(c, "integer", lambda d: _civil(d).year))
        if node.name == "trunc_date":
            return result(_map(c, "date", lambda d: _trunc_date(d, node.arg)))
        if _civil(lo).year != _civil(hi).year:
            return result(Within(1, 12))
        return result(_map(c, "integer", lambda d: _civil(d).month))
    unit, tz = node.arg, node.tz
    if unit in ("microsecond", "millisecond", "second"):        # no time zone involved
        return result(_map(c, node.type, lambda t: _trunc_micros(t, unit)))
    if unit in ("minute", "hour", "day"):
        # local time truncated, then the instant with the same offset (or a neighbour's)
        least, most = V.offset_range(tz, None if lo is None else lo - 2 * DAY,
                                     None if hi is None else hi + 2 * DAY)
        return result(Within(None if lo is None else _trunc_micros(lo + least, unit) - most,
                             None if hi is None else _trunc_micros(hi + most, unit) - least))
    days = _ts_to_date(lo, hi, tz)
    if days.lo is None or days.hi is None or None in (_civil(days.lo), _civil(days.hi)):
        return result(ALL)
    return result(_date_to_ts(_trunc_date(days.lo, unit), _trunc_date(days.hi, unit), tz))


_EVAL: dict[type, Callable[[Any, FileStats], ResultSpec]] = {
    Sketched: _sketched, Lit: _lit, Unknown: _unknown, Cmp: _cmp, In: _in, IsNull: _is_null,
    IsNotNull: _is_null, Not: _not, And: _and, Or: _or, StartsWith: _starts_with, Cast: _cast,
    Arith: _arith, Func: _func,
}
