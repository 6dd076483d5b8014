"""The scheduler's configuration file without a JVM: crontab's meaning (days of the week from
Sunday = 0) checked through the triggers' next fire times, interval triggers, next runs, partition
windows across time zones, and every problem with its file, line and column."""
from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from accelerator.scheduler.config import ConfigError, Job, load_config, load_config_file, \
    partition_window
from accelerator.scheduler.cron import crontab_trigger, time_zone
from rules.terms import Priority
from rules.user_rules import PartitionWindow, RulesError, load_rules

EXAMPLE = Path(__file__).resolve().parent.parent / "configs" / "accelerator.yaml"
UTC = timezone.utc
WEDNESDAY_NOON = datetime(2026, 1, 7, 12, 0, tzinfo=UTC)
MONDAY, TUESDAY, WEDNESDAY, THURSDAY, FRIDAY, SATURDAY, SUNDAY = range(7)   # date.weekday()


def fires(expr: str, n: int = 1, tz: str = "UTC", now: datetime = WEDNESDAY_NOON
          ) -> list[datetime]:
    """The first ``n`` fire times of the crontab expression after ``now``."""
    trigger, out = crontab_trigger(expr, tz), []
    while len(out) < n:
        previous = out[-1] if out else None
        out.append(trigger.get_next_fire_time(previous, previous or now))
    return out


def weekdays(expr: str) -> set[int]:
    """The days of the week the expression fires on, over two weeks of daily fires."""
    return {f.weekday() for f in fires(expr, 14)}


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as found:
        load_config(text, "jobs.yaml")
    return [str(p) for p in found.value.problems]


def config(jobs: str, head: str = "") -> str:
    """A configuration file: version (line 1), system path (line 2), ``head``, then ``jobs``."""
    return "version: 1\nsystemPath: /sys\n" + head + "jobs:\n" + jobs


# --- crontab's meaning ----------------------------------------------------------------------
def test_day_of_week_numbers_are_crontabs_sunday_zero_not_apschedulers_monday_zero():
    assert WEDNESDAY_NOON.weekday() == WEDNESDAY
    monday = fires("30 6 * * 1")[0]
    assert monday == datetime(2026, 1, 12, 6, 30, tzinfo=ZoneInfo("UTC"))
    assert monday.weekday() == MONDAY
    # the pitfall: APScheduler 3's own reading of the same text fires on Tuesdays
    assert CronTrigger.from_crontab("30 6 * * 1", "UTC").get_next_fire_time(
        None, WEDNESDAY_NOON).weekday() == TUESDAY
    assert fires("0 0 * * 0")[0] == datetime(2026, 1, 11, tzinfo=ZoneInfo("UTC"))
    assert fires("0 0 * * 0")[0].weekday() == SUNDAY
    assert fires("* * * * 7")[0] == datetime(2026, 1, 11, tzinfo=ZoneInfo("UTC"))
    assert weekdays("0 0 * * 0") == weekdays("0 0 * * 7") == {SUNDAY}


@pytest.mark.parametrize("expr, days", [
    ("0 9 * * 1-5", {MONDAY, TUESDAY, WEDNESDAY, THURSDAY, FRIDAY}),
    ("0 9 * * sun", {SUNDAY}),
    ("0 9 * * MON,fri", {MONDAY, FRIDAY}),
    ("0 9 * * mon-fri", {MONDAY, TUESDAY, WEDNESDAY, THURSDAY, FRIDAY}),
    ("0 9 * * 5-7", {FRIDAY, SATURDAY, SUNDAY}),              # 7 is Sunday too
    ("0 9 * * 6-0", {SATURDAY, SUNDAY}),                      # wraps past Saturday
    ("0 9 * * fri-mon", {FRIDAY, SATURDAY, SUNDAY, MONDAY}),
    ("0 9 * * */2", {SUNDAY, TUESDAY, THURSDAY, SATURDAY}),   # 0, 2, 4, 6
    ("0 9 * * 1-5/2", {MONDAY, WEDNESDAY, FRIDAY}),
    ("0 9 * * 0-7", set(range(7))),
    ("0 9 */2 * *", set(range(7))),                           # a day-of-month step, every weekday
])
def test_days_of_week(expr, days):
    assert weekdays(expr) == days


