"""Query history: records extracted from real optimized plans, buffered writes, reading back."""
from __future__ import annotations

import io
import logging
import threading
from datetime import datetime, timezone

import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from accelerator.history import HistoryRecorder, extract_record, history_path, read_history
from indexes.fs import HadoopFs
from indexes.plan import file_relations, parse_plan
from rules.history import HISTORY_SCHEMA, Predicate, QueryRecord, RelationUsage, SHAPES


# ---------------------------------------------------------------------------------------------
# data and helpers
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def data(spark, tmp_path_factory):
    """Two Parquet sources: ``people`` (nested struct, partitioned by ``p``) and ``orders``."""
    root = tmp_path_factory.mktemp("history_data")
    people = str(root / "people")
    orders = str(root / "orders")
    spark.sql("""
        SELECT id, concat('n', id) AS name,
               named_struct('nst', named_struct('field1', concat('wa', id % 5),
                                                'field2', id * 2)) AS nested,
               CAST(id % 3 AS INT) AS p
        FROM range(20)""").write.partitionBy("p").parquet(people)
    spark.sql("SELECT id AS order_id, id % 7 AS person_id, id * 1.5 AS amount FROM range(30)") \
        .write.parquet(orders)
    return {"people": people, "orders": orders,
            "people_df": spark.read.parquet(people), "orders_df": spark.read.parquet(orders)}


def _desc(path: str, partitions: list[str] | None = None) -> dict:
    return {"format": "parquet", "rootPaths": [f"file:{path}"],
            "partitionColumns": partitions or [], "options": {}, "fingerprint": "fp-" + path[-6:]}


def _record(df, descriptions: list[dict], indexes: tuple[str, ...] = ()) -> QueryRecord:
    root = parse_plan(df._jdf.queryExecution().optimizedPlan().toJSON())
    relations = file_relations(root)
    assert len(relations) == len(descriptions)
    return extract_record(root, list(zip(relations, descriptions)), indexes)


def _people(data) -> dict:
    return _desc(data["people"], ["p"])


def _preds(rec: QueryRecord) -> set[tuple]:
    return {(p.relation, p.column, p.shape, p.op, p.function, p.literal_count)
            for p in rec.predicates}


# ---------------------------------------------------------------------------------------------
# extract_record
# ---------------------------------------------------------------------------------------------

def test_equality_on_nested_field_with_projection(data):
    df = data["people_df"]
    q = df.filter(df["nested.nst.field1"] == "wa1").select("id", "name", "nested.nst.field2")
    rec = _record(q, [_people(data)], ("idx_nested",))

    assert rec.sources == [f"file:{data['people']}"]
    assert rec.formats == ["parquet"]
    assert rec.indexes_applied == ["idx_nested"]
    assert rec.filter_columns == ["nested.nst.field1"]
    # the IsNotNull the optimizer infers from the equality is not a predicate of its own
    assert _preds(rec) == {(0, "nested.nst.field1", "equality", "EqualTo", None, None)}
    assert rec.output_columns == ["id", "name", "nested.nst.field1", "nested.nst.field2"]
    assert rec.join_columns == [] and rec.group_columns == []
    assert len(rec.query_id) == 36 and rec.timestamp > 1_600_000_000_000

    rel = rec.relations[0]
    assert rel.source == rec.sources[0]
    assert rel.root_paths == [f"file:{data['people']}"]
    assert rel.partition_columns == ["p"]
    assert rel.fingerprint == _people(data)["fingerprint"]
    assert rel.filter_columns == ["nested.nst.field1"]
    assert rel.output_columns == rec.output_columns


def test_range_predicates(data):
    df = data["people_df"]
    q = df.filter((F.col("id") > 3) & (F.col("id") <= 10) & (F.col("p") == 1)).select("name")
    rec = _record(q, [_people(data)])
    assert _preds(rec) == {
        (0, "id", "range", "GreaterThan", None, None),
        (0, "id", "range", "LessThanOrEqual", None, None),
        (0, "p", "equality", "EqualTo", None, None),
    }
    assert rec.filter_columns == ["id", "p"]
    assert rec.output_columns == ["id", "name", "p"]


def test_literal_on_the_left_and_between(data):
    df = data["people_df"]
    q = df.filter((F.lit(5) < F.col("id")) | F.col("nested.nst.field2").between(1, 4))
    rec = _record(q, [_people(data)])
    assert {(p.column, p.shape) for p in rec.predicates} == {
        ("id", "range"), ("nested.nst.field2", "range")}
    # a filter without projection reads every column
    assert rec.output_columns == ["id", "name", "nested", "p"]


