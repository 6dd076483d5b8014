"""Filter rule for covering indexes: decides, from the plan alone, whether an index can answer a
``Filter`` (optionally under a ``Project``) over a file relation, and how its columns map.

Pure Python over :mod:`indexes.plan` trees; the JVM only carries out the decision.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from indexes.covering.config import IndexColumn
from indexes.description import SourceDescription
from indexes.kind import HybridScan
from indexes.plan import (
    PlanNode,
    attribute_use,
    conjuncts,
    output_attributes,
    plan_references,
    references,
)
from indexes.source import (
    NotApplicable,
    relation_schema,
    source_bytes,
    source_changes,
    source_mismatch,
)


@dataclass(frozen=True)
class Applicable:
    """The index can answer the relation: column specs for the JVM, in index column order."""

    index: Any
    specs: list[str]
    restore_order: bool
    point_lookup: bool = False   # the filter compares the first indexed column with literals
    # the lookup's buckets are chosen from its literals, and the index read as plain files:
    # its only indexed column is a top-level one no operator of the plan keys on
    bucket_lookup: bool = False
    appended: tuple[str, ...] = ()   # source files read next to the index (hybrid scan)
    deleted_ids: tuple[int, ...] = ()   # lineage ids of files whose rows are filtered out
    rule: str = "filter"     # the rule that applies it: "filter" or "join"
    note: str = ""           # why another rule did not apply, for whyNot
    applicable = True

    def explain_line(self) -> str:
        """explain's line for the index used."""
        return f"{self.index.name}: {self.index.content.get('path')}"

    def applied_reason(self) -> str:
        """whyNot's sentence for the index used."""
        return self.describe()

    def describe(self) -> str:
        """How the index is used, for whyNot."""
        how = ("join rule: both sides read bucketed on the join keys" if self.rule == "join"
               else "filter rule")
        if self.appended:
            how += f"; hybrid scan: {len(self.appended)} appended source files read next to it"
        if self.deleted_ids:
            how += (f"; hybrid scan: rows of {len(self.deleted_ids)} deleted or modified source "
                    "files filtered out by lineage")
        deltas = sum(f[1] is None for f in self.index.content.get("files") or [])
        if deltas:
            how += (f"; {deltas} delta files of incremental refreshes read next to its buckets "
                    "until optimizeIndex folds them in")
        return f"the index is used ({how}{'; ' + self.note if self.note else ''})"

    @property
    def size(self) -> int:
        return int(self.index.content.get("sizeInBytes", 0))

    @property
    def cost(self) -> int:
        """The bytes a query served by this verdict reads at most."""
        return self.size


def index_columns(cfg: dict) -> tuple[list[IndexColumn], list[IndexColumn]]:
    """(indexed, included) columns of a covering index's config (as in its log entry)."""
    return ([IndexColumn.from_json(c) for c in cfg["indexedColumns"]],
            [IndexColumn.from_json(c) for c in cfg["includedColumns"]])


def normalize(path: tuple[str, ...], case_sensitive: bool) -> tuple[str, ...]:
    """A column path as the index rules compare them (lower-cased unless case-sensitive)."""
    return path if case_sensitive else tuple(p.lower() for p in path)


LINEAGE_COLUMN = "_data_file_id"


@dataclass(frozen=True)
class SourceDelta:
    """How the source differs from the files an index holds: source files to read next to it,
    and the lineage ids of the files whose rows to filter out of it."""

    appended: tuple[str, ...] = ()
    deleted_ids: tuple[int, ...] = ()


def _files_changed(found: tuple[list[Any], list[Any]] | None) -> str:
    """Why the index's files are not the relation's, counted when their difference is known."""
    if found is None:
        return "the source files changed since the index was built; refresh the index"
    return (f"the source files changed since the index was built ({len(found[0])} appended or "
            f"modified, {len(found[1])} deleted); refresh the index")


