"""Numbered versions of one thing in one folder (``<seq, 10 digits>.json``, each created
exclusively, the highest current), and old temp files: what the manifest's entries and the
folded usage are stored as. Over the file-system protocol, no JVM."""
from __future__ import annotations

import re
from typing import Callable

from indexes.errors import ConcurrentModificationError
from indexes.fs import FileInfo, FileSystem

VERSION = re.compile(r"(\d{10})\.json")
#: the rounds of reading and writing a writer tries before giving up on a busy folder
MAX_ATTEMPTS = 100


def is_temp(name: str) -> bool:
    """Whether ``name`` is a temp file (``create_exclusive`` writes one, then renames it)."""
    return name.endswith(".tmp")


def versions_of(listed: list[FileInfo]) -> list[tuple[int, str]]:
    """The versions (number, path) among the files of a listing, in order."""
    return sorted((int(m.group(1)), f.path) for f in listed
                  if not f.is_dir and (m := VERSION.fullmatch(f.name)))


def latest(fs: FileSystem, folder: str) -> tuple[int, str | None]:
    """The highest version number in ``folder`` and its text (-1, None when there is none)."""
    for _ in range(MAX_ATTEMPTS):
        versions = versions_of(fs.list(folder))
        if not versions:
            return -1, None
        seq, path = versions[-1]
        try:
            return seq, fs.read_text(path)
        except FileNotFoundError:   # collected between listing and reading: list again
            continue
    raise ConcurrentModificationError(f"{folder} kept changing while read")


def delete_old(listed: list[FileInfo], cutoff: float, delete: Callable[[str], None],
               doomed: Callable[[str], bool] = is_temp) -> None:
    """Deletes the files of a listing that ``doomed`` names (temp files) last written at or
    before ``cutoff``."""
    for f in listed:
        if not f.is_dir and doomed(f.name) and f.modification_time / 1000.0 <= cutoff:
            delete(f.path)
