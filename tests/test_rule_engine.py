"""The rule engine end to end on Spark: queries recorded with what they cost, recommend() proposing
the kind each demand calls for, applyRecommendations() making those queries read fewer files with
the same results, user rules (NEVER, ALWAYS) winning, exploration ignored, and probation reverting
an engine action that made its queries slower."""
from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from accelerator import Hyperspace
from accelerator.commands.cli import main
from accelerator.query import session as accelerator_session
from rules.history.records import Predicate, QueryRecord, RelationUsage
from rules.user_rules import RulesError
from tests.helpers import session_conf

FILES = 8
ROWS_PER_FILE = 2000


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory):
    """``events`` (Parquet, 8 files): ``uid`` unique and unclustered, ``ts`` clustered by file,
    ``msg`` holding one rare word; ``wide`` (Parquet, 20 columns) for covering lookups;
    ``orders``/``items`` for joins; ``clicks`` (JSON) for the cache."""
    root = tmp_path_factory.mktemp("rule_engine")
    paths = {name: str(root / name)
             for name in ("events", "wide", "orders", "items", "clicks", "landing")}
    n = FILES * ROWS_PER_FILE
    (spark.range(0, n, numPartitions=FILES)
        .selectExpr("id", "sha2(cast(id * 7919 as string), 256) AS uid",
                    "timestamp_seconds(1700000000 + id * 60) AS ts",
                    "concat('event ', id % 97, CASE WHEN id = 4321 THEN ' zebra' ELSE '' END) "
                    "AS msg", "id % 5 AS k",
                    "to_json(named_struct('at', cast(timestamp_seconds(1700000000 + id * 60) "
                    "AS string), 'n', id)) AS payload")
        .write.parquet(paths["events"]))
    (spark.range(0, n, numPartitions=FILES)
        .selectExpr("id", "sha2(cast(id AS string), 256) AS key",
                    *[f"repeat(concat('c{i}-', id), 4) AS c{i}" for i in range(18)])
        .write.parquet(paths["wide"]))
    (spark.range(0, n, numPartitions=4).selectExpr("id AS o_id", "id % 100 AS customer")
        .write.parquet(paths["orders"]))
    (spark.range(0, 2 * n, numPartitions=4).selectExpr("id % 16000 AS l_order", "id AS price")
        .write.parquet(paths["items"]))
    (spark.range(0, n, numPartitions=FILES)
        .selectExpr("id", "concat('u', id % 300) AS user", "concat('/p/', id % 50) AS url")
        .write.json(paths["clicks"]))
    (spark.range(0, 4000, numPartitions=2)
        .selectExpr("id", "concat('u', id % 50) AS user", "date_add(DATE'2026-11-01', CAST(id % 4 AS INT)) AS day")
        .repartition(8, "day").write.partitionBy("day").json(paths["landing"]))
    return paths


def _same(spark, build):
    """The rows of ``build()`` with the accelerator on, after checking them against vanilla."""
    accelerated = sorted(map(tuple, build().collect()))
    Hyperspace.disable(spark)
    try:
        vanilla = sorted(map(tuple, build().collect()))
    finally:
        Hyperspace.enable(spark)
    assert accelerated == vanilla
    return accelerated


def _by(recs) -> dict[tuple[str, tuple[str, ...]], dict]:
    return {(r["kind"], tuple(r["columns"])): r.asDict() for r in recs.collect()}


