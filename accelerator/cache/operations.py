"""The cache tier's operations behind the facade (``hs.cache``, ``uncache``, ``cacheEntries``,
``cacheStats``, ``evictCache``): each returns plain rows; :mod:`accelerator.hyperspace` turns
them into DataFrames."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from accelerator import jvm, session
from accelerator.cache import warmup
from accelerator.cache.model import Priority, format_duration
from accelerator.cache.tier import CacheTier, tier_for
from accelerator.settings import Settings

CACHE_SUMMARY_SCHEMA = "files long, bytesRead long, bytesWritten long, seconds double"
UNCACHE_SCHEMA = "entries long, bytes long"
ENTRIES_SCHEMA = ("source string, file string, columns array<string>, priority string, "
                  "ttl string, bytes long, created timestamp, lastUsed timestamp, hits long, "
                  "state string")
STATS_SCHEMA = ("capacityBytes long, usedBytes long, entries long, hits long, misses long, "
                "bytesServed long, evictions long")
EVICTED_SCHEMA = "source string, file string, priority string, bytes long, reason string"


class CacheOperations:
    """The cache operations of one session (its settings are read at each call)."""

    def __init__(self, spark: Any):
        self.spark = spark
        self.fs = jvm.hadoop_fs(spark)

    def settings(self) -> Settings:
        return Settings.of_session(self.spark)

    def tier(self, settings: Settings) -> CacheTier:
        return tier_for(self.fs, settings.cache_path)

    def cache(self, df: Any, columns: list[str] | None, priority: str,
              ttl: str | None) -> tuple:
        """Warms the files ``df`` reads; the summary row."""
        settings = self.settings()
        r = warmup.warm(self.spark, self.tier(settings), settings, df, columns, priority, ttl)
        # the next query over these files goes to the rewriter, which then serves them
        session.rewriter(self.spark).forget_answers()
        return (r.files, r.bytes_read, r.bytes_written, round(r.seconds, 3))

    def uncache(self, df: Any) -> tuple:
        settings = self.settings()
        return warmup.uncache(self.spark, self.tier(settings), settings, df)

    def entries(self) -> list[tuple]:
        """One row per entry, EVICTED ones (until their files are deleted) included."""
        tier = self.tier(self.settings())
        tier.flush()
        return [(e.source_root, e.file_path, list(e.columns), e.priority.name,
                 format_duration(e.ttl_seconds) if e.ttl_seconds is not None else None,
                 e.bytes, datetime.fromtimestamp(e.created), datetime.fromtimestamp(e.last_used),
                 e.hits, e.state.value)
                for e in sorted(tier.manifest.entries(include_evicted=True),
                                key=lambda e: (e.source_root, e.file_path, e.state.value))]

    def stats(self) -> tuple:
        settings = self.settings()
        tier = self.tier(settings)
        tier.flush()
        active = tier.manifest.entries()
        totals = tier.manifest.totals()
        return (tier.max_bytes(settings.cache_max_bytes), sum(e.bytes for e in active),
                len(active), sum(e.hits for e in active), totals.misses, totals.bytes_served,
                totals.evictions)

    def evict(self) -> list[tuple]:
        """Runs the demoter now; one row per entry it evicted."""
        settings = self.settings()
        run = self.tier(settings).demote(settings)
        return [(ev.entry.source_root, ev.entry.file_path, Priority(ev.entry.priority).name,
                 ev.entry.bytes, ev.reason.value) for ev in run.evicted]
