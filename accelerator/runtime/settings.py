"""Spark settings of the accelerator (all under ``spark.accelerator.*``), declared once.

Each setting is declared by one :class:`Setting` (key, default, meaning) in :data:`SETTINGS`;
:meth:`Settings.read` takes its defaults from there, and the table of ``docs/settings.md`` and
``configs/spark-defaults.conf`` list the same keys and defaults (a test checks it). The module
constants (``ENABLED``, ``SYSTEM_PATH`` ...) are the declared keys.
"""
from __future__ import annotations

import functools
import os
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

from indexes.kind import HybridScan
from rules.history.recorder import DEFAULT_FLUSH_INTERVAL_S
from rules.terms import byte_size, parse_duration


@dataclass(frozen=True)
class Setting:
    """One accelerator setting.

    ``default`` is the value used when the session does not set ``key``, as Spark would hold it
    (a string); it is empty when the default is derived from the session or the machine, and
    ``derived`` then says how (``<spark.sql.warehouse.dir>/indexes``).
    """

    key: str
    default: str
    meaning: str
    derived: str = ""

    @property
    def shown_default(self) -> str:
        """The default as documentation shows it: the value, or how it is derived."""
        return self.derived or self.default


#: Every accelerator setting, in the order the documentation lists them.
SETTINGS: list[Setting] = []


def _declare(key: str, default: str, meaning: str, derived: str = "") -> str:
    SETTINGS.append(Setting(key, default, meaning, derived))
    return key


SYSTEM_PATH = _declare(
    "spark.accelerator.system.path", "",
    "where indexes, their logs and the query history live",
    derived="<spark.sql.warehouse.dir>/indexes")
NUM_BUCKETS = _declare(
    "spark.accelerator.index.numBuckets", "auto",
    "buckets (files) of a new covering index, unless its config says otherwise; auto: a power "
    "of two fitted to the index's size (at most 128 MB a bucket) and to "
    "spark.sql.shuffle.partitions, at most 128")
CACHE_EXPIRY = _declare(
    "spark.accelerator.index.cache.expirySeconds", "10",
    "how long the rewriter trusts its cached list of indexes before reloading it in the "
    "background (queries never wait for it; operations of this process refresh it at once; "
    "other processes' changes are seen after about this delay)")
TEXT_CACHE_DIR = _declare(
    "spark.accelerator.text.localCacheDir", "",
    "where the driver keeps its local copies of text index shards (one directory per index "
    "version)",
    derived="<tmp>/spark-accelerator-text")
HYBRID_SCAN = _declare(
    "spark.accelerator.index.hybridScan.enabled", "true",
    "use a covering index over a changed source: appended files read next to it, deleted "
    "files' rows filtered out by lineage")
MAX_APPENDED_RATIO = _declare(
    "spark.accelerator.index.hybridScan.maxAppendedRatio", "0.3",
    "the largest share of the source's bytes the appended files may hold for hybrid scan")
MAX_DELETED_RATIO = _declare(
    "spark.accelerator.index.hybridScan.maxDeletedRatio", "0.2",
    "the largest share of the indexed bytes deleted or modified files may have held for "
    "hybrid scan")
LINEAGE = _declare(
    "spark.accelerator.index.lineage.enabled", "false",
    "new covering indexes store each row's source file id (`_data_file_id`), so deleted files "
    "are handled by hybrid scan and incremental refresh")
VACUUM_RETENTION = _declare(
    "spark.accelerator.index.vacuum.retentionSeconds", "3600",
    "`vacuumIndex` on an ACTIVE index removes a data version only once it was replaced this "
    "long ago; keep it above `spark.accelerator.index.cache.expirySeconds` plus your longest "
    "query")
OPTIMIZE_BYTES = _declare(
    "spark.accelerator.index.optimize.bytesPerIteration", "1g",
    "`optimizeIndex(mode=\"quick\")` takes no more groups of files once it holds this many "
    "bytes (it takes at least one)")
FILTER_RULE_BUCKETS = _declare(
    "spark.accelerator.index.filterRule.useBucketSpec", "true",
    "the filter rule reads a covering index as a bucketed relation (Spark keeps its bucketing "
    "for a join or aggregate above; for a plain filter it reads the files as it would "
    "unbucketed ones); false: always as plain files")