@pytest.mark.compat
def test_recommends_and_applies_the_kind_each_demand_calls_for(spark, hs, lake):
    events = lambda: spark.read.parquet(lake["events"])   # noqa: E731
    uids = [r.uid for r in events().where("id % 997 = 3").select("uid").collect()][:12]
    lookups = [lambda u=u: events().where(F.col("uid") == u).select("id", "k") for u in uids]
    windows = [lambda i=i: events().where(
        (F.col("ts") >= F.timestamp_seconds(F.lit(1700000000 + i * 120000)))
        & (F.col("ts") < F.timestamp_seconds(F.lit(1700000000 + i * 120000 + 3000))))
        .select("id") for i in range(8)]
    search = lambda: events().where(F.col("msg").like("%zebra%")).select("id")   # noqa: E731
    at = "get_json_object(payload, '$.at')"
    paths = [lambda i=i: events().where(F.expr(
        f"{at} BETWEEN '2023-11-2{i} 00:00:00' AND '2023-11-2{i} 01:00:00'")).select("id")
        for i in range(6)]
    for q in lookups + windows + [search] * 8 + paths:
        q().collect()
    for _ in range(10):
        events().collect()                   # SELECT *: exploration, never demand

    recs = hs.recommend()
    found = _by(recs)
    assert set(found) >= {("bloom", ("uid",)), ("minmax", ("ts",)), ("text", ("msg",)),
                          ("minmax", (at,))}
    assert all(r["origin"] == "engine" and r["action"] == "create" for r in found.values())
    assert found[("bloom", ("uid",))]["queries"] == len(uids)
    assert found[("bloom", ("uid",))]["estimatedSecondsSaved"] > 0
    assert "Bloom" in found[("bloom", ("uid",))]["reason"]
    # SELECT * asked for nothing: no instruction on k, the column only the explorations read
    assert not [k for k in found if "k" in k[1]]

    before = {id(q): len(q().inputFiles()) for q in (lookups[0], windows[0], search, paths[1])}
    applied = hs.applyRecommendations(recs.where("kind IN ('bloom', 'minmax', 'text')"))
    assert {r["name"] for r in applied.collect()} >= {found[("minmax", (at,))]["name"]}
    assert {r["status"] for r in applied.collect()} == {"applied"}
    listed = {r["name"]: r for r in hs.indexes().collect()}
    for rec in found.values():
        if rec["kind"] in ("bloom", "minmax", "text"):
            assert listed[rec["name"]]["createdBy"] == "engine"
    for q in (lookups[0], windows[0], search, paths[1]):
        assert len(q().inputFiles()) < before[id(q)] == FILES
        _same(spark, q)
    # what exists is not proposed again
    again = _by(hs.recommend())
    assert not set(again) & {("bloom", ("uid",)), ("minmax", ("ts",)), ("text", ("msg",)),
                             ("minmax", (at,))}


def test_covering_index_for_a_hot_narrow_lookup(spark, hs, lake):
    wide = lambda: spark.read.parquet(lake["wide"])   # noqa: E731
    keys = [r.key for r in wide().where("id % 1999 = 1").select("key").collect()][:10]
    for key in keys:
        wide().where(F.col("key") == key).select("id").collect()
    found = _by(hs.recommend())
    assert ("covering", ("key",)) in found
    rec = found[("covering", ("key",))]
    assert rec["includedColumns"] == ["id"]
    planned = hs.applyRecommendations(hs.recommend(), dryRun=True).collect()
    assert {r["status"] for r in planned} == {"planned"} and hs.indexes().count() == 0
    hs.applyRecommendations(hs.recommend().where("kind = 'covering'"))
    q = lambda: wide().where(F.col("key") == keys[0]).select("id")   # noqa: E731
    assert "Exchange" not in q()._jdf.queryExecution().executedPlan().toString()
    assert all(rec["name"] in f for f in q().inputFiles())
    _same(spark, q)


