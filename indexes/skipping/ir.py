"""A small expression IR for pruning, translated from Catalyst expression trees.

``expression_key`` names an expression canonically (columns by name, struct fields by name,
no exprIds), so a query's subtree and a sketch declared on the same expression meet.
``translate`` turns a filter condition into IR nodes; every subtree whose key is sketched
becomes :class:`Sketched`, what the IR does not model becomes :class:`Unknown`.
"""
from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from indexes.plan import Expr
from indexes.skipping import values as V

NameOf = Callable[[int], str | None]


# --- nodes -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sketched:
    """An expression whose per-file statistics are in the index under ``key``. ``guard`` is set
    when the expression's value depends on how failing casts/overflows were evaluated (cast vs
    try_cast, ANSI vs not): the same expression, translated without this substitution and with
    ANSI semantics, so the evaluator can tell whether any row could fail; ``ansi`` is the
    query's mode."""

    key: str
    type: str
    guard: Node | None = None
    ansi: bool = False


@dataclass(frozen=True)
class Lit:
    """A literal in internal form (None is null)."""

    value: Any
    type: str


@dataclass(frozen=True)
class Unknown:
    """Anything else: any value or null. ``raises``: the node itself may raise an error;
    errors of ``args`` (its translated children) propagate. ``null_on_error``: the variants of
    the expression that print the same JSON but do not raise give null where it raises
    (``from_json`` in PERMISSIVE vs FAILFAST mode); ``field``: a struct field access, null
    when its struct is."""

    type: str
    raises: bool = True
    args: tuple[Node, ...] = ()
    null_on_error: bool = False
    field: bool = False


@dataclass(frozen=True)
class Cmp:
    """``op`` is one of = <=> < <= > >=."""

    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class And:
    left: Node
    right: Node


@dataclass(frozen=True)
class Or:
    left: Node
    right: Node


@dataclass(frozen=True)
class Not:
    child: Node


@dataclass(frozen=True)
class In:
    value: Node
    items: tuple[Node, ...]


@dataclass(frozen=True)
class IsNull:
    child: Node


@dataclass(frozen=True)
class IsNotNull:
    child: Node


@dataclass(frozen=True)
class StartsWith:
    child: Node
    prefix: Node


@dataclass(frozen=True)
class Cast:
    """cast (or try_cast: the JSON does not tell them apart) of ``child`` from one type to
    another in time zone ``tz``; ``ansi``: a failing cast may raise."""

    child: Node
    from_type: str
    to_type: str
    tz: str | None
    ansi: bool


@dataclass(frozen=True)
class Arith:
    """``left op right`` with op one of + - * over an integral or floating ``type``."""

    op: str
    left: Node
    right: Node
    type: str
    ansi: bool


@dataclass(frozen=True)
class Func:
    """A monotonic function of one argument: ``year``, ``month`` (of a date), ``trunc_date``
    (date, unit ``arg``) or ``trunc_timestamp`` (timestamp, unit ``arg``, time zone ``tz``)."""

    name: str
    child: Node
    type: str
    arg: str | None = None
    tz: str | None = None


Node = (Sketched | Lit | Unknown | Cmp | And | Or | Not | In | IsNull | IsNotNull | StartsWith | Cast
        | Arith | Func)


def node_type(node: Node) -> str:
    """The Spark type name of a node's values."""
    if isinstance(node, Cast):
        return node.to_type
    if isinstance(node, (Sketched, Lit, Unknown, Arith, Func)):
        return node.type
    return "boolean"


# --- Catalyst classes ------------------------------------------------------------------------
_COMPARISONS = {"EqualTo": "=", "EqualNullSafe": "<=>", "LessThan": "<", "LessThanOrEqual": "<=",
                "GreaterThan": ">", "GreaterThanOrEqual": ">="}
_ARITH = {"Add": "+", "Subtract": "-", "Multiply": "*"}
_PREDICATES = set(_COMPARISONS) | {"And", "Or", "Not", "In", "InSet", "IsNull", "IsNotNull",
                                   "StartsWith", "EndsWith", "Contains", "Like", "RLike", "IsNaN"}
