"""A source's files listed in Python, as Spark's file index lists them (``InMemoryFileIndex``):
every file under its root paths, recursively, without the names Spark hides (``_`` or ``.``
first, except partition directories such as ``_k=1``, and ``._COPYING_`` files being copied),
each with its size and modification time in milliseconds. Used where an index's health is
judged without a JVM (a listing of indexes on the local disk); :func:`listing_obstacle` says
when Python cannot list a source as Spark would."""
from __future__ import annotations

from typing import Any

from indexes.description import SourceDescription, SourceFile
from indexes.fs.local import is_local

#: read options that change which files Spark lists (lower-cased)
LISTING_OPTIONS = ("pathglobfilter", "recursivefilelookup", "modifiedbefore", "modifiedafter",
                   "basepath", "ignoremissingfiles")


def hidden(name: str) -> bool:
    """Whether Spark's listing leaves out a file or directory of this name."""
    return ((name.startswith("_") and "=" not in name) or name.startswith(".")
            or name.endswith("._COPYING_"))


def listing_obstacle(source: SourceDescription) -> str | None:
    """Why Python cannot list ``source``'s files as Spark does (so Spark must describe it), or
    None: a catalog table, a Delta or Iceberg table (their files are the table's log's, not the
    directory's), read options that filter the listing, or paths on another file system."""
    if source.table:
        return "its source is the catalog table " + source.table
    if source.table_format:
        return f"its source is a {source.table_format.capitalize()} table"
    options = sorted(k for k in (source.options or {}) if k.lower() in LISTING_OPTIONS)
    if options:
        return f"its source is read with the listing options {', '.join(options)}"
    paths = [source.glob_path] if source.glob_path else list(source.root_paths or [])
    remote = [p for p in paths if not is_local(p)]
    if remote or not paths:
        return f"its source is on {remote[0].split(':', 1)[0]}://" if remote else \
            "its source names no paths"
    return None


def leaf_files(fs: Any, roots: list[str]) -> list[SourceFile]:
    """The files under ``roots`` (files or directories, qualified) as Spark lists them, sorted;
    a root that does not exist lists nothing."""
    found: list[SourceFile] = []
    pending = list(roots)
    while pending:
        listed = fs.list_each(pending)
        pending = []
        for infos in listed:
            for info in infos:
                if hidden(info.name):
                    continue
                if info.is_dir:
                    pending.append(info.path)
                else:
                    found.append(SourceFile(info.path, info.size, info.modification_time))
    return sorted(found)
