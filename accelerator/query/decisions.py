"""What the rewriter decides for each file relation of a plan: the verdicts of the indexes over
its source and the one chosen (:class:`RelationDecision`), and what the cache serves of it
(:class:`CacheDecision`). Plain values, filled in by :mod:`accelerator.query.relation_choice` and
:mod:`accelerator.query.cache_rewrite` and read by serving, explain and the history."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from accelerator.cache import serving as cache_serving
from accelerator.cache.tier import UsedEntries
from accelerator.runtime.settings import Settings
from indexes.description import SourceDescription


@dataclass
class CacheDecision:
    """What the cache serves of one relation: ``code`` is APPLIED or why nothing is served;
    ``plan`` says which files are served and why the others are not."""

    code: str
    reason: str = ""
    plan: cache_serving.ServingPlan | None = None
    files: Any = None            # the JVM map of the served files (CacheServing.CachedFiles)
    required: frozenset = frozenset()
    used: UsedEntries | None = None   # the entries served, counted together per query

    def explain_line(self, roots: str) -> str:
        """The line explain shows for the relation over ``roots``."""
        if self.plan is None:
            return f"cache [{self.code}] {roots}: {self.reason}"
        p = self.plan
        why = ", ".join(f"{code}: {n}" for code, n in sorted(p.reasons.items()))
        return (f"cache [{self.code}] {roots}: {len(p.served)} files ({p.served_bytes} bytes) "
                f"from the cache, {p.source_files} files ({p.source_bytes} bytes) from the "
                f"source" + (f" ({why})" if why else ""))


@dataclass
class RelationDecision:
    """What the rewriter decided for one file relation of a plan."""

    ordinal: int
    description: SourceDescription   # completed by the rewrite where it needs more
    results: list[Any] = field(default_factory=list)   # every candidate index's verdict
    chosen: Any = None                                  # the applicable verdict used, if any
    cache: CacheDecision | None = None                  # the cache's, for relations it covers

    def served_from(self, settings: Settings) -> tuple[str | None, list[str]]:
        """What serves the relation (the index's name, ``cache``, or None for the source
        alone) and the paths it reads that from, for the query history."""
        paths = []
        served_by = None
        if self.cache is not None and self.cache.code == "APPLIED":
            served_by = "cache"
            paths.append(settings.cache_path)
        if self.chosen is not None:
            served_by = self.chosen.index.name
            paths.append(f"{settings.system_path.rstrip('/')}/{served_by}")
        return served_by, paths


def relation_decisions(payload: dict) -> list[RelationDecision]:
    """A decision to fill in for each file relation the JVM rule's ``payload`` describes."""
    return [RelationDecision(i, SourceDescription.from_json(d))
            for i, d in enumerate(payload["relations"])]
