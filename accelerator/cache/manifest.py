"""The cache's manifest: committed entries, usage and NEVER markers, over the file-system
protocol (:class:`indexes.fs.FileSystem`), shared safely by several processes. No JVM here.

Layout under the cache path::

    _manifest/entries/<key>/<seq>.json      versions of one entry; the highest ``seq`` is current
    _manifest/usage/<key>/<ms>-<uuid>.json  usage records (hits, last use) not yet folded in
    _manifest/never/<sha256 of root>.json   NEVER markers (:mod:`accelerator.cache.never`)
    data/<key>/<uuid>/                      an entry's Parquet files (written by a warm-up)

Every file is written with ``create_exclusive`` (a temp file renamed into place), so a
half-written file is never listed under its final name and temp files (``*.tmp``) are ignored.
A change to an entry writes version ``seq + 1`` from the current one: of two racing writers
exactly one wins, the loser re-reads the new current version and applies its change again
(optimistic concurrency), so no update is lost. Usage is appended as small records with unique
names, never by rewriting the entry, so concurrent queries never lose each other's hits;
:meth:`CacheManifest.compact_usage` folds them into a new version, which names the records it
counted (``usage_folded``) so that a reader never counts one twice.

Evicting marks the entry EVICTED at once (it stops being served); its files stay for a grace
period so that running queries keep their files, and :meth:`CacheManifest.collect` deletes them.
"""
from __future__ import annotations

import json
import logging
import re
import time
import uuid
from dataclasses import dataclass, replace
from typing import Callable, Iterable

from accelerator.cache.model import CacheEntry, Priority, merge_ttl
from indexes.errors import ConcurrentModificationError
from indexes.fs import FileSystem

logger = logging.getLogger("accelerator.cache.manifest")

_VERSION = re.compile(r"(\d{10})\.json")
_USAGE = re.compile(r"\d{13}-[0-9a-f]{32}\.json")
_KEY = re.compile(r"[0-9a-f]{64}")
MAX_ATTEMPTS = 100
DEFAULT_GRACE_SECONDS = 3600.0


@dataclass(frozen=True)
class CommitResult:
    """The current entry after a commit; ``committed`` says whether it is the committed one
    (False: a concurrent warm-up's entry already held those columns, so the caller's data is
    not used and can be deleted)."""

    entry: CacheEntry
    committed: bool