@pytest.mark.compat
def test_paired_covering_indexes_for_a_hot_join(spark, hs, lake):
    def join():
        orders = spark.read.parquet(lake["orders"]).where("customer < 90")
        items = spark.read.parquet(lake["items"])
        return (orders.join(items, orders.o_id == items.l_order)
                .groupBy("customer").agg(F.sum("price").alias("total")))
    no_broadcast = {"spark__sql__autoBroadcastJoinThreshold": "-1",
                    "spark__sql__adaptive__autoBroadcastJoinThreshold": "-1"}
    with session_conf(spark, **no_broadcast):
        for _ in range(6):
            join().collect()
    # advised where Spark may broadcast, with the orders side filtered in every join (which
    # alone would suggest a broadcast): the joins ran shuffled, as the history recorded, so
    # the pair is proposed. Covering indexes of a join's two sources hold about all of their
    # bytes: more than the default budget (25% of the sources' bytes) when the history knows
    # no other source
    with session_conf(spark, spark__accelerator__rules__budget__indexBytes="64m"):
        found = _by(hs.recommend())
        pair = [found.get(("covering", ("o_id",))), found.get(("covering", ("l_order",)))]
        assert all(pair), sorted(found)
        assert pair[0]["includedColumns"] == ["customer"]
        assert pair[1]["includedColumns"] == ["price"]
        assert all("paired" in r["reason"] for r in pair)
        hs.applyRecommendations(hs.recommend().where("kind = 'covering'"))
    with session_conf(spark, **no_broadcast):
        plan = join()._jdf.queryExecution().executedPlan().toString()
        assert plan.count("Exchange hashpartitioning(o_id") == 0
        assert all(r["name"] in plan for r in pair)
        _same(spark, join)


def test_an_unchanged_source_is_profiled_again_only_for_new_columns(spark, hs, lake,
                                                                    monkeypatch):
    import accelerator.engine.advisor as advisor_module

    calls = []
    real = advisor_module.profile_source

    def spy(spark_, usage, files, columns):
        calls.append(sorted((c, sorted(u)) for c, u in columns.items()))
        return real(spark_, usage, files, columns)

    monkeypatch.setattr(advisor_module, "profile_source", spy)
    events = lambda: spark.read.parquet(lake["events"])   # noqa: E731
    uids = [r.uid for r in events().where("id % 997 = 5").select("uid").collect()][:8]
    for u in uids:
        events().where(F.col("uid") == u).select("id").collect()
    assert ("bloom", ("uid",)) in _by(hs.recommend())
    assert ("bloom", ("uid",)) in _by(hs.recommend())        # nothing new: no profiling
    assert calls == [[("uid", ["lookup"])]]
    for i in range(8):
        events().where((F.col("ts") >= F.timestamp_seconds(F.lit(1700000000 + i * 120000)))
                       & (F.col("ts") < F.timestamp_seconds(F.lit(1700003000 + i * 120000)))
                       ).select("id").collect()
    found = _by(hs.recommend())
    assert calls == [[("uid", ["lookup"])], [("ts", ["range"])]]
    assert {("bloom", ("uid",)), ("minmax", ("ts",))} <= set(found)


def test_cache_for_a_hot_json_source(spark, hs, lake):
    clicks = lambda: spark.read.json(lake["clicks"])   # noqa: E731
    for i in range(6):
        clicks().where(F.col("user") == f"u{i}").select("url").collect()
    found = _by(hs.recommend())
    cache = [r for (kind, _), r in found.items() if kind == "cache"]
    assert len(cache) == 1 and set(cache[0]["columns"]) == {"url", "user"}
    assert (cache[0]["priority"], cache[0]["ttl"]) == ("MEDIUM", "P7D")   # engine entries expire
    hs.applyRecommendations(hs.recommend().where("kind = 'cache'"))
    entries = hs.cacheEntries().collect()
    assert len(entries) == FILES and {tuple(sorted(e["columns"])) for e in entries} == {
        ("url", "user")}
    assert {(e["priority"], e["ttl"]) for e in entries} == {("MEDIUM", "P7D")}
    q = lambda: clicks().where(F.col("user") == "u3").select("url")   # noqa: E731
    assert all("_cache" in f for f in q().inputFiles())
    _same(spark, q)


@pytest.fixture
def rules_path(spark):
    """The session's rules file setting, restored (unset) after the test."""
    with session_conf(spark, spark__accelerator__rules__path=""):
        yield


