"""``python -m bench warmups [--scale 1] [--only NAME] [--warmup-files 5000] [--out FILE]``: the
cache warm-ups of ``bench/workloads.py``'s ``CACHE_WARMUPS`` alone: each ``hs.cache`` into an
empty cache against one vanilla scan of the same DataFrame, alternating in the same session,
their medians and ratio, and the warm-up's written files (how many source files share one cache
file). Prints a table and writes one JSON document (to --out, else to stdout after the table).
Timings are reported, never asserted."""
from __future__ import annotations

import argparse
import json
import logging
import os

log = logging.getLogger("bench")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``warmups`` subcommand's options."""
    from bench.harness import add_output_arguments

    parser.add_argument("--scale", type=float, default=1.0, help="TPC-H scale factor; event "
                        "log: 5M rows per unit")
    parser.add_argument("--only", action="append", help="run only this warm-up (repeatable)")
    parser.add_argument("--pairs", type=int, default=3, help="timed (warm-up, scan) pairs")
    parser.add_argument("--warmups", type=int, default=1, help="untimed pairs first")
    parser.add_argument("--warmup-files", type=int, default=5000,
                        help="files of the many-small-files warm-up")
    add_output_arguments(parser, "/tmp/accelerator-warmups",
                         "the cache paths go here (wiped)")


def _table(report: dict) -> str:
    head = (f"{'cache warm-up (median s)':34} {'cache':>8} {'scan':>8} {'c/scan':>7} "
            f"{'target':>14} {'met':>5} {'files':>6} {'written':>8} {'cpu c/s':>8}")
    lines = [head, "-" * len(head)]
    for b in report["cache_warmups"]:
        e = b["expected"]
        target = f"<={e['max_ratio']:g}x" + (f",{e['max_seconds']:g}s" if e["max_seconds"] else "")
        lines.append(f"{b['name'][:34]:34} {b['cache_s']['median']:8.2f} {b['scan_s']['median']:8.2f} "
                     f"{b['ratio_cache_over_scan']:7.2f} {target:>14} {str(e['met']):>5} "
                     f"{b['last_cache'].get('files', 0):6d} {b['last_cache'].get('written_files', 0):8d} "
                     f"{b['cpu_ratio_cache_over_scan']:8.2f}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Runs the chosen warm-ups; 0 (timings are reported, not asserted)."""
    from bench.harness import cache_warmup_cost, claim_work_dir, make_spark
    from bench.workloads import CACHE_WARMUPS, Context

    known = [b.name for b in CACHE_WARMUPS]
    unknown = set(args.only or []) - set(known)
    if unknown:
        raise SystemExit(f"unknown warm-up(s): {', '.join(sorted(unknown))}; known: "
                         f"{', '.join(known)}")
    claim_work_dir(args.work_dir)
    spark = make_spark(args.work_dir, "auto")
    ctx = Context(spark, args.data_dir, args.scale, warmup_files=args.warmup_files)
    report = {"scale": args.scale, "machine": {"cores": os.cpu_count(), "master": "local[2]"},
              "spark": spark.version, "cache_warmups": []}
    for bench in CACHE_WARMUPS:
        if args.only and bench.name not in args.only:
            continue
        log.info("cache warm-up cost %s", bench.name)
        report["cache_warmups"].append(cache_warmup_cost(spark, bench, ctx, args.work_dir,
                                                         args.pairs, args.warmups))
    spark.stop()
    print(_table(report))
    text = json.dumps(report, indent=2)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        print(text)
    return 0
