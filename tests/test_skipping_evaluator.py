"""Soundness of the pruning evaluator, without a JVM.

The property test draws random files (one or two columns of internal values with nulls and the
awkward values: NaN, ±0.0, ±inf, Long extremes, astral-plane and empty strings, timestamps next
to DST changes), builds their statistics as the index does (truncated string bounds, missing
pieces, value lists when small, Bloom filters), draws random filters from the IR's grammar and
checks: whenever ``may_match`` says a file can be skipped, a reference row evaluator (SQL
three-valued logic, Spark's float order, errors in ANSI mode, java.time's rules for local
times) finds no row on which the filter is true or raises.
"""
from __future__ import annotations

import math
import random
import struct
import time
from datetime import date, datetime, timedelta, timezone
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from zoneinfo import ZoneInfo

import pytest
from pybloom_live import BloomFilter

from indexes.plan import Expr
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
    IsNull,
    Lit,
    Not,
    Or,
    Sketched,
    StartsWith,
    Unknown,
    node_type,
    translate,
)
from indexes.skipping.stats import ColumnStats, FileStats

LONG_MIN, LONG_MAX = -(2 ** 63), 2 ** 63 - 1
DAY = 86_400_000_000
HOUR = 3_600_000_000
US = timedelta(microseconds=1)
EPOCH = datetime(1970, 1, 1)
UTC_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
ZONES = ["UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kolkata",
         "America/Sao_Paulo", "+05:30"]


# --- the reference: one row at a time --------------------------------------------------------
class RowError(Exception):
    """What Spark would raise on this row."""


class Unverifiable(Exception):
    """The reference cannot compute this row (outside Python's calendar)."""


def skey(v):
    """Spark's order: NaN above everything and equal to itself; -0.0 == 0.0."""
    return (1, 0.0) if isinstance(v, float) and math.isnan(v) else (0, v)


def zone_of(tz):
    return timezone(timedelta(hours=5, minutes=30)) if tz == "+05:30" else ZoneInfo(tz)


def local_of(t, z):
    return (UTC_EPOCH + t * US).astimezone(z)


def micros_of(naive):
    return (naive - EPOCH) // US


def resolve(local, z, preferred=None):
    """java.time: a local time to an instant (the preferred offset if valid, else the earlier
    one; a time in a gap moves later by the gap)."""
    valid = []
    for fold in (0, 1):
        offset = local.replace(tzinfo=z, fold=fold).utcoffset()
        if local_of(micros_of(local - offset), z).replace(tzinfo=None) == local:
            valid.append(offset)
    if not valid:
        return micros_of(local - local.replace(tzinfo=z, fold=0).utcoffset())
    return micros_of(local - (preferred if preferred in valid else max(valid)))


def nearest_float32(q: Fraction) -> float:
    f = V.to_float32(float(q))
    candidates = [f, V.float32_step(f, False), V.float32_step(f, True)]
    return min((c for c in candidates if math.isfinite(c)),
               key=lambda c: (abs(Fraction(c) - q), struct.unpack("<i", struct.pack("<f", c))[0] & 1))


def f32(x: float) -> float:
    try:
        return V.to_float32(x)
    except OverflowError:
        return math.copysign(math.inf, x)


def trunc_date(d: date, unit: str) -> date:
    if unit == "week":
        return d - timedelta(days=d.weekday())
    if unit == "month":
        return d.replace(day=1)
    if unit == "quarter":
        return d.replace(month=d.month - (d.month - 1) % 3, day=1)
    return d.replace(month=1, day=1)


