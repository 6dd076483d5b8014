"""Batch files: the entries of new keys one warm-up commits, in one JSON-lines file, so that
caching thousands of small files writes one manifest file, not one per file, and a reader
reads a few files, not one per entry. Over the file-system protocol, no JVM.

Layout under the cache path::

    _manifest/batches/<ms>-<uuid>.jsonl     one warm-up's new entries, one JSON entry a line

A batch file is written once (``create_exclusive``) after its packs and never changed; the
manifest's collection deletes it once none of its entries can be served again (see
:mod:`accelerator.cache.manifest`). An entry in a batch file is a key's *base*: a key's own
folder of versions (``_manifest/entries/<key>/``), written when an existing entry changes,
overrides it. Two warm-ups racing on one new key may both put it in their batch files; the
key's entry is then the put with the most columns (ties: the greater data path), not evicted,
with the highest priority and longest TTL of them: a choice that does not depend on the order
the files were written or seen in. Evictions are facts about (key, data path) kept in the usage
(:mod:`accelerator.cache.usage`), so a put once evicted stays evicted.
"""
from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Mapping

from accelerator.cache.model import CacheEntry, merge_ttl
from accelerator.cache.usage import record_name
from indexes.fs import FileSystem

logger = logging.getLogger("accelerator.cache.batches")

BATCH_NAME = re.compile(r"\d{13}-[0-9a-f]{32}\.jsonl")


def _rank(entry: CacheEntry) -> tuple[int, str]:
    return len(entry.columns), entry.data_path


@dataclass(frozen=True)
class Batches:
    """The batch files read at one moment: each file's entries, and each key's puts."""

    files: Mapping[str, tuple[CacheEntry, ...]]
    puts: Mapping[str, tuple[CacheEntry, ...]]

    @classmethod
    def of(cls, files: Mapping[str, tuple[CacheEntry, ...]]) -> "Batches":
        puts: dict[str, list[CacheEntry]] = {}
        for entries in files.values():
            for e in entries:
                puts.setdefault(e.key, []).append(e)
        return cls(dict(files), {k: tuple(v) for k, v in puts.items()})

    def winner(self, key: str, evicted_at: Callable[[str, str], float | None],
               collected: Callable[[str, str], bool]) -> CacheEntry | None:
        """The entry of ``key`` its puts make (see the module docstring; None when no batch
        holds one not ``collected``): the best put not evicted (``evicted_at(key, data_path)``
        None), else the put evicted last, EVICTED."""
        puts = [e for e in self.puts.get(key, ()) if not collected(key, e.data_path)]
        if not puts:
            return None
        live = [e for e in puts if evicted_at(key, e.data_path) is None]
        if not live:
            last = max(puts, key=lambda e: (evicted_at(key, e.data_path), _rank(e)))
            return last.evicted(evicted_at(key, last.data_path))
        best = max(live, key=_rank)
        if len(live) == 1:
            return best
        ttl = best.ttl_seconds
        for e in live:
            ttl = merge_ttl(ttl, e.ttl_seconds)
        return replace(best, priority=max(e.priority for e in live), ttl_seconds=ttl)


class BatchLog:
    """The batch files under one cache path; parsed files are kept (they never change)."""

    def __init__(self, fs: FileSystem, cache_path: str):
        self.fs = fs
        self.path = f"{cache_path}/_manifest/batches"
        self._parsed: dict[str, tuple[CacheEntry, ...]] = {}
        self._last: tuple[tuple[str, ...], Batches] | None = None   # the last read, reused
        self._lock = threading.Lock()   # readers in the tier's background thread too

    def write(self, entries: Iterable[CacheEntry], now: float) -> str:
        """Writes one batch file of ``entries`` (their first versions); returns its path."""
        found = tuple(entries)
        path = f"{self.path}/{record_name(now)}l"
        text = "".join(e.to_json() + "\n" for e in found)
        if not self.fs.create_exclusive(path, text):   # a fresh uuid: never taken
            raise OSError(f"could not create the cache batch file {path}")
        with self._lock:
            self._parsed[path] = found
        return path

    def read(self) -> Batches:
        """Every batch file now: one listing, and a read of those not read before."""
        names = sorted(f.path for f in self.fs.list(self.path)
                       if not f.is_dir and BATCH_NAME.fullmatch(f.name))
        with self._lock:
            new = [p for p in names if p not in self._parsed]
        parsed = {path: self._entries(path, text)
                  for path, text in zip(new, self.fs.read_each(new))
                  if text is not None}   # None: deleted meanwhile, all its entries dead
        with self._lock:
            self._parsed.update(parsed)
            listed = set(names)
            for gone in [p for p in self._parsed if p not in listed]:
                del self._parsed[gone]
            held = tuple(p for p in names if p in self._parsed)
            if self._last is None or self._last[0] != held:
                self._last = (held, Batches.of({p: self._parsed[p] for p in held}))
            return self._last[1]

    @staticmethod
    def _entries(path: str, text: str) -> tuple[CacheEntry, ...]:
        out = []
        for n, line in enumerate(text.splitlines()):
            if not line.strip():
                continue
            try:
                out.append(CacheEntry.from_json(line))
            except ValueError as exc:
                logger.warning("unreadable cache entry %s:%d ignored: %s", path, n + 1, exc)
        return tuple(out)

    def delete(self, path: str) -> bool:
        """Deletes one batch file (its entries can never be served again)."""
        with self._lock:
            self._parsed.pop(path, None)
        return self.fs.delete(path, recursive=False)
