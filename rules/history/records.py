"""The query history model: one :class:`QueryRecord` per query the accelerator's rewrite hook sees.

Records are stored as Parquet under ``<system path>/_history/date=YYYY-MM-DD/`` (``timestamp``
in epoch milliseconds, ``date`` its UTC day): :mod:`rules.history.plan_analysis` extracts them
from plans, :mod:`rules.history.recorder` writes them and :mod:`rules.history.reader` reads them
back through a file-system object; ``accelerator.query.history`` reads them as a Spark
DataFrame. This module is pure Python (pyarrow only, no pyspark), so the rule engine's logic
stays testable without a JVM.

Column names are dotted paths from the relation's attribute through the struct fields accessed,
e.g. ``nested.nst.field1``; a predicate on a JSON path of a column names the expression in Spark
SQL instead (``get_json_object(payload, '$.at')``, under its cast when there is one), see
:func:`is_expression`. Sources are identified by their root paths.

Layout of a stored row (see :data:`HISTORY_SCHEMA`): flat top-level lists of strings for the common
questions ("which columns are filtered on"), plus ``relations`` (one struct per file relation of the
plan, with its own column lists) and ``predicates`` (one struct per column and predicate shape), both
lists of structs that pyarrow writes and Spark reads back as ``array<struct<...>>``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Mapping

import pyarrow as pa

#: Predicate shapes, in the order of the question "what kind of lookup could serve this?".
SHAPES: tuple[str, ...] = (
    "equality", "range", "in", "like", "startswith", "endswith", "contains",
    "isnull", "isnotnull", "other",
)

#: At most this many literals are kept per predicate, each at most this many UTF-8 bytes.
MAX_LITERALS = 16
MAX_LITERAL_BYTES = 64

#: Name of the directory partition column of the stored history (``date=YYYY-MM-DD``, UTC).
PARTITION_COLUMN = "date"

#: Sub-directory of the system path holding the history.
HISTORY_DIR = "_history"


def history_path(system_path: str) -> str:
    """``<system path>/_history``: the directory holding the history's date partitions."""
    return f"{str(system_path).rstrip('/')}/{HISTORY_DIR}"


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def epoch_millis(value: int | datetime) -> int:
    """A record time as epoch milliseconds, from epoch milliseconds (as stored) or a
    ``datetime`` (as Spark returns a TIMESTAMP column: naive in the local time zone)."""
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.astimezone()
        return (aware - _EPOCH) // timedelta(milliseconds=1)
    return int(value)


