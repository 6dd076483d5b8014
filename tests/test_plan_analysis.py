"""The history's plan analysis without a JVM: over plans parsed by indexes.plan from captured
JSON, over any tree with the same methods (duck typing), and the layering of ``rules``."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from indexes.description import SourceDescription
from indexes.plan import parse_plan
from rules.history.plan_analysis import extract_record

PLANS = json.loads((Path(__file__).parent / "data" / "nested_plans.json").read_text())
DESCRIPTION = SourceDescription.from_json(
    {"format": "parquet", "rootPaths": ["file:/data/nested"], "fingerprint": "f1",
     "partitionColumns": []})


def _preds(rec) -> set[tuple]:
    return {(p.relation, p.column, p.shape, p.op, p.function, p.literal_count)
            for p in rec.predicates}


def test_captured_plan_with_struct_field_filter_and_projection():
    rec = extract_record(parse_plan(PLANS["seed"]), [DESCRIPTION], ["idx_nested"],
                         timestamp_ms=1_700_000_000_000, query_id="q-1")
    assert (rec.timestamp, rec.query_id) == (1_700_000_000_000, "q-1")
    assert rec.sources == ["file:/data/nested"] and rec.formats == ["parquet"]
    assert rec.indexes_applied == ["idx_nested"]
    assert _preds(rec) == {(0, "nested.nst.field1", "equality", "EqualTo", None, None)}
    assert rec.output_columns == ["id", "name", "nested.nst.field1", "nested.nst.field2"]
    assert rec.relations[0].fingerprint == "f1"


def test_captured_plans_read_whole_structs_and_no_filter():
    whole = extract_record(parse_plan(PLANS["whole_struct"]), [DESCRIPTION])
    assert whole.output_columns == ["id", "nested"]           # nested subsumes its fields
    plain = extract_record(parse_plan(PLANS["no_filter"]), [DESCRIPTION])
    assert plain.predicates == [] and plain.filter_columns == []
    assert plain.output_columns == ["id", "nested.nst.field1"]


# --- a plan tree that is not indexes.plan's ------------------------------------------------

@dataclass
class FakeExpr:
    cls: str
    children: list["FakeExpr"] = field(default_factory=list)
    fields: dict[str, Any] = field(default_factory=dict)
    eid: int | None = None

    @property
    def expr_id(self) -> int | None:
        return self.eid

    def walk(self) -> Iterator["FakeExpr"]:
        yield self
        for child in self.children:
            yield from child.walk()

    def struct_chain(self) -> tuple["FakeExpr", tuple[str, ...]] | None:
        names = []
        node = self
        while node.cls == "GetStructField":
            names.append(node.fields["name"])
            node = node.children[0]
        if not names or node.cls != "AttributeReference":
            return None
        return node, tuple(reversed(names))


@dataclass
class FakePlan:
    cls: str
    children: list["FakePlan"] = field(default_factory=list)
    exprs: dict[str, list[FakeExpr]] = field(default_factory=dict)
    fields: dict[str, Any] = field(default_factory=dict)

    def all_exprs(self) -> Iterator[FakeExpr]:
        for trees in self.exprs.values():
            yield from trees

    def file_relations(self) -> list["FakePlan"]:
        found = [self] if self.cls == "LogicalRelation" else []
        return found + [r for c in self.children for r in c.file_relations()]

    def output_attributes(self) -> list[FakeExpr]:
        return self.exprs.get("output", [])


def _attr(name: str, eid: int) -> FakeExpr:
    return FakeExpr("AttributeReference", fields={"name": name}, eid=eid)


def _field(expr: FakeExpr, *names: str) -> FakeExpr:
    for name in names:
        expr = FakeExpr("GetStructField", [expr], {"name": name})
    return expr


def test_any_tree_with_the_protocol_methods_is_analysed():
    # SELECT id, nested.a.b AS b FROM t WHERE nested.a.c = 'x' AND id IN (1, 2, 3)
    relation = FakePlan("LogicalRelation", exprs={"output": [_attr("id", 1), _attr("nested", 2)]})
    literal = FakeExpr("Literal")
    condition = FakeExpr("And", [
        FakeExpr("EqualTo", [_field(_attr("nested", 2), "a", "c"), literal]),
        FakeExpr("In", [_attr("id", 1), literal, literal, literal])])
    filtered = FakePlan("Filter", [relation], {"condition": [condition]})
    root = FakePlan("Project", [filtered], {"projectList": [
        _attr("id", 1), FakeExpr("Alias", [_field(_attr("nested", 2), "a", "b")], eid=3)]})

    rec = extract_record(root, [DESCRIPTION])
    assert _preds(rec) == {(0, "nested.a.c", "equality", "EqualTo", None, None),
                           (0, "id", "in", "In", None, 3)}
    assert rec.filter_columns == ["id", "nested.a.c"]
    assert rec.output_columns == ["id", "nested.a.b", "nested.a.c"]


def test_join_pairs_name_the_columns_each_equality_compares():
    """SELECT ... FROM fact JOIN dim ON CAST(fact.k AS BIGINT) = dim.dk AND fact.v + 1 = dim.w
    AND fact.t < dim.t WHERE dim.year = 2001, the cast computed below the join as an alias:
    one pair (the alias of a cast is the column), the filtered side marked; the computed key
    and the inequality pair nothing up."""
    fact = FakePlan("LogicalRelation", exprs={"output": [_attr("k", 1), _attr("v", 2),
                                                         _attr("t", 3)]})
    dim = FakePlan("LogicalRelation", exprs={"output": [_attr("dk", 11), _attr("w", 12),
                                                        _attr("t", 13), _attr("year", 14)]})
    keyed = FakePlan("Project", [fact], {"projectList": [
        FakeExpr("Alias", [FakeExpr("Cast", [_attr("k", 1)])], eid=5), _attr("v", 2),
        _attr("t", 3)]})
    filtered = FakePlan("Filter", [dim], {"condition": [
        FakeExpr("EqualTo", [_attr("year", 14), FakeExpr("Literal", fields={"value": 2001})])]})
    condition = FakeExpr("And", [
        FakeExpr("EqualTo", [_attr("k", 5), _attr("dk", 11)]),
        FakeExpr("And", [FakeExpr("EqualTo", [FakeExpr("Add", [_attr("v", 2), FakeExpr(
            "Literal")]), _attr("w", 12)]), FakeExpr("LessThan", [_attr("t", 3),
                                                                   _attr("t", 13)])])])
    root = FakePlan("Join", [keyed, filtered], {"condition": [condition]})
    dim_description = SourceDescription.from_json({"format": "parquet",
                                                   "rootPaths": ["file:/data/dim"]})
    rec = extract_record(root, [DESCRIPTION, dim_description])
    assert [(p.left, p.left_column, p.left_filtered, p.right, p.right_source, p.right_column,
             p.right_filtered) for p in rec.join_pairs] == [
        (0, "k", False, 1, "file:/data/dim", "dk", True)]
    assert rec.relations[0].join_columns == ["k", "t", "v"]


def test_rules_imports_neither_accelerator_nor_indexes():
    code = ("import sys, rules.history.records, rules.history.plan_analysis, rules.history.recorder, rules.history.reader\n"
            "bad = sorted(m for m in sys.modules\n"
            "             if m.split('.')[0] in ('accelerator', 'indexes'))\n"
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.stdout.strip() == ""
