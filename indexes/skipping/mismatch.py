"""Why a data-skipping index prunes nothing when the filter casts a sketched expression to or
from a string: the sketch's bounds are of one type, the filter orders values of another, and
string order does not follow number or time order (``'9' > '10'``), so the statistics cannot
answer the comparison. whyNot names the mismatch and the sketch that would serve the filter.
Pure Python over the pruning IR (:mod:`indexes.skipping.ir`)."""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from indexes.skipping.ir import Cast, Node, Sketched

#: SQL spellings of Spark's JSON type names that differ from the name in upper case.
_SQL_TYPES = {"long": "BIGINT", "integer": "INT", "short": "SMALLINT", "byte": "TINYINT"}


def _children(node: Node) -> Iterator[Node]:
    """The IR nodes directly under ``node`` (a sketched expression's guard is not a child: it
    re-states the sketched expression itself)."""
    if isinstance(node, Sketched):
        return
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        for item in value if isinstance(value, tuple) else (value,):
            if dataclasses.is_dataclass(item):
                yield item


def mismatched_casts(node: Node) -> list[Cast]:
    """The casts in ``node`` of a sketched expression from a string to another type or from
    another type to a string, in the order the filter reads them."""
    found = []
    if isinstance(node, Cast) and isinstance(node.child, Sketched) \
            and (node.from_type == "string") != (node.to_type == "string"):
        found.append(node)
    for child in _children(node):
        found.extend(mismatched_casts(child))
    return found


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
