"""A deterministic synthetic event log, generated with Spark, for the benchmark workloads.

``generate(spark, out_dir, rows, files=64, seed=7)`` writes ``files`` Parquet files holding
``rows`` events in time order (file ``i`` holds one contiguous range of ``event_id`` and so of
``ts``) and returns facts the workloads need (values to look up, the rare error code, ...).

Every column is a pure function of ``(event_id, rows, files, seed)`` built from ``xxhash64`` /
``pmod`` / bit arithmetic on ``spark.range(rows)`` (never ``rand()``, whose values depend on
partitioning), so the same ``seed``, ``rows`` and ``files`` give identical data on any machine,
in any session time zone. The files are the ``files`` partitions of
``spark.range(0, rows, 1, files)``, which are contiguous id ranges; no shuffle is involved.
Partition ``i`` holds ids ``[i * rows // files, (i + 1) * rows // files)`` and is written as
``part-<i, 5 digits>-...parquet``, so file names sort in time order, in row groups of
ROW_GROUP_ROWS events.

The facts are computed without reading the written data: the sample values come from
evaluating the same column expressions over a 5,000-id slice of ``spark.range``, and the
rare-error counts and files follow from the id arithmetic.
"""
from __future__ import annotations

import datetime as _dt
import logging
import time
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

log = logging.getLogger("bench.eventlog")

#: First instant of the log (UTC); the log spans SPAN_DAYS days from here.
START = _dt.datetime(2026, 3, 1, tzinfo=_dt.timezone.utc)
SPAN_DAYS = 30
#: Size of the user population; ``user.id`` is in ``[1, USERS]``, drawn for each event, so
#: nearly every event of a file has its own user and every file's min/max spans the range.
USERS = 5_000_000
#: Exponent of the user skew: ``P(user.id <= x) = (x / USERS) ** (1 / USER_SKEW)``.
USER_SKEW = 2.0
#: Number of accounts; ``account_id`` is in ``[1, ACCOUNTS]``, one per session, so a file holds
#: few accounts (the clustered id that Parquet's dictionaries already prune on).
ACCOUNTS = 100_000
#: Exponent of the account skew: ``P(account_id <= x) = (x / ACCOUNTS) ** (1 / ACCOUNT_SKEW)``.
ACCOUNT_SKEW = 3.0
#: Consecutive events that share a block of concurrent sessions (capped at rows // files).
SESSION_WINDOW = 1_000
#: Sessions interleaved in each window (so a session has about SESSION_WINDOW / 8 events).
SESSIONS_PER_WINDOW = 8
#: The rare error code: only in two narrow id windows, each inside one file.
RARE_ERROR_CODE = "ERR-4711"
#: Every RARE_EVERY-th event of a rare window carries the rare code.
RARE_EVERY = 5
#: The token that starts most messages (the level of about 90% of events).
FREQUENT_TOKEN = "INFO"
#: Size of the id slice the sample values are picked from.
SAMPLE_SLICE = 5_000
#: Version of the generated data: bump it whenever a column changes, so that cached logs
#: (``bench.datasets.eventlog``) are regenerated. 2: ``payload`` holds ``at``. 3: ``user.id``
#: is drawn per event from millions of users; the per-session id it was is ``account_id``.
#: 4: files hold row groups of ROW_GROUP_ROWS events.
VERSION = 4
#: Events per Parquet row group: 8 row groups in a file at scale 1, as a 1 GB file holds 8 row
#: groups of Parquet's default 128 MB.
ROW_GROUP_ROWS = 10_000

_MICROS_PER_DAY = 86_400_000_000
_START_MICROS = int(START.timestamp()) * 1_000_000