def test_in_predicates(data):
    df = data["people_df"]
    small = _record(df.filter(F.col("name").isin("n1", "n2", "n3")), [_people(data)])
    assert _preds(small) == {(0, "name", "in", "In", None, 3)}

    large = _record(df.filter(F.col("id").isin(list(range(25)))), [_people(data)])
    (pred,) = large.predicates
    assert (pred.column, pred.shape, pred.op) == ("id", "in", "InSet")
    assert pred.literal_count is None  # Spark does not serialize an InSet's values


def test_like_family(data):
    df = data["people_df"]
    q = df.filter(F.col("name").like("n1%") & F.col("name").like("%x%")
                  & F.col("nested.nst.field1").endswith("1") & F.col("name").rlike("^n[0-9]"))
    rec = _record(q, [_people(data)])
    assert _preds(rec) == {
        (0, "name", "startswith", "StartsWith", None, None),   # LIKE 'n1%' simplified by Spark
        (0, "name", "contains", "Contains", None, None),       # LIKE '%x%'
        (0, "nested.nst.field1", "endswith", "EndsWith", None, None),
        (0, "name", "like", "RLike", None, None),
    }

    general = _record(df.filter(F.col("name").like("n_%1")), [_people(data)])
    assert {p.shape for p in general.predicates} == {"like"}

    ilike = _record(df.filter(F.col("name").ilike("N1%")), [_people(data)])
    assert {(p.column, p.shape, p.function) for p in ilike.predicates} == {
        ("name", "startswith", "Lower")}


def test_null_tests_negation_and_functions(data):
    df = data["people_df"]
    q = df.filter(F.col("name").isNull() | F.col("nested").isNotNull() | ~(F.col("id") == 3)
                  | (F.upper(F.col("name")) == "N1") | (F.col("id") == F.col("p")))
    rec = _record(q, [_people(data)])
    assert _preds(rec) == {
        (0, "name", "isnull", "IsNull", None, None),
        (0, "nested", "isnotnull", "IsNotNull", None, None),   # written by the user: kept
        (0, "id", "other", "Not", None, None),
        (0, "name", "equality", "EqualTo", "Upper", None),
        (0, "id", "other", "EqualTo", None, None),              # column = column
        (0, "p", "other", "EqualTo", None, None),
    }
    assert all(p.shape in SHAPES for p in rec.predicates)


def test_join_of_two_file_relations(data):
    people, orders = data["people_df"], data["orders_df"]
    q = (orders.filter(F.col("amount") > 10)
         .join(people, orders["person_id"] == people["nested.nst.field2"])
         .select("order_id", "name"))
    descriptions = [_desc(data["orders"]), _people(data)]   # pre-order: left side first
    rec = _record(q, descriptions)

    assert rec.sources == [f"file:{data['orders']}", f"file:{data['people']}"]
    orders_use, people_use = rec.relations
    # the optimizer aliases nested.nst.field2 as _extract_field2 below the join: resolved back
    assert orders_use.join_columns == ["person_id"]
    assert people_use.join_columns == ["nested.nst.field2"]
    assert rec.join_columns == ["nested.nst.field2", "person_id"]
    assert orders_use.filter_columns == ["amount"]
    assert people_use.filter_columns == []   # only inferred IsNotNull on the join key
    assert {(p.relation, p.column, p.shape) for p in rec.predicates} == {(0, "amount", "range")}
    assert orders_use.output_columns == ["amount", "order_id", "person_id"]
    assert people_use.output_columns == ["name", "nested.nst.field2"]


def test_self_join_keeps_relations_apart(data):
    df = data["people_df"]
    a, b = df.alias("a"), df.alias("b")
    q = a.join(b, F.col("a.id") == F.col("b.nested.nst.field2")).filter(F.col("b.name") == "n4") \
        .select("a.name")
    # descriptions given without nodes: paired with file_relations(root) by position
    root = parse_plan(q._jdf.queryExecution().optimizedPlan().toJSON())
    rec = extract_record(root, [_people(data), _people(data)], [])
    assert rec.sources == [rec.sources[0]] * 2
    assert rec.relations[0].join_columns == ["id"]
    assert rec.relations[1].join_columns == ["nested.nst.field2"]
    assert _preds(rec) == {(1, "name", "equality", "EqualTo", None, None)}
    assert rec.relations[0].output_columns == ["id", "name"]


