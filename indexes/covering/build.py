"""The Spark job that writes a covering index's data."""
from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, functions as F

from indexes.covering.config import IndexColumn
from indexes.names import quote_path


def write_covering_index(df: DataFrame, indexed: list[IndexColumn], included: list[IndexColumn],
                         num_buckets: int, data_path: str) -> dict[str, Any]:
    """Writes the index rows of ``df`` into ``data_path``; returns the content facts.

    Rows are hash-partitioned into ``num_buckets`` files by the indexed columns with Spark's own
    bucketing hash (Murmur3, pmod), so partition i holds bucket i, and sorted within each file.
    """
    columns = indexed + included
    flat = df.select(*[F.col(quote_path(c.path)).alias(c.name) for c in columns])
    keys = [F.col(f"`{c.name}`") for c in indexed]
    (flat.repartition(num_buckets, *keys)
         .sortWithinPartitions(*keys)
         .write.mode("errorifexists").parquet(data_path))
    written = df.sparkSession.read.parquet(data_path)
    return {
        "schema": written.schema.json(),
        "numRows": written.count(),
    }
