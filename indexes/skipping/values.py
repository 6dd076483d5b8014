"""Spark value semantics for data skipping, in pure Python.

Values are held in Catalyst's internal form: integral types → int, float/double → float,
decimal → Decimal, string → str, binary → bytes, boolean → bool, date → days since 1970-01-01,
timestamp and timestamp_ntz → microseconds since the epoch (timestamp_ntz as if in UTC). Types
are Spark's JSON type names ("long", "decimal(10,2)", ...). This module orders and keys values as
Spark compares them, parses the literals of ``LogicalPlan.toJSON()``, bounds strings to a byte
budget, and bounds time-zone offsets over an interval (read from the system's TZif files).
"""
from __future__ import annotations

import math
import os
import re
import struct
from bisect import bisect_right
from datetime import date, datetime, timedelta, timezone, tzinfo
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from functools import lru_cache
from typing import Any
from zoneinfo import TZPATH, ZoneInfo

EPOCH_DATE = date(1970, 1, 1)
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
MICROS_PER_SECOND = 1_000_000
MICROS_PER_DAY = 86_400 * MICROS_PER_SECOND
MAX_OFFSET = 18 * 3600 * MICROS_PER_SECOND        # java.time.ZoneOffset's limit
NAN = float("nan")                                 # the one NaN normalize() returns

_INTEGRAL_BITS = {"byte": 8, "short": 16, "integer": 32, "long": 64}
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
_FLOAT32_TINY = 1.401298464324817e-45


class UnknownLiteral(ValueError):
    """A literal (or time zone) whose exact internal value cannot be determined."""


# --- types ------------------------------------------------------------------------------------
def integral_range(type_: str) -> tuple[int, int] | None:
    """(min, max) of an integral type, or None for other types."""
    bits = _INTEGRAL_BITS.get(type_)
    return None if bits is None else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def decimal_type(type_: str) -> tuple[int, int] | None:
    """(precision, scale) of a decimal type, or None for other types."""
    m = _DECIMAL.fullmatch(type_) if isinstance(type_, str) else None
    return (int(m.group(1)), int(m.group(2))) if m else None


def is_floating(type_: str) -> bool:
    """Whether the type is float or double."""
    return type_ in ("float", "double")


def is_orderable(type_: str) -> bool:
    """Whether this module knows the internal form and order of values of this type."""
    return (type_ in _INTEGRAL_BITS or is_floating(type_) or decimal_type(type_) is not None
            or type_ in ("string", "binary", "boolean", "date", "timestamp", "timestamp_ntz"))


# --- order, normalization, keys ---------------------------------------------------------------
def order_key(value: Any, type_: str) -> Any:
    """A key ordering values as Spark does: NaN above +Infinity and equal to itself, -0.0 == 0.0."""
    if is_floating(type_):
        return (1, 0.0) if math.isnan(value) else (0, float(value) + 0.0)
    return value


def normalize(value: Any, type_: str) -> Any:
    """The canonical representative of a value among those Spark considers equal."""
    if value is not None and is_floating(type_):
        return NAN if math.isnan(value) else float(value) + 0.0
    return value


def bloom_key(value: Any, type_: str) -> str:
    """One string per value of a type, equal for values Spark considers equal."""
    if is_floating(type_):
        return "NaN" if math.isnan(value) else repr(float(value) + 0.0)
    if decimal_type(type_) is not None:
        return "0" if value == 0 else format(Decimal(value).normalize(), "f")
    if type_ == "binary":
        return bytes(value).hex()
    if type_ == "boolean":
        return "true" if value else "false"
    return value if type_ == "string" else str(int(value))


