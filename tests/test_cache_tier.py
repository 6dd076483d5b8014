"""The cache tier end to end in the shared local session: warm-ups of every file format, serving
with results identical to vanilla Spark, stale files, the demoter, TTL, NEVER markers, entries
merged per file, running queries and evictions, and the cache next to indexes."""
from __future__ import annotations

import json
import os
import time

import pytest
from pyspark.sql import functions as F

from accelerator import DataSkippingIndexConfig, IndexConfig, MinMaxSketch
from accelerator.cache.manifest import CacheManifest
from accelerator.cache.model import CacheCapacityError, CacheNeverError
from indexes.errors import InvalidIndexConfigError
from indexes.fs import HadoopFs
from tests.helpers import rows, session_conf, vanilla

CACHED_SCAN = "CachedFileIndex"


def plan_of(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def cache_files(df, cache_path) -> list[str]:
    return [f for f in df.inputFiles() if "/_cache/data/" in f or cache_path in f]


def events(spark, n=400, parts=4):
    """Rows with a nested struct and a partition column ``day``."""
    return (spark.range(0, n, numPartitions=parts)
            .select(F.col("id"),
                    (F.col("id") % 3).cast("int").alias("day"),
                    F.concat(F.lit("user-"), (F.col("id") % 17).cast("string")).alias("name"),
                    F.struct((F.col("id") * 2).alias("x"),
                             F.when(F.col("id") % 5 == 0, None).otherwise(F.lit("s")).alias("y"))
                    .alias("nested"),
                    (F.col("id") / 7.0).alias("score")))


def write(spark, fmt, path, partitioned=True, compression=None):
    df = events(spark)
    if fmt == "csv":   # CSV holds no structs
        df = df.withColumn("nested_x", F.col("nested.x")).drop("nested")
    writer = df.write.mode("overwrite")
    if partitioned:
        writer = writer.partitionBy("day")
    if compression:
        writer = writer.option("compression", compression)
    if fmt == "csv":
        writer = writer.option("header", "true")
    writer.format(fmt).save(path)


def read(spark, fmt, path):
    reader = spark.read.format(fmt)
    if fmt == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    return reader.load(path)


FORMATS = [("parquet", True, None), ("json", True, None), ("json", False, "gzip"),
           ("csv", True, None), ("csv", False, "gzip"), ("orc", False, None)]


@pytest.mark.parametrize("fmt,partitioned,compression", FORMATS,
                         ids=[f"{f}-{'part' if p else 'flat'}-{c or 'plain'}" for f, p, c in FORMATS])
@pytest.mark.compat
def test_cached_files_serve_identical_results(spark, hs, tmp_path, fmt, partitioned, compression):
    src = str(tmp_path / "src")
    write(spark, fmt, src, partitioned, compression)
    df = read(spark, fmt, src)
    wide = "nested" if fmt != "csv" else "nested_x"
    cols = ["id", "name", wide] + (["day"] if partitioned else [])

    def query():
        q = read(spark, fmt, src).filter(F.col("id") % 4 == 1)
        return q.select(*cols, (F.col(wide + (".x" if fmt != "csv" else "")) + 1).alias("x1"))

    expected = vanilla(spark, query)
    summary = hs.cache(df.select("id", "name", wide)).collect()[0]
    assert summary.files == len(df.inputFiles()) and summary.bytesWritten > 0
    assert summary.bytesRead == sum(os.path.getsize(f.replace("file://", "").replace("file:", ""))
                                    for f in df.inputFiles())
    entries = hs.cacheEntries().collect()
    assert len(entries) == summary.files and {e.state for e in entries} == {"ACTIVE"}
    assert sorted(entries[0].columns) == sorted(["id", "name", wide])
    q = query()
    assert CACHED_SCAN in plan_of(q)
    assert rows(q) == expected
    served = cache_files(q, "_cache")
    assert served and all(f.endswith(".parquet") for f in served)
    assert not [f for f in q.inputFiles() if f not in served]   # every file is cached
    # aggregates and a query of one column are served too
    assert rows(read(spark, fmt, src).groupBy("name").agg(F.sum("id"))) == vanilla(
        spark, lambda: read(spark, fmt, src).groupBy("name").agg(F.sum("id")))
    assert read(spark, fmt, src).count() == 400


@pytest.mark.compat
def test_partition_pruning_and_partial_cache(spark, hs, tmp_path):
    src = str(tmp_path / "src")
    write(spark, "json", src)
    hs.cache(spark.read.json(src).filter("day = 1").select("id", "nested"))
    entries = hs.cacheEntries().collect()
    assert entries and all("/day=1/" in e.file for e in entries)

    def query(day_filter):
        return spark.read.json(src).filter(day_filter).select("id", "nested.x", "day")

    for cond in ("day = 1", "day >= 1", "id > 100"):
        q = query(cond)
        assert rows(q) == vanilla(spark, lambda: query(cond))
        assert CACHED_SCAN in plan_of(q)
    # partitions without cached files: the cached scan's partition filter lists none of them
    assert rows(query("day = 2")) == vanilla(spark, lambda: query("day = 2"))


def test_a_column_the_entry_lacks_reads_the_source(spark, hs, tmp_path):
    src = str(tmp_path / "src")
    write(spark, "json", src, partitioned=False)
    hs.cache(spark.read.json(src), columns=["id"])
    q = spark.read.json(src).select("id", "name")
    assert CACHED_SCAN not in plan_of(q)
    assert rows(q) == vanilla(spark, lambda: spark.read.json(src).select("id", "name"))
    reasons = hs.whyNot(q, "cache", redirectFunc=lambda s: None)
    assert [r.code for r in reasons] == ["NOT_SERVED"] or \
        {r.code for r in reasons} == {"MISSING_COLUMNS"}
    # a later warm-up of the other column merges both into one entry per file
    files = len(spark.read.json(src).inputFiles())
    hs.cache(spark.read.json(src).select("name"))
    active = [e for e in hs.cacheEntries().collect() if e.state == "ACTIVE"]
    assert len(active) == files and all(sorted(e.columns) == ["id", "name"] for e in active)
    assert CACHED_SCAN in plan_of(spark.read.json(src).select("id", "name"))
    assert rows(spark.read.json(src).select("id", "name")) == vanilla(
        spark, lambda: spark.read.json(src).select("id", "name"))


def _json_files(src):
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs
                  if f.endswith(".json"))


