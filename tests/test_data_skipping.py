"""Data-skipping indexes end to end: each sketch kind prunes files (seen in ``inputFiles()``)
with results identical to vanilla Spark, on Parquet, CSV, JSON and partitioned sources,
nested fields and JSON paths, stale indexes, refresh, explain and config errors."""
from __future__ import annotations

import os

import pytest
from pyspark.sql import functions as F

from accelerator import (
    BloomFilterSketch,
    DataSkippingIndexConfig,
    IndexConfig,
    InvalidIndexConfigError,
    MinMaxSketch,
    TextIndexConfig,
    ValueListSketch,
)
from tests.helpers import own_copy, rows, vanilla


def check(spark, df, expected_files: int | None = None):
    """Asserts that ``df`` returns what vanilla Spark returns and reads ``expected_files``."""
    assert rows(df) == vanilla(spark, lambda: df)
    if expected_files is not None:
        assert len(df.inputFiles()) == expected_files, df.inputFiles()


EVENTS_SCHEMA = ("id long, ts timestamp, user struct<id:long, country:string>, os string, "
                 "session string, payload string")


def event_rows(n: int, files: int):
    out = []
    for i in range(n):
        f = i * files // n
        user = None if i % 17 == 0 else (1000 + i, ["US", "DE", "FR"][f % 3])
        out.append((i, None, user, "android" if f % 2 == 0 else ("ios" if i % 3 else "linux"),
                    f"s{f:03d}-{i % 5}", f'{{"amount": {i * 1.5}, "kind": "k{f}"}}'))
    return out


@pytest.fixture(scope="module")
def written(spark, tmp_path_factory):
    """The sources of ``range_path`` and ``events_path``, written by Spark once for the
    module; each test reads (and may change) a copy of its own."""
    base = tmp_path_factory.mktemp("sources")
    spark.range(100).repartitionByRange(100, "id").write.parquet(str(base / "range"))
    df = spark.createDataFrame(event_rows(400, 8), EVENTS_SCHEMA)
    df = df.withColumn("ts", F.timestamp_seconds(F.lit(1_700_000_000) + F.col("id") * 60))
    df.repartitionByRange(8, "id").write.parquet(str(base / "events"))
    return base


@pytest.fixture
def range_path(spark, written, tmp_path):
    """spark.range(100) in 100 files, one id per file."""
    (path,) = own_copy(written, tmp_path, "range")
    assert len(spark.read.parquet(path).inputFiles()) == 100
    return path


@pytest.fixture
def events_path(written, tmp_path):
    """8 files of 50 events, clustered by id; nested user (sometimes null), JSON payload."""
    (path,) = own_copy(written, tmp_path, "events")
    return path


@pytest.mark.compat
def test_minmax_point_lookup_reads_one_file(spark, hs, range_path):
    df = spark.read.parquet(range_path)
    hs.createIndex(df, DataSkippingIndexConfig("ds_range", MinMaxSketch("id")))
    q = spark.read.parquet(range_path).where("id = 1")
    check(spark, q, expected_files=1)
    check(spark, spark.read.parquet(range_path).where("id between 10 and 14"), expected_files=5)
    check(spark, spark.read.parquet(range_path).where("id in (3, 50, 1000)"), expected_files=2)
    check(spark, spark.read.parquet(range_path).where("id > 97 or id < 1"), expected_files=3)
    check(spark, spark.read.parquet(range_path).where("id + 1 = 5"), expected_files=1)
    check(spark, spark.read.parquet(range_path).where("id = 1000"), expected_files=0)
    entry = hs.context.lifecycle().get("ds_range")
    assert entry.content["footerSketches"], "a Parquet long column's min/max come from footers"


def test_unknown_predicate_skips_nothing(spark, hs, range_path):
    hs.createIndex(spark.read.parquet(range_path), DataSkippingIndexConfig("ds_range", MinMaxSketch("id")))
    q = spark.read.parquet(range_path).where("sha2(cast(id as string), 256) like 'ab%'")
    check(spark, q, expected_files=100)
    reasons = hs.whyNot(q, "ds_range")
    assert [r.code for r in reasons] == ["NO_FILE_SKIPPED"]


