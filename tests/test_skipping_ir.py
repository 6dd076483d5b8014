"""Translation of real Spark plans into the pruning IR, and an end-to-end check of the evaluator
against Spark's own answers on two tiny Parquet files."""
from __future__ import annotations

import json
from contextlib import contextmanager

import pytest
from pybloom_live import BloomFilter
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from indexes.plan import output_attributes, parse_plan
from indexes.skipping import values as V
from indexes.skipping.evaluator import may_match
from indexes.skipping.ir import (
    And,
    Arith,
    Cast,
    Cmp,
    Func,
    In,
    IsNotNull,
    Lit,
    Not,
    Sketched,
    StartsWith,
    Unknown,
    expression_key,
    key_columns,
    translate,
)
from indexes.skipping.stats import ColumnStats, FileStats

#: how a failed Spark job reaches Python: pyspark 4 raises a PySparkException, 3.5 a Py4JJavaError
SPARK_ERRORS = (PySparkException, Py4JJavaError)
SCHEMA = ("l long, i int, d double, f float, dec decimal(10,2), s string, dt date, ts timestamp, "
          "b boolean, user struct<id:int,name:string,inner:struct<z:int>>, payload string, "
          "arr array<int>, m map<string,int>")
ROWS_A = [
    ("(1, 10, 0.5, 1.5, 1.50, 'apple', date'2024-01-01', timestamp'2024-11-03 00:30:00', true, "
     "named_struct('id', 1, 'name', 'ann', 'inner', named_struct('z', 1)), '{\"a\": 1.5}'"
     ", array(1, 2), map('a', 1))"),
    ("(2, 11, -0.0, -0.0, 2.25, 'apricot', date'2024-01-02', timestamp'2024-11-03 05:30:00', false, "
     "named_struct('id', cast(null as int), 'name', 'al', 'inner', named_struct('z', 2)), '{\"a\": \"x\"}'"
     ", array(), map('a', cast(null as int)))"),
    ("(3, 12, double('NaN'), float('NaN'), null, '', date'2024-01-31', timestamp'2024-11-03 06:30:00', null, "
     "null, '{\"b\": 1}', null, map())"),
    ("(null, null, null, null, 3.00, null, null, null, true, "
     "named_struct('id', 3, 'name', null, 'inner', null), null, array(null, 3), null)"),
    ("(5, 14, 1.5, 2.5, 4.75, '😀x', date'2024-01-03', timestamp'2024-11-02 23:59:59.999999', true, "
     "named_struct('id', 5, 'name', 'amy', 'inner', named_struct('z', 5)), '{\"a\": 2}'"
     ", array(4), map('b', 2))"),
]
ROWS_B = [
    ("(100, 20, -5.0, -5.0, 100.00, 'zebra', date'2023-06-01', timestamp'2023-06-01 12:00:00', false, "
     "named_struct('id', 100, 'name', 'zed', 'inner', named_struct('z', 9)), '{\"a\": 7}'"
     ", array(7, 8, 9), map('a', 5))"),
    ("(105, 21, -1.0, -1.0, 100.50, 'zeta', date'2023-06-30', timestamp'2023-06-01 13:30:00', false, "
     "named_struct('id', 105, 'name', 'zoe', 'inner', named_struct('z', 9)), '{\"a\": 9.5}'"
     ", array(10, 11, 12, 13), map('a', 6, 'b', 1))"),
    ("(-9223372036854775808, 22, double('-Infinity'), null, null, 'zz', date'2023-06-15', null, false, "
     "named_struct('id', 101, 'name', 'zia', 'inner', null), '{}', array(20), map('c', 1))"),
]
SKETCHES = ["l", "i", "d", "f", "dec", "s", "dt", "ts", "b", "user.id", "user.name", "user.inner.z",
            "get_json_object(payload, '$.a')", "try_cast(get_json_object(payload, '$.a') as double)",
            "size(arr)", "array_max(arr)", "m['a']"]