@pytest.mark.parametrize("change", ["same size, new mtime", "same mtime, new size"])
def test_a_file_rewritten_in_place_is_read_from_the_source(spark, hs, tmp_path, change):
    src = str(tmp_path / "src")
    write(spark, "json", src, partitioned=False)
    hs.cache(spark.read.json(src))
    target = _json_files(src)[0]
    crc = os.path.join(os.path.dirname(target), f".{os.path.basename(target)}.crc")
    if os.path.exists(crc):
        os.remove(crc)   # the local file system's checksum of the old content
    stat = os.stat(target)
    lines = open(target).read().splitlines()
    first = json.loads(lines[0])
    if change == "same size, new mtime":
        first["name"] = first["name"][::-1]            # same length
        lines[0] = json.dumps(first, separators=(",", ":"))
        open(target, "w").write("\n".join(lines) + "\n")
        assert os.path.getsize(target) == stat.st_size
        os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    else:
        lines.append(json.dumps({"id": 999999, "name": "new"}))
        open(target, "w").write("\n".join(lines) + "\n")
        os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        assert os.path.getsize(target) != stat.st_size
    q = spark.read.json(src).select("id", "name", "nested")
    assert rows(q) == vanilla(spark, lambda: spark.read.json(src).select("id", "name", "nested"))
    assert CACHED_SCAN in plan_of(q)                    # the other files still are served
    assert not any(os.path.basename(target) in f for f in cache_files(q, "_cache"))
    assert any(os.path.basename(target) in f for f in q.inputFiles())
    reasons = {r.code: r.reason for r in hs.whyNot(q, "cache", redirectFunc=lambda s: None)}
    assert reasons["STALE"].startswith("1 files")
    # the next demoter run replaces nothing by itself, but a new warm-up supersedes the stale entry
    hs.cache(spark.read.json(src))
    active = [e for e in hs.cacheEntries().collect() if e.state == "ACTIVE"]
    assert len(active) == len(_json_files(src))


