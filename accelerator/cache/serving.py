"""Which of a relation's files the cache serves, and why the others are not: pure Python over a
snapshot of the manifest (:class:`CacheView`), no JVM.

A file is served when the view holds an ACTIVE entry for exactly this version of it (path,
size, modification time) read exactly this way (:func:`accelerator.cache.model.relation_read_key`)
that holds every column the query reads from the relation, in a pack, and the relation lists the
file once (Spark reads a file listed twice twice). Anything else is read from the source, with a
stable reason code for ``whyNot``.

A pack holds the rows of several source files, each row tagged with its file's tag: the pack's
number (the high 32 bits, drawn at random by its warm-up) and a hash of the file's name unique in
the pack (the low 32 bits). The JVM reads the packs of the served files and keeps the rows whose
tag is a served file's (every row of a pack all of whose files are served, by its number: the
entries record how many files their pack holds); so that no other row passes, the packs one
relation reads have distinct numbers: a file whose pack's number another pack read with it has
already (two warm-ups drew the same number) is read from the source.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from accelerator.cache.model import CacheEntry, relation_read_key
from indexes.description import SourceDescription, SourceFile, source_files
from indexes.plan import PlanNode, references

APPLIED = "APPLIED"
NOT_CACHED = "NOT_CACHED"            # no entry names the file
STALE = "STALE"                      # entries hold another version (size, mtime) of the file
OTHER_READ = "OTHER_READ"            # an entry holds the file read with other options/schema
MISSING_COLUMNS = "MISSING_COLUMNS"  # the entry lacks a column the query reads
EVICTED = "EVICTED"                  # the file's entry was evicted
UNPACKED = "UNPACKED"                # the entry has the layout before packs
PACK_CLASH = "PACK_CLASH"            # its pack's number is another pack's read with it
LISTED_TWICE = "LISTED_TWICE"        # the relation lists the file more than once

REASONS = {
    NOT_CACHED: "not cached",
    STALE: "changed since it was cached (size or modification time)",
    OTHER_READ: "cached as read with other options, schema or read settings",
    MISSING_COLUMNS: "cached without some column the query reads",
    EVICTED: "its entry was evicted",
    UNPACKED: "cached in the layout before packs (warm it again)",
    PACK_CLASH: "its pack's number is that of another pack read with it",
    LISTED_TWICE: "listed more than once by the read (Spark reads it as often as listed)",
}

#: the bits of a tag below its pack's number
PACK_SHIFT = 32

#: read options that choose files rather than change what is read from one
FILE_SELECTING_OPTIONS = frozenset({"path", "paths", "basepath", "pathglobfilter",
                                    "recursivefilelookup", "modifiedbefore", "modifiedafter"})


def read_key_of(description: SourceDescription, read_settings: Mapping[str, Any]) -> str:
    """The read key of a relation as the JVM describes it (format, options, data schema)."""
    options = {k: v for k, v in (description.options or {}).items()
               if k.lower() not in FILE_SELECTING_OPTIONS}
    return relation_read_key(description.format, options, description.data_schema,
                             read_settings)


def parent_dirs(path: str) -> Iterable[str]:
    """The directories above ``path`` (``file:/a/b/c`` → ``file:/a/b``, ``file:/a``)."""
    head = path.rstrip("/")
    while True:
        head, sep, _ = head.rpartition("/")
        if not sep or not head or head.endswith(":") or head.endswith("/"):
            return
        yield head


@dataclass(frozen=True)
class CacheView:
    """A snapshot of a cache's entries, indexed for serving."""

    generation: int
    loaded_at: float
    by_key: Mapping[str, CacheEntry]                         # every entry, by key
    active: Mapping[tuple[str, str, int, int], CacheEntry]   # (read key, path, size, mtime)
    by_path: Mapping[str, tuple[CacheEntry, ...]]            # every entry, EVICTED too
    dirs: frozenset[str]            # directories above the files of entries (EVICTED too)

    @classmethod
    def of(cls, entries: Iterable[CacheEntry], generation: int, loaded_at: float) -> "CacheView":
        entries = list(entries)
        active: dict[tuple[str, str, int, int], CacheEntry] = {}
        by_path: dict[str, list[CacheEntry]] = {}
        dirs: set[str] = set()
        for e in entries:
            by_path.setdefault(e.file_path, []).append(e)
            if e.active:
                active[(e.read_key, e.file_path, e.file_size, e.file_mtime)] = e
            parent = e.file_path.rpartition("/")[0]
            if parent not in dirs:
                dirs.add(parent)
                dirs.update(parent_dirs(parent))
        return cls(generation, loaded_at, {e.key: e for e in entries}, active,
                   {p: tuple(v) for p, v in by_path.items()}, frozenset(dirs))

    def covers(self, roots: Iterable[str]) -> bool:
        """Whether the file of some entry (ACTIVE or EVICTED) lies under one of ``roots`` or is
        one of them (the roots of a read by a glob pattern are the files it matched)."""
        return any(r.rstrip("/") in self.dirs or r in self.by_path for r in roots)

    def roots(self) -> frozenset[str]:
        """The root paths :meth:`covers` says yes to, each of them: the directories above the
        files of entries and those files."""
        return self.dirs.union(self.by_path)

    def _reason(self, read_key: str, path: str, size: int, mtime: int,
                entry: CacheEntry | None) -> str:
        if entry is not None:
            return MISSING_COLUMNS
        others = self.by_path.get(path, ())
        if not others:
            return NOT_CACHED
        if any(e.active and (e.file_size, e.file_mtime) != (size, mtime) for e in others):
            return STALE
        if any(e.active for e in others):
            return OTHER_READ
        return EVICTED