def test_the_trigger_names_days_as_apscheduler_does():
    trigger = crontab_trigger("30 6 * * 1-5", "Europe/Paris")
    assert str(trigger) == ("cron[month='*', day='*', day_of_week='mon-fri', hour='6', "
                            "minute='30']")
    assert trigger.timezone == ZoneInfo("Europe/Paris")
    assert "day_of_week='mon,fri-sun'" in str(crontab_trigger("0 0 * * 5-1"))


def test_minutes_hours_days_and_months():
    assert [f.minute for f in fires("*/15 * * * *", 5)] == [0, 15, 30, 45, 0]   # from now on
    assert [f.hour for f in fires("0 */6 * * *", 4)] == [12, 18, 0, 6]
    assert [(f.month, f.day) for f in fires("0 0 1 jan,jul *", 3)] == [(7, 1), (1, 1), (7, 1)]
    assert [f.day for f in fires("0 0 10-20/5 * *", 3)] == [10, 15, 20]
    assert [f.minute for f in fires("50/5 12 * * *", 3)] == [50, 55, 50]
    assert fires("0 0 29 2 *")[0] == datetime(2028, 2, 29, tzinfo=ZoneInfo("UTC"))


def test_fire_times_are_local_across_a_daylight_saving_change():
    runs = fires("30 6 * * 1-5", 2, "Europe/Paris", datetime(2026, 3, 27, 12, tzinfo=UTC))
    assert [r.isoformat() for r in runs] == ["2026-03-30T06:30:00+02:00",
                                             "2026-03-31T06:30:00+02:00"]
    before = fires("30 6 * * 1-5", 1, "Europe/Paris", datetime(2026, 3, 26, 12, tzinfo=UTC))
    assert before[0].isoformat() == "2026-03-27T06:30:00+01:00"


@pytest.mark.parametrize("expr, message", [
    ("", "expected 5 fields (minute hour day-of-month month day-of-week), got 0"),
    ("0 6 * * * *", "expected 5 fields (minute hour day-of-month month day-of-week), got 6"),
    ("60 * * * *", "minute 60 is out of range 0-59"),
    ("* 24 * * *", "hour 24 is out of range 0-23"),
    ("* * 0 * *", "day of month 0 is out of range 1-31"),
    ("* * * 13 *", "month 13 is out of range 1-12"),
    ("* * * * 8", "day of week 8 is out of range 0-7"),
    ("* * * * thurs", "day of week 'thurs' is not a number or a name (did you mean 'thu'?)"),
    ("* * * juli *", "month 'juli' is not a number or a name (did you mean 'jul'?)"),
    ("x * * * *", "minute 'x' is not a number (expected 0-59)"),
    ("* 22-2 * * *", "the hour range '22-2' goes backwards; write 22-23,0-2"),
    ("*/0 * * * *", "the step of minute '*/0' must be a whole number of at least 1"),
    ("1,,2 * * * *", "minute '1,,2' has an empty item"),
    ("1-2-3 * * * *", "minute '1-2-3' is not a value or a range a-b"),
    ("0 0 1 * 1", "crontab runs it on the days matching either the day of month (1) or the day "
                  "of week (1), which this scheduler cannot do: put '*' in one of them, or "
                  "write two jobs"),
    ("0 0 31 4,6 *", "it never fires: no month it names has a day 31"),
])
def test_invalid_expressions(expr, message):
    with pytest.raises(ValueError) as found:
        crontab_trigger(expr)
    assert str(found.value) == f"invalid cron expression '{expr}': {message}"


