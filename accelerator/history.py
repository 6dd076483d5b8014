"""Query history: what each plan seen by the rewrite hook reads, filters and joins on.

:func:`extract_record` turns a parsed optimized plan (:mod:`indexes.plan`) into a
:class:`rules.history.QueryRecord` without touching the JVM. :class:`HistoryRecorder` buffers records
in memory and writes them as Parquet files under ``<system path>/_history/date=YYYY-MM-DD/`` from a
background thread, so recording costs a query one list append. :func:`read_history` reads them back
for mining.

Columns are resolved through the plan's aliases back to the file relation that produces them, so
nested-column aliases the optimizer introduces (``_extract_field2`` for ``nested.nst.field2``) are
reported as the source column. Expressions that compute a value from a column (``upper(name)``,
``sum(id)``) are reported on the column, with the computing expression's class as the predicate's
``function``.
"""
from __future__ import annotations

import atexit
import io
import logging
import threading
import time
import uuid
import weakref
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterable, Iterator, Mapping, Sequence

from indexes.plan import Expr, PlanNode, chain, file_relations, output_attributes
from rules.history import (
    HISTORY_DIR, HISTORY_SCHEMA, Predicate, QueryRecord, RelationUsage, source_key, spark_ddl,
)

log = logging.getLogger("accelerator.history")

__all__ = ["extract_record", "HistoryRecorder", "read_history", "history_path"]

# --------------------------------------------------------------------------------------------
# Plan analysis
# --------------------------------------------------------------------------------------------

_EQUALITY = {"EqualTo", "EqualNullSafe"}
_RANGE = {"LessThan", "LessThanOrEqual", "GreaterThan", "GreaterThanOrEqual"}
_STRING = {"StartsWith": "startswith", "EndsWith": "endswith", "Contains": "contains",
           "Like": "like", "ILike": "like", "RLike": "like"}
_MULTI_LIKE = {"LikeAll", "LikeAny", "NotLikeAll", "NotLikeAny"}
_TRANSPARENT = {"Cast"}  # looked through when deciding whether a predicate tests the column itself
_SEMI_JOINS = ("LeftSemi", "LeftAnti")

Column = tuple[int, tuple[str, ...]]  # (relation index, attribute name + struct path)


@dataclass(frozen=True)
class _Lineage:
    """Source columns behind one attribute; ``function`` is None when the attribute *is* the
    column (possibly a struct field of it), else the class of the expression computing it."""

    columns: frozenset[Column]
    function: str | None


@dataclass(frozen=True)
class _Use:
    column: Column
    function: str | None


def _column_name(path: tuple[str, ...]) -> str:
    return ".".join(f"`{p}`" if "." in p else p for p in path)


def _strip(expr: Expr) -> Expr:
    while expr.cls in _TRANSPARENT and expr.children:
        expr = expr.children[0]
    return expr


def _has_attributes(expr: Expr) -> bool:
    return any(e.cls in ("AttributeReference", "OuterReference") for e in expr.walk())


def _joined_type(node: PlanNode) -> str:
    jt = node.fields.get("joinType")
    if isinstance(jt, dict):
        jt = jt.get("object") or jt.get("product-class") or ""
    return str(jt or "").rsplit(".", 1)[-1].rstrip("$")


