"""Builds of the covering and text indexes and the cache warm-up under a
``spark.driver.maxResultSize`` (1 MB) smaller than the data they read and write (about 3 MB of
Parquet): their per-file and per-row work stays on the executors and the driver receives only
small summaries, so they succeed, with results equal to vanilla Spark's and the index or cache
used. The data-skipping builds' counterpart is in tests/test_skipping_scale.py."""
from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from accelerator import IndexConfig, TextIndexConfig
from tests.helpers import driver_result_limit, rows, vanilla

FILES = 4
ROWS = 10_000     # per file; 64-character hashes: ~0.8 MB of Parquet per file
LIMIT = "1m"


def _write(spark, path: str, first: int, files: int) -> None:
    (spark.range(first, first + ROWS * files, 1, files)
     .select("id", (F.col("id") % 1000).alias("k"),
             F.sha2(F.col("id").cast("string"), 256).alias("h"),
             # text: the hash, but a marker naming the row in one row of each file
             F.when(F.col("id") % ROWS == 17, F.concat(F.lit("marker "), F.col("id").cast("string")))
             .otherwise(F.sha2(F.col("id").cast("string"), 256)).alias("text"))
     .write.mode("append").parquet(path))


@pytest.fixture
def source(spark, tmp_path) -> str:
    path = str(tmp_path / "src")
    _write(spark, path, 0, FILES)
    return path


def test_covering_create_refresh_and_optimize_under_a_small_driver_result_limit(spark, hs, source):
    query = lambda: (spark.read.parquet(source).where("k = 7")  # noqa: E731
                     .select("id", "h"))

    def served(version: str) -> None:
        assert rows(query()) == vanilla(spark, query)
        files = query().inputFiles()
        assert files and all("/cov/v__=" in f for f in files)
        assert any(f"/cov/{version}/" in f for f in files)

    with driver_result_limit(spark, LIMIT):
        with pytest.raises(Exception, match="maxResultSize"):   # the limit bites: rows can't pass
            spark.read.parquet(source).select("h").collect()
        hs.createIndex(spark.read.parquet(source), IndexConfig("cov", ["k"], ["id", "h"]))
        served("v__=0")
        _write(spark, source, FILES * ROWS, 1)
        hs.refreshIndex("cov", mode="incremental")   # the new file's rows as delta files
        served("v__=1")
        assert len(rows(query())) == (FILES + 1) * ROWS // 1000
        hs.optimizeIndex("cov", mode="full")          # the delta files folded into buckets
        served("v__=2")


def test_text_create_under_a_small_driver_result_limit(spark, hs, source):
    query = lambda: (spark.read.parquet(source)  # noqa: E731
                     .where(F.col("text").contains(f"marker {3 * ROWS + 17}")))
    with driver_result_limit(spark, LIMIT):
        hs.createIndex(spark.read.parquet(source), TextIndexConfig("txt", column="text"))
        assert rows(query()) == vanilla(spark, query)
        assert len(rows(query())) == 1 and len(query().inputFiles()) == 1


def test_cache_warm_up_under_a_small_driver_result_limit(spark, hs, source):
    query = lambda: (spark.read.parquet(source).where(F.col("id") % 997 == 3)  # noqa: E731
                     .select("id", "h"))
    with driver_result_limit(spark, LIMIT):
        summary = hs.cache(spark.read.parquet(source).select("id", "h")).first()
        assert summary.files == FILES
        assert "CachedFileIndex" in query()._jdf.queryExecution().executedPlan().toString()
        assert rows(query()) == vanilla(spark, query)
