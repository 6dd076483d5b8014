"""Long builds named and followed: an index build or a cache warm-up runs its Spark jobs under a
job description naming it (``accelerator: create covering index 'x' over 32 files (1.2 GB)``),
which the Spark UI's job list and the history server show, and, once it has run longer than
:data:`QUIET_SECONDS`, logs its progress at INFO on the ``accelerator.build`` logger every
:data:`EVERY_SECONDS`: the tasks of its running Spark job done so far and, at the rate so far,
about how long that job has left; then one line when it ends. Builds shorter than that log
nothing, so small builds make no noise.

The build's jobs are found by a job tag of its own (``SparkContext.addJobTag``, Spark 3.5+),
which leaves the thread's job group alone (the scheduler cancels a timed-out job by its group).
Following runs in a daemon thread that only reads Spark's status tracker; any failure there
stops the following, never the build.
"""
from __future__ import annotations

import logging
import threading
import time
import uuid
from contextlib import contextmanager
from typing import Any, Iterator

log = logging.getLogger("accelerator.build")

#: a build is logged only once it has run this long
QUIET_SECONDS = 10.0
#: how often a long build's progress is logged
EVERY_SECONDS = 30.0
#: the longest a build's end waits for its follower to finish a line it is writing
JOIN_SECONDS = 10.0
#: the thread-local Spark property Spark's UI shows as a job's description
DESCRIPTION = "spark.job.description"


@contextmanager
def building(spark: Any, what: str) -> Iterator[None]:
    """Within: this thread's Spark jobs are described as ``accelerator: <what>`` and, past
    :data:`QUIET_SECONDS`, followed in the log (see the module docstring)."""
    sc = spark.sparkContext
    previous = sc.getLocalProperty(DESCRIPTION)
    tag = f"accelerator-build-{uuid.uuid4().hex[:12]}"
    sc.setLocalProperty(DESCRIPTION, f"accelerator: {what}")
    sc.addJobTag(tag)
    started, done = time.monotonic(), threading.Event()
    logged = threading.Event()
    follower = threading.Thread(target=_follow, args=(sc, tag, what, started, done, logged),
                                daemon=True, name="accelerator-build-progress")
    follower.start()
    try:
        yield
    finally:
        done.set()
        follower.join(JOIN_SECONDS)   # its last line, if it was writing one, comes before ours
        sc.removeJobTag(tag)
        sc.setLocalProperty(DESCRIPTION, previous)
        if logged.is_set():
            log.info("%s: finished after %.0f s", what, time.monotonic() - started)


def _follow(sc: Any, tag: str, what: str, started: float, done: threading.Event,
            logged: threading.Event) -> None:
    """Logs the build's progress every :data:`EVERY_SECONDS` after :data:`QUIET_SECONDS`,
    until ``done``."""
    wait, seen = QUIET_SECONDS, {}
    while not done.wait(wait):
        wait = EVERY_SECONDS
        try:
            line = progress(sc, tag, time.monotonic() - started, seen)
        except Exception:   # the status tracker is only read; the build goes on
            log.debug("cannot follow %s", what, exc_info=True)
            return
        log.info("%s: %s", what, line)
        logged.set()


def progress(sc: Any, tag: str, elapsed: float, seen: dict) -> str:
    """How far the Spark jobs tagged ``tag`` are ``elapsed`` seconds into the build: the tasks
    of the running ones done and about how long they have left at their rate since they were
    first seen (``seen``: running job ids → (elapsed, tasks done) then; kept between calls)."""
    tracker = sc.statusTracker()
    ids = sorted(int(i) for i in sc._jsc.sc().statusTracker().getJobIdsForTag(tag))
    running = [j for j in map(tracker.getJobInfo, ids) if j is not None and j.status == "RUNNING"]
    total = completed = 0
    for job in running:
        for stage in filter(None, map(tracker.getStageInfo, job.stageIds)):
            total += stage.numTasks
            completed += stage.numCompletedTasks
    head = f"{elapsed:.0f} s so far, {len(ids)} Spark job(s)"
    if not running or not total:
        return head + ("" if running else ", none running now")
    key = tuple(j.jobId for j in running)
    # jobs first seen now started within the build: its time is an upper bound of theirs
    since, done_then = seen.get(key, (0.0, 0))
    seen.setdefault(key, (elapsed, completed))
    text = (f"{head}; running: {completed} of {total} tasks done "
            f"({completed / total:.0%})")
    left = time_left(total - completed, completed - done_then, elapsed - since)
    return text + (f", about {left:.0f} s left at this rate" if left is not None else "")


def time_left(tasks_left: int, tasks_done: int, seconds: float) -> float | None:
    """Seconds for ``tasks_left`` tasks at the rate of ``tasks_done`` in ``seconds``; None
    when nothing was done yet."""
    if tasks_done <= 0 or seconds <= 0:
        return None
    return tasks_left * seconds / tasks_done
