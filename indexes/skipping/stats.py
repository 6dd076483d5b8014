"""Per-file statistics of sketched expressions, and how they are accumulated.

A data-skipping index holds, for every source file, one :class:`ColumnStats` per sketched
expression: inclusive min/max bounds (string bounds truncated to a byte budget), the null count,
the exact set of distinct values when it is small, and a Bloom filter. Values are in Catalyst's
internal form (see :mod:`indexes.skipping.values`). :class:`StatsAccumulator` computes them from
values or Arrow arrays, in pieces that merge (a file may be read by several tasks); Bloom
filters (:mod:`indexes.skipping.bloom`, format 2) from the distinct xxhash64 hashes of the
values, which the build's tasks get from the JVM.
"""
from __future__ import annotations

import pickle
from dataclasses import dataclass, field, replace
from typing import Any, Iterable

from indexes.skipping import bloom as B
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
    bloom: Any = None      # a filter of either format (indexes.skipping.bloom)


@dataclass(frozen=True)
class FileStats:
    """Statistics of one file: its row count and one ColumnStats per sketched expression key."""

    rows: int | None
    columns: dict[str, ColumnStats] = field(default_factory=dict)


@dataclass
class Scanned:
    """What the scan job or the footers found: per file its statistics and, for a file of
    several row groups, each row group's (``groups``: by ordinal)."""

    files: dict[str, FileStats]
    groups: dict[str, dict[int, FileStats]]


@dataclass(frozen=True)
class SketchSpec:
    """What to compute for one sketched expression (the union of the sketches declared on it)."""

    key: str
    type: str
    minmax: bool = False
    max_values: int | None = None
    bloom_capacity: int | None = None
    bloom_fpp: float | None = None


def bounded(lo: Any, hi: Any) -> tuple[Any, Any]:
    """Inclusive bounds as stored: strings cut to STRING_BOUND_BYTES (the upper bound raised so
    it stays a bound, or None when no short one exists)."""
    if isinstance(lo, str):
        lo = V.truncate_lower(lo, STRING_BOUND_BYTES)
    if isinstance(hi, str):
        hi = V.truncate_upper(hi, STRING_BOUND_BYTES)
    return lo, hi


def distinct_values(array: Any, spark_type: str) -> list:
    """The distinct non-null values of a pyarrow Array, in normalized internal form."""
    import pyarrow.compute as pc

    if array.null_count == len(array):
        return []
    return [V.normalize(V.from_python(v, spark_type), spark_type)
            for v in pc.unique(array.drop_null()).to_pylist()]


def bloom_to_bytes(bloom: Any) -> bytes:
    """The stored form of a filter (either format)."""
    return B.to_bytes(bloom)


def bloom_from_bytes(data: bytes) -> Any:
    """A stored filter (either format)."""
    return B.from_bytes(data)


def distinct_hashes(hashes: Any) -> Any:
    """The distinct non-null values of an Arrow int64 array of xxhash64 hashes, as sorted
    numpy uint64."""
    import numpy as np

    found = hashes.drop_null() if hashes.null_count else hashes
    return np.unique(found.to_numpy(zero_copy_only=False).view(np.uint64))


def hashes_of(values: Iterable[Any], type_: str) -> Any:
    """The distinct hashes of internal values (:func:`indexes.skipping.bloom.value_hash`) as
    sorted numpy uint64; None when one of them has no known hash."""
    import numpy as np

    found = [B.value_hash(v, type_) for v in values]
    if any(h is None or h == B.UNKNOWN for h in found):
        return None
    return np.unique(np.array(found, dtype=np.uint64))


_NEW_BLOOM = object()   # StatsAccumulator's default: a new filter when the spec asks for one


