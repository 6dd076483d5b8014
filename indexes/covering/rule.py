"""Filter rule for covering indexes: decides, from the plan alone, whether an index can answer a
``Filter`` (optionally under a ``Project``) over a file relation, and how its columns map.

Pure Python over :mod:`indexes.plan` trees; the JVM only carries out the decision.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from indexes.covering.config import IndexColumn
from indexes.plan import PlanNode, Reference, output_attributes, plan_references, references
from indexes.source import NotApplicable, relation_schema, source_mismatch


@dataclass(frozen=True)
class Applicable:
    """The index can answer the relation: column specs for the JVM, in index column order."""

    index: Any
    specs: list[str]
    restore_order: bool

    @property
    def size(self) -> int:
        return int(self.index.content.get("sizeInBytes", 0))


def index_columns(cfg: dict) -> tuple[list[IndexColumn], list[IndexColumn]]:
    """(indexed, included) columns of a covering index's config (as in its log entry)."""
    return ([IndexColumn.from_json(c) for c in cfg["indexedColumns"]],
            [IndexColumn.from_json(c) for c in cfg["includedColumns"]])


def _norm(path: tuple[str, ...], case_sensitive: bool) -> tuple[str, ...]:
    return path if case_sensitive else tuple(p.lower() for p in path)


def evaluate(root: PlanNode, relation: PlanNode, source: dict, entry: Any,
             case_sensitive: bool) -> Applicable | NotApplicable:
    """Decides whether covering index ``entry`` can replace ``relation`` in the plan ``root``."""
    def no(code: str, reason: str) -> NotApplicable:
        return NotApplicable(entry, code, reason)

    if relation.fields.get("isStreaming"):
        return no("STREAMING_SOURCE", "the source is a stream")
    mismatch = source_mismatch(entry.source, source, relation_schema(relation))
    if mismatch:
        return no("SOURCE_CHANGED", mismatch)
    parent = relation.parent
    if parent is None or parent.cls != "Filter":
        return no("NO_FILTER", "the source is not filtered directly (the filter rule needs a Filter over the scan)")

    attrs = output_attributes(relation)
    by_id = {a.expr_id: a for a in attrs}
    by_name = {_norm((a.fields["name"],), case_sensitive)[0]: a for a in attrs}
    indexed, included = index_columns(entry.config)
    columns = indexed + included
    col_keys = [_norm(c.path, case_sensitive) for c in columns]

    def full_path(ref: Reference) -> tuple[str, ...]:
        return _norm((by_id[ref.expr_id].fields["name"],) + ref.path, case_sensitive)

    filter_refs = {full_path(r) for tree in parent.all_exprs()
                   for r in references(tree, set(by_id))}
    if col_keys[0] not in filter_refs:
        return no("NO_FIRST_INDEXED_COLUMN_IN_FILTER",
                  f"the filter does not use the first indexed column '{indexed[0].dotted}'")

    needed = {full_path(r) for r in plan_references(root, set(by_id), skip=relation)}
    restore_order = parent.parent is None or parent.parent.cls != "Project"
    if restore_order:
        needed |= {_norm((a.fields["name"],), case_sensitive) for a in attrs}
    missing = sorted(".".join(p) for p in needed
                     if not any(p[:len(k)] == k for k in col_keys))
    if missing:
        return no("MISSING_COLUMNS", f"the query needs columns the index does not have: {', '.join(missing)}")

    specs = []
    for col, key in zip(columns, col_keys):
        attr = by_name.get(key[0])
        if attr is None:
            return no("MISSING_COLUMNS", f"the source has no column '{col.path[0]}'")
        if len(col.path) == 1:
            specs.append(f"={attr.expr_id}")
        else:
            specs.append("~" + "\u0001".join([str(attr.expr_id), *col.path[1:]]))
    return Applicable(entry, specs, restore_order)


def choose(results: list[Applicable | NotApplicable]) -> Applicable | None:
    """The applicable index with the smallest data, if any."""
    applicable = [r for r in results if isinstance(r, Applicable)]
    return min(applicable, key=lambda r: r.size) if applicable else None