DFP_ENABLED = _declare(
    "spark.accelerator.dynamicFilePruning.enabled", "true",
    "prune a relation's files through its joins: where a data-skipping index sketches the "
    "relation's join key, the other side's distinct keys (collected by a small query while "
    "the query is planned) skip the files that hold none of them")
DFP_MAX_BYTES = _declare(
    "spark.accelerator.dynamicFilePruning.maxSideBytes", "",
    "the other side of a join is collected for dynamic file pruning only when Spark estimates "
    "it at most this large (negative: never)",
    derived="<spark.sql.autoBroadcastJoinThreshold>")
DFP_MAX_KEYS = _declare(
    "spark.accelerator.dynamicFilePruning.maxKeys", "1000",
    "the most distinct keys of the other side listed for dynamic file pruning; past it, files "
    "are pruned by the keys' range")
DFP_MIN_SCAN_BYTES = _declare(
    "spark.accelerator.dynamicFilePruning.minScanBytes", "32m",
    "the other side of a join is collected for dynamic file pruning only when the relation "
    "it would prune reads at least this many bytes of files after its own filters (and no "
    "covering index replaces it): pruning less saves less than the collection's Spark job "
    "costs")
DFP_LOCAL_BYTES = _declare(
    "spark.accelerator.dynamicFilePruning.localBytes", "16m",
    "an other side whose file relations are each at most this large (files) is run over "
    "copies of the columns it reads of them, kept in driver memory per source version (at "
    "most this many bytes each): its keys then cost no Spark job; 0: never")
HISTORY_ENABLED = _declare(
    "spark.accelerator.history.enabled", "true",
    "record query history")
HISTORY_FLUSH_INTERVAL = _declare(
    "spark.accelerator.history.flushIntervalSeconds", f"{DEFAULT_FLUSH_INTERVAL_S:g}",
    "the longest a recorded query waits in the driver's memory before it is written to the "
    "history (read when the history of a system path is first recorded in a process; "
    "`Hyperspace.flushHistory(spark)` writes at once)")
HISTORY_LITERALS = _declare(
    "spark.accelerator.history.literals", "true",
    "keep the values queries compare columns with in the history (at most 16 per predicate, "
    "64 bytes each), for the rule engine's estimates; false: never store them")
CACHE_PATH = _declare(
    "spark.accelerator.cache.path", "",
    "where the cache tier keeps its Parquet copies of source files and its manifest (any "
    "Hadoop file system; ideally a faster one than the lake)",
    derived="<system path>/_cache")
CACHE_ENABLED = _declare(
    "spark.accelerator.cache.enabled", "true",
    "the rewrite reads cached files from the cache (false: from the source, as if nothing "
    "were cached)")
CACHE_MAX_BYTES = _declare(
    "spark.accelerator.cache.maxBytes", "",
    "the cache's size: the demoter keeps its entries' bytes below "
    "`spark.accelerator.cache.maxUsagePercent` of it, and ALWAYS entries must fit in it",
    derived="<half of the cache file system's capacity, else 64g>")
CACHE_MAX_USAGE = _declare(
    "spark.accelerator.cache.maxUsagePercent", "90",
    "above this share of `maxBytes` the demoter evicts entries (lowest priority, least "
    "recently used first)")
CACHE_CLEANUP = _declare(
    "spark.accelerator.cache.cleanupPercent", "80",
    "the demoter evicts for space until usage is below this share of `maxBytes`")
CACHE_GRACE = _declare(
    "spark.accelerator.cache.deleteGraceSeconds", "3600",
    "an evicted entry's files are deleted only this long after it stopped being served "
    "(queries planned before still read them); keep it above your longest query and warm-up")
CACHE_REFRESH = _declare(
    "spark.accelerator.cache.refreshSeconds", "10",
    "entries other processes commit or evict are seen by the rewrite after at most this delay")
RULES_PATH = _declare(
    "spark.accelerator.rules.path", "",
    "a user rules YAML file (see `configs/rules.yaml`) that `recommend` and "
    "`applyRecommendations` follow; `hs.loadRules(path)` sets it after checking the file",
    derived="<none>")
RULES_HALF_LIFE = _declare(
    "spark.accelerator.rules.halfLife", "P7D",
    "the rule engine weighs a query half as much per half-life of age (ISO-8601 duration)")
RULES_INDEX_BYTES = _declare(
    "spark.accelerator.rules.budget.indexBytes", "",
    "bytes the engine's indexes may take, unless the rules file sets it",
    derived="<25% of the bytes of the sources in the history>")
