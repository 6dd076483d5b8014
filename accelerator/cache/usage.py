"""The cache's usage, shared by several processes: records appended by serving processes (hits
and last use per key, misses, bytes served, evictions) and their folding into versions of the
totals. Over the file-system protocol, no JVM.

Layout under the cache path::

    _manifest/usage/<ms>-<uuid>.json        usage records not yet folded in
    _manifest/totals/<seq>.json             versions of the folded usage: the counters of the
                                            whole cache, hits and last use per key

Usage is appended as small records with unique names, never by rewriting an entry, so
concurrent queries never lose each other's hits; :meth:`UsageLog.compact` folds them into one
new version of the totals (one write however many entries were used), which names the records
it counted (``folded``) so that a reader never counts one twice. A key's folded usage outlives
an eviction and a re-warm of the same key and is dropped when the manifest's collection deletes
the key (``forget``).
"""
from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Mapping

from accelerator.cache.model import CacheEntry
from accelerator.cache.versions import MAX_ATTEMPTS, latest
from indexes.errors import ConcurrentModificationError
from indexes.fs import FileSystem

#: the names of usage records (and of the manifest's change records)
RECORD_NAME = re.compile(r"\d{13}-[0-9a-f]{32}\.json")
_TOTALS = ("misses", "bytesServed", "evictions")


def record_name(now: float) -> str:
    """A fresh record name at ``now`` (epoch seconds): sortable by time, unique."""
    return f"{int(now * 1000):013d}-{uuid.uuid4().hex}.json"


@dataclass(frozen=True)
class UsageTotals:
    """Counters of the whole cache: relation files read from the source although their
    relation had cached files (``misses``), bytes read from the cache and entries evicted."""

    misses: int = 0
    bytes_served: int = 0
    evictions: int = 0


@dataclass(frozen=True)
class Usage:
    """The usage read at one moment: the folded totals and the records not folded yet."""

    folded: dict
    records: dict[str, dict]

    def of(self, entry: CacheEntry) -> CacheEntry:
        """``entry`` with its key's folded usage and that of the records not folded yet."""
        uses = [u for u in [self.folded["entries"].get(entry.key),
                            *(r.get("entries", {}).get(entry.key)
                              for r in self.records.values())]
                if u is not None]
        if not uses:
            return entry
        return replace(entry, hits=entry.hits + sum(int(h) for h, _ in uses),
                       last_used=max([entry.last_used, *(float(t) for _, t in uses)]))


class UsageLog:
    """The usage records and folded totals under one cache path."""

    def __init__(self, fs: FileSystem, cache_path: str, clock: Callable[[], float]):
        self.fs = fs
        self.records_path = f"{cache_path}/_manifest/usage"
        self.totals_path = f"{cache_path}/_manifest/totals"
        self._clock = clock

    def _records(self) -> dict[str, dict]:
        """Every usage record not yet deleted, by name (records deleted while they are read are
        left out: they were folded)."""
        names = sorted(self._listed())
        texts = self.fs.read_each([f"{self.records_path}/{n}" for n in names])
        return {n: json.loads(t) for n, t in zip(names, texts) if t is not None}

    def _folded(self) -> tuple[int, dict]:
        """The current version number of the folded usage (the totals) and its content."""
        seq, text = latest(self.fs, self.totals_path)
        folded = json.loads(text) if text else {}
        folded.setdefault("folded", [])
        folded.setdefault("entries", {})
        return seq, folded

    def read(self) -> Usage:
        """The folded usage, then the records it has not folded yet (read in that order: a
        record folded and deleted in between is missed once, never counted twice)."""
        folded = self._folded()[1]
        done = set(folded["folded"])
        return Usage(folded, {n: r for n, r in self._records().items() if n not in done})

    def totals(self) -> UsageTotals:
        """The cache's counters, usage not yet folded in included."""
        usage = self.read()
        counts = {k: int(usage.folded.get(k, 0))
                  + sum(int(r.get(k, 0)) for r in usage.records.values()) for k in _TOTALS}
        return UsageTotals(counts["misses"], counts["bytesServed"], counts["evictions"])

    def record(self, uses: Mapping[str, tuple[int, float]], misses: int = 0,
               bytes_served: int = 0, evictions: int = 0, now: float | None = None) -> None:
        """Appends one usage record: ``uses`` maps keys to (hits, last use); the counters add
        to :meth:`totals`. A serving process writes one per flush, not one per query."""
        now = self._clock() if now is None else now
        self.fs.create_exclusive(f"{self.records_path}/{record_name(now)}", json.dumps({
            "entries": {k: [int(h), float(t)] for k, (h, t) in uses.items()},
            "misses": int(misses), "bytesServed": int(bytes_served),
            "evictions": int(evictions)}))

    def _listed(self) -> set[str]:
        return {f.name for f in self.fs.list(self.records_path)
                if not f.is_dir and RECORD_NAME.fullmatch(f.name)}

    def current_seq(self) -> int:
        """The number of the current version of the totals (-1 when there is none)."""
        return latest(self.fs, self.totals_path)[0]

    def compact(self, forget: Iterable[str] = ()) -> None:
        """Folds every usage record into one new version of the folded usage (the totals, with
        hits and last use per key), then deletes it; ``forget``: keys whose folded usage is
        dropped (their entries were deleted). Safe to run in several processes at once and to
        interrupt."""
        records = self._records()
        forget = set(forget)
        if not records and not forget:
            return
        for _ in range(MAX_ATTEMPTS):
            seq, current = self._folded()
            # listed after reading ``current``: a record still listed is not deleted yet, so if
            # ``current`` has not folded it, no version before ours has; names folded before and
            # no longer listed were deleted, never to be counted again
            listed = self._listed()
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
            if self.fs.create_exclusive(f"{self.totals_path}/{seq + 1:010d}.json",
                                        json.dumps(out)):
                break
        else:
            raise ConcurrentModificationError("could not fold the cache's usage")
        for name in records:
            self.fs.delete(f"{self.records_path}/{name}", recursive=False)
