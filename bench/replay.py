"""``python -m bench replay``: a workload replay for the rule engine.

A seeded sequence of queries (300 by default) over the event log and TPC-H ``lineitem`` /
``orders`` in three phases whose hot columns drift:

1. lookups by id: ``trace_id``, ``session_id``, ``user.id`` of the event log, ``l_partkey`` of
   lineitem, ``o_custkey`` of orders;
2. time windows on the event log's ``ts`` (rows, and counts per level) and rare substrings of
   its ``message`` (``LIKE '%<a second of time text>%'``, ``LIKE '%user=<rare id> action=%'``);
   the JSON path ``get_json_object(payload, '$.at')`` is left out: the engine does not propose
   indexes over expressions yet;
3. joins (lineitem ⋈ orders on the order key, with aggregates) and aggregates (a TPC-H Q1-like
   one over lineitem, one day of the event log per country and level);

each phase with about 10% exploration queries (``SELECT * ... LIMIT n``). Literals vary per
query and come from a seeded generator (``--seed``): the same arguments replay the same queries.

The same queries run three times in one SparkSession, each run with a fresh system path,
interleaved by blocks of ``--every`` queries (vanilla's block, the engine's, the oracle's, then
the next block) so that the three runs see the same load of a shared machine over time:

* **vanilla**: the accelerator disabled;
* **engine**: the accelerator enabled with no configuration but the index budget
  (``spark.accelerator.rules.budget.indexBytes`` = 25% of the sources' bytes), and every
  ``--every`` queries ``Hyperspace.flushHistory``, ``hs.recommend()`` (timed as mining and
  advising) and ``hs.applyRecommendations(recs)`` (timed as building);
* **oracle**: the accelerator enabled, and before each phase the hand-declared best index set
  for that phase built with ``hs.createIndex`` (the previous phase's dropped first; both timed
  apart from the queries).

Every query's rows are compared with vanilla's (canonical order); the command exits 1 when one
differs (or fails). The JSON report (printed, and written to ``--out``) holds per run the query
seconds in all and per phase, the savings against vanilla and the engine's share of the
oracle's saving, per query template the median seconds per run and the engine/vanilla ratio,
the budget against the sizes of the engine's indexes, the share of the engine run spent mining
and advising, and for each applied instruction its estimated saving (``estimatedSecondsSaved``
× the queries of the templates it serves that ran after it was applied) against the measured one.
"""
from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import random
import shutil
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

log = logging.getLogger("bench.replay")

#: the rule engine's targets this benchmark checks
TARGET_SHARE_OF_ORACLE = 0.8       # engine saving / oracle saving, at least
TARGET_MAX_TEMPLATE_RATIO = 1.1    # engine / vanilla median per template, at most
TARGET_MAX_OVERHEAD = 0.05         # mining + advising / engine run's wall time, below
#: share of the sources' bytes given to the engine as its index budget
BUDGET_SHARE = 0.25
#: share of each phase's queries that are exploration queries
EXPLORATION_SHARE = 0.10
#: the session time zone of the replay (timestamp literals are UTC wall-clock times)
TIME_ZONE = "UTC"
#: the three runs of the replay
RUNS = ("vanilla", "engine", "oracle")
#: a join's settings in every run: sort-merge joins (else Spark broadcasts the filtered side)
JOIN_CONF = {"spark.sql.autoBroadcastJoinThreshold": "-1"}

EVENTS, LINEITEM, ORDERS = "events", "lineitem", "orders"


# --- the queries ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Query:
    """One query of the replay: its position, phase, template (the query kind), the literal it
    was given (for the report) and how to build it over the sources."""

    index: int
    phase: int
    template: str
    literal: str
    build: Callable[[Callable[[str], DataFrame]], DataFrame]
    conf: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Template:
    """A query kind: ``make(rng, facts)`` returns (literal text, builder, conf); ``serves``:
    the (source, column) pairs an index would have to cover to help it (for matching the
    engine's instructions to the queries they serve)."""

    name: str
    phase: int | None     # None: exploration, in every phase
    make: Callable[[random.Random, dict], tuple[str, Callable, dict]]
    serves: tuple[tuple[str, str], ...] = ()
    description: str = ""


def _ts_literal(micros: int) -> str:
    t = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros)
    return t.strftime("%Y-%m-%d %H:%M:%S")


def _trace_lookup(rng: random.Random, facts: dict):
    s = rng.choice(facts["samples"])
    return s["trace_id"], (lambda read: read(EVENTS).filter(F.col("trace_id") == s["trace_id"])
                           .select("event_id", "ts", "level", "message")), {}


def _session_lookup(rng: random.Random, facts: dict):
    s = rng.choice(facts["samples"])
    return s["session_id"], (lambda read: read(EVENTS)
                             .filter(F.col("session_id") == s["session_id"])
                             .select("event_id", "ts", "trace_id", "level")), {}


def _user_lookup(rng: random.Random, facts: dict):
    uid = rng.choice(facts["lookup_users"])
    return str(uid), (lambda read: read(EVENTS).filter(F.col("user.id") == uid)
                      .select("ts", "event_id", "level", "device.os")), {}


def _partkey_lookup(rng: random.Random, facts: dict):
    key = rng.randint(1, facts["parts"])
    return str(key), (lambda read: read(LINEITEM).filter(F.col("l_partkey") == key)
                      .select("l_orderkey", "l_partkey", "l_quantity", "l_extendedprice")), {}


def _custkey_lookup(rng: random.Random, facts: dict):
    key = rng.randint(1, facts["customers"])
    return str(key), (lambda read: read(ORDERS).filter(F.col("o_custkey") == key)
                      .select("o_orderkey", "o_orderdate", "o_totalprice")), {}


