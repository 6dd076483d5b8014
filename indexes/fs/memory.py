"""An in-memory file system with Hadoop's semantics (:class:`MemoryFs`), so the index log, the
lifecycle and the cache manifest are testable without a JVM."""
from __future__ import annotations

import posixpath
import threading
import time
from dataclasses import dataclass
from typing import Callable

from indexes.fs.protocol import FileInfo, text_or_none


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
        return [text_or_none(self, p) for p in paths]

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

    def create_exclusive(self, path: str, text: str | bytes) -> bool:
        with self._lock:
            if self.exists(path):
                return False
            self.write_bytes(path, text.encode("utf-8") if isinstance(text, str) else text)
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
