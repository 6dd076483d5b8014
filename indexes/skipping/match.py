"""The data-skipping rule: which files of a filtered relation a data-skipping index proves
hold no matching row. Pure Python over :mod:`indexes.plan` trees; the JVM only swaps the
relation's file list for the kept files."""
from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from indexes.description import SourceDescription
from indexes.plan import PlanNode, output_attributes
from indexes.skipping import evaluator, ir, prefilter, vectorized
from indexes.skipping.build import ResolvedSketch, sketch_specs
from indexes.skipping.join_keys import JoinKeys, JoinNotUsed
from indexes.skipping.mismatch import mismatch_reason
from indexes.skipping.stats import ColumnStats, FileStats
from indexes.skipping.store import FileEntry, RowGroup
from indexes.skipping.table import JudgedFiles, Listing, StatsTable
from indexes.source import NotApplicable, relation_schema, source_mismatch


@dataclass(frozen=True)
class Pruning:
    """The files of a relation a data-skipping index keeps (the others provably hold no row
    the filter accepts), with what explain shows."""

    index: Any
    kept: list[str]
    total_files: int
    total_bytes: int
    kept_bytes: int
    unindexed: int                      # files the index has no (current) statistics for
    condition: Any = field(repr=False, default=None)   # the IR the files were judged by
    judged: Mapping[str, FileEntry] = field(repr=False, default_factory=dict)
    #: of kept files whose row groups the index describes, those that may match, when not all
    row_groups: dict[str, tuple[RowGroup, ...]] = field(repr=False, default_factory=dict)
    #: the joins whose other side's keys pruned too, each with its condition (IR)
    joins: tuple[tuple[JoinKeys, Any], ...] = field(repr=False, default=())
    unused_joins: str = ""              # "; <join> not used: <why>" for each join not used
    applicable = True

    @property
    def skipped(self) -> int:
        return self.total_files - len(self.kept)

    @property
    def cost(self) -> int:
        """The bytes a query served by this verdict reads."""
        return self.kept_bytes

    def explain_line(self) -> str:
        """explain's line for the index used."""
        return self.describe()

    def applied_reason(self) -> str:
        """whyNot's sentence for the index used."""
        return "the index is used"

    def describe(self) -> str:
        """One line for explain: what was skipped, and by which sketches."""
        sketches = ", ".join(f"{k}: {n}" for k, n in self.by_sketch().items())
        return (f"{self.index.name}: data skipping, {len(self.kept)} of {self.total_files} files "
                f"kept ({self.skipped} skipped){self.row_groups_read()}, {self.kept_bytes} of "
                f"{self.total_bytes} bytes; {self.unindexed} files not in the index (always "
                f"read); files each sketch alone skips: {sketches}{self.joins_line()}"
                f"{self.unused_joins}")

    def joins_line(self) -> str:
        """For explain: how many files each join's other side alone skips ("" if none)."""
        return "".join(
            f"; files the {keys.describe()} alone skips: "
            f"{sum(1 for e in self.judged.values() if not evaluator.may_match(c, e.stats))}"
            for keys, c in self.joins)

    def row_groups_read(self) -> str:
        """For explain: how many row groups of the files read in part are read ("" if none)."""
        if not self.row_groups:
            return ""
        return (f", {sum(len(g) for g in self.row_groups.values())} row groups read in "
                f"{len(self.row_groups)} files")

    def row_group_lines(self) -> str:
        """The kept row groups for the JVM: per file, ``path \t start:end,start:end``."""
        return "\n".join(f"{p}\t" + ",".join(f"{g.start}:{g.end}" for g in groups)
                         for p, groups in self.row_groups.items())

    def by_sketch(self) -> dict[str, int]:
        """For each sketch of the index, how many files it alone would skip."""
        out = {}
        for s in sketches_of(self.index.config):
            def only(stats: FileStats, s=s) -> FileStats:
                return FileStats(stats.rows, {k: _restrict(c, s.kind) for k, c in stats.columns.items()
                                              if k == s.key})
            out[f"{s.kind}({s.expression})"] = sum(
                1 for e in self.judged.values()
                if not evaluator.may_match(self.condition, only(e.stats)))
        return out


def _restrict(stats: ColumnStats, kind: str) -> ColumnStats:
    if kind == "MinMax":
        return replace(stats, values=None, bloom=None)
    if kind == "ValueList":
        return replace(stats, min=None, max=None, bloom=None)
    return replace(stats, min=None, max=None, values=None, null_count=None)


