"""``python -m bench star [--scale 1]``: the zero-configuration loop on a star schema.

The data (bench/star_data.py: a date-clustered fact table of 10 million rows per unit of scale
and four dimensions) and the query templates (bench/star_queries.py: at least 20, with CTE
self-joins, correlated subqueries and window functions) are our own. One SparkSession, no
accelerator setting but the system path under ``--work-dir``:

1. **record**: ``--record-runs`` queries of each template (literals from ``--seed``) with the
   accelerator enabled, so the query history holds them;
2. **advise**: ``hs.recommend()`` then ``hs.applyRecommendations(recs)``, timed; a failure of
   ``recommend()`` is reported (and fails the run), never raised;
3. **measure**: ``--warmups`` untimed then ``--pairs`` timed rounds, each running one query of
   every template (new literals each round) with the accelerator disabled and enabled, the
   side that goes first alternating by round; every answer is compared with vanilla's.

The JSON report (printed, and written to ``--out``) holds per template the median seconds of
each side and the median of the rounds' accelerated/vanilla ratios, whether its answers were
identical, and the Spark jobs and bytes read of one more query of it on each side (see
``_work``: figures that do not depend on the machine's load); the same for the total of a
round; the instructions advised and how applying them
went; and the fact table's bytes a one-month dimension filter reads (the sizes of the files
its scans read of the fact, or of an index over the fact serving it, with the accelerator
and without, over the fact's bytes). Exits 1 when
an answer differs (or fails) or ``recommend()`` failed. Timings are reported, never asserted.
"""
from __future__ import annotations

import argparse
import logging
import os
import random
import statistics
import sys
import time
from typing import Any

from pyspark.sql import SparkSession

log = logging.getLogger("bench.star")

#: the issue's targets, reported as met or not
TARGET_MAX_TEMPLATE_RATIO = 1.1     # accelerated / vanilla per template, at most
TARGET_MAX_TOTAL_RATIO = 0.5        # accelerated / vanilla over a round, at most
TARGET_MAX_ONE_MONTH_SHARE = 1 / 8  # fact bytes a one-month filter reads / fact bytes, at most


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``star`` subcommand's options."""
    from bench.harness import add_output_arguments

    parser.add_argument("--scale", type=float, default=1.0,
                        help="10 million fact rows per unit (generated once, then cached)")
    parser.add_argument("--record-runs", type=int, default=2,
                        help="queries of each template recorded before advising")
    parser.add_argument("--pairs", type=int, default=3,
                        help="timed rounds of vanilla and accelerated runs of every template")
    parser.add_argument("--warmups", type=int, default=1, help="untimed rounds first")
    parser.add_argument("--seed", type=int, default=47, help="seed of the queries' literals")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting of the benchmark's session (repeatable), e.g. "
                             "spark.accelerator.dynamicFilePruning.minScanBytes=0 for data "
                             "smaller than its default")
    add_output_arguments(parser, "/tmp/accelerator-star",
                         "the accelerator's system path goes here (wiped)")


def _views(spark: SparkSession, facts: dict) -> None:
    for name, path in facts["paths"].items():
        spark.read.parquet(path).createOrReplaceTempView(name)


def _run(spark: SparkSession, sql: str, accelerated: bool) -> tuple[float, list | None, str | None]:
    """(seconds, canonical rows or None, error) of one run of ``sql``."""
    from accelerator import Hyperspace
    from bench.harness import canonical

    (Hyperspace.enable if accelerated else Hyperspace.disable)(spark)
    start = time.perf_counter()
    try:
        found = canonical(spark.sql(sql).collect())
        return time.perf_counter() - start, found, None
    except Exception as exc:  # noqa: BLE001 - a failed accelerated query is reported
        if not accelerated:
            raise
        return time.perf_counter() - start, None, f"{type(exc).__name__}: {str(exc)[:300]}"


def _record(spark: SparkSession, facts: dict, rng: random.Random, runs: int) -> dict:
    from bench.star_queries import TEMPLATES

    start = time.perf_counter()
    for _ in range(runs):
        for t in TEMPLATES:
            _run(spark, t.make(rng, facts), accelerated=True)
    return {"queries": runs * len(TEMPLATES), "seconds": time.perf_counter() - start}


