"""The scheduler's configuration: the system path it serves, how it builds its Spark session,
its job store, the rule engine's rules and the jobs it runs, from one YAML file.

Pure Python over the YAML node tree (no Spark). Every problem found names the file, line and
column of the value at fault; all problems of a file are reported at once (:class:`ConfigError`).
The ``budget``, ``defaults`` and ``rules`` sections are those of a rules file
(:mod:`rules.user_rules`), checked with the same messages. The example is
``configs/accelerator.yaml``::

    version: 1
    systemPath: /lake/_accelerator
    spark: {master: "local[2]", conf: {spark.driver.memory: 4g}}
    jobStore: /var/lib/accelerator/jobs.sqlite   # default: beside the file, <name>.jobs.sqlite
    rules: [...]
    jobs:
      - name: morning-report
        kind: warmup                  # warmup | advise | refresh | optimize | evict | vacuum
        source: "/lake/raw/clickstream/*"
        partitions: {column: event_date, lastDays: 3}
        cron: "30 6 * * 1-5"          # crontab's meaning (accelerator.scheduler.cron), or
                                      # interval: PT15M
        timezone: Europe/Paris        # default UTC
        timeout: PT45M                # optional
        misfireGraceTime: PT1H        # the default
      - {name: advise, kind: advise, interval: PT1H, apply: true}

Kind-specific keys: warmup ``source`` (required), ``partitions``, ``columns``, ``priority``,
``ttl``; advise ``apply``; refresh ``mode`` (incremental, full or quick); optimize ``mode``
(quick or full); vacuum ``retention``; refresh, optimize and vacuum ``indexes`` (default: all).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable
from zoneinfo import ZoneInfo

import yaml
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.interval import IntervalTrigger

from accelerator.scheduler.cron import crontab_trigger, time_zone
from indexes.errors import AcceleratorError
from rules.terms import Priority, format_duration, parse_duration, parse_priority
from rules.user_rules import RULE_SECTIONS, PartitionWindow, Problem, Reader, RuleSet, \
    RulesError, read_partitions, read_rule_sections

#: job kinds
JOB_KINDS = ("warmup", "advise", "refresh", "optimize", "evict", "vacuum")
#: the modes of the kinds that take one, the default first
MODES = {"refresh": ("incremental", "full", "quick"), "optimize": ("quick", "full")}
DEFAULT_MISFIRE_GRACE_SECONDS = 3600
#: seconds running jobs get to finish on shutdown before their Spark jobs are cancelled
GRACE_SECONDS = 30.0
_TOP = ("version", "systemPath", "spark", "jobStore", "jobs", *RULE_SECTIONS)
_SPARK = ("master", "conf")
_COMMON = ("name", "kind", "cron", "interval", "timezone", "timeout", "misfireGraceTime")
_KIND_KEYS = {
    "warmup": ("source", "partitions", "columns", "priority", "ttl"),
    "advise": ("apply",),
    "refresh": ("mode", "indexes"),
    "optimize": ("mode", "indexes"),
    "evict": (),
    "vacuum": ("retention", "indexes"),
}
_ANY_KIND_KEYS = tuple(dict.fromkeys(k for keys in _KIND_KEYS.values() for k in keys))


class ConfigError(RulesError, AcceleratorError):
    """A configuration file that cannot be used; ``problems`` lists every problem found."""


class JobError(AcceleratorError):
    """A job that cannot run as asked (e.g. a job name the configuration does not have)."""


@dataclass(frozen=True)
class Job:
    """One scheduled job as understood: exactly one of ``cron`` and ``interval_seconds`` is set;
    the fields of the other kinds keep their defaults. ``line`` and ``column`` locate it."""

    name: str
    kind: str
    cron: str | None = None
    interval_seconds: int | None = None
    timezone: str = "UTC"
    timeout_seconds: int | None = None
    misfire_grace_seconds: int = DEFAULT_MISFIRE_GRACE_SECONDS
    source: str | None = None                    # warmup: a root path or a glob
    partitions: PartitionWindow | None = None    # warmup: the last days' partitions only
    columns: tuple[str, ...] = ()                # warmup (empty: the matching rules' columns)
    priority: Priority | None = None             # warmup (None: the rules' priority)
    ttl_seconds: int | None = None               # warmup (None: the rules' TTL)
    apply: bool = False                          # advise: carry the recommendations out
    mode: str | None = None                      # refresh, optimize
    indexes: tuple[str, ...] = ()                # refresh, optimize, vacuum (empty: all)
    retention_seconds: int | None = None         # vacuum
    file: str = ""
    line: int = 0
    column: int = 0

    @property
    def zone(self) -> ZoneInfo:
        """The job's time zone."""
        return time_zone(self.timezone)

    def trigger(self, now: datetime | None = None) -> BaseTrigger:
        """When the job runs: a CronTrigger of its cron expression in its time zone, or an
        IntervalTrigger firing every interval from ``now`` (default: the current time) on."""
        if self.cron is not None:
            return crontab_trigger(self.cron, self.zone)
        start = (_aware(now) + timedelta(seconds=self.interval_seconds)).astimezone(self.zone)
        return IntervalTrigger(seconds=self.interval_seconds, start_date=start,
                               timezone=self.zone)

    def next_runs(self, n: int = 3, now: datetime | None = None) -> list[datetime]:
        """The job's next ``n`` run times from ``now`` (default: the current time) on, ``now``
        included, in its time zone (fewer if its schedule ends)."""
        now = _aware(now)
        trigger, runs = self.trigger(now), []
        while len(runs) < n:
            previous = runs[-1] if runs else None
            fire = trigger.get_next_fire_time(previous, previous or now)
            if fire is None:
                break
            runs.append(fire.astimezone(self.zone))
        return runs

    def describe(self) -> str:
        """One line: the job as understood."""
        when = [(f"cron '{self.cron}'" if self.cron else
                 f"every {format_duration(self.interval_seconds)}") + f" in {self.timezone}"]
        if self.timeout_seconds is not None:
            when.append(f"timeout {format_duration(self.timeout_seconds)}")
        when.append(f"misfire grace {format_duration(self.misfire_grace_seconds)}")
        return f"{self.file}:{self.line}: {self.name}: {self._what()}; {', '.join(when)}"

    def _what(self) -> str:
        if self.kind == "warmup":
            extra = [f"columns {', '.join(self.columns)}"] if self.columns else []
            if self.partitions:
                extra.append(f"partitions {self.partitions.column} last "
                             f"{self.partitions.last_days} days")
            if self.priority is not None:
                extra.append(f"priority {self.priority.name}")
            if self.ttl_seconds is not None:
                extra.append(f"ttl {format_duration(self.ttl_seconds)}")
            return f"warmup of {self.source}" + (f" ({', '.join(extra)})" if extra else "")
        if self.kind == "advise":
            return "advise and apply" if self.apply else "advise"
        if self.kind == "refresh":
            which = ", ".join(self.indexes) or "the indexes whose sources changed"
            return f"refresh {self.mode} of {which}"
        of = f" of {', '.join(self.indexes)}" if self.indexes else ""
        if self.kind == "optimize":
            return f"optimize {self.mode}{of}"
        if self.kind == "vacuum" and self.retention_seconds is not None:
            return f"vacuum{of} keeping {format_duration(self.retention_seconds)}"
        return self.kind + of


