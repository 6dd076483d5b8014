"""Seeded random datasets: rows of a fixed schema with nested structs, arrays (of ints and of
structs) and a map, nulls (also as elements and map values), empty arrays and maps, NaN and
+-0.0, unicode and empty strings, timestamps from several zones, decimals and JSON strings,
split into a few files (optionally partitioned) and written as Parquet, JSON lines,
gzip-compressed JSON lines, CSV or gzip-compressed CSV (CSV without the struct, array and map
columns, see :data:`FLAT`);
every writer and reader of a dataset (index builds, the views, change steps, reproductions)
uses :func:`write_code` and :func:`source_code`; a dataset is read by its directory's path,
by a glob pattern of its files or as an external table of the session catalog
(:data:`ACCESS`); change steps append rows drawn like a dataset's (:func:`draw_rows`) and
overwrite files in place (:data:`REPLACE_CODE`). When a run asks for table formats, some
datasets are Delta or Iceberg tables instead, written, read and changed through their format
(see :mod:`tests.fuzz.tables`)."""
from __future__ import annotations

import datetime as dt
import inspect
import json
import os
import random
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from decimal import Decimal

from tests.services.table_formats import ICEBERG_CATALOG   # Iceberg datasets' catalog

FLAT_SCHEMA = ("id long, k int, s string, d double, dec decimal(10,2), ts timestamp, day date, "
               "b boolean, j string, msg string")
# The array and map columns with their Spark types (queries and indexes treat them apart from
# the scalars: no ordering, grouping or set operation over a map).
COLLECTIONS = {"arr": "array<int>", "m": "map<string,int>",
               "items": "array<struct<q:int,r:string>>"}
SCHEMA = (FLAT_SCHEMA + ", n struct<x:int, y:string, z:struct<w:double, v:string>>, "
          + ", ".join(f"{name} {kind}" for name, kind in COLLECTIONS.items()))
MAP_KEYS = ["a", "b", "c", "", "ü"]
PARTITION = "p"

# Every scalar column and field under a struct, with its Spark type (for the query and index
# generators; a dataset has those of its :class:`Columns`).
SCALARS = {"id": "long", "k": "int", "s": "string", "d": "double", "dec": "decimal",
           "ts": "timestamp", "day": "date", "b": "boolean", "j": "string", "msg": "string",
           "n.x": "int", "n.y": "string", "n.z.w": "double", "n.z.v": "string"}


@dataclass(frozen=True)
class Columns:
    """The columns of a dataset: its ``schema`` (DDL) and the name of that schema in the code
    of :func:`read_code` and :func:`write_code`, its ``scalars`` (a sub-dict of
    :data:`SCALARS`), ``top_level`` columns, ``structs`` (struct columns and fields) and
    ``collections`` (a sub-dict of :data:`COLLECTIONS`)."""

    schema: str
    schema_name: str
    scalars: dict
    top_level: tuple
    structs: tuple
    collections: dict

    @property
    def maps(self) -> tuple:
        """The map columns (which set operations cannot hold)."""
        return tuple(c for c, kind in self.collections.items() if kind.startswith("map<"))


FLAT_COLUMNS = ("id", "k", "s", "d", "dec", "ts", "day", "b", "j", "msg")
NESTED = Columns(SCHEMA, "SCHEMA", SCALARS, FLAT_COLUMNS + ("n", *COLLECTIONS), ("n", "n.z"),
                 COLLECTIONS)
# CSV cannot hold a struct, an array or a map: CSV datasets have the columns before ``n`` (rows
# without their last values, see :func:`fit`).
FLAT = Columns(FLAT_SCHEMA, "FLAT_SCHEMA", {c: t for c, t in SCALARS.items() if "." not in c},
               FLAT_COLUMNS, (), {})

STRINGS = ["", "a", "ab", "abc", "abcd", "Abc", "ABC", "zeta", "ünïcødé", "日本語", "日本",
           "emoji 😀", "a%b", "a_b", "x.y", "  ", "naïve", "ß", "SS", "İstanbul", "ǅ"]
WORDS = ["error", "timeout", "db-7", "disk", "full", "retry", "ERR-4711", "Ünicode", "ok",
         "warn", "δ-delta", "connection", "reset", "user", "login"]
DOUBLES = [0.0, -0.0, 1.5, -1.5, 2.0, float("nan"), float("inf"), float("-inf"), 1e-9, 3.25,
           100.0, -7.0]