def _window(rng: random.Random, facts: dict, min_s: int, max_s: int) -> tuple[str, str]:
    width = rng.randint(min_s, max_s) * 1_000_000
    start = facts["start_micros"] + rng.randrange(facts["span_micros"] - width)
    return _ts_literal(start), _ts_literal(start + width)


def _ts_window_rows(rng: random.Random, facts: dict):
    lo, hi = _window(rng, facts, 60, 600)
    return f"{lo} .. {hi}", (lambda read: read(EVENTS).filter(
        F.expr(f"ts >= TIMESTAMP '{lo}' AND ts < TIMESTAMP '{hi}'"))
        .select("event_id", "ts", "session_id", "level")), {}


def _ts_window_levels(rng: random.Random, facts: dict):
    lo, hi = _window(rng, facts, 1800, 4 * 3600)
    return f"{lo} .. {hi}", (lambda read: read(EVENTS).filter(
        F.expr(f"ts >= TIMESTAMP '{lo}' AND ts < TIMESTAMP '{hi}'"))
        .groupBy("level").agg(F.count("*").alias("events"),
                              F.countDistinct("session_id").alias("sessions"))), {}


def _message_time_text(rng: random.Random, facts: dict):
    """A ten-second stretch of the time text every message holds (``...T10:15:3``): the events
    of ten seconds, all in one file."""
    micros = facts["start_micros"] + rng.randrange(facts["span_micros"] - 20_000_000)
    text = (dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros)).strftime(
        "%Y-%m-%dT%H:%M:%S")[:-1]
    return text, (lambda read: read(EVENTS).filter(F.col("message").like(f"%{text}%"))
                  .select("event_id", "message")), {}


def _message_user_text(rng: random.Random, facts: dict):
    uid = rng.choice(facts["rare_users"])
    text = f"user={uid} action="
    return text, (lambda read: read(EVENTS).filter(F.col("message").like(f"%{text}%"))
                  .select("event_id", "ts", "message")), {}


def _join_revenue(rng: random.Random, facts: dict):
    """lineitem ⋈ a quarter of orders on the order key: revenue and lines per order date."""
    start = dt.date(1992, 1, 1) + dt.timedelta(days=rng.randrange(2300))
    end = start + dt.timedelta(days=89)

    def build(read):
        orders = read(ORDERS).filter(F.col("o_orderdate").between(
            F.lit(start.isoformat()).cast("date"), F.lit(end.isoformat()).cast("date")))
        return (read(LINEITEM).join(orders, F.col("l_orderkey") == F.col("o_orderkey"))
                .groupBy("o_orderdate").agg(F.sum("l_extendedprice").alias("revenue"),
                                            F.count("*").alias("lines")))
    return f"{start} .. {end}", build, JOIN_CONF


def _join_priority(rng: random.Random, facts: dict):
    """TPC-H Q4-like: orders of a month with a line received after its commit date, per
    priority (as a join: lineitem ⋈ orders, count of distinct orders)."""
    start = dt.date(1992, 1, 1) + dt.timedelta(days=rng.randrange(2350))
    end = start + dt.timedelta(days=30)

    def build(read):
        orders = read(ORDERS).filter(F.col("o_orderdate").between(
            F.lit(start.isoformat()).cast("date"), F.lit(end.isoformat()).cast("date")))
        late = read(LINEITEM).filter(F.col("l_commitdate") < F.col("l_receiptdate"))
        return (late.join(orders, F.col("l_orderkey") == F.col("o_orderkey"))
                .groupBy("o_orderpriority")
                .agg(F.countDistinct("o_orderkey").alias("orders")))
    return f"{start} .. {end}", build, JOIN_CONF


def _lineitem_pricing(rng: random.Random, facts: dict):
    """TPC-H Q1-like pricing summary of the lines shipped up to a date."""
    day = dt.date(1998, 12, 1) - dt.timedelta(days=rng.randint(60, 120))

    def build(read):
        return (read(LINEITEM).filter(F.col("l_shipdate") <= F.lit(day.isoformat()).cast("date"))
                .groupBy("l_returnflag", "l_linestatus")
                .agg(F.sum("l_quantity").alias("qty"), F.sum("l_extendedprice").alias("price"),
                     F.avg("l_discount").alias("disc"), F.count("*").alias("n")))
    return str(day), build, {}


def _events_day(rng: random.Random, facts: dict):
    day = facts["start_date"] + dt.timedelta(days=rng.randrange(facts["days"]))

    def build(read):
        return (read(EVENTS).filter(F.col("event_date") == F.lit(day.isoformat()).cast("date"))
                .groupBy(F.col("user.country").alias("country"), "level")
                .agg(F.count("*").alias("events")))
    return str(day), build, {}


def _explore(source: str) -> Callable:
    def make(rng: random.Random, facts: dict):
        n = rng.randint(5, 50)
        return str(n), (lambda read: read(source).limit(n)), {}
    return make