RULES_CACHE_BYTES = _declare(
    "spark.accelerator.rules.budget.cacheBytes", "",
    "bytes the engine may put in the cache, unless the rules file sets it",
    derived="<spark.accelerator.cache.maxBytes>")
RULES_MAX_INDEXES = _declare(
    "spark.accelerator.rules.budget.maxIndexesPerSource", "8",
    "indexes per source the engine does not go beyond (counting every index on it)")
RULES_BUILD_SECONDS = _declare(
    "spark.accelerator.rules.budget.buildSecondsPerRun", "600",
    "estimated build seconds one `applyRecommendations` run may spend on the engine's "
    "instructions")
RULES_MIN_SECONDS_SAVED = _declare(
    "spark.accelerator.rules.minSecondsSaved", "0.05",
    "the rule engine proposes no index or cache saving less than this many seconds a query "
    "(an index's own costs in a query are some tens of milliseconds)")
ENABLED = _declare(
    "spark.accelerator.enabled", "false",
    "whether the rule rewrites plans; `Hyperspace.enable`/`disable` set it")

# Spark's own settings the accelerator reads (not accelerator settings, not declared above)
BROADCAST_THRESHOLD = "spark.sql.autoBroadcastJoinThreshold"
BUCKETING = "spark.sql.sources.bucketing.enabled"
CASE_SENSITIVE = "spark.sql.caseSensitive"
WAREHOUSE_DIR = "spark.sql.warehouse.dir"
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
POOL_PROPERTY = "spark.scheduler.pool"
#: the FAIR scheduler pool (:data:`POOL_PROPERTY`) of the scheduler's jobs
JOBS_POOL = "accelerator-jobs"

_DECLARED = {s.key: s for s in SETTINGS}


def _bucket_count(value: str) -> int | None:
    """A numBuckets setting: a positive integer, or None for ``auto``."""
    if value.strip().lower() == "auto":
        return None
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        raise ValueError(f"{NUM_BUCKETS} must be 'auto' or a positive integer, got {value!r}")
    return count


