"""Which files the cache serves, without a JVM: the snapshot's lookups and reason codes, the
read key, and the columns a relation must keep, over plans captured as JSON."""
from __future__ import annotations

import json
import zlib
from dataclasses import replace
from pathlib import Path

import pytest

from accelerator.cache.model import CacheEntry, EntryState, Priority
from accelerator.cache.serving import (EVICTED, LISTED_TWICE, MISSING_COLUMNS, NOT_CACHED,
                                       OTHER_READ, PACK_CLASH, PACK_SHIFT, STALE, UNPACKED,
                                       CacheView, parent_dirs, plan_serving, read_key_of,
                                       required_columns)
from indexes.description import SourceDescription
from indexes.plan import parse_plan

PLANS = json.loads((Path(__file__).parent / "data" / "cache_plans.json").read_text())
DESCRIPTION = SourceDescription.from_json(
    {"format": "json", "options": {"path": "/lake/t", "multiLine": "false"},
     "dataSchema": '{"type":"struct","fields":[]}'})
SETTINGS = {"spark.sql.session.timeZone": "UTC"}
RK = read_key_of(DESCRIPTION, SETTINGS)


def entry(path, size=10, mtime=1, columns=("a", "b"), read_key=RK, state=EntryState.ACTIVE,
          pack=7, data_path="file:/c/data/x"):
    """An entry of ``path`` in the pack ``data_path`` numbered ``pack`` (None: unpacked)."""
    tag = None if pack is None else (pack << PACK_SHIFT) + zlib.crc32(path.encode())
    return CacheEntry(key=f"{hash((path, size, mtime, read_key, state)) & (1 << 64) - 1:064x}",
                      source_root="file:/lake/t", file_path=path, file_size=size,
                      file_mtime=mtime, columns=columns, priority=Priority.HIGH, ttl_seconds=None,
                      bytes=5, data_path=data_path, created=0.0, last_used=0.0,
                      read_key=read_key, files=((f"{data_path}/part-0.parquet", 5),),
                      state=state, tag=tag)


def test_read_key_ignores_options_that_only_choose_files():
    moved = replace(DESCRIPTION, options={"PATH": "/lake/t/day=1", "basePath": "/lake/t",
                                          "multiline": "false"})
    assert read_key_of(moved, SETTINGS) == RK
    assert read_key_of(replace(DESCRIPTION, options={"multiLine": "true"}), SETTINGS) != RK
    assert read_key_of(DESCRIPTION, {"spark.sql.session.timeZone": "CET"}) != RK
    assert read_key_of(replace(DESCRIPTION, format="csv"), SETTINGS) != RK


def test_parent_dirs_stop_at_the_scheme():
    assert list(parent_dirs("file:/a/b/c.json")) == ["file:/a/b", "file:/a"]
    assert list(parent_dirs("hdfs://nn:8020/lake/t/f")) == [
        "hdfs://nn:8020/lake/t", "hdfs://nn:8020/lake", "hdfs://nn:8020"]


def test_each_file_is_served_or_has_one_reason():
    entries = [entry("file:/lake/t/served"),
               entry("file:/lake/t/narrow", columns=("a",)),
               entry("file:/lake/t/changed", size=11),
               entry("file:/lake/t/other", read_key="x" * 64),
               entry("file:/lake/t/gone", state=EntryState.EVICTED)]
    view = CacheView.of(entries, generation=1, loaded_at=0.0)
    assert view.covers(["file:/lake/t"]) and view.covers(["file:/lake"])
    assert view.covers(["file:/lake/t/served"])   # a root a glob pattern matched: the file
    assert not view.covers(["file:/lake/t2"]) and not view.covers(["file:/lake/t/new"])
    assert view.roots() == {"file:/lake/t", "file:/lake", *(e.file_path for e in entries)}
    files = [[p, 10, 1] for p in ("file:/lake/t/served", "file:/lake/t/narrow",
                                  "file:/lake/t/changed", "file:/lake/t/other",
                                  "file:/lake/t/gone", "file:/lake/t/new")]
    plan = plan_serving(view, RK, files, {"a", "b"})
    assert list(plan.served) == ["file:/lake/t/served"] and plan.served_bytes == 5
    assert plan.reasons == {MISSING_COLUMNS: 1, STALE: 1, OTHER_READ: 1, EVICTED: 1,
                            NOT_CACHED: 1}
    assert plan.source_files == 5 and plan.source_bytes == 50 and plan.misses == 4
    # a query reading fewer columns is served by the narrower entry too
    assert sorted(plan_serving(view, RK, files, {"a"}).served) == [
        "file:/lake/t/narrow", "file:/lake/t/served"]
    # no columns at all (a count): any current entry serves
    assert len(plan_serving(view, RK, files, set()).served) == 2


