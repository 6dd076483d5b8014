"""Plans nothing can serve skip the call into Python while they are planned: the JVM rule
queues them for the query history, which still records every one. That holds for plans over an
indexed source too when they filter no column an index needs. A source this process indexes or
caches is served by its very next query, explain and whyNot still see every plan, and an expiry
of 0 hands every plan to the rewriter."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from pyspark.sql import functions as F

from accelerator import DataSkippingIndexConfig, Hyperspace, IndexConfig, MinMaxSketch, TextIndexConfig
from accelerator.query import session
from tests.helpers import rows, session_conf, vanilla

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _sources(spark, tmp_path):
    indexed, other = str(tmp_path / "indexed"), str(tmp_path / "other")
    spark.range(40).selectExpr("id", "id % 4 AS k").write.parquet(indexed)
    spark.range(40).selectExpr("id", "id % 5 AS k").write.parquet(other)
    return indexed, other


def _handed_to_python(spark, run) -> int:
    """How many plans the JVM rule handed to the rewriter while ``run()`` planned."""
    with session.rewriter(spark).capturing() as captured:
        run()
    return len(captured)


def _history_ks(hs, path: str) -> list[str]:
    """The literals of ``k = ...`` of the history's queries over ``path``."""
    return sorted(p["literals"][0] for r in hs.history().collect() if r["sources"] == [f"file:{path}"]
                  for p in r["predicates"] if p["column"] == "k")


def test_unserved_plans_are_recorded_without_calling_python(spark, hs, system_path, tmp_path):
    indexed, other = _sources(spark, tmp_path)
    hs.createIndex(spark.read.parquet(indexed), IndexConfig("by_k", ["k"], ["id"]))
    query = lambda path, k: spark.read.parquet(path).where(F.col("k") == k).select("id")  # noqa: E731
    query(other, 0).collect()                 # the rewriter answers once under these settings
    assert _handed_to_python(spark, lambda: query(other, 1).collect()) == 0
    assert _handed_to_python(spark, lambda: query(indexed, 1).collect()) == 1
    assert rows(query(other, 2)) == vanilla(spark, lambda: query(other, 2))
    Hyperspace.flushHistory(spark)
    assert _history_ks(hs, other) == ["0", "1", "2"]

    # explain and whyNot see a plan that would be deferred
    (verdict,) = hs.whyNot(query(other, 3), "by_k")
    assert verdict.code == "OTHER_SOURCE"
    # the source just indexed is served by its very next query
    hs.createIndex(spark.read.parquet(other), IndexConfig("other_k", ["k"], ["id"]))
    q = query(other, 3)
    assert all("/other_k/" in f for f in q.inputFiles())
    assert rows(q) == vanilla(spark, lambda: query(other, 3))