COUNTRIES = [
    "US", "DE", "GB", "FR", "IN", "BR", "JP", "CA", "ES", "IT",
    "NL", "MX", "AU", "PL", "SE", "CH", "KR", "TR", "ID", "AR",
    "BE", "AT", "NO", "DK", "FI", "IE", "PT", "ZA", "NZ", "SG",
]
CURRENCIES = [
    "USD", "EUR", "GBP", "EUR", "INR", "BRL", "JPY", "CAD", "EUR", "EUR",
    "EUR", "MXN", "AUD", "PLN", "SEK", "CHF", "KRW", "TRY", "IDR", "ARS",
    "EUR", "EUR", "NOK", "DKK", "EUR", "EUR", "EUR", "ZAR", "NZD", "SGD",
]
#: (segment, percent of users)
SEGMENTS = [("free", 70), ("pro", 25), ("enterprise", 5)]
#: (os, percent of users, versions, models)
DEVICES = [
    ("android", 45, ["11", "12", "13", "14", "15"],
     ["Pixel 7", "Pixel 8", "Galaxy S23", "Galaxy A54", "Redmi Note 12", "OnePlus 11"]),
    ("ios", 30, ["15.7", "16.6", "17.4", "17.5", "18.0"],
     ["iPhone 13", "iPhone 14", "iPhone 15", "iPhone 15 Pro", "iPad Air"]),
    ("windows", 12, ["10", "11"], ["Surface Laptop 5", "ThinkPad X1", "XPS 13", "Desktop"]),
    ("macos", 7, ["13.6", "14.4", "14.5", "15.0"], ["MacBook Air", "MacBook Pro", "iMac"]),
    ("linux", 4, ["6.1", "6.5", "6.8"], ["ThinkPad T14", "Desktop"]),
    ("other", 2, ["1.0", "2.1"], ["Smart TV", "Console"]),
]
#: Actions, most frequent first (skewed pick).
ACTIONS = ["view", "click", "scroll", "search", "add_to_cart", "login", "purchase", "logout",
           "share", "delete_account"]
SECTIONS = ["home", "shop", "product", "cart", "account", "search", "help", "blog"]
PAGES = ["index", "list", "detail", "edit", "new", "settings", "reviews", "checkout", "history",
         "faq", "contact", "about"]
#: Error codes of ordinary ERROR events, everywhere in the log, most frequent first.
COMMON_ERROR_CODES = ["ERR-1001", "ERR-1002", "ERR-1017", "ERR-2003", "ERR-2040", "ERR-3100",
                      "ERR-3307", "ERR-5002"]
#: (status, percent) of payloads of non-ERROR events; ERROR events are always "failed".
STATUSES = [("ok", 96), ("pending", 2), ("refunded", 2)]

SCHEMA_DOC = f"""\
| column | type | distribution |
| --- | --- | --- |
| `event_id` | long | `0 .. rows-1`, unique; file `i` holds ids `[i*rows//files, (i+1)*rows//files)` |
| `ts` | timestamp | {START:%Y-%m-%d} 00:00 UTC + {SPAN_DAYS} days, strictly increasing with `event_id` (evenly spaced, jittered within the step) |
| `event_date` | date | UTC date of `ts` ({SPAN_DAYS} values) |
| `trace_id` | string | 32 lowercase hex, unique per event (hash of the id; the second half makes it injective) |
| `session_id` | string | 16 lowercase hex (hash of the session number); each window of {SESSION_WINDOW:,} consecutive events (fewer if a file holds fewer rows) is shared by {SESSIONS_PER_WINDOW} interleaved sessions, so a session has ~{SESSION_WINDOW // SESSIONS_PER_WINDOW} events and lies in 1-2 adjacent files |
| `account_id` | long | per session; `1 .. {ACCOUNTS:,}`, Zipf-like: `P(id <= x) = (x/{ACCOUNTS:,})^(1/{ACCOUNT_SKEW:g})` (id 1 has ~2% of sessions; ids near {ACCOUNTS:,} have 0-2 sessions at 5M rows); clustered: a file holds the accounts of its ~{SESSION_WINDOW // SESSIONS_PER_WINDOW}-event sessions only |
| `user.id` | long | per event; `1 .. {USERS:,}`, Zipf-like: `P(id <= x) = (x/{USERS:,})^(1/{USER_SKEW:g})` (id 1 has ~0.04% of events; most ids have 0-1 events at 5M rows), so nearly every event of a file has another user and every file's min/max spans the range |
| `user.country` | string | per user; {len(COUNTRIES)} ISO codes, skewed (`US` ~18%, `DE` ~7%, the last ones ~2% each) |
| `user.segment` | string | per user; {", ".join(f"`{s}` {p}%" for s, p in SEGMENTS)} |
| `device.os` | string | per user; {", ".join(f"`{o}` {p}%" for o, p, _, _ in DEVICES)} |
| `device.version` | string | per user; 2-5 versions of the os, uniform |
| `device.model` | string | per user; 2-6 models of the os, uniform |
| `payload` | string | JSON `{{"amount":<decimal(10,2), 0.99 .. 2000.98, skewed low>,"currency":<the user's country's>,"items":<1..8>,"status":<ok 96% / pending 2% / refunded 2%; failed for ERROR events>,"at":<ts as ISO-8601 UTC text with milliseconds, yyyy-MM-ddTHH:mm:ss.SSSZ>}}`; `at` sorts as text in time order (it is the timestamp of `message`) |
| `level` | string | `INFO` ~90%, `WARN` ~8%, `ERROR` ~2% |
| `message` | string | `<level> <ts as yyyy-MM-ddTHH:mm:ss.SSSZ> user=<user.id> action=<{len(ACTIONS)} values> path=/<section>/<page> ({len(SECTIONS) * len(PAGES)} paths) latency_ms=<n>` (3-4002, skewed low; 1000-9999 for WARN), then ` slow_request` for WARN and ` status=500 error=<code>` for ERROR; ERROR codes: {len(COMMON_ERROR_CODES)} common ones everywhere, plus `{RARE_ERROR_CODE}` on every {RARE_EVERY}th event of two narrow id windows (`max(20, min(rows//files//4, rows//5000))` ids wide, so 400 events at 5M rows), each in the middle of one file (files `files//3` and `2*files//3`) |
"""