TEMPLATES: list[Template] = [
    Template("ev_trace_lookup", 1, _trace_lookup, ((EVENTS, "trace_id"),),
             "event log rows of one trace_id (unique, unclustered)"),
    Template("ev_session_lookup", 1, _session_lookup, ((EVENTS, "session_id"),),
             "event log rows of one session_id (clustered: 1-2 files)"),
    Template("ev_user_lookup", 1, _user_lookup, ((EVENTS, "user.id"),),
             "event log rows of one user.id (nested field)"),
    Template("li_partkey_lookup", 1, _partkey_lookup, ((LINEITEM, "l_partkey"),),
             "lineitem rows of one l_partkey"),
    Template("ord_custkey_lookup", 1, _custkey_lookup, ((ORDERS, "o_custkey"),),
             "orders of one o_custkey"),
    Template("ev_ts_window_rows", 2, _ts_window_rows, ((EVENTS, "ts"),),
             "event log rows of a 1-10 minute ts window"),
    Template("ev_ts_window_levels", 2, _ts_window_levels, ((EVENTS, "ts"),),
             "events and sessions per level in a 0.5-4 hour ts window"),
    Template("ev_message_time_text", 2, _message_time_text, ((EVENTS, "message"),),
             "messages holding ten seconds of time text (LIKE '%2026-03-05T10:15:3%')"),
    Template("ev_message_user_text", 2, _message_user_text, ((EVENTS, "message"),),
             "messages of a rare user (LIKE '%user=N action=%')"),
    Template("tpch_join_revenue", 3, _join_revenue,
             ((LINEITEM, "l_orderkey"), (ORDERS, "o_orderkey")),
             "lineitem ⋈ a quarter of orders, revenue per day"),
    Template("tpch_join_priority", 3, _join_priority,
             ((LINEITEM, "l_orderkey"), (ORDERS, "o_orderkey")),
             "late lines ⋈ a month of orders, orders per priority"),
    Template("li_agg_pricing", 3, _lineitem_pricing, ((LINEITEM, "l_shipdate"),),
             "TPC-H Q1-like pricing summary"),
    Template("ev_agg_day", 3, _events_day, ((EVENTS, "event_date"),),
             "one day of events per country and level"),
    Template("explore_events", None, _explore(EVENTS), (), "SELECT * FROM events LIMIT n"),
    Template("explore_lineitem", None, _explore(LINEITEM), (), "SELECT * FROM lineitem LIMIT n"),
    Template("explore_orders", None, _explore(ORDERS), (), "SELECT * FROM orders LIMIT n"),
]
_BY_NAME = {t.name: t for t in TEMPLATES}
PHASES = (1, 2, 3)


def make_queries(facts: dict, total: int, seed: int) -> list[Query]:
    """``total`` queries (a third per phase), each phase's templates in equal numbers in a
    seeded order, about :data:`EXPLORATION_SHARE` of them exploration queries."""
    rng = random.Random(seed)
    explorers = [t for t in TEMPLATES if t.phase is None]
    out: list[Query] = []
    for phase in PHASES:
        n = total // len(PHASES) + (1 if phase <= total % len(PHASES) else 0)
        explore = round(n * EXPLORATION_SHARE)
        hot = [t for t in TEMPLATES if t.phase == phase]
        kinds = [hot[i % len(hot)] for i in range(n - explore)] + \
            [explorers[i % len(explorers)] for i in range(explore)]
        rng.shuffle(kinds)
        for t in kinds:
            literal, build, conf = t.make(rng, facts)
            out.append(Query(len(out), phase, t.name, literal, build, dict(conf)))
    return out


# --- the data -------------------------------------------------------------------------------

def _dir_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs
               if not f.startswith((".", "_")))


def prepare(spark: SparkSession, data_dir: str, scale: float, seed: int) -> dict:
    """Paths, sizes and the values the queries look up (read once from the data, seeded)."""
    from bench import datasets

    tables = datasets.tpch(data_dir, scale)
    events = datasets.eventlog(spark, data_dir, scale)
    paths = {EVENTS: events["path"], LINEITEM: tables["lineitem"], ORDERS: tables["orders"]}
    rng = random.Random(seed * 7919 + 1)
    ids = sorted(rng.sample(range(events["rows"]), min(400, events["rows"])))
    rows = (spark.read.parquet(paths[EVENTS]).filter(F.col("event_id").isin(ids))
            .select("event_id", "trace_id", "session_id", F.col("user.id").alias("uid"))
            .orderBy("event_id").collect())
    samples = [r.asDict() for r in rows]
    users = sorted({s["uid"] for s in samples})
    start = dt.datetime.fromisoformat(events["start_ts"])
    end = dt.datetime.fromisoformat(events["end_ts"])
    start_micros = int(start.timestamp()) * 1_000_000
    return {
        "paths": paths,
        "bytes": {name: _dir_bytes(p) for name, p in paths.items()},
        "events": {k: v for k, v in events.items() if k != "file_bounds"},
        "samples": samples,
        # users with few events (the most frequent ones return 10^4-10^5 rows)
        "lookup_users": [u for u in users if u >= 1000] or users,
        "rare_users": [u for u in users if u >= 20000] or users,
        "parts": max(1, int(200_000 * scale)),
        "customers": max(1, int(150_000 * scale)),
        "start_micros": start_micros,
        "span_micros": int((end - start).total_seconds()) * 1_000_000,
        "start_date": start.date(),
        "days": max(1, (end.date() - start.date()).days),
    }


# --- the oracle's index sets ----------------------------------------------------------------

def oracle_indexes(facts: dict) -> dict[int, list[tuple[str, Any]]]:
    """The hand-declared best index set of each phase: (source, config) pairs, configs as in
    bench/workloads.py."""
    from accelerator import (BloomFilterSketch, DataSkippingIndexConfig, IndexConfig,
                             MinMaxSketch)
    from bench.workloads import LINEITEM_INDEX, MESSAGE_INDEX, generously

    ev = facts["events"]
    return {
        1: [
            (EVENTS, DataSkippingIndexConfig(
                "oracle_events_ids",
                BloomFilterSketch("trace_id", fpp=0.01,
                                  expectedDistinctCountPerFile=generously(ev["max_file_rows"])),
                BloomFilterSketch("session_id", fpp=0.01,
                                  expectedDistinctCountPerFile=generously(
                                      ev["max_file_sessions"])))),
            (EVENTS, IndexConfig("oracle_events_user_id", indexedColumns=["user.id"],
                                 includedColumns=["ts", "event_id", "level", "device.os"])),
            (LINEITEM, LINEITEM_INDEX),
            (ORDERS, IndexConfig("oracle_orders_custkey", indexedColumns=["o_custkey"],
                                 includedColumns=["o_orderkey", "o_orderdate", "o_totalprice"])),
        ],
        2: [
            (EVENTS, MESSAGE_INDEX),
            (EVENTS, DataSkippingIndexConfig("oracle_events_ts", MinMaxSketch("ts"))),
        ],
        3: [
            (LINEITEM, IndexConfig("oracle_lineitem_orderkey", indexedColumns=["l_orderkey"],
                                   includedColumns=["l_extendedprice", "l_commitdate",
                                                    "l_receiptdate"])),
            (ORDERS, IndexConfig("oracle_orders_orderkey", indexedColumns=["o_orderkey"],
                                 includedColumns=["o_orderdate", "o_orderpriority"])),
            (EVENTS, DataSkippingIndexConfig("oracle_events_date", MinMaxSketch("event_date"))),
        ],
    }