@dataclass(frozen=True)
class ServingPlan:
    """The files of one relation the cache serves (path → entry) and the reason for each of
    the others (code → number of files)."""

    served: Mapping[str, CacheEntry]
    reasons: Mapping[str, int] = field(default_factory=dict)
    source_bytes: int = 0

    @property
    def served_bytes(self) -> int:
        return sum(e.bytes for e in self.served.values())

    @property
    def source_files(self) -> int:
        return sum(self.reasons.values())

    @property
    def misses(self) -> int:
        """Files read from the source that a warm-up of this read could serve: all but those
        cached as read another way (e.g. the text reads of JSON schema inference)."""
        return self.source_files - self.reasons.get(OTHER_READ, 0)


def plan_serving(view: CacheView, read_key: str, files: Iterable[SourceFile],
                 required: Iterable[str]) -> ServingPlan:
    """Which ``files`` (``[path, size, mtime]``) the cache serves to a query reading the data
    columns ``required`` of a relation with ``read_key``."""
    needed = set(required)
    served: dict[str, CacheEntry] = {}
    reasons: dict[str, int] = {}
    packs: dict[int, str] = {}   # pack number -> the pack read under it
    source_bytes = 0
    listed = source_files(files)
    twice = {path for path, n in Counter(f.path for f in listed).items() if n > 1}
    for f in listed:
        path, size, mtime = f.path, f.size, f.mtime
        entry = view.active.get((read_key, path, int(size), int(mtime)))
        if path in twice:
            code = LISTED_TWICE
        elif entry is not None and needed.issubset(entry.columns):
            if not entry.packed:
                code = UNPACKED
            elif packs.setdefault(entry.tag >> PACK_SHIFT, entry.data_path) != entry.data_path:
                code = PACK_CLASH
            else:
                served[path] = entry
                continue
        else:
            code = view._reason(read_key, path, int(size), int(mtime), entry)
        reasons[code] = reasons.get(code, 0) + 1
        source_bytes += int(size)
    return ServingPlan(served, reasons, source_bytes)


#: nodes whose output is their children's (the relation's columns pass through them unchanged)
_PASS_THROUGH = frozenset({
    "Filter", "Sort", "GlobalLimit", "LocalLimit", "Offset", "Tail", "Sample", "Repartition",
    "RepartitionByExpression", "RebalancePartitions", "SubqueryAlias", "ResolvedHint", "Join",
    "Distinct", "Deduplicate", "DeduplicateWithinWatermark"})
#: nodes whose output is their own expressions (only the columns these refer to are read)
_NEW_OUTPUT = frozenset({"Project", "Aggregate"})


def required_columns(relation: PlanNode, partition_columns: Iterable[str]) -> frozenset[str]:
    """The data columns (top-level names) of ``relation`` its plan reads: those the nodes above
    it refer to, and all of them when they reach the plan's output through nodes that pass
    columns through (a Filter, a Join...) or meet a node that may use them by position (a
    Union, a Window...: conservatively, every column)."""
    names = {a.expr_id: a.fields.get("name") for a in relation.output_attributes()}
    ids = set(names)
    used: set[int] = set()
    passing = True
    node = relation.parent
    while node is not None:
        for tree in node.all_exprs():
            used.update(r.expr_id for r in references(tree, ids))
        if node.cls in _NEW_OUTPUT:
            passing = False
        elif passing and node.cls not in _PASS_THROUGH:
            used = ids
            break
        node = node.parent
    if passing:
        used = ids
    return frozenset(names[i] for i in used) - set(partition_columns)
