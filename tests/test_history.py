"""Query history on Spark: records extracted from real optimized plans, written through Hadoop,
read back as a DataFrame; the history of the queries an enabled session runs."""
from __future__ import annotations

import io
from datetime import datetime

import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from accelerator import Hyperspace
from accelerator.engine.advisor import Advisor
from accelerator.query.history import read_history
from indexes.description import SourceDescription
from indexes.fs import HadoopFs
from indexes.plan import file_relations, parse_plan
from rules.history.plan_analysis import extract_record
from rules.history.reader import read_records
from rules.history.recorder import HistoryRecorder
from rules.history.records import (
    HISTORY_SCHEMA, JoinedPair, Predicate, QueryRecord, RelationUsage, SHAPES, history_path,
)
from tests.helpers import session_conf
from tests.test_history_recorder import sample_record, utc_day


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


def _desc(path: str, partitions: list[str] | None = None) -> SourceDescription:
    return SourceDescription.from_json(
        {"format": "parquet", "rootPaths": [f"file:{path}"], "partitionColumns": partitions or [],
         "options": {}, "fingerprint": "fp-" + path[-6:]})


def _record(df, descriptions: list[SourceDescription], indexes: tuple[str, ...] = ()) -> QueryRecord:
    root = parse_plan(df._jdf.queryExecution().optimizedPlan().toJSON())
    relations = file_relations(root)
    assert len(relations) == len(descriptions)
    return extract_record(root, list(zip(relations, descriptions)), indexes)


def _people(data) -> SourceDescription:
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
    assert rel.fingerprint == _people(data).fingerprint
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
    # as the column reads it: 5 < id is id > 5; each bound with its literal and type
    assert {(p.column, p.op, tuple(p.literals), p.literal_type) for p in rec.predicates} == {
        ("id", "GreaterThan", ("5",), "long"),
        ("nested.nst.field2", "GreaterThanOrEqual", ("1",), "long"),
        ("nested.nst.field2", "LessThanOrEqual", ("4",), "long")}
    # a filter without projection reads every column
    assert rec.output_columns == ["id", "name", "nested", "p"]


def test_in_predicates(data):
    df = data["people_df"]
    small = _record(df.filter(F.col("name").isin("n1", "n2", "n3")), [_people(data)])
    assert _preds(small) == {(0, "name", "in", "In", None, 3)}

    assert sorted(small.predicates[0].literals) == ["n1", "n2", "n3"]

    large = _record(df.filter(F.col("id").isin(list(range(25)))), [_people(data)])
    (pred,) = large.predicates
    assert (pred.column, pred.shape, pred.op) == ("id", "in", "InSet")
    assert pred.literal_count is None  # Spark does not serialize an InSet's values
    assert pred.literals == []


def test_literals_are_bounded_and_templates_ignore_them(data):
    df = data["people_df"]
    long_value = "x" * 100
    with session_conf(df.sparkSession, spark__sql__optimizer__inSetConversionThreshold="100"):
        rec = _record(df.filter(F.col("name").isin(long_value, *[f"v{i}" for i in range(20)])),
                      [_people(data)])
    (pred,) = rec.predicates
    assert len(pred.literals) == 16 and all(len(v.encode()) <= 64 for v in pred.literals)
    assert pred.literals[0] == "x" * 64
    one = _record(df.filter(F.col("name") == "n1").select("id"), [_people(data)])
    two = _record(df.filter(F.col("name") == "n2").select("id"), [_people(data)])
    other = _record(df.filter(F.col("id") == 2).select("id"), [_people(data)])
    assert one.template == two.template != other.template
    assert [p.literals for p in one.predicates] == [["n1"]]


