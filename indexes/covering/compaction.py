"""Which data files of a covering index ``optimizeIndex`` compacts (pure Python).

Level-wise selection, after qbeast's continuous optimization: a file's level is
``floor(log10(rows))``. In quick mode the files of one bucket and one level form a group, which
qualifies when it has more than one file and together they reach the next level (at least
``10 ** (level + 1)`` rows), so each compaction lifts at least one file a level and repeated
optimizations converge instead of rewriting the same files. Groups are taken lowest level
first until ``bytes_per_iteration`` is reached. Full mode compacts every bucket that has more
than one file. Each bucket's selected files become one sorted file.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

MODES = ("quick", "full")


@dataclass(frozen=True)
class DataFile:
    """One data file of an index version, as its content records it."""

    name: str
    bucket: int
    rows: int
    bytes: int

    @property
    def level(self) -> int:
        return level(self.rows)

    @staticmethod
    def of(record: Iterable) -> "DataFile":
        """From the ``[name, bucket, rows, bytes]`` lists of an index's content."""
        name, bucket, rows, size = record
        return DataFile(str(name), int(bucket), int(rows), int(size))


def level(rows: int) -> int:
    """``floor(log10(rows))``; an empty file is level 0."""
    return int(math.floor(math.log10(rows))) if rows > 0 else 0


def select(files: list[DataFile], mode: str, bytes_per_iteration: int) -> list[list[DataFile]]:
    """The groups of files to compact, each within one bucket (see the module docstring)."""
    if mode not in MODES:
        raise ValueError(f"optimize mode {mode!r} is not one of {', '.join(MODES)}")
    by_bucket: dict[int, list[DataFile]] = {}
    for f in files:
        by_bucket.setdefault(f.bucket, []).append(f)
    if mode == "full":
        return [sorted(fs, key=lambda f: f.name) for _, fs in sorted(by_bucket.items())
                if len(fs) > 1]
    groups: dict[tuple[int, int], list[DataFile]] = {}
    for f in files:
        groups.setdefault((f.level, f.bucket), []).append(f)
    chosen, budget = [], 0
    for (lvl, _), group in sorted(groups.items()):
        if len(group) < 2 or sum(f.rows for f in group) < 10 ** (lvl + 1):
            continue
        if budget >= bytes_per_iteration:
            break
        chosen.append(sorted(group, key=lambda f: f.name))
        budget += sum(f.bytes for f in group)
    return chosen