@dataclass(frozen=True)
class SchedulerConfig:
    """A validated configuration file. ``spark_conf`` holds Spark settings as (name, text)."""

    system_path: str
    jobs: tuple[Job, ...]
    rules: RuleSet
    job_store: Path
    spark_master: str | None = None
    spark_conf: tuple[tuple[str, str], ...] = ()
    file: str = ""

    def job(self, name: str) -> Job:
        """The job called ``name``; JobError naming the jobs there are."""
        for job in self.jobs:
            if job.name == name:
                return job
        raise JobError(f"no job named '{name}' in {self.file}; its jobs: "
                       f"{', '.join(j.name for j in self.jobs)}")


def partition_window(job: Job, now: datetime | None = None) -> tuple[date, date] | None:
    """The first and last dates of a job's ``partitions: {lastDays: N}`` at ``now`` (default:
    the current time): today in the job's time zone and the N-1 days before; None for a job
    without partitions."""
    if job.partitions is None:
        return None
    today = _aware(now).astimezone(job.zone).date()
    return today - timedelta(days=job.partitions.last_days - 1), today


def _aware(now: datetime | None) -> datetime:
    if now is None:
        return datetime.now(timezone.utc)
    if now.utcoffset() is None:
        raise ValueError(f"{now} has no time zone: give an aware datetime")
    return now


