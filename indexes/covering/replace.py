"""How a covering index serves a relation (its kind's ``serve``): the relation is replaced by
one over the index's data version, bucketed by the indexed columns for the join rule (or for the
filter rule when ``useBucketSpec`` is on), with hybrid scan's appended files and lineage
exclusions and the delta files of incremental refreshes; all through the
:class:`indexes.kind.PlanSurgery` port, relations kept per index version and shape."""
from __future__ import annotations

from typing import Any

from indexes.covering.build import BUCKET_FILES, DELTA_FILES, data_dirs, delta_dirs
from indexes.covering.match import index_columns
from indexes.kind import PlanSurgery


def serve(plan: Any, ordinal: int, verdict: Any, surgery: PlanSurgery, join_groups: int | None,
          settings: Any, payload: dict) -> Any:
    """The plan with relation ``ordinal`` replaced by the index of ``verdict`` (see the module
    docstring); ``join_groups`` is set when the join rule serves it."""
    joins = join_groups is not None
    bucketed = joins or settings.filter_rule_bucket_spec
    # a lookup no operator needs bucketed reads its buckets' files as plain ones, chosen by the
    # JVM (Spark's own bucket pruning generates code for each literal)
    lookup_buckets = int(verdict.index.config["numBuckets"]) \
        if bucketed and not joins and verdict.bucket_lookup else 0
    bucketed = bucketed and not lookup_buckets
    relation = index_relation(surgery, verdict.index, bucketed, sorted_scan=joins,
                              groups=join_groups or 0)
    deltas = delta_relation(surgery, verdict.index) if bucketed else None
    return surgery.replace_relation(
        plan, ordinal, relation, specs=list(verdict.specs), restore_order=verdict.restore_order,
        appended=list(verdict.appended), deleted_ids=list(verdict.deleted_ids), deltas=deltas,
        bucket_union=joins and bool(payload.get("bucketUnion")), lookup_buckets=lookup_buckets)


def index_relation(surgery: PlanSurgery, entry: Any, bucketed: bool = True,
                   sorted_scan: bool = False, groups: int = 0) -> Any:
    """The relation reading an index's data version, bucketed by the indexed columns (Spark
    then prunes buckets on equality filters and joins two such relations without a shuffle)
    unless ``bucketed`` is false. A bucketed relation reads only the bucket files; the delta
    files of incremental refreshes are read by :func:`delta_relation`. With ``sorted_scan``
    (for a join), its scan stays bucketed and reports the buckets' sort order where each
    bucket is one file, so a sort-merge join does not sort it; without, Spark may read a
    bucketed relation as plain files where no operator needs its buckets (a lookup reading one
    bucket of 200 in one task, not 200). ``groups`` below the bucket count makes a sorted scan
    read the buckets in that many groups, unsorted (see
    :func:`indexes.covering.join_match.bucket_groups`)."""
    if not (bucketed and sorted_scan and 0 < groups < int(entry.config["numBuckets"])):
        groups = 0
    shape = ("sorted" if sorted_scan else "bucketed") if bucketed else "plain"
    return surgery.per_version(entry, (shape, groups), lambda: _read(
        surgery, entry, data_dirs(entry.content), BUCKET_FILES if bucketed else None,
        (sorted_scan, groups) if bucketed else None))


def delta_relation(surgery: PlanSurgery, entry: Any) -> Any | None:
    """The relation reading only the delta files of an index's data version (rows of files an
    incremental refresh indexed, in any bucket), which a bucketed read of the index unions with
    its bucket files; None when it has none."""
    dirs = delta_dirs(entry.content)
    if not dirs:
        return None
    return surgery.per_version(entry, ("delta", 0),
                               lambda: _read(surgery, entry, dirs, DELTA_FILES))


def _read(surgery: PlanSurgery, entry: Any, dirs: list[str], files_glob: str | None,
          bucket_spec: tuple[bool, int] | None = None) -> Any:
    """The relation over ``dirs`` (files matching ``files_glob``); with ``bucket_spec``
    (sorted scan, groups), bucketed by the indexed columns (see :func:`index_relation`)."""
    relation = surgery.read_parquet(entry.content["schema"], dirs, files_glob)
    if bucket_spec is None:
        return relation
    indexed, _ = index_columns(entry.config)
    sorted_scan, groups = bucket_spec
    return surgery.bucketed(relation, int(entry.config["numBuckets"]),
                            [c.name for c in indexed], sorted_scan, groups)