# Source formats with their weights (most rounds read Parquet) and the files' name endings.
FORMATS = {"parquet": 60, "json": 12, "json.gz": 12, "csv": 8, "csv.gz": 8}
SUFFIXES = {fmt: "." + fmt for fmt in FORMATS}
FLAT_FORMATS = ("csv", "csv.gz")   # formats whose datasets have the columns of FLAT
# The table formats drawn only when a run asks for them (see tests.fuzz.tables): not in
# FORMATS, so the default rounds draw what they drew before.
DELTA = "delta"
ICEBERG = "iceberg"
TABLE_FORMATS = (DELTA, ICEBERG)
# How queries and index builds read a dataset, with weights: its directory's path, a glob
# pattern of its files (under ``p=*`` with the directory as ``basePath`` when partitioned), or
# an external table of the session catalog over the directory (in database TABLES; partitioned
# by ``p`` when the data is; its partitions recovered and its files listed again after every
# change, as a user does after writing files beside Spark).
ACCESS = {"path": 50, "glob": 25, "table": 25}
TABLES = "fuzz_tables"
# JSON reader and writer options: timestamps with microseconds (Spark's default keeps
# milliseconds), so JSON files hold the generated values.
JSON_OPTIONS = {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"}
# CSV reader and writer options, the same both ways, so CSV files hold the generated values
# (tests/test_fuzz.py reads edge values back): a header; timestamps as in JSON; quotes doubled
# inside fields (RFC 4180; JSON strings in ``j`` hold quotes, commas and backslashes);
# whitespace kept ("  " is a value; the writer trims by default). Null is written as the
# marker \N because the reader turns a field equal to ``nullValue`` into null after removing
# quotes: with the default "", the empty string would read as null too. The empty string is
# written as ``emptyValue`` "", which ``quoteAll`` turns into a quoted empty field (unquoted,
# it would read as null), read back as ``emptyValue``. A string equal to \N would read as
# null: the data has none. The writer writes doubles as Java does (NaN, Infinity, -Infinity,
# -0.0), which the reader parses with these names. No value holds a line break, so files
# need no ``multiLine``.
CSV_OPTIONS = {"header": "true", "timestampFormat": JSON_OPTIONS["timestampFormat"],
               "dateFormat": "yyyy-MM-dd", "quote": '"', "escape": '"', "quoteAll": "true",
               "nullValue": "\\N", "emptyValue": "",
               "ignoreLeadingWhiteSpace": "false", "ignoreTrailingWhiteSpace": "false",
               "nanValue": "NaN", "positiveInf": "Infinity", "negativeInf": "-Infinity"}
# The names read_code and write_code use besides spark (defined in reproductions too).
NAMES = {"SCHEMA": SCHEMA, "FLAT_SCHEMA": FLAT_SCHEMA, "JSON_OPTIONS": JSON_OPTIONS,
         "CSV_OPTIONS": CSV_OPTIONS}
ZONES = [dt.timezone.utc, dt.timezone(dt.timedelta(hours=5, minutes=30)),
         dt.timezone(dt.timedelta(hours=-8)), dt.timezone(dt.timedelta(hours=14)),
         dt.timezone(dt.timedelta(hours=-12))]


@dataclass
class Dataset:
    """A generated source: its rows per file and how it is written."""

    name: str
    files: list[list[tuple]]
    partitioned: bool = False
    appended: list[list[tuple]] = field(default_factory=list)
    deleted: tuple = ()
    row_group_rows: int | None = None   # Parquet row groups of this many rows (None: one a file)
    format: str = "parquet"             # a key of FORMATS
    access: str = "path"                # a key of ACCESS
    # a table whose row-level changes write marks beside its files (tests.fuzz.tables): a
    # Delta table with deletion vectors, an Iceberg table merge-on-read (delete files)
    deletion_vectors: bool = False
    partitioning: str = ""              # a partitioned Iceberg table's spec ("": by p)
    format_version: int = 0             # an Iceberg table's format version (0: none)

    @property
    def table(self) -> str:
        """The name of the dataset's table in the session catalog (when its access is
        ``table``; an Iceberg table's is :func:`table_name_code`'s)."""
        return f"{TABLES}.{self.name}"

    @property
    def columns(self) -> Columns:
        """The columns of the dataset (those its format holds)."""
        return columns(self.format)

    def in_format(self, fmt: str) -> Dataset:
        """The same dataset written as ``fmt`` (its rows fitted to that format's columns: a
        dataset without ``n`` and the collections gets nulls there in a format that has
        them)."""
        return replace(self, format=fmt, files=fit(self.files, fmt),
                       appended=fit(self.appended, fmt),
                       row_group_rows=self.row_group_rows if fmt == "parquet" else None)

    @property
    def live_files(self) -> list[list[tuple]]:
        """The rows of each file queries read: without deleted files, with appended ones."""
        return [f for i, f in enumerate(self.files) if i not in self.deleted] + self.appended

    @property
    def rows(self) -> list[tuple]:
        """Every row of the source files (appended files included)."""
        return [r for f in self.live_files for r in f]


def _maybe(rng: random.Random, value, null_rate: float):
    return None if rng.random() < null_rate else value


def _timestamp(rng: random.Random) -> dt.datetime:
    local = dt.datetime(rng.choice([1969, 1970, 2000, 2024, 2024, 2038]), rng.randint(1, 12),
                        rng.randint(1, 28), rng.randint(0, 23), rng.choice([0, 30, 59]),
                        rng.choice([0, 1, 59]), rng.choice([0, 0, 1, 999999]),
                        tzinfo=rng.choice(ZONES))
    return local.astimezone(dt.timezone.utc)


def _json(rng: random.Random, i: int) -> str | None:
    choice = rng.random()
    if choice < 0.1:
        return None
    if choice < 0.15:
        return rng.choice(["", "not json", "{", "[1,2]", "{}"])
    doc = {"a": rng.randint(-5, 20), "b": rng.choice(STRINGS),
           "c": {"d": rng.choice([1.5, -2.0, 0.0, 10.25, None])}}
    if rng.random() < 0.2:
        del doc["a"]
    if rng.random() < 0.1:
        doc["a"] = str(doc.get("a", i))
    return json.dumps(doc, ensure_ascii=rng.random() < 0.5)


def _collections(rng: random.Random, null_rate: float) -> tuple:
    """Values of the :data:`COLLECTIONS`: arrays of 0-4 elements (null ones among them), a
    map of 0-3 keys (null values among them)."""
    arr = [_maybe(rng, rng.randint(-3, 12), null_rate) for _ in range(rng.randint(0, 4))]
    m = {key: _maybe(rng, rng.randint(-3, 12), null_rate)
         for key in rng.sample(MAP_KEYS, rng.randint(0, 3))}
    items = [_maybe(rng, (_maybe(rng, rng.randint(-3, 12), null_rate),
                          _maybe(rng, rng.choice(STRINGS), null_rate)), null_rate)
             for _ in range(rng.randint(0, 3))]
    return tuple(_maybe(rng, v, null_rate) for v in (arr, m, items))


def _row(rng: random.Random, i: int, null_rate: float) -> tuple:
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 6)))
    z = _maybe(rng, (_maybe(rng, rng.choice(DOUBLES), null_rate),
                     _maybe(rng, rng.choice(STRINGS), null_rate)), null_rate)
    n = _maybe(rng, (_maybe(rng, rng.randint(-3, 30), null_rate),
                     _maybe(rng, rng.choice(STRINGS), null_rate), z), null_rate)
    return (
        i,
        _maybe(rng, rng.randint(0, 40), null_rate),
        _maybe(rng, rng.choice(STRINGS), null_rate),
        _maybe(rng, rng.choice(DOUBLES) if rng.random() < 0.5 else round(rng.uniform(-50, 50), 2),
               null_rate),
        _maybe(rng, Decimal(rng.randint(-99999, 99999)).scaleb(-2), null_rate),
        _maybe(rng, _timestamp(rng), null_rate),
        _maybe(rng, dt.date(2024, 1, 1) + dt.timedelta(days=rng.randint(-400, 400)), null_rate),
        _maybe(rng, rng.random() < 0.5, null_rate),
        _json(rng, i),
        _maybe(rng, words, null_rate),
        n,
        *_collections(rng, null_rate),
    )


