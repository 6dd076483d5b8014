"""Runs workloads with vanilla Spark and with the accelerator in one SparkSession, alternating,
and reports medians, ratios, bytes read, index build cost and whether results were identical."""
from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import statistics
import sys
import time
import uuid
from typing import Any, Callable

from pyspark.sql import DataFrame, SparkSession

from accelerator import Hyperspace, IndexNotFoundError
from accelerator.api.explain import CACHE, why_not
from accelerator.query.session import conf_set
from bench.driver_memory import DriverMemory, peaks
from bench.stage_cpu import StageCpu
from bench.workloads import (SHUFFLE_PARTITIONS, BuildCost, CachePlanningCost, CacheWarmupCost,
                             Context, PruningCost, Workload, read_parquet)

log = logging.getLogger("bench.harness")

#: Parquet's vectored reads (see ``scan_stats``), a Hadoop setting Spark takes from the session.
VECTORED_IO = "parquet.hadoop.vectored.io.enabled"


#: locks of the work directories this process holds (kept open: a lock lasts as long as its file)
_CLAIMED: list = []


def claim_work_dir(work_dir: str) -> None:
    """Wipes and recreates ``work_dir`` for this run, first taking an exclusive lock on
    ``<work_dir>.lock``; exits with a message, wiping nothing, while another live run holds it
    (two runs sharing a work directory delete each other's indexes and measure nothing)."""
    lock = open(work_dir.rstrip("/") + ".lock", "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise SystemExit(f"{work_dir} is in use by another benchmark run; wait for it to end "
                         "or give this one another --work-dir") from None
    _CLAIMED.append(lock)
    shutil.rmtree(work_dir, ignore_errors=True)
    os.makedirs(work_dir)


#: where generated benchmark data is cached between runs (``--data-dir``)
DATA_DIR = os.path.expanduser("~/.cache/spark-accelerator/bench-data")


def add_output_arguments(parser: Any, work_dir: str, work_help: str) -> None:
    """The options a benchmark subcommand shares: ``--out`` (the JSON report), ``--data-dir``
    (generated data, cached) and ``--work-dir`` (``work_help``; default ``work_dir``)."""
    parser.add_argument("--out", help="write the JSON report here")
    parser.add_argument("--data-dir", default=DATA_DIR, help="where generated data is cached")
    parser.add_argument("--work-dir", default=work_dir, help=work_help)


