"""The covering filter rule decided from plan JSON alone (no JVM): which plans an index can
answer, how its columns map to the plan's attributes, and why not otherwise.

The plans in data/nested_plans.json are Spark 4 optimized plans over the seed's nested schema
(id, name, nested{field1, nst{field1, field2}}), captured with ``LogicalPlan.toJSON()``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pyspark.sql.types import StringType, IntegerType

from indexes.covering.config import IndexColumn
from indexes.covering.match import Applicable, choose, evaluate
from indexes.description import FileChanges, SourceDescription, source_files
from indexes.kind import HybridScan
from indexes.plan import chain, file_relations, parse_plan, plan_references, unsupported_reason
from indexes.source import (NotApplicable, file_changes, pruning_problem, relation_schema,
                            source_changes, source_mismatch)

PLANS = json.loads((Path(__file__).parent / "data" / "nested_plans.json").read_text())
SETTINGS = {"spark.sql.session.timeZone": "UTC"}


@dataclass
class Entry:
    name: str
    config: dict
    source: dict
    content: dict = field(default_factory=lambda: {"sizeInBytes": 100})


def column(path: str, data_type=StringType()) -> dict:
    parts = tuple(path.split("."))
    return IndexColumn(parts, "__".join(parts), data_type).to_json()


def plan(name: str):
    root = parse_plan(PLANS[name])
    [relation] = file_relations(root)
    return root, relation


def description_json(fingerprint: str = "f1") -> dict:
    return {"format": "parquet", "rootPaths": ["file:/data/nested"], "options": {},
            "fingerprint": fingerprint, "readSettings": SETTINGS}


def description(fingerprint: str = "f1") -> SourceDescription:
    return SourceDescription.from_json(description_json(fingerprint))


def entry(relation, indexed, included, name="idx", size=100, **source_changes) -> Entry:
    source = SourceDescription.from_json(
        {**description_json(), "schema": relation_schema(relation), **source_changes})
    return Entry(name, {"indexedColumns": [column(c) for c in indexed],
                        "includedColumns": [column(c, IntegerType() if c == "id" else StringType())
                                            for c in included],
                        "numBuckets": 4},
                 source, {"sizeInBytes": size})


def ids(relation) -> dict[str, int]:
    return {a.fields["name"]: a.expr_id for a in relation.exprs["output"]}


SEED_INDEX = (["nested.nst.field1"], ["id", "name", "nested.nst.field2"])


def test_parse_finds_relation_and_struct_chains():
    root, relation = plan("seed")
    assert [n.cls for n in root.walk()] == ["Project", "Filter", "LogicalRelation"]
    nested = ids(relation)["nested"]
    refs = plan_references(root, {nested}, skip=relation)
    assert {r.path for r in refs} == {("nst", "field1"), ("nst", "field2")}
    [alias] = [e for e in root.exprs["projectList"] if e.cls == "Alias"]
    attr, path = chain(alias.children[0])
    assert (attr.fields["name"], path) == ("nested", ("nst", "field2"))
    assert unsupported_reason(root) is None


def test_seed_query_is_answered_with_flattened_columns():
    root, relation = plan("seed")
    result = evaluate(root, relation, description(), entry(relation, *SEED_INDEX), False)
    assert isinstance(result, Applicable)
    i = ids(relation)
    assert result.specs == [f"~{i['nested']}\u0001nst\u0001field1", f"={i['id']}", f"={i['name']}",
                            f"~{i['nested']}\u0001nst\u0001field2"]
    assert not result.restore_order


def test_filter_without_project_needs_every_column_in_source_order():
    root, relation = plan("filter_only")
    result = evaluate(root, relation, description(), entry(relation, *SEED_INDEX), False)
    assert isinstance(result, NotApplicable) and result.code == "MISSING_COLUMNS"
    assert "nested" in result.reason


@pytest.mark.parametrize("name, index, code", [
    ("id_filter", SEED_INDEX, "NO_FIRST_INDEXED_COLUMN_IN_FILTER"),
    ("no_filter", SEED_INDEX, "NO_FILTER"),
    ("whole_struct", SEED_INDEX, "MISSING_COLUMNS"),
    ("seed", (["nested.nst.field1"], ["id", "name"]), "MISSING_COLUMNS"),
])
def test_not_applicable(name, index, code):
    root, relation = plan(name)
    result = evaluate(root, relation, description(), entry(relation, *index), False)
    assert isinstance(result, NotApplicable) and result.code == code


def test_case_insensitive_matching_only_when_not_case_sensitive():
    root, relation = plan("seed")
    upper = entry(relation, ["NESTED.NST.FIELD1"], ["ID", "NAME", "NESTED.NST.FIELD2"])
    assert isinstance(evaluate(root, relation, description(), upper, False), Applicable)
    result = evaluate(root, relation, description(), upper, True)
    assert isinstance(result, NotApplicable)


@pytest.mark.parametrize("change, words", [
    ({"fingerprint": "other"}, "source files changed"),
    ({"format": "json"}, "format"),
    ({"options": {"mergeSchema": "true"}}, "other options"),
    ({"readSettings": {"spark.sql.session.timeZone": "Asia/Kathmandu"}}, "spark.sql.session.timeZone"),
    ({"schema": [["id", "integer"]]}, "schema differs"),
])
def test_changed_source_is_not_used(change, words):
    root, relation = plan("seed")
    result = evaluate(root, relation, description(),
                      entry(relation, *SEED_INDEX, **change), False)
    assert isinstance(result, NotApplicable) and result.code == "SOURCE_CHANGED"
    assert words in result.reason


def test_a_query_reading_file_metadata_is_told_so():
    recorded = SourceDescription.from_json({"format": "parquet", "schema": [["id", "long"]]})
    current = SourceDescription.from_json({"format": "parquet"})
    metadata = ["_metadata", {"type": "struct", "fields": []}]
    assert "reads the file metadata column _metadata" in source_mismatch(
        recorded, current, [["id", "long"], metadata])
    assert "schema differs" in source_mismatch(recorded, current, [["id", "integer"], metadata])
    assert source_mismatch(recorded, current, [["id", "long"]]) is None


def test_an_index_over_a_delta_table_does_not_answer_a_plain_read_of_its_files():
    d = SourceDescription.from_json
    delta = d({"format": "parquet", "tableFormat": "delta", "schema": [["id", "long"]]})
    plain = d({"format": "parquet", "schema": [["id", "long"]]})
    assert source_mismatch(delta, plain, [["id", "long"]]) == (
        "the source is read as plain parquet files, the index was built over a delta table")
    assert "read as a delta table" in source_mismatch(plain, delta, [["id", "long"]])
    assert source_mismatch(delta, delta, [["id", "long"]]) is None


def test_no_index_prunes_the_files_of_a_delta_table_with_deletion_vectors():
    d = SourceDescription.from_json
    assert pruning_problem(d({"format": "parquet", "tableFormat": "delta"})) is None
    reason = pruning_problem(d({"format": "parquet", "tableFormat": "delta", "deletionVectors": 2}))
    assert reason.startswith("2 files of the Delta table carry deletion vectors")
    assert "REORG TABLE" in reason


def test_hybrid_scan_refuses_appended_files_with_deletion_vectors():
    root, relation = plan("seed")
    files = [[f"file:/data/nested/{name}.parquet", 10, 1] for name in "abcd"]
    recorded = entry(relation, *SEED_INDEX, files=files)
    files[1] = [*files[1], "dv"]   # the same file, some rows hidden by a deletion vector
    current = SourceDescription.from_json({**description_json("f2"), "files": files})
    result = evaluate(root, relation, current, recorded, False, hybrid=HybridScan(0.5, 0.5))
    assert isinstance(result, NotApplicable) and result.code == "SOURCE_CHANGED"
    assert "carry deletion vectors, which hybrid scan cannot apply" in result.reason


def test_read_settings_of_an_index_built_under_another_spark_name_its_version():
    """An index built under another Spark version whose defaults differ (Spark 4.0 changed
    spark.sql.legacy.timeParserPolicy's): the reason names the setting, that version and the
    refresh that fixes it."""
    recorded = {"format": "parquet", "schema": [["id", "long"]], "sparkVersion": "4.3.0",
                "readSettings": {"spark.sql.legacy.timeParserPolicy": "CORRECTED"}}
    current = {"format": "parquet", "readSettings": {"spark.sql.legacy.timeParserPolicy": "EXCEPTION"}}
    d = SourceDescription.from_json
    reason = source_mismatch(d(recorded), d(current), [["id", "long"]])
    assert "spark.sql.legacy.timeParserPolicy" in reason and "under Spark 4.3.0" in reason
    assert "full refresh" in reason
    assert "under Spark" not in source_mismatch(d({**recorded, "sparkVersion": None}), d(current),
                                                [["id", "long"]])


def test_changed_files_are_counted_when_listed():
    root, relation = plan("seed")
    index = entry(relation, *SEED_INDEX, files=[["a", 1, 1], ["b", 1, 1]])
    current = SourceDescription.from_json(
        {**description_json("f2"), "files": [["a", 1, 1], ["c", 1, 1], ["d", 1, 1]]})
    result = evaluate(root, relation, current, index, False)
    assert "2 appended or modified, 1 deleted" in result.reason


def _with_changes(recorded: SourceDescription, current: list, fingerprint: str = "f2"
                  ) -> SourceDescription:
    """A relation over ``current`` files described, as the JVM answers it, by its difference
    to the ``recorded`` files (not by its files)."""
    now = set(source_files(current))
    changes = FileChanges(recorded.listing_key, tuple(sorted(now - set(recorded.files))),
                          tuple(f for f in recorded.files if f not in now), len(now),
                          sum(f.size for f in now))
    return description(fingerprint).with_changes(changes)


def test_difference_to_recorded_files_gives_the_changes_the_files_give():
    """Hybrid scan from the JVM's difference (appended and deleted files only) finds what
    comparing every file finds, a quick refresh's pending files included."""
    import random

    rng = random.Random(7)
    pool = [[f"file:/data/nested/f{i}", 10 + i, 1] for i in range(12)]
    for _ in range(200):
        recorded = sorted(rng.sample(pool, rng.randint(1, 8)))
        current = rng.sample(pool, rng.randint(0, 8))
        if rng.random() < 0.3:   # a file modified in place: same path, another size
            current.append([recorded[0][0], 99, 2])
        pending = {}
        if rng.random() < 0.5:
            pending = {"appended": rng.sample(recorded, rng.randint(0, len(recorded))),
                       "deleted": [f for f in rng.sample(pool, 3) if f not in recorded]}
        index = Entry("idx", {}, SourceDescription.from_json(
            {**description_json(), "files": recorded}),
            {"quickRefresh": pending} if pending else {})
        described = _with_changes(index.source, current)
        assert described.files is None
        assert source_changes(index, described) == file_changes(index, source_files(current))


def test_same_files_under_another_fingerprint_keep_the_index_without_hybrid_scan():
    """An index logged with an older version's fingerprint serves the unchanged source."""
    root, relation = plan("seed")
    files = [["file:/data/nested/a", 1, 1], ["file:/data/nested/b", 1, 1]]
    index = entry(relation, *SEED_INDEX, files=files, fingerprint="0" * 64)
    assert isinstance(evaluate(root, relation, _with_changes(index.source, files), index, False),
                      Applicable)
    changed = evaluate(root, relation, _with_changes(index.source, files[:1]), index, False)
    assert changed.code == "SOURCE_CHANGED" and "0 appended or modified, 1 deleted" in changed.reason


def test_smallest_applicable_index_wins():
    root, relation = plan("seed")
    big = evaluate(root, relation, description(), entry(relation, *SEED_INDEX, name="big", size=500), False)
    small = evaluate(root, relation, description(), entry(relation, *SEED_INDEX, name="small", size=50), False)
    other = evaluate(root, relation, description(), entry(relation, ["id"], [], name="x"), False)
    assert choose([big, small, other]).index.name == "small"
    assert choose([other]) is None
