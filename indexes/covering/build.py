"""The Spark job that writes a covering index's data."""
from __future__ import annotations

import re
from typing import Any

from pyspark.sql import DataFrame, functions as F

from indexes.covering.config import IndexColumn
from indexes.fs import HadoopFs
from indexes.names import quote_path

_TASK_FILE = re.compile(r"^part-(\d+)-(.+)-(c\d+)(\..+)$")
# Small Parquet pages: with the rows sorted, Spark's page index then reads only the few pages
# that can hold a looked-up key instead of the whole column chunk of a bucket.
PAGE_OPTIONS = {"parquet.page.row.count.limit": "1000", "parquet.page.size": "65536"}


def bucket_file_name(name: str) -> str | None:
    """``part-00007-<uuid>-c000.snappy.parquet`` → ``part-00007-<uuid>_00007.c000.snappy.parquet``.

    The ``_<bucket>`` suffix is how Spark finds a file's bucket (BucketingUtils.getBucketId).
    """
    m = _TASK_FILE.match(name)
    if m is None:
        return None
    part, rest, chunk, ext = m.groups()
    return f"part-{part}-{rest}_{int(part):05d}.{chunk}{ext}"


def write_covering_index(df: DataFrame, indexed: list[IndexColumn], included: list[IndexColumn],
                         num_buckets: int, data_path: str, fs: HadoopFs) -> dict[str, Any]:
    """Writes the index rows of ``df`` into ``data_path``; returns the content facts.

    Rows are hash-partitioned into ``num_buckets`` tasks by the indexed columns with Spark's own
    bucketing hash (Murmur3, pmod), so task i writes exactly the rows of bucket i, sorted by the
    indexed columns, in small pages; each file is then renamed to carry its bucket id, as
    Spark's bucketed writes do, so readers can prune buckets and join without a shuffle.
    """
    columns = indexed + included
    flat = df.select(*[F.col(quote_path(c.path)).alias(c.name) for c in columns])
    keys = [F.col(f"`{c.name}`") for c in indexed]
    (flat.repartition(num_buckets, *keys)
         .sortWithinPartitions(*keys)
         .write.mode("errorifexists").options(**PAGE_OPTIONS).parquet(data_path))
    files = []
    for info in fs.list(data_path):
        target = bucket_file_name(info.name) if not info.is_dir else None
        if target is None:
            continue
        fs.rename(info.path, f"{data_path}/{target}")
        files.append(info.size)
    written = df.sparkSession.read.parquet(data_path)
    return {
        "schema": written.schema.json(),
        "numRows": written.count(),
        "numFiles": len(files),
        "sizeInBytes": sum(files),
    }
