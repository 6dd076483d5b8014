"""The cache's manifest: committed entries, usage and NEVER markers, over the file-system
protocol (:class:`indexes.fs.FileSystem`), shared safely by several processes. No JVM here.

Layout under the cache path::

    _manifest/batches/<ms>-<uuid>.jsonl     a warm-up's new entries in one file
                                            (:mod:`accelerator.cache.batches`)
    _manifest/entries/<key>/<seq>.json      versions of one entry, written when an existing entry
                                            changes (and by the layout before batch files); the
                                            highest ``seq`` is current, over the key's batch puts
    _manifest/usage/, _manifest/totals/     usage and evictions (:mod:`accelerator.cache.usage`)
    _manifest/changes/<ms>-<uuid>.json      keys whose folders a writer changed (commits, collection;
                                            an empty list when batch files or evictions changed),
                                            so readers re-read only those
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

Reading every entry is one listing of the batch files and a read of those not read before, one
listing of the entries' folder, one listing of the key folders and one read of their current
versions (:meth:`FileSystem.list_each`, :meth:`FileSystem.read_each`), and the usage: a warm-up
of thousands of new files adds one file to read, not thousands.

Evicting records the eviction of each entry's data path in one usage record (it stops being
served at once); its files stay for a grace period so that running queries keep their files,
and :meth:`CacheManifest.collect` (:mod:`accelerator.cache.collection`) deletes them once no other entry names them (a pack goes with
the last of its entries), and a batch file once none of its entries can be served again.
"""
from __future__ import annotations

import json
import logging
import re
import time
import uuid
from dataclasses import dataclass, replace
from typing import Callable, Iterable

from accelerator.cache.batches import Batches, BatchLog
from accelerator.cache.collection import Collection
from accelerator.cache.model import CacheEntry, Priority, merge_ttl
from accelerator.cache.usage import RECORD_NAME, Usage, UsageLog, record_name
from accelerator.cache.versions import MAX_ATTEMPTS, latest, versions_of
from indexes.errors import ConcurrentModificationError
from indexes.fs import FileInfo, FileSystem, in_parallel

logger = logging.getLogger("accelerator.cache.manifest")

_KEY = re.compile(r"[0-9a-f]{64}")
DEFAULT_GRACE_SECONDS = 3600.0


