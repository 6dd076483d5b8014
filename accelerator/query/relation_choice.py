"""Which index serves each file relation of a plan: every candidate index (an ACTIVE index over
the relation's source) is matched by its kind, and the kinds' registry chooses among the
applicable verdicts (:func:`indexes.kinds.choose`)."""
from __future__ import annotations

import dataclasses
import json
from typing import Any

from accelerator.query.decisions import RelationDecision
from accelerator.query.join_sides import JoinSides
from accelerator.query.relation_files import RelationFiles
from accelerator.runtime.settings import DFP_MIN_SCAN_BYTES, Settings
from indexes import kinds
from indexes.description import SourceDescription
from indexes.join_probes import JoinProbe
from indexes.kind import MatchContext, Serving
from indexes.plan import PlanNode
from indexes.skipping.join_keys import JoinNotUsed
from indexes.source import NotApplicable, pruning_problem, same_source
from indexes.version_cache import VersionCache


class RelationChoice:
    """Matches a plan's relations with the indexes over their sources. Kinds' query-time
    states are kept per index version in ``versions``; ``files`` lists a relation's files
    when a kind needs them."""

    def __init__(self, fs: Any, versions: VersionCache, files: RelationFiles,
                 joins: JoinSides):
        self._fs = fs
        self._versions = versions
        self._files = files
        self._joins = joins

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
            if with_files or not decision.description.fingerprinted:
                decision.description = self._files.describe(plan, decision.ordinal,
                                                            2 if with_files else 1)
            fingerprint = decision.description.fingerprint
            for e in candidates:
                if (not decision.description.files_described
                        and kinds.kind_of(e).needs_changes(e, fingerprint, settings)
                        and decision.description.changes_since(e.source) is None):
                    changes = self._files.changes(plan, decision, e.source)
                    if changes is not None:
                        decision.description = decision.description.with_changes(changes)
            listed = any(kinds.kind_of(e).needs_files(e, fingerprint, settings)
                         for e in candidates)
            if listed and not decision.description.files_described:
                decision.description = decision.description.with_files(
                    self._files.files(plan, decision, candidates))
            decision.description = decision.description.with_read_settings(
                payload["readSettings"])
            decision.results = [self._match(root, relation, decision.description, e, settings,
                                            ctx) for e in candidates]
            found = self._probes(root, relation, candidates)
            if found:
                # what the keys and copies of relations depend on besides the files
                scope = (ctx.session_tz, ctx.ansi,
                         json.dumps(payload["readSettings"], sort_keys=True))
                joins = self._join_keys(plan, root, relations, decisions, found, decision,
                                        settings, scope)
                joined = dataclasses.replace(ctx, joins=joins)
                decision.results = [
                    self._match(root, relation, decision.description, e, settings, joined)
                    if kinds.kind_of(e).prunes_through_joins else r
                    for e, r in zip(candidates, decision.results)]
            decision.chosen = kinds.choose(decision.results)

    def _probes(self, root: PlanNode, relation: PlanNode,
                candidates: list[Any]) -> list[JoinProbe]:
        """The joins above ``relation`` whose key the indexes of ``candidates`` that prune
        through joins sketch (dynamic file pruning)."""
        pruning = [e for e in candidates if kinds.kind_of(e).prunes_through_joins]
        columns = [kinds.kind_of(e).filter_columns(e) for e in pruning]
        if not columns or any(c is None for c in columns):
            return []
        return self._joins.probes(root, relation, frozenset().union(*columns))

    def _join_keys(self, plan: Any, root: PlanNode, relations: list[PlanNode],
                   decisions: list[RelationDecision], found: list[JoinProbe],
                   decision: RelationDecision, settings: Settings,
                   scope: tuple) -> tuple[Any, ...]:
        """The other sides' keys of the joins ``found`` above the relation of ``decision``,
        whose verdicts without them are known (``scope``: the session's settings they depend
        on, see :meth:`JoinSides.keys`): none collected when a replacing index serves
        the relation anyway, or when it reads less than ``minScanBytes`` after its own
        filters (see :func:`skipped_joins`)."""
        why = skipped_joins(decision.results, decision.description,
                            settings.join_min_scan_bytes)
        if why is not None:
            return tuple(JoinNotUsed(p, why) for p in found)
        ordinals = {id(r): i for i, r in enumerate(relations)}

        def describe(node: PlanNode) -> SourceDescription | None:
            i = ordinals.get(id(node))
            if i is None:
                return None
            if not decisions[i].description.fingerprinted:
                decisions[i].description = self._files.describe(plan, decisions[i].ordinal, 1)
            return decisions[i].description

        return self._joins.keys(plan, root, found, settings, describe, scope)

    def _match(self, root: PlanNode, relation: PlanNode, description: SourceDescription,
               entry: Any,
               settings: Settings, ctx: MatchContext) -> Any:
        kind = kinds.kind_of(entry)
        verdict = kind.match(root, relation, description, entry, self.state(entry, settings),
                             ctx)
        problem = pruning_problem(description) if kind.serving is Serving.PRUNE else None
        if verdict.applicable and problem:
            return NotApplicable(entry, "DELETION_VECTORS", problem)
        return verdict

    def state(self, entry: Any, settings: Settings) -> Any:
        """The query-time state of an index version (statistics, text reader), cached; None
        for a kind that has none (it takes no room in the cache)."""
        kind = kinds.kind_of(entry)
        if not kind.stateful:
            return None
        return self._versions.get(entry, ("state",), lambda: kind.load(entry, self._fs, settings))


def skipped_joins(results: list[Any], description: SourceDescription,
                  min_bytes: int) -> str | None:
    """Why the joins above a relation are not worth collecting the other sides of, given its
    verdicts without them (``results``), or None when they are: an index that replaces the
    relation wins over any pruning, and a relation that reads less than ``min_bytes`` of files
    after its own filters (the fewest an applicable verdict keeps, else all its files) saves
    less than the other side's query costs. None too when what it reads is unknown."""
    chosen = kinds.choose(results)
    if chosen is not None and kinds.kind_of(chosen.index).serving is Serving.REPLACE:
        return f"{chosen.index.name} replaces the relation"
    if chosen is not None:
        read = chosen.cost
    elif description.files is not None:
        read = sum(f.size for f in description.files)
    else:
        return None
    if read < min_bytes:
        return (f"the relation reads {read} bytes of files after its own filters, under "
                f"{DFP_MIN_SCAN_BYTES} ({min_bytes})")
    return None