@dataclass(frozen=True)
class Settings:
    """The accelerator settings of one session, read once per query."""

    system_path: str
    num_buckets: int | None       # None: auto (indexes.covering.bucket_count)
    shuffle_partitions: int
    cache_expiry_seconds: float
    history_enabled: bool
    history_flush_interval_seconds: float   # longest a recorded query waits in memory
    history_literals: bool        # the history keeps predicates' literal values
    case_sensitive: bool
    text_cache_dir: str
    filter_rule_bucket_spec: bool
    hybrid_scan: bool
    max_appended_ratio: float     # appended bytes over the source's bytes, for hybrid scan
    max_deleted_ratio: float      # deleted bytes over the indexed bytes, for hybrid scan
    lineage: bool                 # new covering indexes record each row's source file
    optimize_bytes: int           # bytes after which optimizeIndex(mode="quick") takes no more files
    vacuum_retention_seconds: float   # vacuumIndex keeps versions replaced less long ago
    #: the setting of ``vacuum_retention_seconds``, as messages name it
    vacuum_retention_key: ClassVar[str] = VACUUM_RETENTION
    broadcast_threshold: int      # bytes; negative: Spark never broadcasts by size
    bucketing: bool
    cache_path: str
    cache_enabled: bool
    cache_max_bytes: int | None   # None: derived from the cache file system's capacity
    cache_max_usage_percent: float
    cache_cleanup_percent: float
    cache_grace_seconds: float
    cache_refresh_seconds: float
    join_pruning: bool            # dynamic file pruning
    join_side_bytes: int          # the largest other side collected (estimated); negative: none
    join_keys: int                # the most keys listed; past it, their range
    join_min_scan_bytes: int      # the least a relation reads for its joins to prune it
    join_local_bytes: int         # the largest relation of an other side copied to the driver

    @staticmethod
    def read(get: Callable[[str, str], str]) -> "Settings":
        """Reads the settings through ``get(key, default)`` (Python or JVM session conf), with
        the defaults declared in :data:`SETTINGS`."""
        def value(key: str) -> str:
            return get(key, _DECLARED[key].default)

        def flag(key: str) -> bool:
            return value(key).lower() == "true"

        system_path = value(SYSTEM_PATH) \
            or get(WAREHOUSE_DIR, "spark-warehouse").rstrip("/") + "/indexes"
        return Settings(
            system_path=system_path,
            num_buckets=_bucket_count(value(NUM_BUCKETS)),
            shuffle_partitions=int(get(SHUFFLE_PARTITIONS, "200")),
            cache_expiry_seconds=float(value(CACHE_EXPIRY)),
            history_enabled=flag(HISTORY_ENABLED),
            history_flush_interval_seconds=float(value(HISTORY_FLUSH_INTERVAL)),
            history_literals=flag(HISTORY_LITERALS),
            case_sensitive=get(CASE_SENSITIVE, "false").lower() == "true",
            text_cache_dir=value(TEXT_CACHE_DIR)
            or os.path.join(tempfile.gettempdir(), "spark-accelerator-text"),
            filter_rule_bucket_spec=flag(FILTER_RULE_BUCKETS),
            hybrid_scan=flag(HYBRID_SCAN),
            max_appended_ratio=float(value(MAX_APPENDED_RATIO)),
            max_deleted_ratio=float(value(MAX_DELETED_RATIO)),
            lineage=flag(LINEAGE),
            optimize_bytes=byte_size(value(OPTIMIZE_BYTES)),
            vacuum_retention_seconds=float(value(VACUUM_RETENTION)),
            broadcast_threshold=byte_size(get(BROADCAST_THRESHOLD, "10MB")),
            bucketing=get(BUCKETING, "true").lower() == "true",
            cache_path=value(CACHE_PATH) or system_path.rstrip("/") + "/_cache",
            cache_enabled=flag(CACHE_ENABLED),
            cache_max_bytes=byte_size(value(CACHE_MAX_BYTES)) if value(CACHE_MAX_BYTES) else None,
            cache_max_usage_percent=float(value(CACHE_MAX_USAGE)),
            cache_cleanup_percent=float(value(CACHE_CLEANUP)),
            cache_grace_seconds=float(value(CACHE_GRACE)),
            cache_refresh_seconds=float(value(CACHE_REFRESH)),
            join_pruning=flag(DFP_ENABLED),
            join_side_bytes=byte_size(value(DFP_MAX_BYTES) or get(BROADCAST_THRESHOLD, "10MB")),
            join_keys=int(value(DFP_MAX_KEYS)),
            join_min_scan_bytes=byte_size(value(DFP_MIN_SCAN_BYTES)),
            join_local_bytes=byte_size(value(DFP_LOCAL_BYTES)),
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
        """Settings from the conf map the JVM rule sends with each plan (read once per
        distinct map)."""
        return _settings_of(tuple(sorted(conf.items())))


@functools.lru_cache(maxsize=64)
def _settings_of(items: tuple[tuple[str, str], ...]) -> Settings:
    conf = dict(items)
    return Settings.read(lambda k, d: conf.get(k, d))


@dataclass(frozen=True)
class RuleSettings:
    """The rule engine's settings (read when it runs, not per query). A budget of None takes
    the engine's derived default; a rules file's budget wins over these."""

    rules_path: str | None
    half_life_seconds: int
    index_bytes: int | None
    cache_bytes: int | None
    max_indexes_per_source: int
    build_seconds_per_run: float
    min_seconds_saved: float = 0.05

    @staticmethod
    def read(get: Callable[[str, str], str]) -> "RuleSettings":
        """Reads them through ``get(key, default)``; ValueError names a bad value's key."""
        def value(key: str) -> str:
            return get(key, _DECLARED[key].default).strip()

        def parsed(key: str, parse: Callable[[str], Any]) -> Any:
            try:
                return parse(value(key))
            except ValueError as exc:
                raise ValueError(f"{key}: {exc}") from None

        return RuleSettings(
            rules_path=value(RULES_PATH) or None,
            half_life_seconds=parsed(RULES_HALF_LIFE, lambda v: parse_duration(v, "half-life")),
            index_bytes=parsed(RULES_INDEX_BYTES, lambda v: byte_size(v) if v else None),
            cache_bytes=parsed(RULES_CACHE_BYTES, lambda v: byte_size(v) if v else None),
            max_indexes_per_source=parsed(RULES_MAX_INDEXES, int),
            build_seconds_per_run=parsed(RULES_BUILD_SECONDS, float),
            min_seconds_saved=parsed(RULES_MIN_SECONDS_SAVED, float))

    @staticmethod
    def of_session(spark: Any) -> "RuleSettings":
        """The rule engine's settings of a Python SparkSession."""
        return RuleSettings.read(lambda k, d: spark.conf.get(k, d))
