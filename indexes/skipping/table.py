"""An index version's statistics in memory, in columns: every file's and row group's bounds,
null counts and value lists as Arrow columns, read once per version and sketch (the files'
paths, sizes and row counts when the version is first used, a sketch's statistics when a query
first names it; the Bloom filters apart, read only for the files a query leaves to the
evaluator, and only for the sketches its filter names), with what queries derive from them
computed once per version instead of once per query: each sketched expression's sorted bounds
(for the first pass, :mod:`indexes.skipping.prefilter`) and, per listing of the source, which
of its files the statistics describe as they are now. A file's :class:`FileEntry` is made only
when the evaluator judges it one by one (:mod:`indexes.skipping.vectorized` judges the rest
over the columns)."""
from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from cachetools import LRUCache

from indexes.description import source_files
from indexes.skipping.prefilter import BloomSlices, Bounds
from indexes.skipping.stats import FileStats, SketchSpec
from indexes.skipping.store import (BASE_COLUMNS, FileEntry, RowGroup, StoredStats, arrow_schema,
                                    column_stats)

_LISTINGS_KEPT = 8
#: a sketch's Bloom filters (of every file of a version) are kept in memory, once read, up to
#: this many bytes; larger ones are read per query, for the files the first pass leaves only
BLOOMS_KEPT_BYTES = 256 << 20
_STAT_PARTS = ("min", "max", "nulls", "values")


@dataclass(frozen=True)
class Listing:
    """A source listing ([path, size, mtime] rows) against the statistics: ``judged`` the files
    they describe (same size and modification time) as indexes of the table's files, in listing
    order, with their ``judged_positions`` in the listing; ``unindexed`` the others (always
    read) with theirs; ``sizes`` each listed file's size by position; the ``total_bytes``."""

    judged: Any                 # numpy int64: file indexes of the table
    judged_positions: Any       # numpy int64
    unindexed: list[str]
    unindexed_positions: Any    # numpy int64
    sizes: Any                  # numpy int64, by listing position
    total_bytes: int