# --- running --------------------------------------------------------------------------------

def _canonical(rows: list) -> list:
    from bench.harness import canonical
    return canonical(rows)


def block_order(number: int) -> list[str]:
    """The order of the three runs in block ``number``: :data:`RUNS` rotated by it."""
    shift = number % len(RUNS)
    return [*RUNS[shift:], *RUNS[:shift]]


class Runner:
    """Runs the replay's queries in one session: the three runs (see :meth:`replay`), each
    query's rows checked against vanilla's."""

    def __init__(self, spark: SparkSession, facts: dict, queries: list[Query], work_dir: str):
        self.spark = spark
        self.facts = facts
        self.queries = queries
        self.work_dir = work_dir
        self.rows: dict[int, int] = {}   # vanilla's row count of each query
        #: (run, query index) -> (canonical rows, error, row count), until the block's compared
        self.answers: dict[tuple[str, int], tuple[list, str | None, int]] = {}
        self.mismatches: list[dict] = []
        self.paths: dict[str, str] = {}

    def read(self, source: str) -> DataFrame:
        return self.spark.read.parquet(self.facts["paths"][source])

    def _system_path(self, run: str) -> str:
        """A fresh (emptied) system path for ``run``."""
        path = os.path.join(self.work_dir, run)
        shutil.rmtree(path, ignore_errors=True)
        return path

    def _one(self, q: Query, run: str) -> dict:
        from accelerator.query.session import conf_set

        started = time.time()
        t0 = time.perf_counter()
        error = None
        rows: list = []
        try:
            with conf_set(self.spark, q.conf):
                rows = q.build(self.read).collect()
        except Exception as exc:  # noqa: BLE001 - reported as a failed query
            if run == "vanilla":
                raise
            error = f"{type(exc).__name__}: {str(exc)[:500]}"
        seconds = time.perf_counter() - t0
        if run == "vanilla":
            self.rows[q.index] = len(rows)
        self.answers[run, q.index] = (_canonical(rows), error, len(rows))
        return {"seconds": seconds, "started": started, "ended": time.time()}

    def _compare(self, block: list[Query]) -> None:
        """Compares the block's answers of the engine and the oracle with vanilla's (once all
        three ran it), recording each that differs, then forgets them."""
        for q in block:
            expected, _, vanilla_rows = self.answers.pop(("vanilla", q.index))
            for run in ("engine", "oracle"):
                rows, error, count = self.answers.pop((run, q.index))
                if error is None and rows == expected:
                    continue
                self.mismatches.append({
                    "run": run, "query": q.index, "template": q.template, "literal": q.literal,
                    "error": error, "rows": count, "vanilla_rows": vanilla_rows})
                log.error("%s query %d (%s %s) differs from vanilla: %s", run, q.index,
                          q.template, q.literal, error or f"{count} rows vs {vanilla_rows}")

    def warm_up(self, rounds: int) -> None:
        """One query of each template per round, vanilla, untimed (JIT, file system cache)."""
        from accelerator import Hyperspace
        from accelerator.query.session import conf_set

        Hyperspace.disable(self.spark)
        rng = random.Random(1)
        for _ in range(rounds):
            for t in TEMPLATES:
                _, build, conf = t.make(rng, self.facts)
                with conf_set(self.spark, conf):
                    build(self.read).collect()

    def _use(self, run: str) -> None:
        """Points the session at ``run``'s system path (the rewrite's index lists and the
        history are kept per system path)."""
        self.spark.conf.set("spark.accelerator.system.path", self.paths[run])

    def replay(self, every: int, budget: int) -> tuple[dict, dict, dict]:
        """The three runs, interleaved by blocks of ``every`` queries (the engine's advising
        interval) so that they share the machine's load over time, the order of the runs
        rotating from one block to the next (vanilla, engine, oracle; then engine, oracle,
        vanilla; ...), so that none always runs right after another (a fixed order made the
        oracle's queries ~6% faster than the engine's with the same index). The engine mines,
        advises and applies at the end of its block; the oracle first builds a phase's index
        set when its block starts a phase. Each run has its own system path; a run's state
        (indexes, history) carries over from one of its blocks to the next."""
        from accelerator import Hyperspace
        from accelerator.query.session import conf_set

        self.paths = {run: self._system_path(run) for run in RUNS}
        hs_engine = Hyperspace(self.spark)
        hs_oracle = Hyperspace(self.spark)
        sets = oracle_indexes(self.facts)
        times: dict[str, list[dict]] = {run: [] for run in RUNS}
        rounds: list[dict] = []
        engine_wall = 0.0
        oracle_phases: dict[int, dict] = {}
        oracle_built: list[str] = []
        oracle_phase = None
        engine_conf = {"spark.accelerator.rules.budget.indexBytes": str(budget)}

        def vanilla(block: list[Query]) -> None:
            Hyperspace.disable(self.spark)
            for q in block:
                times["vanilla"].append(self._one(q, "vanilla"))
                _progress("vanilla", q, times["vanilla"][-1])

        def engine(block: list[Query]) -> None:
            nonlocal engine_wall
            with conf_set(self.spark, engine_conf):
                Hyperspace.enable(self.spark)
                t0 = time.perf_counter()
                for q in block:
                    times["engine"].append(self._one(q, "engine"))
                    _progress("engine", q, times["engine"][-1])
                done = block[-1].index + 1
                if done % every == 0 and done < len(self.queries):
                    rounds.append(self._advise(hs_engine, done))
                engine_wall += time.perf_counter() - t0
                Hyperspace.disable(self.spark)

        def oracle(block: list[Query]) -> None:
            nonlocal oracle_phase, oracle_built
            Hyperspace.enable(self.spark)
            for q in block:
                if q.phase != oracle_phase:
                    oracle_phase = q.phase
                    Hyperspace.disable(self.spark)   # builds read the sources themselves
                    oracle_phases[q.phase] = self._oracle_phase(hs_oracle, oracle_built,
                                                                sets[q.phase])
                    oracle_built = [b["name"] for b in oracle_phases[q.phase]["indexes"]]
                    Hyperspace.enable(self.spark)
                times["oracle"].append(self._one(q, "oracle"))
                _progress("oracle", q, times["oracle"][-1])
            Hyperspace.disable(self.spark)

        runners = {"vanilla": vanilla, "engine": engine, "oracle": oracle}
        blocks = [self.queries[i:i + every] for i in range(0, len(self.queries), every)]
        for number, block in enumerate(blocks):
            for run in block_order(number):
                self._use(run)
                runners[run](block)
            self._compare(block)

        self._use("engine")
        engine_history = _history(hs_engine)
        self._use("oracle")
        oracle_history = _history(hs_oracle)
        self._use("vanilla")
        return ({"queries": times["vanilla"]},
                {"queries": times["engine"], "rounds": rounds, "wall_s": engine_wall,
                 "system_path": self.paths["engine"], "history": engine_history},
                {"queries": times["oracle"], "phases": oracle_phases,
                 "system_path": self.paths["oracle"], "history": oracle_history})

    def _oracle_phase(self, hs: Any, previous: list[str], configs: list[tuple[str, Any]]) -> dict:
        """Drops the previous phase's indexes and builds this phase's (timed)."""
        t0 = time.perf_counter()
        for name in previous:
            hs.deleteIndex(name)
            hs.vacuumIndex(name)
        drop_s = time.perf_counter() - t0
        builds = []
        for source, config in configs:
            t1 = time.perf_counter()
            hs.createIndex(self.read(source), config)
            seconds = time.perf_counter() - t1
            size = hs.index(config.indexName).first()["sizeInBytes"]
            builds.append({"name": config.indexName, "source": source, "build_s": seconds,
                           "bytes": size})
            log.info("oracle: built %s in %.1f s (%d bytes)", config.indexName, seconds,
                     size or 0)
        return {"drop_s": drop_s, "indexes": builds, "build_s": sum(b["build_s"] for b in builds)}

    def _advise(self, hs: Any, done: int) -> dict:
        from accelerator import Hyperspace

        t0 = time.perf_counter()
        flushed = Hyperspace.flushHistory(self.spark)
        recs = hs.recommend()
        rec_rows = [r.asDict(recursive=True) for r in recs.collect()]
        advise_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        error = None
        applied_rows: list[dict] = []
        try:
            applied_rows = [r.asDict(recursive=True) for r in hs.applyRecommendations(recs)
                            .collect()]
        except Exception as exc:  # noqa: BLE001 - reported
            error = f"{type(exc).__name__}: {exc}"
            log.error("applyRecommendations failed after query %d: %s", done, error)
        build_s = time.perf_counter() - t1
        indexes = [r.asDict(recursive=True) for r in hs.indexes().collect()]
        engine_indexes = [{"name": i["name"], "kind": i["kind"], "state": i["state"],
                           "indexedColumns": i["indexedColumns"],
                           "includedColumns": i["includedColumns"],
                           "numBuckets": i["numBuckets"], "sizeInBytes": i["sizeInBytes"]}
                          for i in indexes if i["createdBy"] == "engine"]
        instructions = []
        for k, rec in enumerate(rec_rows):
            applied = applied_rows[k] if k < len(applied_rows) else {}
            instructions.append({**rec, "status": applied.get("status"),
                                 "message": applied.get("message"),
                                 "apply_s": applied.get("seconds")})
        log.info("engine after query %d: %d recorded, %d instructions (%s), advise %.1f s, "
                 "apply %.1f s", done, flushed, len(rec_rows),
                 ", ".join(f"{i['action']} {i['kind']} {i['columns']}: {i['status']}"
                           for i in instructions), advise_s, build_s)
        return {"after_query": done, "flushed": flushed, "advise_s": advise_s,
                "build_s": build_s, "error": error, "instructions": instructions,
                "engine_indexes": engine_indexes,
                "engine_index_bytes": sum(i["sizeInBytes"] or 0 for i in engine_indexes
                                          if i["state"] == "ACTIVE")}


