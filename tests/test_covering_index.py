"""Covering indexes end to end: the seed's nested example, rule applicability, lifecycle,
source changes, failures inside the rewriter, concurrency, explain and whyNot."""
from __future__ import annotations

import os
import threading

import pytest
from pyspark.sql import functions as F

from accelerator import (
    ConcurrentModificationError,
    Hyperspace,
    IndexConfig,
    IndexExistsError,
    IndexNotFoundError,
    IndexStateError,
)
from indexes.errors import AcceleratorError
from tests.helpers import own_copy, rows, vanilla

NESTED_SCHEMA = "id int, name string, nested struct<field1:string, nst:struct<field1:string, field2:string>>"


def nested_rows(n: int):
    return [(i, f"name{i}", (f"va{i}", (f"wa{i % 7}", f"wb{i}"))) for i in range(n)]


@pytest.fixture(scope="module")
def written(spark, tmp_path_factory):
    """The nested source, written once for the module (each test gets a copy:
    ``nested_path``)."""
    base = tmp_path_factory.mktemp("written")
    spark.createDataFrame(nested_rows(200), NESTED_SCHEMA).repartition(4) \
        .write.parquet(str(base / "nested"))
    return base


@pytest.fixture
def nested_path(written, tmp_path):
    (path,) = own_copy(written, tmp_path, "nested")
    return path


def uses_index(df, name: str) -> bool:
    files = df.inputFiles()
    return bool(files) and all(f"/{name.lower()}/v__=" in f for f in files)


def create_nested_index(hs, spark, path, name="idx_nested"):
    hs.createIndex(spark.read.parquet(path),
                   IndexConfig(name, indexedColumns=["nested.nst.field1"],
                               includedColumns=["id", "name", "nested.nst.field2"]))


def seed_query(spark, path):
    df = spark.read.parquet(path)
    return df.filter(df["nested.nst.field1"] == "wa1").select("id", "name", "nested.nst.field2")


@pytest.mark.compat
def test_seed_example_dataframe_reads_the_index(spark, hs, nested_path):
    create_nested_index(hs, spark, nested_path)
    q = seed_query(spark, nested_path)
    assert rows(q) == vanilla(spark, lambda: seed_query(spark, nested_path))
    assert len(rows(q)) == 29
    assert uses_index(q, "idx_nested")
    physical = q._jdf.queryExecution().executedPlan().toString()
    assert "idx_nested/v__=0" in physical
    assert "EqualTo(nested__nst__field1,wa1)" in physical
    assert q.columns == ["id", "name", "field2"]


@pytest.mark.compat
def test_seed_example_sql_on_temp_view(spark, hs, nested_path):
    create_nested_index(hs, spark, nested_path)
    spark.read.parquet(nested_path).createOrReplaceTempView("nested_view")
    sql = "SELECT id, name, nested.nst.field2 FROM nested_view WHERE nested.nst.field1 = 'wa3'"
    q = spark.sql(sql)
    assert rows(q) == vanilla(spark, lambda: spark.sql(sql))
    assert uses_index(q, "idx_nested")


def test_dataframe_built_before_enable_uses_index(spark, system_path, nested_path):
    hs = Hyperspace(spark)
    create_nested_index(hs, spark, nested_path)
    Hyperspace.disable(spark)
    q = seed_query(spark, nested_path)
    Hyperspace.enable(spark)
    try:
        assert Hyperspace.isEnabled(spark)
        assert uses_index(q, "idx_nested")
    finally:
        Hyperspace.disable(spark)
    assert not Hyperspace.isEnabled(spark)
    assert not uses_index(seed_query(spark, nested_path), "idx_nested")


def test_select_star_with_covering_index(spark, hs, tmp_path):
    path = str(tmp_path / "flat")
    spark.range(300).select(F.col("id"), (F.col("id") % 10).alias("k"),
                            F.concat(F.lit("v"), F.col("id")).alias("v")) \
        .repartition(3).write.parquet(path)
    hs.createIndex(spark.read.parquet(path), IndexConfig("idx_flat", ["k"], ["id", "v"]))
    q = lambda: spark.read.parquet(path).filter("k = 4")  # noqa: E731
    assert rows(q()) == vanilla(spark, q)
    assert q().columns == ["id", "k", "v"]
    assert uses_index(q(), "idx_flat")
    sql = lambda: spark.sql(f"SELECT * FROM parquet.`{path}` WHERE k = 4")  # noqa: E731
    assert rows(sql()) == rows(q())
    assert uses_index(sql(), "idx_flat")


