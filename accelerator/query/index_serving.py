"""Serving a relation from the index chosen for it, as its kind says
(:class:`indexes.kind.Serving`): replaced by a relation over a covering index's data (built
once per index version and shape), or its file list pruned to what a data-skipping or text
index kept."""
from __future__ import annotations

from typing import Any

from accelerator.query.decisions import RelationDecision
from accelerator.runtime.settings import Settings
from indexes import kinds
from indexes.covering import match as covering_match
from indexes.covering.build import BUCKET_FILES, DELTA_FILES, data_dirs, delta_dirs
from indexes.kind import Serving
from indexes.version_cache import VersionCache


class IndexServing:
    """Applies chosen verdicts to JVM plans of ``spark`` (``plans``: the PlanRewrite helper);
    relations over index data are kept per index version in ``versions``."""

    def __init__(self, spark: Any, plans: Any, versions: VersionCache):
        self._spark = spark
        self._plans = plans
        self._versions = versions
        self._serve = {Serving.REPLACE: self._replace, Serving.PRUNE: self._prune}

    def serve(self, plan: Any, decision: RelationDecision, joined: dict[int, int],
              settings: Settings, payload: dict) -> Any:
        """The plan with the relation of ``decision`` served from its chosen index;
        ``joined`` holds the relations the join rule serves (see
        :func:`accelerator.query.join_rule.join_rule`)."""
        serve = self._serve[kinds.kind_of(decision.chosen.index).serving]
        return serve(plan, decision, joined, settings, payload)

    def _prune(self, plan: Any, decision: RelationDecision, joined: dict[int, int],
               settings: Settings, payload: dict) -> Any:
        """The relation reads only the files (and row groups) the chosen index kept."""
        return self._plans.pruneFiles(plan, decision.ordinal, "\n".join(decision.chosen.kept),
                                      decision.chosen.row_group_lines())

    def _replace(self, plan: Any, decision: RelationDecision, joined: dict[int, int],
                 settings: Settings, payload: dict) -> Any:
        """The relation is replaced by one over the chosen index's data (bucketed for the join
        rule, or for the filter rule when useBucketSpec is on), with hybrid scan's appended
        files and lineage exclusions."""
        chosen = decision.chosen
        joins = decision.ordinal in joined
        bucketed = joins or settings.filter_rule_bucket_spec
        # a lookup no operator needs bucketed reads its buckets' files as plain ones, chosen
        # by the JVM (Spark's own bucket pruning generates code for each literal)
        lookup_buckets = int(chosen.index.config["numBuckets"]) \
            if bucketed and not joins and chosen.bucket_lookup else 0
        bucketed = bucketed and not lookup_buckets
        relation = self.index_relation(chosen.index, bucketed, sorted_scan=joins,
                                       groups=joined.get(decision.ordinal, 0))
        deltas = self.delta_relation(chosen.index) if bucketed else None
        return self._plans.replaceRelation(
            plan, decision.ordinal, relation, "\n".join(chosen.specs), chosen.restore_order,
            "\n".join(chosen.appended), "\n".join(map(str, chosen.deleted_ids)), deltas,
            joins and bool(payload.get("bucketUnion")), lookup_buckets)

    def index_relation(self, entry: Any, bucketed: bool = True, sorted_scan: bool = False,
                       groups: int = 0) -> Any:
        """The JVM relation reading an index's data version, bucketed by the indexed columns
        (Spark then prunes buckets on equality filters and joins two such relations without a
        shuffle) unless ``bucketed`` is false. A bucketed relation reads only the bucket files;
        the delta files of incremental refreshes are read by :meth:`delta_relation`. With
        ``sorted_scan`` (for a join), its scan stays bucketed and reports the buckets' sort
        order where each bucket is one file, so a sort-merge join does not sort it; without,
        Spark may read a bucketed relation as plain files where no operator needs its buckets
        (a lookup reading one bucket of 200 in one task, not 200). ``groups`` below the
        bucket count makes a sorted scan read the buckets in that many groups, unsorted (see
        :func:`join_match.bucket_groups`)."""
        if not (bucketed and sorted_scan and 0 < groups < int(entry.config["numBuckets"])):
            groups = 0
        shape = ("sorted" if sorted_scan else "bucketed") if bucketed else "plain"
        return self._versions.get(entry, (shape, groups), lambda: self._read_index(
            entry, data_dirs(entry.content), BUCKET_FILES if bucketed else None,
            (sorted_scan, groups) if bucketed else None))

    def delta_relation(self, entry: Any) -> Any | None:
        """The JVM relation reading only the delta files of an index's data version (rows of
        files an incremental refresh indexed, in any bucket), which a bucketed read of the index
        unions with its bucket files; None when it has none."""
        dirs = delta_dirs(entry.content)
        if not dirs:
            return None
        return self._versions.get(entry, ("delta", 0),
                                  lambda: self._read_index(entry, dirs, DELTA_FILES))

    def _read_index(self, entry: Any, dirs: list[str], files_glob: str | None,
                    bucket_spec: tuple[bool, int] | None = None) -> Any:
        """The relation over ``dirs`` (files matching ``files_glob``); with ``bucket_spec``
        (sorted scan, groups), bucketed by the indexed columns (see :meth:`index_relation`)."""
        jvm_ = self._spark.sparkContext._jvm
        schema = jvm_.org.apache.spark.sql.types.DataType.fromJson(entry.content["schema"])
        reader = self._spark._jsparkSession.read().schema(schema).format("parquet")
        if files_glob is not None:
            reader = reader.option("pathGlobFilter", files_glob)
        found = reader.load(jvm_.org.apache.spark.api.python.PythonUtils.toSeq(dirs)) \
            .queryExecution().analyzed()
        if bucket_spec is not None:
            indexed, _ = covering_match.index_columns(entry.config)
            sorted_scan, groups = bucket_spec
            found = self._plans.withBucketSpec(
                found, int(entry.config["numBuckets"]), "\n".join(c.name for c in indexed),
                sorted_scan, groups)
        return found
