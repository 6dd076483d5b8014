"""Dynamic file pruning, the plan's side: the joins above a file relation through which its
files may be pruned by the keys of the join's other side, found without a JVM.

A relation's rows reach a join's output only with a key equal to one of the other side's
(never with a null key: equi-joins compare with ``=``). So when every row of the relation that
matters must match there, a file holding none of the other side's keys can be skipped. That
holds when:

- the join is inner or left semi (the relation on either side of an inner join, the left of a
  semi join), or an outer join whose other side is preserved (the right of a left outer join,
  the left of a right outer join). The preserved side of an outer join, either side of a full
  outer join and anti joins are never pruned;
- between the relation and the join there are only Projects, Filters and joins the relation's
  rows go through unchanged (a side that is never null-extended);
- the other side is repeatable: run on its own, it gives the rows the join reads;
- the condition holds ``fact = other`` among its conjuncts, ``fact`` over the relation's own
  columns (the Projects' aliases on the way replaced by what they stand for), ``other`` a
  column of the other side (or a cast of one) of a type whose values compare exactly and come
  back from the keys' query as they are (integers, decimals, dates, strings without collation,
  booleans; timestamps, which that query reads as microseconds since the epoch, so the
  session's time zone never shifts them).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from indexes.plan import Expr, PlanNode, conjuncts, output_attributes

#: per join type, the sides (0 left, 1 right) whose rows must match the other side's keys
PRUNABLE_SIDES = {"Inner": (0, 1), "LeftSemi": (0,), "LeftOuter": (1,), "RightOuter": (0,)}
#: per join type, the sides whose rows reach the join's output unchanged (never null-extended)
PASSING_SIDES = {"Inner": (0, 1), "LeftSemi": (0,), "LeftAnti": (0,), "LeftOuter": (0,),
                 "RightOuter": (1,)}
#: nodes a relation's rows pass on the way to a join, each row alone
ROW_NODES = ("Project", "Filter")
#: the nodes of an other side whose rows a second run gives again (no Limit, Sample ...)
REPEATABLE_NODES = frozenset({
    "Project", "Filter", "Join", "Aggregate", "LogicalRelation", "LocalRelation", "Range",
    "Union", "Intersect", "Except", "Deduplicate", "Distinct", "SubqueryAlias", "Sort",
    "Window", "Expand", "Generate", "Repartition", "RepartitionByExpression",
    "RebalancePartitions", "ResolvedHint", "HiveTableRelation", "DataSourceV2Relation",
    "DataSourceV2ScanRelation", "InMemoryRelation", "LogicalRDD"})
#: parts of the names of expressions whose values a second run may not give again
UNREPEATABLE_EXPRESSIONS = ("Rand", "Uniform", "Uuid", "Shuffle", "MonotonicallyIncreasingID",
                            "SparkPartitionID", "InputFile", "UDF", "UDTF", "Subquery",
                            "Exists", "ListQuery")
#: the leaves of an other side whose rows are known from the plan and the files it reads
SHAPED_LEAVES = frozenset({"LogicalRelation", "Range", "OneRowRelation"})
#: the types of join keys whose values the other side's query returns exactly as compared
#: (and any ``decimal(p,s)``)
KEY_TYPES = ("byte", "short", "integer", "long", "string", "date", "boolean", "timestamp",
             "timestamp_ntz")


@dataclass(frozen=True)
class JoinProbe:
    """A join through which a relation may be pruned: the relation's key expression ``fact``,
    the other side's ``other`` (a column, or a cast of one, of type ``type``), and the other
    side's node as the child indexes leading to it from the plan's root (``path``)."""

    join_type: str
    fact: Expr
    other: Expr
    type: str
    path: tuple[int, ...]
    text: str            # the equality as explain shows it, e.g. ``ss_sold_date_sk = d_date_sk``

    @property
    def other_column(self) -> Expr:
        """The other side's column the key is (or is a cast of)."""
        return self.other if self.other.cls == "AttributeReference" else self.other.children[0]

    def describe(self) -> str:
        """The join as explain names it."""
        return f"{self.join_type} join on {self.text}"


def join_type(node: PlanNode) -> str:
    """The short name of a Join node's type (``Inner``, ``LeftOuter``, ``ExistenceJoin`` ...)."""
    jt = node.fields.get("joinType")
    if isinstance(jt, dict):
        jt = jt.get("object") or jt.get("product-class") or ""
    return str(jt or "").rsplit(".", 1)[-1].rstrip("$")


def probes(root: PlanNode, relation: PlanNode) -> list[JoinProbe]:
    """The joins above ``relation`` (a LogicalRelation of the plan ``root``) that may prune
    its files, nearest first, one probe per usable equality."""
    ids = {a.expr_id for a in output_attributes(relation)}
    defined: dict[int, Expr] = {}     # the Projects' aliases, over the relation's columns
    out: list[JoinProbe] = []
    node, parent = relation, relation.parent
    while parent is not None and (parent.cls in ROW_NODES or parent.cls == "Join"):
        for alias in (e for e in parent.exprs.get("projectList", []) if e.cls == "Alias"):
            defined[alias.expr_id] = _substituted(alias.children[0], defined)
        if parent.cls == "Join":
            side = _child_index(parent, node)
            kind = join_type(parent)
            other = parent.children[1 - side]
            if side in PRUNABLE_SIDES.get(kind, ()) and repeatable(other):
                found = (_probe(kind, e, ids, defined, other, root) for e in _equalities(parent))
                out.extend(p for p in found if p is not None)
            if side not in PASSING_SIDES.get(kind, ()):
                break
        node, parent = parent, parent.parent
    return out


