"""The benchmark workloads, each one small declaration: its data, the indexes it needs, its query,
the rows its limit file holds, and the ratio it is expected to reach.

To add one: write a ``Workload(...)`` and append it to ``WORKLOADS``.
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from typing import Any, Callable

from pyspark.sql import DataFrame, functions as F

from accelerator import IndexConfig
from bench import datasets


@dataclass(frozen=True)
class Context:
    """What a workload's ``prepare`` gets: the session, where data is cached, the scale."""

    spark: Any
    data_dir: str
    scale: float


@dataclass(frozen=True)
class Workload:
    """One benchmark query, run with vanilla Spark and with the accelerator.

    ``prepare(ctx)`` returns facts, among them ``path`` (the Parquet source); ``query(df, facts)``
    builds the query over the source DataFrame; ``indexes(facts)`` lists the index configs it
    needs (built once per run, timed); ``limit(df, facts)`` selects the rows the query needs,
    written once to a single Parquet file that the same query then reads: Spark's fixed cost for
    this answer (None when no such floor makes sense). ``min_ratio``/``max_ratio`` bound the
    expected median vanilla/accelerated ratio.
    """

    name: str
    description: str
    prepare: Callable[[Context], dict]
    query: Callable[[DataFrame, dict], DataFrame]
    indexes: Callable[[dict], list[Any]] = field(default=lambda facts: [])
    limit: Callable[[DataFrame, dict], DataFrame] | None = None
    min_ratio: float | None = None
    max_ratio: float | None = None


def lineitem_facts(ctx: Context) -> dict:
    """TPC-H lineitem's path and a ``key`` (l_partkey) present in it, picked with a fixed seed."""
    path = datasets.tpch(ctx.data_dir, ctx.scale)["lineitem"]
    first = sorted(f for f in os.listdir(path) if f.endswith(".parquet"))[0]
    keys = sorted(r[0] for r in ctx.spark.read.parquet(os.path.join(path, first))
                  .select("l_partkey").distinct().collect())
    return {"path": path, "key": random.Random(42).choice(keys)}


def _events(ctx: Context) -> dict:
    facts = datasets.eventlog(ctx.spark, ctx.data_dir, ctx.scale)
    return {**facts, "key": facts["sample_user_id"]}


LINEITEM_INDEX = IndexConfig("bench_lineitem_partkey", indexedColumns=["l_partkey"],
                             includedColumns=["l_orderkey", "l_quantity", "l_extendedprice"])

WORKLOADS: list[Workload] = [
    Workload(
        name="tpch_lineitem_partkey_lookup",
        description="TPC-H lineitem point lookup on l_partkey (covering index)",
        prepare=lineitem_facts,
        indexes=lambda facts: [LINEITEM_INDEX],
        query=lambda df, facts: df.filter(F.col("l_partkey") == facts["key"])
        .select("l_orderkey", "l_partkey", "l_quantity", "l_extendedprice"),
        limit=lambda df, facts: df.filter(F.col("l_partkey") == facts["key"]),
        min_ratio=5.0,
    ),
    Workload(
        name="eventlog_user_id_lookup",
        description="event log lookup on the nested field user.id (covering index, flattened)",
        prepare=_events,
        indexes=lambda facts: [IndexConfig("bench_events_user_id", indexedColumns=["user.id"],
                                           includedColumns=["ts", "event_id", "level", "device.os"])],
        query=lambda df, facts: df.filter(F.col("user.id") == facts["key"])
        .select("ts", "event_id", "level", "device.os"),
        limit=lambda df, facts: df.filter(F.col("user.id") == facts["key"]),
        min_ratio=5.0,
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
