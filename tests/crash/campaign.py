"""A crash campaign over one file-system root: per scenario a counting run in the test process,
a seeded choice of kill points, one killed driver process per point (two at a time), then the
checks of :mod:`tests.crash.checks` for each.

The test process prepares each point's directories (source, indexes) while earlier drivers
run, so the JVMs of the drivers overlap with its own work.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from accelerator import Hyperspace
from accelerator.query.session import conf_set
from indexes import log_files
from tests.crash.checks import check_after_crash
from tests.crash.points import KillPoint, choose, quotas
from tests.crash.scenarios import Scenario
from tests.crash.tracer import Tracer
from tests.helpers import using_system_path
from tests.services.process import run_in_own_group

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DRIVER_TIMEOUT_S = 600
#: the test process's settings while a campaign runs: no query history written into the
#: system paths in the background, indexes and cache entries of other processes seen at once
TEST_CONF = {"spark.accelerator.history.enabled": "false",
             "spark.accelerator.index.cache.expirySeconds": "0"}


@dataclass(frozen=True)
class DriverResult:
    """How a driver process ended."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL

    def diagnostics(self) -> str:
        """The driver's last words (the crash line, or its error)."""
        lines = [line for line in self.stderr.splitlines() if line.startswith("crash:")]
        return "\n".join(lines) or self.stderr[-3000:]


def run_driver(spec: dict) -> DriverResult:
    """Runs ``python -m tests.crash.driver`` with ``spec`` in a process group of its own and
    waits for it (killing the group after :data:`DRIVER_TIMEOUT_S`)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]),
               PYSPARK_PYTHON=os.environ.get("PYSPARK_PYTHON", sys.executable))
    started = time.monotonic()
    done = run_in_own_group([sys.executable, "-m", "tests.crash.driver", json.dumps(spec)],
                            env, ROOT, DRIVER_TIMEOUT_S)
    return DriverResult(done.returncode, done.out, done.err, time.monotonic() - started)


@dataclass
class Run:
    """One kill point of a scenario, its directories and its driver."""

    scenario: Scenario
    point: KillPoint
    ctx: dict
    driver: Future

    @property
    def name(self) -> str:
        return f"{self.scenario.name}@{self.point.label}"


class Campaign:
    """Kills of ``scenarios`` under the file-system root ``root`` (a URI or a local path),
    ``budget`` points in all (at least one per scenario), chosen with ``seed``; Spark's files of
    the drivers go under the local directory ``scratch``."""

    def __init__(self, spark: Any, root: str, scratch: str, scenarios: list[Scenario],
                 budget: int, seed: str, parallel: int = 2):
        self.spark = spark
        self.hs = Hyperspace(spark)
        self.root = root.rstrip("/")
        self.scratch = scratch
        self.scenarios = scenarios
        self.quotas = quotas(budget, [s.name for s in scenarios])
        self.seed = seed
        self.counts: dict[str, tuple[int, int]] = {}
        self.calls: dict[str, list[str]] = {}   # each counted call, "<method> <path>"
        self._pool = ThreadPoolExecutor(parallel, thread_name_prefix="crash-driver")
        self._conf = conf_set(spark, TEST_CONF)

    def __enter__(self) -> "Campaign":
        self._conf.__enter__()
        Hyperspace.enable(self.spark)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        Hyperspace.disable(self.spark)
        self._conf.__exit__(*exc)

    def _ctx(self, scenario: Scenario, label: str) -> dict:
        base = f"{self.root}/{scenario.name}/{label.replace(':', '-')}"
        return {"root": base, "src": f"{base}/src", "system_path": f"{base}/indexes"}

    def _prepare(self, scenario: Scenario, label: str) -> dict:
        ctx = self._ctx(scenario, label)
        with using_system_path(self.spark, ctx["system_path"]):
            scenario.setup(self.spark, self.hs, ctx)
        return ctx

    def count(self, scenario: Scenario) -> tuple[int, int]:
        """The mutating file-system calls and Spark writes of the scenario's operation, run
        uninterrupted in this process (once; :attr:`calls` keeps the calls)."""
        if scenario.name not in self.counts:
            ctx = self._prepare(scenario, "count")
            with using_system_path(self.spark, ctx["system_path"]), \
                    Tracer(self.spark) as tracer:
                scenario.operation(self.spark, self.hs, ctx)
            self.calls[scenario.name] = tracer.calls
            self.counts[scenario.name] = (len(tracer.calls), len(tracer.writes))
        return self.counts[scenario.name]

    def launch(self, scenario: Scenario, point: KillPoint) -> Run:
        """Prepares the point's directories and starts its driver in the background."""
        ctx = self._prepare(scenario, point.label)
        scratch = os.path.join(self.scratch, scenario.name, point.label.replace(":", "-"))
        os.makedirs(scratch, exist_ok=True)
        spec = {"scenario": scenario.name, "ctx": ctx, "kill": point.label, "scratch": scratch,
                "inline_files": log_files.INLINE_FILES}   # as the counting run wrote the log
        return Run(scenario, point, ctx, self._pool.submit(run_driver, spec))

    def start(self) -> list[Run]:
        """Counts each scenario, chooses its points and starts their drivers (returning at
        once: they run in the background, two at a time)."""
        runs = []
        for scenario in self.scenarios:
            calls, writes = self.count(scenario)
            for point in choose(calls, writes, self.quotas[scenario.name],
                                f"{self.seed}:{scenario.name}"):
                runs.append(self.launch(scenario, point))
        return runs

    def check(self, run: Run) -> list[str]:
        """Waits for the run's driver, which must have been killed, then checks what it left
        (see :func:`tests.crash.checks.check_after_crash`); the indexes that needed a
        cancel."""
        result = run.driver.result()
        calls, writes = self.counts[run.scenario.name]
        assert result.killed, (
            f"{run.name}: the driver was not killed (exit {result.returncode}; the counting "
            f"run made {calls} calls and {writes} writes):\n{result.diagnostics()}")
        with using_system_path(self.spark, run.ctx["system_path"]):
            return check_after_crash(self.spark, self.hs, run.ctx, run.scenario)