class CacheManifest:
    """The entries of one cache path. ``clock`` gives epoch seconds for times not passed in."""

    def __init__(self, fs: FileSystem, cache_path: str,
                 clock: Callable[[], float] = time.time):
        self.fs = fs
        self.path = cache_path.rstrip("/")
        self._clock = clock
        self._entries = f"{self.path}/_manifest/entries"
        self._usage = f"{self.path}/_manifest/usage"
        self.never_path = f"{self.path}/_manifest/never"
        self._data = f"{self.path}/data"

    def now(self) -> float:
        """The manifest clock's time, epoch seconds."""
        return self._clock()

    # ------------------------------------------------------------------ reading

    def new_data_path(self, key: str) -> str:
        """A fresh directory for a warm-up to write the data of ``key`` into before committing."""
        return f"{self._data}/{key}/{uuid.uuid4().hex}"

    def _versions(self, key: str) -> list[tuple[int, str]]:
        found = [(int(m.group(1)), f.path) for f in self.fs.list(f"{self._entries}/{key}")
                 if not f.is_dir and (m := _VERSION.fullmatch(f.name))]
        return sorted(found)

    def _current(self, key: str) -> tuple[int, CacheEntry | None]:
        """The highest version number of ``key`` and its entry (-1, None when there is none; an
        unreadable version reads as None and is logged, so a new version replaces it)."""
        for _ in range(MAX_ATTEMPTS):
            versions = self._versions(key)
            if not versions:
                return -1, None
            seq, path = versions[-1]
            try:
                text = self.fs.read_text(path)
            except FileNotFoundError:   # collected between listing and reading: list again
                continue
            try:
                return seq, CacheEntry.from_json(text)
            except ValueError as exc:
                logger.warning("unreadable cache entry %s ignored: %s", path, exc)
                return seq, None
        raise ConcurrentModificationError(f"the cache entry {key} kept changing while read")

    def _usage_records(self, key: str) -> dict[str, str]:
        return {f.name: f.path for f in self.fs.list(f"{self._usage}/{key}")
                if not f.is_dir and _USAGE.fullmatch(f.name)}

    def get(self, key: str) -> CacheEntry | None:
        """The current entry of ``key`` (any state), with the usage not yet folded in."""
        for _ in range(MAX_ATTEMPTS):
            records = self._usage_records(key)
            entry = self._current(key)[1]
            if entry is None:
                return None
            try:
                uses = [json.loads(self.fs.read_text(path)) for name, path in records.items()
                        if name not in entry.usage_folded]
            except FileNotFoundError:   # folded and deleted meanwhile: read again
                continue
            if not uses:
                return entry
            return replace(entry, hits=entry.hits + sum(int(u["hits"]) for u in uses),
                           last_used=max([entry.last_used, *(float(u["last_used"]) for u in uses)]))
        raise ConcurrentModificationError(f"the cache entry {key} kept changing while read")

    def keys(self) -> list[str]:
        return sorted(f.name for f in self.fs.list(self._entries)
                      if f.is_dir and _KEY.fullmatch(f.name))

    def entries(self, include_evicted: bool = False) -> list[CacheEntry]:
        """Every current entry (ACTIVE ones only unless ``include_evicted``)."""
        out = [e for e in map(self.get, self.keys()) if e is not None]
        return [e for e in out if include_evicted or e.active]

    # ------------------------------------------------------------------ writing

    def update(self, key: str,
               change: Callable[[CacheEntry | None], CacheEntry | None]) -> CacheEntry | None:
        """Writes ``change(current)`` as the next version of ``key``, retrying on a lost race with
        the then current version; returns the entry now current. ``change`` returning None or
        the current entry itself writes nothing."""
        for _ in range(MAX_ATTEMPTS):
            seq, current = self._current(key)
            new = change(current)
            if new is None or new == current:
                return current
            if new.key != key:
                raise ValueError(f"entry of key {new.key} written under {key}")
            if self.fs.create_exclusive(f"{self._entries}/{key}/{seq + 1:010d}.json",
                                        new.to_json()):
                return new
        raise ConcurrentModificationError(
            f"could not update the cache entry {key}: other writers kept changing it")

    def commit(self, entry: CacheEntry, supersedes: Iterable[CacheEntry] = ()) -> CommitResult:
        """Commits a warmed entry (its data already under ``entry.data_path``).

        Over no current entry or an EVICTED one, the entry is committed. Over an ACTIVE one, it
        replaces it only if it holds more columns (a warm-up of the union, see
        :func:`accelerator.cache.model.plan_warmup`), keeping the higher priority, the longer
        TTL and the usage; otherwise the current entry stays (with the higher priority and the
        longer TTL) and ``committed`` is False. Replaced data paths are retired (deleted by
        :meth:`collect` after the grace period). Once committed, the ``supersedes`` entries of
        other keys (older versions of the file) are evicted.
        """
        now = self.now()

        def change(current: CacheEntry | None) -> CacheEntry | None:
            if current is None:
                return entry
            if current.data_path == entry.data_path:
                return current
            if not current.active:
                retired = (*current.retired, (current.data_path, current.evicted_at or now))
                return replace(entry, retired=retired, usage_folded=current.usage_folded)
            priority = max(entry.priority, current.priority)
            ttl = merge_ttl(entry.ttl_seconds, current.ttl_seconds)
            if set(entry.columns) > set(current.columns):
                return replace(entry, priority=priority, ttl_seconds=ttl, created=current.created,
                               hits=current.hits, last_used=max(entry.last_used, current.last_used),
                               retired=(*current.retired, (current.data_path, now)),
                               usage_folded=current.usage_folded)
            return replace(current, priority=priority, ttl_seconds=ttl)

        result = self.update(entry.key, change)
        assert result is not None
        committed = result.data_path == entry.data_path and result.active
        if committed:
            self.evict([e for e in supersedes if e.key != entry.key], now)
        return CommitResult(result, committed)

    def raise_terms(self, key: str, priority: Priority,
                    ttl_seconds: int | None) -> CacheEntry | None:
        """Raises the priority and lengthens the TTL of the ACTIVE entry of ``key`` (never
        lowers or shortens them); None when there is no ACTIVE entry."""
        def change(current: CacheEntry | None) -> CacheEntry | None:
            if current is None or not current.active:
                return current
            return replace(current, priority=max(priority, current.priority),
                           ttl_seconds=merge_ttl(ttl_seconds, current.ttl_seconds))

        result = self.update(key, change)
        return result if result is not None and result.active else None

    def evict(self, entries: Iterable[CacheEntry], now: float | None = None) -> list[CacheEntry]:
        """Marks each entry EVICTED at once, unless its key now holds other data (replaced by a
        warm-up since it was read) or it is evicted already; returns those evicted."""
        now = self.now() if now is None else now
        done = []
        for entry in entries:
            def change(current: CacheEntry | None, path: str = entry.data_path
                       ) -> CacheEntry | None:
                if current is None or not current.active or current.data_path != path:
                    return current
                return current.evicted(now)

            result = self.update(entry.key, change)
            if result is not None and not result.active and result.evicted_at == now \
                    and result.data_path == entry.data_path:
                done.append(result)
        return done

    # ------------------------------------------------------------------ usage

    def record_use(self, key: str, now: float | None = None, hits: int = 1) -> None:
        """Appends a usage record for ``key`` (``hits`` reads at ``now``). A serving session
        records one per query and entry, not one per file read."""
        now = self.now() if now is None else now
        name = f"{int(now * 1000):013d}-{uuid.uuid4().hex}.json"
        self.fs.create_exclusive(f"{self._usage}/{key}/{name}",
                                 json.dumps({"hits": int(hits), "last_used": float(now)}))

    def compact_usage(self, key: str) -> CacheEntry | None:
        """Folds the usage records of ``key`` into a new version and deletes them."""
        def change(current: CacheEntry | None) -> CacheEntry | None:
            if current is None:
                return None
            records = self._usage_records(key)   # listed after reading ``current``: see below
            new = [json.loads(self.fs.read_text(p)) for n, p in records.items()
                   if n not in current.usage_folded]
            # names folded before but no longer listed were deleted; the listed ones are
            # exactly the records counted so far, or counted now
            if not new and set(records) == set(current.usage_folded):
                return current
            return replace(current, usage_folded=tuple(sorted(records)),
                           hits=current.hits + sum(int(u["hits"]) for u in new),
                           last_used=max([current.last_used,
                                          *(float(u["last_used"]) for u in new)]))

        for _ in range(MAX_ATTEMPTS):
            try:
                result = self.update(key, change)
                break
            except FileNotFoundError:   # another compaction folded and deleted a record
                continue
        else:
            raise ConcurrentModificationError(f"could not fold the usage of cache entry {key}")
        if result is not None:
            for name in result.usage_folded:
                self.fs.delete(f"{self._usage}/{key}/{name}", recursive=False)
        return self.get(key)

    # ------------------------------------------------------------------ collection

    def collect(self, now: float | None = None,
                grace_seconds: float = DEFAULT_GRACE_SECONDS) -> list[str]:
        """Deletes what no query can still read, returning the deleted paths: the files of
        entries EVICTED more than ``grace_seconds`` ago (data, versions, usage records), data
        paths retired that long ago, versions older than the current one, data directories no
        entry names that were last written that long ago (warm-ups that never committed: keep
        the grace above the longest warm-up), and temp files left that long ago."""
        now = self.now() if now is None else now
        cutoff = now - grace_seconds
        deleted: list[str] = []

        def delete(path: str) -> None:
            if self.fs.delete(path, recursive=True):
                deleted.append(path)

        data_dirs = [(d.path, d.modification_time / 1000.0)
                     for k in self.fs.list(self._data) if k.is_dir
                     for d in self.fs.list(k.path) if d.is_dir]
        usage_dirs = [d for d in self.fs.list(self._usage) if d.is_dir]
        keys = self.keys()
        referenced: set[str] = set()
        for key in keys:
            referenced |= self._collect_key(key, cutoff, delete)
        for path, written in data_dirs:
            if path not in referenced and written <= cutoff:
                delete(path)
        for sub in usage_dirs:   # records of keys that have no entry (used, never committed)
            if sub.name not in keys:
                self._collect_old(sub.path, cutoff, delete, lambda name: True)
        for sub in self.fs.list(self._entries):
            if sub.is_dir:
                self._collect_old(sub.path, cutoff, delete)
        for sub in usage_dirs:
            self._collect_old(sub.path, cutoff, delete)
        self._collect_old(self.never_path, cutoff, delete)
        return deleted

    def _collect_key(self, key: str, cutoff: float,
                     delete: Callable[[str], None]) -> set[str]:
        """Collects one key; the data paths it still references."""
        versions = self._versions(key)
        seq, current = self._current(key)
        if current is None:
            return set()
        if not current.active and current.evicted_at is not None \
                and current.evicted_at <= cutoff:
            for path in [current.data_path, *(p for p, _ in current.retired)]:
                delete(path)
            for path in self._usage_records(key).values():
                delete(path)
            for _, path in versions:   # only those listed: a re-warm's newer version stays
                delete(path)
            for folder in (f"{self._entries}/{key}", f"{self._usage}/{key}"):
                try:
                    if not self.fs.list(folder):
                        self.fs.delete(folder, recursive=False)
                except OSError:   # written to meanwhile
                    pass
            return set()
        for number, path in versions:
            if number < seq:
                delete(path)
        due = [p for p, t in current.retired if t <= cutoff]
        for path in due:
            delete(path)
        if due:
            self.update(key, lambda c: c if c is None else replace(
                c, retired=tuple(r for r in c.retired if r[0] not in due)))
        return {current.data_path, *(p for p, _ in current.retired)}

    def _collect_old(self, folder: str, cutoff: float, delete: Callable[[str], None],
                     doomed: Callable[[str], bool] = lambda name: name.endswith(".tmp")) -> None:
        """Deletes the files of ``folder`` (temp files unless ``doomed`` says otherwise) last
        written at or before ``cutoff``."""
        for f in self.fs.list(folder):
            if not f.is_dir and doomed(f.name) and f.modification_time / 1000.0 <= cutoff:
                delete(f.path)
