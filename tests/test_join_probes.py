"""Dynamic file pruning without a JVM: which joins may prune a relation (``indexes.join_probes``:
inner and semi joins, the non-preserved side of outer joins, never the preserved side, through
Projects, Filters and joins the rows pass unchanged), and the other side's keys as a condition
the pruning evaluator judges per file (``indexes.skipping.join_keys``)."""
from __future__ import annotations

import dataclasses
import datetime

import pytest

from indexes.join_probes import probes, side_shape
from indexes.plan import Expr, PlanNode
from indexes.skipping.evaluator import may_match
from indexes.skipping.ir import And, Cmp, In, IsNotNull, Lit, Sketched
from indexes.skipping.join_keys import JoinKeys, JoinNotUsed
from indexes.skipping.stats import ColumnStats, FileStats


# --- plan builders -------------------------------------------------------------------------------
def attr(name: str, eid: int, data_type: str = "integer") -> Expr:
    return Expr("AttributeReference", {"name": name, "dataType": data_type,
                                       "exprId": {"id": eid}}, [])


def cast(child: Expr, data_type: str) -> Expr:
    return Expr("Cast", {"dataType": data_type}, [child])


def eq(left: Expr, right: Expr, cls: str = "EqualTo") -> Expr:
    return Expr(cls, {}, [left, right])


def relation(*attrs: Expr) -> PlanNode:
    return PlanNode("LogicalRelation", {}, [], {"output": list(attrs)})


def node(cls: str, *children: PlanNode, **exprs: Expr) -> PlanNode:
    return PlanNode(cls, {}, list(children), {k: [v] for k, v in exprs.items()})


def join(kind: str, left: PlanNode, right: PlanNode, condition: Expr) -> PlanNode:
    out = node("Join", left, right, condition=condition)
    out.fields["joinType"] = {"object": f"org.apache.spark.sql.catalyst.plans.{kind}$"}
    return out


def linked(root: PlanNode) -> PlanNode:
    for n in root.walk():
        for c in n.children:
            c.parent = n
    return root


SS_KEY, D_KEY, D_MOY = attr("ss_sold_date_sk", 1), attr("d_date_sk", 2), attr("d_moy", 3)


def star(kind: str, fact_left: bool = True, condition: Expr | None = None):
    """fact (Filter isnotnull over it) joined with a filtered date dimension."""
    fact = relation(SS_KEY, attr("amt", 4, "double"))
    dim = relation(D_KEY, D_MOY)
    fact_side = node("Filter", fact, condition=Expr("IsNotNull", {}, [SS_KEY]))
    dim_side = node("Filter", dim, condition=eq(D_MOY, Expr("Literal", {"value": "3"}, [])))
    sides = (fact_side, dim_side) if fact_left else (dim_side, fact_side)
    root = linked(node("Project", join(kind, *sides, condition or eq(SS_KEY, D_KEY))))
    return root, fact


# --- which joins -------------------------------------------------------------------------------
@pytest.mark.parametrize("kind,fact_left,prunable", [
    ("Inner", True, True), ("Inner", False, True),
    ("LeftSemi", True, True),
    ("LeftOuter", True, False), ("LeftOuter", False, True),     # the left is preserved
    ("RightOuter", True, True), ("RightOuter", False, False),   # the right is preserved
    ("FullOuter", True, False), ("FullOuter", False, False),
    ("LeftAnti", True, False),
])
def test_only_sides_that_must_match_are_probed(kind, fact_left, prunable):
    root, fact = star(kind, fact_left)
    found = probes(root, fact)
    assert bool(found) == prunable
    if found:
        probe = found[0]
        assert probe.fact is SS_KEY and probe.other is D_KEY and probe.type == "integer"
        assert probe.text == "ss_sold_date_sk = d_date_sk"
        other = root
        for i in probe.path:
            other = other.children[i]
        assert other.cls == "Filter" and other.children[0].output_attributes()[0] is D_KEY
        assert probe.describe() == f"{kind} join on ss_sold_date_sk = d_date_sk"


def test_the_other_side_may_cast_its_key_to_the_facts_type():
    wide = attr("ss_sold_date_sk", 1, "long")
    fact = relation(wide)
    root = linked(join("Inner", fact, relation(D_KEY), eq(wide, cast(D_KEY, "long"))))
    (probe,) = probes(root, fact)
    assert probe.other_column is D_KEY and probe.type == "long"
    assert probe.text == "ss_sold_date_sk = cast(d_date_sk as long)"


