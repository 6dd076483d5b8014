"""Per-file statistics of sketched expressions, and how they are accumulated.

A data-skipping index holds, for every source file, one :class:`ColumnStats` per sketched
expression: inclusive min/max bounds (string bounds truncated to a byte budget), the null count,
the exact set of distinct values when it is small, and a Bloom filter. Values are in Catalyst's
internal form (see :mod:`indexes.skipping.values`). :class:`StatsAccumulator` computes them from
values or Arrow arrays, in pieces that merge (a file may be read by several tasks).
"""
from __future__ import annotations

import io
import math
import pickle
from dataclasses import dataclass, field
from typing import Any, Iterable

from pybloom_live import BloomFilter

from indexes.skipping import values as V

# Strings longer than this (in UTF-8 bytes) are stored as truncated bounds.
STRING_BOUND_BYTES = 64


@dataclass(frozen=True)
class ColumnStats:
    """Statistics of one sketched expression over one file (see the module docstring).

    ``min``/``max`` None: no bound known. ``values`` None: unknown or too many. ``bloom`` None:
    no Bloom filter (not asked for, or the file held more distinct values than it was sized for).
    """

    type: str
    min: Any = None
    max: Any = None
    null_count: int | None = None
    values: frozenset | None = None
    bloom: Any = None


@dataclass(frozen=True)
class FileStats:
    """Statistics of one file: its row count and one ColumnStats per sketched expression key."""

    rows: int | None
    columns: dict[str, ColumnStats] = field(default_factory=dict)


@dataclass(frozen=True)
class SketchSpec:
    """What to compute for one sketched expression (the union of the sketches declared on it)."""

    key: str
    type: str
    minmax: bool = False
    max_values: int | None = None
    bloom_capacity: int | None = None
    bloom_fpp: float | None = None

    def new_bloom(self) -> BloomFilter:
        return BloomFilter(capacity=self.bloom_capacity, error_rate=self.bloom_fpp)


def bounded(lo: Any, hi: Any) -> tuple[Any, Any]:
    """Inclusive bounds as stored: strings cut to STRING_BOUND_BYTES (the upper bound raised so
    it stays a bound, or None when no short one exists)."""
    if isinstance(lo, str):
        lo = V.truncate_lower(lo, STRING_BOUND_BYTES)
    if isinstance(hi, str):
        hi = V.truncate_upper(hi, STRING_BOUND_BYTES)
    return lo, hi


def estimated_count(bloom: BloomFilter) -> int:
    """The number of distinct values a filter holds, estimated from its set bits (every value
    sets one bit per slice): what two tasks' filters of one file hold together."""
    m = bloom.bits_per_slice
    bits = bloom.bitarray
    counts = [bits[i * m:(i + 1) * m].count() for i in range(bloom.num_slices)]
    filled = max(counts)
    if filled >= m:
        return bloom.capacity + 1
    return int(math.ceil(-m * math.log1p(-filled / m)))


def distinct_values(array: Any, spark_type: str) -> list:
    """The distinct non-null values of a pyarrow Array, in normalized internal form."""
    import pyarrow.compute as pc

    if array.null_count == len(array):
        return []
    return [V.normalize(V.from_python(v, spark_type), spark_type)
            for v in pc.unique(array.drop_null()).to_pylist()]


def bloom_to_bytes(bloom: BloomFilter) -> bytes:
    out = io.BytesIO()
    bloom.tofile(out)
    return out.getvalue()


def bloom_from_bytes(data: bytes) -> BloomFilter:
    return BloomFilter.fromfile(io.BytesIO(data))


_NEW_BLOOM = object()   # StatsAccumulator's default: a new filter when the spec asks for one


