"""Sequences of source changes and index operations drawn with fixed seeds: after every step,
every query's rows equal vanilla Spark's, whatever the accelerator made of the step (hybrid
scan of appended, deleted and rewritten files, delta files, quick refresh records, compaction,
vacuumed versions, a deleted and restored index), on a partitioned and a non-partitioned
source."""
from __future__ import annotations

import glob
import os
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from accelerator import (
    AcceleratorError,
    BloomFilterSketch,
    DataSkippingIndexConfig,
    Hyperspace,
    IndexConfig,
    MinMaxSketch,
    TextIndexConfig,
    ValueListSketch,
)
from tests.helpers import session_conf

SCHEMA_A = "id long, k long, v string, s struct<x:int, y:string>, p int"
SCHEMA_B = "rid long, k2 long, w string"
WORDS = ["alpha", "beta", "Gamma ray", "delta-7", "ERR-42 boom", None]
INDEXES = ["ia", "ib", "ia_id", "sa", "ta"]


class Lake:
    """Two Parquet sources that grow, lose files and have files rewritten, with rows drawn
    from ``rnd``."""

    def __init__(self, spark, root: str, rnd: random.Random, partitioned: bool):
        self.spark, self.rnd, self.partitioned = spark, rnd, partitioned
        self.a, self.b = f"{root}/a", f"{root}/b"
        self.next_id = 0

    def _ids(self, n: int) -> range:
        self.next_id += n
        return range(self.next_id - n, self.next_id)

    def _key(self):
        return None if self.rnd.random() < 0.05 else self.rnd.randrange(60)

    def append_a(self, n: int, files: int = 1) -> None:
        r = self.rnd
        rows = [(i, self._key(), r.choice(WORDS),
                 None if r.random() < 0.05 else (r.randrange(5), r.choice(["a", "b", None])),
                 r.randrange(3)) for i in self._ids(n)]
        writer = self.spark.createDataFrame(rows, SCHEMA_A).repartition(files).write.mode("append")
        (writer.partitionBy("p") if self.partitioned else writer).parquet(self.a)

    def append_b(self, n: int, files: int = 1) -> None:
        rows = [(i, self._key(), f"w{i % 7}") for i in self._ids(n)]
        self.spark.createDataFrame(rows, SCHEMA_B).repartition(files).write.mode("append") \
            .parquet(self.b)

    def _pick(self, path: str) -> str | None:
        """One of the source's data files, its checksum file removed, when it has over two."""
        files = sorted(glob.glob(f"{path}/**/*.parquet", recursive=True))
        if len(files) <= 2:
            return None
        picked = self.rnd.choice(files)
        crc = os.path.join(os.path.dirname(picked), f".{os.path.basename(picked)}.crc")
        if os.path.exists(crc):
            os.remove(crc)
        return picked

    def delete_file(self, path: str) -> None:
        picked = self._pick(path)
        if picked is not None:
            os.remove(picked)

    def modify_file(self, path: str) -> None:
        """Rewrites a data file in place: its first half, with another key column."""
        picked = self._pick(path)
        if picked is not None:
            table = pq.read_table(picked)
            table = table.slice(0, table.num_rows // 2)
            key = table.schema.names[1]
            shifted = pa.array([None if x is None else x + 1 for x in table[key].to_pylist()],
                               type=table.schema.field(key).type)
            pq.write_table(table.set_column(1, key, shifted), picked)


def queries(spark, lake: Lake, k: int) -> dict:
    a = lambda: spark.read.parquet(lake.a)  # noqa: E731
    b = lambda: spark.read.parquet(lake.b)  # noqa: E731
    return {
        "lookup": lambda: a().filter(F.col("k") == k).select("v", "s.x", "id"),
        "join": lambda: a().join(b(), F.col("k") == F.col("k2")).select("k", "v", "w", "id"),
        "join, aggregated": lambda: (a().filter(F.col("k") > 10)
                                     .join(b(), F.col("k") == F.col("k2"))
                                     .groupBy("k").agg(F.count("*"), F.max("w"))),
        "id range": lambda: a().filter(F.col("id") < lake.next_id // 3).select("id", "k"),
        "like": lambda: a().filter(F.col("v").like("%ERR-42%")).select("id", "v"),
        "nested value": lambda: a().filter(F.col("s.y") == "b").select("id"),
    }


def collected(build) -> list[str]:
    """The rows of ``build()``, comparable whatever nulls they hold."""
    return sorted(repr(tuple(r)) for r in build().collect())


def check(spark, lake: Lake, when: str) -> None:
    for name, build in queries(spark, lake, lake.rnd.randrange(60)).items():
        got = collected(build)
        Hyperspace.disable(spark)
        try:
            expected = collected(build)
        finally:
            Hyperspace.enable(spark)
        assert got == expected, f"{name} after {when}"


def step(hs, lake: Lake) -> str:
    """One random change or index operation; what it was. An operation the accelerator
    refuses (a quick refresh of an index without lineage after a delete, say) is part of the
    sequence too: it must change nothing."""
    r = lake.rnd
    op, name = r.choice(["append a", "append b", "delete a", "delete b", "modify a", "modify b",
                         "refresh", "refresh", "optimize", "vacuum", "delete and restore"]), \
        r.choice(INDEXES)
    try:
        if op == "append a":
            lake.append_a(r.randrange(10, 60), r.randrange(1, 3))
        elif op == "append b":
            lake.append_b(r.randrange(10, 60))
        elif op.startswith("delete "):
            lake.delete_file(lake.a if op == "delete a" else lake.b)
        elif op.startswith("modify "):
            lake.modify_file(lake.a if op == "modify a" else lake.b)
        elif op == "refresh":
            mode = r.choice(["incremental", "quick", "full"])
            op = f"refresh {name} {mode}"
            hs.refreshIndex(name, mode=mode)
        elif op == "optimize":
            mode = r.choice(["quick", "full"])
            op = f"optimize {name} {mode}"
            hs.optimizeIndex(name, mode=mode)
        elif op == "vacuum":
            op = f"vacuum {name}"
            hs.vacuumIndex(name, retentionSeconds=0)
        else:
            op = f"delete and restore {name}"
            hs.deleteIndex(name)
            hs.restoreIndex(name)
    except AcceleratorError as refused:
        op += f" (refused: {refused})"
    return op


def run_sequence(spark, hs, root: str, seed: int, partitioned: bool, steps: int) -> None:
    """Two sources with five indexes, ``steps`` random steps, each followed by every query;
    then a full refresh of every index, after which the covering indexes serve the lookup and
    the join again."""
    lake = Lake(spark, root, random.Random(seed), partitioned)
    lake.append_a(300, 4)
    lake.append_b(200, 3)
    with session_conf(spark, spark__accelerator__index__lineage__enabled="true"):
        hs.createIndex(spark.read.parquet(lake.a), IndexConfig("ia", ["k"], ["v", "s.x", "id"]))
        hs.createIndex(spark.read.parquet(lake.b), IndexConfig("ib", ["k2"], ["w"]))
    hs.createIndex(spark.read.parquet(lake.a), IndexConfig("ia_id", ["id"], ["k"]))
    hs.createIndex(spark.read.parquet(lake.a), DataSkippingIndexConfig(
        "sa", MinMaxSketch("id"), BloomFilterSketch("v", 0.01, 100), ValueListSketch("s.y", 10)))
    hs.createIndex(spark.read.parquet(lake.a), TextIndexConfig("ta", column="v"))
    with session_conf(spark, spark__sql__autoBroadcastJoinThreshold="-1"):
        check(spark, lake, "creating the indexes")
        done = []
        for _ in range(steps):
            done.append(step(hs, lake))
            check(spark, lake, "; ".join(done))
        for name in INDEXES:
            hs.refreshIndex(name, mode="full")
        check(spark, lake, "; ".join(done) + "; full refreshes")
        lookup = queries(spark, lake, 5)
        assert any("/ia/" in f for f in lookup["lookup"]().inputFiles())
        plan = lookup["join"]()._jdf.queryExecution().executedPlan().toString()
        assert "Exchange" not in plan and "/ia/" in plan and "/ib/" in plan


@pytest.mark.parametrize("seed, partitioned", [(7, False), (8, True)])
def test_random_changes_and_index_operations_keep_every_result(spark, hs, tmp_path, seed,
                                                               partitioned):
    run_sequence(spark, hs, str(tmp_path), seed, partitioned, steps=8)