def is_expression(column: str) -> bool:
    """Whether a recorded column is an expression over a column (a JSON path such as
    ``get_json_object(payload, '$.at')``) rather than a column path."""
    return "(" in column


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:(//[^/]*)?")


def scheme_less(path: str) -> str:
    """``path`` without its scheme and authority (``hdfs://nn/lake/t`` → ``/lake/t``) and
    without a trailing slash."""
    out = _SCHEME.sub("", str(path)).rstrip("/")
    return out or "/"


def source_key(root_paths: Iterable[str]) -> str:
    """One string naming a source: its root path, or its sorted root paths joined by ``,``."""
    paths = sorted(str(p) for p in root_paths)
    return paths[0] if len(paths) == 1 else ",".join(paths)


#: the option Spark sets on a read of paths it listed itself, not to be globbed again
_GLOB_PATHS = "__globpaths__"


def is_schema_inference(format: str | None, options: Mapping[str, str] | None) -> bool:
    """Whether a relation is Spark's own read for inferring a schema: ``spark.read.json(p)`` or
    ``.csv(p)`` without a schema reads the files it listed in the ``text`` format, with the
    option ``__globPaths__`` false (no user query reads that way), before the user's query."""
    return str(format or "").lower() == "text" and any(
        str(k).lower() == _GLOB_PATHS and str(v).lower() == "false"
        for k, v in (options or {}).items())


@dataclass
class Predicate:
    """One use of a source column in a filter condition.

    ``shape`` is one of :data:`SHAPES`; ``op`` the Catalyst class of the predicate (``EqualTo``,
    ``InSet``, ``RLike``, ``Not`` ...) as the column reads it (``5 < x`` is ``x GreaterThan 5``); ``function`` the outermost expression class wrapped around
    the column when the predicate does not test the column itself (``Lower`` for an ILIKE,
    ``Length``, ``AggregateExpression`` for a HAVING on an aggregate ...), None when it does (casts
    are looked through). ``literal_count`` is the size of an ``In`` list (None when unknown, e.g.
    for ``InSet``, whose values Spark does not serialize).
    """

    relation: int
    source: str
    column: str
    shape: str
    op: str
    function: str | None = None
    literal_count: int | None = None
    literals: list[str] = field(default_factory=list)
    literal_type: str | None = None

    def to_row(self) -> dict[str, Any]:
        """A plain dict matching :data:`PREDICATE_TYPE`."""
        return {"relation": self.relation, "source": self.source, "column": self.column,
                "shape": self.shape, "op": self.op, "function": self.function,
                "literal_count": self.literal_count, "literals": list(self.literals),
                "literal_type": self.literal_type}

    @classmethod
    def from_row(cls, row: Any) -> "Predicate":
        """From a dict (or a Spark ``Row``) as written by :meth:`to_row`."""
        d = _as_dict(row)
        count = d.get("literal_count")
        return cls(relation=int(d.get("relation") or 0), source=str(d.get("source") or ""),
                   column=str(d["column"]), shape=str(d["shape"]), op=str(d.get("op") or ""),
                   function=d.get("function"),
                   literal_count=None if count is None else int(count),
                   literals=_strs(d.get("literals")), literal_type=d.get("literal_type"))


@dataclass
class RelationUsage:
    """How one file relation of the plan (pre-order position ``relations[i]``) is used, and,
    once the query ran, what reading it cost: ``files_read``, ``bytes_read`` and ``rows_read``
    from the scans' metrics (None when unknown), ``served_by`` the index that served it, or
    ``cache`` (None: read from the source). ``options`` are the read options (without paths)
    and ``data_schema`` the relation's data schema as Spark JSON (kept for the formats whose
    schema is not in the files: JSON, CSV, text), so the rule engine reads the source as the
    queries did: ``table`` the catalog table it read (qualified name), ``glob_path`` the glob
    pattern it read (qualified; ``root_paths`` are the directories it matched), else None."""

    source: str
    root_paths: list[str] = field(default_factory=list)
    format: str = ""
    fingerprint: str | None = None
    partition_columns: list[str] = field(default_factory=list)
    filter_columns: list[str] = field(default_factory=list)
    join_columns: list[str] = field(default_factory=list)
    group_columns: list[str] = field(default_factory=list)
    output_columns: list[str] = field(default_factory=list)
    served_by: str | None = None
    files_read: int | None = None
    bytes_read: int | None = None
    rows_read: int | None = None
    options: dict[str, str] = field(default_factory=dict)
    data_schema: str | None = None
    table: str | None = None
    glob_path: str | None = None

    def to_row(self) -> dict[str, Any]:
        """A plain dict matching :data:`RELATION_TYPE`."""
        return {"source": self.source, "root_paths": list(self.root_paths), "format": self.format,
                "fingerprint": self.fingerprint,
                "partition_columns": list(self.partition_columns),
                "filter_columns": list(self.filter_columns),
                "join_columns": list(self.join_columns),
                "group_columns": list(self.group_columns),
                "output_columns": list(self.output_columns), "served_by": self.served_by,
                "files_read": self.files_read, "bytes_read": self.bytes_read,
                "rows_read": self.rows_read, "options": sorted(self.options.items()),
                "data_schema": self.data_schema, "table": self.table, "glob_path": self.glob_path}

    @classmethod
    def from_row(cls, row: Any) -> "RelationUsage":
        """From a dict (or a Spark ``Row``) as written by :meth:`to_row`."""
        d = _as_dict(row)
        return cls(source=str(d.get("source") or ""), root_paths=_strs(d.get("root_paths")),
                   format=str(d.get("format") or ""), fingerprint=d.get("fingerprint"),
                   partition_columns=_strs(d.get("partition_columns")),
                   filter_columns=_strs(d.get("filter_columns")),
                   join_columns=_strs(d.get("join_columns")),
                   group_columns=_strs(d.get("group_columns")),
                   output_columns=_strs(d.get("output_columns")),
                   served_by=d.get("served_by"), files_read=_int(d.get("files_read")),
                   bytes_read=_int(d.get("bytes_read")), rows_read=_int(d.get("rows_read")),
                   options=_map(d.get("options")), data_schema=d.get("data_schema"),
                   table=d.get("table"), glob_path=d.get("glob_path"))


@dataclass(frozen=True, order=True)
class ExecutedJoin:
    """Two relations of a query (positions in ``relations``) that an executed join brought
    together, and how: ``broadcast`` (one side sent whole to every task) or ``shuffle`` (both
    sides partitioned by the keys, by an exchange or by their buckets)."""

    left: int
    right: int
    strategy: str

    def to_row(self) -> dict[str, Any]:
        """A plain dict matching :data:`EXECUTED_JOIN_TYPE`."""
        return {"left": self.left, "right": self.right, "strategy": self.strategy}

    @classmethod
    def from_row(cls, row: Any) -> "ExecutedJoin":
        """From a dict (or a Spark ``Row``) as written by :meth:`to_row`."""
        d = _as_dict(row)
        return cls(int(d["left"]), int(d["right"]), str(d["strategy"]))


@dataclass(frozen=True, order=True)
class JoinedPair:
    """Two columns an equi-join condition of a query compares (``a.x = b.y``, through casts and
    aliases): relation ``left`` (a position in ``relations``, the smaller of the two) of
    ``left_source`` joined on ``left_column`` with relation ``right`` of ``right_source`` on
    ``right_column``; ``left_filtered`` and ``right_filtered`` say whether the query filtered
    that relation too (a predicate on it other than a null test), as a star query filters its
    dimensions."""

    left: int
    left_source: str
    left_column: str
    left_filtered: bool
    right: int
    right_source: str
    right_column: str
    right_filtered: bool

    def sides(self) -> tuple[tuple[int, str, str, bool], tuple[int, str, str, bool]]:
        """``(relation, source, column, filtered)`` of each side, left first."""
        return ((self.left, self.left_source, self.left_column, self.left_filtered),
                (self.right, self.right_source, self.right_column, self.right_filtered))

    def to_row(self) -> dict[str, Any]:
        """A plain dict matching :data:`JOINED_PAIR_TYPE`."""
        return {"left": self.left, "left_source": self.left_source,
                "left_column": self.left_column, "left_filtered": self.left_filtered,
                "right": self.right, "right_source": self.right_source,
                "right_column": self.right_column, "right_filtered": self.right_filtered}

    @classmethod
    def from_row(cls, row: Any) -> "JoinedPair":
        """From a dict (or a Spark ``Row``) as written by :meth:`to_row`."""
        d = _as_dict(row)
        return cls(int(d["left"]), str(d.get("left_source") or ""), str(d["left_column"]),
                   bool(d.get("left_filtered")), int(d["right"]),
                   str(d.get("right_source") or ""), str(d["right_column"]),
                   bool(d.get("right_filtered")))


@dataclass
class QueryRecord:
    """One query seen by the rewrite hook.

    ``sources`` and ``formats`` have one entry per file relation (plan pre-order; a self-join lists
    its source twice). ``filter_columns``, ``join_columns``, ``group_columns`` and
    ``output_columns`` are the sorted distinct column paths over all relations (``output_columns``:
    every column the query reads from its sources, whatever for); ``relations`` holds the same per
    relation, ``predicates`` one entry per (relation, column, shape, op, function, literals).

    ``template`` identifies the plan's shape without its literals (queries that differ only in
    the values they look up share it); ``exploration`` marks a query that only looks at data (no
    filter, join or grouping, and every column of its relations, e.g. ``SELECT *``), which never
    counts as demand. ``duration_ms`` is the execution's wall time, None when the plan was not
    (yet) seen executing; a plan executed twice is recorded once per execution.
    ``executed_joins`` are the joins of that execution (empty before it ran). ``join_pairs``
    are the column pairs its equi-joins compare; None in a record written before the history
    kept them (its join columns are known per relation, not which pairs up with which).
    """

    timestamp: int
    query_id: str
    sources: list[str] = field(default_factory=list)
    formats: list[str] = field(default_factory=list)
    filter_columns: list[str] = field(default_factory=list)
    output_columns: list[str] = field(default_factory=list)
    join_columns: list[str] = field(default_factory=list)
    group_columns: list[str] = field(default_factory=list)
    predicates: list[Predicate] = field(default_factory=list)
    indexes_applied: list[str] = field(default_factory=list)
    relations: list[RelationUsage] = field(default_factory=list)
    template: str = ""
    exploration: bool = False
    duration_ms: int | None = None
    executed_joins: list[ExecutedJoin] = field(default_factory=list)
    join_pairs: list[JoinedPair] | None = None

    @property
    def schema_inference(self) -> bool:
        """Whether the query is Spark's own schema inference (see
        :func:`is_schema_inference`), not a user's."""
        return bool(self.relations) and all(is_schema_inference(r.format, r.options)
                                            for r in self.relations)

    def to_row(self) -> dict[str, Any]:
        """A plain dict matching :data:`HISTORY_SCHEMA` (for ``pa.Table.from_pylist``)."""
        return {"timestamp": int(self.timestamp), "query_id": self.query_id,
                "sources": list(self.sources), "formats": list(self.formats),
                "filter_columns": list(self.filter_columns),
                "output_columns": list(self.output_columns),
                "join_columns": list(self.join_columns),
                "group_columns": list(self.group_columns),
                "predicates": [p.to_row() for p in self.predicates],
                "indexes_applied": list(self.indexes_applied),
                "relations": [r.to_row() for r in self.relations],
                "template": self.template, "exploration": bool(self.exploration),
                "duration_ms": self.duration_ms,
                "executed_joins": [j.to_row() for j in self.executed_joins],
                "join_pairs": None if self.join_pairs is None
                else [p.to_row() for p in self.join_pairs]}

    @classmethod
    def from_row(cls, row: Any) -> "QueryRecord":
        """From a dict or a Spark ``Row`` (nested rows allowed); ``timestamp`` in epoch
        milliseconds or as a ``datetime``; unknown keys such as the ``date`` partition column are
        ignored, missing lists read as empty (``join_pairs`` as None: not recorded)."""
        d = _as_dict(row)
        return cls(timestamp=epoch_millis(d["timestamp"]), query_id=str(d["query_id"]),
                   sources=_strs(d.get("sources")), formats=_strs(d.get("formats")),
                   filter_columns=_strs(d.get("filter_columns")),
                   output_columns=_strs(d.get("output_columns")),
                   join_columns=_strs(d.get("join_columns")),
                   group_columns=_strs(d.get("group_columns")),
                   predicates=[Predicate.from_row(p) for p in d.get("predicates") or []],
                   indexes_applied=_strs(d.get("indexes_applied")),
                   relations=[RelationUsage.from_row(r) for r in d.get("relations") or []],
                   template=str(d.get("template") or ""),
                   exploration=bool(d.get("exploration")),
                   duration_ms=_int(d.get("duration_ms")),
                   executed_joins=[ExecutedJoin.from_row(j)
                                   for j in d.get("executed_joins") or []],
                   join_pairs=None if d.get("join_pairs") is None
                   else [JoinedPair.from_row(p) for p in d["join_pairs"]])


def _as_dict(row: Any) -> Mapping[str, Any]:
    if isinstance(row, Mapping):
        return row
    as_dict = getattr(row, "asDict", None)  # pyspark.sql.Row, without importing pyspark
    if as_dict is not None:
        return as_dict()
    raise TypeError(f"expected a mapping or a Row, got {type(row).__name__}")


def _strs(value: Any) -> list[str]:
    return [str(v) for v in value] if value else []


def _map(value: Any) -> dict[str, str]:
    """A map column as pyarrow (a list of pairs) or Spark (a dict) returns it."""
    if not value:
        return {}
    items = value.items() if isinstance(value, Mapping) else value
    return {str(k): str(v) for k, v in items}


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


_STRINGS = pa.list_(pa.string())

#: Arrow type of one element of ``predicates``.
PREDICATE_TYPE = pa.struct([
    pa.field("relation", pa.int32()),
    pa.field("source", pa.string()),
    pa.field("column", pa.string()),
    pa.field("shape", pa.string()),
    pa.field("op", pa.string()),
    pa.field("function", pa.string()),
    pa.field("literal_count", pa.int32()),
    pa.field("literals", _STRINGS),
    pa.field("literal_type", pa.string()),
])

#: Arrow type of one element of ``relations``.
RELATION_TYPE = pa.struct([
    pa.field("source", pa.string()),
    pa.field("root_paths", _STRINGS),
    pa.field("format", pa.string()),
    pa.field("fingerprint", pa.string()),
    pa.field("partition_columns", _STRINGS),
    pa.field("filter_columns", _STRINGS),
    pa.field("join_columns", _STRINGS),
    pa.field("group_columns", _STRINGS),
    pa.field("output_columns", _STRINGS),
    pa.field("served_by", pa.string()),
    pa.field("files_read", pa.int64()),
    pa.field("bytes_read", pa.int64()),
    pa.field("rows_read", pa.int64()),
    pa.field("options", pa.map_(pa.string(), pa.string())),
    pa.field("data_schema", pa.string()),
    pa.field("table", pa.string()),
    pa.field("glob_path", pa.string()),
])

#: Arrow type of one element of ``executed_joins``.
EXECUTED_JOIN_TYPE = pa.struct([
    pa.field("left", pa.int32()),
    pa.field("right", pa.int32()),
    pa.field("strategy", pa.string()),
])

#: Arrow type of one element of ``join_pairs``.
JOINED_PAIR_TYPE = pa.struct([
    pa.field("left", pa.int32()),
    pa.field("left_source", pa.string()),
    pa.field("left_column", pa.string()),
    pa.field("left_filtered", pa.bool_()),
    pa.field("right", pa.int32()),
    pa.field("right_source", pa.string()),
    pa.field("right_column", pa.string()),
    pa.field("right_filtered", pa.bool_()),
])

#: Schema of the history Parquet files (the ``date`` partition lives in the directory name).
HISTORY_SCHEMA = pa.schema([
    pa.field("timestamp", pa.int64(), nullable=False),
    pa.field("query_id", pa.string(), nullable=False),
    pa.field("sources", _STRINGS),
    pa.field("formats", _STRINGS),
    pa.field("filter_columns", _STRINGS),
    pa.field("output_columns", _STRINGS),
    pa.field("join_columns", _STRINGS),
    pa.field("group_columns", _STRINGS),
    pa.field("predicates", pa.list_(PREDICATE_TYPE)),
    pa.field("indexes_applied", _STRINGS),
    pa.field("relations", pa.list_(RELATION_TYPE)),
    pa.field("template", pa.string()),
    pa.field("exploration", pa.bool_()),
    pa.field("duration_ms", pa.int64()),
    pa.field("executed_joins", pa.list_(EXECUTED_JOIN_TYPE)),
    pa.field("join_pairs", pa.list_(JOINED_PAIR_TYPE)),   # null in files written before it
])


def _ddl_type(t: pa.DataType) -> str:
    if pa.types.is_int64(t):
        return "BIGINT"
    if pa.types.is_int32(t):
        return "INT"
    if pa.types.is_string(t):
        return "STRING"
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    if pa.types.is_float64(t):
        return "DOUBLE"
    if pa.types.is_map(t):
        return f"MAP<{_ddl_type(t.key_type)}, {_ddl_type(t.item_type)}>"
    if pa.types.is_list(t):
        return f"ARRAY<{_ddl_type(t.value_type)}>"
    if pa.types.is_struct(t):
        inner = ", ".join(f"`{t.field(i).name}`: {_ddl_type(t.field(i).type)}"
                          for i in range(t.num_fields))
        return f"STRUCT<{inner}>"
    raise TypeError(f"no Spark DDL for arrow type {t}")


def spark_ddl(schema: pa.Schema = HISTORY_SCHEMA, partition_column: str | None = PARTITION_COLUMN) -> str:
    """Spark DDL string for ``schema`` (e.g. for ``spark.read.schema(...)``), with the ``date``
    partition column appended as ``DATE`` unless ``partition_column`` is None."""
    cols = [f"`{f.name}` {_ddl_type(f.type)}" for f in schema]
    if partition_column:
        cols.append(f"`{partition_column}` DATE")
    return ", ".join(cols)
