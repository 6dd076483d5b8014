"""The ``accelerator`` command: ``demo`` runs the product end to end on a local sample,
``indexes`` lists the indexes of a system path, ``jar`` prints the compiled JVM rule's jar."""
from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
from pathlib import Path

from accelerator.settings import SYSTEM_PATH


def _session(master: str, system_path: str | None, app: str):
    from pyspark.sql import SparkSession
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)   # workers run index builds
    builder = (SparkSession.builder.master(master).appName(app)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "8")
               .config("spark.sql.maxMetadataStringLength", "1000"))
    if system_path:
        builder = builder.config(SYSTEM_PATH, system_path)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _timed(fn, runs: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def demo(args: argparse.Namespace) -> int:
    """Writes a nested sample, indexes ``nested.nst.field1`` and runs the seed's query both ways."""
    from pyspark.sql import functions as F

    from accelerator import Hyperspace, IndexConfig
    from indexes.errors import IndexNotFoundError

    work = Path(args.work_dir).resolve()
    system_path = args.system_path or str(work / "indexes")
    spark = _session(args.master, system_path, "accelerator-demo")
    data = str(work / "nested")
    print(f"writing {args.rows:,} rows of nested sample data to {data}")
    (spark.range(args.rows, numPartitions=args.files)
        .select(F.col("id").cast("int").alias("id"),
                F.concat(F.lit("name"), F.col("id")).alias("name"),
                F.struct(F.concat(F.lit("va"), F.col("id") % 1000).alias("field1"),
                         F.struct(F.concat(F.lit("wa"), F.col("id") % 50000).alias("field1"),
                                  F.concat(F.lit("wb"), F.col("id")).alias("field2")).alias("nst"))
                .alias("nested"))
        .write.mode("overwrite").parquet(data))

    hs = Hyperspace(spark)
    for stale in ("idx_nested",):
        try:
            if hs._lifecycle().get(stale).state.value == "ACTIVE":
                hs.deleteIndex(stale)
            hs.vacuumIndex(stale)
        except IndexNotFoundError:
            pass
    df = spark.read.parquet(data)
    start = time.perf_counter()
    hs.createIndex(df, IndexConfig("idx_nested", indexedColumns=["nested.nst.field1"],
                                   includedColumns=["id", "name", "nested.nst.field2"]))
    print(f"created index idx_nested in {time.perf_counter() - start:.1f} s under {system_path}")

    def query():
        return (df.filter(df["nested.nst.field1"] == "wa1")
                  .select("id", "name", "nested.nst.field2").collect())

    Hyperspace.disable(spark)
    query()
    vanilla_s, vanilla = _timed(query, args.runs)
    Hyperspace.enable(spark)
    query()
    accelerated_s, accelerated = _timed(query, args.runs)
    hs.explain(df.filter(df["nested.nst.field1"] == "wa1").select("id", "name", "nested.nst.field2"))
    identical = sorted(map(tuple, vanilla)) == sorted(map(tuple, accelerated))
    print(f"\nrows: {len(accelerated)}   results identical: {identical}")
    print(f"vanilla Spark: {vanilla_s * 1000:.0f} ms   with the index: {accelerated_s * 1000:.0f} ms   "
          f"(median of {args.runs}; {vanilla_s / accelerated_s:.1f}x)")
    spark.stop()
    return 0 if identical else 1


def list_indexes(args: argparse.Namespace) -> int:
    """Prints the indexes of a system path."""
    from accelerator import Hyperspace
    spark = _session(args.master, args.system_path, "accelerator-indexes")
    Hyperspace(spark).indexes().show(truncate=False)
    spark.stop()
    return 0


def print_jar(args: argparse.Namespace) -> int:
    """Compiles the JVM rule if needed and prints its jar (for spark.jars with spark.sql.extensions)."""
    import pyspark

    from accelerator.jvm import build_jar
    print(build_jar(pyspark.__version__))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="accelerator", description=__doc__)
    sub = parser.add_subparsers(dest="command")
    d = sub.add_parser("demo", help="run the nested covering-index example end to end")
    d.add_argument("--work-dir", default="accelerator-demo", help="where sample data goes")
    d.add_argument("--system-path", help="index system path (default <work-dir>/indexes)")
    d.add_argument("--rows", type=int, default=500_000)
    d.add_argument("--files", type=int, default=8)
    d.add_argument("--runs", type=int, default=5)
    d.add_argument("--master", default="local[2]")
    d.set_defaults(func=demo)
    i = sub.add_parser("indexes", help="list the indexes of a system path")
    i.add_argument("--system-path", help="index system path (default from Spark settings)")
    i.add_argument("--master", default="local[2]")
    i.set_defaults(func=list_indexes)
    j = sub.add_parser("jar", help="print the path of the compiled JVM rule (compiling it if needed)")
    j.set_defaults(func=print_jar)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        args = parser.parse_args(["demo", *(argv or [])])
    logging.basicConfig(level=logging.WARNING)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
