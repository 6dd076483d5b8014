"""``python -m tests.fuzz --seconds 1800 --seed 7``: fuzz for that long in a local[2] session
and print a JSON summary (queries run, change steps applied and their operations' statuses,
failures with their seeds and reproductions)."""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from pyspark.sql import SparkSession

from tests.fuzz import data, runner, tables


def main(argv: list[str] | None = None) -> int:
    """Runs the fuzzer; exit status 1 when a query's answer differed from vanilla Spark's."""
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--queries-per-round", type=int, default=200)
    parser.add_argument("--batch", type=int, default=20, help="queries per Spark job")
    parser.add_argument("--minimize-seconds", type=float, default=300.0)
    parser.add_argument("--formats", nargs="+", choices=list(data.FORMATS), default=[],
                        help="run only the seeds whose rounds have a dataset in one of these "
                             "source formats (e.g. csv csv.gz)")
    parser.add_argument("--change-rate", type=float, default=runner.CHANGE_RATE,
                        help="the chance of a change step (files appended, deleted or "
                             "overwritten; indexes refreshed or optimized) before each batch "
                             "of a round but its first")
    parser.add_argument("--table-formats", nargs="*", choices=list(tables.FORMATS),
                        help="draw tables of these formats too, all of them when none is named "
                             "(Delta Lake, Apache Iceberg: needs a Spark line with their "
                             "releases; the session is configured for them, with an Iceberg "
                             "catalog in a fresh directory)")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.master("local[2]").appName("accelerator-fuzz")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.sql.warehouse.dir", tempfile.mkdtemp(prefix="fuzz-warehouse-"))
               .config("spark.driver.memory", "2g")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.accelerator.index.numBuckets", "4"))
    formats = () if args.table_formats is None else tuple(args.table_formats or tables.FORMATS)
    if formats:
        from accelerator.runtime.table_formats import configure
        builder = configure(builder, *formats)
        warehouse = tempfile.mkdtemp(prefix="fuzz-iceberg-")
        for key, value in tables.session_settings(formats, warehouse).items():
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    summary = runner.run(spark, args.seed, args.seconds, args.queries_per_round, args.batch,
                         minimize_seconds=args.minimize_seconds, formats=tuple(args.formats),
                         change_rate=args.change_rate, table_formats=formats,
                         log=lambda m: print(m, file=sys.stderr, flush=True))
    print(json.dumps(summary.as_dict(), indent=2, default=str))
    spark.stop()
    return 1 if summary.failures else 0


if __name__ == "__main__":
    sys.exit(main())
