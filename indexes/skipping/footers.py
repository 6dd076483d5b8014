"""What a data-skipping build learns from Parquet footers instead of scanning: the min/max and
null counts of plain columns (per file and per row group) and where each file's row groups
are (:class:`Layout`), so that the scan job, when one is needed, computes only the other
sketches and splits its statistics by row group.

Footers are read where the files are: up to :data:`DRIVER_FOOTERS` files by the driver
(a Spark job with Python workers costs more), more by a Spark job whose tasks turn each file's
footer into its facts (:data:`Facts`) and keep them; the driver receives only which sketches
every footer answered and how many files have several row groups. The scan's tasks then read
the row group boundaries of the files they scan from the footers themselves
(:func:`footer_bounds`). Files on file systems other than the local one are not read (nothing
is known of them; the scan computes everything).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from pyspark.sql import DataFrame

from indexes.description import SourceDescription, SourceFile
from indexes.skipping import values as V
from indexes.skipping.stats import ColumnStats, FileStats, SketchSpec, bounded
from indexes.source import hadoop_path, local_path

# Up to this many files, the driver reads the Parquet footers itself.
DRIVER_FOOTERS = 64

#: A file's facts for the statistics tasks: (path, size, mtime, its statistics from the footer
#: or None, its row groups' by ordinal or None, its row groups' byte ranges or None: not several)
Facts = tuple[str, int, int, "FileStats | None", "dict[int, FileStats] | None",
              "tuple[tuple[int, int], ...] | None"]

_FOOTER_TYPES = {
    "byte": ("INT32", {"int(bitwidth=8,issigned=true)"}),
    "short": ("INT32", {"int(bitwidth=16,issigned=true)"}),
    "integer": ("INT32", {"none", "int(bitwidth=32,issigned=true)"}),
    "long": ("INT64", {"none", "int(bitwidth=64,issigned=true)"}),
    "date": ("INT32", {"date"}),
    "string": ("BYTE_ARRAY", {"string"}),
}


def _footer_type_ok(column: Any, spark_type: str) -> bool:
    """Whether a Parquet leaf column's statistics order values exactly like the Spark type
    (unsigned integers, INT96 timestamps, floats (NaN) and FLBA decimals are left out)."""
    logical = str(column.logical_type).replace(" ", "").lower()
    if spark_type.startswith("decimal("):
        precision, scale = spark_type[len("decimal("):-1].split(",")
        return (column.physical_type in ("INT32", "INT64")
                and logical == f"decimal(precision={precision},scale={scale})")
    expected = _FOOTER_TYPES.get(spark_type)
    return expected is not None and column.physical_type == expected[0] and logical in expected[1]


@dataclass(frozen=True)
class Layout:
    """Where a Parquet file's row groups are: each one's first row (its index in the file) and
    byte range (see :class:`indexes.skipping.store.RowGroup`), and the file's row count."""

    first_rows: tuple[int, ...]
    ranges: tuple[tuple[int, int], ...]
    rows: int

    @property
    def bounds(self) -> list[int]:
        """Each row group's first row, then the file's row count (the scan's boundaries)."""
        return [*self.first_rows, self.rows]


