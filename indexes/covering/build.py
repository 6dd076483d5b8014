"""The Spark jobs that write a covering index's data: build, and rewrite of some buckets."""
from __future__ import annotations

import re
from typing import Any

from pyspark.sql import DataFrame, functions as F

from indexes.covering.config import IndexColumn
from indexes.covering.match import LINEAGE_COLUMN
from indexes.fs import HadoopFs, in_parallel
from indexes.names import quote_path

_TASK_FILE = re.compile(r"^part-(\d+)-(.+)-(c\d+)(\..+)$")
_BUCKET_FILE = re.compile(r"^part-\d+-.+_(\d+)\.c\d+\..+$")
DELTA_PREFIX = "delta-"
# File name globs (Spark's pathGlobFilter) of a data version's two kinds of files: bucket files
# (one bucket each, named as Spark's bucketed writes name them) and delta files (any bucket).
BUCKET_FILES = "part-*"
DELTA_FILES = DELTA_PREFIX + "*"
# Small Parquet pages: with the rows sorted, Spark's page index then reads only the few pages
# that can hold a looked-up key instead of the whole column chunk of a bucket. Row groups of
# at most 8 MB: their statistics pick the one row group that can hold a key first, so a lookup
# reads the page indexes of that row group only, not those of a whole bucket file. Dictionary
# pages of at most 64 KB: a lookup reads each column chunk's dictionary page whatever pages it
# selects, and a column of many distinct values (a price, a foreign key) would otherwise carry
# a 1 MB dictionary per row group before it falls back to plain pages; small dictionaries of
# few-valued columns are unaffected.
WRITE_OPTIONS = {"parquet.page.row.count.limit": "1000", "parquet.page.size": "65536",
                 "parquet.block.size": str(8 * 1024 * 1024),
                 "parquet.dictionary.page.size": "65536"}


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


def estimated_bytes(rows: DataFrame) -> int:
    """Spark's estimate of the bytes of ``rows`` from its optimizer's statistics (a file
    source's bytes scaled to the share of the row width the selected columns take); runs no
    job."""
    return int(str(rows._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))


def write_buckets(rows: DataFrame, keys: list[str], num_buckets: int, data_path: str,
                  fs: HadoopFs) -> dict[str, Any]:
    """Writes ``rows`` (index columns) into ``data_path``, bucketed and sorted by the columns
    ``keys``; returns the content facts of what was written there.

    Rows are hash-partitioned by the key columns with Spark's own bucketing hash (Murmur3,
    pmod), sorted by the keys, in small pages, and each file is renamed to carry its bucket id,
    as Spark's bucketed writes do, so readers can prune buckets and join without a shuffle.
    """
    columns = [F.col(f"`{k}`") for k in keys]
    (rows.repartition(num_buckets, *columns)
         .sortWithinPartitions(*columns)
         .write.mode("errorifexists").options(**WRITE_OPTIONS).parquet(data_path))
    moves = [(info.path, f"{data_path}/{target}") for info in fs.list(data_path)
             if not info.is_dir and (target := bucket_file_name(info.name)) is not None]
    in_parallel(lambda move: fs.rename(*move), moves)
    return data_facts(rows.sparkSession, data_path, fs)


def write_delta(rows: DataFrame, keys: list[str], data_path: str, fs: HadoopFs) -> list[list]:
    """Writes ``rows`` (index columns) into ``data_path`` as delta files: not bucketed, each
    sorted by the columns ``keys``, in small pages; returns their ``[name, None, rows, bytes]``
    records (see :func:`data_facts`).

    One file per task of ``rows``' own partitioning (Spark packs small source files into one
    task), with no shuffle: what an incremental refresh writes for appended source files, at a
    cost that follows their rows, not the bucket count. Bucketed reads add these files next to
    the bucket files (see :data:`BUCKET_FILES`); ``optimizeIndex`` folds them into buckets.
    """
    (rows.sortWithinPartitions(*[F.col(f"`{k}`") for k in keys])
         .write.mode("errorifexists").options(**WRITE_OPTIONS).parquet(data_path))
    version = data_path.rstrip("/").rsplit("/", 1)[-1]
    files = []
    for info in fs.list(data_path):
        if info.is_dir or _TASK_FILE.match(info.name) is None:
            continue
        name = DELTA_PREFIX + info.name[len("part-"):]
        target = f"{data_path.rstrip('/')}/{name}"
        if not fs.rename(info.path, target):
            raise OSError(f"could not move {info.path} to {target}")
        files.append([f"{version}/{name}", None, fs.parquet_rows(target), info.size])
    return sorted(files)


def data_dirs(content: dict) -> list[str]:
    """The data version directories a covering index's data spans: an incremental refresh
    writes the new rows into a new version next to the previous versions' files."""
    files = content.get("files")
    return _version_dirs(content, files) if files else [content["path"]]


def delta_dirs(content: dict) -> list[str]:
    """The data version directories that hold delta files (see :func:`write_delta`)."""
    return _version_dirs(content, [f for f in content.get("files") or [] if f[1] is None])


def _version_dirs(content: dict, files: list[list]) -> list[str]:
    root = content["path"].rstrip("/").rsplit("/", 1)[0]
    return [f"{root}/{d}" for d in sorted({f[0].split("/", 1)[0] for f in files})]


def data_facts(spark: Any, data_path: str, fs: HadoopFs) -> dict[str, Any]:
    """What a data version directory holds: schema, rows, files and bytes, and each file as
    ``[name, bucket, rows, bytes]``, the name relative to the index directory
    (``v__=3/part-...``), which is what optimizeIndex and the events work from (a delta
    file's bucket is None).

    Row counts come from the files' footers (one small read per file, several at once), not
    from a Spark job reading the data back: the driver's work grows with the bucket files, not
    with their rows."""
    version = data_path.rstrip("/").rsplit("/", 1)[-1]
    sizes = {i.name: i.size for i in fs.list(data_path)
             if not i.is_dir and bucket_of(i.name) is not None}
    names = sorted(sizes)
    counts = in_parallel(lambda name: fs.parquet_rows(f"{data_path.rstrip('/')}/{name}"), names)
    files = [[f"{version}/{name}", bucket_of(name), int(count), sizes[name]]
             for name, count in zip(names, counts)]
    return {
        "schema": spark.read.parquet(data_path).schema.json(),
        "numRows": sum(f[2] for f in files),
        "numFiles": len(files),
        "sizeInBytes": sum(f[3] for f in files),
        "files": files,
    }
