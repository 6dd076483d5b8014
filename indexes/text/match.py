"""The text-index rule: which files of a filtered relation provably hold no row that a string
predicate on the indexed column (LIKE, contains, startswith, endswith, rlike, =, IN, also under
lower/upper) accepts. Pure Python over :mod:`indexes.plan` trees; the shards are consulted
through a reader, and the JVM only swaps the relation's file list for the kept files.

Each such predicate becomes a :class:`~indexes.skipping.ir.Sketched` boolean in the pruning IR
of the data-skipping rule, whose per-file value is "may be true" where the index finds a row
that may match and "false" elsewhere; the rest of the filter (other conjuncts, OR, NOT, nulls,
expressions that may raise) is judged by the same evaluator, so a file is dropped only when the
whole filter can give true on none of its rows and raise on none.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from indexes.description import SourceDescription
from indexes.plan import Expr, PlanNode, output_attributes
from indexes.skipping import evaluator, ir
from indexes.skipping.match import (Pruning, filter_condition, kept_row_groups, read_in_part,
                                    source_problem)
from indexes.skipping.stats import ColumnStats, FileStats
from indexes.skipping.store import FileEntry, RowGroup
from indexes.source import NotApplicable, covered_files
from indexes.text import literals as L

_CASE_MAPPINGS = ("Lower", "Upper")


@dataclass(frozen=True)
class TextPruning(Pruning):
    """The files a text index keeps, with the literals it looked up for explain."""

    literals: tuple[str, ...] = ()
    frequent: tuple[str, ...] = ()       # literals frequent enough that nothing was looked up

    def describe(self) -> str:
        looked = ", ".join(repr(x) for x in self.literals) or "(none)"
        text = (f"{self.index.name}: text index, {len(self.kept)} of {self.total_files} files "
                f"kept ({self.skipped} skipped){self.row_groups_read()}, {self.kept_bytes} of "
                f"{self.total_bytes} bytes; "
                f"{self.unindexed} files not in the index (always read); literals: {looked}")
        if self.frequent:
            text += f"; frequent, files kept without lookup: {', '.join(repr(x) for x in self.frequent)}"
        return text


def _string(expr: Expr) -> str | None:
    if expr.cls == "Literal" and expr.fields.get("dataType") == "string":
        return expr.fields.get("value")
    return None


def _subject(expr: Expr, column_key: str, name_of: ir.NameOf) -> bool:
    """Whether ``expr`` is the indexed column, possibly under lower()/upper()."""
    while expr.cls in _CASE_MAPPINGS and len(expr.children) == 1:
        expr = expr.children[0]
    return ir.expr_type(expr) == "string" and ir.expression_key(expr, name_of) == column_key


def requirement(expr: Expr, column_key: str, name_of: ir.NameOf) -> L.Requirement | None:
    """What a row must hold for the predicate ``expr`` on the indexed column to be true, or
    None when ``expr`` is no such predicate (or one the index cannot read)."""
    cls, kids = expr.cls, expr.children
    if cls in ("EqualTo", "EqualNullSafe") and len(kids) == 2:
        for subject, other in (kids, kids[::-1]):
            value = _string(other)
            if value is not None and _subject(subject, column_key, name_of):
                return L.equals(value)
        return None
    if cls == "In" and kids and _subject(kids[0], column_key, name_of):
        values = [_string(k) for k in kids[1:]]
        if not all(v is not None or (k.cls == "Literal" and k.fields.get("value") is None)
                   for v, k in zip(values, kids[1:])):
            return None
        return L.any_of([L.equals(v) for v in values if v is not None])
    if len(kids) != 2 or not _subject(kids[0], column_key, name_of):
        return None
    text = _string(kids[1])
    if text is None:
        return None
    if cls == "Like":
        return L.like(text, expr.fields.get("escapeChar") or "\\")
    if cls == "RLike":
        return L.regex(text)
    return {"Contains": L.contains, "StartsWith": L.starts_with,
            "EndsWith": L.ends_with}.get(cls, lambda _: None)(text)


def predicates(conditions: list[Expr], column_key: str, name_of: ir.NameOf) -> dict[str, L.Requirement]:
    """The text predicates in the filter, by expression key, with what they require."""
    found: dict[str, L.Requirement] = {}
    for tree in conditions:
        for e in tree.walk():
            req = requirement(e, column_key, name_of)
            key = ir.expression_key(e, name_of) if req is not None else None
            if key is not None and req != L.ANYTHING:
                found[key] = req
    return found


#: The most documents (rows, or groups of rows) of a literal whose row groups are looked up
#: (beyond, its files are read whole): collecting their positions is planning time.
ROW_GROUP_DOCS = 10_000


def _kept_row_groups(condition: Any, entry: Any, reader: Any, looked_up: dict[str, L.Requirement],
                     kept: set[str]) -> dict[str, tuple[RowGroup, ...]]:
    """For each ``kept`` indexed file the index knows several row groups of, the row groups
    that may hold a row the filter accepts (see :func:`indexes.skipping.match.kept_row_groups`),
    judged from the rows of the ``looked_up`` literals (each unknown where more than
    ROW_GROUP_DOCS documents hold it)."""
    layouts = {p: g for p, g in entry.content.get("rowGroups", {}).items() if p in kept}
    if not layouts or not looked_up:
        return {}
    ranges = {key: reader.matching_ranges(req, ROW_GROUP_DOCS) for key, req in looked_up.items()}
    ranges = {key: found for key, found in ranges.items() if found is not None}
    if not ranges:
        return {}
    judged = {}
    for path, layout in layouts.items():
        meets = {key: [_meets(found.get(path, []), first,
                              layout[i + 1][0] if i + 1 < len(layout) else None)
                       for i, (first, _, _) in enumerate(layout)]
                 for key, found in ranges.items()}
        if all(all(met) for met in meets.values()):
            continue   # each row group may hold each literal: the filter can skip none of them
        groups = tuple(RowGroup(start, end, FileStats(None, {
            key: ColumnStats("boolean", False, met[i]) for key, met in meets.items()}))
            for i, (_, start, end) in enumerate(layout))
        judged[path] = FileEntry(0, 0, FileStats(None, {}), groups)
    return kept_row_groups(condition, judged, list(judged))


def _meets(ranges: list[tuple[int, int]], first: int, end: int | None) -> bool:
    """Whether one of the ``ranges`` (first, last) meets rows ``[first, end)`` (``end`` None:
    unbounded)."""
    return any(last >= first and (end is None or start < end) for start, last in ranges)


def _shown(req: L.Requirement) -> list[str]:
    if isinstance(req, L.Has):
        return [req.text.replace(L.START, "^").replace(L.END, "$")]
    return [x for p in req.parts for x in _shown(p)]


def evaluate(relation: PlanNode, source: SourceDescription, entry: Any, reader: Any, session_tz: str,
             ansi: bool) -> TextPruning | NotApplicable:
    """Decides which files of ``relation`` (described with its files in ``source``) the text
    index ``entry`` keeps; ``reader`` answers which files may hold a row meeting a requirement."""
    def no(code: str, reason: str) -> NotApplicable:
        return NotApplicable(entry, code, reason)

    problem = source_problem(relation, source, entry)
    if problem:
        return no(*problem)
    if entry.config.get("unicodeVersion") != L.UNICODE_VERSION:
        return no("SOURCE_CHANGED", f"the index folded case with Unicode "
                  f"{entry.config.get('unicodeVersion')}, this Python has {L.UNICODE_VERSION}")
    conditions = filter_condition(relation)
    if conditions is None:
        return no("NO_FILTER", "the source is not filtered directly")
    names = {a.expr_id: a.fields["name"] for a in output_attributes(relation)}
    found = predicates(conditions, entry.config["key"], names.get)
    if not found:
        return no("NO_TEXT_PREDICATE",
                  f"the filter has no LIKE, contains, startswith, endswith, rlike, = or IN on "
                  f"'{entry.config['column']}' with a literal of 3 or more characters the index can use")
    keys = frozenset(found)
    condition = ir.translate_all(conditions, names.get, set(keys), session_tz, ansi, trusted=keys)
    matches, literals, frequent, looked_up = {}, [], [], []
    for key, req in found.items():
        matches[key], looked, kept_whole = reader.may_match(req)
        (literals if looked or not kept_whole else frequent).extend(_shown(req))
        if looked and not kept_whole:
            looked_up.append(key)
    indexed = {f.path: (f.size, f.mtime) for f in covered_files(entry)}
    files = source.files or ()
    kept: list[str] = []
    total_bytes = unindexed = 0
    for f in files:
        path = f.path
        total_bytes += f.size
        if indexed.get(path) != (f.size, f.mtime):
            unindexed += 1
        else:
            stats = FileStats(None, {k: ColumnStats("boolean", False, path in m)
                                     for k, m in matches.items()})
            if not evaluator.may_match(condition, stats):
                continue
        kept.append(path)
    current = {f.path for f in files if indexed.get(f.path) == (f.size, f.mtime)}
    kept, groups, kept_bytes = read_in_part(
        kept, _kept_row_groups(condition, entry, reader, {k: found[k] for k in looked_up},
                               current.intersection(kept)),
        {f.path: f.size for f in files})
    result = TextPruning(entry, kept, len(files), total_bytes, kept_bytes, unindexed,
                         condition, row_groups=groups, literals=tuple(dict.fromkeys(literals)),
                         frequent=tuple(dict.fromkeys(frequent)))
    if result.skipped == 0 and not groups:
        return no("NO_FILE_SKIPPED",
                  f"the filter may match rows in every file ({len(files)} files, {unindexed} not "
                  f"in the index; literals looked up: {', '.join(result.literals) or 'none'}; "
                  f"frequent: {', '.join(result.frequent) or 'none'})")
    return result