_INTEGER_FUNCTIONS = {"Year", "Month", "Quarter", "DayOfMonth", "DayOfWeek", "DayOfYear", "WeekDay",
                      "WeekOfYear", "Hour", "Minute", "Second", "Length"}
# Over arrays and maps: never raise (a missing map key gives null in every mode since Spark
# 3.4; Size's choice of -1 or null for a null input is its field legacySizeOfNull, part of an
# expression's key). Element access by index (GetArrayItem, ElementAt) raises under ANSI.
_COLLECTION_FUNCTIONS = {"Size", "ArrayMax", "ArrayMin", "GetMapValue", "MapKeys", "MapValues",
                         "ArrayContains"}
# Never raise and give the same result in every ANSI mode (given children that do not raise).
_SAFE = (_PREDICATES - {"Like", "RLike"}) | _INTEGER_FUNCTIONS | _COLLECTION_FUNCTIONS | {
    "AttributeReference", "Literal", "GetStructField", "GetJsonObject", "TruncTimestamp",
    "TruncDate", "Upper", "Lower", "Coalesce", "If", "CaseWhen", "Substring", "StringTrim"}
# Raise (overflow, division by zero, malformed input) only in ANSI mode.
_ANSI_ERRORS = set(_ARITH) | {"Cast", "Divide", "IntegralDivide", "Remainder", "Pmod", "UnaryMinus",
                              "Abs"}
_NONDETERMINISTIC = {"Rand", "Randn", "Uniform", "RandStr", "Uuid", "Shuffle",
                     "MonotonicallyIncreasingID", "SparkPartitionID", "InputFileName",
                     "InputFileBlockStart", "InputFileBlockLength", "CurrentTimestamp",
                     "CurrentDate", "Now", "LocalTimestamp", "CurrentBatchTimestamp",
                     "Exists", "ListQuery", "InSubquery"}
_IGNORED_FIELDS = {"exprId", "qualifier", "metadata", "nullable", "jvmId", "resultId",
                   "explicitMetadata", "nonInheritableMetadataKeys"}
_TRUNC_LEVELS = {"microsecond": "microsecond", "millisecond": "millisecond", "second": "second",
                 "minute": "minute", "hour": "hour", "day": "day", "dd": "day", "week": "week",
                 "mon": "month", "month": "month", "mm": "month", "quarter": "quarter",
                 "year": "year", "yyyy": "year", "yy": "year"}
_DATE_LEVELS = {"week", "month", "quarter", "year"}


def type_name(data_type: Any) -> str:
    """A Spark JSON type as one string: atomic names as they are, nested types spelled out
    (field names and types only)."""
    if isinstance(data_type, str):
        return data_type
    if isinstance(data_type, dict):
        kind = data_type.get("type")
        if kind == "struct":
            fields = ",".join(f"{json.dumps(f['name'])}:{type_name(f['type'])}"
                              for f in data_type["fields"])
            return f"struct<{fields}>"
        if kind == "array":
            return f"array<{type_name(data_type['elementType'])}>"
        if kind == "map":
            return f"map<{type_name(data_type['keyType'])},{type_name(data_type['valueType'])}>"
    return json.dumps(data_type, sort_keys=True)


def _raw_type(expr: Expr) -> Any:
    """The Spark JSON type of an expression's values, or None when this module cannot tell."""
    if "dataType" in expr.fields:
        return expr.fields["dataType"]
    cls = expr.cls
    if cls == "GetStructField":
        field = _struct_field(expr)
        return field["type"] if field else None
    if cls in _PREDICATES:
        return "boolean"
    if cls in _INTEGER_FUNCTIONS or cls == "Size":
        return "integer"
    if cls in ("ArrayMax", "ArrayMin", "GetMapValue"):
        child = _raw_type(expr.children[0])
        key = "elementType" if cls != "GetMapValue" else "valueType"
        return child.get(key) if isinstance(child, dict) else None
    if cls in ("GetJsonObject", "Upper", "Lower"):
        return "string"
    if cls == "TruncTimestamp":
        return "timestamp"
    if cls == "TruncDate":
        return "date"
    if cls in _ARITH:
        left, right = (_raw_type(c) for c in expr.children)
        if left == right and (V.integral_range(left) or V.is_floating(left)):
            return left
    return None


