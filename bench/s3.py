"""``python -m bench s3``: the event-log lookups and the cache workloads with the lake on S3.

The sources of the chosen workloads (bench/workloads.py: the event log as Parquet and as gzip
JSON lines, lineitem as CSV), generated into ``--data-dir`` as for ``python -m bench run``, are
copied once per run into a bucket of an S3-compatible server started locally (moto's, through
tests/services/s3.py, with hadoop-aws and the AWS SDK jars on the session's class path) and read
through ``s3a://``; the indexes and the cache tier stay on local disk under ``--work-dir``. Each
workload then runs as in ``python -m bench run`` (vanilla and accelerated alternating, after
warm-ups; the limit is a local Parquet file), and one JSON document reports per workload the
median seconds of each side, the vanilla/accelerated and accelerated/limit ratios and whether the
results were identical. Exits 1 when a result differs from vanilla Spark's. The local server is
no real S3: its latency is a loopback HTTP request served by Python, so the ratios show what the
accelerator saves in requests and bytes, not what a real bucket's round trips would cost.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

LAKE_BUCKET = "bench-lake"
WORKLOADS_ON_S3 = ("eventlog_user_id_lookup", "eventlog_trace_id_bloom",
                   "eventlog_session_id_bloom", "eventlog_json_cached_filter",
                   "eventlog_json_cached_groupby", "tpch_lineitem_csv_cached_q6")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m bench s3``."""
    parser.add_argument("--scale", type=float, default=0.1,
                        help="TPC-H scale factor; event log: 5M rows per unit")
    parser.add_argument("--only", action="append", choices=WORKLOADS_ON_S3,
                        help="run only this workload (repeatable)")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--warmups", type=int, default=1)
    parser.add_argument("--buckets", type=int, default=200)
    parser.add_argument("--data-dir",
                        default=os.path.expanduser("~/.cache/spark-accelerator/bench-data"),
                        help="where generated data is cached (copied to S3 from there)")
    parser.add_argument("--work-dir", default="/tmp/accelerator-bench-s3",
                        help="indexes, the cache, limit files and the server's log (wiped)")
    parser.add_argument("--out", help="write the JSON report here")


def _on_s3(spark, workload, bucket: str):
    """``workload`` whose source is a copy of its local source in ``bucket``."""
    jvm = spark.sparkContext._jvm
    conf = spark._jsparkSession.sessionState().newHadoopConf()

    def prepare(ctx):
        facts = workload.prepare(ctx)
        local = jvm.org.apache.hadoop.fs.Path(os.path.abspath(facts["path"]))
        remote = jvm.org.apache.hadoop.fs.Path(f"{bucket}/{os.path.basename(facts['path'])}")
        remote_fs = remote.getFileSystem(conf)
        if not remote_fs.exists(remote):
            jvm.org.apache.hadoop.fs.FileUtil.copy(local.getFileSystem(conf), local, remote_fs,
                                                   remote, False, conf)
        return {**facts, "path": str(remote)}

    return dataclasses.replace(workload, prepare=prepare)


def _summary(report: dict) -> dict:
    """Medians and ratios of one workload's report."""
    limit = report["limit_s"]["median"] if report["limit_s"] else None
    return {"name": report["name"], "vanilla_s": report["vanilla_s"]["median"],
            "accelerated_s": report["accelerated_s"]["median"], "limit_s": limit,
            "ratio_vanilla_over_accelerated": report["ratio_vanilla_over_accelerated"]["median"],
            "ratio_accelerated_over_limit": report["ratio_accelerated_over_limit"],
            "identical": report["identical"], "indexes": report["indexes"],
            **({"cache": report["cache"]} if "cache" in report else {})}


def run(args: argparse.Namespace) -> int:
    """Runs the workloads on S3; prints (or writes to ``--out``) the JSON report."""
    from bench.harness import claim_work_dir, make_spark, run_workload
    from bench.workloads import WORKLOADS, Context
    from tests.services.s3 import s3a_jars, spark_conf, start_s3

    claim_work_dir(args.work_dir)
    server = start_s3(args.work_dir)
    try:
        bucket = server.create_bucket(LAKE_BUCKET)
        spark = make_spark(args.work_dir, args.buckets, {
            "spark.jars": ",".join(map(str, s3a_jars())), **spark_conf(server.endpoint),
            "spark.accelerator.cache.path": os.path.join(args.work_dir, "cache")})
        ctx = Context(spark, args.data_dir, args.scale)
        chosen = [w for w in WORKLOADS
                  if w.name in WORKLOADS_ON_S3 and (not args.only or w.name in args.only)]
        built: dict[str, str] = {}
        reports = [run_workload(spark, _on_s3(spark, w, bucket), ctx, args.work_dir, args.pairs,
                                args.warmups, built) for w in chosen]
        spark.stop()
    finally:
        server.stop()
    report = {"scale": args.scale, "lake": "s3a:// (moto, local)",
              "indexes_and_cache": "local disk",
              "machine": {"cores": os.cpu_count(), "master": "local[2]"},
              "workloads": [_summary(r) for r in reports]}
    text = json.dumps(report, indent=2, default=str)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(text)
    failed = [r["name"] for r in reports if not r["identical"]]
    if failed:
        print(f"FAILED: results differ from vanilla Spark in {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0
