"""Adversarial end-to-end checks of the covering-index rewrite across many query shapes.

Every query is run twice, built afresh each time (a DataFrame caches its optimized plan): with
the accelerator disabled (vanilla Spark) and enabled. Column names, column types and the sorted
rows must be identical, and the index must be used exactly where the filter rule says it
applies (observed through ``df.inputFiles()``: files under the system path are index files).

The data sets are tiny and written once per module. Indexes that no test changes are built once
per module into a system path of their own (``shared``); tests that change indexes or sources
build their own under the per-test ``system_path``.
"""
from __future__ import annotations

import datetime as dt
import decimal
import functools
import json
import os
import shutil
from types import SimpleNamespace
from urllib.parse import urlparse

import pytest
from pyspark.sql import Window, functions as F

from accelerator import Hyperspace, IndexConfig
from accelerator.runtime.spark_versions import PYSPARK

SYSTEM_PATH = "spark.accelerator.system.path"
BUCKETS = 4

NESTED_SCHEMA = (
    "id int, name string, grp int, d double, amount decimal(10,2), "
    "nested struct<leaf:string, nst:struct<field1:string, field2:string, num:int>>")
FLAT_SCHEMA = ("id int, key string, qty int, price double, amount decimal(10,2), day date, "
               "tags array<string>, attrs map<string,int>")
PART_SCHEMA = "id int, key string, qty int, region string, yr int"
OTHER_SCHEMA = "key string, label string"
COLLATIONS = PYSPARK >= (4, 0)   # string collations came with Spark 4.0
WEIRD_SCHEMA = "id int, w string, `my col` string, s struct<`in ner`:string, `b.c`:int>, `a.b` string"


# ----------------------------------------------------------------------------- data


def _nested_rows(n: int = 240):
    doubles = [0.0, -0.0, 1.5, float("nan"), None, -2.25]
    rows = []
    for i in range(n):
        m = i % 12
        if m == 0:
            nested = None                                   # null struct
        else:
            if m == 1:
                nst = None                                  # null inner struct
            else:
                field1 = None if m == 2 else ("" if m == 3 else f"k{i % 5}")   # null / empty leaf
                field2 = None if i % 7 == 0 else ("" if i % 7 == 1 else f"v{i % 31}")
                nst = (field1, field2, None if i % 9 == 0 else i % 9)
            nested = (None if i % 6 == 5 else f"l{i % 3}", nst)
        name = None if i % 10 == 9 else ("" if i % 4 == 0 else f"name{i % 17}")
        rows.append((i, name, i % 6, doubles[i % len(doubles)],
                     decimal.Decimal(f"{i % 13}.{i % 100:02d}"), nested))
    return rows


def _flat_rows(n: int = 180):
    rows = []
    for i in range(n):
        key = None if i % 11 == 0 else ("" if i % 11 == 1 else f"k{i % 7}")
        tags = None if i % 6 == 0 else ([] if i % 6 == 1 else [f"t{i % 3}", None, ""][: 1 + i % 3])
        attrs = None if i % 5 == 0 else ({} if i % 5 == 1 else {f"a{i % 4}": i, "z": None})
        rows.append((i, key, None if i % 13 == 0 else i % 10, float(i % 8) / 2,
                     decimal.Decimal(f"{i % 5}.50"), dt.date(2024, 1, 1 + i % 28), tags, attrs))
    return rows


def _part_rows(n: int = 160):
    regions = ["eu", "us", None, "apac"]
    return [(i, None if i % 9 == 0 else f"k{i % 5}", i % 7, regions[i % 4], 2020 + i % 3)
            for i in range(n)]


def _json_lines(n: int = 120):
    lines = []
    for i in range(n):
        m = i % 8
        if m == 0:
            rec = {"id": i, "name": f"j{i % 9}", "nested": None}
        elif m == 1:
            rec = {"id": i, "name": "", "nested": {"leaf": "x", "nst": None}}
        elif m == 2:
            rec = {"id": i, "nested": {"leaf": "y", "nst": {"field1": None, "field2": f"w{i}"}}}
        elif m == 3:
            rec = {"id": i, "name": f"j{i % 9}", "nested": {"nst": {"field2": "only2"}}}
        else:
            rec = {"id": i, "name": f"j{i % 9}",
                   "nested": {"leaf": f"z{i % 2}", "nst": {"field1": f"k{i % 5}", "field2": f"w{i % 4}"}}}
        lines.append(json.dumps(rec))
    return lines


