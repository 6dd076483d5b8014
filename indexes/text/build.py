"""Building a text index: resolve the column, then one Spark job whose tasks each write a
tantivy shard over the rows they read (one document per group of rows, or per row for an index
that scores rows; see :mod:`indexes.text.shards`).

Executors build their shard in a local temporary directory and return its files as rows
``(shard, name, part, data)`` (chunks of at most :data:`CHUNK_BYTES`) plus one row carrying the
shard's manifest; Spark writes these rows as Parquet under ``<data version>/shards`` through
Hadoop's FileSystem, so the system path may be on any file system Spark writes to. Readers copy
a shard back into a local directory on first use (:mod:`indexes.text.reader`).
"""
from __future__ import annotations

import json
from typing import Any, Iterator

from pyspark.sql import DataFrame, functions as F

from indexes.errors import InvalidIndexConfigError
from indexes.schema_paths import check_column_path
from indexes.plan import chain
from indexes.skipping import ir
from indexes.skipping.build import analysed_expressions
from indexes.source import file_uri, hadoop_path
from indexes.text.config import TextIndexConfig

SHARDS_DIR = "shards"
CHUNK_BYTES = 8 * 1024 * 1024
SHARD_SCHEMA = "shard string, name string, part int, data binary, manifest string"


def resolve_column(df: DataFrame, config: TextIndexConfig, case_sensitive: bool) -> dict:
    """Checks the indexed column against ``df`` (a path first against its schema in Python):
    it must be a string column or nested string field. Returns what the index records of it
    (expression, canonical key, path)."""
    config.validate()
    check_column_path(df.schema, config.column, case_sensitive, f"index '{config.indexName}'")
    where = f"index '{config.indexName}': column {config.column!r}"
    try:
        (expr, data_type, names), = analysed_expressions(df, [config.column])
    except Exception as e:  # parse or analysis error of the user's column
        text = str(e).strip()
        first = text.splitlines()[0] if text else type(e).__name__
        raise InvalidIndexConfigError(f"{where}: not a column of the source: {first}") from None
    if expr is None:
        raise InvalidIndexConfigError(f"{where}: not a column of the source")
    found = chain(expr) if expr.cls == "GetStructField" else None
    if expr.cls == "AttributeReference":
        path = [names[expr.expr_id]]
    elif found is not None and found[0].expr_id in names:
        path = [names[found[0].expr_id], *found[1]]
    else:
        raise InvalidIndexConfigError(
            f"{where}: must name a column or a nested field (a.b.c), not an expression")
    if data_type != "string":
        shown = data_type if isinstance(data_type, str) else data_type.get("type")
        raise InvalidIndexConfigError(
            f"{where}: has type {shown}; a text index needs a string column (with the default "
            "collation)")
    return {"column": config.column, "key": ir.expression_key(expr, names.get), "path": path}


def _shard_task(with_rows: bool, grouped: bool, first_rows: dict[str, list[int]]):
    """The task function: one shard over every row of the task (file, value[, row index]);
    ``first_rows``: per file URI, the first row of each of its row groups (where known)."""
    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import shutil
        import tempfile
        import uuid

        import pyarrow as pa
        import pyarrow.compute as pc

        from indexes.text.shards import ShardWriter

        schema = pa.schema([("shard", pa.string()), ("name", pa.string()), ("part", pa.int32()),
                            ("data", pa.binary()), ("manifest", pa.string())])   # SHARD_SCHEMA

        def row(shard: str, name: str | None, part: int | None, data: bytes | None,
                manifest: str | None) -> Any:
            return pa.RecordBatch.from_pydict(
                {"shard": [shard], "name": [name], "part": [part], "data": [data],
                 "manifest": [manifest]}, schema=schema)

        tmp = tempfile.mkdtemp(prefix="accelerator-text-")
        try:
            writer = None
            for batch in batches:
                if writer is None:
                    writer = ShardWriter(f"{tmp}/shard", grouped=grouped,
                                         first_rows=first_rows)
                files = batch.column(0)
                values = batch.column(1).to_pylist()
                rows = (batch.column(2).fill_null(-1).to_pylist() if with_rows
                        else [-1] * len(values))
                changes = pc.not_equal(files.slice(1), files.slice(0, len(files) - 1))
                cuts = [0, *(i + 1 for i in pc.indices_nonzero(changes).to_pylist()), len(files)]
                for begin, end in zip(cuts, cuts[1:]):   # runs of rows of one file
                    writer.add_run(files[begin].as_py(), rows[begin:end], values[begin:end])
            if writer is None:
                return
            names = writer.close()
            shard = uuid.uuid4().hex
            manifest = json.dumps({"files": list(writer.files), "rows": writer.rows,
                                   "textBytes": writer.text_bytes,
                                   "docs": "groups" if grouped else "rows"})
            for name in names:
                with open(f"{tmp}/shard/{name}", "rb") as fh:
                    part = 0
                    while True:
                        chunk = fh.read(CHUNK_BYTES)
                        if not chunk and part > 0:
                            break
                        yield row(shard, name, part, chunk, None)
                        part += 1
                        if len(chunk) < CHUNK_BYTES:
                            break
            yield row(shard, None, None, None, manifest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return run


def write_shards(df: DataFrame, column: dict, source_format: str, data_path: str,
                 first_rows: dict[str, list[int]]) -> list[dict]:
    """Writes the shards of ``df``'s rows under ``data_path`` (of groups of rows, cut at the row
    groups ``first_rows`` gives per source path, unless the index scores rows); returns one
    manifest per shard: ``{"id", "path" (its Parquet file), "files" (source paths by ordinal),
    "rows", "textBytes", "docs" ("groups" or "rows")}``."""
    parquet = source_format == "parquet"
    columns = [F.col("_metadata.file_path"), F.expr(column["column"]).alias("t")]
    if parquet:
        columns.append(F.col("_metadata.row_index"))
    target = data_path.rstrip("/") + "/" + SHARDS_DIR
    task = _shard_task(parquet, not column.get("scoring", True),   # indexes before groups: rows
                       {file_uri(p): rows for p, rows in first_rows.items()})
    (df.select(*columns).mapInArrow(task, SHARD_SCHEMA)
     .write.parquet(target))
    spark = df.sparkSession
    found = (spark.read.schema(SHARD_SCHEMA).parquet(target).where("manifest IS NOT NULL")
             .select("shard", "manifest", F.col("_metadata.file_path").alias("at")).collect())
    out = []
    for r in sorted(found, key=lambda r: r.shard):
        m = json.loads(r.manifest)
        out.append({"id": r.shard, "path": hadoop_path(r.at),
                     "files": [hadoop_path(f) for f in m["files"]],
                     "rows": m["rows"], "textBytes": m["textBytes"], "docs": m["docs"]})
    return out
