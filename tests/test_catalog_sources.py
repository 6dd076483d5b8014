"""Sources beyond directories read by path: tables of Spark's session catalog (managed,
external, partitioned) and glob patterns. Every index kind is built over them, answers
DataFrame and SQL queries with vanilla Spark's rows, handles appended files (hybrid scan,
incremental refresh), and a dropped or renamed table is detected."""
from __future__ import annotations

import os
import uuid

import pytest
from pyspark.sql import functions as F

from accelerator import (
    DataSkippingIndexConfig,
    Hyperspace,
    IndexConfig,
    MinMaxSketch,
    TextIndexConfig,
)
from indexes.description import SourceDescription
from indexes.errors import SourceNotFoundError
from indexes.source import same_source, source_name, table_change
from tests.helpers import rows, vanilla

SCHEMA = "id long, p string, name string, msg string"


def data(spark, ids):
    return spark.createDataFrame(
        [(i, f"p{i % 3}", f"n{i}", f"event {'boom' if i in (7, 2007) else 'ok'} number {i}")
         for i in ids], SCHEMA)


@pytest.fixture
def db(spark):
    """A fresh database, dropped with its tables at the end of the test."""
    name = f"acc_{uuid.uuid4().hex[:10]}"
    spark.sql(f"CREATE DATABASE {name}")
    yield name
    spark.sql(f"DROP DATABASE IF EXISTS {name} CASCADE")


def make_table(spark, db, kind, tmp_path):
    """A table of 300 rows in 6 files: ``managed``, ``external`` (over a path) or
    ``partitioned`` (managed, by ``p``); returns its name."""
    table = f"{db}.events"
    df = data(spark, range(300)).repartitionByRange(6, "id")
    if kind == "managed":
        df.write.saveAsTable(table)
    elif kind == "partitioned":
        df.write.partitionBy("p").saveAsTable(table)
    else:
        path = str(tmp_path / "external")
        df.write.parquet(path)
        spark.sql(f"CREATE TABLE {table} USING parquet LOCATION '{path}'")
    return table


def append_rows(spark, table, ids):
    """Inserts rows (one new file per partition), columns in the table's order."""
    data(spark, ids).select(spark.table(table).columns).coalesce(1).write.insertInto(table)


def index_files(df, index):
    return [f for f in df.inputFiles() if f"/{index}/v__=" in f]


def why(hs, df, index):
    (r,) = hs.whyNot(df, index, redirectFunc=lambda _: None)
    return r


def lookup(spark, table):
    return spark.table(table).filter(F.col("name") == "n42").select("id", "name")


@pytest.mark.parametrize("kind", ["managed", "external", "partitioned"])
def test_covering_index_over_a_table(spark, hs, db, kind, tmp_path):
    table = make_table(spark, db, kind, tmp_path)
    hs.createIndex(spark.table(table), IndexConfig("ix", ["name"], ["id"]))
    df = lookup(spark, table)
    assert rows(df) == vanilla(spark, lambda: lookup(spark, table)) == [(42, "n42")]
    assert index_files(df, "ix") and all("/ix/v__=" in f for f in df.inputFiles())
    r = why(hs, df, "ix")
    assert r.code == "APPLIED" and r.source.startswith(f"table spark_catalog.{table} at file:")
    assert hs.index("ix").first()["source"] == r.source
    sql = f"SELECT id, name FROM {table} WHERE name = 'n42'"
    assert rows(spark.sql(sql)) == [(42, "n42")] and index_files(spark.sql(sql), "ix")

    # appended rows: hybrid scan reads the new file next to the index, then a refresh adds it
    append_rows(spark, table, [1042])
    def q():
        return spark.table(table).filter(F.col("name").isin("n42", "n1042")).select("id", "name")

    assert rows(q()) == vanilla(spark, q) == [(42, "n42"), (1042, "n1042")]
    assert index_files(q(), "ix") and len(q().inputFiles()) > len(index_files(q(), "ix"))
    assert "hybrid scan: 1 appended source files" in why(hs, q(), "ix").reason
    result = hs.refreshIndex("ix", mode="incremental").first()
    assert result["status"] == "succeeded" and result["filesRead"] == 1
    assert rows(q()) == [(42, "n42"), (1042, "n1042")]
    assert all("/ix/v__=" in f for f in q().inputFiles())