def _progress(run: str, q: Query, t: dict) -> None:
    if (q.index + 1) % 25 == 0:
        log.info("%s: query %d (%s) %.2f s", run, q.index + 1, q.template, t["seconds"])


def _history(hs: Any) -> list[tuple[float, list[str]]]:
    """(epoch seconds, indexes applied) of each recorded query of the run, to tell which
    indexes each replayed query used. The time is the execution's start (a record's timestamp
    is its execution's end, which Spark may report after the query's rows reached Python;
    the planning-time records of plans not executed keep their planning time)."""
    from accelerator import Hyperspace

    Hyperspace.flushHistory(hs.spark)
    rows = hs.history().select("timestamp", "duration_ms", "indexes_applied").collect()
    return sorted((r["timestamp"].timestamp() - (r["duration_ms"] or 0) / 1000.0,
                   list(r["indexes_applied"] or [])) for r in rows)


def _used(history: list[tuple[float, list[str]]], started: float, ended: float) -> list[str]:
    found: set[str] = set()
    for ts, names in history:
        if started <= ts <= ended:
            found.update(names)
    return sorted(found)


# --- the report -----------------------------------------------------------------------------

def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _scheme_less(path: str) -> str:
    for prefix in ("file://", "file:"):
        if path.startswith(prefix):
            path = path[len(prefix):]
            break
    return os.path.normpath(path)


