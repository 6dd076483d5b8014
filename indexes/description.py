"""The typed description of a file source: what the JVM's ``RelationDescriptions.describe``
says of a relation, what an index log entry records as its ``source``, and its files.

Its one job is the mapping between that JSON (camelCase keys, files as ``[path, size, mtime]``
lists) and :class:`SourceDescription` / :class:`SourceFile`, both ways and exactly: a key
absent from the JSON stays absent when written back, a key present with null stays null, and
keys this version does not know are kept, so a log written by a newer version round-trips.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, NamedTuple


class SourceFile(NamedTuple):
    """One file of a source as listed by Spark: its Hadoop path string, size in bytes,
    modification time (epoch ms) and, for a Delta table's file, the deletion vector that hides
    some of its rows (None: every row is live). Written as the ``[path, size, mtime]`` list
    (with the deletion vector as a fourth element when there is one); a file whose deletion
    vector changed is another file, as a modified one is."""

    path: str
    size: int
    mtime: int
    deletion_vector: str | None = None

    def to_json(self) -> list[Any]:
        """The file's JSON list: ``[path, size, mtime]``, plus its deletion vector if any."""
        return list(self) if self.deletion_vector is not None else list(self[:3])


def source_files(files: Iterable[Iterable[Any]]) -> tuple[SourceFile, ...]:
    """``files`` (``[path, size, mtime(, deletion vector)]`` lists or tuples) as
    :class:`SourceFile` values;
    ``files`` itself when it is a tuple of them already (callers keep per-listing state by
    identity: see ``StatsTable.listing``)."""
    if isinstance(files, tuple) and all(isinstance(f, SourceFile) for f in files):
        return files
    return tuple(f if isinstance(f, SourceFile) else SourceFile(*f) for f in files)


@dataclass(frozen=True)
class FileChanges:
    """How a relation's files differ from those an index version recorded (the JVM's answer,
    see ``PlanRewrite.changes``): ``recorded``, the key of the recorded files this is
    relative to (their :attr:`SourceDescription.listing_key`); ``appended``, the relation's files not among them
    (new, modified or with another deletion vector), ``deleted``, those of them no longer
    listed (a modified file is in both); the relation's file ``count`` and ``bytes`` (None
    when the fingerprints are equal: those of the recorded files)."""

    recorded: str
    appended: tuple[SourceFile, ...] = ()
    deleted: tuple[SourceFile, ...] = ()
    count: int | None = None
    bytes: int | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any], recorded: str,
                  files: tuple[SourceFile, ...]) -> "FileChanges":
        """The JVM's answer ``data`` relative to the ``files`` recorded under the key
        ``recorded`` (its ``deleted`` are positions in them)."""
        return cls(recorded, source_files(data["appended"]),
                   tuple(files[i] for i in data["deleted"]), int(data["count"]),
                   int(data["bytes"]))

    def applied_to(self, files: tuple[SourceFile, ...]) -> tuple[SourceFile, ...]:
        """The relation's files: the recorded ``files`` less the deleted, then the appended."""
        if not self.deleted:
            return files + self.appended
        gone = set(self.deleted)
        return tuple(f for f in files if f not in gone) + self.appended


#: attribute name -> JSON key, in the order the JVM writes them
_KEYS = {
    "format": "format",
    "table": "table",
    "glob_path": "globPath",
    "root_paths": "rootPaths",
    "partition_columns": "partitionColumns",
    "options": "options",
    "bucketed": "bucketed",
    "table_format": "tableFormat",
    "table_version": "tableVersion",
    "column_mapping": "columnMapping",
    "data_schema": "dataSchema",
    "fingerprint": "fingerprint",
    "deletion_vectors": "deletionVectors",
    "files": "files",
    "schema": "schema",
    "read_settings": "readSettings",
    "spark_version": "sparkVersion",
}
_ATTRIBUTES = {key: name for name, key in _KEYS.items()}

