"""Covering index configuration and its validation against a source schema."""
from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from indexes.errors import InvalidIndexConfigError
from indexes.names import flat_name, split_path, validate_index_name
from indexes.schema_paths import folded, resolve_path

KIND = "covering"


@dataclass(frozen=True)
class IndexColumn:
    """A resolved index column: its path in the source, its flat name in the index, its type."""

    path: tuple[str, ...]
    name: str
    data_type: DataType

    @property
    def dotted(self) -> str:
        return ".".join(self.path)

    def to_json(self) -> dict:
        return {"path": list(self.path), "name": self.name, "type": self.data_type.jsonValue()}

    @staticmethod
    def from_json(d: dict) -> "IndexColumn":
        return IndexColumn(tuple(d["path"]), d["name"], _parse_type(d["type"]))


def _parse_type(value) -> DataType:
    from pyspark.sql.types import _parse_datatype_json_value
    return _parse_datatype_json_value(value)


@dataclass(frozen=True)
class CoveringIndexConfig:
    """A covering index: rows of ``indexedColumns`` + ``includedColumns``, bucketed and sorted
    by the indexed columns. Nested fields are written as ``a.b.c`` and stored as ``a__b__c``.

    >>> CoveringIndexConfig("idx", ["nested.nst.field1"], ["id", "name", "nested.nst.field2"])
    """

    indexName: str
    indexedColumns: list[str]
    includedColumns: list[str] = field(default_factory=list)
    numBuckets: int | None = None

    def __post_init__(self):
        """Checks what can be checked without the source; raises InvalidIndexConfigError for an
        invalid name, column lists that are not lists of column names (a bare string included),
        no indexed columns, malformed column names and a numBuckets that is not a positive
        integer."""
        validate_index_name(self.indexName)
        for field_name in ("indexedColumns", "includedColumns"):
            object.__setattr__(self, field_name, self._column_list(field_name))
        if not self.indexedColumns:
            raise InvalidIndexConfigError(
                f"index '{self.indexName}': indexedColumns is empty; name at least one column")
        buckets = self.numBuckets
        if buckets is not None and (not isinstance(buckets, int) or isinstance(buckets, bool)
                                    or buckets < 1):
            raise InvalidIndexConfigError(
                f"index '{self.indexName}': numBuckets must be a positive integer, got {buckets!r}")

    def _column_list(self, field_name: str) -> list[str]:
        """The column names given as ``field_name``, validated, as a new list."""
        value = getattr(self, field_name)
        if value is None:
            return []
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise InvalidIndexConfigError(
                f"index '{self.indexName}': {field_name} must be a list of column names, got "
                f"{value!r}" + (f"; write [{value!r}]" if isinstance(value, str) else ""))
        for col in value:
            if not isinstance(col, str):
                raise InvalidIndexConfigError(
                    f"index '{self.indexName}': column names must be strings, got {col!r} in "
                    f"{field_name}")
            try:
                split_path(col)
            except InvalidIndexConfigError as exc:
                raise InvalidIndexConfigError(f"index '{self.indexName}': {exc}") from None
        return list(value)

    def resolve(self, schema: StructType, case_sensitive: bool) -> tuple[list[IndexColumn], list[IndexColumn]]:
        """Validates this config against ``schema``; returns (indexed, included) columns.

        Raises InvalidIndexConfigError naming the offending column for: duplicate or
        overlapping columns, unknown columns (with the closest existing ones), unsupported
        indexed types, and flattened names that collide.
        """
        indexed = [_resolve(self.indexName, c, schema, case_sensitive) for c in self.indexedColumns]
        included = [_resolve(self.indexName, c, schema, case_sensitive) for c in self.includedColumns]
        _check_overlaps(self.indexName, indexed + included, case_sensitive)
        for col in indexed:
            if isinstance(col.data_type, (ArrayType, MapType, StructType)):
                raise InvalidIndexConfigError(
                    f"index '{self.indexName}': indexed column '{col.dotted}' has type "
                    f"{col.data_type.simpleString()}; arrays, maps and structs cannot be indexed "
                    "(index a leaf field such as 'a.b' instead)")
        _check_collisions(self.indexName, indexed + included, schema, case_sensitive)
        return indexed, included


def _resolve(index: str, column: str, schema: StructType, case_sensitive: bool) -> IndexColumn:
    path, data_type = resolve_path(schema, column, case_sensitive, f"index '{index}'")
    return IndexColumn(path, flat_name(path), data_type)


def _check_overlaps(index: str, columns: list[IndexColumn], case_sensitive: bool) -> None:
    keys = [tuple(folded(p, case_sensitive) for p in c.path) for c in columns]
    for i, a in enumerate(keys):
        for j in range(i + 1, len(keys)):
            b = keys[j]
            if a == b:
                raise InvalidIndexConfigError(
                    f"index '{index}': column '{columns[i].dotted}' is listed more than once")
            short, long_ = (a, b) if len(a) < len(b) else (b, a)
            if long_[:len(short)] == short:
                raise InvalidIndexConfigError(
                    f"index '{index}': columns '{columns[i].dotted}' and '{columns[j].dotted}' "
                    "overlap (one is a field of the other); list only one of them")


def _check_collisions(index: str, columns: list[IndexColumn], schema: StructType,
                      case_sensitive: bool) -> None:
    top = {folded(f.name, case_sensitive): f.name for f in schema.fields}
    seen: dict[str, IndexColumn] = {}
    for col in columns:
        key = folded(col.name, case_sensitive)
        if len(col.path) > 1 and key in top:
            raise InvalidIndexConfigError(
                f"index '{index}': nested column '{col.dotted}' would be stored as '{col.name}', "
                f"which collides with the existing column '{top[key]}'")
        if key in seen:
            raise InvalidIndexConfigError(
                f"index '{index}': columns '{seen[key].dotted}' and '{col.dotted}' would both be "
                f"stored as '{col.name}'")
        seen[key] = col
