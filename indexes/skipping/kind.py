"""The data-skipping index as an acceleration kind: per-file statistics that prune a relation's
file list."""
from __future__ import annotations

import dataclasses
from typing import Any

from pyspark.sql import functions as F

from indexes.description import SourceDescription
from indexes.errors import InvalidIndexConfigError
from indexes.kind import BuildJob, IndexKind, IoStats, MatchContext, Serving, SpecCheck
from indexes.plan import PlanNode
from indexes.skipping import ir, match
from indexes.skipping.bloom import FORMAT as BLOOM_FORMAT
from indexes.skipping.build import resolve_sketches, session_ansi, sketch_specs
from indexes.skipping.config import (KIND, SKETCH_CLASSES, BloomFilterSketch,
                                     DataSkippingIndexConfig, MinMaxSketch, ValueListSketch)
from indexes.skipping.store import DATASET
from indexes.skipping.write import reused_stats, stats_size, unchanged_files, write_stats
from indexes.skipping.table import StatsTable
from indexes.source import file_uri

#: the sketch class of each rule-engine kind a data-skipping index answers
_ENGINE_SKETCHES = {"minmax": MinMaxSketch, "bloom": BloomFilterSketch,
                    "valuelist": ValueListSketch}
#: a Bloom filter the rule engine asks for is sized for this many times the distinct values
#: it profiled per file
_BLOOM_HEADROOM = 2.0


class SkippingKind(IndexKind):
    """MinMax, Bloom filter and value-list sketches per source file."""

    name = KIND
    display_name = "DataSkippingIndex"
    spec_name = "skipping"
    config_type = DataSkippingIndexConfig
    serving = Serving.PRUNE
    prunes_through_joins = True
    stateful = True
    executor_modules = ("pyarrow", "pandas")
    engine_kinds = tuple(_ENGINE_SKETCHES)

    def resolve(self, df: Any, config: DataSkippingIndexConfig, source: SourceDescription,
                settings: Any) -> dict:
        sketches = resolve_sketches(df, config, source.partition_columns, source.read_format,
                                    settings.case_sensitive)
        return {"sketches": [s.to_json() for s in sketches]}

    def config_from_spec(self, name: str, fields: dict, where: str,
                         check: SpecCheck) -> DataSkippingIndexConfig:
        """``sketches``: a list of ``{kind: MinMax|BloomFilter|ValueList, expression,
        <parameters of the sketch class>}``."""
        sketches = check(where, fields, {"sketches"}, set())["sketches"]
        if not isinstance(sketches, list):
            raise InvalidIndexConfigError(
                f"{where}: sketches must be a list, got {type(sketches).__name__}")
        return DataSkippingIndexConfig(name, *(_sketch(f"{where}: sketches[{i}]", s, check)
                                               for i, s in enumerate(sketches)))

    def config_for(self, engine_kind: str, name: str, columns: list[str],
                   included_columns: list[str],
                   distinct_per_file: float | None) -> DataSkippingIndexConfig:
        """One sketch of the first column; a Bloom filter sized for the distinct values per
        file profiled (100,000 when not profiled)."""
        sketch = _ENGINE_SKETCHES[engine_kind]
        if sketch is BloomFilterSketch:
            expected = (100_000 if distinct_per_file is None
                        else int(max(1000, _BLOOM_HEADROOM * distinct_per_file)))
            return DataSkippingIndexConfig(name, BloomFilterSketch(
                columns[0], expectedDistinctCountPerFile=expected))
        return DataSkippingIndexConfig(name, sketch(columns[0]))

    def engine_targets(self, entry: Any) -> list[tuple[str, tuple[str, ...]]]:
        """One target per sketch."""
        engine_kind = {c.kind: k for k, c in _ENGINE_SKETCHES.items()}
        return [(engine_kind.get(s.get("kind"), str(s.get("kind")).lower()),
                 (str(s.get("expression")),)) for s in entry.config.get("sketches", [])]

    def build(self, job: BuildJob) -> tuple[SourceDescription, dict]:
        """Writes the statistics of the source's files, computed under the session's
        ``spark.sql.ansi.enabled`` (recorded in the content: the index serves only queries run
        under it); an incremental refresh reuses the previous version's entries of files that
        did not change, computed under the same setting, and sketches only the others (all of
        them over a version of format 1 Bloom filters, :func:`legacy_blooms`); records the
        Bloom filters' format (``bloomFormat``)."""
        ansi = session_ansi(job.spark)
        sketches = match.sketches_of(job.config)
        specs = sketch_specs(sketches)
        files = job.source.files
        same = set() if job.previous is None or legacy_blooms(job.previous, specs) \
            else unchanged_files(job.fs, job.previous, files)
        todo = [f for f in files if f.path not in same]
        if same:
            _check_same_ansi(job.previous, ansi)
        scope = job.df if not same else job.df.where(
            F.col("_metadata.file_path").isin([file_uri(f.path) for f in todo]))
        reused = (reused_stats(job.spark, job.previous, specs, [f for f in files if f.path in same])
                  if same else None)
        facts = write_stats(scope, job.source, sketches, todo, job.data_path, reused)
        parts, size = stats_size(job.fs, job.data_path)
        job.read, job.written = IoStats.of_files(todo), IoStats(parts, size, len(files))
        content = {"numFiles": parts, "sizeInBytes": size, "numRows": len(files),
                   "indexedFiles": len(files), "sketchedFiles": len(todo),
                   "reusedFiles": len(same), "ansi": ansi, "statsLayout": DATASET, **facts}
        if any(s.bloom_capacity for s in specs):
            content["bloomFormat"] = BLOOM_FORMAT
        return job.source, content

    def session_difference(self, entry: Any, spark: Any) -> str | None:
        """The ANSI setting, when the session's differs from the one the statistics were
        computed under."""
        return match.ansi_difference(entry, session_ansi(spark))

    def load(self, entry: Any, fs: Any, settings: Any) -> StatsTable:
        """The per-file statistics of the index version."""
        return _stats_table(fs, entry, sketch_specs(match.sketches_of(entry.config)))

    def match(self, root: PlanNode, relation: PlanNode, description: SourceDescription,
              entry: Any, state: Any, ctx: MatchContext) -> Any:
        return match.evaluate(relation, description, entry, state, ctx.session_tz, ctx.ansi,
                              ctx.joins)

    def choose(self, verdicts: list[Any]) -> Any:
        return match.choose(verdicts)

    def columns(self, entry: Any) -> tuple[list[str], list[str]]:
        return [f"{s['kind']}({s['expression']})" for s in entry.config["sketches"]], []

    def filter_columns(self, entry: Any) -> frozenset[str] | None:
        """The columns the sketched expressions read."""
        keys = [s["key"] for s in entry.config["sketches"]]
        if any(k is None for k in keys):
            return None
        return frozenset(c.lower() for k in keys for c in ir.key_columns(k))


