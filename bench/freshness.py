"""``python -m bench freshness [--files 10000 100000 1000000] [--runs 3]``: the freshness
check a query makes before an index serves its relation, over synthesized listings (no Spark
session, no files): the JVM's side (bench/java/FreshnessBench.java, compiled beside the
accelerator's jar and run in a JVM of its own: a new listing, the same and alike listings a
query over the same files meets, a listing with one file deleted and one appended, recording an
index version's files, the changed listing's difference to them) and the Python side of a
changed source (per new listing: reading the JVM's answer; per query: hybrid scan's appended
and deleted files), both as it was (every file, ``before_``) and as it is (the difference).
Best of ``--runs``; prints one JSON document. Timings are reported, never asserted.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--files", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--runs", type=int, default=3)


def _jvm(sizes: list[int], runs: int) -> list[dict]:
    """The JVM side's numbers, one dict per size."""
    import pyspark

    from accelerator.runtime.jvm import _javac, build_jar, spark_jars_dir

    jar = build_jar(pyspark.__version__)
    classpath = f"{jar}:{spark_jars_dir()}/*"
    with tempfile.TemporaryDirectory(prefix="bench-freshness-") as tmp:
        subprocess.run([_javac(), "-nowarn", "-d", tmp, "-cp", classpath,
                        str(Path(__file__).parent / "java" / "FreshnessBench.java")],
                       check=True, capture_output=True, text=True)
        out = subprocess.run(["java", "-Xmx8g", "-cp", f"{tmp}:{classpath}",
                              "accelerator.jvm.FreshnessBench", str(runs), *map(str, sizes)],
                             check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def _best(runs: int, call) -> float:
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - t)
    return round(best * 1000, 2)


def _python(n: int, runs: int) -> dict:
    """The Python side of a changed source of ``n`` files (one deleted, one appended)."""
    from indexes.description import FileChanges, SourceDescription, source_files
    from indexes.source import file_changes, source_changes

    def line(i: int) -> list:
        return [f"file:/lake/t/part-{i:07d}.parquet", 1000 + i, 7]

    recorded = SourceDescription.from_json(
        {"fingerprint": "r", "files": [line(i) for i in range(n)]})
    entry = SimpleNamespace(source=recorded, content={})
    full = json.dumps({"fingerprint": "c", "files": [line(i) for i in range(1, n + 1)]})
    answer = json.dumps({"fingerprint": "c", "count": n, "bytes": 0, "recorded": "r",
                         "appended": [line(n)], "deleted": [0]})
    current = SourceDescription.from_json(json.loads(full))
    changes = FileChanges.from_json(json.loads(answer), recorded.listing_key, recorded.files)
    described = SourceDescription(fingerprint="c").with_changes(changes)
    return {
        "files": n,
        "before_read_answer_ms": _best(runs, lambda: SourceDescription.from_json(json.loads(full))),
        "before_per_query_ms": _best(runs, lambda: file_changes(entry, current.files)),
        "read_answer_ms": _best(runs, lambda: FileChanges.from_json(
            json.loads(answer), recorded.listing_key, recorded.files)),
        "per_query_ms": _best(runs, lambda: source_changes(entry, described)),
        "files_from_difference_ms": _best(runs, lambda: changes.applied_to(recorded.files)),
        "answer_bytes": {"before": len(full), "after": len(answer)},
        "same_changes": source_changes(entry, described) == file_changes(
            entry, source_files(current.files)),
    }


def run(args: argparse.Namespace) -> int:
    report = {"what": "the freshness check of a changed source (synthesized listings)",
              "jvm": _jvm(args.files, args.runs),
              "python": [_python(n, args.runs) for n in args.files]}
    print(json.dumps(report, indent=2))
    return 0
