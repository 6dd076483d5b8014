"""The index operation log: one append-only sequence of JSON entries per index.

Layout (see docs/architecture.md, section 7, "On-disk layout")::

    <index path>/_log/0.json, 1.json, ...   one entry per lifecycle step, never rewritten
    <index path>/_log/latestStable          a copy of the newest entry in a stable state
    <index path>/_log/files/<sha256>.parquet the source files (and lineage ids) of entries
                                            of many files (see :mod:`indexes.log_files`)

Entries are created with create-if-absent semantics (``FileSystem.create_exclusive``: on Hadoop
file systems a temp file linked or renamed into place atomically, on S3 a conditional PUT), so
two writers racing for the same id never corrupt the log: exactly one of them wins. All I/O goes
through the :class:`~indexes.fs.FileSystem` protocol: :class:`~indexes.fs.HadoopFs` makes the log
work on any Hadoop-supported file system, :class:`~indexes.fs.MemoryFs` in memory.
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from indexes import log_files
from indexes.description import SourceDescription
from indexes.errors import CorruptLogError
from indexes.fs import FileSystem

logger = logging.getLogger("accelerator.indexes.log")

#: entries parsed lately, by path, with the SHA-256 of their text: the driver's index catalog
#: rereads every log at each reload, and an entry recording a million source files is some
#: 90 MB of JSON that takes seconds to parse (hashing it, a fraction of a second)
_PARSED: dict[str, tuple[bytes, "IndexLogEntry"]] = {}
_PARSED_KEPT = 256
_PARSED_LOCK = threading.Lock()

LOG_DIR = "_log"
LATEST_STABLE = "latestStable"
_ENTRY_NAME = re.compile(r"^(0|[1-9][0-9]*)\.json$")


class IndexState(str, Enum):
    """States of an index. Stable states end an operation; transient ones mark one in progress.

    ``CORRUPT`` is neither: it is never written, but stands for an index whose newest log entry
    cannot be read (see :meth:`IndexLogManager.latest`); queries do not use such an index, and
    the only action on it is a vacuum, which removes it for good.
    """

    CREATING = "CREATING"
    ACTIVE = "ACTIVE"
    REFRESHING = "REFRESHING"
    OPTIMIZING = "OPTIMIZING"
    DELETING = "DELETING"
    DELETED = "DELETED"
    RESTORING = "RESTORING"
    VACUUMING = "VACUUMING"
    VACUUMING_OUTDATED = "VACUUMINGOUTDATED"
    CANCELLING = "CANCELLING"
    DOESNOTEXIST = "DOESNOTEXIST"
    CORRUPT = "CORRUPT"

    @property
    def is_stable(self) -> bool:
        """Whether no operation is in progress in this state."""
        return self in STABLE_STATES

    def __str__(self) -> str:
        return self.value


STABLE_STATES: frozenset[IndexState] = frozenset(
    {IndexState.ACTIVE, IndexState.DELETED, IndexState.DOESNOTEXIST})
TRANSIENT_STATES: frozenset[IndexState] = frozenset(
    set(IndexState) - STABLE_STATES - {IndexState.CORRUPT})


def now_ms() -> int:
    """The current time in epoch milliseconds, as stored in ``IndexLogEntry.timestamp``."""
    return int(time.time() * 1000)


@dataclass
class IndexLogEntry:
    """One step of an index's history.

    The entry is generic over index kinds: what a kind needs lives in ``config`` (e.g.
    ``indexedColumns``, ``includedColumns``, ``numBuckets``), ``source`` (a
    :class:`~indexes.description.SourceDescription`: format, root paths, partition columns,
    options, files; written as its JSON) and ``content`` (e.g.
    ``dataVersion``, ``path`` of the data version directory, ``schema``, ``numFiles``,
    ``sizeInBytes``).
    """

    id: int
    name: str
    kind: str
    state: IndexState
    timestamp: int = field(default_factory=now_ms)
    config: dict[str, Any] = field(default_factory=dict)
    source: SourceDescription = field(default_factory=SourceDescription)
    content: dict[str, Any] = field(default_factory=dict)
    properties: dict[str, Any] = field(default_factory=dict)

    @property
    def data_version(self) -> int | None:
        """``content["dataVersion"]`` when present."""
        version = self.content.get("dataVersion")
        return None if version is None else int(version)

    def to_dict(self) -> dict[str, Any]:
        """A plain-JSON dictionary of this entry."""
        return {
            "id": self.id,
            "name": self.name,
            "kind": self.kind,
            "state": self.state.value,
            "timestamp": self.timestamp,
            "config": self.config,
            "source": self.source.to_json(),
            "content": self.content,
            "properties": self.properties,
        }

    def to_json(self) -> str:
        """Plain JSON with a stable key order (sorted keys, two-space indent)."""
        return json.dumps(self.to_dict(), sort_keys=True, indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "IndexLogEntry":
        """The entry stored in ``data``; raises ValueError when a field is missing or invalid."""
        try:
            return cls(
                id=int(data["id"]),
                name=str(data["name"]),
                kind=str(data["kind"]),
                state=IndexState(data["state"]),
                timestamp=int(data["timestamp"]),
                config=dict(data.get("config") or {}),
                source=SourceDescription.from_json(data.get("source")),
                content=dict(data.get("content") or {}),
                properties=dict(data.get("properties") or {}),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a valid index log entry: {exc!r}") from exc

    @classmethod
    def from_json(cls, text: str) -> "IndexLogEntry":
        """Parses :meth:`to_json` output; raises ValueError on anything else."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise ValueError("not a valid index log entry: not a JSON object")
        return cls.from_dict(data)

    def derive(self, id: int, state: IndexState, **changes: Any) -> "IndexLogEntry":
        """A copy with a new id, state and timestamp (plus any other field ``changes``)."""
        return replace(self, id=id, state=state, timestamp=now_ms(), **changes)


