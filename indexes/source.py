"""What an index records of its source, and whether a relation still reads that source."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from indexes.plan import PlanNode, output_attributes


@dataclass(frozen=True)
class NotApplicable:
    """Why the index cannot answer the relation: a stable code and a sentence for the user."""

    index: Any
    code: str
    reason: str


def covered_files(entry: Any) -> list[list[Any]]:
    """The source files (``[path, size, mtime]``) whose rows an index's data holds: those its
    log records, less the files a quick refresh recorded as appended, plus those it recorded
    as deleted (a quick refresh updates the log, not the data)."""
    pending = entry.content.get("quickRefresh") or {}
    appended = {tuple(f) for f in pending.get("appended", [])}
    files = [f for f in entry.source.get("files", []) if tuple(f) not in appended]
    return files + [list(f) for f in pending.get("deleted", [])]


def file_changes(entry: Any, files: list[list[Any]]) -> tuple[list[list[Any]], list[list[Any]]]:
    """(appended, deleted): the ``files`` (a source's current ``[path, size, mtime]`` lists)
    the index's data does not hold, and the files it holds that are no longer there (a
    modified file is in both), each sorted."""
    covered = {tuple(f) for f in covered_files(entry)}
    current = {tuple(f) for f in files}
    return ([list(f) for f in sorted(current - covered)],
            [list(f) for f in sorted(covered - current)])


def relation_schema(relation: PlanNode) -> list[list[Any]]:
    """The relation's output as [name, type] pairs (what an index records of its source)."""
    return [[a.fields["name"], a.fields["dataType"]] for a in output_attributes(relation)]


def read_options(source: dict) -> dict:
    """The options a source is read with, without its paths (those are its files)."""
    return {k: v for k, v in (source.get("options") or {}).items()
            if k.lower() not in ("path", "paths")}


def _options(source: dict) -> dict:
    return {k.lower(): v for k, v in read_options(source).items()}


def source_mismatch(recorded: dict, current: dict, current_schema: list,
                    check_files: bool = True) -> str | None:
    """Why ``current`` (a relation's description) is not the source the index was built from;
    without ``check_files`` only the way it is read counts, not which files it holds."""
    if recorded.get("format") != current.get("format"):
        return f"the source format is {current.get('format')}, the index was built over {recorded.get('format')}"
    if _options(recorded) != _options(current):
        return "the source is read with other options than when the index was built"
    if recorded.get("readSettings") != current.get("readSettings"):
        changed = sorted(k for k in set(recorded.get("readSettings") or {}) | set(current.get("readSettings") or {})
                         if (recorded.get("readSettings") or {}).get(k) != (current.get("readSettings") or {}).get(k))
        return ("settings that change what is read from files differ from when the index was "
                f"built: {', '.join(changed)}")
    if recorded.get("schema") != current_schema:
        return "the source schema differs from the one the index was built over"
    if check_files and recorded.get("fingerprint") != current.get("fingerprint"):
        files = current.get("files")
        if files is not None:
            old = {tuple(f) for f in recorded.get("files", [])}
            new = {tuple(f) for f in files}
            return (f"the source files changed since the index was built "
                    f"({len(new - old)} appended or modified, {len(old - new)} deleted); refresh the index")
        return "the source files changed since the index was built; refresh the index"
    return None