def sketches_of(config: dict) -> list[ResolvedSketch]:
    """The resolved sketches recorded in a data-skipping index's config (its log entry)."""
    return [ResolvedSketch.from_json(d) for d in config["sketches"]]


def built_ansi(entry: Any) -> bool:
    """The spark.sql.ansi.enabled the statistics of ``entry`` were computed under (indexes of
    before recorded it in their config)."""
    return bool(entry.content.get("ansi", entry.config.get("ansi")))


def ansi_difference(entry: Any, ansi: bool) -> str | None:
    """Why statistics computed under ``entry``'s ANSI setting cannot serve a session whose
    spark.sql.ansi.enabled is ``ansi`` (a cast or arithmetic that raises in one mode gives null
    or a value in the other), naming the Spark version the index was built under: ANSI mode is
    on by default from Spark 4.0 and off in 3.5. None when they agree."""
    built = built_ansi(entry)
    if built == ansi:
        return None
    version = entry.source.spark_version
    under = f" (under Spark {version}" if version else " ("
    return (f"spark.sql.ansi.enabled is {str(ansi).lower()} in this session but the index's "
            f"statistics were computed with {str(built).lower()}{under}; ANSI mode is on by "
            f"default from Spark 4.0 and off in Spark 3.5)")


def filter_condition(relation: PlanNode) -> Any:
    """The conditions of the Filters directly above ``relation`` as one list, or None."""
    conditions = []
    node = relation.parent
    while node is not None and node.cls == "Filter":
        conditions.extend(node.exprs.get("condition", []))
        node = node.parent
    return conditions or None


def source_problem(relation: PlanNode, source: SourceDescription, entry: Any) -> tuple[str, str] | None:
    """Why a file-pruning index ``entry`` cannot judge ``relation``'s files at all, if it
    cannot: (reason code, reason) for a stream or a source other than the index's (its files
    may differ: those the index does not know are read)."""
    if relation.fields.get("isStreaming"):
        return "STREAMING_SOURCE", "the source is a stream"
    mismatch = source_mismatch(entry.source, source, relation_schema(relation), check_files=False)
    return ("SOURCE_CHANGED", mismatch) if mismatch else None


def evaluate(relation: PlanNode, source: SourceDescription, entry: Any, table: StatsTable,
             session_tz: str, ansi: bool, joins: tuple[Any, ...] = ()) -> Pruning | NotApplicable:
    """Decides which files of ``relation`` (described with its files in ``source``) the
    data-skipping index ``entry`` (statistics ``table``) keeps: those the filter right above
    the relation and the other sides' keys of the joins above it (``joins``, see
    :class:`indexes.kind.MatchContext`) may match rows of."""
    def no(code: str, reason: str) -> NotApplicable:
        return NotApplicable(entry, code, reason)

    problem = source_problem(relation, source, entry)
    if problem:
        return no(*problem)
    difference = ansi_difference(entry, ansi)
    if difference:
        return no("SOURCE_CHANGED", f"{difference}; refreshIndex('{entry.name}', mode='full') "
                                    "recomputes it under this session's setting")
    conditions = filter_condition(relation)
    names = {a.expr_id: a.fields["name"] for a in output_attributes(relation)}
    keys = {s.key for s in sketch_specs(sketches_of(entry.config))}
    joined = tuple((j, j.condition(ir.translate(j.probe.fact, names.get, keys, session_tz, ansi)))
                   for j in joins if isinstance(j, JoinKeys))
    unused = "".join(f"; {j.describe()}" for j in joins if isinstance(j, JoinNotUsed))
    if conditions is None and not joined:
        return no("NO_FILTER", "the source is not filtered directly" + unused)
    parts = ([ir.translate_all(conditions, names.get, keys, session_tz, ansi)]
             if conditions else []) + [c for _, c in joined]
    condition = functools.reduce(ir.And, parts)
    files = source.files or ()
    listing = table.listing(files)
    kept, entries, sizes = kept_files(condition, table, listing)
    kept, groups, kept_bytes = read_in_part(
        kept, kept_row_groups(condition, entries, kept), sizes)
    total_bytes, unindexed = listing.total_bytes, len(listing.unindexed)
    result = Pruning(entry, kept, len(files), total_bytes, kept_bytes, unindexed, condition,
                     JudgedFiles(table, listing), groups, joined, unused)
    if result.skipped == 0 and not groups:
        mismatch = mismatch_reason(condition, sketches_of(entry.config))
        if mismatch:
            return no("SKETCH_TYPE_MISMATCH", mismatch)
        what = "the filter" + ("".join(f" and the {j.describe()}" for j, _ in joined))
        return no("NO_FILE_SKIPPED",
                  f"{what} may match rows in every file ({len(files)} files, "
                  f"{unindexed} not in the index){unused}")
    return result


