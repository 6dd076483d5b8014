"""``accelerator demo``: the product end to end on a small local sample."""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

def _timed(fn, runs: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def _files_read(label: str, files: list[str], shown: int = 3) -> str:
    """``label``: how many files, and the first ``shown`` of them."""
    names = "\n".join(f"    {f}" for f in sorted(files)[:shown])
    more = f"\n    ... and {len(files) - shown} more" if len(files) > shown else ""
    return f"{label} read {len(files)} file(s):\n{names}{more}"


def demo(args: argparse.Namespace) -> int:
    """Writes a nested sample, indexes ``nested.nst.field1`` and runs the seed's query both ways."""
    from pyspark.sql import functions as F

    from accelerator import Hyperspace, IndexConfig
    from accelerator.cli import fitted_buckets, spark_session
    from indexes.errors import IndexNotFoundError

    work = Path(args.work_dir).resolve()
    system_path = args.system_path or str(work / "indexes")
    with spark_session(args, "accelerator-demo", system_path) as spark:
        data = str(work / "nested")
        print(f"writing {args.rows:,} rows of nested sample data to {data}")
        (spark.range(args.rows, numPartitions=args.files)
            .select(F.col("id").cast("int").alias("id"),
                    F.concat(F.lit("name"), F.col("id")).alias("name"),
                    F.struct(F.concat(F.lit("va"), F.col("id") % 1000).alias("field1"),
                             F.struct(F.concat(F.lit("wa"), F.col("id") % 50000).alias("field1"),
                                      F.concat(F.lit("wb"), F.col("id")).alias("field2"))
                             .alias("nst"))
                    .alias("nested"))
            .write.mode("overwrite").parquet(data))

        hs = Hyperspace(spark)
        try:   # the index of an earlier run
            if hs.index("idx_nested").first()["state"] == "ACTIVE":
                hs.deleteIndex("idx_nested")
            hs.vacuumIndex("idx_nested")
        except IndexNotFoundError:
            pass
        df = spark.read.parquet(data)
        data_bytes = sum(p.stat().st_size for p in Path(data).glob("*.parquet"))
        buckets = fitted_buckets(data_bytes)
        start = time.perf_counter()
        hs.createIndex(df, IndexConfig("idx_nested", indexedColumns=["nested.nst.field1"],
                                       includedColumns=["id", "name", "nested.nst.field2"],
                                       numBuckets=buckets))
        print(f"created index idx_nested ({buckets} bucket(s) for {data_bytes / 2**20:.1f} MB "
              f"of data) in {time.perf_counter() - start:.1f} s under {system_path}")

        def build():
            return (spark.read.parquet(data).filter(F.col("nested.nst.field1") == "wa1")
                    .select("id", "name", "nested.nst.field2"))

        Hyperspace.disable(spark)
        vanilla_files = build().inputFiles()
        build().collect()
        vanilla_s, vanilla = _timed(lambda: build().collect(), args.runs)
        Hyperspace.enable(spark)
        accelerated_files = build().inputFiles()
        build().collect()
        accelerated_s, accelerated = _timed(lambda: build().collect(), args.runs)
        hs.explain(build())
        print(_files_read("\nvanilla Spark", vanilla_files))
        print(_files_read("with the index", accelerated_files))
        identical = sorted(map(tuple, vanilla)) == sorted(map(tuple, accelerated))
        print(f"\nrows: {len(accelerated)}   results identical: {identical}")
        print(f"vanilla Spark: {vanilla_s * 1000:.0f} ms   with the index: "
              f"{accelerated_s * 1000:.0f} ms   (median of {args.runs}; "
              f"{vanilla_s / accelerated_s:.1f}x)")
    return 0 if identical else 1


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Adds the ``demo`` command to the command line's subcommands ``sub``."""
    d = sub.add_parser("demo", help="run the nested covering-index example end to end")
    d.add_argument("--work-dir", default="accelerator-demo", help="where sample data goes")
    d.add_argument("--system-path", help="index system path (default <work-dir>/indexes)")
    d.add_argument("--rows", type=int, default=500_000)
    d.add_argument("--files", type=int, default=8)
    d.add_argument("--runs", type=int, default=5)
    d.add_argument("--master", default="local[2]")
    d.set_defaults(func=demo)