@contextmanager
def session_conf(spark, **settings):
    previous = {k: spark.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in previous.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def plan(df):
    return parse_plan(df._jdf.queryExecution().optimizedPlan().toJSON())


def names_of(root):
    relation = next(n for n in root.walk() if n.cls == "LogicalRelation")
    return {a.expr_id: a.fields["name"] for a in output_attributes(relation)}.get


def sketch_key(df, text):
    root = plan(df.select(F.expr(text).alias("sketch")))
    return expression_key(root.exprs["projectList"][0], names_of(root))


def condition(df, cond):
    root = plan(df.where(cond))
    node = next(n for n in root.walk() if n.cls == "Filter")
    return node.exprs["condition"][0], names_of(root)


@pytest.fixture(scope="module")
def files(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("skipping_ir")
    paths = []
    with session_conf(spark, **{"spark.sql.session.timeZone": "America/New_York"}):
        for name, rows in (("a", ROWS_A), ("b", ROWS_B)):
            path = str(base / name)
            spark.sql(f"select * from values {', '.join(rows)} as t({', '.join(c.split()[0] for c in SCHEMA.split(', '))})") \
                .selectExpr(*[f"cast({c.split()[0]} as {c.split(' ', 1)[1]}) as {c.split()[0]}"
                              for c in SCHEMA.split(", ")]) \
                .coalesce(1).write.parquet(path)
            paths.append(path)
    return paths


@pytest.fixture
def df(spark, files):
    with session_conf(spark, **{"spark.sql.session.timeZone": "America/New_York",
                                "spark.sql.ansi.enabled": "true"}):
        yield spark.read.parquet(*files)


def ir_of(df, cond, sketches=("l", "s", "ts", "dt", "d")):
    keys = {sketch_key(df, s) for s in sketches}
    expr, name_of = condition(df, cond)
    return translate(expr, name_of, keys, "America/New_York", True)


# --- keys ------------------------------------------------------------------------------------
def test_keys_are_canonical(df):
    by_col = expression_key(plan(df.select(F.col("user.id"))).exprs["projectList"][0],
                            names_of(plan(df.select(F.col("user.id")))))
    assert by_col == sketch_key(df, "user.id") == sketch_key(df, "user['id']") == 'col("user")."id"'
    assert sketch_key(df, "user.inner.z") == 'col("user")."inner"."z"'     # ordinal 0 after pruning
    assert sketch_key(df, "get_json_object(payload, '$.a')") != sketch_key(df, "get_json_object(payload, '$.b')")
    assert sketch_key(df, "rand()") is None
    assert sketch_key(df, "l + 1") != sketch_key(df, "l + 2")
    # cast and try_cast print alike: a sketch cannot tell them apart (hence the guard)
    assert sketch_key(df, "try_cast(s as int)") == sketch_key(df, "cast(s as int)")
    expr, name_of = condition(df, "user.inner.z = 3")
    assert expression_key(expr.children[1].children[0], name_of) == sketch_key(df, "user.inner.z")


def test_keys_name_the_columns_they_read(df):
    assert key_columns(sketch_key(df, "user.inner.z")) == {"user"}
    assert key_columns(sketch_key(df, "try_cast(get_json_object(payload, '$.a') as double)")) \
        == {"payload"}
    assert key_columns(sketch_key(df, "l + i")) == {"l", "i"}
    assert key_columns('col("a \\"b")') == {'a "b'}


def test_query_subtrees_meet_their_sketches(df):
    keys = {sketch_key(df, s) for s in ("user.id", "get_json_object(payload, '$.a')",
                                        "cast(get_json_object(payload, '$.a') as double)")}
    expr, name_of = condition(df, "user.id = 3 and cast(get_json_object(payload, '$.a') as double) > 1")
    node = translate(expr, name_of, keys, "America/New_York", True)
    found = [n for n in _walk(node) if isinstance(n, Sketched)]
    assert {n.key for n in found} >= keys - {sketch_key(df, "get_json_object(payload, '$.a')")}
    cast = next(n for n in found if n.type == "double")
    assert isinstance(cast.guard, Cast) and cast.guard.from_type == "string" and cast.ansi
    assert isinstance(cast.guard.child, Sketched)
    assert next(n for n in found if n.type == "integer").guard is None


def _walk(node):
    yield node
    for value in vars(node).values():
        for child in value if isinstance(value, tuple) else (value,):
            if hasattr(child, "__dataclass_fields__"):
                yield from _walk(child)


# --- shapes ----------------------------------------------------------------------------------
def test_filter_conditions_translate_to_ir(df):
    L, S, TS, DT = (Sketched(f'col("{c}")', t) for c, t in
                    (("l", "long"), ("s", "string"), ("ts", "timestamp"), ("dt", "date")))
    assert ir_of(df, "l = 5") == And(IsNotNull(L), Cmp("=", L, Lit(5, "long")))
    assert ir_of(df, "l in (1, 2, null)") == In(L, (Lit(1, "long"), Lit(2, "long"), Lit(None, "long")))
    assert ir_of(df, "s like 'ab%'") == And(IsNotNull(S), StartsWith(S, Lit("ab", "string")))
    assert ir_of(df, "not (l = 5)") == And(IsNotNull(L), Not(Cmp("=", L, Lit(5, "long"))))
    assert ir_of(df, "l + 1 > 5").right == Cmp(">", Arith("+", L, Lit(1, "long"), "long", True), Lit(5, "long"))
    assert ir_of(df, "year(ts) = 2024").right == Cmp(
        "=", Func("year", Cast(TS, "timestamp", "date", "America/New_York", False), "integer"),
        Lit(2024, "integer"))
    assert ir_of(df, "date_trunc('HOUR', ts) = timestamp'2024-06-01 10:00:00'") == Cmp(
        "=", Func("trunc_timestamp", TS, "timestamp", "hour", "America/New_York"),
        Lit(V.parse_literal("2024-06-01 10:00:00", "timestamp", "America/New_York"), "timestamp"))
    assert ir_of(df, "trunc(dt, 'MM') = date'2024-01-01'") == Cmp(
        "=", Func("trunc_date", DT, "date", "month"), Lit(19723, "date"))
    assert ir_of(df, "month(dt) = 1").right.left == Func("month", DT, "integer")
    # not modelled: unknown, but they cannot raise
    assert ir_of(df, "upper(s) = 'X'").right == Cmp("=", Unknown("string", False, (S,)), Lit("X", "string"))
    inset = ir_of(df, "l in (1,2,3,4,5,6,7,8,9,10,11,12)")
    assert isinstance(inset, Unknown) and not inset.raises
    # a local time that happens twice in New York is not guessed
    ambiguous = ir_of(df, "ts = timestamp'2024-11-03 01:30:00'")
    assert ambiguous.right.right == Unknown("timestamp", False)
    # ANSI arithmetic and casts of unsketched columns may raise
    assert ir_of(df, "i + 1 > 5", sketches=()).right.left == Arith(
        "+", Unknown("integer", False), Lit(1, "integer"), "integer", True)
    assert ir_of(df, "i / 2 > 5", sketches=()).right.left.raises
    # sizes, maxima and map lookups never raise: their sketches need no guard, and unsketched
    # they cannot raise either; element access by index can (under ANSI)
    size = ir_of(df, "size(arr) > 2", sketches=("size(arr)",))
    assert size == Cmp(">", Sketched(sketch_key(df, "size(arr)"), "integer"), Lit(2, "integer"))
    assert ir_of(df, "m['a'] = 1", sketches=("m['a']",)).right.left.guard is None
    assert not ir_of(df, "array_contains(arr, 3)", sketches=()).right.raises
    assert ir_of(df, "element_at(arr, 3) = 1", sketches=()).right.left.raises


def test_literals_match_spark_internal_values(spark, df):
    with session_conf(spark, **{"spark.sql.session.timeZone": "America/New_York"}):
        cases = [("ts", "timestamp'1500-06-01 12:00:00'", "unix_micros"),
                 ("ts", "timestamp'2024-03-10 03:30:00.000001'", "unix_micros"),
                 ("dt", "date'0001-01-01'", "unix_date"), ("dt", "date'1000-01-01'", "unix_date")]
        for column, text, fn in cases:
            expr, _ = condition(df, f"{column} = {text}")
            literal = expr.children[1].children[1]
            value = V.parse_literal(literal.fields["value"], literal.fields["dataType"], "America/New_York")
            assert value == spark.sql(f"select {fn}({text}) v").collect()[0].v
        expr, _ = condition(df, "f = float(0.1)")
        literal = expr.children[1].children[1]
        assert V.parse_literal(literal.fields["value"], "float", "UTC") == \
            spark.sql("select cast(float(0.1) as double) v").collect()[0].v
        expr, _ = condition(df.selectExpr("cast(ts as timestamp_ntz) n"), "n = timestamp_ntz'1960-01-01 00:00:00.5'")
        literal = expr.children[1].children[1]
        assert V.parse_literal(literal.fields["value"], "timestamp_ntz", "UTC") == -315619200000000 + 500000


# --- end to end ------------------------------------------------------------------------------
PREDICATES = [
    "l = 2", "l = 50", "l > 4", "l < 0", "l between 2 and 3", "l in (7, 8, 100)", "l in (1, null)",
    "not (l in (1, 2, 3, 5))", "l is null", "l <=> null", "l + 1 > 104", "l * 2 = 6",
    "cast(l as int) = 3", "i = 21", "d = double('NaN')", "d > 1e300", "d = 0.0", "d < -2",
    "f = float(-0.0)", "dec = 2.25", "dec > 100", "s like 'ap%'", "s like 'zz%'", "s = ''",
    "s > 'y'", "s < 'b'", "dt = date'2024-01-02'", "year(dt) = 2023", "month(dt) = 6",
    "year(ts) = 2024", "date_trunc('DAY', ts) = timestamp'2024-11-03 00:00:00'",
    "date_trunc('HOUR', ts) = timestamp'2024-11-03 01:00:00'", "ts < timestamp'2024-01-01 00:00:00'",
    "to_date(ts) = date'2024-11-03'", "b", "not b", "b is null", "user.id = 7", "user.id is null",
    "user.name like 'a%'", "user.inner.z = 9", "get_json_object(payload, '$.a') = '7'",
    "cast(get_json_object(payload, '$.a') as double) > 5", "l = 2 or s = 'zebra'",
    "not (l > 1 and d < 0)", "upper(s) = 'APPLE' and l = 100", "l = 100 and i / 0 = 1",
    "size(arr) > 3", "size(arr) = 0", "size(arr) is null", "array_max(arr) >= 10",
    "array_max(arr) < 3", "m['a'] = 5", "m['a'] is null", "m['b'] = 1 and l = 5",
    "array_contains(arr, 12) and l > 4", "element_at(arr, 3) = 12 and l = 1",
]


def _stats(spark, path, keys):
    """Statistics of every sketch over one file, from the values Spark computes."""
    df = spark.read.parquet(path)
    columns = {}
    rows = df.count()
    for text, key in keys.items():
        t = json.loads(df.select(F.expr(text)).schema[0].dataType.json())
        wrap = {"timestamp": "unix_micros", "date": "unix_date"}.get(t)
        got = df.select(F.expr(f"{wrap}({text})" if wrap else text).alias("v")).collect()
        values = [r.v if wrap else V.from_python(r.v, t) for r in got]
        present = [v for v in values if v is not None]
        by_key = {V.order_key(v, t): V.normalize(v, t) for v in present}
        lo = min(present, key=lambda v: V.order_key(v, t)) if present else None
        hi = max(present, key=lambda v: V.order_key(v, t)) if present else None
        if t == "string" and present:
            lo, hi = V.truncate_lower(lo, 2), V.truncate_upper(hi, 2)
        bloom = BloomFilter(capacity=50, error_rate=0.01)
        for v in by_key.values():
            bloom.add(V.bloom_key(v, t))
        columns[key] = ColumnStats(t, lo, hi, len(values) - len(present),
                                   frozenset(by_key.values()) if len(by_key) <= 2 else None, bloom)
    return FileStats(rows, columns)


def test_may_match_agrees_with_spark(spark, files, df):
    keys = {text: sketch_key(df, text) for text in SKETCHES}
    with session_conf(spark, **{"spark.sql.session.timeZone": "America/New_York",
                                "spark.sql.ansi.enabled": "true"}):
        stats = [_stats(spark, path, keys) for path in files]
        pruned = 0
        for cond in PREDICATES:
            expr, name_of = condition(df, cond)
            node = translate(expr, name_of, set(keys.values()), "America/New_York", True)
            for path, file_stats in zip(files, stats):
                try:
                    matches = spark.read.parquet(path).where(cond).count() > 0
                except SPARK_ERRORS:  # an ANSI error on some row: the file must be kept
                    matches = True
                keep = may_match(node, file_stats)
                assert keep or not matches, f"{cond!r} pruned {path} where Spark finds rows"
                pruned += not keep
    assert pruned >= len(PREDICATES) // 2, pruned


def test_ansi_errors_keep_files(spark, files, df):
    keys = {text: sketch_key(df, text) for text in SKETCHES}
    with session_conf(spark, **{"spark.sql.session.timeZone": "America/New_York",
                                "spark.sql.ansi.enabled": "true"}):
        stats = _stats(spark, files[0], keys)
        cond = "cast(get_json_object(payload, '$.a') as double) > 1000"
        with pytest.raises(SPARK_ERRORS):
            spark.read.parquet(files[0]).where(cond).count()
        expr, name_of = condition(df, cond)
        assert may_match(translate(expr, name_of, set(keys.values()), "America/New_York", True), stats)