def test_the_facts_key_may_be_an_alias_of_its_column():
    fact = relation(SS_KEY)
    wide = Expr("Alias", {"name": "k", "exprId": {"id": 10}}, [cast(SS_KEY, "long")])
    alias = attr("k", 10, "long")
    project = node("Project", fact, projectList=wide)
    root = linked(join("Inner", project, relation(D_KEY), eq(alias, cast(D_KEY, "long"))))
    (probe,) = probes(root, fact)
    assert probe.fact == cast(SS_KEY, "long")
    assert probe.text == "cast(ss_sold_date_sk as long) = cast(d_date_sk as long)"


@pytest.mark.parametrize("condition", [
    eq(SS_KEY, D_KEY, "EqualNullSafe"),              # null <=> null matches
    eq(attr("amt", 4, "double"), attr("d_x", 5, "double")),   # -0.0 = 0.0, NaN: not exact
    eq(SS_KEY, Expr("Add", {}, [D_KEY, D_MOY])),     # not a column of the other side
    eq(SS_KEY, D_MOY, "LessThan"),
])
def test_equalities_not_usable(condition):
    fact = relation(SS_KEY, attr("amt", 4, "double"))
    root = linked(join("Inner", fact, relation(D_KEY, D_MOY, attr("d_x", 5, "double")),
                       condition))
    assert probes(root, fact) == []


def test_every_equality_among_the_conjuncts_is_a_probe():
    fact = relation(SS_KEY, attr("s_item", 6))
    dim = relation(D_KEY, attr("i_item", 7))
    condition = Expr("And", {}, [eq(SS_KEY, D_KEY), eq(attr("i_item", 7), attr("s_item", 6))])
    found = probes(linked(join("Inner", fact, dim, condition)), fact)
    assert [p.text for p in found] == ["ss_sold_date_sk = d_date_sk", "s_item = i_item"]


def test_probes_go_up_through_joins_the_rows_pass_unchanged():
    item_key, s_item = attr("i_item_sk", 8), attr("ss_item_sk", 9)
    fact = relation(SS_KEY, s_item)
    inner = join("Inner", fact, relation(item_key), eq(s_item, item_key))
    root = linked(join("Inner", node("Project", inner), relation(D_KEY), eq(SS_KEY, D_KEY)))
    assert [p.text for p in probes(root, fact)] == ["ss_item_sk = i_item_sk",
                                                    "ss_sold_date_sk = d_date_sk"]
    # the fact on the null-extended side of an outer join below: its key may be null-extended
    outer = join("LeftOuter", relation(item_key), fact, eq(s_item, item_key))
    root = linked(join("Inner", outer, relation(D_KEY), eq(SS_KEY, D_KEY)))
    assert [p.text for p in probes(root, fact)] == ["ss_item_sk = i_item_sk"]


@pytest.mark.parametrize("other", [
    node("GlobalLimit", relation(D_KEY)),
    node("Sample", relation(D_KEY)),
    node("Filter", relation(D_KEY), condition=Expr("Rand", {}, [])),
    node("Project", relation(D_KEY), projectList=Expr("PythonUDF", {}, [D_KEY])),
])
def test_an_other_side_a_second_run_may_change_is_never_collected(other):
    fact = relation(SS_KEY)
    root = linked(join("Inner", fact, other, eq(SS_KEY, D_KEY)))
    assert probes(root, fact) == []


def test_no_probe_through_an_aggregate():
    fact = relation(SS_KEY)
    agg = node("Aggregate", fact)
    root = linked(join("Inner", agg, relation(D_KEY), eq(SS_KEY, D_KEY)))
    assert probes(root, fact) == []


# --- keys as a condition over the statistics -----------------------------------------------------
KEY = Sketched("col(\"ss_sold_date_sk\")", "integer")


def file(lo, hi, nulls=0, rows=10, type_="integer"):
    return FileStats(rows, {KEY.key: ColumnStats(type_, lo, hi, nulls)})


def probe_of(type_: str = "integer"):
    root, fact = star("Inner")
    return dataclasses.replace(probes(root, fact)[0], type=type_)


def _dimension(first_id: int, month: int, leaf: PlanNode | None = None) -> PlanNode:
    """Filter(d_moy = month) over the date dimension, its attributes' ids from ``first_id``."""
    key, moy = attr("d_date_sk", first_id), attr("d_moy", first_id + 1)
    return linked(node("Filter", leaf or relation(key, moy),
                       condition=eq(moy, Expr("Literal", {"value": str(month)}, []))))