@pytest.mark.compat
def test_demoter_evicts_lowest_priority_first_and_never_always(spark, hs, tmp_path):
    sources = {}
    for level in ("LOW", "MEDIUM", "HIGH", "ALWAYS"):
        path = str(tmp_path / level)
        spark.range(0, 200, numPartitions=1).selectExpr("id", "id * 2 AS v") \
            .write.parquet(path)
        sources[level] = path
        hs.cache(spark.read.parquet(path), priority=level)
    sizes = {e.source.rsplit("/", 1)[1]: e.bytes for e in hs.cacheEntries().collect()}
    assert set(sizes) == set(sources)
    total = sum(sizes.values())
    # usage just above 90%: the demoter evicts LOW, then MEDIUM, ... until below 80%
    max_bytes = int(total / 0.91)
    with session_conf(spark, spark__accelerator__cache__maxBytes=str(max_bytes)):
        evicted = hs.evictCache().collect()
        stats = hs.cacheStats().collect()[0]
    order = [e.source.rsplit("/", 1)[1] for e in evicted]
    needed, left, expected = 0.8 * max_bytes, total, []
    for level in ("LOW", "MEDIUM", "HIGH"):
        if left < needed:
            break
        expected.append(level)
        left -= sizes[level]
    assert order == expected and {e.reason for e in evicted} == {"SPACE"}
    assert stats.capacityBytes == max_bytes and stats.usedBytes == left
    assert stats.evictions == len(expected)
    states = {e.source.rsplit("/", 1)[1]: e.state for e in hs.cacheEntries().collect()}
    assert states["ALWAYS"] == "ACTIVE" and all(states[lv] == "EVICTED" for lv in expected)
    q = spark.read.parquet(sources["LOW"])
    assert CACHED_SCAN not in plan_of(q)
    assert {r.code for r in hs.whyNot(q, "cache", redirectFunc=lambda s: None)} == {"EVICTED"}
    assert CACHED_SCAN in plan_of(spark.read.parquet(sources["ALWAYS"]))
    # ALWAYS entries must fit: more than the cache holds is refused, naming the numbers
    with session_conf(spark, spark__accelerator__cache__maxBytes="10"):
        with pytest.raises(CacheCapacityError, match=r"ALWAYS.*size is 10 bytes"):
            hs.cache(spark.read.parquet(sources["LOW"]), priority="ALWAYS")


def test_ttl_expiry_and_grace_before_delete(spark, hs, tmp_path):
    src = str(tmp_path / "src")
    spark.range(0, 50, numPartitions=2).write.parquet(src)
    hs.cache(spark.read.parquet(src), ttl="PT1S")
    planned = spark.read.parquet(src).filter("id > 10")
    assert CACHED_SCAN in plan_of(planned)             # planned before the eviction
    time.sleep(1.2)
    evicted = hs.evictCache().collect()
    assert len(evicted) == 2 and {e.reason for e in evicted} == {"EXPIRED"}
    assert {e.state for e in hs.cacheEntries().collect()} == {"EVICTED"}
    # the planned query still reads its (not yet deleted) cached files
    assert rows(planned) == [(i,) for i in range(11, 50)]
    assert CACHED_SCAN not in plan_of(spark.read.parquet(src).filter("id > 10"))
    with session_conf(spark, spark__accelerator__cache__deleteGraceSeconds="0"):
        hs.evictCache()
    assert hs.cacheEntries().collect() == []
    cache_data = os.path.join(spark.conf.get("spark.accelerator.system.path"), "_cache", "data")
    assert not os.path.exists(cache_data) or os.listdir(cache_data) == []


