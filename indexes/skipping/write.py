"""Writing a data-skipping index's statistics from the executors: the scan job's partial
statistics (:func:`indexes.skipping.build.scan_partials`) and one announcement per file to
index (its path, size, modification time, what its footer told and its row groups' byte
ranges) are shuffled by file, and each task folds its files' rows into their entries and
returns them as rows Spark writes as Parquet under ``<version>/stats`` (through Hadoop's
FileSystem, like the text index's shards). An incremental refresh adds the previous version's
rows of the files that did not change, read and filtered by Spark. The driver never holds a
Bloom filter: it sends the announcements and learns the bytes written by listing the dataset.
"""
from __future__ import annotations

import math
import pickle
from typing import Any, Iterator, Sequence

from pyspark.sql import DataFrame, functions as F

from indexes.description import SourceDescription, SourceFile
from indexes.skipping.build import (PARTIALS_SCHEMA, ResolvedSketch, file_entry, fold_partials,
                                    scan_partials, sketch_specs)
from indexes.skipping.footers import footer_bounds, footer_facts
from indexes.skipping.stats import SketchSpec
from indexes.skipping.store import (DATASET, StoredStats, entry_rows, record_batch, spark_schema,
                                    stats_dir, stats_path)
from indexes.source import file_uri

#: the ``sketch`` of a partial row announcing a file to index (``partial``: its facts, pickled)
ANNOUNCE = -2
#: source files per statistics file written, at least (more tasks when the cluster has them)
FILES_PER_PART = 100_000
#: the Parquet row group size of the statistics, in bytes: what a query reading the Bloom
#: filters of a few files reads at least
ROW_GROUP_BYTES = 1 << 20
_ROWS_PER_BATCH = 256


def stats_task(specs: list[SketchSpec], scanned: list[SketchSpec], scanned_all: bool):
    """Task function over partial rows sorted by file: each announced file's statistics rows
    (:func:`indexes.skipping.store.entry_rows`), folded from its partials of the ``scanned``
    specs and its footer's facts; ``scanned_all``: the scan read every file (one it found no
    rows in has 0 rows)."""
    def entry(rows: list[tuple[int, int, bytes]]) -> list[tuple]:
        facts = [data for _, i, data in rows if i == ANNOUNCE]
        if not facts:
            return []
        path, size, mtime, footer_file, footer_groups, ranges = pickle.loads(facts[0])
        found = fold_partials(scanned, [(path, g, i, data) for g, i, data in rows if i != ANNOUNCE],
                              {path} if ranges is not None else set())
        return list(entry_rows(path, file_entry(
            size, mtime, (footer_file, footer_groups or {}),
            (found.files.get(path), found.groups.get(path, {})), ranges,
            0 if scanned_all else None)))

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        current, rows, out = None, [], []
        for batch in batches:
            columns = [batch.column(j).to_pylist() for j in range(4)]
            for uri, g, i, data in zip(*columns):
                if uri != current:
                    out += entry(rows)
                    current, rows = uri, []
                rows.append((g, i, data))
                if len(out) >= _ROWS_PER_BATCH:
                    yield record_batch(specs, out)
                    out = []
        out += entry(rows)
        if out:
            yield record_batch(specs, out)
    return run


def write_stats(df: DataFrame, source: SourceDescription, sketches: list[ResolvedSketch],
                files: Sequence[SourceFile], data_path: str,
                reused: DataFrame | None = None) -> dict:
    """Writes the statistics of ``files`` (those ``df`` reads), and the rows ``reused``
    (:func:`reused_stats`), as the dataset of the data version ``data_path``; returns the build
    facts (which sketches came from footers, which from the scan)."""
    spark = df.sparkSession
    specs = sketch_specs(sketches)
    footers = footer_facts(df, source, specs, {s.key: s.path for s in sketches}, files)
    rest = footers.rest
    scanned_all = bool(rest)   # else the footers answered every sketch of every file
    announce = lambda facts: (file_uri(facts[0]), 0, ANNOUNCE, pickle.dumps(facts))  # noqa: E731
    announced = (footers.facts.map(announce) if hasattr(footers.facts, "map")
                 else [announce(f) for f in footers.facts])
    parts = spark.createDataFrame(announced, PARTIALS_SCHEMA)
    if files and scanned_all:
        parts = parts.unionByName(scan_partials(
            df, sketches, rest, footer_bounds() if footers.layered else None))
    tasks = max(1, min(len(files), max(spark.sparkContext.defaultParallelism,
                                       math.ceil(len(files) / FILES_PER_PART))))
    stats = (parts.repartition(tasks, "file").sortWithinPartitions("file")
             .mapInArrow(stats_task(specs, rest, scanned_all), spark_schema(specs)))
    if reused is not None:
        stats = stats.unionByName(reused)
    try:
        (stats.sortWithinPartitions("file", "row_group").write
         .option("parquet.block.size", ROW_GROUP_BYTES).option("compression", "zstd")
         .parquet(stats_dir(data_path)))
    finally:
        footers.release()
    return {"footerSketches": sorted(footers.keys), "scannedSketches": [s.key for s in rest],
            "rowGroupFiles": footers.layered}


def unchanged_files(fs: Any, previous: Any, files: Sequence[SourceFile]) -> set[str]:
    """The paths of ``files`` whose statistics the version ``previous`` (a log entry) holds
    as they are now (same size and modification time); reads only those three columns."""
    stored = StoredStats(fs, previous.content["path"], previous.content.get("statsLayout"))
    table = stored.read(["file", "size", "mtime", "row_group"])
    if table.num_columns == 0:
        return set()
    if "row_group" in table.column_names:
        import pyarrow.compute as pc

        table = table.filter(pc.is_null(table.column("row_group")))
    held = dict(zip(table.column("file").to_pylist(),
                    zip(table.column("size").to_pylist(), table.column("mtime").to_pylist())))
    return {f.path for f in files if held.get(f.path) == (f.size, f.mtime)}


def reused_stats(spark: Any, previous: Any, specs: list[SketchSpec],
                 keep: Sequence[SourceFile]) -> DataFrame:
    """The rows of the version ``previous`` (a log entry, either layout) of the files ``keep``,
    as Spark reads them, in the columns :func:`write_stats` writes."""
    from pyspark.sql.types import _parse_datatype_string

    path = previous.content["path"]
    old = spark.read.parquet(stats_dir(path) if previous.content.get("statsLayout") == DATASET
                             else stats_path(path))
    schema = _parse_datatype_string(spark_schema(specs))
    kept = spark.createDataFrame([(f.path, int(f.size), int(f.mtime)) for f in keep],
                                 "file string, size bigint, mtime bigint")
    return old.join(kept, ["file", "size", "mtime"], "left_semi").select(*[
        (F.col(f"`{f.name}`") if f.name in old.columns else F.lit(None)).cast(f.dataType)
        .alias(f.name) for f in schema.fields])


def stats_size(fs: Any, data_path: str) -> tuple[int, int]:
    """(files, bytes) of the statistics dataset of ``data_path``."""
    found = [f for f in fs.list(stats_dir(data_path)) if not f.is_dir and f.name.endswith(".parquet")]
    return len(found), sum(f.size for f in found)
