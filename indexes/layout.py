"""Where an index's files live under a system path, and the moves that add or remove them.

``<system path>/<name>/`` holds the index's log (``_log/``, see :mod:`indexes.log`) and one
directory per data version, ``v__=<n>``. Removing an index moves its directory into
``<system path>/_trash/`` first (atomic on HDFS and local disks), then deletes it, so a create
that starts meanwhile gets a fresh directory instead of one that is being deleted under it.

:class:`IndexLayout` only moves files; which of them may go, and when, is for
:class:`indexes.lifecycle.IndexLifecycle` to decide from the log.
"""
from __future__ import annotations

import logging
import re
import uuid
from typing import Callable

from indexes.fs import FileSystem
from indexes.log import IndexLogEntry, IndexLogManager, IndexState
from indexes.names import is_index_dir_name, validate_index_name

logger = logging.getLogger("accelerator.indexes.lifecycle")

_DATA_DIR = re.compile(r"^v__=(0|[1-9][0-9]*)$")
DATA_DIR_PREFIX = "v__="
TRASH_DIR = "_trash"


def data_version(data_dir: str) -> int:
    """The version number of a ``.../v__=<n>`` data directory."""
    return int(data_dir.rstrip("/").rsplit("=", 1)[-1])


class IndexLayout:
    """The directories of the indexes stored under one system path."""

    def __init__(self, fs: FileSystem, system_path: str):
        self.fs = fs
        self.system_path = fs.qualify(system_path).rstrip("/")

    def index_path(self, name: str) -> str:
        """Directory of the index ``name`` (names are case-insensitive)."""
        return f"{self.system_path}/{validate_index_name(name).lower()}"

    def data_path(self, name: str, version: int) -> str:
        """Directory of data version ``version`` of the index ``name``."""
        return f"{self.index_path(name)}/{DATA_DIR_PREFIX}{version}"

    def log_manager(self, name: str) -> IndexLogManager:
        """The log of the index ``name``."""
        return IndexLogManager(self.fs, self.index_path(name))

    def index_logs(self) -> list[IndexLogManager]:
        """The log of every index directory under the system path, by directory name
        (``_history``, ``_trash``... are not index directories)."""
        names = sorted(info.name for info in self.fs.list(self.system_path)
                       if info.is_dir and is_index_dir_name(info.name))
        return [IndexLogManager(self.fs, f"{self.system_path}/{name}") for name in names]

    def data_dirs(self, index_path: str) -> list[str]:
        """The data version directories of an index, oldest version first."""
        return sorted((info.path for info in self.fs.list(index_path)
                       if info.is_dir and _DATA_DIR.match(info.name)), key=data_version)

    def clear_data_dir(self, path: str) -> None:
        """Removes the leftovers of a crashed attempt at ``path`` (the caller's begin entry,
        written, makes them its own)."""
        if self.fs.exists(path):
            logger.info("removing leftover data at %s", path)
            self.fs.delete(path, recursive=True)

    def remove_data_dirs(self, index_path: str, newer_than: int | None = None) -> None:
        """Removes the index's data versions newer than ``newer_than`` (all of them: None)."""
        keep = -1 if newer_than is None else newer_than
        for data_dir in self.data_dirs(index_path):
            if data_version(data_dir) > keep:
                logger.info("removing index data %s", data_dir)
                self.fs.delete(data_dir, recursive=True)

    def remove_index_dir(self, index_path: str) -> None:
        """Moves the index directory into the trash, then empties the trash."""
        trash = f"{self.system_path}/{TRASH_DIR}"
        self.fs.mkdirs(trash)
        doomed = f"{trash}/{index_path.rstrip('/').rsplit('/', 1)[-1]}.{uuid.uuid4().hex}"
        if not self.fs.rename(index_path, doomed):
            self.fs.delete(index_path, recursive=True)
        self.empty_trash()

    def empty_trash(self) -> None:
        """Deletes everything in the trash, then the trash: a directory moved there is doomed,
        and one is left there when the process removing it died before deleting it."""
        trash = f"{self.system_path}/{TRASH_DIR}"
        for info in self.fs.list(trash):
            self.fs.delete(info.path, recursive=True)
        if self.fs.exists(trash) and not self.fs.list(trash):
            self.fs.delete(trash, recursive=False)


def replaced_at(log: IndexLogManager, referenced: Callable[[IndexLogEntry], list[str]],
                qualify: Callable[[str], str]) -> dict[str, int]:
    """When each data directory some ACTIVE entry of ``log`` read stopped being read: the
    timestamp of the next ACTIVE entry that does not read it (absent while it is read; a
    directory no ACTIVE entry read, left by a failed operation, is absent too).
    ``referenced(entry)`` names the directories an entry reads, ``qualify`` makes them
    comparable."""
    replaced: dict[str, int] = {}
    reading: set[str] = set()
    for entry_id in log.ids():
        entry = log.get(entry_id)
        if entry is None or entry.state is not IndexState.ACTIVE:
            continue
        now_read = {qualify(d) for d in referenced(entry)}
        for gone in reading - now_read:
            replaced[gone] = entry.timestamp
        for d in now_read:
            replaced.pop(d, None)
        reading = now_read
    return replaced
