"""Bloom filters of format 2 (indexes/skipping/bloom.py): a literal hashed in Python exactly as
Spark's xxhash64 hashed the column's values at build time, for every sketchable type; filters
hold what was added; format 1 (pybloom_live) filters are still read."""
from __future__ import annotations

import math
from datetime import date, datetime
from decimal import Decimal

import numpy as np
import pytest

from indexes.skipping import bloom as B
from indexes.skipping import values as V

_SAMPLES = {
    "byte": [0, 1, -1, 127, -128],
    "short": [0, 300, -32768, 32767],
    "integer": [0, 1, -1, 2**31 - 1, -2**31, 123456],
    "long": [0, 1, -1, 2**63 - 1, -2**63, 9876543210],
    "boolean": [True, False],
    "float": [0.0, -0.0, 1.5, -2.25, float("nan"), float("inf"), 3.4028234663852886e38],
    "double": [0.0, -0.0, 0.1, -1e300, float("nan"), float("-inf"), 5e-324],
    "decimal(10,2)": [Decimal("0"), Decimal("1.50"), Decimal("-12345678.99"), Decimal("0.01")],
    "decimal(38,10)": [Decimal("0"), Decimal("-1"), Decimal("1.5"), Decimal("-0.0000000001"),
                       Decimal("1234567890123456789012345678.0123456789"), Decimal("-128"),
                       Decimal("127"), Decimal("-0.0000000128")],
    "string": ["", "a", "héllo wörld", "x" * 31, "y" * 32, "z" * 100, "日本語のテキスト" * 5],
    "binary": [b"", b"\x00", b"\xff\x01" * 20],
    "date": [0, -1, 18262, -719162, 2932896],
    "timestamp": [0, -1, 1_600_000_000_123_456, -62_135_596_800_000_000],
    "timestamp_ntz": [0, 1_600_000_000_123_456],
}


def _sql_literal(value, type_):
    if type_ == "boolean":
        return "true" if value else "false"
    if type_ in ("float", "double"):
        text = "NaN" if math.isnan(value) else repr(value).replace("inf", "Infinity")
        return f"CAST('{text}' AS {type_.upper()})"
    if type_ == "string":
        return "'" + value.replace("'", "''") + "'"
    if type_ == "binary":
        return f"X'{value.hex()}'"
    if type_ == "date":
        return f"DATE_ADD(DATE'1970-01-01', {value})"
    if type_ in ("timestamp", "timestamp_ntz"):
        kind = "TIMESTAMP_NTZ" if type_ == "timestamp_ntz" else "TIMESTAMP"
        return f"CAST(TIMESTAMP_MICROS({value}) AS {kind})"
    if type_.startswith("decimal"):
        return f"CAST('{value}' AS {type_.upper()})"
    return f"CAST({value} AS {'INT' if type_ == 'integer' else type_.upper()})"


def test_python_hash_equals_sparks_xxhash64_for_every_type(spark):
    cases = [(t, v) for t, vs in _SAMPLES.items() for v in vs]
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    exprs = [B.hash_expression(_sql_literal(v, t), t) for t, v in cases]
    row = spark.sql("SELECT " + ", ".join(f"{e} AS h{i}" for i, e in enumerate(exprs))).collect()[0]
    for i, (t, v) in enumerate(cases):
        assert B.value_hash(v, t) == row[f"h{i}"] & ((1 << 64) - 1), (t, v)
    assert spark.sql(f"SELECT {B.hash_expression('CAST(NULL AS INT)', 'integer')} AS h") \
        .collect()[0]["h"] is None


def test_values_no_filter_of_the_type_holds_and_values_of_unknown_hash():
    assert B.value_hash(Decimal("1.005"), "decimal(10,2)") is None      # more digits than the scale
    assert B.value_hash(Decimal("1e10"), "decimal(10,2)") is None       # past the precision
    assert B.value_hash(128, "byte") is None
    assert B.value_hash(0.1, "float") is None                          # not a float32
    assert B.value_hash(Decimal("1.50"), "decimal(12,4)") == B.value_hash(Decimal("1.5"), "decimal(12,4)")
    assert B.value_hash("\ud800", "string") == B.UNKNOWN
    bloom = B.HashBloom.of_hashes(np.array([], np.uint64), 10, 0.01)
    assert bloom.may_hold("\ud800", "string")                          # unknown: maybe
    assert not bloom.may_hold(Decimal("1.005"), "decimal(10,2)")


def test_a_filter_holds_every_value_added_and_few_others():
    values = [f"trace-{i}" for i in range(5000)]
    hashes = np.unique(np.array([B.value_hash(v, "string") for v in values], np.uint64))
    bloom = B.from_bytes(B.to_bytes(B.HashBloom.of_hashes(hashes, 5000, 0.01)))
    assert isinstance(bloom, B.HashBloom) and bloom.count == 5000
    assert all(B.may_hold(bloom, v, "string") for v in values)
    others = sum(B.may_hold(bloom, f"other-{i}", "string") for i in range(20000))
    assert others < 20000 * 0.02                                       # fpp 1%, with margin
    head = B.to_bytes(bloom)[:B.HEADER]
    assert all(all(bloom.bits[p >> 3] >> (p & 7) & 1 for p in B.positions(head, v, "string"))
               for v in values[:100])


def test_format_1_filters_are_still_read_and_answer_as_before():
    from pybloom_live import BloomFilter

    old = BloomFilter(capacity=100, error_rate=0.01)
    for d in (Decimal("1.50"), Decimal("2")):
        old.add(V.bloom_key(d, "decimal(10,2)"))
    read = B.from_bytes(B.to_bytes(old))
    assert not B.is_hash_bloom(B.to_bytes(old))
    assert B.may_hold(read, Decimal("1.5"), "decimal(10,2)")
    assert B.may_hold(read, Decimal("2.00"), "decimal(10,2)")
    head = B.to_bytes(old)[:B.HEADER]
    bits = np.frombuffer(B.to_bytes(old)[B.HEADER:], np.uint8)
    assert all(bits[p >> 3] >> (p & 7) & 1 for p in B.positions(head, Decimal("1.5"), "decimal(10,2)"))