def kept_files(condition: Any, table: StatsTable,
               listing: Listing) -> tuple[list[str], dict[str, FileEntry], dict[str, int]]:
    """The files of ``listing`` a filter (IR ``condition``) may match rows of, in listing
    order: those the statistics ``table`` does not describe, and those the evaluator keeps
    among the ones the first pass (:mod:`indexes.skipping.prefilter`) leaves to it (judged
    over the statistics columns at once, :mod:`indexes.skipping.vectorized`, one by one where
    that cannot decide); with the entries of those judged one by one and of the kept ones
    whose row groups the index describes but that are not all kept (the row groups of the
    others are all read), and every kept file's size."""
    import numpy as np

    passing = prefilter.candidates(condition, table)
    judged = listing.judged
    chosen = np.arange(len(judged)) if passing is None else np.flatnonzero(passing[judged])
    order = np.argsort(judged[chosen], kind="stable")      # the table's order, for reading
    chosen = chosen[order]
    files = judged[chosen]
    keep, decided = vectorized.verdicts(condition, table, files)
    wanted = ~decided
    in_groups = np.flatnonzero(keep & decided & table.row_groups(files))
    if len(in_groups):
        wanted[in_groups[~vectorized.whole_files(condition, table, files[in_groups])]] = True
    at = np.flatnonzero(wanted)
    entries = table.entries(files[at], ir.sketched_keys(condition))
    for j in np.flatnonzero(~decided[at]).tolist():
        keep[at[j]] = evaluator.may_match(condition, entries[j].stats)
    kept = np.flatnonzero(keep)
    paths = table.paths(files[kept])
    with_entry = np.flatnonzero(keep[at])
    found = dict(zip(table.paths(files[at[with_entry]]), (entries[j] for j in with_entry.tolist())))
    positions = np.concatenate([listing.judged_positions[chosen[kept]], listing.unindexed_positions])
    named = paths + listing.unindexed
    order = np.argsort(positions, kind="stable")
    in_order = bool((order == np.arange(len(order))).all())      # a listing in table order
    kept = named if in_order else [named[i] for i in order.tolist()]
    sizes = dict(zip(named, listing.sizes[positions].tolist()))
    return kept, found, sizes


def kept_row_groups(condition: Any, judged: dict[str, FileEntry],
                    kept: list[str]) -> dict[str, tuple[RowGroup, ...]]:
    """For each ``kept`` file whose row groups the index describes and some of which provably
    hold no row the filter (IR ``condition``) accepts, the row groups that may (none: the file
    is skipped whole)."""
    out: dict[str, tuple[RowGroup, ...]] = {}
    if not any(e.row_groups for e in judged.values()):
        return out
    for path in kept:
        entry = judged.get(path)
        if entry is None or not entry.row_groups:
            continue
        groups = tuple(g for g in entry.row_groups if evaluator.may_match(condition, g.stats))
        if len(groups) < len(entry.row_groups):
            out[path] = groups
    return out


def read_in_part(kept: list[str], groups: dict[str, tuple[RowGroup, ...]],
                 size: dict[str, int]) -> tuple[list[str], dict[str, tuple[RowGroup, ...]], int]:
    """From the ``kept`` files and the kept row groups of some (:func:`kept_row_groups`): the
    files still read (not those whose row groups are all skipped), the row groups of those read
    in part, and the bytes read (a file's ``size``, or its kept row groups' ranges)."""
    if not groups:
        return kept, groups, sum(map(size.__getitem__, kept))
    kept = [p for p in kept if groups.get(p) != ()]
    groups = {p: g for p, g in groups.items() if g}
    return kept, groups, sum(sum(g.end - g.start for g in groups[p]) if p in groups else size[p]
                             for p in kept)


def choose(results: list[Any]) -> Pruning | None:
    """The data-skipping index that keeps the fewest bytes, if any prunes."""
    prunings = [r for r in results if isinstance(r, Pruning)]
    return min(prunings, key=lambda r: r.kept_bytes) if prunings else None
