"""Printing rows without Spark as the command line prints a DataFrame with Spark: the table of
``DataFrame.show(n, truncate=False, vertical=...)`` and the JSON lines of
``to_json(struct(*))``, for the listings answered without a JVM
(:mod:`accelerator.commands.offline`).

The rows are tuples in the order of a Spark DDL schema (those of :mod:`accelerator.api.rows`),
which :func:`parse_schema` reads in Python (pyspark's parser needs a JVM). Values are shown as
Spark shows them: ``NULL`` (``null`` before Spark 4), arrays ``[a, b]``, structs ``{a, b}``,
doubles as Java prints them, timestamps in local time with trimmed fractions, control
characters escaped; JSON leaves null fields out and writes timestamps as
``yyyy-MM-dd'T'HH:mm:ss.SSSXXX``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Sequence

import pyspark


@dataclass(frozen=True)
class Type:
    """A Spark type as the DDL names it: ``name`` (lower-cased: string, int, long, double,
    boolean, timestamp, date, array, struct, map) and, for nested types, ``args`` (an array's
    element, a map's key and value) or ``fields`` (a struct's (name, type) pairs)."""

    name: str
    args: tuple["Type", ...] = ()
    fields: tuple[tuple[str, "Type"], ...] = ()


def _split(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside ``<...>``."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += (c == "<") - (c == ">")
        if c == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _type(text: str) -> Type:
    text = text.strip()
    if "<" not in text:
        return Type({"bigint": "long", "integer": "int"}.get(text.lower(), text.lower()))
    name, body = text[:text.index("<")].strip().lower(), text[text.index("<") + 1:-1]
    if name == "struct":
        fields = []
        for f in _split(body, ","):
            field, kind = f.split(":", 1)
            fields.append((field.strip().strip("`"), _type(kind)))
        return Type(name, fields=tuple(fields))
    return Type(name, tuple(_type(t) for t in _split(body, ",")))


def parse_schema(ddl: str) -> list[tuple[str, Type]]:
    """The (name, type) columns of a DDL schema such as ``"a string, b array<int>"``."""
    return [(c.split(None, 1)[0].strip("`"), _type(c.split(None, 1)[1]))
            for c in _split(ddl, ",")]


def _pairs(value: Any) -> list:
    """A map's (key, value) pairs (pyarrow gives a map as a list of pairs)."""
    return list(value.items()) if isinstance(value, dict) else list(value)


# --- show ---------------------------------------------------------------------------------
NULL = "NULL" if int(pyspark.__version__.split(".")[0]) >= 4 else "null"
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f", "\b": "\\b", "\u000b": "\\v",
            "\u0007": "\\a"}


def java_double(x: float) -> str:
    """``x`` as Java's ``Double.toString`` prints it (``1.0``, ``0.25``, ``1.0E-4``)."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if str(x).startswith("-") else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        text = format(Decimal(repr(x)), "f")
        return text if "." in text else text + ".0"
    sign, digits, exponent = Decimal(repr(x)).normalize().as_tuple()
    mantissa = "".join(map(str, digits))
    exp = exponent + len(mantissa) - 1
    return f"{'-' if sign else ''}{mantissa[0]}.{mantissa[1:] or '0'}E{exp}"


def _timestamp(value: datetime) -> str:
    local = value.astimezone() if value.tzinfo else value
    text = local.strftime("%Y-%m-%d %H:%M:%S")
    if local.microsecond:
        text += f".{local.microsecond:06d}".rstrip("0")
    return text


def _cell(value: Any, kind: Type) -> str:
    if value is None:
        return NULL
    if kind.name == "array":
        return "[" + ", ".join(_cell(v, kind.args[0]) for v in value) + "]"
    if kind.name == "struct":
        values = ([value.get(n) for n, _ in kind.fields] if isinstance(value, dict)
                  else list(value))
        return "{" + ", ".join(_cell(v, t) for v, (_, t) in zip(values, kind.fields)) + "}"
    if kind.name == "map":
        return "{" + ", ".join(f"{_cell(k, kind.args[0])} -> {_cell(v, kind.args[1])}"
                               for k, v in _pairs(value)) + "}"
    if kind.name in ("double", "float"):
        return java_double(float(value))
    if kind.name == "boolean":
        return "true" if value else "false"
    if kind.name == "timestamp" and isinstance(value, datetime):
        return _timestamp(value)
    text = str(value)
    return "".join(_ESCAPES.get(c, c) for c in text)


def show(rows: Sequence[Sequence[Any]], ddl: str, vertical: bool = False) -> str:
    """The text ``DataFrame.show(len(rows), truncate=False, vertical=vertical)`` prints."""
    columns = parse_schema(ddl)
    names = [n for n, _ in columns]
    cells = [[_cell(v, t) for v, (_, t) in zip(row, columns)] for row in rows]
    if vertical:
        if not cells:
            return "(0 rows)\n"
        name_width = max([3, *map(len, names)])
        data_width = max([3, *(len(c) for row in cells for c in row)])
        out = []
        for i, row in enumerate(cells):
            out.append(f"-RECORD {i}".ljust(name_width + data_width + 5, "-"))
            out.extend(f" {n.ljust(name_width)} | {c.ljust(data_width)} "
                       for n, c in zip(names, row))
        return "\n".join(out) + "\n"
    widths = [max([3, len(n), *(len(row[i]) for row in cells)]) for i, n in enumerate(names)]
    line = "+" + "+".join("-" * w for w in widths) + "+"

    def bar(values: list[str]) -> str:
        return "|" + "|".join(v.ljust(w) for v, w in zip(values, widths)) + "|"

    return "\n".join([line, bar(names), line, *(bar(row) for row in cells), line]) + "\n"


# --- JSON ---------------------------------------------------------------------------------
class _Raw(str):
    """A number already written as JSON (a Java double)."""


def _json_value(value: Any, kind: Type) -> Any:
    if value is None:
        return None
    if kind.name == "array":
        return [_json_value(v, kind.args[0]) for v in value]
    if kind.name == "struct":
        values = ([value.get(n) for n, _ in kind.fields] if isinstance(value, dict)
                  else list(value))
        return {n: _json_value(v, t) for v, (n, t) in zip(values, kind.fields) if v is not None}
    if kind.name == "map":
        return {str(k): _json_value(v, kind.args[1]) for k, v in _pairs(value)}
    if kind.name in ("double", "float"):
        return _Raw(java_double(float(value)))
    if kind.name == "timestamp" and isinstance(value, datetime):
        local = value.astimezone() if value.tzinfo else value.astimezone()
        text = local.strftime("%Y-%m-%dT%H:%M:%S") + f".{local.microsecond // 1000:03d}"
        offset = local.strftime("%z")
        return text + ("Z" if offset in ("+0000", "") else f"{offset[:3]}:{offset[3:]}")
    if isinstance(value, date):
        return value.isoformat()
    return value


def _dumps(value: Any) -> str:
    if isinstance(value, _Raw):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{_dumps(v)}"
                              for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_dumps(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def json_lines(rows: Sequence[Sequence[Any]], ddl: str) -> str:
    """One JSON object per row, as ``to_json(struct(*))`` writes it (null fields left out)."""
    kind = Type("struct", fields=tuple(parse_schema(ddl)))
    return "".join(_dumps(_json_value(tuple(row), kind)) + "\n" for row in rows)
