"""Serving a relation from the index chosen for it: its kind serves it
(:meth:`indexes.kind.IndexKind.serve`: a pruning kind shrinks the relation's file list, a
replacing one swaps in a relation over its data) through :class:`JvmPlanSurgery`, the
:class:`indexes.kind.PlanSurgery` port onto the JVM's plan helpers."""
from __future__ import annotations

from typing import Any, Callable

from accelerator.query.decisions import RelationDecision
from accelerator.runtime.settings import Settings
from indexes import kinds
from indexes.version_cache import VersionCache


def serve(surgery: "JvmPlanSurgery", plan: Any, decision: RelationDecision,
          joined: dict[int, int], settings: Settings, payload: dict) -> Any:
    """The plan with the relation of ``decision`` served from its chosen index by the index's
    kind; ``joined`` holds the relations the join rule serves (see
    :meth:`indexes.kind.IndexKind.serve_joins`)."""
    chosen = decision.chosen
    return kinds.kind_of(chosen.index).serve(plan, decision.ordinal, chosen, surgery,
                                             joined.get(decision.ordinal), settings, payload)


class JvmPlanSurgery:
    """The plan-surgery port over ``spark``'s JVM (``plans``: the PlanRewrite helper);
    relations over index data are kept per index version in ``versions``."""

    def __init__(self, spark: Any, plans: Any, versions: VersionCache):
        self._spark = spark
        self._plans = plans
        self._versions = versions

    def prune_files(self, plan: Any, ordinal: int, kept: list[str],
                    row_group_lines: str) -> Any:
        return self._plans.pruneFiles(plan, ordinal, "\n".join(kept), row_group_lines)

    def read_parquet(self, schema_json: str, dirs: list[str], files_glob: str | None) -> Any:
        jvm_ = self._spark.sparkContext._jvm
        schema = jvm_.org.apache.spark.sql.types.DataType.fromJson(schema_json)
        reader = self._spark._jsparkSession.read().schema(schema).format("parquet")
        if files_glob is not None:
            reader = reader.option("pathGlobFilter", files_glob)
        return reader.load(jvm_.org.apache.spark.api.python.PythonUtils.toSeq(dirs)) \
            .queryExecution().analyzed()

    def bucketed(self, relation: Any, num_buckets: int, columns: list[str], sorted_scan: bool,
                 groups: int) -> Any:
        return self._plans.withBucketSpec(relation, num_buckets, "\n".join(columns),
                                          sorted_scan, groups)

    def replace_relation(self, plan: Any, ordinal: int, relation: Any, *, specs: list[str],
                         restore_order: bool, appended: list[str], deleted_ids: list[int],
                         deltas: Any, bucket_union: bool, lookup_buckets: int) -> Any:
        return self._plans.replaceRelation(
            plan, ordinal, relation, "\n".join(specs), restore_order, "\n".join(appended),
            "\n".join(map(str, deleted_ids)), deltas, bucket_union, lookup_buckets)

    def per_version(self, entry: Any, key: Any, make: Callable[[], Any]) -> Any:
        return self._versions.get(entry, key, make)
