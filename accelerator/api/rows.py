"""The facade's result tables: the schema of each DataFrame the public API returns, and the row
of each result value in it (and back, for the rows of ``recommend()`` a user hands to
``applyRecommendations``). The operations below the facade return values; only the facade
turns them into rows, through this module."""
from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Iterable

from indexes import kinds
from indexes.actions import ORIGIN_KEY, OperationResult
from indexes.log import IndexLogEntry, IndexState
from indexes.source import source_name
from rules.instructions import Instruction
from rules.terms import Priority, format_duration, parse_duration, parse_priority
from rules.user_rules import UserRule

if TYPE_CHECKING:   # the result types only: listings use this module without loading them
    from accelerator.cache.policy import Eviction
    from accelerator.cache.warmup import WarmupResult
    from accelerator.engine.advisor import Applied
    from accelerator.operations.cache import CacheStats

# --- index operations and listings ------------------------------------------------------
SUMMARY_SCHEMA = ("index string, operation string, status string, dataVersion int, "
                  "filesRead long, bytesRead long, filesWritten long, bytesWritten long, "
                  "seconds double, message string")
INDEXES_SCHEMA = ("name string, kind string, indexedColumns array<string>, "
                  "includedColumns array<string>, numBuckets int, state string, "
                  "location string, numFiles long, sizeInBytes long, warning string, "
                  "createdBy string")
INDEX_SCHEMA = INDEXES_SCHEMA + (", sourceFiles long, sourceFormat string, "
                                 "sourcePaths array<string>, dataVersion int, numRows long, "
                                 "logVersion int, source string")
_STATS = "struct<files:long, levels:array<int>, rows:long, bytes:long>"
EVENTS_SCHEMA = (f"operation string, index string, mode string, started timestamp, "
                 f"finished timestamp, dataVersion int, input {_STATS}, output {_STATS}, "
                 "status string, error string, message string, job string")


def index_row(e: IndexLogEntry, source_warning: str | None) -> tuple:
    """The row of one index in :data:`INDEXES_SCHEMA`; ``source_warning``: how its source
    stands now (:func:`indexes.freshness.source_warnings`), shown unless its log is corrupt or
    its kind unknown."""
    kind = kinds.kind_of(e)
    indexed, included = kind.columns(e) if kind is not None else ([], [])
    return (e.name, kinds.display_name(e), indexed, included, e.config.get("numBuckets"),
            e.state.value, e.content.get("path"), e.content.get("numFiles"),
            e.content.get("sizeInBytes"), _warning(e, kind, source_warning),
            e.config.get(ORIGIN_KEY) or "user")


def index_rows(entries: Iterable[IndexLogEntry], warnings: dict[str, str]) -> list[tuple]:
    """The rows of ``indexes()``: each entry with its warning (by index name)."""
    return [index_row(e, warnings.get(e.name)) for e in entries]


def index_detail_row(e: IndexLogEntry, source_warning: str | None) -> tuple:
    """The row of one index in :data:`INDEX_SCHEMA` (``index(name)``)."""
    return index_row(e, source_warning) + (
        len(e.source.files or ()), e.source.format, list(e.source.root_paths or []),
        e.data_version, e.content.get("numRows"), e.id, source_name(e.source))


def _warning(e: IndexLogEntry, kind: Any, source_warning: str | None) -> str | None:
    if e.state is IndexState.CORRUPT:
        return (f"log entry {e.properties.get('corruptFile')} is corrupt: "
                f"{e.properties.get('error')}; vacuumIndex('{e.name}') removes the index")
    if kind is None:
        return f"unknown index kind '{e.kind}'"
    return source_warning


def summary_row(r: OperationResult) -> tuple:
    """The row of one index operation's result."""
    return (r.index, r.operation, r.status, r.data_version, r.read.files, r.read.bytes,
            r.written.files, r.written.bytes, r.seconds, r.message)


def event_row(e: dict) -> tuple:
    """The row of one recorded event."""
    stats = [(s["files"], s["levels"], s["rows"], s["bytes"]) for s in (e["input"], e["output"])]
    return (e["operation"], e["index"], e["mode"], datetime.fromtimestamp(e["started"] / 1000),
            datetime.fromtimestamp(e["finished"] / 1000), e.get("dataVersion"), *stats,
            e.get("status", "succeeded"), e.get("error"), e.get("message"), e.get("job"))


