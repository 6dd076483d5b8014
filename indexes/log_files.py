"""The source files of an index log entry, kept beside the log as Parquet when they are many.

Every entry records the files of the source it describes (``source.files``: path, size,
modification time and deletion vector of each), and every lifecycle step writes an entry (and
the ``latestStable`` copy) that repeats them: as JSON, about 90 bytes a file, so 90 MB an entry
at a million files, parsed by every process that reads the log. A listing of more than
:data:`INLINE_FILES` files is instead written once as ``<index path>/_log/files/<name>.parquet``
(columns ``path``, ``size``, ``mtime``, ``deletionVector``; zstd) and the entry's source holds
``"filesRef": {"file": "<name>.parquet", "count": N}`` in place of ``"files"``. The name is the
SHA-256 of the Parquet bytes, so the steps that keep a listing (most of them) write it once
and name the same file. A reader (:func:`resolved`) puts the files back into the source: the
entry it returns equals the one written. Small listings stay inline, as do entries written
before this existed; both are read as before.

Written before the entry that names it, to a temp file moved into place: a process killed in
between leaves a listing no entry names (a few bytes a file, removed with the index by
vacuum), never an entry naming a missing listing. Listings are never rewritten or removed
while their index exists (entries are never rewritten either). A listing that is missing or
is not what its entry names makes the entry unreadable (:class:`ValueError`, which the log
reports as a corrupt entry); a failure of the file system to read it is raised as it is.
"""
from __future__ import annotations

import gc
import hashlib
import io
import threading
import uuid
from contextlib import contextmanager
from dataclasses import replace
from itertools import repeat
from typing import Any, Iterator

from indexes.description import SourceDescription, SourceFile
from indexes.fs import FileSystem

#: listings of more files than this are kept beside the log (the tests' session lowers it, so
#: their small sources go through the same path as a lake's)
INLINE_FILES = 1000
FILES_DIR = "files"
REF_KEY = "filesRef"

#: the names of the listings written last, by the identity of their files (a lifecycle step
#: writes one source's files in two or three entries), with the files (so the identity holds)
_NAMED: dict[int, tuple[tuple[SourceFile, ...], str]] = {}
_NAMED_KEPT = 8
_NAMED_LOCK = threading.Lock()


def stored(fs: FileSystem, log_path: str, source: SourceDescription) -> SourceDescription:
    """``source`` as an entry under ``log_path`` records it: the same when its files are at most
    :data:`INLINE_FILES`, else with its files written beside the log (once per listing) and
    named by a ``filesRef``."""
    files = source.files
    if files is None or len(files) <= INLINE_FILES:
        return source
    with _NAMED_LOCK:
        named = _NAMED.get(id(files))
    data = None
    if named is not None and named[0] is files:
        name = named[1]
    else:
        data = _parquet(files)
        name = hashlib.sha256(data).hexdigest() + ".parquet"
        with _NAMED_LOCK:
            if len(_NAMED) >= _NAMED_KEPT:
                _NAMED.pop(next(iter(_NAMED)))
            _NAMED[id(files)] = (files, name)
    path = f"{log_path}/{FILES_DIR}/{name}"
    if not fs.exists(path):
        data = _parquet(files) if data is None else data
        tmp = f"{log_path}/{FILES_DIR}/.{name}.{uuid.uuid4().hex}.tmp"
        fs.write_bytes(tmp, data)
        try:
            # False: another writer moved the same bytes into place first
            fs.rename(tmp, path)
        finally:
            if fs.exists(tmp):
                fs.delete(tmp, recursive=False)
    return replace(source, files=None,
                   extra={**source.extra, REF_KEY: {"file": name, "count": len(files)}})


def resolved(fs: FileSystem, log_path: str, source: SourceDescription) -> SourceDescription:
    """``source`` as an entry under ``log_path`` recorded it, with the files its ``filesRef``
    names read back in (the source itself when it has none); ValueError when they cannot be
    read or are not what the reference says."""
    ref = source.extra.get(REF_KEY)
    if ref is None:
        return source
    try:
        name, count = str(ref["file"]), int(ref["count"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"invalid {REF_KEY} {ref!r}") from exc
    path = f"{log_path}/{FILES_DIR}/{name}"
    try:
        data = fs.read_bytes(path)
    except Exception as exc:
        if fs.exists(path):   # a failure to read (the file system's): raised as it is
            raise
        raise ValueError(f"its listing {path} is missing") from exc
    if hashlib.sha256(data).hexdigest() + ".parquet" != name:
        raise ValueError(f"its listing {path} does not hold the bytes it was written with")
    files = _files(data)
    if len(files) != count:
        raise ValueError(f"its listing {path} holds {len(files)} files, not {count}")
    extra = {k: v for k, v in source.extra.items() if k != REF_KEY}
    return replace(source, files=files, extra=extra)


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


def _parquet(files: tuple[SourceFile, ...]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    with _collector_paused():
        paths, sizes, mtimes, vectors = zip(*files)
    table = pa.table({
        "path": pa.array(paths, pa.string()),
        "size": pa.array(sizes, pa.int64()),
        "mtime": pa.array(mtimes, pa.int64()),
        "deletionVector": pa.array(vectors, pa.string()),
    })
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def _files(data: bytes) -> tuple[SourceFile, ...]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(io.BytesIO(data))
        columns: list[Any] = [table.column(c).to_pylist()
                              for c in ("path", "size", "mtime", "deletionVector")]
    except Exception as exc:  # noqa: BLE001 - not Parquet, or not a listing's columns
        raise ValueError(f"not a listing: {exc}") from exc
    with _collector_paused():
        return tuple(map(tuple.__new__, repeat(SourceFile), zip(*columns)))
