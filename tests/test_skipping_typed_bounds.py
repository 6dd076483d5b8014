"""Numbers and times inside JSON: a MinMax sketch over a string JSON path also prunes queries
that cast it (typed bounds), and a cast sketch built in ANSI mode over values that do not cast
gives those files no usable bound instead of failing the build; results identical to vanilla
Spark, errors included."""
from __future__ import annotations

import datetime as dt

import pytest
from pyspark.sql import functions as F

from accelerator import DataSkippingIndexConfig, MinMaxSketch
from indexes.errors import InvalidIndexConfigError
from tests.helpers import rows, session_conf, vanilla

T = "get_json_object(payload, '$.t')"
AT = "get_json_object(payload, '$.at')"
START = dt.datetime(2026, 1, 1)


def write_events(spark, path, files=6, per_file=20, bad=None):
    """``files`` files of ``per_file`` rows; ``$.t`` counts up from 0 (clustered by file),
    ``$.at`` is an ISO time a minute apart; ``bad`` (a JSON value) replaces ``$.t`` in the
    first file's first row."""
    data = []
    for i in range(files * per_file):
        t = bad if bad is not None and i == 0 else str(i)
        at = (START + dt.timedelta(minutes=i)).strftime("%Y-%m-%d %H:%M:%S")
        data.append((i, f'{{"t": {t}, "at": "{at}"}}'))
    df = spark.createDataFrame(data, "id long, payload string")
    df.repartitionByRange(files, "id").write.parquet(path)


def check(spark, df, files):
    assert rows(df) == vanilla(spark, lambda: df)
    assert len(df.inputFiles()) == files, df.inputFiles()


@pytest.mark.parametrize("ansi", ["false", "true"])
def test_a_string_json_path_sketch_prunes_queries_that_cast_it(spark, hs, tmp_path, ansi):
    path = str(tmp_path / "events")
    write_events(spark, path)
    read = lambda: spark.read.parquet(path)  # noqa: E731
    with session_conf(spark, spark__sql__ansi__enabled=ansi):
        hs.createIndex(read(), DataSkippingIndexConfig("typed", MinMaxSketch(T), MinMaxSketch(AT)))
        sketches = {s["expression"] for s in hs.context.lifecycle().get("typed").config["sketches"]}
        assert f"CAST(({T}) AS BIGINT)" in sketches and f"CAST(({AT}) AS TIMESTAMP)" in sketches
        check(spark, read().where(F.expr(T).cast("long").between(45, 50)), 1)
        check(spark, read().where(f"cast({T} as int) in (3, 119)"), 2)
        check(spark, read().where(f"cast({T} as double) > 99.5"), 1)
        check(spark, read().where(f"cast({AT} as timestamp) >= timestamp'2026-01-01 01:50:00'"), 1)
        check(spark, read().where(f"cast({AT} as date) = date'2026-01-01'"), 6)
        check(spark, read().where(f"{T} = '7'"), 2)         # the string sketch itself still prunes


def test_a_csv_text_column_prunes_queries_that_cast_it(spark, hs, tmp_path):
    """CSV read without a schema holds text: the sketch of a plain column gets typed bounds."""
    path = str(tmp_path / "csv")
    spark.range(60).repartitionByRange(3, "id").selectExpr("cast(id as string) as n") \
        .write.option("header", "true").csv(path)
    read = lambda: spark.read.option("header", "true").csv(path)  # noqa: E731
    hs.createIndex(read(), DataSkippingIndexConfig("typed_csv", MinMaxSketch("n")))
    check(spark, read().where("cast(n as bigint) between 41 and 44"), 1)


def test_values_that_do_not_cast_keep_their_file_in_ansi_mode(spark, hs, tmp_path):
    """In ANSI mode a query's cast raises on a value that does not cast: the file holding it is
    never skipped, so the query raises as vanilla Spark does; the other files still prune."""
    path = str(tmp_path / "events")
    write_events(spark, path, bad='"oops"')
    read = lambda: spark.read.parquet(path)  # noqa: E731
    with session_conf(spark, spark__sql__ansi__enabled="true"):
        hs.createIndex(read(), DataSkippingIndexConfig("typed", MinMaxSketch(T)))
        query = read().where(F.expr(T).cast("long") == 70)
        assert len(query.inputFiles()) == 2                  # the file of 70 and the bad one
        with pytest.raises(Exception, match="CAST_INVALID_INPUT"):
            query.collect()
        with pytest.raises(Exception, match="CAST_INVALID_INPUT"):
            vanilla(spark, lambda: query)
    with session_conf(spark, spark__sql__ansi__enabled="false"):    # built in ANSI mode: unused
        check(spark, read().where(F.expr(T).cast("long") == 70), 6)