class _Analysis:
    """One pass over a plan: lineage of attributes, then uses by role."""

    def __init__(self, relations: Sequence[PlanNode]):
        self.lineage: dict[int, _Lineage] = {}
        self.predicates: list[tuple[int, str, str, str, str | None, int | None]] = []
        self.joins: set[Column] = set()
        self.groups: set[Column] = set()
        self.reads: set[Column] = set()
        self._relation_ids = {id(r) for r in relations}
        for i, rel in enumerate(relations):
            for attr in output_attributes(rel):
                eid = attr.expr_id
                if eid is not None:
                    self.lineage[eid] = _Lineage(frozenset({(i, (str(attr.fields.get("name")),))}),
                                                 None)

    # -- resolving expressions to source columns ----------------------------------------------

    def uses(self, expr: Expr) -> Iterator[_Use]:
        """Source columns referenced by ``expr``, through struct-field chains and aliases."""
        stack = [expr]
        while stack:
            e = stack.pop()
            if e.cls == "GetStructField":
                found = chain(e)
                if found is not None:
                    attr, path = found
                    lin = self.lineage.get(attr.expr_id) if attr.expr_id is not None else None
                    if lin is not None:
                        for rel, base in lin.columns:
                            if lin.function is None:
                                yield _Use((rel, base + path), None)
                            else:
                                yield _Use((rel, base), lin.function)
                    continue
            if e.cls == "AttributeReference":
                lin = self.lineage.get(e.expr_id) if e.expr_id is not None else None
                if lin is not None:
                    for col in lin.columns:
                        yield _Use(col, lin.function)
                continue
            stack.extend(reversed(e.children))

    def _subject_uses(self, subject: Expr) -> list[_Use]:
        """Uses of the column a predicate tests; ``function`` set when it tests a computed value."""
        inner = _strip(subject)
        direct = inner.cls == "AttributeReference" or (inner.cls == "GetStructField"
                                                        and chain(inner) is not None)
        found = list(self.uses(inner))
        if direct:
            return found
        return [_Use(u.column, inner.cls) for u in found]

    def _derive(self, target_id: int | None, source: Expr) -> None:
        if target_id is None:
            return
        inner = source
        direct = inner.cls == "AttributeReference" or (inner.cls == "GetStructField"
                                                        and chain(inner) is not None)
        found = list(self.uses(inner))
        if not found:
            return
        if direct:
            functions = {u.function for u in found}
            function = next(iter(functions)) if len(functions) == 1 else inner.cls
            self.lineage[target_id] = _Lineage(frozenset(u.column for u in found), function)
        else:
            self.lineage[target_id] = _Lineage(frozenset(u.column for u in found), inner.cls)

    # -- predicates ---------------------------------------------------------------------------

    def _add(self, uses: Iterable[_Use], shape: str, op: str, count: int | None = None) -> None:
        for u in uses:
            rel, path = u.column
            self.predicates.append((rel, _column_name(path), shape, op, u.function, count))

    def classify(self, condition: Expr) -> None:
        """Records one predicate per column use in a filter condition."""
        stack = [condition]
        while stack:
            e = stack.pop()
            if e.cls in ("And", "Or"):
                stack.extend(reversed(e.children))
            elif e.cls == "Not" and e.children:
                child = e.children[0]
                if child.cls == "IsNull" and child.children:
                    self._add(self._subject_uses(child.children[0]), "isnotnull", "Not")
                elif child.cls == "IsNotNull" and child.children:
                    self._add(self._subject_uses(child.children[0]), "isnull", "Not")
                else:
                    self._add(self.uses(child), "other", "Not")
            else:
                self._atomic(e)

    def _atomic(self, e: Expr) -> None:
        kids = e.children
        if (e.cls in _EQUALITY or e.cls in _RANGE) and len(kids) == 2:
            left, right = kids
            lhas, rhas = _has_attributes(left), _has_attributes(right)
            shape = "equality" if e.cls in _EQUALITY else "range"
            if lhas and not rhas:
                self._add(self._subject_uses(left), shape, e.cls)
                return
            if rhas and not lhas:
                self._add(self._subject_uses(right), shape, e.cls)
                return
        elif e.cls in _STRING and len(kids) >= 2:
            if not any(_has_attributes(k) for k in kids[1:]):
                self._add(self._subject_uses(kids[0]), _STRING[e.cls], e.cls)
                return
        elif e.cls in _MULTI_LIKE and kids:
            self._add(self._subject_uses(kids[0]), "like", e.cls)
            return
        elif e.cls == "In" and kids:
            values = kids[1:]
            if not any(_has_attributes(v) for v in values):
                self._add(self._subject_uses(kids[0]), "in", e.cls, len(values))
                return
        elif e.cls == "InSet" and kids:
            hset = e.fields.get("hset")
            count = len(hset) if isinstance(hset, list) else None
            self._add(self._subject_uses(kids[0]), "in", e.cls, count)
            return
        elif e.cls in ("IsNull", "IsNotNull") and kids:
            self._add(self._subject_uses(kids[0]), e.cls.lower(), e.cls)
            return
        elif e.cls == "AttributeReference" or (e.cls == "GetStructField" and chain(e) is not None):
            self._add(self._subject_uses(e), "equality", e.cls)  # WHERE flag  ==  flag = true
            return
        self._add(self.uses(e), "other", e.cls)

    # -- the walk -----------------------------------------------------------------------------

    def output_ids(self, node: PlanNode) -> list[int]:
        """ExprIds of a plan node's output attributes (best effort, for the nodes that matter)."""
        while True:
            cls = node.cls
            if cls == "Project":
                return _ids(node.exprs.get("projectList", []))
            if cls == "Aggregate":
                return _ids(node.exprs.get("aggregateExpressions", []))
            if "output" in node.exprs:
                return _ids(node.exprs["output"])
            if cls == "Join" and len(node.children) == 2:
                left = self.output_ids(node.children[0])
                if _joined_type(node) in _SEMI_JOINS:
                    return left
                return left + self.output_ids(node.children[1])
            if cls == "Window" and node.children:
                return (self.output_ids(node.children[0])
                        + _ids(node.exprs.get("windowExpressions", [])))
            if cls == "Generate" and node.children:
                return (self.output_ids(node.children[0])
                        + _ids(node.exprs.get("generatorOutput", [])))
            if not node.children:
                return []
            if cls == "Union" or len(node.children) == 1:
                node = node.children[0]
                continue
            return [i for c in node.children for i in self.output_ids(c)]

    def visit(self, node: PlanNode) -> None:
        """Called once per node, children first."""
        if id(node) in self._relation_ids or node.cls == "LogicalRelation":
            return
        for tree in node.all_exprs():
            for u in self.uses(tree):
                self.reads.add(u.column)
        if node.cls == "Filter":
            for cond in node.exprs.get("condition", []):
                self.classify(cond)
        elif node.cls == "Join":
            for cond in node.exprs.get("condition", []):
                self.joins.update(u.column for u in self.uses(cond))
        elif node.cls == "Aggregate":
            for g in node.exprs.get("groupingExpressions", []):
                self.groups.update(u.column for u in self.uses(g))
        # new attributes: aliases, generator output, expand output, union output
        for tree in node.all_exprs():
            for e in tree.walk():
                if e.cls == "Alias" and e.children:
                    self._derive(e.expr_id, e.children[0])
        if node.cls == "Generate":
            generator = node.exprs.get("generator", [])
            for attr in node.exprs.get("generatorOutput", []):
                for g in generator:
                    self._derive(attr.expr_id, g)
        elif node.cls == "Expand":
            out = node.exprs.get("output", [])
            if out:
                merged: dict[int, set[Column]] = {}
                for j, tree in enumerate(node.exprs.get("projections", [])):
                    merged.setdefault(j % len(out), set()).update(u.column for u in self.uses(tree))
                for k, attr in enumerate(out):
                    if attr.expr_id is not None and merged.get(k):
                        self.lineage[attr.expr_id] = _Lineage(frozenset(merged[k]), None)
        elif node.cls == "Union" and len(node.children) > 1:
            outputs = [self.output_ids(c) for c in node.children]
            for k, eid in enumerate(outputs[0]):
                cols: set[Column] = set()
                functions: set[str | None] = set()
                for out in outputs:
                    lin = self.lineage.get(out[k]) if k < len(out) else None
                    if lin is not None:
                        cols.update(lin.columns)
                        functions.add(lin.function)
                if cols:
                    function = next(iter(functions)) if len(functions) == 1 else "Union"
                    self.lineage[eid] = _Lineage(frozenset(cols), function)

    def run(self, root: PlanNode) -> None:
        """Visits the plan bottom-up (iteratively: plans can be deep), then the root's output."""
        stack: list[tuple[PlanNode, bool]] = [(root, False)]
        while stack:
            node, done = stack.pop()
            if done:
                self.visit(node)
                continue
            stack.append((node, True))
            for child in reversed(node.children):
                stack.append((child, False))
        for eid in self.output_ids(root):
            lin = self.lineage.get(eid)
            if lin is not None:
                self.reads.update(lin.columns)