def test_partitioned_table_keeps_partition_pruning_under_data_skipping(spark, hs, db, tmp_path):
    table = make_table(spark, db, "partitioned", tmp_path)
    hs.createIndex(spark.table(table), DataSkippingIndexConfig("ds", MinMaxSketch("id")))

    def query():
        return spark.table(table).filter((F.col("id") < 40) & (F.col("p") == "p1"))

    df = query()
    assert rows(df) == vanilla(spark, query) and len(rows(df)) == 13
    Hyperspace.disable(spark)
    try:
        vanilla_files = set(query().inputFiles())
        everything = set(spark.table(table).inputFiles())
    finally:
        Hyperspace.enable(spark)
    kept = set(df.inputFiles())
    assert kept < vanilla_files < everything      # skipped files, within the pruned partition
    assert all("/p=p1/" in f for f in kept)
    assert why(hs, df, "ds").code == "APPLIED"
    # appended files the index does not know are read, then sketched by a refresh
    append_rows(spark, table, [4, 1001])
    assert rows(query()) == vanilla(spark, query)
    assert hs.refreshIndex("ds", mode="incremental").first()["filesRead"] == 2
    assert rows(query()) == vanilla(spark, query)
    sql = f"SELECT * FROM {table} WHERE id < 40 AND p = 'p1'"
    assert rows(spark.sql(sql)) == vanilla(spark, query)


def test_text_index_over_an_external_table(spark, hs, db, tmp_path):
    table = make_table(spark, db, "external", tmp_path)
    hs.createIndex(spark.table(table), TextIndexConfig("txt", column="msg"))

    def query():
        return spark.table(table).filter(F.col("msg").contains("boom"))

    df = query()
    assert rows(df) == vanilla(spark, query) and len(rows(df)) == 1
    assert why(hs, df, "txt").code == "APPLIED"
    assert len(df.inputFiles()) < len(spark.table(table).inputFiles())
    append_rows(spark, table, [2007])
    assert rows(query()) == vanilla(spark, query) and len(rows(query())) == 2
    assert hs.refreshIndex("txt", mode="incremental").first()["status"] == "succeeded"
    assert rows(spark.sql(f"SELECT * FROM {table} WHERE msg LIKE '%boom%'")) == vanilla(spark, query)


def test_dropped_or_renamed_table_is_detected(spark, hs, db, tmp_path):
    table = make_table(spark, db, "managed", tmp_path)
    hs.createIndex(spark.table(table), IndexConfig("ix", ["name"], ["id"]))
    spark.sql(f"ALTER TABLE {table} RENAME TO {db}.renamed")
    df = lookup(spark, f"{db}.renamed")
    assert rows(df) == [(42, "n42")] and not index_files(df, "ix")
    r = why(hs, df, "ix")
    assert r.code == "OTHER_SOURCE" and f"table spark_catalog.{table} at" in r.reason
    warning = hs.indexes().first()["warning"]
    assert f"table spark_catalog.{table} no longer exists" in warning
    with pytest.raises(SourceNotFoundError, match="no longer exists"):
        hs.refreshIndex("ix")
    # a table of that name again, elsewhere: not the index's source either
    other = str(tmp_path / "elsewhere")
    data(spark, range(10)).write.parquet(other)
    spark.sql(f"CREATE TABLE {table} USING parquet LOCATION '{other}'")
    assert "is now at" in hs.indexes().first()["warning"]
    assert not index_files(lookup(spark, table), "ix")
    spark.sql(f"DROP TABLE {table}")
    assert "no longer exists" in hs.indexes().first()["warning"]


def test_table_index_answers_only_its_table_and_a_path_index_any_read_of_the_path(
        spark, hs, db, tmp_path):
    table = make_table(spark, db, "external", tmp_path)
    path = str(tmp_path / "external")
    hs.createIndex(spark.table(table), IndexConfig("by_table", ["name"], ["id"]))
    def by_path():
        return spark.read.parquet(path).filter(F.col("name") == "n42").select("id", "name")

    assert rows(by_path()) == [(42, "n42")] and not index_files(by_path(), "by_table")
    r = why(hs, by_path(), "by_table")
    assert r.code == "OTHER_SOURCE" and f"table spark_catalog.{table}" in r.reason
    hs.deleteIndex("by_table")
    # an index over the directory (as the rule engine builds from the paths it saw) serves both
    hs.createIndex(spark.read.parquet(path), IndexConfig("by_path", ["name"], ["id"]))
    for df in (lookup(spark, table), by_path()):
        assert rows(df) == [(42, "n42")] and index_files(df, "by_path")