def _source_state(relation: PlanNode, source: SourceDescription, entry: Any,
                  hybrid: HybridScan | None) -> NotApplicable | SourceDelta:
    """Why the index cannot stand for ``relation``'s source, or what hybrid scan must do for
    it to (nothing when the index holds exactly the source's files)."""
    def changed(reason: str) -> NotApplicable:
        return NotApplicable(entry, "SOURCE_CHANGED", reason)

    if relation.fields.get("isStreaming"):
        return NotApplicable(entry, "STREAMING_SOURCE", "the source is a stream")
    mismatch = source_mismatch(entry.source, source, relation_schema(relation), check_files=False)
    if mismatch:
        return changed(mismatch)
    pending = entry.content.get("quickRefresh")
    if entry.source.fingerprint == source.fingerprint and not pending:
        return SourceDelta()
    found = source_changes(entry, source)
    if found is not None and not found[0] and not found[1]:
        return SourceDelta()   # the same files (fingerprinted by an older version's scheme)
    if hybrid is None or found is None:
        if pending and hybrid is None:
            return changed("the index was refreshed with mode='quick', whose changes are read by "
                           "hybrid scan, and spark.accelerator.index.hybridScan.enabled is "
                           "false; refresh it with mode='incremental' or 'full'")
        return changed(_files_changed(found))
    appended, deleted = found
    total = source_bytes(entry, source)
    hidden = [f for f in appended if f.deletion_vector is not None]
    if hidden:   # hybrid scan reads appended files through a pruned list, bypassing them
        return changed(
            f"{len(hidden)} changed files of the table carry {source.file_deletes}, which "
            "hybrid scan cannot apply; refresh the index")
    ids: tuple[int, ...] = ()
    if deleted:
        lineage = entry.content.get("fileIds")
        if not entry.config.get("lineage") or lineage is None:
            return changed(
                f"{len(deleted)} indexed source files were deleted or modified, and the index "
                "has no lineage column to filter their rows out (create it with "
                f"spark.accelerator.index.lineage.enabled=true); refreshIndex('{entry.name}', "
                "mode='full') brings it up to date")
        indexed_bytes = total - sum(f.size for f in appended) + sum(f.size for f in deleted)
        share = sum(f.size for f in deleted) / max(1, indexed_bytes)
        if share > hybrid.max_deleted_ratio:
            return changed(
                f"{len(deleted)} deleted or modified files held {share:.0%} of the indexed "
                "bytes, over spark.accelerator.index.hybridScan.maxDeletedRatio "
                f"({hybrid.max_deleted_ratio:g}); refresh the index")
        ids = tuple(sorted({int(lineage[f.path]) for f in deleted}))
    share = sum(f.size for f in appended) / max(1, total)
    if share > hybrid.max_appended_ratio:
        return changed(
            f"{len(appended)} appended files hold {share:.0%} of the source's bytes, over "
            f"spark.accelerator.index.hybridScan.maxAppendedRatio ({hybrid.max_appended_ratio:g}); "
            "refresh the index")
    return SourceDelta(tuple(f.path for f in appended), ids)


def needs_all_columns(relation: PlanNode) -> bool:
    """Whether the plan above ``relation`` (through its Filters) uses its whole output, in
    order: no Project selects from it."""
    node = relation.parent
    while node is not None and node.cls == "Filter":
        node = node.parent
    return node is None or node.cls != "Project"


def _columns(root: PlanNode, relation: PlanNode, entry: Any,
             case_sensitive: bool) -> Applicable | NotApplicable:
    """Whether the index holds every column of ``relation`` the plan ``root`` needs; if so, the
    column specs that map the index's columns onto the relation's attributes."""
    attrs = output_attributes(relation)
    by_id = {a.expr_id: a for a in attrs}
    by_name = {normalize((a.fields["name"],), case_sensitive)[0]: a for a in attrs}
    indexed, included = index_columns(entry.config)
    columns = indexed + included
    col_keys = [normalize(c.path, case_sensitive) for c in columns]
    needed = {normalize((by_id[r.expr_id].fields["name"],) + r.path, case_sensitive)
              for r in plan_references(root, set(by_id), skip=relation)}
    restore_order = needs_all_columns(relation)
    if restore_order:
        needed |= {normalize((a.fields["name"],), case_sensitive) for a in attrs}
    missing = sorted(".".join(p) for p in needed
                     if not any(p[:len(k)] == k for k in col_keys))
    if missing:
        return NotApplicable(entry, "MISSING_COLUMNS",
                             f"the query needs columns the index does not have: {', '.join(missing)}")
    specs = []
    for col, key in zip(columns, col_keys):
        attr = by_name.get(key[0])
        if attr is None:
            return NotApplicable(entry, "MISSING_COLUMNS", f"the source has no column '{col.path[0]}'")
        if len(col.path) == 1:
            specs.append(f"={attr.expr_id}")
        else:
            specs.append("~" + "\u0001".join([str(attr.expr_id), *col.path[1:]]))
    if entry.config.get("lineage"):
        specs.append("#")   # the lineage column, last in the index
    return Applicable(entry, specs, restore_order)


