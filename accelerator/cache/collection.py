"""Collection of a cache path: deleting what no query can still read.

What goes, once it is older than the grace period (``cutoff``):

- the files of entries EVICTED before the cutoff: their data and their versions (a pack goes
  with the last entry naming it: entries of one pack share its folder);
- data paths an entry retired before the cutoff, and versions older than a key's current one;
- batch files none of whose entries can be served again (after their data: a crash in between
  leaves dead puts, deleted by the next collection);
- data directories no entry names that were last written before the cutoff (warm-ups killed
  before they committed all their entries: keep the grace above the longest warm-up), and the
  files in live entries' packs that no entry names;
- temp files, change records and usage records and totals the fold replaced.

Usage records are folded (:meth:`UsageLog.compact`), forgetting the deleted keys'. Each deletion
is safe against writers racing it: a key's folder is emptied only of the versions listed, so a
re-warm's newer version stays; a folder written to meanwhile is not removed. No JVM here.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Protocol

from accelerator.cache.batches import BatchLog
from accelerator.cache.model import CacheEntry
from accelerator.cache.usage import UsageLog
from accelerator.cache.versions import VERSION, delete_old, is_temp, versions_of
from indexes.fs import FileInfo, FileSystem, in_parallel


class Collected(Protocol):
    """What a collection needs of the manifest it collects
    (:class:`accelerator.cache.manifest.CacheManifest`)."""

    fs: FileSystem
    usage: UsageLog
    batches: BatchLog
    data_root: str
    entries_path: str
    changes_path: str
    never_path: str

    def log_changes(self, keys: set[str], force: bool = False) -> None: ...

    def update(self, key: str, change: Callable[[CacheEntry | None], CacheEntry | None],
               base: Any = None) -> Any: ...


class Collection:
    """One collection of ``manifest`` as ``read`` (its ``ManifestRead``) describes it, deleting
    what was last needed before ``cutoff`` (epoch seconds)."""

    def __init__(self, manifest: Collected, read: Any, cutoff: float):
        self.manifest = manifest
        self.fs = manifest.fs
        self.read = read
        self.cutoff = cutoff
        self.deleted: list[str] = []
        self.removed: list[str] = []   # keys whose folder went

    def delete(self, path: str) -> None:
        """Deletes ``path`` (recursively), remembering it when it was there."""
        if self.fs.delete(path, recursive=True):
            self.deleted.append(path)

    def run(self, now: float) -> list[str]:
        """Collects and returns the deleted paths; ``now`` stamps the usage of collected puts."""
        m, read = self.manifest, self.read
        warmups = [(b.path, b.modification_time / 1000.0)
                   for b in self.fs.list(m.data_root) if b.is_dir]
        folders = {p: [(d.path, d.modification_time / 1000.0) for d in listed if d.is_dir]
                   for (p, _), listed in zip(warmups, self.fs.list_each([p for p, _ in warmups]))}
        referenced: set[str] = set()
        doomed: set[str] = set()
        held = set(read.batches.puts)   # a key's folder stays while a batch file holds it

        def collect_key(item: tuple) -> tuple[set[str], set[str]]:
            key, found = item
            return self._key(key, found, key in held)

        for used, done in in_parallel(collect_key, sorted(read.found.items())):
            referenced |= used
            doomed |= done
        live, dead, over = self._puts(referenced, doomed)
        if over:   # no longer listed, not even EVICTED
            m.usage.record({}, now=now, collected=over)
        for path in sorted(doomed - referenced):   # a pack goes with the last entry naming it
            self.delete(path)
        for path in dead:   # after the data: a crash in between leaves dead puts, deleted next
            if m.batches.delete(path):
                self.deleted.append(path)
        gone = set(self.removed)
        live += [e for k, (_, seq, e) in read.found.items()
                 if seq >= 0 and e is not None and k not in gone]
        self._unnamed(live)
        present = {k for k, (_, seq, _) in read.found.items() if seq >= 0 and k not in gone} \
            | {e.key for path, entries in read.batches.files.items() if path not in dead
               for e in entries}
        m.log_changes(gone, force=bool(dead or over))
        dropped = {e.key for path in dead for e in read.batches.files[path]}
        m.usage.compact(forget=(gone | dropped | set(read.usage.evictions)) - present)
        self._unused_folders(warmups, folders, referenced)
        for folder in (m.usage.records_path, m.never_path):
            self._old(folder)
        self._old(m.changes_path, lambda name: True)
        seq = m.usage.current_seq()
        self._old(m.usage.totals_path, lambda name: is_temp(name) or (
            (v := VERSION.fullmatch(name)) is not None and int(v.group(1)) < seq))
        return self.deleted

    def _unused_folders(self, warmups: list[tuple[str, float]],
                        folders: dict[str, list[tuple[str, float]]],
                        referenced: set[str]) -> None:
        """Deletes the data folders no entry names written before the cutoff: a warm-up's folder,
        then the folders in it (listed before entries' data was deleted in them, which made them
        newer), then the entries' folders in those."""
        root = self.manifest.data_root + "/"
        used = set(referenced)
        for path in referenced:
            while path.startswith(root):
                path = path.rpartition("/")[0]
                used.add(path)
        for warmup, written in warmups:
            if warmup not in used and written <= self.cutoff \
                    and all(t <= self.cutoff for _, t in folders[warmup]):
                self.delete(warmup)
                continue
            for path, written_at in folders[warmup]:
                if path not in used and written_at <= self.cutoff:
                    self.delete(path)
                elif path in used and path not in referenced:   # entries' folders in it
                    for sub in self.fs.list(path):
                        if sub.is_dir and sub.path not in used \
                                and sub.modification_time / 1000.0 <= self.cutoff:
                            self.delete(sub.path)

    def _puts(self, referenced: set[str], doomed: set[str]
              ) -> tuple[list[CacheEntry], list[str], dict[str, str]]:
        """The entries of batch files: those live (not overridden by their key's folder, not
        evicted before the cutoff: their data is ``referenced``), the batch files holding
        none (deleted by the caller) and the puts evicted before the cutoff not recorded as
        collected yet (key: data path), whose data is ``doomed`` (deleted unless another entry
        references it)."""
        read = self.read
        live: list[CacheEntry] = []
        dead: list[str] = []
        over: dict[str, str] = {}
        for path, entries in sorted(read.batches.files.items()):
            alive = False
            for e in entries:
                if read.found.get(e.key, ([], -1, None))[1] >= 0:
                    continue   # overridden by its key's folder, which holds its data if any
                at = read.usage.evicted_at(e.key, e.data_path)
                if at is not None and at <= self.cutoff:
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

    def _unnamed(self, live: list[CacheEntry]) -> None:
        """Deletes the files in the packs of ``live`` entries that no entry names, written before
        the cutoff: rows of files whose entries a killed warm-up never committed, or that a
        concurrent warm-up committed first (Spark's ``_SUCCESS`` and checksums aside). A pack
        an entry retired within the grace period is left whole (queries planned on the
        retired entry may still read any of its files), as is one an entry names no files of."""
        named = {path for e in live for path, _ in e.files}
        recent = {path for e in live for path, t in e.retired if t > self.cutoff}
        unlisted = {e.data_path for e in live if not e.files}   # files unknown: left whole
        packs = sorted({e.data_path for e in live} - recent - unlisted)

        def unnamed(folder: str) -> list[str]:
            out, pending = [], [folder]
            while pending:
                for info in self.fs.list(pending.pop()):
                    if info.is_dir:
                        pending.append(info.path)
                    elif not (info.name.startswith(".") or info.name == "_SUCCESS"
                              or info.path in named
                              or info.modification_time / 1000.0 > self.cutoff):
                        out.append(info.path)
            return out

        for paths in in_parallel(unnamed, packs):
            for path in paths:
                self.delete(path)

    def _key(self, key: str, found: tuple[list[FileInfo], int, CacheEntry | None],
             held: bool) -> tuple[set[str], set[str]]:
        """Collects one key's folder, ``found`` as the manifest's read listed it (adding the key
        to :attr:`removed` when its folder goes), and its old temp files; returns the data paths
        it still references and those it no longer needs (deleted by the caller unless another
        entry references them). ``held``: a batch file holds the key, so the folder's current
        version stays (else the batch's put would be the key's entry again)."""
        m = self.manifest
        folder = f"{m.entries_path}/{key}"
        listed, seq, written = found
        delete_old(listed, self.cutoff, self.delete)
        versions = versions_of(listed)
        current = self.read.usage.evicted(written)
        if current is None:
            return set(), set()
        if not current.active and current.evicted_at is not None \
                and current.evicted_at <= self.cutoff:
            if held:
                for number, path in versions:
                    if number < seq:
                        self.delete(path)
                return set(), {current.data_path, *(p for p, _ in current.retired)}
            for _, path in versions:   # only those listed: a re-warm's newer version stays
                self.delete(path)
            self.removed.append(key)
            try:
                if not self.fs.list(folder):
                    self.fs.delete(folder, recursive=False)
            except OSError:   # written to meanwhile
                pass
            return set(), {current.data_path, *(p for p, _ in current.retired)}
        for number, path in versions:
            if number < seq:
                self.delete(path)
        due = [p for p, t in current.retired if t <= self.cutoff]
        if due:
            m.update(key, lambda c: c if c is None else replace(
                c, retired=tuple(r for r in c.retired if r[0] not in due)), self.read)
        return ({current.data_path, *(p for p, t in current.retired if t > self.cutoff)},
                set(due))

    def _old(self, folder: str, doomed: Callable[[str], bool] = is_temp) -> None:
        """Deletes the files of ``folder`` (temp files unless ``doomed`` says otherwise) last
        written at or before the cutoff."""
        delete_old(self.fs.list(folder), self.cutoff, self.delete, doomed)
