"""Execution costs joined to history records without a JVM: the listener's reports parsed, each
scan counted for the relation it read, a feed shared by recorders, and a recorder turning a
planning record into one record per execution."""
from __future__ import annotations

import dataclasses
import io
import json
import threading
from pathlib import Path

import pyarrow.parquet as pq

from indexes.description import SourceDescription
from indexes.fs import MemoryFs
from indexes.plan import parse_plan
from rules.extractor import extract
from rules.history.executions import (Execution, ExecutionFeed, JoinRun, Scan, parse_executions,
                              with_execution)
from rules.history.reader import history_files
from rules.history.recorder import HistoryRecorder
from rules.history.records import ExecutedJoin, QueryRecord, RelationUsage

PLANS = json.loads((Path(__file__).parent / "data" / "nested_plans.json").read_text())
SOURCE = "file:/data/nested"
DESCRIPTION = SourceDescription.from_json(
    {"format": "parquet", "rootPaths": [SOURCE], "fingerprint": "f1", "partitionColumns": []})


def _report(query_id: str, duration_ms: int, *scans: tuple, end_ms: int = 5_000) -> str:
    return json.dumps({"queryId": query_id, "endMs": end_ms, "durationMs": duration_ms,
                       "scans": [{"roots": list(r), "files": f, "bytes": b, "rows": n}
                                 for r, f, b, n in scans]})


def test_reports_parse_and_malformed_lines_are_skipped():
    text = "\n".join([_report("a", 120, ([SOURCE], 3, 3000, 50)), "{not json", '{"x": 1}', "",
                      _report("b", 7, (["file:/idx"], -1, -1, 9)),
                      _report("c", 9, ([SOURCE], 0, 0, 40))])
    a, b, c = parse_executions(text)
    assert a == Execution("a", 5_000, 120, (Scan((SOURCE,), 3, 3000, 50),))
    assert b.scans == (Scan(("file:/idx",), None, None, 9),)     # -1: not reported
    # a plan run a second time reports zero files listed while it reads rows: unknown
    assert c.scans == (Scan((SOURCE,), None, None, 40),)


def _two_relations() -> QueryRecord:
    rel = [RelationUsage("file:/lake/a", ["file:/lake/a"], "json"),
           RelationUsage("file:/lake/b", ["file:/lake/b/"], "parquet", served_by="idx_b")]
    return QueryRecord(1_000, "q", ["file:/lake/a", "file:/lake/b"], ["json", "parquet"],
                       relations=rel, template="t")


def test_joins_name_the_pairs_of_relations_they_brought_together():
    line = json.dumps({"queryId": "q", "endMs": 9, "durationMs": 5, "scans": [], "joins": [
        {"strategy": "shuffle", "left": [["file:/lake/a"], ["file:/sys/idx_b/v__=1"]],
         "right": [["file:/lake/c"]]},
        {"strategy": "broadcast", "left": [["file:/lake/a"]], "right": [["file:/sys/idx_b"]]},
        {"strategy": "broadcast", "left": [["file:/lake/a"]], "right": [["file:/nowhere"]]}]})
    execution, = parse_executions(line)
    assert execution.joins[1] == JoinRun("broadcast", (("file:/lake/a",),),
                                         (("file:/sys/idx_b",),))
    rel = [RelationUsage(p, [p], "parquet", join_columns=["k"])
           for p in ("file:/lake/a", "file:/lake/b", "file:/lake/c")]
    record = QueryRecord(1, "q", [r.source for r in rel], ["parquet"] * 3, relations=rel)
    timed = with_execution(record, execution, [[], ["/sys/idx_b"], []])
    # ((a bcast b) shuffle c): the upper join pairs each of a and b (served by an index) with c
    assert timed.executed_joins == [ExecutedJoin(0, 1, "broadcast"), ExecutedJoin(0, 2, "shuffle"),
                                    ExecutedJoin(1, 2, "shuffle")]
    assert QueryRecord.from_row(timed.to_row()) == timed
    # the extractor counts, per join key, the queries joined with each partner by each strategy
    by_key = {(d.source, d.use): d for d in extract([timed, dataclasses.replace(
        timed, query_id="q2", executed_joins=[ExecutedJoin(0, 2, "broadcast")])], now_ms=10)}
    assert by_key[("file:/lake/a", "join")].joined_by == (
        ("file:/lake/b", "broadcast", 1), ("file:/lake/c", "broadcast", 1),
        ("file:/lake/c", "shuffle", 1))
    assert by_key[("file:/lake/c", "join")].joined_by == (
        ("file:/lake/a", "broadcast", 1), ("file:/lake/a", "shuffle", 1),
        ("file:/lake/b", "shuffle", 1))


