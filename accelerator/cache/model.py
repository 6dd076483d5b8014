"""What the cache tier is made of: priorities, TTL durations, cache keys, entries, and the rule
that merges a warm-up request with what is cached already. Pure Python, no JVM.

Times are epoch seconds (floats); a source file's modification time is epoch milliseconds, as
Spark and Hadoop report it.
"""
from __future__ import annotations

import enum
import functools
import hashlib
import json
from dataclasses import dataclass, fields, replace
from typing import Any, Iterable, Mapping

from indexes.errors import AcceleratorError, CacheRequestError
from rules import terms
from rules.terms import Priority, format_duration

__all__ = ["Priority", "format_duration", "parse_priority", "parse_duration", "CacheKey",
           "CacheEntry", "EntryState", "plan_warmup", "merge_ttl", "CacheCapacityError",
           "CacheNeverError", "read_key", "file_key", "relation_read_key", "WarmupPlan",
           "normalize_columns"]


class CacheCapacityError(AcceleratorError):
    """The cache cannot hold what was asked of it (e.g. more ALWAYS bytes than its size)."""


class CacheNeverError(AcceleratorError):
    """A source carries a NEVER marker, so none of its files may be cached."""


def parse_priority(value: str | Priority, allow_never: bool = False) -> Priority:
    """:func:`rules.terms.parse_priority`, raising :class:`CacheRequestError`."""
    try:
        return terms.parse_priority(value, allow_never)
    except terms.TermError as exc:
        raise CacheRequestError(str(exc)) from None


def parse_duration(text: str) -> int:
    """:func:`rules.terms.parse_duration` (a TTL), raising :class:`CacheRequestError`."""
    try:
        return terms.parse_duration(text, what="TTL")
    except terms.TermError as exc:
        raise CacheRequestError(str(exc)) from None