def test_plans_over_an_indexed_source_that_no_index_could_serve_skip_python(
        spark, hs, system_path, tmp_path):
    indexed, other = _sources(spark, tmp_path)
    hs.createIndex(spark.read.parquet(indexed), IndexConfig("by_k", ["k"], ["id"]))
    hs.createIndex(spark.read.parquet(other), IndexConfig("other_k", ["k"], ["id"]))
    hs.createIndex(spark.read.parquet(other), DataSkippingIndexConfig("other_id", MinMaxSketch("id + 1")))
    read = lambda path, where: spark.read.parquet(path).where(where).select("id", "k")  # noqa: E731
    read(indexed, "k = 0").collect()            # the rewriter answers once under these settings
    assert _handed_to_python(spark, lambda: read(indexed, "id = 7").collect()) == 0
    assert _handed_to_python(spark, lambda: spark.read.parquet(indexed).count()) == 0
    assert rows(read(indexed, "id = 7")) == vanilla(spark, lambda: read(indexed, "id = 7"))
    # the indexed column, however cased, or a sketched expression's column: handed over
    assert _handed_to_python(spark, lambda: read(indexed, "K = 1").collect()) == 1
    assert _handed_to_python(spark, lambda: read(other, "id + 1 < 3").collect()) == 1
    q = read(indexed, "k = 2")
    assert all("/by_k/" in f for f in q.inputFiles())
    assert rows(q) == vanilla(spark, lambda: read(indexed, "k = 2"))
    Hyperspace.flushHistory(spark)
    ids = [p["literals"] for r in hs.history().collect() if r["sources"] == [f"file:{indexed}"]
           for p in r["predicates"] if p["column"] == "id"]
    assert ["7"] in ids

    # a text index's column
    texts = str(tmp_path / "texts")
    spark.range(40).selectExpr("id", "concat('message ', id) AS msg").write.parquet(texts)
    hs.createIndex(spark.read.parquet(texts), TextIndexConfig("msgs", column="msg"))
    search = lambda where: spark.read.parquet(texts).where(where)  # noqa: E731
    search("id = 1").collect()
    assert _handed_to_python(spark, lambda: search("id = 2").collect()) == 0
    assert _handed_to_python(spark, lambda: search("msg LIKE '%age 17'").collect()) == 1
    assert rows(search("msg LIKE '%age 17'")) == vanilla(spark, lambda: search("msg LIKE '%age 17'"))

    # a join of two sources with covering indexes is handed over whatever it filters
    with session_conf(spark, spark__sql__autoBroadcastJoinThreshold="-1"):
        join = lambda: spark.read.parquet(indexed).join(  # noqa: E731
            spark.read.parquet(other).withColumnRenamed("id", "id2"), "k")
        read(other, "k = 0").collect()
        assert _handed_to_python(spark, lambda: join().collect()) == 1
        assert all("/by_k/" in f or "/other_k/" in f for f in join().inputFiles())
        assert rows(join()) == vanilla(spark, join)


def test_a_source_just_cached_is_served_by_its_next_query(spark, hs, system_path, tmp_path):
    indexed, other = _sources(spark, tmp_path)
    hs.createIndex(spark.read.parquet(indexed), IndexConfig("by_k", ["k"], ["id"]))
    read = lambda: spark.read.parquet(other).where("k = 1")  # noqa: E731
    read().collect()
    assert _handed_to_python(spark, lambda: read().collect()) == 0
    hs.cache(spark.read.parquet(other))
    assert read().inputFiles() and all("/_cache/" in f for f in read().inputFiles())
    assert rows(read()) == vanilla(spark, read)


def test_an_expiry_of_zero_hands_every_plan_to_the_rewriter(spark, hs, system_path, tmp_path):
    indexed, other = _sources(spark, tmp_path)
    hs.createIndex(spark.read.parquet(indexed), IndexConfig("by_k", ["k"], ["id"]))
    with session_conf(spark, spark__accelerator__index__cache__expirySeconds="0"):
        spark.read.parquet(other).where("k = 1").collect()
        assert _handed_to_python(spark, lambda: spark.read.parquet(other).collect()) == 1


DRIVER = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession
    system_path, indexed, other = sys.argv[1:4]
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.accelerator.system.path", system_path).getOrCreate())
    from accelerator import Hyperspace, IndexConfig
    hs = Hyperspace(spark)
    hs.createIndex(spark.read.parquet(indexed), IndexConfig("by_k", ["k"], ["id"]))
    Hyperspace.enable(spark)
    for k in range(3):
        spark.read.parquet(other).where(f"k = {k}").collect()
    print("queried")
""")


def test_deferred_plans_are_written_at_exit(spark, hs, system_path, tmp_path):
    """A driver that exits right after its queries, without flushHistory, loses none of them."""
    indexed, other = _sources(spark, tmp_path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-c", DRIVER, system_path, indexed, other],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert run.returncode == 0 and "queried" in run.stdout, run.stderr[-3000:]
    assert _history_ks(hs, other) == ["0", "1", "2"]