@pytest.mark.compat
def test_filter_not_on_first_indexed_column_is_not_rewritten(spark, hs, nested_path):
    create_nested_index(hs, spark, nested_path)
    q = lambda: spark.read.parquet(nested_path).filter("id = 3").select("id", "name")  # noqa: E731
    assert rows(q()) == vanilla(spark, q)
    assert not uses_index(q(), "idx_nested")
    [reason] = hs.whyNot(q())
    assert reason.code == "NO_FIRST_INDEXED_COLUMN_IN_FILTER"


def test_uncovered_column_is_not_rewritten(spark, hs, nested_path):
    create_nested_index(hs, spark, nested_path)
    build = lambda: (spark.read.parquet(nested_path)  # noqa: E731
                     .filter(F.col("nested.nst.field1") == "wa1").select("id", "nested.field1"))
    assert rows(build()) == vanilla(spark, build)
    assert not uses_index(build(), "idx_nested")
    [reason] = hs.whyNot(build(), "idx_nested")
    assert reason.code == "MISSING_COLUMNS" and "nested.field1" in reason.reason


def test_filter_under_join_and_aggregate(spark, hs, nested_path, tmp_path):
    create_nested_index(hs, spark, nested_path)
    other = str(tmp_path / "other")
    spark.range(50).select(F.col("id").cast("int").alias("id"),
                           (F.col("id") * 10).alias("score")).write.parquet(other)

    def join():
        left = spark.read.parquet(nested_path).filter(F.col("nested.nst.field1") == "wa2")
        return left.join(spark.read.parquet(other), "id").select("id", "name", "score")

    def aggregate():
        return (spark.read.parquet(nested_path).filter(F.col("nested.nst.field1") == "wa2")
                .groupBy("nested.nst.field2").agg(F.count("*").alias("n"), F.max("id")))

    for build in (join, aggregate):
        assert rows(build()) == vanilla(spark, build)
        assert any("idx_nested/v__=0" in f for f in build().inputFiles())


def test_case_insensitive_column_names(spark, hs, nested_path):
    hs.createIndex(spark.read.parquet(nested_path),
                   IndexConfig("idx_case", ["NESTED.Nst.FIELD1"], ["ID", "Name"]))
    build = lambda: (spark.read.parquet(nested_path)  # noqa: E731
                     .filter(F.col("Nested.NST.field1") == "wa5").select("Id", "NAME"))
    assert rows(build()) == vanilla(spark, build)
    assert uses_index(build(), "idx_case")
    assert hs.indexes().collect()[0]["indexedColumns"] == ["nested.nst.field1"]


def test_smallest_applicable_index_is_chosen(spark, hs, nested_path):
    create_nested_index(hs, spark, nested_path, "idx_wide")
    hs.createIndex(spark.read.parquet(nested_path),
                   IndexConfig("idx_narrow", ["nested.nst.field1"], ["id"]))
    build = lambda: spark.read.parquet(nested_path).filter(F.col("nested.nst.field1") == "wa1").select("id")  # noqa: E731
    assert rows(build()) == vanilla(spark, build)
    assert uses_index(build(), "idx_narrow")
    codes = {r.index: r.code for r in hs.whyNot(build())}
    assert codes == {"idx_narrow": "APPLIED", "idx_wide": "ANOTHER_INDEX_APPLIED"}


def test_point_lookup_index_beats_a_smaller_one_the_filter_only_null_checks(spark, hs, nested_path):
    # the larger index is read one bucket by the literal; the smaller would be read whole
    hs.createIndex(spark.read.parquet(nested_path),
                   IndexConfig("idx_by_id", ["id"], ["name", "nested.nst.field2"]))
    hs.createIndex(spark.read.parquet(nested_path), IndexConfig("idx_by_name", ["name"], ["id"]))
    sizes = {r.name: r.sizeInBytes for r in hs.indexes().collect()}
    assert sizes["idx_by_id"] > sizes["idx_by_name"]
    build = lambda: spark.read.parquet(nested_path).filter("id = 7 AND name IS NOT NULL").select("name")  # noqa: E731
    assert rows(build()) == vanilla(spark, build)
    assert uses_index(build(), "idx_by_id")


