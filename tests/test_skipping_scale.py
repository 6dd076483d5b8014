"""Data-skipping indexes at scale: builds whose Bloom filters never reach the driver (they
succeed under a ``spark.driver.maxResultSize`` smaller than the filters, which the driver-side
build of before exceeded), with pruning unchanged; statistics read from either layout."""
from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from accelerator import BloomFilterSketch, DataSkippingIndexConfig, MinMaxSketch
from indexes.description import SourceFile
from indexes.fs.memory import MemoryFs
from indexes.skipping.ir import Cmp, Lit, Sketched
from indexes.skipping.match import kept_files, kept_row_groups
from indexes.skipping.bloom import HashBloom
from indexes.skipping.stats import ColumnStats, FileStats, SketchSpec, hashes_of
from indexes.skipping.store import DATASET, FileEntry, encode
from indexes.skipping.table import StatsTable
from tests.helpers import driver_result_limit, rows, vanilla

#: each file's filter: ~1.2 MB with 25,000 values (2.5% full), which compress to more than a
#: quarter of the 1 MB result limit (a collect compresses)
CAPACITY = 1_000_000
PER_FILE = 25_000


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


def test_statistics_rows_in_any_order_read_with_each_file_s_row_groups():
    """Rows of a dataset whose writer left a file's row groups apart from its row are put back
    in order, their Bloom filters with them."""
    import random

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from indexes.skipping.store import RowGroup, decode, parquet_bytes

    spec = SketchSpec("k", "long", minmax=True, bloom_capacity=4, bloom_fpp=0.01)

    def stats(lo, hi):
        bloom = HashBloom.of_hashes(hashes_of([lo], "long"), spec.bloom_capacity, spec.bloom_fpp)
        return FileStats(5, {"k": ColumnStats("long", lo, hi, 0, None, bloom)})
    entries = {f"file:/t/{i}": FileEntry(10, 1, stats(i * 10, i * 10 + 9),
                                         (RowGroup(4, 6, stats(i * 10, i * 10 + 4)),
                                          RowGroup(6, 10, stats(i * 10 + 5, i * 10 + 9))))
               for i in range(30)}
    data = encode([spec], entries)
    table = pq.read_table(pa.BufferReader(data))
    order = list(range(table.num_rows))
    random.Random(5).shuffle(order)
    fs = MemoryFs()
    fs.mkdirs("memory:///v/stats")
    fs.write_bytes("memory:///v/stats/part-0.parquet", parquet_bytes(table.take(order)))
    read = StatsTable.read(fs, "memory:///v", [spec], DATASET)
    files = np.arange(len(read))
    got = dict(zip(read.paths(files), read.entries(files)))
    want = decode([spec], data)
    shown = lambda e: repr((e.size, e.mtime, e.stats.rows, [(g.start, g.end) for g in e.row_groups],  # noqa: E731
                            [(s.columns["k"].min, s.columns["k"].max, s.columns["k"].bloom.bits.tobytes())
                             for s in [e.stats] + [g.stats for g in e.row_groups]]))
    assert {p: shown(e) for p, e in got.items()} == {p: shown(e) for p, e in want.items()}
    condition = Cmp("=", Sketched("k", "long"), Lit(120, "long"))   # in 12's filter
    kept, found, _ = kept_files(condition, read, read.listing([[p, 10, 1] for p in entries]))
    assert kept == ["file:/t/12"] and len(found["file:/t/12"].row_groups) == 2
    assert len(kept_row_groups(condition, found, kept)["file:/t/12"]) == 1   # 125..129's filter


def test_footer_statistics_of_many_row_groups_never_reach_the_driver(spark, hs, tmp_path):
    """80 files of 60 row groups each, whose footers answer both min/max sketches: the
    footers are read by tasks, which keep each file's facts (the build of before collected
    them to the driver, over 128 KB of task results: it failed under this limit); the driver
    receives only which sketches every footer answered and how many files
    have several row groups. Files and row groups prune as before."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "groups"
    path.mkdir()
    for i in range(80):   # 6,000 rows each, ids in file order, v scattered
        ids = np.arange(i * 6000, (i + 1) * 6000, dtype=np.int64)
        pq.write_table(pa.table({"id": ids, "v": ((ids * 2_654_435_761) % 100_000).astype(np.int32)}),
                       path / f"part-{i:05d}.parquet", row_group_size=100)
    path = str(path)
    query = lambda: spark.read.parquet(path).where("id = 123456")  # noqa: E731
    with driver_result_limit(spark, "128k"):
        with pytest.raises(Exception, match="maxResultSize"):   # the limit bites: rows can't pass
            spark.read.parquet(path).where("id < 40000").collect()
        hs.createIndex(spark.read.parquet(path),
                       DataSkippingIndexConfig("ds_groups", MinMaxSketch("id"), MinMaxSketch("v")))
        entry = hs.context.lifecycle().get("ds_groups")
        assert entry.content["rowGroupFiles"] == 80
        assert sorted(entry.content["footerSketches"]) == ['col("id")', 'col("v")']
        assert entry.content["scannedSketches"] == []
        assert rows(query()) == vanilla(spark, query) and len(rows(query())) == 1
        assert len(query().inputFiles()) == 1
        ranged = lambda: spark.read.parquet(path).where("v < 50000 and id between 6000 and 17999")  # noqa: E731
        assert rows(ranged()) == vanilla(spark, ranged)
        assert len(ranged().inputFiles()) == 2
