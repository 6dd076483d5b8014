"""The history recorder and reader without a JVM: Parquet written through an in-memory file
system (indexes.fs.MemoryFs) and read back with pyarrow through it."""
from __future__ import annotations

import io
import logging
from datetime import date, datetime, timezone

import pyarrow as pa
import pyarrow.parquet as pq

from indexes.description import SourceDescription
from indexes.fs import MemoryFs
from rules.history.reader import RecordCache, history_files, read_history_table, read_records
from rules.history.recorder import HistoryRecorder
from rules.history.records import HISTORY_SCHEMA, JoinedPair, Predicate, QueryRecord, RelationUsage, \
    history_path
from tests.helpers import eventually

SYSTEM = "memory:///sys"


def sample_record(i: int, ts: int = 1_763_800_000_000) -> QueryRecord:
    """A small record with query id ``q<i>`` at ``ts + i`` epoch milliseconds."""
    return QueryRecord(timestamp=ts + i, query_id=f"q{i}", sources=["file:/src"],
                       formats=["parquet"], filter_columns=["nested.nst.field1"],
                       output_columns=["id"],
                       predicates=[Predicate(0, "file:/src", "nested.nst.field1", "equality",
                                             "EqualTo")],
                       relations=[RelationUsage("file:/src", ["file:/src"], "parquet")])


def utc_day(ts: int) -> str:
    """The UTC day of epoch milliseconds, as the history's ``date`` partition names it."""
    return datetime.fromtimestamp(ts / 1000, tz=timezone.utc).date().isoformat()


def _parquet(fs: MemoryFs) -> dict[str, list[dict]]:
    """Every Parquet file under the history, as rows read with pyarrow through ``fs``."""
    return {path: pq.read_table(io.BytesIO(fs.read_bytes(path))).to_pylist()
            for _, path in history_files(fs, SYSTEM)}



class FailingFs(MemoryFs):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def write_bytes(self, path: str, data: bytes, overwrite: bool = False) -> None:
        self.calls += 1
        raise OSError("disk on fire")


class RefusingRenameFs(MemoryFs):
    def rename(self, src: str, dst: str) -> bool:
        return False


# --- recording ----------------------------------------------------------------------------

def test_flush_when_buffer_is_full():
    fs = MemoryFs()
    recorder = HistoryRecorder(fs, SYSTEM + "/", max_buffer=3, flush_interval_s=3600)
    try:
        for i in range(3):
            recorder.record(sample_record(i))
        assert eventually(lambda: recorder.written == 3), \
            "a full buffer must be written by the background thread"
        files = _parquet(fs)
        assert len(files) == 1
        (path, rows), = files.items()
        day = utc_day(sample_record(0).timestamp)
        assert path.startswith(f"{SYSTEM}/_history/date={day}/part-")
        assert sorted(r["query_id"] for r in rows) == ["q0", "q1", "q2"]

        recorder.record(sample_record(3))   # below max_buffer, long interval: stays buffered
        assert recorder.pending == 1
    finally:
        recorder.close()           # ... until close
    assert recorder.pending == 0
    assert sorted(r["query_id"] for rows in _parquet(fs).values() for r in rows) == [
        "q0", "q1", "q2", "q3"]
    assert recorder.written == 4


def test_flush_on_interval():
    fs = MemoryFs()
    recorder = HistoryRecorder(fs, SYSTEM, max_buffer=1000, flush_interval_s=0.05)
    try:
        recorder.record(sample_record(0))
        assert eventually(lambda: recorder.written == 1), \
            "the timer thread must write a non-empty buffer"
        assert [r["query_id"] for rows in _parquet(fs).values() for r in rows] == ["q0"]
    finally:
        recorder.close()


def test_buffer_spanning_midnight_is_split_by_date():
    fs = MemoryFs()
    midnight = int(datetime(2026, 3, 1, tzinfo=timezone.utc).timestamp() * 1000)
    recorder = HistoryRecorder(fs, SYSTEM, flush_interval_s=3600)
    recorder.record(sample_record(0, midnight - 10))
    recorder.record(sample_record(0, midnight + 10))
    assert recorder.flush() == 2
    recorder.close()
    dates = sorted(p.split("/date=")[1].split("/")[0] for p in _parquet(fs))
    assert dates == ["2026-02-28", "2026-03-01"]


def test_files_are_renamed_into_place():
    fs = MemoryFs()
    recorder = HistoryRecorder(fs, SYSTEM, flush_interval_s=3600)
    recorder.record(sample_record(0))
    assert recorder.flush() == 1
    recorder.close()
    folder = f"{history_path(SYSTEM)}/date={utc_day(sample_record(0).timestamp)}"
    names = [f.name for f in fs.list(folder)]
    assert len(names) == 1 and names[0].startswith("part-") and names[0].endswith(".parquet")


