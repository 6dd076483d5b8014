"""The benchmark workloads, each one small declaration: its data, the indexes it needs, its query,
the rows its limit file holds, and the ratio it is expected to reach.

To add one: write a ``Workload(...)`` and append it to ``WORKLOADS``.
"""
from __future__ import annotations

import os
import random
import shutil
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from pyspark.sql import DataFrame, functions as F

from accelerator import (
    BloomFilterSketch,
    DataSkippingIndexConfig,
    IndexConfig,
    MinMaxSketch,
    TextIndexConfig,
    ValueListSketch,
)
from bench import datasets, eventlog
from indexes.names import quote_path


@dataclass(frozen=True)
class Context:
    """What a workload's ``prepare`` gets: the session, where data is cached, the scale, and the
    number of files of the many-small-files source (smaller in the smoke test)."""

    spark: Any
    data_dir: str
    scale: float
    many_files: int = 1000
    cache_files: int = 10_000
    warmup_files: int = 5000


def read_parquet(spark: Any, path: str, facts: dict) -> DataFrame:
    """The default reader of a workload's source."""
    return spark.read.parquet(path)


@dataclass(frozen=True)
class Workload:
    """One benchmark query, run with vanilla Spark and with the accelerator.

    ``prepare(ctx)`` returns facts, among them ``path`` (the Parquet source); ``query(df, facts)``
    builds the query over the source DataFrame (reading other sources itself, as a join does);
    ``indexes(facts)`` lists the index configs it needs (built once per run, timed), each over
    the source as ``read`` gives it or given as ``(other Parquet path, config)``; ``limit(df, facts)`` selects the rows the query needs,
    written once to a single Parquet file that the same query then reads: Spark's fixed cost for
    this answer (None when no such floor makes sense). ``min_ratio``/``max_ratio`` bound the
    expected median vanilla/accelerated ratio. ``conf``: session settings both sides run under.
    ``change(spark, facts)``, if given, changes the source once its indexes are built (appends
    files, say), before anything is measured; with ``refresh_cost``, the indexes over the changed
    source are then refreshed incrementally (timed against their build) and dropped, since the
    next run's ``prepare`` restores the source.

    ``read(spark, path, facts)`` reads the source (Parquet by default; a CSV or JSON source
    says how, with its schema; a Delta table, ``bench/formats.py``). ``cache(df, facts)``, if given, is the DataFrame passed to
    ``hs.cache`` once before anything is measured (its columns of its files are copied into the
    cache tier): the accelerated side must then read the cache (its executed plan holds a
    ``CachedFileIndex``), or the workload fails. The limit is always read as Parquet;
    ``limit_files`` is how many files it is written as (None: one per partition of the
    ``limit`` DataFrame, e.g. one per source file, as the cache holds them).
    """

    name: str
    description: str
    prepare: Callable[[Context], dict]
    query: Callable[[DataFrame, dict], DataFrame]
    indexes: Callable[[dict], list[Any]] = field(default=lambda facts: [])
    limit: Callable[[DataFrame, dict], DataFrame] | None = None
    min_ratio: float | None = None
    max_ratio: float | None = None
    conf: dict[str, str] = field(default_factory=dict)
    change: Callable[[Any, dict], None] | None = None
    refresh_cost: bool = False
    read: Callable[[Any, str, dict], DataFrame] = read_parquet
    cache: Callable[[DataFrame, dict], DataFrame] | None = None
    limit_files: int | None = 1