@dataclass(frozen=True)
class ManifestRead:
    """The manifest read once: per key with a folder of versions, its folder's listing, current
    version number and entry as written (None when unreadable or gone); the batch files; the
    usage (hits and evictions)."""

    found: dict[str, tuple[list[FileInfo], int, CacheEntry | None]]
    batches: Batches
    usage: Usage

    def keys(self) -> list[str]:
        """Every key with an entry, in a folder of its own or in a batch file."""
        return sorted({k for k, (_, seq, _) in self.found.items() if seq >= 0}
                      | {k for k, puts in self.batches.puts.items()
                         if any(not self.usage.is_collected(k, e.data_path) for e in puts)})

    def current(self, key: str) -> CacheEntry | None:
        """The current entry of ``key`` (its folder's current version, else its batch files'
        puts), EVICTED when its eviction was recorded; without usage."""
        _, seq, written = self.found.get(key, ([], -1, None))
        if seq < 0:
            written = self.batches.winner(key, self.usage.evicted_at, self.usage.is_collected)
        return self.usage.evicted(written)

    def entries(self) -> list[CacheEntry]:
        """Every key's current entry (any state), with its usage."""
        return [self.usage.of(e) for e in map(self.current, self.keys()) if e is not None]


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
        self.entries_path = f"{self.path}/_manifest/entries"
        self.usage = UsageLog(fs, self.path, clock)
        self.batches = BatchLog(fs, self.path)
        self.changes_path = f"{self.path}/_manifest/changes"
        self.never_path = f"{self.path}/_manifest/never"
        self.data_root = f"{self.path}/data"

    def now(self) -> float:
        """The manifest clock's time, epoch seconds."""
        return self._clock()

    # ------------------------------------------------------------------ reading

    def new_data_path(self) -> str:
        """A fresh directory for a warm-up to write into before committing entries naming
        folders below it."""
        return f"{self.data_root}/{uuid.uuid4().hex}"

    def _current(self, key: str, base: ManifestRead) -> tuple[int, CacheEntry | None]:
        """The highest version number of ``key`` and its entry, EVICTED when its eviction was
        recorded (-1 and the entry of its batch files when it has no version; an unreadable
        version reads as None and is logged, so a new version replaces it). ``base`` gives the
        batch files and the evictions (a moment old is safe: see :mod:`accelerator.cache.batches`)."""
        seq, text = latest(self.fs, f"{self.entries_path}/{key}")
        if seq < 0:
            return seq, base.current(key)
        return seq, base.usage.evicted(self._parsed(key, seq, text))

    def _current_each(self, keys: list[str]
                      ) -> list[tuple[list[FileInfo], int, CacheEntry | None]]:
        """For each key: the listing of its folder, its highest version number and its entry
        (as :meth:`_current`), all listed in one call and read in another; a key whose latest
        version is gone by the time it is read (collected meanwhile) is listed and read again."""
        listings = self.fs.list_each([f"{self.entries_path}/{k}" for k in keys])
        versions = [versions_of(listed) for listed in listings]
        texts = iter(self.fs.read_each([found[-1][1] for found in versions if found]))
        out = []
        for key, listed, found in zip(keys, listings, versions):
            text = next(texts) if found else None
            if found and text is None:
                listed = self.fs.list(f"{self.entries_path}/{key}")
                seq, text = latest(self.fs, f"{self.entries_path}/{key}")
                out.append((listed, seq, self._parsed(key, seq, text)))
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
        base = self._base()
        entry = self._current(key, base)[1]
        return None if entry is None else base.usage.of(entry)

    def _folder_keys(self) -> list[str]:
        return sorted(f.name for f in self.fs.list(self.entries_path)
                      if f.is_dir and _KEY.fullmatch(f.name))

    def keys(self) -> list[str]:
        """Every key with an entry (any state)."""
        return self.read().keys()

    def entries(self, include_evicted: bool = False,
                read: "ManifestRead | None" = None) -> list[CacheEntry]:
        """Every current entry (ACTIVE ones only unless ``include_evicted``), with its usage;
        from ``read`` when given (see :meth:`read`)."""
        read = self.read() if read is None else read
        return [e for e in read.entries() if include_evicted or e.active]

    def _base(self) -> ManifestRead:
        """The batch files and the usage, without the keys' folders."""
        return ManifestRead({}, self.batches.read(), self.usage.read())

    def read(self, previous: "ManifestRead | None" = None,
             keys: Iterable[str] | None = None) -> ManifestRead:
        """Every key's folder listing, current version number and entry, the batch files and
        the usage, read once for :meth:`entries` and :meth:`collect` (the demoter's one read of
        the manifest). With ``previous`` and ``keys``: ``previous`` with only the folders of
        ``keys`` read again (those the change records name), the batch files listed again (only
        new ones read) and the usage read again."""
        if previous is None or keys is None:
            names = self._folder_keys()
            found = dict(zip(names, self._current_each(names)))
        else:
            again = sorted(set(keys))
            found = {**previous.found, **dict(zip(again, self._current_each(again)))}
            found = {k: v for k, v in found.items() if v[0] or v[1] >= 0}
        return ManifestRead(found, self.batches.read(), self.usage.read())

    # ------------------------------------------------------------------ writing

    def update(self, key: str,
               change: Callable[[CacheEntry | None], CacheEntry | None],
               base: ManifestRead | None = None) -> CacheEntry | None:
        """Writes ``change(current)`` as the next version of ``key``, retrying on a lost race with
        the then current version; returns the entry now current. ``change`` returning None or
        the current entry itself writes nothing. ``base``: the batch files and evictions read a
        moment ago (read now when not given)."""
        base = self._base() if base is None else base
        for _ in range(MAX_ATTEMPTS):
            seq, current = self._current(key, base)
            new = change(current)
            if new is None or new == current:
                return current
            if new.key != key:
                raise ValueError(f"entry of key {new.key} written under {key}")
            if self.fs.create_exclusive(f"{self.entries_path}/{key}/{seq + 1:010d}.json",
                                        new.to_json()):
                return new
        raise ConcurrentModificationError(
            f"could not update the cache entry {key}: other writers kept changing it")

    def commit(self, entry: CacheEntry, supersedes: Iterable[CacheEntry] = ()) -> CommitResult:
        """:meth:`commit_all` of one entry."""
        return self.commit_all([(entry, supersedes)])[0]

    def _commit(self, entry: CacheEntry, base: ManifestRead) -> CommitResult:
        """Commits a warmed entry (its data already under ``entry.data_path``) over the current
        entry of its key, in the key's folder of versions.

        Over no current entry or an EVICTED one, the entry is committed. Over an ACTIVE one, it
        replaces it only if it holds more columns (a warm-up of the union, see
        :func:`accelerator.cache.model.plan_warmup`) or as many in a pack where the current one
        has none (the layout before packs), keeping the higher priority, the longer
        TTL and the usage; otherwise the current entry stays (with the higher priority and the
        longer TTL) and ``committed`` is False. Replaced data paths are retired (deleted by
        :meth:`collect` after the grace period).
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

        result = self.update(entry.key, change, base)
        assert result is not None
        return CommitResult(result, result.data_path == entry.data_path and result.active)

    def raise_terms(self, key: str, priority: Priority,
                    ttl_seconds: int | None, base: ManifestRead | None = None
                    ) -> CacheEntry | None:
        """Raises the priority and lengthens the TTL of the ACTIVE entry of ``key`` (never
        lowers or shortens them); None when there is no ACTIVE entry. ``base``: as
        :meth:`update`'s."""
        def change(current: CacheEntry | None) -> CacheEntry | None:
            if current is None or not current.active:
                return current
            return replace(current, priority=max(priority, current.priority),
                           ttl_seconds=merge_ttl(ttl_seconds, current.ttl_seconds))

        result = self.update(key, change, base)
        return result if result is not None and result.active else None

    def commit_all(self, warmed: list[tuple[CacheEntry, Iterable[CacheEntry]]],
                   new_keys: frozenset[str] = frozenset()) -> list[CommitResult]:
        """Commits each (entry, supersedes) pair of a warm-up, then evicts the ``supersedes``
        entries (older versions of the files) of those committed, then records the change for
        readers. The entries of ``new_keys`` (keys the warm-up saw no entry of, in any state)
        that still have none go into one batch file (:mod:`accelerator.cache.batches`); the
        others are merged with their key's current entry (see :meth:`_commit`)."""
        pairs = [(e, tuple(s)) for e, s in warmed]
        base = self._base()
        folders = set(self._folder_keys()) if new_keys else set()
        fresh = {e.key for e, _ in pairs if e.key in new_keys and e.key not in folders
                 and e.key not in base.batches.puts}
        batch = [e for e, _ in pairs if e.key in fresh]
        if batch:
            self.batches.write(batch, self.now())
        merged = [p for p in pairs if p[0].key not in fresh]
        done = dict(zip([e.key for e, _ in merged],
                        in_parallel(lambda pair: self._commit(pair[0], base), merged)))
        results = [done.get(e.key) or CommitResult(e, True) for e, _ in pairs]
        superseded = [s for (e, ss), r in zip(pairs, results) if r.committed
                      for s in ss if s.key != e.key]
        if superseded:
            self._evict(superseded, self.now(), self.read(base, {s.key for s in superseded}))
        self.log_changes({e.key for e, _ in merged}, force=True)
        return results

    def evict(self, entries: Iterable[CacheEntry], now: float | None = None,
              read: ManifestRead | None = None) -> list[CacheEntry]:
        """Marks each entry EVICTED at once, unless its key holds other data in ``read`` (the
        manifest read a moment ago; read now when not given: replaced by a warm-up since the
        entry was read) or it is evicted already; returns those evicted."""
        given = list(entries)
        done = self._evict(given, now, self.read() if read is None else read)
        if done:
            self.log_changes(set(), force=True)
        return done

    def _evict(self, entries: list[CacheEntry], now: float | None,
               read: ManifestRead) -> list[CacheEntry]:
        """One usage record of the evictions (facts about each key's data path: a later entry
        of the key, with other data, is not evicted by it)."""
        now = self.now() if now is None else now
        done: dict[str, CacheEntry] = {}
        for e in entries:
            current = read.current(e.key)
            if current is not None and current.active and current.data_path == e.data_path:
                done[e.key] = current.evicted(now)
        if done:
            self.usage.record({}, evictions=len(done), now=now,
                              evicted={k: e.data_path for k, e in done.items()})
        return list(done.values())

    # ------------------------------------------------------------------ changes

    def log_changes(self, keys: set[str], force: bool = False) -> None:
        """A change record naming the keys whose folders of versions changed (``force``: also
        when there are none: batch files or evictions changed, which readers read again)."""
        if keys or force:
            self.fs.create_exclusive(f"{self.changes_path}/{record_name(self.now())}",
                                     json.dumps(sorted(keys)))

    def change_names(self) -> set[str]:
        """The change records now (one listing: what a reader checks before re-reading)."""
        return {f.name for f in self.fs.list(self.changes_path)
                if not f.is_dir and RECORD_NAME.fullmatch(f.name)}

    def changed_keys(self, names: Iterable[str]) -> set[str] | None:
        """The keys the change records ``names`` list; None when one of them is gone (collected:
        the reader has been away longer than the grace period and must read everything)."""
        found = self.fs.read_each([f"{self.changes_path}/{n}" for n in sorted(names)])
        if any(text is None for text in found):
            return None
        return {k for text in found for k in json.loads(text)}

    # ------------------------------------------------------------------ collection

    def collect(self, now: float | None = None,
                grace_seconds: float = DEFAULT_GRACE_SECONDS, read: "ManifestRead | None" = None,
                changed: Iterable[str] = ()) -> list[str]:
        """Deletes what no query can still read and returns the deleted paths
        (:class:`accelerator.cache.collection.Collection` says what goes and why it is safe).
        ``read``: the manifest as :meth:`read` read it a moment ago, the keys ``changed`` since
        read again."""
        now = self.now() if now is None else now
        read = self.read() if read is None else self.read(read, changed)
        return Collection(self, read, now - grace_seconds).run(now)
