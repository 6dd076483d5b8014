"""A first pass of the data-skipping rule that scales to many files: the conjuncts of a filter
that compare a sketched expression with literals, checked against the files' min/max bounds
sorted once per index version (a point lookup reads a few of them, not every file), before the
evaluator judges the files that pass one by one.

Contract: it rules out only files :func:`evaluator.may_match` rules out too, so pruning keeps
exactly the files the evaluator alone keeps (tested on random filters and statistics). It
reads the conjuncts the evaluator answers from bounds alone (``=``, ``<=>``, ``<``, ``<=``,
``>``, ``>=`` with a non-null literal, IN with literals), and only for filters that raise on no
file whatever its statistics (then a conjunct true on no row makes the filter true on none).
"""
from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass
from typing import Any

from indexes.skipping import evaluator
from indexes.skipping import values as V
from indexes.skipping.ir import And, Cmp, In, Lit, Node, Sketched
from indexes.skipping.stats import FileStats

_FLIPPED = {"=": "=", "<=>": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_UNKNOWN = FileStats(None, {})


@dataclass(frozen=True)
class Test:
    """A conjunct ``sketched op literal`` (``op`` one of = < <= > >=, the literal's order key
    ``value``), or ``sketched IN points`` (``op`` "in", ``value`` a tuple of order keys)."""

    key: str
    type: str
    op: str
    value: Any


def _conjuncts(node: Node) -> list[Node]:
    if isinstance(node, And):
        return _conjuncts(node.left) + _conjuncts(node.right)
    return [node]


def _sketched(node: Node) -> Sketched | None:
    """A sketched expression whose value the statistics bound whatever the mode."""
    if isinstance(node, Sketched) and node.guard is None and node.type != "unknown" \
            and V.is_orderable(node.type):
        return node
    return None


def _literal(node: Node, type_: str) -> Lit | None:
    if isinstance(node, Lit) and node.value is not None and node.type == type_:
        return node
    return None


def _test(node: Node) -> Test | None:
    if isinstance(node, Cmp):
        for column, other, op in ((node.left, node.right, node.op),
                                  (node.right, node.left, _FLIPPED[node.op])):
            s = _sketched(column)
            lit = _literal(other, s.type) if s is not None else None
            if lit is not None:
                return Test(s.key, s.type, "=" if op == "<=>" else op,
                            V.order_key(lit.value, s.type))
    if isinstance(node, In):
        s = _sketched(node.value)
        if s is not None and node.items and all(
                isinstance(i, Lit) and i.type == s.type for i in node.items):
            return Test(s.key, s.type, "in", tuple(V.order_key(i.value, s.type)
                                                    for i in node.items if i.value is not None))
    return None


def tests(condition: Node) -> list[Test]:
    """The conjuncts of ``condition`` the first pass checks; none when the filter may raise."""
    found = [t for t in map(_test, _conjuncts(condition)) if t is not None]
    if not found or evaluator.evaluate(condition, _UNKNOWN).fallible:
        return []
    return found


class Bounds:
    """Every file's bounds of one sketched expression, as order keys, from an index's table
    (path → FileEntry), sorted so a test reads only the files that may pass it: files with
    both bounds of the type by lower bound (with the running maximum of the upper bounds) and
    by upper bound; the other paths (never ruled out here) in ``unbounded``."""

    def __init__(self, table: dict, key: str, type_: str):
        ranges, self.unbounded = [], []
        for path, entry in table.items():
            cs = entry.stats.columns.get(key)
            if cs is None or cs.type != type_ or cs.min is None or cs.max is None:
                self.unbounded.append(path)
            else:
                ranges.append((V.order_key(cs.min, type_), V.order_key(cs.max, type_), path))
        ranges.sort(key=lambda r: r[0])
        self._lo = [r[0] for r in ranges]
        self._hi = [r[1] for r in ranges]
        self._paths = [r[2] for r in ranges]
        self._hi_so_far = list(itertools.accumulate(self._hi, max))
        by_hi = sorted(ranges, key=lambda r: r[1])
        self._hi_sorted = [r[1] for r in by_hi]
        self._paths_by_hi = [r[2] for r in by_hi]

    def _holding(self, v: Any, out: set[str]) -> None:
        """Adds the paths whose [lo, hi] holds ``v``: among the files with lo <= v, from the
        last one back while some file that far has hi >= v."""
        i = bisect.bisect_right(self._lo, v) - 1
        while i >= 0 and not self._hi_so_far[i] < v:
            if not self._hi[i] < v:
                out.add(self._paths[i])
            i -= 1

    def passing(self, test: Test) -> set[str]:
        """The paths whose bounds may hold a value passing ``test``."""
        v, op = test.value, test.op
        found = set(self.unbounded)
        if op in ("=", "in"):
            for x in (v if op == "in" else (v,)):
                self._holding(x, found)
        elif op == "<":
            found.update(self._paths[:bisect.bisect_left(self._lo, v)])
        elif op == "<=":
            found.update(self._paths[:bisect.bisect_right(self._lo, v)])
        elif op == ">":
            found.update(self._paths_by_hi[bisect.bisect_right(self._hi_sorted, v):])
        else:
            found.update(self._paths_by_hi[bisect.bisect_left(self._hi_sorted, v):])
        return found


def candidates(condition: Node, table: Any) -> set[str] | None:
    """The paths of ``table`` (a :class:`indexes.skipping.table.StatsTable`) the first pass
    leaves to the evaluator (it would rule the others out too), or None when it checks no
    conjunct of ``condition``."""
    found: set[str] | None = None
    for test in tests(condition):
        passing = table.bounds(test.key, test.type).passing(test)
        found = passing if found is None else found & passing
    return found
