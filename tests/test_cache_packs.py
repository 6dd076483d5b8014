"""Packs: a warm-up of many small files writes few cache files, each holding the rows of several
source files, still keyed per source file. Served results equal vanilla Spark's after packing,
after a packed file changed, was deleted or was appended to, and after one packed file was
evicted; a query reads only the packs holding the files it wants."""
from __future__ import annotations

import glob
import os
import time

import pytest
from pyspark.sql import functions as F

from accelerator.cache import warmup
from accelerator.cache.warmup import FILE_ID
from accelerator.operations.cache import CacheOperations
from tests.helpers import rows, session_conf, vanilla
from tests.test_cache_tier import CACHED_SCAN, cache_files, plan_of

FILES = 40


def small_files(spark, path, files=FILES, partitioned=False):
    """``files`` small Parquet files (10 rows each), under ``day=0..2`` when ``partitioned``."""
    df = spark.range(0, files * 10, numPartitions=files).select(
        F.col("id"), (F.col("id") % 7).alias("k"), (F.col("id") % 3).cast("int").alias("day"))
    if partitioned:
        df.repartition(files // 3, "day").write.partitionBy("day").parquet(path)
    else:
        df.drop("day").write.parquet(path)
    return sorted(glob.glob(os.path.join(path, "**", "*.parquet"), recursive=True))


def query(spark, src):
    return spark.read.parquet(src).filter(F.col("id") % 3 != 1).select("id", "k")


def test_many_small_files_make_few_cache_files_and_serve_identical_results(spark, hs,
                                                                           tmp_path, monkeypatch):
    src = str(tmp_path / "src")
    sources = small_files(spark, src)
    # the driver knows which pack files hold which file: no second job reads them back
    monkeypatch.setattr(warmup, "_members", lambda *a: pytest.fail("tags read back"))
    summary = hs.cache(spark.read.parquet(src)).collect()[0]
    assert summary.files == len(sources) == FILES
    data = os.path.join(spark.conf.get("spark.accelerator.system.path"), "_cache", "data")
    written = glob.glob(os.path.join(data, "**", "*.parquet"), recursive=True)
    # one pack file per task of the warm-up (local[2]: few), not one per source file
    assert 0 < len(written) <= spark.sparkContext.defaultParallelism * 2 < FILES
    q = query(spark, src)
    assert CACHED_SCAN in plan_of(q)
    served = cache_files(q, "_cache")
    assert served and len(served) == len(q.inputFiles()) <= len(written)
    assert rows(q) == vanilla(spark, lambda: query(spark, src))
    assert spark.read.parquet(src).count() == FILES * 10
    entries = hs.cacheEntries().collect()
    assert len(entries) == FILES and 0 < sum(e.bytes for e in entries)
    # each entry names exactly the pack files holding its rows (as the job's tasks read them)
    assert named_packs(spark) == held_packs(spark)


def held_packs(spark):
    """Per tag, the pack files holding rows of it, read back from the packs."""
    data = os.path.join(spark.conf.get("spark.accelerator.system.path"), "_cache", "data")
    held = {}
    packs = spark.read.option("recursiveFileLookup", "true").parquet(data)
    for r in packs.groupBy(F.input_file_name().alias("f"), FILE_ID).count().collect():
        held.setdefault(r[FILE_ID], set()).add(r["f"].replace("file://", "file:"))
    return held


def named_packs(spark):
    """Per tag, the pack files its entry names."""
    return {e.tag: {p for p, _ in e.files} for e in CacheOperations(spark).entries()}


def test_a_file_split_between_tasks_names_every_pack_file_holding_its_rows(spark, hs, tmp_path,
                                                                           monkeypatch):
    src = str(tmp_path / "csv")
    spark.range(0, 6000, numPartitions=2).select("id", (F.col("id") % 7).alias("k")) \
        .write.csv(src)   # two files of ~30 KB

    def read():
        return spark.read.schema("id long, k long").csv(src)

    monkeypatch.setattr(warmup, "_members", lambda *a: pytest.fail("tags read back"))
    with session_conf(spark, spark__sql__files__maxPartitionBytes="8192"):
        hs.cache(read())   # each file read in several splits, by several tasks
    named = named_packs(spark)
    assert named == held_packs(spark) and len(named) == 2
    assert all(len(files) > 1 for files in named.values())
    q = read().filter(F.col("k") != 3)
    assert CACHED_SCAN in plan_of(q)
    assert cache_files(q, "_cache") and not [f for f in q.inputFiles() if f.endswith(".csv")]
    assert rows(q) == vanilla(spark, lambda: read().filter(F.col("k") != 3))


def test_a_partitioned_source_packs_each_partition_apart(spark, hs, tmp_path):
    src = str(tmp_path / "src")
    small_files(spark, src, partitioned=True)

    def by_day(cond):
        return spark.read.parquet(src).filter(cond).select("id", "k", "day")

    hs.cache(spark.read.parquet(src))
    for cond in ("day = 1", "day >= 1", "id > 100"):
        q = by_day(cond)
        assert CACHED_SCAN in plan_of(q)
        assert rows(q) == vanilla(spark, lambda: by_day(cond))
    # a pack file holds one partition's rows, under its folder
    data = os.path.join(spark.conf.get("spark.accelerator.system.path"), "_cache", "data")
    written = glob.glob(os.path.join(data, "**", "*.parquet"), recursive=True)
    assert written and all(f"/day={d}/" in f for f in written for d in [f.split("/day=")[1][0]])
    assert {f.split("/day=")[1][0] for f in written} == {"0", "1", "2"}


def test_a_query_reads_only_the_packs_holding_its_files(spark, hs, tmp_path):
    src = str(tmp_path / "src")
    sources = small_files(spark, src)
    half = len(sources) // 2
    hs.cache(spark.read.parquet(*sources[:half]))   # two warm-ups: two packs
    hs.cache(spark.read.parquet(*sources[half:]))
    first = cache_files(spark.read.parquet(*sources[:half]), "_cache")
    second = cache_files(spark.read.parquet(*sources[half:]), "_cache")
    assert first and second and not set(first) & set(second)
    assert set(cache_files(spark.read.parquet(src), "_cache")) == set(first) | set(second)
    some = [sources[0], sources[-1]]
    q = spark.read.parquet(*some).select("id", "k")
    assert rows(q) == vanilla(spark, lambda: spark.read.parquet(*some).select("id", "k"))


def cache_branch_keeps(spark, paths, tags):
    """How a query over ``paths`` keeps its cache branch's rows, after checking it is served
    and answers as vanilla Spark: "all" (the packs read without their tag column), or whether
    it keeps whole packs by number and the files whose tags it lists."""
    def q():
        return spark.read.parquet(*paths).filter(F.col("id") % 3 != 1).select("id", "k")
    assert CACHED_SCAN in plan_of(q())
    assert rows(q()) == vanilla(spark, q)
    plan = q()._jdf.queryExecution().optimizedPlan().toString()
    if FILE_ID not in plan:
        return "all"
    return (f"shiftright({FILE_ID}" in plan,
            {name for name, tag in tags.items() if str(tag) in plan})


def test_a_pack_served_whole_is_kept_by_its_number_and_one_served_in_part_by_tags(
        spark, hs, tmp_path):
    """Planning does not grow with the files cached: a query serving every file of the packs it
    reads reads them whole, without their tag column; one serving every file of one pack and
    some of another keeps the first's rows by the pack's number, not a list of tags, and the
    second's (a query over some of its files, one evicted) by its served files' tags alone."""
    src = str(tmp_path / "src")
    sources = small_files(spark, src)
    half = len(sources) // 2
    hs.cache(spark.read.parquet(*sources[:half]))   # two warm-ups: two packs
    hs.cache(spark.read.parquet(*sources[half:]))
    tags = {os.path.basename(e.file_path): e.tag for e in CacheOperations(spark).entries()}
    names = [os.path.basename(f) for f in sources]
    assert len(tags) == FILES and len({t >> 32 for t in tags.values()}) == 2
    assert cache_branch_keeps(spark, [src], tags) == "all"
    assert cache_branch_keeps(spark, sources[half:], tags) == "all"
    assert cache_branch_keeps(spark, sources[:half + 3], tags) == \
        (True, set(names[half:half + 3]))
    assert cache_branch_keeps(spark, [sources[0], sources[-1]], tags) == \
        (False, {names[0], names[-1]})
    # a file listed twice is read from the source (twice, as Spark reads it)
    assert cache_branch_keeps(spark, [*sources[1:half], sources[1]], tags) == \
        (False, set(names[2:half]))
    hs.uncache(spark.read.parquet(sources[1]))
    with session_conf(spark, spark__accelerator__cache__deleteGraceSeconds="0"):
        hs.evictCache()   # its rows stay in the pack the others name
    assert cache_branch_keeps(spark, [src], tags) == \
        (True, {names[0], *names[2:half]})


def test_entries_not_counting_their_packs_files_are_kept_by_tags(spark, hs, tmp_path,
                                                                 monkeypatch):
    """Entries that do not record how many files their pack holds (written before it was
    recorded, or rows tagged with a tag no file was given) are served by their tags."""
    src = str(tmp_path / "src")
    sources = small_files(spark, src, files=6)
    packed = warmup.Packed
    monkeypatch.setattr(warmup, "Packed", lambda *fields: packed(*fields[:-1], None))
    hs.cache(spark.read.parquet(src))
    entries = CacheOperations(spark).entries()
    assert len(entries) == len(sources) and {e.pack_files for e in entries} == {None}
    tags = {os.path.basename(e.file_path): e.tag for e in entries}
    assert cache_branch_keeps(spark, [src], tags) == (False, set(tags))


def test_a_changed_deleted_or_appended_file_in_a_pack_is_never_served_stale(spark, hs,
                                                                             tmp_path):
    src = str(tmp_path / "src")
    sources = small_files(spark, src)
    hs.cache(spark.read.parquet(src))
    changed, deleted = sources[3], sources[5]
    time.sleep(0.01)   # another modification time
    spark.range(1000, 1033).select(F.col("id"), (F.col("id") % 7).alias("k")) \
        .coalesce(1).write.parquet(str(tmp_path / "other"))
    [replacement] = glob.glob(str(tmp_path / "other" / "*.parquet"))
    os.replace(replacement, changed)
    os.remove(deleted)
    for f in (changed, deleted):   # Hadoop's checksums of the old contents
        crc = os.path.join(os.path.dirname(f), f".{os.path.basename(f)}.crc")
        if os.path.exists(crc):
            os.remove(crc)
    spark.range(5000, 5010).select(F.col("id"), (F.col("id") % 7).alias("k")) \
        .write.mode("append").parquet(src)
    q = query(spark, src)
    assert CACHED_SCAN in plan_of(q)   # the other files still come from the pack
    assert rows(q) == vanilla(spark, lambda: query(spark, src))
    assert 1000 in {r[0] for r in rows(spark.read.parquet(src).select("id"))}
    # the changed file is read from the source, the deleted one from nowhere
    files = query(spark, src).inputFiles()
    assert "file:" + changed in files or changed in [f.replace("file://", "") for f in files]
    assert not [f for f in files if f.endswith(os.path.basename(deleted))]


def test_evicting_one_packed_file_keeps_the_pack_for_the_others(spark, hs, tmp_path):
    src = str(tmp_path / "src")
    sources = small_files(spark, src)
    hs.cache(spark.read.parquet(src))
    removed = hs.uncache(spark.read.parquet(sources[0])).collect()[0]
    assert removed.entries == 1
    with session_conf(spark, spark__accelerator__cache__deleteGraceSeconds="0"):
        hs.evictCache()   # collects the evicted entry, not the pack others still name
    q = query(spark, src)
    assert CACHED_SCAN in plan_of(q)
    assert sources[0] in [f.replace("file://", "").replace("file:", "") for f in q.inputFiles()]
    assert rows(q) == vanilla(spark, lambda: query(spark, src))
    assert len(hs.cacheEntries().collect()) == FILES - 1
    # once every file of the pack is gone, so is the pack
    hs.uncache(spark.read.parquet(src))
    with session_conf(spark, spark__accelerator__cache__deleteGraceSeconds="0"):
        hs.evictCache()
    data = os.path.join(spark.conf.get("spark.accelerator.system.path"), "_cache", "data")
    assert glob.glob(os.path.join(data, "**", "*.parquet"), recursive=True) == []
    assert rows(query(spark, src)) == vanilla(spark, lambda: query(spark, src))
