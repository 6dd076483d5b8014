"""Serving a plan's relations from the cache: what the cache serves of each relation no index
replaces (:class:`CacheDecision`, decided in pure Python by :mod:`accelerator.cache.serving`),
the swap of the served files into the plan, and the hits and misses counted per query."""
from __future__ import annotations

import threading
from typing import Any

from cachetools import FIFOCache

from accelerator.cache import serving as cache_serving
from accelerator.cache.tier import UsedEntries, tier_for
from accelerator.query.decisions import CacheDecision, RelationDecision
from accelerator.query.indexed_roots import IndexedRoots
from accelerator.query.relation_files import RelationFiles
from accelerator.runtime.settings import Settings
from indexes import kinds
from indexes.kind import Serving
from indexes.plan import PlanNode

#: relations' cache serving decisions kept (with their JVM file maps), oldest dropped first
CACHE_DECISIONS_KEPT = 16
NO_ENTRIES = UsedEntries((), 0)


class CacheRewrite:
    """Serves relations from the cache of the session's cache path, through the JVM's
    helpers (``helpers``: :class:`accelerator.runtime.jvm.JvmHelpers`); new snapshots of the cache
    publish their roots through ``roots``."""

    def __init__(self, fs: Any, helpers: Any, roots: IndexedRoots, files: RelationFiles):
        self._fs = fs
        self._helpers = helpers
        self._roots = roots
        self._files = files
        self._lock = threading.Lock()
        self._decisions: FIFOCache = FIFOCache(CACHE_DECISIONS_KEPT)

    def view(self, settings: Settings) -> cache_serving.CacheView | None:
        """The snapshot of the session's cache (None when serving is off or nothing is
        cached), publishing its roots to the JVM when it changed."""
        if not settings.cache_enabled:
            return None
        view = tier_for(self._fs, settings.cache_path).view(settings.cache_refresh_seconds)
        self._roots.cache_changed(settings.cache_path, view)
        return view if view.by_path else None

    def decide(self, plan: Any, relations: list[PlanNode], decisions: list[RelationDecision],
               view: cache_serving.CacheView, settings: Settings, payload: dict,
               unsupported: str | None) -> None:
        """Sets what the cache serves of each relation (after the indexes were chosen);
        ``unsupported`` says why the plan's shape keeps the cache out, if it does."""
        for decision, relation in zip(decisions, relations):
            decision.cache = self._decision(plan, relation, decision, view, settings, payload,
                                            unsupported)

    def _decision(self, plan: Any, relation: PlanNode, decision: RelationDecision,
                  view: cache_serving.CacheView, settings: Settings, payload: dict,
                  unsupported: str | None) -> CacheDecision | None:
        """What the cache serves of one relation (None when no cached file is under its
        roots)."""
        description = decision.description
        if not view.covers(description.root_paths or []):
            return None
        if unsupported:
            return CacheDecision("PLAN_NOT_SUPPORTED", unsupported)
        if decision.chosen is not None and \
                kinds.kind_of(decision.chosen.index).serving is Serving.REPLACE:
            return CacheDecision("INDEX_APPLIED", f"the index '{decision.chosen.index.name}' "
                                 "answers this relation (an index wins over the cache)")
        if description.bucketed:
            return CacheDecision("BUCKETED", "bucketed relations are not served from the cache")
        if not description.fingerprinted:
            description = decision.description = description.with_listing(
                self._files.describe(plan, decision.ordinal, 1))
        fingerprint = description.fingerprint
        if fingerprint is None:
            return CacheDecision("NO_FILE_LIST", "the relation does not list its files")
        if description.plain_files:   # only Delta's own scan reads them right
            return CacheDecision("TABLE_FORMAT", f"the {description.table_format} table is not "
                                 f"served from the cache: {description.plain_files}")
        read_key = cache_serving.read_key_of(description, payload["readSettings"])
        required = cache_serving.required_columns(relation,
                                                  description.partition_columns or [])
        memo_key = (settings.cache_path, fingerprint, read_key, required, view.generation)
        with self._lock:
            found = self._decisions.get(memo_key)
        if found is None:
            # the files index matching already fetched, else those described (once per list)
            files = description.files or self._files.files(plan, decision, [])
            serving = cache_serving.plan_serving(view, read_key, files or [], required)
            lines = "\n".join(
                "\t".join([path, str(e.tag), str(e.pack_files or 0),
                           *(str(x) for f in e.files for x in f)])
                for path, e in serving.served.items())
            found = (serving, self._helpers.cache.files(lines) if serving.served else None,
                     UsedEntries.of(serving.served.values()))
            with self._lock:
                self._decisions[memo_key] = found
        serving, jfiles, used = found
        if jfiles is None:
            return CacheDecision("NOT_SERVED", "no file of the relation is served from the "
                                 "cache", serving, None, required, used)
        return CacheDecision("APPLIED", "", serving, jfiles, required, used)

    def serve(self, plan: Any, decision: RelationDecision) -> Any:
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

    def record_use(self, decisions: list[RelationDecision], settings: Settings) -> None:
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
