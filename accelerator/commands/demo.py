"""``accelerator demo``: the product end to end on a small local sample.

The default demo writes a small lake (nested Parquet events partitioned by day, and a raw gzip
JSON landing zone of log messages), runs a workload of typical queries with the accelerator
enabled and nothing configured (the query history is recorded by default), runs the advise job
(the rule engine mines the history and builds indexes or fills the cache), then runs each query
template by vanilla Spark and accelerated in alternating pairs after the same warm-up, and
prints, per template, the median times, the speed-up or "no change" when nothing served it,
whether the rows are identical and what the accelerator did as the physical plans' file
scans show it (:mod:`accelerator.commands.demo_report`), then what the engine did
and why, and the cache's usage; it writes a before/after figure (SVG) into the work directory.
It exits 1 when a query's rows differ.

``--covering`` runs the earlier demo instead: one covering index on a nested field, a query
with the accelerator off and on.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlparse

from accelerator.commands.demo_report import (HEADER, Effect, Pairs, effect, figure, local_path,
                                              row, same_plan)

#: the first day of the sample events
START = date(2026, 3, 1)
#: the before/after figure, under the work directory
FIGURE = "demo-before-after.svg"
#: the rule engine's index budget in the demo: room for every index it finds worth building,
#: so what it builds does not hinge on which of two candidates' queries ran slower this time
#: (by default the budget is a quarter of the sources' bytes, taken greedily by score)
INDEX_BUDGET = "1g"


# --- the sample lake ------------------------------------------------------------------------

@dataclass(frozen=True)
class Scale:
    """How much data the demo writes and how often it runs each query."""

    events: int        # rows of the events table
    days: int          # its daily partitions (two files each)
    messages: int      # lines of the landing zone
    landing_files: int
    runs: int          # timed pairs (vanilla, accelerated) of each template after a warm-up pair


FULL = Scale(events=1_000_000, days=8, messages=320_000, landing_files=8, runs=3)
QUICK = Scale(events=100_000, days=4, messages=40_000, landing_files=4, runs=2)
USERS_PER_EVENT = 20    # the user population is events / this
PAGES = ["/", "/search", "/cart", "/checkout", "/account", "/help", "/product/a",
         "/product/b", "/product/c", "/orders"]
COUNTRIES = ["DE", "FR", "US", "BR", "IN", "JP", "NG", "AU"]
SERVICES = ["api", "auth", "billing", "search", "web"]


@dataclass(frozen=True)
class Lake:
    """Where the sample lake's two sources are, and how much data they hold."""

    events: str
    landing: str
    scale: Scale


def _progress(started: float, text: str) -> None:
    """One progress line, with the seconds since the demo started."""
    print(f"[{time.perf_counter() - started:6.1f} s] {text}", flush=True)


def _hash(seed: int) -> Any:
    """A seeded hash of the row's ``id`` (the same data on every machine)."""
    from pyspark.sql import functions as F

    return F.xxhash64(F.col("id"), F.lit(seed))


def _pick(values: list, seed: int) -> Any:
    """One of ``values``, chosen by the row's seeded hash."""
    from pyspark.sql import functions as F

    return F.element_at(F.array(*[F.lit(v) for v in values]),
                        (F.pmod(_hash(seed), F.lit(len(values))) + 1).cast("int"))


def _second(rows: int, scale: Scale) -> Any:
    """The row's second since :data:`START` (rows spread evenly over the days, in order)."""
    from pyspark.sql import functions as F

    return (F.col("id") * F.lit(scale.days * 86400) / F.lit(rows)).cast("long")


def _time(rows: int, scale: Scale) -> Any:
    """The row's timestamp."""
    from pyspark.sql import functions as F

    start = int(datetime(START.year, START.month, START.day, tzinfo=timezone.utc).timestamp())
    return F.timestamp_seconds(F.lit(start) + _second(rows, scale))