# --- glob sources ------------------------------------------------------------------------------

@pytest.fixture
def lake(spark, tmp_path):
    root = tmp_path / "lake"
    for n, day in enumerate(["date=2026-01", "date=2026-02", "date=2025-12"]):
        data(spark, range(n * 100, n * 100 + 100)).repartition(2).write.parquet(str(root / day))
    return str(root)


def test_glob_source_counts_new_matching_directories_as_appended(spark, hs, lake):
    pattern = f"{lake}/date=2026-*"
    hs.createIndex(spark.read.parquet(pattern), IndexConfig("ix", ["name"], ["id"]))
    hs.createIndex(spark.read.parquet(pattern), DataSkippingIndexConfig("ds", MinMaxSketch("id")))
    assert hs.index("ix").first()["sourceFiles"] == 4
    assert hs.index("ix").first()["source"].endswith("/date=2026-*")

    def query(name="n42"):
        return spark.read.parquet(pattern).filter(F.col("name") == name).select("id", "name")

    assert rows(query()) == [(42, "n42")] and all("/ix/v__=" in f for f in query().inputFiles())
    assert why(hs, query(), "ix").source == f"file:{lake}/date=2026-*"
    # a directory not matching the pattern changes nothing; one matching it is appended files
    data(spark, range(900, 910)).coalesce(1).write.parquet(f"{lake}/date=2025-11")
    data(spark, range(300, 310)).coalesce(1).write.parquet(f"{lake}/date=2026-03")
    assert rows(query("n305")) == vanilla(spark, lambda: query("n305")) == [(305, "n305")]
    assert rows(query("n905")) == []
    r = why(hs, query("n305"), "ix")
    assert r.code == "APPLIED" and "hybrid scan: 1 appended source files" in r.reason
    assert index_files(query("n305"), "ix")

    def ranged():
        return spark.read.parquet(pattern).filter(F.col("id") >= 300)

    assert rows(ranged()) == vanilla(spark, ranged) and len(rows(ranged())) == 10
    assert all("date=2026-03" in f for f in ranged().inputFiles())     # the new file is read
    assert why(hs, ranged(), "ds").code == "APPLIED"
    for name in ("ix", "ds"):
        assert hs.refreshIndex(name, mode="incremental").first()["filesRead"] == 1
    assert hs.index("ix").first()["sourceFiles"] == 5
    assert all("/ix/v__=" in f for f in query("n305").inputFiles())
    assert rows(query("n305")) == [(305, "n305")]
    spark.read.parquet(pattern).createOrReplaceTempView("glob_events")
    try:
        sql = spark.sql("SELECT id, name FROM glob_events WHERE name = 'n305'")
        assert rows(sql) == [(305, "n305")] and index_files(sql, "ix")
    finally:
        spark.catalog.dropTempView("glob_events")


def test_glob_index_whose_directories_are_all_gone(spark, hs, lake):
    import shutil

    pattern = f"{lake}/date=2026-*"
    hs.createIndex(spark.read.parquet(pattern), IndexConfig("ix", ["name"], ["id"]))
    for day in ("date=2026-01", "date=2026-02"):
        shutil.rmtree(os.path.join(lake, day))
    assert "no directory matches its glob pattern" in hs.indexes().first()["warning"]
    with pytest.raises(SourceNotFoundError, match="glob pattern"):
        hs.refreshIndex("ix")


# --- the cache ---------------------------------------------------------------------------------

def test_cache_serves_a_partitioned_table_and_globs(spark, hs, db, lake, tmp_path):
    """A glob of directories and a glob of files (whose matches are the read's roots)."""
    table = make_table(spark, db, "partitioned", tmp_path)
    pattern, files = f"{lake}/date=2026-*", f"{lake}/date=2025-*/*.parquet"
    sources = {"table": lambda: spark.table(table), "glob": lambda: spark.read.parquet(pattern),
               "glob of files": lambda: spark.read.parquet(files)}
    for name, read in sources.items():
        assert hs.cache(read()).first()["files"] > 0

        def query():
            return read().filter(F.col("id") % 10 == 3).select("id", "name")

        assert rows(query()) == vanilla(spark, query) and rows(query())
        assert all("/_cache/data/" in f for f in query().inputFiles()), name
        (r,) = [r for r in hs.whyNot(query(), redirectFunc=lambda _: None) if r.index == "cache"]
        assert r.code == "APPLIED", name
    assert "table spark_catalog." in [r for r in hs.whyNot(spark.table(table), redirectFunc=lambda _: None)
                                      if r.index == "cache"][0].source
    # a new file of the table is read from the table, next to the cached ones
    append_rows(spark, table, [3003])
    df = spark.table(table).filter(F.col("id") % 10 == 3)
    assert rows(df) == vanilla(spark, lambda: spark.table(table).filter(F.col("id") % 10 == 3))
    assert [f for f in df.inputFiles() if "/_cache/data/" not in f]