def test_bucket_spec_of_the_filter_rule_can_be_turned_off(spark, hs, nested_path):
    create_nested_index(hs, spark, nested_path)
    physical = lambda: seed_query(spark, nested_path)._jdf.queryExecution().executedPlan().toString()  # noqa: E731
    assert "Bucketed:" in physical()                  # a bucketed relation (Spark may not use it)
    spark.conf.set("spark.accelerator.index.filterRule.useBucketSpec", "false")
    try:
        assert "Bucketed" not in physical() and "idx_nested/v__=0" in physical()
        assert rows(seed_query(spark, nested_path)) == vanilla(spark, lambda: seed_query(spark, nested_path))
    finally:
        spark.conf.unset("spark.accelerator.index.filterRule.useBucketSpec")


@pytest.mark.compat
def test_lifecycle_delete_restore_vacuum(spark, hs, nested_path, system_path):
    create_nested_index(hs, spark, nested_path)
    with pytest.raises(IndexExistsError, match="idx_nested.*already exists"):
        create_nested_index(hs, spark, nested_path, "IDX_NESTED")
    hs.deleteIndex("idx_nested")
    assert hs.indexes().collect()[0]["state"] == "DELETED"
    assert not uses_index(seed_query(spark, nested_path), "idx_nested")
    assert hs.whyNot(seed_query(spark, nested_path))[0].code == "NOT_ACTIVE"
    hs.restoreIndex("Idx_Nested")
    assert uses_index(seed_query(spark, nested_path), "idx_nested")
    hs.deleteIndex("idx_nested")
    hs.vacuumIndex("idx_nested")
    assert hs.indexes().count() == 0
    assert not os.path.exists(os.path.join(system_path, "idx_nested"))
    with pytest.raises(IndexNotFoundError, match="no index named 'idx_nested'"):
        hs.index("idx_nested")
    create_nested_index(hs, spark, nested_path)   # the name is free again
    assert uses_index(seed_query(spark, nested_path), "idx_nested")


def test_failed_create_rolls_back_and_names_the_index(spark, hs, nested_path, monkeypatch):
    import indexes.covering.kind as covering_kind
    from accelerator import IndexNotFoundError, IndexOperationError

    def crash(*args, **kwargs):
        raise RuntimeError("executor lost")

    monkeypatch.setattr(covering_kind, "write_buckets", crash)
    with pytest.raises(IndexOperationError,
                       match=r"idx_nested.*rolled back.*RuntimeError: executor lost"):
        create_nested_index(hs, spark, nested_path)
    monkeypatch.undo()
    assert hs.indexes().count() == 0    # not stuck in CREATING
    with pytest.raises(IndexNotFoundError, match="idx_nested"):
        hs.refreshIndex("idx_nested")   # was KeyError: 'schema'
    assert not uses_index(seed_query(spark, nested_path), "idx_nested")
    create_nested_index(hs, spark, nested_path)
    assert uses_index(seed_query(spark, nested_path), "idx_nested")


def test_index_details_and_listing(spark, hs, nested_path, system_path):
    create_nested_index(hs, spark, nested_path)
    [row] = hs.indexes().collect()
    assert (row["name"], row["kind"], row["state"], row["numBuckets"]) == ("idx_nested", "CoveringIndex", "ACTIVE", 4)
    assert row["includedColumns"] == ["id", "name", "nested.nst.field2"]
    assert row["numFiles"] > 0 and row["sizeInBytes"] > 0
    [detail] = hs.index("idx_nested").collect()
    assert detail["sourceFiles"] == 4 and detail["dataVersion"] == 0 and detail["numRows"] == 200
    assert detail["sourceFormat"] == "parquet"


@pytest.mark.compat
def test_refresh_full_after_append_uses_new_version(spark, hs, nested_path):
    create_nested_index(hs, spark, nested_path)
    spark.createDataFrame([(1000, "late", ("v", ("wa1", "late-b")))], NESTED_SCHEMA) \
        .write.mode("append").parquet(nested_path)
    q = seed_query(spark, nested_path)
    assert hs.whyNot(q)[0].code == "APPLIED"          # hybrid scan: the index + the new file
    assert (1000, "late", "late-b") in rows(q)
    assert rows(q) == vanilla(spark, lambda: seed_query(spark, nested_path))
    hs.refreshIndex("idx_nested", mode="full")
    q = seed_query(spark, nested_path)
    assert all("v__=1" in f for f in q.inputFiles())
    assert rows(q) == vanilla(spark, lambda: seed_query(spark, nested_path))
    assert (1000, "late", "late-b") in rows(q)
    hs.refreshIndex("idx_nested")   # nothing changed: a no-op, not an error
    assert hs.index("idx_nested").collect()[0]["dataVersion"] == 1


