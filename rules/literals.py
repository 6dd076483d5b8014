"""Literal values as the query history records them (Spark's plan JSON text), as Python values
of their Catalyst type, so they compare with each other and with statistics. Pure Python."""
from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

__all__ = ["parse_literal"]

_INTEGERS = ("byte", "short", "integer", "long", "tinyint", "smallint", "int", "bigint")
_EPOCH = dt.datetime(1970, 1, 1)


def parse_literal(text: str, type_: str) -> Any:
    """The Python value of a literal as Spark's plan JSON writes it, for a Catalyst type name:
    int, float, ``Decimal``, bool, str, ``date`` (``2026-01-05``, or days since the epoch as an
    ``InSet`` holds it) or naive UTC ``datetime`` (microseconds since the epoch, or ISO text:
    Spark writes a ``timestamp`` literal in the session's time zone, taken here as UTC unless
    the text carries an offset).
    Raises ValueError when ``text`` is not a value of the type, or the type is not supported."""
    t = type_.strip().lower()
    s = text.strip()
    try:
        if t.startswith(("string", "varchar", "char")):
            return text
        if t in _INTEGERS:
            return int(s)
        if t in ("double", "float", "real"):
            return float(s)
        if t.startswith("decimal"):
            value = decimal.Decimal(s)
            if not value.is_finite():
                raise ValueError("not a finite number")
            return value
        if t == "boolean":
            return {"true": True, "false": False}[s.lower()]
        if t == "date":
            return _EPOCH.date() + dt.timedelta(days=int(s)) if _is_int(s) \
                else dt.date.fromisoformat(s)
        if t in ("timestamp", "timestamp_ntz", "timestamp_ltz"):
            if _is_int(s):
                return _EPOCH + dt.timedelta(microseconds=int(s))
            value = dt.datetime.fromisoformat(s)
            return value if value.tzinfo is None else \
                value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    except (ArithmeticError, KeyError, OverflowError, ValueError):
        raise ValueError(f"{text!r} is not a {type_} literal") from None
    raise ValueError(f"literals of type {type_!r} are not supported")


def _is_int(s: str) -> bool:
    return s.lstrip("+-").isdigit()