@pytest.fixture(scope="module")
def data(spark, tmp_path_factory):
    """Paths of the module's small multi-file data sets (written once)."""
    root = tmp_path_factory.mktemp("shapes_data")
    p = SimpleNamespace(root=str(root))
    p.nested = str(root / "nested")
    spark.createDataFrame(_nested_rows(), NESTED_SCHEMA).write.option("maxRecordsPerFile", 60).parquet(p.nested)
    p.flat = str(root / "flat")
    spark.createDataFrame(_flat_rows(), FLAT_SCHEMA).write.option("maxRecordsPerFile", 60).parquet(p.flat)
    p.part = str(root / "part")
    spark.createDataFrame(_part_rows(), PART_SCHEMA).write.partitionBy("region", "yr").parquet(p.part)
    p.other = str(root / "other")
    spark.createDataFrame([(f"k{i}", f"label{i}") for i in range(4)] + [("", "empty"), (None, "null")],
                          OTHER_SCHEMA).coalesce(1).write.parquet(p.other)
    p.csv = str(root / "csv")
    os.makedirs(p.csv)
    for part in range(3):
        with open(os.path.join(p.csv, f"part-{part}.csv"), "w") as f:
            f.write("id,key,qty,ts\n")
            for i in range(part * 40, part * 40 + 40):
                key = "" if i % 10 == 0 else f"c{i % 6}"
                qty = "" if i % 9 == 0 else str(i % 5)
                f.write(f"{i},{key},{qty},2024-03-{1 + i % 27:02d} {i % 24:02d}:15:00\n")
    p.json = str(root / "json")
    os.makedirs(p.json)
    lines = _json_lines()
    for part in range(3):
        with open(os.path.join(p.json, f"part-{part}.json"), "w") as f:
            f.write("\n".join(lines[part::3]) + "\n")
    p.weird = str(root / "weird")
    words = ["apple", "APPLE", "Apple", "banana", "BANANA", "cherry", "", None, "\u00e4", "\u00c4"]
    weird = [(i, words[i % len(words)], None if i % 5 == 0 else f"v{i % 3}",
              None if i % 7 == 0 else (None if i % 7 == 1 else f"x{i % 4}", i), f"d{i % 2}")
             for i in range(100)]
    weird_df = spark.createDataFrame(weird, WEIRD_SCHEMA)
    if COLLATIONS:
        weird_df = weird_df.withColumn("w", F.col("w").cast("string collate UTF8_LCASE"))
    weird_df.write.parquet(p.weird)
    return p


def _copy_dir(src: str, dst: str) -> str:
    shutil.copytree(src, dst)
    return dst


# ----------------------------------------------------------------------------- indexes


def _csv(spark, path):
    return spark.read.option("header", "true").option("inferSchema", "true").csv(path)


def _create_shared(spark, hs, data):
    nested = spark.read.parquet(data.nested)
    hs.createIndex(nested, IndexConfig("ix_nested", ["nested.nst.field1"],
                                       ["id", "name", "grp", "nested.nst.field2"], BUCKETS))
    hs.createIndex(nested, IndexConfig("ix_leaf", ["nested.leaf"], ["id", "nested.nst"], BUCKETS))
    hs.createIndex(nested, IndexConfig("ix_d", ["d"], ["id"], BUCKETS))
    flat = spark.read.parquet(data.flat)
    hs.createIndex(flat, IndexConfig("ix_flat", ["qty"], ["id", "key", "price", "amount", "day", "tags", "attrs"],
                                     BUCKETS))
    hs.createIndex(spark.read.parquet(data.part),
                   IndexConfig("ix_part", ["key"], ["id", "qty", "region", "yr"], BUCKETS))
    hs.createIndex(_csv(spark, data.csv), IndexConfig("ix_csv", ["key"], ["id", "qty", "ts"], BUCKETS))
    hs.createIndex(spark.read.parquet(data.weird),
                   IndexConfig("ix_weird", ["w"], ["id", "`my col`", "s.`in ner`", "s.`b.c`", "`a.b`"], BUCKETS))
    hs.createIndex(spark.read.json(data.json),
                   IndexConfig("ix_json", ["nested.nst.field1"], ["id", "name", "nested.leaf"], BUCKETS))


@pytest.fixture(scope="module")
def shared_path(spark, data, tmp_path_factory):
    """A system path holding the indexes no test changes, built once for the module."""
    path = str(tmp_path_factory.mktemp("shapes_system") / "indexes")
    previous = spark.conf.get(SYSTEM_PATH, None)
    spark.conf.set(SYSTEM_PATH, path)
    try:
        _create_shared(spark, Hyperspace(spark), data)
    finally:
        if previous is None:
            spark.conf.unset(SYSTEM_PATH)
        else:
            spark.conf.set(SYSTEM_PATH, previous)
    return path


@pytest.fixture
def shared(spark, system_path, shared_path, data):
    """The module's indexes in use, accelerator enabled, for one test."""
    spark.conf.set(SYSTEM_PATH, shared_path)
    Hyperspace.enable(spark)
    try:
        yield SimpleNamespace(hs=Hyperspace(spark), path=shared_path, data=data)
    finally:
        Hyperspace.disable(spark)
        spark.conf.set(SYSTEM_PATH, system_path)   # the system_path fixture restores the rest
        for view in ("shapes_nested", "shapes_nested_upper", "shapes_other"):
            spark.catalog.dropTempView(view)


@pytest.fixture
def own(spark, system_path, data):
    """A fresh, empty system path for tests that change indexes or sources; accelerator enabled."""
    Hyperspace.enable(spark)
    try:
        yield SimpleNamespace(hs=Hyperspace(spark), path=system_path, data=data)
    finally:
        Hyperspace.disable(spark)


# ----------------------------------------------------------------------------- helpers


def _local(uri: str) -> str:
    return os.path.normpath(urlparse(uri).path if "://" in uri or uri.startswith("file:") else uri)


def files_read(df, system_path: str) -> tuple[set[str], set[str]]:
    """(names of the indexes whose files ``df`` reads, the other files it reads)."""
    prefix = _local(system_path).rstrip("/") + "/"
    indexes, others = set(), set()
    for f in df.inputFiles():
        p = _local(f)
        if p.startswith(prefix):
            indexes.add(p[len(prefix):].split("/")[0])
        else:
            others.add(p)
    return indexes, others


def snapshot(df):
    """Column names, column types and the rows (sorted by their repr, which tells -0.0 from 0.0
    and compares NaN equal to NaN) of a DataFrame."""
    names = df.columns
    types = [f.dataType.simpleString() for f in df.schema.fields]
    rows = sorted(repr(tuple(r)) for r in df.collect())
    return names, types, rows