def test_deleted_source_file_disables_index(spark, hs, nested_path):
    create_nested_index(hs, spark, nested_path)
    victim = sorted(f for f in os.listdir(nested_path) if f.endswith(".parquet"))[0]
    os.remove(os.path.join(nested_path, victim))
    q = lambda: seed_query(spark, nested_path)  # noqa: E731
    assert not uses_index(q(), "idx_nested")
    assert rows(q()) == vanilla(spark, q)


@pytest.mark.compat
def test_rewriter_failure_keeps_query_correct(spark, hs, nested_path, monkeypatch):
    create_nested_index(hs, spark, nested_path)
    expected = vanilla(spark, lambda: seed_query(spark, nested_path))
    import indexes.covering.match as rule

    def broken(*args, **kwargs):
        raise RuntimeError("injected rewriter bug")

    monkeypatch.setattr(rule, "evaluate", broken)
    q = seed_query(spark, nested_path)
    assert rows(q) == expected
    assert not uses_index(q, "idx_nested")


@pytest.mark.compat
def test_jvm_rule_rejects_a_result_with_another_schema(spark, hs, nested_path, monkeypatch):
    from accelerator.query import session

    create_nested_index(hs, spark, nested_path)
    expected = vanilla(spark, lambda: seed_query(spark, nested_path))
    wrong = spark.range(3)._jdf.queryExecution().optimizedPlan()
    monkeypatch.setattr(session.rewriter(spark), "apply", lambda plan, payload: wrong)
    q = seed_query(spark, nested_path)
    assert rows(q) == expected
    assert not uses_index(q, "idx_nested")


def test_concurrent_creates_of_one_name(spark, hs, nested_path):
    barrier = threading.Barrier(2)
    outcomes: list[object] = []

    def create():
        barrier.wait()
        try:
            create_nested_index(hs, spark, nested_path, "idx_race")
            outcomes.append("ok")
        except AcceleratorError as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=create) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("ok") == 1
    [error] = [o for o in outcomes if o != "ok"]
    # the loser either lost the race for the same log entry, or saw the winner's entry while it
    # was still CREATING (then it cannot tell a running create from a crashed one), or after it
    # was ACTIVE
    assert isinstance(error, (ConcurrentModificationError, IndexStateError, IndexExistsError))
    assert "idx_race" in str(error)
    assert hs.indexes().collect()[0]["state"] == "ACTIVE"
    assert uses_index(seed_query(spark, nested_path), "idx_race")


@pytest.mark.compat
def test_explain_shows_both_plans_and_index(spark, hs, nested_path, capsys):
    create_nested_index(hs, spark, nested_path)
    text = hs.explain(seed_query(spark, nested_path), verbose=True)
    assert capsys.readouterr().out.strip() == text.strip()
    with_part, without_part = text.split("Plan without indexes:")
    assert "idx_nested/v__=0" in with_part and "nested__nst__field1" in with_part
    assert "idx_nested" not in without_part.split("Indexes used:")[0]
    assert "idx_nested: file:" in text.split("Indexes used:")[1]
    assert "idx_nested: APPLIED" in text


def test_why_not_unknown_index(spark, hs, nested_path):
    with pytest.raises(IndexNotFoundError, match="no index named 'nope'"):
        hs.whyNot(seed_query(spark, nested_path), "nope")


def test_history_records_queries(spark, hs, nested_path, system_path):
    from accelerator.query import session
    from accelerator.query.history import read_history

    create_nested_index(hs, spark, nested_path)
    seed_query(spark, nested_path).collect()
    session.rewriter(spark).flush_history(spark.conf.get("spark.accelerator.system.path"))
    history = read_history(spark, system_path)
    applied = [r for r in history.collect() if "idx_nested" in r["indexes_applied"]]
    assert applied and "nested.nst.field1" in applied[0]["filter_columns"]