def row_group_layout(meta: Any, size: int) -> Layout | None:
    """The layout of a file of several row groups from its pyarrow metadata and size, where
    Parquet's reader places them (each row group's first byte and midpoint as its
    ``filterFileMetaDataByMidpoint`` computes them); None for one row group, or when a midpoint
    is not inside its row group's range (then the file is only judged whole)."""
    if meta.num_row_groups < 2:
        return None
    starts, midpoints, first_rows, row = [], [], [], 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        chunk = group.column(0)   # Parquet's reader starts a row group where its first chunk does
        start = chunk.data_page_offset
        if chunk.has_dictionary_page and chunk.dictionary_page_offset < start:
            start = chunk.dictionary_page_offset
        starts.append(start)
        total = sum(group.column(j).total_compressed_size for j in range(group.num_columns))
        midpoints.append(start + total // 2)
        first_rows.append(row)
        row += group.num_rows
    ends = starts[1:] + [size]
    if any(not a <= m < b for a, m, b in zip(starts, midpoints, ends)):
        return None
    return Layout(tuple(first_rows), tuple(zip(starts, ends)), row)


def _read_footer(path: str, size: int, wanted: list[tuple[int, tuple[str, ...], str]]
                 ) -> tuple[dict[int, tuple[int, dict]], Layout | None]:
    """({row group: (rows, {spec ordinal: (nulls, min, max)})}, layout) of one local Parquet
    file's footer, leaving out the ``wanted`` columns whose statistics are missing or not
    trustworthy in some row group."""
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(local_path(path)).metadata
    schema = meta.schema
    leaf = {tuple(schema.column(j).path.split(".")): j for j in range(meta.num_columns)}
    groups: dict[int, tuple[int, dict]] = {
        g: (meta.row_group(g).num_rows, {}) for g in range(meta.num_row_groups)}
    for ordinal, col_path, spark_type in wanted:
        j = leaf.get(col_path)
        if j is None or not _footer_type_ok(schema.column(j), spark_type):
            continue
        for g, (n, found) in groups.items():
            st = meta.row_group(g).column(j).statistics
            if st is None or not st.has_null_count:
                break
            if st.null_count == n:
                found[ordinal] = (st.null_count, None, None)
            elif st.has_min_max:
                found[ordinal] = (st.null_count, V.from_python(st.min, spark_type),
                                  V.from_python(st.max, spark_type))
            else:
                break
        else:
            continue
        for _, found in groups.values():   # one row group lacks them: none count
            found.pop(ordinal, None)
    return groups, row_group_layout(meta, size)


def _fold_footer(groups: dict[int, tuple[int, dict]], ordinal: int,
                 spark_type: str) -> tuple[int, Any, Any]:
    """A file's (nulls, min, max) of one column from its row groups'."""
    key = lambda v: V.order_key(v, spark_type)  # noqa: E731
    nulls, lo, hi = 0, None, None
    for _, found in groups.values():
        n, gl, gh = found[ordinal]
        nulls += n
        if gl is not None and (lo is None or key(gl) < key(lo)):
            lo = gl
        if gh is not None and (hi is None or key(gh) > key(hi)):
            hi = gh
    return nulls, lo, hi


def _facts(specs: list[SketchSpec], answered: set[int], read: tuple) -> Facts:
    """A file's :data:`Facts` from what its footer told (``read``: path, size, mtime, row
    groups, layout), keeping the statistics of the ``answered`` spec ordinals."""
    path, size, mtime, groups, layout = read
    columns = {}
    for i in answered:
        nulls, lo, hi = _fold_footer(groups, i, specs[i].type)
        columns[specs[i].key] = ColumnStats(specs[i].type, *bounded(lo, hi), nulls)
    stats = FileStats(sum(n for n, _ in groups.values()), columns)
    if layout is None:
        return path, size, mtime, stats, None, None
    by_group = {g: FileStats(n, {
        specs[i].key: ColumnStats(specs[i].type, *bounded(per[i][1], per[i][2]), per[i][0])
        for i in answered}) for g, (n, per) in groups.items()}
    return path, size, mtime, stats, by_group, layout.ranges


def _answered(wanted: list[tuple[int, tuple[str, ...], str]], groups: dict) -> set[int]:
    """The ``wanted`` spec ordinals a file's footer answered in every row group."""
    out = {i for i, _, _ in wanted}
    for _, per in groups.values():
        out &= set(per)
    return out


@dataclass
class FooterFacts:
    """What the footers of a build's files told (see the module docstring).

    ``keys``: the sketches every footer answered (the scan computes the others, ``rest``);
    ``layered``: how many files have several row groups; ``facts``: each file's
    :data:`Facts`, a list (read by the driver) or an RDD persisted on the executors
    (:meth:`release` it after use)."""

    keys: set[str]
    rest: list[SketchSpec]
    layered: int
    facts: Any

    def release(self) -> None:
        """Lets the executors drop the facts the build kept."""
        if hasattr(self.facts, "unpersist"):
            self.facts.unpersist()


def footer_facts(df: DataFrame, source: SourceDescription, specs: list[SketchSpec],
                 paths: dict[str, tuple[str, ...] | None],
                 files: Sequence[SourceFile]) -> FooterFacts:
    """What the footers of ``files`` (those ``df`` reads) tell of the MinMax-only ``specs``
    over plain columns (``paths``: each sketch key's column path, None when not a plain
    column). Nothing is read of a source other than local Parquet files."""
    from pyspark import StorageLevel

    wanted = [(i, paths[spec.key], spec.type) for i, spec in enumerate(specs)
              if spec.minmax and spec.max_values is None and spec.bloom_capacity is None
              and paths.get(spec.key) is not None]
    triples = [(f.path, int(f.size), int(f.mtime)) for f in files]
    readable = (source.read_format == "parquet" and bool(triples)
                and all(local_path(p) is not None for p, _, _ in triples))
    unread = lambda t: (*t, None, None, None)  # noqa: E731
    read = lambda t: (*t, *_read_footer(t[0], t[1], wanted))  # noqa: E731
    if len(triples) <= DRIVER_FOOTERS:
        if not readable:
            return FooterFacts(set(), specs, 0, [unread(t) for t in triples])
        found = [read(t) for t in triples]
        answered = set.intersection(*[_answered(wanted, r[3]) for r in found])
        layered = sum(r[4] is not None for r in found)
        facts: Any = [_facts(specs, answered, r) for r in found]
    else:
        sc = df.sparkSession.sparkContext
        listed = sc.parallelize(triples, max(1, min(len(triples), sc.defaultParallelism * 4)))
        if not readable:
            return FooterFacts(set(), specs, 0, listed.map(unread))
        found = listed.map(read).persist(StorageLevel.MEMORY_AND_DISK)
        answered, layered = found.map(lambda r: (_answered(wanted, r[3]), int(r[4] is not None))
                                      ).reduce(lambda a, b: (a[0] & b[0], a[1] + b[1]))
        facts = found.map(lambda r: _facts(specs, answered, r))
    keys = {specs[i].key for i in answered}
    return FooterFacts(keys, [s for s in specs if s.key not in keys], layered, facts)


def layouts(df: DataFrame, files: Sequence[SourceFile]) -> dict[str, Layout]:
    """The layout of each local Parquet file of ``files`` that has several row groups, by
    path (collected to the driver: for an index that records them)."""
    pairs = [(f.path, int(f.size)) for f in files if local_path(f.path) is not None]

    def layout_of(files: Iterator[tuple[str, int]]) -> Iterator[tuple[str, Layout]]:
        for path, size in files:
            layout = _read_footer(path, size, [])[1]
            if layout is not None:
                yield path, layout

    if len(pairs) <= DRIVER_FOOTERS:
        return dict(layout_of(iter(pairs)))
    sc = df.sparkSession.sparkContext
    return dict(sc.parallelize(pairs, max(1, min(len(pairs), sc.defaultParallelism * 4)))
                .mapPartitions(layout_of).collect())


def footer_bounds() -> Callable[[str], list[int] | None]:
    """For a scan task: the row group boundaries (:attr:`Layout.bounds`) of a file by the URI
    Spark gives, read from its footer once per task; None for a file of one row group or not
    on the local file system."""
    import os

    import pyarrow.parquet as pq

    known: dict[str, list[int] | None] = {}

    def bounds(uri: str) -> list[int] | None:
        if uri not in known:
            path = local_path(hadoop_path(uri))
            layout = None if path is None else row_group_layout(
                pq.ParquetFile(path).metadata, os.path.getsize(path))
            known[uri] = None if layout is None else layout.bounds
        return known[uri]
    return bounds
