"""Reading the query history back without Spark, through a file-system object.

The rule engine mines the history as plain rows: :func:`read_history_table` returns the stored
records of ``<system path>/_history/`` as one pyarrow table, :func:`read_records` as
:class:`rules.history.records.QueryRecord` objects, and a :class:`RecordCache` reads them again and
again (the rule engine's rounds) parsing each file only once. The file system is any object
with the methods of ``indexes.fs.HadoopFs`` used here: ``list(path)`` (entries with ``path``,
``name`` and ``is_dir``, empty for a missing directory) and ``read_bytes(path)``.
"""
from __future__ import annotations

import io
import logging
from datetime import date
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rules.history.records import HISTORY_SCHEMA, PARTITION_COLUMN, QueryRecord, history_path

log = logging.getLogger("accelerator.history.reader")

__all__ = ["RecordCache", "history_files", "read_history_table", "read_records"]

_PREFIX = f"{PARTITION_COLUMN}="


def _partition_day(name: str) -> date | None:
    """The day of a ``date=YYYY-MM-DD`` directory name, None for other names."""
    if not name.startswith(_PREFIX):
        return None
    try:
        return date.fromisoformat(name[len(_PREFIX):])
    except ValueError:
        return None


def _is_data_file(name: str) -> bool:
    # as Spark's listing: names starting with "." or "_" (temporary files, markers) are hidden
    return name.endswith(".parquet") and not name.startswith((".", "_"))


def history_files(fs: Any, system_path: str, since: date | None = None) -> list[tuple[date, str]]:
    """The history's Parquet files as ``(UTC day, path)``, oldest day first, only the days on
    or after ``since`` when given. Files being written (hidden temporary names) are not listed."""
    found: list[tuple[date, str]] = []
    for entry in fs.list(history_path(system_path)):
        day = _partition_day(entry.name) if entry.is_dir else None
        if day is None or (since is not None and day < since):
            continue
        found.extend((day, f.path) for f in fs.list(entry.path)
                     if not f.is_dir and _is_data_file(f.name))
    return sorted(found)


def _conform(table: pa.Table) -> pa.Table:
    """``table`` with exactly the columns of :data:`HISTORY_SCHEMA`: missing optional ones null,
    others dropped, types cast to the schema's; ValueError when a required one is missing."""
    missing = [f.name for f in HISTORY_SCHEMA
               if not f.nullable and f.name not in table.column_names]
    if missing:
        raise ValueError(f"not a history file: no column {', '.join(missing)}")
    columns = [table.column(f.name).cast(f.type) if f.name in table.column_names
               else pa.nulls(table.num_rows, f.type) for f in HISTORY_SCHEMA]
    return pa.Table.from_arrays(columns, schema=HISTORY_SCHEMA)


def _read_file(fs: Any, path: str) -> pa.Table | None:
    """One history file conformed to :data:`HISTORY_SCHEMA`; None, with a warning, when it
    cannot be read (left by a crashed writer, or removed meanwhile)."""
    try:
        return _conform(pq.read_table(io.BytesIO(fs.read_bytes(path))))
    except Exception:  # noqa: BLE001 - one bad file must not hide the others
        log.warning("unreadable history file skipped: %s", path, exc_info=True)
        return None


def read_history_table(fs: Any, system_path: str, since: date | None = None) -> pa.Table:
    """The recorded queries as one table: the columns of :data:`rules.history.records.HISTORY_SCHEMA`
    (``timestamp`` in epoch milliseconds) plus ``date`` (the record's UTC day, from its
    directory), oldest day first; only the days on or after ``since`` when given.

    Empty, with that schema, when nothing was written. A file that cannot be read (left by a
    crashed writer, or removed meanwhile) is skipped with a warning on
    ``accelerator.history.reader``.
    """
    tables: list[pa.Table] = []
    days: list[date] = []
    for day, path in history_files(fs, system_path, since):
        table = _read_file(fs, path)
        if table is not None:
            tables.append(table)
            days.extend([day] * table.num_rows)
    combined = pa.concat_tables(tables) if tables else HISTORY_SCHEMA.empty_table()
    return combined.append_column(pa.field(PARTITION_COLUMN, pa.date32()),
                                  pa.array(days, pa.date32()))


def _records(table: pa.Table) -> list[QueryRecord]:
    return [QueryRecord.from_row(row) for row in table.to_pylist()]


def read_records(fs: Any, system_path: str, since: date | None = None) -> list[QueryRecord]:
    """The recorded queries as :class:`QueryRecord` objects, oldest day first (see
    :func:`read_history_table`)."""
    return _records(read_history_table(fs, system_path, since))


class RecordCache:
    """The records of the history files read so far, by file path, for a reader that reads a
    history again and again (the rule engine's advising rounds).

    A history file never changes once listed: the recorder writes each under a new name and
    renames it into place. So :meth:`records` lists the history and parses only the files it
    has not parsed before; files no longer listed (removed, or before ``since``) are forgotten.
    An unreadable file is skipped with a warning, as by :func:`read_records`, and tried again
    at the next call.
    """

    def __init__(self) -> None:
        self._parsed: dict[str, list[QueryRecord]] = {}

    def records(self, fs: Any, system_path: str, since: date | None = None
                ) -> list[QueryRecord]:
        """The same records as :func:`read_records` with the same arguments, in its order."""
        files = [path for _, path in history_files(fs, system_path, since)]
        parsed: dict[str, list[QueryRecord]] = {}
        for path in files:
            found = self._parsed.get(path)
            if found is None:
                table = _read_file(fs, path)
                found = None if table is None else _records(table)
            if found is not None:
                parsed[path] = found
        self._parsed = parsed
        return [r for path in files for r in parsed.get(path, ())]
