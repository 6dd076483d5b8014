"""Crash consistency (issue 22): a PySpark driver process is killed with SIGKILL at seeded points
of create (each index kind), refresh (every mode, after files were appended and deleted),
optimize, vacuum (of a deleted index, of outdated data) and a cache warm-up: before the N-th
mutating file-system call (always the first and the last among the points of a longer run)
or in the middle of a Spark write job. This process then finds every index stable or in a
transient state queries ignore, every query equal to vanilla Spark and reading only files a
stable log entry or cache entry names, cancel restoring the last stable state, the operation
working when done again, and vacuum and the demoter leaving no orphaned data (see
tests/crash/checks.py).

Each test runs on the local file system and on HDFS (marked ``hdfs``). ``CRASH_POINTS``
(default 10, one per scenario) is the number of kill points in all on the local file system,
``CRASH_HDFS_POINTS`` on HDFS (default: one per scenario), ``CRASH_SEED`` their seed; ``python
-m tests.crash --points 200`` runs a longer campaign outside the suite.
"""
from __future__ import annotations

import os

import pytest

from tests.crash.campaign import Campaign
from tests.crash.points import KillPoint
from tests.crash.scenarios import SCENARIOS

pytestmark = pytest.mark.crash

CI_SCENARIOS = [name for name, s in SCENARIOS.items() if s.ci]
POINTS = int(os.environ.get("CRASH_POINTS", "10"))   # one per scenario; more outside CI
#: on HDFS (a MiniDFSCluster), one point per scenario unless CRASH_HDFS_POINTS says more
HDFS_POINTS = int(os.environ.get("CRASH_HDFS_POINTS", "0"))
SEED = os.environ.get("CRASH_SEED", "22")


def _selected(items, root: str) -> set[str]:
    """The scenarios of the tests of this module that will run on ``root`` (``-k`` and ``-m``
    may leave some out)."""
    return {item.callspec.params.get("scenario") for item in items
            if item.module.__name__ == __name__ and hasattr(item, "callspec")
            and item.callspec.params.get("campaign") == root}


@pytest.fixture(scope="module", params=[
    pytest.param("local", id="local"),
    pytest.param("hdfs", id="hdfs", marks=pytest.mark.hdfs),
])
def campaign(request, spark, tmp_path_factory):
    """The module's campaign over one file-system root (a local directory, or a directory of
    the session's MiniDFSCluster), its drivers started; the runs of each scenario by name."""
    scratch = tmp_path_factory.mktemp("crash")
    if request.param == "hdfs":
        root, budget = f"{request.getfixturevalue('hdfs').url}/crash/{scratch.name}", HDFS_POINTS
    else:
        root, budget = str(scratch / "root"), POINTS
    selected = [n for n in CI_SCENARIOS if n in _selected(request.session.items, request.param)]
    with Campaign(spark, root, str(scratch / "drivers"),
                  [SCENARIOS[n] for n in selected], budget, SEED) as running:
        runs: dict[str, list] = {}
        for run in running.start():
            runs.setdefault(run.scenario.name, []).append(run)
        yield running, runs


@pytest.mark.parametrize("scenario", CI_SCENARIOS)
def test_a_killed_operation_leaves_a_consistent_state(campaign, scenario):
    running, runs = campaign
    failures = []
    for run in runs[scenario]:
        try:
            running.check(run)
        except AssertionError as exc:
            failures.append(f"{run.name}: {exc}")
    assert not failures, "\n".join(failures)


def _kill_at(running, name: str, method: str, where: str, nth: int = 0):
    """The run of scenario ``name`` killed before its ``nth`` call of ``method`` on a path
    holding ``where`` (found in the counting run), started."""
    scenario = SCENARIOS[name]
    running.count(scenario)
    calls = [n for n, call in enumerate(running.calls[name], 1)
             if call.startswith(method + " ") and where in call]
    return running.launch(scenario, KillPoint("fs", calls[nth]))


def test_a_warmup_killed_between_its_commits_leaves_data_the_demoter_deletes(campaign):
    """Killed after the first of its entries was committed: the folders of the files it wrote
    but did not commit lie beside that entry's folder, which the demoter used to keep whole."""
    running, _ = campaign
    running.check(_kill_at(running, "cache", "create_exclusive", "/_manifest/entries/", 1))


def test_a_vacuum_killed_before_deleting_the_moved_index_leaves_nothing_after_vacuum(campaign):
    """Killed after moving the index directory into the trash: the next vacuum empties it."""
    running, _ = campaign
    running.check(_kill_at(running, "vacuum-ix", "delete", "/_trash/"))
