"""The per-file parts of an index log entry, kept beside the log as Parquet when they are many.

Every entry records the files of the source it describes (``source.files``: path, size,
modification time and deletion vector of each) and, for a covering index with lineage, the id
of each file's rows (``content.fileIds``: path → id); every lifecycle step writes an entry (and
the ``latestStable`` copy) that repeats them: as JSON, 90 to 200 bytes a file, so 90–195 MB an
entry at a million files, parsed by every process that reads the log. Either part of more than
:data:`INLINE_FILES` files is instead written once as ``<index path>/_log/files/<name>.parquet``
(zstd; a listing's columns ``path``, ``size``, ``mtime``, ``deletionVector``, the lineage's
``path``, ``id``) and the entry holds ``"filesRef"`` (in its source) or ``"fileIdsRef"`` (in its
content), ``{"file": "<name>.parquet", "count": N}``, in its place. The name is the SHA-256 of
the Parquet bytes, so the steps that keep a listing (most of them) write it once and name the
same file. :func:`resolved` puts the parts back: the entry it returns equals the one written.
Small parts stay inline, as do entries written before this existed; both are read as before.

Written before the entry that names it, create-if-absent (``FileSystem.create_exclusive``: the
file system's atomic way, never a partial file under the name): a process killed in between leaves a file no entry names (a few bytes a file, removed with the index by vacuum),
never an entry naming a missing file. The files are never rewritten or removed while their
index exists (entries are never rewritten either). A file that is missing or is not what its
entry names makes the entry unreadable (:class:`ValueError`, which the log reports as a corrupt
entry); a failure of the file system to read it is raised as it is.
"""
from __future__ import annotations

import gc
import hashlib
import io
import threading
from contextlib import contextmanager
from dataclasses import replace
from itertools import repeat
from typing import Any, Callable, Iterator

from indexes.description import SourceDescription, SourceFile
from indexes.fs import FileSystem

#: parts of more files than this are kept beside the log (the tests' session lowers it, so
#: their small sources go through the same path as a lake's)
INLINE_FILES = 1000
FILES_DIR = "files"
FILES_REF = "filesRef"        # in an entry's source, for source.files
FILE_IDS = "fileIds"          # in an entry's content: a covering index's lineage ids
FILE_IDS_REF = "fileIdsRef"

#: the names of the listings written last, by the identity of their files (a lifecycle step
#: writes one source's files in two or three entries), with the files (so the identity holds;
#: a tuple, which no one changes: the lineage's dict is serialized each time)
_NAMED: dict[int, tuple[Any, str]] = {}
_NAMED_KEPT = 8
_NAMED_LOCK = threading.Lock()


def stored(fs: FileSystem, log_path: str, source: SourceDescription, content: dict
           ) -> tuple[SourceDescription, dict]:
    """An entry's ``source`` and ``content`` as the log under ``log_path`` records them: the
    same when their per-file parts hold at most :data:`INLINE_FILES` files, else with each
    larger part written beside the log (once per content) and named by a reference."""
    files, ids = source.files, content.get(FILE_IDS)
    if files is not None and len(files) > INLINE_FILES:
        ref = _keep(fs, log_path, files, _listing_table)
        source = replace(source, files=None, extra={**source.extra, FILES_REF: ref})
    if isinstance(ids, dict) and len(ids) > INLINE_FILES:
        ref = _keep(fs, log_path, ids, _ids_table)
        content = {**{k: v for k, v in content.items() if k != FILE_IDS}, FILE_IDS_REF: ref}
    return source, content


def resolved(fs: FileSystem, log_path: str, source: SourceDescription, content: dict
             ) -> tuple[SourceDescription, dict]:
    """An entry's ``source`` and ``content`` as they were written to the log under
    ``log_path``, the parts their references name read back in (the same objects when there
    are none); ValueError when one cannot be read or is not what its reference says."""
    ref = source.extra.get(FILES_REF)
    if ref is not None:
        columns = _read(fs, log_path, ref, ("path", "size", "mtime", "deletionVector"))
        with _collector_paused():
            files = tuple(map(tuple.__new__, repeat(SourceFile), zip(*columns)))
        source = replace(source, files=files,
                         extra={k: v for k, v in source.extra.items() if k != FILES_REF})
    ref = content.get(FILE_IDS_REF)
    if ref is not None:
        paths, ids = _read(fs, log_path, ref, ("path", "id"))
        content = {**{k: v for k, v in content.items() if k != FILE_IDS_REF},
                   FILE_IDS: dict(zip(paths, ids))}
    return source, content


def _keep(fs: FileSystem, log_path: str, part: Any, table: Callable[[Any], Any]) -> dict:
    """Writes ``part`` (as ``table`` makes it a pyarrow table) beside the log unless a file of
    the same bytes is there; its reference."""
    with _NAMED_LOCK:
        named = _NAMED.get(id(part))
    data = None
    if named is not None and named[0] is part:
        name = named[1]
    else:
        data = _parquet(table(part))
        name = _name(data)
        if isinstance(part, tuple):
            with _NAMED_LOCK:
                if len(_NAMED) >= _NAMED_KEPT:
                    _NAMED.pop(next(iter(_NAMED)))
                _NAMED[id(part)] = (part, name)
    path = f"{log_path}/{FILES_DIR}/{name}"
    if not fs.exists(path):
        # False: another writer put the same bytes there first
        fs.create_exclusive(path, _parquet(table(part)) if data is None else data)
    return {"file": name, "count": len(part)}


def _read(fs: FileSystem, log_path: str, ref: Any, columns: tuple[str, ...]) -> list[list]:
    """The ``columns`` of the file ``ref`` names beside the log, as Python lists."""
    import pyarrow.parquet as pq

    try:
        name, count = str(ref["file"]), int(ref["count"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"invalid reference {ref!r} to a file beside the log") from exc
    path = f"{log_path}/{FILES_DIR}/{name}"
    try:
        data = fs.read_bytes(path)
    except Exception as exc:
        if fs.exists(path):   # a failure to read (the file system's): raised as it is
            raise
        raise ValueError(f"its file {path} is missing") from exc
    if _name(data) != name:
        raise ValueError(f"its file {path} does not hold the bytes it was written with")
    try:
        table = pq.read_table(io.BytesIO(data))
        found = [table.column(c).to_pylist() for c in columns]
    except Exception as exc:  # noqa: BLE001 - not Parquet, or not the columns named
        raise ValueError(f"its file {path} is not what the entry names: {exc}") from exc
    if table.num_rows != count:
        raise ValueError(f"its file {path} holds {table.num_rows} files, not {count}")
    return found


def _name(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest() + ".parquet"


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused (as it was before, after): making a million
    small tuples (which hold no cycles) triggers collections that each walk every tracked
    object, most of the time taken (3.9 s of a million files' 4.5 s here); the objects freed
    meanwhile are freed as ever."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _listing_table(files: tuple[SourceFile, ...]) -> Any:
    import pyarrow as pa

    with _collector_paused():
        paths, sizes, mtimes, vectors = zip(*files)
    return pa.table({"path": pa.array(paths, pa.string()), "size": pa.array(sizes, pa.int64()),
                     "mtime": pa.array(mtimes, pa.int64()),
                     "deletionVector": pa.array(vectors, pa.string())})


def _ids_table(ids: dict[str, int]) -> Any:
    import pyarrow as pa

    return pa.table({"path": pa.array(list(ids), pa.string()),
                     "id": pa.array(list(ids.values()), pa.int64())})


def _parquet(table: Any) -> bytes:
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()
