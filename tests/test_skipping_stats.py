"""Accumulating per-file statistics (no JVM): Bloom filters sized by distinct values across
Arrow batches and tasks, value lists, string bounds."""
from __future__ import annotations

import pyarrow as pa

from indexes.skipping import bloom as B
from indexes.skipping.build import FILE_BLOOM, scan_partition, fold_partials
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
    assert all(B.may_hold(stats.bloom, v, "string") for v in values)
    assert stats.bloom.count == 900       # exact: the distinct hashes are merged


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


def _scan(specs, batches, layouts):
    """The scan job's task function over Arrow batches (file, row index, values...), folded
    as the driver does."""
    out = list(scan_partition(specs, layouts.get)(iter(batches)))[0]
    partials = list(zip(*[out.column(c).to_pylist() for c in range(4)]))
    return partials, fold_partials(specs, partials, set(layouts))


def test_a_file_of_many_row_groups_sends_its_filter_once_and_row_groups_small_ones():
    spec = SketchSpec("k", "string", minmax=True, bloom_capacity=5000, bloom_fpp=0.01)
    values = [f"t{i:05d}" for i in range(4000)]
    starts = list(range(0, 4000, 100))           # 40 row groups of 100 rows
    bounds = starts + [4000]
    batch = pa.RecordBatch.from_arrays(
        [pa.array(["f"] * 4000), pa.array(range(4000), pa.int64()), pa.array(values)],
        names=["file", "row", "s0"])
    halves = [batch.slice(0, 1700), batch.slice(1700)]   # two tasks read the file
    partials = []
    for half in halves:
        part, _ = _scan([spec], [half], {"f": bounds})
        partials += part
    blooms = [p for p in partials if p[1] == FILE_BLOOM]
    assert len(blooms) == 2                              # one per task, not one per row group
    one_bloom = max(len(p[3]) for p in blooms)
    # the row groups' filters are sized for their 100 rows: together about one file's
    assert sum(len(p[3]) for p in partials if p[1] != FILE_BLOOM and p[2] >= 0) < 2 * one_bloom
    scanned = fold_partials([spec], [(f"/{p[0]}",) + tuple(p[1:]) for p in partials], {"/f"})
    whole = StatsAccumulator(spec)
    whole.add_arrow(pa.array(values))
    stats, expected = scanned.files["/f"].columns["k"], whole.result()
    assert (stats.min, stats.max, stats.null_count) == (expected.min, expected.max, 0)
    assert all(B.may_hold(stats.bloom, v, "string") for v in values)
    assert scanned.files["/f"].rows == 4000
    groups = scanned.groups["/f"]
    assert sorted(groups) == list(range(40))
    for start in starts:
        bloom = groups[start // 100].columns["k"].bloom
        assert bloom.capacity == 100
        assert all(B.may_hold(bloom, v, "string") for v in values[start:start + 100])
        assert sum(B.may_hold(bloom, v, "string") for v in values) < 100 + 0.03 * 3900
    assert [(g.columns["k"].min, g.columns["k"].max, g.rows) for _, g in sorted(groups.items())] == [
        (values[s], values[s + 99], 100) for s in starts]


def test_a_file_bloom_overflowing_in_one_task_has_no_filter():
    spec = SketchSpec("k", "string", max_values=10, bloom_capacity=300, bloom_fpp=0.01)
    batches = [pa.RecordBatch.from_arrays(
        [pa.array(["f"] * 200), pa.array([f"v{i + start}" for i in range(200)])], names=["file", "s0"])
        for start in (0, 200)]
    _, scanned = _scan([spec], batches, {})
    stats = scanned.files["f"].columns["k"]
    assert stats.bloom is None and stats.values is None and stats.null_count == 0
    assert scanned.files["f"].rows == 400 and scanned.groups == {}
