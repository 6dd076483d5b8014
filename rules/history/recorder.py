"""The buffered writer of the query history.

:class:`HistoryRecorder` keeps :class:`rules.history.records.QueryRecord` objects in memory and writes them
as Parquet files under ``<system path>/_history/date=YYYY-MM-DD/`` from a background thread, so
recording costs a query one list append. It writes through a file-system object (the methods of
``indexes.fs.HadoopFs``), so it runs over Hadoop in a Spark driver and in memory in tests.
"""
from __future__ import annotations

import atexit
import io
import logging
import threading
import time
import uuid
import weakref
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterable, Sequence

from cachetools import FIFOCache

from rules.history.executions import ExecutionFeed, with_execution
from rules.history.plan_analysis import Plan, RelationDescriptions, extract_record
from rules.history.records import HISTORY_SCHEMA, PARTITION_COLUMN, QueryRecord, history_path

log = logging.getLogger("accelerator.history.recorder")

__all__ = ["DEFAULT_FLUSH_INTERVAL_S", "HistoryRecorder"]

#: Seconds a record waits in memory at most (about) unless the recorder is told otherwise.
DEFAULT_FLUSH_INTERVAL_S = 30.0
_OVERFLOW_FACTOR = 8  # records kept while the writer lags, in multiples of max_buffer
_CLOSE_WAIT_S = 30.0
_PLANNED_KEPT = 4096  # planned queries whose executions are still matched to their records
_live: "weakref.WeakSet[HistoryRecorder]" = weakref.WeakSet()
_atexit_registered = False
_atexit_lock = threading.Lock()


def _close_all() -> None:
    for recorder in list(_live):
        recorder.close()


def register_exit_hook() -> None:
    """Makes every recorder write its buffer at interpreter exit (once per process; exit
    handlers registered after this one run before it)."""
    # Registered when the first recorder is made (after the SparkSession exists), so it runs
    # before pyspark's own exit handlers and the JVM is still reachable for the last flush.
    global _atexit_registered
    with _atexit_lock:
        if not _atexit_registered:
            atexit.register(_close_all)
            _atexit_registered = True


def _utc_date(timestamp_ms: int) -> str:
    return datetime.fromtimestamp(timestamp_ms / 1000.0, tz=timezone.utc).date().isoformat()


@dataclass
class _Planned:
    record: QueryRecord
    serving_paths: Sequence[Sequence[str]]
    buffered: bool = True     # the planning record is still in the buffer, not yet executed


