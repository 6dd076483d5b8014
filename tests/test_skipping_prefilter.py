"""The data-skipping rule's first pass over many files (indexes/skipping/prefilter.py), without
a JVM: it rules out only files the evaluator rules out too, so pruning keeps exactly the files
the evaluator alone keeps, and it does rule files out."""
from __future__ import annotations

import random
from dataclasses import replace

import pytest

from indexes.skipping import prefilter
from indexes.skipping import values as V
from indexes.skipping.evaluator import may_match
from indexes.skipping.ir import And, Cast, Cmp, In, IsNotNull, Lit, Or, Sketched
from indexes.skipping.match import kept_files
from indexes.fs.memory import MemoryFs
from indexes.skipping.ir import sketched_keys
from indexes.skipping.bloom import HashBloom
from indexes.skipping.stats import ColumnStats, FileStats, SketchSpec, bloom_to_bytes, hashes_of
from indexes.skipping.store import DATASET, FileEntry, decode, encode
from indexes.skipping import table as table_module
from indexes.skipping.table import StatsTable
from tests import test_skipping_evaluator as cases
from tests.helpers import stats_table

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
        table = stats_table({"f": FileEntry(1, 1, stats)})
        passing = prefilter.candidates(pred, table)
        if passing is None:
            continue
        checked += 1
        if not passing[0]:
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
    return table, files


def _conditions(rng):
    return [
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


def _expected(condition, entries, files):
    return [f[0] for f in files
            if f[0] not in entries or (entries[f[0]].size, entries[f[0]].mtime) != (f[1], f[2])
            or may_match(condition, entries[f[0]].stats)]


def test_many_files_keep_exactly_what_the_evaluator_keeps():
    rng = random.Random(7)
    entries, files = many_files(rng)
    table = stats_table(entries)
    conditions = _conditions(rng)
    listing = table.listing(files)
    for condition in conditions:
        assert kept_files(condition, table, listing)[0] == _expected(condition, entries, files), condition
    assert prefilter.tests(conditions[-2]) == [] and prefilter.tests(conditions[-1]) == []
    assert len(kept_files(conditions[0], table, listing)[0]) < len(files) // 10


def _comparable(entry, keys):
    """An entry's statistics with Bloom filters as bytes, of ``keys`` only (a query reads
    the filters of the sketches its filter names)."""
    return entry.size, entry.mtime, entry.stats.rows, {
        k: replace(cs, bloom=bloom_to_bytes(cs.bloom) if cs.bloom is not None and k in keys else None)
        for k, cs in entry.stats.columns.items()}


def _bloom(spec, words, legacy):
    """A filter of ``spec`` holding ``words``: format 2, or format 1 (pybloom_live, as indexes
    built before it were)."""
    if legacy:
        from pybloom_live import BloomFilter

        old = BloomFilter(capacity=spec.bloom_capacity, error_rate=spec.bloom_fpp)
        for w in words:
            old.add(V.bloom_key(w, spec.type))
        return old
    return HashBloom.of_hashes(hashes_of(words, spec.type), spec.bloom_capacity, spec.bloom_fpp)


@pytest.mark.parametrize("sliced,legacy", [(True, False), (False, False), (True, True), (False, True)])
def test_stored_statistics_with_bloom_filters_keep_exactly_what_the_evaluator_keeps(sliced, legacy,
                                                                                   monkeypatch):
    """The same over statistics read back from their Parquet dataset (several files of several
    row groups), Bloom filters on the string sketch (either format), which the first pass
    checks vectorized: bit-sliced, or (over the size kept in memory) read for the files the
    bounds leave."""
    if not sliced:
        monkeypatch.setattr(table_module, "BLOOMS_KEPT_BYTES", 0)
    rng = random.Random(11)
    entries, files = many_files(rng, 600)
    spec_s = SketchSpec(S.key, "string", minmax=True, bloom_capacity=8, bloom_fpp=0.01)
    for e in entries.values():
        cs = e.stats.columns.get(S.key)
        if cs is not None and rng.random() > 0.1:
            e.stats.columns[S.key] = replace(cs, bloom=_bloom(spec_s, {cs.min, cs.max}, legacy))
    specs = [SketchSpec(X.key, "long", minmax=True), spec_s, SketchSpec(D.key, "double", minmax=True)]
    fs, names = MemoryFs(), sorted(entries)
    fs.mkdirs("memory:///v/stats")
    for part, chunk in enumerate([names[:250], names[250:]]):
        fs.write_bytes(f"memory:///v/stats/part-{part}.parquet",
                       encode(specs, {p: entries[p] for p in chunk}))
    table = StatsTable.read(fs, "memory:///v", specs, DATASET)
    stored = decode(specs, encode(specs, entries))      # what the evaluator judges
    listing = table.listing(files)
    conditions = _conditions(rng) + [Cmp("=", S, Lit("k500", "string")),
                                     In(S, (Lit("k001", "string"), Lit("k777", "string")))]
    for condition in conditions:
        kept, found, _ = kept_files(condition, table, listing)
        assert kept == _expected(condition, stored, files), condition
        keys = sketched_keys(condition)
        assert all(repr(_comparable(found[p], keys)) == repr(_comparable(stored[p], keys)) for p in found)
    bloom_only = Cmp("=", S, Lit("k500", "string"))
    mask = prefilter.candidates(bloom_only, table)
    bounds = table.bounds(S.key, "string").passing(prefilter.tests(bloom_only)[0])
    assert mask.sum() < bounds.sum()        # the filters ruled out files the bounds kept
    assert (table.bloom_slices(S.key) is not None) == sliced


def test_the_listing_is_split_once_per_listing():
    entries, files = many_files(random.Random(3), 50)
    table = stats_table(entries)
    first = table.listing(files)
    assert table.listing(files) is first
    assert table.listing([list(f) for f in files]) is not first       # another listing object
    assert set(table.paths(first.judged)) | set(first.unindexed) == {f[0] for f in files}
    assert all(e.mtime == 7 for e in table.entries(first.judged))