def make_spark(work_dir: str, buckets: str, extra: dict[str, str] | None = None) -> SparkSession:
    """The benchmark session: local[2], indexes under ``<work_dir>/indexes``; Python workers
    (index builds run Python on executors) use this interpreter, not whatever ``python3`` is
    on the PATH."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)   # read when the context starts
    builder = (SparkSession.builder.master("local[2]").appName("accelerator-bench")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", "8g")
               .config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
               .config("spark.accelerator.system.path", os.path.join(work_dir, "indexes"))
               .config("spark.accelerator.index.numBuckets", str(buckets)))
    for key, value in (extra or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def publish(report: dict, table: str, out: str | None) -> None:
    """Prints ``report`` as JSON, then ``table``; writes the JSON to ``out`` too (when set)."""
    text = json.dumps(report, indent=2, default=str)
    print(text)
    print()
    print(table)
    if out:
        with open(out, "w") as f:
            f.write(text)


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _stats(xs: list[float]) -> dict | None:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "runs": xs} if xs else None


def forget_compiled_code(spark: SparkSession) -> None:
    """Empties Spark's cache of compiled generated code (``CodeGenerator``'s private
    ``cache``, through reflection; a benchmark's own tool), so the next query compiles its
    whole-stage code as a new query does. Vanilla and accelerated runs of one query generate
    the same code (the rewrite changes which files a scan reads, not its code), so without
    this the side that runs second in a pair reuses what the first compiled: 60-130 ms of a
    0.5-1 s star template (measured 2026-11-30), which odd numbers of alternating pairs
    charge to one side more often than to the other."""
    module = getattr(spark._jvm,
                     "org.apache.spark.sql.catalyst.expressions.codegen.CodeGenerator$")
    holder = getattr(module, "MODULE$")
    field = holder.getClass().getDeclaredField("cache")
    field.setAccessible(True)
    field.get(holder).invalidateAll()


def canonical(rows: list) -> list:
    """Rows in a comparable order (repr keeps NaN equal to NaN and -0.0 apart from 0.0)."""
    return sorted((tuple(r) for r in rows), key=repr)


def _dir_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def scan_stats(spark: SparkSession, df: DataFrame) -> dict:
    """Runs ``df`` once and reports what it read: files its scans selected (before bucket
    pruning) and bytes its tasks actually read (stage input metrics).

    Parquet's vectored reads (on by default) run on other threads, whose bytes the task input
    metrics miss (a full scan of the event log showed 0.5 MB instead of 480 MB), so this one run
    reads without them; the timed runs keep Spark's defaults."""
    sc = spark.sparkContext
    group = f"bench-{uuid.uuid4().hex}"
    sc.setJobGroup(group, "bench scan stats")
    previous = spark.conf.get(VECTORED_IO, None)
    spark.conf.set(VECTORED_IO, "false")
    try:
        df.collect()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
        if previous is None:
            spark.conf.unset(VECTORED_IO)
        else:
            spark.conf.set(VECTORED_IO, previous)
    store = _status_store(spark)
    read = _input_bytes(store, [job for job in _jobs(store).values()
                                if job.jobGroup().isDefined() and job.jobGroup().get() == group])
    return {"files": _scan_files(df), "bytes_read": read}


def job_work(spark: SparkSession, run: Callable[[], Any]) -> dict:
    """Runs ``run()`` without Parquet's vectored reads (see :func:`scan_stats`) and reports
    the Spark jobs the application started meanwhile and the bytes their stages' tasks read:
    every job, those a rewrite runs while planning (other threads) included, so nothing else
    may use the application meanwhile. Neither depends on the machine's load."""
    previous = spark.conf.get(VECTORED_IO, None)
    store = _status_store(spark)
    before = set(_jobs(store))
    spark.conf.set(VECTORED_IO, "false")
    try:
        run()
    finally:
        if previous is None:
            spark.conf.unset(VECTORED_IO)
        else:
            spark.conf.set(VECTORED_IO, previous)
    store = _status_store(spark)
    new = [job for i, job in _jobs(store).items() if i not in before]
    return {"jobs": len(new), "bytes_read": _input_bytes(store, new)}


def _status_store(spark: SparkSession) -> Any:
    """The application's status store, once the listener bus (which fills it) is drained."""
    jsc = spark.sparkContext._jsc.sc()
    jsc.listenerBus().waitUntilEmpty()
    return jsc.statusStore()


def _jobs(store: Any) -> dict[int, Any]:
    jobs = store.jobsList(None)
    return {int(jobs.apply(i).jobId()): jobs.apply(i) for i in range(jobs.size())}


def _input_bytes(store: Any, jobs: list) -> int:
    """Bytes the tasks of the stages of ``jobs`` read (their last attempts)."""
    read = 0
    for job in jobs:
        ids = job.stageIds()
        for j in range(ids.size()):
            try:
                read += int(store.lastStageAttempt(ids.apply(j)).inputBytes())
            except Exception:  # noqa: BLE001 - a stage the store does not hold read nothing
                log.debug("stage %s of a job is not in the status store", ids.apply(j))
    return read


def _scan_files(df: DataFrame) -> int:
    """Files read by the file scans of ``df``'s executed plan (inside adaptive stages too): for
    a file source scan, the files its read partitions hold, so after bucket pruning, which
    Spark also applies where it reads a bucketed relation unbucketed (its ``numFiles`` metric
    counts the files before that pruning, and stays at 0 in bucketed scans); for other scans,
    their ``numFiles`` metric."""
    return sum(len(files) if files is not None else count for files, count in file_scans(df))