def draw_rows(rng: random.Random, fmt: str, first_id: int, count: int) -> list[tuple]:
    """``count`` new rows drawn like a dataset's (ids from ``first_id``, a random null rate),
    with the columns of format ``fmt``."""
    null_rate = rng.choice([0.0, 0.05, 0.2])
    return fit([[_row(rng, first_id + i, null_rate) for i in range(count)]], fmt)[0]


def generate(rng: random.Random, name: str, start_id: int = 0) -> Dataset:
    """A dataset of 100-400 rows in 3-6 files, clustered by a random column so that
    per-file statistics differ; sometimes partitioned, sometimes with an appended file; mostly
    Parquet, often in several row groups a file, else JSON lines or CSV (both also
    gzip-compressed). The format is the last draw from ``rng``."""
    n_rows = rng.randint(100, 400)
    null_rate = rng.choice([0.0, 0.05, 0.2])
    rows = [_row(rng, start_id + i, null_rate) for i in range(n_rows)]
    key = rng.choice([0, 1, 2, 3, 4, 6, 9])
    rows.sort(key=lambda r: (r[key] is None, _sort_key(r[key]), rng.random()))
    n_files = rng.randint(3, 6)
    bounds = sorted(rng.sample(range(1, n_rows), n_files - 1))
    files = [rows[a:b] for a, b in zip([0] + bounds, bounds + [n_rows])]
    appended: list[list[tuple]] = []
    if rng.random() < 0.25:   # a file added after the indexes were built (hybrid scan)
        appended = [[_row(rng, start_id + n_rows + i, null_rate) for i in range(rng.randint(1, 20))]]
    deleted = (rng.randrange(n_files),) if rng.random() < 0.15 else ()
    partitioned = rng.random() < 0.3
    row_group_rows = rng.choice([None, None, 3, 10, 40])
    fmt = rng.choices(list(FORMATS), list(FORMATS.values()))[0]
    return Dataset(name, files, partitioned=partitioned, appended=appended, deleted=deleted,
                   row_group_rows=row_group_rows).in_format(fmt)