def _served_templates(instruction: dict, facts: dict) -> list[str]:
    """The replay's templates an instruction's index (or cache) would serve: those filtering,
    joining or grouping on its (first) column of its source."""
    source = _scheme_less(instruction["source"] or "")
    names = {n for n, p in facts["paths"].items() if _scheme_less(p) == source}
    columns = set(instruction["columns"] or [])
    return [t.name for t in TEMPLATES
            if any(s in names and c in columns for s, c in t.serves)]


def share_by_phase(per_query: list[dict], rounds: list[int]) -> dict:
    """Per phase, the seconds of each run and the engine's share of the oracle's saving over
    all its queries, over those before the engine's first advising round inside the phase
    (the engine has not seen the phase's columns yet: its lag) and over those after it (what
    its choices are worth once made); then the same over all phases, with ``reachable_share``:
    the part of the oracle's saving that falls after those first rounds, the most an engine
    acting only at its rounds can save when a phase's indexes serve no other phase.
    ``per_query``: the rows of the report's ``per_query``; ``rounds``: the ``after_query`` of
    each advising round."""
    def share(rows: list[dict]) -> dict:
        v, e, o = (sum(q[f"{run}_s"] for q in rows) for run in ("vanilla", "engine", "oracle"))
        return {"queries": len(rows), "vanilla_s": v, "engine_s": e, "oracle_s": o,
                "engine_share_of_oracle_saving": (v - e) / (v - o) if v > o else None}

    out: dict = {}
    before_all: list[dict] = []
    after_all: list[dict] = []
    for phase in sorted({q["phase"] for q in per_query}):
        rows = [q for q in per_query if q["phase"] == phase]
        lo, hi = min(q["index"] for q in rows), max(q["index"] for q in rows) + 1
        first = min((r for r in rounds if lo < r < hi), default=hi)
        before = [q for q in rows if q["index"] < first]
        after = [q for q in rows if q["index"] >= first]
        before_all += before
        after_all += after
        out[str(phase)] = {"first_round_after_query": first if first < hi else None,
                           "all": share(rows), "before_first_round": share(before),
                           "after_first_round": share(after)}
    out["all"] = {"all": share(per_query), "before_first_round": share(before_all),
                  "after_first_round": share(after_all)}
    whole, later = out["all"]["all"], out["all"]["after_first_round"]
    oracle_saving = whole["vanilla_s"] - whole["oracle_s"]
    out["all"]["reachable_share"] = (later["vanilla_s"] - later["oracle_s"]) / oracle_saving \
        if oracle_saving > 0 else None
    return out


