"""The scheduler: the jobs of one configuration file run by APScheduler 3 in a session, with a
persistent job store and the system path's lease.

- **Job store.** APScheduler's SQLAlchemy store over the SQLite file the configuration names
  (default: beside it). A job keeps its next run time across restarts; a run missed while no
  scheduler ran is run once on start (coalesced) when it is at most the job's
  ``misfireGraceTime`` late, and skipped (logged) when later. A job whose schedule changed in
  the file is rescheduled; one removed from the file is removed from the store.
- **One scheduler per system path.** :meth:`Scheduler.start` takes the system path's lease
  (:mod:`accelerator.scheduler.lease`) and keeps it with a heartbeat; a scheduler that loses it
  stops taking jobs and cancels its running ones. A standby waits for it
  (:meth:`Scheduler.wait_for_lease`).
- **Runs.** At most one run of a job at a time (``max_instances=1``); each run is a
  :class:`accelerator.scheduler.jobs.JobRunner` run: its own Spark job group, the FAIR pool
  ``accelerator-jobs``, its timeout, its event in ``hs.events()``. A failing run never stops
  the scheduler.
"""
from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler

from accelerator.context import AcceleratorContext
from accelerator.scheduler.config import GRACE_SECONDS, Job, JobError, SchedulerConfig, \
    load_config_file
from accelerator.scheduler.jobs import JobRun, JobRunner, RunListener
from accelerator.scheduler.lease import Heartbeat, Lease, LeaseHolder
from indexes.events import EventLog
from indexes.log import now_ms

log = logging.getLogger(__name__)

#: seconds a lease lives without a heartbeat
LEASE_TTL_SECONDS = 30.0
#: runs of different jobs at once
WORKERS = 2
_STORE_TABLE = "accelerator_jobs"
_SCHEDULERS: dict[str, "Scheduler"] = {}   # by job store path: what the stored jobs call
_SCHEDULERS_LOCK = threading.Lock()


class SchedulerError(JobError):
    """A scheduler that cannot start (e.g. another one holds the system path's lease)."""


def fire(store: str, name: str, fingerprint: str = "") -> None:
    """What a stored job calls: runs job ``name`` of the scheduler of job store ``store``
    (``fingerprint`` identifies the job's schedule in the store)."""
    with _SCHEDULERS_LOCK:
        scheduler = _SCHEDULERS.get(store)
    if scheduler is None:
        log.warning("job '%s' fired with no scheduler of %s running", name, store)
        return
    scheduler.run_job(name)


@dataclass(frozen=True)
class JobStatus:
    """One job of a configuration: its last run (its latest event) and next run time."""

    job: Job
    last_run: dict | None
    next_run: datetime | None