@dataclass(frozen=True)
class BuildCost:
    """The cost of building an index against its limit: the plain Spark job that produces what
    the index holds (the same facts computed by scanning, or the same columns written the same
    way), with no accelerator code in it.

    ``prepare(ctx)`` returns facts with ``path`` (the source, read by ``read``); ``index(facts)``
    is the index config (built, timed, deleted and vacuumed, ``runs`` times);
    ``limit(df, facts, config)`` is the limit job's DataFrame over the source DataFrame, given
    the index's config as its log entry recorded it (the bucket count a covering index chose):
    collected, or with ``write_limit`` written as Parquet into a fresh directory (deleted
    afterwards). The expectation is ``median build / median limit <= max_ratio`` (None: the
    ratio is reported, no target).
    """

    name: str
    description: str
    prepare: Callable[[Context], dict]
    index: Callable[[dict], Any]
    limit: Callable[[DataFrame, dict, dict], DataFrame]
    max_ratio: float | None
    write_limit: bool = False
    read: Callable[[Any, str, dict], DataFrame] = read_parquet


@dataclass(frozen=True)
class PruningCost:
    """What a data-skipping index adds to planning one query over a source of many files.

    ``prepare(ctx)`` returns facts with ``path``; ``index(facts)`` is built once (then deleted)
    over ``read(spark, path, facts)``; ``query(df, facts, i)`` is the ``i``-th query (a fresh
    literal each time) whose executed plan is built with the accelerator off and on,
    alternating. The expectation is ``median on - median off <= max_added_ms``.
    """

    name: str
    description: str
    prepare: Callable[[Context], dict]
    index: Callable[[dict], Any]
    query: Callable[[DataFrame, dict, int], DataFrame]
    max_added_ms: float
    read: Callable[[Any, str, dict], DataFrame] = read_parquet


@dataclass(frozen=True)
class CacheWarmupCost:
    """The cost of warming the cache (``hs.cache``) against one vanilla scan of the same columns.

    ``workload`` is a cache workload: its ``prepare``, ``read`` and ``cache`` give the DataFrame
    that is cached (into an empty cache, a fresh cache path each run) and scanned
    (``write.format("noop")``). The expectation is ``median cache / median scan <= max_ratio``.
    """

    name: str
    description: str
    workload: "Workload"
    max_ratio: float
    max_seconds: float | None = None   # a target on the median warm-up itself, if any


@dataclass(frozen=True)
class CachePlanningCost:
    """What the cache tier adds to planning a query over a source of many files, some cached.

    ``prepare(ctx)`` returns facts with ``path``; ``cached(spark, facts)`` is the DataFrame
    cached once (part of the files); ``query(df, facts, i)`` is the ``i``-th query over the
    whole source, whose executed plan is built with the accelerator off and on, alternating.
    The expectation is ``median on - median off <= max_added_ms``.
    """

    name: str
    description: str
    prepare: Callable[[Context], dict]
    cached: Callable[[Any, dict], DataFrame]
    query: Callable[[DataFrame, dict, int], DataFrame]
    max_added_ms: float


def lineitem_facts(ctx: Context) -> dict:
    """TPC-H lineitem's path and a ``key`` (l_partkey) present in it, picked with a fixed seed."""
    path = datasets.tpch(ctx.data_dir, ctx.scale)["lineitem"]
    first = sorted(f for f in os.listdir(path) if f.endswith(".parquet"))[0]
    keys = sorted(r[0] for r in ctx.spark.read.parquet(os.path.join(path, first))
                  .select("l_partkey").distinct().collect())
    return {"path": path, "key": random.Random(42).choice(keys)}


def _events_key(fact: str) -> Callable[[Context], dict]:
    """A ``prepare``: the event log's facts, with ``key`` set to the fact named ``fact``."""
    def prepare(ctx: Context) -> dict:
        facts = datasets.eventlog(ctx.spark, ctx.data_dir, ctx.scale)
        return {**facts, "key": facts[fact]}
    return prepare


#: The JSON path of the event time inside the event log's ``payload`` (ISO-8601 UTC text).
PAYLOAD_AT = "get_json_object(payload, '$.at')"
#: Events the time-window workload selects (fewer when a file is small).
WINDOW_EVENTS = 300