def test_time_zones():
    assert time_zone("Asia/Tokyo") == ZoneInfo("Asia/Tokyo")
    assert fires("0 6 * * *", 1, "Asia/Tokyo")[0].astimezone(UTC) == \
        datetime(2026, 1, 7, 21, tzinfo=UTC)
    with pytest.raises(ValueError, match="unknown time zone 'europe/paris': did you mean "
                                         "'Europe/Paris'\\? expected an IANA name"):
        time_zone("europe/paris")
    for name in ("Europe", "", "../etc/passwd", "localtime"):
        with pytest.raises(ValueError, match="unknown time zone"):
            time_zone(name)


# --- the example ----------------------------------------------------------------------------
def test_the_example_loads_cleanly():
    found = load_config_file(EXAMPLE)
    assert found.system_path == "/lake/_accelerator" and found.spark_master == "local[2]"
    assert found.spark_conf == (("spark.driver.memory", "4g"),)
    assert found.job_store == EXAMPLE.parent / "accelerator.jobs.sqlite"   # beside the file
    cache, never = found.rules.rules
    assert cache.kind == "cache" and cache.partitions == PartitionWindow("event_date", 3)
    assert never.never and found.rules.default_ttl_seconds == 7 * 86400
    jobs = {job.name: job for job in found.jobs}
    assert [j.kind for j in found.jobs] == ["warmup", "advise", "refresh", "optimize", "evict",
                                            "vacuum"]
    report = jobs["morning-report"]
    assert (report.source, report.partitions) == ("/lake/raw/clickstream/*",
                                                  PartitionWindow("event_date", 3))
    assert (report.cron, report.timezone, report.timeout_seconds,
            report.misfire_grace_seconds) == ("30 6 * * 1-5", "Europe/Paris", 45 * 60, 3600)
    assert (report.line, report.column) == (23, 5)
    assert jobs["advise"].apply is True and jobs["advise"].interval_seconds == 3600
    assert jobs["refresh"].mode == "incremental" and jobs["refresh"].indexes == ()
    assert jobs["optimize"].mode == "quick" and jobs["optimize"].cron == "0 3 * * *"
    assert jobs["evict"].timezone == "UTC" and jobs["evict"].misfire_grace_seconds == 3600
    assert jobs["vacuum"].retention_seconds == 7 * 86400
    assert report.describe() == (
        f"{EXAMPLE}:23: morning-report: warmup of /lake/raw/clickstream/* (partitions "
        "event_date last 3 days); cron '30 6 * * 1-5' in Europe/Paris, timeout PT45M, misfire "
        "grace PT1H")
    assert jobs["vacuum"].next_runs(2, WEDNESDAY_NOON) == [
        datetime(2026, 1, 11, 4, tzinfo=ZoneInfo("UTC")),
        datetime(2026, 1, 18, 4, tzinfo=ZoneInfo("UTC"))]


def test_kind_options_and_defaults(tmp_path):
    found = load_config(config(
        "  - {name: w, kind: warmup, source: /lake/t, columns: [a, b.c], priority: high, "
        "ttl: PT36H, interval: PT15M}\n"
        "  - {name: r, kind: refresh, mode: FULL, indexes: [idx_a], cron: '0 * * * *'}\n"
        "  - {name: o, kind: optimize, interval: PT1H, misfireGraceTime: PT5M}\n"
        "  - {name: a, kind: advise, interval: PT1H}\n",
        "jobStore: state/jobs.sqlite\nspark: {conf: {spark.a.enabled: true, spark.b: 0.5, "
        "spark.c: 8}}\n"), str(tmp_path / "acc.yaml"))
    warmup, refresh, optimize, advise = found.jobs
    assert (warmup.columns, warmup.priority, warmup.ttl_seconds, warmup.partitions) == \
        (("a", "b.c"), Priority.HIGH, 36 * 3600, None)
    assert (refresh.mode, refresh.indexes) == ("full", ("idx_a",))
    assert (optimize.mode, optimize.misfire_grace_seconds) == ("quick", 300)
    assert advise.apply is False
    assert found.job_store == tmp_path / "state" / "jobs.sqlite"   # relative to the file
    assert found.spark_conf == (("spark.a.enabled", "true"), ("spark.b", "0.5"),
                                ("spark.c", "8"))
    assert found.spark_master is None and found.rules.rules == ()
    absolute = load_config(config("  - {name: e, kind: evict, interval: PT5M}\n",
                                  "jobStore: /var/lib/acc/jobs.sqlite\n"), "/etc/acc.yaml")
    assert absolute.job_store == Path("/var/lib/acc/jobs.sqlite")