class Scheduler:
    """The jobs of ``config`` in ``context``'s session (see the module docstring);
    ``listener`` is told of each run as it starts and ends."""

    def __init__(self, context: AcceleratorContext, config: SchedulerConfig | str | Path,
                 lease_ttl_seconds: float = LEASE_TTL_SECONDS,
                 listener: RunListener | None = None):
        if not isinstance(config, SchedulerConfig):
            config = load_config_file(config)
        fs, session_path = context.fs, context.settings().system_path
        if fs.qualify(config.system_path).rstrip("/") != fs.qualify(session_path).rstrip("/"):
            raise SchedulerError(
                f"{config.file} serves the system path {config.system_path}, but this session's "
                f"spark.accelerator.system.path is {session_path}: set it to "
                f"{config.system_path} before starting the scheduler")
        self.context = context
        self.config = config
        self.runner = JobRunner(context, config, listener)
        self.lease = Lease(fs, session_path, lease_ttl_seconds)
        self._store = str(Path(config.job_store).resolve())
        self._scheduler: BackgroundScheduler | None = None
        self._heartbeat: Heartbeat | None = None
        self._lost = threading.Event()

    # --- lifecycle ------------------------------------------------------------------------
    def start(self) -> "Scheduler":
        """Takes the system path's lease and starts running the jobs in the background;
        SchedulerError naming the holder when another scheduler holds the lease."""
        if not self.lease.try_acquire():
            holder = self.lease.holder()
            raise SchedulerError(
                f"another scheduler runs the jobs of {self.context.settings().system_path}: "
                f"{holder.describe(now_ms()) if holder else 'unknown holder'}; stop it, or "
                "wait for its lease to expire")
        self._begin()
        return self

    def wait_for_lease(self, stop: threading.Event, poll_seconds: float = 1.0,
                       on_wait: Callable[[LeaseHolder], None] | None = None) -> bool:
        """As a standby: waits until the lease is free or expired, then starts (True), or
        until ``stop`` is set (False). ``on_wait`` is told the holder once, when waiting."""
        if not self.lease.wait_and_acquire(stop, poll_seconds, on_wait):
            return False
        self._begin()
        return True

    def _begin(self) -> None:
        self._check_pool()
        with _SCHEDULERS_LOCK:
            if self._store in _SCHEDULERS:
                self.lease.release()
                raise SchedulerError(f"a scheduler of the job store {self._store} already runs "
                                     "in this process")
            _SCHEDULERS[self._store] = self
        Path(self._store).parent.mkdir(parents=True, exist_ok=True)
        self._scheduler = BackgroundScheduler(
            jobstores={"default": SQLAlchemyJobStore(url=f"sqlite:///{self._store}",
                                                     tablename=_STORE_TABLE)},
            executors={"default": ThreadPoolExecutor(WORKERS)},
            job_defaults={"coalesce": True, "max_instances": 1}, timezone=timezone.utc)
        self._scheduler.start(paused=True)
        self._reconcile()
        self._heartbeat = Heartbeat(self.lease, self._on_lease_lost).start()
        self._scheduler.resume()
        log.info("scheduler of %s started: %d jobs", self.config.file, len(self.config.jobs))

    def _reconcile(self) -> None:
        """The store's jobs made the configuration's: unchanged ones keep their next run
        time (so a run missed while stopped still runs), changed ones are rescheduled."""
        wanted = {job.name: job for job in self.config.jobs}
        for stored in self._scheduler.get_jobs():
            if stored.id not in wanted:
                stored.remove()
        for name, job in wanted.items():
            fingerprint = _fingerprint(job)
            stored, args = self._scheduler.get_job(name), [self._store, name]
            if (stored is not None and stored.kwargs.get("fingerprint") == fingerprint
                    and list(stored.args) == args):
                continue
            self._scheduler.add_job(
                fire, trigger=job.trigger(), id=name, name=name, args=args,
                kwargs={"fingerprint": fingerprint}, replace_existing=True, coalesce=True,
                max_instances=1, misfire_grace_time=job.misfire_grace_seconds)

    def _check_pool(self) -> None:
        mode = self.context.spark.sparkContext.getConf().get("spark.scheduler.mode", "FIFO")
        if mode.upper() != "FAIR":
            log.warning("spark.scheduler.mode is %s: the scheduler's Spark jobs queue with the "
                        "session's queries instead of running in the low-weight FAIR pool; "
                        "start the session with spark.scheduler.mode=FAIR", mode)

    def _on_lease_lost(self) -> None:
        log.error("the scheduler lost the lease of %s: it stops taking jobs and cancels its "
                  "running ones", self.context.settings().system_path)
        self._lost.set()
        if self._scheduler is not None:
            self._scheduler.pause()
        self.runner.cancel_running()

    @property
    def lost_lease(self) -> bool:
        """Whether another scheduler took the lease over (this one then runs nothing)."""
        return self._lost.is_set()

    @property
    def running(self) -> bool:
        return self._scheduler is not None

    def shutdown(self, grace_seconds: float = GRACE_SECONDS) -> None:
        """Stops taking jobs, gives running ones ``grace_seconds`` to finish, cancels the Spark
        jobs of those still running (their events say cancelled), writes the buffered query
        history and releases the lease."""
        if self._scheduler is None:
            return
        self._scheduler.pause()
        deadline = time.monotonic() + grace_seconds
        while self.runner.busy() and time.monotonic() < deadline:
            time.sleep(0.2)
        self.runner.cancel_running()
        # a stopping APScheduler 3 processes the due jobs once more (it only skips that while
        # paused), advancing them without running them: detach the store first
        self._scheduler.remove_jobstore("default")
        self._scheduler.shutdown(wait=True)
        self._scheduler = None
        with _SCHEDULERS_LOCK:
            _SCHEDULERS.pop(self._store, None)
        if self._heartbeat is not None:
            self._heartbeat.stop()
        try:
            self.context.flush_history()
        except Exception:  # noqa: BLE001 - stopping anyway
            log.warning("could not write the query history", exc_info=True)
        if not self._lost.is_set():
            self.lease.release()
        log.info("scheduler of %s stopped", self.config.file)

    # --- runs -----------------------------------------------------------------------------
    def run_job(self, name: str, now: datetime | None = None) -> JobRun:
        """Runs job ``name`` now, in the calling thread; JobError for an unknown name."""
        job = self.config.job(name)
        if self._lost.is_set():
            raise SchedulerError(f"job '{name}' not run: this scheduler lost the lease")
        return self.runner.run(job, now)

    def jobs(self) -> list[JobStatus]:
        """Each job with its last run and next run time (from the running scheduler, else
        the job store, else its schedule)."""
        return job_statuses(self.context.events(), self.config, self._scheduler)


def job_statuses(events: EventLog, config: SchedulerConfig,
                 scheduler: BackgroundScheduler | None = None) -> list[JobStatus]:
    """The jobs of ``config`` with their last runs (from the system path's ``events``) and
    next run times (``scheduler``'s, else the job store's when it has the job, else the next
    time its schedule gives)."""
    last: dict[str, dict] = {}
    for event in events.read():
        if event.get("job"):
            last[event["job"]] = event
    stored = _stored_next_runs(config) if scheduler is None else {
        j.id: j.next_run_time for j in scheduler.get_jobs()}
    out = []
    for job in config.jobs:
        next_run = stored[job.name] if job.name in stored else (job.next_runs(1) or [None])[0]
        out.append(JobStatus(job, last.get(job.name), next_run))
    return out


def _stored_next_runs(config: SchedulerConfig) -> dict[str, datetime | None]:
    """The next run times the job store holds for the configuration's unchanged jobs."""
    path = Path(config.job_store)
    if not path.exists():
        return {}
    store = SQLAlchemyJobStore(url=f"sqlite:///{path.resolve()}", tablename=_STORE_TABLE)
    store.start(BackgroundScheduler(timezone=timezone.utc), "default")
    try:
        jobs = {j.id: j for j in store.get_all_jobs()}
    finally:
        store.shutdown()
    return {job.name: jobs[job.name].next_run_time for job in config.jobs
            if job.name in jobs and jobs[job.name].kwargs.get("fingerprint") == _fingerprint(job)}


def _fingerprint(job: Job) -> str:
    """What a stored job's schedule depends on."""
    schedule = [job.cron, job.interval_seconds, job.timezone, job.misfire_grace_seconds]
    return hashlib.sha256(json.dumps(schedule).encode()).hexdigest()[:16]
