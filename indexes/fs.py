"""File-system access for index logs, lifecycle and data: one protocol, two implementations.

:class:`FileSystem` lists what the accelerator needs from a file system. :class:`HadoopFs`
implements it through py4j over Hadoop's ``FileSystem``, so index logs work on any file system
Spark can write; it is the only place in ``indexes`` that talks to the JVM file system API.
:class:`MemoryFs` implements it in memory with the same semantics, so the log and the lifecycle
are testable without a JVM.

All paths are strings (URIs or local paths).
"""
from __future__ import annotations

import functools
import json
import os
import posixpath
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from py4j.java_gateway import is_instance_of
from py4j.protocol import Py4JJavaError

from indexes.source import local_path


#: threads doing file-system round trips at once
IO_THREADS = 8


def in_parallel(fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """``fn`` of each item, in order, several at once: each is a few file-system round trips
    (py4j calls to Hadoop, network calls under them), so thousands are made in parallel."""
    if len(items) < 2 * IO_THREADS:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(IO_THREADS, thread_name_prefix="accelerator-fs-io") as pool:
        return list(pool.map(fn, items))


@dataclass(frozen=True)
class FileInfo:
    """One listed file or directory."""

    path: str
    size: int
    modification_time: int
    is_dir: bool

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]


class FileSystem(Protocol):
    """What the accelerator needs from a file system. Paths are strings; every path a method
    returns (``qualify``, ``list``) is fully qualified."""

    def qualify(self, path: str) -> str:
        """The fully qualified URI of ``path`` (e.g. ``file:/tmp/x``)."""
        ...

    def exists(self, path: str) -> bool:
        """Whether a file or directory exists at ``path``."""
        ...

    def mkdirs(self, path: str) -> None:
        """Creates the directory ``path`` and its missing parents."""
        ...

    def list(self, path: str) -> list[FileInfo]:
        """Entries directly under the directory ``path`` (a file lists itself); empty when it
        does not exist."""
        ...

    def list_each(self, paths: list[str]) -> list[list[FileInfo]]:
        """:meth:`list` of each path, in order (one call for many small folders)."""
        ...

    def read_bytes(self, path: str) -> bytes:
        """The content of a file."""
        ...

    def read_text(self, path: str) -> str:
        """The content of a file, decoded as UTF-8."""
        ...

    def read_each(self, paths: list[str]) -> list[str | None]:
        """:meth:`read_text` of each path, in order, None for a file that does not exist (one
        call for many small files)."""
        ...

    def write_bytes(self, path: str, data: bytes, overwrite: bool = False) -> None:
        """Writes a whole file, creating missing parent directories; with ``overwrite=False``
        fails if it exists."""
        ...

    def write_text(self, path: str, text: str, overwrite: bool = False) -> None:
        """:meth:`write_bytes` of ``text`` encoded as UTF-8."""
        ...

    def create_exclusive(self, path: str, text: str) -> bool:
        """Creates ``path`` holding ``text`` only if it does not exist yet, atomically: of two
        racing writers exactly one wins. Returns whether this call won."""
        ...

    def size(self, path: str) -> int:
        """The length of a file in bytes."""
        ...

    def copy(self, src: str, dst: str) -> None:
        """Copies one file (across file systems too); fails if ``dst`` exists."""
        ...

    def delete(self, path: str, recursive: bool = True) -> bool:
        """Deletes a file or directory (a non-empty one only when ``recursive``); returns
        whether something was deleted."""
        ...

    def rename(self, src: str, dst: str) -> bool:
        """Moves ``src`` to ``dst``; returns whether it did. Callers rename to a path that does
        not exist: on an existing ``dst`` file systems differ (:class:`MemoryFs` and HDFS return
        False, a local file is replaced, a Hadoop file system moves ``src`` into an existing
        directory), so create-if-absent goes through :meth:`create_exclusive`."""
        ...


def _create_local(path: str, data: bytes) -> bool:
    """:meth:`HadoopFs.create_exclusive` of a local file (see there)."""
    if os.path.lexists(path):
        return False
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.{uuid.uuid4()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)
    return True


def _text_or_none(fs: FileSystem, path: str) -> str | None:
    """The text of a file, None when it does not exist."""
    try:
        return fs.read_text(path)
    except FileNotFoundError:
        return None


CONDITIONAL_OVERWRITE = "fs.option.create.conditional.overwrite"
S3A_CONDITIONAL_CREATE = "fs.s3a.create.conditional.enabled"


