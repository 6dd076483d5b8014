"""The on-disk form of a data-skipping index: Parquet rows, one per source file, and one more
per row group of a Parquet source file that has several.

Columns: ``file`` (the path as Spark lists it), ``size``, ``mtime``, ``rows``, ``row_group``
(null on a file's row, the row group's ordinal on its rows), ``start`` and ``end`` (a row
group's byte range, see :class:`RowGroup`), then per sketched
expression ``i`` (in the order of the index's ``specs``): ``s<i>_min``, ``s<i>_max``,
``s<i>_nulls``, ``s<i>_values`` (null when unknown or too many) and ``s<i>_bloom`` (the
serialized filter, null when absent; either format of :mod:`indexes.skipping.bloom`, each
filter's first bytes saying which, a version's ``bloomFormat`` which its build wrote). Values are stored in Catalyst's internal form (dates as
days, timestamps as microseconds), so no time zone is involved in reading them back.

Two layouts (a version's content says which, ``statsLayout``): a dataset of Parquet files under
``<version>/stats/``, written by the build's tasks (a file's row groups in the same file, after
its row), and the single ``stats.parquet`` the driver wrote before, still read. Queries read the
Bloom columns apart from the others, only for the rows they need (see :class:`StoredStats`).
"""
from __future__ import annotations

import io
import threading
from dataclasses import dataclass, replace
from typing import Any, Iterable

from cachetools import LRUCache

from indexes.skipping.stats import ColumnStats, FileStats, SketchSpec, bloom_from_bytes, bloom_to_bytes
from indexes.source import local_path

STATS_FILE = "stats.parquet"
STATS_DIR = "stats"
#: ``statsLayout`` of a version whose statistics are a dataset under STATS_DIR
DATASET = "dataset"
#: rows per Parquet row group of the statistics: what a query reading the Bloom filters of a
#: few files reads at least
STATS_ROW_GROUP = 1024
#: statistics files of a version kept open for reading Bloom filters
OPEN_FILES = 16
BASE_COLUMNS = ("file", "size", "mtime", "rows", "row_group", "start", "end")
_SPARK_TYPES = {"byte": "tinyint", "short": "smallint", "integer": "int", "long": "bigint",
                "float": "float", "double": "double", "string": "string", "binary": "binary",
                "boolean": "boolean", "date": "int", "timestamp": "bigint",
                "timestamp_ntz": "bigint"}


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


def arrow_schema(specs: list[SketchSpec]) -> Any:
    """The Arrow schema of the statistics of ``specs``."""
    import pyarrow as pa

    fields = [("file", pa.string()), ("size", pa.int64()), ("mtime", pa.int64()),
              ("rows", pa.int64()), ("row_group", pa.int32()), ("start", pa.int64()),
              ("end", pa.int64())]
    for i, spec in enumerate(specs):
        t = arrow_type(spec.type)
        fields += [(f"s{i}_min", t), (f"s{i}_max", t), (f"s{i}_nulls", pa.int64()),
                   (f"s{i}_values", pa.list_(t)), (f"s{i}_bloom", pa.binary())]
    return pa.schema(fields)


def spark_schema(specs: list[SketchSpec]) -> str:
    """The same columns as :func:`arrow_schema`, as a Spark DDL schema (a task's output)."""
    base = ("`file` string, `size` bigint, `mtime` bigint, `rows` bigint, `row_group` int, "
            "`start` bigint, `end` bigint")
    out = [base]
    for i, spec in enumerate(specs):
        t = _SPARK_TYPES.get(spec.type, spec.type)
        out.append(f"s{i}_min {t}, s{i}_max {t}, s{i}_nulls bigint, s{i}_values array<{t}>, "
                   f"s{i}_bloom binary")
    return ", ".join(out)


def entry_rows(path: str, entry: FileEntry) -> Iterable[tuple]:
    """The rows of one file: its own, then its row groups' (path, size, mtime, row group,
    start, end, stats)."""
    yield path, entry.size, entry.mtime, None, None, None, entry.stats
    for g, rg in enumerate(entry.row_groups):
        yield path, entry.size, entry.mtime, g, rg.start, rg.end, rg.stats


def record_batch(specs: list[SketchSpec], rows: list[tuple]) -> Any:
    """The Arrow record batch of ``rows`` (as :func:`entry_rows` gives them)."""
    import pyarrow as pa

    columns: list[Any] = [
        pa.array([r[0] for r in rows], pa.string()), pa.array([r[1] for r in rows], pa.int64()),
        pa.array([r[2] for r in rows], pa.int64()), pa.array([r[6].rows for r in rows], pa.int64()),
        pa.array([r[3] for r in rows], pa.int32()), pa.array([r[4] for r in rows], pa.int64()),
        pa.array([r[5] for r in rows], pa.int64())]
    for spec in specs:
        t = arrow_type(spec.type)
        stats = [r[6].columns.get(spec.key) for r in rows]
        stats = [s if s is not None and s.type == spec.type else None for s in stats]
        columns += [
            pa.array([s.min if s else None for s in stats], t),
            pa.array([s.max if s else None for s in stats], t),
            pa.array([s.null_count if s else None for s in stats], pa.int64()),
            pa.array([sorted(s.values, key=repr) if s and s.values is not None else None
                      for s in stats], pa.list_(t)),
            pa.array([bloom_to_bytes(s.bloom) if s and s.bloom is not None else None
                      for s in stats], pa.binary())]
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(specs))


def parquet_bytes(table: Any) -> bytes:
    """``table`` as Parquet bytes, in row groups of STATS_ROW_GROUP rows."""
    import pyarrow.parquet as pq

    out = io.BytesIO()
    pq.write_table(table, out, compression="zstd", row_group_size=STATS_ROW_GROUP)
    return out.getvalue()


