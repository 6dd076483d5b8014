"""Peak driver memory of a block of work (an index build, a cache warm-up, their limit jobs).

Two numbers, each the growth over the block's start:

- **JVM heap**: ``Runtime.totalMemory() - freeMemory()`` of the driver JVM, read through py4j
  by a thread every ``interval`` seconds while the block runs, after a ``System.gc()`` before
  it (outside the timed block) so that the baseline is live data, not garbage. In ``local``
  mode the executors' tasks run in the driver JVM, so this includes their working memory and
  garbage not yet collected: compare a build with its limit job measured the same way.
- **Python RSS**: the driver process's peak resident set (``VmHWM`` of ``/proc/self/status``)
  after resetting it (``5`` written to ``/proc/self/clear_refs``, Linux); where that is not
  possible, the largest ``VmRSS`` the thread sampled.
"""
from __future__ import annotations

import threading
from typing import Any

_STATUS = "/proc/self/status"


def _status_kb(field: str) -> int | None:
    try:
        with open(_STATUS) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class DriverMemory:
    """``with DriverMemory(spark) as m: ...``; then ``m.report()``: ``jvm_heap_before_mb``,
    ``jvm_heap_peak_mb`` and its growth ``jvm_heap_added_mb``, ``python_rss_added_mb`` and how
    it was taken (``python_rss_from``: ``VmHWM`` or ``sampled``), ``samples``."""

    def __init__(self, spark: Any, interval: float = 0.05):
        self._runtime = spark.sparkContext._jvm.java.lang.Runtime.getRuntime()
        self._system = spark.sparkContext._jvm.java.lang.System
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._heap_before = self._heap_peak = 0
        self._rss_before = self._rss_peak = 0
        self._hwm = False
        self._samples = 0

    def _heap(self) -> int:
        return int(self._runtime.totalMemory()) - int(self._runtime.freeMemory())

    def _sample(self) -> None:
        self._samples += 1
        self._heap_peak = max(self._heap_peak, self._heap())
        self._rss_peak = max(self._rss_peak, _status_kb("VmRSS") or 0)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._sample()
            except Exception:   # the gateway closing under a failed build: stop sampling
                return

    def __enter__(self) -> "DriverMemory":
        self._system.gc()
        self._heap_before = self._heap_peak = self._heap()
        self._rss_before = self._rss_peak = _status_kb("VmRSS") or 0
        self._hwm = _reset_peak_rss()
        self._thread = threading.Thread(target=self._run, name="bench-driver-memory", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()
        if self._hwm:
            self._rss_peak = max(self._rss_peak, _status_kb("VmHWM") or 0)

    def report(self) -> dict:
        """The block's peaks, in MB (10^6 bytes)."""
        return {"jvm_heap_before_mb": self._heap_before / 1e6,
                "jvm_heap_peak_mb": self._heap_peak / 1e6,
                "jvm_heap_added_mb": (self._heap_peak - self._heap_before) / 1e6,
                "python_rss_added_mb": (self._rss_peak - self._rss_before) * 1024 / 1e6,
                "python_rss_from": "VmHWM" if self._hwm else "sampled",
                "samples": self._samples}


def peaks(reports: list[dict]) -> dict | None:
    """Over several runs' reports: the largest growth of each, and the largest peak heap."""
    if not reports:
        return None
    return {"jvm_heap_added_mb": max(r["jvm_heap_added_mb"] for r in reports),
            "jvm_heap_peak_mb": max(r["jvm_heap_peak_mb"] for r in reports),
            "python_rss_added_mb": max(r["python_rss_added_mb"] for r in reports),
            "python_rss_from": reports[-1]["python_rss_from"],
            "runs": reports}
