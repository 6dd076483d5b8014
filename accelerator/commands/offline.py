"""The read-only commands answered without a JVM when the system path is on the local disk:
``indexes``, ``index``, ``events`` and ``history`` read the index logs, the events and the
query history in Python (:class:`indexes.fs.local.LocalFs`) and print what the same command
prints with Spark (:mod:`accelerator.commands.table`). An index's health (``warning``) comes
from its source's files listed in Python (:class:`indexes.freshness.ListedSources`); for a
source only Spark can describe (a catalog, Delta or Iceberg table, listing options, another
file system) it says that it was not checked and that ``--spark`` checks it."""
from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

from accelerator.api import rows as R
from accelerator.commands import table
from indexes.events import EventLog
from indexes.fs.local import LocalFs
from indexes.freshness import ListedSources, source_warnings
from indexes.lifecycle import IndexLifecycle

#: the commands this module answers
COMMANDS = ("indexes", "index", "events", "history")


def _indexes(fs: LocalFs, system_path: str, args: argparse.Namespace) -> tuple[list, str]:
    entries = IndexLifecycle(fs, system_path).list()
    listed = ListedSources(fs)
    return R.index_rows(entries, source_warnings(entries, listed.problem, listed.current)), \
        R.INDEXES_SCHEMA


def _index(fs: LocalFs, system_path: str, args: argparse.Namespace) -> tuple[list, str]:
    entry = IndexLifecycle(fs, system_path).get(args.name)
    listed = ListedSources(fs)
    warning = source_warnings([entry], listed.problem, listed.current).get(entry.name)
    return [R.index_detail_row(entry, warning)], R.INDEX_SCHEMA


def _events(fs: LocalFs, system_path: str, args: argparse.Namespace) -> tuple[list, str]:
    return [R.event_row(e) for e in EventLog(fs, system_path).read()], R.EVENTS_SCHEMA


def _history(fs: LocalFs, system_path: str, args: argparse.Namespace) -> tuple[list, str]:
    from rules.history.reader import read_history_table
    from rules.history.records import spark_ddl

    found = read_history_table(fs, system_path)
    rows = []
    for record in found.to_pylist():
        record["timestamp"] = datetime.fromtimestamp(record["timestamp"] / 1000)
        rows.append(tuple(record[name] for name in found.column_names))
    return rows, spark_ddl().replace("`timestamp` BIGINT", "`timestamp` TIMESTAMP")


_READERS: dict[str, Any] = {"indexes": _indexes, "index": _index, "events": _events,
                            "history": _history}


def run(args: argparse.Namespace, system_path: str) -> int:
    """Prints the answer of the read-only command ``args.command`` over the local
    ``system_path`` (which exists), as the command prints it with Spark."""
    rows, ddl = _READERS[args.command](LocalFs(), system_path, args)
    if args.json:
        print(table.json_lines(rows, ddl), end="")
    else:
        print(table.show(rows, ddl, vertical=args.command == "index"))
    return 0