def test_each_scan_counts_for_the_relation_it_read():
    record = _two_relations()
    execution = Execution("q", 9_000, 800, (
        Scan(("file:/lake/a",), 4, 4000, 100),                   # the source itself
        Scan(("/sys/cache/x",), 2, 200, 100),                    # the cache serving a
        Scan(("file:/sys/idx_b/v__=1",), 1, 50, 5),              # the index serving b
        Scan(("file:/elsewhere",), 9, 9, 9)))                    # nothing recorded: left out
    timed = with_execution(record, execution, [["file:/sys/cache"], ["/sys/idx_b"]])
    assert (timed.timestamp, timed.duration_ms, timed.template) == (9_000, 800, "t")
    a, b = timed.relations
    assert (a.files_read, a.bytes_read, a.rows_read) == (6, 4200, 200)
    assert (b.files_read, b.bytes_read, b.rows_read, b.served_by) == (1, 50, 5, "idx_b")
    # a path prefix matches whole segments only
    other = with_execution(record, Execution("q", 1, 1, (Scan(("file:/sys/idx_bb",), 1, 1, 1),)),
                           [[], ["/sys/idx_b"]])
    assert other.relations[1].files_read is None
    assert record.relations[0].files_read is None                # the planning record is kept


def test_a_feed_hands_each_recorder_its_own_executions():
    reports = [_report("mine", 10) + "\n" + _report("theirs", 20)]
    now = [0.0]
    feed = ExecutionFeed(lambda: reports.pop() if reports else "", clock=lambda: now[0])
    assert [e.query_id for e in feed.take({"mine"})] == ["mine"]
    assert feed.take({"mine"}) == []
    now[0] = 30.0
    assert [e.query_id for e in feed.take({"theirs"})] == ["theirs"]
    reports.append(_report("late", 1))
    assert feed.take({"x"}) == []
    now[0] = 200.0                                   # nobody claimed it for a minute: dropped
    assert feed.take({"late"}) == []


def test_an_execution_another_recorder_is_draining_reaches_its_own_recorder():
    """Two recorders share a JVM's feed: while one drains the report of the other's query,
    the other's write waits for it instead of writing its record without the cost."""
    draining, release = threading.Event(), threading.Event()
    reports = [_report("mine", 10)]

    def drain() -> str:
        if not reports:
            return ""
        report = reports.pop()          # taken from the JVM's queue, not yet sorted
        draining.set()
        release.wait(5)
        return report

    feed = ExecutionFeed(drain)
    other = threading.Thread(target=feed.take, args=({"theirs"},))
    other.start()
    assert draining.wait(5)
    taken: list[list[Execution]] = []
    mine = threading.Thread(target=lambda: taken.append(feed.take({"mine"})))
    mine.start()
    mine.join(0.5)              # without one drain at a time, this take has returned nothing
    release.set()
    other.join(5)
    mine.join(5)
    assert [[e.query_id for e in t] for t in taken] == [["mine"]]


def test_a_failing_feed_yields_nothing():
    def broken() -> str:
        raise RuntimeError("JVM gone")
    assert ExecutionFeed(broken).take({"q"}) == []


def _rows(fs: MemoryFs) -> list[dict]:
    return [row for _, path in history_files(fs, "memory:///sys")
            for row in pq.read_table(io.BytesIO(fs.read_bytes(path))).to_pylist()]


def test_recorder_writes_one_record_per_execution():
    fs = MemoryFs()
    reports: list[str] = []
    feed = ExecutionFeed(lambda: "\n".join(reports.pop(0) for _ in list(reports)))
    plan = parse_plan(PLANS["seed"])
    with HistoryRecorder(fs, "memory:///sys", feed=feed) as recorder:
        ran = recorder.record_plan(plan, [DESCRIPTION], query_id="ran")
        recorder.record_plan(plan, [DESCRIPTION], query_id="explained")   # never executed
        recorder.record_plan(plan, [DESCRIPTION])                          # no id: not timed
        reports.append(_report("ran", 300, ([SOURCE], 2, 2048, 20), end_ms=ran.timestamp + 5))
        assert recorder.flush() == 3
        # the same DataFrame run again, and an execution reported after its record was written
        reports.append(_report("ran", 100, ([SOURCE], 2, 2048, 20)))
        reports.append(_report("explained", 50))
        assert recorder.flush() == 2
    rows = _rows(fs)
    timed = sorted((r["query_id"], r["duration_ms"]) for r in rows if r["duration_ms"])
    assert timed == [("explained", 50), ("ran", 100), ("ran", 300)]
    assert sum(1 for r in rows if r["duration_ms"] is None) == 2       # explained, and no id
    first = next(r for r in rows if r["duration_ms"] == 300)
    assert first["relations"][0]["bytes_read"] == 2048
    assert first["timestamp"] == ran.timestamp + 5


def test_recorder_without_a_feed_keeps_planning_records():
    fs = MemoryFs()
    with HistoryRecorder(fs, "memory:///sys") as recorder:
        recorder.record_plan(parse_plan(PLANS["seed"]), [DESCRIPTION], query_id="q")
    (row,) = _rows(fs)
    assert row["query_id"] == "q" and row["duration_ms"] is None