def coverage(root: PlanNode, relation: PlanNode, source: SourceDescription, entry: Any,
             case_sensitive: bool, hybrid: HybridScan | None = None) -> Applicable | NotApplicable:
    """Whether covering index ``entry`` can stand for ``relation`` in the plan ``root``,
    whatever filters it: the source's files (or, with ``hybrid``, a change hybrid scan
    handles), every needed column held."""
    state = _source_state(relation, source, entry, hybrid)
    if isinstance(state, NotApplicable):
        return state
    found = _columns(root, relation, entry, case_sensitive)
    if isinstance(found, NotApplicable):
        return found
    return replace(found, appended=state.appended, deleted_ids=state.deleted_ids)


def evaluate(root: PlanNode, relation: PlanNode, source: SourceDescription, entry: Any,
             case_sensitive: bool, hybrid: HybridScan | None = None) -> Applicable | NotApplicable:
    """Filter rule: whether covering index ``entry`` can replace ``relation``, filtered on the
    index's first indexed column, in the plan ``root``; with ``hybrid``, also when files were
    appended to the source (read next to the index)."""
    state = _source_state(relation, source, entry, hybrid)
    if isinstance(state, NotApplicable):
        return state
    parent = relation.parent
    if parent is None or parent.cls != "Filter":
        return NotApplicable(entry, "NO_FILTER", "the source is not filtered directly (the "
                             "filter rule needs a Filter over the scan)")
    attrs = {a.expr_id: a for a in output_attributes(relation)}
    indexed, _ = index_columns(entry.config)
    filter_refs = {normalize((attrs[r.expr_id].fields["name"],) + r.path, case_sensitive)
                   for tree in parent.all_exprs() for r in references(tree, set(attrs))}
    if normalize(indexed[0].path, case_sensitive) not in filter_refs:
        return NotApplicable(entry, "NO_FIRST_INDEXED_COLUMN_IN_FILTER",
                             f"the filter does not use the first indexed column '{indexed[0].dotted}'")
    found = _columns(root, relation, entry, case_sensitive)
    if isinstance(found, NotApplicable):
        return found
    first = normalize(indexed[0].path, case_sensitive)
    lookup = point_lookup(relation, first, case_sensitive)
    return replace(found, appended=state.appended, deleted_ids=state.deleted_ids,
                   point_lookup=lookup,
                   bucket_lookup=lookup and len(indexed) == 1 and len(first) == 1
                   and not keyed_on(root, relation, first[0], case_sensitive))


#: per operator, the expressions it keys on: Spark may spare it a shuffle of an input bucketed
#: on the columns they read
_KEYED_FIELDS = {"Join": "condition", "Aggregate": "groupingExpressions",
                 "Window": "partitionSpec", "RepartitionByExpression": "partitionExpressions"}


def keyed_on(root: PlanNode, relation: PlanNode, column: str, case_sensitive: bool) -> bool:
    """Whether an operator of the plan ``root`` keys on ``relation``'s top-level column
    ``column`` (normalized): a join condition, a grouping, a window partition or a
    repartition reads it."""
    ids = {a.expr_id for a in output_attributes(relation)
           if normalize((a.fields["name"],), case_sensitive)[0] == column}
    return any(next(references(tree, ids), None) is not None
               for node in root.walk() if node.cls in _KEYED_FIELDS
               for tree in node.exprs.get(_KEYED_FIELDS[node.cls], []))


def point_lookup(relation: PlanNode, first: tuple[str, ...], case_sensitive: bool) -> bool:
    """Whether the filters right above ``relation`` compare the column ``first`` (a normalized
    path) with literals (``=``, ``<=>``, ``IN``): an index sorted on it is read by that key."""
    names = {a.expr_id: a.fields["name"] for a in output_attributes(relation)}
    node = relation.parent
    while node is not None and node.cls == "Filter":
        for conjunct in conjuncts(node.exprs["condition"][0]):
            if conjunct.cls not in ("EqualTo", "EqualNullSafe", "In", "InSet"):
                continue
            first_child, *others = conjunct.children
            if conjunct.cls != "In" and others and first_child.cls == "Literal":
                first_child, others = others[0], [first_child]   # literal = column
            use = attribute_use(first_child)
            if (use is not None and use[0] in names
                    and all(o.cls == "Literal" for o in others)
                    and normalize((names[use[0]], *use[1]), case_sensitive) == first):
                return True
        node = node.parent
    return False


def choose(results: list[Applicable | NotApplicable]) -> Applicable | None:
    """The applicable index with the smallest data, if any; indexes whose first column the
    filter compares with literals come first (they are read by that key, not whole)."""
    applicable = [r for r in results if isinstance(r, Applicable)]
    return min(applicable, key=lambda r: (not r.point_lookup, r.size)) if applicable else None
