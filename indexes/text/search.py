"""Full-text search over a text index: the index selects the files that may hold a match, then
every row of those files is checked exactly by tantivy itself (an in-memory index over each
batch of rows, the same tokenizer and query parser), so no row is returned that does not
match."""
from __future__ import annotations

from typing import Any, Callable, Iterator

from pyspark.sql import DataFrame, functions as F
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from indexes.description import SourceDescription
from indexes.source import file_uri
from indexes.text.shards import check_query

__all__ = ["check_query", "search"]

_TEXT, _FILE, _ROW = "__accelerator_text", "__accelerator_file", "__accelerator_row"


def _exact(query: str) -> Callable[[Iterator[Any]], Iterator[Any]]:
    def run(batches: Iterator[Any]) -> Iterator[Any]:
        from indexes.text.shards import matching_positions

        for batch in batches:
            positions = matching_positions(query, batch.column(_TEXT).to_pylist())
            if positions:
                yield batch.take(positions)
    return run


def search(df: DataFrame, entry: Any, source: SourceDescription, reader: Any, query: str,
           score: bool) -> DataFrame:
    """The rows of ``df`` (reading ``source``) whose indexed column matches ``query``."""
    spark = df.sparkSession
    indexed = {f.path: (f.size, f.mtime) for f in entry.source.files or ()}
    hits = [h for h in reader.search(query) if h[0] in indexed] if score else []
    hit_files = {f for f, _, _ in hits} if score else reader.candidate_files(query)
    candidates = [f.path for f in source.files
                  if indexed.get(f.path) != (f.size, f.mtime) or f.path in hit_files]
    extra = [F.expr(entry.config["column"]).alias(_TEXT), F.col("_metadata.file_path").alias(_FILE)]
    if score:
        extra.append(F.col("_metadata.row_index").alias(_ROW))
    scoped = df.where(F.col("_metadata.file_path").isin([file_uri(p) for p in candidates]))
    wide = scoped.select("*", *extra)
    # Spark stops a Python worker whose output is no longer read (show(5), limit(1)), and its
    # daemon then prints a BrokenPipeError; a shuffle after the exact check lets every task
    # of it run to the end, whatever reads the result
    matched = wide.mapInArrow(_exact(query), wide.schema).drop(_TEXT).repartition(_FILE)
    if not score:
        return matched.drop(_FILE)
    schema = StructType([StructField(_FILE, StringType()), StructField(_ROW, LongType()),
                         StructField("score", DoubleType())])
    scores = spark.createDataFrame([(file_uri(f), r, float(s)) for f, r, s in hits], schema)
    return matched.join(scores, [_FILE, _ROW], "left").drop(_FILE, _ROW)
