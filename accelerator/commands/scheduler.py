"""The scheduler's commands: ``accelerator serve``, ``jobs`` and ``run-job``, each over one
configuration file (``--config``), in the Spark session it describes."""
from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Iterator

from accelerator.commands.system_path import CONFIG_FILE, CONFIG_VARIABLE, NoConfigError, \
    config_file
from accelerator.scheduler.config import GRACE_SECONDS, Job, SchedulerConfig, load_config_file
from accelerator.scheduler.lease import Lease
from indexes.log import now_ms

if TYPE_CHECKING:   # the service's modules load Spark's side: imported where a command runs
    from accelerator.scheduler.jobs import JobRun

#: how ``serve`` builds its session, before the configuration's ``spark.conf``
_SESSION_DEFAULTS = {"spark.ui.showConsoleProgress": "false",
                     "spark.sql.shuffle.partitions": "8",
                     "spark.scheduler.mode": "FAIR"}


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Adds ``serve``, ``jobs`` and ``run-job`` to the command line's subcommands ``sub``."""
    config = argparse.ArgumentParser(add_help=False)
    config.add_argument("--config", help="the scheduler's configuration file, as `accelerator "
                        f"init` writes it (default: ${CONFIG_VARIABLE}, else ./{CONFIG_FILE})")
    serve_help = ("run the configuration's jobs on their schedules until SIGTERM or Ctrl-C "
                  "(one service per system path; a second one waits as a standby)")
    s = sub.add_parser("serve", parents=[config], help=serve_help, description=serve_help + (
        ". It prints a line when a job run starts and when it ends (its status, what it did, "
        "why it failed); every run is also an event in `accelerator events`."))
    s.add_argument("--no-wait", action="store_true", help="exit 1 instead of waiting when "
                   "another service holds the system path's lease")
    s.add_argument("--grace-seconds", type=float, default=GRACE_SECONDS,
                   help="on SIGTERM, how long running jobs may finish before their Spark jobs "
                   f"are cancelled (default {GRACE_SECONDS:g})")
    s.set_defaults(func=serve)
    jobs_help = "list the configuration's jobs with their last and next runs"
    j = sub.add_parser("jobs", parents=[config], help=jobs_help, description=jobs_help + (
        ", after the service that runs them (or that none holds the system path's lease: "
        "jobs run only while `accelerator serve` does)."))
    j.set_defaults(func=list_jobs)
    run_help = "run one job of the configuration now (exit 1 unless it succeeds)"
    r = sub.add_parser("run-job", parents=[config], help=run_help, description=run_help + (
        ", in this process, whether or not a service runs the jobs; it prints what the run "
        "did and records it as an event."))
    r.add_argument("name", help="the job's name")
    r.set_defaults(func=run_job)


@contextlib.contextmanager
def config_session(config: SchedulerConfig, app: str) -> Iterator[Any]:
    """The SparkSession the configuration describes (its master, default local[2], and
    settings, the system path, the FAIR scheduler), with the accelerator enabled; stopped
    afterwards."""
    from pyspark.sql import SparkSession

    from accelerator.query import session
    from accelerator.runtime import jvm
    from accelerator.runtime.settings import SYSTEM_PATH

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)   # executors run index builds
    builder = SparkSession.builder.master(config.spark_master or "local[2]").appName(app)
    for key, value in {**_SESSION_DEFAULTS, **dict(config.spark_conf),
                       SYSTEM_PATH: config.system_path}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    jvm.load_quietly(spark)   # DataSketches' restricted-mode warning, printed mid-run
    session.enable(spark)
    try:
        yield spark
    finally:
        spark.stop()


