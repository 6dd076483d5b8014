"""The Python side of the optimizer rule: the pipeline that decides which indexes and cached
files serve a plan, applies them and has the plan recorded in the query history.

The JVM rule (``AcceleratorRule``) calls :meth:`Rewriter.apply` with an optimized plan that
reads files under a root some index or the cache is over (:mod:`accelerator.query.indexed_roots`),
and a payload holding the plan's JSON, the session's settings and its file relations; the plans
it does not hand over reach the history through :mod:`accelerator.query.deferred`. The analysis
is pure Python: the choice of an index per relation (:mod:`accelerator.query.relation_choice`),
the joins a kind serves (covering's :mod:`indexes.covering.join_rule`) and the cache's
decisions (:mod:`accelerator.query.cache_rewrite`); the chosen index's kind serves its relation
through the JVM (:mod:`accelerator.query.index_serving`), the cache swaps its files in
(:mod:`accelerator.query.cache_rewrite`), and the JVM describes a relation whose fingerprint or
files the payload lacks. Any failure returns None, which makes the JVM run the original plan.
"""
from __future__ import annotations

import contextlib
import json
import logging
import threading
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Iterator

from accelerator.query import index_serving
from accelerator.query.cache_rewrite import CacheRewrite
from accelerator.query.catalog import catalog
from accelerator.query.decisions import RelationDecision, relation_decisions
from accelerator.query.history_recording import HistoryRecording
from accelerator.query.indexed_roots import IndexedRoots
from accelerator.query.join_sides import JoinSides
from accelerator.query.relation_choice import RelationChoice
from accelerator.query.relation_files import RelationFiles
from accelerator.runtime import jvm
from accelerator.runtime.settings import Settings
from indexes import kinds
from indexes.plan import PlanNode, file_relations, parse_plan, unsupported_reason
from indexes.version_cache import VersionCache
from rules.history.recorder import HistoryRecorder

log = logging.getLogger("accelerator.query.rewriter")

#: index versions' relations and query-time states the rewriter keeps (least recent dropped)
VERSIONS_CACHED = 64


@dataclass
class RewriteResult:
    """The outcome of one rewrite: the (possibly new) JVM plan and the decisions behind it."""

    plan: Any
    root: PlanNode
    relations: list[RelationDecision]
    skipped_reason: str | None = None

    @property
    def applied(self) -> list[str]:
        return [d.chosen.index.name for d in self.relations if d.chosen is not None]

    @property
    def cached(self) -> bool:
        """Whether the cache serves some relation of the plan."""
        return any(d.cache is not None and d.cache.code == "APPLIED" for d in self.relations)


