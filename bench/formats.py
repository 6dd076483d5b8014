"""``python -m bench formats [--scale 1] [--pairs 5]``: the covering-index lookup and the Bloom
lookup of the default workloads over their Parquet directories and over the same data as Delta
Lake and Iceberg tables (those with a release for the installed pyspark), in one session, and
the planning a data-skipping index adds over a table of many small files against the same files
as a directory.

The tables are made once per data directory. The Delta table: the Parquet files hard-linked into
``<data-dir>/delta/<name>`` and ``CONVERT TO DELTA`` run over them, so both sides read the very
same bytes. The Iceberg table (``bench_iceberg.db.<name>``, a Hadoop catalog in
``<data-dir>/iceberg``): written by Iceberg from the directory, one file per source file in the
same order (files imported by ``add_files`` have no field ids, and the accelerator leaves such
tables to Iceberg's scan), Snappy-compressed like Spark's. Each workload runs as in ``bench run``
(vanilla and accelerated alternating, the limit after each pair, results compared with
vanilla's) on every source; the report gives each ratio, a table's ratio's relative difference
to the directory's (``--tolerance``, 0.10), and for the many-files pair the median planning
milliseconds (accelerator on) of each and their difference to the directory's
(``--max-planning-ms``, 10). The session loads the releases pinned for the installed pyspark
(``accelerator.runtime.table_formats``), resolved with Maven as the tests do
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
                        help="largest relative difference of a table's ratio to the directory's")
    parser.add_argument("--max-planning-ms", type=float, default=10.0,
                        help="most planning milliseconds a table may add over the directory")
    parser.add_argument("--data-dir", default=os.path.expanduser("~/.cache/spark-accelerator/bench-data"))
    parser.add_argument("--work-dir", default="/tmp/accelerator-bench-formats")
    parser.add_argument("--out", help="write the JSON report here")


#: the Iceberg catalog of the benchmark's tables (a Hadoop catalog under the data directory)
ICEBERG_CATALOG = "bench_iceberg"


def delta_copy(spark: Any, source: str, data_dir: str, name: str) -> str:
    """The path of a Delta table over hard links to the Parquet files of ``source`` (made
    once)."""
    target = os.path.join(data_dir, "delta", name)
    if os.path.isdir(os.path.join(target, "_delta_log")):
        return target
    os.makedirs(target, exist_ok=True)
    for file in sorted(os.listdir(source)):
        if file.endswith(".parquet") and not os.path.exists(os.path.join(target, file)):
            os.link(os.path.join(source, file), os.path.join(target, file))
    spark.sql(f"CONVERT TO DELTA parquet.`{target}`")
    return target


def iceberg_copy(spark: Any, source: str, data_dir: str, name: str) -> str:
    """The name of an Iceberg table holding the rows of ``source``, a file per source file in
    the same order (made once)."""
    from accelerator.query.session import conf_set

    table = f"{ICEBERG_CATALOG}.db.{name}"
    if spark.catalog.tableExists(table):
        return table
    # one task per source file, each written as one file as it is read
    with conf_set(spark, {"spark.sql.files.openCostInBytes": str(1 << 40),
                          "spark.sql.files.maxPartitionBytes": str(1 << 40)}):
        (spark.read.parquet(source).writeTo(table).using("iceberg")
         .tableProperty("write.distribution-mode", "none")
         .tableProperty("write.parquet.compression-codec", "snappy").create())
    return table


#: per table format: how a Parquet source is copied into a table of it, and how it is read
FORMATS = {
    "delta": (delta_copy, lambda spark, path, facts: spark.read.format("delta").load(path)),
    "iceberg": (iceberg_copy, lambda spark, table, facts: spark.table(table)),
}


def as_format(bench: Any, data_dir: str, table_format: str) -> Any:
    """``bench`` (a Workload or PruningCost) over a ``table_format`` copy of its Parquet
    source, with indexes of its own."""
    copy_source, read = FORMATS[table_format]

    def prepare(ctx: Any) -> dict:
        facts = bench.prepare(ctx)
        name = os.path.relpath(facts["path"], data_dir).replace(os.sep, "_").replace("-", "_")
        return {**facts, "path": copy_source(ctx.spark, facts["path"], data_dir, name)}

    def renamed(config: Any) -> Any:
        name = f"{config.indexName}_{table_format}"
        if is_dataclass(config):
            return replace(config, indexName=name)
        copied = copy.copy(config)
        copied.indexName = name
        return copied

    if hasattr(bench, "indexes"):   # a Workload
        indexes = {"indexes": lambda facts: [renamed(c) for c in bench.indexes(facts)]}
    else:                           # a PruningCost
        indexes = {"index": lambda facts: renamed(bench.index(facts))}
    return replace(bench, name=f"{bench.name}_{table_format}", prepare=prepare, read=read,
                   **indexes)


def session_conf(data_dir: str) -> tuple[list[str], dict[str, str]]:
    """The table formats with a release for the installed pyspark, and the settings that load
    them (Iceberg's catalog under ``data_dir``)."""
    import pyspark

    from accelerator.runtime import table_formats
    from indexes.errors import UnsupportedSparkError
    from tests.services.table_formats import delta_conf, iceberg_conf, merged_conf

    confs = {"delta": delta_conf,
             "iceberg": lambda: iceberg_conf(os.path.join(data_dir, "iceberg"), ICEBERG_CATALOG)}
    available = []
    for name in FORMATS:
        try:
            table_formats.package(name, pyspark.__version__)
            available.append(name)
        except UnsupportedSparkError:
            log.info("no %s release for Spark %s", name, pyspark.__version__)
    return available, merged_conf(*(confs[name]() for name in available))


def run(args: argparse.Namespace) -> int:
    from bench.harness import claim_work_dir, make_spark, pruning_cost, run_workload
    from bench.workloads import PRUNING as PRUNINGS, WORKLOADS as ALL, Context

    claim_work_dir(args.work_dir)
    formats, conf = session_conf(args.data_dir)
    spark = make_spark(args.work_dir, "auto", conf)
    ctx = Context(spark, args.data_dir, args.scale, args.many_files)
    report: dict = {"scale": args.scale, "spark": spark.version, "formats": formats,
                    "workloads": [], "pairs": []}
    built: dict[str, str] = {}
    for workload in (w for w in ALL if w.name in WORKLOADS):
        ratios = {}
        for name, variant in (("directory", workload), *(
                (f, as_format(workload, args.data_dir, f)) for f in formats)):
            log.info("workload %s", variant.name)
            done = run_workload(spark, variant, ctx, args.work_dir, args.pairs, args.warmups,
                                built)
            report["workloads"].append(done)
            ratios[name] = done["ratio_vanilla_over_accelerated"]["median"]
        for name in formats:
            difference = ratios[name] / ratios["directory"] - 1
            report["pairs"].append({"workload": workload.name, "format": name,
                                    "directory_ratio": ratios["directory"],
                                    "table_ratio": ratios[name],
                                    "relative_difference": difference,
                                    "met": abs(difference) <= args.tolerance})
    pruning = next(b for b in PRUNINGS if b.name == PRUNING)
    planned = {"directory": pruning_cost(spark, pruning, ctx, args.planning_runs,
                                         warmups=args.planning_runs)}
    report["planning"] = {"directory": planned["directory"]}
    for name in formats:
        planned[name] = pruning_cost(spark, as_format(pruning, args.data_dir, name), ctx,
                                     args.planning_runs, warmups=args.planning_runs)
        added = planned[name]["on_ms"] - planned["directory"]["on_ms"]
        report["planning"][name] = {**planned[name], "minus_directory_on_ms": added,
                                    "met": added <= args.max_planning_ms}
    text = json.dumps(report, indent=2, default=str)
    if args.out:
        with open(args.out, "w") as out:
            out.write(text)
    print(text)
    identical = all(w["identical"] for w in report["workloads"]) and all(
        p["identical"] for p in planned.values())
    return 0 if identical else 1