def file_scans(df: DataFrame) -> list[tuple[dict[str, int] | None, int]]:
    """Per scan of ``df``'s executed plan (inside adaptive stages too): for a file source
    scan, the size of each file its read partitions hold, by path (after bucket and file
    pruning); for another scan, None and its ``numFiles`` metric (0 without one)."""
    found: list[tuple[dict[str, int] | None, int]] = []

    def walk(node: Any) -> None:
        kind = node.getClass().getSimpleName()
        if kind == "AdaptiveSparkPlanExec":
            return walk(node.executedPlan())
        if kind.endswith("QueryStageExec"):
            return walk(node.plan())
        if kind == "FileSourceScanExec":
            files = {str(f.filePath()): int(f.fileSize()) for p in node.inputRDD().partitions()
                     for f in p.files()}
            found.append((files, len(files)))
        else:
            metric = node.metrics().get("numFiles")
            if metric.isDefined():
                found.append((None, int(metric.get().value())))
        children = node.children()
        for i in range(children.size()):
            walk(children.apply(i))

    walk(df._jdf.queryExecution().executedPlan())
    return found


def parquet_column_bytes(path: str, column: list[str]) -> int:
    """Compressed bytes of one (possibly nested) column in the Parquet footers under ``path``."""
    import pyarrow.parquet as pq

    dotted = ".".join(column)
    total = 0
    for d, _, names in os.walk(path):
        for name in names:
            if name.endswith(".parquet"):
                meta = pq.ParquetFile(os.path.join(d, name)).metadata
                total += sum(meta.row_group(g).column(c).total_compressed_size
                             for g in range(meta.num_row_groups)
                             for c in range(meta.num_columns)
                             if meta.row_group(g).column(c).path_in_schema == dotted)
    return total


def shuffles(df: DataFrame) -> int:
    """Hash-partitioning shuffles in the physical plan of ``df`` (as planned, before it runs)."""
    return df._jdf.queryExecution().executedPlan().toString().count("Exchange hashpartitioning")


def _build_facts(hs: Hyperspace, name: str, source: str, seconds: float | None = None) -> dict:
    """Size of an index and, for a data-skipping index, how its sketches were computed; for a
    text index, the text it indexed, that text per second of ``seconds`` (the build), and the
    index size over the text and over the column's compressed Parquet bytes in ``source``."""
    entry = hs.context.lifecycle().get(name)
    out = {"bytes": hs.index(name).first()["sizeInBytes"]}
    content = entry.content
    for key in ("footerSketches", "scannedSketches"):
        if key in content:
            out[key] = content[key]
    if "textBytes" in content:
        column = parquet_column_bytes(source, entry.config["path"])
        out.update({"text_bytes": content["textBytes"], "column_parquet_bytes": column,
                    "bytes_over_text": out["bytes"] / max(1, content["textBytes"]),
                    "bytes_over_column": out["bytes"] / max(1, column)})
        if seconds:
            out["text_mb_per_s"] = content["textBytes"] / 1e6 / seconds
    return out


def _ensure_index(hs: Hyperspace, spark: SparkSession, path: str, config: Any,
                  built: dict[str, str], source: DataFrame | None = None) -> dict:
    """Builds the index over ``source`` (default: the Parquet files at ``path``) unless this run
    built it already; its build seconds and size.

    Workloads share an index by declaring the same config (same name, sketches or columns, same
    source): it is built once per run. ``built`` maps the names built so far to what was built;
    the same name declared with another config or source is an error, never a silent reuse."""
    signature = f"{config!r} over {path}"
    previous = built.get(config.indexName)
    if previous is not None and previous != signature:
        raise ValueError(f"index '{config.indexName}' is declared twice with different configs: "
                         f"{previous} and {signature}; give one of them another name")
    built[config.indexName] = signature
    if previous is None:
        try:
            hs.index(config.indexName)   # in the system path already (not built by this run)
        except IndexNotFoundError:
            df = spark.read.parquet(path) if source is None else source
            seconds, _ = _timed(lambda: hs.createIndex(df, config))
            return {"name": config.indexName, "build_s": seconds,
                    **_build_facts(hs, config.indexName, path, seconds)}
    return {"name": config.indexName, "build_s": None, **_build_facts(hs, config.indexName, path),
            "reused": True}


