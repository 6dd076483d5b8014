"""The scheduler's jobs in the test session: the morning-report warm-up over the last days'
partitions of a JSON source (the report then reads only cache files and returns vanilla's rows),
each run's event in hs.events(), a failing and a timed-out job (recorded, the scheduler goes on),
interval jobs firing, and a restart with missed runs (exactly one catch-up run within the grace
time, none beyond it)."""
from __future__ import annotations

import time
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from pyspark.sql import functions as F

from accelerator.scheduler import jobs as jobs_mod
from accelerator.scheduler.config import JobError, load_config
from accelerator.scheduler.service import Scheduler, SchedulerError, job_statuses
from tests.helpers import eventually, rows, vanilla

PARIS = ZoneInfo("Europe/Paris")
#: 06:30 in Paris on a Tuesday; in UTC it is still 05:30 of the same day
NOW = datetime(2026, 11, 24, 6, 30, tzinfo=PARIS)
DAYS = [date(2026, 11, 24) - timedelta(days=n) for n in range(5)]   # today and 4 days before


@pytest.fixture(scope="module")
def clickstream(spark, tmp_path_factory):
    """A raw JSON landing zone partitioned by event_date: 5 days, 2 gzip files each."""
    path = str(tmp_path_factory.mktemp("raw") / "clickstream")
    for n, day in enumerate(DAYS):
        (spark.range(n * 1000, (n + 1) * 1000, numPartitions=2)
         .select(F.col("id"), (F.col("id") % 37).alias("user"),
                 F.concat(F.lit("/page/"), F.col("id") % 11).alias("url"))
         .write.option("compression", "gzip").json(f"{path}/event_date={day}"))
    return path


def _config(tmp_path, system_path, body: str):
    text = f"version: 1\nsystemPath: {system_path}\n{body}"
    path = tmp_path / "accelerator.yaml"
    path.write_text(text)
    return load_config(text, str(path))


def _job_events(hs, job: str) -> list:
    return [e for e in hs.events().collect() if e["job"] == job]


@pytest.mark.compat
def test_morning_report_warms_the_last_three_days_and_the_report_reads_only_the_cache(
        spark, hs, system_path, clickstream, tmp_path):
    config = _config(tmp_path, system_path, f"""
rules:
  - {{source: "{clickstream}", kind: cache, columns: [user, url], format: json}}
jobs:
  - name: morning-report
    kind: warmup
    source: "{clickstream}"
    partitions: {{column: event_date, lastDays: 3}}
    cron: "30 6 * * 1-5"
    timezone: Europe/Paris
    timeout: PT45M
""")
    scheduler = Scheduler(hs.context, config)
    run = scheduler.run_job("morning-report", now=NOW)
    assert run.status == "succeeded", run.error
    assert run.read.files == 6 and run.written.files == 6       # 3 days x 2 files
    assert "2026-11-22..2026-11-24" in run.message

    cached_days = {e["file"].split("event_date=")[1].split("/")[0]
                   for e in hs.cacheEntries().collect()}
    assert cached_days == {"2026-11-22", "2026-11-23", "2026-11-24"}

    def report():
        return (spark.read.json(clickstream)
                .where(F.col("event_date") >= F.lit("2026-11-22").cast("date"))
                .groupBy("url").agg(F.count("*").alias("n"), F.countDistinct("user").alias("u")))
    # the window's days come from the cache; the source files listed are the older days',
    # which partition pruning skips
    from_source = {f.split("event_date=")[1].split("/")[0]
                   for f in report().inputFiles() if "/_cache/" not in f}
    assert from_source <= {"2026-11-20", "2026-11-21"}
    # the 6 files' rows in packs: one Parquet file per task and day (at least one per day)
    assert 3 <= sum("/_cache/" in f for f in report().inputFiles()) <= 6
    assert rows(report()) == vanilla(spark, report)

    events = _job_events(hs, "morning-report")
    assert len(events) == 1
    e = events[0]
    assert (e["operation"], e["status"], e["error"]) == ("warmup", "succeeded", None)
    assert (e["input"]["files"], e["output"]["files"]) == (6, 6)
    assert e["output"]["bytes"] > 0 and "warmed 6 files" in e["message"]
    status = {s.job.name: s for s in scheduler.jobs()}["morning-report"]
    assert status.last_run["status"] == "succeeded"
    # the next run: Wednesday 06:30 in Paris
    assert status.next_run.astimezone(PARIS).hour == 6 and status.next_run.minute == 30


@pytest.mark.compat
def test_a_failing_job_and_a_timed_out_job_are_recorded(spark, hs, system_path, tmp_path,
                                                        monkeypatch):
    config = _config(tmp_path, system_path, """
jobs:
  - {name: refresh-missing, kind: refresh, interval: PT1H, indexes: [no_such_index]}
  - {name: slow, kind: evict, interval: PT1H, timeout: PT2S}
""")

    def slow_evict(runner, job, now):   # a Spark job far longer than the timeout
        runner.context.spark.range(2, numPartitions=2).rdd.map(
            lambda x: time.sleep(120) or x).collect()
        return jobs_mod.Work()
    monkeypatch.setitem(jobs_mod.KIND_WORK, "evict", slow_evict)
    scheduler = Scheduler(hs.context, config)

    failed = scheduler.run_job("refresh-missing")
    assert failed.status == "failed"
    assert failed.error == "no_such_index: no ACTIVE index of that name"
    timed_out = scheduler.run_job("slow")
    assert timed_out.status == "timed out"
    assert timed_out.error.startswith("timed out after PT2S: ")
    assert "cancel" in timed_out.error.lower()    # Spark's own error: the job was cancelled
    # the session still runs queries, outside any job group
    assert spark.range(10).count() == 10
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None
    recorded = {e["job"]: e for e in hs.events().collect() if e["job"]}
    assert recorded["refresh-missing"]["status"] == "failed"
    assert recorded["slow"]["status"] == "timed out"
    with pytest.raises(JobError, match="no job named 'nope'.*refresh-missing, slow"):
        scheduler.run_job("nope")


