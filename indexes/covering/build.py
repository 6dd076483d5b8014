"""The Spark jobs that write a covering index's data: build, and rewrite of some buckets."""
from __future__ import annotations

import re
from typing import Any

from pyspark.sql import DataFrame, functions as F

from indexes.covering.config import IndexColumn
from indexes.covering.rule import LINEAGE_COLUMN
from indexes.fs import HadoopFs
from indexes.names import quote_path

_TASK_FILE = re.compile(r"^part-(\d+)-(.+)-(c\d+)(\..+)$")
_BUCKET_FILE = re.compile(r"^part-\d+-.+_(\d+)\.c\d+\..+$")
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


def bucket_of(name: str) -> int | None:
    """The bucket id a data file's name carries (see :func:`bucket_file_name`), or None."""
    m = _BUCKET_FILE.match(name)
    return None if m is None else int(m.group(1))


def index_rows(df: DataFrame, indexed: list[IndexColumn], included: list[IndexColumn],
               file_ids: dict[str, int] | None = None) -> DataFrame:
    """The rows of ``df`` as the index stores them: its columns flattened under their index
    names; with ``file_ids`` (source file URI → id), the lineage column last: the id of the
    file each row comes from."""
    columns = [F.col(quote_path(c.path)).alias(c.name) for c in indexed + included]
    if file_ids is None:
        return df.select(*columns)
    ids = df.sparkSession.createDataFrame(sorted(file_ids.items()),
                                          f"`__file` string, `{LINEAGE_COLUMN}` long")
    rows = df.select(*columns, F.col("_metadata.file_path").alias("__file"))
    return rows.join(F.broadcast(ids), "__file").drop("__file")


def write_buckets(rows: DataFrame, keys: list[str], num_buckets: int, data_path: str,
                  fs: HadoopFs) -> dict[str, Any]:
    """Writes ``rows`` (index columns) into ``data_path``, bucketed and sorted by the columns
    ``keys``; returns the content facts of what was written there.

    Rows are hash-partitioned into ``num_buckets`` tasks by the key columns with Spark's own
    bucketing hash (Murmur3, pmod), so task i writes exactly the rows of bucket i, sorted by the
    keys, in small pages; each file is then renamed to carry its bucket id, as Spark's bucketed
    writes do, so readers can prune buckets and join without a shuffle.
    """
    columns = [F.col(f"`{k}`") for k in keys]
    (rows.repartition(num_buckets, *columns)
         .sortWithinPartitions(*columns)
         .write.mode("errorifexists").options(**PAGE_OPTIONS).parquet(data_path))
    for info in fs.list(data_path):
        target = bucket_file_name(info.name) if not info.is_dir else None
        if target is not None:
            fs.rename(info.path, f"{data_path}/{target}")
    return data_facts(rows.sparkSession, data_path, fs)


def data_facts(spark: Any, data_path: str, fs: HadoopFs) -> dict[str, Any]:
    """What a data version directory holds: schema, rows, files and bytes, and each file as
    ``[name, bucket, rows, bytes]`` (what optimizeIndex and the events work from)."""
    sizes = {i.name: i.size for i in fs.list(data_path)
             if not i.is_dir and bucket_of(i.name) is not None}
    written = spark.read.parquet(data_path)
    counts = {r[0]: r[1] for r in written.groupBy(F.col("_metadata.file_name")).count().collect()}
    files = [[name, bucket_of(name), int(counts.get(name, 0)), size]
             for name, size in sorted(sizes.items())]
    return {
        "schema": written.schema.json(),
        "numRows": sum(f[2] for f in files),
        "numFiles": len(files),
        "sizeInBytes": sum(f[3] for f in files),
        "files": files,
    }
