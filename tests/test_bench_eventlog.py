"""The synthetic event log of bench.eventlog: layout, schema, determinism and the returned facts."""
from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import DateType, LongType, StringType, StructType, TimestampType

from bench import eventlog

ROWS = 20_000
FILES = 8


@pytest.fixture(scope="module")
def log_dir(spark, tmp_path_factory):
    """One generated log (and its facts), shared by the tests of this module."""
    out = str(tmp_path_factory.mktemp("eventlog") / "log")
    facts = eventlog.generate(spark, out, ROWS, FILES, seed=7)
    return out, facts


def _parquet_files(path: str) -> list[str]:
    return sorted(f for f in os.listdir(path) if f.endswith(".parquet"))


def _with_file_index(spark, path: str):
    """The log with ``file_idx``: the index of the row's file in sorted file-name order."""
    names = _parquet_files(path)
    df = spark.read.parquet(path).withColumn(
        "_file", F.element_at(F.split(F.col("_metadata.file_path"), "/"), -1))
    index = spark.createDataFrame([(n, i) for i, n in enumerate(names)], "_file string, file_idx int")
    return df.join(F.broadcast(index), "_file")


def _checksum(spark, path: str) -> tuple[int, int]:
    df = spark.read.parquet(path)
    row = df.agg(F.count("*").alias("n"),
                 F.sum(F.xxhash64(*df.columns).cast("decimal(20,0)")).alias("h")).first()
    return int(row["n"]), int(row["h"])


def test_files_schema_and_facts(spark, log_dir):
    path, facts = log_dir
    assert len(_parquet_files(path)) == FILES
    assert facts["path"] == path and facts["rows"] == ROWS and facts["files"] == FILES
    assert facts["version"] == eventlog.VERSION
    assert facts["step_micros"] == 30 * 86_400_000_000 // ROWS
    assert facts["max_file_rows"] == ROWS // FILES
    assert facts["frequent_token"] == "INFO" and facts["rare_error_code"] == "ERR-4711"

    schema = spark.read.parquet(path).schema
    top = {f.name: f.dataType for f in schema.fields}
    assert top["event_id"] == LongType() and top["account_id"] == LongType()
    assert top["ts"] == TimestampType()
    assert top["event_date"] == DateType()
    for name in ("trace_id", "session_id", "payload", "message", "level"):
        assert top[name] == StringType(), name
    assert isinstance(top["user"], StructType) and isinstance(top["device"], StructType)
    assert {f.name: f.dataType for f in top["user"].fields} == {
        "id": LongType(), "country": StringType(), "segment": StringType()}
    assert {f.name: f.dataType for f in top["device"].fields} == {
        "os": StringType(), "version": StringType(), "model": StringType()}


def test_deterministic(spark, log_dir, tmp_path):
    path, facts = log_dir
    again = str(tmp_path / "again")
    facts2 = eventlog.generate(spark, again, ROWS, FILES, seed=7)
    assert facts2 == {**facts, "path": again}
    assert _checksum(spark, again) == _checksum(spark, path)
    # A different seed gives different data.
    other = eventlog.events(spark, ROWS, FILES, seed=8)
    row = other.agg(F.sum(F.xxhash64(*other.columns).cast("decimal(20,0)")).alias("h")).first()
    assert int(row["h"]) != _checksum(spark, path)[1]


def test_time_order_across_files(spark, log_dir):
    path, facts = log_dir
    df = _with_file_index(spark, path)
    per_file = (df.groupBy("file_idx")
                .agg(F.min("event_id").alias("lo"), F.max("event_id").alias("hi"),
                     F.min("ts").alias("t0"), F.max("ts").alias("t1"), F.count("*").alias("n"))
                .orderBy("file_idx").collect())
    assert [[r["lo"], r["hi"] + 1] for r in per_file] == facts["file_bounds"]
    assert all(r["n"] == r["hi"] - r["lo"] + 1 for r in per_file)
    for a, b in zip(per_file, per_file[1:]):
        assert a["t1"] < b["t0"]
    # Each event's ts lies in its own step of the span, so ts strictly increases with
    # event_id; event_date is the UTC date of ts.
    step = 30 * 86_400_000_000 // ROWS
    start = int(datetime.fromisoformat(facts["start_ts"]).timestamp()) * 1_000_000
    micros = F.unix_micros("ts")
    bad = (spark.read.parquet(path)
           .where((micros < F.lit(start) + F.col("event_id") * step)
                  | (micros >= F.lit(start) + (F.col("event_id") + 1) * step)
                  | (F.col("event_date") != F.date_from_unix_date((micros / 86_400_000_000).cast("int"))))
           .count())
    assert bad == 0