class Reference:
    """Evaluates IR nodes on one row (a dict key → internal value) as Spark would."""

    def __init__(self, rng, pools, try_semantics):
        self.rng, self.pools, self.try_semantics = rng, pools, try_semantics

    def overflow(self, ansi, wrapped):
        if ansi:
            raise RowError("overflow")
        return None if self.try_semantics else wrapped

    def ev(self, node, row):
        kind = type(node)
        if kind is Sketched:
            return row[node.key]
        if kind is Lit:
            return node.value
        if kind is Unknown:
            for a in node.args:
                self.ev(a, row)
            if node.raises:
                raise RowError("unknown")
            return self.rng.choice(self.pools.get(node.type, []) + [None])
        if kind is Cmp:
            if node.op == "<=>":
                a, b = self.ev(node.left, row), self.ev(node.right, row)
                return a is None and b is None if a is None or b is None else skey(a) == skey(b)
            a = self.ev(node.left, row)
            if a is None:
                return None
            b = self.ev(node.right, row)
            if b is None:
                return None
            ka, kb = skey(a), skey(b)
            return {"=": ka == kb, "<": ka < kb, "<=": ka <= kb, ">": ka > kb, ">=": ka >= kb}[node.op]
        if kind is And:
            a = self.ev(node.left, row)
            if a is False:
                return False
            b = self.ev(node.right, row)
            return False if b is False else (None if a is None or b is None else True)
        if kind is Or:
            a = self.ev(node.left, row)
            if a is True:
                return True
            b = self.ev(node.right, row)
            return True if b is True else (None if a is None or b is None else False)
        if kind is Not:
            a = self.ev(node.child, row)
            return None if a is None else not a
        if kind is In:
            v = self.ev(node.value, row)
            if v is None:
                return None
            has_null = False
            for item in node.items:
                x = self.ev(item, row)
                if x is None:
                    has_null = True
                elif skey(x) == skey(v):
                    return True
            return None if has_null else False
        if kind in (IsNull, IsNotNull):
            return (self.ev(node.child, row) is None) == (kind is IsNull)
        if kind is StartsWith:
            a = self.ev(node.child, row)
            if a is None:
                return None
            p = self.ev(node.prefix, row)
            return None if p is None else a.startswith(p)
        if kind is Cast:
            x = self.ev(node.child, row)
            return None if x is None else self.cast(x, node)
        if kind is Arith:
            a = self.ev(node.left, row)
            if a is None:
                return None
            b = self.ev(node.right, row)
            return None if b is None else self.arith(a, b, node)
        if kind is Func:
            x = self.ev(node.child, row)
            return None if x is None else self.func(x, node)
        raise AssertionError(node)

    def cast(self, x, node):
        src, dst, ansi = node.from_type, node.to_type, node.ansi
        if src == dst:
            return x
        if src == "boolean":
            x, src = int(x), "long"
        if V.integral_range(src):
            if V.integral_range(dst):
                lo, hi = V.integral_range(dst)
                bits = {"byte": 8, "short": 16, "integer": 32, "long": 64}[dst]
                wrapped = (x - lo) % (1 << bits) + lo
                return x if lo <= x <= hi else self.overflow(ansi, wrapped)
            if dst == "double":
                return float(x)
            if dst == "float":
                return nearest_float32(Fraction(x))
            precision, scale = V.decimal_type(dst)
            return Decimal(x) if abs(x) < 10 ** (precision - scale) else self.overflow(ansi, None)
        if src == "float" and dst == "double":
            return x
        if src == "double" and dst == "float":
            return f32(x)
        if V.decimal_type(src):
            _, scale = V.decimal_type(src)
            as_double = float(int(x.scaleb(scale))) / float(10 ** scale)   # Decimal.toDouble
            if dst == "double":
                return as_double
            if dst == "float":
                return f32(as_double)
            precision, scale2 = V.decimal_type(dst)
            q = x.quantize(Decimal(1).scaleb(-scale2), rounding=ROUND_HALF_UP)
            return q if abs(q) < 10 ** (precision - scale2) else self.overflow(ansi, None)
        z = zone_of(node.tz)
        if src == "date":
            return x * DAY if dst == "timestamp_ntz" else resolve(EPOCH + x * DAY * US, z)
        if src == "timestamp_ntz":
            return x // DAY if dst == "date" else resolve(EPOCH + x * US, z)
        local = local_of(x, z).replace(tzinfo=None)
        return (local.date() - V.EPOCH_DATE).days if dst == "date" else micros_of(local)

    def arith(self, a, b, node):
        op, t = node.op, node.type
        r = a + b if op == "+" else a - b if op == "-" else a * b
        if V.integral_range(t):
            lo, hi = V.integral_range(t)
            return r if lo <= r <= hi else self.overflow(node.ansi, (r - lo) % (hi - lo + 1) + lo)
        return f32(r) if t == "float" else r

    def func(self, x, node):
        if node.name in ("year", "month", "trunc_date"):
            d = V.EPOCH_DATE + timedelta(days=x)
            if node.name == "trunc_date":
                return (trunc_date(d, node.arg) - V.EPOCH_DATE).days
            return d.year if node.name == "year" else d.month
        unit, z = node.arg, zone_of(node.tz)
        step = {"microsecond": 1, "millisecond": 1000, "second": 10 ** 6}.get(unit)
        if step:
            return x - x % step
        local = local_of(x, z)
        naive = local.replace(tzinfo=None)
        if unit in ("minute", "hour", "day"):
            keep = {"minute": {"second": 0, "microsecond": 0},
                    "hour": {"minute": 0, "second": 0, "microsecond": 0},
                    "day": {"hour": 0, "minute": 0, "second": 0, "microsecond": 0}}[unit]
            return resolve(naive.replace(**keep), z, local.utcoffset())
        start = trunc_date(naive.date(), unit)
        return resolve(datetime(start.year, start.month, start.day), z)

    def filter(self, node, row):
        """True/False/None, RowError, or Unverifiable."""
        try:
            return self.ev(node, row)
        except (OverflowError, ValueError) as e:
            raise Unverifiable(str(e)) from None


# --- random data -----------------------------------------------------------------------------
TYPES = ["long", "integer", "short", "double", "float", "decimal(10,2)", "string", "date",
         "timestamp", "timestamp_ntz", "boolean", "binary"]
