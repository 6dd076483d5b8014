"""Table-format datasets of the fuzzer (Delta Lake, Apache Iceberg), drawn only when a run asks
for table formats (``runner.run(..., table_formats=("delta",))``), each format from an RNG of
its own (:func:`draw`): the default rounds draw what they drew before, and a Delta round what
it drew before Iceberg came. What the formats share is one logic here; what differs is the
data of its :class:`TableFormat` (:data:`FORMATS`) and a few functions of its own.

A table dataset has the nested columns and is written through its format, one commit per list
of rows (partitioned by ``p`` when the dataset is), never by touching files; its changes go
through SQL: rows appended, ``DELETE``, ``UPDATE`` and ``MERGE`` of some rows (by id, so the
model of its rows stays exact) and a compaction; the files deleted after indexing
(:attr:`Dataset.deleted`) are a ``DELETE`` of their rows. ``deletion_vectors`` marks a table
whose row-level changes write marks beside the files instead of rewriting them.

* Delta: written with ``format("delta")`` (one file a commit), sometimes with
  ``delta.enableDeletionVectors``, read by path (``spark.read.format("delta").load``) or by
  name (a table of the session catalog over its location); compacted by ``OPTIMIZE``. No
  cache (``hs.cache`` refuses Delta tables by design).
* Iceberg: a table of the catalog ``ice`` (a Hadoop catalog, see
  tests/services/table_formats.py) in a namespace of its case (the last name of the case's
  directory, see :func:`tests.fuzz.data.table_name_code`: the minimizer builds cases while a
  round's tables live), of format version 2 or 3, partitioned by ``p`` or by a transform of
  another column (:attr:`Dataset.partitioning`), copy-on-write or merge-on-read
  (``deletion_vectors``: position delete files in version 2, deletion vectors in 3), written
  with ``writeTo(name).append()``, read by name or by its location
  (``spark.read.format("iceberg").load``); compacted by ``rewrite_data_files`` (all files). No
  cache over a merge-on-read table (``hs.cache`` refuses files that carry delete files).

Every change is Python code over the functions of :func:`code` (:func:`build_code`,
:func:`change_code`, :func:`step_code`), run as it is by the fuzzer (:func:`run`) and in
reproductions."""
from __future__ import annotations

import inspect
import random
from dataclasses import dataclass, replace

from tests.fuzz import data
from tests.services.table_formats import iceberg_catalog_conf


@dataclass(frozen=True)
class TableFormat:
    """What differs between the table formats: the ``share`` of a round's datasets drawn in it
    (one at least), how a dataset is read (``access``, weights), the share with
    ``deletion_vectors``, the draws of Iceberg's partition specs (``partitionings``: a
    ``PARTITIONED BY`` clause, "" for ``p``) and ``format_versions`` (weights; none drawn when
    empty), the name of its compaction function, its functions' code and its session
    settings (``session_conf``) for a fuzzing session."""

    name: str
    share: float
    access: dict
    deletion_vectors: float
    partitionings: dict
    format_versions: dict
    compaction: str
    functions: tuple
    session_conf: dict


# Source changes of a table dataset with their weights ("": only index operations run).
SOURCE_CHANGES = {"append": 3, "delete_rows": 2, "update": 2, "merge": 2, "optimize": 1, "": 2}
MAX_CHANGED = 0.25       # at most this share of the rows (and 1 at least) deleted, updated, merged


def frame(spark, rows, partitioned, schema, partitions):
    # the DataFrame of rows, each with its partition p from partitions when partitioned
    return spark.createDataFrame(
        [tuple(r) + (p,) for r, p in zip(rows, partitions)] if partitioned else rows,
        schema + (', p int' if partitioned else ''))


def append_files(spark, files, partitioned, schema, save, first=0, partitions=()):
    # each list of rows saved by save(df) as one commit (partition p = i % 3, or the i-th of
    # partitions)
    for i, rows in enumerate(files, start=first):
        if rows:
            p = partitions[i - first] if partitions else i % 3
            save(frame(spark, rows, partitioned, schema, [p] * len(rows)).coalesce(1))


def delete_rows(spark, target, ids):
    spark.sql(f"DELETE FROM {target} WHERE id IN ({', '.join(map(str, ids))})")


