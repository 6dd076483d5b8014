"""Catalyst plans as Python trees, parsed from ``LogicalPlan.toJSON()``.

Spark serializes a tree as a flat pre-order list of nodes, each with ``class`` and
``num-children``; expression-valued fields hold such lists too (a ``Seq[Expression]`` is a list of
them). This module rebuilds the trees and answers the questions the index rules ask, without a
JVM: which attributes a plan references, through which struct-field chains.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterator

LOGICAL_RELATION = "LogicalRelation"


@dataclass
class Expr:
    """One expression node: short class name, its JSON fields and its children."""

    cls: str
    fields: dict[str, Any]
    children: list["Expr"]

    @property
    def expr_id(self) -> int | None:
        """The exprId of an attribute or alias, else None."""
        eid = self.fields.get("exprId")
        return int(eid["id"]) if isinstance(eid, dict) else None

    def walk(self) -> Iterator["Expr"]:
        yield self
        for child in self.children:
            yield from child.walk()

    def struct_chain(self) -> tuple["Expr", tuple[str, ...]] | None:
        """For a GetStructField chain ending in an attribute: (attribute, field names), else
        None."""
        ordinals = []
        node = self
        while node.cls == "GetStructField":
            ordinals.append(int(node.fields["ordinal"]))
            node = node.children[0]
        if not ordinals or node.cls != "AttributeReference":
            return None
        names: list[str] = []
        data_type = node.fields.get("dataType")
        for ordinal in reversed(ordinals):
            name = struct_field_name(data_type, ordinal)
            if name is None:
                return None
            names.append(name)
            data_type = struct_field_type(data_type, name)
        return node, tuple(names)


@dataclass
class PlanNode:
    """One logical plan node; ``exprs`` maps each expression-valued field to its trees."""

    cls: str
    fields: dict[str, Any]
    children: list["PlanNode"]
    exprs: dict[str, list[Expr]] = field(default_factory=dict)
    parent: "PlanNode | None" = field(default=None, repr=False)

    def walk(self) -> Iterator["PlanNode"]:
        yield self
        for child in self.children:
            yield from child.walk()

    def all_exprs(self) -> Iterator[Expr]:
        for trees in self.exprs.values():
            yield from trees

    def file_relations(self) -> list["PlanNode"]:
        """LogicalRelation leaves in pre-order: the order of the JVM's ``fileRelations``."""
        return [n for n in self.walk() if n.cls == LOGICAL_RELATION]

    def output_attributes(self) -> list[Expr]:
        """The output attributes of a leaf relation node (a LogicalRelation)."""
        return self.exprs.get("output", [])


def _short(cls: str) -> str:
    return cls.rsplit(".", 1)[-1]


def _is_node_list(value: Any) -> bool:
    return (isinstance(value, list) and bool(value) and isinstance(value[0], dict)
            and "class" in value[0] and "num-children" in value[0])


def _build(flat: list[dict], pos: int, make) -> tuple[Any, int]:
    raw = flat[pos]
    node = make(raw)
    pos += 1
    for _ in range(int(raw["num-children"])):
        child, pos = _build(flat, pos, make)
        node.children.append(child)
    return node, pos


def _make_expr(raw: dict) -> Expr:
    fields = {k: v for k, v in raw.items() if k not in ("class", "num-children")}
    return Expr(_short(raw["class"]), fields, [])


def _expr_trees(value: Any) -> list[Expr] | None:
    """The expression trees held by one JSON field value, or None if it holds none."""
    if _is_node_list(value):
        return [_build(value, 0, _make_expr)[0]]
    if isinstance(value, list) and value and all(_is_node_list(v) for v in value):
        return [_build(v, 0, _make_expr)[0] for v in value]
    if isinstance(value, list) and value and all(isinstance(v, list) for v in value):
        trees: list[Expr] = []
        for v in value:
            sub = _expr_trees(v)
            if sub is None:
                return None
            trees.extend(sub)
        return trees
    return None


def _make_plan(raw: dict) -> PlanNode:
    fields: dict[str, Any] = {}
    exprs: dict[str, list[Expr]] = {}
    for key, value in raw.items():
        if key in ("class", "num-children"):
            continue
        trees = _expr_trees(value)
        if trees is not None:
            exprs[key] = trees
        else:
            fields[key] = value
    return PlanNode(_short(raw["class"]), fields, [], exprs)


def parse_plan(plan_json: str | list) -> PlanNode:
    """Parses ``LogicalPlan.toJSON()`` output into a tree with parent links."""
    flat = json.loads(plan_json) if isinstance(plan_json, str) else plan_json
    root, _ = _build(flat, 0, _make_plan)
    for node in root.walk():
        for child in node.children:
            child.parent = node
    return root


