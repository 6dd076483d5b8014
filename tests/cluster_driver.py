"""The driver of the standalone-cluster tests, run as its own process (one JVM holds one
SparkContext, and the test session's is local).

``python tests/cluster_driver.py MASTER_URL WORK_DIR MISSING_PYTHON`` connects to the cluster,
builds every index kind and the cache on its executors, runs rewritten queries next to vanilla
ones and prints one line ``@@scenario {json}`` per scenario: what the tests assert on (rows
equal or not, plans, ``inputFiles()``, error messages), or ``{"error": traceback}``. The
executors run ``PYSPARK_PYTHON`` of this process; then the session is stopped and a new one
started whose ``spark.pyspark.python`` is ``MISSING_PYTHON``, an interpreter lacking tantivy.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any, Callable

from pyspark.sql import DataFrame, SparkSession, functions as F

from accelerator import (
    BloomFilterSketch,
    DataSkippingIndexConfig,
    Hyperspace,
    IndexConfig,
    MinMaxSketch,
    TextIndexConfig,
    ValueListSketch,
)

MARK = "@@scenario "
SETTINGS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.executor.memory": "1g",
    # short-lived JVMs running tiny jobs: the quick JIT alone starts them faster
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.autoBroadcastJoinThreshold": "-1",   # the join rule serves sort-merge joins
    "spark.sql.maxMetadataStringLength": "1000",
    "spark.accelerator.index.numBuckets": "4",
}


def session(master: str, work: str, executors_wanted: int = 2, **settings: str) -> SparkSession:
    """A session on ``master`` with the tests' settings, waiting until ``executors_wanted``
    executors are registered (two: every scenario runs on both of the cluster's workers)."""
    builder = SparkSession.builder.master(master).appName("accelerator-cluster-tests")
    conf = {**SETTINGS, "spark.sql.warehouse.dir": os.path.join(work, "warehouse"),
            "spark.accelerator.system.path": os.path.join(work, "indexes"), **settings}
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    deadline = time.monotonic() + 60
    while executors(spark) < executors_wanted and time.monotonic() < deadline:
        time.sleep(0.2)
    return spark


def executors(spark: SparkSession) -> int:
    """How many executors (the driver aside) are registered."""
    return spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1


def rows(df: DataFrame) -> list[tuple]:
    """The rows of ``df`` as sorted tuples."""
    return sorted((tuple(r) for r in df.collect()), key=repr)


def vanilla(spark: SparkSession, build: Callable[[], DataFrame]) -> list[tuple]:
    """The rows of the query ``build()`` makes, with the accelerator disabled."""
    Hyperspace.disable(spark)
    try:
        return rows(build())
    finally:
        Hyperspace.enable(spark)


def plan(df: DataFrame) -> str:
    """The executed physical plan of ``df``."""
    return df._jdf.queryExecution().executedPlan().toString()


def compared(spark: SparkSession, build: Callable[[], DataFrame]) -> dict[str, Any]:
    """The rewritten query's plan, input files and row count, and whether its rows equal
    vanilla Spark's."""
    df = build()
    got = rows(df)
    return {"rows_equal": got == vanilla(spark, build), "rows": len(got), "plan": plan(df),
            "input_files": sorted(df.inputFiles())}


def exchanges(df: DataFrame) -> int:
    """How many Exchange operators the executed plan has."""
    return plan(df).count("Exchange")


def source_files(path: str) -> int:
    """How many data files a source directory holds."""
    return sum(name.endswith((".parquet", ".json")) for name in os.listdir(path))


class Scenarios:
    """The scenarios, run in order in one session on the cluster; each returns its report."""

    def __init__(self, spark: SparkSession, work: str, startup_s: float):
        self.spark, self.work, self.hs = spark, work, Hyperspace(spark)
        self.startup_s = startup_s

    def path(self, name: str) -> str:
        return os.path.join(self.work, "data", name)

    def environment(self) -> dict[str, Any]:
        """The executors and what their Python finds before the accelerator ships anything."""
        def origins(_: Any) -> list[str]:
            import importlib.util

            def origin(module: str) -> str:
                try:
                    found = importlib.util.find_spec(module)
                except ImportError:
                    return ""
                return found.origin if found else ""
            return [origin(m) for m in ("indexes", "accelerator", "tantivy")]
        indexes, accelerator, tantivy = self.spark.sparkContext.parallelize([0], 1) \
            .map(origins).collect()[0]
        return {"startup_seconds": round(self.startup_s, 1), "executors": executors(self.spark),
                "indexes": indexes, "accelerator": accelerator, "tantivy": tantivy}

    def covering_filter(self) -> dict[str, Any]:
        """A filter on a nested field served by a covering index."""
        spark, path = self.spark, self.path("nested")
        data = [(i, f"name{i}", (f"va{i}", (f"wa{i % 7}", f"wb{i}"))) for i in range(200)]
        spark.createDataFrame(data, "id int, name string, nested struct<field1:string, "
                                    "nst:struct<field1:string, field2:string>>") \
            .repartition(4).write.parquet(path)
        self.hs.createIndex(spark.read.parquet(path), IndexConfig(
            "idx_nested", ["nested.nst.field1"], ["id", "name", "nested.nst.field2"]))

        def query() -> DataFrame:
            df = spark.read.parquet(path)
            return df.filter(df["nested.nst.field1"] == "wa1").select("id", "name",
                                                                      "nested.nst.field2")
        return {**compared(spark, query), "source_files": source_files(path)}

    def _join_query(self) -> DataFrame:
        left, right = self.spark.read.parquet(self.path("left")), \
            self.spark.read.parquet(self.path("right"))
        return left.filter(F.col("v") != "v7").join(right, F.col("k") == F.col("k2")) \
            .select("k", "v", "w")

    def _why(self, df: DataFrame) -> list[list[str]]:
        return [[w.index, w.code, w.reason] for w in self.hs.whyNot(df, redirectFunc=lambda _: None)]

    def join(self) -> dict[str, Any]:
        """An equi-join of two covering indexes, bucket by bucket without an Exchange."""
        spark = self.spark
        spark.createDataFrame([(i, i % 50, f"v{i}") for i in range(400)], "id long, k long, v string") \
            .repartition(4).write.parquet(self.path("left"))
        spark.createDataFrame([(i, i % 70, f"w{i}") for i in range(300)], "rid long, k2 long, w string") \
            .repartition(3).write.parquet(self.path("right"))
        self.hs.createIndex(spark.read.parquet(self.path("left")), IndexConfig("li", ["k"], ["v"]))
        self.hs.createIndex(spark.read.parquet(self.path("right")), IndexConfig("ri", ["k2"], ["w"]))
        Hyperspace.disable(spark)
        try:
            vanilla_exchanges = exchanges(self._join_query())
        finally:
            Hyperspace.enable(spark)
        df = self._join_query()
        return {**compared(spark, self._join_query), "exchanges": exchanges(df),
                "vanilla_exchanges": vanilla_exchanges, "why_not": self._why(df)}

    def hybrid_scan(self) -> dict[str, Any]:
        """The join's left source gets a file: a filter reads the index and that file, and the
        join unions the file's rows into the index's buckets."""
        spark, left = self.spark, self.path("left")
        before = set(os.listdir(left))
        spark.createDataFrame([(i, i % 50, f"v{i}") for i in range(1000, 1040)],
                              "id long, k long, v string").coalesce(1).write.mode("append").parquet(left)
        appended = sorted(n for n in set(os.listdir(left)) - before if n.endswith(".parquet"))

        def lookup() -> DataFrame:
            return spark.read.parquet(left).filter("k = 3").select("k", "v")
        join = self._join_query()
        return {"appended": appended, "filter": {**compared(spark, lookup), "why_not": self._why(lookup())},
                "join": {**compared(spark, self._join_query), "exchanges": exchanges(join),
                         "why_not": self._why(join)}}

    def data_skipping(self) -> dict[str, Any]:
        """MinMax, Bloom filter and value-list sketches prune files."""
        spark, path = self.spark, self.path("events")
        data = [(i, f"trace-{i * 7919 % 100003}", (f"os{i // 100}",)) for i in range(400)]
        spark.createDataFrame(data, "id long, trace string, device struct<os:string>") \
            .repartitionByRange(8, "id").write.parquet(path)
        self.hs.createIndex(spark.read.parquet(path), DataSkippingIndexConfig(
            "ds_events", MinMaxSketch("id"), BloomFilterSketch("trace", expectedDistinctCountPerFile=100),
            ValueListSketch("device.os")))
        queries = {"minmax": "id = 123", "bloom": f"trace = 'trace-{123 * 7919 % 100003}'",
                   "valuelist": "device.os = 'os2'"}
        return {"source_files": source_files(path), **{
            name: compared(spark, lambda where=where: spark.read.parquet(path).where(where))
            for name, where in queries.items()}}

    def text(self) -> dict[str, Any]:
        """A text index prunes a LIKE search and answers a full-text search."""
        spark, path = self.spark, self.path("logs")
        data = [(i, f"ERROR {i} Timeout talking to db-{i % 3} code=ERR-{i:04d}" if i % 50 == 7
                 else f"INFO {i} request served in {i % 13} ms") for i in range(800)]
        spark.createDataFrame(data, "id long, message string").repartitionByRange(8, "id") \
            .write.parquet(path)
        self.hs.createIndex(spark.read.parquet(path), TextIndexConfig("txt", column="message"))
        like = compared(spark, lambda: spark.read.parquet(path).where("message LIKE '%ERR-0057%'"))
        found = rows(self.hs.search(spark.read.parquet(path), "txt", '"db-1" AND timeout'))
        expected = vanilla(spark, lambda: spark.read.parquet(path)
                           .where("message LIKE '%Timeout talking to db-1 %'"))
        return {"source_files": source_files(path), "like": like,
                "search": {"rows_equal": found == expected, "rows": len(found)}}

    def cache(self) -> dict[str, Any]:
        """A JSON source copied into the cache answers a filter from the copies."""
        spark, path = self.spark, self.path("landing")
        spark.createDataFrame([(i, i % 11, f"m{i}") for i in range(300)], "id long, k long, m string") \
            .repartition(3).write.json(path)
        warmed = self.hs.cache(spark.read.json(path)).collect()[0].asDict()
        served = compared(spark, lambda: spark.read.json(path).filter("k = 3"))
        return {**served, "warmed": warmed, "source_files": source_files(path),
                "cache_path": os.path.join(self.work, "indexes", "_cache")}


class Restarted:
    """Scenarios of a second session of this process (the first one stopped), whose
    ``spark.pyspark.python`` is an interpreter lacking tantivy; PYSPARK_PYTHON unset, as a
    user switching interpreters would do."""

    def __init__(self, master: str, work: str, python: str):
        os.environ.pop("PYSPARK_PYTHON", None)
        self.spark = session(master, work, **{"spark.pyspark.python": python})
        self.python, self.work, self.hs = python, work, Hyperspace(self.spark)
        Hyperspace.enable(self.spark)

    def missing_module(self) -> dict[str, Any]:
        """What createIndex of a text index raises."""
        path = os.path.join(self.work, "data", "logs")
        try:
            self.hs.createIndex(self.spark.read.parquet(path),
                                TextIndexConfig("txt_missing", column="message"))
            raised = {"raised": None}
        except Exception as e:
            raised = {"raised": type(e).__name__, "message": str(e)}
        return {**raised, "python": self.python,
                "indexes": sorted(r.name for r in self.hs.indexes().collect())}

    def restarted_session(self) -> dict[str, Any]:
        """The first session's covering indexes serve this session's filter and join (its
        executors get the accelerator's jar again), and a data-skipping build runs here (they
        get the ``indexes`` package again)."""
        spark, nested = self.spark, os.path.join(self.work, "data", "nested")
        data = os.path.join(self.work, "data")

        def join() -> DataFrame:
            left, right = spark.read.parquet(f"{data}/left"), spark.read.parquet(f"{data}/right")
            return left.join(right, F.col("k") == F.col("k2")).select("k", "v", "w")

        def lookup() -> DataFrame:
            return spark.read.parquet(nested).filter("nested.nst.field1 = 'wa2'") \
                .select("id", "nested.nst.field2")
        path = os.path.join(self.work, "data", "numbers")
        spark.range(0, 400, numPartitions=4).selectExpr("id", "id % 9 AS k").write.parquet(path)
        self.hs.createIndex(spark.read.parquet(path),
                            DataSkippingIndexConfig("ds_numbers", MinMaxSketch("id")))
        return {"covering": compared(spark, lookup), "join": compared(spark, join),
                "source_files": source_files(path),
                "skipping": compared(spark, lambda: spark.read.parquet(path).where("id = 7"))}


def emit(name: str, run: Callable[[], dict[str, Any]]) -> None:
    """Runs one scenario and prints its report (or its error) on one line."""
    started = time.monotonic()
    try:
        report = run()
    except Exception:
        report = {"error": traceback.format_exc()}
    report["seconds"] = round(time.monotonic() - started, 1)
    print(MARK + json.dumps({"scenario": name, **report}, default=str), flush=True)


def main(master: str, work: str, missing_python: str) -> None:
    """Runs every scenario against the cluster at ``master``, under the directory ``work``."""
    started = time.monotonic()
    spark = session(master, work)
    Hyperspace.enable(spark)
    scenarios = Scenarios(spark, work, time.monotonic() - started)
    for name in ("environment", "covering_filter", "join", "hybrid_scan", "data_skipping",
                 "text", "cache"):
        emit(name, getattr(scenarios, name))
    spark.stop()
    restarted = Restarted(master, work, missing_python)
    for name in ("missing_module", "restarted_session"):
        emit(name, getattr(restarted, name))


if __name__ == "__main__":
    main(*sys.argv[1:4])