# --- loading ------------------------------------------------------------------------------
def load_config(text: str, file: str = "<config>") -> SchedulerConfig:
    """The configuration of a YAML document; :class:`ConfigError` listing every problem (with
    file, line and column). A relative ``jobStore`` is relative to the directory of ``file``."""
    reader = Reader(file)
    root = reader.compose(text, "expected 'version: 1', 'systemPath:' and 'jobs:'")
    top = reader.mapping(root, _TOP, "the configuration file") if root is not None else {}
    reader.version(root, top)
    if isinstance(root, yaml.MappingNode):
        for key, what in (("systemPath", "the system path of the indexes and cache it serves"),
                          ("jobs", "the list of jobs it runs")):
            if key not in top:
                reader.problem(root, f"missing '{key}' ({what})")
    system_path = reader.text(top["systemPath"][1], "systemPath") if "systemPath" in top else None
    master, conf = _spark(reader, top["spark"][1]) if "spark" in top else (None, ())
    base = Path(file).parent
    job_store = base / f"{Path(file).stem}.jobs.sqlite"
    if "jobStore" in top:
        job_store = base / (reader.text(top["jobStore"][1], "jobStore") or job_store)
    rules = read_rule_sections(reader, top)
    jobs = _jobs(reader, top["jobs"][1]) if "jobs" in top else ()
    reader.raise_problems(ConfigError)
    return SchedulerConfig(system_path, jobs, rules, job_store, master, conf, file)


def load_config_file(path: str | Path) -> SchedulerConfig:
    """:func:`load_config` of a file (its path named in every problem)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([Problem(str(path), 1, 1,
                                   f"cannot read the configuration file: {exc}")]) from None
    return load_config(text, str(path))


def _spark(reader: Reader, node: yaml.Node) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """The ``spark`` section: its master and its settings."""
    keys = reader.mapping(node, _SPARK, "spark")
    master = reader.text(keys["master"][1], "spark master") if "master" in keys else None
    if "conf" not in keys:
        return master, ()
    conf = keys["conf"][1]
    names = [k.value for k, _ in conf.value] if isinstance(conf, yaml.MappingNode) else []
    settings = []
    for name, (key, value) in reader.mapping(conf, names, "spark conf").items():
        if not str(name).startswith("spark."):
            reader.problem(key, f"'{name}' is not a Spark setting (their names start with "
                                "'spark.')")
        setting = reader.scalar(value, f"spark conf {name}")
        if isinstance(setting, bool):
            settings.append((name, str(setting).lower()))
        elif setting is not None:
            settings.append((name, str(setting)))
        elif isinstance(value, yaml.ScalarNode):
            reader.problem(key, f"spark conf {name} has no value")
    return master, tuple(sorted(settings))


def _jobs(reader: Reader, node: yaml.Node) -> tuple[Job, ...]:
    if not isinstance(node, yaml.SequenceNode) or not node.value:
        reader.problem(node, "'jobs' must be a list of jobs (each starting with '- ')")
        return ()
    names: dict[str, int] = {}
    jobs = (_job(reader, item, names) for item in node.value)
    return tuple(job for job in jobs if job is not None)


def _job(reader: Reader, node: yaml.Node, names: dict[str, int]) -> Job | None:
    """One job; ``names`` maps the names of the jobs before it to their lines."""
    if not isinstance(node, yaml.MappingNode):
        reader.problem(node, "a job must be a mapping, e.g. {name: evict, kind: evict, "
                             "interval: PT5M}")
        return None
    before = len(reader.problems)
    kind = _kind(reader, node)
    keys = _job_keys(reader, node, kind)

    def value(key: str) -> yaml.Node:
        return keys[key][1]

    name = reader.text(value("name"), "name") if "name" in keys else None
    if "name" not in keys:
        reader.problem(node, "a job needs a 'name', unique in the file")
    elif name in names:
        reader.problem(value("name"), f"the job name '{name}' is already used by the job at "
                                      f"line {names[name]}")
    elif name is not None:
        names[name] = node.start_mark.line + 1
    zone = "UTC"
    if "timezone" in keys:
        zone = _checked(reader, value("timezone"), "timezone", time_zone)
    cron = _checked(reader, value("cron"), "cron", crontab_trigger) if "cron" in keys else None
    interval = _duration(reader, value("interval"), "interval") if "interval" in keys else None
    if "cron" in keys and "interval" in keys:
        later = max(keys["cron"][0], keys["interval"][0], key=lambda k: k.start_mark.index)
        reader.problem(later, "a job runs on a 'cron' expression or at an 'interval', not both")
    elif "cron" not in keys and "interval" not in keys:
        reader.problem(node, "a job needs a 'cron' expression (e.g. \"30 6 * * 1-5\") or an "
                             "'interval' (e.g. PT15M)")
    timeout = _duration(reader, value("timeout"), "timeout") if "timeout" in keys else None
    grace = _duration(reader, value("misfireGraceTime"), "misfireGraceTime") \
        if "misfireGraceTime" in keys else DEFAULT_MISFIRE_GRACE_SECONDS
    options = _options(reader, node, kind, keys) if kind else {}
    if len(reader.problems) > before or None in (name, kind, zone):
        return None
    mark = node.start_mark
    return Job(name, kind, cron, interval, zone, timeout, grace, **options, file=reader.file,
               line=mark.line + 1, column=mark.column + 1)


def _kind(reader: Reader, node: yaml.MappingNode) -> str | None:
    """The job's kind (None after a problem)."""
    found = next((v for k, v in node.value if k.value == "kind"), None)
    if found is None:
        reader.problem(node, f"a job needs a 'kind' ({', '.join(JOB_KINDS)})")
        return None
    return _choice(reader, found, "kind", JOB_KINDS)


