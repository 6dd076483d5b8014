"""The differential fuzzer in CI: random datasets, index sets of every kind and at least 1,000
random queries (stopping there; at most 15 minutes on a loaded machine), each answer compared with vanilla Spark's; fails with
the seed and a minimized reproduction when one differs. ``python -m tests.fuzz`` runs longer."""
from __future__ import annotations

import json
import random
import time

import pytest

from tests.fuzz import case, compare, data, minimize, runner
from tests.fuzz.preds import Pred
from tests.fuzz.queries import Query
from tests.helpers import using_system_path

SEED = 20261124
SECONDS = 900.0   # a bound for a loaded machine: the run stops at MAX_QUERIES
MAX_QUERIES = 1000
MIN_QUERIES = 1000
MIN_USED_SHARE = 0.2   # observed 27-60% per round; a round whose indexes suit few queries stays above it


@pytest.mark.fuzz
def test_random_queries_over_random_indexes_equal_vanilla(spark, tmp_path):
    started = time.monotonic()
    with using_system_path(spark, str(tmp_path / "indexes")):
        summary = runner.run(spark, SEED, SECONDS, queries_per_round=300, batch=40,
                             max_queries=MAX_QUERIES, minimize_seconds=60.0)
    report = json.dumps(summary.as_dict(), indent=2, default=str)
    print(report, f"wall time {time.monotonic() - started:.0f} s")
    assert not summary.failures, report
    assert summary.queries >= MIN_QUERIES, report
    assert summary.used >= MIN_USED_SHARE * summary.queries, report


def test_answers_compare_as_multisets_with_nan_and_signed_zero():
    nan = float("nan")
    assert compare.difference([(nan, -0.0), (1, None)], [(1, None), (nan, 0.0)]) is None
    assert compare.difference([({"a": -0.0},)], [({"a": 0.0},)]) is None
    assert compare.difference([(1,), (1,)], [(1,)]) is not None
    assert compare.difference([(nan,)], [(0.0,)]) is not None
    assert compare.difference([(1.0,)], [(1.5,)]) is not None


def test_scans_of_indexes_count_for_the_tagged_query_above_them():
    plan = "\n".join([
        "Union",
        ":- Project [0 AS fuzz_q#1, to_json(struct(c0, id#3)) AS r#2]",
        ":  +- FileScan parquet [id#3] Location: InMemoryFileIndex(1 paths)[file:/s/indexes/t_1/v__=0]",
        ":- Project [1 AS fuzz_q#4, to_json(struct(c0, id#5)) AS r#6]",
        ":  +- FileScan parquet [id#5] Location: InMemoryFileIndex(1 paths)[file:/data/t]",
        "+- Project [2 AS fuzz_q#7, to_json(struct(c0, id#8)) AS r#9]",
        "   +- Filter (id#8 > 1)",
        "      +- FileScan parquet [id#8] Location: PrunedFileIndex(2 files, ...)",
    ])
    assert case.used_by(plan, 3, "/s/indexes") == [True, False, True]


def test_the_minimizer_keeps_only_what_the_failure_needs(monkeypatch):
    setup = runner.round_setup(8)
    setup.paths = {}
    culprit = next(s for s in setup.specs if s.kind == "covering")
    query = Query("select", "df", ("id", "s", "k"),
                  Pred("and", children=(Pred("leaf", "t.k = 3"), Pred("leaf", "t.id > 1"))))

    def fails(setup_, q):   # "differs" while the culprit exists, t has a row and k = 3 is tested
        return ("t.k = 3" in (q.pred.sql() if q.pred else "") and culprit in setup_.specs
                and any(setup_.datasets["t"].files))

    monkeypatch.setattr(case, "build", lambda spark, s: s)
    monkeypatch.setattr(case, "teardown", lambda s: None)
    monkeypatch.setattr(case, "run", lambda spark, s, q: case.Outcome(
        failure="differs" if fails(s, q) else None))

    class Conf:
        def set(self, key, value):
            pass

    class Spark:
        conf = Conf()

    code = minimize.minimize(Spark(), setup, query, seconds=60, log=lambda m: None)
    compile(code, "reproduction", "exec")
    assert "spark.table(\"t\")" not in code and "t.k = 3" in code and "t.id > 1" not in code
    assert code.count("hs.createIndex") + code.count("hs.cache(") == 1
    assert culprit.code(f"{culprit.dataset}_df") in code


class _Reader:
    """A stand-in for ``spark.read`` recording the calls made on it."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        def call(*args, **kwargs):
            self.calls.append((name, args, kwargs))
            return self
        return call


def test_seeded_rounds_draw_json_sources_read_with_the_schema_everywhere():
    formats = {seed: {n: d.format for n, d in runner.round_setup(seed).datasets.items()}
               for seed in range(200)}
    assert formats == {seed: {n: d.format for n, d in runner.round_setup(seed).datasets.items()}
                       for seed in range(200)}   # deterministic
    drawn = [f for by_name in formats.values() for f in by_name.values()]
    assert {"parquet", "json", "json.gz"} <= set(drawn) and drawn.count("parquet") > len(drawn) / 2
    seed = next(s for s, by_name in formats.items() if {"json", "json.gz"} <= set(by_name.values()))
    setup = runner.round_setup(seed)
    assert all(d.row_group_rows is None for d in setup.datasets.values() if d.format != "parquet")

    class Spark:   # the reader case.build and the views use
        read = _Reader()

    data.read(Spark(), "json.gz", "/data/t")
    assert Spark.read.calls == [("schema", (data.SCHEMA,), {}),
                                ("options", (), data.JSON_OPTIONS), ("json", ("/data/t",), {})]
    query = Query("select", "sql", ("id", "ts"), Pred("leaf", "t.k = 3"))
    code = minimize.snippet(setup.datasets, setup.specs, query)
    compile(code, "reproduction", "exec")
    assert f"SCHEMA = {data.SCHEMA!r}" in code and f"JSON_OPTIONS = {data.JSON_OPTIONS!r}" in code
    for name, dataset in setup.datasets.items():
        reader = data.read_code(dataset.format, f"root + '/{name}'")
        assert f"{reader}.createOrReplaceTempView({name!r})" in code
        if dataset.format != "parquet":
            assert reader == ("spark.read.schema(SCHEMA).options(**JSON_OPTIONS)"
                              f".json(root + '/{name}')")
            assert f"{dataset.partitioned}, {dataset.format!r}, row_group_rows=None)" in code
    for spec in setup.specs:
        source = data.read_code(setup.datasets[spec.dataset].format, f"root + '/{spec.dataset}'")
        assert f"{spec.dataset}_df = {source}" in code


@pytest.mark.parametrize("fmt", ["json", "json.gz"])
def test_json_datasets_hold_the_generated_rows(spark, tmp_path, fmt):
    dataset = data.generate(random.Random(5), "t")
    path = str(tmp_path / "t")
    written = data.write_files(spark, path, [dataset.files[0], [], dataset.files[1]], True,
                               fmt=fmt)
    assert written[1] is None
    assert all(w.endswith(data.SUFFIXES[fmt]) for w in (written[0], written[2]))
    df = data.read(spark, fmt, path)
    assert df.columns == data.TOP_LEVEL + [data.PARTITION]
    generated = spark.createDataFrame(dataset.files[0] + dataset.files[1], data.SCHEMA).collect()
    assert compare.difference(df.drop(data.PARTITION).collect(), generated) is None
