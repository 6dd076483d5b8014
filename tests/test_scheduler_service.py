"""``accelerator serve``, ``jobs`` and ``run-job`` as processes: one service per system path (a
second waits as a standby and takes over when the first stops; ``--no-wait`` exits 1 naming the
holder), SIGTERM during a warm-up (exit 0, the warm-up cancelled, nothing half-written served),
and the job listing with its last runs."""
from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from tests.helpers import eventually, rows, vanilla

REPO = Path(__file__).resolve().parent.parent


class Service:
    """An ``accelerator serve`` process whose output lines are collected as they come."""

    def __init__(self, config: Path, *args: str):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "accelerator.commands.cli", "serve", "--config", str(config), *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
        self.out: list[str] = []
        self.err: list[str] = []
        for stream, lines in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=lambda s=stream, ls=lines: ls.extend(iter(s.readline, "")),
                             daemon=True).start()

    def said(self, text: str, timeout: float = 120) -> bool:
        return eventually(lambda: any(text in line for line in self.out + self.err), timeout)

    def stop(self, timeout: float = 120) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


@pytest.fixture
def services():
    started: list[Service] = []

    def start(config: Path, *args: str) -> Service:
        started.append(Service(config, *args))
        return started[-1]
    yield start
    for s in started:   # only what this test started
        s.kill()


def _config(tmp_path: Path, system_path: str, body: str) -> Path:
    path = tmp_path / "accelerator.yaml"
    path.write_text(f"version: 1\nsystemPath: {system_path}\n"
                    "spark: {master: 'local[1]', conf: {spark.ui.enabled: false}}\n" + body)
    return path


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accelerator.commands.cli", *args],
                          capture_output=True, text=True, timeout=600, cwd=REPO)


def test_one_service_per_system_path_and_a_standby_takes_over(hs, system_path, tmp_path,
                                                              services):
    config = _config(tmp_path, system_path,
                     "jobs:\n  - {name: evict, kind: evict, interval: PT2S}\n")
    first = services(config)
    assert first.said("accelerator serve: running 1 job(s)"), first.err
    refused = _cli("serve", "--config", str(config), "--no-wait")
    assert refused.returncode == 1
    assert (f"another service runs the jobs of {system_path}: host " in refused.stderr
            and f"pid {first.proc.pid}, since " in refused.stderr), refused.stderr
    standby = services(config)
    # a third JVM starting beside two: it took over 120 s once under a loaded CI (52 s alone)
    assert standby.said("waiting as a standby", timeout=300), standby.err
    assert not any("running" in line for line in standby.out)
    assert eventually(lambda: any(e["job"] == "evict" for e in hs.events().collect()), 60)

    assert first.stop() == 0
    assert first.out[-1].strip() == "accelerator serve: stopped"
    assert standby.said("accelerator serve: running 1 job(s)")   # the released lease, at once
    assert standby.stop() == 0

    listing = _cli("jobs", "--config", str(config))
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    assert lines[0].startswith("service: none: no `accelerator serve --config ")
    assert "evict: evict; every PT2S in UTC" in lines[1]
    assert lines[2].startswith("    last run: ") and "succeeded" in lines[2]
    assert lines[3].startswith("    next run: 20")


def test_serve_prints_a_line_per_run_and_jobs_says_when_no_service_runs(hs, system_path,
                                                                       tmp_path, services):
    config = _config(tmp_path, system_path, """jobs:
  - {name: evict, kind: evict, interval: PT1S}
  - {name: refresh-nope, kind: refresh, indexes: [nope], interval: PT1S}
""")
    service = services(config)
    assert service.said("refresh-nope (refresh): failed in "), "".join(service.err[-20:])
    assert service.said("evict (evict): succeeded in ")
    assert service.stop() == 0
    lines = [line.strip() for line in service.out]
    evict_end = next(line for line in lines if "evict (evict): succeeded" in line)
    assert evict_end.startswith("accelerator serve: 20")   # the time of the line
    assert evict_end.endswith(": evicted 0 cache entries (0 bytes)")
    assert any(line.startswith("accelerator serve: 20") and line.endswith("evict (evict): started")
               for line in lines)
    failed = next(line for line in lines if "refresh-nope (refresh): failed" in line)
    assert failed.endswith("refreshed 0 of 0 index(es); error: nope: no ACTIVE index of that "
                           "name"), failed

    listing = _cli("jobs", "--config", str(config))
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    assert lines[0].startswith(f"service: none: no `accelerator serve --config {config}` holds "
                               f"the lease of {system_path}"), lines[0]
    assert "the jobs run only while one does" in lines[0]
    next_runs = [line for line in lines if line.startswith("    next run: ")]
    assert len(next_runs) == 2
    assert all(line.endswith("(past: no service is running)") for line in next_runs), lines


def test_run_job_runs_one_job_now(hs, system_path, tmp_path):
    config = _config(tmp_path, system_path,
                     "jobs:\n  - {name: nightly-evict, kind: evict, cron: '0 3 * * *'}\n")
    ran = _cli("run-job", "nightly-evict", "--config", str(config))
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("nightly-evict (evict): succeeded in ")
    assert "evicted 0 cache entries" in ran.stdout
    assert [e["status"] for e in hs.events().collect() if e["job"] == "nightly-evict"] == [
        "succeeded"]
    unknown = _cli("run-job", "nope", "--config", str(config))
    assert unknown.returncode == 1
    assert "accelerator run-job: error: no job named 'nope'" in unknown.stderr
    assert "Traceback" not in unknown.stderr


def test_sigterm_during_a_warmup_exits_cleanly_and_serves_nothing_half_written(
        spark, hs, system_path, tmp_path, services):
    landing = str(tmp_path / "landing")
    (spark.range(1_200_000, numPartitions=4)
     .select("id", (F.col("id") % 1000).alias("user"),
             F.sha2(F.col("id").cast("string"), 256).alias("payload"))
     .write.option("compression", "gzip").json(landing))
    config = _config(tmp_path, system_path, f"""
rules:
  - {{source: "{landing}", kind: cache, columns: [id, user, payload], format: json}}
jobs:
  - {{name: warm, kind: warmup, source: "{landing}", interval: PT1S}}
""")
    service = services(config, "--grace-seconds", "0")
    assert service.said("accelerator serve: running"), service.err
    cache_data = Path(system_path) / "_cache" / "data"
    assert eventually(lambda: cache_data.exists() and any(cache_data.iterdir()), 120)
    assert service.stop() == 0, "".join(service.err[-20:])
    assert service.out[-1].strip() == "accelerator serve: stopped"

    runs = [e for e in hs.events().collect() if e["job"] == "warm"]
    assert [e["status"] for e in runs] == ["cancelled"], runs
    assert hs.cacheEntries().count() == 0            # nothing committed, nothing served
    q = lambda: spark.read.json(landing).where(F.col("user") == 7).select("id", "payload")  # noqa: E731
    assert not any("/_cache/" in f for f in q().inputFiles())
    assert rows(q()) == vanilla(spark, q)