TOKENS = ["", "a", "b", "ab", "z", "é", "😀", "\U0010ffff", "\ue000", "\ud7ff", "0", " ", "a\U0010ffff"]
INSTANTS = [0, 1704067200 * 10 ** 6, 1710054000 * 10 ** 6, 1730613600 * 10 ** 6,
            1711846800 * 10 ** 6, 1729990800 * 10 ** 6, 1712415600 * 10 ** 6,
            1541300400 * 10 ** 6, 1550282400 * 10 ** 6, -2208988800 * 10 ** 6]
DATES = [0, 19722, 19723, 19782, 17839, 17943, 19792, 20030, 20023, -719162, 2932896, 10957]
FLOAT_EDGES = [math.nan, math.inf, -math.inf, -0.0, 0.0, 1.7976931348623157e308, 5e-324, -1e300]


def fresh(t, rng, anchor):
    """A random internal value of type t, near ``anchor`` or at an edge."""
    edge = rng.random() < 0.15
    if V.integral_range(t):
        lo, hi = V.integral_range(t)
        if edge:
            return rng.choice([lo, hi, lo + 1, hi - 1, 0, -1])
        return max(lo, min(hi, int(anchor) + rng.randint(-4, 4)))
    if V.is_floating(t):
        x = rng.choice(FLOAT_EDGES) if edge else float(anchor) + rng.choice([-2, -1, -0.5, 0, 0.25, 1, 3])
        return f32(x) if t == "float" else x
    if V.decimal_type(t):
        precision, scale = V.decimal_type(t)
        top = 10 ** precision - 1
        unscaled = rng.choice([top, -top, 0]) if edge else max(-top, min(top, int(anchor) + rng.randint(-300, 300)))
        return Decimal(unscaled).scaleb(-scale)
    if t == "string":
        s = "".join(rng.choice(TOKENS) for _ in range(rng.randint(0, 4)))
        return s * 20 if rng.random() < 0.05 else s
    if t == "binary":
        return rng.choice([b"", b"\x00", b"\xff", b"a", b"ab", b"\x00\xff"])
    if t == "boolean":
        return rng.random() < 0.5
    if t == "date":
        return rng.choice(DATES) if edge else int(anchor) + rng.randint(-3, 3)
    if edge and rng.random() < 0.3:
        return rng.choice([LONG_MIN, LONG_MAX])
    unit = rng.choice([1, 10 ** 6, 60 * 10 ** 6, HOUR, DAY])
    return int(anchor) + rng.randint(-3, 3) * unit + rng.randint(0, 2) * rng.choice([1, 1000])


def anchor_of(t, rng):
    if t in ("timestamp", "timestamp_ntz"):
        return rng.choice(INSTANTS)
    if t == "date":
        return rng.choice(DATES[:-3])
    if V.decimal_type(t):
        return rng.choice([0, 1234, -99999, 5_000_000])
    return rng.choice([0, 10, -100, 1000, 2 ** 40])


def build_stats(values, t, rng):
    """ColumnStats as the index would keep them, with random pieces missing or loosened."""
    present = [v for v in values if v is not None]
    nulls = len(values) - len(present)
    lo = min(present, key=skey) if present else None
    hi = max(present, key=skey) if present else None
    if t == "string" and present:
        budget = rng.choice([1, 2, 3, 5, 8, 64])
        lo, hi = V.truncate_lower(lo, budget), V.truncate_upper(hi, budget)
    if lo is not None and rng.random() < 0.1:
        if V.integral_range(t) and lo > V.integral_range(t)[0] + 3:
            lo -= rng.randint(1, 3)
        elif t in ("date", "timestamp", "timestamp_ntz") and lo > LONG_MIN + 5:
            lo -= rng.randint(1, 5)
    distinct = {skey(V.normalize(v, t)): V.normalize(v, t) for v in present}
    stats = ColumnStats(
        t,
        None if rng.random() < 0.1 else lo,
        None if rng.random() < 0.1 else hi,
        None if rng.random() < 0.1 else nulls,
        frozenset(distinct.values()) if len(distinct) <= 6 and rng.random() < 0.35 else None,
        None)
    if present and rng.random() < 0.25:
        bloom = BloomFilter(capacity=16, error_rate=0.05)
        for v in distinct.values():
            bloom.add(V.bloom_key(v, t))
        stats = ColumnStats(stats.type, stats.min, stats.max, stats.null_count, stats.values, bloom)
    return stats


# --- random filters --------------------------------------------------------------------------
CASTS = {
    "long": ["integer", "short", "double", "float", "decimal(20,0)", "decimal(5,2)"],
    "integer": ["long", "short", "byte", "double", "float", "decimal(10,0)"],
    "short": ["long", "byte", "double"],
    "float": ["double"], "double": ["float"],
    "decimal(10,2)": ["double", "float", "decimal(12,2)", "decimal(5,1)"],
    "date": ["timestamp", "timestamp_ntz"], "timestamp": ["date", "timestamp_ntz"],
    "timestamp_ntz": ["date", "timestamp"], "boolean": ["integer", "double"],
}
ARITH_LITERALS = {"integral": [0, 1, -1, 2, -3, 1000, 2 ** 31, LONG_MAX],
                  "floating": [0.0, -0.0, 1.5, -2.0, 1e308, math.inf, math.nan]}