def _parsed(path: str, text: str, fs: FileSystem) -> IndexLogEntry:
    """The entry ``text`` (read from ``path`` on ``fs``) holds, its per-file parts read back
    from beside the log when they were kept there: the one parsed last time when the text is
    the same (entries are not changed once written: the same object, so what is derived from
    it per version stays derived), else parsed; raises ValueError as
    :meth:`IndexLogEntry.from_json` (or when the files it names cannot be read)."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    with _PARSED_LOCK:
        found = _PARSED.get(path)
    if found is not None and found[0] == digest:
        return found[1]
    entry = IndexLogEntry.from_json(text)
    source, content = log_files.resolved(fs, path.rsplit("/", 1)[0], entry.source, entry.content)
    if source is not entry.source or content is not entry.content:
        entry = replace(entry, source=source, content=content)
    with _PARSED_LOCK:
        if path not in _PARSED and len(_PARSED) >= _PARSED_KEPT:
            _PARSED.pop(next(iter(_PARSED)))
        _PARSED[path] = (digest, entry)
    return entry


class IndexLogManager:
    """Reads and appends the log of the index stored at ``index_path``."""

    def __init__(self, fs: FileSystem, index_path: str):
        self._fs = fs
        self.index_path = index_path.rstrip("/")
        self.log_path = f"{self.index_path}/{LOG_DIR}"

    def _entry_path(self, id: int) -> str:
        return f"{self.log_path}/{id}.json"

    def ids(self) -> list[int]:
        """Ids of all entries, ascending; temp files and other junk in ``_log`` are ignored."""
        try:
            infos = self._fs.list(self.log_path)
        except Exception:  # the directory vanished while listing (e.g. a vacuum)
            if self._fs.exists(self.log_path):
                raise
            return []
        ids = []
        for info in infos:
            match = _ENTRY_NAME.match(info.name)
            if match and not info.is_dir:
                ids.append(int(match.group(1)))
        return sorted(ids)

    def latest_id(self) -> int | None:
        """Id of the newest entry, or None when the log is empty or absent."""
        ids = self.ids()
        return ids[-1] if ids else None

    def get(self, id: int) -> IndexLogEntry | None:
        """The entry with this id, or None when it does not exist; CorruptLogError when it
        cannot be read."""
        path = self._entry_path(id)
        if not self._fs.exists(path):
            return None
        try:
            text = self._fs.read_text(path)
        except Exception:
            if not self._fs.exists(path):  # removed meanwhile (e.g. a vacuum)
                return None
            raise
        remedy = (f"it was modified outside the accelerator: restore it from a backup, or "
                  f"remove the index and its data with vacuum('{self._dir_name}')")
        try:
            entry = _parsed(path, text, self._fs)
        except ValueError as exc:
            if not self._fs.exists(path):  # its files beside it went with it (e.g. a vacuum)
                return None
            raise CorruptLogError(f"index log entry {path} is corrupt ({exc}); {remedy}",
                                  path) from exc
        if entry.id != id:
            raise CorruptLogError(f"index log entry {path} holds id {entry.id}; {remedy}", path)
        return entry

    @property
    def _dir_name(self) -> str:
        return self.index_path.rsplit("/", 1)[-1]

    def latest(self) -> IndexLogEntry | None:
        """The newest entry, or None when the log is empty.

        When the newest entry cannot be read, logs a warning naming the file and the error and
        returns a CORRUPT entry in its place: its id, the name, kind and config of the newest
        readable entry (else the directory name and kind ``unknown``) and its timestamp (so
        every read gives the same entry), no source or content, and ``properties``
        ``corruptFile`` (the file) and ``error`` (the message).
        """
        latest_id = self.latest_id()
        if latest_id is None:
            return None
        try:
            return self.get(latest_id)
        except CorruptLogError as exc:
            logger.warning("%s", exc)
            known = self._newest_readable([id for id in self.ids() if id < latest_id])
            return IndexLogEntry(
                id=latest_id, name=known.name if known else self._dir_name,
                kind=known.kind if known else "unknown", state=IndexState.CORRUPT,
                config=dict(known.config) if known else {},
                timestamp=known.timestamp if known else 0,
                properties={"corruptFile": exc.path, "error": str(exc)})

    def _newest_readable(self, ids: list[int]) -> IndexLogEntry | None:
        for id in reversed(ids):
            try:
                entry = self.get(id)
            except CorruptLogError:
                continue
            if entry is not None:
                return entry
        return None

    def _read_latest_stable_copy(self) -> IndexLogEntry | None:
        path = f"{self.log_path}/{LATEST_STABLE}"
        try:
            if not self._fs.exists(path):
                return None
            entry = _parsed(path, self._fs.read_text(path), self._fs)
        except Exception as exc:  # partial or replaced meanwhile: fall back to a scan
            logger.debug("ignoring unreadable %s: %s", path, exc)
            return None
        return entry if entry.state.is_stable else None

    def latest_stable(self) -> IndexLogEntry | None:
        """The newest entry in a stable state, or None.

        Uses the ``latestStable`` copy when it matches its log entry and no newer stable entry
        exists; otherwise scans the log backwards.
        """
        ids = self.ids()
        if not ids:
            return None
        copy = self._read_latest_stable_copy()
        floor = -1
        if copy is not None and copy.id in ids and self.get(copy.id) == copy:
            floor = copy.id
        for id in reversed(ids):
            if id <= floor:
                return copy
            entry = self.get(id)
            if entry is not None and entry.state.is_stable:
                return entry
        return copy if floor >= 0 else None

    def _stored_json(self, entry: IndexLogEntry) -> str:
        """The text of ``entry`` as the log stores it: its per-file parts beside the log when
        they are many (written first, see :mod:`indexes.log_files`)."""
        source, content = log_files.stored(self._fs, self.log_path, entry.source, entry.content)
        return replace(entry, source=source, content=content).to_json()

    def write(self, entry: IndexLogEntry) -> bool:
        """Writes ``entry`` as ``<id>.json`` only if that id is free; returns whether it was.

        False means another writer already took the id (lost race).
        """
        won = self._fs.create_exclusive(self._entry_path(entry.id), self._stored_json(entry))
        if won:
            logger.debug("wrote %s entry %d (%s)", self.index_path, entry.id, entry.state)
        else:
            logger.debug("entry %d of %s already exists", entry.id, self.index_path)
        return won

    def write_latest_stable(self, entry: IndexLogEntry) -> None:
        """Replaces the ``latestStable`` copy with ``entry`` (which must be stable).

        Written to a temp file first, then moved into place; readers that see no copy or a
        stale one fall back to scanning the log, so this is only an optimization.
        """
        if not entry.state.is_stable:
            raise ValueError(f"latestStable must hold a stable entry, not {entry.state}")
        target = f"{self.log_path}/{LATEST_STABLE}"
        tmp = f"{target}.{uuid.uuid4().hex}.tmp"
        self._fs.write_text(tmp, self._stored_json(entry), overwrite=False)
        try:
            self._fs.delete(target, recursive=False)
            if not self._fs.rename(tmp, target):
                logger.warning("could not update %s (a concurrent writer?); readers will scan "
                               "the log instead", target)
        finally:
            if self._fs.exists(tmp):
                self._fs.delete(tmp, recursive=False)
