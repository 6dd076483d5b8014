"""Index names and column paths: validation, quoting and the flattened names of nested fields."""
from __future__ import annotations

import re

from indexes.errors import InvalidIndexConfigError

_INDEX_NAME = re.compile(r"^[A-Za-z0-9-][A-Za-z0-9_-]*$")
MAX_INDEX_NAME_LENGTH = 128
FLAT_SEPARATOR = "__"


def validate_index_name(name: object) -> str:
    """Returns ``name`` if it is a valid index name, else raises InvalidIndexConfigError.

    Names use letters, digits, ``_`` and ``-`` and do not start with ``_``, which is reserved
    for the accelerator's own directories such as ``_history``; they are at most
    ``MAX_INDEX_NAME_LENGTH`` (128) characters long.
    """
    if not isinstance(name, str) or not _INDEX_NAME.match(name):
        raise InvalidIndexConfigError(
            f"invalid index name {name!r}: use only letters, digits, '_' and '-', not starting "
            f"with '_' (reserved for the accelerator's own directories), e.g. 'idx_orders-1'")
    if len(name) > MAX_INDEX_NAME_LENGTH:
        raise InvalidIndexConfigError(
            f"invalid index name '{name[:20]}...': it is {len(name)} characters long; index "
            f"names have at most {MAX_INDEX_NAME_LENGTH}")
    return name


def is_index_dir_name(name: str) -> bool:
    """Whether a directory under the system path can hold an index (not ``_history`` etc.)."""
    return bool(_INDEX_NAME.match(name))


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