TS_UNITS = ["microsecond", "millisecond", "second", "minute", "hour", "day", "week", "month",
            "quarter", "year"]


class Gen:
    def __init__(self, rng, columns, rows, tz, ansi, ref):
        self.rng, self.columns, self.rows, self.tz, self.ansi, self.ref = rng, columns, rows, tz, ansi, ref

    def transform(self, node):
        rng, t = self.rng, node_type(node)
        options = []
        if t in CASTS:
            options.append("cast")
        if V.integral_range(t) or V.is_floating(t):
            options.append("arith")
        if t in ("date", "timestamp"):
            options.append("func")
        if not options:
            return node
        choice = rng.choice(options)
        if choice == "cast":
            return Cast(node, t, rng.choice(CASTS[t]), self.tz, self.ansi)
        if choice == "arith":
            values = ARITH_LITERALS["integral" if V.integral_range(t) else "floating"]
            c = rng.choice(values)
            if V.integral_range(t):
                lo, hi = V.integral_range(t)
                c = max(lo, min(hi, c))
            else:
                c = f32(c) if t == "float" else c
            lit = Lit(c, t)
            op = rng.choice("+-*")
            return Arith(op, node, lit, t, self.ansi) if rng.random() < 0.6 else Arith(op, lit, node, t, self.ansi)
        if t == "date":
            name = rng.choice(["year", "month", "trunc_date"])
            unit = rng.choice(["week", "month", "quarter", "year"]) if name == "trunc_date" else None
            return Func(name, node, "date" if name == "trunc_date" else "integer", unit)
        if rng.random() < 0.3:
            return Func("year", Cast(node, "timestamp", "date", self.tz, self.ansi), "integer")
        return Func("trunc_timestamp", node, "timestamp", rng.choice(TS_UNITS), self.tz)

    def value(self):
        rng = self.rng
        name = rng.choice(list(self.columns))
        node = Sketched(name, self.columns[name])
        if rng.random() < 0.06:
            return Unknown(self.columns[name], rng.random() < 0.5, (node,))
        for _ in range(rng.choice([0, 0, 0, 1, 1, 2])):
            node = self.transform(node)
        return node

    def results(self, node):
        out = []
        for row in self.rows:
            try:
                v = self.ref.filter(node, row)
            except (RowError, Unverifiable):
                continue
            if v is not None:
                out.append(v)
        return out

    def literal(self, node):
        rng, t = self.rng, node_type(node)
        if rng.random() < 0.05:
            return Lit(None, t)
        seen = self.results(node)
        if seen and rng.random() < 0.7:
            v = perturb(rng.choice(seen), t, rng)
        else:
            v = fresh(t, rng, anchor_of(t, rng) if not seen else seen[0])
        return Lit(v, t) if valid(v, t) else Lit(fresh(t, rng, anchor_of(t, rng)), t)

    def pred(self, depth):
        rng = self.rng
        if depth > 0 and rng.random() < 0.1:                  # Spark's IS NOT NULL guards first
            key = rng.choice(list(self.columns))
            column = Sketched(key, self.columns[key])
            guard = rng.choice([IsNotNull(column), IsNull(column), Not(IsNull(column)),
                                Or(IsNotNull(column), self.pred(0)), And(self.pred(0), IsNotNull(column))])
            return And(guard, self.pred(depth - 1))
        if depth > 0 and rng.random() < 0.45:
            kind = rng.choice(["and", "or", "not"])
            if kind == "not":
                return Not(self.pred(depth - 1))
            cls = And if kind == "and" else Or
            return cls(self.pred(depth - 1), self.pred(depth - 1))
        roll = rng.random()
        v = self.value()
        t = node_type(v)
        if roll < 0.1 and t == "string":
            seen = self.results(v)
            prefix = rng.choice(seen)[:rng.randint(0, 3)] if seen and rng.random() < 0.7 else rng.choice(TOKENS)
            return StartsWith(v, Lit(prefix, "string"))
        if roll < 0.15 and t == "boolean":
            return v
        if roll < 0.2:
            return (IsNull if rng.random() < 0.5 else IsNotNull)(v)
        if roll < 0.4:
            return In(v, tuple(self.literal(v) for _ in range(rng.randint(1, 4))))
        if roll < 0.97:
            op = rng.choice(["=", "=", "<=>", "<", "<=", ">", ">="])
            if rng.random() < 0.1:
                same = [n for n, ct in self.columns.items() if ct == t]
                if same:
                    return Cmp(op, v, Sketched(rng.choice(same), t))
            lit = self.literal(v)
            return Cmp(op, v, lit) if rng.random() < 0.7 else Cmp(op, lit, v)
        return rng.choice([Lit(True, "boolean"), Lit(False, "boolean"), Lit(None, "boolean"),
                           Unknown("boolean", rng.random() < 0.3, (v,))])


def valid(v, t):
    if V.integral_range(t):
        lo, hi = V.integral_range(t)
        return lo <= v <= hi
    if V.decimal_type(t):
        precision, scale = V.decimal_type(t)
        return -v.as_tuple().exponent <= scale and abs(v) < 10 ** (precision - scale)
    if t == "string":
        return isinstance(v, str)
    return True


