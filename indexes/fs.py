"""Hadoop FileSystem access through py4j, so index logs work on any file system Spark can write.

All paths are strings (URIs or local paths). This module is the only place in ``indexes`` that
talks to the JVM file system API.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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


class HadoopFs:
    """Thin wrapper over ``org.apache.hadoop.fs.FileSystem`` for one SparkSession."""

    def __init__(self, spark: Any):
        self._jvm = spark.sparkContext._jvm
        self._conf = spark._jsparkSession.sessionState().newHadoopConf()
        # resolved once: each step of a py4j package path is a round trip to the JVM
        self._path_class = self._jvm.org.apache.hadoop.fs.Path

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

    def list(self, path: str) -> list[FileInfo]:
        """Entries directly under ``path``; empty when it does not exist."""
        jpath = self._path(path)
        fs = self._fs(jpath)
        if not fs.exists(jpath):
            return []
        statuses = fs.listStatus(jpath)
        out = []
        for i in range(len(statuses)):
            st = statuses[i]
            out.append(FileInfo(str(st.getPath().toString()), int(st.getLen()),
                                int(st.getModificationTime()), bool(st.isDirectory())))
        return out

    def read_bytes(self, path: str) -> bytes:
        jpath = self._path(path)
        stream = self._fs(jpath).open(jpath)
        try:
            return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8")

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
        """Creates ``path`` holding ``text`` only if it does not exist yet.

        Writes a temporary file next to it and renames it into place; the rename fails when the
        target exists, so of two racing writers exactly one wins. Returns whether this call won.
        """
        jtarget = self._path(path)
        fs = self._fs(jtarget)
        if fs.exists(jtarget):
            return False
        tmp = self._path(f"{path}.{self._jvm.java.util.UUID.randomUUID().toString()}.tmp")
        stream = fs.create(tmp, False)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()
        try:
            won = self._link_or_rename(fs, tmp, jtarget)
        finally:
            if fs.exists(tmp):
                fs.delete(tmp, False)
        return won

    def _link_or_rename(self, fs: Any, tmp: Any, target: Any) -> bool:
        """Moves ``tmp`` to ``target`` only if ``target`` does not exist, atomically.

        Local files: a hard link (``link(2)`` fails atomically when the target exists; a local
        rename would silently replace it). Other file systems: their rename, which refuses an
        existing target atomically on HDFS and ABFS.
        """
        if str(fs.getScheme()) != "file":
            return bool(fs.rename(tmp, target))
        files = self._jvm.java.nio.file.Files
        local = fs.pathToFile
        try:
            files.createLink(local(target).toPath(), local(tmp).toPath())
        except Exception as exc:  # py4j wraps FileAlreadyExistsException
            if "FileAlreadyExistsException" in str(exc):
                return False
            raise
        return True

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
