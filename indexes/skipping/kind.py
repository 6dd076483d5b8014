"""The data-skipping index as an acceleration kind: per-file statistics that prune a relation's
file list."""
from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from indexes.kind import BuildJob, IndexKind, IoStats, MatchContext, Serving
from indexes.plan import PlanNode
from indexes.skipping import match
from indexes.skipping.build import compute_stats, resolve_sketches, sketch_specs
from indexes.skipping.config import KIND, DataSkippingIndexConfig
from indexes.skipping.store import FileEntry, read_table, write_table
from indexes.source import file_uri


class SkippingKind(IndexKind):
    """MinMax, Bloom filter and value-list sketches per source file."""

    name = KIND
    display_name = "DataSkippingIndex"
    config_type = DataSkippingIndexConfig
    serving = Serving.PRUNE
    executor_modules = ("pyarrow", "pandas", "pybloom_live")

    def resolve(self, df: Any, config: DataSkippingIndexConfig, source: dict,
                settings: Any) -> dict:
        sketches = resolve_sketches(df, config, source["partitionColumns"])
        ansi = str(df.sparkSession.conf.get("spark.sql.ansi.enabled")).lower() == "true"
        return {"sketches": [s.to_json() for s in sketches], "ansi": ansi}

    def build(self, job: BuildJob) -> tuple[dict, dict]:
        """Writes the statistics of the source's files; an incremental refresh reuses the
        previous version's entries of files that did not change and sketches only the others."""
        sketches = match.sketches_of(job.config)
        specs = sketch_specs(sketches)
        previous: dict[str, FileEntry] = ({} if job.previous is None else
                                          read_table(job.fs, job.previous.content["path"], specs))
        files = job.source["files"]
        reused = {p: previous[p] for p, size, mtime in files
                  if p in previous and (previous[p].size, previous[p].mtime) == (size, mtime)}
        todo = [f for f in files if f[0] not in reused]
        entries, facts = dict(reused), {}
        if todo:
            scope = job.df if not reused else job.df.where(
                F.col("_metadata.file_path").isin([file_uri(p) for p, _, _ in todo]))
            computed, facts = compute_stats(scope, job.source, sketches, todo)
            entries.update(computed)
        size = write_table(job.fs, job.data_path, specs, entries)
        job.read, job.written = IoStats.of_files(todo), IoStats(1, size, len(entries))
        content = {"numFiles": 1, "sizeInBytes": size, "numRows": len(entries),
                   "indexedFiles": len(entries), "sketchedFiles": len(todo),
                   "reusedFiles": len(reused), **facts}
        return job.source, content

    def load(self, entry: Any, fs: Any, settings: Any) -> dict[str, FileEntry]:
        """The per-file statistics of the index version."""
        return read_table(fs, entry.content["path"], sketch_specs(match.sketches_of(entry.config)))

    def match(self, root: PlanNode, relation: PlanNode, description: dict, entry: Any,
              state: Any, ctx: MatchContext) -> Any:
        return match.evaluate(relation, description, entry, state, ctx.session_tz, ctx.ansi)

    def choose(self, verdicts: list[Any]) -> Any:
        return match.choose(verdicts)

    def columns(self, entry: Any) -> tuple[list[str], list[str]]:
        return [f"{s['kind']}({s['expression']})" for s in entry.config["sketches"]], []