def test_never_marker_refuses_until_uncache(spark, hs, tmp_path):
    src = str(tmp_path / "src")
    spark.range(0, 30, numPartitions=2).write.parquet(src)
    hs.cache(spark.read.parquet(src))
    hs.cache(spark.read.parquet(src), priority="NEVER")
    assert {e.state for e in hs.cacheEntries().collect()} == {"EVICTED"}
    assert CACHED_SCAN not in plan_of(spark.read.parquet(src))
    with pytest.raises(CacheNeverError, match="priority NEVER.*marker"):
        hs.cache(spark.read.parquet(src))
    assert hs.uncache(spark.read.parquet(src)).collect()[0].entries == 0
    hs.cache(spark.read.parquet(src))
    assert CACHED_SCAN in plan_of(spark.read.parquet(src))
    removed = hs.uncache(spark.read.parquet(src)).collect()[0]
    assert removed.entries == 2 and removed.bytes > 0
    assert CACHED_SCAN not in plan_of(spark.read.parquet(src))


def test_bad_requests_get_clear_errors(spark, hs, tmp_path):
    src = str(tmp_path / "src")
    write(spark, "json", src, partitioned=True)
    df = spark.read.json(src)
    with pytest.raises(InvalidIndexConfigError, match="invalid priority 'URGENT'.*ALWAYS, HIGH"):
        hs.cache(df, priority="URGENT")
    with pytest.raises(InvalidIndexConfigError, match="invalid TTL 'P1M'.*months"):
        hs.cache(df, ttl="P1M")
    with pytest.raises(InvalidIndexConfigError, match="no such data column.*data columns are"):
        hs.cache(df, columns=["missing"])
    with pytest.raises(InvalidIndexConfigError, match="partition column"):
        hs.cache(df, columns=["day"])
    strict = spark.read.option("mode", "DROPMALFORMED").json(src)
    with pytest.raises(InvalidIndexConfigError, match="mode=DROPMALFORMED"):
        hs.cache(strict)
    assert hs.cacheEntries().collect() == []


def test_nested_field_request_caches_its_top_level_column(spark, hs, tmp_path):
    src = str(tmp_path / "src")
    write(spark, "json", src, partitioned=False)
    hs.cache(spark.read.json(src), columns=["nested.x"])
    assert {tuple(e.columns) for e in hs.cacheEntries().collect()} == {("nested",)}
    def query():
        return spark.read.json(src).filter("nested.x > 100") \
            .select(F.coalesce("nested.y", F.lit("-")))

    assert CACHED_SCAN in plan_of(query())
    assert rows(query()) == vanilla(spark, query)


@pytest.mark.compat
def test_hits_stats_and_explain(spark, hs, tmp_path):
    src = str(tmp_path / "src")
    write(spark, "json", src, partitioned=False)
    files = len(spark.read.json(src).inputFiles())   # planned, like every query: before caching
    hs.cache(spark.read.json(src).select("id"))
    for _ in range(3):
        spark.read.json(src).filter("id > 3").select("id").collect()
    spark.read.json(src).select("name").collect()            # a miss per file
    stats = hs.cacheStats().collect()[0]
    assert stats.entries == files and stats.hits == 3 * files and stats.misses == files
    assert stats.bytesServed == 3 * stats.usedBytes
    assert all(e.hits == 3 for e in hs.cacheEntries().collect())
    text = hs.explain(spark.read.json(src).select("id"), redirectFunc=lambda s: None)
    assert "cache [APPLIED]" in text and f"{files} files" in text and CACHED_SCAN in text
    # explain does not count as a use
    assert hs.cacheStats().collect()[0].hits == 3 * files
    # the demoter folds the usage (into one version of the totals): nothing lost or evicted
    assert hs.evictCache().count() == 0
    assert hs.cacheStats().collect()[0].hits == 3 * files
    assert all(e.hits == 3 for e in hs.cacheEntries().collect())