def _s3_status(exc: BaseException) -> int | None:
    """The HTTP status of the S3 error behind a py4j error, if one is in its Java causes."""
    cause = getattr(exc, "java_exception", None)
    while cause is not None:
        if str(cause.getClass().getName()).endswith(".S3Exception"):
            return int(cause.statusCode())
        cause = cause.getCause()
    return None


class HadoopFs:
    """Thin wrapper over ``org.apache.hadoop.fs.FileSystem`` for one SparkSession; a
    :class:`FileSystem`. ``bulk``, a JVM object with ``listEach`` and ``readEach`` (the
    accelerator's ``BulkFiles``), serves :meth:`list`, :meth:`read_text`, :meth:`list_each` and
    :meth:`read_each` in one py4j call each. Without it a listing costs several calls per entry,
    and :meth:`list_each` and :meth:`read_each` make the calls of :meth:`list` and
    :meth:`read_text`, several at once.
    """

    def __init__(self, spark: Any, bulk: Any = None):
        self._bulk = bulk
        self._jvm = spark.sparkContext._jvm
        self._conf = spark._jsparkSession.sessionState().newHadoopConf()
        self._gateway = spark.sparkContext._gateway
        # resolved once: each step of a py4j package path is a round trip to the JVM
        self._path_class = self._jvm.org.apache.hadoop.fs.Path

    @functools.cached_property
    def _io_utils(self) -> Any:   # resolved on first use: most instances never read
        return self._jvm.org.apache.commons.io.IOUtils

    def _not_found(self, exc: BaseException) -> bool:
        """Whether a py4j error is Java's FileNotFoundException (what Hadoop throws for a path
        that does not exist)."""
        cause = getattr(exc, "java_exception", None)
        return cause is not None and is_instance_of(self._gateway, cause,
                                                    "java.io.FileNotFoundException")

    def _path(self, path: str) -> Any:
        return self._path_class(path)

    def _fs(self, jpath: Any) -> Any:
        return jpath.getFileSystem(self._conf)

    def qualify(self, path: str) -> str:
        """The fully qualified URI of ``path`` (e.g. ``file:/tmp/x``)."""
        jpath = self._path(path)
        return str(self._fs(jpath).makeQualified(jpath).toString())

    def exists(self, path: str) -> bool:
        jpath = self._path(path)
        return bool(self._fs(jpath).exists(jpath))

    def mkdirs(self, path: str) -> None:
        jpath = self._path(path)
        self._fs(jpath).mkdirs(jpath)

    def capacity(self, path: str) -> int | None:
        """The capacity in bytes of the file system holding ``path``, or None when it reports
        none (object stores report 0 or an unbounded size)."""
        jpath = self._path(path)
        try:
            found = int(self._fs(jpath).getStatus(jpath).getCapacity())
        except Exception:   # py4j wraps the file system's IOException or UnsupportedOperation
            return None
        return found if 0 < found < (1 << 62) else None

    def glob(self, pattern: str) -> list[str]:
        """The paths matching the glob ``pattern`` (Hadoop's globbing, as Spark expands a
        path it reads), qualified; empty when none does."""
        jpath = self._path(pattern)
        statuses = self._fs(jpath).globStatus(jpath)
        if statuses is None:
            return []
        return [str(statuses[i].getPath().toString()) for i in range(len(statuses))]

    def list(self, path: str) -> list[FileInfo]:
        """Entries directly under ``path``; empty when it does not exist."""
        if self._bulk is not None:   # one round trip instead of several per entry
            return self.list_each([path])[0]
        jpath = self._path(path)
        fs = self._fs(jpath)
        if not fs.exists(jpath):   # cheaper than the exception listStatus throws
            return []
        try:
            statuses = fs.listStatus(jpath)
        except Py4JJavaError as exc:   # deleted since
            if self._not_found(exc):
                return []
            raise
        out = []
        for i in range(len(statuses)):
            st = statuses[i]
            out.append(FileInfo(str(st.getPath().toString()), int(st.getLen()),
                                int(st.getModificationTime()), bool(st.isDirectory())))
        return out

    def read_bytes(self, path: str) -> bytes:
        """A whole file; FileNotFoundError when it does not exist (or was deleted meanwhile)."""
        jpath = self._path(path)
        try:
            stream = self._fs(jpath).open(jpath)
            try:
                return bytes(self._io_utils.toByteArray(stream))
            finally:
                stream.close()
        except Py4JJavaError as exc:
            if self._not_found(exc):
                raise FileNotFoundError(path) from None
            raise

    def read_text(self, path: str) -> str:
        if self._bulk is None:
            return self.read_bytes(path).decode("utf-8")
        text = self.read_each([path])[0]   # one round trip instead of several
        if text is None:
            raise FileNotFoundError(path)
        return text

    def list_each(self, paths: list[str]) -> list[list[FileInfo]]:
        if self._bulk is None:
            return in_parallel(self.list, paths)
        if not paths:
            return []
        found = json.loads(self._bulk.listEach(json.dumps(paths), self._conf))
        return [[FileInfo(p, int(size), int(mtime), bool(is_dir))
                 for p, size, mtime, is_dir in listed] for listed in found]

    def read_each(self, paths: list[str]) -> list[str | None]:
        if self._bulk is None:
            return in_parallel(functools.partial(_text_or_none, self), paths)
        if not paths:
            return []
        return json.loads(self._bulk.readEach(json.dumps(paths), self._conf))

    def write_bytes(self, path: str, data: bytes, overwrite: bool = False) -> None:
        """Writes a whole file; with ``overwrite=False`` fails if it exists."""
        jpath = self._path(path)
        stream = self._fs(jpath).create(jpath, overwrite)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()

    def write_text(self, path: str, text: str, overwrite: bool = False) -> None:
        self.write_bytes(path, text.encode("utf-8"), overwrite)

    def create_exclusive(self, path: str, text: str) -> bool:
        """Creates ``path`` holding ``text`` only if it does not exist yet; returns whether this
        call created it. Of two racing writers exactly one wins, by what the file system offers:

        - local files: a temporary file next to it, hard-linked into place (``link(2)`` fails
          atomically when the target exists; a local rename would replace it), written by this
          Python process, which shares its machine with the driver's JVM (no py4j round trip
          for a ``file:`` path);
        - S3 (``s3a://``): no temporary file, since an S3 rename is a copy and a delete: one PUT
          with ``If-None-Match: *`` (S3A's create option ``fs.option.create.conditional.overwrite``,
          which needs ``fs.s3a.create.conditional.enabled``, on by default), which S3 refuses
          atomically when the object exists (status 412); a conflicting concurrent conditional
          write (409) is retried. S3 has no directories, so a parent is never in the way;
        - other file systems: a temporary file renamed into place, which refuses an existing
          target atomically on HDFS and ABFS.
        """
        data = text.encode("utf-8")
        local = local_path(path)
        if local is not None:
            return _create_local(local, data)
        jtarget = self._path(path)
        fs = self._fs(jtarget)
        scheme = str(fs.getScheme())
        if scheme == "file":
            return _create_local(str(fs.pathToFile(jtarget).getPath()), data)
        if fs.exists(jtarget):
            return False
        if scheme == "s3a":
            return self._put_if_absent(fs, jtarget, bytearray(data))
        tmp = self._path(f"{path}.{uuid.uuid4()}.tmp")
        stream = fs.create(tmp, False)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()
        try:
            return bool(fs.rename(tmp, jtarget))
        finally:
            if fs.exists(tmp):
                fs.delete(tmp, False)

    def _put_if_absent(self, fs: Any, target: Any, data: bytearray, attempts: int = 5) -> bool:
        """One S3 conditional PUT of ``data`` to ``target`` (S3A sends it on ``close``)."""
        if not fs.getConf().getBoolean(S3A_CONDITIONAL_CREATE, True):
            raise OSError(f"{S3A_CONDITIONAL_CREATE}=false: cannot create {target} exclusively")
        conflicts = 0
        while True:
            stream = (fs.createFile(target).overwrite(True)
                      .must(CONDITIONAL_OVERWRITE, True).build())
            try:
                try:
                    stream.write(data)
                finally:
                    stream.close()
                return True
            except Exception as exc:   # py4j wraps RemoteFileChangedException(S3Exception)
                status = _s3_status(exc)
                if status == 412:
                    return False
                conflicts += 1
                if status != 409 or conflicts >= attempts:
                    raise

    def size(self, path: str) -> int:
        """The length of a file in bytes."""
        jpath = self._path(path)
        return int(self._fs(jpath).getFileStatus(jpath).getLen())

    def parquet_rows(self, path: str) -> int:
        """The number of rows of a Parquet file, read from its footer (no Spark job)."""
        parquet = self._jvm.org.apache.parquet.hadoop
        reader = parquet.ParquetFileReader.open(
            parquet.util.HadoopInputFile.fromPath(self._path(path), self._conf))
        try:
            return int(reader.getRecordCount())
        finally:
            reader.close()

    def copy(self, src: str, dst: str) -> None:
        """Copies one file (across file systems too); fails if ``dst`` exists."""
        jsrc, jdst = self._path(src), self._path(dst)
        dst_fs = self._fs(jdst)
        if dst_fs.exists(jdst):
            raise FileExistsError(dst)
        if not self._jvm.org.apache.hadoop.fs.FileUtil.copy(self._fs(jsrc), jsrc, dst_fs, jdst,
                                                           False, False, self._conf):
            raise OSError(f"could not copy {src} to {dst}")

    def delete(self, path: str, recursive: bool = True) -> bool:
        jpath = self._path(path)
        return bool(self._fs(jpath).delete(jpath, recursive))

    def rename(self, src: str, dst: str) -> bool:
        jsrc = self._path(src)
        return bool(self._fs(jsrc).rename(jsrc, self._path(dst)))