class StatsTable:
    """The statistics of one index version (see the module docstring), never changed once
    read (so what is derived from it stays true), shared by the queries of every thread.
    Files are numbered 0..n-1 in the order of their rows."""

    def __init__(self, specs: list[SketchSpec], columns: Any,
                 blooms: Callable[[str, Any], Any],
                 slicer: Callable[[str, Any], Any] | None = None,
                 loader: Callable[[list[str]], Any] | None = None):
        """``columns``: an Arrow table of the stored columns but the Bloom filters, a file's
        row groups right after its row; ``blooms(column, rows)``: the stored filters of those
        rows (numpy), as :meth:`blooms` gives them; ``slicer(column, rows)``: the
        :class:`BloomSlices` of those rows' filters, or None; ``loader(names)``: the stored
        columns ``names`` not in ``columns`` yet, as an Arrow table of the same rows (read
        when first needed: a query reads the statistics of the sketches its filter names)."""
        import numpy as np
        import pyarrow.compute as pc

        self.specs = specs
        self._columns = columns.combine_chunks()     # one chunk per column: take() is fast
        self._blooms = blooms
        self._index = {spec.key: i for i, spec in enumerate(specs)}
        columns = self._columns
        groups = columns.column("row_group") if "row_group" in columns.column_names else None
        is_file = (np.ones(columns.num_rows, dtype=bool) if groups is None
                   else pc.is_null(groups).to_numpy(zero_copy_only=False))
        self._rows = np.flatnonzero(is_file)            # each file's row
        self._ends = np.append(self._rows[1:], columns.num_rows)   # past its row groups
        self._paths = columns.column("file").take(self._rows).combine_chunks()
        self._lock = threading.Lock()
        self._bounds: dict[tuple[str, str], Bounds] = {}
        self._listings: LRUCache[int, tuple[list, Listing]] = LRUCache(_LISTINGS_KEPT)
        self._position: dict[str, int] | None = None
        self._slicer = slicer
        self._slices: dict[str, Any] = {}
        self._loader = loader
        self._view: StatsTable | None = None       # the row groups as files, when first needed

    @staticmethod
    def read(fs: Any, data_path: str, specs: list[SketchSpec], layout: str | None) -> "StatsTable":
        """The statistics of the data version ``data_path`` (``layout`` as its content records
        it), without their Bloom filters, which are read when a query needs them (and kept
        when they are at most BLOOMS_KEPT_BYTES)."""
        return StatsTable.of_stored(StoredStats(fs, data_path, layout), specs)

    @staticmethod
    def of_stored(stored: Any, specs: list[SketchSpec]) -> "StatsTable":
        """The statistics ``stored`` holds (a :class:`StoredStats`, or anything read through
        the same three calls) of the sketches ``specs``."""
        import pyarrow as pa

        schema = arrow_schema(specs)
        columns = stored.read(list(BASE_COLUMNS))
        if columns.num_columns == 0:   # no statistics file: no file indexed
            columns = schema.empty_table().select(list(BASE_COLUMNS))
        ordered = _in_file_order(columns)
        moved = None if ordered is columns else ordered.column("__row").to_numpy()

        def loader(names: list[str]) -> Any:
            found = stored.read(names)
            out = {}
            for n in names:
                column = (found.column(n) if n in found.column_names
                          else pa.nulls(columns.num_rows, schema.field(n).type))
                out[n] = column if moved is None else column.take(moved)
            return pa.table(out)

        def blooms(column: str, rows: Any) -> tuple[Any, Any]:
            import numpy as np

            rows = rows if moved is None else moved[rows]
            order = np.argsort(rows, kind="stable")
            inverse = np.empty_like(order)
            inverse[order] = np.arange(len(order))
            return stored.read_rows(column, rows[order]), inverse

        def slices(column: str, rows: Any) -> Any:
            if stored.column_bytes(column) > BLOOMS_KEPT_BYTES:
                return None
            every = stored.read_rows(column, None)
            rows = rows if moved is None else moved[rows]
            return BloomSlices.of(every if len(rows) == len(every) and moved is None
                                  else every.take(rows))
        return StatsTable(specs, ordered, blooms, slicer=slices, loader=loader)

    # --- files ------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._rows)

    def paths(self, files: Any) -> list[str]:
        """The paths of the files numbered ``files`` (numpy)."""
        return self._paths.take(files).to_pylist()

    def file_index(self) -> dict[str, int]:
        """Path → file number."""
        with self._lock:
            if self._position is None:
                self._position = {p: i for i, p in enumerate(self._paths.to_pylist())}
            return self._position

    def _need(self, names: list[str]) -> Any:
        """The columns (an Arrow table) with ``names`` among them, read if they are not yet."""
        with self._lock:
            columns = self._columns
            missing = [n for n in names if n not in columns.column_names]
            if missing and self._loader is not None:
                found = self._loader(missing).combine_chunks()
                for n in missing:
                    columns = columns.append_column(n, found.column(n))
                self._columns = columns
            return columns

    def column(self, name: str, files: Any | None = None) -> Any:
        """A stored column at the files' rows (all files, or those numbered ``files``)."""
        rows = self._rows if files is None else self._rows[files]
        return self._need([name]).column(name).take(rows)

    def spec_index(self, key: str) -> int | None:
        """The ordinal of the sketched expression ``key`` (None when not sketched)."""
        return self._index.get(key)

    def has_blooms(self, key: str, type_: str) -> bool:
        """Whether files may have a Bloom filter of ``key`` of type ``type_``."""
        i = self._index.get(key)
        return i is not None and self.specs[i].type == type_ and bool(self.specs[i].bloom_capacity)

    def bloom_slices(self, key: str) -> BloomSlices | None:
        """Every file's Bloom filter of ``key``, bit-sliced (read and made once per version),
        when the filters are at most BLOOMS_KEPT_BYTES and of one size; else None."""
        if self._slicer is None:
            return None
        column = f"s{self._index[key]}_bloom"
        with self._lock:
            if column in self._slices:
                return self._slices[column]
        found = self._slicer(column, self._rows)
        with self._lock:
            self._slices[column] = found
        return found

    def blooms(self, key: str, files: Any) -> tuple[Any, Any]:
        """The Bloom filters of ``key`` of the files numbered ``files`` (numpy, ascending):
        ``(array, index)``, the filters being ``array`` at ``index`` (all of it when None):
        an Arrow array of their stored bytes (null when absent)."""
        return self._blooms(f"s{self._index[key]}_bloom", self._rows[files])

    def entries(self, files: Any, keys: set[str] | None = None) -> list[FileEntry]:
        """The FileEntry of each file numbered ``files`` (numpy), with its row groups; Bloom
        filters only of the sketched expressions ``keys`` (None: all)."""
        import numpy as np

        if len(files) == 0:
            return []
        counts = self._ends[files] - self._rows[files]
        rows = np.concatenate([np.arange(a, b) for a, b in zip(self._rows[files], self._ends[files])]) \
            if counts.max() > 1 else self._rows[files]
        taken = self._need([f"s{i}_{p}" for i in range(len(self.specs))
                            for p in _STAT_PARTS]).take(rows)
        cols = {n: taken.column(n).to_pylist() for n in taken.column_names}
        blooms = {}
        for i, spec in enumerate(self.specs):
            if spec.bloom_capacity and (keys is None or spec.key in keys):
                with self._lock:
                    sliced = self._slices.get(f"s{i}_bloom")
                if sliced is not None and len(rows) == len(files):   # no row groups
                    blooms[i] = sliced.stored(files)
                    continue
                found, at = self._blooms(f"s{i}_bloom", rows)
                blooms[i] = (found.take(at) if at is not None else found).to_pylist()
        none = [None] * len(rows)

        def stats(j: int) -> FileStats:
            return FileStats(cols["rows"][j], {spec.key: column_stats(
                spec, *(cols[f"s{i}_{p}"][j] for p in _STAT_PARTS), blooms.get(i, none)[j])
                for i, spec in enumerate(self.specs)})
        out, j = [], 0
        for n in counts.tolist():
            groups = tuple(RowGroup(cols["start"][k], cols["end"][k], stats(k))
                           for k in range(j + 1, j + n))
            out.append(FileEntry(cols["size"][j], cols["mtime"][j], stats(j), groups))
            j += n
        return out

    def rows(self, files: Any) -> Any:
        """The row counts of the files numbered ``files`` (numpy int64, -1 where unknown)."""
        return self.column("rows", files).fill_null(-1).to_numpy(zero_copy_only=False)

    def row_groups(self, files: Any) -> Any:
        """A numpy mask over ``files`` of those whose row groups the statistics describe."""
        return self._ends[files] - self._rows[files] > 1

    def row_groups_of(self, files: Any) -> tuple["StatsTable", Any, Any]:
        """The row groups of the files numbered ``files`` as files of another table:
        ``(view, groups, owner)``, ``groups`` their numbers in ``view`` (whose every row is a
        file, without Bloom filter slices) and ``owner`` each one's position in ``files``."""
        import copy

        import numpy as np

        starts, counts = self._rows[files] + 1, self._ends[files] - self._rows[files] - 1
        owner = np.repeat(np.arange(len(files)), counts)
        first = np.cumsum(counts) - counts
        groups = np.arange(int(counts.sum())) - np.repeat(first, counts) + np.repeat(starts, counts)
        with self._lock:
            view = self._view
        if view is None:
            view = copy.copy(self)
            view._rows = np.arange(self._columns.num_rows)
            view._ends = view._rows + 1
            view._slicer, view._slices, view._bounds, view._position = None, {}, {}, None
            view._lock = threading.Lock()       # its loader takes this table's
            view._loader = lambda names: self._need(names).select(names)   # read once, shared
            with self._lock:
                self._view = view
        return view, groups, owner

    def sketch_columns(self, key: str, type_: str, files: Any) -> dict | None:
        """The statistics of the sketched expression ``key`` of type ``type_`` of the files
        numbered ``files``, as columns: ``known`` (a numpy mask: the file has statistics of
        it of that type), ``nulls`` (numpy int64, -1 where unknown), ``min`` and
        ``max`` (Arrow arrays of internal values, null where unknown), ``values`` (an Arrow
        list array: the list of its values, null where unknown) and ``listed`` (a numpy mask:
        where it is known); None when no file has them."""
        i = self._index.get(key)
        if i is None or self.specs[i].type != type_:
            return None
        self._need([f"s{i}_{p}" for p in _STAT_PARTS])        # one read for the four
        lo, hi, nulls, listed = (self.column(f"s{i}_{p}", files) for p in _STAT_PARTS)
        valid = [c.is_valid().to_numpy(zero_copy_only=False) for c in (lo, hi, nulls, listed)]
        return {"known": valid[0] | valid[1] | valid[2] | valid[3],   # a row of nulls: none
                "nulls": nulls.fill_null(-1).to_numpy(zero_copy_only=False),
                "min": lo, "max": hi, "listed": valid[3], "values": listed}

    def bounds(self, key: str, type_: str) -> Bounds:
        """Every file's bounds of the sketched expression ``key`` of type ``type_``."""
        with self._lock:
            found = self._bounds.get((key, type_))
        if found is None:
            found = Bounds(self, key, type_)
            with self._lock:
                self._bounds[(key, type_)] = found
        return found

    def listing(self, files: list) -> Listing:
        """``files`` (a listing the caller keeps unchanged: the index's recorded one or a
        described one it caches) against these statistics, remembered for the last few."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        with self._lock:
            found = self._listings.get(id(files))
            if found is not None and found[0] is files:
                return found[1]
        listed = source_files(files)   # plain [path, size, mtime] lists too
        paths = pa.array([f.path for f in listed], pa.string())
        sizes = np.array([f.size for f in listed], dtype=np.int64)
        mtimes = np.array([f.mtime for f in listed], dtype=np.int64)
        at = pc.index_in(paths, value_set=self._paths).to_numpy(zero_copy_only=False)
        known = ~np.isnan(at) if at.dtype.kind == "f" else np.ones(len(at), dtype=bool)
        number = np.where(known, np.nan_to_num(at), 0).astype(np.int64) if at.dtype.kind == "f" \
            else at.astype(np.int64)
        if len(self):
            stored_size = self.column("size").to_numpy(zero_copy_only=False)[number]
            stored_mtime = self.column("mtime").to_numpy(zero_copy_only=False)[number]
            known &= (stored_size == sizes) & (stored_mtime == mtimes)
        else:
            known[:] = False
        positions = np.arange(len(listed), dtype=np.int64)
        listing = Listing(number[known], positions[known],
                          [listed[i].path for i in np.flatnonzero(~known).tolist()],
                          positions[~known], sizes, int(sizes.sum()))
        with self._lock:
            self._listings[id(files)] = (files, listing)   # the least recently used goes
        return listing


def _in_file_order(columns: Any) -> Any:
    """``columns`` with each file's row groups right after its row (as both writers leave
    them; otherwise sorted by file and row group, with a column ``__row``: each row's number
    in ``columns``)."""
    import numpy as np
    import pyarrow.compute as pc

    if "row_group" not in columns.column_names or \
            columns.column("row_group").null_count == columns.num_rows:   # no row groups
        return columns
    is_file = pc.is_null(columns.column("row_group")).to_numpy(zero_copy_only=False)
    owner = np.flatnonzero(is_file)[np.maximum(np.cumsum(is_file) - 1, 0)]
    if is_file[0] and pc.all(pc.equal(columns.column("file"),
                                      columns.column("file").take(owner))).as_py():
        return columns
    import pyarrow as pa

    numbered = columns.append_column("__row", pa.array(np.arange(columns.num_rows)))
    # a file's own row (row_group null) first, then its row groups in order
    row_group = pc.fill_null(columns.column("row_group"), -1).to_numpy(zero_copy_only=False)
    file = columns.column("file").to_numpy(zero_copy_only=False)
    return numbered.take(np.lexsort((row_group, file)))


class JudgedFiles(Mapping):
    """Path → FileEntry of the files a listing's statistics describe (made on access: explain
    reads them, queries do not)."""

    def __init__(self, table: StatsTable, listing: Listing):
        self._table, self._listing = table, listing
        self._entries: dict[str, FileEntry] | None = None

    def _all(self) -> dict[str, FileEntry]:
        if self._entries is None:
            files = self._listing.judged
            self._entries = dict(zip(self._table.paths(files), self._table.entries(files)))
        return self._entries

    def __getitem__(self, path: str) -> FileEntry:
        return self._all()[path]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._listing.judged)