@pytest.mark.compat
def test_nested_field_json_path_bloom_and_value_list(spark, hs, events_path):
    df = spark.read.parquet(events_path)
    hs.createIndex(df, DataSkippingIndexConfig(
        "ds_events", MinMaxSketch("user.id"), MinMaxSketch("ts"),
        MinMaxSketch("cast(get_json_object(payload, '$.amount') as double)"),
        BloomFilterSketch("session", fpp=0.01, expectedDistinctCountPerFile=100),
        ValueListSketch("os", maxValues=4)))
    read = lambda: spark.read.parquet(events_path)  # noqa: E731
    check(spark, read().where("user.id = 1010"), expected_files=1)
    check(spark, read().where(F.col("user.id").isNull()), expected_files=8)
    check(spark, read().where("cast(get_json_object(payload, '$.amount') as double) > 560"),
          expected_files=1)
    check(spark, read().where("session = 's003-2'"), expected_files=1)
    check(spark, read().where("session in ('s001-0', 's006-4')"), expected_files=2)
    check(spark, read().where("os = 'linux'"), expected_files=4)
    check(spark, read().where("os != 'android'"), expected_files=4)
    check(spark, read().where("ts < timestamp_seconds(1700000000 + 60 * 49)"), expected_files=1)
    # a JSON path that is not sketched prunes nothing
    check(spark, read().where("get_json_object(payload, '$.kind') = 'k3'"), expected_files=8)


@pytest.mark.parametrize("fmt", ["csv", "json"])
@pytest.mark.compat
def test_csv_and_json_sources(spark, hs, tmp_path, fmt):
    path = str(tmp_path / fmt)
    data = spark.range(40).selectExpr("id", "concat('name', id) as name").repartitionByRange(4, "id")
    getattr(data.write.option("header", "true"), fmt)(path)
    reader = lambda: spark.read.format(fmt).option("header", "true").schema("id long, name string").load(path)  # noqa: E731
    hs.createIndex(reader(), DataSkippingIndexConfig("ds_" + fmt, MinMaxSketch("id"),
                                                       MinMaxSketch("name")))
    check(spark, reader().where("id = 13"), expected_files=1)
    check(spark, reader().where("name like 'name3%'"), expected_files=2)


@pytest.mark.compat
def test_partitioned_source_sketches_partition_columns(spark, hs, tmp_path):
    path = str(tmp_path / "parted")
    (spark.range(60).selectExpr("id", "id % 3 as part").repartitionByRange(6, "id")
     .write.partitionBy("part").parquet(path))
    df = spark.read.parquet(path)
    hs.createIndex(df, DataSkippingIndexConfig("ds_parted", MinMaxSketch("id")))
    sketches = [s["expression"] for s in hs.context.lifecycle().get("ds_parted").config["sketches"]]
    assert "part" in sketches
    # 6 writer tasks x 3 partition values: id = 7 may be in each partition's file of task 0
    check(spark, spark.read.parquet(path).where("id = 7"), expected_files=3)
    check(spark, spark.read.parquet(path).where("id < 10 and part = 1"), expected_files=1)
    check(spark, spark.read.parquet(path).where("(part = 1 and id < 10) or (part = 2 and id > 55)"),
          expected_files=2)
    check(spark, spark.read.parquet(path).where("id = 7 or part = 2"), expected_files=8)


def test_stale_index_reads_new_files_and_ignores_deleted(spark, hs, range_path):
    hs.createIndex(spark.read.parquet(range_path), DataSkippingIndexConfig("ds_range", MinMaxSketch("id")))
    spark.range(1, 2).coalesce(1).write.mode("append").parquet(range_path)   # another id = 1, in a new file
    q = spark.read.parquet(range_path).where("id = 1")
    check(spark, q, expected_files=2)
    assert len(rows(q)) == 2
    victim = [f for f in os.listdir(range_path) if f.endswith(".parquet")][0]
    os.remove(os.path.join(range_path, victim))
    check(spark, spark.read.parquet(range_path).where("id < 5"))


