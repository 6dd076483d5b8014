"""A kind defined in this file alone, registered through :func:`indexes.kinds.register`, is
created, served (its pruning shows in ``inputFiles()``), explained, listed, answered by whyNot
and seen and built by the rule engine like the built-in kinds, no other module knowing it."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from accelerator.api.rows import RECOMMENDATIONS_SCHEMA
from accelerator.engine.advisor import existing_indexes
from indexes import kinds
from indexes.description import SourceDescription
from indexes.kind import BuildJob, IndexKind, IoStats, Serving
from indexes.source import NotApplicable
from rules.profiles import ExistingIndex
from tests.helpers import rows, vanilla


@dataclass(frozen=True)
class NamedFilesConfig:
    """An index keeping the source files whose name matches ``pattern``."""

    indexName: str
    pattern: str


@dataclass(frozen=True)
class NamedFiles:
    """The files of a relation the index keeps."""

    index: Any
    kept: list[str]
    cost: int
    applicable = True

    def explain_line(self) -> str:
        pattern = self.index.config["pattern"]
        return f"{self.index.name}: {len(self.kept)} files named like {pattern}"

    def applied_reason(self) -> str:
        return "only the files whose names match are read"

    def row_group_lines(self) -> str:
        return ""


class NamedFilesKind(IndexKind):
    """Records the source's files whose name matches a pattern; a query reads those, and the
    files the index does not know."""

    name = "NamedFilesIndex"
    display_name = "NamedFilesIndex"
    spec_name = "namedfiles"
    config_type = NamedFilesConfig
    serving = Serving.PRUNE
    engine_kinds = ("namedfiles",)

    def resolve(self, df: Any, config: NamedFilesConfig, source: SourceDescription,
                settings: Any) -> dict:
        return {"pattern": config.pattern}

    def config_from_spec(self, name, fields, where, check) -> NamedFilesConfig:
        return NamedFilesConfig(name, **check(where, fields, {"pattern"}, set()))

    def config_for(self, engine_kind, name, columns, included_columns,
                   distinct_per_file) -> NamedFilesConfig:
        return NamedFilesConfig(name, columns[0])

    def build(self, job: BuildJob) -> tuple[SourceDescription, dict]:
        files = job.source.files
        names = [f.path for f in files
                 if re.search(job.config["pattern"], f.path.rsplit("/", 1)[-1])]
        job.fs.mkdirs(job.data_path)
        job.read, job.written = IoStats.of_files(files), IoStats()
        return job.source, {"names": names, "numFiles": 0, "sizeInBytes": 0,
                            "numRows": len(names)}

    def match(self, root, relation, description, entry, state, ctx) -> Any:
        files = description.files or ()
        known = {f.path for f in entry.source.files}
        kept = [f for f in files if f.path not in known or f.path in entry.content["names"]]
        if len(kept) == len(files):
            return NotApplicable(entry, "NO_FILE_SKIPPED", "every file's name matches")
        return NamedFiles(entry, [f.path for f in kept], sum(int(f.size) for f in kept))

    def choose(self, verdicts: list[Any]) -> Any:
        return min(verdicts, key=lambda v: v.cost, default=None)

    def columns(self, entry: Any) -> tuple[list[str], list[str]]:
        return [f"name ~ {entry.config['pattern']}"], []


@pytest.fixture
def toy():
    with kinds.registered(NamedFilesKind()) as kind:
        yield kind


@pytest.fixture
def source(tmp_path):
    """Four Parquet files of 10 ids each: keep-0, keep-1, other-0, other-1."""
    path = tmp_path / "source"
    path.mkdir()
    for i, name in enumerate(["keep-0", "keep-1", "other-0", "other-1"]):
        pq.write_table(pa.table({"id": list(range(10 * i, 10 * i + 10))}),
                       str(path / f"{name}.parquet"))
    return str(path)


def test_a_kind_is_registered_once_and_only_under_new_names(toy):
    with pytest.raises(ValueError, match="'namedfilesindex' is registered already"):
        kinds.register(NamedFilesKind())
    clashing = type("Clashing", (NamedFilesKind,), {"name": "Other", "display_name": "Other",
                                                     "spec_name": "other",
                                                     "engine_kinds": ("bloom",)})
    with pytest.raises(ValueError, match="'bloom' is registered already"):
        kinds.register(clashing())
    assert kinds.kind_for_engine("bloom").display_name == "DataSkippingIndex"


def _names(df) -> list[str]:
    return sorted(os.path.basename(f) for f in df.inputFiles())


def test_a_registered_kind_is_served_explained_listed_and_advised(spark, hs, toy, source):
    assert kinds.canonical_kind("namedfiles") is toy
    hs.createIndex(spark.read.parquet(source), NamedFilesConfig("toy", "^keep-"))

    listed = hs.indexes().where("name = 'toy'").collect()
    assert [(r["kind"], r["indexedColumns"], r["state"], r["warning"]) for r in listed] == [
        ("NamedFilesIndex", ["name ~ ^keep-"], "ACTIVE", None)]

    query = spark.read.parquet(source).where("id >= 5")
    assert _names(query) == ["keep-0.parquet", "keep-1.parquet"]
    assert rows(query) == [(i,) for i in range(5, 20)]
    assert vanilla(spark, lambda: spark.read.parquet(source).where("id >= 5")) == [
        (i,) for i in range(5, 40)]   # the toy prunes by name alone
    assert "toy: 2 files named like ^keep-" in hs.explain(query, redirectFunc=lambda _: None)
    reasons = hs.whyNot(query, "toy", redirectFunc=lambda _: None)
    assert [(r.code, r.reason) for r in reasons] == [
        ("APPLIED", "only the files whose names match are read")]

    entry = hs.context.lifecycle().get("toy")
    assert existing_indexes([entry]) == [
        ExistingIndex("toy", "namedfiles", f"file:{source}", ("name ~ ^keep-",), "user", 0)]


def test_the_rule_engine_creates_an_index_of_a_registered_kind(spark, hs, toy, source):
    spark.read.parquet(source).where("id = 3").collect()   # the history now reads the source
    recs = spark.createDataFrame(
        [("create", "namedfiles", f"file:{source}", ["^other-"], [], "auto_toy", "MEDIUM",
          None, "user", 1.0, 1.0, 0, 1, "asked")], RECOMMENDATIONS_SCHEMA)
    applied = hs.applyRecommendations(recs).collect()
    assert [(r["status"], r["message"]) for r in applied] == [
        ("applied", "created NamedFilesIndex over 4 files")]
    assert _names(spark.read.parquet(source).where("id >= 0")) == [
        "other-0.parquet", "other-1.parquet"]