def _stats_table(fs: Any, entry: Any, specs: list) -> StatsTable:
    """The statistics of the version ``entry`` names (either layout)."""
    return StatsTable.read(fs, entry.content["path"], specs, entry.content.get("statsLayout"))


def legacy_blooms(previous: Any, specs: list) -> bool:
    """Whether the version ``previous`` (a log entry) holds Bloom filters of format 1
    (:mod:`indexes.skipping.bloom`; written before its content recorded ``bloomFormat``): an
    incremental refresh then sketches every file again, so one version never mixes formats
    (queries read either, but bit-slice only filters of one format)."""
    return any(s.bloom_capacity for s in specs) and \
        previous.content.get("bloomFormat", 1) != BLOOM_FORMAT


def _check_same_ansi(previous: Any, ansi: bool) -> None:
    """Raises InvalidIndexConfigError when an incremental refresh would keep statistics
    computed under another spark.sql.ansi.enabled than the session's: the statistics of one
    version must all hold what the queries it serves (run under one setting) compute, casts and
    arithmetic included."""
    difference = match.ansi_difference(previous, ansi)
    if difference:
        built = str(match.built_ansi(previous)).lower()
        raise InvalidIndexConfigError(
            f"index '{previous.name}' cannot be refreshed incrementally: {difference}. Refresh "
            f"it with mode='full' to recompute every file under this session's setting, or set "
            f"spark.sql.ansi.enabled={built} to keep serving queries run with it")


def _sketch(where: str, spec: Any, check: SpecCheck) -> Any:
    """A sketch from ``{kind: MinMax|BloomFilter|ValueList, expression, <parameters>}``."""
    classes = {c.kind.lower(): c for c in SKETCH_CLASSES}
    kind = spec.get("kind") if isinstance(spec, dict) else None
    cls = classes.get(str(kind).lower())
    if cls is None:
        raise InvalidIndexConfigError(
            f"{where}: kind must be one of {', '.join(c.kind for c in SKETCH_CLASSES)}, got "
            f"{kind!r}")
    params = {f.name for f in dataclasses.fields(cls)} - {"expression"}
    fields = check(where, spec, {"kind", "expression"}, params)
    return cls(**{k: v for k, v in fields.items() if k != "kind"})