def test_the_same_other_side_planned_again_has_the_same_shape():
    """The keys are remembered by the side's shape: equal for the same side with other
    attribute ids, qualifiers or other columns projected beside the key, different for another filter,
    another key column, or a leaf whose rows the plan does not show (a local relation, an
    InSet's values)."""
    shape = side_shape(_dimension(2, 3), 2)
    assert shape is not None
    assert side_shape(_dimension(72, 3), 72) == shape
    assert side_shape(_dimension(2, 4), 2) != shape
    assert side_shape(_dimension(2, 3), 3) != shape
    assert side_shape(_dimension(2, 3), 99) is None
    # Projects on top passing the key through keep its keys: one shape; an alias is another

    def projected(*exprs: Expr) -> PlanNode:
        return linked(PlanNode("Project", {}, [_dimension(2, 3)], {"projectList": list(exprs)}))
    assert side_shape(projected(attr("d_date_sk", 2)), 2) == shape
    assert side_shape(projected(attr("d_moy", 3), attr("d_date_sk", 2)), 2) == shape
    alias = Expr("Alias", {"name": "k", "exprId": {"id": 9}}, [attr("d_date_sk", 2)])
    assert side_shape(projected(alias), 9) not in (None, shape)
    # the qualifier a query names the dimension by (a CTE's alias) is not part of it
    qualified = attr("d_date_sk", 2)
    qualified.fields["qualifier"] = "[a]"
    assert side_shape(projected(qualified), 2) == shape
    local = PlanNode("LocalRelation", {}, [], {"output": [attr("d_date_sk", 2)]})
    assert side_shape(_dimension(2, 3, local), 2) is None
    in_set = linked(node("Filter", relation(attr("d_date_sk", 2)),
                         condition=Expr("InSet", {"hset": None}, [attr("d_date_sk", 2)])))
    assert side_shape(in_set, 2) is None


def test_listed_keys_drop_nulls_and_sort():
    keys = JoinKeys.listed(probe_of(), [5, None, 3, 5])
    assert keys.values == (3, 5)
    assert keys.condition(KEY) == In(KEY, (Lit(3, "integer"), Lit(5, "integer")))
    assert keys.describe().endswith("(the other side holds 2 distinct keys)")
    dates = JoinKeys.listed(probe_of("date"), [datetime.date(1970, 1, 3)])
    assert dates.values == (2,)


def test_ranged_keys_are_a_closed_range():
    keys = JoinKeys.ranged(probe_of(), 30, 39)
    assert keys.condition(KEY) == And(Cmp(">=", KEY, Lit(30, "integer")),
                                      Cmp("<=", KEY, Lit(39, "integer")))
    assert "keys from 30 to 39" in keys.describe()


def test_consecutive_integer_or_date_keys_are_their_range():
    keys = JoinKeys.listed(probe_of(), [32, 30, 31, None])
    assert keys.condition(KEY) == And(Cmp(">=", KEY, Lit(30, "integer")),
                                      Cmp("<=", KEY, Lit(32, "integer")))
    assert keys.describe().endswith("(the other side holds 3 distinct keys)")
    days = JoinKeys.listed(probe_of("date"), [datetime.date(1970, 1, d) for d in (3, 4)])
    assert days.condition(KEY) == And(Cmp(">=", KEY, Lit(2, "date")),
                                      Cmp("<=", KEY, Lit(3, "date")))
    one = JoinKeys.listed(probe_of(), [7])
    assert one.condition(KEY) == In(KEY, (Lit(7, "integer"),))
    strings = JoinKeys.listed(probe_of("string"), ["a", "b"])
    assert isinstance(strings.condition(KEY), In)


def test_a_file_is_kept_only_when_it_may_hold_a_key():
    keys = JoinKeys.listed(probe_of(), [31, 35])
    condition = And(IsNotNull(KEY), keys.condition(KEY))
    assert may_match(condition, file(30, 39))
    assert not may_match(condition, file(40, 49))
    assert not may_match(condition, file(32, 34))      # between the keys, holding neither
    assert not may_match(condition, file(None, None, nulls=10))   # only null keys
    assert may_match(condition, file(None, None))      # no statistics: kept
    ranged = JoinKeys.ranged(probe_of(), 31, 35).condition(KEY)
    assert may_match(ranged, file(32, 34)) and not may_match(ranged, file(36, 49))


def test_an_empty_other_side_matches_no_file():
    condition = JoinKeys.listed(probe_of(), []).condition(KEY)
    assert JoinKeys.listed(probe_of(), [None]).values == ()
    assert not may_match(condition, file(0, 100))
    assert not may_match(condition, file(0, 100, nulls=3))
    assert "holds no key" in JoinKeys.listed(probe_of(), []).describe()


def test_a_join_not_used_says_why():
    unused = JoinNotUsed(probe_of(), "the other side is estimated at 9 bytes, over x (1)")
    assert unused.describe() == ("Inner join on ss_sold_date_sk = d_date_sk not used: the "
                                 "other side is estimated at 9 bytes, over x (1)")