def report(args: argparse.Namespace, facts: dict, queries: list[Query], runner: Runner,
           vanilla: dict, engine: dict, oracle: dict, budget: int, spark_version: str) -> dict:
    runs = {"vanilla": vanilla, "engine": engine, "oracle": oracle}
    secs = {run: [t["seconds"] for t in r["queries"]] for run, r in runs.items()}
    totals = {run: sum(s) for run, s in secs.items()}
    per_phase = {run: {str(p): sum(s for q, s in zip(queries, secs[run]) if q.phase == p)
                       for p in PHASES} for run in runs}
    saved = {run: totals["vanilla"] - totals[run] for run in ("engine", "oracle")}
    share = saved["engine"] / saved["oracle"] if saved["oracle"] > 0 else None
    saved_phase = {run: {p: per_phase["vanilla"][p] - per_phase[run][p] for p in per_phase[run]}
                   for run in ("engine", "oracle")}

    used = {run: [_used(r["history"], t["started"], t["ended"]) for t in r["queries"]]
            for run, r in runs.items() if "history" in r}

    templates = []
    for t in TEMPLATES:
        idx = [q.index for q in queries if q.template == t.name]
        if not idx:
            continue
        med = {run: _median([secs[run][i] for i in idx]) for run in runs}
        ratio = _ratio(med["engine"], med["vanilla"])
        templates.append({
            "template": t.name, "phase": t.phase, "description": t.description,
            "queries": len(idx), "median_s": med,
            "ratio_engine_over_vanilla": ratio,
            "ratio_oracle_over_vanilla": _ratio(med["oracle"], med["vanilla"]),
            "over_target": ratio is not None and ratio > TARGET_MAX_TEMPLATE_RATIO,
            "indexes_used": {run: sorted({n for i in idx for n in u[i]})
                             for run, u in used.items()},
        })

    # queries no index serves (exploration): their engine/vanilla ratio is what running later
    # in the process (JIT, caches, the machine's load) does to a query, not what the engine did
    controls = [q.index for q in queries if _BY_NAME[q.template].phase is None]
    control = {"queries": len(controls),
               "ratio_engine_over_vanilla": _ratio(_median([secs["engine"][i] for i in controls]),
                                                   _median([secs["vanilla"][i] for i in controls])),
               "ratio_oracle_over_vanilla": _ratio(_median([secs["oracle"][i] for i in controls]),
                                                   _median([secs["vanilla"][i] for i in controls]))}

    advise_s = sum(r["advise_s"] for r in engine["rounds"])
    build_s = sum(r["build_s"] for r in engine["rounds"])
    engine_wall = engine["wall_s"]

    instructions = []
    for r in engine["rounds"]:
        done = r["after_query"]
        for ins in r["instructions"]:
            entry = {"after_query": done, **{k: ins.get(k) for k in (
                "action", "kind", "source", "columns", "includedColumns", "name", "score",
                "estimatedSecondsSaved", "estimatedBytes", "queries", "reason", "status",
                "message", "apply_s")}}
            if ins["action"] in ("create", "cache") and ins.get("status") == "applied":
                served = _served_templates(ins, facts)
                after = [q for q in queries if q.index >= done and q.template in served]
                measured = 0.0
                per_template = {}
                for name in served:
                    idx = [q.index for q in after if q.template == name]
                    if not idx:
                        continue
                    v = statistics.median(secs["vanilla"][i] for i in idx)
                    e = statistics.median(secs["engine"][i] for i in idx)
                    per_template[name] = {"queries": len(idx), "vanilla_median_s": v,
                                          "engine_median_s": e, "saved_s": (v - e) * len(idx)}
                    measured += (v - e) * len(idx)
                entry.update({
                    "templates_served": served, "queries_after": len(after),
                    "predicted_saving_s": (ins.get("estimatedSecondsSaved") or 0.0) * len(after),
                    "measured_saving_s": measured,
                    "measured_paired_saving_s": sum(secs["vanilla"][q.index]
                                                    - secs["engine"][q.index] for q in after),
                    "per_template": per_template,
                    "used_by_queries_after": sum(1 for q in after
                                                 if ins.get("name") in used["engine"][q.index]),
                })
            instructions.append(entry)

    final_engine = engine["rounds"][-1]["engine_indexes"] if engine["rounds"] else []
    final_bytes = engine["rounds"][-1]["engine_index_bytes"] if engine["rounds"] else 0
    max_bytes = max((r["engine_index_bytes"] for r in engine["rounds"]), default=0)

    per_query = [{"index": q.index, "phase": q.phase, "template": q.template,
                  "literal": q.literal, "rows": runner.rows.get(q.index),
                  **{f"{run}_s": round(secs[run][q.index], 4) for run in runs},
                  **{f"{run}_indexes": used[run][q.index] for run in used}}
                 for q in queries]
    by_phase = share_by_phase(per_query, [r["after_query"] for r in engine["rounds"]])
    return {
        "benchmark": "replay",
        "scale": args.scale, "queries": len(queries), "every": args.every, "seed": args.seed,
        "machine": {"cores": os.cpu_count(), "master": "local[2]"}, "spark": spark_version,
        "sources": {n: {"path": facts["paths"][n], "bytes": facts["bytes"][n]}
                    for n in facts["paths"]},
        "budget_index_bytes": budget,
        "runs": {run: {"total_query_s": totals[run], "phase_s": per_phase[run]} for run in runs},
        "saved_s": saved,
        "saved_phase_s": saved_phase,
        "engine_share_of_oracle_saving": {"value": share, "target": TARGET_SHARE_OF_ORACLE,
                                          "met": share is not None
                                          and share >= TARGET_SHARE_OF_ORACLE},
        "engine_share_by_phase": by_phase,
        "templates": templates,
        "templates_over_target": [t["template"] for t in templates if t["over_target"]],
        "control_exploration": control,
        "budget": {"index_bytes": budget, "engine_index_bytes_final": final_bytes,
                   "engine_index_bytes_max": max_bytes,
                   "respected": max_bytes <= budget, "engine_indexes_final": final_engine,
                   "per_round": [{"after_query": r["after_query"],
                                  "engine_index_bytes": r["engine_index_bytes"]}
                                 for r in engine["rounds"]]},
        "engine_overhead": {
            "advise_s": advise_s, "build_s": build_s, "query_s": totals["engine"],
            "wall_s": engine_wall, "share_of_wall": advise_s / engine_wall if engine_wall else None,
            "share_of_query_s": advise_s / totals["engine"] if totals["engine"] else None,
            "target": TARGET_MAX_OVERHEAD,
            "met": engine_wall > 0 and advise_s / engine_wall < TARGET_MAX_OVERHEAD,
            "rounds": [{k: r[k] for k in ("after_query", "flushed", "advise_s", "build_s",
                                          "error")} for r in engine["rounds"]]},
        "oracle_builds": {str(p): v for p, v in oracle["phases"].items()},
        "oracle_build_s": sum(v["build_s"] for v in oracle["phases"].values()),
        "instructions": instructions,
        "identical": not runner.mismatches,
        "mismatches": runner.mismatches,
        "per_query": per_query,
    }


