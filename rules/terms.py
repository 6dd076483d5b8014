"""Terms shared by the rule engine's rules and the cache tier: priorities, ISO-8601
durations and byte sizes, parsed from what users write. Pure Python."""
from __future__ import annotations

import enum
import re


class TermError(ValueError):
    """A priority, duration or size that cannot be understood (the message names the value and
    what is expected)."""


class Priority(enum.IntEnum):
    """How much an entry deserves its place: ALWAYS > HIGH > MEDIUM > LOW.

    ALWAYS entries are never evicted (neither by TTL nor for space). NEVER is not a priority an
    entry can have: it is a marker on a source root that forbids caching its files; it sorts
    below every entry priority.
    """

    NEVER = 0
    LOW = 1
    MEDIUM = 2
    HIGH = 3
    ALWAYS = 4


def parse_priority(value: str | Priority, allow_never: bool = False) -> Priority:
    """The :class:`Priority` named by ``value`` (case-insensitive, surrounding blanks ignored).

    NEVER is accepted only with ``allow_never`` (it marks a source, not an entry). Raises
    :class:`TermError` naming the value and the allowed ones.
    """
    allowed = [p for p in Priority if allow_never or p is not Priority.NEVER]
    if isinstance(value, Priority):
        found: Priority | None = value
    else:
        found = Priority.__members__.get(str(value).strip().upper())
    if found is None or found not in allowed:
        names = ", ".join(p.name for p in sorted(allowed, reverse=True))
        raise TermError(
            f"invalid priority {value!r}: expected one of {names} (case-insensitive)")
    return found


_DURATION = re.compile(
    r"P(?:(?P<weeks>\d+)W)?(?:(?P<days>\d+)D)?"
    r"(?:T(?=\d)(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+)S)?)?")
_UNIT_SECONDS = {"weeks": 604800, "days": 86400, "hours": 3600, "minutes": 60, "seconds": 1}


def parse_duration(text: str, what: str = "duration") -> int:
    """Seconds in an ISO-8601 duration such as ``PT30M``, ``P7D``, ``PT1H30M`` or ``P1DT2H``
    (weeks, days, hours, minutes and whole seconds; case-insensitive).

    Months and years are refused (their length varies): write days instead. Raises
    :class:`TermError` naming the value (as ``what``).
    """
    raw = str(text).strip().upper()
    match = _DURATION.fullmatch(raw)
    if match is None or raw in ("P", "PT") or raw.endswith("T"):
        date_part = raw.split("T", 1)[0]
        if not raw.startswith("P"):
            hint = "; it starts with P, and minutes and hours follow a T (PT45M, PT2H)"
        elif "Y" in date_part or "M" in date_part:
            hint = "; months and years are not supported (their length varies), use days (P30D)"
        else:
            hint = ""
        raise TermError(
            f"invalid {what} {text!r}: expected an ISO-8601 duration such as PT30M, P7D, PT1H30M "
            f"or P1DT2H{hint}")
    return sum(int(v) * _UNIT_SECONDS[k] for k, v in match.groupdict().items() if v)


def format_duration(seconds: int) -> str:
    """The ISO-8601 duration of ``seconds`` (``P1DT2H``, ``PT30M``; ``PT0S`` for zero)."""
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    time_part = "".join(f"{n}{u}" for n, u in ((hours, "H"), (minutes, "M"), (secs, "S")) if n)
    out = "P" + (f"{days}D" if days else "") + (f"T{time_part}" if time_part else "")
    return out if out != "P" else "PT0S"


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
          "g": 1 << 30, "gb": 1 << 30, "t": 1 << 40, "tb": 1 << 40}


def byte_size(text: str) -> int:
    """A byte count as Spark writes it in settings ("10485760", "10MB", "-1", "64k", "20g");
    :class:`TermError` otherwise."""
    value = str(text).strip().lower()
    digits = value.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = _UNITS.get(value[len(digits):])
    try:
        count = int(digits)
    except ValueError:
        count = None
    if unit is None or count is None:
        raise TermError(f"invalid size {text!r}: expected bytes or a number with a unit "
                        "(k, m, g, t), e.g. 512m or 20g")
    return count * unit
