"""The text index as an acceleration kind: tantivy shards that prune a relation's file list
for LIKE, contains, regex and equality predicates, and answer full-text search."""
from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from indexes.description import SourceDescription
from indexes.kind import BuildJob, IndexKind, IoStats, MatchContext, Serving, SpecCheck
from indexes.plan import PlanNode
from indexes.skipping.footers import layouts as footer_layouts
from indexes.skipping.ir import key_columns
from indexes.source import covered_files, file_uri
from indexes.text import match
from indexes.text.build import resolve_column, write_shards
from indexes.text.config import KIND, TextIndexConfig
from indexes.text.literals import UNICODE_VERSION
from indexes.text.reader import TextIndexReader


class TextKind(IndexKind):
    """Tantivy documents of groups of source rows (or of rows, to score them) holding their
    trigrams and words, sharded per build task."""

    name = KIND
    display_name = "TextIndex"
    spec_name = "text"
    config_type = TextIndexConfig
    serving = Serving.PRUNE
    stateful = True
    searchable = True
    executor_modules = ("pyarrow", "pandas", "tantivy")
    engine_kinds = ("text",)

    def resolve(self, df: Any, config: TextIndexConfig, source: SourceDescription,
                settings: Any) -> dict:
        return {**resolve_column(df, config, settings.case_sensitive), "unicodeVersion": UNICODE_VERSION,
                "scoring": config.scoring}

    def config_from_spec(self, name: str, fields: dict, where: str,
                         check: SpecCheck) -> TextIndexConfig:
        return TextIndexConfig(name, **check(where, fields, {"column"}, {"scoring"}))

    def config_for(self, engine_kind: str, name: str, columns: list[str],
                   included_columns: list[str], distinct_per_file: float | None) -> TextIndexConfig:
        return TextIndexConfig(name, column=columns[0])

    def build(self, job: BuildJob) -> tuple[SourceDescription, dict]:
        """Writes the shards of the source's files, and records the row groups of its Parquet
        files that have several (``rowGroups``: per path, ``[first row, start, end]`` each);
        an incremental refresh indexes only appended or modified files and keeps the earlier
        shards, in which modified and deleted files are ignored from then on."""
        files = job.source.files
        current = {f.path: (f.size, f.mtime) for f in files}
        kept: list[dict] = []
        todo = files
        if job.previous is not None:
            old = {f.path: (f.size, f.mtime) for f in covered_files(job.previous)}
            todo = [f for f in files if old.get(f.path) != (f.size, f.mtime)]
            for shard in job.previous.content["shards"]:
                shard_files = [f if f is not None and current.get(f) == old.get(f) else None
                               for f in shard["files"]]
                if any(shard_files):
                    kept.append({**shard, "files": shard_files})
        job.fs.mkdirs(job.data_path)
        for i, shard in enumerate(kept):   # each data version holds all its shards
            target = f"{job.data_path.rstrip('/')}/shards/kept-{i:05d}.parquet"
            job.fs.copy(shard["path"], target)
            kept[i] = {**shard, "path": job.fs.qualify(target)}
        redone = {f.path for f in todo}
        layouts = {p: g for p, g in (job.previous.content.get("rowGroups", {}).items()
                                     if job.previous is not None else ())
                   if p in current and p not in redone}
        if todo and job.source.read_format == "parquet":
            layouts.update({p: [[row, *span] for row, span in zip(l.first_rows, l.ranges)]
                            for p, l in footer_layouts(job.df, todo).items()})
        built: list[dict] = []
        if todo:
            scope = job.df if job.previous is None else job.df.where(
                F.col("_metadata.file_path").isin([file_uri(f.path) for f in todo]))
            built = write_shards(scope, job.config, job.source.read_format,
                                 f"{job.data_path.rstrip('/')}/{'new' if kept else 'all'}",
                                 {p: [g[0] for g in layouts[p]] for p in redone if p in layouts})
        shards = kept + built
        size = sum(job.fs.size(s["path"]) for s in shards)
        job.read = IoStats.of_files(todo)
        job.written = IoStats(len(built), sum(job.fs.size(s["path"]) for s in built),
                              sum(s["rows"] for s in built))
        content = {"shards": shards, "numFiles": len(shards), "sizeInBytes": size,
                   "numRows": sum(s["rows"] for s in shards),
                   "textBytes": sum(s["textBytes"] for s in shards),
                   "indexedFiles": len(todo), "reusedShards": len(kept), "rowGroups": layouts}
        return job.source, content

    def load(self, entry: Any, fs: Any, settings: Any) -> TextIndexReader:
        """The reader of the version's shards (copied to a local directory on first use)."""
        path = entry.content["path"]
        return TextIndexReader(fs, entry.content["shards"],
                               f"{path}|{entry.id}|{entry.timestamp}", settings.text_cache_dir)

    def match(self, root: PlanNode, relation: PlanNode, description: SourceDescription,
              entry: Any, state: Any, ctx: MatchContext) -> Any:
        return match.evaluate(relation, description, entry, state, ctx.session_tz, ctx.ansi)

    def choose(self, verdicts: list[Any]) -> Any:
        return min(verdicts, key=lambda v: v.kept_bytes, default=None)

    def columns(self, entry: Any) -> tuple[list[str], list[str]]:
        return [entry.config["column"]], []

    def filter_columns(self, entry: Any) -> frozenset[str] | None:
        """The columns the indexed expression reads."""
        key = entry.config.get("key")
        return None if key is None else frozenset(c.lower() for c in key_columns(key))