def _fmt(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def table(rep: dict) -> str:
    lines = []
    runs = rep["runs"]
    head = f"{'run':8} {'total s':>9} " + " ".join(f"{'phase ' + p + ' s':>10}" for p in
                                                     ("1", "2", "3")) + f" {'saved s':>9}"
    lines += [head, "-" * len(head)]
    for run, r in runs.items():
        saved = rep["saved_s"].get(run)
        lines.append(f"{run:8} {r['total_query_s']:9.1f} "
                     + " ".join(f"{r['phase_s'][p]:10.1f}" for p in ("1", "2", "3"))
                     + f" {_fmt(saved, '9.1f') if saved is not None else '-':>9}")
    s = rep["engine_share_of_oracle_saving"]
    o = rep["engine_overhead"]
    lines += ["", f"{'engine share of the oracle saving':34} {'all':>6} {'before 1st round':>17} "
                  f"{'after it':>9}"]
    for phase, d in rep["engine_share_by_phase"].items():
        lines.append(f"{'phase ' + phase if phase != 'all' else 'all phases':34} "
                     f"{_fmt(d['all']['engine_share_of_oracle_saving']):>6} "
                     f"{_fmt(d['before_first_round']['engine_share_of_oracle_saving']):>17} "
                     f"{_fmt(d['after_first_round']['engine_share_of_oracle_saving']):>9}")
    b = rep["budget"]
    lines += ["",
              f"engine share of the oracle's saving: {_fmt(s['value'])} (target >= "
              f"{s['target']}: {'met' if s['met'] else 'NOT met'}; the oracle's saving after "
              f"the engine's first round in each phase: "
              f"{_fmt(rep['engine_share_by_phase']['all']['reachable_share'])} of it)",
              f"engine mining+advising {o['advise_s']:.1f} s, building {o['build_s']:.1f} s, "
              f"queries {o['query_s']:.1f} s; advising share of the run {_fmt(o['share_of_wall'], '.1%')} "
              f"(target < {o['target']:.0%}: {'met' if o['met'] else 'NOT met'})",
              f"oracle builds {rep['oracle_build_s']:.1f} s",
              f"control (exploration queries, no index serves them) engine/vanilla "
              f"{_fmt(rep['control_exploration']['ratio_engine_over_vanilla'])}, oracle/vanilla "
              f"{_fmt(rep['control_exploration']['ratio_oracle_over_vanilla'])}",
              f"engine index bytes: final {b['engine_index_bytes_final'] / 1e6:.1f} MB, max "
              f"{b['engine_index_bytes_max'] / 1e6:.1f} MB, budget {b['index_bytes'] / 1e6:.1f} MB "
              f"({'respected' if b['respected'] else 'EXCEEDED'})",
              ""]
    head = (f"{'template':24} {'ph':>2} {'n':>3} {'vanilla':>8} {'engine':>8} {'oracle':>8} "
            f"{'e/v':>6} {'o/v':>6}  engine indexes used")
    lines += [head, "-" * len(head)]
    for t in rep["templates"]:
        m = t["median_s"]
        flag = " !" if t["over_target"] else ""
        lines.append(f"{t['template']:24} {str(t['phase'] or '*'):>2} {t['queries']:3d} "
                     f"{_fmt(m['vanilla'], '8.3f')} {_fmt(m['engine'], '8.3f')} "
                     f"{_fmt(m['oracle'], '8.3f')} {_fmt(t['ratio_engine_over_vanilla'], '6.2f')}"
                     f"{flag:2}{_fmt(t['ratio_oracle_over_vanilla'], '6.2f')}  "
                     f"{', '.join(t['indexes_used'].get('engine', [])) or '-'}")
    lines += ["", f"{'after':>5} {'instruction':52} {'status':8} {'est/q s':>7} {'n after':>7} "
                  f"{'predicted':>9} {'measured':>9} {'used by':>7}"]
    for i in rep["instructions"]:
        what = f"{i['action']} {i['kind']} {','.join(i['columns'] or [])} ({os.path.basename(i['source'] or '')})"
        lines.append(f"{i['after_query']:5d} {what[:52]:52} {str(i['status']):8} "
                     f"{_fmt(i.get('estimatedSecondsSaved'), '7.3f')} "
                     f"{str(i.get('queries_after', '-')):>7} "
                     f"{_fmt(i.get('predicted_saving_s'), '9.1f')} "
                     f"{_fmt(i.get('measured_saving_s'), '9.1f')} "
                     f"{str(i.get('used_by_queries_after', '-')):>7}")
    lines.append("")
    lines.append(f"results identical to vanilla: {rep['identical']}")
    return "\n".join(lines)


# --- the command ----------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    from bench.harness import add_output_arguments

    parser.add_argument("--scale", type=float, default=1.0,
                        help="TPC-H scale factor; event log: 5M rows per unit")
    parser.add_argument("--queries", type=int, default=300, help="queries replayed (3 phases)")
    parser.add_argument("--every", type=int, default=50,
                        help="the engine mines, advises and applies every this many queries")
    parser.add_argument("--seed", type=int, default=11, help="seed of the queries' literals")
    parser.add_argument("--warmups", type=int, default=3,
                        help="untimed vanilla rounds of one query per template first")
    add_output_arguments(parser, "/tmp/accelerator-replay",
                         "system paths of the three runs (wiped)")
    parser.add_argument("--buckets", default="auto",
                        help="spark.accelerator.index.numBuckets (the engine's covering indexes)")


def run(args: argparse.Namespace) -> int:
    from bench.harness import claim_work_dir, make_spark, publish

    claim_work_dir(args.work_dir)
    spark = make_spark(args.work_dir, args.buckets, {"spark.sql.session.timeZone": TIME_ZONE})
    t0 = time.perf_counter()
    facts = prepare(spark, args.data_dir, args.scale, args.seed)
    queries = make_queries(facts, args.queries, args.seed)
    budget = int(BUDGET_SHARE * sum(facts["bytes"].values()))
    log.info("%d queries; sources %s; engine index budget %d bytes", len(queries),
             facts["bytes"], budget)
    runner = Runner(spark, facts, queries, args.work_dir)
    runner.warm_up(args.warmups)
    vanilla, engine, oracle = runner.replay(args.every, budget)
    rep = report(args, facts, queries, runner, vanilla, engine, oracle, budget, spark.version)
    rep["wall_s"] = time.perf_counter() - t0
    spark.stop()
    publish(rep, table(rep), args.out)
    if runner.mismatches:
        print(f"\nFAILED: {len(runner.mismatches)} queries differ from vanilla Spark (or failed)",
              file=sys.stderr)
        for m in runner.mismatches:
            print(f"  {m}", file=sys.stderr)
        return 1
    return 0
