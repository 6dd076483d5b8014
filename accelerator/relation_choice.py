"""Which index serves each file relation of a plan: every candidate index (an ACTIVE index over
the relation's source) is matched by its kind, and the kinds' registry chooses among the
applicable verdicts (:func:`indexes.kinds.choose`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from accelerator.relation_files import RelationFiles
from accelerator.settings import Settings
from indexes import kinds
from indexes.kind import MatchContext
from indexes.plan import PlanNode
from indexes.source import same_source
from indexes.version_cache import VersionCache

if TYPE_CHECKING:
    from accelerator.cache_rewrite import CacheDecision


@dataclass
class RelationDecision:
    """What the rewriter decided for one file relation of a plan."""

    ordinal: int
    description: dict
    results: list[Any] = field(default_factory=list)   # every candidate index's verdict
    chosen: Any = None                                  # the applicable verdict used, if any
    cache: "CacheDecision | None" = None                # the cache's, for relations it covers

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


class RelationChoice:
    """Matches a plan's relations with the indexes over their sources. Kinds' query-time
    states are kept per index version in ``versions``; ``files`` lists a relation's files
    when a kind needs them."""

    def __init__(self, fs: Any, versions: VersionCache, files: RelationFiles):
        self._fs = fs
        self._versions = versions
        self._files = files

    def decide(self, plan: Any, root: PlanNode, relations: list[PlanNode],
               decisions: list[RelationDecision], indexes: list[Any], settings: Settings,
               payload: dict, with_files: bool) -> None:
        """Fills in each decision's verdicts (``results``) and the one ``chosen``, for the
        relations some of ``indexes`` is over. Their descriptions are completed from the JVM
        where the payload lacks what matching needs (with the files, ``with_files``)."""
        ctx = MatchContext(
            settings.case_sensitive, settings.hybrid,
            payload["readSettings"].get("spark.sql.session.timeZone", "UTC"),
            payload["conf"].get("spark.sql.ansi.enabled", "false").lower() == "true")
        for decision, relation in zip(decisions, relations):
            candidates = [e for e in indexes if same_source(e.source, decision.description)]
            if not candidates:
                continue
            if with_files or "fingerprint" not in decision.description:
                decision.description = self._files.describe(plan, decision.ordinal,
                                                            2 if with_files else 1)
            fingerprint = decision.description.get("fingerprint")
            listed = any(kinds.kind_of(e).needs_files(e, fingerprint, settings)
                         for e in candidates)
            if listed and "files" not in decision.description:
                decision.description["files"] = self._files.files(plan, decision, candidates)
            decision.description["readSettings"] = payload["readSettings"]
            decision.results = [self._match(root, relation, decision.description, e, settings,
                                            ctx) for e in candidates]
            decision.chosen = kinds.choose(decision.results)

    def _match(self, root: PlanNode, relation: PlanNode, description: dict, entry: Any,
               settings: Settings, ctx: MatchContext) -> Any:
        return kinds.kind_of(entry).match(root, relation, description, entry,
                                          self.state(entry, settings), ctx)

    def state(self, entry: Any, settings: Settings) -> Any:
        """The query-time state of an index version (statistics, text reader), cached; None
        for a kind that has none (it takes no room in the cache)."""
        kind = kinds.kind_of(entry)
        if not kind.stateful:
            return None
        return self._versions.get(entry, ("state",), lambda: kind.load(entry, self._fs, settings))
