"""What an index records of its source, and whether a relation still reads that source."""
from __future__ import annotations

import threading
import unicodedata
from dataclasses import dataclass
from typing import Any, Sequence
from urllib.parse import unquote

from indexes.description import SourceDescription, SourceFile, source_files
from indexes.plan import PlanNode, output_attributes


@dataclass(frozen=True)
class NotApplicable:
    """Why the index cannot answer the relation: a stable code and a sentence for the user."""

    index: Any
    code: str
    reason: str
    applicable = False


def covered_files(entry: Any) -> list[SourceFile]:
    """The source files whose rows an index's data holds: those its log records, less the
    files a quick refresh recorded as appended, plus those it recorded as deleted (a quick
    refresh updates the log, not the data)."""
    pending = entry.content.get("quickRefresh") or {}
    appended = set(source_files(pending.get("appended", [])))
    files = [f for f in entry.source.files or () if f not in appended]
    return files + list(source_files(pending.get("deleted", [])))


def file_changes(entry: Any, files: Sequence[SourceFile]
                 ) -> tuple[list[SourceFile], list[SourceFile]]:
    """(appended, deleted): the ``files`` (a source's current files) the index's data does not
    hold, and the files it holds that are no longer there (a modified file is in both), each
    sorted."""
    covered = set(covered_files(entry))
    current = set(files)
    return sorted(current - covered), sorted(covered - current)


def source_changes(entry: Any, source: SourceDescription
                   ) -> tuple[list[SourceFile], list[SourceFile]] | None:
    """:func:`file_changes` of ``entry`` against the relation ``source`` describes, from its
    difference to the index's recorded files where it knows that (no more work than the
    difference holds: :meth:`SourceDescription.changes_since`), else from its files; None when
    it describes neither."""
    changes = source.changes_since(entry.source)
    if changes is None:
        return None if source.files is None else file_changes(entry, source.files)
    # the relation holds recorded - deleted + appended; the index's data holds recorded - the
    # quick refresh's appended + its deleted (its appended are recorded, its deleted are not)
    pending = entry.content.get("quickRefresh") or {}
    quick_appended = set(source_files(pending.get("appended", [])))
    quick_deleted = set(source_files(pending.get("deleted", [])))
    appended, deleted = set(changes.appended), set(changes.deleted)
    return (sorted((quick_appended - deleted) | (appended - quick_deleted)),
            sorted((deleted - quick_appended) | (quick_deleted - appended)))


#: the recorded files' bytes, by the identity of an index version's files (the last few)
_RECORDED_BYTES: dict[int, tuple[Any, int]] = {}
_RECORDED_KEPT = 16
_RECORDED_LOCK = threading.Lock()


def source_bytes(entry: Any, source: SourceDescription) -> int:
    """The bytes of the files the relation ``source`` describes reads: summed from its files,
    else given with its difference to the recorded files of ``entry``, else (the same files)
    those recorded, summed once per index version."""
    if source.files is not None:
        return sum(f.size for f in source.files)
    changes = source.changes_since(entry.source)
    if changes is not None and changes.bytes is not None:
        return changes.bytes
    files = entry.source.files or ()
    with _RECORDED_LOCK:
        found = _RECORDED_BYTES.get(id(files))
    if found is None or found[0] is not files:
        found = (files, sum(f.size for f in files))
        with _RECORDED_LOCK:
            if len(_RECORDED_BYTES) >= _RECORDED_KEPT:
                _RECORDED_BYTES.pop(next(iter(_RECORDED_BYTES)))
            _RECORDED_BYTES[id(files)] = found
    return found[1]


# --- which source a relation reads ---------------------------------------------------------
# A relation reads one of three kinds of source: a table of Spark's session catalog (named by
# its qualified identifier, at its location), a glob pattern (one ``path`` with glob
# characters: the directories it matches are the relation's root paths, so a new matching
# directory is more of the same source) or a list of paths (the root paths themselves).


def same_source(recorded: SourceDescription, current: SourceDescription) -> bool:
    """Whether ``current`` (a relation's description) reads the source an index recorded: the
    same catalog table at the same location, the same glob pattern, or, for an index over
    paths, the same root paths (whichever way the relation reads them: a table over that
    directory too)."""
    if recorded.table:
        return recorded.table == current.table and recorded.root_paths == current.root_paths
    if recorded.glob_path:
        return recorded.glob_path == current.glob_path
    return recorded.root_paths == current.root_paths