# --- triggers, next runs and partition windows ---------------------------------------------
def job(**kwargs) -> Job:
    return Job(**{"name": "j", "kind": "evict", **kwargs})


def test_cron_and_interval_triggers():
    cron = job(cron="30 6 * * 1", timezone="Europe/Paris").trigger()
    assert isinstance(cron, CronTrigger) and cron.timezone == ZoneInfo("Europe/Paris")
    interval = job(interval_seconds=900, timezone="Asia/Tokyo").trigger(WEDNESDAY_NOON)
    assert isinstance(interval, IntervalTrigger) and interval.interval == timedelta(minutes=15)
    assert interval.get_next_fire_time(None, WEDNESDAY_NOON) == \
        WEDNESDAY_NOON + timedelta(minutes=15)


def test_next_runs_are_in_the_jobs_time_zone():
    runs = job(interval_seconds=900, timezone="Asia/Tokyo").next_runs(3, WEDNESDAY_NOON)
    assert [r.isoformat() for r in runs] == ["2026-01-07T21:15:00+09:00",
                                             "2026-01-07T21:30:00+09:00",
                                             "2026-01-07T21:45:00+09:00"]
    runs = job(cron="30 6 * * 1-5", timezone="Europe/Paris").next_runs(3, WEDNESDAY_NOON)
    assert [r.isoformat() for r in runs] == ["2026-01-08T06:30:00+01:00",
                                             "2026-01-09T06:30:00+01:00",
                                             "2026-01-12T06:30:00+01:00"]   # Thu, Fri, Mon
    assert len(job(cron="* * * * *").next_runs()) == 3   # from the current time
    with pytest.raises(ValueError, match="has no time zone"):
        job(cron="* * * * *").next_runs(1, datetime(2026, 1, 7))


def test_partition_windows_are_counted_in_the_jobs_time_zone():
    late = datetime(2026, 1, 7, 23, 30, tzinfo=UTC)   # already the 8th in Tokyo
    three = PartitionWindow("event_date", 3)
    assert partition_window(job(partitions=three), late) == (date(2026, 1, 5), date(2026, 1, 7))
    assert partition_window(job(partitions=three, timezone="Asia/Tokyo"), late) == \
        (date(2026, 1, 6), date(2026, 1, 8))
    early = datetime(2026, 1, 8, 5, 0, tzinfo=UTC)    # still the 7th in Los Angeles
    assert partition_window(job(partitions=three, timezone="America/Los_Angeles"), early) == \
        (date(2026, 1, 5), date(2026, 1, 7))
    assert partition_window(job(partitions=PartitionWindow("d", 1), timezone="Asia/Tokyo"),
                            late) == (date(2026, 1, 8), date(2026, 1, 8))
    assert partition_window(job(), late) is None