def at_text(micros: int) -> str:
    """The ISO-8601 UTC text (``yyyy-MM-ddTHH:mm:ss.SSSZ``) of an instant in microseconds since
    the epoch, as ``payload``'s ``at`` and ``message`` write it (truncated to milliseconds)."""
    t = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(microseconds=micros)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def event_micros(facts: dict[str, Any], event_id: int) -> int:
    """The first instant of event ``event_id``'s time step (its ``ts`` is at or after it)."""
    start = int(_dt.datetime.fromisoformat(facts["start_ts"]).timestamp()) * 1_000_000
    return start + event_id * facts["step_micros"]


def _sql_str(value: str) -> str:
    """A SQL string literal (the values here hold no quotes or backslashes)."""
    assert "'" not in value and "\\" not in value, value
    return f"'{value}'"


def _sql_array(values: list[str]) -> str:
    return "array(" + ", ".join(_sql_str(v) for v in values) + ")"


def _uniform(h: str) -> str:
    """SQL: a double in [0, 1) from the low 53 bits of the 64-bit hash ``h``."""
    return f"(({h}) & {(1 << 53) - 1}) / {float(1 << 53)!r}"


def _pick(values: list[str], index: str) -> str:
    """SQL: ``values[index]`` for a 0-based integer expression ``index`` in ``[0, len(values))``."""
    return f"element_at({_sql_array(values)}, cast({index} as int) + 1)"


def _skewed(values: list[str], h: str, power: float = 2.0) -> str:
    """SQL: one of ``values``, earlier ones more often: index ``floor(n * u ** power)``."""
    return _pick(values, f"floor({len(values)} * pow({_uniform(h)}, {power!r}))")


def _weighted(choices: list[tuple[str, int]], h: str) -> str:
    """SQL: one of the choices, picked with the given percent weights by ``pmod(h, 100)``."""
    whens = []
    upper = 0
    for value, percent in choices[:-1]:
        upper += percent
        whens.append(f"WHEN pmod({h}, 100) < {upper} THEN {_sql_str(value)}")
    return f"CASE {' '.join(whens)} ELSE {_sql_str(choices[-1][0])} END"


def _hex16(h: str) -> str:
    """SQL: a long as 16 lowercase hex digits (two's complement, zero-padded)."""
    return f"lower(lpad(hex({h}), 16, '0'))"


