"""Point lookup on TPC-H lineitem: vanilla Spark vs. covering index vs. a lower bound.

Usage (from the repo root):

    python -m bench.lineitem_lookup \
        [--data /tmp/tpch/sf1/lineitem] [--work-dir /tmp/bench_work] \
        [--buckets 200] [--pairs 5] [--skip-accelerated] [--conf KEY=VALUE ...]

One local[2] SparkSession measures, on the same data:

* vanilla     - ``read.parquet(data).filter(l_partkey == K).select(4 cols).collect()``
* accelerated - the same query with the accelerator enabled, after building a
                covering index on l_partkey (build time measured separately);
* limit       - the same query answered from one Parquet file holding only the
                matching rows (what no index can beat).

After ``--warmups`` warm-up runs of each side (the JVM compiles the hot paths) it runs ``--pairs`` alternating vanilla/accelerated
pairs plus ``--pairs`` limit runs, checks every result against the first vanilla
result (sorted rows), and times planning with the accelerator on and off of a query
without files (spark.range), one over the indexed source that no index applies to, and
the indexed lookup. Prints one JSON document. Timings are never asserted;
the exit status is 1 when any result differs (2 when the accelerator is missing and
--skip-accelerated was not given).

Test data: tpchgen-cli parquet -s 1 --parts=16 --tables=lineitem,orders --output-dir=/tmp/tpch/sf1
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql.functions import col

COLUMNS = ["l_orderkey", "l_partkey", "l_quantity", "l_extendedprice"]
INDEX_NAME = "lineitem_partkey"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="/tmp/tpch/sf1/lineitem", help="lineitem Parquet directory")
    p.add_argument("--work-dir", default="/tmp/bench_work", help="scratch dir (index system path, limit file); wiped")
    p.add_argument("--buckets", type=int, default=200, help="spark.accelerator.index.numBuckets")
    p.add_argument("--pairs", type=int, default=5, help="vanilla/accelerated pairs (and limit runs)")
    p.add_argument("--warmups", type=int, default=3, help="warm-up runs of each side")
    p.add_argument("--seed", type=int, default=42, help="seed for choosing the looked-up l_partkey")
    p.add_argument("--skip-accelerated", action="store_true", help="only vanilla and limit (no accelerator needed)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark conf")
    return p.parse_args(argv)


def make_spark(args) -> SparkSession:
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("bench-lineitem-lookup")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "8g")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.accelerator.system.path", os.path.join(args.work_dir, "indexes"))
        .config("spark.accelerator.index.numBuckets", str(args.buckets))
    )
    for kv in args.conf:
        key, _, value = kv.partition("=")
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def stats(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "runs": xs} if xs else None


def dir_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def pick_key(spark, data, seed):
    """A l_partkey present in the data, chosen deterministically: seeded pick from one file's keys."""
    first = sorted(f for f in os.listdir(data) if f.endswith(".parquet"))[0]
    keys = sorted(r[0] for r in spark.read.parquet(os.path.join(data, first)).select("l_partkey").distinct().collect())
    return random.Random(seed).choice(keys)


def plan_ms(spark, build, hs_cls, runs=20):
    """Median ms to build the executed plan of fresh queries ``build(i)``, accelerator off and
    on, alternating (on is None without the accelerator)."""
    off, on = [], []
    for i in range(runs):
        for enabled, times in ((False, off), (True, on)):
            if hs_cls:
                (hs_cls.enable if enabled else hs_cls.disable)(spark)
            elif enabled:
                continue
            df = build(i)
            t, _ = timed(lambda: df._jdf.queryExecution().executedPlan())
            times.append(t * 1000)
    if hs_cls:
        hs_cls.disable(spark)
    return {"off_ms": statistics.median(off), "on_ms": statistics.median(on) if on else None}


