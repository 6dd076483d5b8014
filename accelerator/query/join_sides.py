"""Dynamic file pruning, the Spark side: the keys of a join's other side, collected by a small
query while the plan is rewritten (as Spark's dynamic partition pruning runs the other side
first), for the joins :mod:`indexes.join_probes` finds above a relation some pruning index
sketches.

The other side is the optimized plan's own subtree, read as a DataFrame with the rewrite
suspended (it is never rewritten, nor recorded). It is collected only when Spark estimates it
at most ``spark.accelerator.dynamicFilePruning.maxSideBytes``; its non-null keys are read in
one pass when they are few rows (else a distinct query lists them), up to ``maxKeys`` distinct
ones, past which only their range is kept. The keys are remembered per other side (its shape,
:func:`indexes.join_probes.side_shape`, and the descriptions of the relations it reads, their
files' fingerprints among them), so planning the same query again (explain's second rewrite, a
CTE read twice, a dashboard's refresh) collects nothing while the files are unchanged.

A side whose file relations are small (at most ``localBytes`` of files each) is run over
copies of the columns it reads of them, kept in driver memory per source version
(:class:`LocalCopies`; the JVM's ``LocalSides``): Spark's optimizer filters and projects the
copy while it plans the keys' query, with the side's own expressions (Spark's semantics by
construction), so a dimension filtered in another way each query costs no Spark job after the
first copy. Any failure leaves the join unused, with the reason explain shows: the query
itself is never failed.
"""
from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from typing import Any, Callable, ContextManager

from cachetools import LRUCache
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from accelerator.runtime.settings import DFP_ENABLED, DFP_MAX_BYTES, Settings
from accelerator.runtime.spark_versions import dataset_class
from indexes.description import SourceDescription
from indexes.join_probes import JoinProbe, probes, side_shape
from indexes.plan import PlanNode
from indexes.skipping.ir import expression_key, key_columns
from indexes.skipping.join_keys import JoinKeys, JoinNotUsed

log = logging.getLogger("accelerator.query.join_sides")

#: other sides whose keys are remembered (least recently used dropped first)
SIDES_REMEMBERED = 256
#: the rows of keys (nulls and repeats included) read in one pass, per key listed (maxKeys):
#: up to that many, no distinct query (a shuffle) is run
ROWS_PER_KEY = 10
#: the bytes of the copies of small relations kept in driver memory, all together (least
#: recently used dropped first)
COPIES_KEPT_BYTES = 64 << 20


