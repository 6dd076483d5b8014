"""Text indexes end to end: every predicate form skips the files that cannot match (seen in
``inputFiles()``) with results identical to vanilla Spark; nested fields; stale indexes and
refresh; full-text search; explain; errors; and the case folding checked against Spark's own
lower()/upper() and LIKE on a sample."""
from __future__ import annotations

import random

import pytest
from pyspark.sql import functions as F

from accelerator import (
    DataSkippingIndexConfig,
    Hyperspace,
    InvalidIndexConfigError,
    MinMaxSketch,
    TextIndexConfig,
)
from indexes.text import literals as L
from tests.helpers import own_copy, rows, using_system_path, vanilla
from tests.test_text_literals import like_matches

SCHEMA = "id long, message string, mail struct<subject:string, body:string>"


def message(i: int) -> str | None:
    if i % 97 == 0:
        return None
    if i % 50 == 7:
        return f"ERROR {i} Timeout talking to db-{i % 3} code=ERR-{i:04d}"
    return f"INFO {i} request served in {i % 13} ms path=/p/{i % 5}"


def write_logs(spark, path: str) -> str:
    """800 rows in 8 files of 100 consecutive ids; rare error codes, nulls, a nested body."""
    data = [(i, message(i), (f"Subj {i}", f"Grüße from Straße {i}" if i % 100 == 3 else f"body {i}"))
            for i in range(800)]
    spark.createDataFrame(data, SCHEMA).repartitionByRange(8, "id").write.parquet(path)
    return path


@pytest.fixture(scope="module")
def written(spark, tmp_path_factory):
    """The logs, written once for the module (each test gets a copy: ``logs``)."""
    base = tmp_path_factory.mktemp("written")
    write_logs(spark, str(base / "logs"))
    return base


@pytest.fixture
def logs(written, tmp_path):
    (path,) = own_copy(written, tmp_path, "logs")
    return path


@pytest.fixture(scope="module")
def indexed_logs(spark, written, tmp_path_factory):
    """Logs with the text index "txt" on message, built once for the tests that only query."""
    base = tmp_path_factory.mktemp("indexed")
    (path,) = own_copy(written, base, "logs")
    with using_system_path(spark, str(base / "indexes")):
        Hyperspace(spark).createIndex(spark.read.parquet(path), TextIndexConfig("txt", column="message"))
    return path, str(base / "indexes")


@pytest.fixture
def indexed(spark, indexed_logs):
    """The path of the indexed logs, with their system path set and the rewrite enabled."""
    path, system = indexed_logs
    with using_system_path(spark, system):
        Hyperspace.enable(spark)
        yield path
        Hyperspace.disable(spark)


def check(spark, df, expected_files: int):
    assert rows(df) == vanilla(spark, lambda: df)
    assert len(df.inputFiles()) == expected_files, (expected_files, df.inputFiles())


@pytest.mark.parametrize("condition, files", [
    ("message LIKE '%ERR-0107%'", 1),
    ("message LIKE '%ERR-0107%' OR message LIKE '%ERR-0757%'", 2),
    ("message LIKE 'ERROR 157 Time%'", 1),
    ("message LIKE '%code=ERR-0207'", 1),
    ("message LIKE 'ERROR 2_7 Timeout%ERR-0257'", 1),
    ("message = 'ERROR 107 Timeout talking to db-2 code=ERR-0107'", 1),
    ("message = 'ERROR 107 Timeout talking to db-2 code=ERR-010'", 0),
    ("message IN ('ERROR 107 Timeout talking to db-2 code=ERR-0107', 'INFO 799 request served in 6 ms path=/p/4', NULL)", 2),
    ("contains(message, 'ERR-0307')", 1),
    ("startswith(message, 'ERROR 407 ')", 1),
    ("endswith(message, 'ERR-0507')", 1),
    ("message RLIKE 'ERR-0[6]07'", 1),
    ("message RLIKE '(ERR-0107|ERR-0207)$'", 2),
    ("regexp_like(message, '^ERROR 7[0-9]7 ')", 2),    # only '^ERROR 7' is required: ids 7, 700-799
    ("lower(message) LIKE '%err-0107%'", 1),
    ("upper(message) LIKE '%ERR-0107%'", 1),
    ("message ILIKE '%eRr-0107%'", 1),
    ("message LIKE '%ERR-9999%'", 0),
    ("message LIKE '%err-0107%'", 1),                   # case-folded grams: kept, no rows
    ("message LIKE '%ERR-0107%' AND id > 0", 1),
    ("message LIKE '%ERR-0107%' OR id = 555", 8),       # no index on id: any file may match
    ("NOT message LIKE '%ERR-0107%'", 8),
    ("message LIKE '%ms%'", 8),
    ("coalesce(message, '') LIKE '%ERR-0107%'", 8),    # not the indexed column itself
])
@pytest.mark.compat
def test_predicates_skip_files(spark, indexed, condition, files):
    check(spark, spark.read.parquet(indexed).where(condition), files)


