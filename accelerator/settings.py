"""Spark settings of the accelerator (all under ``spark.accelerator.*``) with their defaults."""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import Any, Callable

from indexes.covering.match import HybridScan

ENABLED = "spark.accelerator.enabled"
SYSTEM_PATH = "spark.accelerator.system.path"
NUM_BUCKETS = "spark.accelerator.index.numBuckets"
CACHE_EXPIRY = "spark.accelerator.index.cache.expirySeconds"
HISTORY_ENABLED = "spark.accelerator.history.enabled"
TEXT_CACHE_DIR = "spark.accelerator.text.localCacheDir"
FILTER_RULE_BUCKETS = "spark.accelerator.index.filterRule.useBucketSpec"
HYBRID_SCAN = "spark.accelerator.index.hybridScan.enabled"
MAX_APPENDED_RATIO = "spark.accelerator.index.hybridScan.maxAppendedRatio"
MAX_DELETED_RATIO = "spark.accelerator.index.hybridScan.maxDeletedRatio"
LINEAGE = "spark.accelerator.index.lineage.enabled"
OPTIMIZE_BYTES = "spark.accelerator.index.optimize.bytesPerIteration"
VACUUM_RETENTION = "spark.accelerator.index.vacuum.retentionSeconds"
BROADCAST_THRESHOLD = "spark.sql.autoBroadcastJoinThreshold"
BUCKETING = "spark.sql.sources.bucketing.enabled"

DEFAULT_NUM_BUCKETS = 200
DEFAULT_CACHE_EXPIRY_SECONDS = 300
DEFAULT_VACUUM_RETENTION_SECONDS = 3600


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
          "g": 1 << 30, "gb": 1 << 30, "t": 1 << 40, "tb": 1 << 40}


def byte_size(text: str) -> int:
    """A byte count as Spark writes it in settings ("10485760", "10MB", "-1", "64k")."""
    value = text.strip().lower()
    digits = value.rstrip("abcdefghijklmnopqrstuvwxyz")
    return int(digits) * _UNITS[value[len(digits):]]


@dataclass(frozen=True)
class Settings:
    """The accelerator settings of one session, read once per query."""

    system_path: str
    num_buckets: int
    cache_expiry_seconds: float
    history_enabled: bool
    case_sensitive: bool
    text_cache_dir: str
    filter_rule_bucket_spec: bool
    hybrid_scan: bool
    max_appended_ratio: float     # appended bytes over the source's bytes, for hybrid scan
    max_deleted_ratio: float      # deleted bytes over the indexed bytes, for hybrid scan
    lineage: bool                 # new covering indexes record each row's source file
    optimize_bytes: int           # bytes after which optimizeIndex(mode="quick") takes no more files
    vacuum_retention_seconds: float   # vacuumIndex keeps versions replaced less long ago
    broadcast_threshold: int      # bytes; negative: Spark never broadcasts by size
    bucketing: bool

    @staticmethod
    def read(get: Callable[[str, str], str]) -> "Settings":
        """Reads the settings through ``get(key, default)`` (Python or JVM session conf)."""
        path = get(SYSTEM_PATH, "")
        if not path:
            warehouse = get("spark.sql.warehouse.dir", "spark-warehouse")
            path = warehouse.rstrip("/") + "/indexes"
        return Settings(
            system_path=path,
            num_buckets=int(get(NUM_BUCKETS, str(DEFAULT_NUM_BUCKETS))),
            cache_expiry_seconds=float(get(CACHE_EXPIRY, str(DEFAULT_CACHE_EXPIRY_SECONDS))),
            history_enabled=get(HISTORY_ENABLED, "true").lower() == "true",
            case_sensitive=get("spark.sql.caseSensitive", "false").lower() == "true",
            text_cache_dir=get(TEXT_CACHE_DIR, "") or os.path.join(
                tempfile.gettempdir(), "spark-accelerator-text"),
            filter_rule_bucket_spec=get(FILTER_RULE_BUCKETS, "true").lower() == "true",
            hybrid_scan=get(HYBRID_SCAN, "true").lower() == "true",
            max_appended_ratio=float(get(MAX_APPENDED_RATIO, "0.3")),
            max_deleted_ratio=float(get(MAX_DELETED_RATIO, "0.2")),
            lineage=get(LINEAGE, "false").lower() == "true",
            optimize_bytes=byte_size(get(OPTIMIZE_BYTES, "1g")),
            vacuum_retention_seconds=float(get(VACUUM_RETENTION,
                                               str(DEFAULT_VACUUM_RETENTION_SECONDS))),
            broadcast_threshold=byte_size(get(BROADCAST_THRESHOLD, "10MB")),
            bucketing=get(BUCKETING, "true").lower() == "true",
        )

    @property
    def hybrid(self) -> HybridScan | None:
        """The hybrid-scan limits for the index rules, or None when hybrid scan is off."""
        return (HybridScan(self.max_appended_ratio, self.max_deleted_ratio)
                if self.hybrid_scan else None)

    @staticmethod
    def of_session(spark: Any) -> "Settings":
        """Settings of a Python SparkSession."""
        return Settings.read(lambda k, d: spark.conf.get(k, d))

    @staticmethod
    def of_conf(conf: dict[str, str]) -> "Settings":
        """Settings from the conf map the JVM rule sends with each plan."""
        return Settings.read(lambda k, d: conf.get(k, d))
