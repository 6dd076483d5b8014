"""The on-disk form of a data-skipping index: one Parquet file, one row per source file, and one
more per row group of a Parquet source file that has several.

Columns: ``file`` (the path as Spark lists it), ``size``, ``mtime``, ``rows``, ``row_group``
(null on a file's row, the row group's ordinal on its rows), ``start`` and ``end`` (a row
group's byte range, see :class:`RowGroup`), then per sketched
expression ``i`` (in the order of the index's ``specs``): ``s<i>_min``, ``s<i>_max``,
``s<i>_nulls``, ``s<i>_values`` (null when unknown or too many) and ``s<i>_bloom`` (the
serialized filter, null when absent). Values are stored in Catalyst's internal form (dates as
days, timestamps as microseconds), so no time zone is involved in reading them back.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, replace
from typing import Any

from indexes.skipping.stats import ColumnStats, FileStats, SketchSpec, bloom_from_bytes, bloom_to_bytes

STATS_FILE = "stats.parquet"


@dataclass(frozen=True)
class RowGroup:
    """A row group of a Parquet source file: its bytes ``[start, end)``, from its first byte to
    the next row group's first byte (the last one's to the end of the file), which hold its
    midpoint (Parquet's reader reads the row groups whose midpoint lies in its split), and its
    statistics (without Bloom filters)."""

    start: int
    end: int
    stats: FileStats


@dataclass(frozen=True)
class FileEntry:
    """A source file as the index saw it, its statistics and, for a Parquet file of several row
    groups, theirs (empty when unknown)."""

    size: int
    mtime: int
    stats: FileStats
    row_groups: tuple[RowGroup, ...] = ()


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

    rows: list[tuple[str, int | None, int | None, int | None, FileStats]] = []
    for path in sorted(files):
        entry = files[path]
        rows.append((path, None, None, None, entry.stats))
        rows.extend((path, g, rg.start, rg.end, rg.stats) for g, rg in enumerate(entry.row_groups))
    columns: dict[str, Any] = {
        "file": pa.array([r[0] for r in rows], pa.string()),
        "size": pa.array([files[r[0]].size for r in rows], pa.int64()),
        "mtime": pa.array([files[r[0]].mtime for r in rows], pa.int64()),
        "rows": pa.array([r[4].rows for r in rows], pa.int64()),
        "row_group": pa.array([r[1] for r in rows], pa.int32()),
        "start": pa.array([r[2] for r in rows], pa.int64()),
        "end": pa.array([r[3] for r in rows], pa.int64()),
    }
    for i, spec in enumerate(specs):
        t = arrow_type(spec.type)
        stats = [r[4].columns.get(spec.key) for r in rows]
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
    groups = cols.get("row_group") or [None] * table.num_rows   # absent before row groups
    out: dict[str, FileEntry] = {}
    row_groups: dict[str, list[RowGroup]] = {}
    for row, path in enumerate(cols["file"]):
        stats: dict[str, ColumnStats] = {}
        for i, spec in enumerate(specs):
            values = cols[f"s{i}_values"][row]
            bloom = cols[f"s{i}_bloom"][row]
            stats[spec.key] = ColumnStats(
                spec.type, cols[f"s{i}_min"][row], cols[f"s{i}_max"][row],
                cols[f"s{i}_nulls"][row], frozenset(values) if values is not None else None,
                bloom_from_bytes(bloom) if bloom is not None else None)
        if groups[row] is None:
            out[path] = FileEntry(cols["size"][row], cols["mtime"][row],
                                  FileStats(cols["rows"][row], stats))
        else:   # written in order, after their file's row
            row_groups.setdefault(path, []).append(
                RowGroup(cols["start"][row], cols["end"][row], FileStats(cols["rows"][row], stats)))
    for path, found in row_groups.items():
        out[path] = replace(out[path], row_groups=tuple(found))
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
