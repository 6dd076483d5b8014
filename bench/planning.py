"""``python -m bench planning [--files 10000 100000 1000000] [--bloom-capacity 100]``: the
planning a data-skipping index adds to a query, over synthesized statistics, in pure Python (no
Spark): per size, the statistics written as the build's tasks write them (a dataset of Parquet
files) into an in-memory file system, read once per index version (``load_s``: what the
rewriter's version cache does once), the source listing matched against them once
(``listing_s``: once per listing), then each query's pruning (the first pass, the evaluator over
the files it leaves, the row groups; milliseconds, the first run, which reads or slices the
Bloom filters once per version, and the best of the next ``--runs``).

The index: a MinMax sketch of a long ``x`` (file i holds [100 i, 100 i + 99]) and a Bloom
filter sketch of a string ``t`` (no bounds; file i's filter holds ten keys of template i mod
10,000). Queries: ``x`` equal to a value (keeps 1 file), ``x`` in a range of 1% and of 10% of the files,
``t`` equal to a key (keeps files / 10,000, plus false positives). Prints one JSON document.
Timings are reported, never asserted.
"""
from __future__ import annotations

import argparse
import json
import resource
import time

TEMPLATES = 10_000
PART_FILES = 100_000     # files per statistics file (a build task's share)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--files", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--bloom-capacity", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)


def _specs(capacity: int) -> list:
    from indexes.skipping.stats import SketchSpec

    return [SketchSpec('col("x")', "long", minmax=True),
            SketchSpec('col("t")', "string", bloom_capacity=capacity, bloom_fpp=0.01)]


def _write(fs, n: int, capacity: int) -> int:
    """The statistics of ``n`` files under ``memory:///index/v__=0/stats``; their bytes."""
    import numpy as np
    import pyarrow as pa

    from indexes.skipping.bloom import HashBloom
    from indexes.skipping.stats import bloom_to_bytes, hashes_of
    from indexes.skipping.store import arrow_schema, parquet_bytes

    specs = _specs(capacity)
    templates = [bloom_to_bytes(HashBloom.of_hashes(hashes_of([f"t{k}-{j}" for j in range(10)], "string"),
                                                    capacity, 0.01))
                 for k in range(min(n, TEMPLATES))]
    schema = arrow_schema(specs)
    fs.mkdirs("memory:///index/v__=0/stats")
    written = 0
    for part, first in enumerate(range(0, n, PART_FILES)):
        i = np.arange(first, min(n, first + PART_FILES), dtype=np.int64)
        m = len(i)
        nulls = pa.nulls(m)
        columns = {
            "file": pa.array([f"file:/lake/t/part-{k:07d}.parquet" for k in i.tolist()]),
            "size": pa.array(np.full(m, 1000, dtype=np.int64)),
            "mtime": pa.array(np.full(m, 7, dtype=np.int64)),
            "rows": pa.array(np.full(m, 100, dtype=np.int64)),
            "row_group": nulls, "start": nulls, "end": nulls,
            "s0_min": pa.array(i * 100), "s0_max": pa.array(i * 100 + 99),
            "s0_nulls": pa.array(np.zeros(m, dtype=np.int64)), "s0_values": nulls,
            "s0_bloom": nulls, "s1_min": nulls, "s1_max": nulls,
            "s1_nulls": pa.array(np.zeros(m, dtype=np.int64)), "s1_values": nulls,
            "s1_bloom": pa.array([templates[k % len(templates)] for k in i.tolist()], pa.binary()),
        }
        table = pa.table({f.name: columns[f.name].cast(f.type) for f in schema}, schema=schema)
        data = parquet_bytes(table)
        fs.write_bytes(f"memory:///index/v__=0/stats/part-{part:05d}.parquet", data)
        written += len(data)
    return written


def _rss_mb() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() // (1 << 20)


def measure(n: int, capacity: int, runs: int) -> dict:
    """The numbers of one size (see the module docstring)."""
    from indexes.fs.memory import MemoryFs
    from indexes.skipping.ir import And, Cmp, Lit, Sketched
    from indexes.skipping.match import kept_files, kept_row_groups, read_in_part
    from indexes.skipping.store import DATASET
    from indexes.skipping.table import StatsTable

    fs = MemoryFs()
    stats_bytes = _write(fs, n, capacity)
    before = _rss_mb()
    t = time.perf_counter()
    table = StatsTable.read(fs, "memory:///index/v__=0", _specs(capacity), DATASET)
    load = time.perf_counter() - t
    listed = [[f"file:/lake/t/part-{k:07d}.parquet", 1000, 7] for k in range(n)]
    t = time.perf_counter()
    listing = table.listing(listed)
    listing_s = time.perf_counter() - t
    x, s = Sketched('col("x")', "long"), Sketched('col("t")', "string")
    queries = {
        "x_equal": Cmp("=", x, Lit(n * 50 + 5, "long")),
        "x_range_1pct": And(Cmp(">=", x, Lit(n * 50, "long")), Cmp("<", x, Lit(n * 51, "long"))),
        "x_range_10pct": And(Cmp(">=", x, Lit(n * 10, "long")), Cmp("<", x, Lit(n * 20, "long"))),
        "t_equal_bloom": Cmp("=", s, Lit("t37-3", "string")),
    }
    out = {"files": n, "bloom_capacity": capacity, "stats_bytes": stats_bytes,
           "load_s": round(load, 3), "listing_s": round(listing_s, 3),
           "rss_after_load_mb": _rss_mb() - before}
    for name, condition in queries.items():
        times, kept = [], []
        for _ in range(runs + 1):
            t = time.perf_counter()
            kept, entries, sizes = kept_files(condition, table, listing)
            kept, _, _ = read_in_part(kept, kept_row_groups(condition, entries, kept), sizes)
            times.append(time.perf_counter() - t)
        out[f"{name}_first_ms"] = round(times[0] * 1000, 2)
        out[f"{name}_ms"] = round(min(times[1:]) * 1000, 2)
        out[f"{name}_kept"] = len(kept)
    return out


def run(args: argparse.Namespace) -> int:
    report = {"what": "planning added by a data-skipping index (pure Python, synthesized)",
              "sizes": [measure(n, args.bloom_capacity, args.runs) for n in args.files]}
    print(json.dumps(report, indent=2))
    return 0