def _events(spark: Any, scale: Scale) -> Any:
    """The events: one row per page view, in time order, ``scale.days`` days of them, two
    files a day."""
    from pyspark.sql import functions as F

    n, users = scale.events, max(1, scale.events // USERS_PER_EVENT)
    agents = [f"Mozilla/5.0 (platform {i}) AppleWebKit/537.36 Chrome/12{i}.0" for i in range(6)]
    return spark.range(n, numPartitions=2 * scale.days).select(
        F.format_string("ev-%012x", F.col("id")).alias("event_id"),
        _time(n, scale).alias("ts"),
        F.struct((F.pmod(_hash(1), F.lit(users)) + 1).alias("id"),
                 _pick(COUNTRIES, 2).alias("country"),
                 _pick(["free", "pro", "team"], 3).alias("plan")).alias("user"),
        F.format_string("s-%08x", (F.col("id") / 40).cast("long")).alias("session_id"),
        _pick(PAGES, 4).alias("url"),
        _pick(["", "https://www.example.com/", "https://news.example.org/a"], 5).alias("referrer"),
        _pick(agents, 6).alias("user_agent"),
        F.format_string("10.%d.%d.%d", *[F.pmod(_hash(s), F.lit(256)) for s in (7, 8, 9)])
        .alias("ip"),
        _pick(["mobile", "desktop", "tablet"], 10).alias("device"),
        _pick(["android", "ios", "windows", "macos", "linux"], 16).alias("os"),
        _pick(["en", "de", "fr", "pt", "hi", "ja"], 17).alias("lang"),
        _pick(["4.1.0", "4.2.0", "4.2.1"], 18).alias("app_version"),
        _pick([200, 200, 200, 200, 301, 404, 500], 11).alias("status"),
        (F.pmod(_hash(12), F.lit(2000)) + 5).cast("int").alias("duration_ms"),
        F.pmod(_hash(13), F.lit(200_000)).alias("bytes"),
        F.to_json(F.struct(F.pmod(_hash(14), F.lit(100)).alias("ab"),
                           _pick(["none", "red", "blue"], 15).alias("banner"))).alias("props"),
        F.date_add(F.lit(START), (_second(n, scale) / 86400).cast("int")).alias("event_date"))


def _messages(spark: Any, scale: Scale) -> Any:
    """The landing zone's log lines: a time, a level, a service, free text (each line with its
    own code) and a JSON string of attributes (a trace id shared by 8 lines), as a collector
    would drop them."""
    from pyspark.sql import functions as F

    n = scale.messages
    level = F.pmod(_hash(1), F.lit(50))
    return spark.range(n, numPartitions=scale.landing_files).select(
        F.date_format(_time(n, scale), "yyyy-MM-dd'T'HH:mm:ss").alias("time"),
        F.when(level == 0, "ERROR").when(level < 5, "WARN").otherwise("INFO").alias("level"),
        _pick(SERVICES, 2).alias("service"),
        F.format_string("request r-%010x by user=%d took %d ms; code E%04d", F.col("id"),
                        F.pmod(_hash(3), F.lit(10_000)), F.pmod(_hash(4), F.lit(3000)),
                        F.col("id")).alias("message"),
        F.to_json(F.struct(F.format_string("t-%08x", (F.col("id") / 8).cast("long"))
                           .alias("trace"), F.pmod(_hash(5), F.lit(600)).alias("status")))
        .alias("attrs"))


def write_lake(spark: Any, root: Path, scale: Scale, started: float) -> Lake:
    """Writes the sample lake under ``root`` (replacing an earlier one)."""
    lake = Lake(str(root / "events"), str(root / "landing"), scale)
    _progress(started, f"writing {scale.events:,} events ({scale.days} days of nested Parquet) "
                       f"to {lake.events}")
    _events(spark, scale).write.mode("overwrite").partitionBy("event_date").parquet(lake.events)
    _progress(started, f"writing {scale.messages:,} log lines ({scale.landing_files} gzip JSON "
                       f"files) to {lake.landing}")
    (_messages(spark, scale).write.mode("overwrite").option("compression", "gzip")
     .json(lake.landing))
    return lake


# --- the workload ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Template:
    """A query template: its name, what it does, and its query for the run ``i``."""

    name: str
    does: str
    query: Callable[[Any, Lake, int], Any]


def _user_lookup(spark: Any, lake: Lake, i: int) -> Any:
    """A point lookup on a nested field."""
    return (spark.read.parquet(lake.events).where(f"user.id = {17 + 101 * i}")
            .select("ts", "session_id", "url"))


def _day_window(spark: Any, lake: Lake, i: int) -> Any:
    """A time-window aggregation."""
    day = START + timedelta(days=i % lake.scale.days)
    return (spark.read.parquet(lake.events)
            .where(f"ts >= timestamp'{day} 09:00:00' AND ts < timestamp'{day} 12:00:00'")
            .groupBy("user.country").agg({"duration_ms": "sum", "*": "count"}))


def _pages_of_a_day(spark: Any, lake: Lake, i: int) -> Any:
    """A one-day aggregation (the partition column)."""
    day = START + timedelta(days=(i + 1) % lake.scale.days)
    return (spark.read.parquet(lake.events).where(f"event_date = date'{day}'")
            .groupBy("url", "device").agg({"bytes": "sum", "*": "count"}))


def _message_search(spark: Any, lake: Lake, i: int) -> Any:
    """A substring search of raw log lines."""
    code = (lake.scale.messages // 7) * (i % 5) + 1234
    return (spark.read.json(lake.landing).where(f"message LIKE '%code E{code:04d}%'")
            .select("time", "service", "message"))


def _trace_lookup(spark: Any, lake: Lake, i: int) -> Any:
    """A JSON-path lookup in raw log lines."""
    trace = (lake.scale.messages // 8 // 5) * (i % 5) + 42
    return (spark.read.json(lake.landing)
            .where(f"get_json_object(attrs, '$.trace') = 't-{trace:08x}'")
            .select("time", "level", "service"))


def _errors_per_service(spark: Any, lake: Lake, i: int) -> Any:
    """A filtered group-by of raw log lines."""
    return (spark.read.json(lake.landing).where("level = 'ERROR'")
            .groupBy("service").count())


TEMPLATES = [
    Template("user_lookup", "events of one user (user.id = n)", _user_lookup),
    Template("day_window", "3 hours of one day, per country (ts range)", _day_window),
    Template("pages_of_a_day", "page views of one day (event_date =, group by)", _pages_of_a_day),
    Template("message_search", "log lines holding a code (message LIKE '%code E1234%')",
             _message_search),
    Template("trace_lookup", "log lines of a trace (get_json_object(attrs, '$.trace') =)",
             _trace_lookup),
    Template("errors_per_service", "errors per service (level = 'ERROR', group by)",
             _errors_per_service),
]


def replay(spark: Any, lake: Lake, label: str, started: float) -> None:
    """Runs every template ``lake.scale.runs + 1`` times (run ``i`` of a template gets the same
    literals in every replay): the workload whose history the advise job mines."""
    for round_ in range(lake.scale.runs + 1):
        _progress(started, f"{label}: round {round_ + 1} of {lake.scale.runs + 1}")
        for t in TEMPLATES:
            t.query(spark, lake, round_).collect()


def _run(spark: Any, query: Callable[[], Any], accelerated: bool) -> tuple[float, list[tuple]]:
    """The seconds and sorted rows of one run of ``query`` with the rewrite on or off."""
    from accelerator import Hyperspace

    (Hyperspace.enable if accelerated else Hyperspace.disable)(spark)
    df = query()
    start = time.perf_counter()
    rows = df.collect()
    return time.perf_counter() - start, sorted(map(tuple, rows), key=repr)


def measure(spark: Any, lake: Lake, started: float) -> dict[str, Pairs]:
    """Every template run by vanilla Spark and accelerated in alternating pairs: one warm-up
    pair, then ``lake.scale.runs`` timed pairs, the side that goes first alternating from one
    pair to the next; both runs of a pair get the same literals. Leaves the rewrite on."""
    out = {t.name: Pairs() for t in TEMPLATES}
    for round_ in range(lake.scale.runs + 1):
        _progress(started, f"vanilla Spark and accelerated in alternating pairs: pair "
                           f"{round_ + 1} of {lake.scale.runs + 1}"
                           f"{' (warm-up)' if round_ == 0 else ''}")
        for t in TEMPLATES:
            def query(t=t, i=round_):
                return t.query(spark, lake, i)
            sides = {}
            for accelerated in ((False, True) if round_ % 2 else (True, False)):
                sides[accelerated] = _run(spark, query, accelerated)
            if round_ > 0:
                out[t.name].add(sides[False][0], sides[True][0],
                                sides[False][1] == sides[True][1])
    from accelerator import Hyperspace
    Hyperspace.enable(spark)
    return out


# --- the advise job -------------------------------------------------------------------------

def advise(spark: Any, hs: Any) -> tuple[list[Any], list[Any]]:
    """The scheduler's advise job: the history written out, the rule engine's recommendations
    from it, carried out. Returns (recommendation rows, rows of what was done to each)."""
    from accelerator import Hyperspace

    Hyperspace.flushHistory(spark)
    recs = hs.recommend()
    return recs.collect(), hs.applyRecommendations(recs).collect()


def _label(rec: Any) -> str:
    """What an instruction is about: the index's name, or ``the cache of <source>``."""
    return rec["name"] or f"the cache of {rec['source']}"


def print_advice(recs: list[Any], applied: list[Any]) -> None:
    """One line per instruction carried out: its action, kind, target, status and time."""
    for rec, done in zip(recs, applied):
        what = f"{rec['action']} {rec['source']}" if rec["action"] == "cache" else \
            f"{rec['action']} {rec['kind']} index {rec['name']}"
        print(f"    {done['status']}: {what} ({', '.join(rec['columns'])}) in "
              f"{done['seconds']:.1f} s")


# --- the report -----------------------------------------------------------------------------

def used(hs: Any, df: Any) -> list[str]:
    """The indexes (by name) and ``cache`` that whyNot says answer ``df``."""
    return sorted({r.index for r in hs.whyNot(df, redirectFunc=lambda _: None)
                   if r.code == "APPLIED"})


def _plan(df: Any) -> str:
    """The text of ``df``'s physical plan."""
    return df._jdf.queryExecution().executedPlan().toString()


def scanned_files(spark: Any, df: Any) -> list[str]:
    """The files the file scans of ``df``'s physical plan read, after partition pruning and
    any index (``df.inputFiles()`` lists a relation's files before partition pruning)."""
    from accelerator.runtime import jvm

    cache = jvm.helpers(spark).cache
    return [f[0] for scan in cache.scans(df._jdf.queryExecution().sparkPlan())
            for f in json.loads(cache.describeScan(scan))["files"]]


def observe(spark: Any, hs: Any, lake: Lake, system_path: str) -> dict[str, Effect]:
    """What the accelerator does to each template (its run 1), from the physical plans and
    the files their scans read, of vanilla Spark and of the accelerated query. Leaves the
    rewrite on."""
    from accelerator import Hyperspace

    out = {}
    for t in TEMPLATES:
        Hyperspace.disable(spark)
        vanilla = t.query(spark, lake, 1)
        vanilla_plan, vanilla_files = _plan(vanilla), scanned_files(spark, vanilla)
        Hyperspace.enable(spark)
        accelerated = t.query(spark, lake, 1)
        out[t.name] = effect(vanilla_files, scanned_files(spark, accelerated),
                             same_plan(vanilla_plan, _plan(accelerated)),
                             used(hs, accelerated), system_path)
    return out


def _instruction(name: str, recs: list[Any], sources: list[str]) -> Any:
    """The instruction behind an index name (or its directory's lower-cased name), or behind
    ``cache`` for one of ``sources``."""
    for rec in recs:
        if (rec["name"] or "").lower() == name.lower() or (
                name == "cache" and rec["action"] == "cache"
                and local_path(rec["source"]) in sources):
            return rec
    return None


def report(lake: Lake, measured: dict[str, Pairs], effects: dict[str, Effect],
           recs: list[Any]) -> bool:
    """Prints, per template, the median times of vanilla Spark and of the accelerated query,
    the speed-up (or "no change" when nothing served it), whether the rows are the same and
    what the accelerator did as the plan and the files read show, with the engine's reason for
    each index or cache credited; then the instructions no template's files show in use. True
    when every template's rows were the same."""
    print(f"\n{HEADER}")
    sources = [local_path(p) for p in (lake.events, lake.landing)]
    same_all, shown = True, set()
    for t in TEMPLATES:
        pairs, what = measured[t.name], effects[t.name]
        same_all &= all(pairs.same_rows)
        print(row(t.name, pairs, what))
        print(f"    {t.does}")
        for name in what.credited:
            rec = _instruction(name, recs, sources)
            if rec is not None:
                shown.add(_label(rec))
                print(f"    answered by {_label(rec)}: {rec['reason']}")
    rest = [r for r in recs if _label(r) not in shown]
    if rest:
        print("\nbuilt, but no template's plan or files read show it used:")
        for rec in rest:
            print(f"    {_label(rec)}: {rec['reason']}")
    return same_all


def write_figure(path: Path, measured: dict[str, Pairs], effects: dict[str, Effect],
                 scale: Scale) -> None:
    """Writes the before/after figure (SVG) to ``path`` and says where."""
    title = (f"accelerator demo: {scale.events:,} events, {scale.messages:,} log lines; "
             f"median of {scale.runs} alternating pairs")
    path.write_text(figure([(t.name, measured[t.name], effects[t.name]) for t in TEMPLATES],
                           title))
    print(f"\nbefore/after figure: {path}")


def print_cache(hs: Any) -> None:
    """The cache's usage: bytes, entries, hits and misses, bytes served."""
    s = hs.cacheStats().first()
    print(f"\ncache: {s['usedBytes'] / 2**20:.1f} MB used in {s['entries']} entries, "
          f"{s['hits']} hits, {s['misses']} misses, {s['bytesServed'] / 2**20:.1f} MB served")


# --- the demos ------------------------------------------------------------------------------

def _fresh_system_path(args: argparse.Namespace, work: Path) -> str | None:
    """The system path of a run, emptied when it is the default ``<work-dir>/indexes`` (so
    reruns behave the same); None after printing why when a given one holds something."""
    if args.system_path is None:
        path = work / "indexes"
        if path.exists():
            shutil.rmtree(path)
        return str(path)
    given = Path(local_path(args.system_path))
    if urlparse(args.system_path).scheme in ("", "file") and given.exists() \
            and any(given.iterdir()):
        print(f"accelerator demo: error: system path {args.system_path} is not empty; the "
              "demo needs a fresh one", file=sys.stderr)
        return None
    return args.system_path


def lake_demo(args: argparse.Namespace) -> int:
    """The default demo (see the module docstring)."""
    from accelerator import Hyperspace
    from accelerator.commands.session import spark_session
    from accelerator.query.session import conf_set
    from accelerator.runtime.settings import RULES_INDEX_BYTES

    started = time.perf_counter()
    scale = QUICK if args.quick else FULL
    work = Path(args.work_dir).resolve()
    system_path = _fresh_system_path(args, work)
    if system_path is None:
        return 1
    with spark_session(args, "accelerator-demo", system_path) as spark, \
            conf_set(spark, {RULES_INDEX_BYTES: INDEX_BUDGET}):
        lake = write_lake(spark, work / "lake", scale, started)
        hs = Hyperspace(spark)
        Hyperspace.enable(spark)
        replay(spark, lake, "workload (recorded in the query history)", started)
        _progress(started, f"advise job: recommending from the query history, then applying "
                           f"(index budget {INDEX_BUDGET}: {RULES_INDEX_BYTES})")
        recs, applied = advise(spark, hs)
        print_advice(recs, applied)
        measured = measure(spark, lake, started)
        effects = observe(spark, hs, lake, system_path)
        identical = report(lake, measured, effects, recs)
        print_cache(hs)
        write_figure(work / FIGURE, measured, effects, scale)
        _progress(started, "done" if identical else "done: some rows DIFFER (exit code 1)")
    return 0 if identical else 1


def _timed(fn, runs: int) -> tuple[float, object]:
    """The median seconds of ``runs`` calls of ``fn``, and what the last one returned."""
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


def covering_demo(args: argparse.Namespace) -> int:
    """Writes a nested sample, indexes ``nested.nst.field1`` and runs the seed's query both ways."""
    from pyspark.sql import functions as F

    from accelerator import Hyperspace, IndexConfig
    from accelerator.commands.session import spark_session
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
        start = time.perf_counter()
        hs.createIndex(df, IndexConfig("idx_nested", indexedColumns=["nested.nst.field1"],
                                       includedColumns=["id", "name", "nested.nst.field2"]))
        buckets = hs.index("idx_nested").first()["numBuckets"]
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


def demo(args: argparse.Namespace) -> int:
    """``accelerator demo``: the lake demo, or with ``--covering`` the covering-index one."""
    return covering_demo(args) if args.covering else lake_demo(args)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Adds the ``demo`` command to the command line's subcommands ``sub``."""
    demo_help = "run the product end to end on a small local sample lake"
    d = sub.add_parser("demo", help=demo_help, description=demo_help + (
        ": it writes a sample lake under --work-dir, replays typical queries with the "
        "accelerator on and nothing configured, lets the rule engine build indexes or fill "
        "the cache from their history, then runs each query by vanilla Spark and accelerated "
        "in alternating pairs and prints the median times, what served it as the plans show "
        "(\"no change\" when nothing did) and why, and writes a before/after figure (SVG) "
        "into --work-dir. It takes minutes and writes tens of MB; --quick is smaller, "
        "--covering shows one covering index instead."))
    d.add_argument("--work-dir", default="accelerator-demo", help="where sample data goes")
    d.add_argument("--system-path", help="index system path (default <work-dir>/indexes; "
                   "the lake demo empties the default one, and a given one must be empty)")
    d.add_argument("--quick", action="store_true", help="a smaller lake and fewer runs")
    d.add_argument("--covering", action="store_true",
                   help="the covering-index demo: one index on a nested field, a query with "
                        "the accelerator off and on")
    d.add_argument("--rows", type=int, default=500_000, help="--covering: rows of the sample")
    d.add_argument("--files", type=int, default=8, help="--covering: files of the sample")
    d.add_argument("--runs", type=int, default=5, help="--covering: timed runs of each side")
    d.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    d.set_defaults(func=demo)
