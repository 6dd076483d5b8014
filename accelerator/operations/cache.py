"""The cache tier's operations behind the facade (``hs.cache``, ``uncache``, ``cacheEntries``,
``cacheStats``, ``evictCache``): each returns values; :mod:`accelerator.api.rows` turns them into
the facade's rows."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelerator.cache import warmup
from accelerator.cache.model import CacheEntry
from accelerator.cache.policy import Eviction
from accelerator.cache.tier import CacheTier, tier_for
from accelerator.query import session
from accelerator.runtime import jvm
from accelerator.runtime.settings import Settings


@dataclass(frozen=True)
class CacheStats:
    """The cache's usage and counters (``cacheStats()``)."""

    capacity_bytes: int
    used_bytes: int
    entries: int
    hits: int
    misses: int
    bytes_served: int
    evictions: int


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
              ttl: str | None) -> warmup.WarmupResult:
        """Warms the files ``df`` reads; what it read and wrote."""
        settings = self.settings()
        r = warmup.warm(self.spark, self.tier(settings), settings, df, columns, priority, ttl)
        # the next query over these files goes to the rewriter, which then serves them
        session.rewriter(self.spark).forget_answers()
        return r

    def uncache(self, df: Any) -> tuple[int, int]:
        """Evicts the entries of the files ``df`` reads; (entries evicted, their bytes)."""
        settings = self.settings()
        return warmup.uncache(self.spark, self.tier(settings), settings, df)

    def entries(self) -> list[CacheEntry]:
        """Every entry, EVICTED ones (until their files are deleted) included, by source and
        file."""
        tier = self.tier(self.settings())
        tier.flush()
        return sorted(tier.manifest.entries(include_evicted=True),
                      key=lambda e: (e.source_root, e.file_path, e.state.value))

    def stats(self) -> CacheStats:
        """The cache's usage and counters now."""
        settings = self.settings()
        tier = self.tier(settings)
        tier.flush()
        active = tier.manifest.entries()
        totals = tier.manifest.usage.totals()
        return CacheStats(tier.max_bytes(settings.cache_max_bytes), sum(e.bytes for e in active),
                          len(active), sum(e.hits for e in active), totals.misses,
                          totals.bytes_served, totals.evictions)

    def evict(self) -> list[Eviction]:
        """Runs the demoter now; the entries it evicted."""
        settings = self.settings()
        return list(self.tier(settings).demote(settings).evicted)
