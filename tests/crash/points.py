"""Kill points and their seeded choice.

A kill point is either the N-th mutating call of :class:`indexes.fs.HadoopFs` made by an
operation (the process dies just before that call runs), or the N-th Spark write job of the
operation, killed while one of its stages runs with ``tasks`` tasks done (data files Spark
writes itself, not through ``HadoopFs``).
"""
from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class KillPoint:
    """Where a driver process is killed: ``kind`` is ``fs`` or ``write``."""

    kind: str
    n: int
    tasks: int = 0

    @property
    def label(self) -> str:
        """``fs:12`` or ``write:1:0``; :meth:`parse` reads it back."""
        return f"fs:{self.n}" if self.kind == "fs" else f"write:{self.n}:{self.tasks}"

    @classmethod
    def parse(cls, label: str) -> "KillPoint":
        """The point of a :attr:`label`."""
        kind, *numbers = label.split(":")
        if kind == "fs" and len(numbers) == 1:
            return cls("fs", int(numbers[0]))
        if kind == "write" and len(numbers) == 2:
            return cls("write", int(numbers[0]), int(numbers[1]))
        raise ValueError(f"not a kill point: {label!r}")


def quotas(budget: int, scenarios: list[str]) -> dict[str, int]:
    """How many of ``budget`` points each scenario gets: as even a share as possible, the
    earlier scenarios taking the remainder, at least one each."""
    share, extra = divmod(max(budget, len(scenarios)), max(len(scenarios), 1))
    return {name: share + (1 if i < extra else 0) for i, name in enumerate(scenarios)}


def choose(calls: int, writes: int, quota: int, seed: str) -> list[KillPoint]:
    """``quota`` distinct kill points of an operation that makes ``calls`` mutating file-system
    calls and ``writes`` Spark writes, chosen with ``seed``: in order of preference a seeded
    call inside the operation, a seeded write job, the last call and the first call, then
    more seeded calls and writes (each write killed with 0, then 1 task done); fewer when the
    operation has fewer points."""
    rng = random.Random(seed)
    inner = list(range(2, calls))
    rng.shuffle(inner)
    jobs = [KillPoint("write", n, tasks) for tasks in (0, 1) for n in range(1, writes + 1)]
    rng.shuffle(jobs)
    jobs.sort(key=lambda p: p.tasks)
    preferred = [KillPoint("fs", n) for n in inner[:1]] + jobs[:1] \
        + [KillPoint("fs", n) for n in sorted({calls, 1}) if calls >= 1][::-1]
    rest = [KillPoint("fs", n) for n in inner[1:]]
    more_jobs = jobs[1:]
    while rest or more_jobs:   # the calls and writes left, interleaved: about 4 calls a write
        for _ in range(4):
            if rest:
                preferred.append(rest.pop(0))
        if more_jobs:
            preferred.append(more_jobs.pop(0))
    return preferred[:quota]