def arrow_stats(specs: list[SketchSpec], files: dict[str, FileEntry]) -> Any:
    """The statistics of ``files`` as an Arrow table of the stored columns, in path order."""
    import pyarrow as pa

    rows = [r for path in sorted(files) for r in entry_rows(path, files[path])]
    return pa.Table.from_batches([record_batch(specs, rows)])


def encode(specs: list[SketchSpec], files: dict[str, FileEntry]) -> bytes:
    """The Parquet bytes of an index over ``files`` (one file of the statistics)."""
    return parquet_bytes(arrow_stats(specs, files))


def column_stats(spec: SketchSpec, lo: Any, hi: Any, nulls: Any, values: Any,
                 bloom: Any) -> ColumnStats:
    """A row's statistics of ``spec`` from its stored columns (as Python values)."""
    return ColumnStats(spec.type, lo, hi, nulls, frozenset(values) if values is not None else None,
                       bloom_from_bytes(bloom) if bloom is not None else None)


def decode(specs: list[SketchSpec], data: bytes) -> dict[str, FileEntry]:
    """The files and statistics held by Parquet bytes written by :func:`encode`."""
    import pyarrow.parquet as pq

    table = pq.read_table(io.BytesIO(data))
    cols = {name: table.column(name).to_pylist() for name in table.column_names}
    groups = cols.get("row_group") or [None] * table.num_rows   # absent before row groups
    out: dict[str, FileEntry] = {}
    row_groups: dict[str, list[RowGroup]] = {}
    for row, path in enumerate(cols["file"]):
        stats = {spec.key: column_stats(spec, *(cols[f"s{i}_{c}"][row] for c in
                                                ("min", "max", "nulls", "values", "bloom")))
                 for i, spec in enumerate(specs)}
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
    """The single statistics file of a data version directory (the layout of before)."""
    return data_path.rstrip("/") + "/" + STATS_FILE


def stats_dir(data_path: str) -> str:
    """The statistics dataset of a data version directory."""
    return data_path.rstrip("/") + "/" + STATS_DIR


class StoredStats:
    """The statistics files of one index version, read by column: the Parquet files of its
    dataset (or its single file), in a fixed order, each with the row ranges of its row groups,
    so that the rows of one column a query needs are read from the row groups holding them."""

    def __init__(self, fs: Any, data_path: str, layout: str | None):
        if layout == DATASET:
            found = sorted(f.path for f in fs.list(stats_dir(data_path))
                           if not f.is_dir and f.name.endswith(".parquet"))
        else:
            found = [stats_path(data_path)]
        self._fs = fs
        self.paths = found
        self._starts: list[int] = []      # the first row of each (file, row group), in order
        self._groups: list[tuple[int, int]] = []
        self._opened: LRUCache[str, Any] = LRUCache(OPEN_FILES)
        self._lock = threading.Lock()

    def _open(self, path: str) -> Any:
        """The Parquet file at ``path``, kept open for the next reads (a local file is read in
        ranges; another file system's is read whole, and kept for the last few)."""
        import pyarrow.parquet as pq

        with self._lock:
            found = self._opened.get(path)
        if found is None:
            local = local_path(path)
            found = pq.ParquetFile(local if local is not None
                                   else io.BytesIO(self._fs.read_bytes(path)))
            with self._lock:
                self._opened[path] = found
        return found

    def read(self, columns: list[str] | None) -> Any:
        """The ``columns`` (those present; None: all) of every row, as one Arrow table."""
        import pyarrow as pa

        parts, row = [], 0
        self._starts, self._groups = [], []
        for f, path in enumerate(self.paths):
            pf = self._open(path)
            names = set(pf.schema_arrow.names)
            part = pf.read(columns=[c for c in columns if c in names] if columns is not None
                           else None)
            for g in range(pf.metadata.num_row_groups):
                self._starts.append(row)
                self._groups.append((f, g))
                row += pf.metadata.row_group(g).num_rows
            parts.append(part)
        if not parts:
            return pa.table({})
        return pa.concat_tables(parts, promote_options="default")

    def read_rows(self, column: str, rows: Any) -> Any:
        """One column at the sorted row numbers ``rows`` (numpy; None: every row), as an Arrow
        array, read from the row groups that hold them only (after :meth:`read`)."""
        import numpy as np
        import pyarrow as pa

        starts = np.asarray(self._starts + [np.iinfo(np.int64).max], dtype=np.int64)
        parts: list[Any] = []
        cuts = None if rows is None else np.searchsorted(rows, starts, side="left")
        for g, (f, group) in enumerate(self._groups):
            wanted = None if cuts is None else rows[cuts[g]:cuts[g + 1]] - starts[g]
            if wanted is not None and len(wanted) == 0:
                continue
            pf = self._open(self.paths[f])
            if column not in pf.schema_arrow.names:
                count = pf.metadata.row_group(group).num_rows if wanted is None else len(wanted)
                parts.append(pa.nulls(count, pa.binary()))
                continue
            values = pf.read_row_group(group, columns=[column]).column(0)
            parts += values.chunks if wanted is None else [values.take(wanted).combine_chunks()]
        if not parts:
            return pa.array([], pa.binary())
        return pa.chunked_array(parts, pa.binary()).combine_chunks()

    def column_bytes(self, column: str) -> int:
        """The bytes of one column, uncompressed, over every file (after :meth:`read`)."""
        total = 0
        for path in self.paths:
            meta = self._open(path).metadata
            names = [meta.schema.column(j).name for j in range(meta.num_columns)]
            if column in names:
                j = names.index(column)
                total += sum(meta.row_group(g).column(j).total_uncompressed_size
                             for g in range(meta.num_row_groups))
        return total