def run_workload(spark: SparkSession, workload: Workload, ctx: Context, work_dir: str,
                 pairs: int, warmups: int, built: dict[str, str] | None = None) -> dict:
    """Vanilla and accelerated runs alternating (A B A B, the limit after each pair), under the
    workload's ``conf``; a report.

    ``built``: the indexes this run built so far (see ``_ensure_index``), shared by the calls of
    one run so that workloads declaring the same index build it once."""
    with conf_set(spark, workload.conf):
        return _run_workload(spark, workload, ctx, work_dir, pairs, warmups,
                             {} if built is None else built)


def _run_workload(spark: SparkSession, workload: Workload, ctx: Context, work_dir: str,
                  pairs: int, warmups: int, built: dict[str, str]) -> dict:
    facts = workload.prepare(ctx)
    hs = Hyperspace(spark)

    def build(path: str, read: Callable[[Any, str, dict], DataFrame] = workload.read) -> DataFrame:
        return workload.query(read(spark, path, facts), facts)

    Hyperspace.disable(spark)
    expected = canonical(build(facts["path"]).collect())
    indexes = [_ensure_index(hs, spark, c[0], c[1], built) if isinstance(c, tuple) else
               _ensure_index(hs, spark, facts["path"], c, built,
                             workload.read(spark, facts["path"], facts))
               for c in workload.indexes(facts)]
    if workload.change is not None:   # the source changes after its indexes were built
        workload.change(spark, facts)
        expected = canonical(build(facts["path"]).collect())
    limit_path = None
    if workload.limit is not None:
        limit_path = os.path.join(work_dir, "limit", workload.name)
        if not os.path.exists(limit_path):
            rows = workload.limit(workload.read(spark, facts["path"], facts), facts)
            if workload.limit_files is not None:
                rows = rows.coalesce(workload.limit_files)
            rows.write.parquet(limit_path)
    cached = None
    if workload.cache is not None:   # warm the cache once (entries shared with other workloads)
        to_cache = workload.cache(workload.read(spark, facts["path"], facts), facts)
        seconds, row = _timed(lambda: hs.cache(to_cache).first())
        cached = {**row.asDict(), "wall_s": seconds}
        Hyperspace.enable(spark)   # the timed runs must read the cache: checked before them too
        cached["served_before_runs"] = CACHED_FILE_INDEX in _executed_plan(build(facts["path"]))
        Hyperspace.disable(spark)

    failures: list[str] = []
    if cached is not None and not cached["served_before_runs"]:
        failures.append(f"the accelerated plan does not read the cache (no {CACHED_FILE_INDEX})")

    def side(enabled: bool, path: str, label: str) -> float:
        (Hyperspace.enable if enabled else Hyperspace.disable)(spark)
        read = read_parquet if path == limit_path else workload.read
        seconds, rows = _timed(lambda: build(path, read).collect())
        if canonical(rows) != expected:
            failures.append(f"{label}: {len(rows)} rows differ from vanilla's {len(expected)}")
        return seconds

    def alternate(rounds: int, warm: int, limit_path: str | None, after: str = "",
                  vanilla_warm: int | None = None):
        """``warm`` untimed rounds, then ``rounds`` timed ones, each running vanilla, then
        accelerated and (with ``limit_path``) the limit, those two in turn first (whichever runs
        right after vanilla's scan pays for the garbage it left); their seconds. The untimed
        rounds run vanilla ``vanilla_warm`` times (default ``warm``): fewer where the query
        just ran vanilla for its expected rows, the same plan, so its warm-up too."""
        for i in range(warm):
            if i < (warm if vanilla_warm is None else vanilla_warm):
                side(False, facts["path"], f"vanilla warm-up {i}{after}")
            side(True, facts["path"], f"accelerated warm-up {i}{after}")
            if limit_path:
                side(False, limit_path, f"limit warm-up {i}{after}")
        vanilla, accelerated, limit = [], [], []
        for i in range(rounds):
            vanilla.append(side(False, facts["path"], f"vanilla run {i}{after}"))
            if limit_path and i % 2:
                limit.append(side(False, limit_path, f"limit run {i}{after}"))
            accelerated.append(side(True, facts["path"], f"accelerated run {i}{after}"))
            if limit_path and not i % 2:
                limit.append(side(False, limit_path, f"limit run {i}{after}"))
        return vanilla, accelerated, limit

    vanilla, accelerated, limit = alternate(pairs, warmups, limit_path,
                                            vanilla_warm=max(0, warmups - 1))
    Hyperspace.disable(spark)
    shuffles_vanilla = shuffles(build(facts["path"]))
    read_vanilla = scan_stats(spark, build(facts["path"]))
    Hyperspace.enable(spark)
    read_accelerated = scan_stats(spark, build(facts["path"]))
    shuffles_accelerated = shuffles(build(facts["path"]))
    reasons = why_not(spark, build(facts["path"]))
    used = [r.index for r in reasons if r.code == "APPLIED"]
    if cached is not None:
        cached["reasons"] = [f"{r.code}: {r.reason}" for r in reasons if r.index == CACHE]
        cached["served"] = CACHED_FILE_INDEX in _executed_plan(build(facts["path"]))
        if not cached["served"]:
            failures.append("the accelerated plan does not read the cache (no "
                            f"{CACHED_FILE_INDEX} in it): {cached['reasons']}")
    Hyperspace.disable(spark)
    refresh = after_refresh = None
    if workload.refresh_cost:
        refresh = _refresh_cost(hs, indexes)
        v_after, a_after, _ = alternate(pairs, 1, None, " after refresh")
        Hyperspace.disable(spark)
        after_refresh = {"vanilla_s": _stats(v_after), "accelerated_s": _stats(a_after),
                         "ratio_vanilla_over_accelerated": statistics.median(
                             v / a for v, a in zip(v_after, a_after))}
        for index in indexes:   # the next run restores the source they were refreshed to
            _drop_index(hs, index["name"])

    ratios = [v / a for v, a in zip(vanilla, accelerated)]
    ratio = statistics.median(ratios)
    in_range = ((workload.min_ratio is None or ratio >= workload.min_ratio)
                and (workload.max_ratio is None or ratio <= workload.max_ratio))
    return {
        "name": workload.name,
        "description": workload.description,
        "key": facts.get("key"),
        "identical": not failures,
        "failures": failures,
        "rows": len(expected),
        "vanilla_s": _stats(vanilla),
        "accelerated_s": _stats(accelerated),
        "limit_s": _stats(limit),
        "ratio_vanilla_over_accelerated": {"pairs": ratios, "median": ratio},
        "ratio_accelerated_over_limit": (statistics.median(accelerated) / statistics.median(limit)
                                         if limit else None),
        "expected_ratio": {"min": workload.min_ratio, "max": workload.max_ratio, "met": in_range},
        "read": {"vanilla": read_vanilla, "accelerated": read_accelerated},
        "shuffles": {"vanilla": shuffles_vanilla, "accelerated": shuffles_accelerated},
        "indexes": indexes,
        "indexes_used": sorted(set(used)),
        **({"refresh": refresh, "after_refresh": after_refresh} if refresh is not None else {}),
        **({"cache": cached} if cached is not None else {}),
    }


