"""The data-skipping rule's first pass over many files (indexes/skipping/prefilter.py), without
a JVM: it rules out only files the evaluator rules out too, so pruning keeps exactly the files
the evaluator alone keeps, and it does rule files out."""
from __future__ import annotations

import random

from indexes.skipping import prefilter
from indexes.skipping.evaluator import may_match
from indexes.skipping.ir import And, Cast, Cmp, In, IsNotNull, Lit, Or, Sketched
from indexes.skipping.match import kept_files
from indexes.skipping.stats import ColumnStats, FileStats
from indexes.skipping.store import FileEntry
from indexes.skipping.table import StatsTable
from tests import test_skipping_evaluator as cases

X = Sketched('col("x")', "long")
S = Sketched('col("s")', "string")
D = Sketched('col("d")', "double")


def test_rules_out_only_what_the_evaluator_rules_out_on_random_files_and_filters():
    """The evaluator's property-test generator: random files of awkward values (NaN, ±0.0,
    extremes, truncated string bounds, missing statistics) and random filters in ANSI mode
    and not."""
    rng = random.Random(20261124)
    checked = ruled_out = 0
    for _ in range(20_000):
        pred, stats, _rows, _ref = cases.one_case(rng)
        table = StatsTable({"f": FileEntry(1, 1, stats)})
        passing = prefilter.candidates(pred, table)
        if passing is None:
            continue
        checked += 1
        if "f" not in passing:
            ruled_out += 1
            assert not may_match(pred, stats), f"ruled out but the evaluator keeps it:\n{pred}\n{stats}"
    assert checked >= 3_000 and ruled_out >= 500, (checked, ruled_out)


def many_files(rng, n=400):
    """``n`` files with long, string and double statistics, some missing or partial."""
    table, files = {}, []
    for i in range(n):
        lo = rng.randint(0, 10_000)
        columns = {}
        if rng.random() > 0.05:
            columns[X.key] = ColumnStats("long", lo, lo + rng.randint(0, 50),
                                         null_count=rng.choice([0, 1]))
        if rng.random() > 0.05:
            words = sorted(f"k{rng.randint(0, 999):03d}" for _ in range(2))
            columns[S.key] = ColumnStats("string", *words, null_count=0)
        if rng.random() > 0.05:
            bounds = sorted([rng.choice([-0.0, 0.0, 1.5, -2.5, float("inf")]),
                             rng.choice([0.0, 3.0, float("nan")])], key=lambda v: (v != v, v))
            columns[D.key] = ColumnStats("double", bounds[0], None if rng.random() < 0.05 else bounds[1],
                                         null_count=0)
        path = f"file:/lake/part-{i:05d}.parquet"
        size, mtime = 1000 + i, 7
        files.append([path, size, mtime])
        if rng.random() > 0.03:            # a few files the index does not know
            table[path] = FileEntry(size, mtime if rng.random() > 0.02 else 8,
                                    FileStats(rng.choice([None, 10, 10, 0]), columns))
    rng.shuffle(files)                     # a listing in no particular order
    return StatsTable(table), files


def test_many_files_keep_exactly_what_the_evaluator_keeps():
    rng = random.Random(7)
    table, files = many_files(rng)
    conditions = [
        Cmp("=", X, Lit(5_000, "long")),
        And(IsNotNull(X), Cmp("=", X, Lit(rng.randint(0, 10_000), "long"))),
        Cmp("<", Lit(9_990, "long"), X),
        And(Cmp(">=", X, Lit(2_000, "long")), Cmp("<=", X, Lit(2_100, "long"))),
        In(X, (Lit(17, "long"), Lit(None, "long"), Lit(8_000, "long"))),
        Cmp("<=>", S, Lit("k500", "string")),
        And(Cmp(">", S, Lit("k990", "string")), Cmp("=", D, Lit(-0.0, "double"))),
        Cmp("=", D, Lit(float("nan"), "double")),
        Cmp(">", D, Lit(2.0, "double")),
        Or(Cmp("=", X, Lit(1, "long")), Cmp("=", X, Lit(2, "long"))),      # no first pass
        And(Cmp("=", Cast(S, "string", "long", "UTC", True), Lit(3, "long")),  # may raise
            Cmp("=", X, Lit(3, "long"))),
    ]
    listing = table.listing(files)
    for condition in conditions:
        expected = [f[0] for f in files
                    if f[0] not in listing.judged or may_match(condition, listing.judged[f[0]].stats)]
        assert kept_files(condition, table, listing) == expected, condition
    assert prefilter.tests(conditions[-2]) == [] and prefilter.tests(conditions[-1]) == []
    assert len(kept_files(conditions[0], table, listing)) < len(files) // 10


def test_the_listing_is_split_once_per_listing():
    table, files = many_files(random.Random(3), 50)
    first = table.listing(files)
    assert table.listing(files) is first
    assert table.listing([list(f) for f in files]) is not first       # another listing object
    assert set(first.judged) | set(first.unindexed) == {f[0] for f in files}
    assert all(table[p].mtime == 7 for p in first.judged)