def _job_keys(reader: Reader, node: yaml.MappingNode, kind: str | None
              ) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    """The job's keys (see :meth:`Reader.mapping`): those of its kind, unknown ones named with
    the closest of them, and those of another kind named with their kinds."""
    allowed = _COMMON + (_KIND_KEYS[kind] if kind else _ANY_KIND_KEYS)
    kept = []
    for key, value in node.value:
        if key.value in _ANY_KIND_KEYS and key.value not in allowed:
            kinds = " and ".join(k for k, keys in _KIND_KEYS.items() if key.value in keys)
            reader.problem(key, f"'{key.value}' is for {kinds} jobs, not {kind} jobs")
        else:
            kept.append((key, value))
    what = f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} job" if kind else "a job"
    return reader.mapping(yaml.MappingNode(node.tag, kept, node.start_mark, node.end_mark),
                          allowed, what)


def _options(reader: Reader, node: yaml.Node, kind: str,
             keys: dict[str, tuple[yaml.Node, yaml.Node]]) -> dict[str, Any]:
    """The keyword arguments of :class:`Job` for the keys of ``kind``."""
    def given(key: str) -> yaml.Node | None:
        return keys[key][1] if key in keys else None

    out: dict[str, Any] = {}
    if kind == "warmup":
        if "source" in keys:
            out["source"] = reader.text(given("source"), "source")
        else:
            reader.problem(node, "a warmup job needs a 'source' (a root path or a glob, as in "
                                 "the rules)")
        if "partitions" in keys:
            out["partitions"] = read_partitions(reader, given("partitions"))
        if "columns" in keys:
            out["columns"] = reader.strings(given("columns"), "columns")
        if "priority" in keys:
            out["priority"] = reader.term(given("priority"), parse_priority, "priority")
        if "ttl" in keys:
            out["ttl_seconds"] = _duration(reader, given("ttl"), "ttl")
    elif kind == "advise" and "apply" in keys:
        out["apply"] = reader.scalar(given("apply"), "apply")
        if not isinstance(out["apply"], bool):
            reader.problem(given("apply"), f"apply must be true or false, got {out['apply']!r}")
    elif kind in MODES:
        out["mode"] = _choice(reader, given("mode"), f"{kind} mode", MODES[kind]) \
            if "mode" in keys else MODES[kind][0]
    elif kind == "vacuum" and "retention" in keys:
        out["retention_seconds"] = _duration(reader, given("retention"), "retention")
    if "indexes" in keys:
        out["indexes"] = reader.strings(given("indexes"), "indexes", "an index")
    return out


def _choice(reader: Reader, node: yaml.Node, what: str, choices: tuple[str, ...]) -> str | None:
    """One of ``choices`` (case-insensitive), or None after a problem naming the closest."""
    value = reader.text(node, what)
    if value is None or value.lower() in choices:
        return value and value.lower()
    close = difflib.get_close_matches(value.lower(), choices, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    reader.problem(node, f"unknown {what} '{value}': {hint}expected one of {', '.join(choices)}")
    return None


def _checked(reader: Reader, node: yaml.Node, what: str,
             check: Callable[[str], object]) -> str | None:
    """A text value that ``check`` accepts: an IANA time zone, a crontab expression (None
    after a problem, which names ``what`` and why ``check`` refused it)."""
    value = reader.text(node, what)
    if value is None:
        return None
    try:
        check(value)
    except ValueError as exc:
        reader.problem(node, f"{what}: {exc}")
        return None
    return value


def _duration(reader: Reader, node: yaml.Node, what: str) -> int | None:
    """A positive ISO-8601 duration in seconds (None after a problem)."""
    seconds = reader.term(node, parse_duration, what)
    if seconds == 0:
        reader.problem(node, f"{what} must be longer than zero")
        return None
    return seconds