def source_name(description: SourceDescription) -> str:
    """How a message names a source: ``table <name> at <location>``, the glob pattern, or
    the root paths."""
    roots = ", ".join(description.root_paths or [])
    if description.table:
        return f"table {description.table} at {roots}"
    return description.glob_path or roots


def table_change(recorded: SourceDescription, current: SourceDescription | None) -> str | None:
    """Why an index's catalog table is no longer its source (``current``: the description of
    the table now under that name, None when there is none), or None when it still is."""
    if current is None or current.table != recorded.table:   # none, or a view
        return (f"its table {recorded.table} no longer exists (dropped or renamed); "
                "delete the index, or recreate it over the table as it is now")
    if current.root_paths != recorded.root_paths:
        return (f"its table {recorded.table} is now at "
                f"{', '.join(current.root_paths or [])}, the index was built over "
                f"{', '.join(recorded.root_paths or [])} (dropped and recreated?); "
                "delete the index, or recreate it over the table as it is now")
    return None


def pruning_problem(current: SourceDescription) -> str | None:
    """Why no index may prune the file list of a relation reading ``current``, or None: a
    Delta table whose files carry deletion vectors, which Delta applies only in its own scan of
    its own file index, or an Iceberg table whose files carry delete files, which only Iceberg's
    scan applies (a pruned list of its files would read their deleted rows)."""
    if not current.deletion_vectors:
        return None
    if current.table_format == "iceberg":
        return (f"{current.deletion_vectors} files of the Iceberg table carry delete files, "
                "which only Iceberg's own scan applies; an index that prunes its files would "
                "bypass them. Rewrite those files (CALL <catalog>.system.rewrite_data_files "
                "with the option delete-file-threshold) and refresh the index to use it again")
    return (f"{current.deletion_vectors} files of the Delta table carry deletion vectors, which "
            "only Delta's own scan of its file list applies; an index that prunes the list "
            "would bypass them. Rewrite those files without deletion vectors (REORG TABLE ... "
            "APPLY (PURGE)) and refresh the index to use it again")


#: Spark's hidden column of file metadata (``_metadata.file_path``, ``_metadata.row_index``).
METADATA_COLUMN = "_metadata"


def relation_schema(relation: PlanNode) -> list[list[Any]]:
    """The relation's output as [name, type] pairs (what an index records of its source)."""
    return [[a.fields["name"], a.fields["dataType"]] for a in output_attributes(relation)]


def read_options(source: SourceDescription) -> dict:
    """The options a source is read with, without its paths (those are its files)."""
    return {k: v for k, v in (source.options or {}).items()
            if k.lower() not in ("path", "paths")}


def _options(source: SourceDescription) -> dict:
    return {k.lower(): v for k, v in read_options(source).items()}


def _read_as(description: SourceDescription) -> str:
    if description.table_format:
        return f"a {description.table_format} table"
    return f"plain {description.format} files"


def source_mismatch(recorded: SourceDescription, current: SourceDescription,
                    current_schema: list, check_files: bool = True) -> str | None:
    """Why ``current`` (a relation's description) is not the source the index was built from;
    without ``check_files`` only the way it is read counts, not which files it holds."""
    if recorded.format != current.format:
        return f"the source format is {current.format}, the index was built over {recorded.format}"
    if recorded.table_format != current.table_format:
        return (f"the source is read as {_read_as(current)}, the index was built over "
                f"{_read_as(recorded)}")
    if _options(recorded) != _options(current):
        return "the source is read with other options than when the index was built"
    if recorded.read_settings != current.read_settings:
        before, now = recorded.read_settings or {}, current.read_settings or {}
        changed = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
        version = recorded.spark_version
        under = (f" under Spark {version} (some of their defaults differ between Spark versions)"
                 if version else "")
        return ("settings that change what is read from files differ from when the index was "
                f"built{under}: {', '.join(changed)}; a full refresh rebuilds it under the "
                "current ones")
    if recorded.schema != current_schema:
        data_columns = [c for c in current_schema if c[0] != METADATA_COLUMN]
        if data_columns != current_schema and data_columns == recorded.schema:
            return (f"the query reads the file metadata column {METADATA_COLUMN} (file path, "
                    "row index), which no index serves")
        return "the source schema differs from the one the index was built over"
    if check_files and recorded.fingerprint != current.fingerprint:
        files = current.files
        if files is not None:
            old = set(recorded.files or ())
            new = set(files)
            if old == new and recorded.files is not None:
                return None   # the same files, fingerprinted by an older version's scheme
            return (f"the source files changed since the index was built "
                    f"({len(new - old)} appended or modified, {len(old - new)} deleted); refresh the index")
        return "the source files changed since the index was built; refresh the index"
    return None


