"""The Python side of the optimizer rule: decides which indexes answer a plan and applies them.

The JVM rule calls :meth:`Rewriter.apply` with each optimized plan that reads files, and a
payload holding the plan's JSON, the session's settings and its file relations. The analysis is
pure Python (:mod:`indexes.plan`, :mod:`indexes.covering.match`); the JVM is called back only to
build the replacement (and to describe a relation whose fingerprint the payload lacks). Any
failure returns None, which makes the JVM run the original plan.
"""
from __future__ import annotations

import contextlib
import functools
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

from accelerator import jvm
from accelerator.cache import serving as cache_serving
from accelerator.cache.tier import UsedEntries, tier_for
from accelerator.catalog import CATALOG
from accelerator.deferred import DeferredHistory
from accelerator.history import new_recorder
from accelerator.settings import Settings
from indexes import kinds
from indexes.covering import join_match, match as covering_match
from indexes.covering.build import BUCKET_FILES, DELTA_FILES, data_dirs, delta_dirs
from indexes.kind import MatchContext, Serving
from indexes.lifecycle import IndexLifecycle
from indexes.log import IndexState
from indexes.plan import PlanNode, file_relations, parse_plan, unsupported_reason
from indexes.source import same_source
from indexes.version_cache import VersionCache
from rules.recorder import HistoryRecorder

log = logging.getLogger("accelerator.rewriter")

FILE_LISTS_CACHED = 16
#: relations' cache serving decisions kept (with their JVM file maps), oldest dropped first
CACHE_DECISIONS_KEPT = 16
NO_ENTRIES = UsedEntries((), 0)
#: index versions' relations and query-time states the rewriter keeps (least recent dropped)
VERSIONS_CACHED = 64


@dataclass(frozen=True)
class RootUse:
    """What the indexes over one root path (or the cache under it) need of a plan to serve
    it: ``columns`` (lower case) of which the Filters right above its relation must name one,
    None for any plan; ``joins`` when a join may be served whatever it filters."""

    prunes: bool
    joins: bool
    columns: frozenset[str] | None

    def merge(self, other: "RootUse") -> "RootUse":
        both = None if self.columns is None or other.columns is None \
            else self.columns | other.columns
        return RootUse(self.prunes or other.prunes, self.joins or other.joins, both)

    def line(self, path: str) -> str:
        """The JVM's line for it: the path, flags (``A`` any plan, ``J`` joins, ``-``) and
        the columns, tab-separated."""
        flags = ("A" if self.columns is None else "") + ("J" if self.joins else "")
        return "\t".join([path, flags or "-", *sorted(self.columns or ())])


@dataclass
class RelationDecision:
    """What the rewriter decided for one file relation of a plan."""

    ordinal: int
    description: dict
    results: list[Any] = field(default_factory=list)   # every candidate index's verdict
    chosen: Any = None                                  # the applicable verdict used, if any
    cache: "CacheDecision | None" = None                # the cache's, for relations it covers

    def served_from(self, settings: Settings) -> tuple[str | None, list[str]]:
        """What serves the relation (the index's name, ``cache``, or None for the source
        alone) and the paths it reads that from, for the query history."""
        paths = []
        served_by = None
        if self.cache is not None and self.cache.code == "APPLIED":
            served_by = "cache"
            paths.append(settings.cache_path)
        if self.chosen is not None:
            served_by = self.chosen.index.name
            paths.append(f"{settings.system_path.rstrip('/')}/{served_by}")
        return served_by, paths