def _advise(spark: SparkSession) -> tuple[dict, dict]:
    """(what ``recommend()`` gave, what applying it did)."""
    from accelerator import Hyperspace

    Hyperspace.enable(spark)
    Hyperspace.flushHistory(spark)
    hs = Hyperspace(spark)
    start = time.perf_counter()
    try:
        recs = hs.recommend()
        rows = recs.collect()
    except Exception as exc:  # noqa: BLE001 - reported: the target is that it never fails
        log.exception("recommend() failed")
        return ({"ok": False, "error": f"{type(exc).__name__}: {exc}",
                 "seconds": time.perf_counter() - start, "instructions": []},
                {"seconds": 0.0, "results": []})
    advised = {"ok": True, "error": None, "seconds": time.perf_counter() - start,
               "instructions": [{k: r[k] for k in ("action", "kind", "source", "columns",
                                                   "includedColumns", "estimatedSecondsSaved",
                                                   "queries", "reason")} for r in rows]}
    start = time.perf_counter()
    applied = [r.asDict() for r in hs.applyRecommendations(recs).collect()]
    return advised, {"seconds": time.perf_counter() - start, "results": applied}


def _measure(spark: SparkSession, facts: dict, rng: random.Random, warmups: int,
             pairs: int) -> tuple[dict[str, list[tuple[float, float]]], list[dict]]:
    """Per template, (vanilla s, accelerated s) of each timed round; the answers that differed
    from vanilla's or failed."""
    from bench.star_queries import TEMPLATES

    times: dict[str, list[tuple[float, float]]] = {t.name: [] for t in TEMPLATES}
    mismatches = []
    for round_ in range(warmups + pairs):
        for t in TEMPLATES:
            sql = t.make(rng, facts)
            sides = (False, True) if round_ % 2 == 0 else (True, False)
            runs = {accelerated: _run(spark, sql, accelerated) for accelerated in sides}
            (v_s, v_rows, _), (a_s, a_rows, error) = runs[False], runs[True]
            if error is not None or a_rows != v_rows:
                mismatches.append({"template": t.name, "round": round_, "sql": sql,
                                   "error": error, "vanilla_rows": len(v_rows or []),
                                   "accelerated_rows": None if a_rows is None else len(a_rows)})
            if round_ >= warmups:
                times[t.name].append((v_s, a_s))
        log.info("round %d of %d done", round_ + 1, warmups + pairs)
    return times, mismatches


def _work(spark: SparkSession, facts: dict, rng: random.Random) -> dict[str, dict]:
    """Per template, one query (new literals) run vanilla then accelerated: the Spark jobs
    each side started (the accelerated side's planning included: the keys' queries of dynamic
    file pruning) and the bytes their tasks read (:func:`bench.harness.job_work`)."""
    from bench.harness import job_work
    from bench.star_queries import TEMPLATES

    out = {}
    for t in TEMPLATES:
        sql = t.make(rng, facts)
        sides = {side: job_work(spark, lambda: _run(spark, sql, accelerated))
                 for side, accelerated in (("vanilla", False), ("accelerated", True))}
        out[t.name] = {k: {side: sides[side][k] for side in sides}
                       for k in ("jobs", "bytes_read")}
    return out


def _fact_read(spark: SparkSession, facts: dict, seed: int) -> dict:
    """The fact files and bytes a one-month dimension filter's scans read, each side: the
    files of the fact, or of an index over it serving the query."""
    from accelerator import Hyperspace
    from bench.harness import file_scans
    from bench.star_queries import month_by_category

    sql = month_by_category(random.Random(seed), facts)
    fact = os.path.realpath(facts["paths"]["store_sales"])
    hs = Hyperspace(spark)
    roots = [fact + "/"] + [
        os.path.realpath(r["location"].removeprefix("file:")) + "/"
        for r in hs.indexes().collect()
        if any(os.path.realpath(p.removeprefix("file:")) == fact
               for p in hs.index(r["name"]).first()["sourcePaths"] or [])]
    out: dict[str, Any] = {"sql": sql, "fact_files": facts["fact_files"],
                           "fact_bytes": facts["fact_bytes"]}
    for side, enable in (("vanilla", Hyperspace.disable), ("accelerated", Hyperspace.enable)):
        enable(spark)
        read = {p: size for files, _ in file_scans(spark.sql(sql)) if files
                for p, size in files.items() if any(r in p for r in roots)}
        out[f"{side}_files"], out[f"{side}_bytes"] = len(read), sum(read.values())
    out["share"] = out["accelerated_bytes"] / facts["fact_bytes"]
    return out


def _ratios(pairs: list[tuple[float, float]]) -> dict:
    return {"vanilla_s": statistics.median(v for v, _ in pairs),
            "accelerated_s": statistics.median(a for _, a in pairs),
            "ratio": statistics.median(a / v for v, a in pairs)}