def update_rows(spark, target, ids, k, s):
    value = 'NULL' if s is None else "'" + s.replace('\\', '\\\\').replace("'", "\\'") + "'"
    spark.sql(f"UPDATE {target} SET k = {'NULL' if k is None else k}, s = {value} "
              f"WHERE id IN ({', '.join(map(str, ids))})")


def merge_rows(spark, target, rows, partitioned, schema, partitions=()):
    # upserts rows by id: a matched row's columns but p replaced, the others inserted
    source = frame(spark, rows, partitioned, schema, partitions)
    source.createOrReplaceTempView('fuzz_merge_source')
    sets = ', '.join(f't.`{c}` = s.`{c}`' for c in source.columns if c != 'p')
    spark.sql(f"MERGE INTO {target} t USING fuzz_merge_source s ON t.id = s.id "
              f"WHEN MATCHED THEN UPDATE SET {sets} WHEN NOT MATCHED THEN INSERT *")


def write_delta(spark, target, files, partitioned, deletion_vectors, schema, first=0,
                partitions=()):
    # each list of rows appended to the Delta table at target as one commit of one file;
    # deletion vectors enabled after the first write (first == 0) when asked
    def save(df):
        writer = df.write.format('delta').mode('append')
        (writer.partitionBy('p') if partitioned else writer).save(target)
    append_files(spark, files, partitioned, schema, save, first, partitions)
    if deletion_vectors and first == 0:
        spark.sql(f"ALTER TABLE delta.`{target}` SET TBLPROPERTIES "
                  "('delta.enableDeletionVectors' = 'true')")


def create_delta_table(spark, table, location):
    # a table of the session catalog over the Delta table at location
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {table.split('.')[0]}")
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(f"CREATE TABLE {table} USING delta LOCATION '{location}'")


def optimize(spark, target):
    spark.sql(f"OPTIMIZE {target}")


def create_iceberg_table(spark, table, schema, partitioned, partitioning, version,
                         merge_on_read):
    # the Iceberg table named table (replacing one of that name): format version version,
    # partitioned by partitioning when partitioned, its row-level changes merge-on-read or
    # copy-on-write
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {table.rsplit('.', 1)[0]}")
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    mode = 'merge-on-read' if merge_on_read else 'copy-on-write'
    modes = ', '.join(f"'write.{op}.mode' = '{mode}'" for op in ('delete', 'update', 'merge'))
    spark.sql(f"CREATE TABLE {table} ({schema}{', p int' if partitioned else ''}) USING iceberg "
              f"{f'PARTITIONED BY ({partitioning}) ' if partitioned else ''}"
              f"TBLPROPERTIES ('format-version' = '{version}', {modes})")


def write_iceberg(spark, table, files, partitioned, schema, first=0, partitions=()):
    # each list of rows appended to the Iceberg table named table as one commit
    append_files(spark, files, partitioned, schema, lambda df: df.writeTo(table).append(),
                 first, partitions)


def rewrite_data_files(spark, table):
    # the Iceberg table's files compacted, every one rewritten
    catalog, name = table.split('.', 1)
    spark.sql(f"CALL {catalog}.system.rewrite_data_files(table => '{name}', "
              "options => map('rewrite-all', 'true'))")


SHARED = (frame, append_files, delete_rows, update_rows, merge_rows)
DELTA = TableFormat(
    data.DELTA, share=0.7, access={"path": 50, "table": 50},   # no glob: Delta's log lists
    deletion_vectors=0.5, partitionings={}, format_versions={}, compaction="optimize",
    functions=(write_delta, create_delta_table, optimize),
    # Delta lists a version's files with a Spark job over its cached log state, in 50
    # partitions by default; 1 is ample for the fuzzer's tables (and 2-3 times faster on 2 cores)
    session_conf={"spark.databricks.delta.snapshotPartitions": "1"})
ICEBERG = TableFormat(
    data.ICEBERG, share=0.7, access={"path": 40, "table": 60}, deletion_vectors=0.5,
    # transforms of few values (a file a value and commit: days(ts) would write hundreds)
    partitionings={"": 3, "bucket(2, id), p": 1, "bucket(3, id)": 1, "years(ts)": 1},
    format_versions={2: 2, 3: 1}, compaction="rewrite_data_files",
    functions=(create_iceberg_table, write_iceberg, rewrite_data_files), session_conf={})