def draw_access(rng: random.Random) -> str:
    """How a dataset is read (a key of :data:`ACCESS`, by its weights)."""
    return rng.choices(list(ACCESS), list(ACCESS.values()))[0]


def columns(fmt: str) -> Columns:
    """The columns of a dataset of format ``fmt``."""
    return FLAT if fmt in FLAT_FORMATS else NESTED


def fit(files: list[list[tuple]], fmt: str) -> list[list[tuple]]:
    """The rows of ``files`` with the values of the columns of ``fmt``: without ``n`` and the
    collections for a flat format, with nulls added to a row without them otherwise."""
    width = len(columns(fmt).top_level)
    return [[row[:width] + (None,) * (width - len(row)) for row in rows] for rows in files]


def _sort_key(value):
    if isinstance(value, float) and value != value:
        return (1, 0.0)
    if isinstance(value, dt.datetime):
        return (0, value.timestamp())
    if isinstance(value, (dt.date, Decimal, bool)):
        return (0, float(value.toordinal() if isinstance(value, dt.date) else value))
    return (0, value)


def read_code(fmt: str, path: str, base: str | None = None) -> str:
    """Python code (over ``spark`` and :data:`NAMES`) reading the dataset of format ``fmt`` at
    the path expression ``path`` (with ``base``, an expression, as the partitions' base path):
    Parquet as is, JSON and CSV with their schema and options (gzip files are recognized by
    their name)."""
    reader = "spark.read" + (f".option('basePath', {base})" if base else "")
    if fmt in TABLE_FORMATS:
        return f"spark.read.format({fmt!r}).load({path})"
    if fmt == "parquet":
        return f"{reader}.parquet({path})"
    kind = fmt.split(".")[0]
    return (f"{reader}.schema({columns(fmt).schema_name})"
            f".options(**{kind.upper()}_OPTIONS).{kind}({path})")


def source_code(dataset: Dataset, root: str) -> str:
    """Python code reading ``dataset`` as queries and index builds do (see :data:`ACCESS`),
    its directory under the path expression ``root``."""
    path = f"{root} + '/{dataset.name}'"
    if dataset.access == "table":
        return f"spark.table({table_name_code(dataset, root)})"
    if dataset.format == ICEBERG:
        return read_code(ICEBERG, f"spark.conf.get('spark.sql.catalog.{ICEBERG_CATALOG}"
                                  f".warehouse') + '/' + {_namespace(root)} + '/{dataset.name}'")
    if dataset.access == "glob":
        files = ("/p=*" if dataset.partitioned else "") + "/*" + SUFFIXES[dataset.format]
        return read_code(dataset.format, f"{path} + {files!r}",
                         base=path if dataset.partitioned else None)
    return read_code(dataset.format, path)