def test_long_in_list_and_sql(spark, indexed):
    logs = indexed
    values = ", ".join(f"'{message(i)}'" for i in (7, 57, 107, 157, 207, 257, 307, 357, 407, 457, 507, 557))
    check(spark, spark.read.parquet(logs).where(f"message IN ({values})"), 6)   # an InSet
    spark.read.parquet(logs).createOrReplaceTempView("logs")
    check(spark, spark.sql("SELECT id FROM logs WHERE message LIKE '%ERR-0357%'"), 1)


def test_nested_field(spark, hs, logs):
    hs.createIndex(spark.read.parquet(logs), TextIndexConfig("txt_body", column="mail.body"))
    check(spark, spark.read.parquet(logs).where("mail.body LIKE '%Straße 303%'"), 1)
    check(spark, spark.read.parquet(logs).where("lower(mail.body) LIKE '%straße 303%'"), 1)
    # folding maps ß to ss: files holding 'Straße 3..' are kept (sound, no rows match)
    check(spark, spark.read.parquet(logs).where("lower(mail.body) LIKE '%strasse 3%'"), 2)
    check(spark, spark.read.parquet(logs).where(F.col("mail.body").contains("GRÜSSE")), 8)


@pytest.mark.compat
def test_stale_index_reads_new_files_and_refreshes_incrementally(spark, hs, logs):
    hs.createIndex(spark.read.parquet(logs), TextIndexConfig("txt", column="message"))
    extra = [(10_000 + i, f"ERROR appended code=ERR-0107 {i}", None) for i in range(3)]
    spark.createDataFrame(extra, SCHEMA).coalesce(1).write.mode("append").parquet(logs)
    q = lambda: spark.read.parquet(logs).where("message LIKE '%ERR-0107%'")  # noqa: E731
    check(spark, q(), 2)                                    # the appended file is always read
    assert len(rows(q())) == 4
    hs.refreshIndex("txt", mode="incremental")
    entry = hs.context.lifecycle().get("txt")
    assert entry.content["indexedFiles"] == 1 and entry.content["reusedShards"] >= 1
    check(spark, q(), 2)
    check(spark, spark.read.parquet(logs).where("message LIKE '%ERR-0207%'"), 1)
    hs.refreshIndex("txt", mode="incremental")              # nothing changed: a no-op
    assert hs.context.lifecycle().get("txt").id == entry.id


def test_deleted_file_is_ignored_until_full_refresh(spark, hs, logs):
    import os
    hs.createIndex(spark.read.parquet(logs), TextIndexConfig("txt", column="message"))
    doomed = sorted(f for f in os.listdir(logs) if f.endswith(".parquet"))[1]   # ids 100-199
    os.remove(os.path.join(logs, doomed))
    spark.catalog.clearCache()
    check(spark, spark.read.parquet(logs).where("message LIKE '%ERR-0157%'"), 0)
    check(spark, spark.read.parquet(logs).where("message LIKE '%ERR-0257%'"), 1)
    hs.refreshIndex("txt", mode="incremental")
    check(spark, spark.read.parquet(logs).where("message LIKE '%ERR-0257%'"), 1)
    hs.refreshIndex("txt", mode="full")
    check(spark, spark.read.parquet(logs).where("message LIKE '%ERR-0257%'"), 1)