def test_an_evicted_entry_next_to_a_current_one_does_not_hide_it():
    current = entry("file:/lake/t/f")
    old = replace(entry("file:/lake/t/f", mtime=0), state=EntryState.EVICTED)
    view = CacheView.of([old, current], 2, 0.0)
    assert list(plan_serving(view, RK, [["file:/lake/t/f", 10, 1]], {"a"}).served) == [
        "file:/lake/t/f"]


def test_only_packed_entries_are_served_and_packs_read_together_have_distinct_numbers():
    """A pack's rows are kept by tag, so two packs read by one relation must not share the
    number a tag starts with: the second pack's files are read from the source instead, and
    an entry of the layout before packs (no tag) is not served."""
    files = [[f"file:/lake/t/f{i}", 10, 1] for i in range(4)]
    entries = [entry("file:/lake/t/f0"), entry("file:/lake/t/f1"),
               entry("file:/lake/t/f2", pack=7, data_path="file:/c/data/y"),
               entry("file:/lake/t/f3", pack=None)]
    plan = plan_serving(CacheView.of(entries, 1, 0.0), RK, files, {"a"})
    assert sorted(plan.served) == ["file:/lake/t/f0", "file:/lake/t/f1"]
    assert plan.reasons == {PACK_CLASH: 1, UNPACKED: 1}
    # another pack under another number is read with the first
    entries[2] = entry("file:/lake/t/f2", pack=8, data_path="file:/c/data/y")
    plan = plan_serving(CacheView.of(entries, 1, 0.0), RK, files, {"a"})
    assert sorted(plan.served) == [f"file:/lake/t/f{i}" for i in range(3)]


def test_a_file_listed_twice_is_read_from_the_source_as_often():
    """Spark reads a file a relation lists twice (``spark.read.parquet(d, d)``) twice; its
    pack's rows, read once, would lose the second copy."""
    entries = [entry("file:/lake/t/f0"), entry("file:/lake/t/f1")]
    files = [["file:/lake/t/f0", 10, 1], ["file:/lake/t/f1", 10, 1], ["file:/lake/t/f0", 10, 1]]
    plan = plan_serving(CacheView.of(entries, 1, 0.0), RK, files, {"a"})
    assert list(plan.served) == ["file:/lake/t/f1"]
    assert plan.reasons == {LISTED_TWICE: 2} and plan.source_bytes == 20


@pytest.mark.parametrize("shape,expected", [
    ("root_filter", {"id", "k", "s"}),               # the root's output is every column
    ("projected_filter", {"id", "k"}),
    ("aggregate", {"id", "k"}),
    ("join_pass_through", {"id", "k", "s"}),          # the left side's columns reach the output
])
def test_required_columns_of_captured_plans(shape, expected):
    root = parse_plan(PLANS[shape])
    first = root.file_relations()[0]
    assert required_columns(first, ["p"]) == expected


def test_a_union_of_projections_keeps_what_each_projection_reads():
    root = parse_plan(PLANS["union_by_position"])
    assert [required_columns(r, ["p"]) for r in root.file_relations()] == [{"id"}, {"k"}]
    # a union straight over a relation uses its columns by position: all are kept
    union = root.file_relations()[0].parent.parent
    assert union.cls == "Union"
    relation = root.file_relations()[0]
    relation.parent = union
    assert required_columns(relation, ["p"]) == {"id", "k", "s"}
