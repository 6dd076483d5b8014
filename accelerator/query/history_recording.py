"""Recording planned queries in the query history: those the rewriter answered and those the
JVM rule deferred, off the queries' path (:class:`accelerator.query.deferred.DeferredHistory`), into
one buffered recorder per system path."""
from __future__ import annotations

import functools
import threading
import time
from typing import Any

from accelerator.query.decisions import RelationDecision, relation_decisions
from accelerator.query.deferred import DeferredHistory
from accelerator.query.history import new_recorder
from accelerator.runtime.settings import Settings
from indexes.plan import PlanNode, file_relations, parse_plan
from rules.history.recorder import HistoryRecorder
from rules.history.records import is_schema_inference


class HistoryRecording:
    """Records the plans of ``spark``'s driver (``plans``: the PlanRewrite helper, whose
    queue holds the deferred plans; ``fs``: the driver's Hadoop file system)."""

    def __init__(self, spark: Any, fs: Any, plans: Any):
        self._spark = spark
        self._fs = fs
        self._lock = threading.Lock()
        self._recorders: dict[str, HistoryRecorder] = {}
        self._qualified: dict[str, str] = {}   # system path → its qualified form
        self._deferred = DeferredHistory(plans, self.record_deferred)

    def start(self) -> None:
        """Makes sure the deferred plans are drained (see :meth:`DeferredHistory.start`)."""
        self._deferred.start()

    def later(self, settings: Settings, root: PlanNode, relations: list[PlanNode],
              decisions: list[RelationDecision], applied: list[str], payload: dict) -> None:
        """Records a plan the rewriter answered on the next drain, stamped with when it was
        planned (now, unless the payload says)."""
        payload.setdefault("plannedAt", int(time.time() * 1000))
        self._deferred.later(functools.partial(self._record, settings, root, relations,
                                               decisions, applied, payload))

    def _record(self, settings: Settings, root: PlanNode, relations: list[PlanNode],
                decisions: list[RelationDecision], applied: list[str], payload: dict) -> None:
        """Records a plan in the query history (unless it is off, the plan reads only the
        accelerator's own files, or it is Spark's own schema inference)."""
        if not settings.history_enabled or self._reads_own_files(settings, decisions) or (
                decisions and all(is_schema_inference(d.description.format,
                                                      d.description.options)
                                  for d in decisions)):
            return
        served = [d.served_from(settings) for d in decisions]
        self.recorder(settings.system_path).record_plan(
            root, [(r, d.description) for r, d in zip(relations, decisions)], applied,
            query_id=payload.get("queryId"), served_by=[s for s, _ in served],
            serving_paths=[p for _, p in served], literals=settings.history_literals,
            timestamp_ms=payload.get("plannedAt"))

    def record_deferred(self, payload: dict) -> None:
        """Records a plan the JVM rule deferred (nothing could serve it when it was planned),
        from its payload as :class:`accelerator.query.deferred.DeferredHistory` drains it."""
        root = parse_plan(payload["plan"])
        decisions = relation_decisions(payload)
        self._record(Settings.of_conf(payload["conf"]), root, file_relations(root), decisions,
                     [], payload)

    def flush(self, system_path: str) -> int:
        """Writes the query history buffered for ``system_path`` now, the plans the JVM rule
        deferred included; returns how many records were written."""
        self._deferred.drain()
        return self.recorder(system_path).flush()

    def recorder(self, system_path: str) -> HistoryRecorder:
        """The query history recorder of a system path (one per path, created on first use,
        flushing at the interval the session's settings say then)."""
        with self._lock:
            found = self._recorders.get(system_path)
            if found is None:
                found = self._recorders[system_path] = new_recorder(self._spark, system_path,
                                                                    self._fs)
            return found

    def _reads_own_files(self, settings: Settings, decisions: list[RelationDecision]) -> bool:
        """Whether a plan reads only files under the system path (its history, events or
        index data read directly): the accelerator's own queries are not user demand."""
        with self._lock:
            own = self._qualified.get(settings.system_path)
        if own is None:
            own = self._fs.qualify(settings.system_path).rstrip("/") + "/"
            with self._lock:
                self._qualified[settings.system_path] = own
        roots = [p for d in decisions for p in d.description.root_paths or []]
        return bool(roots) and all(p.startswith(own) for p in roots)