@pytest.mark.parametrize("bad", ['[1,2]', '1000.5', '9999999999', '"x"'])
def test_an_ansi_cast_sketch_builds_over_values_that_do_not_cast(spark, hs, tmp_path, bad):
    """``cast(get_json_object(j, '$.t') as int)`` in ANSI mode failed the whole build on the
    first value that does not cast; now that file gets no usable bound."""
    path = str(tmp_path / "events")
    write_events(spark, path, bad=bad)
    sketch = f"cast({T} as int)"
    read = lambda: spark.read.parquet(path)  # noqa: E731
    with session_conf(spark, spark__sql__ansi__enabled="true"):
        hs.createIndex(read(), DataSkippingIndexConfig("cast_int", MinMaxSketch(sketch)))
        query = read().where(f"{sketch} = 70")
        assert len(query.inputFiles()) == 2
        with pytest.raises(Exception, match="CAST_INVALID_INPUT|CAST_OVERFLOW"):
            query.collect()
        clean = read().where(f"id >= 20 AND {sketch} = 70")    # Spark checks id first
        assert rows(clean) == vanilla(spark, lambda: clean) == [(70, '{"t": 70, "at": "2026-01-01 01:10:00"}')]


def test_a_refresh_computes_statistics_under_the_ansi_setting_the_index_serves(spark, hs,
                                                                             tmp_path):
    """Statistics computed under another setting could differ from what the queries the index
    serves compute (a cast that raises in one mode gives null or a value in the other): an
    incremental refresh that would mix both is refused, naming both settings; whyNot names the
    difference and the Spark version the index was built under; a full refresh recomputes every
    file under the session's setting (as after moving to a Spark whose default differs), and
    the index then serves that setting's queries only."""
    path = str(tmp_path / "events")
    write_events(spark, path)
    read = lambda: spark.read.parquet(path)  # noqa: E731
    with session_conf(spark, spark__sql__ansi__enabled="false"):
        hs.createIndex(read(), DataSkippingIndexConfig("typed", MinMaxSketch(T)))
    spark.createDataFrame([(1000, '{"t": 1000}')], "id long, payload string") \
        .coalesce(1).write.mode("append").parquet(path)
    with session_conf(spark, spark__sql__ansi__enabled="true"):
        with pytest.raises(InvalidIndexConfigError,
                           match=r"spark.sql.ansi.enabled is true .* computed with false "
                                 rf"\(under Spark {spark.version};.*mode='full'"):
            hs.refreshIndex("typed", mode="incremental")
        [reason] = hs.whyNot(read().where(F.expr(T).cast("long") == 1000),
                            redirectFunc=lambda _: None)
        assert reason.code == "SOURCE_CHANGED" and "ansi.enabled" in reason.reason
        assert "mode='full'" in reason.reason
    with session_conf(spark, spark__sql__ansi__enabled="false"):
        check(spark, read().where(F.expr(T).cast("long") == 1000), 1)   # the new file, unknown
        hs.refreshIndex("typed", mode="incremental")
        check(spark, read().where(F.expr(T).cast("long").between(45, 50)), 1)
    with session_conf(spark, spark__sql__ansi__enabled="true"):
        assert hs.refreshIndex("typed", mode="full").first()["status"] == "succeeded"
        check(spark, read().where(F.expr(T).cast("long").between(45, 50)), 1)
    with session_conf(spark, spark__sql__ansi__enabled="false"):   # computed under true now
        check(spark, read().where(F.expr(T).cast("long").between(45, 50)), 7)


def test_why_not_names_a_cast_the_sketch_cannot_answer_and_the_sketch_that_would(spark, hs,
                                                                                 tmp_path):
    """A decimal cast has no typed bound (a query's cast names its own precision): whyNot says
    the string sketch cannot order decimals and names the sketch that would; that sketch,
    created as named, prunes the query."""
    path = str(tmp_path / "events")
    write_events(spark, path)
    read = lambda: spark.read.parquet(path)  # noqa: E731
    hs.createIndex(read(), DataSkippingIndexConfig("typed", MinMaxSketch(T), MinMaxSketch("id")))
    window = f"cast({T} as decimal(10,2)) between 45 and 50"
    query = read().where(window)
    check(spark, query, 6)
    (verdict,) = hs.whyNot(query, "typed")
    suggested = f"CAST(({T}) AS DECIMAL(10,2))"
    assert verdict.code == "SKETCH_TYPE_MISMATCH"
    assert verdict.reason == (
        f"the filter casts {T} from string to decimal(10,2), but MinMax({T}) holds string "
        f"values, whose order is not the order of decimal(10,2) values; "
        f"MinMaxSketch(\"{suggested}\") would serve it")
    numeric_as_text = read().where("cast(id as string) = '7'")
    check(spark, numeric_as_text, 6)
    assert [v.code for v in hs.whyNot(numeric_as_text, "typed")] == ["SKETCH_TYPE_MISMATCH"]
    hs.createIndex(read(), DataSkippingIndexConfig("typed_decimal", MinMaxSketch(suggested)))
    check(spark, read().where(window), 1)     # a new DataFrame: a planned one keeps its plan
    # a filter the sketches answer in no file is not a type mismatch
    unanswered = read().where(f"length({T}) = 2")
    assert [v.code for v in hs.whyNot(unanswered, "typed")] == ["NO_FILE_SKIPPED"]