def _namespace(root: str) -> str:
    # the last name of the directory root, "-" made "_" (the accelerator records a table's
    # name unquoted: ice.`fuzz-x`.t would be ice.fuzz-x.t, which names no table)
    return f"{root}.rsplit('/', 1)[-1].replace('-', '_')"


def table_name_code(dataset: Dataset, root: str) -> str:
    """A Python expression of the name of the table of ``dataset`` (its directory under the
    path in the variable named ``root``): an Iceberg table's in :data:`ICEBERG_CATALOG`, in the
    namespace named after that path's last name (the tables of two cases never meet: the minimizer builds
    cases while a round's tables live; its location by that path in the catalog's Hadoop
    warehouse), another's :attr:`Dataset.table`."""
    if dataset.format == ICEBERG:
        return f"'{ICEBERG_CATALOG}.' + {_namespace(root)} + '.{dataset.name}'"
    return repr(dataset.table)


def table_name(dataset: Dataset, root: str) -> str:
    """The name of the table of ``dataset`` (directory under ``root``)."""
    return _run(None, table_name_code(dataset, "root"), root=root)


def sql_string(value) -> str:
    """``value`` as a Spark SQL string literal."""
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def create_table(spark, table, schema, kind, options, partition, location):
    """An external table ``table`` of the session catalog over the files of format ``kind`` at
    ``location`` (replacing one of that name), with the DDL ``schema``, reader ``options`` and
    the int ``partition`` column (None: unpartitioned)."""
    database = table.split(".")[0]
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {database}")
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    columns = schema + (f", {partition} int" if partition else "")
    opts = ", ".join(f"{sql_string(k)} {sql_string(v)}" for k, v in options.items())
    spark.sql(f"CREATE TABLE {table} ({columns}) USING {kind}"
              + (f" OPTIONS ({opts})" if opts else "")
              + (f" PARTITIONED BY ({partition})" if partition else "")
              + f" LOCATION {sql_string(location)}")


def refresh_table(spark, table, partitioned):
    """Brings ``table`` up to date with its files: partitions added and dropped as their
    directories are (when ``partitioned``), every file listed again."""
    if partitioned:
        spark.sql(f"MSCK REPAIR TABLE {table} SYNC PARTITIONS")
    spark.sql(f"REFRESH TABLE {table}")


# The table functions' code (in reproductions too).
TABLE_CODE = "\n".join(inspect.getsource(f) for f in (sql_string, create_table, refresh_table))


def table_code(dataset: Dataset, root: str) -> str:
    """Python code (over ``spark``, :data:`NAMES` and :data:`TABLE_CODE`) creating the table of
    ``dataset`` (directory under the path expression ``root``) with its partitions."""
    kind = dataset.format.split(".")[0]
    options = f"{kind.upper()}_OPTIONS" if kind != "parquet" else "{}"
    partition = PARTITION if dataset.partitioned else None
    return (f"create_table(spark, {dataset.table!r}, {dataset.columns.schema_name}, {kind!r}, "
            f"{options}, {partition!r}, {root} + '/{dataset.name}')")


def refresh_code(dataset: Dataset) -> str:
    """Python code refreshing the table of ``dataset`` (see :func:`refresh_table`)."""
    return f"refresh_table(spark, {dataset.table!r}, {dataset.partitioned})"


def write_code(fmt: str, row_group_rows: int | None = None) -> str:
    """Python code (over ``spark`` and :data:`NAMES`): a function of rows and a directory that
    appends the rows to it as one file of format ``fmt`` (Parquet in row groups of
    ``row_group_rows`` rows when given; JSON and CSV with their options)."""
    df = (f"spark.createDataFrame(rows, {columns(fmt).schema_name})"
          ".coalesce(1).write.mode('append')")
    if fmt == "parquet":
        limit = (f".option('parquet.block.row.count.limit', {row_group_rows})"
                 if row_group_rows else "")
        return f"lambda rows, target: {df}{limit}.parquet(target)"
    kind = fmt.split(".")[0]
    compression = "gzip" if fmt.endswith(".gz") else "none"
    return (f"lambda rows, target: {df}.options(**{kind.upper()}_OPTIONS)"
            f".option('compression', {compression!r}).{kind}(target)")


def _run(spark, code: str, **names):
    return eval(code, {"spark": spark, **NAMES, **names})   # noqa: S307 (own code)


def read(spark, fmt: str, path: str):
    """The DataFrame reading the dataset of format ``fmt`` at ``path`` (see :func:`read_code`)."""
    return _run(spark, read_code(fmt, "path"), path=path)