def vanilla(spark, build):
    enabled = Hyperspace.isEnabled(spark)
    Hyperspace.disable(spark)
    try:
        return snapshot(build())
    finally:
        if enabled:
            Hyperspace.enable(spark)


def assert_same(spark, build, system_path=None, uses=None, min_rows=1):
    """Runs ``build()`` without and with the accelerator: same names, types and rows.

    ``uses``: the set of index names the accelerated query must read (empty set: none; None: not
    checked), from ``system_path``. Returns the accelerated snapshot.
    """
    expected = vanilla(spark, build)
    assert Hyperspace.isEnabled(spark)
    df = build()
    got = snapshot(df)
    assert got[0] == expected[0], "column names differ"
    assert got[1] == expected[1], "column types differ"
    assert got[2] == expected[2], "rows differ"
    assert len(got[2]) >= min_rows, "the query should return rows (a vacuous comparison proves nothing)"
    if uses is not None:
        assert_uses(df, system_path, uses)   # same DataFrame: the plan that produced the rows
    return got


def assert_uses(df, system_path, uses: set[str]):
    indexes, others = files_read(df, system_path)
    assert indexes == set(uses), f"indexes read: {sorted(indexes)}, expected {sorted(uses)}"
    if uses:
        assert not others, f"some scans still read the source: {sorted(others)[:3]}"
        physical = df._jdf.queryExecution().executedPlan().toString()
        for name in uses:
            assert f"/{name}/v__=" in physical, f"the physical plan does not scan index {name}"
    else:
        assert others, "the query should read the source files"


def assert_why_not_agrees(hs, df, name, system_path, source):
    """What whyNot says about ``source`` matches what ``df``'s own scans read: APPLIED when the
    index is read, some other reason when the source itself is read."""
    indexes, _ = files_read(df, system_path)
    codes = {r.code for r in hs.whyNot(df, name)
             if r.source == "*" or _local(source) in {_local(s.strip()) for s in r.source.split(",")}}
    assert codes, f"whyNot says nothing about the source {source}"
    if name in indexes:
        assert "APPLIED" in codes, f"the query reads {name} but whyNot says {codes}"
    else:
        assert codes - {"APPLIED"}, f"the query reads the source, not {name}, but whyNot says {codes}"


def tagged_union(make_df, cases, columns):
    """One query for many filters: ``make_df()`` read once per case (its own relation),
    filtered by the case's predicate, tagged with the case's label, all unioned. Each branch is
    a Filter directly over a file relation, so each one is rewritten on its own."""
    parts = []
    for label, predicate in cases:
        df = make_df()
        cond = F.expr(predicate) if isinstance(predicate, str) else predicate(df)
        parts.append(df.filter(cond).select(F.lit(label).alias("case"), *columns))
    return functools.reduce(lambda a, b: a.unionByName(b), parts)


def assert_cases(spark, make_df, cases, columns, system_path, uses):
    """Every case gives vanilla's rows (and some rows), every branch reads ``uses``."""
    got = assert_same(spark, lambda: tagged_union(make_df, cases, columns), system_path, uses)
    seen = {r.split(",")[0].strip("(' ") for r in got[2]}
    assert seen == {label for label, _ in cases}, "every case should return rows"


def nested_df(spark, data):
    return spark.read.parquet(data.nested)


def f1(df):
    return df["nested.nst.field1"]


# ----------------------------------------------------------------------------- predicates on the nested indexed field


def test_nested_indexed_field_predicates(spark, shared):
    c = "nested.nst.field1"
    cases = [
        ("eq", f"{c} = 'k1'"),
        ("eq-empty-string", f"{c} = ''"),
        ("range", f"{c} > 'k1' AND {c} <= 'k3'"),
        ("in", f"{c} IN ('k0', 'k4', '', 'nope')"),
        ("is-null", f"{c} IS NULL"),
        ("is-not-null", f"{c} IS NOT NULL"),
        ("null-safe-eq-value", f"{c} <=> 'k2'"),
        ("null-safe-eq-null", f"{c} <=> NULL"),
        ("or-same-column", f"{c} = 'k1' OR {c} = 'k3'"),
        ("not", f"NOT ({c} = 'k1')"),
        ("not-in", f"NOT ({c} IN ('k1', 'k2'))"),
        ("startswith", lambda df: f1(df).startswith("k") & (f1(df) != "k0")),
        ("coalesce-null", lambda df: F.coalesce(f1(df), F.lit("missing")) == "missing"),
        ("like", f"{c} LIKE 'k_' AND {c} NOT LIKE '%3'"),
    ]
    assert_cases(spark, lambda: nested_df(spark, shared.data), cases,
                 ["id", "name", "nested.nst.field2"], shared.path, {"ix_nested"})


def test_filters_mixing_indexed_and_included_columns(spark, shared):
    cases = [
        ("or-indexed-included", lambda df: (f1(df) == "k1") | (df["name"] == "")),
        ("and-indexed-included", lambda df: (f1(df) == "k2") & (df["grp"] > 2)),
        ("and-included-leaf-null", lambda df: (f1(df) == "k2") & df["nested.nst.field2"].isNull()),
        ("both-leaves-null", lambda df: f1(df).isNull() & df["nested.nst.field2"].isNull()),
        ("not-or", lambda df: ~((f1(df) == "k1") | (df["id"] < 100))),
        ("indexed-vs-column", lambda df: f1(df) < df["name"]),
        ("or-included-null-name", lambda df: (f1(df) == "k4") | df["name"].isNull()),
        ("case-when", "CASE WHEN grp > 3 THEN nested.nst.field1 ELSE nested.nst.field2 END = 'k3'"),
    ]
    assert_cases(spark, lambda: nested_df(spark, shared.data), cases,
                 ["id", "grp", "nested.nst.field1", "nested.nst.field2"], shared.path, {"ix_nested"})