def expr_type(expr: Expr) -> str | None:
    """The Spark type name (see type_name) of an expression, or None when unknown."""
    raw = _raw_type(expr)
    return None if raw is None else type_name(raw)


def _struct_field(expr: Expr) -> dict | None:
    """The struct field a GetStructField reads, from its child's type."""
    parent = _raw_type(expr.children[0])
    ordinal = int(expr.fields["ordinal"])
    if isinstance(parent, dict) and parent.get("type") == "struct" and ordinal < len(parent["fields"]):
        return parent["fields"][ordinal]
    return None


# --- keys ------------------------------------------------------------------------------------
def expression_key(expr: Expr, name_of: NameOf) -> str | None:
    """A canonical string for an expression tree: columns by relation column name (``name_of``
    maps an exprId to it, None = not a column of the relation), struct fields by name (their
    ordinals change with nested-schema pruning), other nodes by class, non-child fields and
    children; None for non-deterministic expressions and anything not over the relation."""
    cls = expr.cls
    if cls in _NONDETERMINISTIC or "UDF" in cls or "Subquery" in cls:
        return None
    if cls == "Alias":
        return expression_key(expr.children[0], name_of)
    if cls == "AttributeReference":
        name = name_of(expr.expr_id)
        return None if name is None else f"col({json.dumps(name)})"
    if cls == "Literal":
        if expr.fields.get("dataType") in ("binary", "timestamp"):
            return None     # printed as [B@<identity hash>, or in the session time zone
        return f"lit({type_name(expr.fields.get('dataType'))}:{json.dumps(expr.fields.get('value'))})"
    children = [expression_key(c, name_of) for c in expr.children]
    if any(c is None for c in children):
        return None
    if cls == "GetStructField":
        field = _struct_field(expr)
        name = field["name"] if field else expr.fields.get("name")
        return None if name is None else f"{children[0]}.{json.dumps(name)}"
    fields = {k: v for k, v in expr.fields.items() if k not in _IGNORED_FIELDS}
    if cls == "Cast" and "timestamp" not in (expr_type(expr.children[0]), expr_type(expr)) \
            and expr_type(expr.children[0]) is not None:
        fields.pop("timeZoneId", None)                  # no time zone involved
    args = ",".join(f"{k}={type_name(v) if k == 'dataType' else json.dumps(v, sort_keys=True)}"
                    for k, v in sorted(fields.items()))
    return f"{cls}[{args}]({','.join(children)})"


_KEY_COLUMN = re.compile(r'col\(("(?:[^"\\]|\\.)*")\)')


def key_columns(key: str) -> set[str]:
    """The relation columns an :func:`expression_key` names (a superset: a string literal
    spelling ``col("x")`` adds ``x``)."""
    return {json.loads(m) for m in _KEY_COLUMN.findall(key)}


def sketched_keys(node: Any) -> set[str]:
    """The keys of the sketched expressions an IR tree reads (guards included)."""
    out: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Sketched):
            out.add(n.key)
        if isinstance(n, tuple):
            stack.extend(n)
        elif dataclasses.is_dataclass(n):
            stack.extend(getattr(n, f.name) for f in dataclasses.fields(n))
    return out