def perturb(v, t, rng):
    if rng.random() < 0.4:
        return v
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return v + rng.choice([-1, 1])
    if isinstance(v, float):
        if not math.isfinite(v):
            return v
        step = V.float32_step(v, rng.random() < 0.5) if t == "float" else math.nextafter(v, rng.choice([-math.inf, math.inf]))
        return rng.choice([step, -v, v + 1])
    if isinstance(v, Decimal):
        return v + rng.choice([-1, 1]) * Decimal(1).scaleb(v.as_tuple().exponent)
    if isinstance(v, str):
        if v and rng.random() < 0.5:
            return v[:rng.randint(0, len(v) - 1)]
        return v + rng.choice(TOKENS)
    return v


# --- the property ----------------------------------------------------------------------------
def one_case(rng):
    types = [rng.choice(TYPES)]
    if rng.random() < 0.4:
        types.append(types[0] if rng.random() < 0.5 else rng.choice(TYPES))
    columns = {f'col("c{i}")': t for i, t in enumerate(types)}
    n = rng.choice([0] + [rng.randint(1, 8)] * 30)
    null_rate = rng.choice([0.0, 0.0, 0.2, 0.6, 1.0])
    data = {}
    for key, t in columns.items():
        anchor = anchor_of(t, rng)
        pool = [fresh(t, rng, anchor) for _ in range(rng.randint(1, 5))]
        data[key] = [None if rng.random() < null_rate else rng.choice(pool) for _ in range(n)]
    rows = [{k: data[k][i] for k in columns} for i in range(n)]
    stats = FileStats(None if rng.random() < 0.05 else n,
                      {k: build_stats(data[k], t, rng) for k, t in columns.items() if rng.random() > 0.08})
    pools = {}
    for k, t in columns.items():
        pools.setdefault(t, []).extend(v for v in data[k] if v is not None)
    ansi = rng.random() < 0.6
    ref = Reference(rng, pools, try_semantics=rng.random() < 0.5)
    gen = Gen(rng, columns, rows, rng.choice(ZONES), ansi, ref)
    return gen.pred(rng.choice([0, 1, 2, 3])), stats, rows, ref


def check(pred, stats, rows, ref):
    """'pruned', 'kept' or 'unverifiable'; fails when a pruned file has a true or failing row."""
    if may_match(pred, stats):
        return "kept"
    verdict = "pruned"
    for row in rows:
        try:
            result = ref.filter(pred, row)
        except RowError as e:
            pytest.fail(f"pruned but row {row} raises ({e}):\n{pred}\n{stats}")
        except Unverifiable:
            verdict = "unverifiable"
            continue
        assert result is not True, f"pruned but row {row} matches:\n{pred}\n{stats}"
    return verdict


def test_pruning_is_sound_on_random_files_and_filters():
    rng = random.Random(20240611)
    started = time.monotonic()
    counts = {"pruned": 0, "kept": 0, "unverifiable": 0}
    for _ in range(20_000):
        counts[check(*one_case(rng))] += 1
    elapsed = time.monotonic() - started
    total = sum(counts.values())
    assert total >= 10_000
    assert counts["pruned"] > 0.2 * total, counts          # the test cannot pass by never pruning
    assert counts["unverifiable"] < 0.02 * total, counts
    assert elapsed < 30, elapsed


# --- focused cases ---------------------------------------------------------------------------
X = Sketched('col("x")', "long")
D = Sketched('col("d")', "double")
S = Sketched('col("s")', "string")
TS = Sketched('col("ts")', "timestamp")


def file(key, t, rows=10, **kw):
    return FileStats(rows, {key: ColumnStats(t, **kw)})


def lit(v, t="long"):
    return Lit(v, t)


def test_equality_outside_min_max_is_pruned():
    assert not may_match(Cmp("=", X, lit(1)), file('col("x")', "long", min=0, max=0, null_count=0))
    assert may_match(Cmp("=", X, lit(0)), file('col("x")', "long", min=0, max=0, null_count=0))
    assert not may_match(Cmp(">", X, lit(5)), file('col("x")', "long", min=0, max=5, null_count=3))
    assert may_match(Cmp(">", X, lit(5)), file('col("x")', "long", min=0, max=None))


def test_no_rows_no_match_and_unknown_stats_keep():
    assert not may_match(Lit(True, "boolean"), FileStats(0, {}))
    assert may_match(Cmp("=", X, lit(1)), FileStats(None, {}))
    assert may_match(Cmp("=", X, lit(1)), file('col("x")', "integer", min=0, max=0))  # type differs