def _ids(exprs: Iterable[Expr]) -> list[int]:
    return [e.expr_id for e in exprs if e.expr_id is not None]


def _minimal(paths: set[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Drops paths whose proper prefix is also present (reading ``a`` reads ``a.b``)."""
    return [p for p in paths if not any(p[:n] in paths for n in range(1, len(p)))]


def _pair(root: PlanNode,
          relations_with_descriptions: Sequence[tuple[PlanNode, Mapping[str, Any]] | Mapping[str, Any]]
          ) -> list[tuple[PlanNode, Mapping[str, Any]]]:
    found = file_relations(root)
    pairs: list[tuple[PlanNode, Mapping[str, Any]]] = []
    for i, item in enumerate(relations_with_descriptions):
        if isinstance(item, Mapping):
            if i >= len(found):
                break
            pairs.append((found[i], item))
        else:
            node, desc = item
            pairs.append((node, desc or {}))
    return pairs


def extract_record(root: PlanNode,
                   relations_with_descriptions: Sequence[tuple[PlanNode, Mapping[str, Any]]
                                                         | Mapping[str, Any]],
                   indexes_applied: Iterable[str] = (),
                   *, timestamp_ms: int | None = None, query_id: str | None = None) -> QueryRecord:
    """The history record of one optimized plan (pure Python, no JVM).

    Args:
        root: the parsed plan (:func:`indexes.plan.parse_plan`).
        relations_with_descriptions: per file relation, in the pre-order of
            :func:`indexes.plan.file_relations`, a pair ``(relation node, description)`` or just the
            description (then paired by position). A description is a dict with ``format``,
            ``rootPaths``, ``partitionColumns``, ``options`` and ``fingerprint`` (all optional).
        indexes_applied: names of the indexes the rewrite used for this plan.
        timestamp_ms: record time (epoch ms), default now.
        query_id: default a fresh uuid4.

    Column uses are classified per relation by the exprIds of the relation's output attributes:
    conditions of ``Filter`` nodes give ``predicates``/``filter_columns`` (an ``IsNotNull`` on a
    column that has another predicate or is a join key is dropped: the optimizer infers those),
    ``Join`` conditions give ``join_columns``, ``Aggregate`` grouping expressions give
    ``group_columns``, and every column referenced anywhere above the relation or in the plan's
    output gives ``output_columns`` (minimal: ``nested`` subsumes ``nested.nst.field1``).
    """
    pairs = _pair(root, relations_with_descriptions)
    analysis = _Analysis([node for node, _ in pairs])
    analysis.run(root)

    descs = [desc for _, desc in pairs]
    roots = [[str(p) for p in (d.get("rootPaths") or [])] for d in descs]
    keys = [source_key(r) if r else "" for r in roots]

    # Inferred IsNotNull: drop where the same column has another predicate or joins.
    constrained = {(rel, col) for rel, col, shape, *_ in analysis.predicates if shape != "isnotnull"}
    constrained |= {(rel, _column_name(path)) for rel, path in analysis.joins}
    seen: set[tuple] = set()
    predicates: list[Predicate] = []
    for rel, col, shape, op, function, count in analysis.predicates:
        if shape == "isnotnull" and op == "IsNotNull" and (rel, col) in constrained:
            continue
        key = (rel, col, shape, op, function, count)
        if key in seen or rel >= len(pairs):
            continue
        seen.add(key)
        predicates.append(Predicate(rel, keys[rel], col, shape, op, function, count))

    def per_relation(cols: Iterable[Column]) -> list[set[tuple[str, ...]]]:
        out: list[set[tuple[str, ...]]] = [set() for _ in pairs]
        for rel, path in cols:
            if rel < len(out):
                out[rel].add(path)
        return out

    joins, groups, reads = (per_relation(analysis.joins), per_relation(analysis.groups),
                            per_relation(analysis.reads))
    relations: list[RelationUsage] = []
    for i, desc in enumerate(descs):
        filters = sorted({p.column for p in predicates if p.relation == i})
        relations.append(RelationUsage(
            source=keys[i], root_paths=roots[i], format=str(desc.get("format") or ""),
            fingerprint=None if desc.get("fingerprint") is None else str(desc.get("fingerprint")),
            partition_columns=[str(c) for c in desc.get("partitionColumns") or []],
            filter_columns=filters,
            join_columns=sorted(_column_name(p) for p in joins[i]),
            group_columns=sorted(_column_name(p) for p in groups[i]),
            output_columns=sorted(_column_name(p) for p in _minimal(reads[i]))))

    def union(attr: str) -> list[str]:
        return sorted({c for r in relations for c in getattr(r, attr)})

    return QueryRecord(
        timestamp=int(time.time() * 1000) if timestamp_ms is None else int(timestamp_ms),
        query_id=query_id or str(uuid.uuid4()),
        sources=keys, formats=[r.format for r in relations],
        filter_columns=union("filter_columns"), output_columns=union("output_columns"),
        join_columns=union("join_columns"), group_columns=union("group_columns"),
        predicates=predicates, indexes_applied=[str(n) for n in indexes_applied],
        relations=relations)


# --------------------------------------------------------------------------------------------
# Recording
# --------------------------------------------------------------------------------------------

_OVERFLOW_FACTOR = 8  # records kept while the writer lags, in multiples of max_buffer
_CLOSE_WAIT_S = 30.0
_live: "weakref.WeakSet[HistoryRecorder]" = weakref.WeakSet()
_atexit_registered = False
_atexit_lock = threading.Lock()


def _close_all() -> None:
    for recorder in list(_live):
        recorder.close()


def _register_atexit() -> None:
    # Registered when the first recorder is made (after the SparkSession exists), so it runs
    # before pyspark's own exit handlers and the JVM is still reachable for the last flush.
    global _atexit_registered
    with _atexit_lock:
        if not _atexit_registered:
            atexit.register(_close_all)
            _atexit_registered = True


def history_path(system_path: str) -> str:
    """``<system path>/_history``."""
    return f"{str(system_path).rstrip('/')}/{HISTORY_DIR}"


def _utc_date(timestamp_ms: int) -> str:
    return datetime.fromtimestamp(timestamp_ms / 1000.0, tz=timezone.utc).date().isoformat()


class HistoryRecorder:
    """Buffers :class:`QueryRecord` objects and writes them to ``<system path>/_history/``.

    ``record`` is O(1) and never raises or calls the JVM. A daemon thread writes the buffer as
    one Parquet file per UTC date (``date=YYYY-MM-DD/part-<epoch ms>-<uuid8>.parquet``) when it
    holds ``max_buffer`` records, every ``flush_interval_s`` seconds, and at :meth:`close` or
    interpreter exit. Files are written under a hidden temporary name and renamed into place
    when ``fs`` has a ``rename`` method, so readers never see a partial file. A failed write is
    logged on ``accelerator.history`` and its records are dropped.

    Args:
        fs: an :class:`indexes.fs.HadoopFs` (anything with ``write_bytes(path, data)``; optional
            ``rename(src, dst) -> bool`` and ``delete(path, recursive)``).
        system_path: the accelerator system path.
        max_buffer: records that trigger a write.
        flush_interval_s: longest time a record waits in memory (about).
    """

    def __init__(self, fs: Any, system_path: str, max_buffer: int = 256,
                 flush_interval_s: float = 30.0):
        self._fs = fs
        self._dir = history_path(system_path)
        self._max = max(1, int(max_buffer))
        self._interval = max(0.01, float(flush_interval_s))
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._wake = threading.Event()
        self._buffer: list[QueryRecord] = []
        self._thread: threading.Thread | None = None
        self._closed = False
        self._dropped = 0
        self._written = 0
        _live.add(self)
        _register_atexit()

    @property
    def path(self) -> str:
        """The history directory written to."""
        return self._dir

    @property
    def pending(self) -> int:
        """Records buffered and not yet written."""
        return len(self._buffer)

    @property
    def written(self) -> int:
        """Records written so far."""
        return self._written

    @property
    def dropped(self) -> int:
        """Records lost: failed writes, buffer overflow, or recorded after :meth:`close`."""
        return self._dropped

    def record(self, rec: QueryRecord) -> None:
        """Buffers one record. O(1), no JVM call, never raises."""
        try:
            wake = False
            with self._lock:
                if self._closed or len(self._buffer) >= self._max * _OVERFLOW_FACTOR:
                    self._dropped += 1
                    return
                self._buffer.append(rec)
                wake = len(self._buffer) >= self._max
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, daemon=True,
                                                    name="accelerator-history")
                    self._thread.start()
            if wake:
                self._wake.set()
        except Exception:  # noqa: BLE001 - recording must never fail a query
            log.debug("could not buffer a history record", exc_info=True)

    def record_plan(self, root: PlanNode,
                    relations_with_descriptions: Sequence[tuple[PlanNode, Mapping[str, Any]]
                                                          | Mapping[str, Any]],
                    indexes_applied: Iterable[str] = ()) -> QueryRecord | None:
        """:func:`extract_record` then :meth:`record`; never raises (None when extraction fails)."""
        try:
            rec = extract_record(root, relations_with_descriptions, indexes_applied)
        except Exception:  # noqa: BLE001
            log.debug("could not extract a history record", exc_info=True)
            return None
        self.record(rec)
        return rec

    def _run(self) -> None:
        while True:
            self._wake.wait(self._interval)
            self._wake.clear()
            if self._closed:
                return
            self.flush()

    def flush(self) -> int:
        """Writes every buffered record now; returns how many were written. Never raises."""
        return self._flush(None)

    def _flush(self, wait_s: float | None) -> int:
        if not self._flush_lock.acquire(timeout=-1 if wait_s is None else wait_s):
            log.warning("history flush skipped: a previous write to %s is still running", self._dir)
            return 0
        try:
            with self._lock:
                batch, self._buffer = self._buffer, []
            if not batch:
                return 0
            by_date: dict[str, list[QueryRecord]] = {}
            for rec in batch:
                try:
                    day = _utc_date(int(rec.timestamp))
                except Exception:  # noqa: BLE001
                    self._dropped += 1
                    log.warning("history record without a valid timestamp dropped", exc_info=True)
                    continue
                by_date.setdefault(day, []).append(rec)
            written = 0
            for day, recs in sorted(by_date.items()):
                try:
                    written += self._write(day, recs)
                except Exception:  # noqa: BLE001 - never raised into a query
                    self._dropped += len(recs)
                    log.warning("could not write %d history records to %s; dropped", len(recs),
                                self._dir, exc_info=True)
            self._written += written
            return written
        except Exception:  # noqa: BLE001
            log.warning("history flush failed", exc_info=True)
            return 0
        finally:
            self._flush_lock.release()

    def _table(self, recs: list[QueryRecord]) -> Any:
        import pyarrow as pa
        try:
            return pa.Table.from_pylist([r.to_row() for r in recs], schema=HISTORY_SCHEMA)
        except Exception:  # noqa: BLE001 - one bad record must not lose the others
            rows = []
            for r in recs:
                try:
                    row = r.to_row()
                    pa.Table.from_pylist([row], schema=HISTORY_SCHEMA)
                    rows.append(row)
                except Exception:  # noqa: BLE001
                    self._dropped += 1
                    log.warning("malformed history record dropped: %r", r, exc_info=True)
            return pa.Table.from_pylist(rows, schema=HISTORY_SCHEMA)

    def _write(self, day: str, recs: list[QueryRecord]) -> int:
        import pyarrow.parquet as pq
        table = self._table(recs)
        if table.num_rows == 0:
            return 0
        sink = io.BytesIO()
        pq.write_table(table, sink, compression="snappy")
        data = sink.getvalue()
        name = f"part-{int(time.time() * 1000)}-{uuid.uuid4().hex[:8]}.parquet"
        folder = f"{self._dir}/date={day}"
        final = f"{folder}/{name}"
        rename = getattr(self._fs, "rename", None)
        if rename is None:
            self._fs.write_bytes(final, data)
            return table.num_rows
        tmp = f"{folder}/.{name}.tmp"  # hidden from Spark's file listing until renamed
        self._fs.write_bytes(tmp, data)
        if not rename(tmp, final):
            delete = getattr(self._fs, "delete", None)
            if delete is not None:
                try:
                    delete(tmp, False)
                except Exception:  # noqa: BLE001
                    pass
            raise OSError(f"could not rename {tmp} to {final}")
        return table.num_rows

    def close(self) -> None:
        """Stops the writer thread and writes what is buffered. Idempotent, never raises."""
        try:
            with self._lock:
                if self._closed:
                    return
                self._closed = True
            self._wake.set()
            self._flush(_CLOSE_WAIT_S)
            thread = self._thread
            if thread is not None and thread is not threading.current_thread():
                thread.join(timeout=_CLOSE_WAIT_S)
        except Exception:  # noqa: BLE001
            log.warning("history recorder close failed", exc_info=True)
        finally:
            _live.discard(self)

    def __enter__(self) -> "HistoryRecorder":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------

def read_history(spark: Any, system_path: str) -> Any:
    """All recorded queries as a DataFrame: the columns of :data:`rules.history.HISTORY_SCHEMA`
    plus ``date`` (DATE, UTC day of the record). Empty, with that schema, when nothing was written.
    Unreadable files (e.g. left by a crashed writer) are skipped."""
    from indexes.fs import HadoopFs
    from pyspark.errors import AnalysisException

    schema = spark_ddl()
    path = history_path(system_path)
    if not HadoopFs(spark).exists(path):
        return spark.createDataFrame([], schema)
    try:
        return (spark.read.schema(schema).option("ignoreCorruptFiles", "true")
                .parquet(path))
    except AnalysisException as exc:  # e.g. the directory vanished meanwhile
        log.debug("no readable history under %s: %s", path, exc)
        return spark.createDataFrame([], schema)