def test_incremental_refresh_sketches_only_new_files(spark, hs, range_path):
    hs.createIndex(spark.read.parquet(range_path), DataSkippingIndexConfig(
        "ds_range", MinMaxSketch("id"), BloomFilterSketch("id", expectedDistinctCountPerFile=10)))
    spark.range(200, 203).repartition(3).write.mode("append").parquet(range_path)
    hs.refreshIndex("ds_range", mode="incremental")
    entry = hs.context.lifecycle().get("ds_range")
    assert (entry.content["sketchedFiles"], entry.content["reusedFiles"]) == (3, 100)
    check(spark, spark.read.parquet(range_path).where("id = 201"), expected_files=1)
    hs.refreshIndex("ds_range", mode="incremental")   # nothing changed: a no-op
    assert hs.context.lifecycle().get("ds_range").id == entry.id
    hs.refreshIndex("ds_range", mode="full")
    hs.refreshIndex("ds_range", mode="full")
    check(spark, spark.read.parquet(range_path).where("id = 201"), expected_files=1)


def test_covering_index_wins_over_data_skipping(spark, hs, range_path):
    df = spark.read.parquet(range_path)
    hs.createIndex(df, DataSkippingIndexConfig("ds_range", MinMaxSketch("id")))
    hs.createIndex(df, IndexConfig("ci_range", ["id"]))
    q = spark.read.parquet(range_path).where("id = 3")
    assert rows(q) == vanilla(spark, lambda: q)
    assert all("/ci_range/" in f for f in q.inputFiles())
    codes = {r.index: r.code for r in hs.whyNot(q)}
    assert codes == {"ci_range": "APPLIED", "ds_range": "ANOTHER_INDEX_APPLIED"}


@pytest.mark.compat
def test_explain_shows_files_and_sketches(spark, hs, range_path):
    hs.createIndex(spark.read.parquet(range_path), DataSkippingIndexConfig("ds_range", MinMaxSketch("id")))
    text = hs.explain(spark.read.parquet(range_path).where("id < 3"))
    assert "ds_range: data skipping, 3 of 100 files kept (97 skipped)" in text
    assert "MinMax(id): 97" in text


def test_file_names_with_special_characters(spark, hs, tmp_path):
    path = str(tmp_path / "a dir%with #odd")
    spark.range(10).repartitionByRange(5, "id").write.parquet(path)
    hs.createIndex(spark.read.parquet(path), DataSkippingIndexConfig(
        "ds_odd", BloomFilterSketch("id", expectedDistinctCountPerFile=10)))
    check(spark, spark.read.parquet(path).where("id = 4"), expected_files=1)


@pytest.mark.parametrize("sketch, message", [
    (MinMaxSketch("no_such_column"), "column 'no_such_column' does not exist"),
    (MinMaxSketch("rand()"), "deterministic"),
    (MinMaxSketch("user"), "cannot be sketched"),
    (BloomFilterSketch("id", fpp=1.5), "fpp"),
    (ValueListSketch("os", maxValues=0), "maxValues"),
    ("id", "not a sketch"),
])
def test_bad_sketches_are_rejected(spark, hs, events_path, sketch, message):
    with pytest.raises(InvalidIndexConfigError, match=message):
        hs.createIndex(spark.read.parquet(events_path), DataSkippingIndexConfig("ds_bad", sketch))
    assert hs.indexes().count() == 0


@pytest.fixture
def query_context_logs():
    """The records pyspark's query-context loggers (4.0+) take while the test runs: they log
    each analysis error with a JVM stack trace, to a stream of their own."""
    import logging

    from indexes.spark_logs import query_context_loggers

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    loggers = query_context_loggers()
    levels = [logger.level for logger in loggers]   # a CLI test in this process mutes them
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.NOTSET)
    yield records
    for logger, level in zip(loggers, levels):
        logger.removeHandler(handler)
        logger.setLevel(level)


