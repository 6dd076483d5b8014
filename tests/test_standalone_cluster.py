"""The accelerator on a Spark standalone cluster (a master and two workers of one core each,
started from pyspark's own scripts): every index kind and the cache are built by the executors'
JVMs and Python workers, which have neither the accelerator's jar nor its packages installed
(they get what the session ships), and the rewritten queries return vanilla Spark's rows. Then
the driver stops its session and starts another whose executors' Python lacks tantivy: a text
index build names the module and the setting, and the indexes still serve the new session.

One driver process (tests/cluster_driver.py) runs every scenario; each test asserts on its
scenario's report."""
from __future__ import annotations

import json
import os
import sys

import pytest

from tests.cluster_driver import MARK
from tests.services.process import run_in_own_group
from tests.services.spark_cluster import executor_python, standalone_cluster

pytestmark = pytest.mark.cluster

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DRIVER = os.path.join(ROOT, "tests", "cluster_driver.py")
DRIVER_TIMEOUT_S = 240
# installed in this venv, absent from a cluster's machines: executors must get them from the driver
SHIPPED = ("indexes", "accelerator", "rules")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A started standalone cluster, stopped after the module's tests."""
    with standalone_cluster(tmp_path_factory.mktemp("cluster")) as started:
        yield started


def run_driver(cluster, work) -> tuple[dict[str, dict], str]:
    """Runs the driver against ``cluster``: (each scenario's report by name, the driver's
    stderr). Its executors run a Python without the accelerator's packages, then (second
    session) one without tantivy either."""
    python = executor_python(work / "python", hidden_installed=SHIPPED)
    missing = executor_python(work / "python-missing", hidden_installed=SHIPPED,
                              hidden=("tantivy",))
    env = dict(os.environ, PYSPARK_PYTHON=python, SPARK_LOCAL_IP="127.0.0.1",
               PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    done = run_in_own_group([sys.executable, DRIVER, cluster.master_url, str(work), missing],
                            env, work, DRIVER_TIMEOUT_S)
    err = done.err + (f"\n(the driver was killed after {DRIVER_TIMEOUT_S} s)"
                      if done.timed_out else "")
    reports = {}
    for line in done.out.splitlines():
        if line.startswith(MARK):
            report = json.loads(line[len(MARK):])
            reports[report.pop("scenario")] = report
    return reports, f"exit code {done.returncode}\n{err[-6000:]}"


@pytest.fixture(scope="module")
def driver(cluster, tmp_path_factory):
    """The reports of one run of the driver, and what to show when one is missing."""
    reports, stderr = run_driver(cluster, tmp_path_factory.mktemp("driver"))
    return reports, stderr + "\n" + cluster.logs(20)


def scenario(driver, name: str) -> dict:
    """The report of scenario ``name``; fails with the driver's stderr and the cluster's logs
    if it did not run or raised."""
    reports, logs = driver
    assert name in reports, f"the driver reported no scenario {name!r}\n{logs}"
    report = reports[name]
    assert "error" not in report, f"scenario {name!r} failed:\n{report['error']}\n{logs}"
    return report


def only_index_files(files: list[str], index: str) -> bool:
    return bool(files) and all(f"/{index}/v__=" in f for f in files)


def test_executors_get_the_accelerator_from_the_driver(driver):
    env = scenario(driver, "environment")
    assert env["executors"] == 2
    # nothing of the accelerator is importable there until the session ships it
    assert env["indexes"] == "" and env["accelerator"] == ""
    assert env["tantivy"]


def test_covering_index_serves_a_nested_filter(driver):
    r = scenario(driver, "covering_filter")
    assert r["rows_equal"] and r["rows"] == 29
    assert "idx_nested/v__=0" in r["plan"]
    assert only_index_files(r["input_files"], "idx_nested")


def test_join_of_two_covering_indexes_has_no_exchange(driver):
    r = scenario(driver, "join")
    assert r["rows_equal"] and r["rows"] > 0
    assert r["exchanges"] == 0 and r["vanilla_exchanges"] == 2
    assert "SortMergeJoin" in r["plan"] and "SortedBucketScan" in r["plan"]
    assert {i for i, code, reason in r["why_not"] if code == "APPLIED"} == {"li", "ri"}


def test_hybrid_scan_reads_the_appended_file_next_to_the_index(driver):
    r = scenario(driver, "hybrid_scan")
    lookup, join = r["filter"], r["join"]
    assert len(r["appended"]) == 1
    assert lookup["rows_equal"] and lookup["rows"] == 8 + 1
    indexed = [f for f in lookup["input_files"] if "/li/v__=" in f]
    others = [os.path.basename(f) for f in lookup["input_files"] if "/li/v__=" not in f]
    assert indexed and others == r["appended"]
    assert any(code == "APPLIED" and "hybrid scan" in reason
               for _, code, reason in lookup["why_not"])
    # the appended rows go into the index's buckets (one Exchange), the index is not shuffled
    assert join["rows_equal"] and join["exchanges"] == 1 and "BucketUnion" in join["plan"]


def test_data_skipping_prunes_files(driver):
    r = scenario(driver, "data_skipping")
    assert r["source_files"] == 8
    for name in ("minmax", "bloom", "valuelist"):
        q = r[name]
        assert q["rows_equal"] and q["rows"] > 0, name
        assert 0 < len(q["input_files"]) < r["source_files"], (name, q["input_files"])
    assert len(r["minmax"]["input_files"]) == 1 and len(r["bloom"]["input_files"]) == 1


def test_text_index_prunes_a_like_and_answers_a_search(driver):
    r = scenario(driver, "text")
    like = r["like"]
    assert like["rows_equal"] and like["rows"] == 1
    assert len(like["input_files"]) == 1 < r["source_files"]
    assert r["search"]["rows_equal"] and r["search"]["rows"] > 0


def test_cache_serves_a_json_source(driver):
    r = scenario(driver, "cache")
    assert r["warmed"]["files"] == r["source_files"] == 3
    assert r["rows_equal"] and r["rows"] > 0
    assert "CachedFileIndex" in r["plan"]
    assert r["input_files"] and all(r["cache_path"] in f for f in r["input_files"])


def test_executor_lacking_a_module_gets_a_clear_error(driver):
    r = scenario(driver, "missing_module")
    assert r["raised"] == "ExecutorEnvironmentError", r
    assert "'tantivy'" in r["message"] and r["python"] in r["message"]
    assert "spark.pyspark.python" in r["message"]
    assert "txt_missing" not in r["indexes"]      # nothing left behind


def test_a_restarted_session_is_served_and_builds(driver):
    r = scenario(driver, "restarted_session")
    covering, skipping = r["covering"], r["skipping"]
    assert covering["rows_equal"] and covering["rows"] > 0
    assert only_index_files(covering["input_files"], "idx_nested")
    # the bucket union of the left index and its appended file runs on the new executors
    assert r["join"]["rows_equal"] and "BucketUnion" in r["join"]["plan"]
    assert skipping["rows_equal"] and skipping["rows"] == 1
    assert len(skipping["input_files"]) == 1 < r["source_files"]
