"""Counting an operation's mutating file-system calls and Spark writes, and killing the process
at one of them (test-only monkeypatching of :class:`indexes.fs.HadoopFs` and of PySpark's
``DataFrameWriter.parquet``; the product is unchanged).

Only the calls of the thread that entered the tracer (and of the cache's I/O pool, which it
uses) count, so background threads (history, cache usage flushes) never shift the numbering
between the counting run and the killed runs.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any, Callable

from pyspark.sql.readwriter import DataFrameWriter

from indexes.fs import HadoopFs
from tests.crash.points import KillPoint

#: the methods of HadoopFs that change the file system (write_text goes through write_bytes)
MUTATING = ("write_bytes", "create_exclusive", "rename", "delete", "mkdirs", "copy")
_POOL_THREADS = "accelerator-cache-io"


def die() -> None:
    """SIGKILL for this process and everything it started (its JVM, the Python workers): the
    process group it leads. Refuses to run in a process that does not lead its own group (the
    test process), so a stray kill point can never take the test run down."""
    if os.getpgrp() != os.getpid():
        raise RuntimeError("die() outside a crash driver (not a process group leader)")
    sys.stderr.flush()
    os.killpg(os.getpgrp(), signal.SIGKILL)


class Tracer:
    """Counts the operation's calls while entered; with ``kill`` (in a driver process), dies at
    that point."""

    def __init__(self, spark: Any, kill: KillPoint | None = None):
        self._spark = spark
        self._kill = kill
        self._owner: int | None = None
        self._saved: dict[tuple[Any, str], Callable] = {}
        self.calls: list[str] = []     # "<method> <path>" of each counted call, in order
        self.writes: list[str] = []    # the path of each Spark write, in order

    def _counted(self) -> bool:
        current = threading.current_thread()
        return current.ident == self._owner or current.name.startswith(_POOL_THREADS)

    def _patch(self, owner: Any, name: str, wrapper: Callable[[Callable], Callable]) -> None:
        original = getattr(owner, name)
        self._saved[(owner, name)] = original
        setattr(owner, name, wrapper(original))

    def __enter__(self) -> "Tracer":
        self._owner = threading.get_ident()
        for name in MUTATING:
            self._patch(HadoopFs, name, lambda original, name=name: self._fs_call(name, original))
        self._patch(DataFrameWriter, "parquet", self._write_call)
        return self

    def __exit__(self, *exc: Any) -> None:
        for (owner, name), original in self._saved.items():
            setattr(owner, name, original)
        self._saved.clear()

    def _fs_call(self, name: str, original: Callable) -> Callable:
        def call(fs: Any, path: str, *args: Any, **kwargs: Any) -> Any:
            if self._counted():
                self.calls.append(f"{name} {path}")
                kill = self._kill
                if kill is not None and kill.kind == "fs" and kill.n == len(self.calls):
                    sys.stderr.write(f"crash: killed before call {kill.n}: {name} {path}\n")
                    die()
            return original(fs, path, *args, **kwargs)
        return call

    def _write_call(self, original: Callable) -> Callable:
        def call(writer: Any, path: str, *args: Any, **kwargs: Any) -> Any:
            if not self._counted():
                return original(writer, path, *args, **kwargs)
            self.writes.append(str(path))
            kill = self._kill
            armed = kill is not None and kill.kind == "write" and kill.n == len(self.writes)
            done = threading.Event()
            if armed:
                threading.Thread(target=self._watch, args=(kill, done), daemon=True,
                                 name="crash-watch").start()
            try:
                return original(writer, path, *args, **kwargs)
            finally:
                done.set()
                if armed:   # the job ended before the watcher saw it run: die right after it
                    sys.stderr.write(f"crash: killed after write {kill.n} ({path})\n")
                    die()
        return call

    def _watch(self, kill: KillPoint, done: threading.Event) -> None:
        """Polls Spark's status tracker until a stage of the write runs with ``kill.tasks``
        tasks done, then kills the process."""
        tracker = self._spark.sparkContext.statusTracker()
        while not done.is_set():
            for job in tracker.getActiveJobsIds():
                info = tracker.getJobInfo(job)
                for stage in (info.stageIds if info is not None else []):
                    s = tracker.getStageInfo(stage)
                    if s is not None and s.numActiveTasks > 0 \
                            and s.numCompletedTasks >= min(kill.tasks, s.numTasks - 1):
                        sys.stderr.write(f"crash: killed in write {kill.n}, stage {stage} "
                                         f"with {s.numCompletedTasks}/{s.numTasks} tasks done\n")
                        die()
            time.sleep(0.005)