def repeatable(side: PlanNode) -> bool:
    """Whether a query of the plan ``side`` run on its own gives the rows the join reads: no
    node or expression whose result may change from one run to the next (a limit without
    order, a sample, random numbers, user functions, subqueries: all refused)."""
    return all(n.cls in REPEATABLE_NODES
               and not any(part in e.cls for tree in n.all_exprs() for e in tree.walk()
                           for part in UNREPEATABLE_EXPRESSIONS)
               for n in side.walk())


def side_shape(side: PlanNode, key: int) -> str | None:
    """The plan ``side`` and its attribute of exprId ``key`` as a text equal for any two plans
    that compute the same rows from the same sources (the attributes' ids renumbered in the
    order they appear, so the same query planned again gives the same text), or None when
    ``key`` is not among them, or when a leaf's rows are not known from the plan
    and its files alone (a local relation, whose rows its JSON omits; a cached or an RDD
    relation; a table of another catalog) or an expression's (``InSet``, whose values ``toJSON``
    drops). Two sides of equal shape over relations of equal
    descriptions (their fingerprints among them) hold the same keys.

    Attributes' qualifiers (the alias a query names a relation by, a CTE's among them) are
    left out: they name, never change, values. Projects on top of the side that pass ``key``
    through as it is are left out: they change
    which other columns the side outputs, never which keys it holds, so a filtered dimension
    read for its key alone and read for its key and other columns (two queries, or two
    readings in one) have one shape."""
    side = _key_source(side, key)
    if any((not n.children and n.cls not in SHAPED_LEAVES)
           or any(e.cls == "InSet" for tree in n.all_exprs() for e in tree.walk())
           for n in side.walk()):
        return None
    ids: dict[int, int] = {}

    def renumbered(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: ids.setdefault(int(v["id"]), len(ids))
                    if k == "exprId" and isinstance(v, dict) else renumbered(v)
                    for k, v in sorted(value.items()) if k != "qualifier"}
        if isinstance(value, list):
            return [renumbered(v) for v in value]
        return value

    def expr(e: Expr) -> list:
        return [e.cls, renumbered(e.fields), [expr(c) for c in e.children]]

    def node(n: PlanNode) -> list:
        return [n.cls, renumbered(n.fields),
                {k: [expr(e) for e in trees] for k, trees in sorted(n.exprs.items())},
                [node(c) for c in n.children]]

    shape = node(side)
    if key not in ids:
        return None
    return json.dumps([shape, ids[key]], sort_keys=True, default=str)


def _key_source(side: PlanNode, key: int) -> PlanNode:
    """``side`` without the Projects on its top that output the attribute ``key`` itself."""
    while side.cls == "Project" and side.children and any(
            e.cls == "AttributeReference" and e.expr_id == key
            for e in side.exprs.get("projectList", [])):
        side = side.children[0]
    return side


def _equalities(join: PlanNode) -> list[Expr]:
    conditions = join.exprs.get("condition", [])
    return [c for tree in conditions for c in conjuncts(tree) if c.cls == "EqualTo"]


def _probe(kind: str, equality: Expr, ids: set[int], defined: dict[int, Expr], other: PlanNode,
           root: PlanNode) -> JoinProbe | None:
    produced = _produced(other)
    for fact, key in (equality.children, reversed(equality.children)):
        fact = _substituted(fact, defined)
        refs = _refs(fact)
        column = key if key.cls == "AttributeReference" else (
            key.children[0] if key.cls == "Cast" else None)
        if (refs and refs <= ids and not refs & produced and column is not None
                and column.cls == "AttributeReference" and column.expr_id in produced
                and not _refs(key) - {column.expr_id}
                and _type(fact) == _type(key) and key_type(_type(key))
                and key_type(_type(column))):
            return JoinProbe(kind, fact, key, _type(key), _path(root, other),
                             f"{_text(fact)} = {_text(key)}")
    return None


def key_type(data_type: str | None) -> bool:
    """Whether join keys of ``data_type`` may prune (:data:`KEY_TYPES`, decimals)."""
    return data_type in KEY_TYPES or (data_type or "").startswith("decimal(")


def _substituted(expr: Expr, defined: dict[int, Expr]) -> Expr:
    """``expr`` with the attributes ``defined`` by aliases replaced by their definitions."""
    if expr.cls == "AttributeReference" and expr.expr_id in defined:
        return defined[expr.expr_id]
    if not expr.children:
        return expr
    return Expr(expr.cls, expr.fields, [_substituted(c, defined) for c in expr.children])


def _refs(expr: Expr) -> set[int]:
    return {e.expr_id for e in expr.walk() if e.cls in ("AttributeReference", "OuterReference")}


def _produced(node: PlanNode) -> set[int]:
    """The exprIds of the attributes a subtree's nodes name or define (its output among
    them)."""
    return {e.expr_id for n in node.walk() for tree in n.all_exprs() for e in tree.walk()
            if e.cls in ("AttributeReference", "Alias") and e.expr_id is not None}


def _type(expr: Expr) -> str | None:
    data_type = expr.fields.get("dataType")
    return data_type if isinstance(data_type, str) else None


def _text(expr: Expr) -> str:
    if expr.cls == "AttributeReference":
        return str(expr.fields.get("name"))
    if expr.cls == "Cast" and expr.children:
        return f"cast({_text(expr.children[0])} as {_type(expr)})"
    return expr.cls.lower() + "(" + ", ".join(_text(c) for c in expr.children) + ")"


def _child_index(parent: PlanNode, child: PlanNode) -> int:
    return next(i for i, c in enumerate(parent.children) if c is child)


def _path(root: PlanNode, node: PlanNode) -> tuple[int, ...]:
    steps = []
    while node is not root and node.parent is not None:
        steps.append(_child_index(node.parent, node))
        node = node.parent
    return tuple(reversed(steps))