class JoinSides:
    """Collects the other sides' keys of the joins above a relation, in ``spark``, its queries
    run under ``suspended()`` (no rewrite: :func:`accelerator.query.session.suspended`), and
    remembers them per other side."""

    def __init__(self, spark: Any, plans: Any, suspended: Callable[[], ContextManager[None]]):
        self._spark = spark
        self._plans = plans
        self._suspended = suspended
        self._lock = threading.Lock()
        self._known: LRUCache = LRUCache(SIDES_REMEMBERED)
        #: the small relations' columns in driver memory (``plans``: the PlanRewrite helper)
        self.copies = LocalCopies(spark, plans, suspended)
        self.collected = 0      # sides whose keys were not remembered (for tests)

    @staticmethod
    def probes(root: PlanNode, relation: PlanNode, columns: frozenset[str]) -> list[JoinProbe]:
        """The joins above ``relation`` (of the plan ``root``) that may prune it and whose key
        reads only ``columns`` (lower case: those an index over the relation sketches)."""
        names = {a.expr_id: a.fields["name"] for a in relation.output_attributes()}
        return [p for p in probes(root, relation) if _reads_only(p, names, columns)]

    def keys(self, plan: Any, root: PlanNode, found: list[JoinProbe], settings: Settings,
             describe: Callable[[PlanNode], SourceDescription | None],
             scope: tuple) -> tuple[JoinKeys | JoinNotUsed, ...]:
        """For each probe of ``found`` (joins of the JVM ``plan``, parsed as ``root``), the
        other side's keys, or why they were not collected. ``describe`` gives the description
        of a file relation of the plan (None when unknown) and ``scope`` the session's
        settings its values depend on (time zone, ANSI mode), both part of what keys are
        remembered by."""
        return tuple(self._collect(plan, root, p, settings, describe, scope) for p in found)

    def _collect(self, plan: Any, root: PlanNode, probe: JoinProbe, settings: Settings,
                 describe: Callable[[PlanNode], SourceDescription | None],
                 scope: tuple) -> JoinKeys | JoinNotUsed:
        if not settings.join_pruning:
            return JoinNotUsed(probe, f"{DFP_ENABLED} is false")
        try:
            join = self._plans.nodeAt(plan, ",".join(map(str, probe.path[:-1])))
            side = self._plans.nodeAt(join, str(probe.path[-1]))
            size = int(self._plans.estimatedBytes(side))
            limit = settings.join_side_bytes
            if limit < 0 or size > limit:
                return JoinNotUsed(probe, f"the other side is estimated at {size} bytes, over "
                                          f"{DFP_MAX_BYTES} ({limit})")
            memo = _memo_key(root, probe, settings.join_keys, describe, scope)
            with self._lock:
                known = self._known.get(memo) if memo is not None else None
            if known is not None:
                return JoinKeys(probe, *known)
            local = self.copies.localized(side, _side_node(root, probe), settings, describe,
                                          scope)
            self.collected += 1
            keys = None if local is None else self._local_keys(local, join, probe,
                                                               settings.join_keys)
            if keys is None:
                keys = self._query(side if local is None else local, probe, settings.join_keys)
            if memo is not None:
                with self._lock:
                    self._known[memo] = (keys.values, keys.low, keys.high)
            return keys
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
        if probe.type == "timestamp":    # as microseconds: collect() would shift to local time
            key = F.unix_micros(key)
        keys = df.select(key.alias("k")).where(F.col("k").isNotNull())
        rows = max_keys * ROWS_PER_KEY
        with self._suspended():
            read = [r[0] for r in keys.limit(rows + 1).collect()]
            if len(read) <= rows:      # every key, in one pass without a shuffle
                return _listed(probe, read, max_keys)
            distinct = keys.distinct()
            listed = [r[0] for r in distinct.limit(max_keys + 1).collect()]
            if len(listed) <= max_keys:
                return JoinKeys.listed(probe, listed)
            low, high = distinct.agg(F.min("k"), F.max("k")).first()
        return JoinKeys.ranged(probe, low, high)

    def _local_keys(self, side: Any, join: Any, probe: JoinProbe,
                    max_keys: int) -> JoinKeys | None:
        """The keys of ``probe``'s other side ``side`` (over copies: :class:`LocalCopies`),
        planned by Spark's optimizer into local rows without a Spark job, through ``join``'s
        own cast of the key when it has one; None when the optimizer did not fold them or
        they are more rows than one pass reads (then :meth:`_query` runs)."""
        rows = max_keys * ROWS_PER_KEY
        with self._suspended():
            found = self._plans.localKeys(
                self._spark._jsparkSession, side, join, probe.other_column.expr_id,
                probe.type if probe.other.cls == "Cast" else "", probe.type == "timestamp",
                rows + 1)
        read = json.loads(found) if found is not None else None
        if read is None or len(read) > rows:
            return None
        return _listed(probe, read, max_keys)


def _memo_key(root: PlanNode, probe: JoinProbe, max_keys: int,
              describe: Callable[[PlanNode], SourceDescription | None],
              scope: tuple) -> tuple | None:
    """What the keys of ``probe``'s other side are remembered by: its shape (the key's
    attribute marked), the key's type, the descriptions of the relations it reads (their fingerprints
    among them), ``max_keys`` and ``scope``; None when something of it is unknown (then the
    keys are collected every time)."""
    side = _side_node(root, probe)
    shape = side_shape(side, probe.other_column.expr_id)
    if shape is None:
        return None
    described = []
    for relation in side.file_relations():
        description = describe(relation)
        if description is None or description.fingerprint is None:
            return None
        described.append(json.dumps(description.to_json(), sort_keys=True, default=str))
    return shape, probe.type, probe.other.cls, max_keys, scope, tuple(described)


def _listed(probe: JoinProbe, read: list[Any], max_keys: int) -> JoinKeys:
    """The keys of ``read`` (every key of the other side, as ``collect()`` returns them or
    days and microseconds since the epoch): listed, or past ``max_keys`` their range."""
    found = JoinKeys.listed(probe, read)
    if len(found.values) <= max_keys:
        return found
    return JoinKeys(probe, None, found.values[0], found.values[-1])


def _side_node(root: PlanNode, probe: JoinProbe) -> PlanNode:
    """The other side of ``probe`` in the parsed plan ``root``."""
    side = root
    for i in probe.path:
        side = side.children[i]
    return side


def _reads_only(probe: JoinProbe, names: dict[int, str], columns: frozenset[str]) -> bool:
    """Whether the relation's key expression of ``probe`` reads only ``columns`` (lower
    case)."""
    key = expression_key(probe.fact, names.get)
    read = key_columns(key) if key is not None else set()
    return bool(read) and {c.lower() for c in read} <= columns


