"""``python -m bench run [--scale 1] [--only NAME] [--out FILE]``: every workload of
bench/workloads.py with vanilla Spark and with the accelerator, plus the planning overhead.

Prints a table and writes one JSON document (to --out, else to stdout after the table). Exits 1
when any workload's results differ from vanilla Spark's. Timings are reported, never asserted.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from pyspark.sql import functions as F


def _planning_plans(spark, lineitem: str, orders: str, key: int) -> dict:
    li = lambda: spark.read.parquet(lineitem)  # noqa: E731
    od = lambda: spark.read.parquet(orders)  # noqa: E731
    return {
        "filter (index applies)": lambda i: li().filter(F.col("l_partkey") == key)
        .select("l_orderkey", "l_quantity"),
        "join": lambda i: li().filter(F.col("l_partkey") == key)
        .join(od().filter(F.col("o_totalprice") > i), F.col("l_orderkey") == F.col("o_orderkey"))
        .select("l_orderkey", "o_orderdate"),
        "aggregate": lambda i: li().filter(F.col("l_quantity") > i).groupBy("l_returnflag").count(),
        "self-join": lambda i: li().alias("a").filter(F.col("a.l_partkey") == key)
        .join(li().alias("b").filter(F.col("b.l_partkey") == key), "l_orderkey")
        .select("l_orderkey"),
        "unrelated (no files)": lambda i: spark.range(1000).filter(F.col("id") == i),
        "unrelated (other table)": lambda i: od().filter(F.col("o_custkey") == i).select("o_orderkey"),
    }


def _table(report: dict) -> str:
    head = f"{'workload':34} {'vanilla s':>9} {'accel s':>8} {'limit s':>8} {'v/a':>6} {'a/limit':>7} {'identical':>9}"
    lines = [head, "-" * len(head)]
    for w in report["workloads"]:
        lim = w["limit_s"]["median"] if w["limit_s"] else None
        a_l = w["ratio_accelerated_over_limit"]
        lines.append(f"{w['name'][:34]:34} {w['vanilla_s']['median']:9.3f} {w['accelerated_s']['median']:8.3f} "
                     f"{(f'{lim:.3f}' if lim else '-'):>8} {w['ratio_vanilla_over_accelerated']['median']:6.2f} "
                     f"{(f'{a_l:.2f}' if a_l else '-'):>7} {str(w['identical']):>9}")
    lines.append("")
    lines.append(f"{'planning (median ms)':34} {'off':>9} {'on':>8} {'added':>8}")
    for name, p in report["planning"].items():
        lines.append(f"{name[:34]:34} {p['off_ms']:9.2f} {p['on_ms']:8.2f} {p['added_ms']:8.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the workloads")
    run.add_argument("--scale", type=float, default=1.0, help="TPC-H scale factor; event log: 5M rows per unit")
    run.add_argument("--only", action="append", help="run only this workload (repeatable)")
    run.add_argument("--out", help="write the JSON report here")
    run.add_argument("--data-dir", default=os.path.expanduser("~/.cache/spark-accelerator/bench-data"),
                     help="where generated data is cached")
    run.add_argument("--work-dir", default="/tmp/accelerator-bench", help="indexes and limit files (wiped)")
    run.add_argument("--pairs", type=int, default=5)
    run.add_argument("--warmups", type=int, default=3)
    run.add_argument("--buckets", type=int, default=200)
    run.add_argument("--planning-runs", type=int, default=20)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    logging.getLogger("bench").setLevel(logging.INFO)

    import shutil

    from bench import datasets
    from bench.harness import make_spark, planning_overhead, run_workload
    from bench.workloads import WORKLOADS, Context, lineitem_facts

    selected = [w for w in WORKLOADS if not args.only or w.name in args.only]
    unknown = set(args.only or []) - {w.name for w in WORKLOADS}
    if unknown:
        parser.error(f"unknown workload(s): {', '.join(sorted(unknown))}; "
                     f"known: {', '.join(w.name for w in WORKLOADS)}")
    shutil.rmtree(args.work_dir, ignore_errors=True)
    os.makedirs(args.work_dir)
    spark = make_spark(args.work_dir, args.buckets)
    ctx = Context(spark, args.data_dir, args.scale)
    report = {"scale": args.scale, "machine": {"cores": os.cpu_count(), "master": "local[2]"},
              "spark": spark.version, "workloads": []}
    for workload in selected:
        logging.getLogger("bench").info("workload %s", workload.name)
        report["workloads"].append(run_workload(spark, workload, ctx, args.work_dir,
                                                args.pairs, args.warmups))
    tables = datasets.tpch(args.data_dir, args.scale)
    key = lineitem_facts(ctx)["key"]
    report["planning"] = planning_overhead(
        spark, _planning_plans(spark, tables["lineitem"], tables["orders"], key), args.planning_runs)
    spark.stop()
    print(_table(report))
    text = json.dumps(report, indent=2, default=str)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        print(text)
    failed = [w["name"] for w in report["workloads"] if not w["identical"]]
    if failed:
        print(f"\nFAILED: results differ from vanilla Spark in {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