def test_exploration_flag(data):
    df = data["people_df"]
    assert _record(df, [_people(data)]).exploration                  # SELECT *
    assert not _record(df.select("id"), [_people(data)]).exploration
    assert not _record(df.filter("id = 1"), [_people(data)]).exploration


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
    # which column joins which, and that orders was filtered and people not
    assert rec.join_pairs == [JoinedPair(0, rec.sources[0], "person_id", True,
                                         1, rec.sources[1], "nested.nst.field2", False)]


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
    assert [(p.left, p.left_column, p.left_filtered, p.right, p.right_column, p.right_filtered)
            for p in rec.join_pairs] == [(0, "id", False, 1, "nested.nst.field2", True)]


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

def test_recorder_writes_and_read_history_reads_back(spark, system_path, data):
    fs = HadoopFs(spark)
    df = data["people_df"]
    q = df.filter(df["nested.nst.field1"] == "wa1").select("id", "name")
    extracted = _record(q, [_people(data)], ("idx_nested",))
    day2 = extracted.timestamp - 86_400_000
    other = QueryRecord.from_row({**sample_record(1).to_row(), "timestamp": day2})

    with HistoryRecorder(fs, system_path, max_buffer=100, flush_interval_s=3600) as recorder:
        recorder.record(extracted)
        recorder.record(other)
        assert recorder.pending == 2
        assert recorder.flush() == 2
        assert recorder.pending == 0

    base = history_path(system_path)
    for ts in (extracted.timestamp, day2):
        names = [f.name for f in fs.list(f"{base}/date={utc_day(ts)}")]
        parts = [n for n in names if n.endswith(".parquet")]
        assert len(parts) == 1 and parts[0].startswith("part-")
        assert not [n for n in names if n.endswith(".tmp")]

    history = read_history(spark, system_path)
    assert history.schema["timestamp"].dataType.simpleString() == "timestamp"
    rows = history.collect()
    assert len(rows) == 2
    by_id = {r["query_id"]: r for r in rows}
    back = QueryRecord.from_row(by_id[extracted.query_id].asDict(recursive=True))
    assert back == extracted
    assert back.filter_columns == ["nested.nst.field1"]
    assert back.predicates[0].shape == "equality"
    assert str(by_id["q1"]["date"]) == utc_day(day2)
    assert by_id["q1"]["timestamp"] == datetime.fromtimestamp(day2 / 1000)   # local, as Spark's

    # the same files through the pure-Python reader over Hadoop
    assert sorted(read_records(fs, system_path), key=lambda r: r.timestamp) == [other, extracted]


def test_read_history_empty(spark, system_path):
    df = read_history(spark, system_path)
    assert df.count() == 0
    assert df.columns == [f.name for f in HISTORY_SCHEMA] + ["date"]
    assert df.schema["predicates"].dataType.elementType["shape"].dataType.simpleString() == "string"


# ---------------------------------------------------------------------------------------------
# the history of an enabled session: hs.history(), Hyperspace.flushHistory
# ---------------------------------------------------------------------------------------------

def _query(data, value: str):
    df = data["people_df"]
    return df.filter(df["nested.nst.field1"] == value).select("id", "name")


def _seen(history, data, value: str) -> list:
    """Rows of the history recording a filter of people on ``nested.nst.field1`` = ..."""
    source = f"file:{data['people']}"
    return [r for r in history.collect()
            if r["sources"] == [source] and r["filter_columns"] == ["nested.nst.field1"]]


def test_flush_history_makes_a_query_just_run_visible(spark, hs, system_path, data):
    assert _seen(hs.history(), data, "wa3") == []
    before = datetime.now().replace(microsecond=0)
    _query(data, "wa3").collect()
    assert Hyperspace.flushHistory(spark) >= 1
    history = hs.history()
    assert history.schema["timestamp"].dataType.simpleString() == "timestamp"
    (row,) = _seen(history, data, "wa3")
    assert isinstance(row["timestamp"], datetime) and row["timestamp"] >= before
    assert str(row["date"]) == utc_day(int(row["timestamp"].timestamp() * 1000))
    assert row["predicates"][0]["shape"] == "equality"
    Hyperspace.flushHistory(spark)                  # written once only
    assert len(_seen(hs.history(), data, "wa3")) == 1
    # reading the history (files under the system path) is not recorded as demand
    assert Hyperspace.flushHistory(spark) == 0