def test_literals_of_another_type(spark, shared):
    """An int indexed column compared with string, decimal, bigint and double literals."""
    cases = [
        ("int-vs-string", "qty = '3'"),
        ("int-vs-decimal", "qty = 3.0"),
        ("int-vs-decimal-fraction", "qty < 2.5"),
        ("int-vs-bigint", "qty = 3L"),
        ("int-vs-double", "qty = 3.0D"),
        ("int-in-strings", "qty IN ('3', '4')"),
        ("int-range-mixed", "qty > '7' OR qty < 1.5"),
        ("int-between", "qty BETWEEN 2 AND '4'"),
        ("int-null-safe-null", "qty <=> NULL"),
        ("decimal-included", "qty = 1 AND amount = 1.5"),
        ("date-included", "qty = 2 AND day >= '2024-01-10'"),
    ]
    assert_cases(spark, lambda: spark.read.parquet(shared.data.flat), cases,
                 ["id", "qty", "amount", "day"], shared.path, {"ix_flat"})


def test_signed_zero_and_nan_keys(spark, shared):
    """Doubles: 0.0 = -0.0 and NaN = NaN in Spark; the index is bucketed by these values."""
    cases = [("eq-zero", "d = 0.0D"), ("eq-neg-zero", "d = -0.0D"), ("eq-nan", "d = 'NaN'"),
             ("in", "d IN (0.0D, 1.5D)"), ("null-safe-neg-zero", "d <=> -0.0D"),
             ("gt", "d > -1"), ("is-nan", "isnan(d)"), ("decimal-literal", "d = 0.0")]
    assert_cases(spark, lambda: spark.read.parquet(shared.data.nested), cases, ["id", "d"],
                 shared.path, {"ix_d"})


# ----------------------------------------------------------------------------- projections


def test_select_star_on_fully_covered_flat_source(spark, shared):
    def build():
        return spark.read.parquet(shared.data.flat).filter("qty = 3")

    got = assert_same(spark, build, shared.path, {"ix_flat"})
    assert got[0] == ["id", "key", "qty", "price", "amount", "day", "tags", "attrs"]


def test_select_star_count_and_constant_projection(spark, shared):
    def count_build():
        df = spark.read.parquet(shared.data.flat).filter("qty IS NULL OR qty = 0")
        return df.groupBy().count()

    assert_same(spark, count_build, shared.path, {"ix_flat"})

    def lit_build():
        return spark.read.parquet(shared.data.flat).filter("qty = 1").select(F.lit(1).alias("one"))

    assert_same(spark, lit_build, shared.path, {"ix_flat"})


def test_generate_and_map_access_above_filter(spark, shared):
    """Arrays and maps come back from the index as they are (null, empty, null elements)."""
    def build():
        df = spark.read.parquet(shared.data.flat).filter("qty IN (1, 2, 7)")
        return df.select("id", F.explode_outer("tags").alias("tag"), F.col("attrs")["z"].alias("z"),
                         F.size("attrs").alias("n"), F.map_keys("attrs").alias("keys"))

    assert_same(spark, build, shared.path, {"ix_flat"})


def test_special_column_names_and_collation(spark, shared):
    """Names with spaces and dots (top level and nested) and a UTF8_LCASE-collated indexed
    column (equality ignores case; the index is bucketed by it). Spark 3.5 has no collations:
    there the column is a plain string (and the self-join below matches on case)."""
    cases = [("eq-upper", "w = 'APPLE'"), ("eq-lower", "w = 'banana'"), ("in", "w IN ('CHERRY', '')"),
             ("umlaut", "w = '\u00e4'"), ("null", "w IS NULL"),
             ("nested-special", "w = 'banana' AND s.`in ner` = 'x1'"),
             ("dots", "w >= 'b' AND `a.b` = 'd1' AND s.`b.c` > 10")]
    columns = ["id", "w", "`my col`", "s.`in ner`", "s.`b.c`", "`a.b`"]
    assert_cases(spark, lambda: spark.read.parquet(shared.data.weird), cases, columns,
                 shared.path, {"ix_weird"})

    def joined():   # bucketed self-join on the collated key: 'apple' joins 'APPLE' (and 'apple')
        a = spark.read.parquet(shared.data.weird).filter("w IN ('apple', 'BANANA')").select("w", "id")
        b = (spark.read.parquet(shared.data.weird).filter("w IN ('APPLE', 'banana', 'apple')")
             .select(F.col("w").alias("w2"), F.col("id").alias("id2")))
        return a.join(b, F.col("w") == F.col("w2")).select("id", "id2")

    assert_same(spark, joined, shared.path, {"ix_weird"})


def test_whole_struct_is_not_covered_by_its_leaves(spark, shared):
    def build():
        df = nested_df(spark, shared.data)
        return df.filter(f1(df) == "k1").select("id", "nested")

    assert_same(spark, build, shared.path, set())

    def build_star():
        df = nested_df(spark, shared.data)
        return df.filter(f1(df) == "k1").select("id", "nested.*")

    assert_same(spark, build_star, shared.path, set())

    def build_nst_null():
        df = nested_df(spark, shared.data)
        return df.filter(f1(df).isNull()).select("id", F.col("nested.nst").isNull().alias("nst_null"))

    assert_same(spark, build_nst_null, shared.path, set())


