"""Crontab expressions as APScheduler 3 triggers, meaning what crontab means.

Five fields: minute (0-59), hour (0-23), day of month (1-31), month (1-12 or ``jan``..``dec``),
day of week (0 or 7 = Sunday, 1 = Monday ... 6 = Saturday, or ``sun``..``sat``). Each field is
``*``, a value, a range ``a-b``, a step ``*/n``, ``a-b/n`` or ``a/n`` (from ``a`` to the
highest value), or a comma-separated list of these; names are case-insensitive. A day-of-week
range may wrap past the end of the week (``fri-mon``, ``6-0``).

APScheduler 3 numbers the days of the week from Monday = 0 (``CronTrigger.from_crontab("30 6 *
* 1")`` fires on Tuesdays), and its field syntax differs from crontab's. So every field is expanded
here to the values it names and handed to :class:`CronTrigger` explicitly, days by name.

Crontab runs a job on the days matching *either* the day of month or the day of week when both
are restricted (neither starts with ``*``), where :class:`CronTrigger` requires both: such
expressions are refused, as are those that never fire (``0 0 30 2 *``).
"""
from __future__ import annotations

import difflib
import re
import zoneinfo
from dataclasses import dataclass
from datetime import tzinfo
from functools import lru_cache

from apscheduler.triggers.cron import CronTrigger

MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
#: crontab's day names, from Sunday = 0
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_SCHEDULER_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")   # APScheduler's, Monday = 0
_LONGEST_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_NUMBER = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class _Field:
    """One crontab field: its name in messages, its CronTrigger argument, its values."""

    name: str
    keyword: str
    low: int
    high: int
    names: tuple[str, ...] = ()   # the names of low, low + 1, ...

    @property
    def weekday(self) -> bool:
        return self.keyword == "day_of_week"

    def value(self, text: str) -> int:
        """The number ``text`` names (a number or a name)."""
        if text.lower() in self.names:
            return self.low + self.names.index(text.lower())
        if not _NUMBER.fullmatch(text):
            close = difflib.get_close_matches(text.lower(), self.names, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else (
                f" (expected {self.low}-{self.high} or a name: {', '.join(self.names)})"
                if self.names else f" (expected {self.low}-{self.high})")
            kind = "a number or a name" if self.names else "a number"
            raise ValueError(f"{self.name} '{text}' is not {kind}{hint}")
        number = int(text)
        if not self.low <= number <= self.high:
            raise ValueError(f"{self.name} {number} is out of range {self.low}-{self.high}")
        return number

    def values(self, text: str) -> set[int]:
        """The values a whole field names (crontab day-of-week numbers for the day of week)."""
        out: set[int] = set()
        for item in text.split(","):
            if not item:
                raise ValueError(f"{self.name} '{text}' has an empty item")
            out |= self._item(item)
        return out

    def _item(self, item: str) -> set[int]:
        span, _, step_text = item.partition("/")
        step = 1
        if "/" in item:
            if not _NUMBER.fullmatch(step_text) or int(step_text) == 0:
                raise ValueError(f"the step of {self.name} '{item}' must be a whole number "
                                 "of at least 1")
            step = int(step_text)
        top = 6 if self.weekday else self.high   # Sunday is 0 (7 only repeats it)
        if span == "*":
            first, last = self.low, top
        else:
            bounds = span.split("-")
            if len(bounds) > 2:
                raise ValueError(f"{self.name} '{item}' is not a value or a range a-b")
            first = self.value(bounds[0])
            last = self.value(bounds[1]) if len(bounds) == 2 else (top if "/" in item else first)
        if first > last and not self.weekday:
            raise ValueError(f"the {self.name} range '{span}' goes backwards; write "
                             f"{first}-{self.high},{self.low}-{last}")
        wrapped = last + 7 if first > last else last   # past Saturday into the next week
        return {v % 7 if self.weekday else v for v in range(first, wrapped + 1, step)}

    def trigger_text(self, values: set[int]) -> str:
        """``values`` as this field of a :class:`CronTrigger`: ``*``, or ranges and values
        (days of the week by APScheduler's names)."""
        if self.weekday:
            values = {(v - 1) % 7 for v in values}   # crontab's Sunday = 0 to Monday = 0
        full = set(range(7)) if self.weekday else set(range(self.low, self.high + 1))
        if values == full:
            return "*"
        show = (lambda v: _SCHEDULER_DAYS[v]) if self.weekday else str
        runs: list[list[int]] = []
        for v in sorted(values):
            if runs and runs[-1][1] == v - 1:
                runs[-1][1] = v
            else:
                runs.append([v, v])
        return ",".join(show(a) if a == b else f"{show(a)}-{show(b)}" for a, b in runs)


_FIELDS = (
    _Field("minute", "minute", 0, 59),
    _Field("hour", "hour", 0, 23),
    _Field("day of month", "day", 1, 31),
    _Field("month", "month", 1, 12, MONTHS),
    _Field("day of week", "day_of_week", 0, 7, DAYS),
)


@lru_cache(maxsize=1)
def _zone_names() -> frozenset[str]:
    """The IANA zones (not the host's ``localtime``, which some systems list too)."""
    return frozenset(zoneinfo.available_timezones() - {"localtime"})


def time_zone(name: str) -> zoneinfo.ZoneInfo:
    """The IANA time zone ``name`` (``Europe/Paris``, ``UTC``); ValueError naming the closest
    known one otherwise."""
    if name in _zone_names():
        return zoneinfo.ZoneInfo(name)
    by_lower = {z.lower(): z for z in _zone_names()}
    close = difflib.get_close_matches(str(name).lower(), list(by_lower), n=1)
    hint = f"did you mean '{by_lower[close[0]]}'? " if close else ""
    raise ValueError(f"unknown time zone '{name}': {hint}expected an IANA name such as "
                     "Europe/Paris or UTC")


def crontab_trigger(expr: str, timezone: tzinfo | str = "UTC") -> CronTrigger:
    """The :class:`CronTrigger` firing when the crontab expression ``expr`` does (see the module),
    in ``timezone`` (a tzinfo or an IANA name). ValueError saying what is wrong otherwise."""
    zone = time_zone(timezone) if isinstance(timezone, str) else timezone
    texts = str(expr).split()
    try:
        if len(texts) != len(_FIELDS):
            raise ValueError(f"expected 5 fields (minute hour day-of-month month day-of-week), "
                             f"got {len(texts)}")
        values = [f.values(t) for f, t in zip(_FIELDS, texts)]
        _check_days(texts, values)
    except ValueError as exc:
        raise ValueError(f"invalid cron expression '{expr}': {exc}") from None
    return CronTrigger(timezone=zone, **{f.keyword: f.trigger_text(v)
                                         for f, v in zip(_FIELDS, values)})


def _check_days(texts: list[str], values: list[set[int]]) -> None:
    """ValueError for the day fields crontab reads otherwise than CronTrigger, or that never
    match a date."""
    day_text, weekday_text = texts[2], texts[4]
    if not day_text.startswith("*") and not weekday_text.startswith("*"):
        raise ValueError(f"crontab runs it on the days matching either the day of month "
                         f"({day_text}) or the day of week ({weekday_text}), which this scheduler "
                         "cannot do: put '*' in one of them, or write two jobs")
    days, months = values[2], values[3]
    if min(days) > max(_LONGEST_MONTH[m - 1] for m in months):
        raise ValueError(f"it never fires: no month it names has a day {min(days)}")