# --- the rule engine ---------------------------------------------------------------------------

def test_rule_engine_indexes_a_table_and_a_glob_as_such(spark, hs, db, tmp_path):
    wide = (spark.range(0, 16000, numPartitions=8)
            .selectExpr("id", "sha2(cast(id AS string), 256) AS key",
                        *[f"repeat(concat('c{i}-', id), 4) AS c{i}" for i in range(18)]))
    root = tmp_path / "wide"
    for half, where in (("part=a", "id < 8000"), ("part=b", "id >= 8000")):
        wide.where(where).write.parquet(str(root / half))
    wide.write.saveAsTable(f"{db}.wide")
    pattern = f"{root}/part=*"
    reads = {"glob": lambda: spark.read.parquet(pattern), "table": lambda: spark.table(f"{db}.wide")}
    keys = [r.key for r in wide.where("id % 1999 = 1").select("key").collect()][:10]
    for read in reads.values():
        for key in keys:
            read().where(F.col("key") == key).select("id").collect()
    recs = hs.recommend().where("kind = 'covering'")
    assert recs.count() == 2
    hs.applyRecommendations(recs)
    # new directory matching the glob: appended files, the engine's index still answers
    wide.where("id < 10").write.parquet(str(root / "part=c"))
    for name, read in reads.items():
        def q():
            return read().where(F.col("key") == keys[0]).select("id")

        assert rows(q()) == vanilla(spark, q), name
        (used,) = [r for r in hs.whyNot(q(), redirectFunc=lambda _: None) if r.code == "APPLIED"]
        assert name != "table" or used.source.startswith(f"table spark_catalog.{db}.wide")
        assert name != "glob" or "hybrid scan: 1 appended" in used.reason
    # the engine's index over the table is over the table, not its directory
    spark.sql(f"DROP TABLE {db}.wide")
    warnings = sorted(r["warning"] or "" for r in hs.indexes().collect())
    # the glob's index lists its new directory's files, with the refresh that takes them in
    assert warnings[0].startswith("its source changed since the index was built: 1 appended")
    assert "mode='incremental') brings it up to date" in warnings[0]
    assert f"table spark_catalog.{db}.wide no longer exists" in warnings[1]


# --- the decisions, without a JVM --------------------------------------------------------------

def test_same_source_by_table_glob_and_paths():
    d = SourceDescription.from_json
    table = {"table": "spark_catalog.db.t", "rootPaths": ["file:/w/db.db/t"]}
    assert same_source(d(table), d(dict(table)))
    assert not same_source(d(table), d({**table, "table": "spark_catalog.db.u"}))
    assert not same_source(d(table), d({**table, "rootPaths": ["file:/elsewhere"]}))
    assert not same_source(d(table), d({"rootPaths": ["file:/w/db.db/t"]}))     # read by path
    assert same_source(d({"rootPaths": ["file:/w/db.db/t"]}), d(table))          # a path index
    glob = {"globPath": "file:/l/d=*", "rootPaths": ["file:/l/d=1"]}
    assert same_source(d(glob), d({"globPath": "file:/l/d=*",
                                   "rootPaths": ["file:/l/d=1", "file:/l/d=2"]}))
    assert not same_source(d(glob), d({"rootPaths": ["file:/l/d=1"]}))
    assert same_source(d({"rootPaths": ["file:/x"]}), d({"rootPaths": ["file:/x"]}))
    assert source_name(d(table)) == "table spark_catalog.db.t at file:/w/db.db/t"
    assert source_name(d(glob)) == "file:/l/d=*"
    assert table_change(d(table), d(dict(table))) is None
    assert "no longer exists" in table_change(d(table), None)
    assert "no longer exists" in table_change(d(table), d({"rootPaths": table["rootPaths"]}))  # a view
    assert "is now at file:/new" in table_change(d(table), d({**table, "rootPaths": ["file:/new"]}))