#: the file index the cache tier's scans read through (in the executed plan's text)
CACHED_FILE_INDEX = "CachedFileIndex"


def _executed_plan(df: DataFrame) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def _refresh_cost(hs: Hyperspace, indexes: list[dict]) -> list[dict]:
    """Seconds of an incremental refresh of each index after the workload's change, and their
    share of the index's build (None when this run did not build it)."""
    out = []
    for index in indexes:
        seconds, _ = _timed(lambda: hs.refreshIndex(index["name"], mode="incremental"))
        built = index.get("build_s")
        out.append({"name": index["name"], "incremental_s": seconds, "build_s": built,
                    "ratio_incremental_over_build": seconds / built if built else None})
    return out


def planning_overhead(spark: SparkSession, plans: dict[str, Callable[[int], DataFrame]],
                      runs: int = 20, warmups: int = 0) -> dict:
    """Median milliseconds of building the executed plan of fresh DataFrames, accelerator off
    and on (alternating), for each named plan, after ``warmups`` untimed rounds."""
    out = {}
    for name, make in plans.items():
        off, on = [], []
        for i in range(-warmups, runs):
            for enabled, times in ((False, off), (True, on)):
                (Hyperspace.enable if enabled else Hyperspace.disable)(spark)
                df = make(i + warmups)
                seconds, _ = _timed(lambda: df._jdf.queryExecution().executedPlan())
                if i >= 0:
                    times.append(seconds * 1000)
        out[name] = {"off_ms": statistics.median(off), "on_ms": statistics.median(on),
                     "added_ms": statistics.median(on) - statistics.median(off),
                     "runs": runs, "warmups": warmups}
    Hyperspace.disable(spark)
    return out