# --- translation -----------------------------------------------------------------------------
def _never_fails(from_type: str | None, to_type: str) -> bool:
    """Whether a cast cannot fail (nor differ between cast, try_cast and ANSI modes)."""
    if from_type == to_type or to_type == "string":
        return True
    src, dst = V.integral_range(from_type or ""), V.integral_range(to_type)
    if src and dst:
        return dst[0] <= src[0] and src[1] <= dst[1]
    if (src or from_type in ("float", "boolean") or V.decimal_type(from_type or "")) \
            and (V.is_floating(to_type) or to_type == "boolean"):
        return True
    if src and V.decimal_type(to_type):
        precision, scale = V.decimal_type(to_type)
        return precision - scale >= len(str(src[1]))
    if V.decimal_type(from_type or "") and V.decimal_type(to_type):
        (p1, s1), (p2, s2) = V.decimal_type(from_type), V.decimal_type(to_type)
        return s2 >= s1 and p2 - s2 >= p1 - s1
    if from_type == "boolean" and dst:
        return True
    return (from_type, to_type) in {("date", "timestamp"), ("date", "timestamp_ntz"),
                                    ("timestamp", "date"), ("timestamp_ntz", "date"),
                                    ("timestamp", "timestamp_ntz"), ("timestamp_ntz", "timestamp")}


def _mode_independent(expr: Expr) -> bool:
    """Whether an expression gives the same value in every mode and never raises."""
    for e in expr.walk():
        if e.cls == "Cast":
            if not _never_fails(expr_type(e.children[0]), expr_type(e) or ""):
                return False
        elif e.cls in _ARITH:
            if not V.is_floating(expr_type(e) or ""):
                return False
        elif e.cls not in _SAFE:
            return False
    return True


def _literal_text(expr: Expr) -> str | None:
    if expr.cls == "Literal" and expr.fields.get("dataType") == "string":
        return expr.fields.get("value")
    return None


def _like_prefix(expr: Expr) -> str | None:
    """The prefix p when a LIKE pattern is exactly 'p%' with no other wildcard or escape."""
    pattern = _literal_text(expr.children[1])
    escape = expr.fields.get("escapeChar") or "\\"
    if pattern and pattern.endswith("%") and not any(c in pattern[:-1] for c in ("%", "_", escape)):
        return pattern[:-1]
    return None


