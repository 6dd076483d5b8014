"""Plan analysis for the query history: what one optimized plan reads, filters, joins and groups on.

:func:`extract_record` turns a parsed optimized plan into a :class:`rules.history.records.QueryRecord`,
without a JVM. The plan is walked by duck typing (see :class:`Plan` and :class:`PlanExpr`, which
:mod:`indexes.plan`'s ``PlanNode`` and ``Expr`` satisfy), so this package does not depend on
``indexes``.

Columns are resolved through the plan's aliases back to the file relation that produces them, so
nested-column aliases the optimizer introduces (``_extract_field2`` for ``nested.nst.field2``) are
reported as the source column. Expressions that compute a value from a column (``upper(name)``,
``sum(id)``) are reported on the column, with the computing expression's class as the predicate's
``function``.
"""
from __future__ import annotations

import hashlib
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping, Protocol, Sequence

from rules.history.records import MAX_LITERAL_BYTES, MAX_LITERALS, JoinedPair, Predicate, \
    QueryRecord, RelationUsage, source_key

__all__ = ["Plan", "PlanExpr", "RelationDescriptions", "extract_record"]


class PlanExpr(Protocol):
    """One Catalyst expression node as the analysis reads it (``indexes.plan.Expr``)."""

    cls: str                     # short class name (``EqualTo``, ``AttributeReference`` ...)
    fields: Mapping[str, Any]    # the node's non-expression JSON fields
    children: Sequence["PlanExpr"]

    @property
    def expr_id(self) -> int | None:
        """The exprId of an attribute or alias, else None."""

    def walk(self) -> Iterator["PlanExpr"]:
        """This node and its descendants, pre-order."""

    def struct_chain(self) -> tuple["PlanExpr", tuple[str, ...]] | None:
        """For a GetStructField chain ending in an attribute: (attribute, field names)."""


class Plan(Protocol):
    """One logical plan node as the analysis reads it (``indexes.plan.PlanNode``)."""

    cls: str
    fields: Mapping[str, Any]
    children: Sequence["Plan"]
    exprs: Mapping[str, Sequence[PlanExpr]]   # expression-valued fields and their trees

    def all_exprs(self) -> Iterator[PlanExpr]:
        """The expression trees of this node."""

    def file_relations(self) -> "list[Plan]":
        """The file relation leaves under this node, in pre-order."""

    def output_attributes(self) -> Sequence[PlanExpr]:
        """The output attributes of a file relation node."""


class Described(Protocol):
    """What the history reads of a relation's description: the attributes of
    :class:`indexes.description.SourceDescription` (which rules/history does not import)."""

    format: str | None
    table: str | None
    glob_path: str | None
    root_paths: Sequence[str] | None
    partition_columns: Sequence[str] | None
    options: Mapping[str, str] | None
    data_schema: str | None
    fingerprint: str | None


@dataclass(frozen=True)
class _Undescribed:
    """The description of a relation nothing was said of."""

    format: None = None
    table: None = None
    glob_path: None = None
    root_paths: None = None
    partition_columns: None = None
    options: None = None
    data_schema: None = None
    fingerprint: None = None


#: Per file relation, a pair ``(relation node, description)`` or just the description.
RelationDescriptions = Sequence["tuple[Plan, Described | None] | Described"]

_EQUALITY = {"EqualTo", "EqualNullSafe"}
_RANGE = {"LessThan", "LessThanOrEqual", "GreaterThan", "GreaterThanOrEqual"}
_STRING = {"StartsWith": "startswith", "EndsWith": "endswith", "Contains": "contains",
           "Like": "like", "ILike": "like", "RLike": "like"}
_MULTI_LIKE = {"LikeAll", "LikeAny", "NotLikeAll", "NotLikeAny"}
_SQL_TYPE = re.compile(r"[a-z_]+(\(\d+(,\s*\d+)?\))?")
#: formats whose data schema the history keeps (it is not in their files)
SCHEMA_KEPT_FORMATS = ("json", "csv", "text")
_MIRRORED = {"LessThan": "GreaterThan", "LessThanOrEqual": "GreaterThanOrEqual",
             "GreaterThan": "LessThan", "GreaterThanOrEqual": "LessThanOrEqual"}
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
    expression: str | None = None   # Spark SQL of a JSON path over the column, when tested


