"""The evaluator's verdicts over many files at once: the pruning IR evaluated over a version's
statistics columns (numpy masks and Arrow compute), so planning does not grow with the files a
query keeps by a Python step per file.

Contract: for every file it decides, the verdict is exactly :func:`evaluator.may_match`'s over
that file's statistics (tested on random filters and statistics); the files it cannot decide
are left to the per-file evaluator. Each IR node gives, per file, what the evaluator's
``ResultSpec`` would hold: for a boolean, masks of may be true / false / null and may raise;
for a value, may be null / raise / have no non-null value and its bounds as order keys. It
decides (by the evaluator's own rules, see :mod:`indexes.skipping.evaluator`): And, Or, Not,
IS [NOT] NULL, comparisons of two bounded expressions (equality and ``<=>`` when one side is a
literal, with the Bloom filters), IN with literals, string prefixes with a literal, literals,
unknown expressions, over sketches of integral, floating (NaN above +Infinity, -0.0 = 0.0),
decimal (up to 18 digits), date, timestamp, string (truncated bounds are plain bounds) and
binary types, by bounds or by lists of values, missing statistics meaning any value. It leaves
to the evaluator (the files where they matter): boolean sketches, sketches with a guard (a
cast or overflow some row may fail), casts, arithmetic and date functions, equality between
two non-literals, IN over a list of values or a small integer-like range and string prefixes
over a list of values, of a sketch with Bloom filters (the evaluator tries each value against
the filter), and decimals of two types or of more than 18 digits.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from indexes.skipping import keys as K
from indexes.skipping import prefilter
from indexes.skipping import values as V
from indexes.skipping.evaluator import not_null_when_not_false
from indexes.skipping.ir import (And, Cmp, In, IsNotNull, IsNull, Lit, Node, Not, Or, Sketched,
                                 StartsWith, Unknown, node_type)

_ENUMERABLE = 64                       # as the evaluator's: small ranges are sets of points
_PREDICATES = (Cmp, And, Or, Not, In, IsNull, IsNotNull, StartsWith)
_FLIPPED = {">": "<", ">=": "<="}


@dataclass(frozen=True)
class Truth:
    """A boolean node over the files: may be true (``t``), false (``f``), null (``n``), may
    raise (``e``), and ``u`` the files it cannot decide (numpy masks)."""

    t: Any
    f: Any
    n: Any
    e: Any
    u: Any


@dataclass(frozen=True)
class Values:
    """A value node over the files (numpy masks but ``lo``/``hi``): may be null, may raise,
    holds no non-null value (``empty``), the order keys of its bounds ``lo``/``hi`` (numpy
    int64 or an Arrow array; a scalar for a literal) where ``lo_ok``/``hi_ok``; ``u`` the
    files it cannot decide. ``const`` is a literal's value (``_VARIES`` otherwise), ``key``
    the sketch whose Bloom filters hold its values."""

    type: str
    nullable: Any
    fallible: Any
    empty: Any
    lo: Any
    hi: Any
    lo_ok: Any
    hi_ok: Any
    u: Any
    const: Any = None
    key: str | None = None
    listed: Any = None      # files whose values are a known list: ``flat`` (their order keys)
    flat: Any = None        # at ``parent`` (numpy file positions); lo/hi its least and greatest
    parent: Any = None


_VARIES = object()


def verdicts(condition: Node, table: Any, files: Any) -> tuple[Any, Any]:
    """``(keep, decided)``: numpy masks over ``files`` (file numbers of ``table``, a
    :class:`indexes.skipping.table.StatsTable`) of the files the evaluator keeps, exact where
    ``decided``."""
    ev = _Evaluation(table, files)
    result = ev.truth(condition, frozenset())
    none = ev.rows == 0
    return (result.e | result.t) & ~none, ~result.u | none


def whole_files(condition: Node, table: Any, files: Any) -> Any:
    """A numpy mask over ``files`` (file numbers of ``table`` with row groups) of those the
    evaluator keeps every row group of (False where it is not decided here)."""
    import numpy as np

    view, groups, owner = table.row_groups_of(files)
    keep, decided = verdicts(condition, view, groups)
    return np.bincount(owner[~(keep & decided)], minlength=len(files)) == 0


class _Evaluation:
    def __init__(self, table: Any, files: Any):
        import numpy as np

        self.table, self.files, self.n = table, files, len(files)
        self.rows = table.rows(files)
        self.no = np.zeros(self.n, dtype=bool)
        self.yes = np.ones(self.n, dtype=bool)

    def _undecided(self) -> Truth:
        return Truth(self.yes, self.yes, self.yes, self.yes, self.yes)

    def _boolean(self, t: Any, f: Any, n: Any, e: Any, u: Any) -> Truth:
        return Truth(*(x if getattr(x, "shape", None) else (self.yes if x else self.no)
                       for x in (t, f, n, e, u)))

    def _unknown_values(self, type_: str, fallible: Any, u: Any) -> Values:
        return Values(type_, self.yes, fallible, self.no, None, None, self.no, self.no, u,
                      _VARIES)

    # --- booleans ---------------------------------------------------------------------------
    def truth(self, node: Node, forced: frozenset) -> Truth:
        """``node`` as a boolean; ``forced``: sketches known not null (the IS NOT NULL
        conjuncts of an And's left side, as the evaluator assumes on its right side)."""
        if isinstance(node, _PREDICATES):
            return getattr(self, "_" + type(node).__name__)(node, forced)
        if isinstance(node, Lit) and node.type == "boolean":
            v = node.value
            return self._boolean(v is True, v is False, v is None, False, False)
        if isinstance(node, Unknown):
            return self._boolean(True, True, True, *self._fallible(node, forced))
        return self._undecided()

    def _Not(self, node: Not, forced: frozenset) -> Truth:
        c = self.truth(node.child, forced)
        return Truth(c.f, c.t, c.n, c.e, c.u)

    def _And(self, node: And, forced: frozenset) -> Truth:
        a = self.truth(node.left, forced)
        b = self.truth(node.right, forced | frozenset(not_null_when_not_false(node.left)))
        return Truth(a.t & b.t, a.f | ((a.t | a.n) & b.f), (a.n & (b.t | b.n)) | (a.t & b.n),
                     a.e | ((a.t | a.n) & b.e), a.u | b.u)

    def _Or(self, node: Or, forced: frozenset) -> Truth:
        a, b = self.truth(node.left, forced), self.truth(node.right, forced)
        return Truth(a.t | ((a.f | a.n) & b.t), a.f & b.f, (a.n & (b.f | b.n)) | (a.f & b.n),
                     a.e | ((a.f | a.n) & b.e), a.u | b.u)

    def _IsNull(self, node: IsNull | IsNotNull, forced: frozenset) -> Truth:
        if isinstance(node.child, _PREDICATES):
            c = self.truth(node.child, forced)
            null, some, e, u = c.n, c.t | c.f, c.e, c.u
        else:
            c = self.values(node.child, forced)
            null, some, e, u = c.nullable, ~c.empty, c.fallible, c.u
        if isinstance(node, IsNotNull):
            null, some = some, null
        return Truth(null, some, self.no, e, u)

    _IsNotNull = _IsNull

    def _Cmp(self, node: Cmp, forced: frozenset) -> Truth:
        a, b = self.values(node.left, forced), self.values(node.right, forced)
        e, u, op = a.fallible | b.fallible, a.u | b.u, node.op
        if not _comparable(a.type, b.type):
            return Truth(self.yes, self.yes, self.yes, e, u)
        if a.type != b.type:                    # decimals of two types
            return self._undecided()
        some = ~a.empty & ~b.empty
        if op in _FLIPPED:
            a, b, op = b, a, _FLIPPED[op]
        if op in ("<", "<="):
            t = some & self._le(a.lo, a.lo_ok, b.hi, b.hi_ok, op == "<")
            f = some & self._le(b.lo, b.lo_ok, a.hi, a.hi_ok, op == "<=")
            return Truth(t, f, a.nullable | b.nullable, e, u)
        if a.const is _VARIES and b.const is _VARIES:
            return self._undecided()
        equal, differ = self._eq(a, b) if a.const is _VARIES else self._eq(b, a)
        if op == "=":
            return Truth(equal, differ, a.nullable | b.nullable, e, u)
        return Truth(equal | (a.nullable & b.nullable),
                     differ | (a.nullable & ~b.empty) | (b.nullable & ~a.empty), self.no, e, u)

    def _eq(self, s: Values, c: Values) -> tuple[Any, Any]:
        """(may be equal, may differ) of the non-null values of ``s`` and a literal ``c``."""
        import numpy as np

        some = ~s.empty & ~c.empty
        if c.const is None:
            return self.no, self.no
        equal = some & self._le(s.lo, s.lo_ok, c.lo, self.yes) & self._le(c.lo, self.yes, s.hi, s.hi_ok)
        if s.flat is not None:          # a list: one of its values
            equal = np.where(s.listed, some & self._any(s, K.compare(s.flat, c.lo, "=", len(s.flat))),
                             equal)
        equal = equal & ~self._bloom_excludes(s, c.const, equal)
        single = s.lo_ok & s.hi_ok & K.compare(s.lo, s.hi, "=", self.n)
        return equal, some & ~(single & K.compare(s.lo, c.lo, "=", self.n))

    def _bloom_excludes(self, s: Values, value: Any, where: Any) -> Any:
        """The files (among ``where``) whose Bloom filter of ``s`` does not hold ``value``."""
        import numpy as np

        if s.key is None or not self.table.has_blooms(s.key, s.type) or not where.any():
            return self.no
        at = np.flatnonzero(where)
        out = self.no.copy()
        out[at] = prefilter.bloom_excludes(self.table, s.key, self.files[at],
                                           (V.normalize(value, s.type),))
        return out

    def _In(self, node: In, forced: frozenset) -> Truth:
        import numpy as np

        v = self.values(node.value, forced)
        items = [self.values(i, forced) for i in node.items]
        e, u = v.fallible, v.u
        nullable = v.nullable
        for i in items:
            e, u, nullable = e | i.fallible, u | i.u, nullable | i.nullable
        if not all(_comparable(v.type, i.type) for i in items):
            return Truth(self.yes, self.yes, self.yes, e, u)
        if any(i.type != v.type or i.const is _VARIES for i in items) or v.const is not _VARIES:
            return self._undecided()
        t, f = self.no, ~v.empty
        for i in items:
            equal, differ = self._eq(v, i)
            t, f = t | equal, f & differ
        if V.integral_range(v.type) or v.type in ("date", "timestamp", "timestamp_ntz"):
            # a small range is a set of points: the evaluator tries each
            bounded = v.lo_ok & v.hi_ok & ~_mask(v.listed, self.no)
            lo = np.where(bounded, v.lo, 0) if v.lo is not None else np.zeros(self.n, np.int64)
            hi = np.where(bounded, v.hi, 0) if v.hi is not None else lo
            span = hi.astype(np.uint64) - lo.astype(np.uint64)     # hi - lo when hi >= lo
            points = bounded & ((hi < lo) | (span < _ENUMERABLE))
            if points.any():
                if v.key is not None and self.table.has_blooms(v.key, v.type):
                    u = u | points
                else:
                    inside = np.zeros(self.n, dtype=np.uint64)
                    for x in sorted({i.lo for i in items if i.const is not None}):
                        inside += ((lo <= x) & (x <= hi)).astype(np.uint64)
                    some_left = (hi >= lo) & (span + np.uint64(1) > inside)
                    if any(i.const is None for i in items):
                        some_left = self.no
                    f = np.where(points, ~v.empty & some_left, f)
        if v.flat is not None:          # each value of a list is a point the evaluator tries
            if v.key is not None and self.table.has_blooms(v.key, v.type):
                u = u | v.listed
            elif any(i.const is None for i in items):
                f = np.where(v.listed, False, f)
            else:
                other = np.ones(len(v.flat), dtype=bool)
                for i in items:
                    other &= ~K.compare(v.flat, i.lo, "=", len(v.flat))
                f = np.where(v.listed, self._any(v, other), f)
        return Truth(t, f, nullable, e, u)

    def _StartsWith(self, node: StartsWith, forced: frozenset) -> Truth:
        import numpy as np
        import pyarrow.compute as pc

        c, p = self.values(node.child, forced), self.values(node.prefix, forced)
        e, u, nullable = c.fallible | p.fallible, c.u | p.u, c.nullable | p.nullable
        if p.const is _VARIES:
            return self._undecided()
        some = ~c.empty & ~p.empty
        if c.type != "string" or p.type != "string" or p.const is None:
            return Truth(some, some, nullable, e, u)
        prefix = p.const
        if prefix == "":
            return Truth(some, self.no, nullable, e, u)
        after = V.string_successor(prefix)
        at = K.scalar_key(prefix, "string")
        t = self._le(at, self.yes, c.hi, c.hi_ok)
        f = c.lo_ok & self._le(at, self.yes, c.lo, self.yes)
        if after is not None:
            up = K.scalar_key(after, "string")
            t = t & self._le(c.lo, c.lo_ok, up, self.yes, True)
            f = f & c.hi_ok & self._le(c.hi, self.yes, up, self.yes, True)
        t, f = some & t, some & ~f
        if c.flat is not None:          # a list: each of its values
            if c.key is not None and self.table.has_blooms(c.key, c.type):
                u = u | c.listed
            else:
                hits = pc.starts_with(c.flat, pattern=prefix).to_numpy(zero_copy_only=False)
                t = np.where(c.listed, some & self._any(c, hits), t)
                f = np.where(c.listed, some & self._any(c, ~hits), f)
        return Truth(t, f, nullable, e, u)

    # --- values -----------------------------------------------------------------------------
    def _fallible(self, node: Unknown, forced: frozenset) -> tuple[Any, Any]:
        """(may raise, undecided) of an unknown expression: itself, or one of its arguments."""
        e, u = (self.yes if node.raises else self.no), self.no
        for arg in node.args:
            if isinstance(arg, _PREDICATES):
                part = self.truth(arg, forced)
                e, u = e | part.e, u | part.u
            else:
                value = self.values(arg, forced)
                e, u = e | value.fallible, u | value.u
        return e, u

    def values(self, node: Node, forced: frozenset) -> Values:
        """``node`` as a value (see :class:`Values`)."""
        import numpy as np
        import pyarrow.compute as pc

        if isinstance(node, Lit):
            if node.value is None:
                return Values(node.type, self.yes, self.no, self.yes, None, None, self.no, self.no,
                              self.no, None)
            key = K.scalar_key(node.value, node.type)
            if key is None:
                return self._unknown_values(node.type, self.no, self.yes)
            return Values(node.type, self.no, self.no, self.no, key, key, self.yes, self.yes,
                          self.no, V.normalize(node.value, node.type))
        if isinstance(node, Unknown):
            return self._unknown_values(node.type, *self._fallible(node, forced))
        if not isinstance(node, Sketched) or node.guard is not None or node.type == "unknown" \
                or node.type == "boolean":
            return self._unknown_values(node_type(node), self.yes, self.yes)
        found = self.table.sketch_columns(node.key, node.type, self.files)
        if found is None or not V.is_orderable(node.type):
            return self._unknown_values(node.type, self.no, self.no)
        known, rows, nulls = found["known"], self.rows, found["nulls"]
        if node.key in forced:
            nulls = np.where(known, 0, nulls)
        nullable = ~known | (nulls < 0) | (nulls > 0)
        empty = known & (nulls >= 0) & (rows >= 0) & (nulls >= rows)
        lo, hi = K.order_keys(found["min"], node.type), K.order_keys(found["max"], node.type)
        if lo is None:
            return self._unknown_values(node.type, self.no, self.yes)
        lo_ok = known & ~empty & K.valid(found["min"])
        hi_ok = known & ~empty & K.valid(found["max"])
        listed = known & found["listed"] & ~empty
        flat = parent = None
        if listed.any():
            lists = found["values"]
            parent = _numpy(pc.list_parent_indices(lists)).astype(np.int64)
            flat = K.order_keys(pc.list_flatten(lists), node.type)
            some = listed & (np.bincount(parent, minlength=self.n) > 0)
            empty, nullable = empty | (listed & ~some), nullable | (listed & ~some)
            lo, hi = _per_file(flat, parent, some, lo, "min"), _per_file(flat, parent, some, hi, "max")
            lo_ok, hi_ok = np.where(listed, some, lo_ok), np.where(listed, some, hi_ok)
        return Values(node.type, nullable, self.no, empty, lo, hi, lo_ok, hi_ok, self.no, _VARIES,
                      node.key, listed, flat, parent)

    def _any(self, v: Values, hits: Any) -> Any:
        """Per file, whether some value of its list (``hits``: a mask over ``v.flat``) is."""
        import numpy as np

        return np.bincount(v.parent[hits], minlength=self.n) > 0

    def _le(self, a: Any, a_ok: Any, b: Any, b_ok: Any, strict: bool = False) -> Any:
        """a <= b (a < b if strict) in Spark's order, true where a side is unbounded."""
        return ~a_ok | ~b_ok | K.compare(a, b, "<" if strict else "<=", self.n)


def _comparable(a: str, b: str) -> bool:
    if V.decimal_type(a) and V.decimal_type(b):
        return True
    return a == b and V.is_orderable(a)


def _mask(found: Any, default: Any) -> Any:
    return default if found is None else found


def _numpy(array: Any) -> Any:
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    return array.to_numpy(zero_copy_only=False)


def _per_file(flat: Any, parent: Any, some: Any, bounds: Any, which: str) -> Any:
    """``bounds`` (order keys per file) with, at the files ``some``, the least (``which`` min)
    or greatest of their list's keys ``flat`` (at ``parent``)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(flat, np.ndarray):
        out = bounds.copy()
        found = np.full(len(bounds), np.iinfo(np.int64).max if which == "min"
                        else np.iinfo(np.int64).min, dtype=np.int64)
        (np.minimum if which == "min" else np.maximum).at(found, parent, flat)
        out[some] = found[some]
        return out
    grouped = pa.table({"p": parent, "v": flat}).group_by("p").aggregate([("v", which)])
    at = np.full(len(bounds), -1, dtype=np.int64)
    at[grouped.column("p").to_numpy()] = np.arange(grouped.num_rows)
    if isinstance(bounds, pa.ChunkedArray):
        bounds = bounds.combine_chunks()
    taken = grouped.column(f"v_{which}").combine_chunks().take(pa.array(at, mask=at < 0))
    return pc.if_else(pa.array(some), taken, bounds)


