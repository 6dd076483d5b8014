"""The join rule (the covering kind's ``serve_joins``): a plan's equi-joins served from pairs of
covering indexes bucketed on the join keys (see :mod:`indexes.covering.join_match`), deciding
for both sides' relations at once. Pure Python over the rewriter's decisions (``ordinal``,
``description``, ``results``, ``chosen`` of each relation)."""
from __future__ import annotations

from typing import Any, Callable

from indexes.covering import join_match
from indexes.covering.config import KIND
from indexes.plan import PlanNode
from indexes.source import same_source


def join_rule(root: PlanNode, relations: list[PlanNode], decisions: list[Any],
              indexes: list[Any], settings: Any, hints: list[str],
              parallelism: Callable[[], int]) -> dict[int, int]:
    """Serves the plan's equi-joins from pairs of covering indexes bucketed on the join keys:
    both sides' decisions become the join's indexes, or their verdicts say why not. ``hints``
    are the JVM's, one per join; ``parallelism()`` is the session's default parallelism (asked
    only when a join is served). Returns the ordinals of the relations it replaced, each with
    the number of partitions its buckets are read in (see
    :func:`join_match.join_partitions`)."""
    ordinal_of = {id(r): i for i, r in enumerate(relations)}
    joining = [e for e in indexes if e.kind == KIND]
    joined: dict[int, int] = {}
    joins = [n for n in root.walk() if n.cls == "Join"]
    for join, hint in zip(joins, hints):
        below = [join_match.side_relation(child) for child in join.children]
        if None in below:
            continue
        pair = [decisions[ordinal_of[id(r)]] for r in below]
        if any(d.ordinal in joined for d in pair):
            continue
        candidates = tuple([e for e in joining if same_source(e.source, d.description)]
                           for d in pair)
        missing = [side for side, found in zip(("left", "right"), candidates) if not found]
        sides = join_match.join_sides(join, settings.case_sensitive)
        if isinstance(sides, str):
            reason = sides
        elif missing:
            reason = f"the {missing[0]} side has no covering index over its source"
        else:
            reason = join_match.join_obstacle(hint, (pair[0].chosen, pair[1].chosen),
                                              candidates, settings.bucketing,
                                              settings.broadcast_threshold)
        if reason is None:
            found = join_match.evaluate(root, sides, candidates,
                                        tuple(d.description for d in pair),
                                        settings.case_sensitive, settings.hybrid)
            if isinstance(found, join_match.JoinApplicable):
                groups = join_match.join_partitions(found, parallelism())
                for d, applied in zip(pair, (found.left, found.right)):
                    d.results = [applied] + [r for r in d.results
                                             if r.index.name != applied.index.name]
                    d.chosen = applied
                    joined[d.ordinal] = groups
                continue
            reason = found
        for d in pair:
            d.results = [join_match.with_join_reason(r, reason) for r in d.results]
            if d.chosen is not None:   # the completed verdict
                d.chosen = next(r for r in d.results if r.index is d.chosen.index)
    return joined