def _drop_index(hs: Hyperspace, name: str) -> None:
    hs.deleteIndex(name)
    hs.vacuumIndex(name)


def build_cost(spark: SparkSession, bench: BuildCost, ctx: Context, work_dir: str, runs: int,
               warmups: int = 1) -> dict:
    """Median seconds of building ``bench``'s index (then deleted and vacuumed) and of its limit
    job (collected, or written into a fresh directory then deleted), alternating, after
    ``warmups`` runs of each; their ratio; the peak driver memory of each side
    (``bench/driver_memory.py``). Both times include reading the source DataFrame (listing its
    files)."""
    facts = bench.prepare(ctx)
    hs = Hyperspace(spark)
    Hyperspace.disable(spark)
    config = bench.index(facts)
    path = facts["path"]
    read = lambda: bench.read(spark, path, facts)  # noqa: E731
    built: list[float] = []
    limited: list[float] = []
    memory: dict[str, list[dict]] = {"index": [], "limit": []}
    content: dict = {}
    resolved: dict = {}
    out = os.path.join(work_dir, "build-limit", bench.name)

    def index_run() -> float:
        with DriverMemory(spark) as mem:
            seconds, _ = _timed(lambda: hs.createIndex(read(), config))
        memory["index"].append(mem.report())
        entry = hs.context.lifecycle().get(config.indexName)
        resolved.clear()
        resolved.update(entry.config)
        content.clear()
        content.update(_build_facts(hs, config.indexName, path, seconds))
        _drop_index(hs, config.indexName)
        return seconds

    def limit_run() -> tuple[float, int]:
        with DriverMemory(spark) as mem:
            if bench.write_limit:
                seconds, rows = _timed(lambda: bench.limit(read(), facts, resolved)
                                       .write.mode("overwrite").parquet(out))
            else:
                seconds, rows = _timed(lambda: bench.limit(read(), facts, resolved).collect())
        memory["limit"].append(mem.report())
        shutil.rmtree(out, ignore_errors=True)
        return seconds, len(read().inputFiles())

    for _ in range(warmups):
        index_run()
        limit_run()
    memory = {"index": [], "limit": []}
    files = 0
    for _ in range(runs):
        built.append(index_run())
        seconds, files = limit_run()
        limited.append(seconds)
    ratio = statistics.median(built) / statistics.median(limited)
    return {
        "name": bench.name,
        "description": bench.description,
        "files": files,
        "index_s": _stats(built),
        "limit_s": _stats(limited),
        "ratio_index_over_limit": ratio,
        "pairs": [b / s for b, s in zip(built, limited)],
        "expected": {"max_ratio": bench.max_ratio,
                     "met": None if bench.max_ratio is None else ratio <= bench.max_ratio},
        "driver_memory": {"index": peaks(memory["index"]), "limit": peaks(memory["limit"])},
        "config": {k: v for k, v in resolved.items() if k == "numBuckets"},
        **content,
    }


