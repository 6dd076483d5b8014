"""The on-disk form of a data-skipping index: one Parquet file, one row per source file.

Columns: ``file`` (the path as Spark lists it), ``size``, ``mtime``, ``rows``, then per sketched
expression ``i`` (in the order of the index's ``specs``): ``s<i>_min``, ``s<i>_max``,
``s<i>_nulls``, ``s<i>_values`` (null when unknown or too many) and ``s<i>_bloom`` (the
serialized filter, null when absent). Values are stored in Catalyst's internal form (dates as
days, timestamps as microseconds), so no time zone is involved in reading them back.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

from indexes.skipping.stats import ColumnStats, FileStats, SketchSpec, bloom_from_bytes, bloom_to_bytes

STATS_FILE = "stats.parquet"


@dataclass(frozen=True)
class FileEntry:
    """A source file as the index saw it, and its statistics."""

    size: int
    mtime: int
    stats: FileStats


def arrow_type(spark_type: str) -> Any:
    """The Arrow type holding internal values of a Spark type."""
    import pyarrow as pa

    simple = {"byte": pa.int8(), "short": pa.int16(), "integer": pa.int32(), "long": pa.int64(),
              "float": pa.float32(), "double": pa.float64(), "string": pa.string(),
              "binary": pa.binary(), "boolean": pa.bool_(), "date": pa.int32(),
              "timestamp": pa.int64(), "timestamp_ntz": pa.int64()}
    if spark_type in simple:
        return simple[spark_type]
    precision, scale = spark_type[len("decimal("):-1].split(",")
    return pa.decimal128(int(precision), int(scale))


def encode(specs: list[SketchSpec], files: dict[str, FileEntry]) -> bytes:
    """The Parquet bytes of an index over ``files``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    paths = sorted(files)
    columns: dict[str, Any] = {
        "file": pa.array(paths, pa.string()),
        "size": pa.array([files[p].size for p in paths], pa.int64()),
        "mtime": pa.array([files[p].mtime for p in paths], pa.int64()),
        "rows": pa.array([files[p].stats.rows for p in paths], pa.int64()),
    }
    for i, spec in enumerate(specs):
        t = arrow_type(spec.type)
        stats = [files[p].stats.columns.get(spec.key) for p in paths]
        columns[f"s{i}_min"] = pa.array([s.min if s else None for s in stats], t)
        columns[f"s{i}_max"] = pa.array([s.max if s else None for s in stats], t)
        columns[f"s{i}_nulls"] = pa.array([s.null_count if s else None for s in stats], pa.int64())
        columns[f"s{i}_values"] = pa.array(
            [sorted(s.values, key=repr) if s and s.values is not None else None for s in stats],
            pa.list_(t))
        columns[f"s{i}_bloom"] = pa.array(
            [bloom_to_bytes(s.bloom) if s and s.bloom is not None else None for s in stats],
            pa.binary())
    out = io.BytesIO()
    pq.write_table(pa.table(columns), out, compression="zstd")
    return out.getvalue()


def decode(specs: list[SketchSpec], data: bytes) -> dict[str, FileEntry]:
    """The files and statistics held by Parquet bytes written by :func:`encode`."""
    import pyarrow.parquet as pq

    table = pq.read_table(io.BytesIO(data))
    cols = {name: table.column(name).to_pylist() for name in table.column_names}
    out: dict[str, FileEntry] = {}
    for row, path in enumerate(cols["file"]):
        stats: dict[str, ColumnStats] = {}
        for i, spec in enumerate(specs):
            values = cols[f"s{i}_values"][row]
            bloom = cols[f"s{i}_bloom"][row]
            stats[spec.key] = ColumnStats(
                spec.type, cols[f"s{i}_min"][row], cols[f"s{i}_max"][row],
                cols[f"s{i}_nulls"][row], frozenset(values) if values is not None else None,
                bloom_from_bytes(bloom) if bloom is not None else None)
        out[path] = FileEntry(cols["size"][row], cols["mtime"][row],
                              FileStats(cols["rows"][row], stats))
    return out


def stats_path(data_path: str) -> str:
    """The statistics file of a data version directory."""
    return data_path.rstrip("/") + "/" + STATS_FILE


def write_table(fs: Any, data_path: str, specs: list[SketchSpec],
                files: dict[str, FileEntry]) -> int:
    """Writes the statistics of ``files`` into the data version ``data_path``; returns the
    bytes written."""
    data = encode(specs, files)
    fs.mkdirs(data_path)
    fs.write_bytes(stats_path(data_path), data)
    return len(data)


def read_table(fs: Any, data_path: str, specs: list[SketchSpec]) -> dict[str, FileEntry]:
    """The statistics a data version directory holds (see :func:`write_table`)."""
    return decode(specs, fs.read_bytes(stats_path(data_path)))