def test_the_engine_caches_the_partitions_queries_touch(spark, hs, lake):
    landing = lambda: spark.read.json(lake["landing"])   # noqa: E731
    recent = lambda i: landing().where(                   # noqa: E731
        (F.col("day") >= F.lit("2026-11-03").cast("date")) & (F.col("user") == f"u{i}"))
    for i in range(6):
        recent(i).select("id").collect()
    hs.applyRecommendations(hs.recommend().where("kind = 'cache'"))
    cached = {e["file"].split("/day=")[1].split("/")[0] for e in hs.cacheEntries().collect()}
    assert cached == {"2026-11-03", "2026-11-04"}         # the days queries read, not all four
    q = lambda: recent(7).select("id", "day")            # noqa: E731
    # the days the query reads come from the cache (the others' files are pruned by day)
    from_source = [f for f in q().inputFiles() if "_cache" not in f]
    assert {f.split("/day=")[1].split("/")[0] for f in from_source} <= {"2026-11-01",
                                                                         "2026-11-02"}
    _same(spark, q)


def test_user_rules_win(spark, hs, lake, tmp_path, rules_path):
    events = lambda: spark.read.parquet(lake["events"])   # noqa: E731
    for u in [r.uid for r in events().limit(6).select("uid").collect()]:
        events().where(F.col("uid") == u).select("id").collect()
    rules = tmp_path / "rules.yaml"
    rules.write_text(f"""version: 1
rules:
  - source: "{lake['events']}"
    priority: NEVER
  - source: "{lake['wide']}"
    kind: minmax
    columns: [id]
    priority: ALWAYS
    format: parquet
""")
    shown = hs.loadRules(str(rules)).collect()
    assert [(r["kind"], r["priority"], r["line"]) for r in shown] == [
        (None, "NEVER", 3), ("minmax", "ALWAYS", 5)]
    recs = hs.recommend().collect()
    # NEVER: the hot lookups of events get nothing; ALWAYS: wide is indexed with no demand
    assert [(r["origin"], r["kind"], r["columns"], r["priority"]) for r in recs] == [
        ("user", "minmax", ["id"], "ALWAYS")]
    (done,) = hs.applyRecommendations().collect()
    assert done["status"] == "applied"
    (index,) = hs.indexes().collect()
    assert index["createdBy"] == "user" and index["indexedColumns"] == ["MinMax(id)"]
    assert hs.recommend().count() == 0          # done: nothing left to do


def test_a_bad_rules_file_names_its_line(spark, hs, tmp_path, rules_path, lake):
    rules = tmp_path / "rules.yaml"
    rules.write_text("version: 1\nrules:\n  - source: /x\n    kind: bloom\n    colums: [a]\n")
    with pytest.raises(RulesError, match=r"rules.yaml:5:5: .*'colums'.*columns"):
        hs.loadRules(str(rules))
    # a column the source (as the history read it) does not have
    spark.read.parquet(lake["orders"]).where("customer = 3").collect()
    rules.write_text(f"version: 1\nrules:\n  - source: {lake['orders']}\n    kind: bloom\n"
                     "    columns: [customr]\n")
    with pytest.raises(RulesError, match=r"rules.yaml:5:14: column 'customr' is not a column"):
        hs.loadRules(str(rules))
    # a source the history never read, on disk, read as the rule says
    rules.write_text(f"version: 1\nrules:\n  - source: {lake['wide']}\n    kind: minmax\n"
                     "    columns: [idd]\n    format: parquet\n")
    with pytest.raises(RulesError, match=r"rules.yaml:5:14: column 'idd' is not a column of "
                                         r".*wide \(it has .*id"):
        hs.loadRules(str(rules))
    assert spark.conf.get("spark.accelerator.rules.path") == ""     # not followed


def _timed_runs(recorder, template: str, durations: list[int], start_ms: int) -> None:
    for i, d in enumerate(durations):
        recorder.record(QueryRecord(start_ms + i, f"{template}-{start_ms}-{i}", ["x"],
                                    template=template, duration_ms=d))