FORMATS = {f.name: f for f in (DELTA, ICEBERG)}


def code(formats) -> str:
    """The code of the functions of the table formats named ``formats`` (in reproductions)."""
    functions = SHARED + tuple(f for name in formats for f in FORMATS[name].functions)
    return "\n".join(inspect.getsource(f) for f in functions)


def session_code(formats) -> str:
    """Calls on a ``SparkSession.Builder`` (code) that make the settings of ``formats``
    besides their jars and extensions: the Iceberg catalog in a fresh directory."""
    if data.ICEBERG not in formats:
        return ""
    return "".join(f".config({k!r}, tempfile.mkdtemp())" if k.endswith(".warehouse")
                   else f".config({k!r}, {v!r})" for k, v in iceberg_catalog_conf("").items())


def session_settings(formats, warehouse: str) -> dict:
    """The settings of a fuzzing session over ``formats`` besides their jars and extensions
    (:func:`accelerator.runtime.table_formats.configure`): each format's ``session_conf``,
    the Iceberg catalog over the directory ``warehouse``."""
    settings = {k: v for name in formats for k, v in FORMATS[name].session_conf.items()}
    return {**settings, **(iceberg_catalog_conf(warehouse) if data.ICEBERG in formats else {})}


def cacheable(dataset: data.Dataset) -> bool:
    """Whether ``dataset`` may have a cache (``hs.cache`` refuses Delta tables and the files of
    an Iceberg table that carry delete files)."""
    return dataset.format != data.DELTA and not (
        dataset.format == data.ICEBERG and dataset.deletion_vectors)


def _pick(rng: random.Random, weights: dict, default):
    return rng.choices(list(weights), list(weights.values()))[0] if weights else default


def draw(rng: random.Random, datasets: dict, name: str) -> dict:
    """``datasets`` with some (the format's share, one at least) made tables of format
    ``name``, each with its access, deletion vectors (and an Iceberg table's partition spec
    and format version) drawn from ``rng``."""
    fmt = FORMATS[name]
    chosen = [n for n in sorted(datasets) if rng.random() < fmt.share] or [min(datasets)]
    out = dict(datasets)
    for n in chosen:
        access = _pick(rng, fmt.access, "path")
        out[n] = replace(datasets[n].in_format(name), access=access,
                         deletion_vectors=rng.random() < fmt.deletion_vectors)
        partitioning = _pick(rng, fmt.partitionings, "")
        out[n] = replace(out[n], partitioning=partitioning if out[n].partitioned else "",
                         format_version=_pick(rng, fmt.format_versions, 0))
    return out


def target_code(dataset: data.Dataset) -> str:
    """A Python expression (over ``root``) of the SQL name of ``dataset``'s table (an Iceberg
    table's by name, however queries read it)."""
    if dataset.access == "table" or dataset.format == data.ICEBERG:
        return data.table_name_code(dataset, "root")
    return f"'delta.`' + root + '/{dataset.name}`'"


def _write(dataset: data.Dataset, rows: str, first: int = 0, partitions: tuple = ()) -> str:
    if dataset.format == data.DELTA:
        return (f"write_delta(spark, root + '/{dataset.name}', {rows}, {dataset.partitioned}, "
                f"{dataset.deletion_vectors}, {dataset.columns.schema_name}, first={first}, "
                f"partitions={partitions!r})")
    return (f"write_iceberg(spark, {target_code(dataset)}, {rows}, {dataset.partitioned}, "
            f"{dataset.columns.schema_name}, first={first}, partitions={partitions!r})")


def build_code(dataset: data.Dataset, files: str) -> list[str]:
    """Code writing ``dataset``'s files (the expression ``files``, not its appended ones) as a
    table (an Iceberg table created first; a Delta table's table of the catalog made when read
    by name)."""
    if dataset.format == data.ICEBERG:
        return [f"create_iceberg_table(spark, {target_code(dataset)}, "
                f"{dataset.columns.schema_name}, {dataset.partitioned}, "
                f"{dataset.partitioning or data.PARTITION!r}, {dataset.format_version}, "
                f"{dataset.deletion_vectors})", _write(dataset, files)]
    lines = [_write(dataset, files)]
    if dataset.access == "table":
        lines.append(f"create_delta_table(spark, {dataset.table!r}, root + '/{dataset.name}')")
    return lines


