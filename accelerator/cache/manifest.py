"""The cache's manifest: committed entries, usage and NEVER markers, over the file-system
protocol (:class:`indexes.fs.FileSystem`), shared safely by several processes. No JVM here.

Layout under the cache path::

    _manifest/entries/<key>/<seq>.json      versions of one entry; the highest ``seq`` is current
    _manifest/usage/, _manifest/totals/     usage (:mod:`accelerator.cache.usage`)
    _manifest/changes/<ms>-<uuid>.json      keys whose served state a writer changed (commits,
                                            evictions, collection), so readers re-read only those
    _manifest/never/<sha256 of root>.json   NEVER markers (:mod:`accelerator.cache.never`)
    data/<uuid>/<n>/part-*.parquet          packs: Parquet files of warm-ups, each holding the
                                            rows of several source files (an entry names its
                                            pack's folder and the files holding its rows)

Every file is written with ``create_exclusive`` (a temp file renamed into place), so a
half-written file is never listed under its final name and temp files (``*.tmp``) are ignored.
A change to an entry writes version ``seq + 1`` from the current one: of two racing writers
exactly one wins, the loser re-reads the new current version and applies its change again
(optimistic concurrency), so no update is lost. Usage (:attr:`CacheManifest.usage`) is
appended as records, never by rewriting an entry (see :mod:`accelerator.cache.usage`).

Reading every entry is one listing of the entries' folder, one listing of all key folders and
one read of all current versions (:meth:`FileSystem.list_each`, :meth:`FileSystem.read_each`),
not several round trips per entry.

Evicting marks the entry EVICTED at once (it stops being served); its files stay for a grace
period so that running queries keep their files, and :meth:`CacheManifest.collect` deletes them
once no other entry names them (a pack goes with the last of its entries).
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
from accelerator.cache.usage import RECORD_NAME, UsageLog, record_name
from accelerator.cache.versions import (MAX_ATTEMPTS, VERSION, delete_old, is_temp, latest,
                                        versions_of)
from indexes.errors import ConcurrentModificationError
from indexes.fs import FileInfo, FileSystem, in_parallel

logger = logging.getLogger("accelerator.cache.manifest")

_KEY = re.compile(r"[0-9a-f]{64}")
DEFAULT_GRACE_SECONDS = 3600.0


@dataclass(frozen=True)
class ManifestRead:
    """The manifest read once: per key, its folder's listing, current version number and entry
    (None when unreadable or gone)."""

    found: dict[str, tuple[list[FileInfo], int, CacheEntry | None]]


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
        self.usage = UsageLog(fs, self.path, clock)
        self._changes = f"{self.path}/_manifest/changes"
        self.never_path = f"{self.path}/_manifest/never"
        self._data = f"{self.path}/data"

    def now(self) -> float:
        """The manifest clock's time, epoch seconds."""
        return self._clock()

    # ------------------------------------------------------------------ reading

    def new_data_path(self) -> str:
        """A fresh directory for a warm-up to write into before committing entries naming
        folders below it."""
        return f"{self._data}/{uuid.uuid4().hex}"

    def _current(self, key: str) -> tuple[int, CacheEntry | None]:
        """The highest version number of ``key`` and its entry (-1, None when there is none; an
        unreadable version reads as None and is logged, so a new version replaces it)."""
        seq, text = latest(self.fs, f"{self._entries}/{key}")
        return seq, self._parsed(key, seq, text)

    def _current_each(self, keys: list[str]
                      ) -> list[tuple[list[FileInfo], int, CacheEntry | None]]:
        """For each key: the listing of its folder, its highest version number and its entry
        (as :meth:`_current`), all listed in one call and read in another; a key whose latest
        version is gone by the time it is read (collected meanwhile) is listed and read again."""
        listings = self.fs.list_each([f"{self._entries}/{k}" for k in keys])
        versions = [versions_of(listed) for listed in listings]
        texts = iter(self.fs.read_each([found[-1][1] for found in versions if found]))
        out = []
        for key, listed, found in zip(keys, listings, versions):
            text = next(texts) if found else None
            if found and text is None:
                listed = self.fs.list(f"{self._entries}/{key}")
                out.append((listed, *self._current(key)))
            else:
                seq = found[-1][0] if found else -1
                out.append((listed, seq, self._parsed(key, seq, text)))
        return out

    @staticmethod
    def _parsed(key: str, seq: int, text: str | None) -> CacheEntry | None:
        if text is None:
            return None
        try:
            return CacheEntry.from_json(text)
        except ValueError as exc:
            logger.warning("unreadable cache entry %s/%s ignored: %s", key, seq, exc)
            return None

    def get(self, key: str) -> CacheEntry | None:
        """The current entry of ``key`` (any state), with its usage."""
        usage = self.usage.read()
        entry = self._current(key)[1]
        return None if entry is None else usage.of(entry)

    def keys(self) -> list[str]:
        return sorted(f.name for f in self.fs.list(self._entries)
                      if f.is_dir and _KEY.fullmatch(f.name))

    def entries(self, include_evicted: bool = False,
                read: "ManifestRead | None" = None) -> list[CacheEntry]:
        """Every current entry (ACTIVE ones only unless ``include_evicted``), with its usage;
        from ``read`` when given (see :meth:`read`)."""
        usage = self.usage.read()
        read = self.read() if read is None else read
        out = [usage.of(e) for _, _, e in read.found.values() if e is not None]
        return [e for e in out if include_evicted or e.active]

    def read(self) -> "ManifestRead":
        """Every key's folder listing, current version number and entry, read once for
        :meth:`entries` and :meth:`collect` (the demoter's one read of the manifest)."""
        keys = self.keys()
        return ManifestRead(dict(zip(keys, self._current_each(keys))))

    # ------------------------------------------------------------------ writing

    def update(self, key: str,
               change: Callable[[CacheEntry | None], CacheEntry | None],
               absent: bool = False) -> CacheEntry | None:
        """Writes ``change(current)`` as the next version of ``key``, retrying on a lost race with
        the then current version; returns the entry now current. ``change`` returning None or
        the current entry itself writes nothing. ``absent``: the caller saw no entry of ``key``
        (a new file), so the first try writes the first version without reading (a race lost
        to another writer reads it then)."""
        for attempt in range(MAX_ATTEMPTS):
            seq, current = (-1, None) if absent and attempt == 0 else self._current(key)
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
        """:meth:`commit_all` of one entry."""
        return self.commit_all([(entry, supersedes)])[0]

    def _commit(self, entry: CacheEntry, supersedes: Iterable[CacheEntry] = (),
                absent: bool = False) -> CommitResult:
        """Commits a warmed entry (its data already under ``entry.data_path``).

        Over no current entry or an EVICTED one, the entry is committed. Over an ACTIVE one, it
        replaces it only if it holds more columns (a warm-up of the union, see
        :func:`accelerator.cache.model.plan_warmup`) or as many in a pack where the current one
        has none (the layout before packs), keeping the higher priority, the longer
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
                return replace(entry, retired=retired)
            priority = max(entry.priority, current.priority)
            ttl = merge_ttl(entry.ttl_seconds, current.ttl_seconds)
            wider = set(entry.columns) > set(current.columns)
            repacked = entry.packed and not current.packed \
                and set(entry.columns) >= set(current.columns)
            if wider or repacked:
                return replace(entry, priority=priority, ttl_seconds=ttl, created=current.created,
                               hits=current.hits, last_used=max(entry.last_used, current.last_used),
                               retired=(*current.retired, (current.data_path, now)))
            return replace(current, priority=priority, ttl_seconds=ttl)

        result = self.update(entry.key, change, absent)
        assert result is not None
        committed = result.data_path == entry.data_path and result.active
        if committed:
            self._evict([e for e in supersedes if e.key != entry.key], now)
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

    def commit_all(self, warmed: list[tuple[CacheEntry, Iterable[CacheEntry]]],
                   new_keys: frozenset[str] = frozenset()) -> list[CommitResult]:
        """Commits each (entry, supersedes) pair of a warm-up (see :meth:`_commit`), several at
        once, then records the keys changed for readers. ``new_keys``: keys the warm-up saw no
        entry of (see :meth:`update`'s ``absent``)."""
        pairs = [(e, tuple(s)) for e, s in warmed]
        results = in_parallel(lambda pair: self._commit(*pair, pair[0].key in new_keys), pairs)
        self._log_changes({e.key for e, _ in pairs} | {s.key for _, ss in pairs for s in ss})
        return results

    def evict(self, entries: Iterable[CacheEntry], now: float | None = None) -> list[CacheEntry]:
        """Marks each entry EVICTED at once, unless its key now holds other data (replaced by a
        warm-up since it was read) or it is evicted already; returns those evicted."""
        done = self._evict(entries, now)
        self._log_changes({e.key for e in done})
        return done

    def _evict(self, entries: Iterable[CacheEntry], now: float | None = None) -> list[CacheEntry]:
        now = self.now() if now is None else now
        given = {e.key: e for e in entries}

        def evict_one(key: str) -> CacheEntry | None:
            path = given[key].data_path

            def change(current: CacheEntry | None) -> CacheEntry | None:
                if current is None or not current.active or current.data_path != path:
                    return current
                return current.evicted(now)

            result = self.update(key, change)
            if result is not None and not result.active and result.evicted_at == now \
                    and result.data_path == path:
                return result
            return None

        done = [e for e in in_parallel(evict_one, list(given)) if e is not None]
        if done:
            self.usage.record({}, evictions=len(done), now=now)
        return done

    # ------------------------------------------------------------------ changes

    def _log_changes(self, keys: set[str]) -> None:
        if keys:
            self.fs.create_exclusive(f"{self._changes}/{record_name(self.now())}", json.dumps(sorted(keys)))

    def change_names(self) -> set[str]:
        """The change records now (one listing: what a reader checks before re-reading)."""
        return {f.name for f in self.fs.list(self._changes)
                if not f.is_dir and RECORD_NAME.fullmatch(f.name)}

    def changed_keys(self, names: Iterable[str]) -> set[str] | None:
        """The keys the change records ``names`` list; None when one of them is gone (collected:
        the reader has been away longer than the grace period and must read everything)."""
        found = self.fs.read_each([f"{self._changes}/{n}" for n in sorted(names)])
        if any(text is None for text in found):
            return None
        return {k for text in found for k in json.loads(text)}

    def entries_of(self, keys: Iterable[str]) -> dict[str, CacheEntry | None]:
        """The current entry of each key (None for a key without one), without usage."""
        keys = sorted(keys)
        return {k: entry for k, (_, _, entry) in zip(keys, self._current_each(keys))}

    # ------------------------------------------------------------------ collection

    def collect(self, now: float | None = None,
                grace_seconds: float = DEFAULT_GRACE_SECONDS, read: "ManifestRead | None" = None,
                changed: Iterable[str] = ()) -> list[str]:
        """Deletes what no query can still read, returning the deleted paths: the files of
        entries EVICTED more than ``grace_seconds`` ago (data and versions), data paths retired
        that long ago, versions older than the current one, data directories no entry names
        that were last written that long ago (warm-ups killed before they committed all their
        entries: keep the grace above the longest warm-up), files in live entries' packs no
        entry names written that long ago, and temp files left that long ago.
        Usage records are folded (:meth:`UsageLog.compact`), forgetting the deleted keys'.
        ``read``: the manifest as :meth:`read` read it a moment ago, the keys ``changed`` since
        read again (each deletion is safe against writers racing it, see :meth:`_collect_key`)."""
        now = self.now() if now is None else now
        cutoff = now - grace_seconds
        deleted: list[str] = []

        def delete(path: str) -> None:
            if self.fs.delete(path, recursive=True):
                deleted.append(path)

        batches = [(b.path, b.modification_time / 1000.0)
                   for b in self.fs.list(self._data) if b.is_dir]
        folders = {p: [(d.path, d.modification_time / 1000.0) for d in listed if d.is_dir]
                   for (p, _), listed in zip(batches, self.fs.list_each([p for p, _ in batches]))}
        referenced: set[str] = set()
        doomed: set[str] = set()
        removed: list[str] = []
        if read is None:
            found = self.read().found
        else:
            again = sorted(set(changed))
            found = {**read.found, **dict(zip(again, self._current_each(again)))}
        for used, done in in_parallel(lambda a: self._collect_key(*a, cutoff, delete, removed),
                                      sorted(found.items())):
            referenced |= used
            doomed |= done
        for path in sorted(doomed - referenced):   # a pack goes with the last entry naming it
            delete(path)
        self._collect_unnamed(found, set(removed), cutoff, delete)
        self._log_changes(set(removed))
        self.usage.compact(forget=removed)

        used = set(referenced)
        for path in referenced:
            while path.startswith(self._data + "/"):
                path = path.rpartition("/")[0]
                used.add(path)

        def unused(folder: str) -> bool:
            return folder not in used

        # a warm-up's folder, then the folders in it (listed before entries' data was deleted
        # in them, which made them newer), then the entries' folders in those
        for batch, written in batches:
            if unused(batch) and written <= cutoff and all(t <= cutoff for _, t in folders[batch]):
                delete(batch)
                continue
            for path, written_at in folders[batch]:
                if unused(path) and written_at <= cutoff:
                    delete(path)
                elif not unused(path) and path not in referenced:   # entries' folders in it
                    for sub in self.fs.list(path):
                        if sub.is_dir and unused(sub.path) \
                                and sub.modification_time / 1000.0 <= cutoff:
                            delete(sub.path)
        for folder in (self.usage.records_path, self.never_path):
            self._collect_old(folder, cutoff, delete)
        self._collect_old(self._changes, cutoff, delete, lambda name: True)
        seq = self.usage.current_seq()
        self._collect_old(self.usage.totals_path, cutoff, delete, lambda name: is_temp(name) or (
            (m := VERSION.fullmatch(name)) is not None and int(m.group(1)) < seq))
        return deleted

    def _collect_unnamed(self, found: dict, removed: set[str], cutoff: float,
                         delete: Callable[[str], None]) -> None:
        """Deletes the files in the packs of live entries that no entry names, written before
        ``cutoff``: rows of files whose entries a killed warm-up never committed, or that a
        concurrent warm-up committed first (Spark's ``_SUCCESS`` and checksums aside). A pack
        an entry retired within the grace period is left whole (queries planned on the
        retired entry may still read any of its files), as is one an entry names no files of."""
        live = [e for _, _, e in found.values() if e is not None and e.key not in removed]
        named = {path for e in live for path, _ in e.files}
        recent = {path for e in live for path, t in e.retired if t > cutoff}
        unlisted = {e.data_path for e in live if not e.files}   # files unknown: left whole
        packs = sorted({e.data_path for e in live} - recent - unlisted)

        def unnamed(folder: str) -> list[str]:
            out, pending = [], [folder]
            while pending:
                for info in self.fs.list(pending.pop()):
                    if info.is_dir:
                        pending.append(info.path)
                    elif not (info.name.startswith(".") or info.name == "_SUCCESS"
                              or info.path in named or info.modification_time / 1000.0 > cutoff):
                        out.append(info.path)
            return out

        for paths in in_parallel(unnamed, packs):
            for path in paths:
                delete(path)

    def _collect_key(self, key: str, found: tuple[list[FileInfo], int, CacheEntry | None],
                     cutoff: float, delete: Callable[[str], None],
                     removed: list[str]) -> tuple[set[str], set[str]]:
        """Collects one key, ``found`` as :meth:`_current_each` read it (appending the key to
        ``removed`` when its entry goes), and its old temp files; returns the data paths it
        still references and those it no longer needs (deleted by the caller unless another
        entry references them: entries of one pack share its folder)."""
        folder = f"{self._entries}/{key}"
        listed, seq, current = found
        delete_old(listed, cutoff, delete)
        versions = versions_of(listed)
        if current is None:
            return set(), set()
        if not current.active and current.evicted_at is not None \
                and current.evicted_at <= cutoff:
            for _, path in versions:   # only those listed: a re-warm's newer version stays
                delete(path)
            removed.append(key)
            try:
                if not self.fs.list(folder):
                    self.fs.delete(folder, recursive=False)
            except OSError:   # written to meanwhile
                pass
            return set(), {current.data_path, *(p for p, _ in current.retired)}
        for number, path in versions:
            if number < seq:
                delete(path)
        due = [p for p, t in current.retired if t <= cutoff]
        if due:
            self.update(key, lambda c: c if c is None else replace(
                c, retired=tuple(r for r in c.retired if r[0] not in due)))
        return ({current.data_path, *(p for p, t in current.retired if t > cutoff)}, set(due))

    def _collect_old(self, folder: str, cutoff: float, delete: Callable[[str], None],
                     doomed: Callable[[str], bool] = is_temp) -> None:
        """Deletes the files of ``folder`` (temp files unless ``doomed`` says otherwise) last
        written at or before ``cutoff``."""
        delete_old(self.fs.list(folder), cutoff, delete, doomed)
