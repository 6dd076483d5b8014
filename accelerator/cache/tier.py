"""The cache of one cache path as this process sees it: the snapshot the rewrite serves from,
the usage it buffers, and the demoter. One :class:`CacheTier` per cache path and process
(:func:`tier_for`); no Spark here beyond the file system it is given.

The snapshot is refreshed at most every ``spark.accelerator.cache.refreshSeconds``, in a
background thread while the previous one keeps serving, so a query never waits for the
manifest (except the very first one of a process): a refresh lists the manifest's change
records and re-reads only the keys they name (nothing when nothing changed); changes this
process makes replace it at once. Hits, last uses, misses and bytes served are buffered in memory and written as one usage
record every :data:`FLUSH_SECONDS` (and before anything reads them back in this process).
"""
from __future__ import annotations

import atexit
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from accelerator.cache.manifest import CacheManifest, ManifestRead
from accelerator.cache.model import CacheEntry
from accelerator.cache.never import NeverMarkers
from accelerator.cache.policy import Eviction, choose_evictions
from accelerator.cache.serving import CacheView

log = logging.getLogger("accelerator.cache")

FLUSH_SECONDS = 2.0
#: the longest a snapshot goes without reading the whole manifest again
FULL_RELOAD_SECONDS = 300.0
#: the cache's size when neither the setting nor the file system gives one
DEFAULT_MAX_BYTES = 64 << 30


@dataclass(frozen=True, eq=False)
class UsedEntries:
    """Entries one query reads, counted together (see :meth:`CacheTier.record`)."""

    entries: tuple[CacheEntry, ...]
    bytes: int

    @classmethod
    def of(cls, entries: Iterable[CacheEntry]) -> "UsedEntries":
        found = tuple(entries)
        return cls(found, sum(e.bytes for e in found))


@dataclass(frozen=True)
class DemoterRun:
    """What one run of the demoter did."""

    evicted: list[Eviction]
    deleted: list[str]


