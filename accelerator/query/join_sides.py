"""Dynamic file pruning, the Spark side: the keys of a join's other side, collected by a small
query while the plan is rewritten (as Spark's dynamic partition pruning runs the other side
first), for the joins :mod:`indexes.join_probes` finds above a relation some pruning index
sketches.

The other side is the optimized plan's own subtree, read as a DataFrame with the rewrite
suspended (it is never rewritten, nor recorded). It is collected only when Spark estimates it
at most ``spark.accelerator.dynamicFilePruning.maxSideBytes``; its distinct non-null keys are
listed up to ``maxKeys``, past which only their range is kept. Any failure leaves the join
unused, with the reason explain shows: the query itself is never failed.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, ContextManager

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from accelerator.runtime.settings import DFP_ENABLED, DFP_MAX_BYTES, Settings
from accelerator.runtime.spark_versions import dataset_class
from indexes.join_probes import JoinProbe, probes
from indexes.plan import PlanNode
from indexes.skipping.ir import expression_key, key_columns
from indexes.skipping.join_keys import JoinKeys, JoinNotUsed

log = logging.getLogger("accelerator.query.join_sides")


class JoinSides:
    """Collects the other sides' keys of the joins above a relation, in ``spark``, its queries
    run under ``suspended()`` (no rewrite: :func:`accelerator.query.session.suspended`)."""

    def __init__(self, spark: Any, suspended: Callable[[], ContextManager[None]]):
        self._spark = spark
        self._suspended = suspended

    def keys(self, plan: Any, root: PlanNode, relation: PlanNode, columns: frozenset[str],
             settings: Settings) -> tuple[JoinKeys | JoinNotUsed, ...]:
        """For each join above ``relation`` (of the JVM ``plan``, parsed as ``root``) that
        may prune it and whose key reads only ``columns`` (lower case: those an index over the
        relation sketches), the other side's keys, or why they were not collected."""
        names = {a.expr_id: a.fields["name"] for a in relation.output_attributes()}
        found = [p for p in probes(root, relation) if _reads_only(p, names, columns)]
        return tuple(self._collect(plan, p, settings) for p in found)

    def _collect(self, plan: Any, probe: JoinProbe,
                 settings: Settings) -> JoinKeys | JoinNotUsed:
        if not settings.join_pruning:
            return JoinNotUsed(probe, f"{DFP_ENABLED} is false")
        try:
            side = plan
            for i in probe.path:
                side = side.children().apply(i)
            size = int(str(side.stats().sizeInBytes()))
            limit = settings.join_side_bytes
            if limit < 0 or size > limit:
                return JoinNotUsed(probe, f"the other side is estimated at {size} bytes, over "
                                          f"{DFP_MAX_BYTES} ({limit})")
            return self._query(side, probe, settings.join_keys)
        except Exception as exc:   # the query goes on without this join's pruning
            log.warning("dynamic file pruning: the keys of %s were not collected",
                        probe.describe(), exc_info=True)
            return JoinNotUsed(probe, f"its keys could not be collected ({type(exc).__name__})")

    def _query(self, side: Any, probe: JoinProbe, max_keys: int) -> JoinKeys:
        spark = self._spark
        output = side.output()
        wanted = probe.other_column.expr_id
        position = next(i for i in range(output.size())
                        if int(output.apply(i).exprId().id()) == wanted)
        df = DataFrame(dataset_class(spark).ofRows(spark._jsparkSession, side), spark)
        df = df.toDF(*(f"c{i}" for i in range(output.size())))
        key = F.col(f"c{position}")
        if probe.other.cls == "Cast":
            key = key.cast(probe.type)
        keys = df.select(key.alias("k")).where(F.col("k").isNotNull()).distinct()
        with self._suspended():
            listed = [r[0] for r in keys.limit(max_keys + 1).collect()]
            if len(listed) <= max_keys:
                return JoinKeys.listed(probe, listed)
            low, high = keys.agg(F.min("k"), F.max("k")).first()
        return JoinKeys.ranged(probe, low, high)


def _reads_only(probe: JoinProbe, names: dict[int, str], columns: frozenset[str]) -> bool:
    """Whether the relation's key expression of ``probe`` reads only ``columns`` (lower
    case)."""
    key = expression_key(probe.fact, names.get)
    read = key_columns(key) if key is not None else set()
    return bool(read) and {c.lower() for c in read} <= columns