def generously(n: int) -> int:
    """A capacity comfortably above ``n``: ``1.25 * n`` rounded up to 1, 2 or 5 times a power of
    ten (78,125 rows per file -> 100,000; 640 sessions -> 1,000)."""
    target = -(-n * 5 // 4)
    power = 1
    while True:
        for step in (1, 2, 5):
            if step * power >= target:
                return step * power
        power *= 10


def _events_window(ctx: Context) -> dict:
    """The event log and a narrow window of ``payload``'s ``at`` times (ISO text, inclusive):
    WINDOW_EVENTS consecutive events in the middle of a file in the middle of the log."""
    facts = datasets.eventlog(ctx.spark, ctx.data_dir, ctx.scale)
    lo, hi = facts["file_bounds"][facts["files"] // 2]
    width = min(WINDOW_EVENTS, (hi - lo) // 4)
    first = (lo + hi - width) // 2
    t0 = eventlog.at_text(eventlog.event_micros(facts, first))
    t1 = eventlog.at_text(eventlog.event_micros(facts, first + width))
    return {**facts, "key": [t0, t1]}


def _message_holds(df: DataFrame, facts: dict) -> DataFrame:
    return df.filter(F.col("message").like(f"%{facts['key']}%"))


#: The text index over the event log's ``message`` (its build throughput and size are reported).
MESSAGE_INDEX = TextIndexConfig("bench_events_message", column="message")


def events_skipping_index(facts: dict) -> DataSkippingIndexConfig:
    """One data-skipping index over the event log, shared by the workloads that prune it (built
    once per run): min/max of ``payload``'s ``at`` and Bloom filters of ``trace_id`` and
    ``session_id``, sized generously above what a file holds (a file with more distinct values
    than that would get no filter)."""
    return DataSkippingIndexConfig(
        "bench_events_skipping",
        MinMaxSketch(PAYLOAD_AT),
        BloomFilterSketch("trace_id", fpp=0.01,
                          expectedDistinctCountPerFile=generously(facts["max_file_rows"])),
        BloomFilterSketch("session_id", fpp=0.01,
                          expectedDistinctCountPerFile=generously(facts["max_file_sessions"])))


def _at_between(df: DataFrame, facts: dict) -> DataFrame:
    t0, t1 = facts["key"]
    return df.filter(F.expr(f"{PAYLOAD_AT} BETWEEN '{t0}' AND '{t1}'"))


def _at_cast_between(df: DataFrame, facts: dict) -> DataFrame:
    t0, t1 = facts["key"]
    return df.filter(F.expr(f"cast({PAYLOAD_AT} as timestamp) BETWEEN timestamp'{t0}' AND "
                            f"timestamp'{t1}'"))


def _lineitem_orders(ctx: Context) -> dict:
    """lineitem (the workload's source), orders, and a quarter of order dates to filter on."""
    tables = datasets.tpch(ctx.data_dir, ctx.scale)
    return {"path": tables["lineitem"], "orders": tables["orders"], "key": ["1995-01-01", "1995-03-31"]}


def _lineitem_join_orders(df: DataFrame, facts: dict) -> DataFrame:
    lo, hi = facts["key"]
    orders = df.sparkSession.read.parquet(facts["orders"]).filter(
        F.col("o_orderdate").between(F.lit(lo).cast("date"), F.lit(hi).cast("date")))
    return (df.join(orders, F.col("l_orderkey") == F.col("o_orderkey"))
            .groupBy("o_orderdate").agg(F.sum("l_extendedprice").alias("revenue"),
                                        F.count("*").alias("lines")))


#: ``spark.sql.shuffle.partitions`` of the benchmark sessions (a few per core of ``local[2]``).
SHUFFLE_PARTITIONS = 8

#: The share of lineitem's rows the hybrid-scan workload appends after building its index.
APPENDED_SHARE = 0.1


def _lineitem_copy(ctx: Context) -> dict:
    """A fresh copy of lineitem (its index is built over the copy, then files are appended)."""
    facts = lineitem_facts(ctx)
    copy = os.path.join(ctx.data_dir, f"tpch-sf{ctx.scale:g}-appended", "lineitem")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(facts["path"], copy)
    return {**facts, "path": copy}


def _append_lineitem(spark: Any, facts: dict) -> None:
    """Appends new files holding APPENDED_SHARE of lineitem's rows (a seeded sample, the looked
    up key's rows among them) to the copy."""
    df = spark.read.parquet(facts["path"])
    sample = df.sample(fraction=APPENDED_SHARE, seed=11).union(
        _partkey_rows(df, facts))
    sample.coalesce(2).write.mode("append").parquet(facts["path"])


def _partkey_rows(df: DataFrame, facts: dict) -> DataFrame:
    return df.filter(F.col("l_partkey") == facts["key"])


def _partkey_lookup(df: DataFrame, facts: dict) -> DataFrame:
    return _partkey_rows(df, facts).select("l_orderkey", "l_partkey", "l_quantity", "l_extendedprice")


def _events_json(ctx: Context) -> dict:
    return {**datasets.eventlog_json(ctx.spark, ctx.data_dir, ctx.scale), "key": "DE"}


def _read_events_json(spark: Any, path: str, facts: dict) -> DataFrame:
    """The JSON-lines event log, read with the Parquet log's schema (no inference pass)."""
    from pyspark.sql.types import StructType
    import json as _json

    return (spark.read.schema(StructType.fromJson(_json.loads(facts["schema"])))
            .option("timestampFormat", datasets.JSON_TIMESTAMP_FORMAT).json(path))


#: the event log's columns the two cached JSON workloads read (``user`` is a struct)
EVENTS_CACHED_COLUMNS = ["event_id", "ts", "session_id", "level", "user"]


def _events_cached(df: DataFrame, facts: dict) -> DataFrame:
    return df.select(*EVENTS_CACHED_COLUMNS)


def _events_errors_of_country(df: DataFrame, facts: dict) -> DataFrame:
    return (df.filter((F.col("level") == "ERROR") & (F.col("user.country") == facts["key"]))
            .select("event_id", "ts", "session_id", F.col("user.id").alias("user_id")))


def _events_per_country_level(df: DataFrame, facts: dict) -> DataFrame:
    return (df.groupBy(F.col("user.country").alias("country"), "level")
            .agg(F.count("*").alias("events"), F.countDistinct("session_id").alias("sessions"),
                 F.min("ts").alias("first"), F.max("ts").alias("last")))


#: lineitem's columns as tpchgen-cli's Parquet holds them (the CSV is read back with them)
LINEITEM_SCHEMA = (
    "l_orderkey long, l_partkey long, l_suppkey long, l_linenumber int, "
    "l_quantity decimal(15,2), l_extendedprice decimal(15,2), l_discount decimal(15,2), "
    "l_tax decimal(15,2), l_returnflag string, l_linestatus string, l_shipdate date, "
    "l_commitdate date, l_receiptdate date, l_shipinstruct string, l_shipmode string, "
    "l_comment string")
#: the columns TPC-H Q6 reads
Q6_COLUMNS = ["l_shipdate", "l_discount", "l_quantity", "l_extendedprice"]


def _lineitem_csv(ctx: Context) -> dict:
    return {"path": datasets.tpch_csv(ctx.data_dir, ctx.scale), "key": "1994"}


def _read_lineitem_csv(spark: Any, path: str, facts: dict) -> DataFrame:
    return spark.read.option("header", "true").schema(LINEITEM_SCHEMA).csv(path)


def _q6(df: DataFrame, facts: dict) -> DataFrame:
    """TPC-H Q6: revenue of the year's lines with a discount of .05-.07 and quantity < 24."""
    year = int(facts["key"])
    return (df.filter(F.expr(f"l_shipdate >= DATE '{year}-01-01' AND l_shipdate < DATE "
                             f"'{year + 1}-01-01' AND l_discount BETWEEN 0.05 AND 0.07 "
                             "AND l_quantity < 24"))
            .agg(F.sum(F.col("l_extendedprice") * F.col("l_discount")).alias("revenue")))


LINEITEM_INDEX = IndexConfig("bench_lineitem_partkey", indexedColumns=["l_partkey"],
                             includedColumns=["l_orderkey", "l_quantity", "l_extendedprice"])

WORKLOADS: list[Workload] = [
    Workload(
        name="tpch_lineitem_partkey_lookup",
        description="TPC-H lineitem point lookup on l_partkey (covering index)",
        prepare=lineitem_facts,
        indexes=lambda facts: [LINEITEM_INDEX],
        query=_partkey_lookup,
        limit=_partkey_rows,
        min_ratio=5.0,
    ),
    Workload(
        name="tpch_lineitem_partkey_lookup_appended",
        description=f"the lineitem point lookup after appending {APPENDED_SHARE:.0%} new rows in "
                    "new files to the indexed source (hybrid scan: the index plus the new files)",
        prepare=_lineitem_copy,
        indexes=lambda facts: [replace(LINEITEM_INDEX, indexName="bench_lineitem_partkey_appended")],
        change=_append_lineitem,
        refresh_cost=True,
        query=_partkey_lookup,
        limit=_partkey_rows,
        min_ratio=5.0,
    ),
    Workload(
        name="tpch_lineitem_join_orders",
        description="TPC-H lineitem joined with one quarter of orders on the order key, revenue "
                    "per day (covering indexes on both join keys: no shuffle for the join)",
        prepare=_lineitem_orders,
        indexes=lambda facts: [
            IndexConfig("bench_lineitem_orderkey", indexedColumns=["l_orderkey"],
                        includedColumns=["l_extendedprice"]),
            (facts["orders"], IndexConfig("bench_orders_orderkey", indexedColumns=["o_orderkey"],
                                          includedColumns=["o_orderdate"]))],
        query=_lineitem_join_orders,
        min_ratio=2.0,
        # a sort-merge join on both sides: without this, Spark may broadcast the orders quarter
        conf={"spark.sql.autoBroadcastJoinThreshold": "-1"},
    ),
    Workload(
        name="eventlog_user_id_lookup",
        description="event log lookup on the nested field user.id (covering index, flattened)",
        prepare=_events_key("sample_user_id"),
        indexes=lambda facts: [IndexConfig("bench_events_user_id", indexedColumns=["user.id"],
                                           includedColumns=["ts", "event_id", "level", "device.os"])],
        query=lambda df, facts: df.filter(F.col("user.id") == facts["key"])
        .select("ts", "event_id", "level", "device.os"),
        limit=lambda df, facts: df.filter(F.col("user.id") == facts["key"]),
        min_ratio=5.0,
    ),
    Workload(
        name="eventlog_account_id_lookup",
        description="event log lookup on the clustered account_id, which Parquet's dictionaries "
                    "already prune on (covering index): it must not be slower",
        prepare=_events_key("sample_account_id"),
        indexes=lambda facts: [IndexConfig("bench_events_account_id",
                                           indexedColumns=["account_id"],
                                           includedColumns=["ts", "event_id", "level", "device.os"])],
        query=lambda df, facts: df.filter(F.col("account_id") == facts["key"])
        .select("ts", "event_id", "level", "device.os"),
        limit=lambda df, facts: df.filter(F.col("account_id") == facts["key"]),
        min_ratio=1.0,
    ),
    Workload(
        name="eventlog_payload_time_window",
        description="event log rows whose payload's ISO time text lies in a narrow window "
                    "(min/max of a JSON path, data skipping)",
        prepare=_events_window,
        indexes=lambda facts: [events_skipping_index(facts)],
        query=_at_between,
        limit=_at_between,
        min_ratio=10.0,
    ),
    Workload(
        name="eventlog_payload_time_window_cast",
        description="the same window with the JSON path cast to a timestamp (the string "
                    "sketch's typed bounds, data skipping)",
        prepare=_events_window,
        indexes=lambda facts: [events_skipping_index(facts)],
        query=_at_cast_between,
        limit=_at_cast_between,
        min_ratio=10.0,
    ),
    Workload(
        name="eventlog_trace_id_bloom",
        description="event log lookup of one unique trace_id (Bloom filter, data skipping)",
        prepare=_events_key("sample_trace_id"),
        indexes=lambda facts: [events_skipping_index(facts)],
        query=lambda df, facts: df.filter(F.col("trace_id") == facts["key"]),
        limit=lambda df, facts: df.filter(F.col("trace_id") == facts["key"]),
        min_ratio=5.0,
    ),
    Workload(
        name="eventlog_session_id_bloom",
        description="event log lookup of one session_id, which vanilla Spark already prunes by "
                    "Parquet dictionaries (Bloom filter, data skipping): must not be slower",
        prepare=_events_key("sample_session_id"),
        indexes=lambda facts: [events_skipping_index(facts)],
        query=lambda df, facts: df.filter(F.col("session_id") == facts["key"]),
        limit=lambda df, facts: df.filter(F.col("session_id") == facts["key"]),
        min_ratio=0.95,
    ),
    Workload(
        name="eventlog_message_rare_error",
        description="event log messages holding a rare error code, message LIKE '%ERR-4711%' "
                    "(text index: only the files whose trigrams hold the code are read)",
        prepare=_events_key("rare_error_code"),
        indexes=lambda facts: [MESSAGE_INDEX],
        query=_message_holds,
        limit=_message_holds,
        min_ratio=5.0,
    ),
    Workload(
        name="eventlog_message_frequent_token",
        description="count of the messages holding 'INFO', which nearly every row holds (the text "
                    "index's cutoff keeps every file without looking it up): must not be slower",
        prepare=_events_key("frequent_token"),
        indexes=lambda facts: [MESSAGE_INDEX],
        query=lambda df, facts: _message_holds(df, facts).agg(F.count("*").alias("n")),
        min_ratio=1 / 1.1,
    ),
    Workload(
        name="eventlog_json_cached_filter",
        description="gzip JSON-lines event log, selective filter (ERROR events of one country), "
                    "after hs.cache of the columns the cached workloads read; limit: the same "
                    "columns as Parquet",
        prepare=_events_json,
        read=_read_events_json,
        cache=_events_cached,
        query=_events_errors_of_country,
        limit=_events_cached,
        limit_files=None,
        min_ratio=10.0,
    ),
    Workload(
        name="eventlog_json_cached_groupby",
        description="gzip JSON-lines event log, events, sessions and time range per country and "
                    "level, after hs.cache (same entries as the filter); limit: the same "
                    "columns as Parquet",
        prepare=_events_json,
        read=_read_events_json,
        cache=_events_cached,
        query=_events_per_country_level,
        limit=_events_cached,
        limit_files=None,
        min_ratio=10.0,
    ),
    Workload(
        name="tpch_lineitem_csv_cached_q6",
        description="TPC-H Q6 over lineitem as CSV (header, explicit schema) after hs.cache of "
                    "the four columns it reads; limit: those columns as Parquet",
        prepare=_lineitem_csv,
        read=_read_lineitem_csv,
        cache=lambda df, facts: df.select(*Q6_COLUMNS),
        query=_q6,
        limit=lambda df, facts: df.select(*Q6_COLUMNS),
        limit_files=None,
        min_ratio=10.0,
    ),
    Workload(
        name="tpch_lineitem_no_index_applies",
        description="TPC-H lineitem aggregate that no index answers (an index exists on the source)",
        prepare=lineitem_facts,
        indexes=lambda facts: [LINEITEM_INDEX],
        query=lambda df, facts: df.filter(F.col("l_shipdate") >= F.lit("1998-09-01").cast("date"))
        .groupBy("l_returnflag", "l_linestatus").agg(F.sum("l_quantity").alias("qty"),
                                                     F.count("*").alias("n")),
        min_ratio=0.95,
        max_ratio=1.05,
    ),
]


#: lineitem's numeric and date columns, whose min/max Parquet footers hold.
LINEITEM_FOOTER_COLUMNS = ["l_orderkey", "l_partkey", "l_suppkey", "l_linenumber", "l_quantity",
                           "l_extendedprice", "l_discount", "l_tax", "l_shipdate", "l_commitdate",
                           "l_receiptdate"]

def _per_file(aggregates: Callable[[], list[Any]]) -> Callable[[DataFrame, dict, dict], DataFrame]:
    """A data-skipping build's limit: one Spark job aggregating each source file's rows by the
    columns ``aggregates()`` makes."""
    return lambda df, facts, config: df.groupBy(F.col("_metadata.file_path")).agg(*aggregates())


def _bucketed_sorted(df: DataFrame, facts: dict, config: dict) -> DataFrame:
    """A covering build's limit: the same columns hash-partitioned into the index's bucket
    count by its indexed columns and sorted by them within each (written as plain Parquet)."""
    columns = [F.col(quote_path(c["path"])).alias(c["name"])
               for c in config["indexedColumns"] + config["includedColumns"]]
    names = [F.col(f"`{c['name']}`") for c in config["indexedColumns"]]
    return df.select(*columns).repartition(config["numBuckets"], *names).sortWithinPartitions(*names)


def _text_columns(df: DataFrame, facts: dict, config: dict) -> DataFrame:
    """A text build's limit: the columns its tasks read (file, text, row index), written as
    plain Parquet."""
    return df.select(F.col("_metadata.file_path"), F.col(quote_path(config["path"])).alias("t"),
                     F.col("_metadata.row_index"))


def _events(ctx: Context) -> dict:
    return datasets.eventlog(ctx.spark, ctx.data_dir, ctx.scale)


BUILDS: list[BuildCost] = [
    BuildCost(
        name="tpch_lineitem_covering_build",
        description="covering index on l_partkey including l_orderkey, l_quantity, "
                    "l_extendedprice vs a plain Spark job writing those columns as Parquet, "
                    "hash-partitioned into the index's bucket count and sorted by l_partkey",
        prepare=lambda ctx: {"path": datasets.tpch(ctx.data_dir, ctx.scale)["lineitem"]},
        # the lookups' index under a name of its own (theirs stays built during the run)
        index=lambda facts: IndexConfig("bench_lineitem_partkey_build",
                                        indexedColumns=LINEITEM_INDEX.indexedColumns,
                                        includedColumns=LINEITEM_INDEX.includedColumns),
        limit=_bucketed_sorted,
        write_limit=True,
        max_ratio=1.3,
    ),
    BuildCost(
        name="tpch_lineitem_minmax_build",
        description="MinMax data-skipping index over lineitem's numeric and date columns "
                    "(from Parquet footers) vs one Spark job computing per-file min/max",
        prepare=lambda ctx: {"path": datasets.tpch(ctx.data_dir, ctx.scale)["lineitem"]},
        index=lambda facts: DataSkippingIndexConfig(
            "bench_lineitem_minmax", *[MinMaxSketch(c) for c in LINEITEM_FOOTER_COLUMNS]),
        limit=_per_file(lambda: [agg(c).alias(f"{name}_{c}") for c in LINEITEM_FOOTER_COLUMNS
                                 for name, agg in (("min", F.min), ("max", F.max))]),
        max_ratio=0.2,
    ),
    BuildCost(
        name="eventlog_bloom_build",
        description="Bloom filter data-skipping index of the event log's trace_id (1% false "
                    "positives, sized above a file's events) vs one Spark job computing a "
                    "per-file sketch of it (approx_count_distinct: every value hashed)",
        prepare=_events,
        index=lambda facts: DataSkippingIndexConfig(
            "bench_events_trace_bloom", BloomFilterSketch(
                "trace_id", fpp=0.01, expectedDistinctCountPerFile=generously(facts["max_file_rows"]))),
        limit=_per_file(lambda: [F.approx_count_distinct("trace_id").alias("trace_ids")]),
        max_ratio=None,
    ),
    BuildCost(
        name="eventlog_valuelist_build",
        description="ValueList data-skipping index of the event log's level vs one Spark job "
                    "collecting each file's set of levels",
        prepare=_events,
        index=lambda facts: DataSkippingIndexConfig("bench_events_levels", ValueListSketch("level")),
        limit=_per_file(lambda: [F.collect_set("level").alias("levels")]),
        max_ratio=None,
    ),
    BuildCost(
        name="eventlog_text_build",
        description="text index of the event log's message vs a plain Spark job reading the "
                    "columns its tasks read (file, message, row index) and writing them as Parquet",
        prepare=_events,
        index=lambda facts: TextIndexConfig("bench_events_message_build",
                                            column=MESSAGE_INDEX.column),
        limit=_text_columns,
        write_limit=True,
        max_ratio=None,
    ),
]


def _many_files(ctx: Context) -> dict:
    return datasets.many_files(ctx.data_dir, ctx.many_files)


PRUNING: list[PruningCost] = [
    PruningCost(
        name="minmax_point_filter_many_files",
        description="planning a point filter over many small Parquet files with a MinMax "
                    "data-skipping index (one file kept)",
        prepare=_many_files,
        index=lambda facts: DataSkippingIndexConfig("bench_many_files_minmax", MinMaxSketch("id")),
        query=lambda df, facts, i: df.filter(F.col("id") == (i * 7919) % facts["rows"])
        .select("id", "value"),
        max_added_ms=50.0,
    ),
]


def _by_name(name: str) -> Workload:
    return next(w for w in WORKLOADS if w.name == name)


CACHE_WARMUPS: list[CacheWarmupCost] = [
    CacheWarmupCost(
        name="eventlog_json_cache_warmup",
        description="hs.cache of the gzip JSON-lines event log's cached columns into an empty "
                    "cache vs one vanilla scan of them (write.format('noop'))",
        workload=_by_name("eventlog_json_cached_filter"),
        max_ratio=1.5,
    ),
    CacheWarmupCost(
        name="tpch_lineitem_csv_cache_warmup",
        description="hs.cache of lineitem CSV's Q6 columns into an empty cache vs one vanilla "
                    "scan of them (write.format('noop'))",
        workload=_by_name("tpch_lineitem_csv_cached_q6"),
        max_ratio=1.5,
    ),
    CacheWarmupCost(
        name="many_small_files_cache_warmup",
        description="hs.cache of every column of many small Parquet files (--warmup-files, "
                    "5,000 by default, 100 rows each) into an empty cache vs one vanilla scan",
        workload=Workload(
            name="many_small_files", description="every small file, every column",
            prepare=lambda ctx: datasets.many_files(ctx.data_dir, ctx.warmup_files),
            query=lambda df, facts: df, cache=lambda df, facts: df),
        max_ratio=1.5,
        max_seconds=15.0,
    ),
]


def _cache_files(ctx: Context) -> dict:
    return datasets.many_files(ctx.data_dir, ctx.cache_files)


def _half_of_files(spark: Any, facts: dict) -> DataFrame:
    """The first half of the many small files (by name), read as a list of paths: the same
    read, so the same cache keys, as the whole directory's."""
    names = sorted(f for f in os.listdir(facts["path"]) if f.endswith(".parquet"))
    return spark.read.parquet(*[os.path.join(facts["path"], n) for n in names[:len(names) // 2]])


CACHE_PLANNING: list[CachePlanningCost] = [
    CachePlanningCost(
        name="cache_planning_many_files",
        description="planning a filter over many small Parquet files, half of them cached",
        prepare=_cache_files,
        cached=_half_of_files,
        # one row in a thousand (all files hold some), a new literal each run; a projection
        # over the filter (a Filter over the relation at the plan's root is not served yet)
        query=lambda df, facts, i: df.filter(F.col("id") % 1000 == (i * 7919) % 1000)
        .select("id", (F.col("value") * 2).alias("value2")),
        max_added_ms=10.0,
    ),
]