def source(spark, dataset: Dataset, root: str):
    """The DataFrame reading ``dataset`` (directory under ``root``) as :func:`source_code` does."""
    return _run(spark, source_code(dataset, "root"), root=root)


def make_table(spark, dataset: Dataset, root: str) -> None:
    """Creates the table of ``dataset`` (directory under ``root``) with its partitions."""
    _run(spark, table_code(dataset, "root"), root=root, create_table=create_table)
    refresh(spark, dataset)


def refresh(spark, dataset: Dataset) -> None:
    """Refreshes the table of ``dataset`` (when read as one) after its files changed (a Delta or
    Iceberg table needs none: its log or metadata lists them)."""
    if dataset.access == "table" and dataset.format not in TABLE_FORMATS:
        refresh_table(spark, dataset.table, dataset.partitioned)


def _data_files(path: str, fmt: str) -> set[str]:
    return {os.path.join(d, f) for d, _, names in os.walk(path) for f in names
            if f.endswith(SUFFIXES[fmt])}


def write_files(spark, path: str, files: list[list[tuple]], partitioned: bool,
                first: int = 0, row_group_rows: int | None = None,
                fmt: str = "parquet", partitions: tuple = ()) -> list[str | None]:
    """Appends each list of rows (of the columns of ``fmt``) to ``path`` as one file of format
    ``fmt`` (when ``partitioned``, under ``p=<its number in partitions>``, by default
    ``p=<file number % 3>``; see :func:`write_code`); returns the files' paths (None for an
    empty list)."""
    save = _run(spark, write_code(fmt, row_group_rows))
    written: list[str | None] = []
    for number, rows in enumerate(files, start=first):
        if not rows:
            written.append(None)
            continue
        before = _data_files(path, fmt)
        partition = partitions[number - first] if partitions else number % 3
        save(rows, os.path.join(path, f"{PARTITION}={partition}") if partitioned else path)
        (new,) = _data_files(path, fmt) - before
        written.append(new)
    return written


def write(spark, dataset: Dataset, root: str) -> tuple[str, list]:
    """Writes the dataset's files (not its appended ones) under ``root``; returns the path and
    the files' paths."""
    path = os.path.join(root, dataset.name)
    return path, write_files(spark, path, dataset.files, dataset.partitioned,
                             row_group_rows=dataset.row_group_rows, fmt=dataset.format)


def change(spark, dataset: Dataset, path: str, files: list) -> list[str | None]:
    """What happens after the indexes were built: the appended files are written next to the
    others (their paths returned), the deleted ones removed."""
    for i in dataset.deleted:
        if i < len(files) and files[i]:
            os.remove(files[i])
    return write_files(spark, path, dataset.appended, dataset.partitioned,
                       first=len(dataset.files), row_group_rows=dataset.row_group_rows,
                       fmt=dataset.format)


# A function that overwrites a data file with other rows under the same name (defined in
# reproductions too): ``save`` writes them into a fresh directory, the new file replaces the
# old one and its Hadoop checksum file (the old one would no longer match), and its
# modification time is set at least 2 s after the old file's, as a later write on a file
# system with a coarse clock would leave it (the accelerator tells files apart by path, size
# and modification time).
REPLACE_CODE = """def replace_file(path, rows, save):
    scratch = tempfile.mkdtemp()
    out = scratch + '/out'
    save(rows, out)
    (new,) = [f for f in os.listdir(out) if f.startswith('part-')]
    old_mtime = os.stat(path).st_mtime
    os.replace(os.path.join(out, new), path)
    crc = os.path.join(os.path.dirname(path), '.' + os.path.basename(path) + '.crc')
    if os.path.exists(crc):
        os.remove(crc)
    mtime = max(os.stat(path).st_mtime, old_mtime + 2)
    os.utime(path, (mtime, mtime))
    shutil.rmtree(scratch)
"""


def replace_file(spark, dataset: Dataset, path: str, rows: list[tuple]) -> None:
    """Overwrites the data file at ``path`` of ``dataset`` with ``rows`` (see
    :data:`REPLACE_CODE`)."""
    namespace = {"os": os, "shutil": shutil, "tempfile": tempfile}
    exec(REPLACE_CODE, namespace)   # noqa: S102 (own code)
    namespace["replace_file"](path, rows, _run(spark, write_code(dataset.format,
                                                                  dataset.row_group_rows)))