def report(args: argparse.Namespace, facts: dict, recorded: dict, advised: dict, applied: dict,
           times: dict[str, list[tuple[float, float]]], mismatches: list[dict],
           fact_read: dict, work: dict[str, dict], spark_version: str) -> dict:
    """The JSON report (see the module docstring)."""
    from bench.star_queries import TEMPLATES

    differing = {m["template"] for m in mismatches}
    templates = [{"name": t.name, "shapes": list(t.shapes), **_ratios(times[t.name]),
                  "identical": t.name not in differing, **work[t.name]} for t in TEMPLATES]
    rounds = list(zip(*times.values()))     # per round, (vanilla, accelerated) per template
    total = {**_ratios([(sum(v for v, _ in r), sum(a for _, a in r)) for r in rounds]),
             "identical": not mismatches,
             **{k: {side: sum(w[k][side] for w in work.values())
                    for side in ("vanilla", "accelerated")} for k in ("jobs", "bytes_read")}}
    worst = max(t["ratio"] for t in templates)
    return {
        "benchmark": "star", "scale": args.scale, "spark": spark_version,
        "machine": {"cores": os.cpu_count(), "master": "local[2]"},
        "data": {k: facts[k] for k in ("fact_rows", "fact_files", "fact_bytes", "items",
                                       "customers", "stores")},
        "record": recorded, "recommend": advised, "apply": applied,
        "pairs": args.pairs, "templates": templates, "total": total,
        "one_month_fact_read": fact_read, "mismatches": mismatches,
        "targets": {
            "every_result_identical": not mismatches,
            "recommend_never_failed": advised["ok"],
            "max_template_ratio": {"value": worst, "limit": TARGET_MAX_TEMPLATE_RATIO,
                                   "met": worst <= TARGET_MAX_TEMPLATE_RATIO},
            "total_ratio": {"value": total["ratio"], "limit": TARGET_MAX_TOTAL_RATIO,
                            "met": total["ratio"] <= TARGET_MAX_TOTAL_RATIO},
            "one_month_fact_share": {"value": fact_read["share"],
                                     "limit": TARGET_MAX_ONE_MONTH_SHARE,
                                     "met": fact_read["share"] <= TARGET_MAX_ONE_MONTH_SHARE}},
    }


def table(rep: dict) -> str:
    """The report's per-template figures as text."""
    head = (f"{'template':42} {'vanilla s':>9} {'accel s':>8} {'a/v':>6} {'identical':>9} "
            f"{'jobs v/a':>8} {'MB read v/a':>13}")
    lines = [head, "-" * len(head)]
    for t in rep["templates"] + [{"name": "TOTAL", **rep["total"]}]:
        jobs, read = t["jobs"], t["bytes_read"]
        lines.append(f"{t['name'][:42]:42} {t['vanilla_s']:9.3f} {t['accelerated_s']:8.3f} "
                     f"{t['ratio']:6.2f} {str(t['identical']):>9} "
                     f"{jobs['vanilla']:>4}/{jobs['accelerated']:<3} "
                     f"{read['vanilla'] / 1e6:6.1f}/{read['accelerated'] / 1e6:<6.1f}")
    read = rep["one_month_fact_read"]
    lines.append(f"one month: fact bytes read {read['accelerated_bytes']:,} of "
                 f"{read['fact_bytes']:,} ({read['share']:.3f}); vanilla "
                 f"{read['vanilla_bytes']:,}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Runs the benchmark (see the module docstring); 1 when an answer differed or
    ``recommend()`` failed."""
    from bench.harness import claim_work_dir, make_spark, publish
    from bench.star_data import star_schema

    claim_work_dir(args.work_dir)
    malformed = [item for item in args.conf if "=" not in item]
    if malformed:
        raise SystemExit(f"bench star: --conf takes KEY=VALUE, not {', '.join(malformed)}")
    settings = dict(item.split("=", 1) for item in args.conf)
    spark = make_spark(args.work_dir, "auto", settings)
    t0 = time.perf_counter()
    facts = star_schema(spark, args.data_dir, args.scale)
    _views(spark, facts)
    rng = random.Random(args.seed)
    recorded = _record(spark, facts, rng, args.record_runs)
    advised, applied = _advise(spark)
    log.info("advised %d instructions", len(advised["instructions"]))
    times, mismatches = _measure(spark, facts, rng, args.warmups, args.pairs)
    work = _work(spark, facts, rng)
    rep = report(args, facts, recorded, advised, applied, times, mismatches,
                 _fact_read(spark, facts, args.seed), work, spark.version)
    rep["wall_s"] = time.perf_counter() - t0
    spark.stop()
    publish(rep, table(rep), args.out)
    if mismatches or not advised["ok"]:
        print(f"\nFAILED: {len(mismatches)} answers differ from vanilla Spark (or failed); "
              f"recommend() {'ran' if advised['ok'] else 'failed'}", file=sys.stderr)
        return 1
    return 0