def _column_name(path: tuple[str, ...]) -> str:
    return ".".join(f"`{p}`" if "." in p else p for p in path)


def _strip(expr: PlanExpr) -> PlanExpr:
    while expr.cls in _TRANSPARENT and expr.children:
        expr = expr.children[0]
    return expr


def _is_column(expr: PlanExpr) -> bool:
    """Whether ``expr`` is an attribute or a struct-field chain over one."""
    return expr.cls == "AttributeReference" or (expr.cls == "GetStructField"
                                                and expr.struct_chain() is not None)


def _has_attributes(expr: PlanExpr) -> bool:
    return any(e.cls in ("AttributeReference", "OuterReference") for e in expr.walk())


def _joined_type(node: Plan) -> str:
    jt = node.fields.get("joinType")
    if isinstance(jt, dict):
        jt = jt.get("object") or jt.get("product-class") or ""
    return str(jt or "").rsplit(".", 1)[-1].rstrip("$")


class _Analysis:
    """One pass over a plan: lineage of attributes, then uses by role."""

    def __init__(self, relations: Sequence[Plan], literals: bool = True):
        self.lineage: dict[int, _Lineage] = {}
        self.predicates: list[tuple[int, str, str, str, str | None, int | None,
                                    tuple[str, ...], str | None]] = []
        self._literals = literals
        self.joins: set[Column] = set()
        self.pairs: set[tuple[Column, Column]] = set()
        self.groups: set[Column] = set()
        self.reads: set[Column] = set()
        self._relation_ids = {id(r) for r in relations}
        for i, rel in enumerate(relations):
            for attr in rel.output_attributes():
                eid = attr.expr_id
                if eid is not None:
                    self.lineage[eid] = _Lineage(frozenset({(i, (str(attr.fields.get("name")),))}),
                                                 None)

    # -- resolving expressions to source columns ----------------------------------------------

    def uses(self, expr: PlanExpr) -> Iterator[_Use]:
        """Source columns referenced by ``expr``, through struct-field chains and aliases."""
        stack = [expr]
        while stack:
            e = stack.pop()
            if e.cls == "GetStructField":
                found = e.struct_chain()
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

    def _subject_uses(self, subject: PlanExpr) -> list[_Use]:
        """Uses of the column a predicate tests; ``function`` set when it tests a computed value,
        ``expression`` when that value is a JSON path of the column (possibly cast)."""
        inner = _strip(subject)
        found = list(self.uses(inner))
        if _is_column(inner):
            return found
        path = self._json_path(subject)
        if path is not None:
            return [path]
        return [_Use(u.column, inner.cls) for u in found]

    def _json_path(self, subject: PlanExpr) -> _Use | None:
        """``get_json_object(<column>, '<path>')``, or a cast of it, as a use of the column
        named by the expression's SQL."""
        cast = subject if subject.cls == "Cast" and subject.children else None
        inner = cast.children[0] if cast is not None else subject
        if inner.cls != "GetJsonObject" or len(inner.children) != 2:
            return None
        of, path = inner.children
        if not _is_column(of) or path.cls != "Literal" or path.fields.get("value") is None:
            return None
        found = list(self.uses(of))
        if len(found) != 1 or found[0].function is not None:
            return None
        quoted = str(path.fields["value"]).replace("\\", "\\\\").replace("'", "\\'")
        sql = f"get_json_object({_column_name(found[0].column[1])}, '{quoted}')"
        if cast is not None:
            type_ = str(cast.fields.get("dataType") or "")
            if _SQL_TYPE.fullmatch(type_) is None:   # a simple type name Spark SQL reads back
                return None
            sql = f"CAST({sql} AS {type_.upper()})"
        return _Use(found[0].column, None, sql)

    def _derive(self, target_id: int | None, source: PlanExpr) -> None:
        if target_id is None:
            return
        found = list(self.uses(source))
        if not found:
            return
        if _is_column(source):
            functions = {u.function for u in found}
            function = next(iter(functions)) if len(functions) == 1 else source.cls
            self.lineage[target_id] = _Lineage(frozenset(u.column for u in found), function)
        else:
            self.lineage[target_id] = _Lineage(frozenset(u.column for u in found), source.cls)

    # -- predicates ---------------------------------------------------------------------------

    def _add(self, uses: Iterable[_Use], shape: str, op: str, count: int | None = None,
             values: Sequence[PlanExpr] | Sequence[Any] = ()) -> None:
        literals, literal_type = self._literal_values(values) if self._literals else ((), None)
        for u in uses:
            rel, path = u.column
            self.predicates.append((rel, u.expression or _column_name(path), shape, op,
                                    u.function, count, literals, literal_type))

    @staticmethod
    def _literal_values(values: Sequence[Any]) -> tuple[tuple[str, ...], str | None]:
        """The non-null literal values among ``values`` (expressions, or raw values of an
        ``InSet``), bounded, and their type."""
        out: list[str] = []
        found_type: str | None = None
        for v in values:
            if len(out) >= MAX_LITERALS:
                break
            if hasattr(v, "cls"):
                v = _strip(v)
                if v.cls != "Literal" or v.fields.get("value") is None:
                    continue
                found_type = found_type or str(v.fields.get("dataType") or "") or None
                v = v.fields.get("value")
            elif v is None:
                continue
            out.append(str(v).encode("utf-8")[:MAX_LITERAL_BYTES].decode("utf-8", "ignore"))
        return tuple(out), found_type

    def classify(self, condition: PlanExpr) -> None:
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

    def _atomic(self, e: PlanExpr) -> None:
        kids = e.children
        if (e.cls in _EQUALITY or e.cls in _RANGE) and len(kids) == 2:
            left, right = kids
            lhas, rhas = _has_attributes(left), _has_attributes(right)
            shape = "equality" if e.cls in _EQUALITY else "range"
            if lhas and not rhas:
                # the column on the right of a range reads the comparison mirrored
                self._add(self._subject_uses(left), shape, e.cls, values=[right])
                return
            if rhas and not lhas:
                self._add(self._subject_uses(right), shape, _MIRRORED.get(e.cls, e.cls),
                          values=[left])
                return
        elif e.cls in _STRING and len(kids) >= 2:
            if not any(_has_attributes(k) for k in kids[1:]):
                self._add(self._subject_uses(kids[0]), _STRING[e.cls], e.cls, values=kids[1:2])
                return
        elif e.cls in _MULTI_LIKE and kids:
            self._add(self._subject_uses(kids[0]), "like", e.cls)
            return
        elif e.cls == "In" and kids:
            values = kids[1:]
            if not any(_has_attributes(v) for v in values):
                self._add(self._subject_uses(kids[0]), "in", e.cls, len(values), values)
                return
        elif e.cls == "InSet" and kids:
            hset = e.fields.get("hset")
            members = hset if isinstance(hset, list) else []
            self._add(self._subject_uses(kids[0]), "in", e.cls,
                      len(hset) if isinstance(hset, list) else None, members)
            return
        elif e.cls in ("IsNull", "IsNotNull") and kids:
            self._add(self._subject_uses(kids[0]), e.cls.lower(), e.cls)
            return
        elif _is_column(e):
            self._add(self._subject_uses(e), "equality", e.cls)  # WHERE flag  ==  flag = true
            return
        self._add(self.uses(e), "other", e.cls)

    def _key(self, side: PlanExpr) -> list[Column]:
        """The source columns one side of an equi-join condition is (through casts and
        aliases, an alias of a cast too), none when it computes a value from them."""
        inner = _strip(side)
        if not _is_column(inner):
            return []
        return [u.column for u in self.uses(inner)
                if u.function is None or u.function in _TRANSPARENT]

    def _pairs(self, condition: PlanExpr) -> None:
        """The column pairs the equalities among a join condition's conjuncts compare."""
        stack = [condition]
        while stack:
            e = stack.pop()
            if e.cls == "And":
                stack.extend(e.children)
            elif e.cls in _EQUALITY and len(e.children) == 2:
                left, right = (self._key(c) for c in e.children)
                self.pairs.update((min(a, b), max(a, b)) for a in left for b in right
                                  if a[0] != b[0])

    # -- the walk -----------------------------------------------------------------------------

    def output_ids(self, node: Plan) -> list[int]:
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

    def visit(self, node: Plan) -> None:
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
                self._pairs(cond)
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

    def run(self, root: Plan) -> None:
        """Visits the plan bottom-up (iteratively: plans can be deep), then the root's output."""
        stack: list[tuple[Plan, bool]] = [(root, False)]
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