class HistoryRecorder:
    """Buffers :class:`QueryRecord` objects and writes them to ``<system path>/_history/``.

    ``record`` is O(1) and never raises or calls the JVM. A daemon thread writes the buffer as
    one Parquet file per UTC date (``date=YYYY-MM-DD/part-<epoch ms>-<uuid8>.parquet``) when it
    holds ``max_buffer`` records, every ``flush_interval_s`` seconds, and at :meth:`close` or
    interpreter exit. Files are written under a hidden temporary name and renamed into place
    when ``fs`` has a ``rename`` method, so readers never see a partial file. A failed write is
    logged on ``accelerator.history.recorder`` and its records are dropped.

    With a ``feed`` of execution reports, each write first takes the executions of the queries
    recorded with :meth:`record_plan` (the latest :data:`_PLANNED_KEPT`): a planning record
    still buffered becomes the record of its first execution, and every further execution (the
    same DataFrame run again, or a run that ended after its planning record was written) adds a
    record of its own.

    Args:
        fs: a file system such as ``indexes.fs.HadoopFs`` or ``indexes.fs.MemoryFs`` (anything
            with ``write_bytes(path, data)``; optional ``rename(src, dst) -> bool`` and
            ``delete(path, recursive)``).
        system_path: the accelerator system path.
        max_buffer: records that trigger a write.
        flush_interval_s: longest time a record waits in memory (about).
        feed: where the costs of executed queries come from (None: records are not timed).
    """

    def __init__(self, fs: Any, system_path: str, max_buffer: int = 256,
                 flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
                 feed: ExecutionFeed | None = None):
        self._fs = fs
        self._dir = history_path(system_path)
        self._max = max(1, int(max_buffer))
        self._interval = max(0.01, float(flush_interval_s))
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._wake = threading.Event()
        self._buffer: list[QueryRecord] = []
        self._feed = feed
        self._planned: FIFOCache[str, _Planned] = FIFOCache(_PLANNED_KEPT)
        self._thread: threading.Thread | None = None
        self._closed = False
        self._dropped = 0
        self._written = 0
        _live.add(self)
        register_exit_hook()

    @property
    def path(self) -> str:
        """The history directory written to."""
        return self._dir

    @property
    def flush_interval_s(self) -> float:
        """Seconds between two writes of the background thread (records wait about this long)."""
        return self._interval

    @property
    def pending(self) -> int:
        """Records buffered and not yet written."""
        return len(self._buffer)

    @property
    def written(self) -> int:
        """Records written so far."""
        return self._written

    @property
    def dropped(self) -> int:
        """Records lost: failed writes, buffer overflow, or recorded after :meth:`close`."""
        return self._dropped

    def record(self, rec: QueryRecord) -> None:
        """Buffers one record. O(1), no JVM call, never raises."""
        try:
            wake = False
            with self._lock:
                if self._closed or len(self._buffer) >= self._max * _OVERFLOW_FACTOR:
                    self._dropped += 1
                    return
                self._buffer.append(rec)
                wake = len(self._buffer) >= self._max
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, daemon=True,
                                                    name="accelerator-history")
                    self._thread.start()
            if wake:
                self._wake.set()
        except Exception:  # noqa: BLE001 - recording must never fail a query
            log.debug("could not buffer a history record", exc_info=True)

    def record_plan(self, root: Plan, relations_with_descriptions: RelationDescriptions,
                    indexes_applied: Iterable[str] = (), *, query_id: str | None = None,
                    served_by: Sequence[str | None] = (),
                    serving_paths: Sequence[Sequence[str]] = (),
                    literals: bool = True,
                    timestamp_ms: int | None = None) -> QueryRecord | None:
        """:func:`rules.history.plan_analysis.extract_record` then :meth:`record`; never raises (None
        when extraction fails). With a ``query_id``, the query's executions reported by the
        feed are recorded too (``serving_paths``: per relation, the paths an index or the cache
        served it from, so their scans count for it; ``timestamp_ms``: when it was planned,
        default now)."""
        try:
            rec = extract_record(root, relations_with_descriptions, indexes_applied,
                                 query_id=query_id, served_by=served_by, literals=literals,
                                 timestamp_ms=timestamp_ms)
        except Exception:  # noqa: BLE001
            log.debug("could not extract a history record", exc_info=True)
            return None
        if query_id is not None and self._feed is not None:
            with self._lock:
                self._planned[query_id] = _Planned(rec, serving_paths)   # the first planned goes
        self.record(rec)
        return rec

    def _take_executions(self) -> None:
        """Turns the executions reported so far into records (see the class docstring)."""
        if self._feed is None:
            return
        with self._lock:
            ids = set(self._planned)
        if not ids:
            return
        found = self._feed.take(ids)
        with self._lock:
            for execution in found:
                planned = self._planned.get(execution.query_id)
                if planned is None:
                    continue
                timed = with_execution(planned.record, execution, planned.serving_paths)
                at = next((k for k, r in enumerate(self._buffer) if r is planned.record),
                          None) if planned.buffered else None
                if at is not None:
                    self._buffer[at] = timed
                else:
                    self._buffer.append(timed)
                planned.buffered = False

    def _run(self) -> None:
        while True:
            self._wake.wait(self._interval)
            self._wake.clear()
            if self._closed:
                return
            self.flush()

    def flush(self) -> int:
        """Writes every buffered record now; returns how many were written. Never raises."""
        return self._flush(None)

    def _flush(self, wait_s: float | None) -> int:
        if not self._flush_lock.acquire(timeout=-1 if wait_s is None else wait_s):
            log.warning("history flush skipped: a previous write to %s is still running", self._dir)
            return 0
        try:
            self._take_executions()
            with self._lock:
                batch, self._buffer = self._buffer, []
                for planned in self._planned.values():
                    planned.buffered = False
            if not batch:
                return 0
            by_date: dict[str, list[QueryRecord]] = {}
            for rec in batch:
                try:
                    day = _utc_date(int(rec.timestamp))
                except Exception:  # noqa: BLE001
                    self._dropped += 1
                    log.warning("history record without a valid timestamp dropped", exc_info=True)
                    continue
                by_date.setdefault(day, []).append(rec)
            written = 0
            for day, recs in sorted(by_date.items()):
                try:
                    written += self._write(day, recs)
                except Exception:  # noqa: BLE001 - never raised into a query
                    self._dropped += len(recs)
                    log.warning("could not write %d history records to %s; dropped", len(recs),
                                self._dir, exc_info=True)
            self._written += written
            return written
        except Exception:  # noqa: BLE001
            log.warning("history flush failed", exc_info=True)
            return 0
        finally:
            self._flush_lock.release()

    def _table(self, recs: list[QueryRecord]) -> Any:
        import pyarrow as pa
        try:
            return pa.Table.from_pylist([r.to_row() for r in recs], schema=HISTORY_SCHEMA)
        except Exception:  # noqa: BLE001 - one bad record must not lose the others
            rows = []
            for r in recs:
                try:
                    row = r.to_row()
                    pa.Table.from_pylist([row], schema=HISTORY_SCHEMA)
                    rows.append(row)
                except Exception:  # noqa: BLE001
                    self._dropped += 1
                    log.warning("malformed history record dropped: %r", r, exc_info=True)
            return pa.Table.from_pylist(rows, schema=HISTORY_SCHEMA)

    def _write(self, day: str, recs: list[QueryRecord]) -> int:
        import pyarrow.parquet as pq
        table = self._table(recs)
        if table.num_rows == 0:
            return 0
        sink = io.BytesIO()
        pq.write_table(table, sink, compression="snappy")
        data = sink.getvalue()
        name = f"part-{int(time.time() * 1000)}-{uuid.uuid4().hex[:8]}.parquet"
        folder = f"{self._dir}/{PARTITION_COLUMN}={day}"
        final = f"{folder}/{name}"
        rename = getattr(self._fs, "rename", None)
        if rename is None:
            self._fs.write_bytes(final, data)
            return table.num_rows
        tmp = f"{folder}/.{name}.tmp"  # hidden from Spark's file listing until renamed
        self._fs.write_bytes(tmp, data)
        if not rename(tmp, final):
            delete = getattr(self._fs, "delete", None)
            if delete is not None:
                try:
                    delete(tmp, False)
                except Exception:  # noqa: BLE001
                    pass
            raise OSError(f"could not rename {tmp} to {final}")
        return table.num_rows

    def close(self) -> None:
        """Stops the writer thread and writes what is buffered. Idempotent, never raises."""
        try:
            with self._lock:
                if self._closed:
                    return
                self._closed = True
            self._wake.set()
            self._flush(_CLOSE_WAIT_S)
            thread = self._thread
            if thread is not None and thread is not threading.current_thread():
                thread.join(timeout=_CLOSE_WAIT_S)
        except Exception:  # noqa: BLE001
            log.warning("history recorder close failed", exc_info=True)
        finally:
            _live.discard(self)

    def __enter__(self) -> "HistoryRecorder":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
