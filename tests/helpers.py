"""Comparing a query's rows with and without the accelerator; setting the system path and
settings; a low driver result limit; waiting for what background threads do; a test's own copy
of sources written once per module; a data-skipping index's statistics held in memory."""
from __future__ import annotations

import contextlib
import shutil
import time
from collections import Counter
from typing import Any

from accelerator import Hyperspace
from accelerator.query.session import conf_set


def rows(df):
    """The rows of ``df`` as sorted tuples."""
    return sorted(tuple(r) for r in df.collect())


def bag(df) -> Counter:
    """The rows of ``df`` as a multiset of tuples (rows holding nulls cannot be sorted)."""
    return Counter(tuple(r) for r in df.collect())


def vanilla(spark, build, of=rows):
    """Rows of the query built by ``build()`` with the accelerator disabled (then enabled again),
    as ``of`` gives them (sorted tuples: :func:`rows`)."""
    Hyperspace.disable(spark)
    try:
        return of(build())
    finally:
        Hyperspace.enable(spark)


def bucket_union(spark) -> bool:
    """Whether this Spark runs the accelerator's bucket union (4.1 and later: it needs Spark's
    partitioning-aware union RDD); on Spark 4.0, hybrid scans and delta files under the join
    rule go through Spark's Union, whose output the join shuffles."""
    return tuple(int(p) for p in spark.version.split(".")[:2]) >= (4, 1)


@contextlib.contextmanager
def using_system_path(spark, path: str):
    """Sets the accelerator system path on the session for the duration of the block."""
    with conf_set(spark, {"spark.accelerator.system.path": path}):
        yield path


def session_conf(spark, **settings: str):
    """Sets Spark settings (``spark__sql__x="1"`` for ``spark.sql.x``) for the block."""
    return conf_set(spark, {k.replace("__", "."): v for k, v in settings.items()})


@contextlib.contextmanager
def driver_result_limit(spark, limit: str):
    """spark.driver.maxResultSize set on the running SparkContext (each stage's task set reads
    it when it starts) for the duration of the block: a build that collects per-file or per-row
    data to the driver fails under it."""
    conf = spark.sparkContext._jsc.sc().conf()
    before = conf.getOption("spark.driver.maxResultSize")
    conf.set("spark.driver.maxResultSize", limit)
    try:
        yield
    finally:
        if before.isDefined():
            conf.set("spark.driver.maxResultSize", before.get())
        else:
            conf.remove("spark.driver.maxResultSize")


def eventually(condition, timeout_s: float = 20.0) -> bool:
    """Whether ``condition()`` becomes true within ``timeout_s`` (polled every 10 ms)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def own_copy(written: Any, tmp_path: Any, *names: str) -> list[str]:
    """Paths of a test's own copies (under ``tmp_path``) of the sources ``names`` its module's
    fixture wrote once with Spark under ``written``: the same files, each test free to change
    its copy, without a Spark job per test."""
    return [str(shutil.copytree(written / name, tmp_path / name)) for name in names]


def row_groups_of(rows: int) -> dict[str, str]:
    """Parquet write options that cut row groups of ``rows`` rows on every supported Spark:
    ``parquet.block.row.count.limit`` (Parquet 1.14+, Spark 4), and for Parquet 1.13 (Spark 3.5)
    a one-byte block size checked every ``rows`` rows."""
    return {"parquet.block.row.count.limit": str(rows), "parquet.block.size": "1",
            "parquet.page.size.row.check.min": str(rows),
            "parquet.page.size.row.check.max": str(rows)}


def stats_table(entries: dict, specs: list | None = None):
    """A data-skipping index's statistics of ``entries`` (path → FileEntry) held in memory, read
    as a query reads an index version's; ``specs`` by default one per sketched expression found
    (of the type first found, with a Bloom filter where a file has one)."""
    from indexes.skipping.stats import SketchSpec
    from indexes.skipping.store import arrow_stats
    from indexes.skipping.table import StatsTable

    if specs is None:
        types: dict[str, str] = {}
        for e in entries.values():
            for key, cs in e.stats.columns.items():
                types.setdefault(key, cs.type)
        blooms = {k for e in entries.values() for k, cs in e.stats.columns.items()
                  if cs.bloom is not None}
        specs = [SketchSpec(k, t, bloom_capacity=1 if k in blooms else None)
                 for k, t in types.items()]
    return StatsTable.of_stored(ArrowStats(arrow_stats(specs, entries)), specs)


class ArrowStats:
    """Statistics rows held in memory, read as ``indexes.skipping.store.StoredStats`` reads its
    files: an Arrow table of the stored columns (as ``arrow_stats`` makes them)."""

    def __init__(self, table: Any):
        self._table = table.combine_chunks()

    def read(self, columns: list[str] | None) -> Any:
        """The ``columns`` (those present; None: all) of every row."""
        if columns is None:
            return self._table
        names = set(self._table.column_names)
        return self._table.select([c for c in columns if c in names])

    def read_rows(self, column: str, rows: Any) -> Any:
        """One column at the sorted row numbers ``rows`` (numpy; None: every row)."""
        found = self._table.column(column).combine_chunks()
        return found if rows is None else found.take(rows)

    def column_bytes(self, column: str) -> int:
        """The bytes of one column in memory."""
        return self._table.column(column).nbytes
