"""One run of a scheduler job in a session: what each kind does, its Spark job group, pool and
timeout, and the event it records.

Kinds (:data:`accelerator.scheduler.config.JOB_KINDS`):

- ``warmup``: for each source matching the job's ``source`` (those the query history read, or
  a rule says how to read), caches what its cache rules name (the job's ``columns``,
  ``priority`` and ``ttl`` override theirs; without a cache rule, the columns the job names or
  all of them) over the job's ``partitions`` window (today in the job's time zone and the days
  before), and builds the indexes its index rules name that do not exist yet;
- ``advise``: the rule engine's recommendations from the history and the configuration's rules,
  carried out when ``apply`` is true (the recorded queries it skipped, and why, in its message);
- ``refresh``: the job's ``indexes`` (default: every ACTIVE index) brought up to date with
  their sources in the job's mode (an index whose source did not change costs one listing);
- ``optimize``: the compaction of the ACTIVE indexes whose kind compacts (covering);
- ``evict``: the cache's demoter;
- ``vacuum``: the data versions of ACTIVE indexes replaced more than ``retention`` ago.

A run's Spark jobs carry a job group of their own (cancelled with ``interruptOnCancel`` when
the run passes its ``timeout`` or the service stops) and run in the FAIR pool
:data:`accelerator.runtime.settings.JOBS_POOL`.
Every run writes one event into the system path's event log (``hs.events()``): its
``operation`` is the kind, ``job`` the job's name, ``status`` succeeded, failed, timed out or
cancelled. A run never raises: its failure is its event.
"""
from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Protocol

from pyspark.sql import functions as F

from accelerator.context import AcceleratorContext
from accelerator.engine.advisor import Advisor, error_line
from accelerator.runtime.settings import JOBS_POOL, POOL_PROPERTY
from accelerator.scheduler.config import Job, JobError, SchedulerConfig, partition_window
from indexes import kinds
from indexes.kind import IoStats
from indexes.log import IndexState, now_ms
from rules.instructions import Instruction
from rules.terms import format_duration

log = logging.getLogger(__name__)

SUCCEEDED, FAILED, TIMED_OUT, CANCELLED = "succeeded", "failed", "timed out", "cancelled"
_CANCEL_EVERY_SECONDS = 1.0


@dataclass(frozen=True)
class JobRun:
    """What one run of a job did: the event it recorded."""

    job: str
    kind: str
    status: str
    started_ms: int
    finished_ms: int
    read: IoStats = IoStats()
    written: IoStats = IoStats()
    message: str = ""
    error: str | None = None

    @property
    def seconds(self) -> float:
        return (self.finished_ms - self.started_ms) / 1000

    def describe(self) -> str:
        """One line for people: ``<job> (<kind>): <status> in <s> s: <what it did>``."""
        return (f"{self.job} ({self.kind}): {self.status} in {self.seconds:.1f} s"
                + (f": {self.message}" if self.message else ""))


class RunListener(Protocol):
    """Told of each run as it starts and when it has ended (``accelerator serve`` prints a
    line for each); called in the run's thread, its failures are logged and ignored."""

    def started(self, job: Job) -> None:
        """``job`` starts running."""

    def finished(self, run: JobRun) -> None:
        """A run ended (its event is recorded)."""


@dataclass
class Work:
    """What a kind's work did: what it read and wrote, one sentence, and the failures of its
    parts (the others still ran)."""

    read: IoStats = IoStats()
    written: IoStats = IoStats()
    message: str = ""
    failures: list[str] = field(default_factory=list)


