"""Why a data-skipping index prunes nothing when the filter casts a sketched expression to or
from a string: the sketch's bounds are of one type, the filter orders values of another, and
string order does not follow number or time order (``'9' > '10'``), so the statistics cannot
answer the comparison. whyNot names the mismatch and the sketch that would serve the filter.
Pure Python over the pruning IR (:mod:`indexes.skipping.ir`)."""
from __future__ import annotations

from typing import Any

from indexes.skipping.ir import And, Arith, Cast, Cmp, Func, In, Node, Not, Or, Sketched, StartsWith

#: SQL spellings of Spark's JSON type names that differ from the name in upper case.
_SQL_TYPES = {"long": "BIGINT", "integer": "INT", "short": "SMALLINT", "byte": "TINYINT"}


def mismatched_casts(node: Node) -> list[Cast]:
    """The casts of a sketched expression from a string to another type or from another type to
    a string that ``node`` compares (with =, <, IN, a prefix...), directly or under + - * and
    the monotonic functions, where a sketch of the cast would answer; in filter order."""
    if isinstance(node, (And, Or)):
        return mismatched_casts(node.left) + mismatched_casts(node.right)
    if isinstance(node, Not):
        return mismatched_casts(node.child)
    if isinstance(node, Cmp):
        return _compared(node.left) + _compared(node.right)
    if isinstance(node, In):
        return [c for item in (node.value, *node.items) for c in _compared(item)]
    if isinstance(node, StartsWith):
        return _compared(node.child)
    return []


def _compared(node: Node) -> list[Cast]:
    if isinstance(node, Cast):
        crosses = (node.from_type == "string") != (node.to_type == "string")
        return [node] if crosses and isinstance(node.child, Sketched) else []
    if isinstance(node, Arith):
        return _compared(node.left) + _compared(node.right)
    if isinstance(node, Func):
        return _compared(node.child)
    return []


def sql_type(type_name: str) -> str:
    """The SQL name of a Spark JSON type name (``long`` is ``BIGINT``)."""
    return _SQL_TYPES.get(type_name, type_name.upper())


def mismatch_reason(condition: Node, sketches: list[Any]) -> str | None:
    """whyNot's sentence when ``condition`` (pruning IR) casts a sketched expression across
    the string boundary, naming the index's sketches on it (``sketches``: ResolvedSketch) and
    the MinMax sketch of the cast that would serve the filter; None when it does not."""
    casts = mismatched_casts(condition)
    if not casts:
        return None
    parts = []
    for cast in dict.fromkeys(casts):
        declared = [s for s in sketches if s.key == cast.child.key]
        expression = declared[0].expression
        names = ", ".join(f"{s.kind}({s.expression})" for s in declared)
        target = sql_type(cast.to_type)
        verb = "holds" if len(declared) == 1 else "hold"
        parts.append(f"the filter casts {expression} from {cast.from_type} to {cast.to_type}, "
                     f"but {names} {verb} {cast.from_type} values, whose order is not the order "
                     f"of {cast.to_type} values; MinMaxSketch(\"CAST(({expression}) AS {target})\") "
                     f"would serve it")
    return "; ".join(parts)