def test_probation_reverts_a_harmful_engine_index(spark, hs, system_path, lake):
    events = lambda: spark.read.parquet(lake["events"])   # noqa: E731
    for i in range(6):                       # lookups of k: every file holds every value
        events().where(F.col("k") == i % 5).select("id").collect()
    Hyperspace.flushHistory(spark)
    (template,) = {r["template"] for r in hs.history().collect()}
    harmful = spark.createDataFrame(
        [("create", "minmax", f"file:{lake['events']}", ["k"], [], "auto_minmax_events_k",
          "MEDIUM", None, "engine", 1.0, 0.1, 100, 6, "made by the test")],
        "action string, kind string, source string, columns array<string>, "
        "includedColumns array<string>, name string, priority string, ttl string, "
        "origin string, score double, estimatedSecondsSaved double, estimatedBytes long, "
        "queries long, reason string")
    (done,) = hs.applyRecommendations(harmful).collect()
    assert done["status"] == "applied"
    # the template's runs: the 6 real ones before, and 7 after taking twice as long (the first
    # 2 settle; a run whose execution report came after the flush is a planning record,
    # without a duration)
    recorder = accelerator_session.rewriter(spark).recorder(system_path)
    before = [r["duration_ms"] for r in hs.history().collect() if r["duration_ms"] is not None]
    assert len(before) >= 5
    _timed_runs(recorder, template, [2 * max(before) + 50] * 7, int(1e13))

    recs = hs.recommend()
    undo = [r for r in recs.collect() if r["name"] == "auto_minmax_events_k"]
    assert [(r["action"], r["origin"]) for r in undo] == [("drop", "engine")]
    assert undo[0]["reason"].startswith("probation: ") and "slower" in undo[0]["reason"]
    hs.applyRecommendations(recs.where("name = 'auto_minmax_events_k'"))
    assert hs.indexes().where("state = 'ACTIVE'").count() == 0
    (revert,) = [e for e in hs.events().collect() if e["operation"] == "revert"]
    assert revert["index"] == "auto_minmax_events_k" and "slower" in revert["message"]
    # cooling down: not proposed again
    assert not [r for r in hs.recommend().collect() if r["columns"] == ["k"]]


def test_cli_advise_prints_and_applies(spark, hs, system_path, lake, capsys, tmp_path):
    events = lambda: spark.read.parquet(lake["events"])   # noqa: E731
    for t in range(6):
        events().where(F.col("ts") < F.timestamp_seconds(F.lit(1700000000 + t * 9000))).count()
    # two queries of a source deleted since: skipped (and said so), the others advised
    gone = f"file:{tmp_path}/gone"
    recorder = accelerator_session.rewriter(spark).recorder(system_path)
    for i in range(2):
        recorder.record(QueryRecord(
            int(1e12) + i, f"gone-{i}", [gone], ["parquet"], ["x"], ["x"],
            predicates=[Predicate(0, gone, "x", "equality", "EqualTo", None, None, ["1"],
                                  "int")],
            relations=[RelationUsage(gone, [gone], "parquet", None, [], ["x"], [], [], ["x"])]))
    Hyperspace.flushHistory(spark)      # as a session would have written it before
    assert main(["advise", "--json", "--system-path", system_path]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    assert ("minmax", ["ts"]) in [(r["kind"], r["columns"]) for r in rows]
    [skip] = [r for r in rows if r["action"] == "skip"]
    assert (skip["kind"], skip["source"], skip["queries"]) == ("unprofiled-source", gone, 2)
    assert skip["reason"].startswith(f"2 recorded queries of {gone} skipped (unprofiled-source)")
    assert main(["advise", "--apply", "--json", "--system-path", system_path]) == 0
    done = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    assert sorted(d["status"] for d in done) == ["applied"] * (len(done) - 1) + ["skipped"]
    assert hs.indexes().where("createdBy = 'engine'").count() == len(done) - 1


def test_no_history_no_recommendation(spark, hs, system_path):
    assert hs.recommend().count() == 0
    assert hs.applyRecommendations().count() == 0
    assert hs.applyRecommendations(hs.recommend(), dryRun=True).count() == 0