def test_entries_name_the_root_each_file_was_read_from(spark, hs, tmp_path):
    src = str(tmp_path / "src")
    write(spark, "parquet", src, partitioned=False)
    fs = HadoopFs(spark)
    files = sorted(fs.qualify(f) for f in spark.read.parquet(src).inputFiles())
    assert len(files) > 2
    hs.cache(spark.read.parquet(*files[:2]))   # files named one by one: each is a root
    hs.cache(spark.read.parquet(src))
    source = {e.file: e.source for e in hs.cacheEntries().collect()}
    assert sorted(source) == files
    assert [source[f] for f in files[:2]] == files[:2]
    assert {source[f] for f in files[2:]} == {fs.qualify(src)}


def test_cache_after_data_skipping_and_index_wins(spark, hs, tmp_path):
    src = str(tmp_path / "src")
    spark.range(0, 400, numPartitions=4).selectExpr("id", "id % 7 AS k", "cast(id AS string) AS s") \
        .write.parquet(src)
    hs.createIndex(spark.read.parquet(src), DataSkippingIndexConfig("ds", MinMaxSketch("id")))
    hs.cache(spark.read.parquet(src))

    def lookup():
        return spark.read.parquet(src).filter("id BETWEEN 10 AND 20").select("id", "s")

    q = lookup()
    assert CACHED_SCAN in plan_of(q)
    used = [r for r in hs.whyNot(q, redirectFunc=lambda s: None) if r.code == "APPLIED"]
    assert [r.index for r in used] == ["ds", "cache"]
    assert rows(q) == vanilla(spark, lookup)
    assert len(q.inputFiles()) == 1                       # one file kept, read from the cache
    assert cache_files(q, "_cache") == q.inputFiles()
    hs.createIndex(spark.read.parquet(src), IndexConfig("cov", ["k"], ["id"]))
    q = spark.read.parquet(src).filter("k = 3").select("id")
    assert CACHED_SCAN not in plan_of(q)
    reasons = hs.whyNot(q, "cache", redirectFunc=lambda s: None)
    assert [r.code for r in reasons] == ["INDEX_APPLIED"] and "'cov'" in reasons[0].reason
    assert rows(q) == vanilla(spark, lambda: spark.read.parquet(src).filter("k = 3").select("id"))


def test_input_file_functions_read_the_source(spark, hs, tmp_path):
    src = str(tmp_path / "src")
    spark.range(0, 20, numPartitions=2).write.parquet(src)
    hs.cache(spark.read.parquet(src))
    q = spark.read.parquet(src).select("id", F.input_file_name().alias("f"))
    assert CACHED_SCAN not in plan_of(q)
    assert all("/_cache/" not in r.f for r in q.collect())
    meta = spark.read.parquet(src).select("id", "_metadata.file_path")
    assert CACHED_SCAN not in plan_of(meta)
    assert all("/_cache/" not in r.file_path for r in meta.collect())


def test_other_processes_entries_are_seen_within_refresh(spark, hs, tmp_path):
    src = str(tmp_path / "src")
    spark.range(0, 20, numPartitions=2).write.parquet(src)
    hs.cache(spark.read.parquet(src))
    assert CACHED_SCAN in plan_of(spark.read.parquet(src))
    cache = os.path.join(spark.conf.get("spark.accelerator.system.path"), "_cache")
    other = CacheManifest(HadoopFs(spark), HadoopFs(spark).qualify(cache))
    other.evict(other.entries())                          # as another process would
    with session_conf(spark, spark__accelerator__cache__refreshSeconds="0.2"):
        deadline = time.time() + 10
        while CACHED_SCAN in plan_of(spark.read.parquet(src)) and time.time() < deadline:
            time.sleep(0.1)
        assert CACHED_SCAN not in plan_of(spark.read.parquet(src))


