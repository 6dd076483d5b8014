"""Accumulating per-file statistics (no JVM): Bloom filters sized by distinct values across
Arrow batches and tasks, value lists, string bounds."""
from __future__ import annotations

import pyarrow as pa

from indexes.skipping import values as V
from indexes.skipping.stats import STRING_BOUND_BYTES, SketchSpec, StatsAccumulator


def bloom_spec(capacity: int) -> SketchSpec:
    return SketchSpec("k", "string", bloom_capacity=capacity, bloom_fpp=0.01)


def test_bloom_counts_each_value_once_across_batches_and_tasks():
    values = [f"s{i}" for i in range(900)]
    first, second = StatsAccumulator(bloom_spec(1000)), StatsAccumulator(bloom_spec(1000))
    for _ in range(5):                        # the same values again in every Arrow batch
        first.add_arrow(pa.array(values[:600]))
    second.add_arrow(pa.array(values[300:]))  # another task over the same file
    first.merge(second)
    stats = first.result()
    assert stats.bloom is not None
    assert all(V.bloom_key(v, "string") in stats.bloom for v in values)
    assert 850 <= stats.bloom.count <= 1000


def test_bloom_dropped_when_a_file_has_more_values_than_its_capacity():
    acc = StatsAccumulator(bloom_spec(100))
    acc.add_arrow(pa.array([f"v{i}" for i in range(500)]))
    assert acc.result().bloom is None and acc.bloom_overflow


def test_value_list_and_bounds_survive_serialization():
    spec = SketchSpec("k", "string", minmax=True, max_values=3)
    acc = StatsAccumulator(spec)
    long_value = "z" * (STRING_BOUND_BYTES + 10)
    acc.add_values(["b", None, long_value, "b"])
    stats = StatsAccumulator.from_bytes(spec, acc.to_bytes()).result()
    assert stats.values == frozenset({"b", long_value}) and stats.null_count == 1
    assert stats.min == "b"
    assert stats.max > long_value and len(stats.max.encode()) <= STRING_BOUND_BYTES   # a cut bound
    acc.add_values(["c", "d"])
    assert acc.result().values is None      # more than maxValues: unknown