def test_intermediate_struct_as_included_column(spark, shared):
    """ix_leaf includes the struct nested.nst: the struct itself and its fields are covered."""
    def build_struct():
        df = nested_df(spark, shared.data)
        return df.filter(df["nested.leaf"] == "l1").select("id", "nested.nst")

    assert_same(spark, build_struct, shared.path, {"ix_leaf"})

    def build_fields():
        df = nested_df(spark, shared.data)
        return (df.filter((df["nested.leaf"].isNull()) | (df["nested.nst.field1"] == "k2"))
                .select("id", "nested.nst.field1", "nested.nst.num",
                        F.col("nested.nst").isNull().alias("nst_null")))

    # the filter's first indexed column (nested.leaf) is used: ix_leaf; ix_nested lacks nested.nst.num
    assert_same(spark, build_fields, shared.path, {"ix_leaf"})

    def build_alias_struct():
        df = nested_df(spark, shared.data)
        return (df.select("id", F.col("nested.leaf").alias("lf"), F.col("nested.nst").alias("s"))
                .filter("lf = 'l2' AND s.num > 3").select("id", "s.field2", "s"))

    assert_same(spark, build_alias_struct, shared.path, {"ix_leaf"})


def test_select_star_with_whole_struct_included(spark, own):
    """A top-level struct as an included column (SELECT *, field accesses through it), two
    indexed columns (bucketed by both: no bucket pruning on one, bucketed join on both)."""
    own.hs.createIndex(nested_df(spark, own.data),
                       IndexConfig("ix_all", ["grp", "id"], ["name", "d", "amount", "nested"], BUCKETS))
    cases = [("star", "grp = 3"), ("in", "grp IN (0, 5)"), ("null-struct", "grp = 0 AND nested IS NULL"),
             ("inner-null", "grp = 1 AND nested.nst IS NULL")]
    columns = ["id", "name", "grp", "d", "amount", "nested"]
    assert_cases(spark, lambda: nested_df(spark, own.data), cases, columns, own.path, {"ix_all"})

    def star():
        return nested_df(spark, own.data).filter("grp = 1")

    got = assert_same(spark, star, own.path, {"ix_all"})
    assert got[0] == ["id", "name", "grp", "d", "amount", "nested"]

    def self_join():   # with field accesses through the included struct
        df = nested_df(spark, own.data)
        a = (df.filter("grp IN (1, 2) AND id < 150 AND nested.nst.field1 IS NOT NULL")
             .select("grp", "id", "nested.leaf", "nested.nst", "nested.nst.num"))
        b = nested_df(spark, own.data).filter("grp >= 1").select("grp", "id", "name")
        return a.join(b, ["grp", "id"])

    assert_same(spark, self_join, own.path, {"ix_all"})


def test_intermediate_struct_not_covered_by_leaves_only(spark, shared):
    """ix_nested holds only leaves of nested.nst: selecting nested.nst must not use it."""
    def build():
        df = nested_df(spark, shared.data)
        return df.filter(f1(df) == "k3").select("id", "nested.nst")

    assert_same(spark, build, shared.path, set())


def test_alias_of_nested_field_then_filter(spark, shared):
    def build():
        df = nested_df(spark, shared.data)
        return (df.select(F.col("nested.nst.field1").alias("k"), "id", F.col("nested.nst.field2").alias("v"))
                .filter("k = 'k4'"))

    got = assert_same(spark, build, shared.path, {"ix_nested"})
    assert got[0] == ["k", "id", "v"]


def test_upper_case_column_names(spark, shared):
    def build_df():
        df = nested_df(spark, shared.data)
        return df.filter(F.col("NESTED.NST.FIELD1") == "k1").select("ID", "Name", "NESTED.Nst.FIELD2")

    assert_same(spark, build_df, shared.path, {"ix_nested"})

    def build_sql():
        nested_df(spark, shared.data).createOrReplaceTempView("shapes_nested_upper")
        return spark.sql("SELECT ID, NAME, Nested.Nst.Field2 AS F2 FROM shapes_nested_upper "
                         "WHERE NESTED.NST.FIELD1 IN ('k0', 'k2')")

    assert_same(spark, build_sql, shared.path, {"ix_nested"})


# ----------------------------------------------------------------------------- operators above the filter


def test_self_join_both_sides_filtered(spark, shared):
    def build():
        df = nested_df(spark, shared.data)
        a = df.filter(f1(df) == "k1").select("id", "grp", F.col("nested.nst.field2").alias("f2"))
        b = df.filter(f1(df).isin("k2", "k3")).select(F.col("grp").alias("g"), "name")
        return a.join(b, a["grp"] == b["g"]).select("id", "f2", "name")

    assert_same(spark, build, shared.path, {"ix_nested"})


def test_self_join_on_the_indexed_column(spark, shared):
    """Both sides read the bucketed index: the join may run without a shuffle."""
    def build():
        df = nested_df(spark, shared.data)
        a = df.filter(f1(df).isin("k1", "k2", "")).select(F.col("nested.nst.field1").alias("ka"), "id")
        b = df.filter(f1(df) >= "k1").select(F.col("nested.nst.field1").alias("kb"), F.col("id").alias("id2"))
        return a.join(b, a["ka"] == b["kb"]).filter("id < id2 + 50")

    assert_same(spark, build, shared.path, {"ix_nested"})


def test_self_join_on_signed_zero_double_key(spark, shared):
    """0.0 joins -0.0 in vanilla Spark; both index sides are bucketed by the raw double."""
    def build():
        df = spark.read.parquet(shared.data.nested)
        a = df.filter("d >= -0.5").select(F.col("d").alias("da"), F.col("id").alias("ia"))
        b = df.filter("d <= 0.5").select(F.col("d").alias("db"), F.col("id").alias("ib"))
        return a.join(b, F.col("da") == F.col("db"))

    assert_same(spark, build, shared.path, {"ix_d"})


