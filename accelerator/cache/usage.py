"""The cache's usage, shared by several processes: records appended by serving processes (hits
and last use per key, misses, bytes served, evictions) and by the demoter (which entries it
evicted: facts about a key's data path), and their folding into versions of the totals. Over
the file-system protocol, no JVM.

Layout under the cache path::

    _manifest/usage/<ms>-<uuid>.json        usage records not yet folded in
    _manifest/totals/<seq>.json             versions of the folded usage: the counters of the
                                            whole cache, hits and last use per key, and when
                                            each (key, data path) was evicted

Usage is appended as small records with unique names, never by rewriting an entry, so
concurrent queries never lose each other's hits; :meth:`UsageLog.compact` folds them into one
new version of the totals (one write however many entries were used), which names the records
it counted (``folded``) so that a reader never counts one twice. A key's folded usage outlives
an eviction and a re-warm of the same key and is dropped when the manifest's collection deletes
the key (``forget``). An eviction is a fact about one key's data path, so it holds whatever
order it is read in and however often: a later warm-up of the key writes another data path.
"""
from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field, replace
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
    evictions: dict[str, dict[str, float]] = field(init=False, compare=False)
    collected: dict[str, set[str]] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        collected: dict[str, set[str]] = {}
        for source in [self.folded.get("collected", {}),
                       *({k: [p] for k, p in r.get("collected", {}).items()}
                         for r in self.records.values())]:
            for key, paths in source.items():
                collected.setdefault(key, set()).update(paths)
        object.__setattr__(self, "collected", collected)
        found: dict[str, dict[str, float]] = {}
        for source in [self.folded.get("evicted", {}),
                       *({k: {p: t} for k, (p, t) in r.get("evicted", {}).items()}
                         for r in self.records.values())]:
            for key, paths in source.items():
                held = found.setdefault(key, {})
                for path, t in paths.items():
                    held[path] = min(float(t), held.get(path, float(t)))
        object.__setattr__(self, "evictions", found)

    def is_collected(self, key: str, data_path: str) -> bool:
        """Whether the entry of ``key`` holding ``data_path`` was evicted and collected (its
        batch file, which other entries keep, still holds it)."""
        return data_path in self.collected.get(key, ())

    def evicted_at(self, key: str, data_path: str) -> float | None:
        """When the entry of ``key`` holding ``data_path`` was evicted (None: it was not)."""
        return self.evictions.get(key, {}).get(data_path)

    def evicted(self, entry: CacheEntry | None) -> CacheEntry | None:
        """``entry`` EVICTED when an eviction of its key's data path was recorded."""
        if entry is None or not entry.active:
            return entry
        at = self.evicted_at(entry.key, entry.data_path)
        return entry if at is None else entry.evicted(at)

    def of(self, entry: CacheEntry) -> CacheEntry:
        """``entry`` with its key's folded usage and that of the records not folded yet, and
        EVICTED when its eviction was recorded."""
        entry = self.evicted(entry)
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
        folded.setdefault("evicted", {})
        folded.setdefault("collected", {})
        return seq, folded

    def read(self) -> Usage:
        """The folded usage, then the records it has not folded yet (read in that order, again
        when a new version of the totals came meanwhile: a record is never counted twice, and
        an eviction folded and deleted in between is never missed)."""
        for _ in range(MAX_ATTEMPTS):
            seq, folded = self._folded()
            done = set(folded["folded"])
            records = {n: r for n, r in self._records().items() if n not in done}
            if self.current_seq() == seq:
                return Usage(folded, records)
        raise ConcurrentModificationError("the cache's usage kept changing while read")

    def totals(self) -> UsageTotals:
        """The cache's counters, usage not yet folded in included."""
        usage = self.read()
        counts = {k: int(usage.folded.get(k, 0))
                  + sum(int(r.get(k, 0)) for r in usage.records.values()) for k in _TOTALS}
        return UsageTotals(counts["misses"], counts["bytesServed"], counts["evictions"])

    def record(self, uses: Mapping[str, tuple[int, float]], misses: int = 0,
               bytes_served: int = 0, evictions: int = 0, now: float | None = None,
               evicted: Mapping[str, str] | None = None,
               collected: Mapping[str, str] | None = None) -> None:
        """Appends one usage record: ``uses`` maps keys to (hits, last use); the counters add
        to :meth:`totals`; ``evicted`` maps keys to the data path evicted at ``now``,
        ``collected`` to one whose eviction is over. A serving process writes one per flush,
        not one per query; the demoter one per run."""
        now = self._clock() if now is None else now
        record = {"entries": {k: [int(h), float(t)] for k, (h, t) in uses.items()},
                  "misses": int(misses), "bytesServed": int(bytes_served),
                  "evictions": int(evictions)}
        if evicted:
            record["evicted"] = {k: [p, float(now)] for k, p in evicted.items()}
        if collected:
            record["collected"] = dict(collected)
        if not self.fs.create_exclusive(f"{self.records_path}/{record_name(now)}",
                                        json.dumps(record)):
            raise OSError(f"could not create a usage record under {self.records_path}")

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
            gone = forget & (set(current["entries"]) | set(current["evicted"])
                             | set(current["collected"]))
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
            evicted = {k: dict(p) for k, p in current["evicted"].items() if k not in gone}
            for n in new:
                for key, (path, t) in records[n].get("evicted", {}).items():
                    held = evicted.setdefault(key, {})
                    held[path] = min(float(t), held.get(path, float(t)))
            out["evicted"] = evicted
            collected = {k: set(p) for k, p in current["collected"].items() if k not in gone}
            for n in new:
                for key, path in records[n].get("collected", {}).items():
                    collected.setdefault(key, set()).add(path)
            out["collected"] = {k: sorted(p) for k, p in collected.items()}
            out["folded"] = sorted({n for n in current["folded"] if n in listed} | set(new))
            if self.fs.create_exclusive(f"{self.totals_path}/{seq + 1:010d}.json",
                                        json.dumps(out)):
                break
        else:
            raise ConcurrentModificationError("could not fold the cache's usage")
        for name in records:
            self.fs.delete(f"{self.records_path}/{name}", recursive=False)