#: table formats whose relations read their files through a scan of their own
SCANNED_FORMATS = ("delta",)


@dataclass(frozen=True)
class SourceDescription:
    """What a relation reads, or what an index recorded of its source.

    From the JVM: ``format`` (its short name), ``table`` (the qualified name of the catalog
    table read, if any), ``glob_path`` (the qualified glob pattern read, if any),
    ``root_paths``, ``partition_columns``, ``options``, ``bucketed``, for a table of a table
    format ``table_format`` (``"delta"``, ``"iceberg"``), ``table_version`` (the version read,
    an Iceberg snapshot id) and
    ``column_mapping`` (Delta's mode, ``name`` or ``id``, when its files hold columns under
    physical names of their own),
    ``data_schema`` (Spark's schema JSON, as a string) and, when asked, ``fingerprint`` (over
    the sorted files), ``deletion_vectors`` (how many files carry one, when some do) and
    ``files``. An index adds ``schema`` (the relation's output as ``[name, type]`` pairs),
    ``read_settings`` (the session settings that change what is read) and ``spark_version``.

    Every attribute is None when its key is absent; ``null_keys`` holds the keys present with
    null (``"fingerprint": null`` for a relation that does not list its files) and ``extra``
    the keys this version does not know, both written back by :meth:`to_json`. ``changes``
    (never written) holds the relation's differences to listings indexes recorded, where the
    JVM answered them instead of the files (:meth:`changes_since`). Frozen: a description
    completed later is a new one (:meth:`with_listing`, :meth:`with_files`,
    :meth:`with_changes`, :meth:`with_read_settings`, :meth:`with_index_facts`).
    """

    format: str | None = None
    table: str | None = None
    glob_path: str | None = None
    root_paths: list[str] | None = None
    partition_columns: list[str] | None = None
    options: dict[str, str] | None = None
    bucketed: bool | None = None
    table_format: str | None = None
    table_version: int | None = None
    column_mapping: str | None = None
    data_schema: str | None = None
    fingerprint: str | None = None
    deletion_vectors: int | None = None
    files: tuple[SourceFile, ...] | None = None
    schema: list[list[Any]] | None = None
    read_settings: dict[str, Any] | None = None
    spark_version: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    null_keys: frozenset[str] = frozenset()
    changes: tuple[FileChanges, ...] = ()

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "SourceDescription":
        """The description ``data`` (parsed JSON; None or ``{}``: the empty description)."""
        known: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        nulls = set()
        for key, value in (data or {}).items():
            name = _ATTRIBUTES.get(key)
            if name is None:
                extra[key] = value
            elif value is None:
                nulls.add(key)
            else:
                known[name] = source_files(value) if name == "files" else value
        return cls(**known, extra=extra, null_keys=frozenset(nulls))

    def to_json(self) -> dict[str, Any]:
        """The JSON object of this description: the keys :meth:`from_json` read (or the
        JVM and the index wrote), camelCase, files as ``[path, size, mtime]`` lists."""
        out: dict[str, Any] = {}
        for name, key in _KEYS.items():
            value = getattr(self, name)
            if value is not None:
                out[key] = [f.to_json() for f in value] if name == "files" else value
            elif key in self.null_keys:
                out[key] = None
        out.update(self.extra)
        return out

    @property
    def fingerprinted(self) -> bool:
        """Whether the description says what its files are: a fingerprint, or null for a
        relation that does not list its files (a JVM description at level 1 or 2)."""
        return self.fingerprint is not None or "fingerprint" in self.null_keys

    @property
    def plain_files(self) -> str | None:
        """Why this source's files do not hold its rows as plain files of its format (a Delta
        table's deletion vectors or column mapping, an Iceberg table's delete files), or None
        when they do: what a copy of a file read as Parquet would get wrong."""
        if self.deletion_vectors:
            return f"{self.deletion_vectors} of its files carry {self.file_deletes}"
        if self.column_mapping:
            return f"it maps columns to physical names (column mapping mode {self.column_mapping})"
        return None

    @property
    def file_deletes(self) -> str:
        """What the table format calls the deletes attached to one of its files (counted by
        ``deletion_vectors``): Iceberg's delete files, Delta's deletion vectors."""
        return "delete files" if self.table_format == "iceberg" else "deletion vectors"

    @property
    def read_format(self) -> str | None:
        """How the files are read: the table format when its own scan reads them (``"delta"``,
        which may map columns to other physical names and hide deleted rows) or their format
        (``"parquet"``: footers describe the columns by their own names), for plain files and
        for an Iceberg table, which reaches the indexes as a plain read of its snapshot's
        Parquet files."""
        return self.table_format if self.table_format in SCANNED_FORMATS else self.format

    @property
    def files_described(self) -> bool:
        """Whether the description holds its files, or null for a relation that does not list
        them."""
        return self.files is not None or "files" in self.null_keys

    def _with(self, key: str, value: Any, **changes: Any) -> "SourceDescription":
        """A copy with the attribute of JSON ``key`` set to ``value`` (None: present as null)."""
        nulls = self.null_keys | {key} if value is None else self.null_keys - {key}
        return replace(self, **{_ATTRIBUTES[key]: value}, null_keys=nulls, **changes)

    def with_files(self, files: Iterable[Iterable[Any]] | None) -> "SourceDescription":
        """A copy holding ``files`` (None: the relation does not list its files)."""
        return self._with("files", None if files is None else source_files(files))

    def with_changes(self, changes: FileChanges) -> "SourceDescription":
        """A copy knowing ``changes`` (its difference to a recorded listing) too."""
        return replace(self, changes=self.changes + (changes,))

    def changes_since(self, recorded: "SourceDescription") -> FileChanges | None:
        """How this relation's files differ from those ``recorded`` (an index's source):
        nothing when the fingerprints are equal, the difference the JVM answered when it did,
        else None (then only :attr:`files` tells)."""
        if self.fingerprint is not None and self.fingerprint == recorded.fingerprint:
            return FileChanges(recorded.listing_key or recorded.fingerprint)
        key = recorded.listing_key
        return next((c for c in self.changes if c.recorded == key), None)

    @property
    def listing_key(self) -> str | None:
        """What the files an index recorded are known by to the JVM (``PlanRewrite.changes``):
        their fingerprint, count, first and last file (the files recorded under one
        fingerprint are in one order, the JVM's sorted lines, and :class:`FileChanges` names
        deleted files by position); None when it recorded none."""
        files = self.files
        if self.fingerprint is None or not files:
            return None
        return f"{self.fingerprint}:{len(files)}:{files[0].path}:{files[-1].path}"

    def with_listing(self, listed: "SourceDescription") -> "SourceDescription":
        """A copy with what ``listed`` (a JVM description of the same relation at a higher
        level) says of the relation, keeping what this one holds beyond it (read settings)."""
        given = {name: getattr(listed, name) for name, key in _KEYS.items()
                 if getattr(listed, name) is not None or key in listed.null_keys}
        nulls = self.null_keys - {_KEYS[name] for name in given} | listed.null_keys
        return replace(self, **given, extra={**self.extra, **listed.extra}, null_keys=nulls)

    def with_read_settings(self, settings: dict[str, Any] | None) -> "SourceDescription":
        """A copy read under the session settings ``settings``."""
        return self._with("readSettings", settings)

    def with_index_facts(self, schema: list[list[Any]], read_settings: dict[str, Any],
                         spark_version: str) -> "SourceDescription":
        """A copy with what an index records beyond the JVM's description: the relation's
        output (``[name, type]`` pairs), the read settings and the Spark version."""
        return self._with("schema", schema)._with("readSettings", read_settings) \
            ._with("sparkVersion", spark_version)