def test_trace_ids_unique_and_well_formed(spark, log_dir):
    path, _ = log_dir
    df = spark.read.parquet(path)
    row = df.agg(F.countDistinct("trace_id").alias("d"),
                 F.sum(F.when(F.col("trace_id").rlike("^[0-9a-f]{32}$"), 0).otherwise(1)).alias("bad"),
                 F.sum(F.when(F.col("session_id").rlike("^[0-9a-f]{16}$"), 0).otherwise(1)).alias("bad_s"),
                 ).first()
    assert row["d"] == ROWS and row["bad"] == 0 and row["bad_s"] == 0


def test_sessions_span_at_most_two_adjacent_files(spark, log_dir):
    path, facts = log_dir
    df = _with_file_index(spark, path)
    per_file = df.groupBy("file_idx").agg(F.countDistinct("session_id").alias("n"))
    assert per_file.agg(F.max("n")).first()[0] <= facts["max_file_sessions"]
    per_session = df.groupBy("session_id").agg(
        F.min("file_idx").alias("f0"), F.max("file_idx").alias("f1"), F.count("*").alias("n"),
        F.countDistinct("account_id").alias("accounts"))
    row = per_session.agg(F.max(F.col("f1") - F.col("f0")).alias("spread"),
                          F.max("accounts").alias("accounts"), F.count("*").alias("sessions"),
                          F.min("n").alias("min_n"), F.max("n").alias("max_n")).first()
    assert row["spread"] <= 1
    assert row["accounts"] == 1  # one account per session
    assert 50 <= row["min_n"] and row["max_n"] <= 250  # ~1000 / 8 events each
    assert row["sessions"] >= ROWS // 1000 * 8 * 0.95


def test_user_ids_spread_over_every_file(spark, log_dir):
    """Nearly every event of a file has its own user, and every file's user ids span most of
    the id range (no min/max or dictionary pruning on them), while a file holds few accounts."""
    path, _ = log_dir
    per_file = _with_file_index(spark, path).groupBy("file_idx").agg(
        F.count("*").alias("n"), F.countDistinct("user.id").alias("users"),
        F.min("user.id").alias("lo"), F.max("user.id").alias("hi"),
        F.countDistinct("account_id").alias("accounts")).collect()
    assert len(per_file) == FILES
    for f in per_file:
        assert f["users"] >= 0.9 * f["n"], f
        assert f["lo"] <= 0.01 * eventlog.USERS and f["hi"] >= 0.9 * eventlog.USERS, f
        assert f["accounts"] <= f["n"] // 100, f


def test_rare_error_code_clustered_and_frequent_token(spark, log_dir):
    path, facts = log_dir
    df = _with_file_index(spark, path)
    rare = df.where(F.col("message").contains(facts["rare_error_code"]))
    got = rare.agg(F.count("*").alias("n"), F.collect_set("file_idx").alias("f"),
                   F.collect_set("level").alias("levels")).first()
    assert got["n"] == facts["rare_error_rows"] > 0
    assert sorted(got["f"]) == facts["rare_error_files"] and len(got["f"]) <= 2
    assert got["levels"] == ["ERROR"]
    frequent = df.where(F.col("message").contains(facts["frequent_token"])).count()
    assert frequent > 0.8 * ROWS
    levels = {r["level"]: r["count"] for r in df.groupBy("level").count().collect()}
    assert set(levels) == {"INFO", "WARN", "ERROR"}
    assert levels["INFO"] > levels["WARN"] > levels["ERROR"]


