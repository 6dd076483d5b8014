"""Level-wise selection of the data files optimizeIndex compacts (pure Python, no JVM)."""
from __future__ import annotations

import pytest

from indexes.covering.compaction import DataFile, level, select


def f(name, bucket, rows, size=None):
    return DataFile(name, bucket, rows, size if size is not None else rows * 10)


def names(groups):
    return [[x.name for x in g] for g in groups]


def test_level_is_floor_log10_of_rows():
    assert [level(r) for r in (0, 1, 9, 10, 99, 100, 999_999, 1_000_000)] == [0, 0, 0, 1, 1, 2, 5, 6]


def test_quick_compacts_a_level_group_once_it_reaches_the_next_level():
    files = [f("a", 0, 60), f("b", 0, 50),          # level 1, 110 rows: reaches level 2
             f("c", 1, 60), f("d", 1, 30),          # level 1, 90 rows: stays
             f("e", 2, 500), f("g", 2, 20)]         # different levels in one bucket
    assert names(select(files, "quick", 10**9)) == [["a", "b"]]


def test_quick_takes_lower_levels_first_within_the_byte_budget():
    files = [f("big1", 0, 600, 6000), f("big2", 0, 500, 5000),     # level 2 group
             f("s1", 1, 60, 600), f("s2", 1, 50, 500),             # level 1 group
             f("s3", 2, 70, 700), f("s4", 2, 40, 400)]             # level 1 group
    assert names(select(files, "quick", 10**9)) == [["s1", "s2"], ["s3", "s4"], ["big1", "big2"]]
    assert names(select(files, "quick", 1200)) == [["s1", "s2"], ["s3", "s4"]]
    assert names(select(files, "quick", 1)) == [["s1", "s2"]]


def test_repeated_quick_selection_converges():
    files = [f(f"x{i}", 0, 30) for i in range(5)]    # 150 rows at level 1
    (group,) = select(files, "quick", 10**9)
    merged = [f("m", 0, sum(x.rows for x in group))]
    assert select(merged, "quick", 10**9) == []


def test_full_compacts_every_bucket_with_more_than_one_file():
    files = [f("a", 0, 5), f("b", 0, 5_000), f("c", 1, 7), f("d", 2, 1), f("e", 2, 1)]
    assert names(select(files, "full", 1)) == [["a", "b"], ["d", "e"]]


def test_delta_files_are_folded_with_every_bucket_at_their_share_level_or_lower():
    files = [DataFile.of(["v__=1/delta-1", None, 1500, 15_000]),
             DataFile.of(["v__=2/delta-2", None, 500, 5_000]),   # 2000 rows: 500 per bucket
             f("a", 0, 300), f("b", 1, 40), f("c", 2, 900),      # levels 2, 1, 2: folded
             f("d", 3, 5_000), f("e", 3, 6_000)]                  # level 3 group: its own
    assert names(select(files, "quick", 10**9, num_buckets=4)) == [
        ["v__=1/delta-1", "v__=2/delta-2"], ["a"], ["b"], ["c"], ["d", "e"]]
    # a budget below the first delta file's bytes: that file alone (375 rows per bucket)
    assert names(select(files, "quick", 1, num_buckets=4)) == [
        ["v__=1/delta-1"], ["a"], ["b"], ["c"]]
    # few delta rows per bucket: the larger files stay
    small = [DataFile.of(["v__=1/delta-1", None, 40, 400]), f("a", 0, 300), f("b", 1, 9)]
    assert names(select(small, "quick", 10**9, num_buckets=4)) == [["v__=1/delta-1"], ["b"]]


def test_quick_takes_delta_files_oldest_first_within_the_byte_budget():
    deltas = [DataFile.of([f"v__={v}/delta-{v}", None, 100, 1_000]) for v in (10, 9, 2, 11)]
    assert names(select(deltas, "quick", 1_500, num_buckets=1)) == [
        ["v__=2/delta-2", "v__=9/delta-9"]]
    assert names(select(deltas, "quick", 10**9, num_buckets=1)) == [
        ["v__=2/delta-2", "v__=9/delta-9", "v__=10/delta-10", "v__=11/delta-11"]]
    # full mode folds them all, whatever the budget
    assert names(select(deltas, "full", 1, num_buckets=1)) == [
        ["v__=2/delta-2", "v__=9/delta-9", "v__=10/delta-10", "v__=11/delta-11"]]


def test_full_with_delta_files_compacts_every_bucket():
    files = [DataFile.of(["v__=1/delta-1", None, 40, 400]), f("a", 0, 300), f("b", 1, 9),
             f("c", 1, 5)]
    assert names(select(files, "full", 1, num_buckets=2)) == [
        ["v__=1/delta-1"], ["a"], ["b", "c"]]


def test_unknown_mode():
    with pytest.raises(ValueError, match="'fast'"):
        select([], "fast", 1)
