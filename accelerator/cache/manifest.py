"""The cache's manifest: committed entries, usage and NEVER markers, over the file-system
protocol (:class:`indexes.fs.FileSystem`), shared safely by several processes. No JVM here.

Layout under the cache path::

    _manifest/entries/<key>/<seq>.json      versions of one entry; the highest ``seq`` is current
    _manifest/usage/<ms>-<uuid>.json        usage records (hits and last use per key, misses,
                                            bytes served, evictions) not yet folded in
    _manifest/totals/<seq>.json             versions of the folded usage: the counters of the
                                            whole cache, hits and last use per key
    _manifest/changes/<ms>-<uuid>.json      keys whose served state a writer changed (commits,
                                            evictions, collection), so readers re-read only those
    _manifest/never/<sha256 of root>.json   NEVER markers (:mod:`accelerator.cache.never`)
    data/<uuid>/...                         Parquet files of warm-ups (an entry names its folder)

Every file is written with ``create_exclusive`` (a temp file renamed into place), so a
half-written file is never listed under its final name and temp files (``*.tmp``) are ignored.
A change to an entry writes version ``seq + 1`` from the current one: of two racing writers
exactly one wins, the loser re-reads the new current version and applies its change again
(optimistic concurrency), so no update is lost. Usage is appended as small records with unique
names, never by rewriting the entry, so concurrent queries never lose each other's hits;
:meth:`CacheManifest.compact_usage` folds them into one new version of the totals (not of each
entry: one write however many entries were used), which names the records it counted
(``folded``) so that a reader never counts one twice. A key's folded usage outlives an eviction
and a re-warm of the same key (the same file version, read the same way) and is dropped when
:meth:`CacheManifest.collect` deletes the key.

Reading every entry is one listing of the entries' folder, one listing of all key folders and
one read of all current versions (:meth:`FileSystem.list_each`, :meth:`FileSystem.read_each`),
not several round trips per entry.

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
from typing import Callable, Iterable, Mapping

from accelerator.cache.model import CacheEntry, Priority, merge_ttl
from indexes.errors import ConcurrentModificationError
from indexes.fs import FileInfo, FileSystem, in_parallel

logger = logging.getLogger("accelerator.cache.manifest")

_VERSION = re.compile(r"(\d{10})\.json")
_USAGE = re.compile(r"\d{13}-[0-9a-f]{32}\.json")
_TOTALS = ("misses", "bytesServed", "evictions")
_KEY = re.compile(r"[0-9a-f]{64}")
MAX_ATTEMPTS = 100
DEFAULT_GRACE_SECONDS = 3600.0


def _is_temp(name: str) -> bool:
    return name.endswith(".tmp")


@dataclass(frozen=True)
class CommitResult:
    """The current entry after a commit; ``committed`` says whether it is the committed one
    (False: a concurrent warm-up's entry already held those columns, so the caller's data is
    not used and can be deleted)."""

    entry: CacheEntry
    committed: bool


@dataclass(frozen=True)
class UsageTotals:
    """Counters of the whole cache: relation files read from the source although their
    relation had cached files (``misses``), bytes read from the cache and entries evicted."""

    misses: int = 0
    bytes_served: int = 0
    evictions: int = 0


class CacheManifest:
    """The entries of one cache path. ``clock`` gives epoch seconds for times not passed in."""

    def __init__(self, fs: FileSystem, cache_path: str,
                 clock: Callable[[], float] = time.time):
        self.fs = fs
        self.path = cache_path.rstrip("/")
        self._clock = clock
        self._entries = f"{self.path}/_manifest/entries"
        self._usage = f"{self.path}/_manifest/usage"
        self._totals = f"{self.path}/_manifest/totals"
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

    def _versions(self, folder: str) -> list[tuple[int, str]]:
        return _versions_of(self.fs.list(folder))

    def _latest(self, folder: str) -> tuple[int, str | None]:
        """The highest version number in ``folder`` and its text (-1, None when there is none)."""
        for _ in range(MAX_ATTEMPTS):
            versions = self._versions(folder)
            if not versions:
                return -1, None
            seq, path = versions[-1]
            try:
                return seq, self.fs.read_text(path)
            except FileNotFoundError:   # collected between listing and reading: list again
                continue
        raise ConcurrentModificationError(f"{folder} kept changing while read")

    def _current(self, key: str) -> tuple[int, CacheEntry | None]:
        """The highest version number of ``key`` and its entry (-1, None when there is none; an
        unreadable version reads as None and is logged, so a new version replaces it)."""
        seq, text = self._latest(f"{self._entries}/{key}")
        return seq, self._parsed(key, seq, text)

    def _current_each(self, keys: list[str]
                      ) -> list[tuple[list[FileInfo], int, CacheEntry | None]]:
        """For each key: the listing of its folder, its highest version number and its entry
        (as :meth:`_current`), all listed in one call and read in another; a key whose latest
        version is gone by the time it is read (collected meanwhile) is listed and read again."""
        listings = self.fs.list_each([f"{self._entries}/{k}" for k in keys])
        versions = [_versions_of(listed) for listed in listings]
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

    def _usage_records(self) -> dict[str, dict]:
        """Every usage record not yet deleted, by name (records deleted while they are read are
        left out: they were folded)."""
        names = sorted(self._listed_usage())
        texts = self.fs.read_each([f"{self._usage}/{n}" for n in names])
        return {n: json.loads(t) for n, t in zip(names, texts) if t is not None}

    def _folded(self) -> tuple[int, dict]:
        """The current version number of the folded usage (the totals) and its content."""
        seq, text = self._latest(self._totals)
        folded = json.loads(text) if text else {}
        folded.setdefault("folded", [])
        folded.setdefault("entries", {})
        return seq, folded

    def _read_usage(self) -> tuple[dict, dict[str, dict]]:
        """The folded usage, then the records it has not folded yet (read in that order: a
        record folded and deleted in between is missed once, never counted twice)."""
        folded = self._folded()[1]
        done = set(folded["folded"])
        return folded, {n: r for n, r in self._usage_records().items() if n not in done}

    @staticmethod
    def _with_usage(entry: CacheEntry, folded: dict, records: dict[str, dict]) -> CacheEntry:
        """``entry`` with its key's folded usage and that of the ``records`` not folded yet."""
        uses = [u for u in [folded["entries"].get(entry.key),
                            *(r.get("entries", {}).get(entry.key) for r in records.values())]
                if u is not None]
        if not uses:
            return entry
        return replace(entry, hits=entry.hits + sum(int(h) for h, _ in uses),
                       last_used=max([entry.last_used, *(float(t) for _, t in uses)]))

    def get(self, key: str) -> CacheEntry | None:
        """The current entry of ``key`` (any state), with its usage."""
        folded, records = self._read_usage()
        entry = self._current(key)[1]
        return None if entry is None else self._with_usage(entry, folded, records)

    def keys(self) -> list[str]:
        return sorted(f.name for f in self.fs.list(self._entries)
                      if f.is_dir and _KEY.fullmatch(f.name))

    def entries(self, include_evicted: bool = False) -> list[CacheEntry]:
        """Every current entry (ACTIVE ones only unless ``include_evicted``), with its usage."""
        folded, records = self._read_usage()
        out = [self._with_usage(e, folded, records)
               for _, _, e in self._current_each(self.keys()) if e is not None]
        return [e for e in out if include_evicted or e.active]

    def totals(self) -> UsageTotals:
        """The cache's counters, usage not yet folded in included."""
        folded, records = self._read_usage()
        counts = {k: int(folded.get(k, 0)) + sum(int(r.get(k, 0)) for r in records.values())
                  for k in _TOTALS}
        return UsageTotals(counts["misses"], counts["bytesServed"], counts["evictions"])

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
        """:meth:`commit_all` of one entry."""
        return self.commit_all([(entry, supersedes)])[0]

    def _commit(self, entry: CacheEntry, supersedes: Iterable[CacheEntry] = ()) -> CommitResult:
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
                return replace(entry, retired=retired)
            priority = max(entry.priority, current.priority)
            ttl = merge_ttl(entry.ttl_seconds, current.ttl_seconds)
            if set(entry.columns) > set(current.columns):
                return replace(entry, priority=priority, ttl_seconds=ttl, created=current.created,
                               hits=current.hits, last_used=max(entry.last_used, current.last_used),
                               retired=(*current.retired, (current.data_path, now)))
            return replace(current, priority=priority, ttl_seconds=ttl)

        result = self.update(entry.key, change)
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

    def commit_all(self, warmed: list[tuple[CacheEntry, Iterable[CacheEntry]]]
                   ) -> list[CommitResult]:
        """Commits each (entry, supersedes) pair of a warm-up (see :meth:`_commit`), several at
        once, then records the keys changed for readers."""
        pairs = [(e, tuple(s)) for e, s in warmed]
        results = in_parallel(lambda pair: self._commit(*pair), pairs)
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
            self.record_usage({}, evictions=len(done), now=now)
        return done

    # ------------------------------------------------------------------ changes

    def _log_changes(self, keys: set[str]) -> None:
        if keys:
            name = f"{int(self.now() * 1000):013d}-{uuid.uuid4().hex}.json"
            self.fs.create_exclusive(f"{self._changes}/{name}", json.dumps(sorted(keys)))

    def change_names(self) -> set[str]:
        """The change records now (one listing: what a reader checks before re-reading)."""
        return {f.name for f in self.fs.list(self._changes)
                if not f.is_dir and _USAGE.fullmatch(f.name)}

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

    # ------------------------------------------------------------------ usage

    def record_usage(self, uses: Mapping[str, tuple[int, float]], misses: int = 0,
                     bytes_served: int = 0, evictions: int = 0,
                     now: float | None = None) -> None:
        """Appends one usage record: ``uses`` maps keys to (hits, last use); the counters add
        to :meth:`totals`. A serving process writes one per flush, not one per query."""
        now = self.now() if now is None else now
        name = f"{int(now * 1000):013d}-{uuid.uuid4().hex}.json"
        self.fs.create_exclusive(f"{self._usage}/{name}", json.dumps({
            "entries": {k: [int(h), float(t)] for k, (h, t) in uses.items()},
            "misses": int(misses), "bytesServed": int(bytes_served),
            "evictions": int(evictions)}))

    def _listed_usage(self) -> set[str]:
        return {f.name for f in self.fs.list(self._usage)
                if not f.is_dir and _USAGE.fullmatch(f.name)}

    def compact_usage(self, forget: Iterable[str] = ()) -> None:
        """Folds every usage record into one new version of the folded usage (the totals, with
        hits and last use per key), then deletes it; ``forget``: keys whose folded usage is
        dropped (their entries were deleted). Safe to run in several processes at once and to
        interrupt."""
        records = self._usage_records()
        forget = set(forget)
        if not records and not forget:
            return
        for _ in range(MAX_ATTEMPTS):
            seq, current = self._folded()
            # listed after reading ``current``: a record still listed is not deleted yet, so if
            # ``current`` has not folded it, no version before ours has; names folded before and
            # no longer listed were deleted, never to be counted again
            listed = self._listed_usage()
            new = [n for n in records if n in listed and n not in current["folded"]]
            gone = forget & set(current["entries"])
            if not new and not gone:
                break
            out = {k: int(current.get(k, 0)) + sum(int(records[n].get(k, 0)) for n in new)
                   for k in _TOTALS}
            uses = {k: u for k, u in current["entries"].items() if k not in gone}
            for n in new:
                for key, (hits, last) in records[n].get("entries", {}).items():
                    before = uses.get(key, (0, 0.0))
                    uses[key] = [int(before[0]) + int(hits), max(float(before[1]), float(last))]
            out["entries"] = uses
            out["folded"] = sorted({n for n in current["folded"] if n in listed} | set(new))
            if self.fs.create_exclusive(f"{self._totals}/{seq + 1:010d}.json", json.dumps(out)):
                break
        else:
            raise ConcurrentModificationError("could not fold the cache's usage")
        for name in records:
            self.fs.delete(f"{self._usage}/{name}", recursive=False)

    # ------------------------------------------------------------------ collection

    def collect(self, now: float | None = None,
                grace_seconds: float = DEFAULT_GRACE_SECONDS) -> list[str]:
        """Deletes what no query can still read, returning the deleted paths: the files of
        entries EVICTED more than ``grace_seconds`` ago (data and versions), data paths retired
        that long ago, versions older than the current one, data directories no entry names
        that were last written that long ago (warm-ups killed before they committed all their
        entries: keep the grace above the longest warm-up), and temp files left that long ago.
        Usage records are folded (:meth:`compact_usage`), forgetting the deleted keys'."""
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
        removed: list[str] = []
        keys = self.keys()
        for used in in_parallel(lambda a: self._collect_key(*a, cutoff, delete, removed),
                                list(zip(keys, self._current_each(keys)))):
            referenced |= used
        self._log_changes(set(removed))
        self.compact_usage(forget=removed)

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
        for folder in (self._usage, self.never_path):
            self._collect_old(folder, cutoff, delete)
        self._collect_old(self._changes, cutoff, delete, lambda name: True)
        seq, _ = self._latest(self._totals)
        self._collect_old(self._totals, cutoff, delete, lambda name: name.endswith(".tmp") or (
            (m := _VERSION.fullmatch(name)) is not None and int(m.group(1)) < seq))
        return deleted

    def _collect_key(self, key: str, found: tuple[list[FileInfo], int, CacheEntry | None],
                     cutoff: float, delete: Callable[[str], None],
                     removed: list[str]) -> set[str]:
        """Collects one key, ``found`` as :meth:`_current_each` read it (appending the key to
        ``removed`` when its entry goes), and its old temp files; the data paths it still
        references."""
        folder = f"{self._entries}/{key}"
        listed, seq, current = found
        _delete_old(listed, cutoff, delete)
        versions = _versions_of(listed)
        if current is None:
            return set()
        if not current.active and current.evicted_at is not None \
                and current.evicted_at <= cutoff:
            for path in [current.data_path, *(p for p, _ in current.retired)]:
                delete(path)
            for _, path in versions:   # only those listed: a re-warm's newer version stays
                delete(path)
            removed.append(key)
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
                     doomed: Callable[[str], bool] = _is_temp) -> None:
        """Deletes the files of ``folder`` (temp files unless ``doomed`` says otherwise) last
        written at or before ``cutoff``."""
        _delete_old(self.fs.list(folder), cutoff, delete, doomed)


def _versions_of(listed: list[FileInfo]) -> list[tuple[int, str]]:
    """The versions (number, path) among the files of a listing, in order."""
    return sorted((int(m.group(1)), f.path) for f in listed
                  if not f.is_dir and (m := _VERSION.fullmatch(f.name)))


def _delete_old(listed: list[FileInfo], cutoff: float, delete: Callable[[str], None],
                doomed: Callable[[str], bool] = _is_temp) -> None:
    """Deletes the files of a listing that ``doomed`` names (temp files) last written at or
    before ``cutoff``."""
    for f in listed:
        if not f.is_dir and doomed(f.name) and f.modification_time / 1000.0 <= cutoff:
            delete(f.path)
