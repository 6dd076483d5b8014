"""Smoke run of the benchmark harness at a tiny scale: every workload runs, its results equal
vanilla Spark's, and the indexes it declares are used where they should be (the cache tier's
workloads read the cache); the build-cost, pruning-cost, cache warm-up and cache planning
benchmarks run; the star-schema benchmark advises, applies and answers as vanilla. No timing
is asserted. Marked ``bench``: out of the default run and CI (about 10 minutes of a slow 2-core
machine; see docs/testing.md); ``python -m pytest -m bench`` runs them."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = str(Path(__file__).resolve().parent.parent)

pytestmark = pytest.mark.bench


def test_every_workload_runs_with_identical_results(tmp_path):
    out = tmp_path / "report.json"
    run = subprocess.run(
        [sys.executable, "-m", "bench", "run", "--scale", "0.002", "--pairs", "1", "--warmups", "0",
         "--buckets", "4", "--planning-runs", "1", "--build-runs", "1", "--many-files", "200",
         "--cache-files", "40", "--warmup-files", "30",
         "--data-dir", str(tmp_path / "data"),
         "--work-dir", str(tmp_path / "work"), "--out", str(out)],
        capture_output=True, text=True, timeout=900, cwd=REPO)
    assert run.returncode == 0, run.stderr[-4000:]
    report = json.loads(out.read_text())
    from bench.workloads import WORKLOADS
    by_name = {w["name"]: w for w in report["workloads"]}
    assert set(by_name) == {w.name for w in WORKLOADS}
    for w in report["workloads"]:
        assert w["identical"], (w["name"], w["failures"])
        assert w["rows"] > 0, w["name"]
        assert w["vanilla_s"]["median"] > 0 and w["accelerated_s"]["median"] > 0
    assert by_name["tpch_lineitem_partkey_lookup"]["indexes_used"] == ["bench_lineitem_partkey"]
    assert by_name["eventlog_user_id_lookup"]["indexes_used"] == ["bench_events_user_id"]
    assert by_name["eventlog_account_id_lookup"]["indexes_used"] == ["bench_events_account_id"]
    hybrid = by_name["tpch_lineitem_partkey_lookup_appended"]   # the index + the appended files
    assert hybrid["indexes_used"] == ["bench_lineitem_partkey_appended"]
    assert hybrid["read"]["accelerated"]["bytes_read"] < hybrid["read"]["vanilla"]["bytes_read"]
    (refresh,) = hybrid["refresh"]       # then refreshed incrementally, against its build
    assert refresh["name"] == "bench_lineitem_partkey_appended" and refresh["incremental_s"] > 0
    assert refresh["ratio_incremental_over_build"] > 0
    # then the lookup ran again over the refreshed index (its rows checked like every run's)
    assert hybrid["after_refresh"]["accelerated_s"]["median"] > 0
    assert by_name["tpch_lineitem_no_index_applies"]["indexes_used"] == []
    skipping = ["eventlog_payload_time_window", "eventlog_trace_id_bloom", "eventlog_session_id_bloom"]
    for name in skipping:
        w = by_name[name]
        assert w["indexes_used"] == ["bench_events_skipping"], name
        assert w["read"]["accelerated"]["files"] < w["read"]["vanilla"]["files"], name
    # the three share one index: built once, by the first of them
    builds = [i for name in skipping for i in by_name[name]["indexes"]]
    assert [i["build_s"] is not None for i in builds] == [True, False, False]
    assert builds[0]["scannedSketches"] and builds[0]["bytes"] > 0
    join = by_name["tpch_lineitem_join_orders"]
    assert join["indexes_used"] == ["bench_lineitem_orderkey", "bench_orders_orderkey"]
    assert join["shuffles"]["accelerated"] == join["shuffles"]["vanilla"] - 2   # none for the join
    rare, frequent = by_name["eventlog_message_rare_error"], by_name["eventlog_message_frequent_token"]
    assert rare["indexes_used"] == ["bench_events_message"]
    assert rare["read"]["accelerated"]["files"] < rare["read"]["vanilla"]["files"]
    assert frequent["indexes_used"] == []       # every file holds the token: nothing skipped
    (text,) = rare["indexes"]
    assert text["text_bytes"] > 0 and text["text_mb_per_s"] > 0 and text["column_parquet_bytes"] > 0
    assert "bench_events_message" in run.stdout  # the index builds' table
    from bench.workloads import BUILDS
    builds = {b["name"]: b for b in report["builds"]}
    assert list(builds) == [b.name for b in BUILDS]
    for b in builds.values():   # each against its limit, with the driver's peak memory
        assert b["index_s"]["median"] > 0 and b["limit_s"]["median"] > 0, b["name"]
        assert b["driver_memory"]["index"]["jvm_heap_peak_mb"] > 0, b["name"]
    build = builds["tpch_lineitem_minmax_build"]
    assert build["files"] == 4
    assert build["scannedSketches"] == [] and len(build["footerSketches"]) == 11
    assert builds["tpch_lineitem_covering_build"]["config"] == {"numBuckets": 4}
    (pruning,) = report["pruning"]
    assert pruning["identical"] and (pruning["files"], pruning["kept_files"]) == (200, 1)
    assert pruning["on_ms"] > 0 and pruning["off_ms"] > 0
    lookup = by_name["tpch_lineitem_partkey_lookup"]
    assert lookup["limit_s"] is not None
    assert lookup["read"]["accelerated"]["bytes_read"] < lookup["read"]["vanilla"]["bytes_read"]
    assert set(report["planning"]) >= {"join", "aggregate", "self-join", "unrelated (no files)"}
    assert "tpch_lineitem_partkey_lookup" in run.stdout   # the readable table
    # the cache tier: gzip JSON lines and CSV sources, served from their Parquet copies
    for name in ("eventlog_json_cached_filter", "eventlog_json_cached_groupby",
                 "tpch_lineitem_csv_cached_q6"):
        w = by_name[name]
        assert w["indexes_used"] == ["cache"], name
        assert w["cache"]["served_before_runs"] and w["cache"]["served"], name
        assert w["limit_s"] is not None, name
        assert w["read"]["accelerated"]["bytes_read"] < w["read"]["vanilla"]["bytes_read"], name
    assert by_name["eventlog_json_cached_filter"]["cache"]["files"] == 4   # 4 .json.gz files
    assert by_name["eventlog_json_cached_groupby"]["cache"]["bytesWritten"] == 0   # shared
    warmups = {b["name"]: b for b in report["cache_warmups"]}
    assert set(warmups) == {"eventlog_json_cache_warmup", "tpch_lineitem_csv_cache_warmup",
                            "many_small_files_cache_warmup"}
    for b in report["cache_warmups"]:
        assert b["cache_s"]["median"] > 0 and b["scan_s"]["median"] > 0
        assert b["last_cache"]["bytesWritten"] > 0
    assert warmups["eventlog_json_cache_warmup"]["last_cache"]["files"] == 4
    assert warmups["tpch_lineitem_csv_cache_warmup"]["last_cache"]["files"] == 4
    assert warmups["many_small_files_cache_warmup"]["last_cache"]["files"] == 30
    (planning,) = report["cache_planning"]
    assert planning["identical"] and planning["served"], planning["failures"]
    assert (planning["files"], planning["cached_files"]) == (40, 20)
    assert "cache planning" in run.stdout


def test_the_star_schema_benchmark_advises_and_answers_as_vanilla(tmp_path):
    """``python -m bench star`` at its smallest scale: recommend() never fails, it proposes the
    min/max sketch dynamic file pruning needs on the fact's date key, every answer equals
    vanilla's and a one-month filter reads fewer of the fact's bytes (its files, and its
    jobs' input bytes)."""
    out = tmp_path / "star.json"
    run = subprocess.run(
        [sys.executable, "-m", "bench", "star", "--scale", "0.001", "--pairs", "1",
         "--warmups", "0", "--record-runs", "1", "--data-dir", str(tmp_path / "data"),
         # the fact here is far below the size past which pruning through joins pays
         "--conf", "spark.accelerator.dynamicFilePruning.minScanBytes=0",
         "--work-dir", str(tmp_path / "work"), "--out", str(out)],
        capture_output=True, text=True, timeout=900, cwd=REPO)
    assert run.returncode == 0, run.stderr[-4000:]
    report = json.loads(out.read_text())
    from bench.star_queries import TEMPLATES
    assert len(report["templates"]) == len(TEMPLATES) >= 20
    targets = report["targets"]
    assert targets["every_result_identical"] and targets["recommend_never_failed"]
    advised = report["recommend"]["instructions"]
    assert any(i["kind"] == "minmax" and i["columns"] == ["ss_sold_date_sk"]
               for i in advised), advised
    read = report["one_month_fact_read"]
    assert read["accelerated_bytes"] < read["vanilla_bytes"] == read["fact_bytes"]
    # its jobs (the keys' query among the accelerated side's) read fewer bytes than vanilla's
    month = next(t for t in report["templates"] if t["name"] == "month_by_category")
    assert month["jobs"]["vanilla"] >= 1 and month["jobs"]["accelerated"] >= 1, month
    assert 0 < month["bytes_read"]["accelerated"] < month["bytes_read"]["vanilla"], month
    assert "TOTAL" in run.stdout
