"""What executed queries cost, joined to their history records.

The JVM's listener (``QueryMetrics``) reports each execution of a query the accelerator planned as
one JSON line: the query id, when it ended, its wall time, per file scan of the executed plan
the scan's root paths and the files, bytes and rows it read, and per join its strategy with the
root paths of the scans under each side. :func:`parse_executions` reads those lines;
:func:`with_execution` copies a planning-time record with the cost of one execution, each scan
counted for the relation it read: the relation with the same root paths (the source itself, or
the part of it a cache or a hybrid scan still reads), else the relation an index or the cache
served from under that path; each join names the pairs of relations it joined. Pure Python.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable, Collection, Sequence

from rules.history.records import ExecutedJoin, QueryRecord
from rules.history.records import scheme_less

log = logging.getLogger("accelerator.history.executions")

__all__ = ["Execution", "ExecutionFeed", "JoinRun", "Scan", "parse_executions",
           "with_execution"]


@dataclass(frozen=True)
class Scan:
    """One file scan of an executed plan (a count is None when the scan did not report it)."""

    roots: tuple[str, ...]
    files: int | None
    bytes: int | None
    rows: int | None


@dataclass(frozen=True)
class JoinRun:
    """One join of an executed plan: its strategy (``broadcast`` or ``shuffle``) and, per side,
    the root paths of each file scan under it."""

    strategy: str
    left: tuple[tuple[str, ...], ...]
    right: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Execution:
    """One successful execution of a planned query."""

    query_id: str
    end_ms: int
    duration_ms: int
    scans: tuple[Scan, ...] = ()
    joins: tuple[JoinRun, ...] = ()


def _count(value: object) -> int | None:
    return None if value is None or int(value) < 0 else int(value)


def _scan(d: dict) -> Scan:
    files, size, rows = _count(d.get("files")), _count(d.get("bytes")), _count(d.get("rows"))
    if files == 0 and rows:   # a plan run again reports its file listing's metrics as zero
        files = size = None
    return Scan(tuple(str(r) for r in d.get("roots") or ()), files, size, rows)


def _join(d: dict) -> JoinRun:
    def side(scans: object) -> tuple[tuple[str, ...], ...]:
        return tuple(tuple(str(r) for r in roots) for roots in scans or ())
    return JoinRun(str(d["strategy"]), side(d.get("left")), side(d.get("right")))


def parse_executions(text: str) -> list[Execution]:
    """The executions of the listener's JSON lines; a malformed line is skipped (logged)."""
    out: list[Execution] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            scans = tuple(_scan(s) for s in d.get("scans") or ())
            joins = tuple(_join(j) for j in d.get("joins") or ())
            out.append(Execution(str(d["queryId"]), int(d["endMs"]), int(d["durationMs"]), scans,
                                 joins))
        except (ValueError, KeyError, TypeError):
            log.debug("malformed execution report skipped: %r", line, exc_info=True)
    return out


def _norm(path: str) -> str:
    return scheme_less(path)


def _relation_of(scan_roots: Sequence[str], record: QueryRecord,
                 serving_paths: Sequence[Sequence[str]]) -> int | None:
    roots = {_norm(r) for r in scan_roots}
    same = [i for i, r in enumerate(record.relations) if {_norm(p) for p in r.root_paths} == roots]
    if same:
        return same[0]
    for i, prefixes in enumerate(serving_paths):
        if any(root == _norm(p) or root.startswith(_norm(p) + "/")
               for root in roots for p in prefixes if p):
            return i
    return None


def _plus(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else a + b


def with_execution(record: QueryRecord, execution: Execution,
                   serving_paths: Sequence[Sequence[str]] = ()) -> QueryRecord:
    """A copy of ``record`` (its planning-time record) with the cost of ``execution``: its end
    as ``timestamp``, its wall time as ``duration_ms``, and per relation the files, bytes and
    rows its scans read, and as ``executed_joins`` each pair of relations a join of the plan
    brought together (a relation under one side, one under the other: in ``(A join B) join C``
    the pairs (A, B) of the lower join and (A, C), (B, C) of the upper one) with its strategy.
    ``serving_paths`` gives, per relation, the path prefixes an index or the cache served it
    from (scans under them count for that relation); a scan of no relation is left out."""
    totals: dict[int, list[int | None]] = {}
    for scan in execution.scans:
        i = _relation_of(scan.roots, record, serving_paths)
        if i is None:
            continue
        t = totals.setdefault(i, [None, None, None])
        t[0], t[1], t[2] = _plus(t[0], scan.files), _plus(t[1], scan.bytes), _plus(t[2], scan.rows)
    relations = [dataclasses.replace(r, files_read=totals[i][0], bytes_read=totals[i][1],
                                     rows_read=totals[i][2]) if i in totals else
                 dataclasses.replace(r, files_read=None, bytes_read=None, rows_read=None)
                 for i, r in enumerate(record.relations)]
    joins = []
    for run in execution.joins:
        sides = [{i for roots in side
                  if (i := _relation_of(roots, record, serving_paths)) is not None}
                 for side in (run.left, run.right)]
        joins.extend(ExecutedJoin(left, right, run.strategy)
                     for left in sorted(sides[0]) for right in sorted(sides[1]) if left != right)
    return dataclasses.replace(record, timestamp=execution.end_ms,
                               duration_ms=execution.duration_ms, relations=relations,
                               executed_joins=sorted(set(joins)))


#: seconds an execution that no recorder claimed yet is kept for another one
UNCLAIMED_KEEP_S = 60.0


class ExecutionFeed:
    """The executions reported by one JVM, shared by the recorders of its system paths: each
    takes those of the queries it recorded. ``drain`` returns the reports arrived since its last
    call (JSON lines, see :func:`parse_executions`); it is called from the recorders' writer
    threads, never by a query."""

    def __init__(self, drain: Callable[[], str], clock: Callable[[], float] = time.monotonic):
        self._drain = drain
        self._clock = clock
        self._lock = threading.Lock()
        self._pending: list[tuple[float, Execution]] = []

    def take(self, query_ids: Collection[str]) -> list[Execution]:
        """The executions of ``query_ids`` reported so far (each returned once). Never raises:
        a failing ``drain`` is logged and yields nothing new. One caller at a time drains and
        sorts (an execution another recorder drained is already among the kept ones when the
        next caller looks)."""
        with self._lock:
            try:
                fresh = parse_executions(self._drain() or "")
            except Exception:  # noqa: BLE001 - the history is best effort
                log.debug("could not read execution reports", exc_info=True)
                fresh = []
            now = self._clock()
            pending = [(t, e) for t, e in self._pending if now - t < UNCLAIMED_KEEP_S]
            pending += [(now, e) for e in fresh]
            mine = [e for _, e in pending if e.query_id in query_ids]
            self._pending = [(t, e) for t, e in pending if e.query_id not in query_ids]
        return mine