def test_union_of_two_filtered_reads(spark, shared):
    def build():
        df = nested_df(spark, shared.data)
        a = df.filter(f1(df) == "k0").select("id", "name")
        b = df.filter(f1(df).isNull()).select("id", "name")
        return a.union(b)

    assert_same(spark, build, shared.path, {"ix_nested"})

    def build_mixed():   # one branch can use the index, the other cannot
        df = nested_df(spark, shared.data)
        a = df.filter(f1(df) == "k0").select("id", "name")
        b = df.filter("id > 200").select("id", "name")
        return a.unionByName(b)

    got_indexes, got_others = files_read(build_mixed(), shared.path)
    assert got_indexes == {"ix_nested"} and got_others
    assert_same(spark, build_mixed)


def test_set_operations_on_filtered_reads(spark, shared):
    """except / intersect compare rows null-safely, including null struct leaves."""
    def pair():
        df = nested_df(spark, shared.data)
        a = df.filter(f1(df).isin("k1", "k2") | f1(df).isNull()).select("name", "nested.nst.field2")
        df2 = nested_df(spark, shared.data)
        b = df2.filter(f1(df2).isin("k2", "k3") | f1(df2).isNull()).select("name", "nested.nst.field2")
        return a, b

    def build():
        a, b = pair()
        c, d = pair()
        return (a.subtract(b).withColumn("op", F.lit("except"))
                .unionByName(c.intersect(d).withColumn("op", F.lit("intersect"))))

    got = assert_same(spark, build, shared.path, {"ix_nested"})
    assert {r.rsplit(",", 1)[1].strip(" ')") for r in got[2]} == {"except", "intersect"}


def test_union_of_same_dataframe_select_star_and_projection(spark, shared):
    """Both branches come from one DataFrame (one relation until the analyzer deduplicates
    it): one branch needs every column (SELECT *), the other an explicit projection."""
    def build():
        df = spark.read.parquet(shared.data.flat)
        a = df.filter("qty = 2")
        b = df.filter("qty = 5").select("id", "key", "qty", "price", "amount", "day", "tags", "attrs")
        return a.union(b)

    assert_same(spark, build, shared.path, {"ix_flat"})


def test_filter_then_group_by_on_included_columns(spark, shared):
    def build():
        df = nested_df(spark, shared.data)
        return (df.filter(f1(df).isin("k1", "k2", "") | f1(df).isNull())
                .groupBy("grp", "nested.nst.field2")
                .agg(F.count("*").alias("n"), F.sum("id").alias("s"), F.max("name").alias("mx"),
                     F.countDistinct("name").alias("dn")))

    assert_same(spark, build, shared.path, {"ix_nested"})


def test_window_over_filtered_rows(spark, shared):
    def build():
        df = nested_df(spark, shared.data)
        w = Window.partitionBy("nested.nst.field1").orderBy("id")
        return (df.filter(f1(df) != "k4")
                .select("id", "nested.nst.field1",
                        F.row_number().over(w).alias("rn"),
                        F.sum("grp").over(w).alias("running"),
                        F.lag("name").over(w).alias("prev")))

    assert_same(spark, build, shared.path, {"ix_nested"})


def test_order_by_limit_and_distinct(spark, shared):
    def build_top():
        df = nested_df(spark, shared.data)
        return df.filter(f1(df) >= "k2").orderBy(F.desc("id")).limit(7).select("id", "name")

    assert_same(spark, build_top, shared.path, {"ix_nested"})

    def build_ordered():
        df = nested_df(spark, shared.data)
        return df.filter(f1(df) == "k3").orderBy("id").select("id", "nested.nst.field2")

    Hyperspace.disable(spark)
    vanilla_rows = [tuple(r) for r in build_ordered().collect()]
    Hyperspace.enable(spark)
    ordered = build_ordered()
    assert [tuple(r) for r in ordered.collect()] == vanilla_rows   # the order, not only the rows
    assert_uses(ordered, shared.path, {"ix_nested"})

    def build_distinct():
        df = nested_df(spark, shared.data)
        return df.filter(f1(df).isNotNull()).select("nested.nst.field1", "grp").distinct()

    assert_same(spark, build_distinct, shared.path, {"ix_nested"})


def test_join_indexed_with_unindexed_source(spark, shared):
    def build():
        df = nested_df(spark, shared.data)
        other = spark.read.parquet(shared.data.other)
        left = df.filter(f1(df).isin("k1", "k2", "k3", "")).select("id", F.col("nested.nst.field1").alias("key"))
        return left.join(other, "key", "left_outer")

    assert_same(spark, build, shared.path)
    indexes, others = files_read(build(), shared.path)
    assert indexes == {"ix_nested"}
    assert others and all("/other/" in f for f in others)


def test_join_two_indexed_sources(spark, shared):
    def build():
        flat = spark.read.parquet(shared.data.flat).filter("qty IN (1, 2) AND key IS NOT NULL")
        part = spark.read.parquet(shared.data.part).filter("key IN ('k1', 'k2', 'k5')")
        return flat.join(part, "key").select("key", flat["id"], flat["qty"], part["region"], part["yr"])

    assert_same(spark, build, shared.path, {"ix_flat", "ix_part"})


# ----------------------------------------------------------------------------- SQL