class CacheTier:
    """The cache under one path, shared by every session of this process."""

    def __init__(self, fs: Any, path: str, clock: Callable[[], float] = time.time):
        self.fs = fs
        self.path = path
        self.manifest = CacheManifest(fs, path, clock)
        self.never = NeverMarkers(self.manifest)
        self._clock = clock
        self._lock = threading.Lock()
        self._view: CacheView | None = None
        self._read: ManifestRead | None = None   # the manifest the view was made of
        self._seen: set[str] = set()     # change records the snapshot has applied
        self._full_at = 0.0              # when the manifest was last read whole
        self._checked_at = 0.0           # when the change records were last listed
        self._generation = 0
        self._loading = False
        self._hits: dict[int, list] = {}   # id of a UsedEntries → [it, hits, last use]
        self._misses = 0
        self._flusher: threading.Timer | None = None

    # --- the snapshot served ----------------------------------------------------------
    def view(self, refresh_seconds: float) -> CacheView:
        """The current snapshot; loaded now if there is none, else reloaded in the background
        once it is older than ``refresh_seconds``."""
        with self._lock:
            current = self._view
            stale = current is not None and not self._loading \
                and self._clock() - self._checked_at >= refresh_seconds
            if stale:
                self._loading = True
        if current is None:
            return self.reload()
        if stale:
            threading.Thread(target=self._reload_quietly, daemon=True,
                             name="accelerator-cache-view").start()
        return current

    def reload(self) -> CacheView:
        """Reads the whole manifest into a new snapshot now."""
        loaded_at = self._clock()
        names = self.manifest.change_names()   # before the entries: later changes come next time
        read = self.manifest.read()
        return self._install(read, names, loaded_at, loaded_at)

    def refresh(self) -> CacheView:
        """A snapshot with what other processes changed since the last one: one listing of the
        change records when nothing changed; otherwise the folders of the keys they name read
        again, the batch files listed again (new ones read) and the usage (evictions) read
        again; everything every :data:`FULL_RELOAD_SECONDS` (a writer that died between its
        commit and its change record is seen then)."""
        with self._lock:
            view, seen, full_at, read = self._view, self._seen, self._full_at, self._read
        now = self._clock()
        if view is None or read is None or now - full_at >= FULL_RELOAD_SECONDS:
            return self.reload()
        names = self.manifest.change_names()
        new = names - seen
        if not new:   # nothing changed: the same snapshot (its decisions stay memoized)
            with self._lock:
                self._seen, self._checked_at, self._loading = names, now, False
            return view
        keys = self.manifest.changed_keys(new)
        if keys is None:
            return self.reload()
        return self._install(self.manifest.read(read, keys), names, None, now)

    def _install(self, read: ManifestRead, names: set[str],
                 full_at: float | None, checked_at: float) -> CacheView:
        entries = read.entries()
        with self._lock:
            self._generation += 1
            view = CacheView.of(entries, self._generation, checked_at)
            self._view = view
            self._read = read
            self._seen = names
            self._checked_at = checked_at
            if full_at is not None:
                self._full_at = full_at
            self._loading = False
        return view

    def _reload_quietly(self) -> None:
        try:
            self.refresh()
        except Exception:   # the previous snapshot keeps serving; tried again next time
            log.warning("could not reload the cache manifest under %s", self.path,
                        exc_info=True)
            with self._lock:
                self._loading = False

    # --- usage ------------------------------------------------------------------------
    def record(self, group: "UsedEntries", misses: int, now: float | None = None) -> None:
        """Buffers one query's use: a hit on each entry of ``group`` (the same object for every
        query a serving decision serves, so a query costs one dictionary update, not one per
        entry), ``misses`` files read from the source."""
        now = self._clock() if now is None else now
        with self._lock:
            if group.entries:
                slot = self._hits.setdefault(id(group), [group, 0, now])
                slot[1] += 1
                slot[2] = now
            self._misses += misses
            if self._flusher is None and (self._hits or self._misses):
                self._flusher = threading.Timer(FLUSH_SECONDS, self.flush)
                self._flusher.daemon = True
                self._flusher.start()

    def flush(self) -> None:
        """Writes the buffered usage as one record (nothing when there is none)."""
        with self._lock:
            groups, misses = list(self._hits.values()), self._misses
            self._hits, self._misses = {}, 0
            self._flusher = None
        if not groups and not misses:
            return
        uses: dict[str, list] = {}
        served = 0
        for group, hits, last in groups:
            served += hits * group.bytes
            for e in group.entries:
                slot = uses.setdefault(e.key, [0, last])
                slot[0] += hits
                slot[1] = max(slot[1], last)
        try:
            self.manifest.usage.record({k: (h, t) for k, (h, t) in uses.items()},
                                       misses=misses, bytes_served=served)
        except Exception:   # usage is best effort: a query must never fail for it
            log.warning("could not record cache usage under %s", self.path, exc_info=True)

    # --- space ------------------------------------------------------------------------
    def max_bytes(self, configured: int | None) -> int:
        """The cache's size: the setting, else half the file system's capacity, else
        :data:`DEFAULT_MAX_BYTES`."""
        if configured is not None:
            return configured
        capacity = self.fs.capacity(self.path) if hasattr(self.fs, "capacity") else None
        return capacity // 2 if capacity else DEFAULT_MAX_BYTES

    def demote(self, settings: Any, now: float | None = None) -> DemoterRun:
        """One run of the demoter: expired entries, then entries for space (see
        :mod:`accelerator.cache.policy`), then files whose grace period is over."""
        self.flush()
        now = self._clock() if now is None else now
        read = self.manifest.read()   # once, for both the choice and the collection
        chosen = choose_evictions(self.manifest.entries(read=read), now,
                                  self.max_bytes(settings.cache_max_bytes),
                                  settings.cache_max_usage_percent,
                                  settings.cache_cleanup_percent)
        done = {e.key for e in self.manifest.evict([c.entry for c in chosen], now, read)}
        deleted = self.manifest.collect(now, settings.cache_grace_seconds, read)
        self.refresh()
        return DemoterRun([c for c in chosen if c.entry.key in done], deleted)


_TIERS: dict[str, CacheTier] = {}
_TIERS_LOCK = threading.Lock()


def tier_for(fs: Any, path: str) -> CacheTier:
    """The process's tier of the cache under ``path`` (as the settings give it; the tier
    works on its qualified form), created on first use."""
    with _TIERS_LOCK:
        found = _TIERS.get(path)
    if found is not None:
        return found
    qualified = fs.qualify(path).rstrip("/")
    with _TIERS_LOCK:
        found = _TIERS.get(qualified) or CacheTier(fs, qualified)
        _TIERS[path] = _TIERS[qualified] = found
        return found


@atexit.register
def _flush_all() -> None:
    for tier in set(_TIERS.values()):
        tier.flush()