def test_not_equal_with_value_list():
    stats = file('col("x")', "long", values=frozenset({5}), null_count=0)
    assert not may_match(Not(Cmp("=", X, lit(5))), stats)
    assert not may_match(Not(Cmp("=", X, lit(5))), file('col("x")', "long", values=frozenset({5}), null_count=4))
    assert may_match(Not(Cmp("=", X, lit(6))), stats)
    assert not may_match(Not(In(X, (lit(1), lit(2), lit(3)))), file('col("x")', "long", min=1, max=3, null_count=0))
    # NOT IN with a null in the list is never true
    assert not may_match(Not(In(X, (lit(9), lit(None)))), file('col("x")', "long", min=1, max=3, null_count=0))
    assert may_match(In(X, (lit(9), lit(2))), file('col("x")', "long", min=1, max=3, null_count=0))


def test_null_tests_and_null_safe_equality():
    all_null = file('col("x")', "long", rows=4, null_count=4)
    assert not may_match(IsNotNull(X), all_null)
    assert may_match(IsNull(X), all_null)
    assert not may_match(Cmp("=", X, lit(1)), all_null)
    assert may_match(Cmp("<=>", X, lit(None)), all_null)
    assert not may_match(IsNull(X), file('col("x")', "long", min=1, max=3, null_count=0))
    assert not may_match(Cmp("<=>", X, lit(None)), file('col("x")', "long", min=1, max=3, null_count=0))


def test_nan_and_signed_zero():
    with_nan = file('col("d")', "double", min=0.0, max=math.nan, null_count=0)
    assert may_match(Cmp(">", D, lit(1e300, "double")), with_nan)
    assert may_match(Cmp("=", D, lit(math.nan, "double")), with_nan)
    finite = file('col("d")', "double", min=0.0, max=math.inf, null_count=0)
    assert not may_match(Cmp("=", D, lit(math.nan, "double")), finite)
    assert not may_match(Cmp(">", D, lit(math.inf, "double")), finite)
    zero = file('col("d")', "double", min=0.0, max=0.0, null_count=0)
    assert may_match(Cmp("=", D, lit(-0.0, "double")), zero)
    assert not may_match(Cmp("<", D, lit(-0.0, "double")), zero)
    bloom = BloomFilter(capacity=10, error_rate=0.01)
    bloom.add(V.bloom_key(0.0, "double"))
    assert may_match(Cmp("=", D, lit(-0.0, "double")), file('col("d")', "double", bloom=bloom))
    assert may_match(In(D, (lit(-0.0, "double"),)), file('col("d")', "double", values=frozenset({0.0})))


def test_bloom_filter_prunes_equality_and_in():
    bloom = BloomFilter(capacity=100, error_rate=0.001)
    for v in range(0, 100, 2):
        bloom.add(V.bloom_key(v, "long"))
    stats = file('col("x")', "long", min=0, max=98, bloom=bloom)
    odd = [v for v in range(1, 99, 2) if V.bloom_key(v, "long") not in bloom]
    assert not may_match(Cmp("=", X, lit(odd[0])), stats)
    assert not may_match(In(X, tuple(lit(v) for v in odd[:3])), stats)
    assert may_match(Cmp("=", X, lit(4)), stats)
    assert may_match(Not(Cmp("=", X, lit(odd[0]))), stats)


def test_string_prefixes_with_truncated_bounds():
    stats = file('col("s")', "string", min="ac", max="b", null_count=0)
    assert not may_match(StartsWith(S, lit("ab", "string")), stats)
    assert may_match(StartsWith(S, lit("ac", "string")), stats)
    assert may_match(StartsWith(S, lit("b", "string")), stats)
    assert not may_match(StartsWith(S, lit("ba", "string")), stats)
    assert not may_match(Not(StartsWith(S, lit("", "string"))), stats)
    truncated = file('col("s")', "string", min=V.truncate_lower("abcdef", 3),
                     max=V.truncate_upper("abzzzz", 3), null_count=0)
    assert may_match(StartsWith(S, lit("abc", "string")), truncated)
    assert may_match(StartsWith(S, lit("ab", "string")), truncated)
    assert not may_match(Not(StartsWith(S, lit("ab", "string"))), truncated)
    assert not may_match(StartsWith(S, lit("b", "string")), truncated)
    astral = file('col("s")', "string", min="a\U0010ffff", max="a\U0010ffff\U0010ffffz", null_count=0)
    assert may_match(StartsWith(S, lit("a\U0010ffff\U0010ffff", "string")), astral)
    assert not may_match(Not(StartsWith(S, lit("a\U0010ffff", "string"))), astral)


