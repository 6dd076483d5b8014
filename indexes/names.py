"""Index names and column paths: validation, quoting and the flattened names of nested fields."""
from __future__ import annotations

import re

from indexes.errors import InvalidIndexConfigError

_INDEX_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
FLAT_SEPARATOR = "__"


def validate_index_name(name: object) -> str:
    """Returns ``name`` if it is a valid index name, else raises InvalidIndexConfigError."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidIndexConfigError("index name must be a non-empty string")
    if not _INDEX_NAME.match(name):
        raise InvalidIndexConfigError(
            f"invalid index name {name!r}: use only letters, digits, '_' and '-'")
    return name


def index_dir_name(name: str) -> str:
    """The directory of an index under the system path (names are case-insensitive)."""
    return validate_index_name(name).lower()


def split_path(column: str) -> tuple[str, ...]:
    """Splits ``a.b.c`` (or ``a.`b.c```) into its parts; backticks quote dots."""
    parts: list[str] = []
    buf: list[str] = []
    quoted = False
    i = 0
    while i < len(column):
        ch = column[i]
        if ch == "`":
            if quoted and i + 1 < len(column) and column[i + 1] == "`":
                buf.append("`")
                i += 2
                continue
            quoted = not quoted
        elif ch == "." and not quoted:
            parts.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
        i += 1
    if quoted:
        raise InvalidIndexConfigError(f"unbalanced backtick in column {column!r}")
    parts.append("".join(buf))
    if any(p == "" for p in parts):
        raise InvalidIndexConfigError(f"invalid column name {column!r}")
    return tuple(parts)


def quote_path(path: tuple[str, ...]) -> str:
    """The Spark column expression for a path, each part backtick-quoted."""
    return ".".join("`" + p.replace("`", "``") + "`" for p in path)


def flat_name(path: tuple[str, ...]) -> str:
    """``("nested", "nst", "field1")`` → ``nested__nst__field1``."""
    return FLAT_SEPARATOR.join(path)