# --- the cache tier ---------------------------------------------------------------------
CACHE_SUMMARY_SCHEMA = "files long, bytesRead long, bytesWritten long, seconds double"
UNCACHE_SCHEMA = "entries long, bytes long"
ENTRIES_SCHEMA = ("source string, file string, columns array<string>, priority string, "
                  "ttl string, bytes long, created timestamp, lastUsed timestamp, hits long, "
                  "state string")
STATS_SCHEMA = ("capacityBytes long, usedBytes long, entries long, hits long, misses long, "
                "bytesServed long, evictions long")
EVICTED_SCHEMA = "source string, file string, priority string, bytes long, reason string"


def warmup_row(r: WarmupResult) -> tuple:
    """The row of ``cache()``."""
    return (r.files, r.bytes_read, r.bytes_written, round(r.seconds, 3))


def entry_rows(entries: Iterable[Any]) -> list[tuple]:
    """The rows of cache entries (``accelerator.cache.model.CacheEntry``)."""
    return [(e.source_root, e.file_path, list(e.columns), e.priority.name,
             format_duration(e.ttl_seconds) if e.ttl_seconds is not None else None,
             e.bytes, datetime.fromtimestamp(e.created), datetime.fromtimestamp(e.last_used),
             e.hits, e.state.value) for e in entries]


def stats_row(s: CacheStats) -> tuple:
    """The row of ``cacheStats()``."""
    return (s.capacity_bytes, s.used_bytes, s.entries, s.hits, s.misses, s.bytes_served,
            s.evictions)


def eviction_rows(evicted: Iterable[Eviction]) -> list[tuple]:
    """The rows of ``evictCache()``."""
    return [(ev.entry.source_root, ev.entry.file_path, Priority(ev.entry.priority).name,
             ev.entry.bytes, ev.reason.value) for ev in evicted]


# --- the rule engine --------------------------------------------------------------------
RULES_SCHEMA = ("source string, kind string, columns array<string>, "
                "includedColumns array<string>, priority string, ttl string, line int")
RECOMMENDATIONS_SCHEMA = (
    "action string, kind string, source string, columns array<string>, "
    "includedColumns array<string>, name string, priority string, ttl string, origin string, "
    "score double, estimatedSecondsSaved double, estimatedBytes long, queries long, "
    "reason string")
APPLIED_SCHEMA = (
    "action string, kind string, source string, columns array<string>, name string, "
    "origin string, status string, message string, seconds double")


def rule_row(rule: UserRule) -> tuple:
    """The row of one user rule as ``loadRules`` understood it."""
    return (rule.source, rule.kind, list(rule.columns), list(rule.included_columns),
            rule.priority.name, format_duration(rule.ttl_seconds) if rule.ttl_seconds else None,
            rule.line)


def instruction_row(i: Instruction) -> tuple:
    """One row of :data:`RECOMMENDATIONS_SCHEMA`."""
    return (i.action, i.kind, i.source, list(i.columns), list(i.included_columns), i.name,
            i.priority.name, format_duration(i.ttl_seconds) if i.ttl_seconds else None, i.origin,
            float(i.score), float(i.estimated_seconds_saved), int(i.estimated_bytes),
            int(i.queries), i.reason)


def instruction_of(row: Any) -> Instruction:
    """The instruction of a row of ``recommend()`` (possibly filtered by the user)."""
    d = row.asDict() if hasattr(row, "asDict") else dict(row)
    ttl = d.get("ttl")
    return Instruction(
        d["action"], d["kind"], d["source"], tuple(d.get("columns") or ()),
        tuple(d.get("includedColumns") or ()), d.get("name"),
        parse_priority(d.get("priority") or "MEDIUM", allow_never=False),
        parse_duration(ttl, "ttl") if ttl else None, d.get("origin") or "engine",
        float(d.get("score") or 0.0), float(d.get("estimatedSecondsSaved") or 0.0),
        int(d.get("estimatedBytes") or 0), int(d.get("queries") or 0), d.get("reason") or "")


def applied_row(a: Applied) -> tuple:
    """One row of :data:`APPLIED_SCHEMA`."""
    i = a.instruction
    return (i.action, i.kind, i.source, list(i.columns), i.name, i.origin, a.status, a.message,
            a.seconds)
