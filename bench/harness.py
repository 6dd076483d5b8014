"""Runs workloads with vanilla Spark and with the accelerator in one SparkSession, alternating,
and reports medians, ratios, bytes read, index build cost and whether results were identical."""
from __future__ import annotations

import logging
import os
import statistics
import time
import uuid
from typing import Any, Callable

from pyspark.sql import DataFrame, SparkSession

from accelerator import Hyperspace, IndexNotFoundError
from accelerator.explain import why_not
from bench.workloads import Context, Workload

log = logging.getLogger("bench.harness")


def make_spark(work_dir: str, buckets: int, extra: dict[str, str] | None = None) -> SparkSession:
    """The benchmark session: local[2], indexes under ``<work_dir>/indexes``."""
    builder = (SparkSession.builder.master("local[2]").appName("accelerator-bench")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", "8g")
               .config("spark.sql.shuffle.partitions", "8")
               .config("spark.accelerator.system.path", os.path.join(work_dir, "indexes"))
               .config("spark.accelerator.index.numBuckets", str(buckets)))
    for key, value in (extra or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _stats(xs: list[float]) -> dict | None:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "runs": xs} if xs else None


def canonical(rows: list) -> list:
    """Rows in a comparable order (repr keeps NaN equal to NaN and -0.0 apart from 0.0)."""
    return sorted((tuple(r) for r in rows), key=repr)


def _dir_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def scan_stats(spark: SparkSession, df: DataFrame) -> dict:
    """Runs ``df`` once and reports what it read: files its scans selected (Spark's driver
    metric, before bucket pruning) and bytes its tasks actually read (stage input metrics)."""
    sc = spark.sparkContext
    group = f"bench-{uuid.uuid4().hex}"
    sc.setJobGroup(group, "bench scan stats")
    try:
        df.collect()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    jsc = sc._jsc.sc()
    jsc.listenerBus().waitUntilEmpty()   # the status store is filled by the listener bus
    store = jsc.statusStore()
    jobs = store.jobsList(None)
    read = 0
    for i in range(jobs.size()):
        job = jobs.apply(i)
        if job.jobGroup().isDefined() and job.jobGroup().get() == group:
            ids = job.stageIds()
            for j in range(ids.size()):
                read += int(store.lastStageAttempt(ids.apply(j)).inputBytes())
    return {"files": _scan_files(df), "bytes_read": read}


def _scan_files(df: DataFrame) -> int:
    """Files selected by the file scans of ``df``'s executed plan (inside adaptive stages too)."""
    def walk(node: Any) -> int:
        kind = node.getClass().getSimpleName()
        if kind == "AdaptiveSparkPlanExec":
            return walk(node.executedPlan())
        if kind.endswith("QueryStageExec"):
            return walk(node.plan())
        metric = node.metrics().get("numFiles")
        total = int(metric.get().value()) if metric.isDefined() else 0
        children = node.children()
        return total + sum(walk(children.apply(i)) for i in range(children.size()))

    return walk(df._jdf.queryExecution().executedPlan())


def _ensure_index(hs: Hyperspace, spark: SparkSession, path: str, config: Any) -> dict:
    """Builds the index unless this run built it already; its build seconds and size."""
    try:
        size = hs.index(config.indexName).first()["sizeInBytes"]
        return {"name": config.indexName, "build_s": None, "bytes": size, "reused": True}
    except IndexNotFoundError:
        seconds, _ = _timed(lambda: hs.createIndex(spark.read.parquet(path), config))
        size = hs.index(config.indexName).first()["sizeInBytes"]
        return {"name": config.indexName, "build_s": seconds, "bytes": size}


def run_workload(spark: SparkSession, workload: Workload, ctx: Context, work_dir: str,
                 pairs: int, warmups: int) -> dict:
    """Vanilla and accelerated runs alternating (A B A B, the limit after each pair); a report."""
    facts = workload.prepare(ctx)
    hs = Hyperspace(spark)

    def build(path: str) -> DataFrame:
        return workload.query(spark.read.parquet(path), facts)

    Hyperspace.disable(spark)
    expected = canonical(build(facts["path"]).collect())
    indexes = [_ensure_index(hs, spark, facts["path"], c) for c in workload.indexes(facts)]
    limit_path = None
    if workload.limit is not None:
        limit_path = os.path.join(work_dir, "limit", workload.name)
        if not os.path.exists(limit_path):
            workload.limit(spark.read.parquet(facts["path"]), facts).coalesce(1).write.parquet(limit_path)

    failures: list[str] = []

    def side(enabled: bool, path: str, label: str) -> float:
        (Hyperspace.enable if enabled else Hyperspace.disable)(spark)
        seconds, rows = _timed(lambda: build(path).collect())
        if canonical(rows) != expected:
            failures.append(f"{label}: {len(rows)} rows differ from vanilla's {len(expected)}")
        return seconds

    for i in range(warmups):
        side(False, facts["path"], f"vanilla warm-up {i}")
        side(True, facts["path"], f"accelerated warm-up {i}")
        if limit_path:
            side(False, limit_path, f"limit warm-up {i}")
    vanilla, accelerated, limit = [], [], []
    for i in range(pairs):
        vanilla.append(side(False, facts["path"], f"vanilla run {i}"))
        accelerated.append(side(True, facts["path"], f"accelerated run {i}"))
        if limit_path:
            limit.append(side(False, limit_path, f"limit run {i}"))
    Hyperspace.disable(spark)
    read_vanilla = scan_stats(spark, build(facts["path"]))
    Hyperspace.enable(spark)
    read_accelerated = scan_stats(spark, build(facts["path"]))
    used = [r.index for r in why_not(spark, build(facts["path"])) if r.code == "APPLIED"]
    Hyperspace.disable(spark)

    ratios = [v / a for v, a in zip(vanilla, accelerated)]
    ratio = statistics.median(ratios)
    in_range = ((workload.min_ratio is None or ratio >= workload.min_ratio)
                and (workload.max_ratio is None or ratio <= workload.max_ratio))
    return {
        "name": workload.name,
        "description": workload.description,
        "key": facts.get("key"),
        "identical": not failures,
        "failures": failures,
        "rows": len(expected),
        "vanilla_s": _stats(vanilla),
        "accelerated_s": _stats(accelerated),
        "limit_s": _stats(limit),
        "ratio_vanilla_over_accelerated": {"pairs": ratios, "median": ratio},
        "ratio_accelerated_over_limit": (statistics.median(accelerated) / statistics.median(limit)
                                         if limit else None),
        "expected_ratio": {"min": workload.min_ratio, "max": workload.max_ratio, "met": in_range},
        "read": {"vanilla": read_vanilla, "accelerated": read_accelerated},
        "indexes": indexes,
        "indexes_used": sorted(set(used)),
    }


def planning_overhead(spark: SparkSession, plans: dict[str, Callable[[int], DataFrame]],
                      runs: int = 20) -> dict:
    """Median milliseconds of building the executed plan of fresh DataFrames, accelerator off
    and on (alternating), for each named plan."""
    out = {}
    for name, make in plans.items():
        off, on = [], []
        for i in range(runs):
            for enabled, times in ((False, off), (True, on)):
                (Hyperspace.enable if enabled else Hyperspace.disable)(spark)
                df = make(i)
                seconds, _ = _timed(lambda: df._jdf.queryExecution().executedPlan())
                times.append(seconds * 1000)
        out[name] = {"off_ms": statistics.median(off), "on_ms": statistics.median(on),
                     "added_ms": statistics.median(on) - statistics.median(off)}
    Hyperspace.disable(spark)
    return out