def test_recorder_flushes_at_the_configured_interval(spark, hs, system_path, data):
    from accelerator.query import session

    with session_conf(spark, spark__accelerator__history__flushIntervalSeconds="0.5"):
        _query(data, "wa4").collect()                 # first record of this system path
        recorder = session.rewriter(spark).recorder(system_path)
    assert recorder.flush_interval_s == 0.5
    # records the plan, and waits for a background write under way
    session.rewriter(spark).flush_history(system_path)
    assert recorder.written == 1


# ---------------------------------------------------------------------------------------------
# what queries cost once they ran
# ---------------------------------------------------------------------------------------------

def _rows_of(hs, template_of) -> list:
    return [r for r in hs.history().collect() if r["template"] == template_of]


@pytest.mark.compat
def test_executed_queries_record_duration_and_what_they_read(spark, hs, system_path, data):
    q = _query(data, "wa2")
    q.collect()
    q.collect()                                         # the same DataFrame run again
    spark.read.parquet(data["people"]).filter("id = 3").explain()   # planned, never run
    Hyperspace.flushHistory(spark)
    rows = [r for r in _seen(hs.history(), data, "wa2")]
    assert len(rows) == 2 and len({r["query_id"] for r in rows}) == 1
    assert all(r["duration_ms"] is not None and r["duration_ms"] >= 0 for r in rows)
    first = min(rows, key=lambda r: r["timestamp"])
    (rel,) = first["relations"]
    files = spark.read.parquet(data["people"]).inputFiles()
    assert rel["files_read"] == len(files)
    assert rel["bytes_read"] == sum(HadoopFs(spark).size(f) for f in files)
    assert rel["rows_read"] == 20 and rel["served_by"] is None
    explained = [r for r in hs.history().collect() if r["filter_columns"] == ["id"]
                 and r["sources"] == [f"file:{data['people']}"]]
    assert [r["duration_ms"] for r in explained] == [None]


@pytest.mark.compat
def test_executed_joins_record_their_strategy(spark, hs, system_path, data):
    people, orders = spark.read.parquet(data["people"]), spark.read.parquet(data["orders"])
    q = orders.join(people, orders["person_id"] == people["id"]).select("order_id", "name")
    with session_conf(spark, spark__sql__autoBroadcastJoinThreshold="-1",
                      spark__sql__adaptive__autoBroadcastJoinThreshold="-1"):
        shuffled = sorted(q.collect())
    broadcast = sorted(orders.join(F.broadcast(people), orders["person_id"] == people["id"])
                       .select("order_id", "name").collect())
    assert shuffled == broadcast
    Hyperspace.flushHistory(spark)
    sources = [f"file:{data['orders']}", f"file:{data['people']}"]
    rows = [r for r in hs.history().collect()
            if r["sources"] == sources and r["join_columns"] == ["id", "person_id"]]
    assert sorted([(j["left"], j["right"], j["strategy"]) for j in r["executed_joins"]]
                  for r in rows) == [[(0, 1, "broadcast")], [(0, 1, "shuffle")]]


def test_a_scan_of_an_index_counts_for_the_relation_it_serves(spark, hs, system_path, data):
    from accelerator import CoveringIndexConfig

    df = spark.read.parquet(data["orders"])
    hs.createIndex(df, CoveringIndexConfig("orders_by_person", ["person_id"], ["amount"]))
    Hyperspace.flushHistory(spark)
    q = df.filter("person_id = 3").select("amount")
    assert "orders_by_person" in hs.explain(q, redirectFunc=lambda _: None)
    q.collect()
    Hyperspace.flushHistory(spark)
    (row,) = [r for r in hs.history().collect() if r["indexes_applied"] == ["orders_by_person"]]
    (rel,) = row["relations"]
    assert rel["served_by"] == "orders_by_person"
    assert rel["files_read"] >= 1 and rel["rows_read"] >= 1 and row["duration_ms"] is not None