class StatsAccumulator:
    """Accumulates the statistics of one sketched expression over the rows of one file."""

    def __init__(self, spec: SketchSpec, bloom: Any = _NEW_BLOOM):
        """``bloom``: the filter to add to, or None (by default a new one when the spec asks
        for it)."""
        self.spec = spec
        self.rows = 0
        self.nulls = 0
        self.lo: Any = None
        self.hi: Any = None
        self.values: set | None = set() if spec.max_values is not None else None
        if bloom is _NEW_BLOOM:
            bloom = spec.new_bloom() if spec.bloom_capacity else None
        self.bloom: BloomFilter | None = bloom
        self.bloom_overflow = False

    # --- adding ---------------------------------------------------------------------------
    def add_values(self, values: Iterable[Any]) -> None:
        """Adds internal-form values (None is null)."""
        present = []
        for v in values:
            self.rows += 1
            if v is None:
                self.nulls += 1
            else:
                present.append(V.normalize(v, self.spec.type))
        self._add_present(present, distinct=False)

    @property
    def needs_values(self) -> bool:
        """Whether the non-null values matter (not only how many rows and nulls there were)."""
        spec = self.spec
        return spec.minmax or spec.max_values is not None or spec.bloom_capacity is not None

    def add_arrow(self, array: Any) -> None:
        """Adds the values of a pyarrow Array (what Spark's ``mapInArrow`` hands over)."""
        self.add_distinct(len(array), array.null_count,
                          distinct_values(array, self.spec.type) if self.needs_values else [])

    def add_distinct(self, rows: int, nulls: int, distinct: list) -> None:
        """Adds ``rows`` rows, ``nulls`` of them null, whose other values are ``distinct``
        (as :func:`distinct_values` gives them)."""
        self.rows += rows
        self.nulls += nulls
        self._add_present(distinct, distinct=True)

    def _add_present(self, present: list, distinct: bool) -> None:
        spec = self.spec
        if not present:
            return
        if spec.minmax:
            key = lambda v: V.order_key(v, spec.type)  # noqa: E731
            lo, hi = min(present, key=key), max(present, key=key)
            if self.lo is None or key(lo) < key(self.lo):
                self.lo = lo
            if self.hi is None or key(hi) > key(self.hi):
                self.hi = hi
        if self.values is not None:
            self.values.update(present)
            if len(self.values) > spec.max_values:
                self.values = None
        if self.bloom is not None:
            try:   # counts only values not seen before (in this task), up to the capacity
                for v in (present if distinct else set(present)):
                    self.bloom.add(V.bloom_key(v, spec.type))
            except IndexError:   # more distinct values than the filter was sized for
                self.bloom, self.bloom_overflow = None, True

    # --- merging and results ----------------------------------------------------------------
    def merge(self, other: "StatsAccumulator") -> None:
        """Folds in the statistics another task computed over other rows of the same file."""
        key = lambda v: V.order_key(v, self.spec.type)  # noqa: E731
        self.rows += other.rows
        self.nulls += other.nulls
        if other.lo is not None and (self.lo is None or key(other.lo) < key(self.lo)):
            self.lo = other.lo
        if other.hi is not None and (self.hi is None or key(other.hi) > key(self.hi)):
            self.hi = other.hi
        if self.values is not None:
            if other.values is None:
                self.values = None
            else:
                self.values |= other.values
                if len(self.values) > self.spec.max_values:
                    self.values = None
        if self.bloom is not None and other.bloom is not None:
            merged = self.bloom.union(other.bloom)
            merged.count = estimated_count(merged)
            self.bloom = merged if merged.count <= merged.capacity else None
        else:
            self.bloom = None
        self.bloom_overflow = self.bloom_overflow or other.bloom_overflow or (
            self.spec.bloom_capacity is not None and self.bloom is None)

    def result(self) -> ColumnStats:
        """The statistics, with string bounds truncated to STRING_BOUND_BYTES."""
        lo, hi = bounded(self.lo, self.hi)
        return ColumnStats(self.spec.type, lo, hi, self.nulls,
                           frozenset(self.values) if self.values is not None else None,
                           self.bloom)

    def to_bytes(self) -> bytes:
        """A compact picklable form, to send a task's partial statistics to the driver."""
        bloom = bloom_to_bytes(self.bloom) if self.bloom is not None else None
        return pickle.dumps((self.rows, self.nulls, self.lo, self.hi, self.values, bloom,
                             self.bloom_overflow))

    @classmethod
    def from_bytes(cls, spec: SketchSpec, data: bytes) -> "StatsAccumulator":
        rows, nulls, lo, hi, values, bloom, overflow = pickle.loads(data)
        acc = cls(spec, bloom_from_bytes(bloom) if bloom is not None else None)
        acc.rows, acc.nulls, acc.lo, acc.hi, acc.values = rows, nulls, lo, hi, values
        acc.bloom_overflow = overflow
        return acc
