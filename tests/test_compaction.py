"""Level-wise selection of the data files optimizeIndex compacts (pure Python, no JVM)."""
from __future__ import annotations

import pytest

from indexes.covering.compaction import DataFile, folds_without_growth, level, select


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
    # few delta rows per bucket and larger files: folding the delta would write a file into
    # each of the 4 buckets to replace 2 (the delta and "b"), so it waits
    small = [DataFile.of(["v__=1/delta-1", None, 40, 400]), f("a", 0, 300), f("b", 1, 9)]
    assert names(select(small, "quick", 10**9, num_buckets=4)) == []


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


def files_after(files, groups, num_buckets):
    """How many files an index holds, at worst, once ``groups`` are rewritten: one file per
    bucket receiving rows, the delta rows landing in as many other buckets as they can."""
    chosen = [x for g in groups for x in g]
    hit = {x.bucket for x in chosen if x.bucket is not None}
    delta_rows = sum(x.rows for x in chosen if x.bucket is None)
    hit |= set([b for b in range(num_buckets) if b not in hit][:delta_rows])
    return len(files) - len(chosen) + len(hit)


def test_quick_never_leaves_more_files_than_it_found():
    # 8 buckets of one 1000-row file (level 3) and an 80-row delta file: folding the delta's
    # 10 rows per bucket would write 8 files next to the 8 it keeps (9 -> 16); it waits
    buckets = [f(f"b{i}", i, 1000) for i in range(8)]
    delta = [DataFile.of(["v__=1/delta-1", None, 80, 800])]
    assert select(buckets + delta, "quick", 10**9, num_buckets=8) == []
    # enough delta rows to reach the buckets' level: everything is folded, 10 files -> 8
    deltas = delta + [DataFile.of(["v__=2/delta-2", None, 8000, 80_000])]
    groups = select(buckets + deltas, "quick", 10**9, num_buckets=8)
    assert names(groups) == [["v__=1/delta-1", "v__=2/delta-2"]] + [[f"b{i}"] for i in range(8)]
    assert files_after(buckets + deltas, groups, 8) == 8
    # many small delta files fold into the buckets once they outnumber what they write
    many = [DataFile.of([f"v__={v}/delta-{v}", None, 10, 100]) for v in range(1, 9)]
    groups = select(buckets + many, "quick", 10**9, num_buckets=8)
    assert names(groups) == [[x.name for x in many]]
    assert files_after(buckets + many, groups, 8) == 16


def test_quick_file_count_never_grows_on_random_indexes():
    import random

    for seed in range(300):
        check_random_index(random.Random(seed))


def check_random_index(rnd):
    """A random index (buckets of files of random levels, some empty, delta files) whose quick
    selection must not leave more files than it found."""
    num_buckets = rnd.choice([1, 2, 4, 8, 32])
    files = [f(f"b{b}-{j}", b, rnd.choice([1, 5, 40, 300, 2000, 30_000]))
             for b in range(num_buckets) if rnd.random() < 0.8 for j in range(rnd.randint(1, 4))]
    files += [DataFile.of([f"v__={v}/delta-{v}", None, n, n * 10])
              for v, n in enumerate(rnd.choices([0, 3, 50, 700, 9000], k=rnd.randint(0, 5)))]
    budget = rnd.choice([1, 5_000, 10**9])
    groups = select(files, "quick", budget, num_buckets=num_buckets)
    assert files_after(files, groups, num_buckets) <= len(files), (files, groups)


def test_folds_without_growth_bounds_the_files_written():
    delta = [DataFile.of(["v__=1/delta-1", None, 3, 30])]
    # up to 2 + 3 buckets receive rows, to replace 3 files
    assert not folds_without_growth(delta, [f("a", 0, 5), f("b", 1, 5)], 100)
    assert folds_without_growth(delta, [f(x, i % 2, 5) for i, x in enumerate("abcd")], 100)
    assert folds_without_growth(delta, [], 1)                      # one bucket: one file
    assert folds_without_growth(delta, [f("a", 0, 5), f("b", 0, 5)], 2)
    assert folds_without_growth([DataFile.of(["v__=1/delta-1", None, 0, 0])], [], 100)
