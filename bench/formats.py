"""``python -m bench formats [--scale 1] [--pairs 5]``: the covering-index lookup and the Bloom
lookup of the default workloads over their Parquet directories and over the same files as Delta
Lake tables, in one session, and the planning a data-skipping index adds over a table of many
small files against the same files as a directory.

The Delta tables are made once per data directory: the Parquet files hard-linked into
``<data-dir>/delta/<name>`` and ``CONVERT TO DELTA`` run over them, so both sides read the very
same bytes. Each workload runs as in ``bench run`` (vanilla and accelerated alternating, the
limit after each pair, results compared with vanilla's) on both sources; the report gives each
ratio, the Delta ratio's relative difference to the directory's (``--tolerance``, 0.10), and
for the many-files pair the median planning milliseconds (accelerator on) of both and their
difference (``--max-planning-ms``, 10). The session loads the Delta release pinned for the
installed pyspark (``accelerator.runtime.table_formats``), resolved with Maven as the tests do
(``tests/services/table_formats.py``: Spark's own Ivy resolution needs direct access to Maven
Central). Timings are reported, never asserted; exits 1 when a result differed from vanilla's.
"""
from __future__ import annotations

import argparse
import copy
import json
import logging
import os
from dataclasses import is_dataclass, replace
from typing import Any

log = logging.getLogger("bench.formats")
#: the default workloads measured over both sources
WORKLOADS = ("tpch_lineitem_partkey_lookup", "eventlog_trace_id_bloom")
PRUNING = "minmax_point_filter_many_files"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--warmups", type=int, default=1)
    parser.add_argument("--planning-runs", type=int, default=20)
    parser.add_argument("--many-files", type=int, default=1000)
    parser.add_argument("--tolerance", type=float, default=0.10,
                        help="largest relative difference of a Delta ratio to the directory's")
    parser.add_argument("--max-planning-ms", type=float, default=10.0,
                        help="most planning milliseconds the Delta table may add over the directory")
    parser.add_argument("--data-dir", default=os.path.expanduser("~/.cache/spark-accelerator/bench-data"))
    parser.add_argument("--work-dir", default="/tmp/accelerator-bench-formats")
    parser.add_argument("--out", help="write the JSON report here")


def delta_copy(spark: Any, source: str, target: str) -> str:
    """``target``: a Delta table over hard links to the Parquet files of ``source`` (made once)."""
    if os.path.isdir(os.path.join(target, "_delta_log")):
        return target
    os.makedirs(target, exist_ok=True)
    for name in sorted(os.listdir(source)):
        if name.endswith(".parquet") and not os.path.exists(os.path.join(target, name)):
            os.link(os.path.join(source, name), os.path.join(target, name))
    spark.sql(f"CONVERT TO DELTA parquet.`{target}`")
    return target


def read_delta(spark: Any, path: str, facts: dict) -> Any:
    """A workload's source read as a Delta table."""
    return spark.read.format("delta").load(path)


def as_delta(bench: Any, data_dir: str) -> Any:
    """``bench`` (a Workload or PruningCost) over the Delta copy of its Parquet source."""
    def prepare(ctx: Any) -> dict:
        facts = bench.prepare(ctx)
        name = os.path.relpath(facts["path"], data_dir).replace(os.sep, "_")
        return {**facts, "path": delta_copy(ctx.spark, facts["path"],
                                            os.path.join(data_dir, "delta", name))}

    def renamed(config: Any) -> Any:   # an index of its own over the Delta table
        name = f"{config.indexName}_delta"
        if is_dataclass(config):
            return replace(config, indexName=name)
        copied = copy.copy(config)
        copied.indexName = name
        return copied

    if hasattr(bench, "indexes"):   # a Workload
        indexes = {"indexes": lambda facts: [renamed(c) for c in bench.indexes(facts)]}
    else:                           # a PruningCost
        indexes = {"index": lambda facts: renamed(bench.index(facts))}
    return replace(bench, name=f"{bench.name}_delta", prepare=prepare, read=read_delta,
                   **indexes)


def run(args: argparse.Namespace) -> int:
    from bench.harness import claim_work_dir, make_spark, pruning_cost, run_workload
    from bench.workloads import PRUNING as PRUNINGS, WORKLOADS as ALL, Context

    claim_work_dir(args.work_dir)
    from tests.services.table_formats import delta_conf

    spark = make_spark(args.work_dir, "auto", delta_conf())
    ctx = Context(spark, args.data_dir, args.scale, args.many_files)
    report: dict = {"scale": args.scale, "spark": spark.version, "workloads": [], "pairs": []}
    built: dict[str, str] = {}
    for workload in (w for w in ALL if w.name in WORKLOADS):
        pair = []
        for variant in (workload, as_delta(workload, args.data_dir)):
            log.info("workload %s", variant.name)
            done = run_workload(spark, variant, ctx, args.work_dir, args.pairs, args.warmups,
                                built)
            report["workloads"].append(done)
            pair.append(done["ratio_vanilla_over_accelerated"]["median"])
        difference = pair[1] / pair[0] - 1
        report["pairs"].append({"workload": workload.name, "directory_ratio": pair[0],
                                "delta_ratio": pair[1], "relative_difference": difference,
                                "met": abs(difference) <= args.tolerance})
    pruning = next(b for b in PRUNINGS if b.name == PRUNING)
    planned = [pruning_cost(spark, b, ctx, args.planning_runs, warmups=args.planning_runs)
               for b in (pruning, as_delta(pruning, args.data_dir))]
    added = planned[1]["on_ms"] - planned[0]["on_ms"]
    report["planning"] = {"directory": planned[0], "delta": planned[1],
                          "delta_minus_directory_on_ms": added,
                          "met": added <= args.max_planning_ms}
    text = json.dumps(report, indent=2, default=str)
    if args.out:
        with open(args.out, "w") as out:
            out.write(text)
    print(text)
    identical = all(w["identical"] for w in report["workloads"]) and all(
        p["identical"] for p in planned)
    return 0 if identical else 1