# --- problems -------------------------------------------------------------------------------
def test_every_problem_is_reported_with_its_line_and_column():
    text = "\n".join([
        "version: 1",                                           # 1
        "systemPath: /sys",                                     # 2
        "jobs:",                                                # 3
        "  - name: report",                                     # 4
        "    kind: warmup",                                     # 5
        "    sorce: /lake/x",                                   # 6
        "    cron: '30 6 * * 1-5'",                             # 7
        "    timezone: Europe/Pari",                            # 8
        "    timeout: 2700",                                    # 9
        "  - {name: report, kind: advise, interval: PT1H}",     # 10
        "  - {name: r, kind: refrehs, interval: PT1H}",         # 11
        "  - {name: b, kind: evict, cron: '0 * * * *', interval: PT5M}",   # 12
        "  - {name: n, kind: vacuum}",                          # 13
        "  - {name: c, kind: optimize, cron: '0 25 * * *', mode: ful}",    # 14
        "  - {name: d, kind: evict, interval: PT5M, apply: true}",         # 15
        "  - {name: e, kind: advise, interval: P1M, apply: yes please}",   # 16
        "  - {name: f, kind: refresh, intervall: PT5M}",        # 17
    ])
    assert problems(text) == [
        "jobs.yaml:4:5: a warmup job needs a 'source' (a root path or a glob, as in the rules)",
        "jobs.yaml:6:5: unknown key 'sorce' in a warmup job (did you mean 'source'?)",
        "jobs.yaml:8:15: timezone: unknown time zone 'Europe/Pari': did you mean "
        "'Europe/Paris'? expected an IANA name such as Europe/Paris or UTC",
        "jobs.yaml:9:14: timeout: invalid duration '2700': expected an ISO-8601 duration such "
        "as PT30M, P7D, PT1H30M or P1DT2H; it starts with P, and minutes and hours follow a T "
        "(PT45M, PT2H)",
        "jobs.yaml:10:12: the job name 'report' is already used by the job at line 4",
        "jobs.yaml:11:21: unknown kind 'refrehs': did you mean 'refresh'? expected one of "
        "warmup, advise, refresh, optimize, evict, vacuum",
        "jobs.yaml:12:47: a job runs on a 'cron' expression or at an 'interval', not both",
        "jobs.yaml:13:5: a job needs a 'cron' expression (e.g. \"30 6 * * 1-5\") or an "
        "'interval' (e.g. PT15M)",
        "jobs.yaml:14:37: cron: invalid cron expression '0 25 * * *': hour 25 is out of range "
        "0-23",
        "jobs.yaml:14:57: unknown optimize mode 'ful': did you mean 'full'? expected one of "
        "quick, full",
        "jobs.yaml:15:44: 'apply' is for advise jobs, not evict jobs",
        "jobs.yaml:16:39: interval: invalid duration 'P1M': expected an ISO-8601 duration such "
        "as PT30M, P7D, PT1H30M or P1DT2H; months and years are not supported (their length "
        "varies), use days (P30D)",
        "jobs.yaml:16:51: apply must be true or false, got 'yes please'",
        "jobs.yaml:17:5: a job needs a 'cron' expression (e.g. \"30 6 * * 1-5\") or an "
        "'interval' (e.g. PT15M)",
        "jobs.yaml:17:30: unknown key 'intervall' in a refresh job (did you mean 'interval'?)",
    ]


def test_structure_errors():
    assert problems("") == ["jobs.yaml:1:1: the file is empty: expected 'version: 1', "
                            "'systemPath:' and 'jobs:'"]
    assert problems("jobs: [\n") == ["jobs.yaml:2:1: not valid YAML: expected the node "
                                     "content, but found '<stream end>'"]
    assert problems("- 1") == ["jobs.yaml:1:1: the configuration file must be a mapping"]
    assert problems("version: 2\nsystemPath: /s\njobs: [{name: e, kind: evict, interval: "
                    "PT5M}]\nsystem: x") == [
        "jobs.yaml:1:10: unsupported version: expected 1",
        "jobs.yaml:4:1: unknown key 'system' in the configuration file (did you mean "
        "'systemPath'?)"]
    assert problems("jobStore: x") == [
        "jobs.yaml:1:1: missing 'version: 1'",
        "jobs.yaml:1:1: missing 'systemPath' (the system path of the indexes and cache it "
        "serves)",
        "jobs.yaml:1:1: missing 'jobs' (the list of jobs it runs)"]
    assert problems("version: 1\nsystemPath: /s\njobs: []") == [
        "jobs.yaml:3:7: 'jobs' must be a list of jobs (each starting with '- ')"]
    assert problems(config("  - evict")) == [
        "jobs.yaml:4:5: a job must be a mapping, e.g. {name: evict, kind: evict, interval: "
        "PT5M}"]
    assert problems(config("  - {interval: PT5M, mode: full}")) == [
        "jobs.yaml:4:5: a job needs a 'kind' (warmup, advise, refresh, optimize, evict, "
        "vacuum)",
        "jobs.yaml:4:5: a job needs a 'name', unique in the file"]


