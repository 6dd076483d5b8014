"""An index version's statistics in memory (path → FileEntry), with what queries derive from
them, computed once per version instead of once per query: each sketched expression's bounds
(for the first pass, :mod:`indexes.skipping.prefilter`) and, per listing of the source, which
of its files the statistics describe as they are now."""
from __future__ import annotations

import threading
from dataclasses import dataclass

from cachetools import LRUCache

from indexes.description import source_files
from indexes.skipping.prefilter import Bounds
from indexes.skipping.store import FileEntry

_LISTINGS_KEPT = 8


@dataclass(frozen=True)
class Listing:
    """A source listing ([path, size, mtime] rows) against the statistics: ``judged`` the files
    they describe (same size and modification time), in listing order; ``unindexed`` the
    others (always read); each path's ``position`` and ``size``; the ``total_bytes``."""

    judged: dict[str, FileEntry]
    unindexed: list[str]
    position: dict[str, int]
    size: dict[str, int]
    total_bytes: int


class StatsTable(dict):
    """The statistics of one index version: a dict of path → FileEntry, never changed once
    loaded (so what is derived from it stays true), shared by the queries of every thread."""

    def __init__(self, entries: dict[str, FileEntry]):
        super().__init__(entries)
        self._lock = threading.Lock()
        self._bounds: dict[tuple[str, str], Bounds] = {}
        self._listings: LRUCache[int, tuple[list, Listing]] = LRUCache(_LISTINGS_KEPT)

    def bounds(self, key: str, type_: str) -> Bounds:
        """Every file's bounds of the sketched expression ``key`` of type ``type_``."""
        with self._lock:
            found = self._bounds.get((key, type_))
        if found is None:
            found = Bounds(self, key, type_)
            with self._lock:
                self._bounds[(key, type_)] = found
        return found

    def listing(self, files: list) -> Listing:
        """``files`` (a listing the caller keeps unchanged: the index's recorded one or a
        described one it caches) against these statistics, remembered for the last few."""
        with self._lock:
            found = self._listings.get(id(files))
            if found is not None and found[0] is files:
                return found[1]
        judged: dict[str, FileEntry] = {}
        unindexed: list[str] = []
        listed = source_files(files)   # plain [path, size, mtime] lists too
        for f in listed:
            entry = self.get(f.path)
            if entry is None or entry.size != f.size or entry.mtime != f.mtime:
                unindexed.append(f.path)
            else:
                judged[f.path] = entry
        listing = Listing(judged, unindexed, {f.path: i for i, f in enumerate(listed)},
                          {f.path: f.size for f in listed}, sum(f.size for f in listed))
        with self._lock:
            self._listings[id(files)] = (files, listing)   # the least recently used goes
        return listing
