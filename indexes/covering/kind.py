"""The covering index as an acceleration kind: config, builds (full, incremental, optimize),
matching by the filter rule, and its row in ``indexes()``."""
from __future__ import annotations

import json
from typing import Any, Callable

from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from indexes.covering import compaction, join_rule, match, replace
from indexes.covering.bucket_count import default_num_buckets
from indexes.covering.build import (data_dirs, data_facts, estimated_bytes, index_rows,
                                    write_buckets, write_delta)
from indexes.covering.config import KIND, CoveringIndexConfig
from indexes.covering.match import LINEAGE_COLUMN, index_columns
from indexes.description import SourceDescription
from indexes.errors import InvalidIndexConfigError
from indexes.kind import (BuildJob, IndexKind, IoStats, MatchContext, PlanSurgery, Serving,
                          SpecCheck)
from indexes.plan import PlanNode
from indexes.source import file_changes, file_uri, source_mismatch


class CoveringKind(IndexKind):
    """Indexed and included columns, bucketed and sorted by the indexed ones; replaces the
    relation it answers (filter rule, join rule, hybrid scan)."""

    name = KIND
    display_name = "CoveringIndex"
    optimize_modes = compaction.MODES
    spec_name = "covering"
    config_type = CoveringIndexConfig
    serving = Serving.REPLACE
    joins = True
    engine_kinds = ("covering",)

    def resolve(self, df: Any, config: CoveringIndexConfig, source: SourceDescription,
                settings: Any) -> dict:
        indexed, included = config.resolve(df.schema, settings.case_sensitive)
        cfg = {"indexedColumns": [c.to_json() for c in indexed],
               "includedColumns": [c.to_json() for c in included],
               "numBuckets": config.numBuckets or settings.num_buckets or default_num_buckets(
                   estimated_bytes(index_rows(df, indexed, included)),
                   settings.shuffle_partitions)}
        if settings.lineage:
            clash = [f.name for f in df.schema.fields
                     if f.name.lower() == LINEAGE_COLUMN.lower()]
            if clash:
                raise InvalidIndexConfigError(
                    f"index '{config.indexName}': the source has a column '{clash[0]}', the "
                    f"name of the lineage column (spark.accelerator.index.lineage.enabled); "
                    "rename it or disable lineage for this index")
            cfg["lineage"] = True
        return cfg

    def config_from_spec(self, name: str, fields: dict, where: str,
                         check: SpecCheck) -> CoveringIndexConfig:
        return CoveringIndexConfig(
            name, **check(where, fields, {"indexedColumns"}, {"includedColumns", "numBuckets"}))

    def config_for(self, engine_kind: str, name: str, columns: list[str],
                   included_columns: list[str],
                   distinct_per_file: float | None) -> CoveringIndexConfig:
        return CoveringIndexConfig(name, list(columns), list(included_columns))

    # --- builds -------------------------------------------------------------------------
    def build(self, job: BuildJob) -> tuple[SourceDescription, dict]:
        if job.previous is not None:
            return self._incremental(job)
        indexed, included = index_columns(job.config)
        files = job.source.files
        ids = {f.path: i for i, f in enumerate(files)} if job.config.get("lineage") else None
        rows = index_rows(job.df, indexed, included, _by_uri(ids))
        content = write_buckets(rows, [c.name for c in indexed], job.config["numBuckets"],
                                job.data_path, job.fs)
        job.read = IoStats.of_files(files)
        job.written = _written(content["files"])
        return job.source, content if ids is None else {**content, "fileIds": ids}

    def _incremental(self, job: BuildJob) -> tuple[SourceDescription, dict]:
        """The new data version after files were appended, deleted or modified: the rows of
        the new files, written as a few delta files sorted by the indexed columns (bucketed
        reads add them to the buckets, ``optimizeIndex`` folds them in); the previous
        version's files stay in use where they are (the version then spans several
        directories). When files were deleted, all rows but those files' are rewritten into
        buckets."""
        entry = job.previous
        indexed, included = index_columns(entry.config)
        appended, deleted = file_changes(entry, job.source.files)
        ids = dict(entry.content.get("fileIds") or {}) if entry.config.get("lineage") else None
        gone: list[int] = []
        if ids is not None:
            gone = sorted({ids.pop(f.path) for f in deleted if f.path in ids})
            start = max(ids.values(), default=-1) + 1
            ids.update({f.path: start + i for i, f in enumerate(appended)})
        new_ids = None if ids is None else {f.path: ids[f.path] for f in appended}
        keys, buckets = [c.name for c in indexed], entry.config["numBuckets"]
        rows = index_rows(
            job.df.where(F.col("_metadata.file_path").isin([file_uri(f.path) for f in appended])),
            indexed, included, _by_uri(new_ids))
        job.read = IoStats.of_files(appended)
        if gone:
            kept = (job.spark.read.parquet(*data_dirs(entry.content))
                    .where(~F.col(LINEAGE_COLUMN).isin(gone)))
            content = write_buckets(kept.unionByName(rows), keys, buckets, job.data_path, job.fs)
            job.read = IoStats(job.read.files + len(self.data_files(entry, job)),
                               job.read.bytes + int(entry.content.get("sizeInBytes") or 0))
            job.written = _written(content["files"])
        else:
            # the new rows alone, as delta files; the previous versions' files stay in use
            added = write_delta(rows, keys, job.data_path, job.fs) if appended else []
            job.fs.mkdirs(job.data_path)
            files = self.data_files(entry, job) + added
            content = {"schema": entry.content["schema"], "files": files,
                       "numRows": sum(f[2] for f in files), "numFiles": len(files),
                       "sizeInBytes": sum(f[3] for f in files)}
            job.written = _written(added)
        extra = {"appendedFiles": len(appended), "deletedFiles": len(deleted)}
        return job.source, {**content, **extra, **({} if ids is None else {"fileIds": ids})}

    def check_refresh(self, entry: Any, source: SourceDescription, mode: str) -> None:
        """An incremental or quick refresh handles files appended to a source read as before,
        and deleted or modified files only with the lineage column."""
        mismatch = source_mismatch(entry.source, source, source.schema, check_files=False)
        if mismatch:
            raise InvalidIndexConfigError(
                f"index '{entry.name}' cannot be refreshed with mode='{mode}': {mismatch}; use "
                "mode='full'")
        _, deleted = file_changes(entry, source.files)
        if deleted and not entry.config.get("lineage"):
            raise InvalidIndexConfigError(
                f"index '{entry.name}' cannot be refreshed with mode='{mode}': {len(deleted)} "
                f"indexed source files were deleted or modified (e.g. {deleted[0].path}), and the "
                "index has no lineage column to drop their rows (create it with "
                "spark.accelerator.index.lineage.enabled=true); use mode='full'")

    @staticmethod
    def data_files(entry: Any, job: BuildJob) -> list[list]:
        """The ``[name, bucket, rows, bytes]`` of the index's data files (recorded in its
        content; counted for an index built before they were recorded)."""
        files = entry.content.get("files")
        if files is None:
            files = data_facts(job.spark, entry.content["path"], job.fs)["files"]
        return [list(f) for f in files]

    def optimize_selection(self, entry: Any, mode: str, budget: int, job: BuildJob) -> list[list]:
        files = [compaction.DataFile.of(f) for f in self.data_files(entry, job)]
        groups = compaction.select(files, mode, budget, int(entry.config["numBuckets"]))
        chosen = {f.name for g in groups for f in g}
        return [[f.name, f.bucket, f.rows, f.bytes] for f in files if f.name in chosen]

    def optimize(self, job: BuildJob, chosen: list[list]) -> tuple[SourceDescription, dict]:
        """The ``chosen`` files rewritten, one sorted file per bucket, next to copies of the
        index's other files."""
        entry = job.previous
        names = {f[0] for f in chosen}
        root = entry.content["path"].rstrip("/").rsplit("/", 1)[0]
        indexed, _ = index_columns(entry.config)
        schema = StructType.fromJson(json.loads(entry.content["schema"]))
        rows = job.spark.read.schema(schema).parquet(*[f"{root}/{n}" for n in sorted(names)])
        written = write_buckets(rows, [c.name for c in indexed], entry.config["numBuckets"],
                                job.data_path, job.fs)
        kept = [f for f in self.data_files(entry, job) if f[0] not in names]
        files = written["files"] + _copy_data(job, kept)
        job.read, job.written = _written(chosen), _written(written["files"])
        content = {**entry.content, "files": files, "numFiles": len(files),
                   "numRows": sum(f[2] for f in files), "sizeInBytes": sum(f[3] for f in files)}
        return entry.source, content

    # --- queries ------------------------------------------------------------------------
    def match(self, root: PlanNode, relation: PlanNode, description: SourceDescription,
              entry: Any, state: Any, ctx: MatchContext) -> Any:
        return match.evaluate(root, relation, description, entry, ctx.case_sensitive, ctx.hybrid)

    def choose(self, verdicts: list[Any]) -> Any:
        return match.choose(verdicts)

    def filter_columns(self, entry: Any) -> frozenset[str]:
        """The filter rule needs the first indexed column in the filter."""
        indexed, _ = index_columns(entry.config)
        return frozenset({indexed[0].path[0].lower()})

    def serve_joins(self, root: PlanNode, relations: list[PlanNode], decisions: list[Any],
                    indexes: list[Any], settings: Any, hints: list[str],
                    parallelism: Callable[[], int]) -> dict[int, int]:
        """The join rule (:mod:`indexes.covering.join_rule`)."""
        return join_rule.join_rule(root, relations, decisions, indexes, settings, hints,
                                   parallelism)

    def serve(self, plan: Any, ordinal: int, verdict: Any, surgery: PlanSurgery,
              join_groups: int | None, settings: Any, payload: dict) -> Any:
        """Replaces the relation by one over the index's data (:mod:`indexes.covering.replace`)."""
        return replace.serve(plan, ordinal, verdict, surgery, join_groups, settings, payload)

    def needs_changes(self, entry: Any, fingerprint: str | None, settings: Any) -> bool:
        """When the fingerprints differ, the relation's files may still be the index's (an
        older version's fingerprint), or hybrid scan reads the difference."""
        return entry.source.fingerprint != fingerprint

    def columns(self, entry: Any) -> tuple[list[str], list[str]]:
        indexed, included = index_columns(entry.config)
        return [".".join(c.path) for c in indexed], [".".join(c.path) for c in included]

    def data_stats(self, content: dict) -> IoStats:
        files = content.get("files")
        return super().data_stats(content) if files is None else _written(files)

    def data_dirs(self, entry: Any) -> list[str]:
        return data_dirs(entry.content)


def _by_uri(ids: dict[str, int] | None) -> dict[str, int] | None:
    """File ids keyed by the URI Spark gives as ``_metadata.file_path``."""
    return None if ids is None else {file_uri(p): i for p, i in ids.items()}


def _written(files: list[list]) -> IoStats:
    """The stats of data files given as ``[name, bucket, rows, bytes]``, with their
    compaction levels."""
    return IoStats(len(files), sum(int(f[3]) for f in files), sum(int(f[2]) for f in files),
                   tuple(sorted(compaction.level(int(f[2])) for f in files)))


def _copy_data(job: BuildJob, files: list[list]) -> list[list]:
    """Copies ``files`` (``[name, ...]`` records, names relative to the index directory) of
    the replaced entry's data into the job's data path; returns their records there."""
    root = job.previous.content["path"].rstrip("/").rsplit("/", 1)[0]
    version = job.data_path.rstrip("/").rsplit("/", 1)[-1]
    job.fs.mkdirs(job.data_path)
    copied = []
    for name, *facts in files:
        base = name.rsplit("/", 1)[-1]
        job.fs.copy(f"{root}/{name}", f"{job.data_path.rstrip('/')}/{base}")
        copied.append([f"{version}/{base}", *facts])
    return copied
