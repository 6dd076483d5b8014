"""The file-system protocol: what the accelerator needs from a file system (:class:`FileSystem`),
the entries it lists (:class:`FileInfo`), and reading a file that may be absent over it.

All paths are strings (URIs or local paths).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


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

    def create_exclusive(self, path: str, text: str | bytes) -> bool:
        """Creates ``path`` holding ``text`` (UTF-8) or bytes only if it does not exist yet,
        atomically: of two racing writers exactly one wins. Returns whether this call won."""
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


def text_or_none(fs: FileSystem, path: str) -> str | None:
    """The text of a file, None when it does not exist."""
    try:
        return fs.read_text(path)
    except FileNotFoundError:
        return None
