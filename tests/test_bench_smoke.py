"""Smoke run of the benchmark harness at a tiny scale: every workload runs, its results equal
vanilla Spark's, and the indexes it declares are used where they should be. No timing is
asserted."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = str(Path(__file__).resolve().parent.parent)


def test_every_workload_runs_with_identical_results(tmp_path):
    out = tmp_path / "report.json"
    run = subprocess.run(
        [sys.executable, "-m", "bench", "run", "--scale", "0.002", "--pairs", "1", "--warmups", "0",
         "--buckets", "4", "--planning-runs", "1", "--data-dir", str(tmp_path / "data"),
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
    assert by_name["tpch_lineitem_no_index_applies"]["indexes_used"] == []
    lookup = by_name["tpch_lineitem_partkey_lookup"]
    assert lookup["limit_s"] is not None
    assert lookup["read"]["accelerated"]["bytes_read"] < lookup["read"]["vanilla"]["bytes_read"]
    assert set(report["planning"]) >= {"join", "aggregate", "self-join", "unrelated (no files)"}
    assert "tpch_lineitem_partkey_lookup" in run.stdout   # the readable table
