"""Which root paths some index or the cache is over, published to the JVM rule.

The JVM rule sends a plan to the rewriter only when it reads under such a root (with its
relations' fingerprints), and only when the plan holds what an index over that root needs to
serve it (see :class:`RootUse`). The roots of the indexes come with loading the ACTIVE indexes
of a system path (:meth:`IndexedRoots.active_indexes`), those of the cache with each new
snapshot of it (:meth:`IndexedRoots.cache_changed`).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from accelerator.cache.serving import CacheView
from accelerator.query.catalog import IndexCatalog
from accelerator.runtime.settings import Settings
from indexes import kinds
from indexes.kind import Serving
from indexes.lifecycle import IndexLifecycle
from indexes.log import IndexState
from indexes.version_cache import VersionCache


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


class IndexedRoots:
    """The ACTIVE indexes of each system path and the roots they and the cache are over, kept
    published to the JVM rule (``plans``: the PlanRewrite helper). Loading a system path's
    indexes also drops from ``versions`` what was derived from versions no longer in use."""

    def __init__(self, fs: Any, plans: Any, versions: VersionCache, catalog: IndexCatalog):
        self._fs = fs
        self._catalog = catalog
        self._plans = plans
        self._versions = versions
        self._lock = threading.Lock()
        self._roots: dict[str, list[tuple[str, RootUse]]] = {}   # indexed roots per system path
        self._cache_roots: dict[str, tuple[int, frozenset[str]]] = {}   # per cache path

    def active_indexes(self, settings: Settings) -> list[Any]:
        """ACTIVE indexes of a registered kind under the system path, from the driver's index
        catalog."""
        entries = self._catalog.entries(settings.system_path,
                                        lambda: self._load(settings.system_path),
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
            # a kind pruning through joins may serve a join whatever is filtered: without
            # constraint propagation no isnotnull(key) Filter names its key
            use = RootUse(kind.serving is Serving.PRUNE, kind.joins or kind.prunes_through_joins,
                          kind.filter_columns(e))
            uses.extend((p, use) for p in e.source.root_paths or [])
        with self._lock:
            self._roots[system_path] = uses
        self._publish()
        return entries

    def cache_changed(self, cache_path: str, view: CacheView) -> None:
        """Publishes the roots of a snapshot of the cache at ``cache_path`` (see
        :meth:`CacheView.roots`) when it is of another generation than the last published,
        and when it or the last one holds some."""
        with self._lock:
            published = self._cache_roots.get(cache_path)
            changed = published is None or published[0] != view.generation
            if changed:
                self._cache_roots[cache_path] = (view.generation, view.roots())
        if changed and (view.dirs or (published and published[1])):
            self._publish()

    def _publish(self) -> None:
        """Tells the JVM which root paths some index is over (and which a pruning kind is) or
        hold cached files, so their relations come with their fingerprint, and what a plan
        over each must hold for an index to serve it (see :class:`RootUse`)."""
        with self._lock:
            uses = [u for per_path in self._roots.values() for u in per_path]
            cached = set().union(*(d for _, d in self._cache_roots.values()))
        merged: dict[str, RootUse] = {p: RootUse(False, False, None) for p in cached}
        for path, use in uses:
            merged[path] = merged[path].merge(use) if path in merged else use
        self._plans.setIndexedRoots(
            "\n".join(sorted(merged)),
            "\n".join(sorted(p for p, u in merged.items() if u.prunes)),
            "\n".join(u.line(p) for p, u in sorted(merged.items())))