@pytest.mark.parametrize("scoring", [False, True])
@pytest.mark.compat
def test_search_returns_exactly_the_matching_rows(spark, hs, logs, scoring):
    df = spark.read.parquet(logs)
    hs.createIndex(df, TextIndexConfig("txt", column="message", scoring=scoring))
    found = hs.search(df, "txt", '"db-1" AND timeout')
    expected = [r for r in range(800) if message(r) and "db-1 " in message(r)]
    assert sorted(r.id for r in found.collect()) == expected
    assert found.columns == df.columns
    if scoring:
        scored = hs.search(df, "txt", "err-0107 OR err-0207", score=True).collect()
        assert sorted(r.id for r in scored) == [107, 207]
        assert all(r.score > 0 for r in scored)
    else:
        with pytest.raises(InvalidIndexConfigError, match=r"holds groups of rows.*scoring=True"):
            hs.search(df, "txt", "err-0107", score=True)
    assert sorted(r.id for r in hs.search(df, "txt", "timeout -db").collect()) == []
    assert hs.search(df, "txt", "nosuchword").count() == 0
    prefixed = hs.search(df, "txt", "tim* AND code*")
    assert prefixed.count() == len([i for i in range(800) if message(i) and "Timeout" in message(i)])


def test_search_errors(spark, hs, logs):
    df = spark.read.parquet(logs)
    hs.createIndex(df, TextIndexConfig("txt", column="message"))
    hs.createIndex(df, DataSkippingIndexConfig("ds", MinMaxSketch("id")))
    with pytest.raises(InvalidIndexConfigError, match="invalid full-text query"):
        hs.search(df, "txt", 'unbalanced "quote')
    with pytest.raises(InvalidIndexConfigError, match="only excludes words.*write 'x -y'"):
        hs.search(df, "txt", "timeout AND NOT db")
    with pytest.raises(InvalidIndexConfigError, match="needs a text index"):
        hs.search(df, "ds", "x")
    spark.createDataFrame([(1,)], "a int").write.parquet(logs + "_other")
    with pytest.raises(InvalidIndexConfigError, match="is over"):
        hs.search(spark.read.parquet(logs + "_other"), "txt", "x")


@pytest.mark.parametrize("query, valid", [
    ("timeout AND NOT db", False),
    ("timeout OR NOT db", False),
    ("timeout AND (-db -two)", False),
    ("timeout AND (NOT db OR two)", False),
    ("(timeout OR two) AND NOT \"db 1\"", False),
    ("tim* AND NOT db", False),
    ("w:/ti[(]me.*/ AND NOT db", False),
    ("timeout -db", True),
    ("+timeout -db", True),
    ("timeout AND (two -db)", True),
    ("timeout -(db OR two)", True),
    ("\"timeout AND NOT db\" two", True),
    ("w:/t[i)]meo.*/ AND db* -two", True),
])
def test_check_query_rejects_parts_that_only_exclude(query, valid):
    """A part of a query holding only excluded words matches nothing in tantivy (the whole
    query then matches nothing or less than it says): rejected with a message saying what to
    write instead; excluded words next to words to find are fine."""
    from indexes.text.shards import matching_positions
    from indexes.text.search import check_query

    values = ["timeout db 1", "timeout two", "db two", "other timeout"]
    if valid:
        check_query(query)
        assert matching_positions(query, values)
    else:
        with pytest.raises(ValueError, match="only excludes words.*write 'x -y'"):
            check_query(query)


