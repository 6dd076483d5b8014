"""Which data files of a covering index ``optimizeIndex`` compacts (pure Python).

Level-wise selection, after qbeast's continuous optimization: a file's level is
``floor(log10(rows))``. In quick mode the files of one bucket and one level form a group, which
qualifies when it has more than one file and together they reach the next level (at least
``10 ** (level + 1)`` rows), so each compaction lifts at least one file a level and repeated
optimizations converge instead of rewriting the same files. Groups are taken lowest level
first until ``bytes_per_iteration`` is reached. Full mode compacts every bucket that has more
than one file. Each bucket's selected files become one sorted file.

Delta files (written by an incremental refresh, not bucketed: their rows may belong to any
bucket) come first, as a group of their own: folding them into the buckets is what lets
bucketed reads drop the union they need. Quick mode takes them oldest first while the bytes
taken are under ``bytes_per_iteration`` (at least one; the rest wait for the next call). Each
bucket's share of the taken delta rows makes a new file at some level, so the files of every
bucket at that level or lower are folded with them. Quick mode never leaves more files than
it found: the delta group is taken only when the files it writes (one per bucket receiving
rows) cannot outnumber the files it replaces; otherwise the delta files wait until enough of
them reach the level of the buckets' files (or a full optimize). Full mode folds every delta
file and every bucket's files, so each bucket ends as one file.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

from indexes.layout import data_version

MODES = ("quick", "full")


@dataclass(frozen=True)
class DataFile:
    """One data file of an index version, as its content records it."""

    name: str
    bucket: int | None   # None for a delta file
    rows: int
    bytes: int

    @property
    def level(self) -> int:
        return level(self.rows)

    @staticmethod
    def of(record: Iterable) -> "DataFile":
        """From the ``[name, bucket, rows, bytes]`` lists of an index's content."""
        name, bucket, rows, size = record
        return DataFile(str(name), None if bucket is None else int(bucket), int(rows), int(size))


def level(rows: int) -> int:
    """``floor(log10(rows))``; an empty file is level 0."""
    return int(math.floor(math.log10(rows))) if rows > 0 else 0


def select(files: list[DataFile], mode: str, bytes_per_iteration: int,
           num_buckets: int = 1) -> list[list[DataFile]]:
    """The groups of files to compact, each within one bucket or all the delta files (see the
    module docstring); ``num_buckets`` is the index's bucket count, over which delta rows
    spread."""
    if mode not in MODES:
        raise ValueError(f"optimize mode {mode!r} is not one of {', '.join(MODES)}")
    deltas = sorted((f for f in files if f.bucket is None),
                    key=lambda f: (data_version(f.name.split("/", 1)[0]), f.name))
    bucketed = [f for f in files if f.bucket is not None]
    if mode == "full":
        return ([deltas] if deltas else []) + _by_bucket(bucketed, None if deltas else 2)
    deltas = _oldest_within(deltas, bytes_per_iteration)
    # each bucket's share of the delta rows becomes a file at this level: lower and equal
    # levels of every bucket are folded with it, as one group would be
    share = sum(f.rows for f in deltas) // max(1, num_buckets)
    folded = [f for f in bucketed if deltas and f.level <= level(share)]
    if deltas and not folds_without_growth(deltas, folded, num_buckets):
        deltas, folded = [], []
    chosen = ([deltas] if deltas else []) + _by_bucket(folded, 1)
    budget = sum(f.bytes for g in chosen for f in g)
    folded_names = {f.name for f in folded}
    groups: dict[tuple[int, int], list[DataFile]] = {}
    for f in bucketed:
        if f.name not in folded_names:
            groups.setdefault((f.level, f.bucket), []).append(f)
    for (lvl, _), group in sorted(groups.items()):
        if len(group) < 2 or sum(f.rows for f in group) < 10 ** (lvl + 1):
            continue
        if budget >= bytes_per_iteration:
            break
        chosen.append(sorted(group, key=lambda f: f.name))
        budget += sum(f.bytes for f in group)
    return chosen


def folds_without_growth(deltas: list[DataFile], folded: list[DataFile],
                         num_buckets: int) -> bool:
    """Whether rewriting ``deltas`` and the bucket files ``folded`` into buckets surely writes
    no more files than it replaces: it writes one file per bucket receiving rows, at most the
    buckets of ``folded`` plus one per delta row, and at most ``num_buckets``."""
    buckets = {f.bucket for f in folded}
    written = min(max(1, num_buckets), len(buckets) + sum(f.rows for f in deltas))
    return written <= len(deltas) + len(folded)


def _oldest_within(deltas: list[DataFile], bytes_per_iteration: int) -> list[DataFile]:
    """The first of ``deltas`` taken while the bytes taken are under the budget (at least one)."""
    taken: list[DataFile] = []
    for f in deltas:
        if taken and sum(t.bytes for t in taken) >= bytes_per_iteration:
            break
        taken.append(f)
    return taken


def _by_bucket(files: list[DataFile], at_least: int | None) -> list[list[DataFile]]:
    """``files`` grouped per bucket, by name, keeping buckets of ``at_least`` files (all buckets
    with None)."""
    by_bucket: dict[int, list[DataFile]] = {}
    for f in files:
        by_bucket.setdefault(f.bucket, []).append(f)
    return [sorted(fs, key=lambda f: f.name) for _, fs in sorted(by_bucket.items())
            if at_least is None or len(fs) >= at_least]