def file_relations(root: PlanNode) -> list[PlanNode]:
    """LogicalRelation leaves in pre-order (:meth:`PlanNode.file_relations`)."""
    return root.file_relations()


def output_attributes(relation: PlanNode) -> list[Expr]:
    """The output attributes of a LogicalRelation node (:meth:`PlanNode.output_attributes`)."""
    return relation.output_attributes()


def struct_field_name(data_type: Any, ordinal: int) -> str | None:
    """Name of field ``ordinal`` of a struct type in Spark's JSON form."""
    if isinstance(data_type, dict) and data_type.get("type") == "struct":
        fields = data_type["fields"]
        if 0 <= ordinal < len(fields):
            return fields[ordinal]["name"]
    return None


def struct_field_type(data_type: Any, name: str) -> Any:
    """Type of the field ``name`` of a struct type in Spark's JSON form."""
    for f in data_type["fields"]:
        if f["name"] == name:
            return f["type"]
    raise KeyError(name)


@dataclass(frozen=True)
class Reference:
    """A use of a relation attribute: the attribute's exprId and the struct fields accessed."""

    expr_id: int
    path: tuple[str, ...]


def chain(expr: Expr) -> tuple[Expr, tuple[str, ...]] | None:
    """For a GetStructField chain ending in an attribute: (attribute, field names)
    (:meth:`Expr.struct_chain`)."""
    return expr.struct_chain()


def attribute_use(expr: Expr) -> tuple[int, tuple[str, ...]] | None:
    """(exprId, struct fields) when ``expr`` is an attribute or a struct-field chain over one."""
    if expr.cls == "AttributeReference":
        return expr.expr_id, ()
    found = chain(expr)
    return (found[0].expr_id, found[1]) if found is not None else None


def conjuncts(expr: Expr) -> list[Expr]:
    """The operands of a tree of ANDs (the expression itself when it is no AND)."""
    if expr.cls == "And":
        return [c for child in expr.children for c in conjuncts(child)]
    return [expr]


def references(expr: Expr, ids: set[int]) -> Iterator[Reference]:
    """Uses of the attributes ``ids`` in ``expr``, each through its longest struct-field chain."""
    if expr.cls == "GetStructField":
        found = chain(expr)
        if found is not None:
            attr, path = found
            if attr.expr_id in ids:
                yield Reference(attr.expr_id, path)
            return
    if expr.cls == "AttributeReference" and expr.expr_id in ids:
        yield Reference(expr.expr_id, ())
        return
    for child in expr.children:
        yield from references(child, ids)


def plan_references(root: PlanNode, ids: set[int], skip: PlanNode | None = None) -> set[Reference]:
    """Every use of the attributes ``ids`` in the plan's expressions (``skip``'s own excluded)."""
    refs: set[Reference] = set()
    for node in root.walk():
        if node is skip:
            continue
        for tree in node.all_exprs():
            refs.update(references(tree, ids))
    return refs


_INPUT_FILE_FUNCTIONS = {"InputFileName", "InputFileBlockStart", "InputFileBlockLength"}


def subquery_plan(expr: Expr) -> PlanNode | None:
    """The plan of a subquery expression (``IN``/``EXISTS``/scalar), or None for other
    expressions. Spark optimizes it on its own, before the plan that holds it."""
    plan = expr.fields.get("plan")
    if _is_node_list(plan) and ("Subquery" in expr.cls or expr.cls in ("Exists", "ListQuery")):
        return parse_plan(plan)
    return None


def _expressions(root: PlanNode) -> Iterator[Expr]:
    """Every expression of the plan's nodes, subexpressions included (not those inside the
    plans of subquery expressions)."""
    for node in root.walk():
        for tree in node.all_exprs():
            yield from tree.walk()


def _refers_outside(root: PlanNode) -> bool:
    """Whether the plan, or a subquery's plan within it, holds an outer reference."""
    for e in _expressions(root):
        inner = subquery_plan(e)
        if e.cls == "OuterReference" or (inner is not None and _refers_outside(inner)):
            return True
    return False


def unsupported_reason(root: PlanNode) -> str | None:
    """Why no relation of this plan may be replaced, or None.

    A subquery expression is fine when its plan refers to none of the outer query's columns:
    its correlation (outer attributes, join condition) is then among the expression's own
    children, which the rules check like any other reference. An outer reference left inside
    its plan could not be rewritten. The input file functions would name the index's files
    instead of the source's.
    """
    for e in _expressions(root):
        inner = subquery_plan(e)
        if inner is not None and _refers_outside(inner):
            return ("a subquery refers to the outer query's columns inside its plan, which the "
                    "rewriter cannot rewrite")
        if e.cls in _INPUT_FILE_FUNCTIONS:
            return (f"the query uses {e.cls} (e.g. input_file_name()), which must name the "
                    "source's files")
    return None