def _ids(exprs: Iterable[PlanExpr]) -> list[int]:
    return [e.expr_id for e in exprs if e.expr_id is not None]


def _minimal(paths: set[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Drops paths whose proper prefix is also present (reading ``a`` reads ``a.b``)."""
    return [p for p in paths if not any(p[:n] in paths for n in range(1, len(p)))]


def _pair(root: Plan, relations_with_descriptions: RelationDescriptions
          ) -> list[tuple[Plan, Described]]:
    found = root.file_relations()
    pairs: list[tuple[Plan, Described]] = []
    for i, item in enumerate(relations_with_descriptions):
        if not isinstance(item, tuple):
            if i >= len(found):
                break
            pairs.append((found[i], item))
        else:
            node, desc = item
            pairs.append((node, desc or _Undescribed()))
    return pairs


def extract_record(root: Plan, relations_with_descriptions: RelationDescriptions,
                   indexes_applied: Iterable[str] = (),
                   *, timestamp_ms: int | None = None, query_id: str | None = None,
                   served_by: Sequence[str | None] = (), literals: bool = True) -> QueryRecord:
    """The history record of one optimized plan (pure Python, no JVM).

    Args:
        root: the parsed plan (a :class:`Plan`, e.g. from :func:`indexes.plan.parse_plan`).
        relations_with_descriptions: per file relation, in the pre-order of
            ``root.file_relations()``, a pair ``(relation node, description)`` or just the
            description (then paired by position). A description is a dict with ``format``,
            ``rootPaths``, ``partitionColumns``, ``options`` and ``fingerprint`` (all optional).
        indexes_applied: names of the indexes the rewrite used for this plan.
        timestamp_ms: record time (epoch ms), default now.
        query_id: default a fresh uuid4.
        served_by: per relation, the index that served it, ``cache``, or None.
        literals: whether to keep the predicates' literals.

    Column uses are classified per relation by the exprIds of the relation's output attributes:
    conditions of ``Filter`` nodes give ``predicates``/``filter_columns`` (an ``IsNotNull`` on a
    column that has another predicate or is a join key is dropped: the optimizer infers those),
    ``Join`` conditions give ``join_columns`` (and their equalities ``join_pairs``: which column
    of which relation is compared with which), ``Aggregate`` grouping expressions give
    ``group_columns``, and every column referenced anywhere above the relation or in the plan's
    output gives ``output_columns`` (minimal: ``nested`` subsumes ``nested.nst.field1``).
    """
    pairs = _pair(root, relations_with_descriptions)
    analysis = _Analysis([node for node, _ in pairs], literals)
    analysis.run(root)

    descs = [desc for _, desc in pairs]
    roots = [[str(p) for p in (d.root_paths or [])] for d in descs]
    # a glob is one source however many directories it matches now
    keys = [str(d.glob_path) if d.glob_path else source_key(r) if r else ""
            for d, r in zip(descs, roots)]

    # Inferred IsNotNull: drop where the same column has another predicate or joins.
    constrained = {(rel, col) for rel, col, shape, *_ in analysis.predicates if shape != "isnotnull"}
    constrained |= {(rel, _column_name(path)) for rel, path in analysis.joins}
    seen: set[tuple] = set()
    predicates: list[Predicate] = []
    for key in analysis.predicates:
        rel, col, shape, op, function, count, values, value_type = key
        if shape == "isnotnull" and op == "IsNotNull" and (rel, col) in constrained:
            continue
        if key in seen or rel >= len(pairs):
            continue
        seen.add(key)
        predicates.append(Predicate(rel, keys[rel], col, shape, op, function, count,
                                    list(values), value_type))

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
            source=keys[i], root_paths=roots[i], format=str(desc.format or ""),
            fingerprint=None if desc.fingerprint is None else str(desc.fingerprint),
            partition_columns=[str(c) for c in desc.partition_columns or []],
            filter_columns=filters,
            join_columns=sorted(_column_name(p) for p in joins[i]),
            group_columns=sorted(_column_name(p) for p in groups[i]),
            output_columns=sorted(_column_name(p) for p in _minimal(reads[i])),
            served_by=served_by[i] if i < len(served_by) else None,
            options={str(k): str(v) for k, v in (desc.options or {}).items()
                     if str(k).lower() not in ("path", "paths")},
            data_schema=str(desc.data_schema) if desc.data_schema and str(
                desc.format or "").lower() in SCHEMA_KEPT_FORMATS else None,
            table=desc.table, glob_path=desc.glob_path))

    filtered = {p.relation for p in predicates if p.shape not in ("isnull", "isnotnull")}
    joined = sorted({JoinedPair(a, keys[a], _column_name(ap), a in filtered,
                                b, keys[b], _column_name(bp), b in filtered)
                     for (a, ap), (b, bp) in analysis.pairs if b < len(pairs)})

    def union(attr: str) -> list[str]:
        return sorted({c for r in relations for c in getattr(r, attr)})

    return QueryRecord(
        timestamp=int(time.time() * 1000) if timestamp_ms is None else int(timestamp_ms),
        query_id=query_id or str(uuid.uuid4()),
        sources=keys, formats=[r.format for r in relations],
        filter_columns=union("filter_columns"), output_columns=union("output_columns"),
        join_columns=union("join_columns"), group_columns=union("group_columns"),
        predicates=predicates, indexes_applied=[str(n) for n in indexes_applied],
        relations=relations, template=template_id(root, roots), join_pairs=joined,
        exploration=not (predicates or analysis.joins or analysis.groups) and all(
            {str(a.fields.get("name")) for a in node.output_attributes()}
            <= {path[0] for path in reads[i]} for i, (node, _) in enumerate(pairs)))


def template_id(root: Plan, root_paths: Sequence[Sequence[str]]) -> str:
    """16 hex digits naming the plan's shape without its literals: node and expression classes,
    attribute names, join types, literal types and the relations' root paths (in pre-order), so
    queries that differ only in the values they compare with share it (an IN list counts as one
    value, whatever its length)."""
    digest = hashlib.sha256()
    for paths in root_paths:
        digest.update(("R" + ",".join(sorted(paths)) + ";").encode("utf-8"))
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        digest.update(f"N{node.cls}:{_joined_type(node) if node.cls == 'Join' else ''};"
                      .encode("utf-8"))
        for tree in node.all_exprs():
            _shape(tree, digest)
        stack.extend(reversed(node.children))
    return digest.hexdigest()[:16]


def _shape(expr: PlanExpr, digest: Any) -> None:
    stack = [expr]
    while stack:
        e = stack.pop()
        if e.cls == "Literal":
            digest.update(f"L{e.fields.get('dataType')};".encode("utf-8"))
            continue
        if e.cls == "AttributeReference":
            digest.update(f"A{e.fields.get('name')};".encode("utf-8"))
            continue
        digest.update(f"E{e.cls};".encode("utf-8"))
        kids = e.children[:2] if e.cls == "In" else e.children
        stack.extend(reversed(kids))