def test_literals_can_be_left_out_of_the_history(spark, hs, system_path, data):
    with session_conf(spark, spark__accelerator__history__literals="false"):
        _query(data, "wa1").collect()
    Hyperspace.flushHistory(spark)
    (row,) = _seen(hs.history(), data, "wa1")
    assert [p["literals"] for p in row["predicates"]] == [[]]


def test_the_history_keeps_how_a_source_was_read(spark, hs, system_path, tmp_path):
    path = str(tmp_path / "csv")
    spark.range(5).selectExpr("id", "concat('v', id) AS v").write.option("header", True).csv(path)
    df = spark.read.option("header", True).option("inferSchema", True).csv(path)
    df.filter("id = 2").collect()
    Hyperspace.flushHistory(spark)
    (row,) = [r for r in hs.history().collect() if r["sources"] == [f"file:{path}"]]
    (rel,) = row["relations"]
    assert rel["options"]["header"] == "true" and "path" not in rel["options"]
    assert '"name":"v"' in rel["data_schema"]


def test_spark_s_own_schema_inference_is_not_recorded(spark, hs, system_path, tmp_path):
    base = str(tmp_path / "inferred")
    spark.range(20).selectExpr("id", "id % 3 AS k").write.json(base + "/j")
    spark.range(20).selectExpr("id", "id % 3 AS k").write.option("header", True).csv(base + "/c")
    spark.read.json(base + "/j").where("k = 1").collect()     # infers its schema: text reads
    spark.read.option("header", True).option("inferSchema", True).csv(base + "/c") \
        .where("k = 2").collect()
    Hyperspace.flushHistory(spark)
    rows = [r for r in hs.history().collect() if any(base in s for s in r["sources"])]
    assert sorted((r["sources"], r["formats"], r["filter_columns"]) for r in rows) == [
        ([f"file:{base}/c"], ["csv"], ["k"]), ([f"file:{base}/j"], ["json"], ["k"])]
    # the text reads of a history recorded before are no query of the rule engine's either
    inferred = QueryRecord(int(datetime.now().timestamp() * 1000), "inferred", relations=[
        RelationUsage(f"file:{base}/j/part-0.json", [f"file:{base}/j/part-0.json"], "text",
                      options={"__globpaths__": "false"}, output_columns=["value"])])
    assert inferred.schema_inference
    with HistoryRecorder(HadoopFs(spark), system_path) as recorder:
        recorder.record(inferred)
    assert "inferred" in {r["query_id"] for r in hs.history().collect()}
    assert "inferred" not in {r.query_id for r in Advisor(hs.context).records()}
    # a user's own read of text files is a query like any other
    spark.read.text(base + "/j").where("value LIKE '%k%'").collect()
    Hyperspace.flushHistory(spark)
    assert [r["formats"] for r in hs.history().collect() if r["formats"] == ["text"]] == [["text"]]


def test_json_path_predicates_name_their_expression(spark, tmp_path):
    path = str(tmp_path / "json_paths")
    spark.range(3).selectExpr("id", "to_json(named_struct('a', concat('x', id), 'n', id)) "
                              "AS payload").write.parquet(path)
    df = spark.read.parquet(path)
    q = df.filter((F.get_json_object("payload", "$.a") == "x1")
                  & (F.get_json_object("payload", "$.n").cast("int") > 0)
                  & (F.upper(F.get_json_object("payload", "$.a")) == "X2")).select("id")
    rec = _record(q, [_desc(path)])
    found = {(p.column, p.shape, p.function, tuple(p.literals)) for p in rec.predicates}
    assert found == {
        ("get_json_object(payload, '$.a')", "equality", None, ("x1",)),
        ("CAST(get_json_object(payload, '$.n') AS INTEGER)", "range", None, ("0",)),
        ("payload", "equality", "Upper", ("X2",))}
    assert rec.relations[0].output_columns == ["id", "payload"]
    # the names are Spark SQL that reads the same values again
    for column, *_ in found - {("payload", "equality", "Upper", ("X2",))}:
        assert df.select(F.expr(column)).count() == 3
