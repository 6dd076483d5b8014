"""Cheap statistics of the sources the rule engine considers (its Spark side).

Columns are column paths or expressions over them (JSON paths, see
:func:`rules.history.records.is_expression`).

For each source the history names, :func:`profile_source` lists its files and reads a spread
sample of at most :data:`SAMPLE_FILES` of them in one scan: per sampled file the min/max, row
count and a distinct-count sketch of each column the demand filters on (the per-file sketches
are merged, without reading the files again, into the distinct count of the whole sample), then
a row sample of the string values of the columns searched for text (which the scan skips) or
looked up. The analyzer (:mod:`rules.analyzer`) estimates what each candidate index would skip
from these. Sources are read as the queries read them: same format, options and, for JSON/CSV,
data schema (as the history recorded them).
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
from typing import Any, Iterable, Mapping

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (BinaryType, ByteType, DataType, DateType, IntegerType, LongType,
                               MapType, ArrayType, ShortType, StringType, StructType,
                               TimestampNTZType, TimestampType)

from accelerator.query import session
from rules.history.records import RelationUsage, is_expression
from rules.profiles import ColumnProfile, SourceProfile

log = logging.getLogger("accelerator.engine.profiling")

__all__ = ["SAMPLE_FILES", "profile_source", "read_source"]

#: files of a source read to profile it (spread over its sorted file list)
SAMPLE_FILES = 16
#: string values kept per sampled file for text estimates (about): enough that a trigram held
#: by 1% of the values, which every group of rows of a text index holds, is seen in each file
#: (unseen in 13% of the files at 200 values, practically never at 1,000)
TEXT_VALUES_PER_FILE = 1000
_EPOCH = dt.datetime(1970, 1, 1)


def read_source(spark: SparkSession, usage: RelationUsage,
                paths: list[str] | None = None) -> DataFrame:
    """The source a history relation read, read the same way: its catalog table, its glob
    pattern or its paths (``paths``: only those files, with the source's root as base path so
    partition columns stay)."""
    if usage.table and paths is None:
        return spark.table(usage.table)
    reader = spark.read.format(usage.format).options(**usage.options)
    if usage.data_schema:
        reader = reader.schema(StructType.fromJson(json.loads(usage.data_schema)))
    if paths is None:
        return reader.load(usage.glob_path or (usage.root_paths[0] if len(usage.root_paths) == 1
                                               else usage.root_paths))
    if len(usage.root_paths) == 1 and usage.partition_columns:
        reader = reader.option("basePath", usage.root_paths[0])
    return reader.load(paths)


def _spread(items: list[Any], n: int) -> list[Any]:
    if len(items) <= n:
        return items
    step = len(items) / n
    return [items[int(i * step)] for i in range(n)]


def _field_type(schema: StructType, column: str) -> DataType | None:
    current: DataType = schema
    for part in column.replace("`", "").split("."):
        if not isinstance(current, StructType) or part not in current.fieldNames():
            return None
        current = current[part].dataType
    return current


def _type_of(df: DataFrame, column: str) -> DataType | None:
    """The type of a column path, or of an expression over columns (a JSON path)."""
    if not is_expression(column):
        return _field_type(df.schema, column)
    try:
        return df.select(F.expr(column)).schema[0].dataType
    except Exception:  # noqa: BLE001 - an expression this source cannot evaluate
        return None


def _value(column: str) -> Any:
    return F.expr(column) if is_expression(column) else F.col(column)


def _comparable(t: DataType) -> bool:
    return not isinstance(t, (StructType, ArrayType, MapType, BinaryType))


def _python(value: Any, t: DataType) -> Any:
    if value is not None and isinstance(t, (TimestampType, TimestampNTZType)):
        return _EPOCH + dt.timedelta(microseconds=int(value))
    return value


def profile_source(spark: SparkSession, usage: RelationUsage, files: list[tuple[str, int]],
                   columns: Mapping[str, Iterable[str]]) -> SourceProfile:
    """Statistics of one source: ``files`` its ``(path, size)`` list, ``columns`` the demanded
    column paths with their uses (``lookup``, ``range``, ``text`` ...). Columns the source does
    not have (or of nested or binary types) are left out."""
    df = read_source(spark, usage)
    schema = df.schema
    wanted = {c: (t, set(uses)) for c, uses in columns.items()
              if (t := _type_of(df, c)) is not None and _comparable(t)}
    sample = _spread(sorted(p for p, _ in files), SAMPLE_FILES)
    profiles: dict[str, ColumnProfile] = {}
    if wanted and sample:
        with session.suspended(spark):   # the accelerator's own reads are never rewritten
            profiles = _profile_columns(spark, usage, sample, wanted)
    return SourceProfile(source=usage.source, format=usage.format, files=len(files),
                         bytes=sum(s for _, s in files), columns=profiles,
                         all_columns=tuple(schema.fieldNames()),
                         partition_columns=tuple(usage.partition_columns))


def _sketchable(value: Column, t: DataType) -> Column:
    """``value`` as a type Spark's HLL sketches take (int, long, string): dates as days and
    timestamps as microseconds since the epoch, other types as their string form."""
    if isinstance(t, DateType):
        return F.unix_date(value)
    if isinstance(t, (TimestampType, TimestampNTZType)):
        return F.unix_micros(value.cast("timestamp"))
    if isinstance(t, (ByteType, ShortType)):
        return value.cast("int")
    if isinstance(t, (IntegerType, LongType, StringType)):
        return value
    return value.cast("string")


def _merged_distinct(spark: SparkSession, sketches: list[list[Any]]) -> list[float]:
    """Per column, the distinct count of the union of its per-file sketches (``sketches``: one
    row of column sketches per file), merged in a job over the sketches alone."""
    if not sketches:
        return []
    names = [f"s{i}" for i in range(len(sketches[0]))]
    merged = spark.createDataFrame(sketches, ", ".join(f"{n} binary" for n in names)).agg(
        *[F.hll_sketch_estimate(F.hll_union_agg(n)).alias(n) for n in names]).first()
    return [float(merged[n] or 0) for n in names]


def _profile_columns(spark: SparkSession, usage: RelationUsage, sample: list[str],
                     wanted: dict[str, tuple[DataType, set[str]]]) -> dict[str, ColumnProfile]:
    """Columns searched for text only get their values sampled (their mean length from the
    sample); the others also their per-file min/max, distinct counts and mean length."""
    df = read_source(spark, usage, sample).withColumn("__file", F.input_file_name())
    scanned = [(c, t) for c, (t, uses) in wanted.items() if uses - {"text"}]
    aggs = [F.count(F.lit(1)).alias("rows")]
    for i, (c, t) in enumerate(scanned):
        value = _value(c)
        bound = F.unix_micros(value.cast("timestamp")) \
            if isinstance(t, (TimestampType, TimestampNTZType)) else value
        aggs += [F.min(bound).alias(f"min{i}"), F.max(bound).alias(f"max{i}"),
                 F.hll_sketch_agg(_sketchable(value, t)).alias(f"sk{i}")]
        if isinstance(t, StringType):
            aggs.append(F.avg(F.length(value)).alias(f"len{i}"))
    per_file = sorted(df.groupBy("__file").agg(*aggs).select(
        "*", *[F.hll_sketch_estimate(f"sk{i}").alias(f"nd{i}") for i in range(len(scanned))]
    ).collect(), key=lambda r: r["__file"])   # in one order: the same means, the same advice
    totals = _merged_distinct(spark, [[r[f"sk{i}"] for i in range(len(scanned))]
                                      for r in per_file]) if scanned else []
    # sampled values: what text searches match, and how common a looked-up string is
    texts = [c for c, (t, uses) in wanted.items()
             if uses & {"text", "lookup"} and isinstance(t, StringType)]
    samples = _text_samples(df, texts, per_file)
    rows = [r["rows"] for r in per_file]
    mean = lambda xs: sum(xs) / len(xs) if xs else None   # noqa: E731
    out: dict[str, ColumnProfile] = {}
    for c, (t, _) in wanted.items():
        sampled = tuple(samples.get(c, {}).get(r["__file"], ()) for r in per_file) \
            if c in samples else ()
        out[c] = ColumnProfile(column=c, type=t.simpleString(), ranges=(None,) * len(per_file),
                               rows_per_file=mean(rows), text_sample=sampled,
                               avg_bytes=mean([len(v) for values in sampled for v in values]))
    for i, (c, t) in enumerate(scanned):
        lengths = [r[f"len{i}"] for r in per_file if isinstance(t, StringType)
                   and r[f"len{i}"] is not None]
        out[c] = dataclasses.replace(
            out[c], ranges=tuple(None if r[f"min{i}"] is None else
                                 (_python(r[f"min{i}"], t), _python(r[f"max{i}"], t))
                                 for r in per_file),
            distinct_per_file=mean([r[f"nd{i}"] for r in per_file]),
            distinct_total=totals[i] if totals else None,
            avg_bytes=mean(lengths) if lengths else None)
    return out


def _text_samples(df: DataFrame, columns: list[str], per_file: list[Any]
                  ) -> dict[str, dict[str, tuple[str, ...]]]:
    """Per text column and sampled file, about TEXT_VALUES_PER_FILE of its values."""
    if not columns or not per_file:
        return {}
    total = sum(r["rows"] for r in per_file)
    fraction = min(1.0, TEXT_VALUES_PER_FILE * len(per_file) / max(1, total))
    picked = df.sample(fraction=fraction, seed=17) if fraction < 1.0 else df
    found = picked.groupBy("__file").agg(*[
        F.slice(F.collect_list(_value(c)), 1, 2 * TEXT_VALUES_PER_FILE).alias(f"t{i}")
        for i, c in enumerate(columns)]).collect()
    return {c: {r["__file"]: tuple(r[f"t{i}"] or ()) for r in found}
            for i, c in enumerate(columns)}