def main(argv=None) -> int:
    args = parse_args(argv)
    shutil.rmtree(args.work_dir, ignore_errors=True)
    os.makedirs(args.work_dir)
    spark = make_spark(args)

    hs_cls = None
    if not args.skip_accelerated:
        try:
            from accelerator import Hyperspace, IndexConfig
            hs_cls = Hyperspace
        except ImportError as e:
            print(f"ERROR: cannot import accelerator ({e}); use --skip-accelerated for vanilla+limit only",
                  file=sys.stderr)
            return 2

    key = pick_key(spark, args.data, args.seed)

    def query(path):
        return spark.read.parquet(path).filter(col("l_partkey") == key).select(*COLUMNS)

    def run(path):
        t, rows = timed(lambda: query(path).collect())
        return t, sorted(tuple(r) for r in rows)

    if hs_cls:
        hs_cls.disable(spark)
    expected_df = query(args.data)
    expected = sorted(tuple(r) for r in expected_df.collect())

    limit_path = os.path.join(args.work_dir, "limit")
    expected_df.coalesce(1).write.parquet(limit_path)

    build_s = index_bytes = None
    if hs_cls:
        hs = hs_cls(spark)
        config = IndexConfig(INDEX_NAME, indexedColumns=["l_partkey"],
                             includedColumns=["l_orderkey", "l_quantity", "l_extendedprice"])
        build_s, _ = timed(lambda: hs.createIndex(spark.read.parquet(args.data), config))
        index_bytes = dir_bytes(os.path.join(args.work_dir, "indexes"))

    identical = True
    vanilla, accel, limit = [], [], []

    def check(rows, what):
        nonlocal identical
        if rows != expected:
            identical = False
            print(f"MISMATCH in {what}: {len(rows)} rows vs {len(expected)} expected", file=sys.stderr)

    # warm-ups: the first runs of a side pay for JIT compilation of its code paths
    for i in range(args.warmups):
        check(run(args.data)[1], f"vanilla warm-up {i}")
        check(run(limit_path)[1], f"limit warm-up {i}")
        if hs_cls:
            hs_cls.enable(spark)
            check(run(args.data)[1], f"accelerated warm-up {i}")
            hs_cls.disable(spark)

    for i in range(args.pairs):
        t, rows = run(args.data)
        vanilla.append(t)
        check(rows, f"vanilla run {i}")
        if hs_cls:
            hs_cls.enable(spark)
            t, rows = run(args.data)
            hs_cls.disable(spark)
            accel.append(t)
            check(rows, f"accelerated run {i}")
    for i in range(args.pairs):
        t, rows = run(limit_path)
        limit.append(t)
        check(rows, f"limit run {i}")

    planning = {
        # no file source: the JVM rule does not call Python at all
        "range": plan_ms(spark, lambda i: spark.range(1000).filter(col("id") == i).selectExpr("id * 2 AS x"), hs_cls),
        # the indexed source, filtered on a column no index has: analysed, not rewritten
        "unindexed_filter": plan_ms(spark, lambda i: spark.read.parquet(args.data)
                                    .filter(col("l_suppkey") == i).select("l_orderkey"), hs_cls),
        # the indexed lookup itself: analysed and rewritten
        "indexed_lookup": plan_ms(spark, lambda i: query(args.data), hs_cls),
    }

    files = [f for f in os.listdir(args.data) if f.endswith(".parquet")]
    pair_ratios = [v / a for v, a in zip(vanilla, accel)]
    report = {
        "data": args.data,
        "scale": next((p[2:] for p in args.data.split(os.sep) if p.startswith("sf")), None),
        "files": len(files),
        "data_bytes": dir_bytes(args.data),
        "l_partkey": key,
        "result_rows": len(expected),
        "buckets": args.buckets,
        "index_build_s": build_s,
        "index_size_bytes": index_bytes,
        "vanilla_s": stats(vanilla),
        "accelerated_s": stats(accel),
        "limit_s": stats(limit),
        "ratio_vanilla_over_accelerated": {"pairs": pair_ratios, "median": statistics.median(pair_ratios)}
        if pair_ratios else None,
        "ratio_accelerated_over_limit": statistics.median(accel) / statistics.median(limit) if accel else None,
        "identical": identical,
        "planning_overhead_ms": planning,
    }
    print(json.dumps(report, indent=2))
    spark.stop()
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