@pytest.mark.parametrize("config, message", [
    (DataSkippingIndexConfig("ds_bad", MinMaxSketch("tss")),
     "sketch MinMax('tss'): column 'tss' does not exist; did you mean 'ts'"),
    (DataSkippingIndexConfig("ds_bad", MinMaxSketch("user.idd")),
     "column 'user.idd' does not exist; did you mean 'user.id'"),
    (DataSkippingIndexConfig("ds_bad", MinMaxSketch("upper(oss)")),   # analysed by Spark
     "not a valid expression over the source: [UNRESOLVED_COLUMN"),
    (TextIndexConfig("t_bad", column="oss"), "column 'oss' does not exist; did you mean 'os'"),
    (IndexConfig("ci_bad", ["tss"]), "column 'tss' does not exist; did you mean 'ts'"),
])
def test_a_misspelt_column_shows_only_the_clean_error(spark, hs, events_path, capfd,
                                                      query_context_logs, config, message):
    """pyspark 4 logs each analysis error with a JVM stack trace (SQLQueryContextLogger)
    before raising it; the API's own validation error is all a user sees."""
    df = spark.read.parquet(events_path)
    capfd.readouterr()
    with pytest.raises(InvalidIndexConfigError) as raised:
        hs.createIndex(df, config)
    assert message in str(raised.value)
    assert query_context_logs == []
    err = capfd.readouterr().err
    assert "QueryContextLogger" not in err and "Traceback" not in err and "\tat " not in err, err


def test_spark_logs_an_analysis_error_outside_the_accelerator(spark, events_path,
                                                              query_context_logs):
    """What the test above guards against: pyspark 4 logs the error a user then sees again."""
    from pyspark.errors import AnalysisException

    df = spark.read.parquet(events_path)
    with pytest.raises(AnalysisException):
        df.select(F.expr("upper(oss)")).schema
    assert len(query_context_logs) == (1 if spark.version >= "4" else 0)


def test_duplicate_sketch_is_rejected(spark, hs, events_path):
    with pytest.raises(InvalidIndexConfigError, match="already has a MinMax sketch"):
        hs.createIndex(spark.read.parquet(events_path), DataSkippingIndexConfig(
            "ds_dup", MinMaxSketch("user.id"), MinMaxSketch("`user`.`id`")))


@pytest.mark.compat
def test_every_kind_refreshes_incrementally(spark, hs, range_path):
    df = spark.read.parquet(range_path)
    hs.createIndex(df, IndexConfig("ci_range", ["id"]))
    hs.refreshIndex("ci_range", mode="incremental")     # nothing changed: a no-op, no error
    assert hs.context.lifecycle().get("ci_range").content["dataVersion"] == 0


def test_json_field_through_from_json(spark, hs, tmp_path):
    path = str(tmp_path / "json_payload")
    (spark.range(40).selectExpr("id", "to_json(named_struct('amount', id * 1.5D, 'k', id)) as payload")
     .repartitionByRange(4, "id").write.parquet(path))
    hs.createIndex(spark.read.parquet(path), DataSkippingIndexConfig(
        "ds_json", MinMaxSketch("from_json(payload, 'amount double, k long').amount")))
    # Spark prunes the parsed schema to the field used, so both spellings meet the sketch
    for schema in ("amount double, k long", "amount double"):
        q = spark.read.parquet(path).where(f"from_json(payload, '{schema}').amount > 50")
        check(spark, q, expected_files=1)


def test_long_in_list(spark, hs, range_path):
    """Spark turns IN lists of more than 10 values into InSet; they prune all the same."""
    hs.createIndex(spark.read.parquet(range_path), DataSkippingIndexConfig("ds_range", MinMaxSketch("id")))
    values = ", ".join(str(v) for v in [3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 1000])
    check(spark, spark.read.parquet(range_path).where(f"id in ({values})"), expected_files=11)


def test_invalid_column_among_valid_ones_is_named(spark, hs, events_path):
    with pytest.raises(InvalidIndexConfigError, match=r"MinMax\('nope'\): column 'nope' does not"):
        hs.createIndex(spark.read.parquet(events_path), DataSkippingIndexConfig(
            "ds_bad", MinMaxSketch("id"), MinMaxSketch("nope"), MinMaxSketch("user.id")))