@dataclass
class CacheDecision:
    """What the cache serves of one relation: ``code`` is APPLIED or why nothing is served;
    ``plan`` says which files are served and why the others are not."""

    code: str
    reason: str = ""
    plan: cache_serving.ServingPlan | None = None
    files: Any = None            # the JVM map of the served files (CacheServing.CachedFiles)
    required: frozenset = frozenset()
    used: UsedEntries | None = None   # the entries served, counted together per query

    def explain_line(self, roots: str) -> str:
        if self.plan is None:
            return f"cache [{self.code}] {roots}: {self.reason}"
        p = self.plan
        why = ", ".join(f"{code}: {n}" for code, n in sorted(p.reasons.items()))
        return (f"cache [{self.code}] {roots}: {len(p.served)} files ({p.served_bytes} bytes) "
                f"from the cache, {p.source_files} files ({p.source_bytes} bytes) from the "
                f"source" + (f" ({why})" if why else ""))


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
    """Rewrites plans of one driver; registered with the JVM rule by ``Hyperspace.enable``.

    Every index kind is served through :mod:`indexes.kinds`: a kind matches the relation, and
    an applicable verdict is served by its kind's :class:`indexes.kind.Serving`: a relation
    over the index's data replaces the source's (covering), or the source's file list shrinks
    (data skipping, text).
    """

    def __init__(self, spark: Any):
        self._spark = spark
        self._helpers = jvm.helpers(spark)
        self._fs = jvm.hadoop_fs(spark)
        # relations over index data and kinds' query-time states, per index version
        self._versions = VersionCache(VERSIONS_CACHED)
        # fingerprint → files of a source whose files no index recorded (oldest dropped first)
        self._file_lists: dict[str, list] = {}
        self._captures: list[list[RewriteResult]] = []
        self._lock = threading.Lock()
        self._recorders: dict[str, HistoryRecorder] = {}
        self._roots: dict[str, list[tuple[str, RootUse]]] = {}   # indexed roots per system path
        self._qualified: dict[str, str] = {}   # system path → its qualified form
        self._serve = {Serving.REPLACE: self._replace, Serving.PRUNE: self._prune}
        self._cache_decisions: dict[tuple, tuple[Any, Any, UsedEntries]] = {}
        self._cache_roots: dict[str, tuple[int, frozenset[str]]] = {}   # per cache path
        self._deferred = DeferredHistory(self._helpers.plans, self.record_deferred)

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
            self._deferred.start()
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

    # --- analysis -----------------------------------------------------------------------
    def active_indexes(self, settings: Settings) -> list[Any]:
        """ACTIVE indexes of a registered kind under the system path, from the per-process
        catalog cache."""
        entries = CATALOG.entries(settings.system_path, lambda: self._load(settings.system_path),
                                  settings.cache_expiry_seconds)
        return [e for e in entries
                if e.state == IndexState.ACTIVE and kinds.kind_of(e) is not None]

    def _load(self, system_path: str) -> list[Any]:
        """Reads the index logs, drops what the rewriter cached of versions no longer in use,
        and tells the JVM which root paths are indexed (and which by pruning kinds)."""
        lifecycle = IndexLifecycle(self._fs, system_path)
        entries = lifecycle.list()
        active = [e for e in entries
                  if e.state == IndexState.ACTIVE and kinds.kind_of(e) is not None]
        self._versions.retain(lifecycle.system_path, active)
        uses = []
        for e in active:
            kind = kinds.kind_of(e)
            use = RootUse(kind.serving is Serving.PRUNE, kind.joins, kind.filter_columns(e))
            uses.extend((p, use) for p in e.source.get("rootPaths", []))
        with self._lock:
            self._roots[system_path] = uses
        self._publish_roots()
        return entries

    def _publish_roots(self) -> None:
        """Tells the JVM which root paths some index is over (and which a pruning kind is) or
        hold cached files, so their relations come with their fingerprint, and what a plan
        over each must hold for an index to serve it (see :class:`RootUse`)."""
        with self._lock:
            uses = [u for per_path in self._roots.values() for u in per_path]
            cached = set().union(*(d for _, d in self._cache_roots.values()))
        merged: dict[str, RootUse] = {p: RootUse(False, False, None) for p in cached}
        for path, use in uses:
            merged[path] = merged[path].merge(use) if path in merged else use
        self._helpers.plans.setIndexedRoots(
            "\n".join(sorted(merged)),
            "\n".join(sorted(p for p, u in merged.items() if u.prunes)),
            "\n".join(u.line(p) for p, u in sorted(merged.items())))

    def rewrite(self, plan: Any, payload: dict, record: bool = False,
                with_files: bool = False) -> RewriteResult:
        """Analyses a JVM optimized plan and serves its relations from indexes.

        ``payload`` is what the JVM rule sends along (settings, relations, plan JSON); the JVM
        is called back only when some index is over one of the plan's sources.
        """
        settings = Settings.of_conf(payload["conf"])
        root = parse_plan(payload["plan"])
        relations = file_relations(root)
        plans = self._helpers.plans
        decisions = [RelationDecision(i, d) for i, d in enumerate(payload["relations"])]
        result = RewriteResult(plan, root, decisions)
        indexes = self.active_indexes(settings)
        view = self._cache_view(settings)
        covered = view is not None and any(view.covers(d.description.get("rootPaths", []))
                                           for d in decisions)
        result.skipped_reason = unsupported_reason(root) if indexes or covered else None
        if result.skipped_reason:
            indexes = []
        ctx = MatchContext(
            settings.case_sensitive, settings.hybrid,
            payload["readSettings"].get("spark.sql.session.timeZone", "UTC"),
            payload["conf"].get("spark.sql.ansi.enabled", "false").lower() == "true")
        for decision, relation in zip(decisions, relations):
            candidates = [e for e in indexes if same_source(e.source, decision.description)]
            if not candidates:
                continue
            if with_files or "fingerprint" not in decision.description:
                decision.description = json.loads(
                    plans.describe(plan, decision.ordinal, 2 if with_files else 1))
            fingerprint = decision.description.get("fingerprint")
            listed = any(kinds.kind_of(e).needs_files(e, fingerprint, settings)
                         for e in candidates)
            if listed and "files" not in decision.description:
                decision.description["files"] = self._files(plan, decision, candidates)
            decision.description["readSettings"] = payload["readSettings"]
            decision.results = [self._match(root, relation, decision.description, e, settings,
                                            ctx) for e in candidates]
            decision.chosen = kinds.choose(decision.results)
        joined = self._join_rule(root, relations, decisions, indexes, settings,
                                 payload.get("joinHints", [])) if indexes else {}
        if covered:
            for decision, relation in zip(decisions, relations):
                decision.cache = self._cache_decision(plan, relation, decision, view,
                                                      settings, payload, result.skipped_reason)
        # last relation first: a hybrid scan or the cache adds relations, which would shift
        # the (pre-order) ordinals of the relations after it
        for decision in reversed(decisions):
            if decision.chosen is not None:
                serve = self._serve[kinds.kind_of(decision.chosen.index).serving]
                result.plan = serve(result.plan, decision, joined, settings, payload)
            if decision.cache is not None and decision.cache.files is not None:
                result.plan = self._serve_cache(result.plan, decision)
        if record and covered:
            self._record_cache_use(decisions, settings)
        if record:   # off the query's path, when it was planned
            payload.setdefault("plannedAt", int(time.time() * 1000))
            self._deferred.later(functools.partial(self._record, settings, root, relations,
                                                   decisions, result.applied, payload))
        return result

    def _record(self, settings: Settings, root: PlanNode, relations: list[PlanNode],
                decisions: list[RelationDecision], applied: list[str], payload: dict) -> None:
        """Records a plan in the query history (unless it is off, or the plan reads only the
        accelerator's own files)."""
        if not settings.history_enabled or self._reads_own_files(settings, decisions):
            return
        served = [d.served_from(settings) for d in decisions]
        self.recorder(settings.system_path).record_plan(
            root, [(r, d.description) for r, d in zip(relations, decisions)], applied,
            query_id=payload.get("queryId"), served_by=[s for s, _ in served],
            serving_paths=[p for _, p in served], literals=settings.history_literals,
            timestamp_ms=payload.get("plannedAt"))

    def record_deferred(self, payload: dict) -> None:
        """Records a plan the JVM rule deferred (nothing could serve it when it was planned),
        from its payload as :class:`accelerator.deferred.DeferredHistory` drains it."""
        root = parse_plan(payload["plan"])
        decisions = [RelationDecision(i, d) for i, d in enumerate(payload["relations"])]
        self._record(Settings.of_conf(payload["conf"]), root, file_relations(root), decisions,
                     [], payload)

    def flush_history(self, system_path: str) -> int:
        """Writes the query history buffered for ``system_path`` now, the plans the JVM rule
        deferred included; returns how many records were written."""
        self._deferred.drain()
        return self.recorder(system_path).flush()

    def forget_answers(self) -> None:
        """Makes the JVM rule hand the next plan of every session to the rewriter (not defer
        it), after this process changed which sources an index or the cache serves."""
        self._helpers.plans.forgetAnswers()

    # --- the cache ------------------------------------------------------------------------
    def _cache_view(self, settings: Settings) -> cache_serving.CacheView | None:
        """The snapshot of the session's cache (None when serving is off or nothing is
        cached), publishing its roots (see :meth:`CacheView.roots`) to the JVM when it
        changed."""
        if not settings.cache_enabled:
            return None
        view = tier_for(self._fs, settings.cache_path).view(settings.cache_refresh_seconds)
        with self._lock:
            published = self._cache_roots.get(settings.cache_path)
            changed = published is None or published[0] != view.generation
            if changed:
                self._cache_roots[settings.cache_path] = (view.generation, view.roots())
        if changed and (view.dirs or (published and published[1])):
            self._publish_roots()
        return view if view.by_path else None

    def _cache_decision(self, plan: Any, relation: PlanNode,
                        decision: RelationDecision, view: cache_serving.CacheView,
                        settings: Settings, payload: dict,
                        unsupported: str | None) -> CacheDecision | None:
        """What the cache serves of one relation (None when no cached file is under its
        roots)."""
        description = decision.description
        if not view.covers(description.get("rootPaths", [])):
            return None
        if unsupported:
            return CacheDecision("PLAN_NOT_SUPPORTED", unsupported)
        if decision.chosen is not None and \
                kinds.kind_of(decision.chosen.index).serving is Serving.REPLACE:
            return CacheDecision("INDEX_APPLIED", f"the index '{decision.chosen.index.name}' "
                                 "answers this relation (an index wins over the cache)")
        if description.get("bucketed"):
            return CacheDecision("BUCKETED", "bucketed relations are not served from the cache")
        if "fingerprint" not in description:
            description.update(json.loads(self._helpers.plans.describe(plan, decision.ordinal,
                                                                       1)))
        fingerprint = description.get("fingerprint")
        if fingerprint is None:
            return CacheDecision("NO_FILE_LIST", "the relation does not list its files")
        read_key = cache_serving.read_key_of(description, payload["readSettings"])
        required = cache_serving.required_columns(relation,
                                                  description.get("partitionColumns", []))
        memo_key = (settings.cache_path, fingerprint, read_key, required, view.generation)
        with self._lock:
            found = self._cache_decisions.get(memo_key)
        if found is None:
            # the files index matching already fetched, else those described (once per list)
            files = description.get("files") or self._files(plan, decision, [])
            serving = cache_serving.plan_serving(view, read_key, files or [], required)
            lines = "\n".join(
                "\t".join([path, *(str(x) for f in e.files for x in f)])
                for path, e in serving.served.items())
            found = (serving, self._helpers.cache.files(lines) if serving.served else None,
                     UsedEntries.of(serving.served.values()))
            with self._lock:
                if len(self._cache_decisions) >= CACHE_DECISIONS_KEPT:
                    self._cache_decisions.pop(next(iter(self._cache_decisions)))
                self._cache_decisions[memo_key] = found
        serving, jfiles, used = found
        if jfiles is None:
            return CacheDecision("NOT_SERVED", "no file of the relation is served from the "
                                 "cache", serving, None, required, used)
        return CacheDecision("APPLIED", "", serving, jfiles, required, used)

    def _serve_cache(self, plan: Any, decision: RelationDecision) -> Any:
        """The relation reads its cached files from the cache (see CacheServing.swap)."""
        cache = decision.cache
        swapped = self._helpers.cache.swap(plan, decision.ordinal, cache.files,
                                           "\n".join(sorted(cache.required)))
        if swapped is None:
            decision.cache = CacheDecision("NOT_SUPPORTED", "the relation is bucketed, reads "
                                           "file metadata columns or repeats a partition "
                                           "column among its data columns")
            return plan
        return swapped

    def _record_cache_use(self, decisions: list[RelationDecision], settings: Settings) -> None:
        """Buffers a query's use of the cache: a hit on each entry it reads (of the files a
        data-skipping index kept, where one did), a miss for each file read from the source
        (see :attr:`ServingPlan.misses`)."""
        tier = tier_for(self._fs, settings.cache_path)
        for d in decisions:
            cache = d.cache
            if cache is None or cache.plan is None:
                continue
            served = cache.plan.served
            if d.chosen is None:
                used, misses = cache.used, cache.plan.misses
            else:   # a data-skipping index kept some files: count those
                kept = set(d.chosen.kept)
                used = UsedEntries.of(e for p, e in served.items() if p in kept)
                misses = len(kept.difference(served))
            tier.record(used if cache.code == "APPLIED" else NO_ENTRIES, misses)

    def _reads_own_files(self, settings: Settings, decisions: list[RelationDecision]) -> bool:
        """Whether a plan reads only files under the system path (its history, events or
        index data read directly): the accelerator's own queries are not user demand."""
        with self._lock:
            own = self._qualified.get(settings.system_path)
        if own is None:
            own = self._fs.qualify(settings.system_path).rstrip("/") + "/"
            with self._lock:
                self._qualified[settings.system_path] = own
        roots = [p for d in decisions for p in d.description.get("rootPaths", [])]
        return bool(roots) and all(p.startswith(own) for p in roots)

    def _match(self, root: PlanNode, relation: PlanNode, description: dict, entry: Any,
               settings: Settings, ctx: MatchContext) -> Any:
        return kinds.kind_of(entry).match(root, relation, description, entry,
                                          self.state(entry, settings), ctx)

    def state(self, entry: Any, settings: Settings) -> Any:
        """The query-time state of an index version (statistics, text reader), cached; None
        for a kind that has none (it takes no room in the cache)."""
        kind = kinds.kind_of(entry)
        if not kind.stateful:
            return None
        return self._versions.get(entry, ("state",), lambda: kind.load(entry, self._fs, settings))

    def _prune(self, plan: Any, decision: RelationDecision, joined: dict[int, int],
               settings: Settings, payload: dict) -> Any:
        """The relation reads only the files (and row groups) the chosen index kept."""
        return self._helpers.plans.pruneFiles(plan, decision.ordinal,
                                              "\n".join(decision.chosen.kept),
                                              decision.chosen.row_group_lines())

    def _replace(self, plan: Any, decision: RelationDecision, joined: dict[int, int],
                 settings: Settings, payload: dict) -> Any:
        """The relation is replaced by one over the chosen index's data (bucketed for the join
        rule, or for the filter rule when useBucketSpec is on), with hybrid scan's appended
        files and lineage exclusions."""
        chosen = decision.chosen
        joins = decision.ordinal in joined
        bucketed = joins or settings.filter_rule_bucket_spec
        # a lookup no operator needs bucketed reads its buckets' files as plain ones, chosen
        # by the JVM (Spark's own bucket pruning generates code for each literal)
        lookup_buckets = int(chosen.index.config["numBuckets"]) \
            if bucketed and not joins and chosen.bucket_lookup else 0
        bucketed = bucketed and not lookup_buckets
        relation = self.index_relation(chosen.index, bucketed, sorted_scan=joins,
                                       groups=joined.get(decision.ordinal, 0))
        deltas = self.delta_relation(chosen.index) if bucketed else None
        return self._helpers.plans.replaceRelation(
            plan, decision.ordinal, relation, "\n".join(chosen.specs), chosen.restore_order,
            "\n".join(chosen.appended), "\n".join(map(str, chosen.deleted_ids)), deltas,
            joins and bool(payload.get("bucketUnion")), lookup_buckets)

    def _join_rule(self, root: PlanNode, relations: list[PlanNode],
                   decisions: list[RelationDecision], indexes: list[Any], settings: Settings,
                   hints: list[str]) -> dict[int, int]:
        """Serves the plan's equi-joins from pairs of indexes of a joining kind bucketed on the
        join keys (see :mod:`indexes.covering.join_match`): both sides' decisions become the
        join's indexes. Returns the ordinals of the relations it replaced, each with the number
        of partitions its buckets are read in (see :func:`join_match.join_partitions`)."""
        ordinal_of = {id(r): i for i, r in enumerate(relations)}
        joining = [e for e in indexes if kinds.kind_of(e).joins]
        joined: dict[int, int] = {}
        joins = [n for n in root.walk() if n.cls == "Join"]
        for join, hint in zip(joins, hints):
            below = [join_match.side_relation(child) for child in join.children]
            if None in below:
                continue
            pair = [decisions[ordinal_of[id(r)]] for r in below]
            if any(d.ordinal in joined for d in pair):
                continue
            candidates = tuple([e for e in joining if same_source(e.source, d.description)]
                               for d in pair)
            missing = [side for side, found in zip(("left", "right"), candidates) if not found]
            sides = join_match.join_sides(join, settings.case_sensitive)
            if isinstance(sides, str):
                reason = sides
            elif missing:
                reason = f"the {missing[0]} side has no covering index over its source"
            else:
                reason = join_match.join_obstacle(hint, (pair[0].chosen, pair[1].chosen),
                                                  candidates, settings.bucketing,
                                                  settings.broadcast_threshold)
            if reason is None:
                found = join_match.evaluate(root, sides, candidates,
                                            tuple(d.description for d in pair),
                                            settings.case_sensitive, settings.hybrid)
                if isinstance(found, join_match.JoinApplicable):
                    groups = join_match.join_partitions(
                        found, self._spark.sparkContext.defaultParallelism)
                    for d, applied in zip(pair, (found.left, found.right)):
                        d.results = [applied] + [r for r in d.results
                                                 if r.index.name != applied.index.name]
                        d.chosen = applied
                        joined[d.ordinal] = groups
                    continue
                reason = found
            for d in pair:
                d.results = [join_match.with_join_reason(r, reason) for r in d.results]
                if d.chosen is not None:   # the completed verdict
                    d.chosen = next(r for r in d.results if r.index is d.chosen.index)
        return joined

    def _files(self, plan: Any, decision: RelationDecision, entries: list[Any]) -> list | None:
        """The files of a relation: those an index recorded when the fingerprints match (no
        JVM call), else described by the JVM, cached per fingerprint."""
        fingerprint = decision.description.get("fingerprint")
        for e in entries:
            if fingerprint is not None and e.source.get("fingerprint") == fingerprint:
                return e.source.get("files")
        with self._lock:
            files = self._file_lists.get(fingerprint) if fingerprint is not None else None
        if files is None:
            files = json.loads(self._helpers.plans.describe(plan, decision.ordinal, 2)).get("files")
            if fingerprint is not None:
                with self._lock:
                    if len(self._file_lists) >= FILE_LISTS_CACHED:
                        self._file_lists.pop(next(iter(self._file_lists)))
                    self._file_lists[fingerprint] = files
        return files

    def recorder(self, system_path: str) -> HistoryRecorder:
        """The query history recorder of a system path (one per path, created on first use,
        flushing at the interval the session's settings say then)."""
        with self._lock:
            found = self._recorders.get(system_path)
            if found is None:
                found = self._recorders[system_path] = new_recorder(self._spark, system_path,
                                                                    self._fs)
            return found

    def index_relation(self, entry: Any, bucketed: bool = True, sorted_scan: bool = False,
                       groups: int = 0) -> Any:
        """The JVM relation reading an index's data version, bucketed by the indexed columns
        (Spark then prunes buckets on equality filters and joins two such relations without a
        shuffle) unless ``bucketed`` is false. A bucketed relation reads only the bucket files;
        the delta files of incremental refreshes are read by :meth:`delta_relation`. With
        ``sorted_scan`` (for a join), its scan stays bucketed and reports the buckets' sort
        order where each bucket is one file, so a sort-merge join does not sort it; without,
        Spark may read a bucketed relation as plain files where no operator needs its buckets
        (a lookup reading one bucket of 200 in one task, not 200). ``groups`` below the
        bucket count makes a sorted scan read the buckets in that many groups, unsorted (see
        :func:`join_match.bucket_groups`)."""
        if not (bucketed and sorted_scan and 0 < groups < int(entry.config["numBuckets"])):
            groups = 0
        shape = ("sorted" if sorted_scan else "bucketed") if bucketed else "plain"
        return self._versions.get(entry, (shape, groups), lambda: self._read_index(
            entry, data_dirs(entry.content), BUCKET_FILES if bucketed else None,
            (sorted_scan, groups) if bucketed else None))

    def delta_relation(self, entry: Any) -> Any | None:
        """The JVM relation reading only the delta files of an index's data version (rows of
        files an incremental refresh indexed, in any bucket), which a bucketed read of the index
        unions with its bucket files; None when it has none."""
        dirs = delta_dirs(entry.content)
        if not dirs:
            return None
        return self._versions.get(entry, ("delta", 0),
                                  lambda: self._read_index(entry, dirs, DELTA_FILES))

    def _read_index(self, entry: Any, dirs: list[str], files_glob: str | None,
                    bucket_spec: tuple[bool, int] | None = None) -> Any:
        """The relation over ``dirs`` (files matching ``files_glob``); with ``bucket_spec``
        (sorted scan, groups), bucketed by the indexed columns (see :meth:`index_relation`)."""
        jvm_ = self._spark.sparkContext._jvm
        schema = jvm_.org.apache.spark.sql.types.DataType.fromJson(entry.content["schema"])
        reader = self._spark._jsparkSession.read().schema(schema).format("parquet")
        if files_glob is not None:
            reader = reader.option("pathGlobFilter", files_glob)
        found = reader.load(jvm_.org.apache.spark.api.python.PythonUtils.toSeq(dirs)) \
            .queryExecution().analyzed()
        if bucket_spec is not None:
            indexed, _ = covering_match.index_columns(entry.config)
            sorted_scan, groups = bucket_spec
            found = self._helpers.plans.withBucketSpec(
                found, int(entry.config["numBuckets"]), "\n".join(c.name for c in indexed),
                sorted_scan, groups)
        return found