class PrintedRuns:
    """The service log of ``accelerator serve``: a line when a job run starts and one when it
    ends (its status, what it did, the reason it failed), each with the time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def started(self, job: Job) -> None:
        """Prints ``<time> <job> (<kind>): started``."""
        self._print(f"{job.name} ({job.kind}): started")

    def finished(self, run: JobRun) -> None:
        """Prints ``<time> <job> (<kind>): <status> in <s> s: <what it did>[; error: ...]``."""
        self._print(run.describe() + (f"; error: {run.error}" if run.error else ""))

    def _print(self, line: str) -> None:
        with self._lock:
            print(f"accelerator serve: {_time(now_ms())} {line}", flush=True)


def _config(args: argparse.Namespace) -> SchedulerConfig:
    """The configuration file of a scheduler command, read and checked (before Spark starts);
    NoConfigError when there is none, ConfigError when it has problems."""
    found = config_file(args.config)
    if found is None:
        raise NoConfigError(f"no configuration file: give --config FILE, set ${CONFIG_VARIABLE}, "
                            f"or write ./{CONFIG_FILE} with `accelerator init`")
    return load_config_file(found)


def serve(args: argparse.Namespace) -> int:
    """``accelerator serve``: takes the system path's lease (or waits for it as a standby),
    runs the jobs until SIGTERM or SIGINT, then stops cleanly and exits 0."""
    from accelerator.context import AcceleratorContext
    from accelerator.scheduler.service import Scheduler

    config = _config(args)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    with config_session(config, "accelerator-serve") as spark:
        scheduler = Scheduler(AcceleratorContext(spark), config, listener=PrintedRuns())
        holder = scheduler.lease.holder()
        if holder is not None and not holder.expired(now_ms()) and args.no_wait:
            print(f"accelerator serve: error: another service runs the jobs of "
                  f"{config.system_path}: {holder.describe(now_ms())}", file=sys.stderr)
            return 1

        def waiting(h: Any) -> None:
            print(f"accelerator serve: the jobs of {config.system_path} are run by "
                  f"{h.describe(now_ms())}; waiting as a standby", file=sys.stderr, flush=True)

        if not scheduler.wait_for_lease(stop, on_wait=waiting):
            return 0
        print(f"accelerator serve: running {len(config.jobs)} job(s) of {config.file} on "
              f"{config.system_path} (pid {os.getpid()})", flush=True)
        while not stop.wait(1.0) and not scheduler.lost_lease:
            pass
        lost = scheduler.lost_lease
        print("accelerator serve: " + ("lost the lease; stopping" if lost else
                                       "stopping: no new runs, running jobs get "
                                       f"{args.grace_seconds:g} s"), flush=True)
        scheduler.shutdown(args.grace_seconds)
        print("accelerator serve: stopped", flush=True)
        return 1 if lost else 0


def list_jobs(args: argparse.Namespace) -> int:
    """``accelerator jobs``: which service runs the jobs (none when no ``serve`` holds the
    system path's lease), then each job with its schedule, last run and next run; without a
    JVM when the system path is local."""

    from accelerator.scheduler.service import job_statuses
    from indexes.events import EventLog
    from indexes.fs.local import LocalFs, is_local

    config = _config(args)
    if is_local(config.system_path):   # events and the lease read in Python: no JVM
        fs = LocalFs()
        statuses = job_statuses(EventLog(fs, config.system_path), config)
        holder = Lease(fs, config.system_path).holder()
    else:
        from accelerator.context import AcceleratorContext

        with config_session(config, "accelerator-jobs") as spark:
            context = AcceleratorContext(spark)
            statuses = job_statuses(context.events(), config)
            holder = Lease(context.fs, config.system_path).holder()
    now = now_ms()
    serving = holder is not None and not holder.expired(now)
    if serving:
        print(f"service: {holder.describe(now)}")
    else:
        print(f"service: none: no `accelerator serve --config {config.file}` holds the lease "
              f"of {config.system_path}" + (f" (the last one: {holder.describe(now)})"
                                            if holder is not None else "")
              + "; the jobs run only while one does")
    for s in statuses:
        print(s.job.describe())
        last = s.last_run
        if last is None:
            print("    last run: never")
        else:
            print(f"    last run: {_time(last['started'])}, {last['status']} in "
                  f"{(last['finished'] - last['started']) / 1000:.1f} s: "
                  f"{last.get('error') or last.get('message') or ''}".rstrip(": "))
        late = (" (past: no service is running)"
                if s.next_run and not serving and s.next_run.timestamp() * 1000 < now else "")
        print(f"    next run: {s.next_run.astimezone(s.job.zone).isoformat() if s.next_run else 'none'}"
              + late)
    return 0


def run_job(args: argparse.Namespace) -> int:
    """``accelerator run-job NAME``: runs one job now, prints what it did; exit 0 when it
    succeeded, else 1."""
    from accelerator.context import AcceleratorContext
    from accelerator.scheduler.jobs import JobRunner

    config = _config(args)
    job = config.job(args.name)
    with config_session(config, f"accelerator-run-job-{args.name}") as spark:
        context = AcceleratorContext(spark)
        run = JobRunner(context, config).run(job)
        context.flush_history()
    print(run.describe())
    if run.error:
        print(f"accelerator run-job: error: {run.error}", file=sys.stderr)
    return 0 if run.status == "succeeded" else 1


def _time(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, timezone.utc).isoformat(timespec="seconds")
