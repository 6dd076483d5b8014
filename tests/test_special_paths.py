"""Sources (and system paths) under directory names holding characters URLs reserve: every
index kind is built, refreshed (full and incremental) and used, hybrid scan and ``hs.search``
included, with results identical to vanilla Spark. Spark gives files as URIs
(``_metadata.file_path``, ``inputFiles()``), the index log records Hadoop path strings: the
two must never be confused."""
from __future__ import annotations

import os
from urllib.parse import unquote, urlparse

import pytest

from accelerator import (
    BloomFilterSketch,
    DataSkippingIndexConfig,
    IndexConfig,
    MinMaxSketch,
    TextIndexConfig,
    ValueListSketch,
)
from indexes.source import file_uri, hadoop_path, local_path
from tests.helpers import rows, session_conf, using_system_path, vanilla

#: Hyperspace's own test directory name, and one with an escape sequence that decodes to
#: another valid name (``%25`` is ``%``) next to ``#`` and ``?``.
DIR_NAMES = {"hyperspace": "table ,.;'`~!@#$%^&()_+|\"<>", "url": "a#b?c%25d e"}
#: Partition values Spark escapes in directory names (``p=x%23y``), so the file paths hold
#: ``%`` sequences that a second decoding would change.
PARTS = ["x#y", "p q%20?"]
SCHEMA = "id long, part string, code string, message string"


def data(ids):
    return [(i, PARTS[i % 2], f"c{i % 10}",
             f"ERROR {i} code=ERR-{i:04d}" if i % 50 == 7 else f"INFO {i} served") for i in ids]


@pytest.fixture(params=sorted(DIR_NAMES), ids=sorted(DIR_NAMES))
def parent(request, spark, tmp_path):
    """A directory with a reserved-character name holding the system path (set while the test
    runs) and the sources."""
    d = tmp_path / DIR_NAMES[request.param]
    d.mkdir()
    with using_system_path(spark, str(d / "indexes")):
        yield d


@pytest.fixture
def source(spark, parent):
    """400 rows in 4 files per partition value, clustered by id, partitioned by ``part``."""
    path = str(parent / "src")
    (spark.createDataFrame(data(range(400)), SCHEMA).repartitionByRange(4, "id")
     .write.partitionBy("part").parquet(path))
    assert len(spark.read.parquet(path).inputFiles()) == 8
    return path


def append(spark, path, ids):
    spark.createDataFrame(data(ids), SCHEMA).coalesce(1).write.mode("append") \
        .partitionBy("part").parquet(path)


def same_rows(spark, build):
    got = rows(build())
    assert got == vanilla(spark, build)
    return got


def index_files(df, name: str) -> list[str]:
    return [f for f in df.inputFiles() if f"/{name}/v__=" in f]


def test_path_and_uri_conversions_are_hadoops(spark):
    """file_uri and hadoop_path agree with Hadoop's Path on every printable ASCII character,
    non-ASCII letters, spaces and controls, escapes, authorities and double slashes."""
    jvm = spark.sparkContext._jvm
    hadoop = jvm.org.apache.hadoop.fs.Path
    names = [*DIR_NAMES.values(), "".join(chr(i) for i in range(32, 127) if chr(i) not in "/:"),
             "é ü\u00a0x\u2028y\u0085z\U0001f600漢字\u3000\ufeff", "ctl\x01\x1f\x7f",
             "%41%zz%", "p%20q", "x:y", "a//b", "trail/", "{a,b}*[c]\\d"]
    paths = [p for n in names for p in (f"file:/tmp/{n}/f.parquet", f"hdfs://nn:8020/d/{n}",
                                        f"/abs/{n}", f"s3a://bucket/{n}/x")]
    paths += ["file:///tmp/x", "file://localhost/tmp/x", "hdfs://h/", "file:/"]
    for p in paths:
        uri = hadoop(p).toUri().toString()
        assert file_uri(p) == uri, p
        assert hadoop_path(uri) == hadoop(jvm.java.net.URI(uri)).toString() == hadoop(p).toString(), p
    assert local_path("file:/tmp/a#b?c%25 d") == "/tmp/a#b?c%25 d"
    assert local_path("file:///tmp/a#b") == local_path("file://localhost/tmp/a#b") == "/tmp/a#b"
    assert local_path("hdfs://nn/tmp/a") is None and local_path("file://host/tmp/a") is None


def covering_query(spark, path):
    return spark.read.parquet(path).where("code = 'c3'").select("id", "part")


def test_covering_index(spark, hs, source):
    hs.createIndex(spark.read.parquet(source), IndexConfig("ix", ["code"], ["id", "part"]))
    build = lambda: covering_query(spark, source)  # noqa: E731
    assert len(same_rows(spark, build)) == 40
    assert index_files(build(), "ix") == build().inputFiles()
    assert "/ix/v__=0" in build()._jdf.queryExecution().executedPlan().toString()
    append(spark, source, range(1000, 1020))               # hybrid scan over appended files
    got = same_rows(spark, build)
    assert (1003, PARTS[1]) in got and (1013, PARTS[1]) in got
    files = build().inputFiles()
    assert index_files(build(), "ix") and len(files) > len(index_files(build(), "ix"))
    hs.refreshIndex("ix", mode="incremental")
    assert len(same_rows(spark, build)) == 42 and index_files(build(), "ix") == build().inputFiles()
    hs.optimizeIndex("ix", mode="full")
    assert len(same_rows(spark, build)) == 42 and index_files(build(), "ix") == build().inputFiles()
    append(spark, source, range(2000, 2010))
    hs.refreshIndex("ix", mode="full")
    assert len(same_rows(spark, build)) == 43 and index_files(build(), "ix") == build().inputFiles()


