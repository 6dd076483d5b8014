"""Bloom filters of format 2 (indexes/skipping/bloom.py): a literal hashed in Python exactly as
Spark's xxhash64 hashed the column's values at build time, for every sketchable type; filters
hold what was added; format 1 (pybloom_live) filters are still read."""
from __future__ import annotations

import math
from decimal import Decimal

import numpy as np

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


# --- end to end ----------------------------------------------------------------------------
_COLUMNS = {"l": "long", "s": "string", "d": "decimal(12,2)", "dt": "date", "x": "double"}


def _source(spark, path, files=4, start=0):
    """``files`` Parquet files of 40 rows, file f holding l in [100 f, 100 f + 40) and the
    other columns derived from l (one row of each file null)."""
    df = spark.range(start * 100, (start + files) * 100).where("id % 100 < 40").selectExpr(
        "IF(id % 100 = 7, NULL, id) AS l").selectExpr(
        "l", "concat('v-', l) AS s", "CAST(l / 4 AS DECIMAL(12,2)) AS d",
        "date_add(DATE'2000-01-01', CAST(l AS INT)) AS dt", "CAST(l AS DOUBLE) / 8 AS x")
    df.repartitionByRange(files, "l").write.mode("append").parquet(path)


def _stats_files(system_path, name):
    import glob

    return sorted(glob.glob(f"{system_path}/{name}/v__=*/stats/*.parquet"))


def _file_values(path):
    """Each source file's distinct non-null values per column, in internal form."""
    import glob

    import pyarrow.parquet as pq

    out = {}
    for f in glob.glob(f"{path}/*.parquet"):
        table = pq.read_table(f)
        out[f] = {c: {V.from_python(v, t) for v in table.column(c).to_pylist() if v is not None}
                  for c, t in _COLUMNS.items()}
    return out


def _filters(system_path, name):
    """The stored filters of every file of the newest version, per column (by file name)."""
    import os

    import pyarrow.parquet as pq

    parts = _stats_files(system_path, name)
    newest = max(p.split("/v__=")[1].split("/")[0] for p in parts)
    out = {}
    for p in [p for p in parts if f"/v__={newest}/" in p]:
        t = pq.read_table(p).to_pylist()
        for row in t:
            if row["row_group"] is None:
                out[os.path.basename(row["file"])] = [row[f"s{i}_bloom"] for i in range(len(_COLUMNS))]
    return out


def _as_legacy(system_path, name, values):
    """Rewrites the index as the code before format 2 wrote it: its filters (pybloom_live
    over V.bloom_key of each distinct value, capacity and rate as configured), its log entries
    without ``bloomFormat`` (Hadoop's checksum files removed)."""
    import glob
    import json
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq
    from pybloom_live import BloomFilter

    by_name = {os.path.basename(f): v for f, v in values.items()}
    for p in _stats_files(system_path, name):
        table = pq.read_table(p)
        files = [os.path.basename(f) for f in table.column("file").to_pylist()]
        for i, (c, t) in enumerate(_COLUMNS.items()):
            stored = []
            for f in files:
                old = BloomFilter(capacity=100, error_rate=0.001)
                for v in by_name[f][c]:
                    old.add(V.bloom_key(V.normalize(v, t), t))
                stored.append(B.to_bytes(old))
            column = f"s{i}_bloom"
            table = table.set_column(table.column_names.index(column), column,
                                     pa.array(stored, pa.binary()))
        pq.write_table(table, p)
    for p in filter(os.path.isfile, glob.glob(f"{system_path}/{name}/_log/*")):   # not files/
        entry = json.load(open(p))
        entry["content"].pop("bloomFormat", None)
        with open(p, "w") as f:
            json.dump(entry, f)
    for p in glob.glob(f"{system_path}/{name}/**/.*.crc", recursive=True):
        os.remove(p)


def _check_pruning(spark, path, values, probes):
    """Every probe's lookup equals vanilla and reads exactly the files holding the value."""
    import os

    from tests.helpers import rows, vanilla

    for c, v, literal in probes:
        df = spark.read.parquet(path).where(f"{c} = {literal}")
        assert rows(df) == vanilla(spark, lambda: df), (c, literal)
        holding = sorted(os.path.basename(f) for f, vs in values.items() if v in vs[c])
        assert sorted(os.path.basename(p) for p in df.inputFiles()) == holding, (c, literal)


_PROBES = [("l", 205, "205"), ("l", 7, "7"), ("s", "v-1", "'v-1'"), ("d", Decimal("26.25"), "26.25"),
           ("dt", 10957 + 101, "DATE'2000-04-11'"), ("x", 38.5, "CAST(38.5 AS DOUBLE)")]


def test_built_filters_hold_each_file_s_values_and_prune_as_vanilla(spark, hs, system_path, tmp_path):
    """Every value of a file is held by its filter (no false negative, for every type), few
    others are. The same index with its filters rewritten as format 1 (an index built before)
    answers lookups as vanilla, reading exactly the files holding the value; its incremental
    refresh sketches every file again in format 2, which answers the same."""
    import os

    from accelerator import BloomFilterSketch, DataSkippingIndexConfig

    path = str(tmp_path / "src")
    _source(spark, path)
    hs.createIndex(spark.read.parquet(path), DataSkippingIndexConfig("bl", *[
        BloomFilterSketch(c, fpp=0.001, expectedDistinctCountPerFile=100) for c in _COLUMNS]))
    values = _file_values(path)
    filters = _filters(system_path, "bl")      # read before any query loads the version
    assert len(filters) == 4
    others = 0
    for f, vs in values.items():
        for i, (c, t) in enumerate(_COLUMNS.items()):
            stored = filters[os.path.basename(f)][i]
            assert B.is_hash_bloom(stored)
            bloom = B.from_bytes(stored)
            assert bloom.count == len(vs[c]) and all(bloom.may_hold(v, t) for v in vs[c]), (f, c)
            absent = set().union(*(w[c] for g, w in values.items() if g != f)) - vs[c]
            others += sum(bloom.may_hold(v, t) for v in absent)
    assert others <= 10     # of 4 × 5 × ~117 absent values at a rate of 0.1%

    _as_legacy(system_path, "bl", values)      # as an index built before format 2
    _check_pruning(spark, path, values, _PROBES)

    _source(spark, path, files=1, start=4)       # one file more: an incremental refresh
    hs.refreshIndex("bl", mode="incremental")
    values = _file_values(path)
    filters = _filters(system_path, "bl")
    assert len(filters) == 5 and all(B.is_hash_bloom(s) for fs in filters.values() for s in fs)
    _check_pruning(spark, path, values, [("l", 405, "405"),
                                         ("d", Decimal("26.30"), "CAST(26.3 AS DECIMAL(12,2))")])
