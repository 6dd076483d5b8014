"""The rule engine's source profiles on Spark: per-file statistics of every column type the
analyzer estimates from, with distinct counts from mergeable sketches."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

from accelerator.engine.profiling import profile_source
from rules.history.records import RelationUsage


def _typed_source(spark, tmp_path):
    """Two Parquet files of 30 rows (partitioned by ``f``) with a column of each type; the
    source's usage and its files."""
    path = str(tmp_path / "typed")
    rows = [(f, i, i % 4, float(i % 3), Decimal(i % 5) / 10, i % 2 == 0,
             dt.date(2026, 1, 1 + f * 10 + i % 3),
             dt.datetime(2026, 1, 1, f, i % 6), f"s{f}-{i % 7}")
            for f in range(2) for i in range(30)]
    (spark.createDataFrame(rows, "f int, i long, sh short, d double, dec decimal(4,2), "
                           "b boolean, day date, ts timestamp, s string")
     .repartition(2, "f").sortWithinPartitions("i").write.partitionBy("f").parquet(path))
    usage = RelationUsage(f"file:{path}", [f"file:{path}"], "parquet", partition_columns=["f"])
    files = [(p, 1) for p in spark.read.parquet(path).inputFiles()]
    assert len(files) == 2
    return usage, files


def test_profiles_each_column_type_per_file_and_over_the_sample(spark, tmp_path):
    usage, files = _typed_source(spark, tmp_path)
    columns = {c: {"lookup"} for c in ("i", "sh", "d", "dec", "b", "day", "ts", "s")}

    profile = profile_source(spark, usage, files, columns)

    per_file = {"i": 30, "sh": 4, "d": 3, "dec": 5, "b": 2, "day": 3, "ts": 6, "s": 7}
    total = {**per_file, "i": 30, "day": 6, "ts": 12, "s": 14}
    assert profile.files == 2
    for column, expected in per_file.items():
        found = profile.columns[column]
        assert found.rows_per_file == 30
        assert found.distinct_per_file == expected, column
        assert found.distinct_total == total[column], column
    assert sorted(profile.columns["day"].ranges) == [
        (dt.date(2026, 1, 1), dt.date(2026, 1, 3)), (dt.date(2026, 1, 11), dt.date(2026, 1, 13))]
    assert sorted(profile.columns["ts"].ranges) == [
        (dt.datetime(2026, 1, 1, 0, 0), dt.datetime(2026, 1, 1, 0, 5)),
        (dt.datetime(2026, 1, 1, 1, 0), dt.datetime(2026, 1, 1, 1, 5))]
    assert profile.columns["s"].avg_bytes == 4.0
    assert {v for values in profile.columns["s"].text_sample for v in values} == {
        f"s{f}-{k}" for f in range(2) for k in range(7)}


def test_a_column_searched_for_text_only_is_sampled_not_scanned(spark, tmp_path):
    usage, files = _typed_source(spark, tmp_path)
    profile = profile_source(spark, usage, files, {"s": {"text"}, "i": {"range"}})
    text = profile.columns["s"]
    assert text.ranges == (None, None) and text.distinct_per_file is None
    assert text.rows_per_file == 30 and text.avg_bytes == 4.0
    assert {v for values in text.text_sample for v in values} == {
        f"s{f}-{k}" for f in range(2) for k in range(7)}
    assert sorted(profile.columns["i"].ranges) == [(0, 29), (0, 29)]