@dataclass(frozen=True)
class _Copy:
    """Columns ``names`` of a relation copied into driver memory (``rows``: the JVM's
    ``LocalSides.Copy``, of ``bytes``), or found too many to copy (``rows`` None)."""

    names: tuple[str, ...]
    rows: Any
    bytes: int


class LocalCopies:
    """The columns join sides read of small file relations, copied into driver memory (one
    Spark job, run under ``suspended()``) and kept per source version, up to
    :data:`COPIES_KEPT_BYTES` in all; a side over such relations is run over the copies. A
    relation's copy grows by the columns a later side reads besides (one more job)."""

    def __init__(self, spark: Any, plans: Any, suspended: Callable[[], ContextManager[None]]):
        self._spark = spark
        self._plans = plans
        self._suspended = suspended
        self._lock = threading.Lock()
        self._copies: LRUCache = LRUCache(COPIES_KEPT_BYTES, getsizeof=lambda c: max(1, c.bytes))
        self.made = 0           # copies made (Spark jobs run; for tests)

    def localized(self, side: Any, node: PlanNode, settings: Settings,
                  describe: Callable[[PlanNode], SourceDescription | None],
                  scope: tuple) -> Any | None:
        """The JVM plan ``side`` (parsed as ``node``) with each file relation replaced by a
        copy of the columns it reads, or None when some relation is unknown or too large to
        copy (then the side runs as it is). ``describe`` and ``scope`` as for
        :meth:`JoinSides.keys`: a copy is of one source version under those settings."""
        limit = settings.join_local_bytes
        relations = node.file_relations()
        if limit <= 0 or not relations:
            return None
        try:
            jvm_relations = self._plans.fileRelations(side)
            found = []
            for ordinal, relation in enumerate(relations):
                description = describe(relation)
                if description is None or description.fingerprint is None \
                        or int(self._plans.estimatedBytes(jvm_relations[ordinal])) > limit:
                    return None
                needed = [n for n in str(self._plans.sideColumns(side, ordinal)).split("\n") if n]
                copy = self._copy(side, ordinal, needed, description, limit, scope) \
                    if needed else None    # no column read (a count): nothing to copy
                if copy is None:
                    return None
                found.append((ordinal, copy))
            for ordinal, copy in reversed(found):
                side = self._plans.localSide(side, ordinal, "\n".join(copy.names), copy.rows)
            return side
        except Exception:   # the side runs as it is
            log.warning("dynamic file pruning: a join side could not be run over copies of "
                        "its relations", exc_info=True)
            return None

    def _copy(self, side: Any, ordinal: int, needed: list[str], description: SourceDescription,
              limit: int, scope: tuple) -> _Copy | None:
        """A copy holding the columns ``needed`` of the ``ordinal``-th file relation of
        ``side`` (described by ``description``): the relation's kept copy when it holds them,
        else a new one of those and the kept copy's columns (which it replaces); None when
        the rows are too many (or too large) to copy."""
        key = (json.dumps(description.to_json(), sort_keys=True, default=str), limit, scope)
        with self._lock:
            known = self._copies.get(key)
        if known is not None and known.rows is not None and set(needed) <= set(known.names):
            return known
        if known is not None and known.rows is None and set(known.names) <= set(needed):
            return None          # fewer columns were already too large
        wanted = list(needed) if known is None or known.rows is None else \
            [*known.names, *(n for n in needed if n not in known.names)]
        made = self._make(side, ordinal, wanted, limit)
        if made.rows is None and len(wanted) > len(needed):
            made = self._make(side, ordinal, needed, limit)
        with self._lock:
            self._copies[key] = made
        return made if made.rows is not None else None

    def _make(self, side: Any, ordinal: int, names: list[str], limit: int) -> _Copy:
        """The columns ``names`` of the ``ordinal``-th file relation of ``side`` copied by one
        Spark job, at most ``limit`` bytes of rows."""
        # every kept row takes at least 8 bytes of null bits and 8 per column
        rows = limit // (8 * (len(names) + 1))
        spark = self._spark
        plan = self._plans.sideColumnsPlan(side, ordinal, "\n".join(names))
        df = DataFrame(dataset_class(spark).ofRows(spark._jsparkSession, plan), spark)
        with self._suspended():
            self.made += 1
            copied = self._plans.copyRows(df.limit(rows + 1)._jdf.queryExecution()
                                          .executedPlan(), rows, limit)
        return _Copy(tuple(names), copied, int(copied.bytes()) if copied is not None else 0)