class Rewriter:
    """Rewrites plans of one driver; registered with the JVM rule by
    :func:`accelerator.query.session.rewriter` when the driver's first session needs it.

    Every index kind is served through :mod:`indexes.kinds`: a kind matches the relation, and
    the kind serves its applicable verdict (``IndexKind.serve``, joins ``serve_joins``) through
    the plan-surgery port: a relation over the index's data replaces the source's (covering),
    or the source's file list shrinks (data skipping, text). The cache serves, file by file, the relations no index replaces.
    ``suspended()`` suspends the rewrite for the queries the rewrite itself runs (the other
    sides of joins, :mod:`accelerator.query.join_sides`).
    """

    def __init__(self, spark: Any, suspended: Callable[[], ContextManager[None]]):
        self._spark = spark
        self._helpers = jvm.helpers(spark)
        fs = jvm.hadoop_fs(spark)
        # relations over index data and kinds' query-time states, per index version
        versions = VersionCache(VERSIONS_CACHED)
        files = RelationFiles(self._helpers.plans)
        self._roots = IndexedRoots(fs, self._helpers.plans, versions, catalog(spark))
        #: the joins' other sides collected for dynamic file pruning, remembered per side
        self.join_sides = JoinSides(spark, self._helpers.plans, suspended)
        self._choice = RelationChoice(fs, versions, files, self.join_sides)
        self._surgery = index_serving.JvmPlanSurgery(spark, self._helpers.plans, versions)
        self._cache = CacheRewrite(fs, self._helpers, self._roots, files)
        self._history = HistoryRecording(spark, fs, self._helpers.plans)
        self._captures: list[list[RewriteResult]] = []
        self._lock = threading.Lock()

    # --- JVM callback -------------------------------------------------------------------
    def apply(self, plan: Any, payload: str) -> Any:
        """Called by the JVM rule with a plan and its payload (PlanPayload.payload: settings,
        file relations, plan JSON); returns a new plan or None for "keep the original"."""
        try:
            capturing = bool(self._captures)
            result = self.rewrite(plan, json.loads(payload), record=not capturing,
                                  with_files=capturing)
            for captured in list(self._captures):
                captured.append(result)
            self._history.start()
            return result.plan if result.applied or result.cached else None
        except Exception:  # an accelerator bug must never fail a query
            log.warning("rewrite failed; running the original plan", exc_info=True)
            return None

    class Java:
        implements = ["java.util.function.BiFunction"]

    @contextlib.contextmanager
    def capturing(self) -> Iterator[list[RewriteResult]]:
        """Collects the results of the rewrites done while the block runs (for explain)."""
        captured: list[RewriteResult] = []
        with self._lock:
            self._captures.append(captured)
        try:
            yield captured
        finally:
            with self._lock:
                self._captures.remove(captured)

    # --- the pipeline ---------------------------------------------------------------------
    def rewrite(self, plan: Any, payload: dict, record: bool = False,
                with_files: bool = False) -> RewriteResult:
        """Analyses a JVM optimized plan and serves its relations from indexes and the cache.

        ``payload`` is what the JVM rule sends along (settings, relations, plan JSON); the JVM
        is called back only when some index or cached file is under one of the plan's sources.
        ``record`` has the plan recorded in the query history; ``with_files`` describes the
        files of every relation some index is over (for explain).
        """
        settings = Settings.of_conf(payload["conf"])
        root = parse_plan(payload["plan"])
        relations = file_relations(root)
        decisions = relation_decisions(payload)
        result = RewriteResult(plan, root, decisions)
        indexes = self._roots.active_indexes(settings)
        view = self._cache.view(settings)
        covered = view is not None and any(view.covers(d.description.root_paths or [])
                                           for d in decisions)
        result.skipped_reason = unsupported_reason(root) if indexes or covered else None
        if result.skipped_reason:
            indexes = []
        self._choice.decide(plan, root, relations, decisions, indexes, settings, payload,
                            with_files)
        joined: dict[int, int] = {}
        for kind in (k for k in kinds.KINDS if k.joins and any(e.kind == k.name for e in indexes)):
            joined.update(kind.serve_joins(root, relations, decisions, indexes, settings,
                                           payload.get("joinHints", []),
                                           lambda: self._spark.sparkContext.defaultParallelism))
        if covered:
            self._cache.decide(plan, relations, decisions, view, settings, payload,
                               result.skipped_reason)
        # last relation first: a hybrid scan or the cache adds relations, which would shift
        # the (pre-order) ordinals of the relations after it
        for decision in reversed(decisions):
            if decision.chosen is not None:
                result.plan = index_serving.serve(self._surgery, result.plan, decision, joined,
                                                  settings, payload)
            if decision.cache is not None and decision.cache.files is not None:
                result.plan = self._cache.serve(result.plan, decision)
        if record and covered:
            self._cache.record_use(decisions, settings)
        if record:   # off the query's path, when it was planned
            self._history.later(settings, root, relations, decisions, result.applied, payload)
        return result

    # --- for the facade and the session ---------------------------------------------------
    def active_indexes(self, settings: Settings) -> list[Any]:
        """ACTIVE indexes of a registered kind under the session's system path (see
        :meth:`IndexedRoots.active_indexes`)."""
        return self._roots.active_indexes(settings)

    def state(self, entry: Any, settings: Settings) -> Any:
        """The query-time state of an index version (see :meth:`RelationChoice.state`)."""
        return self._choice.state(entry, settings)

    def recorder(self, system_path: str) -> HistoryRecorder:
        """The query history recorder of a system path (see
        :meth:`HistoryRecording.recorder`)."""
        return self._history.recorder(system_path)

    def flush_history(self, system_path: str) -> int:
        """Writes the query history buffered for ``system_path`` now, the plans the JVM rule
        deferred included; returns how many records were written."""
        return self._history.flush(system_path)

    def forget_answers(self) -> None:
        """Makes the JVM rule hand the next plan of every session to the rewriter (not defer
        it), after this process changed which sources an index or the cache serves."""
        self._helpers.plans.forgetAnswers()
