"""``python -m bench run [--scale 1] [--only NAME] [--out FILE]``: every workload of
bench/workloads.py with vanilla Spark and with the accelerator, the index build costs
(``BUILDS``), the per-query pruning cost over many files (``PRUNING``) and the planning overhead.

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
    built = [i for w in report["workloads"] for i in w["indexes"] if i["build_s"] is not None]
    if built:
        lines.append("")
        lines.append(f"{'index built':34} {'seconds':>9} {'MB':>8} {'text MB/s':>10} {'/text':>6} {'/column':>8}")
        for i in built:
            text = "text_bytes" in i
            lines.append(f"{i['name'][:34]:34} {i['build_s']:9.1f} {i['bytes'] / 1e6:8.1f} "
                         f"{(format(i['text_mb_per_s'], '.2f') if text else '-'):>10} "
                         f"{(format(i['bytes_over_text'], '.2f') if text else '-'):>6} "
                         f"{(format(i['bytes_over_column'], '.2f') if text else '-'):>8}")
    refreshed = [(r, w["after_refresh"]) for w in report["workloads"] for r in w.get("refresh", [])]
    if refreshed:
        lines.append("")
        lines.append(f"{'incremental refresh':34} {'seconds':>9} {'build s':>8} {'/build':>8} "
                     f"{'then vanilla/accel':>19}")
        for r, after in refreshed:
            share = r["ratio_incremental_over_build"]
            lines.append(f"{r['name'][:34]:34} {r['incremental_s']:9.1f} "
                         f"{(format(r['build_s'], '.1f') if r['build_s'] else '-'):>8} "
                         f"{(format(share, '.2f') if share is not None else '-'):>8} "
                         f"{after['ratio_vanilla_over_accelerated']:19.2f}")
    if report.get("builds"):
        lines.append("")
        lines.append(f"{'build (median s)':34} {'index':>9} {'limit':>8} {'i/limit':>8} {'target':>8} "
                     f"{'met':>5} {'heap+ MB':>9} {'limit heap+':>11} {'py+ MB':>7}")
        for b in report["builds"]:
            target = b["expected"]["max_ratio"]
            mem, lim = b["driver_memory"]["index"], b["driver_memory"]["limit"]
            lines.append(f"{b['name'][:34]:34} {b['index_s']['median']:9.3f} {b['limit_s']['median']:8.3f} "
                         f"{b['ratio_index_over_limit']:8.3f} "
                         f"{('<= ' + format(target, 'g')) if target else '-':>8} "
                         f"{str(b['expected']['met']) if target else '-':>5} "
                         f"{mem['jvm_heap_added_mb']:9.0f} {lim['jvm_heap_added_mb']:11.0f} "
                         f"{mem['python_rss_added_mb']:7.1f}")
    if report.get("pruning"):
        lines.append("")
        lines.append(f"{'pruning (median ms of planning)':34} {'off':>9} {'on':>8} {'added':>8} {'target':>8} "
                     f"{'met':>5} {'files kept':>12}")
        for p in report["pruning"]:
            lines.append(f"{p['name'][:34]:34} {p['off_ms']:9.2f} {p['on_ms']:8.2f} {p['added_ms']:8.2f} "
                         f"{'<= ' + format(p['expected']['max_added_ms'], 'g'):>8} {str(p['expected']['met']):>5} "
                         f"{str(p['kept_files']) + '/' + str(p['files']):>12}")
    cached = [w for w in report["workloads"] if "cache" in w]
    if cached:
        lines.append("")
        lines.append(f"{'cache (hs.cache once)':34} {'files':>9} {'MB read':>8} {'MB wrote':>8} "
                     f"{'seconds':>8} {'served':>7}")
        for w in cached:
            c = w["cache"]
            lines.append(f"{w['name'][:34]:34} {c['files']:9d} {c['bytesRead'] / 1e6:8.1f} "
                         f"{c['bytesWritten'] / 1e6:8.1f} {c['wall_s']:8.1f} {str(c.get('served')):>7}")
    if report.get("cache_warmups"):
        lines.append("")
        lines.append(f"{'cache warm-up (median s)':34} {'cache':>9} {'scan':>8} {'c/scan':>8} {'target':>8} "
                     f"{'met':>5} {'heap+ MB':>9} {'scan heap+':>11} {'py+ MB':>7}")
        for b in report["cache_warmups"]:
            mem, scan = b["driver_memory"]["cache"], b["driver_memory"]["scan"]
            lines.append(f"{b['name'][:34]:34} {b['cache_s']['median']:9.3f} {b['scan_s']['median']:8.3f} "
                         f"{b['ratio_cache_over_scan']:8.3f} {'<= ' + format(b['expected']['max_ratio'], 'g'):>8} "
                         f"{str(b['expected']['met']):>5} {mem['jvm_heap_added_mb']:9.0f} "
                         f"{scan['jvm_heap_added_mb']:11.0f} {mem['python_rss_added_mb']:7.1f}")
    if report.get("cache_planning"):
        lines.append("")
        lines.append(f"{'cache planning (median ms)':34} {'off':>9} {'on':>8} {'added':>8} {'target':>8} "
                     f"{'met':>5} {'files cached':>12}")
        for p in report["cache_planning"]:
            lines.append(f"{p['name'][:34]:34} {p['off_ms']:9.2f} {p['on_ms']:8.2f} {p['added_ms']:8.2f} "
                         f"{'<= ' + format(p['expected']['max_added_ms'], 'g'):>8} {str(p['expected']['met']):>5} "
                         f"{str(p['cached_files']) + '/' + str(p['files']):>12}")
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
    run.add_argument("--only", action="append",
                     help="run only this workload, build or pruning benchmark (repeatable)")
    run.add_argument("--out", help="write the JSON report here")
    run.add_argument("--data-dir", default=os.path.expanduser("~/.cache/spark-accelerator/bench-data"),
                     help="where generated data is cached")
    run.add_argument("--work-dir", default="/tmp/accelerator-bench", help="indexes and limit files (wiped)")
    # 3 pairs after 1 warm-up: the default run at scale 1 took 27 minutes with 5 after 3
    run.add_argument("--pairs", type=int, default=3)
    run.add_argument("--warmups", type=int, default=1)
    run.add_argument("--buckets", default="auto",
                     help="spark.accelerator.index.numBuckets (auto: fitted to each index)")
    run.add_argument("--planning-runs", type=int, default=20,
                     help="runs of each side of the planning and pruning benchmarks (after "
                          "as many warm-up rounds, none with --warmups 0)")
    run.add_argument("--build-runs", type=int, default=3,
                     help="timed runs of each side of the build benchmarks (after one warm-up, "
                          "none with --warmups 0)")
    run.add_argument("--many-files", type=int, default=1000,
                     help="files of the many-small-files source of the pruning benchmarks")
    run.add_argument("--cache-files", type=int, default=10_000,
                     help="files of the many-small-files source of the cache planning benchmark "
                          "(half of them cached)")
    run.add_argument("--warmup-files", type=int, default=5000,
                     help="files of the many-small-files warm-up (100 rows each)")
    replay = sub.add_parser("replay", help="replay a drifting workload: vanilla, the rule engine, "
                                           "an oracle's index sets (bench/replay.py)")
    from bench import replay as replay_bench
    replay_bench.add_arguments(replay)
    scheduler = sub.add_parser("scheduler", help="the scheduler's jobs in the session: lookup "
                                                 "latency under a warm-up, refresh over unchanged "
                                                 "sources (bench/scheduler.py)")
    from bench import scheduler as scheduler_bench
    scheduler_bench.add_arguments(scheduler)
    from bench import s3 as s3_bench
    s3_bench.add_arguments(sub.add_parser("s3", help="event-log lookups and cache workloads with "
                                                     "the lake on a local S3 server (bench/s3.py)"))
    from bench import versions as versions_bench
    versions_bench.add_arguments(sub.add_parser(
        "versions", help="the workloads on several Spark lines (default 3.5 and 4.3), same data, "
                         "each line's speed-ups compared (bench/versions.py)"))
    from bench import formats as formats_bench
    formats_bench.add_arguments(sub.add_parser(
        "formats", help="the covering and Bloom lookups over Parquet directories and the same "
                        "data as Delta and Iceberg tables, and planning over many files "
                        "(bench/formats.py)"))
    from bench import warmups as warmups_bench
    warmups_bench.add_arguments(sub.add_parser(
        "warmups", help="the cache warm-ups alone: hs.cache into an empty cache vs one vanilla "
                        "scan, alternating, and the cache files written (bench/warmups.py)"))
    from bench import planning as planning_bench
    planning_bench.add_arguments(sub.add_parser(
        "planning", help="the planning a data-skipping index adds at 10,000 to 1,000,000 "
                         "files, synthesized, without Spark (bench/planning.py)"))
    from bench import freshness as freshness_bench
    freshness_bench.add_arguments(sub.add_parser(
        "freshness", help="the freshness check of a changed source at 10,000 to 1,000,000 "
                          "files, synthesized, without Spark (bench/freshness.py)"))
    from bench import star as star_bench
    star_bench.add_arguments(sub.add_parser(
        "star", help="a star-schema decision-support workload with zero configuration: record, "
                     "recommend, apply, then vanilla and accelerated runs (bench/star.py)"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    logging.getLogger("bench").setLevel(logging.INFO)
    if args.command == "replay":
        return replay_bench.run(args)
    if args.command == "scheduler":
        return scheduler_bench.run(args)
    if args.command == "s3":
        return s3_bench.run(args)
    if args.command == "versions":
        return versions_bench.run(args)
    if args.command == "formats":
        return formats_bench.run(args)
    if args.command == "star":
        return star_bench.run(args)
    if args.command == "warmups":
        return warmups_bench.run(args)
    if args.command == "planning":
        return planning_bench.run(args)
    if args.command == "freshness":
        return freshness_bench.run(args)

    from bench import datasets
    from bench.harness import (build_cost, cache_planning_cost, cache_warmup_cost, claim_work_dir,
                               make_spark, planning_overhead, pruning_cost, run_workload)
    from bench.workloads import (BUILDS, CACHE_PLANNING, CACHE_WARMUPS, PRUNING, WORKLOADS, Context,
                                 lineitem_facts)

    known = [b.name for b in (*WORKLOADS, *BUILDS, *PRUNING, *CACHE_WARMUPS, *CACHE_PLANNING)]
    unknown = set(args.only or []) - set(known)
    if unknown:
        parser.error(f"unknown workload(s): {', '.join(sorted(unknown))}; known: {', '.join(known)}")
    chosen = lambda benches: [b for b in benches if not args.only or b.name in args.only]  # noqa: E731
    claim_work_dir(args.work_dir)
    spark = make_spark(args.work_dir, args.buckets)
    ctx = Context(spark, args.data_dir, args.scale, args.many_files, args.cache_files,
                  warmup_files=args.warmup_files)
    report = {"scale": args.scale, "machine": {"cores": os.cpu_count(), "master": "local[2]"},
              "spark": spark.version, "workloads": [], "builds": [], "pruning": [],
              "cache_warmups": [], "cache_planning": []}
    built: dict[str, str] = {}   # indexes built by this run: workloads declaring one share it

    def save() -> None:
        """Writes the report so far to ``--out``: a long run that is stopped keeps what it measured."""
        if args.out:
            with open(args.out + ".tmp", "w") as f:
                f.write(json.dumps(report, indent=2, default=str))
            os.replace(args.out + ".tmp", args.out)

    planning_warmups = args.planning_runs if args.warmups else 0
    # the per-file work of pruning runs in Python and the JVM: as many warm-up rounds as timed ones
    stages = [
        ("workloads", "workload", WORKLOADS, lambda w: run_workload(
            spark, w, ctx, args.work_dir, args.pairs, args.warmups, built)),
        ("builds", "build cost", BUILDS, lambda b: build_cost(
            spark, b, ctx, args.work_dir, args.build_runs, warmups=min(1, args.warmups))),
        ("pruning", "pruning cost", PRUNING, lambda b: pruning_cost(
            spark, b, ctx, args.planning_runs, warmups=planning_warmups)),
        ("cache_warmups", "cache warm-up cost", CACHE_WARMUPS, lambda b: cache_warmup_cost(
            spark, b, ctx, args.work_dir, args.pairs, warmups=min(1, args.warmups))),
        ("cache_planning", "cache planning cost", CACHE_PLANNING, lambda b: cache_planning_cost(
            spark, b, ctx, args.planning_runs, warmups=planning_warmups)),
    ]
    for section, what, benches, measure in stages:
        for bench in chosen(benches):
            logging.getLogger("bench").info("%s %s", what, bench.name)
            report[section].append(measure(bench))
            save()
    tables = datasets.tpch(args.data_dir, args.scale)
    key = lineitem_facts(ctx)["key"]
    report["planning"] = planning_overhead(
        spark, _planning_plans(spark, tables["lineitem"], tables["orders"], key), args.planning_runs,
        warmups=planning_warmups)
    spark.stop()
    print(_table(report))
    if args.out:
        save()
    else:
        print(json.dumps(report, indent=2, default=str))
    failed = [w["name"] for w in report["workloads"] + report["pruning"] + report["cache_planning"]
              if not w["identical"]]
    if failed:
        print(f"\nFAILED: results differ from vanilla Spark (or the cache was not read) in "
              f"{', '.join(failed)}", file=sys.stderr)
        for w in report["workloads"] + report["cache_planning"]:
            for failure in w.get("failures", []):
                print(f"  {w['name']}: {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