def test_fs_without_rename_gets_the_final_path_directly():
    class PlainFs:
        def __init__(self) -> None:
            self.paths: list[str] = []

        def write_bytes(self, path: str, data: bytes) -> None:
            self.paths.append(path)

    fs = PlainFs()
    recorder = HistoryRecorder(fs, SYSTEM, flush_interval_s=3600)
    recorder.record(sample_record(0))
    assert recorder.flush() == 1
    recorder.close()
    assert len(fs.paths) == 1 and fs.paths[0].endswith(".parquet")
    assert "/_history/date=" in fs.paths[0] and "/." not in fs.paths[0]


def test_failed_rename_drops_the_batch_and_removes_the_temporary_file(caplog):
    fs = RefusingRenameFs()
    recorder = HistoryRecorder(fs, SYSTEM, flush_interval_s=3600)
    with caplog.at_level(logging.WARNING, logger="accelerator.history"):
        recorder.record(sample_record(0))
        assert recorder.flush() == 0
    recorder.close()
    assert recorder.dropped == 1 and recorder.written == 0
    assert fs.list(f"{history_path(SYSTEM)}/date={utc_day(sample_record(0).timestamp)}") == []
    assert any("could not write" in r.getMessage() for r in caplog.records)


def test_failing_fs_never_raises(caplog):
    fs = FailingFs()
    recorder = HistoryRecorder(fs, SYSTEM, max_buffer=2, flush_interval_s=3600)
    with caplog.at_level(logging.WARNING, logger="accelerator.history"):
        recorder.record(sample_record(0))
        assert recorder.flush() == 0          # logged and dropped, not raised
        recorder.record(sample_record(1))
        recorder.record(None)                 # type: ignore[arg-type]  # malformed: dropped
        recorder.close()
        recorder.close()                      # idempotent
        recorder.record(sample_record(2))              # after close: dropped silently
    assert fs.calls >= 1
    assert recorder.pending == 0 and recorder.written == 0
    assert recorder.dropped >= 3
    assert any("could not write" in r.getMessage() for r in caplog.records)


def test_record_plan_never_raises_on_a_plan_it_cannot_read():
    fs = MemoryFs()
    recorder = HistoryRecorder(fs, SYSTEM, flush_interval_s=3600)
    assert recorder.record_plan(
        None, [SourceDescription.from_json({"rootPaths": ["file:/x"]})]) is None  # type: ignore[arg-type]
    assert recorder.pending == 0
    recorder.close()


# --- reading ------------------------------------------------------------------------------

def _recorded(fs: MemoryFs, *records: QueryRecord) -> None:
    with HistoryRecorder(fs, SYSTEM, flush_interval_s=3600) as recorder:
        for rec in records:
            recorder.record(rec)
        assert recorder.flush() == len(records)


def test_reader_reads_back_what_the_recorder_wrote():
    fs = MemoryFs()
    day1 = sample_record(0)
    day2 = QueryRecord.from_row({**sample_record(1).to_row(),
                                 "timestamp": day1.timestamp + 86_400_000})
    later = sample_record(2)
    _recorded(fs, day2, day1)
    _recorded(fs, later)

    records = read_records(fs, SYSTEM)
    assert records[-1] == day2                                  # oldest day first
    assert sorted(records[:2], key=lambda r: r.query_id) == [day1, later]
    table = read_history_table(fs, SYSTEM)
    assert table.schema.names == HISTORY_SCHEMA.names + ["date"]
    assert table.schema.field("date").type == pa.date32()
    assert [str(d) for d in table.column("date").to_pylist()] == [
        utc_day(day1.timestamp), utc_day(day1.timestamp), utc_day(day2.timestamp)]

    since = date.fromisoformat(utc_day(day2.timestamp))
    assert read_records(fs, SYSTEM, since=since) == [day2]


