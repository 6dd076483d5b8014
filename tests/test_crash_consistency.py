"""Crash consistency (issue 22): a PySpark driver process is killed with SIGKILL at seeded points
of create (each index kind), refresh (every mode, after files were appended and deleted),
optimize, vacuum (of a deleted index, of outdated data) and a cache warm-up: before the N-th
mutating file-system call (always the first and the last among the points of a longer run)
or in the middle of a Spark write job. This process then finds every index stable or in a
transient state queries ignore, every query equal to vanilla Spark and reading only files a
stable log entry or cache entry names, cancel restoring the last stable state, the operation
working when done again, and vacuum and the demoter leaving no orphaned data (see
tests/crash/checks.py).

Each scenario runs on the local file system; on HDFS (marked ``hdfs``) those of
:data:`HDFS_SCENARIOS` and the chosen points of :data:`CHOSEN`. ``CRASH_POINTS``
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
#: the scenarios also killed on HDFS in the suite: an index's log and data committed (create).
#: With the chosen points (a warm-up between its cache commits, a vacuum after its move to the
#: trash) every kind of mutating call HDFS answers otherwise than the local file system
#: (rename, exclusive create, delete) is killed there; the other scenarios repeat those calls
#: at a JVM start each (about 7 minutes of a slow 2-core CI machine, see docs/testing.md).
#: ``python -m tests.crash --hdfs`` runs them all.
HDFS_SCENARIOS = ["create-ix"]
#: the file systems of the campaigns: the local one, and HDFS (a MiniDFSCluster)
ROOTS = ["local", pytest.param("hdfs", marks=pytest.mark.hdfs)]
POINTS = int(os.environ.get("CRASH_POINTS", "10"))   # one per scenario; more outside CI
#: on HDFS (a MiniDFSCluster), one point per scenario unless CRASH_HDFS_POINTS says more
HDFS_POINTS = int(os.environ.get("CRASH_HDFS_POINTS", "0"))
SEED = os.environ.get("CRASH_SEED", "22")


#: the kill points some tests choose by the call they stop before, by test: the scenario, the
#: method, a part of the call's path and which of the matching calls (0: the first)
CHOSEN = {
    "test_a_warmup_killed_between_its_commits_leaves_data_the_demoter_deletes":
        ("cache", "create_exclusive", "/_manifest/entries/", 1),
    "test_a_vacuum_killed_before_deleting_the_moved_index_leaves_nothing_after_vacuum":
        ("vacuum-ix", "delete", "/_trash/", 0),
}


def _selected(items, root: str) -> set[tuple[str, str | None]]:
    """The tests of this module that will run on ``root`` (``-k`` and ``-m`` may leave some
    out): each one's name and scenario (None for those of :data:`CHOSEN`)."""
    return {(item.originalname, item.callspec.params.get("scenario")) for item in items
            if item.module.__name__ == __name__ and hasattr(item, "callspec")
            and item.callspec.params.get("where") == root}


def _chosen_point(running, name: str, method: str, where: str, nth: int) -> KillPoint:
    """The point of scenario ``name`` before its ``nth`` call of ``method`` on a path holding
    ``where`` (found in the counting run)."""
    running.count(SCENARIOS[name])
    calls = [n for n, call in enumerate(running.calls[name], 1)
             if call.startswith(method + " ") and where in call]
    return KillPoint("fs", calls[nth])


def _campaign(request, tmp_path_factory, where: str):
    """The module's campaign over one file-system root (``where``: a local directory, or a
    directory of the session's MiniDFSCluster), its drivers started; the runs of each scenario
    by name."""
    spark = request.getfixturevalue("spark")
    scratch = tmp_path_factory.mktemp("crash")
    if where == "hdfs":
        root, budget = f"{request.getfixturevalue('hdfs').url}/crash/{scratch.name}", HDFS_POINTS
    else:
        root, budget = str(scratch / "root"), POINTS
    selected = _selected(request.session.items, where)
    scenarios = [SCENARIOS[n] for n in CI_SCENARIOS if any(s == n for _, s in selected)]
    with Campaign(spark, root, str(scratch / "drivers"), scenarios, budget, SEED) as running:
        runs: dict[str, list] = {}
        for run in running.start():
            runs.setdefault(run.scenario.name, []).append(run)
        chosen = {test: running.launch(SCENARIOS[point[0]], _chosen_point(running, *point))
                  for test, point in CHOSEN.items() if (test, None) in selected}
        yield running, runs, chosen


@pytest.fixture(scope="module")
def local_campaign(request, tmp_path_factory):
    """The campaign on the local file system (see :func:`_campaign`)."""
    yield from _campaign(request, tmp_path_factory, "local")


@pytest.fixture(scope="module")
def hdfs_campaign(request, tmp_path_factory):
    """The campaign on HDFS (see :func:`_campaign`)."""
    yield from _campaign(request, tmp_path_factory, "hdfs")


@pytest.mark.parametrize("where, scenario", [
    *[pytest.param("local", name, id=f"local-{name}") for name in CI_SCENARIOS],
    *[pytest.param("hdfs", name, id=f"hdfs-{name}", marks=pytest.mark.hdfs)
      for name in HDFS_SCENARIOS]])
def test_a_killed_operation_leaves_a_consistent_state(request, where, scenario):
    running, runs, _ = request.getfixturevalue(f"{where}_campaign")
    failures = []
    for run in runs[scenario]:
        try:
            running.check(run)
        except AssertionError as exc:
            failures.append(f"{run.name}: {exc}")
    assert not failures, "\n".join(failures)


def _check_chosen(where: str, request) -> None:
    """Checks the run of the requesting test's point of :data:`CHOSEN` (started with the
    campaign's others on ``where``)."""
    running, _, chosen = request.getfixturevalue(f"{where}_campaign")
    running.check(chosen[request.node.originalname])


@pytest.mark.parametrize("where", ROOTS)
def test_a_warmup_killed_between_its_commits_leaves_data_the_demoter_deletes(where, request):
    """Killed after the first of its entries was committed: the folders of the files it wrote
    but did not commit lie beside that entry's folder, which the demoter used to keep whole."""
    _check_chosen(where, request)


@pytest.mark.parametrize("where", ROOTS)
def test_a_vacuum_killed_before_deleting_the_moved_index_leaves_nothing_after_vacuum(where, request):
    """Killed after moving the index directory into the trash: the next vacuum empties it."""
    _check_chosen(where, request)
