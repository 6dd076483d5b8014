"""Dynamic file pruning, the statistics' side: the keys the other side of a join holds (see
:mod:`indexes.join_probes`), as a condition on the relation's own key expression that the
pruning evaluator judges with the relation's filter, so files and row groups are pruned by the
same machinery as any filter.

A row of the relation can match the join only if its key equals one of the other side's non-null
keys, which is what ``key IN (k1, ..., kn)`` says (a null key gives null, never true), or, when
the keys are too many to list, what ``key >= low AND key <= high`` over their range implies. An
empty other side gives an empty IN list: no row of the relation matches.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from indexes.join_probes import JoinProbe
from indexes.skipping import values as V
from indexes.skipping.ir import And, Cmp, In, Lit, Node


@dataclass(frozen=True)
class JoinKeys:
    """The distinct non-null keys of the other side of ``probe``'s join, in internal form:
    all of them (``values``, sorted), or only their range (``low``, ``high``) when they were
    too many to list."""

    probe: JoinProbe
    values: tuple[Any, ...] | None
    low: Any = None
    high: Any = None

    @staticmethod
    def listed(probe: JoinProbe, keys: Iterable[Any]) -> "JoinKeys":
        """The keys as ``collect()`` returns them (nulls dropped)."""
        t = probe.type
        internal = {V.normalize(V.from_python(k, t), t) for k in keys if k is not None}
        return JoinKeys(probe, tuple(sorted(internal, key=lambda v: V.order_key(v, t))))

    @staticmethod
    def ranged(probe: JoinProbe, low: Any, high: Any) -> "JoinKeys":
        """Keys known only by their least and greatest value, as ``collect()`` returns them."""
        t = probe.type
        return JoinKeys(probe, None, V.from_python(low, t), V.from_python(high, t))

    def condition(self, key: Node) -> Node:
        """What a row whose key expression translates to ``key`` must satisfy to match: the
        IN list of the keys, or their range when they are too many to list or, integers or
        dates, follow each other without a gap (the same rows, judged at a fraction of the
        cost: a month of a date dimension's keys)."""
        t = self.probe.type
        if self.values is not None and not self._consecutive():
            return In(key, tuple(Lit(v, t) for v in self.values))
        low, high = (self.low, self.high) if self.values is None else \
            (self.values[0], self.values[-1])
        return And(Cmp(">=", key, Lit(low, t)), Cmp("<=", key, Lit(high, t)))

    def _consecutive(self) -> bool:
        """Whether the listed keys (more than one) are every integer of their range (integral
        types and dates, held as integers)."""
        v = self.values
        return (len(v or ()) > 1 and (V.integral_range(self.probe.type) is not None
                                       or self.probe.type == "date")
                and v[-1] - v[0] + 1 == len(v))

    def describe(self) -> str:
        """The join and what the other side held, for explain."""
        if self.values is None:
            held = f"keys from {self.low} to {self.high}"
        elif not self.values:
            held = "no key"
        else:
            held = f"{len(self.values)} distinct keys"
        return f"{self.probe.describe()} (the other side holds {held})"


@dataclass(frozen=True)
class JoinNotUsed:
    """A join that could have pruned the relation but did not: why (the other side too large
    to collect, its query failed, dynamic file pruning off)."""

    probe: JoinProbe
    reason: str

    def describe(self) -> str:
        """The join and why it was not used, for explain and whyNot."""
        return f"{self.probe.describe()} not used: {self.reason}"