def test_durations_must_be_longer_than_zero():
    assert problems(config("  - {name: e, kind: evict, interval: PT0S, misfireGraceTime: P0D}"
                           )) == ["jobs.yaml:4:38: interval must be longer than zero",
                                  "jobs.yaml:4:62: misfireGraceTime must be longer than zero"]


def test_warmup_and_refresh_keys_are_checked_as_in_the_rules():
    assert problems(config(
        "  - name: w\n"                                              # 4
        "    kind: warmup\n"                                         # 5
        "    source: /lake/t\n"                                      # 6
        "    interval: PT1H\n"                                       # 7
        "    partitions: {column: d, lastDays: 0}\n"                 # 8
        "    priority: NEVER\n"                                      # 9
        "    columns: a\n"                                           # 10
        "    mode: full\n"                                           # 11
        "  - {name: r, kind: refresh, interval: PT1H, indexes: [i, i]}\n")) == [   # 12
        "jobs.yaml:8:39: lastDays must be a positive whole number, got 0",
        "jobs.yaml:9:15: priority: invalid priority 'NEVER': expected one of ALWAYS, HIGH, "
        "MEDIUM, LOW (case-insensitive)",
        "jobs.yaml:10:14: columns must be a list of names, e.g. [a, b.c]",
        "jobs.yaml:11:5: 'mode' is for refresh and optimize jobs, not warmup jobs",
        "jobs.yaml:12:55: indexes names an index twice"]


def test_spark_section():
    assert problems(config("  - {name: e, kind: evict, interval: PT5M}\n",
                           "spark: {master: [a], conf: {driver.memory: 4g, spark.x: },"
                           " confs: 1}\n")) == [
        "jobs.yaml:3:17: spark master must be a single value",
        "jobs.yaml:3:29: 'driver.memory' is not a Spark setting (their names start with "
        "'spark.')",
        "jobs.yaml:3:48: spark conf spark.x has no value",
        "jobs.yaml:3:60: unknown key 'confs' in spark (did you mean 'conf'?)"]


def test_the_rule_sections_are_checked_as_in_a_rules_file():
    rules = "\n".join([
        "version: 1",                                                   # 1
        "budget: {indexBytes: lots}",                                   # 2
        "defaults: {priority: MEDIUM, tll: P7D}",                       # 3
        "rules:",                                                       # 4
        "  - {source: /lake/a, kind: blom, columns: [x]}",              # 5
        "  - {source: /lake/b, kind: bloom, columns: [y], ttl: P1M}",   # 6
        "  - {source: /lake/b, kind: bloom, columns: [y], priority: LOW}",   # 7
        ""])
    with pytest.raises(RulesError) as found:
        load_rules(rules, "jobs.yaml")
    as_rules = [str(p) for p in found.value.problems]
    assert as_rules == [
        "jobs.yaml:2:22: indexBytes: invalid size 'lots': expected bytes or a number with a "
        "unit (k, m, g, t), e.g. 512m or 20g",
        "jobs.yaml:3:30: unknown key 'tll' in defaults (did you mean 'ttl'?)",
        "jobs.yaml:5:29: unknown kind 'blom': did you mean 'bloom'? expected one of covering, "
        "minmax, bloom, valuelist, text, cache",
        "jobs.yaml:6:55: ttl: invalid duration 'P1M': expected an ISO-8601 duration such as "
        "PT30M, P7D, PT1H30M or P1DT2H; months and years are not supported (their length "
        "varies), use days (P30D)"]
    jobs = "systemPath: /sys\njobs: [{name: e, kind: evict, interval: PT5M}]\n"
    assert problems(rules + jobs) == as_rules
    good = load_config("version: 1\nrules: [{source: /lake/a, kind: bloom, columns: [x]}]\n"
                       "budget: {cacheBytes: 1g}\n" + jobs)
    assert good.rules.rules[0].kind == "bloom" and good.rules.budget.cache_bytes == 1 << 30
    assert good.rules.for_source("hdfs://nn/lake/a")[0].columns == ("x",)