def test_interval_jobs_fire_and_a_failing_job_does_not_stop_the_scheduler(
        spark, hs, system_path, tmp_path):
    config = _config(tmp_path, system_path, """
jobs:
  - {name: evict, kind: evict, interval: PT1S}
  - {name: broken, kind: optimize, interval: PT1S, indexes: [missing]}
""")
    scheduler = hs.scheduler(config.file).start()   # in the user's session
    try:
        assert eventually(lambda: len(_job_events(hs, "evict")) >= 2
                          and len(_job_events(hs, "broken")) >= 2, 30)
    finally:
        scheduler.shutdown()
    assert {e["status"] for e in _job_events(hs, "broken")} == {"failed"}
    assert {e["status"] for e in _job_events(hs, "evict")} == {"succeeded"}
    count = len(_job_events(hs, "evict"))
    time.sleep(1.5)
    assert len(_job_events(hs, "evict")) == count     # stopped: no more runs


def _set_next_run(store: str, name: str, when: datetime) -> None:
    """Sets a stored job's next run time, as if the scheduler had been down since."""
    scheduler = BackgroundScheduler(
        jobstores={"default": SQLAlchemyJobStore(url=f"sqlite:///{store}",
                                                 tablename="accelerator_jobs")},
        timezone=timezone.utc)
    scheduler.start(paused=True)
    scheduler.modify_job(name, next_run_time=when)
    scheduler.remove_jobstore("default")   # else stopping processes the now due job
    scheduler.shutdown()


def test_a_restart_runs_a_missed_run_once_within_its_grace_time(spark, hs, system_path,
                                                                tmp_path):
    # the daily run falls half a day from now, so none of its occurrences lies in the two hours
    # the scheduler was down (a fixed hour would fire within its grace time on some clocks)
    hour = (datetime.now(timezone.utc) + timedelta(hours=12)).hour
    config = _config(tmp_path, system_path, f"""
jobs:
  - {{name: every-minute, kind: evict, interval: PT1M}}
  - {{name: nightly, kind: evict, cron: "0 {hour} * * *", misfireGraceTime: PT1H}}
""")
    Scheduler(hs.context, config).start().shutdown()
    assert _job_events(hs, "every-minute") == []
    store = str(config.job_store)
    now = datetime.now(timezone.utc)
    _set_next_run(store, "every-minute", now - timedelta(minutes=4, seconds=30))   # 5 missed
    _set_next_run(store, "nightly", now - timedelta(hours=2))                      # too late
    listed = {s.job.name: s.next_run for s in job_statuses(hs.context.events(), config)}
    assert listed["every-minute"] < now
    scheduler = Scheduler(hs.context, config).start()
    try:
        assert eventually(lambda: len(_job_events(hs, "every-minute")) >= 1, 30)
        time.sleep(2)
    finally:
        scheduler.shutdown()
    assert len(_job_events(hs, "every-minute")) == 1   # coalesced: once, not five times
    assert _job_events(hs, "nightly") == []            # two hours late: past its grace time
    # the nightly job keeps its schedule: its next run is the next occurrence of its hour
    nxt = {s.job.name: s.next_run for s in job_statuses(hs.context.events(), config)}["nightly"]
    assert nxt > now and (nxt.hour, nxt.minute) == (hour, 0)


def test_one_scheduler_per_system_path(spark, hs, system_path, tmp_path):
    config = _config(tmp_path, system_path, "jobs:\n  - {name: evict, kind: evict, interval: PT1H}\n")
    first = Scheduler(hs.context, config).start()
    try:
        with pytest.raises(SchedulerError, match=r"another scheduler runs the jobs of .*pid"):
            Scheduler(hs.context, config).start()
    finally:
        first.shutdown()
    Scheduler(hs.context, config).start().shutdown()   # released: the next one starts


def test_the_configuration_must_serve_the_sessions_system_path(spark, hs, tmp_path):
    config = _config(tmp_path, str(tmp_path / "elsewhere"),
                     "jobs:\n  - {name: evict, kind: evict, interval: PT1H}\n")
    with pytest.raises(SchedulerError, match="elsewhere, but this session's "
                                             "spark.accelerator.system.path is"):
        hs.scheduler(config.file)


def test_a_background_warmup_cuts_its_files_into_runs_of_bounded_bytes():
    from accelerator.cache.warmup import chunks
    assert chunks([3, 5, 7, 9], [40, 40, 40, 40], 100) == [[3, 5], [7, 9]]
    assert chunks([1, 2, 3], [150, 10, 95], 100) == [[1], [2], [3]]   # a larger file alone
    assert chunks([], [], 100) == []
