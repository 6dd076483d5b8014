"""What the analyzer knows of a source besides its demand: cheap statistics the Spark side
gathers (file count and size, per-file min/max of the demanded columns, a row sample), and the
indexes that exist already. Plain values, no Spark."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from rules.instructions import Target, target_of


@dataclass(frozen=True)
class ColumnProfile:
    """Statistics of one column (a dotted path, as in ``Demand.column``) of ``type`` (the
    Catalyst type name: ``string``, ``long``, ``date``, ``decimal(10,2)``...).

    ``ranges`` holds one ``(min, max)`` per profiled file as Python values of the column's type
    (int, float, str, ``datetime.date``, naive UTC ``datetime.datetime``, bool,
    ``decimal.Decimal``), None where unknown. ``distinct_per_file`` is the mean number of
    distinct non-null values of a whole file (estimated from a row sample), ``distinct_total``
    the number of distinct values over all the profiled files' samples together (a lower bound
    of the column's distinct values; None when not gathered). ``text_sample`` holds sampled
    string values per profiled file; ``avg_bytes`` the mean bytes of a value.
    """

    column: str
    type: str
    ranges: tuple[tuple[Any, Any] | None, ...]
    distinct_per_file: float | None = None
    rows_per_file: float | None = None
    text_sample: tuple[tuple[str, ...], ...] = ()
    avg_bytes: float | None = None
    distinct_total: float | None = None


@dataclass(frozen=True)
class SourceProfile:
    """Statistics of one source (``source`` as in ``Demand.source``): its format, file count
    and bytes, the profiled columns (those the demand names) by name, its top-level columns and
    its partition columns."""

    source: str
    format: str
    files: int
    bytes: int
    columns: Mapping[str, ColumnProfile] = field(default_factory=dict)
    all_columns: tuple[str, ...] = ()
    partition_columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExistingIndex:
    """An index that exists: created by the engine (``origin`` "engine") or by a user
    ("user"), holding ``bytes`` of index data (its whole size, for each of the sketches of
    one data-skipping index)."""

    name: str
    kind: str
    source: str
    columns: tuple[str, ...]
    origin: str
    bytes: int = 0

    @property
    def target(self) -> Target:
        """What the index serves, as instructions name it (:func:`target_of`)."""
        return target_of(self.source, self.kind, self.columns)