def test_aggregate(data):
    df = data["people_df"]
    q = (df.filter(F.col("nested.nst.field1") == "wa2")
         .groupBy("p", "nested.nst.field1").agg(F.sum("id").alias("total"))
         .filter(F.col("total") > 5))
    rec = _record(q, [_people(data)])
    assert rec.group_columns == ["nested.nst.field1", "p"]
    assert rec.output_columns == ["id", "nested.nst.field1", "p"]
    assert _preds(rec) == {
        (0, "nested.nst.field1", "equality", "EqualTo", None, None),
        # HAVING on the aggregate: reported on its column, marked as computed
        (0, "id", "range", "GreaterThan", "AggregateExpression", None),
    }


def test_count_reads_no_column_and_union_maps_both_sides(data):
    people, orders = data["people_df"], data["orders_df"]
    count = _record(people.groupBy().count(), [_people(data)])
    assert count.output_columns == [] and count.predicates == []

    u = people.select(F.col("id").alias("k")).union(orders.select("order_id")).filter("k = 7")
    rec = _record(u, [_people(data), _desc(data["orders"])])
    assert rec.relations[0].filter_columns == ["id"]
    assert rec.relations[1].filter_columns == ["order_id"]


def test_record_row_round_trip():
    rec = QueryRecord(
        timestamp=1_700_000_000_000, query_id="q-1", sources=["file:/a"], formats=["parquet"],
        filter_columns=["x"], output_columns=["x", "y"], join_columns=[], group_columns=["y"],
        predicates=[Predicate(0, "file:/a", "x", "in", "In", None, 4)],
        indexes_applied=["i1"],
        relations=[RelationUsage("file:/a", ["file:/a"], "parquet", None, [], ["x"], [], ["y"],
                                 ["x", "y"])])
    assert QueryRecord.from_row(rec.to_row()) == rec
    # what pyarrow writes is what from_row reads
    sink = io.BytesIO()
    import pyarrow as pa
    pq.write_table(pa.Table.from_pylist([rec.to_row()], schema=HISTORY_SCHEMA), sink)
    back = pq.read_table(io.BytesIO(sink.getvalue())).to_pylist()
    assert QueryRecord.from_row(back[0]) == rec


# ---------------------------------------------------------------------------------------------
# HistoryRecorder and read_history
# ---------------------------------------------------------------------------------------------