def test_sql_temp_view_with_cte(spark, shared):
    def build_cte():
        nested_df(spark, shared.data).createOrReplaceTempView("shapes_nested")
        return spark.sql("""
            WITH hits AS (SELECT id, grp, nested.nst.field2 AS f2 FROM shapes_nested
                          WHERE nested.nst.field1 = 'k2')
            SELECT grp, count(*) AS n, max(f2) AS m FROM hits GROUP BY grp""")

    assert_same(spark, build_cte, shared.path, {"ix_nested"})


def test_sql_in_subquery(spark, shared):
    def build_in():
        nested_df(spark, shared.data).createOrReplaceTempView("shapes_nested")
        spark.read.parquet(shared.data.other).createOrReplaceTempView("shapes_other")
        return spark.sql("""
            SELECT id, name FROM shapes_nested
            WHERE nested.nst.field1 >= 'k1'
              AND nested.nst.field1 IN (SELECT key FROM shapes_other WHERE label <> 'null')""")

    got = assert_same(spark, build_in)
    assert len(got[2]) > 10
    # the outer scan is filtered on the indexed column and needs only covered columns
    assert files_read(build_in(), shared.path)[0] == {"ix_nested"}
    assert_why_not_agrees(shared.hs, build_in(), "ix_nested", shared.path, shared.data.nested)


def test_sql_scalar_subquery(spark, shared):
    def build():
        nested_df(spark, shared.data).createOrReplaceTempView("shapes_nested")
        return spark.sql("""
            SELECT id, name FROM shapes_nested
            WHERE nested.nst.field1 = 'k1'
              AND id > (SELECT avg(id) FROM shapes_nested WHERE nested.nst.field1 = 'k1')""")

    # both scans use the index; inputFiles() lists the outer query's alone
    assert_same(spark, build, shared.path, {"ix_nested"})
    assert_why_not_agrees(shared.hs, build(), "ix_nested", shared.path, shared.data.nested)


def test_sql_over_file_path(spark, shared):
    def build():
        return spark.sql(f"SELECT id, key, qty FROM parquet.`{shared.data.flat}` WHERE qty = 4")

    assert_same(spark, build, shared.path, {"ix_flat"})


# ----------------------------------------------------------------------------- partitioned, CSV, JSON sources


def test_partitioned_source_filters(spark, shared):
    """The index includes the partition columns (region has a null partition)."""
    cases = [("eq-and-partition", "key = 'k1' AND region = 'eu'"),
             ("null-partition", "key = 'k2' AND region IS NULL"),
             ("two-partition-columns", "key IN ('k3', 'k4') AND yr = 2021 AND region <> 'us'"),
             ("or-partition", "key IS NULL OR region = 'apac'"),
             ("partition-int-vs-string", "key = 'k0' AND yr = '2022'")]
    assert_cases(spark, lambda: spark.read.parquet(shared.data.part), cases,
                 ["id", "key", "qty", "region", "yr"], shared.path, {"ix_part"})

    def select_star():
        return spark.read.parquet(shared.data.part).filter("key = 'k3' AND region = 'us'")

    got = assert_same(spark, select_star, shared.path, {"ix_part"})
    assert got[0] == ["id", "key", "qty", "region", "yr"]


def test_partition_subdirectory_with_base_path_is_not_the_indexed_source(spark, shared):
    def build():
        return (spark.read.option("basePath", shared.data.part)
                .parquet(os.path.join(shared.data.part, "region=eu")).filter("key = 'k1'"))

    assert_same(spark, build, shared.path, set())


def test_csv_source(spark, shared):
    def build():
        return _csv(spark, shared.data.csv).filter("key = 'c1' OR key IS NULL").select("id", "qty", "ts")

    assert_same(spark, build, shared.path, {"ix_csv"})

    def keywords():   # the same options given as keyword arguments
        return (spark.read.csv(shared.data.csv, header=True, inferSchema=True)
                .filter("key IN ('c2', 'c3')").select("id", "key"))

    assert_same(spark, keywords, shared.path, {"ix_csv"})


def test_csv_read_with_other_options_does_not_use_index(spark, shared):
    def no_header():
        return (spark.read.option("inferSchema", "true").csv(shared.data.csv)
                .filter("_c1 = 'c1'").select("_c0", "_c2"))

    assert_same(spark, no_header, shared.path, set())

    def no_infer():
        return spark.read.option("header", "true").csv(shared.data.csv).filter("key = 'c1'").select("id", "qty")

    assert_same(spark, no_infer, shared.path, set())

    def glob_filter():   # a subset of the files through an option: must not answer from the index
        return (spark.read.option("header", "true").option("inferSchema", "true")
                .option("pathGlobFilter", "part-1*").csv(shared.data.csv)
                .filter("key = 'c1'").select("id", "qty"))

    assert_same(spark, glob_filter, shared.path, set())


def test_csv_timestamps_with_another_session_time_zone(spark, shared):
    """CSV text is parsed in the session time zone: a different zone means different values."""
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "Asia/Kathmandu" if previous != "Asia/Kathmandu" else "UTC")
    try:
        def build():
            return _csv(spark, shared.data.csv).filter("key = 'c2'").select("id", F.col("ts").cast("long").alias("epoch"))

        assert_same(spark, build)
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)


def test_json_source(spark, shared):
    def build():
        df = spark.read.json(shared.data.json)
        return df.filter(f1(df).isin("k1", "k3") | f1(df).isNull()).select("id", "name", "nested.leaf")

    assert_same(spark, build, shared.path, {"ix_json"})

    def primitives_as_string():   # other options and schema: not the indexed source
        df = spark.read.option("primitivesAsString", "true").json(shared.data.json)
        return df.filter(f1(df) == "k1").select("id", "name")

    assert_same(spark, primitives_as_string, shared.path, set())


