"""The evaluator's verdicts over many files at once (indexes/skipping/vectorized.py), without a
JVM: on random filters over random statistics (the evaluator's own property-test generator),
every file it decides gets exactly the per-file evaluator's verdict, over statistics in memory
and read back from their Parquet dataset, and it decides most files."""
from __future__ import annotations

import dataclasses
import random

from indexes.fs.memory import MemoryFs
from indexes.skipping import vectorized
from indexes.skipping.evaluator import may_match
from indexes.skipping.ir import Cmp, Lit, Sketched
from indexes.skipping.stats import ColumnStats, FileStats, SketchSpec
from indexes.skipping.match import kept_files, kept_row_groups, read_in_part
from indexes.skipping.store import DATASET, FileEntry, RowGroup, decode, encode
from indexes.skipping.table import StatsTable
from tests import test_skipping_evaluator as cases
from tests.helpers import stats_table


def _sketched(node, out):
    if isinstance(node, Sketched):
        out.setdefault(node.key, node.type)
    if isinstance(node, tuple):
        for n in node:
            _sketched(n, out)
    elif dataclasses.is_dataclass(node):
        for f in dataclasses.fields(node):
            _sketched(getattr(node, f.name), out)
    return out


def _stats(rng, columns):
    rows = rng.choice([0, 1, 3, 6, 6, 6])
    found = {}
    for key, t in columns.items():
        if t == "unknown" or rng.random() < 0.08:
            continue
        anchor = cases.anchor_of(t, rng)
        pool = [cases.fresh(t, rng, anchor) for _ in range(rng.randint(1, 4))]
        null_rate = rng.choice([0.0, 0.0, 0.3, 1.0])
        found[key] = cases.build_stats(
            [None if rng.random() < null_rate else rng.choice(pool) for _ in range(rows)], t, rng)
    return FileStats(None if rng.random() < 0.05 else rows, found)


def _files(rng, pred, stats, n, groups=False):
    """``stats`` and ``n`` more random files over the expressions ``pred`` reads (some with
    random row groups when ``groups``)."""
    columns = _sketched(pred, {})
    files = {"f0": FileEntry(1, 1, stats)}
    for i in range(1, n + 1):
        parts = rng.choice([0, 0, 2, 3]) if groups else 0
        files[f"f{i:02d}"] = FileEntry(100, 1, _stats(rng, columns), tuple(
            RowGroup(10 * g, 10 * g + 10, _stats(rng, columns)) for g in range(parts)))
    return files


def _check(pred, table, entries):
    import numpy as np

    files = np.arange(len(entries))
    keep, decided = vectorized.verdicts(pred, table, files)
    for f, e in zip(files.tolist(), entries):
        if decided[f]:
            assert keep[f] == may_match(pred, e.stats), f"{pred}\n{e.stats}"
    return int(decided.sum()), len(entries)


def test_decides_as_the_evaluator_on_random_filters_and_statistics():
    rng = random.Random(20261128)
    decided = total = 0
    for _ in range(1_500):
        pred, stats, _rows, _ref = cases.one_case(rng)
        entries = _files(rng, pred, stats, 12)
        d, n = _check(pred, stats_table(entries), list(entries.values()))
        decided, total = decided + d, total + n
    assert decided > 0.4 * total, (decided, total)


def test_decides_as_the_evaluator_over_statistics_read_back():
    """The same over statistics written and read back as the build's dataset (Arrow types of
    every sketched type: decimals, floats, dates, binaries; value lists and Bloom filters),
    and the files and row groups pruning reads are those the evaluator alone reads."""
    rng = random.Random(5)
    decided = total = read_in_groups = 0
    for case in range(200):
        pred, stats, _rows, _ref = cases.one_case(rng)
        entries = _files(rng, pred, stats, 20, groups=True)
        specs = [SketchSpec(k, t, minmax=True, max_values=6, bloom_capacity=16, bloom_fpp=0.05)
                 for k, t in _sketched(pred, {}).items() if t != "unknown"]
        fs = MemoryFs()
        fs.mkdirs(f"memory:///v{case}/stats")
        fs.write_bytes(f"memory:///v{case}/stats/part-0.parquet", encode(specs, entries))
        table = StatsTable.read(fs, f"memory:///v{case}", specs, DATASET)
        stored = decode(specs, encode(specs, entries))
        d, n = _check(pred, table, [stored[p] for p in sorted(stored)])
        decided, total = decided + d, total + n
        listed = [[p, e.size, e.mtime] for p, e in sorted(entries.items())]
        kept, found, sizes = kept_files(pred, table, table.listing(listed))
        got = read_in_part(kept, kept_row_groups(pred, found, kept), sizes)
        judged = [p for p, _, _ in listed if may_match(pred, stored[p].stats)]
        assert _spans(got) == _spans(read_in_part(judged, kept_row_groups(pred, stored, judged),
                                                  {p: e.size for p, e in stored.items()})), pred
        read_in_groups += len(got[1])
    assert decided > 0.4 * total, (decided, total)
    assert read_in_groups > 50, read_in_groups


def _spans(pruned):
    kept, groups, size = pruned
    return kept, {p: [(g.start, g.end) for g in gs] for p, gs in groups.items()}, size


def test_each_sketch_is_read_when_a_query_first_names_it():
    """Row groups judged for a query on one sketch, then a query on another: its statistics
    are read then (for the files and for their row groups) and prune both."""
    specs = [SketchSpec('col("x")', "long", minmax=True), SketchSpec('col("y")', "long", minmax=True)]

    def stats(lo, hi):
        return FileStats(5, {s.key: ColumnStats("long", lo, hi * 2 - lo, 0) for s in specs[:1]}
                         | {specs[1].key: ColumnStats("long", -hi, -lo, 0)})
    entries = {f"f{i}": FileEntry(100, 1, stats(i, i + 10), (RowGroup(0, 50, stats(i, i + 5)),
                                                             RowGroup(50, 100, stats(i + 6, i + 10))))
               for i in range(10)}
    fs = MemoryFs()
    fs.mkdirs("memory:///v/stats")
    fs.write_bytes("memory:///v/stats/part-0.parquet", encode(specs, entries))
    table = StatsTable.read(fs, "memory:///v", specs, DATASET)
    listing = table.listing([[p, 100, 1] for p in sorted(entries)])
    for spec, value in ((specs[0], 3), (specs[1], -17)):
        condition = Cmp("=", Sketched(spec.key, "long"), Lit(value, "long"))
        kept, found, sizes = kept_files(condition, table, listing)
        got = read_in_part(kept, kept_row_groups(condition, found, kept), sizes)
        judged = [p for p in sorted(entries) if may_match(condition, entries[p].stats)]
        assert _spans(got) == _spans(read_in_part(judged, kept_row_groups(condition, entries, judged),
                                                  {p: 100 for p in entries}))
        assert 0 < len(got[0]) < len(entries) and got[1]
