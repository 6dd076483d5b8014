"""Data-skipping indexes at scale: builds whose Bloom filters never reach the driver (they
succeed under a ``spark.driver.maxResultSize`` smaller than the filters, which the driver-side
build of before exceeded), with pruning unchanged; statistics read from either layout."""
from __future__ import annotations

import contextlib

from pyspark.sql import functions as F

from accelerator import BloomFilterSketch, DataSkippingIndexConfig, MinMaxSketch
from indexes.description import SourceFile
from indexes.fs.memory import MemoryFs
from indexes.skipping.ir import Cmp, Lit, Sketched
from indexes.skipping.match import kept_files
from indexes.skipping.stats import ColumnStats, FileStats, SketchSpec
from indexes.skipping.store import DATASET, FileEntry, encode
from indexes.skipping.table import StatsTable
from tests.helpers import rows, vanilla

#: each file's filter: ~1.2 MB with 25,000 values (2.5% full), which compress to more than a
#: quarter of the 1 MB result limit (a collect compresses)
CAPACITY = 1_000_000
PER_FILE = 25_000


@contextlib.contextmanager
def driver_result_limit(spark, limit: str):
    """spark.driver.maxResultSize set on the running SparkContext (each stage's task set reads
    it when it starts) for the duration of the block."""
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


def _write(spark, path: str, first: int, files: int) -> None:
    (spark.range(first, first + PER_FILE * files, 1, files)
     .select("id", F.concat(F.lit("s"), F.col("id").cast("string")).alias("session"))
     .write.mode("append").parquet(path))


def test_bloom_filters_larger_than_the_driver_result_limit_build_and_prune(spark, hs, tmp_path):
    path = str(tmp_path / "sessions")
    _write(spark, path, 0, 4)
    config = DataSkippingIndexConfig(
        "ds_sessions", BloomFilterSketch("session", expectedDistinctCountPerFile=CAPACITY),
        MinMaxSketch("id"))
    with driver_result_limit(spark, "1m"):
        hs.createIndex(spark.read.parquet(path), config)
        query = lambda: spark.read.parquet(path).where("session = 's205'")  # noqa: E731
        assert rows(query()) == vanilla(spark, query) == [(205, "s205")]
        assert len(query().inputFiles()) == 1
        _write(spark, path, 4 * PER_FILE, 1)              # one new file
        hs.refreshIndex("ds_sessions", mode="incremental")
        entry = hs.context.lifecycle().get("ds_sessions")
        assert (entry.content["reusedFiles"], entry.content["sketchedFiles"]) == (4, 1)
        late = lambda: spark.read.parquet(path).where("session in ('s205', 's100010')")  # noqa: E731
        assert rows(late()) == vanilla(spark, late) == [(205, "s205"), (100010, "s100010")]
        assert len(late().inputFiles()) == 2
        assert entry.content["statsLayout"] == "dataset" and entry.content["sizeInBytes"] > 0


def test_statistics_of_the_single_file_layout_read_as_the_dataset():
    specs = [SketchSpec("k", "long", minmax=True)]
    entries = {f"file:/t/{i}": FileEntry(10, 1, FileStats(5, {"k": ColumnStats("long", i * 10, i * 10 + 9, 0)}))
               for i in range(50)}
    fs = MemoryFs()
    fs.write_bytes("memory:///old/stats.parquet", encode(specs, entries))
    fs.mkdirs("memory:///new/stats")
    fs.write_bytes("memory:///new/stats/part-0.parquet", encode(specs, dict(list(entries.items())[:20])))
    fs.write_bytes("memory:///new/stats/part-1.parquet", encode(specs, dict(list(entries.items())[20:])))
    listing = [[p, 10, 1] for p in entries]
    condition = Cmp(">=", Sketched("k", "long"), Lit(455, "long"))
    kept = [kept_files(condition, t, t.listing(listing))[0] for t in (
        StatsTable.read(fs, "memory:///old", specs, None),
        StatsTable.read(fs, "memory:///new", specs, DATASET))]
    assert kept[0] == kept[1] == [f"file:/t/{i}" for i in range(45, 50)]


def test_an_incremental_refresh_reuses_rows_of_the_single_file_layout(spark, tmp_path):
    """The previous version's rows of unchanged files, read by Spark from the layout of before
    (one stats.parquet, older ones without the row-group columns), in the columns written now."""
    import pyarrow.parquet as pq

    from indexes.skipping.write import reused_stats

    specs = [SketchSpec("k", "long", minmax=True), SketchSpec("s", "string", max_values=4)]
    entries = {f"file:/t/{i}": FileEntry(10, 1, FileStats(5, {
        "k": ColumnStats("long", i, i + 9, 0), "s": ColumnStats("string", "a", "b", 1, frozenset({"a", "b"}))}))
        for i in range(3)}
    version = tmp_path / "v__=0"
    version.mkdir()
    (version / "stats.parquet").write_bytes(encode(specs, entries))
    old = pq.read_table(version / "stats.parquet").drop_columns(["row_group", "start", "end"])
    pq.write_table(old, version / "older.parquet")
    for name in ("stats.parquet", "older.parquet"):
        (version / "stats.parquet").write_bytes((version / name).read_bytes())
        previous = type("Entry", (), {"content": {"path": f"file:{version}"}})()
        keep = [SourceFile("file:/t/0", 10, 1), SourceFile("file:/t/2", 10, 2)]  # /t/2 changed
        found = reused_stats(spark, previous, specs, keep).collect()
        assert [(r.file, r.s0_min, r.s0_max, r.row_group, sorted(r.s1_values)) for r in found] == [
            ("file:/t/0", 0, 9, None, ["a", "b"])]