def test_payload_and_message_parse(spark, log_dir):
    path, _ = log_dir
    df = spark.read.parquet(path)
    row = df.agg(
        F.sum(F.get_json_object("payload", "$.amount").cast("decimal(10,2)").isNull().cast("int")).alias("no_amount"),
        F.min(F.get_json_object("payload", "$.amount").cast("double")).alias("min_amount"),
        F.sum(F.get_json_object("payload", "$.currency").isNull().cast("int")).alias("no_currency"),
        F.countDistinct(F.get_json_object("payload", "$.status")).alias("statuses"),
        F.min(F.get_json_object("payload", "$.items").cast("int")).alias("min_items"),
        F.sum((F.regexp_extract("message", r" user=(\d+) ", 1).cast("long") != F.col("user.id")).cast("int")).alias("bad_user"),
        F.countDistinct("user.country").alias("countries"),
        F.countDistinct("device.os").alias("oses"),
    ).first()
    assert row["no_amount"] == 0 and row["no_currency"] == 0
    assert row["min_amount"] > 0 and row["min_items"] >= 1
    assert row["statuses"] == 4  # ok, pending, refunded, failed
    assert row["bad_user"] == 0
    assert 20 <= row["countries"] <= 30 and row["oses"] == 6


def test_sample_values_exist(spark, log_dir):
    path, facts = log_dir
    df = spark.read.parquet(path)
    by_trace = df.where(F.col("trace_id") == facts["sample_trace_id"]).collect()
    assert len(by_trace) == 1
    event = by_trace[0]
    assert event["event_id"] == facts["sample_event_id"]
    assert event["session_id"] == facts["sample_session_id"]
    assert event["user"]["id"] == facts["sample_user_id"]
    user_rows = df.where(F.col("user.id") == facts["sample_user_id"]).count()
    assert 1 <= user_rows <= 0.02 * ROWS  # few events
    account_rows = df.where(F.col("account_id") == facts["sample_account_id"]).count()
    assert 1 <= account_rows <= 0.02 * ROWS
    assert df.where(F.col("session_id") == facts["sample_session_id"]).count() >= 1


def test_payload_at_is_the_event_time_as_iso_text(spark, log_dir):
    path, facts = log_dir
    df = spark.read.parquet(path).withColumn("at", F.get_json_object("payload", "$.at"))
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    try:
        row = df.agg(
            F.sum((F.col("at") != F.date_format("ts", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")).cast("int")).alias("bad_ts"),
            F.sum((F.col("at") != F.element_at(F.split("message", " "), 2)).cast("int")).alias("bad_message"),
            F.sum(F.col("at").isNull().cast("int")).alias("missing"),
        ).first()
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)
    assert row["bad_ts"] == 0 and row["bad_message"] == 0 and row["missing"] == 0
    # ISO text sorts like time: the first event of each file is after the last of the one before
    per_file = (_with_file_index(spark, path).withColumn("at", F.get_json_object("payload", "$.at"))
                .groupBy("file_idx").agg(F.min("at").alias("lo"), F.max("at").alias("hi"))
                .orderBy("file_idx").collect())
    assert all(a["hi"] < b["lo"] for a, b in zip(per_file, per_file[1:]))
    # at_text / event_micros give the lower bound of an event's time as the same text
    lo, _ = facts["file_bounds"][FILES // 2]
    at = df.where(F.col("event_id") == lo).first()["at"]
    assert eventlog.at_text(eventlog.event_micros(facts, lo)) <= at
    assert at < eventlog.at_text(eventlog.event_micros(facts, lo + 1) + 1000)
    assert eventlog.at_text(1_772_714_096_789_123) == "2026-03-05T12:34:56.789Z"


def test_readme_schema_table_is_the_generator_doc():
    readme = (Path(__file__).resolve().parent.parent / "bench" / "README.md").read_text()
    assert eventlog.SCHEMA_DOC in readme
