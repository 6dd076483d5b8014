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
and :meth:`CacheManifest.collect` deletes them once no other entry names them (a pack goes with
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
from accelerator.cache.model import CacheEntry, Priority, merge_ttl
from accelerator.cache.usage import RECORD_NAME, Usage, UsageLog, record_name
from accelerator.cache.versions import (MAX_ATTEMPTS, VERSION, delete_old, is_temp, latest,
                                        versions_of)
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
        self._entries = f"{self.path}/_manifest/entries"
        self.usage = UsageLog(fs, self.path, clock)
        self.batches = BatchLog(fs, self.path)
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

    def _current(self, key: str, base: ManifestRead) -> tuple[int, CacheEntry | None]:
        """The highest version number of ``key`` and its entry, EVICTED when its eviction was
        recorded (-1 and the entry of its batch files when it has no version; an unreadable
        version reads as None and is logged, so a new version replaces it). ``base`` gives the
        batch files and the evictions (a moment old is safe: see :mod:`accelerator.cache.batches`)."""
        seq, text = latest(self.fs, f"{self._entries}/{key}")
        if seq < 0:
            return seq, base.current(key)
        return seq, base.usage.evicted(self._parsed(key, seq, text))

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
                seq, text = latest(self.fs, f"{self._entries}/{key}")
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
        return sorted(f.name for f in self.fs.list(self._entries)
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
            if self.fs.create_exclusive(f"{self._entries}/{key}/{seq + 1:010d}.json",
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
        self._log_changes({e.key for e, _ in merged}, force=True)
        return results

    def evict(self, entries: Iterable[CacheEntry], now: float | None = None,
              read: ManifestRead | None = None) -> list[CacheEntry]:
        """Marks each entry EVICTED at once, unless its key holds other data in ``read`` (the
        manifest read a moment ago; read now when not given: replaced by a warm-up since the
        entry was read) or it is evicted already; returns those evicted."""
        given = list(entries)
        done = self._evict(given, now, self.read() if read is None else read)
        if done:
            self._log_changes(set(), force=True)
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

    def _log_changes(self, keys: set[str], force: bool = False) -> None:
        """A change record naming the keys whose folders of versions changed (``force``: also
        when there are none: batch files or evictions changed, which readers read again)."""
        if keys or force:
            self.fs.create_exclusive(f"{self._changes}/{record_name(self.now())}",
                                     json.dumps(sorted(keys)))

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

        warmups = [(b.path, b.modification_time / 1000.0)
                   for b in self.fs.list(self._data) if b.is_dir]
        folders = {p: [(d.path, d.modification_time / 1000.0) for d in listed if d.is_dir]
                   for (p, _), listed in zip(warmups, self.fs.list_each([p for p, _ in warmups]))}
        referenced: set[str] = set()
        doomed: set[str] = set()
        removed: list[str] = []
        read = self.read() if read is None else self.read(read, changed)
        held = set(read.batches.puts)   # a key's folder stays while a batch file holds it

        def collect_key(item: tuple) -> tuple[set[str], set[str]]:
            key, found = item
            return self._collect_key(key, found, read, cutoff, delete, removed, key in held)

        for used, done in in_parallel(collect_key, sorted(read.found.items())):
            referenced |= used
            doomed |= done
        live, dead, over = self._collect_puts(read, cutoff, referenced, doomed)
        if over:   # no longer listed, not even EVICTED
            self.usage.record({}, now=now, collected=over)
        for path in sorted(doomed - referenced):   # a pack goes with the last entry naming it
            delete(path)
        for path in dead:   # after the data: a crash in between leaves dead puts, deleted next
            if self.batches.delete(path):
                deleted.append(path)
        gone = set(removed)
        live += [e for k, (_, seq, e) in read.found.items()
                 if seq >= 0 and e is not None and k not in gone]
        self._collect_unnamed(live, cutoff, delete)
        present = {k for k, (_, seq, _) in read.found.items() if seq >= 0 and k not in gone} \
            | {e.key for path, entries in read.batches.files.items() if path not in dead
               for e in entries}
        self._log_changes(gone, force=bool(dead or over))
        dropped = {e.key for path in dead for e in read.batches.files[path]}
        self.usage.compact(forget=(gone | dropped | set(read.usage.evictions)) - present)

        used = set(referenced)
        for path in referenced:
            while path.startswith(self._data + "/"):
                path = path.rpartition("/")[0]
                used.add(path)

        def unused(folder: str) -> bool:
            return folder not in used

        # a warm-up's folder, then the folders in it (listed before entries' data was deleted
        # in them, which made them newer), then the entries' folders in those
        for warmup, written in warmups:
            if unused(warmup) and written <= cutoff \
                    and all(t <= cutoff for _, t in folders[warmup]):
                delete(warmup)
                continue
            for path, written_at in folders[warmup]:
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

    @staticmethod
    def _collect_puts(read: ManifestRead, cutoff: float, referenced: set[str],
                      doomed: set[str]
                      ) -> tuple[list[CacheEntry], list[str], dict[str, str]]:
        """The entries of batch files: those live (not overridden by their key's folder, not
        evicted before ``cutoff``: their data is ``referenced``), the batch files holding
        none (deleted by the caller) and the puts evicted before ``cutoff`` not recorded as
        collected yet (key: data path), whose data is ``doomed`` (deleted unless another entry
        references it)."""
        live: list[CacheEntry] = []
        dead: list[str] = []
        over: dict[str, str] = {}
        for path, entries in sorted(read.batches.files.items()):
            alive = False
            for e in entries:
                if read.found.get(e.key, ([], -1, None))[1] >= 0:
                    continue   # overridden by its key's folder, which holds its data if any
                at = read.usage.evicted_at(e.key, e.data_path)
                if at is not None and at <= cutoff:
                    doomed.add(e.data_path)
                    if not read.usage.is_collected(e.key, e.data_path):
                        over[e.key] = e.data_path
                    continue
                alive = True
                live.append(e)
                referenced.add(e.data_path)
            if not alive:
                dead.append(path)
        return live, dead, over

    def _collect_unnamed(self, live: list[CacheEntry], cutoff: float,
                         delete: Callable[[str], None]) -> None:
        """Deletes the files in the packs of ``live`` entries that no entry names, written before
        ``cutoff``: rows of files whose entries a killed warm-up never committed, or that a
        concurrent warm-up committed first (Spark's ``_SUCCESS`` and checksums aside). A pack
        an entry retired within the grace period is left whole (queries planned on the
        retired entry may still read any of its files), as is one an entry names no files of."""
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
                     read: ManifestRead, cutoff: float, delete: Callable[[str], None],
                     removed: list[str], held: bool) -> tuple[set[str], set[str]]:
        """Collects one key's folder, ``found`` as :meth:`_current_each` read it (appending the
        key to ``removed`` when its folder goes), and its old temp files; returns the data paths
        it still references and those it no longer needs (deleted by the caller unless another
        entry references them: entries of one pack share its folder). ``held``: a batch file
        holds the key, so the folder's current version stays (else the batch's put would be
        the key's entry again)."""
        folder = f"{self._entries}/{key}"
        listed, seq, written = found
        delete_old(listed, cutoff, delete)
        versions = versions_of(listed)
        current = read.usage.evicted(written)
        if current is None:
            return set(), set()
        if not current.active and current.evicted_at is not None \
                and current.evicted_at <= cutoff:
            if held:
                for number, path in versions:
                    if number < seq:
                        delete(path)
                return set(), {current.data_path, *(p for p, _ in current.retired)}
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
                c, retired=tuple(r for r in c.retired if r[0] not in due)), read)
        return ({current.data_path, *(p for p, t in current.retired if t > cutoff)}, set(due))

    def _collect_old(self, folder: str, cutoff: float, delete: Callable[[str], None],
                     doomed: Callable[[str], bool] = is_temp) -> None:
        """Deletes the files of ``folder`` (temp files unless ``doomed`` says otherwise) last
        written at or before ``cutoff``."""
        delete_old(self.fs.list(folder), cutoff, delete, doomed)