SEARCH_SCRIPT = """
import sys
from pyspark.sql import SparkSession
from accelerator import Hyperspace, TextIndexConfig
base = sys.argv[1]
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.accelerator.system.path", base + "/indexes").getOrCreate())
rows = [(i, f"INFO {i} request timeout at db-{i % 3}") for i in range(50_000)]
spark.createDataFrame(rows, "id long, message string").repartition(2).write.parquet(base + "/logs")
df = spark.read.parquet(base + "/logs")
hs = Hyperspace(spark)
hs.createIndex(df, TextIndexConfig("txt", column="message", scoring=True))
print("limit", len(hs.search(df, "txt", "timeout").limit(1).collect()), flush=True)
hs.search(df, "txt", "timeout", score=True).show(5)
print("count", hs.search(df, "txt", "timeout -1").count(), flush=True)
spark.stop()
"""


def test_search_read_in_part_leaves_no_broken_pipe(tmp_path):
    """A search result read in part (limit, show) ends its Python workers' tasks cleanly: no
    BrokenPipeError printed by Spark's Python daemon (it runs in a fresh Spark, whose stderr
    is the subprocess's)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
           "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", SEARCH_SCRIPT, str(tmp_path)], cwd=root,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "limit 1" in done.stdout and "only showing top 5 rows" in done.stdout
    assert f"count {sum(1 for i in range(50_000) if i % 3 != 1)}" in done.stdout
    assert "BrokenPipeError" not in done.stderr, done.stderr[-3000:]


def test_config_errors(spark, hs, logs):
    df = spark.read.parquet(logs)
    with pytest.raises(InvalidIndexConfigError, match="needs a string column"):
        hs.createIndex(df, TextIndexConfig("t1", column="id"))
    with pytest.raises(InvalidIndexConfigError, match="column 'nope' does not exist"):
        hs.createIndex(df, TextIndexConfig("t2", column="nope"))
    with pytest.raises(InvalidIndexConfigError, match="not an expression"):
        hs.createIndex(df, TextIndexConfig("t3", column="lower(message)"))
    with pytest.raises(InvalidIndexConfigError, match="non-empty"):
        hs.createIndex(df, TextIndexConfig("t4", column=""))
    with pytest.raises(InvalidIndexConfigError, match="scoring must be True or False, not 'yes'"):
        TextIndexConfig("t5", column="message", scoring="yes")


@pytest.mark.compat
def test_explain_shows_skipped_files_and_literals(spark, hs, logs):
    hs.createIndex(spark.read.parquet(logs), TextIndexConfig("txt", column="message"))
    text = hs.explain(spark.read.parquet(logs).where("message LIKE '%ERR-0107%'"))
    assert "txt: text index, 1 of 8 files kept (7 skipped)" in text
    assert "literals: 'ERR-0107'" in text
    reasons = hs.whyNot(spark.read.parquet(logs).where("message LIKE '%ms%'"), "txt")
    assert reasons[0].code == "NO_TEXT_PREDICATE"
    listed = hs.indexes().collect()[0]
    assert listed.kind == "TextIndex" and listed.indexedColumns == ["message"]


def test_case_folding_agrees_with_spark_lower_and_upper(spark):
    chars = [chr(c) for c in range(1, 0x30000) if not 0xD800 <= c <= 0xDFFF]
    df = spark.createDataFrame([(c,) for c in chars], "c string")
    differ = [hex(ord(c)) for c, lo, up in df.select("c", F.lower("c"), F.upper("c")).collect()
              if not L.fold(lo) == L.fold(c) == L.fold(up)]
    assert differ == []


def test_like_reference_agrees_with_spark(spark):
    rng = random.Random(3)
    alphabet = list("abAB_%\\.é😀\n") + ["ß", "ς"]
    cases = []
    for _ in range(300):
        value = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
        pattern = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 5)))
        if like_matches(pattern, value) is not None:
            cases.append((value, pattern))
    df = spark.createDataFrame(cases, "v string, p string")
    got = df.select(F.expr("v LIKE p")).collect()
    assert [r[0] for r in got] == [like_matches(p, v) for v, p in cases]
