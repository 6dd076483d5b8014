"""Text index configuration: a tantivy index over one string column (or nested string field)."""
from __future__ import annotations

from dataclasses import dataclass

from indexes.errors import InvalidIndexConfigError
from indexes.names import validate_index_name

KIND = "TextIndex"


@dataclass(frozen=True)
class TextIndexConfig:
    """A text index over ``column``: skips files for ``LIKE``, ``contains``, ``startswith``,
    ``endswith``, ``rlike``/``regexp_like``, ``=`` and ``IN`` on the column (also under
    ``lower``/``upper`` and ``ilike``), and answers full-text queries (``Hyperspace.search``).

    The index holds one document per group of rows (a row group of a Parquet file, at most
    10,000 rows): a small fraction of the column's size. ``scoring=True`` holds one document per
    row with word positions instead, several times larger, which ``Hyperspace.search(...,
    score=True)`` needs for a BM25 score per row.

    >>> TextIndexConfig("txt_message", column="message")
    >>> TextIndexConfig("txt_body", column="mail.body")      # a nested string field
    >>> TextIndexConfig("txt_scored", column="message", scoring=True)
    """

    indexName: str
    column: str
    scoring: bool = False

    def __post_init__(self):
        """Raises InvalidIndexConfigError for what :meth:`validate` checks."""
        self.validate()

    def validate(self) -> None:
        """Checks what can be checked without the source (name and column)."""
        validate_index_name(self.indexName)
        if not isinstance(self.column, str) or not self.column.strip():
            raise InvalidIndexConfigError(
                f"index '{self.indexName}': column must be a non-empty string naming a string "
                "column or nested field, e.g. 'message' or 'mail.body'")
        if not isinstance(self.scoring, bool):
            raise InvalidIndexConfigError(
                f"index '{self.indexName}': scoring must be True or False, not {self.scoring!r}")