def test_user_schema_with_other_types_does_not_use_index(spark, shared):
    def build():
        # key read as binary: a type every Spark line reads from a Parquet string (3.5's
        # vectorized reader cannot widen int to long, which Spark 4 can)
        return (spark.read.schema("id int, key binary, qty int").parquet(shared.data.flat)
                .filter("qty = 1").select("id", "key"))

    assert_same(spark, build, shared.path, set())


# ----------------------------------------------------------------------------- file metadata


def test_file_metadata_column_is_not_answered_from_index(spark, shared):
    def build():
        df = spark.read.parquet(shared.data.flat)
        return df.filter("qty = 1").select("id", F.col("_metadata.file_name").alias("file"))

    assert_same(spark, build, shared.path, set())


def test_input_file_name_is_the_source_file(spark, shared):
    def build():
        df = spark.read.parquet(shared.data.flat)
        return df.filter("qty = 1").select("id", F.input_file_name().alias("file"))

    assert_same(spark, build)


# ----------------------------------------------------------------------------- session and lifecycle


def test_dataframe_built_before_enable_uses_index(spark, shared):
    Hyperspace.disable(spark)
    df = nested_df(spark, shared.data)
    q = df.filter(f1(df) == "k2").select("id", "nested.nst.field2")
    expected = vanilla(spark, lambda: nested_df(spark, shared.data).filter("nested.nst.field1 = 'k2'")
                       .select("id", "nested.nst.field2"))
    Hyperspace.enable(spark)
    assert snapshot(q) == expected
    assert_uses(q, shared.path, {"ix_nested"})


def test_disable_stops_using_index(spark, shared):
    def build():
        return spark.read.parquet(shared.data.flat).filter("qty = 6")

    assert_uses(build(), shared.path, {"ix_flat"})
    Hyperspace.disable(spark)
    assert files_read(build(), shared.path)[0] == set()
    Hyperspace.enable(spark)


def test_delete_restore_and_source_changes(spark, own, tmp_path):
    """deleteIndex → not used; restoreIndex → used; a file appended → not used; the appended
    file removed again (exactly the indexed files) → used; an indexed file removed → not used."""
    source = _copy_dir(own.data.nested, str(tmp_path / "nested_copy"))
    own.hs.createIndex(spark.read.parquet(source),
                       IndexConfig("ix_life", ["nested.nst.field1"], ["id", "name"], BUCKETS))

    def build():   # re-reads the directory each time: a fresh file listing
        df = spark.read.parquet(source)
        return df.filter(f1(df) == "k1").select("id", "name")

    assert_same(spark, build, own.path, {"ix_life"})
    own.hs.deleteIndex("ix_life")
    assert_same(spark, build, own.path, set())
    assert {r.code for r in own.hs.whyNot(build(), "ix_life")} == {"NOT_ACTIVE"}
    own.hs.restoreIndex("ix_life")
    assert_same(spark, build, own.path, {"ix_life"})

    before = set(os.listdir(source))
    spark.createDataFrame([(1000, "appended", 0, 0.0, decimal.Decimal("1.00"), ("l0", ("k1", "new", 1)))],
                          NESTED_SCHEMA).coalesce(1).write.mode("append").parquet(source)
    got = assert_same(spark, build, own.path, None)   # hybrid scan: the index + the new file
    assert any("appended" in r for r in got[2])
    indexes, others = files_read(build(), own.path)
    assert indexes == {"ix_life"} and len(others) == 1
    spark.conf.set("spark.accelerator.index.hybridScan.enabled", "false")
    try:
        assert_same(spark, build, own.path, set())
        assert {r.code for r in own.hs.whyNot(build(), "ix_life")} == {"SOURCE_CHANGED"}
    finally:
        spark.conf.unset("spark.accelerator.index.hybridScan.enabled")

    for name in set(os.listdir(source)) - before:
        os.remove(os.path.join(source, name))
    got = assert_same(spark, build, own.path, {"ix_life"})
    assert not any("appended" in r for r in got[2])

    victim = sorted(f for f in os.listdir(source) if f.endswith(".parquet"))[0]
    os.remove(os.path.join(source, victim))
    assert_same(spark, build, own.path, set())


def test_vacuum_and_recreate_same_name(spark, own, tmp_path):
    """An index vacuumed and re-created under the same name (same columns), over rewritten
    source data, is read from its new files: no failure, no stale rows."""
    source = str(tmp_path / "flat_mut")
    spark.createDataFrame(_flat_rows(60), FLAT_SCHEMA).repartition(2).write.parquet(source)
    config = IndexConfig("ix_again", ["key"], ["id", "qty"], BUCKETS)
    own.hs.createIndex(spark.read.parquet(source), config)

    def build():
        return spark.read.parquet(source).filter("key = 'k3'").select("id", "qty")

    assert_same(spark, build, own.path, {"ix_again"})
    own.hs.deleteIndex("ix_again")
    own.hs.vacuumIndex("ix_again")
    assert_same(spark, build, own.path, set())
    shutil.rmtree(source)
    rows = [(r[0] + 5000, *r[1:]) for r in _flat_rows(90)]
    spark.createDataFrame(rows, FLAT_SCHEMA).repartition(2).write.parquet(source)
    own.hs.createIndex(spark.read.parquet(source), config)
    got = assert_same(spark, build, own.path, {"ix_again"})
    assert all(int(r.strip("()").split(",")[0]) >= 5000 for r in got[2])