# --- float32 ---------------------------------------------------------------------------------
def to_float32(x: float) -> float:
    """x rounded to the nearest float32 (ties to even); OverflowError beyond its range."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def float32_step(x: float, up: bool) -> float:
    """The next float32 above (``up``) or below a float32 value; NaN and the infinity in that
    direction stay put."""
    if math.isnan(x) or math.isinf(x) and (x > 0) == up:
        return x
    if x == 0:
        return _FLOAT32_TINY if up else -_FLOAT32_TINY
    bits = struct.unpack("<i", struct.pack("<f", x))[0]
    bits += 1 if (x > 0) == up else -1
    return struct.unpack("<f", struct.pack("<i", bits))[0]


def _exact_float32(text: str) -> float:
    exact = Fraction(text)
    f = to_float32(float(text))
    if math.isinf(f):
        raise UnknownLiteral(text)
    for neighbour in (float32_step(f, False), float32_step(f, True)):
        if not math.isinf(neighbour) and abs(Fraction(neighbour) - exact) <= abs(Fraction(f) - exact):
            raise UnknownLiteral(f"{text} is not the shortest form of one float")
    return f


# --- literals --------------------------------------------------------------------------------
_INT = re.compile(r"-?\d+")
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_TIMESTAMP = re.compile(r"(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?")
_FLOAT_NAMES = {"NaN": NAN, "Infinity": math.inf, "-Infinity": -math.inf}


def _naive(m: re.Match) -> datetime:
    *parts, fraction = m.groups()
    return datetime(*map(int, parts), int((fraction or "0").ljust(6, "0")))


def parse_literal(text: str | None, type_: str, session_tz: str) -> Any:
    """The internal value of a ``Literal``'s JSON ``value`` (None for null).

    Timestamps are printed in the session time zone; a local time that is ambiguous or
    nonexistent there raises UnknownLiteral, as does anything that is not exactly one value
    (binary literals print as ``[B@hash``)."""
    if text is None:
        return None
    try:
        if type_ in _INTEGRAL_BITS:
            lo, hi = integral_range(type_)
            if _INT.fullmatch(text) and lo <= int(text) <= hi:
                return int(text)
        elif is_floating(type_):
            if text in _FLOAT_NAMES:
                return _FLOAT_NAMES[text]
            return float(text) if type_ == "double" else _exact_float32(text)
        elif decimal_type(type_) is not None:
            precision, scale = decimal_type(type_)
            d = Decimal(text)
            if d.is_finite() and -d.as_tuple().exponent <= scale and abs(d) < 10 ** (precision - scale):
                return d
        elif type_ == "string":
            return text
        elif type_ == "boolean" and text in ("true", "false"):
            return text == "true"
        elif type_ == "date" and _DATE.fullmatch(text):
            return (date(*map(int, _DATE.fullmatch(text).groups())) - EPOCH_DATE).days
        elif type_ == "timestamp" and _TIMESTAMP.fullmatch(text):
            return local_to_utc(_naive(_TIMESTAMP.fullmatch(text)), session_tz)
        elif type_ == "timestamp_ntz":
            if _INT.fullmatch(text):
                return int(text)
            if _TIMESTAMP.fullmatch(text):
                return _micros(_naive(_TIMESTAMP.fullmatch(text)).replace(tzinfo=timezone.utc))
    except (ValueError, ArithmeticError, InvalidOperation) as e:
        raise UnknownLiteral(f"{type_} literal {text!r}: {e}") from None
    raise UnknownLiteral(f"{type_} literal {text!r}")


def from_python(value: Any, type_: str) -> Any:
    """The internal form of a value as pyarrow's ``to_pylist()`` (or ``collect()``) returns it;
    a naive datetime is taken as UTC."""
    if value is None:
        return None
    if type_ in _INTEGRAL_BITS:
        return int(value)
    if is_floating(type_):
        return float(value)
    if decimal_type(type_) is not None:
        return Decimal(value)
    if type_ == "binary":
        return bytes(value)
    if type_ == "boolean":
        return bool(value)
    if type_ == "date" and isinstance(value, date) and not isinstance(value, datetime):
        return (value - EPOCH_DATE).days
    if type_ in ("timestamp", "timestamp_ntz") and isinstance(value, datetime):
        return _micros(value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc))
    if type_ in ("date", "timestamp", "timestamp_ntz") and isinstance(value, int):
        return value
    if type_ == "string":
        return str(value)
    raise TypeError(f"cannot convert {value!r} to internal {type_}")


def _micros(aware: datetime) -> int:
    return (aware - EPOCH) // timedelta(microseconds=1)


# --- string bounds ---------------------------------------------------------------------------
def truncate_lower(s: str, max_bytes: int) -> str:
    """The longest prefix of ``s`` within ``max_bytes`` UTF-8 bytes: a lower bound of ``s``."""
    out, used = [], 0
    for ch in s:
        used += len(ch.encode("utf-8", "surrogatepass"))
        if used > max_bytes:
            break
        out.append(ch)
    return "".join(out)


def string_successor(prefix: str) -> str | None:
    """The least string above every string starting with ``prefix`` (the last code point below
    U+10FFFF incremented, past the surrogates), or None when no string is above them all."""
    p = prefix.rstrip("\U0010ffff")
    if not p:
        return None
    last = ord(p[-1]) + 1
    return p[:-1] + chr(0xE000 if 0xD800 <= last <= 0xDFFF else last)


def truncate_upper(s: str, max_bytes: int) -> str | None:
    """A string of at most ``max_bytes`` UTF-8 bytes that is >= ``s`` (``s`` itself when it
    fits), or None when there is none."""
    if len(s.encode("utf-8", "surrogatepass")) <= max_bytes:
        return s
    p = truncate_lower(s, max_bytes)
    while p:
        bound = string_successor(p)
        if bound is None:
            return None
        if len(bound.encode("utf-8", "surrogatepass")) <= max_bytes:
            return bound
        p = bound[:-1]
    return None


# --- time zones ------------------------------------------------------------------------------
_FIXED = re.compile(r"(?:UTC|GMT|UT)?([+-])(\d{1,2})(?::?(\d{2}))?(?::?(\d{2}))?|(?:UTC|GMT|UT|Z)")
# java.time.ZoneId.SHORT_IDS, which Spark honours; three are fixed offsets, the others would be
# read differently by the system's tz database.
_JAVA_SHORT = {"EST": -5, "MST": -7, "HST": -10}
_JAVA_SHORT_REGIONS = {"ACT", "AET", "AGT", "ART", "AST", "BET", "BST", "CAT", "CNT", "CST", "CTT",
                       "EAT", "ECT", "IET", "IST", "JST", "MIT", "NET", "NST", "PLT", "PNT", "PRC",
                       "PRT", "PST", "SST", "VST"}


@lru_cache(maxsize=256)
def zone(tz: str) -> tzinfo:
    """The tzinfo of a Spark time-zone ID (region or offset); UnknownLiteral if unknown."""
    m = _FIXED.fullmatch(tz)
    if m:
        sign, hours, minutes, seconds = m.groups()
        delta = timedelta(hours=int(hours or 0), minutes=int(minutes or 0), seconds=int(seconds or 0))
        if delta > timedelta(hours=18):
            raise UnknownLiteral(f"time zone {tz!r}")
        return timezone(-delta if sign == "-" else delta)
    if tz in _JAVA_SHORT:
        return timezone(timedelta(hours=_JAVA_SHORT[tz]))
    if tz in _JAVA_SHORT_REGIONS or _tzif_path(tz) is None:
        raise UnknownLiteral(f"time zone {tz!r}")
    return ZoneInfo(tz)


def local_to_utc(local: datetime, tz: str) -> int:
    """Microseconds of the instant whose local time in ``tz`` is ``local`` (naive);
    UnknownLiteral when that local time is ambiguous or does not exist there."""
    z = zone(tz)
    instants = {_micros(local.replace(tzinfo=z, fold=fold)) for fold in (0, 1)}
    if len(instants) != 1:
        raise UnknownLiteral(f"{local} is ambiguous or nonexistent in {tz}")
    micros = instants.pop()
    if (EPOCH + timedelta(microseconds=micros)).astimezone(z).replace(tzinfo=None) != local:
        raise UnknownLiteral(f"{local} does not exist in {tz}")
    return micros


def _tzif_path(tz: str) -> str | None:
    if not re.fullmatch(r"[A-Za-z0-9_+\-]+(/[A-Za-z0-9_+\-]+)*", tz):
        return None
    for base in TZPATH:
        path = os.path.join(base, tz)
        if os.path.isfile(path):
            return path
    return None


_POSIX_NAME = r"(?:<[^>]*>|[A-Za-z]{3,})"
_POSIX_OFFSET = r"[+-]?\d{1,3}(?::\d{1,2}){0,2}"
_POSIX = re.compile(rf"{_POSIX_NAME}(?P<std>{_POSIX_OFFSET})(?P<dst_name>{_POSIX_NAME}(?P<dst>{_POSIX_OFFSET})?)?")


def _posix_seconds(text: str) -> int:
    """A POSIX TZ offset (hours west of Greenwich) as seconds east of it."""
    sign = -1 if text.startswith("-") else 1
    h, m, s = (text.lstrip("+-").split(":") + ["0", "0"])[:3]
    return -sign * (int(h) * 3600 + int(m) * 60 + int(s))


@lru_cache(maxsize=256)
def _transitions(tz: str) -> tuple[list[int], list[int], int, frozenset] | None:
    """From the zone's TZif file (RFC 8536): transition instants (seconds), the offset after each,
    the offset before the first, and the offsets the footer rule uses after the last."""
    path = _tzif_path(tz)
    if path is None:
        return None
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"TZif":
        return None
    header = struct.Struct(">4sc15x6l")
    _, version, isut, isstd, leap, timecnt, typecnt, charcnt = header.unpack_from(data)
    pos, width = header.size, 4
    if version != b"\0":                               # skip the 32-bit block, read the 64-bit one
        pos += timecnt * 5 + typecnt * 6 + charcnt + leap * 8 + isstd + isut
        _, _, isut, isstd, leap, timecnt, typecnt, charcnt = header.unpack_from(data, pos)
        pos, width = pos + header.size, 8
    if leap or not typecnt:
        return None
    times = list(struct.unpack_from(f">{timecnt}{'q' if width == 8 else 'l'}", data, pos))
    pos += timecnt * width
    kinds = data[pos:pos + timecnt]
    pos += timecnt
    offsets = [struct.unpack_from(">l", data, pos + 6 * i)[0] for i in range(typecnt)]
    pos += typecnt * 6 + charcnt + leap * (width + 4) + isstd + isut
    footer: frozenset = frozenset()
    if version != b"\0":
        rule = data[pos:].strip(b"\n").decode("ascii", "replace")
        m = _POSIX.match(rule)
        if rule and not m:
            return None
        if m:
            std = _posix_seconds(m["std"])
            dst = std + 3600 if m["dst"] is None else _posix_seconds(m["dst"])
            footer = frozenset({std} if m["dst_name"] is None else {std, dst})
    return times, [offsets[k] for k in kinds], offsets[0], footer


def offset_range(tz: str, lo: int | None, hi: int | None) -> tuple[int, int]:
    """(least, greatest) UTC offset, in microseconds, that ``tz`` uses at any instant of
    [lo, hi] (microseconds; None = unbounded); ±18 h when the zone's rules cannot be read."""
    unknown = (-MAX_OFFSET, MAX_OFFSET)
    try:
        z = zone(tz)
    except UnknownLiteral:
        return unknown
    if isinstance(z, timezone):
        offset = z.utcoffset(None) // timedelta(microseconds=1)
        return offset, offset
    rules = _transitions(tz)
    if rules is None or lo is None or hi is None:
        return unknown
    times, after, first, footer = rules
    i, j = bisect_right(times, lo // MICROS_PER_SECOND), bisect_right(times, hi // MICROS_PER_SECOND)
    found = set(after[i:j]) | {after[i - 1] if i else first}
    if j == len(times):
        found |= footer
    return min(found) * MICROS_PER_SECOND, max(found) * MICROS_PER_SECOND