def test_date_trunc_and_year():
    h = 3600 * 10 ** 6
    day = 1704067200 * 10 ** 6                             # 2024-01-01 00:00 UTC
    stats = file('col("ts")', "timestamp", min=day + 10 * h + 5, max=day + 10 * h + 3000, null_count=0)
    trunc = lambda unit, tz="UTC": Func("trunc_timestamp", TS, "timestamp", unit, tz)
    assert may_match(Cmp("=", trunc("hour"), lit(day + 10 * h, "timestamp")), stats)
    assert not may_match(Cmp("=", trunc("hour"), lit(day + 11 * h, "timestamp")), stats)
    assert not may_match(Cmp("=", trunc("hour"), lit(day + 9 * h, "timestamp")), stats)
    assert may_match(Cmp("=", trunc("day", "America/New_York"), lit(day + 5 * h, "timestamp")), stats)
    assert not may_match(Cmp("=", trunc("day", "America/New_York"), lit(day, "timestamp")), stats)
    assert may_match(Cmp("=", trunc("year", "Asia/Kolkata"), lit(day - 5 * h - 30 * 60 * 10 ** 6, "timestamp")), stats)
    year = Func("year", Cast(TS, "timestamp", "date", "America/New_York", True), "integer")
    assert may_match(Cmp("=", year, lit(2024, "integer")), stats)
    assert not may_match(Cmp("=", year, lit(2023, "integer")), stats)
    # 2024-01-01 03:00 UTC is still 2023 in New York
    early = file('col("ts")', "timestamp", min=day + 3 * h, max=day + 4 * h, null_count=0)
    assert may_match(Cmp("=", year, lit(2023, "integer")), early)
    assert not may_match(Cmp("=", year, lit(2024, "integer")), early)
    # across the November DST change the New York offset varies; bounds stay sound
    fall = 1730613600 * 10 ** 6
    dst = file('col("ts")', "timestamp", min=fall - h, max=fall + h, null_count=0)
    assert may_match(Cmp("=", trunc("hour", "America/New_York"), lit(fall, "timestamp")), dst)
    month = Func("month", Sketched('col("d")', "date"), "integer")
    assert not may_match(Cmp("=", month, lit(3, "integer")), file('col("d")', "date", min=19723, max=19750, null_count=0))
    assert may_match(Cmp("=", month, lit(3, "integer")), file('col("d")', "date", min=19700, max=19800, null_count=0))


def test_casts_and_arithmetic():
    small = file('col("x")', "long", min=1, max=3, null_count=0)
    widened = Cast(X, "long", "double", "UTC", True)
    assert not may_match(Cmp(">", widened, lit(3.5, "double")), small)
    narrowed = Cast(X, "long", "integer", "UTC", True)
    assert not may_match(Cmp("=", narrowed, lit(7, "integer")), small)
    huge = file('col("x")', "long", min=1, max=LONG_MAX, null_count=0)
    assert may_match(Cmp("=", narrowed, lit(7, "integer")), huge)           # may raise
    plus = lambda ansi: Arith("+", X, lit(1), "long", ansi)
    assert not may_match(Cmp(">", plus(True), lit(4)), small)
    assert may_match(Cmp("<", plus(True), lit(0)), huge)                   # overflow raises
    assert may_match(Cmp("<", plus(False), lit(0)), huge)                  # or wraps around
    minus = Arith("-", lit(10), X, "long", True)
    assert not may_match(Cmp("<", minus, lit(7)), small)
    assert may_match(Cmp("=", minus, lit(7)), small)


def test_and_or_evaluation_order_decides_errors():
    false = Cmp("=", X, lit(1))
    raises = Unknown("boolean", True)
    stats = file('col("x")', "long", min=5, max=6, null_count=0)
    assert not may_match(And(false, raises), stats)
    assert may_match(And(raises, false), stats)
    assert may_match(Or(false, raises), stats)
    assert may_match(And(false, Unknown("boolean", False)), stats) is False
    # the right side runs on rows where the left is not false: there, IS NOT NULL holds
    with_nulls = file('col("x")', "long", min=5, max=6, null_count=2)
    assert may_match(And(false, raises), with_nulls)
    assert may_match(And(Cmp("=", X, lit(5)), raises), with_nulls)
    assert not may_match(And(IsNotNull(X), And(false, raises)), with_nulls)
    assert may_match(And(IsNull(X), And(false, raises)), with_nulls)


def test_json_cast_sketch_guard_in_ansi_mode():
    gjo = Sketched("gjo", "string")
    guard = Cast(gjo, "string", "double", "UTC", True)
    sketched = Sketched("cast_gjo", "double", guard, ansi=True)
    pred = Cmp(">", sketched, lit(10.0, "double"))

    def stats(cast_nulls, json_nulls):
        return FileStats(10, {"cast_gjo": ColumnStats("double", 0.0, 5.0, cast_nulls),
                              "gjo": ColumnStats("string", "0", "5", json_nulls)})
    assert not may_match(pred, stats(0, 0))                 # no row failed to parse
    assert not may_match(pred, stats(3, 3))                 # every null was a missing path
    assert may_match(pred, stats(4, 3))                     # one string did not parse: raises
    lenient = Sketched("cast_gjo", "double", guard, ansi=False)
    assert not may_match(Cmp(">", lenient, lit(10.0, "double")), stats(4, 3))


def test_ambiguous_timestamp_literal_is_unknown():
    attr = Expr("AttributeReference", {"name": "ts", "dataType": "timestamp", "exprId": {"id": 1}}, [])
    key = 'col("ts")'
    stats = file(key, "timestamp", min=0, max=1, null_count=0)

    def translated(text):
        literal = Expr("Literal", {"value": text, "dataType": "timestamp"}, [])
        return translate(Expr("EqualTo", {}, [attr, literal]), {1: "ts"}.get, {key}, "America/New_York", True)
    assert isinstance(translated("2024-11-03 01:30:00").right, Unknown)
    assert isinstance(translated("2024-03-10 02:30:00").right, Unknown)
    assert may_match(translated("2024-11-03 01:30:00"), stats)
    assert not may_match(translated("2024-11-03 02:30:00"), stats)