def _canonical_json(text: str | None) -> Any:
    """A schema JSON string parsed (so formatting does not change a key); unparseable text as is."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


@dataclass(frozen=True)
class CacheKey:
    """What identifies the cached form of one source file: the file (path, size, modification
    time) and everything that changes what Spark reads from it (format, read options, the
    relation's data schema, read settings). A changed file or changed options give another key.

    Option names are compared case-insensitively (as Spark does); options and settings are
    sorted, so their order does not matter. :attr:`hex` is the key used on disk.
    """

    path: str
    size: int
    modification_time: int
    format: str
    options: tuple[tuple[str, str], ...] = ()
    schema_json: str | None = None
    read_settings: tuple[tuple[str, str], ...] = ()

    @classmethod
    def create(cls, path: str, size: int, modification_time: int, format: str,
               options: Mapping[str, Any] | None = None, schema_json: str | None = None,
               read_settings: Mapping[str, Any] | None = None) -> "CacheKey":
        """A key with its options and settings normalized (sorted, values as strings)."""
        opts = tuple(sorted((str(k).lower(), str(v)) for k, v in (options or {}).items()))
        settings = tuple(sorted((str(k), str(v)) for k, v in (read_settings or {}).items()))
        return cls(str(path), int(size), int(modification_time), str(format).lower(), opts,
                   schema_json, settings)

    @property
    def read_key(self) -> str:
        """What the key holds besides the file: equal for every file of one relation read one
        way, so serving computes it once per relation (see :func:`file_key`)."""
        return read_key(self.format, self.options, self.schema_json, self.read_settings)

    @property
    def hex(self) -> str:
        """The key used on disk: :func:`file_key` of the file and :attr:`read_key`."""
        return file_key(self.read_key, self.path, self.size, self.modification_time)


@functools.lru_cache(maxsize=256)
def read_key(format: str, options: tuple[tuple[str, str], ...], schema_json: str | None,
             read_settings: tuple[tuple[str, str], ...]) -> str:
    """The sha256 hex digest of how a relation reads its files (normalized as
    :meth:`CacheKey.create` does); remembered, since every file of a relation has the same."""
    canonical = json.dumps(
        {"v": 1, "format": format, "options": [list(o) for o in options],
         "schema": _canonical_json(schema_json), "settings": [list(s) for s in read_settings]},
        sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def file_key(read_key: str, path: str, size: int, modification_time: int) -> str:
    """The sha256 hex digest naming one file version read one way."""
    canonical = json.dumps([2, read_key, path, int(size), int(modification_time)],
                           separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class EntryState(str, enum.Enum):
    """ACTIVE entries are served; EVICTED ones are not, and their files go after a grace period."""

    ACTIVE = "ACTIVE"
    EVICTED = "EVICTED"


def normalize_columns(columns: Iterable[str]) -> tuple[str, ...]:
    """Top-level column names, unique and sorted. Nested fields are cached with their top-level
    column: the caller passes ``nested`` for ``nested.a.b``."""
    out = tuple(sorted({str(c) for c in columns}))
    if not out or any(not c.strip() for c in out):
        raise CacheRequestError(
            f"a cache entry needs non-empty column names, got {list(out)}")
    return out


@dataclass(frozen=True)
class CacheEntry:
    """One committed cache entry: the given columns of one source file, as rows of a pack under
    ``data_path`` (Parquet files a warm-up wrote holding the rows of several source files, each
    row tagged with its file's ``tag``).

    ``read_key`` is the key's :attr:`CacheKey.read_key`; ``files`` are the pack's Parquet files
    holding the entry's rows (paths with their sizes; none for a file without rows); ``bytes``
    the entry's share of them. ``tag``: its rows' value of the pack's hidden column; None for an
    entry of the layout before packs (a folder of its own), which is not served.
    ``pack_files``: how many source files its warm-up wrote into the pack (distinct tags in
    it), so that a query serving all of them reads the pack without a list of tags; None
    when not recorded (entries written before it was).
    ``ttl_seconds`` counts from ``last_used`` (None: no TTL). ``retired`` lists data paths this
    entry replaced (with when), deleted after the grace period. ``hits`` and ``last_used`` as
    written are the entry's own; the manifest adds the usage recorded since (see
    :mod:`accelerator.cache.manifest`).
    """

    key: str
    source_root: str
    file_path: str
    file_size: int
    file_mtime: int
    columns: tuple[str, ...]
    priority: Priority
    ttl_seconds: int | None
    bytes: int
    data_path: str
    created: float
    last_used: float
    hits: int = 0
    read_key: str = ""
    files: tuple[tuple[str, int], ...] = ()
    state: EntryState = EntryState.ACTIVE
    evicted_at: float | None = None
    retired: tuple[tuple[str, float], ...] = ()
    tag: int | None = None
    pack_files: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", normalize_columns(self.columns))
        object.__setattr__(self, "priority", parse_priority(self.priority))
        object.__setattr__(self, "state", EntryState(self.state))
        object.__setattr__(self, "retired", tuple((str(p), float(t)) for p, t in self.retired))
        object.__setattr__(self, "files", tuple((str(n), int(b)) for n, b in self.files))

    @property
    def active(self) -> bool:
        return self.state is EntryState.ACTIVE

    @property
    def packed(self) -> bool:
        """Whether the entry's rows are in a pack (tagged), the layout served."""
        return self.tag is not None

    def expired(self, now: float) -> bool:
        """Whether the TTL has run out: ``now - last_used >= ttl_seconds``. ALWAYS entries and
        entries without a TTL never expire."""
        return (self.priority is not Priority.ALWAYS and self.ttl_seconds is not None
                and now - self.last_used >= self.ttl_seconds)

    def evicted(self, now: float) -> "CacheEntry":
        """This entry marked EVICTED at ``now`` (unchanged if it already is)."""
        return self if not self.active else replace(self, state=EntryState.EVICTED, evicted_at=now)

    def to_json(self) -> str:
        data = {f.name: getattr(self, f.name) for f in fields(self)}   # no deep copy (asdict)
        data["priority"] = self.priority.name
        data["state"] = self.state.value
        data["columns"] = list(self.columns)
        data["retired"] = [list(r) for r in self.retired]
        data["files"] = [list(f) for f in self.files]
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "CacheEntry":
        """The entry :meth:`to_json` wrote (fields it does not know, written by a newer version,
        are ignored); ValueError when the text is not one."""
        try:
            known = {f.name for f in fields(cls)}
            data = {k: v for k, v in json.loads(text).items() if k in known}
            data["columns"] = tuple(data["columns"])
            data["retired"] = tuple(tuple(r) for r in data.get("retired", ()))
            data["files"] = tuple(tuple(f) for f in data.get("files", ()))
            return cls(**data)
        except (TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"not a cache entry: {exc}") from exc


def merge_ttl(a: int | None, b: int | None) -> int | None:
    """The longer of two TTLs; no TTL (None) is the longest."""
    return None if a is None or b is None else max(a, b)


@dataclass(frozen=True)
class WarmupPlan:
    """What a warm-up of one key must do (see :func:`plan_warmup`).

    ``write``: whether data must be written (holding ``columns``); when False, ``keep`` already
    covers the request and only its priority and TTL may change (to ``priority``, ``ttl_seconds``).
    ``supersedes``: entries to mark EVICTED once the new entry is committed.
    """

    columns: tuple[str, ...]
    priority: Priority
    ttl_seconds: int | None
    write: bool
    keep: CacheEntry | None
    supersedes: tuple[CacheEntry, ...]


def plan_warmup(key: CacheKey, columns: Iterable[str], priority: Priority,
                ttl_seconds: int | None, entries: Iterable[CacheEntry]) -> WarmupPlan:
    """The merge rule for a warm-up request of ``columns`` of the file ``key`` identifies.

    ``entries`` are the manifest's entries (any; only ACTIVE ones of this key or this file
    count). A request never lowers an entry's priority (the higher wins) nor shortens its TTL
    (:func:`merge_ttl`). If the ACTIVE entry of the key holds every requested column in a pack,
    nothing is written (one of the layout before packs is written again, superseded). Otherwise one new entry holds the union of the requested columns and the current
    entry's, superseding it. ACTIVE entries of the same file path under another version of the
    file (another size or modification time) are superseded as well: they can never be served
    again. Entries of the same file version read with other options are left alone.
    """
    wanted = set(normalize_columns(columns))
    priority = parse_priority(priority)
    digest = key.hex
    active = [e for e in entries if e.active]
    current = next((e for e in active if e.key == digest), None)
    stale = tuple(e for e in active if e.key != digest and e.file_path == key.path
                  and (e.file_size, e.file_mtime) != (key.size, key.modification_time))
    if current is None:
        return WarmupPlan(tuple(sorted(wanted)), priority, ttl_seconds, True, None, stale)
    merged_priority = max(priority, current.priority)
    merged_ttl = merge_ttl(ttl_seconds, current.ttl_seconds)
    if wanted <= set(current.columns) and current.packed:
        return WarmupPlan(current.columns, merged_priority, merged_ttl, False, current, stale)
    return WarmupPlan(tuple(sorted(wanted | set(current.columns))), merged_priority, merged_ttl,
                      True, None, (current, *stale))


def relation_read_key(format: str, options: Mapping[str, Any] | None, schema_json: str | None,
                      read_settings: Mapping[str, Any] | None) -> str:
    """The :attr:`CacheKey.read_key` of every file a relation reads (normalized as
    :meth:`CacheKey.create` normalizes a key)."""
    return CacheKey.create("", 0, 0, format, options, schema_json, read_settings).read_key