def test_plan_shapes_keep_every_column_they_need(spark, hs, tmp_path):
    src = str(tmp_path / "src")
    spark.range(0, 300, numPartitions=3).selectExpr("id", "id % 7 AS k", "cast(id AS string) AS s") \
        .write.parquet(src)
    hs.cache(spark.read.parquet(src).select("id", "k"))

    def df():
        return spark.read.parquet(src)

    shapes = {   # query → whether the entries (id, k) can serve it
        "filter at the root (all columns)": (lambda: df().filter("k = 1"), False),
        "projected filter": (lambda: df().select("id", "k").filter("k = 1"), True),
        "union by position": (lambda: df().select("id").union(df().select("k")), True),
        "union of whole relations": (lambda: df().union(df()), False),
        "self-join": (lambda: df().alias("a").join(df().alias("b"), "id")
                      .select("a.k", "b.k"), True),
        # the left side needs s (read from the source), the right side only id (cached)
        "join passing columns through": (lambda: df().join(df().select("id"), "id"), True),
        "aggregate": (lambda: df().groupBy("k").agg(F.count("*"), F.max("id")), True),
        "count": (lambda: df().count and df().groupBy().count(), True),
        "distinct, sort, limit": (lambda: df().select("k").distinct().orderBy("k").limit(3), True),
        "window": (lambda: df().select("id", "k", F.row_number().over(
            __import__("pyspark.sql.window", fromlist=["Window"]).Window
            .partitionBy("k").orderBy("id")).alias("n")), True),
    }
    for name, (build, served) in shapes.items():
        assert rows(build()) == vanilla(spark, build), name
        assert (CACHED_SCAN in plan_of(build())) == served, name


def test_a_later_request_raises_priority_and_ttl_but_never_lowers_them(spark, hs, tmp_path):
    src = str(tmp_path / "src")
    spark.range(0, 30, numPartitions=2).write.parquet(src)

    def terms():
        return {(e.priority, e.ttl) for e in hs.cacheEntries().collect()}

    hs.cache(spark.read.parquet(src), priority="LOW", ttl="PT1H")
    assert terms() == {("LOW", "PT1H")}
    hs.cache(spark.read.parquet(src), priority="high", ttl="PT30M")
    assert terms() == {("HIGH", "PT1H")}
    summary = hs.cache(spark.read.parquet(src), priority="MEDIUM", ttl="P1D").collect()[0]
    assert terms() == {("HIGH", "P1D")} and summary.bytesWritten == 0
    hs.cache(spark.read.parquet(src), ttl=None)             # no TTL is the longest
    assert terms() == {("HIGH", None)}
    assert len(hs.cacheEntries().collect()) == 2            # no data written again


def test_why_not_of_the_cache_before_anything_is_cached(spark, hs, tmp_path):
    src = str(tmp_path / "src")
    write(spark, "parquet", src, partitioned=False)
    q = spark.read.parquet(src).where("id = 3")
    shown: list[str] = []
    reasons = hs.whyNot(q, "cache", redirectFunc=shown.append)
    assert [(r.index, r.code) for r in reasons] == [("cache", "NOT_CACHED")]
    assert "hs.cache(df)" in reasons[0].reason and src in reasons[0].source
    assert shown[0].startswith("cache [NOT_CACHED] ")
    with session_conf(spark, spark__accelerator__cache__enabled="false"):
        assert [r.code for r in hs.whyNot(q, "cache", redirectFunc=lambda s: None)] == [
            "DISABLED"]
    assert [r.code for r in hs.whyNot(spark.range(3), "cache", redirectFunc=lambda s: None)] == [
        "NO_FILE_SOURCE"]
