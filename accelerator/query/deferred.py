"""The query history of plans, recorded off the path of the query that planned them: those the
JVM rule did not hand to the rewriter (``DeferredPlans.java``: plans no index or cache could
serve, under settings the rewriter answered lately), whose payloads wait in the JVM, and those
the rewriter answered, whose records wait here (:meth:`DeferredHistory.later`). A daemon thread
records both every :data:`DRAIN_INTERVAL_S`, so planning a query pays for neither; flushing
the history drains first, so nothing planned before a flush is missing from it.
"""
from __future__ import annotations

import atexit
import collections
import json
import logging
import threading
import time
from typing import Any, Callable

from rules.history import recorder as history_recorder

log = logging.getLogger("accelerator.query.deferred")

#: Seconds between two drains of the JVM's queue.
DRAIN_INTERVAL_S = 1.0
#: Payloads taken from the JVM per call.
DRAIN_BATCH = 256
#: Records of answered plans kept waiting at most (like the JVM's queue); older ones are lost.
MAX_WAITING = 10_000


class DeferredHistory:
    """Drains the deferred plans of one JVM (``plans``: the PlanRewrite helper) into
    ``record`` (called with each payload as a dict), and runs the recordings handed to
    :meth:`later`."""

    def __init__(self, plans: Any, record: Callable[[dict], None]):
        self._plans = plans
        self._record = record
        self._waiting: collections.deque[Callable[[], None]] = collections.deque()
        self._lost = 0
        self._lock = threading.Lock()          # one drain at a time, in payload order
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._exit_hook = False

    def start(self) -> None:
        """Starts the draining thread unless it runs (it stops when the JVM is gone)."""
        if self._thread is not None and self._thread.is_alive():
            return
        with self._start_lock:
            if self._thread is not None and self._thread.is_alive():
                return
            if not self._exit_hook:
                # registered after the recorders' hook, so it runs first at exit
                history_recorder.register_exit_hook()
                atexit.register(self.drain)
                self._exit_hook = True
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name="accelerator-deferred")
            self._thread.start()

    def later(self, recording: Callable[[], None]) -> None:
        """Runs ``recording`` (which records one answered plan) on the next drain."""
        if len(self._waiting) >= MAX_WAITING:
            self._waiting.popleft()
            self._lost += 1
        self._waiting.append(recording)
        self.start()

    def _run(self) -> None:
        while True:
            time.sleep(DRAIN_INTERVAL_S)
            if not self.drain():
                return

    def drain(self) -> bool:
        """Records every plan queued in the JVM now; False when the JVM cannot be reached.
        Never raises."""
        with self._lock:
            while self._waiting:
                self._run_one(self._waiting.popleft())
            try:
                while True:
                    payloads = list(self._plans.drainDeferred(DRAIN_BATCH))
                    for text in payloads:
                        self._record_one(text)
                    if len(payloads) < DRAIN_BATCH:
                        break
                dropped = int(self._plans.takeDroppedDeferred())
            except Exception:  # noqa: BLE001 - the JVM stopped: the thread ends
                log.debug("could not drain the deferred plans", exc_info=True)
                return False
        dropped += self._lost
        self._lost = 0
        if dropped:
            log.warning("the query history lost %d plans: more were planned between two "
                        "drains than the JVM keeps (10,000), or describing them failed", dropped)
        return True

    def _record_one(self, text: str) -> None:
        self._run_one(lambda: self._record(json.loads(text)))

    @staticmethod
    def _run_one(recording: Callable[[], None]) -> None:
        try:
            recording()
        except Exception:  # noqa: BLE001 - the history is best effort
            log.debug("could not record a plan", exc_info=True)