@dataclass
class _Translator:
    name_of: NameOf
    sketch_keys: set[str]
    session_tz: str
    ansi: bool
    trusted: frozenset[str] = frozenset()

    def node(self, expr: Expr, substitute: bool = True) -> Node:
        if substitute:
            key = expression_key(expr, self.name_of)
            if key is not None and key in self.sketch_keys:
                t = expr_type(expr) or "unknown"
                if key in self.trusted or _mode_independent(expr):
                    return Sketched(key, t)
                guard = _Translator(self.name_of, self.sketch_keys, self.session_tz, True)
                return Sketched(key, t, guard.node(expr, substitute=False), self.ansi)
        handler = getattr(self, "_" + expr.cls, None)
        built = handler(expr) if handler else None
        return built if built is not None else self.unknown(expr)

    def unknown(self, expr: Expr) -> Unknown:
        raises = self.ansi if expr.cls in _ANSI_ERRORS else expr.cls not in _SAFE
        return Unknown(expr_type(expr) or "unknown", raises,
                       tuple(self.node(c) for c in expr.children),
                       null_on_error=expr.cls == "JsonToStructs",
                       field=expr.cls == "GetStructField")

    def kids(self, expr: Expr) -> list[Node]:
        return [self.node(c) for c in expr.children]

    def _Literal(self, expr: Expr) -> Node | None:
        t = type_name(expr.fields.get("dataType"))
        try:
            return Lit(V.parse_literal(expr.fields.get("value"), t, self.session_tz), t)
        except V.UnknownLiteral:
            return Unknown(t, False)

    def _AttributeReference(self, expr: Expr) -> Node:
        return Unknown(expr_type(expr) or "unknown", False)

    def _And(self, expr: Expr) -> Node:
        return And(*self.kids(expr))

    def _Or(self, expr: Expr) -> Node:
        return Or(*self.kids(expr))

    def _Not(self, expr: Expr) -> Node:
        return Not(self.node(expr.children[0]))

    def _IsNull(self, expr: Expr) -> Node:
        return IsNull(self.node(expr.children[0]))

    def _IsNotNull(self, expr: Expr) -> Node:
        return IsNotNull(self.node(expr.children[0]))

    def _In(self, expr: Expr) -> Node:
        value, *items = self.kids(expr)
        return In(value, tuple(items))

    def _InSubquery(self, expr: Expr) -> Node | None:
        """``values IN (uncorrelated subquery)``: any boolean or null, raising only where its
        values do (their equality with the subquery's rows never raises; the subquery runs
        once for the query, whatever files are read). A correlated one is not modelled."""
        query = expr.children[-1] if expr.children else None
        if (query is None or query.cls != "ListQuery" or query.children
                or query.fields.get("outerAttrs") or query.fields.get("joinCond")):
            return None
        return Unknown("boolean", False, tuple(self.node(c) for c in expr.children[:-1]))

    def _StartsWith(self, expr: Expr) -> Node | None:
        if expr.children[1].cls != "Literal":
            return None
        return StartsWith(*self.kids(expr))

    def _Like(self, expr: Expr) -> Node | None:
        prefix = _like_prefix(expr)
        if prefix is None:
            return None
        return StartsWith(self.node(expr.children[0]), Lit(prefix, "string"))

    def _Cast(self, expr: Expr) -> Node | None:
        source, target = expr_type(expr.children[0]), expr_type(expr)
        if source is None or target is None:
            return None
        return Cast(self.node(expr.children[0]), source, target, expr.fields.get("timeZoneId"),
                    self.ansi and not _never_fails(source, target))

    def _arith(self, expr: Expr) -> Node | None:
        t = expr_type(expr)
        if t is None or not any(c.cls == "Literal" for c in expr.children):
            return None
        return Arith(_ARITH[expr.cls], *self.kids(expr), t, self.ansi)

    _Add = _Subtract = _Multiply = _arith

    def _Year(self, expr: Expr) -> Node | None:
        if expr_type(expr.children[0]) != "date":
            return None
        return Func(expr.cls.lower(), self.node(expr.children[0]), "integer")

    _Month = _Year

    def _TruncTimestamp(self, expr: Expr) -> Node | None:
        unit = _TRUNC_LEVELS.get((_literal_text(expr.children[0]) or "").lower())
        if unit is None or expr_type(expr.children[1]) != "timestamp":
            return None
        return Func("trunc_timestamp", self.node(expr.children[1]), "timestamp", unit,
                    expr.fields.get("timeZoneId") or self.session_tz)

    def _TruncDate(self, expr: Expr) -> Node | None:
        unit = _TRUNC_LEVELS.get((_literal_text(expr.children[1]) or "").lower())
        if unit not in _DATE_LEVELS or expr_type(expr.children[0]) != "date":
            return None
        return Func("trunc_date", self.node(expr.children[0]), "date", unit)


for _cls, _op in _COMPARISONS.items():
    setattr(_Translator, "_" + _cls, lambda self, expr, op=_op: Cmp(op, *self.kids(expr)))


def translate(expr: Expr, name_of: NameOf, sketch_keys: set[str], session_tz: str,
              ansi: bool, trusted: frozenset[str] = frozenset()) -> Node:
    """The IR of a Catalyst expression: subtrees whose ``expression_key`` is in ``sketch_keys``
    become Sketched; literals are parsed in ``session_tz`` (the zone ``toJSON`` printed them
    in); ``ansi`` is spark.sql.ansi.enabled (casts and arithmetic may then raise). Keys in
    ``trusted`` name subtrees the caller knows never raise and mean the same in every mode."""
    return _Translator(name_of, sketch_keys, session_tz, ansi, trusted).node(expr)


def translate_all(conditions: list[Expr], name_of: NameOf, sketch_keys: set[str],
                  session_tz: str, ansi: bool, trusted: frozenset[str] = frozenset()) -> Node:
    """The conjunction of several conditions, in evaluation order (first is evaluated first)."""
    nodes = [translate(c, name_of, sketch_keys, session_tz, ansi, trusted) for c in conditions]
    result = nodes[0]
    for n in nodes[1:]:
        result = And(result, n)
    return result
