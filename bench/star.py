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
   side that goes first alternating by round, each run as a new query (Spark's compiled code
   forgotten before it: the two sides generate the same code, which the second would otherwise
   reuse); every answer is compared with vanilla's.

The JSON report (printed, and written to ``--out``) holds per template the median seconds of
each side and the median of the rounds' accelerated/vanilla ratios, whether its answers were
identical, and the Spark jobs and bytes read of one more query of it on each side (see
``_work``: figures that do not depend on the machine's load); the same for the total of a
round; the instructions advised and how applying them
went; and the fact table's bytes a one-month dimension filter reads (the sizes of the files
its scans read of the fact, or of an index over the fact serving it, with the accelerator
and without, over the fact's bytes). Exits 1 when
an answer differs (or fails) or ``recommend()`` failed. Timings are reported, never asserted.
With ``--limits``, each template is also timed over only the fact files the accelerator keeps,
without it (:func:`_limits`): the floor file pruning could reach, reported under ``limits``.
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
    parser.add_argument("--limits", action="store_true",
                        help="also time each template over only the fact files the accelerator "
                             "keeps, without it: the floor of file pruning (see _limits)")
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
    """(seconds, canonical rows or None, error) of one run of ``sql``, as a new query: Spark's
    compiled code forgotten first (:func:`bench.harness.forget_compiled_code`), so neither
    side of a pair runs on code the other compiled."""
    from accelerator import Hyperspace
    from bench.harness import canonical, forget_compiled_code

    (Hyperspace.enable if accelerated else Hyperspace.disable)(spark)
    forget_compiled_code(spark)
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


def _limits(spark: SparkSession, facts: dict, rng: random.Random, pairs: int) -> dict[str, dict]:
    """Per template, its floor under file pruning (``--limits``): one query (new literals)
    planned with the accelerator, the fact files its scans read, then ``pairs`` alternating
    vanilla runs of it over the whole fact and over those files alone (the ``store_sales`` view
    replaced), both without the accelerator: the time of perfect file pruning with no cost of
    its own. Every scan of the fact gets the files any of them keeps (a floor for a query
    reading the fact once). None for a template an index serves instead of the fact's files;
    ``identical`` checks the answers over the kept files (pruning's soundness)."""
    from accelerator import Hyperspace
    from bench.harness import canonical, file_scans, forget_compiled_code
    from bench.star_queries import TEMPLATES

    fact_path = facts["paths"]["store_sales"]
    fact_root = os.path.realpath(fact_path) + "/"
    fact = spark.read.parquet(fact_path)
    out: dict[str, dict] = {}
    for t in TEMPLATES:
        sql = t.make(rng, facts)
        Hyperspace.enable(spark)
        scans = [files for files, _ in file_scans(spark.sql(sql)) if files is not None]
        Hyperspace.disable(spark)
        kept = sorted({p for files in scans for p in files
                       if os.path.realpath(p.removeprefix("file:")).startswith(fact_root)})
        if not kept and any(scans):
            out[t.name] = None   # an index serves it: not a file-pruning floor
            continue
        restricted = spark.read.parquet(*kept) if kept else fact.where("false")
        runs: list[tuple[float, float]] = []
        identical = True
        for round_ in range(pairs):
            timed = {}
            for side in (("whole", "kept") if round_ % 2 == 0 else ("kept", "whole")):
                (restricted if side == "kept" else fact).createOrReplaceTempView("store_sales")
                forget_compiled_code(spark)
                start = time.perf_counter()
                rows = canonical(spark.sql(sql).collect())
                timed[side] = (time.perf_counter() - start, rows)
            identical = identical and timed["kept"][1] == timed["whole"][1]
            runs.append((timed["whole"][0], timed["kept"][0]))
        fact.createOrReplaceTempView("store_sales")
        out[t.name] = {"kept_files": len(kept), "identical": identical,
                       **{k.replace("accelerated", "limit"): v
                          for k, v in _ratios(runs).items()}}
    return out


def _limits_report(limits: dict[str, dict | None]) -> dict:
    """The floors of :func:`_limits` and their total over the templates that have one."""
    floored = [v for v in limits.values() if v is not None]
    whole = sum(v["vanilla_s"] for v in floored)
    kept = sum(v["limit_s"] for v in floored)
    return {"templates": limits, "served_by_an_index": [k for k, v in limits.items() if v is None],
            "total": {"vanilla_s": whole, "limit_s": kept, "ratio": kept / whole if whole else None,
                      "identical": all(v["identical"] for v in floored)}}


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
    if "limits" in rep:
        floors = rep["limits"]
        for name, v in floors["templates"].items():
            if v is not None:
                lines.append(f"floor {name[:36]:36} whole {v['vanilla_s']:7.3f} s, kept "
                             f"{v['kept_files']:4} files {v['limit_s']:7.3f} s ({v['ratio']:.2f})")
        total = floors["total"]
        lines.append(f"floor of file pruning, total: {total['limit_s']:.3f} of "
                     f"{total['vanilla_s']:.3f} s ({total['ratio']:.2f}); served by an index: "
                     f"{', '.join(floors['served_by_an_index']) or 'none'}")
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
    if args.limits:
        rep["limits"] = _limits_report(_limits(spark, facts, rng, args.pairs))
    rep["wall_s"] = time.perf_counter() - t0
    spark.stop()
    publish(rep, table(rep), args.out)
    if mismatches or not advised["ok"]:
        print(f"\nFAILED: {len(mismatches)} answers differ from vanilla Spark (or failed); "
              f"recommend() {'ran' if advised['ok'] else 'failed'}", file=sys.stderr)
        return 1
    return 0