def _layout(rows: int, files: int) -> dict[str, Any]:
    """Id arithmetic shared by the columns and the facts: file bounds, windows, rare ranges."""
    bounds = [(i * rows) // files for i in range(files + 1)]
    min_file_rows = rows // files
    window = max(1, min(SESSION_WINDOW, min_file_rows))
    rare_width = min(min_file_rows, max(20, min(min_file_rows // 4, rows // 5000)))
    rare_files = sorted({files // 3, (2 * files) // 3})
    rare_ranges = []
    for k in rare_files:
        start = bounds[k] + (bounds[k + 1] - bounds[k] - rare_width) // 2
        rare_ranges.append((start, start + rare_width))
    return {
        "bounds": bounds,
        "window": window,
        "rare_files": rare_files,
        "rare_ranges": rare_ranges,
        "step": (SPAN_DAYS * _MICROS_PER_DAY) // rows,
    }


def _projections(rows: int, files: int, seed: int) -> list[list[str]]:
    """The SQL select lists that turn ``spark.range``'s ``id`` into events, stage by stage.

    Every value is a function of ``id`` and the constants here: ``xxhash64(seed, salt, ...)``
    gives independent pseudo-random streams (one salt per field); ``pow`` is
    ``StrictMath.pow`` in Spark, so the doubles are the same on every machine.
    """
    lay = _layout(rows, files)
    step = lay["step"]

    def h(salt: int, *cols: str) -> str:
        return f"xxhash64({seed}, {salt}, {', '.join(cols)})"

    rare = " OR ".join(
        f"(id >= {lo} AND id < {hi} AND pmod(id - {lo}, {RARE_EVERY}) = 0)"
        for lo, hi in lay["rare_ranges"]) or "false"
    versions = "map(" + ", ".join(f"{_sql_str(o)}, {_sql_array(vs)}" for o, _, vs, _ in DEVICES) + ")"
    models = "map(" + ", ".join(f"{_sql_str(o)}, {_sql_array(ms)}" for o, _, _, ms in DEVICES) + ")"
    trace_hi = h(18, "id")
    section_idx = f"pmod({h(14, 'id')}, {len(SECTIONS)})"
    page_idx = f"pmod({h(15, 'id')}, {len(PAGES)})"
    cents = f"(99 + floor(pow({_uniform(h(10, 'id'))}, 3.0) * 200000))"

    def for_os(options: str, salt: int) -> str:
        """One of the user's os's ``options`` (a SQL map from os to array), uniform by user."""
        return (f"element_at({options}[_os],"
                f" cast(pmod({h(salt, '_uid')}, size({options}[_os])) + 1 AS int))")

    return [
        [
            "id",
            # Evenly spaced, jittered inside each step: strictly increasing with the id.
            f"{_START_MICROS} + id * {step} + pmod({h(1, 'id')}, {step}) AS _micros",
            # Each window of consecutive events is shared by SESSIONS_PER_WINDOW sessions.
            f"(id div {lay['window']}) * {SESSIONS_PER_WINDOW}"
            f" + pmod({h(2, 'id')}, {SESSIONS_PER_WINDOW}) AS _session",
            f"{rare} AS _rare",
        ],
        [
            "*",
            "cast(_micros div 86400000000 AS int) AS _days",
            "_micros % 86400000000 AS _mod",
            # The session's account, skewed towards small ids.
            f"floor({ACCOUNTS} * pow({_uniform(h(3, '_session'))}, {ACCOUNT_SKEW!r})) + 1"
            " AS _account",
            # The event's user, skewed towards small ids, drawn for each event.
            f"floor({USERS} * pow({_uniform(h(20, 'id'))}, {USER_SKEW!r})) + 1 AS _uid",
            f"CASE WHEN _rare THEN 'ERROR' WHEN {_uniform(h(9, 'id'))} < 0.02 THEN 'ERROR'"
            f" WHEN {_uniform(h(9, 'id'))} < 0.10 THEN 'WARN' ELSE 'INFO' END AS level",
        ],
        [
            "*",
            # User attributes are functions of the user.
            f"floor({len(COUNTRIES)} * pow({_uniform(h(4, '_uid'))}, 2.0)) AS _country_idx",
            f"{_weighted([(o, p) for o, p, _, _ in DEVICES], h(6, '_uid'))} AS _os",
            "format_string('%sT%02d:%02d:%02d.%03dZ', cast(date_from_unix_date(_days) AS string),"
            " cast(_mod div 3600000000 AS int), cast(_mod div 60000000 % 60 AS int),"
            " cast(_mod div 1000000 % 60 AS int), cast(_mod div 1000 % 1000 AS int)) AS _ts_text",
            f"CASE WHEN _rare THEN {_sql_str(RARE_ERROR_CODE)}"
            f" ELSE {_skewed(COMMON_ERROR_CODES, h(17, 'id'))} END AS _error_code",
        ],
        [
            "id AS event_id",
            "timestamp_micros(_micros) AS ts",
            "date_from_unix_date(_days) AS event_date",
            # The second half XORs the id into a function of the first, so ids never collide.
            f"concat({_hex16(trace_hi)}, {_hex16(f'xxhash64({trace_hi}) ^ id')})"
            " AS trace_id",
            f"{_hex16(h(19, '_session'))} AS session_id",
            "_account AS account_id",
            f"named_struct('id', _uid, 'country', {_pick(COUNTRIES, '_country_idx')},"
            f" 'segment', {_weighted(SEGMENTS, h(5, '_uid'))}) AS user",
            f"named_struct('os', _os,"
            f" 'version', {for_os(versions, 7)}, 'model', {for_os(models, 8)})"
            " AS device",
            "to_json(named_struct("
            f"'amount', cast({cents} / 100 AS decimal(10,2)),"
            f" 'currency', {_pick(CURRENCIES, '_country_idx')},"
            f" 'items', cast(1 + floor(pow({_uniform(h(11, 'id'))}, 3.0) * 8) AS int),"
            f" 'status', CASE WHEN level = 'ERROR' THEN 'failed'"
            f" ELSE {_weighted(STATUSES, h(12, 'id'))} END,"
            " 'at', _ts_text"
            ")) AS payload",
            "concat(format_string('%s %s user=%d action=%s path=%s latency_ms=%d', level, _ts_text, _uid,"
            f" {_skewed(ACTIONS, h(13, 'id'))},"
            f" concat('/', {_pick(SECTIONS, section_idx)}, '/', {_pick(PAGES, page_idx)}),"
            f" CASE WHEN level = 'WARN' THEN 1000 + pmod({h(16, 'id')}, 9000)"
            f" ELSE 3 + cast(floor(pow({_uniform(h(16, 'id'))}, 6.0) * 4000) AS long) END),"
            " CASE WHEN level = 'WARN' THEN ' slow_request'"
            " WHEN level = 'ERROR' THEN concat(' status=500 error=', _error_code) ELSE '' END)"
            " AS message",
            "level",
        ],
    ]


def _events(spark: SparkSession, start: int, end: int, rows: int, files: int, seed: int,
            partitions: int) -> DataFrame:
    """Events with ids ``[start, end)`` of the log of ``rows`` events in ``files`` files."""
    df = spark.range(start, end, 1, partitions)
    for select in _projections(rows, files, seed):
        df = df.selectExpr(*select)
    return df


def events(spark: SparkSession, rows: int, files: int = 64, seed: int = 7) -> DataFrame:
    """The whole log as a DataFrame (not written), one partition per file-to-be."""
    _check(rows, files)
    return _events(spark, 0, rows, rows, files, seed, files)


def _check(rows: int, files: int) -> None:
    """Reject sizes the layout cannot honour."""
    if files < 1:
        raise ValueError(f"files must be >= 1, got {files}")
    if rows < files:
        raise ValueError(f"rows ({rows}) must be >= files ({files})")
    if rows > SPAN_DAYS * _MICROS_PER_DAY:
        raise ValueError(f"rows ({rows}) must be at most one per microsecond of the span")


def generate(spark: SparkSession, out_dir: str, rows: int, files: int = 64,
             seed: int = 7) -> dict[str, Any]:
    """Write the event log to ``out_dir`` (overwritten) as ``files`` Parquet files; return facts.

    Same ``seed``, ``rows`` and ``files`` give identical rows. File ``i`` (the ``i``-th name in
    sorted order, ``part-<i, 5 digits>-...``) holds ids ``[i * rows // files, (i + 1) * rows // files)``
    in ``ts`` order. See ``SCHEMA_DOC`` for the columns.

    Returns a dict with:

    * ``version``: :data:`VERSION`, the version of the generated data;
    * ``path``, ``rows``, ``files``, ``seed``;
    * ``start_ts`` / ``end_ts``: ISO-8601 UTC bounds of the log (``ts`` is in ``[start, end)``);
    * ``step_micros``: the time step per event: event ``i``'s ``ts`` is in
      ``[start + i * step, start + (i + 1) * step)`` (see :func:`at_text` for ``payload``'s ``at``);
    * ``file_bounds``: ``[first_id, end_id)`` of each file, in file order;
    * ``max_file_rows``: the most events a file holds; ``max_file_sessions``: an upper bound of
      the distinct ``session_id`` values a file holds (what a per-file sketch must be sized for);
    * ``frequent_token``: ``"INFO"``, which starts most messages;
    * ``rare_error_code``: ``"ERR-4711"``; ``rare_error_rows``: how many messages hold it;
      ``rare_error_files``: indexes of the (1 or 2) files that hold them;
    * ``sample_event_id``, ``sample_trace_id``, ``sample_session_id``, ``sample_user_id``: one
      event's values; the user is the least frequent one of a 5,000-event slice in the middle of
      the log, so it has few events (it exists by construction);
    * ``sample_account_id``: the least frequent account of that slice (one session at most
      sizes).
    """
    _check(rows, files)
    lay = _layout(rows, files)
    t0 = time.perf_counter()
    (events(spark, rows, files, seed).write.mode("overwrite")
     .option("compression", "snappy").option("maxRecordsPerFile", 0)
     .option("parquet.block.row.count.limit", ROW_GROUP_ROWS)
     # Parquet 1.13 (Spark 3.5) has no row count limit: a one-byte block checked every N rows
     .option("parquet.block.size", 1).option("parquet.page.size.row.check.min", ROW_GROUP_ROWS)
     .option("parquet.page.size.row.check.max", ROW_GROUP_ROWS)
     .parquet(out_dir))
    log.info("wrote %d events in %d files to %s in %.1f s", rows, files, out_dir,
             time.perf_counter() - t0)

    lo = rows // 2
    hi = min(rows, lo + SAMPLE_SLICE)
    sample = (_events(spark, lo, hi, rows, files, seed, 1)
              .orderBy(F.col("user.id").desc(), F.col("event_id"))
              .select("event_id", "trace_id", "session_id", F.col("user.id").alias("uid"))
              .first())
    account = (_events(spark, lo, hi, rows, files, seed, 1)
               .agg(F.max("account_id").alias("a")).first()["a"])
    rare_rows = sum(len(range(a, b, RARE_EVERY)) for a, b in lay["rare_ranges"])
    step = lay["step"]
    max_file_rows = max(b - a for a, b in zip(lay["bounds"], lay["bounds"][1:]))
    return {
        "version": VERSION,
        "path": out_dir,
        "rows": rows,
        "files": files,
        "seed": seed,
        "start_ts": START.isoformat(),
        "end_ts": (START + _dt.timedelta(microseconds=rows * step)).isoformat(),
        "step_micros": step,
        "file_bounds": [[a, b] for a, b in zip(lay["bounds"], lay["bounds"][1:])],
        "max_file_rows": max_file_rows,
        # a file's ids meet at most ceil(rows / window) + 1 windows of SESSIONS_PER_WINDOW sessions
        "max_file_sessions": (-(-max_file_rows // lay["window"]) + 1) * SESSIONS_PER_WINDOW,
        "frequent_token": FREQUENT_TOKEN,
        "rare_error_code": RARE_ERROR_CODE,
        "rare_error_rows": rare_rows,
        "rare_error_files": lay["rare_files"],
        "sample_event_id": int(sample["event_id"]),
        "sample_trace_id": sample["trace_id"],
        "sample_session_id": sample["session_id"],
        "sample_user_id": int(sample["uid"]),
        "sample_account_id": int(account),
    }