def change_code(dataset: data.Dataset, appended: str) -> list[str]:
    """Code of what happens to ``dataset`` after the indexes were built: the rows of its
    deleted files deleted, its appended files (the expression ``appended``) appended."""
    ids = sorted(r[0] for i in dataset.deleted for r in dataset.files[i])
    lines = [f"delete_rows(spark, {target_code(dataset)}, {ids!r})"] if ids else []
    if dataset.appended:
        lines.append(_write(dataset, appended, first=len(dataset.files)))
    return lines


def step_code(step, dataset: data.Dataset, rows: str) -> list[str]:
    """Code of the source change of change ``step`` (see :mod:`tests.fuzz.changes`) of
    ``dataset``, its rows the expression ``rows`` (the appended files, or the merged rows)."""
    target = target_code(dataset)
    if step.source == "append":
        return [_write(dataset, rows, partitions=step.partitions)]
    if step.source == "delete_rows":
        return [f"delete_rows(spark, {target}, {list(step.ids)!r})"]
    if step.source == "update":
        k, s = step.assign
        return [f"update_rows(spark, {target}, {list(step.ids)!r}, {k!r}, {s!r})"]
    if step.source == "merge":
        return [f"merge_rows(spark, {target}, {rows}, {dataset.partitioned}, "
                f"{dataset.columns.schema_name}, {step.partitions!r})"]
    if step.source == "optimize":
        return [f"{FORMATS[dataset.format].compaction}(spark, {target})"]
    return []


def run(spark, root: str, lines: list[str], rows=None, fmt: str = data.DELTA) -> None:
    """Runs code ``lines`` of format ``fmt`` over the case under ``root`` (``rows`` bound to
    the name rows)."""
    namespace = {"spark": spark, "root": root, "rows": rows, **data.NAMES}
    exec(code([fmt]) + "\n" + "\n".join(lines), namespace)   # noqa: S102 (own code)


def model(files: dict, following: int, step) -> int:
    """Applies the table's source change ``step`` to the rows of ``files`` (by file number, in
    place); returns the number the next file gets (merged rows not matched make one)."""
    if step.source == "delete_rows":
        for i, rows in files.items():
            files[i] = [r for r in rows if r[0] not in step.ids]
    elif step.source == "update":
        for i, rows in files.items():
            files[i] = [(r[0], *step.assign, *r[3:]) if r[0] in step.ids else r for r in rows]
    elif step.source == "merge":
        merged = {r[0]: r for r in step.rows[0]}
        for i, rows in files.items():
            files[i] = [merged.pop(r[0], r) for r in rows]
        if merged:
            files[following] = list(merged.values())
            following += 1
    return following


def random_source(rng: random.Random, dataset: data.Dataset, live: dict, first_id: int,
                  step, new_partition: int):
    """``step`` (of ``dataset``, whose files hold ``live`` rows) with a random source change
    of its table other than an append (``source`` "append" when its rows are needed and none
    is left; the caller draws the appended rows)."""
    source = rng.choices(list(SOURCE_CHANGES), list(SOURCE_CHANGES.values()))[0]
    ids = sorted(r[0] for rows in live.values() for r in rows)
    if source in ("delete_rows", "update", "merge") and not ids:
        source = "append"
    step = replace(step, source=source)
    if source in ("append", "optimize", ""):
        return step
    count = rng.randint(1, max(1, int(len(ids) * MAX_CHANGED)))
    chosen = tuple(sorted(rng.sample(ids, count)))
    if source == "delete_rows":
        return replace(step, ids=chosen)
    if source == "update":
        return replace(step, ids=chosen, assign=(rng.choice([None, rng.randint(0, 40)]),
                                                 rng.choice([None, *data.STRINGS])))
    matched = chosen[:rng.randint(0, len(chosen))]
    drawn = data.draw_rows(rng, dataset.format, first_id, len(matched) + rng.randint(0, 10)
                           or 1)
    rows = [(i, *r[1:]) for i, r in zip(matched, drawn)] + drawn[len(matched):]
    partitions = (tuple(rng.randint(0, new_partition) for _ in rows)
                  if dataset.partitioned else ())
    return replace(step, rows=(rows,), partitions=partitions)
