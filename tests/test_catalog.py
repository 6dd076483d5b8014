"""The rewriter's catalog of index entries: loaded once, reloaded in the background once stale
(queries never wait for it), forgotten by this process's operations; an index another process
creates reaches this session's rewriter within seconds."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

from accelerator.query.catalog import IndexCatalog
from tests.helpers import eventually, rows, session_conf, vanilla

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Loads:
    """A load function that returns its call count, blocking while ``gate`` is clear."""

    def __init__(self) -> None:
        self.calls = 0
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self) -> list[int]:
        self.gate.wait(10)
        self.calls += 1
        return [self.calls]



def test_stale_entries_are_served_while_one_background_reload_runs():
    now = [0.0]
    catalog = IndexCatalog(clock=lambda: now[0])
    load = Loads()
    assert catalog.entries("/sys", load, 10) == [1]          # first query loads
    now[0] = 5.0
    assert catalog.entries("/sys", load, 10) == [1] and load.calls == 1
    now[0] = 11.0
    load.gate.clear()                                        # the reload is slow
    assert catalog.entries("/sys", load, 10) == [1]          # stale, not waited for
    assert catalog.entries("/sys", load, 10) == [1]          # one reload at a time
    load.gate.set()
    assert eventually(lambda: catalog.entries("/sys", load, 10) == [2])
    assert load.calls == 2


def test_invalidate_reloads_at_once_and_discards_a_reload_under_way():
    now = [0.0]
    catalog = IndexCatalog(clock=lambda: now[0])
    load = Loads()
    catalog.entries("/sys", load, 10)
    now[0] = 20.0
    load.gate.clear()
    catalog.entries("/sys", load, 10)                        # a reload starts, blocked
    catalog.invalidate("/sys")                               # this process changed an index
    load.gate.set()
    assert catalog.entries("/sys", load, 10)[0] >= 2         # loaded now, not the old list
    assert catalog.entries("/sys", load, 0) != catalog.entries("/sys", load, 0)  # 0: each time


def test_a_failed_reload_keeps_the_entries_and_retries_later():
    now = [0.0]
    catalog = IndexCatalog(clock=lambda: now[0])
    assert catalog.entries("/sys", lambda: ["a"], 10) == ["a"]
    now[0] = 15.0

    def broken():
        raise OSError("name node down")
    assert catalog.entries("/sys", broken, 10) == ["a"]
    assert eventually(lambda: not catalog.reloading())
    now[0] = 20.0                                            # the failure counts as a reload
    assert catalog.entries("/sys", lambda: ["b"], 10) == ["a"]
    now[0] = 26.0
    assert eventually(lambda: catalog.entries("/sys", lambda: ["b"], 10) == ["b"])


CREATOR = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession
    system_path, source = sys.argv[1:3]
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.accelerator.system.path", system_path).getOrCreate())
    from accelerator import Hyperspace, IndexConfig
    Hyperspace(spark).createIndex(spark.read.parquet(source),
                                  IndexConfig("from_elsewhere", ["k"], ["id"]))
    print("created")
""")


def test_an_index_another_process_creates_is_used_within_seconds(spark, hs, system_path,
                                                                 tmp_path):
    src = str(tmp_path / "src")
    spark.range(0, 2000, numPartitions=4).selectExpr("id", "id % 13 AS k").write.parquet(src)
    query = lambda: spark.read.parquet(src).filter("k = 4").select("id")   # noqa: E731
    with session_conf(spark, spark__accelerator__index__cache__expirySeconds="1"):
        query().collect()                                    # the catalog is loaded: empty
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
        done = subprocess.run([sys.executable, "-c", CREATOR, system_path, src], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0 and "created" in done.stdout, done.stderr[-3000:]
        assert eventually(lambda: all("from_elsewhere" in f for f in query().inputFiles()),
                           timeout_s=20)
        assert rows(query()) == vanilla(spark, query)