# --- file paths and URIs ---------------------------------------------------------------------
# An index log records files as Hadoop path strings (``FileStatus.getPath().toString()``:
# ``file:/data/a#b/x.parquet``, nothing escaped); Spark gives them as URIs
# (``_metadata.file_path``, ``inputFiles()``: ``file:/data/a%23b/x.parquet``). The conversions
# below are Hadoop's own (``new Path(s).toUri().toString()`` and ``new Path(uri).toString()``),
# reproduced in Python. A path string is never parsed as a URL: '#', '?' and '%' are plain
# characters in it.

_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_UNRESERVED = _ALNUM + "-_.!~*'()"
#: The ASCII characters java.net.URI leaves unescaped in a path and in an authority.
_PATH_CHARS = frozenset(_UNRESERVED + ":@&=+$,;/")
_AUTHORITY_CHARS = frozenset(_UNRESERVED + "$,;:@&=+[]")


def _quote(text: str, legal: frozenset) -> str:
    """``java.net.URI``'s quoting: ASCII characters outside ``legal`` (``%`` included) and
    non-ASCII space or control characters become UTF-8 ``%XX`` escapes; other non-ASCII
    characters stay as they are."""
    out = []
    for c in text:
        if c in legal:
            out.append(c)
        elif c < "\x80" or unicodedata.category(c) in ("Zs", "Zl", "Zp", "Cc"):
            out.extend(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass"))
        else:
            out.append(c)
    return "".join(out)


def file_uri(path: str) -> str:
    """The URI Spark gives for a file (``_metadata.file_path``) from its Hadoop path string,
    as ``new org.apache.hadoop.fs.Path(path).toUri().toString()`` computes it (for a path
    without ``.``/``..`` segments, as Hadoop lists files): an optional ``scheme:`` and
    ``//authority``, then the path with double slashes and a trailing slash removed, escaped."""
    scheme, start = "", 0
    colon, slash = path.find(":"), path.find("/")
    if colon != -1 and (slash == -1 or colon < slash):
        scheme, start = path[:colon + 1], colon + 1
    authority = ""
    if path.startswith("//", start) and len(path) - start > 2:
        end = path.find("/", start + 2)
        end = len(path) if end == -1 else end
        authority, start = "//" + _quote(path[start + 2:end], _AUTHORITY_CHARS), end
    rest = path[start:].replace("//", "/")
    if len(rest) > 1 and rest.endswith("/"):
        rest = rest[:-1]
    return scheme + authority + _quote(rest, _PATH_CHARS)


def hadoop_path(uri: str) -> str:
    """A file's Hadoop path string (as an index log records it) from the URI Spark gives
    (``_metadata.file_path``, ``inputFiles()``): the inverse of :func:`file_uri`; an empty
    authority (``file:///x``) is dropped, as Hadoop drops it."""
    colon, slash = uri.find(":"), uri.find("/")
    if colon != -1 and (slash == -1 or colon < slash) and uri.startswith("///", colon + 1):
        uri = uri[:colon + 1] + uri[colon + 3:]
    return unquote(uri)


def local_path(path: str) -> str | None:
    """The local file system path of a Hadoop path string on the ``file`` scheme
    (``file:/a#b/x`` is ``/a#b/x``); None for any other file system."""
    if not path.startswith("file:"):
        return None
    rest = path[len("file:"):]
    if rest.startswith("//"):
        end = rest.find("/", 2)
        if rest[2:end if end != -1 else len(rest)] not in ("", "localhost"):
            return None
        rest = rest[end:] if end != -1 else "/"
    return rest