MEMORY_SCHEME = "memory:"


@dataclass
class _MemoryFile:
    data: bytes
    modification_time: int


class MemoryFs:
    """An in-memory :class:`FileSystem` with Hadoop's semantics, for tests without a JVM.

    Paths are ``memory:///a/b`` (``memory:/a/b`` and plain ``/a/b`` name the same file; relative
    paths are resolved against ``/``); ``qualify`` and ``list`` return the ``memory:///`` form.
    Every method is atomic (one lock), so of two threads racing in :meth:`create_exclusive`
    exactly one wins. Modification times are epoch milliseconds from ``clock``; a directory's
    changes when an entry directly under it is added or removed.
    """

    def __init__(self, clock: Callable[[], int] = lambda: int(time.time() * 1000)):
        self._clock = clock
        self._lock = threading.RLock()
        self._files: dict[str, _MemoryFile] = {}
        self._dirs: dict[str, int] = {"/": clock()}

    # ------------------------------------------------------------------ paths

    @staticmethod
    def _key(path: str) -> str:
        """The normalized absolute path of ``path`` inside this file system."""
        rest = path
        if rest.startswith(MEMORY_SCHEME):
            rest = rest[len(MEMORY_SCHEME):]
        elif ":" in rest.split("/", 1)[0]:
            raise ValueError(f"{path} is not a path of the in-memory file system (memory:///...)")
        return posixpath.normpath("/" + rest.lstrip("/"))

    @staticmethod
    def _uri(key: str) -> str:
        return f"{MEMORY_SCHEME}//{key}"

    def _info(self, key: str) -> FileInfo:
        if key in self._dirs:
            return FileInfo(self._uri(key), 0, self._dirs[key], True)
        file = self._files[key]
        return FileInfo(self._uri(key), len(file.data), file.modification_time, False)

    def _children(self, key: str) -> list[str]:
        prefix = key.rstrip("/") + "/"
        return sorted(k for k in [*self._dirs, *self._files]
                      if k != key and k.startswith(prefix) and "/" not in k[len(prefix):])

    def _descendants(self, key: str) -> list[str]:
        prefix = key.rstrip("/") + "/"
        return [k for k in [*self._dirs, *self._files] if k.startswith(prefix) and k != "/"]

    def _touch_parent(self, key: str) -> None:
        parent = posixpath.dirname(key)
        if parent in self._dirs and parent != key:
            self._dirs[parent] = self._clock()

    def _make_dirs(self, key: str) -> None:
        """Creates directory ``key`` and its parents; fails where a file is in the way."""
        if key in self._dirs:
            return
        if key in self._files:
            raise FileExistsError(f"{self._uri(key)} is a file, not a directory")
        self._make_dirs(posixpath.dirname(key))
        self._dirs[key] = self._clock()
        self._touch_parent(key)

    def _file(self, path: str) -> _MemoryFile:
        key = self._key(path)
        if key in self._dirs:
            raise IsADirectoryError(self._uri(key))
        if key not in self._files:
            raise FileNotFoundError(self._uri(key))
        return self._files[key]

    # ------------------------------------------------------------------ FileSystem

    def qualify(self, path: str) -> str:
        """``memory:///<absolute path>``."""
        return self._uri(self._key(path))

    def exists(self, path: str) -> bool:
        key = self._key(path)
        with self._lock:
            return key in self._dirs or key in self._files

    def mkdirs(self, path: str) -> None:
        with self._lock:
            self._make_dirs(self._key(path))

    def list(self, path: str) -> list[FileInfo]:
        """Entries directly under ``path``, by path; a file lists itself; empty when absent."""
        key = self._key(path)
        with self._lock:
            if key in self._files:
                return [self._info(key)]
            if key not in self._dirs:
                return []
            return [self._info(k) for k in self._children(key)]

    def read_bytes(self, path: str) -> bytes:
        with self._lock:
            return self._file(path).data

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8")

    def list_each(self, paths: list[str]) -> list[list[FileInfo]]:
        return [self.list(p) for p in paths]

    def read_each(self, paths: list[str]) -> list[str | None]:
        return [_text_or_none(self, p) for p in paths]

    def write_bytes(self, path: str, data: bytes, overwrite: bool = False) -> None:
        key = self._key(path)
        with self._lock:
            if key in self._dirs:
                raise IsADirectoryError(self._uri(key))
            if key in self._files and not overwrite:
                raise FileExistsError(self._uri(key))
            self._make_dirs(posixpath.dirname(key))
            self._files[key] = _MemoryFile(bytes(data), self._clock())
            self._touch_parent(key)

    def write_text(self, path: str, text: str, overwrite: bool = False) -> None:
        self.write_bytes(path, text.encode("utf-8"), overwrite)

    def create_exclusive(self, path: str, text: str) -> bool:
        with self._lock:
            if self.exists(path):
                return False
            self.write_text(path, text)
            return True

    def size(self, path: str) -> int:
        """The length of a file in bytes (0 for a directory, as Hadoop reports it)."""
        key = self._key(path)
        with self._lock:
            if key in self._dirs:
                return 0
            return len(self._file(path).data)

    def copy(self, src: str, dst: str) -> None:
        """Copies a file, or a directory with everything under it; fails if ``dst`` exists."""
        src_key, dst_key = self._key(src), self._key(dst)
        with self._lock:
            if self.exists(dst):
                raise FileExistsError(self._uri(dst_key))
            if not self.exists(src):
                raise FileNotFoundError(self._uri(src_key))
            if dst_key == src_key or dst_key.startswith(src_key.rstrip("/") + "/"):
                raise OSError(f"cannot copy {self._uri(src_key)} into itself")
            for key in [src_key, *sorted(self._descendants(src_key))]:
                target = dst_key + key[len(src_key):]
                if key in self._dirs:
                    self._make_dirs(target)
                else:
                    self.write_bytes(target, self._files[key].data)

    def delete(self, path: str, recursive: bool = True) -> bool:
        """Deletes a file or directory; a non-empty directory only when ``recursive`` (else
        OSError). Returns False when nothing exists at ``path``; the root cannot be deleted."""
        key = self._key(path)
        with self._lock:
            if key == "/":
                raise OSError("cannot delete the root of the in-memory file system")
            if key in self._files:
                del self._files[key]
            elif key in self._dirs:
                doomed = self._descendants(key)
                if doomed and not recursive:
                    raise OSError(f"directory {self._uri(key)} is not empty")
                for k in doomed:
                    self._files.pop(k, None)
                    self._dirs.pop(k, None)
                del self._dirs[key]
            else:
                return False
            self._touch_parent(key)
            return True

    def rename(self, src: str, dst: str) -> bool:
        """Moves a file or directory (with everything under it); False when ``src`` does not
        exist, ``dst`` exists, the parent of ``dst`` is not a directory or ``dst`` lies under
        ``src``."""
        src_key, dst_key = self._key(src), self._key(dst)
        with self._lock:
            if (not self.exists(src) or self.exists(dst) or src_key == "/"
                    or posixpath.dirname(dst_key) not in self._dirs
                    or dst_key.startswith(src_key.rstrip("/") + "/")):
                return False
            for key in [src_key, *self._descendants(src_key)]:
                target = dst_key + key[len(src_key):]
                if key in self._dirs:
                    self._dirs[target] = self._dirs.pop(key)
                else:
                    self._files[target] = self._files.pop(key)
            self._touch_parent(src_key)
            self._touch_parent(dst_key)
            return True
