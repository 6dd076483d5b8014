"""Column paths (``a``, ``a.b.c``) resolved against a source's schema in Python, without Spark:
the schema's spelling of each part and the field's type, or an error naming the closest columns."""
from __future__ import annotations

import difflib
import re

from pyspark.sql.types import DataType, StructType

from indexes.errors import InvalidIndexConfigError
from indexes.names import split_path

#: A column path written plainly: identifiers joined by dots (no backticks, no expression).
PLAIN_PATH = re.compile(r"^\s*[A-Za-z_][A-Za-z0-9_]*(\s*\.\s*[A-Za-z_][A-Za-z0-9_]*)*\s*$")


def folded(name: str, case_sensitive: bool) -> str:
    """A field name as compared under the session's case sensitivity."""
    return name if case_sensitive else name.lower()


def leaf_paths(schema: StructType, prefix: tuple[str, ...] = ()) -> list[str]:
    """Every column and nested struct field of ``schema`` as a dotted path, in schema order."""
    out = []
    for f in schema.fields:
        path = prefix + (f.name,)
        out.append(".".join(path))
        if isinstance(f.dataType, StructType):
            out.extend(leaf_paths(f.dataType, path))
    return out


def _walk(schema: StructType, parts: tuple[str, ...],
          case_sensitive: bool) -> tuple[list[str], DataType, int]:
    """Follows ``parts`` through struct fields: (the names found, the type reached, how many
    fields match the first part not found: 0 none or not a struct, >1 ambiguous; 1 when every
    part was found)."""
    current: DataType = schema
    resolved: list[str] = []
    for part in parts:
        matches = [f for f in current.fields
                   if folded(f.name, case_sensitive) == folded(part, case_sensitive)] \
            if isinstance(current, StructType) else []
        if len(matches) != 1:
            return resolved, current, len(matches)
        resolved.append(matches[0].name)
        current = matches[0].dataType
    return resolved, current, 1


def _unresolved(where: str, column: str, schema: StructType, matches: int) -> InvalidIndexConfigError:
    candidates = leaf_paths(schema)
    close = difflib.get_close_matches(column, candidates, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else \
        f"; existing columns: {', '.join(candidates[:20])}"
    why = "is ambiguous" if matches > 1 else "does not exist"
    return InvalidIndexConfigError(f"{where}: column '{column}' {why}{hint}")


def resolve_path(schema: StructType, column: str, case_sensitive: bool,
                 where: str) -> tuple[tuple[str, ...], DataType]:
    """The schema's spelling of each part of ``column`` (struct fields only) and the type of
    the field it names; InvalidIndexConfigError ``<where>: column '<column>' does not exist``
    (or ``is ambiguous``) with the closest columns otherwise."""
    resolved, current, matches = _walk(schema, split_path(column), case_sensitive)
    if matches != 1:
        raise _unresolved(where, column, schema, matches)
    return tuple(resolved), current


def check_column_path(schema: StructType, column: str, case_sensitive: bool, where: str) -> None:
    """Raises what :func:`resolve_path` raises for a :data:`PLAIN_PATH` that Spark cannot
    resolve either: a part that no field of a struct matches. Anything else is left to Spark:
    an expression, a path that goes on past a map or an array, or one whose first part may be
    a qualifier (``t.a`` over ``df.alias("t")``)."""
    if not PLAIN_PATH.match(column):
        return
    parts = tuple(p.strip() for p in split_path(column))
    resolved, current, matches = _walk(schema, parts, case_sensitive)
    if matches == 1 or not isinstance(current, StructType) or (not resolved and len(parts) > 1):
        return
    raise _unresolved(where, column, schema, matches)
