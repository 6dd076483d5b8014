"""Spark settings of the accelerator (all under ``spark.accelerator.*``) with their defaults."""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import Any, Callable

ENABLED = "spark.accelerator.enabled"
SYSTEM_PATH = "spark.accelerator.system.path"
NUM_BUCKETS = "spark.accelerator.index.numBuckets"
CACHE_EXPIRY = "spark.accelerator.index.cache.expirySeconds"
HISTORY_ENABLED = "spark.accelerator.history.enabled"
TEXT_CACHE_DIR = "spark.accelerator.text.localCacheDir"

DEFAULT_NUM_BUCKETS = 200
DEFAULT_CACHE_EXPIRY_SECONDS = 300


@dataclass(frozen=True)
class Settings:
    """The accelerator settings of one session, read once per query."""

    system_path: str
    num_buckets: int
    cache_expiry_seconds: float
    history_enabled: bool
    case_sensitive: bool
    text_cache_dir: str

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
        )

    @staticmethod
    def of_session(spark: Any) -> "Settings":
        """Settings of a Python SparkSession."""
        return Settings.read(lambda k, d: spark.conf.get(k, d))

    @staticmethod
    def of_conf(conf: dict[str, str]) -> "Settings":
        """Settings from the conf map the JVM rule sends with each plan."""
        return Settings.read(lambda k, d: conf.get(k, d))