class _CountingFs(MemoryFs):
    """A MemoryFs counting the files read."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def read_bytes(self, path: str) -> bytes:
        self.reads.append(path)
        return super().read_bytes(path)


def test_record_cache_parses_each_history_file_once():
    fs = _CountingFs()
    first, second, third = sample_record(0), sample_record(1), sample_record(2)
    _recorded(fs, first)
    cache = RecordCache()
    assert cache.records(fs, SYSTEM) == read_records(fs, SYSTEM) == [first]

    _recorded(fs, second)
    _recorded(fs, third)
    fs.reads.clear()
    found = cache.records(fs, SYSTEM)
    assert len(fs.reads) == 2            # only the two new files
    assert found == read_records(fs, SYSTEM)
    assert sorted(found, key=lambda r: r.query_id) == [first, second, third]

    removed = next(p for _, p in history_files(fs, SYSTEM)
                   if first in read_records_of(fs, p))
    fs.delete(removed)
    fs.reads.clear()
    assert sorted(cache.records(fs, SYSTEM), key=lambda r: r.query_id) == [second, third]
    assert fs.reads == []                # a removed file is forgotten, the others kept
    since = date.fromisoformat(utc_day(first.timestamp))
    assert cache.records(fs, SYSTEM, since=since) == read_records(fs, SYSTEM, since=since)


def read_records_of(fs: MemoryFs, path: str) -> list[QueryRecord]:
    """The records of one history file."""
    return [QueryRecord.from_row(r) for r in pq.read_table(io.BytesIO(fs.read_bytes(path)))
            .to_pylist()]


def test_record_cache_tries_an_unreadable_file_again(caplog):
    fs = MemoryFs()
    rec = sample_record(0)
    _recorded(fs, rec)
    path = f"{history_path(SYSTEM)}/date={utc_day(rec.timestamp)}/part-9-late.parquet"
    fs.write_bytes(path, b"not parquet yet")
    cache = RecordCache()
    with caplog.at_level(logging.WARNING, logger="accelerator.history"):
        assert cache.records(fs, SYSTEM) == [rec]
    assert any("unreadable history file" in r.getMessage() for r in caplog.records)
    later = sample_record(1)
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist([later.to_row()], schema=HISTORY_SCHEMA), sink)
    fs.delete(path)
    fs.write_bytes(path, sink.getvalue())
    assert cache.records(fs, SYSTEM) == [rec, later]


def test_reader_on_an_empty_history():
    fs = MemoryFs()
    table = read_history_table(fs, SYSTEM)
    assert table.num_rows == 0
    assert table.schema.names == HISTORY_SCHEMA.names + ["date"]
    assert read_records(fs, SYSTEM) == []


def test_reader_skips_hidden_unreadable_and_foreign_files(caplog):
    fs = MemoryFs()
    rec = sample_record(0)
    _recorded(fs, rec)
    folder = f"{history_path(SYSTEM)}/date={utc_day(rec.timestamp)}"
    fs.write_bytes(f"{folder}/.part-9.parquet.tmp", b"half a file")    # a write in progress
    fs.write_bytes(f"{folder}/_SUCCESS", b"")
    fs.write_bytes(f"{folder}/part-9-broken.parquet", b"not parquet")  # a crashed writer's
    sink = io.BytesIO()
    pq.write_table(pa.table({"query_id": ["x"]}), sink)                 # no timestamp
    fs.write_bytes(f"{folder}/part-9-foreign.parquet", sink.getvalue())
    fs.mkdirs(f"{history_path(SYSTEM)}/not-a-date")

    with caplog.at_level(logging.WARNING, logger="accelerator.history"):
        assert read_records(fs, SYSTEM) == [rec]
    skipped = [m for m in (r.getMessage() for r in caplog.records)
               if "unreadable history file" in m]
    assert len(skipped) == 2 and any("broken" in m for m in skipped)


def test_reader_fills_columns_older_files_lack():
    fs = MemoryFs()
    rec = sample_record(0)
    old = pa.Table.from_pylist([rec.to_row()], schema=HISTORY_SCHEMA).drop_columns(["relations"])
    sink = io.BytesIO()
    pq.write_table(old, sink)
    fs.write_bytes(f"{history_path(SYSTEM)}/date={utc_day(rec.timestamp)}/part-1-old.parquet",
                   sink.getvalue())
    (back,) = read_records(fs, SYSTEM)
    assert back.relations == [] and back.predicates == rec.predicates
    assert back.timestamp == rec.timestamp


def test_join_pairs_round_trip_and_a_file_written_before_them_reads_none():
    """A record's join pairs are written and read back; a file written before the history kept
    them (no ``join_pairs`` column) reads as not recorded (None), not as "no pairs" ([])."""
    fs = MemoryFs()
    pairs = [JoinedPair(0, "file:/src", "k", False, 1, "file:/dim", "dk", True)]
    new = QueryRecord.from_row({**sample_record(1).to_row(), "join_pairs": [pairs[0].to_row()]})
    none = QueryRecord.from_row({**sample_record(2).to_row(), "join_pairs": []})
    _recorded(fs, new, none)
    rec = sample_record(0)
    old = pa.Table.from_pylist([rec.to_row()], schema=HISTORY_SCHEMA).drop_columns(
        ["join_pairs"])
    sink = io.BytesIO()
    pq.write_table(old, sink)
    fs.write_bytes(f"{history_path(SYSTEM)}/date={utc_day(rec.timestamp)}/part-0-old.parquet",
                   sink.getvalue())
    back = {r.query_id: r for r in read_records(fs, SYSTEM)}
    assert back["q1"].join_pairs == pairs and back["q2"].join_pairs == []
    assert back["q0"].join_pairs is None and back["q0"] == rec