# --- values ----------------------------------------------------------------------------------
def test_order_and_keys_follow_spark_equality():
    assert V.order_key(math.nan, "double") > V.order_key(math.inf, "double")
    assert V.order_key(-0.0, "double") == V.order_key(0.0, "double")
    assert V.bloom_key(-0.0, "double") == V.bloom_key(0.0, "double")
    assert V.bloom_key(float("nan"), "float") == V.bloom_key(-math.nan, "float")
    assert V.bloom_key(Decimal("1.50"), "decimal(10,2)") == V.bloom_key(Decimal("1.5"), "decimal(10,2)")
    assert V.bloom_key(Decimal("0.00"), "decimal(4,2)") == V.bloom_key(Decimal("-0"), "decimal(4,2)")
    assert V.bloom_key(Decimal(100), "decimal(5,0)") == "100"
    assert V.normalize(-0.0, "double") == 0.0 and math.copysign(1, V.normalize(-0.0, "double")) == 1


def test_parse_literal_forms():
    p = V.parse_literal
    assert p("5", "long", "UTC") == 5 and p(None, "long", "UTC") is None
    assert p("-9223372036854775808", "long", "UTC") == LONG_MIN
    assert math.isnan(p("NaN", "double", "UTC")) and p("-Infinity", "double", "UTC") == -math.inf
    assert p("0.1", "float", "UTC") == V.to_float32(0.1) and p("1.4E-45", "float", "UTC") == 1.401298464324817e-45
    assert p("3.50", "decimal(10,2)", "UTC") == Decimal("3.5")
    assert p("2024-01-01", "date", "UTC") == 19723 and p("0001-01-01", "date", "UTC") == -719162
    assert p("2024-01-01 00:00:00.5", "timestamp", "America/New_York") == 1704085200500000
    assert p("1500-06-01 12:00:00", "timestamp", "America/New_York") == -14818662238000000   # LMT
    assert p("1704067200500000", "timestamp_ntz", "UTC") == 1704067200500000
    assert p("true", "boolean", "UTC") is True
    for text, t in [("[B@1a2b", "binary"), ("128", "byte"), ("1.234", "decimal(10,2)"),
                    ("2024-11-03 01:30:00", "timestamp"), ("+10000-01-01", "date"), ("x", "long")]:
        with pytest.raises(V.UnknownLiteral):
            p(text, t, "America/New_York")


def test_from_python():
    utc = timezone.utc
    assert V.from_python(date(1970, 1, 2), "date") == 1
    assert V.from_python(datetime(1970, 1, 1, 0, 0, 1, tzinfo=utc), "timestamp") == 10 ** 6
    assert V.from_python(datetime(1970, 1, 1, 1, tzinfo=timezone(timedelta(hours=1))), "timestamp") == 0
    assert V.from_python(datetime(1970, 1, 1, 0, 0, 0, 5), "timestamp_ntz") == 5
    assert V.from_python(Decimal("1.50"), "decimal(10,2)") == Decimal("1.5")
    assert V.from_python(bytearray(b"ab"), "binary") == b"ab"
    assert V.from_python(None, "long") is None


def test_string_bounds_stay_bounds():
    rng = random.Random(7)
    for _ in range(3000):
        s = "".join(rng.choice(TOKENS + ["\x7f", "\u07ff", "\uffff"]) for _ in range(rng.randint(0, 6)))
        budget = rng.randint(0, 10)
        lower, upper = V.truncate_lower(s, budget), V.truncate_upper(s, budget)
        assert s.startswith(lower) and len(lower.encode("utf-8", "surrogatepass")) <= budget
        if upper is not None:
            assert upper >= s and len(upper.encode("utf-8", "surrogatepass")) <= budget
        else:
            assert s.rstrip("\U0010ffff") == "" or len(s.encode("utf-8", "surrogatepass")) > budget
    assert V.truncate_upper("\U0010ffff\U0010ffff", 4) is None
    assert V.truncate_upper("ab\U0010ffffc", 6) == "ac"
    assert V.truncate_upper("a\ud7ffb", 4) == "a\ue000"


def test_offsets_cover_every_instant():
    rng = random.Random(3)
    for tz in ZONES[1:]:
        z = zone_of(tz)
        for _ in range(500):
            t = rng.randint(-3 * 10 ** 9, 3 * 10 ** 9) * 10 ** 6
            offset = local_of(t, z).utcoffset() // US
            least, most = V.offset_range(tz, t, t + rng.choice([0, HOUR, 90 * DAY]))
            assert least <= offset <= most
        assert V.offset_range(tz, 1704067200 * 10 ** 6, 1704067200 * 10 ** 6)[0] == \
            local_of(1704067200 * 10 ** 6, z).utcoffset() // US
