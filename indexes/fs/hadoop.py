"""The file system of a SparkSession through py4j over Hadoop's ``FileSystem`` (:class:`HadoopFs`),
so index logs work on any file system Spark can write; the only place in ``indexes`` that talks to
the JVM file system API."""
from __future__ import annotations

import functools
import json
import uuid
from typing import Any

from py4j.java_gateway import is_instance_of
from py4j.protocol import Py4JJavaError

from indexes.fs.exclusive import create_local, put_if_absent
from indexes.fs.parallel import in_parallel
from indexes.fs.protocol import FileInfo, text_or_none
from indexes.source import local_path


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
            return in_parallel(functools.partial(text_or_none, self), paths)
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

    def create_exclusive(self, path: str, text: str | bytes) -> bool:
        """Creates ``path`` holding ``text`` (UTF-8) or bytes only if it does not exist yet; returns whether this
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
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        local = local_path(path)
        if local is not None:
            return create_local(local, data)
        jtarget = self._path(path)
        fs = self._fs(jtarget)
        scheme = str(fs.getScheme())
        if scheme == "file":
            return create_local(str(fs.pathToFile(jtarget).getPath()), data)
        if fs.exists(jtarget):
            return False
        if scheme == "s3a":
            return put_if_absent(fs, jtarget, bytearray(data))
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