def pruning_cost(spark: SparkSession, bench: PruningCost, ctx: Context, runs: int,
                 warmups: int) -> dict:
    """Median milliseconds of building the executed plan of ``bench``'s query with the
    accelerator off and on (alternating, after ``warmups`` untimed rounds, see
    ``planning_overhead``) with its data-skipping index in place; the files kept, and whether
    results equal vanilla's. The index is deleted and vacuumed afterwards."""
    facts = bench.prepare(ctx)
    hs = Hyperspace(spark)
    Hyperspace.disable(spark)
    config = bench.index(facts)
    read = lambda: bench.read(spark, facts["path"], facts)  # noqa: E731
    seconds, _ = _timed(lambda: hs.createIndex(read(), config))
    try:
        build = {"build_s": seconds, **_build_facts(hs, config.indexName, facts["path"], seconds)}
        files = len(read().inputFiles())
        expected = canonical(bench.query(read(), facts, 1).collect())
        Hyperspace.enable(spark)
        probe = bench.query(read(), facts, 1)
        kept = len(probe.inputFiles())
        identical = canonical(probe.collect()) == expected
        Hyperspace.disable(spark)
        timing = planning_overhead(spark, {bench.name: lambda i: bench.query(read(), facts, i)},
                                   runs, warmups)[bench.name]
    finally:
        Hyperspace.disable(spark)
        _drop_index(hs, config.indexName)
    return {
        "name": bench.name,
        "description": bench.description,
        "files": files,
        "kept_files": kept,
        "identical": identical,
        **timing,
        # met only when the index did prune: otherwise this measured something else
        "expected": {"max_added_ms": bench.max_added_ms,
                     "met": kept < files and timing["added_ms"] <= bench.max_added_ms},
        "index": build,
    }


#: where the cache tier keeps its entries (a session setting)
CACHE_PATH = "spark.accelerator.cache.path"