class StatsAccumulator:
    """Accumulates the statistics of one sketched expression over the rows of one file."""

    def __init__(self, spec: SketchSpec, hashes: Any = _NEW_BLOOM):
        """``hashes``: the distinct hashes of the values the Bloom filter holds so far (sorted
        numpy uint64), or None for no filter (by default none yet when the spec asks for one)."""
        import numpy as np

        self.spec = spec
        self.rows = 0
        self.nulls = 0
        self.lo: Any = None
        self.hi: Any = None
        self.values: set | None = set() if spec.max_values is not None else None
        if hashes is _NEW_BLOOM:
            hashes = np.empty(0, np.uint64) if spec.bloom_capacity else None
        self.hashes: Any = hashes      # merged so far; with _pending (not yet) all there are
        self._pending: list = []
        self._waiting = 0
        self.bloom_overflow = False

    @property
    def bloom(self) -> "B.HashBloom | None":
        """The Bloom filter of the values added (None: not asked for, or too many values)."""
        hashes = self.distinct_hashes
        if hashes is None:
            return None
        return B.HashBloom.of_hashes(hashes, self.spec.bloom_capacity, self.spec.bloom_fpp)

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
        self._add_present(present)
        self._add_hashes(hashes_of(set(present), self.spec.type) if self.hashes is not None else None)

    @property
    def needs_values(self) -> bool:
        """Whether the non-null values matter for more than the Bloom filter (bounds, value
        list), not only how many rows and nulls there were."""
        return self.spec.minmax or self.spec.max_values is not None

    def add_arrow(self, array: Any, hashes: Any = None) -> None:
        """Adds the values of a pyarrow Array (what Spark's ``mapInArrow`` hands over) and, for
        the Bloom filter, their hashes (an Arrow int64 array, null where the value is; hashed
        here when not given)."""
        distinct = distinct_values(array, self.spec.type) if self.needs_values or (
            hashes is None and self.hashes is not None) else []
        self.add_distinct(len(array), array.null_count, distinct,
                          distinct_hashes(hashes) if hashes is not None else None)

    def add_distinct(self, rows: int, nulls: int, distinct: list, hashes: Any = None) -> None:
        """Adds ``rows`` rows, ``nulls`` of them null, whose other values are ``distinct``
        (as :func:`distinct_values` gives them) and hash to ``hashes`` (as
        :func:`distinct_hashes` gives them; None: computed from ``distinct``)."""
        self.rows += rows
        self.nulls += nulls
        self._add_present(distinct)
        if self.hashes is not None:
            self._add_hashes(hashes if hashes is not None else hashes_of(distinct, self.spec.type))

    def _add_hashes(self, found: Any) -> None:
        """Adds distinct hashes to the Bloom filter's (None: some value has no known hash, so
        no filter can be trusted). They are merged when those pending could be more than the
        filter's capacity (then it is dropped if they are), and when the filter is made."""
        if self.hashes is None:
            return
        if found is None:
            self.hashes, self._pending = None, []
            return
        if len(found):
            self._pending.append(found)
            self._waiting += len(found)
        if len(self.hashes) + self._waiting > self.spec.bloom_capacity:
            self._merge_pending()

    def _merge_pending(self) -> None:
        import numpy as np

        if self._pending and self.hashes is not None:
            self.hashes = np.unique(np.concatenate([self.hashes, *self._pending]))
        self._pending, self._waiting = [], 0
        if self.hashes is not None and len(self.hashes) > self.spec.bloom_capacity:
            self.hashes, self.bloom_overflow = None, True   # more values than it was sized for

    @property
    def distinct_hashes(self) -> Any:
        """The distinct hashes added (sorted numpy uint64), None when there is no filter."""
        self._merge_pending()
        return self.hashes

    def _add_present(self, present: list) -> None:
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
        other_hashes = other.distinct_hashes
        if other_hashes is None:
            self.hashes, self._pending = None, []
        else:
            self._add_hashes(other_hashes)
        self.bloom_overflow = self.bloom_overflow or other.bloom_overflow or (
            self.spec.bloom_capacity is not None and self.hashes is None)

    def result(self) -> ColumnStats:
        """The statistics, with string bounds truncated to STRING_BOUND_BYTES."""
        lo, hi = bounded(self.lo, self.hi)
        return ColumnStats(self.spec.type, lo, hi, self.nulls,
                           frozenset(self.values) if self.values is not None else None,
                           self.bloom)

    def to_bytes(self) -> bytes:
        """A compact picklable form, to send a task's partial statistics to the driver."""
        hashes = self.distinct_hashes
        hashes = hashes.tobytes() if hashes is not None else None
        return pickle.dumps((self.rows, self.nulls, self.lo, self.hi, self.values, hashes,
                             self.bloom_overflow, self.spec.bloom_capacity))

    @classmethod
    def from_bytes(cls, spec: SketchSpec, data: bytes) -> "StatsAccumulator":
        """The accumulator :meth:`to_bytes` gave, its filter sized as it was (a row group's
        for the row group's rows)."""
        import numpy as np

        rows, nulls, lo, hi, values, hashes, overflow, capacity = pickle.loads(data)
        if hashes is not None:
            spec = replace(spec, bloom_capacity=capacity)
        acc = cls(spec, np.frombuffer(hashes, np.uint64) if hashes is not None else None)
        acc.rows, acc.nulls, acc.lo, acc.hi, acc.values = rows, nulls, lo, hi, values
        acc.bloom_overflow = overflow
        return acc