class _Watchdog:
    """Cancels a job group when a run passes its timeout (again every second, so Spark jobs
    that start later are cancelled too) or when asked, until stopped."""

    def __init__(self, cancel: Callable[[], None], timeout_seconds: int | None):
        self._cancel = cancel
        self._deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
        self._stop = threading.Event()
        self.fired: str | None = None   # TIMED_OUT or CANCELLED once it cancelled
        self._thread = threading.Thread(target=self._watch, daemon=True,
                                        name="accelerator-job-watchdog")
        self._thread.start()

    def cancel(self, why: str = CANCELLED) -> None:
        self.fired = self.fired or why
        self._cancel_quietly()

    def _watch(self) -> None:
        while not self._stop.is_set():
            if self._deadline is not None and time.monotonic() >= self._deadline:
                self.fired = self.fired or TIMED_OUT
            if self.fired:
                self._cancel_quietly()
            wait = _CANCEL_EVERY_SECONDS if self.fired or self._deadline is None else max(
                0.0, min(_CANCEL_EVERY_SECONDS, self._deadline - time.monotonic()))
            self._stop.wait(wait)

    def _cancel_quietly(self) -> None:
        try:
            self._cancel()
        except Exception:  # noqa: BLE001 - the session may be stopping
            log.debug("cancelling a job group failed", exc_info=True)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class JobRunner:
    """Runs the jobs of one configuration in one session (``context``'s); safe to call from
    several threads (each run has its own job group)."""

    def __init__(self, context: AcceleratorContext, config: SchedulerConfig,
                 listener: RunListener | None = None):
        self.context = context
        self.config = config
        self.listener = listener
        self.advisor = Advisor(context, rules=config.rules)
        self._running: dict[str, _Watchdog] = {}
        self._lock = threading.Lock()

    def run(self, job: Job, now: datetime | None = None) -> JobRun:
        """Runs ``job`` now (``now``: the time its partition window is resolved at; default
        the current time), records its event and returns it; never raises."""
        sc = self.context.spark.sparkContext
        group = f"accelerator-job-{job.name}-{uuid.uuid4().hex[:8]}"
        watchdog = _Watchdog(lambda: sc.cancelJobGroup(group), job.timeout_seconds)
        with self._lock:
            self._running[group] = watchdog
        started = now_ms()
        self._tell(lambda listener: listener.started(job))
        sc.setJobGroup(group, f"accelerator job '{job.name}' ({job.kind})",
                       interruptOnCancel=True)
        sc.setLocalProperty(POOL_PROPERTY, JOBS_POOL)
        error = None
        try:
            did = KIND_WORK[job.kind](self, job, now)
            if watchdog.fired:
                error = f"the run was {watchdog.fired} (after its Spark jobs were cancelled)"
            elif did.failures:
                error = "; ".join(did.failures)
        except Exception as exc:  # noqa: BLE001 - a failed run is its event
            did = Work()
            error = f"{type(exc).__name__}: {error_line(exc)}"
            log.warning("accelerator job '%s' failed: %s", job.name, error,
                        exc_info=not watchdog.fired)
        finally:
            watchdog.stop()
            with self._lock:
                self._running.pop(group, None)
            for key in ("spark.jobGroup.id", "spark.job.description",
                        "spark.job.interruptOnCancel", POOL_PROPERTY):
                sc.setLocalProperty(key, None)
        if timeout := (watchdog.fired == TIMED_OUT and job.timeout_seconds):
            error = f"timed out after {format_duration(timeout)}: {error}"
        status = watchdog.fired or (FAILED if error else SUCCEEDED)
        run = JobRun(job.name, job.kind, status, started, now_ms(), did.read, did.written,
                     did.message, error)
        self._record(job, run)
        self._tell(lambda listener: listener.finished(run))
        return run

    def _tell(self, call: Callable[[RunListener], None]) -> None:
        if self.listener is None:
            return
        try:
            call(self.listener)
        except Exception:  # noqa: BLE001 - a listener never fails a run
            log.warning("a job run listener failed", exc_info=True)

    def busy(self) -> bool:
        """Whether a run is in progress."""
        with self._lock:
            return bool(self._running)

    def cancel_running(self) -> int:
        """Cancels the Spark jobs of every run in progress (they end as ``cancelled``);
        returns how many runs there were."""
        with self._lock:
            running = list(self._running.values())
        for watchdog in running:
            watchdog.cancel()
        return len(running)

    def _record(self, job: Job, run: JobRun) -> None:
        try:
            self.context.events().write(
                job.kind, None, job.mode or "", run.started_ms, run.finished_ms, None,
                run.read.to_json(), run.written.to_json(), error=run.error,
                message=run.message, job=job.name, status=run.status)
        except Exception:  # noqa: BLE001 - the run itself is over
            log.warning("could not record the run of job '%s'", job.name, exc_info=True)

    # --- the kinds ------------------------------------------------------------------------
    def _warmup(self, job: Job, now: datetime | None) -> Work:
        rules = self.advisor.rules()
        sources = [s for s in self.advisor.sources_matching(job.source)
                   if rules.never(s) is None]
        if not sources:
            raise JobError(f"no source matches '{job.source}': the query history read none and "
                           "no rule names one with its format")
        window = partition_window(job, now)
        wanted = self.advisor.rule_instructions(job.source)
        read = written = files = 0
        created, failures = [], []
        for source in sources:
            mine = [i for i in wanted if i.source == source]
            caches = [i for i in mine if i.action == "cache"] or [Instruction(
                "cache", "cache", source, job.columns, priority=rules.default_priority,
                ttl_seconds=rules.default_ttl_seconds, origin="user")]
            try:
                df = self.advisor.source_df(source)
                if window is not None:
                    df = _within(df, job.partitions.column, *window)
                for i in caches:
                    warmed = self.context.cache.cache(
                        df, list(job.columns or i.columns) or None,
                        (job.priority or i.priority).name, _ttl(job.ttl_seconds or i.ttl_seconds))
                    files += warmed.files
                    read += warmed.bytes_read
                    written += warmed.bytes_written
            except Exception as exc:  # noqa: BLE001 - the other sources still warm
                failures.append(f"{source}: {type(exc).__name__}: {error_line(exc)}")
            for a in self.advisor.apply([i for i in mine if i.action == "create"]):
                (created if a.applied else failures).append(f"{a.instruction.name}: {a.message}")
        days = f" over {window[0]}..{window[1]}" if window else ""
        message = (f"warmed {files} files of {len(sources)} source(s){days}: {read} bytes read, "
                   f"{written} written")
        if created:
            message += f"; created {', '.join(created)}"
        return Work(IoStats(files, read), IoStats(files, written), message, failures)

    def _advise(self, job: Job, now: datetime | None) -> Work:
        found = self.advisor.recommend()
        instructions = [i for i in found if i.action != "skip"]
        skipped = "".join(f"; {i.reason}" for i in found if i.action == "skip")
        if not job.apply:
            said = "; ".join(f"{i.action} {i.kind} on {i.source}" for i in instructions)
            return Work(message=f"{len(instructions)} recommendation(s)" +
                        (f": {said}" if said else "") + skipped)
        applied = self.advisor.apply(instructions)
        done = [_what(a.instruction) for a in applied if a.applied]
        failures = [f"{_what(a.instruction)}: {a.message}" for a in applied if not a.applied]
        return Work(message=f"{len(instructions)} recommendation(s), {len(done)} applied" +
                    (f": {'; '.join(done)}" if done else "") + skipped, failures=failures)

    def _refresh(self, job: Job, now: datetime | None) -> Work:
        return self._each_index(job, lambda e: True,
                                lambda name: self.context.indexes.refresh(name, job.mode), "refreshed")

    def _optimize(self, job: Job, now: datetime | None) -> Work:
        return self._each_index(job, lambda e: getattr(kinds.kind_of(e), "compacts", False),
                                lambda name: self.context.indexes.optimize(name, job.mode), "optimized")

    def _vacuum(self, job: Job, now: datetime | None) -> Work:
        return self._each_index(job, lambda e: True,
                                lambda name: self.context.indexes.vacuum(name, job.retention_seconds),
                                "vacuumed")

    def _each_index(self, job: Job, eligible: Callable, operation: Callable,
                    verb: str) -> Work:
        """``operation`` on each ACTIVE index (of the job's ``indexes`` when it names some)
        that is ``eligible``; each one's failure is reported, the others still run."""
        entries = [e for e in self.context.lifecycle().list()
                   if e.state is IndexState.ACTIVE and eligible(e)
                   and (not job.indexes or e.name in job.indexes)]
        unknown = sorted(set(job.indexes) - {e.name for e in entries})
        failures = [f"{name}: no ACTIVE index of that name" for name in unknown]
        read, written, done = IoStats(), IoStats(), []
        for e in entries:
            try:
                result = operation(e.name)
            except Exception as exc:  # noqa: BLE001 - the other indexes still run
                failures.append(f"{e.name}: {type(exc).__name__}: {error_line(exc)}")
                continue
            if result.status != "noop":
                done.append(e.name)
                read, written = _plus(read, result.read), _plus(written, result.written)
        message = f"{verb} {len(done)} of {len(entries)} index(es)" + (
            f": {', '.join(done)}" if done else "")
        return Work(read, written, message, failures)

    def _evict(self, job: Job, now: datetime | None) -> Work:
        evicted = self.context.cache.evict()
        freed = sum(ev.entry.bytes for ev in evicted)
        return Work(written=IoStats(len(evicted), freed),
                    message=f"evicted {len(evicted)} cache entries ({freed} bytes)")


#: what a run of each job kind does
KIND_WORK: dict[str, Callable[[JobRunner, Job, datetime | None], Work]] = {
    "warmup": JobRunner._warmup, "advise": JobRunner._advise, "refresh": JobRunner._refresh,
    "optimize": JobRunner._optimize, "evict": JobRunner._evict, "vacuum": JobRunner._vacuum,
}


def _within(df, column: str, first, last):
    """``df``'s rows whose partition ``column`` is between the dates ``first`` and ``last``."""
    if column not in df.columns:
        raise JobError(f"the source has no partition column '{column}' (its columns: "
                       f"{', '.join(df.columns)})")
    return df.where(F.col(column).between(F.lit(first), F.lit(last)))


def _what(i: Instruction) -> str:
    """An instruction in a job's message: its action, kind and index name (else source)."""
    return f"{i.action} {i.kind} {i.name or i.source}"


def _ttl(seconds: int | None) -> str | None:
    return format_duration(seconds) if seconds else None


def _plus(a: IoStats, b: IoStats) -> IoStats:
    return dataclasses.replace(a, files=a.files + b.files, bytes=a.bytes + b.bytes)


