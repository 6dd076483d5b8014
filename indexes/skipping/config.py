"""Data-skipping index configuration: sketches over columns, nested fields and expressions.

A sketch names a SQL expression over the source's columns: a column (``ts``), a nested field
(``user.id``) or a JSON path inside a string column (``get_json_object(payload, '$.amount')``,
also under a cast). Queries whose filters contain the same expression are pruned with it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from indexes.errors import InvalidIndexConfigError
from indexes.names import validate_index_name

KIND = "DataSkippingIndex"

_DECIMAL = re.compile(r"^decimal\(\d+,\d+\)$")
SKETCHABLE_TYPES = ("byte", "short", "integer", "long", "float", "double", "string", "binary",
                    "boolean", "date", "timestamp", "timestamp_ntz")
MAX_VALUE_LIST = 10_000


def sketchable(data_type: Any) -> bool:
    """Whether values of this type (Spark's JSON form) can be sketched."""
    return isinstance(data_type, str) and (data_type in SKETCHABLE_TYPES
                                           or bool(_DECIMAL.match(data_type)))


@dataclass(frozen=True)
class MinMaxSketch:
    """Per-file minimum, maximum and null count of ``expression``: prunes comparisons, ranges,
    IN lists, IS [NOT] NULL and prefixes."""

    expression: str

    kind = "MinMax"

    def params(self) -> dict:
        return {}


@dataclass(frozen=True)
class BloomFilterSketch:
    """A per-file Bloom filter of the values of ``expression``: prunes ``= literal`` and ``IN``
    on values vanilla Spark cannot skip by min/max (random ids, hashes). A file with more than
    ``expectedDistinctCountPerFile`` distinct values gets no filter (it is never pruned by it)."""

    expression: str
    fpp: float = 0.01
    expectedDistinctCountPerFile: int = 100_000

    kind = "BloomFilter"

    def params(self) -> dict:
        return {"fpp": self.fpp, "expectedDistinctCountPerFile": self.expectedDistinctCountPerFile}


@dataclass(frozen=True)
class ValueListSketch:
    """The distinct values of ``expression`` per file when there are at most ``maxValues``
    (else "too many", which prunes nothing): prunes =, IN, != and NOT IN."""

    expression: str
    maxValues: int = 64

    kind = "ValueList"

    def params(self) -> dict:
        return {"maxValues": self.maxValues}


SKETCH_CLASSES = (MinMaxSketch, BloomFilterSketch, ValueListSketch)


class DataSkippingIndexConfig:
    """A data-skipping index: one row of statistics per source file.

    >>> DataSkippingIndexConfig("ds_events", MinMaxSketch("ts"), MinMaxSketch("user.id"),
    ...     BloomFilterSketch("session_id", fpp=0.01, expectedDistinctCountPerFile=100000),
    ...     ValueListSketch("device.os", maxValues=64))

    Partition columns of the source are sketched with MinMax automatically.
    """

    def __init__(self, indexName: str, *sketches: Any):
        """Raises InvalidIndexConfigError for what :meth:`validate` checks."""
        if len(sketches) == 1 and isinstance(sketches[0], (list, tuple)):
            sketches = tuple(sketches[0])
        self.indexName = indexName
        self.sketches = tuple(sketches)
        self.validate()

    def __repr__(self) -> str:
        return f"DataSkippingIndexConfig({self.indexName!r}, {', '.join(map(repr, self.sketches))})"

    def validate(self) -> None:
        """Checks what can be checked without the source (name, sketch kinds, parameters)."""
        validate_index_name(self.indexName)
        if not self.sketches:
            raise InvalidIndexConfigError(
                f"index '{self.indexName}': no sketches; give at least one, e.g. MinMaxSketch('ts')")
        for s in self.sketches:
            where = f"index '{self.indexName}': {s!r}"
            if not isinstance(s, SKETCH_CLASSES):
                raise InvalidIndexConfigError(
                    f"index '{self.indexName}': {s!r} is not a sketch; use MinMaxSketch, "
                    "BloomFilterSketch or ValueListSketch")
            if not isinstance(s.expression, str) or not s.expression.strip():
                raise InvalidIndexConfigError(f"{where}: the expression must be a non-empty string")
            if isinstance(s, BloomFilterSketch):
                if not isinstance(s.fpp, (int, float)) or not 0 < s.fpp < 1:
                    raise InvalidIndexConfigError(f"{where}: fpp must be between 0 and 1 (exclusive)")
                count = s.expectedDistinctCountPerFile
                if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                    raise InvalidIndexConfigError(
                        f"{where}: expectedDistinctCountPerFile must be a positive integer")
            if isinstance(s, ValueListSketch):
                n = s.maxValues
                if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_VALUE_LIST:
                    raise InvalidIndexConfigError(
                        f"{where}: maxValues must be an integer from 1 to {MAX_VALUE_LIST}")
