"""Carrying out one instruction of the rule engine (or of a user rule): the index it creates,
drops or refreshes, the cache entry it warms (over the partitions it names) or removes."""
from __future__ import annotations

from typing import Any, Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from indexes import kinds
from rules.extractor import Demand
from rules.instructions import Instruction
from rules.profiles import SourceProfile
from rules.terms import format_duration
from rules.user_rules import RuleSet


def carry_out(i: Instruction, context: Any, source_df: Callable[[str], DataFrame],
              rules: Callable[[], RuleSet], demand: Callable[[], list[Demand]],
              profiles: dict[str, SourceProfile]) -> str:
    """Carries out ``i`` through ``context``'s indexes and cache, reading its source with
    ``source_df``; returns what was done, in a line."""
    indexes, cache = context.indexes, context.cache
    if i.action == "create":
        return indexes.create(source_df(i.source), index_config(i, profiles),
                              origin=i.origin).message
    if i.action == "drop":
        indexes.delete(i.name)
        indexes.vacuum(i.name, None)
        return f"dropped index {i.name}"
    if i.action == "refresh":
        return indexes.refresh(i.name, "incremental").message
    df = source_df(i.source)
    if i.action == "uncache":
        cache.uncache(df)
        return f"uncached {i.source}"
    window = cache_window(i, rules, demand)
    if window is not None:
        df = df.where(window)
    ttl = format_duration(i.ttl_seconds) if i.ttl_seconds else None
    warmed = cache.cache(df, list(i.columns) or None, i.priority.name, ttl)
    return f"cached {warmed.files} files ({warmed.bytes_written} bytes written)"


def cache_window(i: Instruction, rules: Callable[[], RuleSet],
                 demand: Callable[[], list[Demand]]) -> Any:
    """The partitions a cache instruction warms (None: all of them): a user rule's
    ``partitions: {lastDays: N}`` (today and the N-1 days before), or for the engine the
    partitions its queries touched, when every query of the source named the same ones."""
    if i.origin == "user":
        matching = [r for r in rules().rules if r.kind == "cache" and r.partitions is not None
                    and r.matches(i.source) and tuple(r.columns) == tuple(i.columns)]
        if not matching:
            return None
        p = matching[0].partitions
        return F.col(p.column) >= F.date_sub(F.current_date(), p.last_days - 1)
    windows = {d.partition_window for d in demand() if d.source == i.source}
    if len(windows) != 1 or None in windows:
        return None
    column, low, high = windows.pop()
    ends = [F.col(column) >= low if low is not None else None,
            F.col(column) <= high if high is not None else None]
    found = [e for e in ends if e is not None]
    return found[0] & found[1] if len(found) == 2 else found[0]


def index_config(i: Instruction, profiles: dict[str, SourceProfile]) -> Any:
    """The config of the index a create instruction asks for, built by the index kind
    answering its kind (with the distinct values per file profiled of its first column)."""
    kind = kinds.kind_for_engine(i.kind)
    if kind is None:
        raise ValueError(f"no index kind {i.kind!r}")
    profile = profiles.get(i.source)
    cp = profile.columns.get(i.columns[0]) if profile is not None else None
    return kind.config_for(i.kind, i.name, list(i.columns), list(i.included_columns),
                           None if cp is None else cp.distinct_per_file or 0)
