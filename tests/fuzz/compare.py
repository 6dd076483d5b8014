"""Comparing two query answers as multisets of rows: NaN equals NaN and -0.0 equals 0.0 (as
Spark compares them), everything else exactly."""
from __future__ import annotations

from collections import Counter

NAN = ("NaN",)


def canonical(value):
    """``value`` (a Row, list, dict or scalar) as a hashable value in which equal answers are
    equal: NaN as a marker, -0.0 as 0.0."""
    if isinstance(value, float):
        if value != value:
            return NAN
        return 0.0 if value == 0.0 else value
    if isinstance(value, (tuple, list)):
        return tuple(canonical(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((canonical(k), canonical(v)) for k, v in value.items()))
    return value


def multiset(rows) -> Counter:
    """The rows as a multiset of canonical tuples."""
    return Counter(canonical(tuple(r)) for r in rows)


def difference(got, want) -> str | None:
    """None when ``got`` and ``want`` hold the same rows, else a short description."""
    a, b = multiset(got), multiset(want)
    if a == b:
        return None
    extra, missing = a - b, b - a
    return (f"{sum(a.values())} rows vs vanilla's {sum(b.values())}; "
            f"extra {list(extra.elements())[:3]}, missing {list(missing.elements())[:3]}")