class MemoryFs:
    """In-memory stand-in for HadoopFs; ``written`` is set on every completed file."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.written = threading.Event()
        self.lock = threading.Lock()

    def write_bytes(self, path: str, data: bytes, overwrite: bool = False) -> None:
        with self.lock:
            self.files[path] = bytes(data)

    def rename(self, src: str, dst: str) -> bool:
        with self.lock:
            if dst in self.files:
                return False
            self.files[dst] = self.files.pop(src)
        self.written.set()
        return True

    def parquet(self) -> dict[str, list[dict]]:
        with self.lock:
            return {p: pq.read_table(io.BytesIO(d)).to_pylist()
                    for p, d in self.files.items() if p.endswith(".parquet")}


class FailingFs:
    def __init__(self) -> None:
        self.calls = 0

    def write_bytes(self, path: str, data: bytes, overwrite: bool = False) -> None:
        self.calls += 1
        raise OSError("disk on fire")


def _rec(i: int, ts: int = 1_763_800_000_000) -> QueryRecord:
    return QueryRecord(timestamp=ts + i, query_id=f"q{i}", sources=["file:/src"],
                       formats=["parquet"], filter_columns=["nested.nst.field1"],
                       output_columns=["id"],
                       predicates=[Predicate(0, "file:/src", "nested.nst.field1", "equality",
                                             "EqualTo")],
                       relations=[RelationUsage("file:/src", ["file:/src"], "parquet")])


def _day(ts: int) -> str:
    return datetime.fromtimestamp(ts / 1000, tz=timezone.utc).date().isoformat()


def test_recorder_writes_and_read_history_reads_back(spark, system_path, data):
    fs = HadoopFs(spark)
    df = data["people_df"]
    q = df.filter(df["nested.nst.field1"] == "wa1").select("id", "name")
    extracted = _record(q, [_people(data)], ("idx_nested",))
    day2 = extracted.timestamp - 86_400_000
    other = QueryRecord.from_row({**_rec(1).to_row(), "timestamp": day2})

    with HistoryRecorder(fs, system_path, max_buffer=100, flush_interval_s=3600) as recorder:
        recorder.record(extracted)
        recorder.record(other)
        assert recorder.pending == 2
        assert recorder.flush() == 2
        assert recorder.pending == 0

    base = history_path(system_path)
    for ts in (extracted.timestamp, day2):
        names = [f.name for f in fs.list(f"{base}/date={_day(ts)}")]
        parts = [n for n in names if n.endswith(".parquet")]
        assert len(parts) == 1 and parts[0].startswith("part-")
        assert not [n for n in names if n.endswith(".tmp")]

    rows = read_history(spark, system_path).collect()
    assert len(rows) == 2
    by_id = {r["query_id"]: r for r in rows}
    back = QueryRecord.from_row(by_id[extracted.query_id].asDict(recursive=True))
    assert back == extracted
    assert back.filter_columns == ["nested.nst.field1"]
    assert back.predicates[0].shape == "equality"
    assert str(by_id["q1"]["date"]) == _day(day2)


def test_read_history_empty(spark, system_path):
    df = read_history(spark, system_path)
    assert df.count() == 0
    assert df.columns == [f.name for f in HISTORY_SCHEMA] + ["date"]
    assert df.schema["predicates"].dataType.elementType["shape"].dataType.simpleString() == "string"


def test_flush_when_buffer_is_full():
    fs = MemoryFs()
    recorder = HistoryRecorder(fs, "mem://sys/", max_buffer=3, flush_interval_s=3600)
    try:
        for i in range(3):
            recorder.record(_rec(i))
        assert fs.written.wait(20), "a full buffer must be written by the background thread"
        files = fs.parquet()
        assert len(files) == 1
        (path, rows), = files.items()
        assert path.startswith(f"mem://sys/_history/date={_day(_rec(0).timestamp)}/part-")
        assert sorted(r["query_id"] for r in rows) == ["q0", "q1", "q2"]

        fs.written.clear()
        recorder.record(_rec(3))   # below max_buffer, long interval: stays buffered
        assert recorder.pending == 1
    finally:
        recorder.close()           # ... until close
    assert recorder.pending == 0
    assert sorted(r["query_id"] for rows in fs.parquet().values() for r in rows) == [
        "q0", "q1", "q2", "q3"]
    assert recorder.written == 4


def test_flush_on_interval():
    fs = MemoryFs()
    recorder = HistoryRecorder(fs, "mem://sys", max_buffer=1000, flush_interval_s=0.05)
    try:
        recorder.record(_rec(0))
        assert fs.written.wait(20), "the timer thread must write a non-empty buffer"
        assert [r["query_id"] for rows in fs.parquet().values() for r in rows] == ["q0"]
    finally:
        recorder.close()


def test_buffer_spanning_midnight_is_split_by_date():
    fs = MemoryFs()
    midnight = int(datetime(2026, 3, 1, tzinfo=timezone.utc).timestamp() * 1000)
    recorder = HistoryRecorder(fs, "mem://sys", flush_interval_s=3600)
    recorder.record(_rec(0, midnight - 10))
    recorder.record(_rec(0, midnight + 10))
    assert recorder.flush() == 2
    recorder.close()
    dates = sorted(p.split("/date=")[1].split("/")[0] for p in fs.parquet())
    assert dates == ["2026-02-28", "2026-03-01"]


def test_fs_without_rename_gets_the_final_path_directly():
    class PlainFs:
        def __init__(self) -> None:
            self.paths: list[str] = []

        def write_bytes(self, path: str, data: bytes) -> None:
            self.paths.append(path)

    fs = PlainFs()
    recorder = HistoryRecorder(fs, "mem://sys", flush_interval_s=3600)
    recorder.record(_rec(0))
    assert recorder.flush() == 1
    recorder.close()
    assert len(fs.paths) == 1 and fs.paths[0].endswith(".parquet")
    assert "/_history/date=" in fs.paths[0] and "/." not in fs.paths[0]


def test_failing_fs_never_raises(caplog):
    fs = FailingFs()
    recorder = HistoryRecorder(fs, "mem://sys", max_buffer=2, flush_interval_s=3600)
    with caplog.at_level(logging.WARNING, logger="accelerator.history"):
        recorder.record(_rec(0))
        assert recorder.flush() == 0          # logged and dropped, not raised
        recorder.record(_rec(1))
        recorder.record(None)                 # type: ignore[arg-type]  # malformed: dropped
        recorder.close()
        recorder.close()                      # idempotent
        recorder.record(_rec(2))              # after close: dropped silently
    assert fs.calls >= 1
    assert recorder.pending == 0 and recorder.written == 0
    assert recorder.dropped >= 3
    assert any("could not write" in r.getMessage() for r in caplog.records)


def test_record_plan_never_raises_on_a_plan_it_cannot_read():
    fs = MemoryFs()
    recorder = HistoryRecorder(fs, "mem://sys", flush_interval_s=3600)
    assert recorder.record_plan(None, [{"rootPaths": ["file:/x"]}]) is None  # type: ignore[arg-type]
    assert recorder.pending == 0
    recorder.close()