def cache_warmup_cost(spark: SparkSession, bench: CacheWarmupCost, ctx: Context, work_dir: str,
                      runs: int, warmups: int = 1) -> dict:
    """Median seconds of ``hs.cache`` of ``bench``'s DataFrame into an empty cache (a fresh
    ``spark.accelerator.cache.path`` each run, deleted afterwards) and of one vanilla scan of
    the same DataFrame (``write.format("noop")``), alternating, after ``warmups`` runs of
    each; their ratio, the peak driver memory of each side (``bench/driver_memory.py``) and the
    executor CPU seconds of each side's jobs (``bench/stage_cpu.py``). Both include reading
    the source DataFrame (listing its files)."""
    workload = bench.workload
    facts = workload.prepare(ctx)
    hs = Hyperspace(spark)
    Hyperspace.disable(spark)
    root = os.path.join(work_dir, "cache-warmup", bench.name)
    frame = lambda: workload.cache(workload.read(spark, facts["path"], facts), facts)  # noqa: E731
    cached: list[float] = []
    scanned: list[float] = []
    summary: dict = {}

    def cache_run(i: int) -> float:
        path = os.path.join(root, str(i))
        with conf_set(spark, {CACHE_PATH: path}), DriverMemory(spark) as mem, \
                StageCpu(spark) as cpu:
            seconds, row = _timed(lambda: hs.cache(frame()).first())
        memory["cache"].append(mem.report())
        cpus["cache"].append(cpu.seconds)
        summary.clear()
        summary.update(row.asDict())
        summary["written_files"] = sum(   # the cache's Parquet files
            f.endswith(".parquet") for _, _, fs in os.walk(os.path.join(path, "data"))
            for f in fs)
        shutil.rmtree(path, ignore_errors=True)
        return seconds

    def scan_run() -> float:
        with DriverMemory(spark) as mem, StageCpu(spark) as cpu:
            seconds, _ = _timed(lambda: frame().write.format("noop").mode("overwrite").save())
        memory["scan"].append(mem.report())
        cpus["scan"].append(cpu.seconds)
        return seconds

    memory: dict[str, list[dict]] = {"cache": [], "scan": []}
    cpus: dict[str, list[float]] = {"cache": [], "scan": []}
    for i in range(warmups):
        cache_run(-1 - i)
        scan_run()
    memory = {"cache": [], "scan": []}
    cpus = {"cache": [], "scan": []}
    for i in range(runs):
        cached.append(cache_run(i))
        scanned.append(scan_run())
    shutil.rmtree(root, ignore_errors=True)
    ratio = statistics.median(cached) / statistics.median(scanned)
    return {
        "name": bench.name,
        "description": bench.description,
        "cache_s": _stats(cached),
        "scan_s": _stats(scanned),
        "ratio_cache_over_scan": ratio,
        # executor CPU seconds of each side's jobs (bench/stage_cpu.py): steadier than wall
        # times on a shared machine; the driver's work around the jobs is not in them
        "cpu_s": {"cache": _stats(cpus["cache"]), "scan": _stats(cpus["scan"])},
        "cpu_ratio_cache_over_scan": statistics.median(cpus["cache"])
        / max(1e-9, statistics.median(cpus["scan"])),
        "pairs": [c / s for c, s in zip(cached, scanned)],
        "expected": {"max_ratio": bench.max_ratio, "max_seconds": bench.max_seconds,
                     "met": ratio <= bench.max_ratio and (
                         bench.max_seconds is None
                         or statistics.median(cached) <= bench.max_seconds)},
        "last_cache": summary,   # files, bytesRead, bytesWritten, seconds of the last warm-up
        "driver_memory": {"cache": peaks(memory["cache"]), "scan": peaks(memory["scan"])},
    }


def cache_planning_cost(spark: SparkSession, bench: CachePlanningCost, ctx: Context, runs: int,
                        warmups: int) -> dict:
    """Caches part of a many-file source (timed), then the median milliseconds of building the
    executed plan of ``bench``'s query over the whole source with the accelerator off and on
    (alternating, after ``warmups`` untimed rounds, see ``planning_overhead``); checks that the
    plan reads the cache and that its rows equal vanilla's. The cached entries stay (they are
    under the run's cache path)."""
    facts = bench.prepare(ctx)
    hs = Hyperspace(spark)
    Hyperspace.disable(spark)
    read = lambda: spark.read.parquet(facts["path"])  # noqa: E731
    seconds, row = _timed(lambda: hs.cache(bench.cached(spark, facts)).first())
    try:
        files = len(read().inputFiles())
        expected = canonical(bench.query(read(), facts, 1).collect())
        Hyperspace.enable(spark)
        probe = bench.query(read(), facts, 1)
        served = CACHED_FILE_INDEX in _executed_plan(probe)
        reasons = [f"{r.code}: {r.reason}" for r in why_not(spark, probe, CACHE)]
        identical = canonical(probe.collect()) == expected
        Hyperspace.disable(spark)
        timing = planning_overhead(spark, {bench.name: lambda i: bench.query(read(), facts, i)},
                                   runs, warmups)[bench.name]
    finally:
        Hyperspace.disable(spark)
    failures = [] if served else [f"the accelerated plan does not read the cache: {reasons}"]
    if not identical:
        failures.append("rows differ from vanilla's")
    return {
        "name": bench.name,
        "description": bench.description,
        "files": files,
        "cached_files": row["files"],
        "cache": {**row.asDict(), "wall_s": seconds},
        "served": served,
        "reasons": reasons,
        "identical": identical and served,
        "failures": failures,
        **timing,
        "expected": {"max_added_ms": bench.max_added_ms,
                     "met": served and timing["added_ms"] <= bench.max_added_ms},
    }