def test_covering_index_with_lineage_drops_deleted_files(spark, hs, source):
    with session_conf(spark, spark__accelerator__index__lineage__enabled="true"):
        hs.createIndex(spark.read.parquet(source), IndexConfig("ix", ["code"], ["id", "part"]))
    build = lambda: covering_query(spark, source)  # noqa: E731
    (uri,) = [r[0] for r in spark.read.parquet(source).where("id = 3")
              .select("_metadata.file_path").collect()]
    os.remove(unquote(urlparse(uri).path))                 # a URI: decoded once
    spark.catalog.clearCache()
    got = same_rows(spark, build)                          # hybrid scan drops the file's rows
    assert (3, PARTS[1]) not in got and index_files(build(), "ix")
    hs.refreshIndex("ix", mode="incremental")
    assert same_rows(spark, build) == got and index_files(build(), "ix") == build().inputFiles()


def test_data_skipping_index(spark, hs, source):
    df = spark.read.parquet(source)
    hs.createIndex(df, DataSkippingIndexConfig(
        "ds", MinMaxSketch("id"), BloomFilterSketch("code", expectedDistinctCountPerFile=100),
        ValueListSketch("message", maxValues=200)))

    def check(condition: str, found: int, files: int) -> None:
        build = lambda: spark.read.parquet(source).where(condition)  # noqa: E731
        assert len(same_rows(spark, build)) == found
        assert len(build().inputFiles()) == files, (condition, build().inputFiles())

    assert hs.context.lifecycle().get("ds").content["footerSketches"], "id's min/max from footers"
    check("id = 57", 1, 2)                       # ids 0-99: one file in each partition
    check("code = 'c3' AND id < 100", 10, 1)     # odd ids only: one partition's file
    check("message = 'INFO 3 served'", 1, 1)
    append(spark, source, range(1000, 1010))     # one new file in each partition
    check("message = 'INFO 1003 served'", 1, 2)  # files the index does not know are read
    check("id = 57", 1, 4)
    hs.refreshIndex("ds", mode="incremental")
    assert hs.context.lifecycle().get("ds").content["sketchedFiles"] == 2
    check("message = 'INFO 1003 served'", 1, 1)
    check("id = 57", 1, 2)
    append(spark, source, range(2000, 2010))
    hs.refreshIndex("ds", mode="full")
    assert hs.context.lifecycle().get("ds").content["sketchedFiles"] == 12
    check("message = 'INFO 2003 served'", 1, 1)
    check("code = 'c3' AND id < 100", 10, 1)


@pytest.mark.parametrize("scoring", [False, True])
def test_text_index_and_search(spark, hs, source, scoring):
    df = spark.read.parquet(source)
    hs.createIndex(df, TextIndexConfig("txt", column="message", scoring=scoring))
    like = lambda: spark.read.parquet(source).where("message LIKE '%ERR-0107%'")  # noqa: E731
    assert len(same_rows(spark, like)) == 1 and len(like().inputFiles()) == 1
    assert sorted(r.id for r in hs.search(df, "txt", "err-0107 OR err-0257").collect()) == [107, 257]
    if scoring:
        scored = hs.search(df, "txt", "err-0107 OR err-0257", score=True).collect()
        assert sorted(r.id for r in scored) == [107, 257] and all(r.score > 0 for r in scored)
    append(spark, source, range(1000, 1010))
    stale = lambda: spark.read.parquet(source).where("message LIKE '%ERR-1007%'")  # noqa: E731
    assert len(same_rows(spark, stale)) == 1 and len(stale().inputFiles()) == 2   # + appended
    df = spark.read.parquet(source)
    assert sorted(r.id for r in hs.search(df, "txt", "err-1007 OR err-0107").collect()) == [107, 1007]
    hs.refreshIndex("txt", mode="incremental")
    assert len(same_rows(spark, stale)) == 1 and len(stale().inputFiles()) == 1
    if scoring:
        scored = hs.search(df, "txt", "err-1007 OR err-0107", score=True).collect()
        assert sorted(r.id for r in scored) == [107, 1007] and all(r.score > 0 for r in scored)
    append(spark, source, range(2000, 2010))
    hs.refreshIndex("txt", mode="full")
    assert hs.context.lifecycle().get("txt").content["indexedFiles"] == 12
    assert len(same_rows(spark, like)) == 1 and len(like().inputFiles()) == 1
    df = spark.read.parquet(source)
    assert sorted(r.id for r in hs.search(df, "txt", "err-1007 OR err-2007").collect()) == [1007, 2007]
