"""Delta Lake datasets of the fuzzer, drawn only when a run asks for table formats
(``runner.run(..., table_formats=True)``, from an RNG of their own: the default rounds draw
what they drew before). A Delta dataset has the nested columns, is written with
``format("delta")`` (one commit of one file per list of rows; partitioned by ``p`` when the
dataset is), sometimes with ``delta.enableDeletionVectors``, and read by path
(``spark.read.format("delta").load``) or by name (a table of the session catalog over its
location). Its changes go through Delta, never by touching files: rows appended, ``DELETE``,
``UPDATE`` and ``MERGE`` by SQL of some rows (by id, so the model of its rows stays exact),
``OPTIMIZE``; the files deleted after indexing (:attr:`Dataset.deleted`) are a ``DELETE`` of
their rows. No cache over a Delta dataset (``hs.cache`` refuses Delta tables by design).

Every change is Python code over the functions of :data:`CODE` (:func:`build_code`,
:func:`change_code`, :func:`step_code`), run as it is by the fuzzer (:func:`run`) and in
reproductions."""
from __future__ import annotations

import inspect
import random
from dataclasses import replace

from tests.fuzz import data

FORMAT = "delta"
SHARE = 0.7              # the share of a round's datasets drawn as Delta tables (one at least)
DELETION_VECTORS = 0.5   # the share of Delta datasets with deletion vectors enabled
ACCESS = {"path": 50, "table": 50}   # how a Delta dataset is read (no glob: Delta's log lists)
# Source changes of a Delta dataset with their weights ("": only index operations run).
SOURCE_CHANGES = {"append": 3, "delete_rows": 2, "update": 2, "merge": 2, "optimize": 1, "": 2}
MAX_CHANGED = 0.25       # at most this share of the rows (and 1 at least) deleted, updated, merged
# Settings of a fuzzing session over Delta tables: Delta lists a version's files with a Spark
# job over its cached log state, in 50 partitions by default; 1 is ample for the fuzzer's
# tables (and 2-3 times faster on 2 cores).
SESSION_CONF = {"spark.databricks.delta.snapshotPartitions": "1"}


def write_delta(spark, target, files, partitioned, deletion_vectors, schema, first=0,
                partitions=()):
    # each list of rows appended to the Delta table at target as one commit of one file
    # (partition p = i % 3, or the i-th of partitions); deletion vectors enabled after the
    # first write (first == 0) when asked
    for i, rows in enumerate(files, start=first):
        if not rows:
            continue
        p = partitions[i - first] if partitions else i % 3
        df = spark.createDataFrame([tuple(r) + (p,) for r in rows] if partitioned else rows,
                                   schema + (', p int' if partitioned else ''))
        writer = df.coalesce(1).write.format('delta').mode('append')
        (writer.partitionBy('p') if partitioned else writer).save(target)
    if deletion_vectors and first == 0:
        spark.sql(f"ALTER TABLE delta.`{target}` SET TBLPROPERTIES "
                  "('delta.enableDeletionVectors' = 'true')")


def create_delta_table(spark, table, location):
    # a table of the session catalog over the Delta table at location
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {table.split('.')[0]}")
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(f"CREATE TABLE {table} USING delta LOCATION '{location}'")


def delete_rows(spark, target, ids):
    spark.sql(f"DELETE FROM {target} WHERE id IN ({', '.join(map(str, ids))})")


def update_rows(spark, target, ids, k, s):
    value = 'NULL' if s is None else "'" + s.replace('\\', '\\\\').replace("'", "\\'") + "'"
    spark.sql(f"UPDATE {target} SET k = {'NULL' if k is None else k}, s = {value} "
              f"WHERE id IN ({', '.join(map(str, ids))})")


def merge_rows(spark, target, rows, partitioned, schema, partitions=()):
    # upserts rows by id: a matched row's columns but p replaced, the others inserted
    source = spark.createDataFrame(
        [tuple(r) + (p,) for r, p in zip(rows, partitions)] if partitioned else rows,
        schema + (', p int' if partitioned else ''))
    source.createOrReplaceTempView('fuzz_merge_source')
    sets = ', '.join(f't.`{c}` = s.`{c}`' for c in source.columns if c != 'p')
    spark.sql(f"MERGE INTO {target} t USING fuzz_merge_source s ON t.id = s.id "
              f"WHEN MATCHED THEN UPDATE SET {sets} WHEN NOT MATCHED THEN INSERT *")


def optimize(spark, target):
    spark.sql(f"OPTIMIZE {target}")


# The functions' code (in reproductions too).
CODE = "\n".join(inspect.getsource(f) for f in (write_delta, create_delta_table, delete_rows,
                                                 update_rows, merge_rows, optimize))


def draw(rng: random.Random, datasets: dict) -> dict:
    """``datasets`` with some (:data:`SHARE`, one at least) made Delta tables, each with its
    access (:data:`ACCESS`) and deletion vectors drawn from ``rng``."""
    chosen = [name for name in sorted(datasets) if rng.random() < SHARE] or [min(datasets)]
    out = dict(datasets)
    for name in chosen:
        access = rng.choices(list(ACCESS), list(ACCESS.values()))[0]
        out[name] = replace(datasets[name].in_format(FORMAT), access=access,
                            deletion_vectors=rng.random() < DELETION_VECTORS)
    return out


def target_code(dataset: data.Dataset) -> str:
    """A Python expression (over ``root``) of the SQL name of ``dataset``'s Delta table."""
    if dataset.access == "table":
        return repr(dataset.table)
    return f"'delta.`' + root + '/{dataset.name}`'"


def _write(dataset: data.Dataset, rows: str, first: int = 0, partitions: tuple = ()) -> str:
    return (f"write_delta(spark, root + '/{dataset.name}', {rows}, {dataset.partitioned}, "
            f"{dataset.deletion_vectors}, {dataset.columns.schema_name}, first={first}, "
            f"partitions={partitions!r})")


def build_code(dataset: data.Dataset, files: str) -> list[str]:
    """Code writing ``dataset``'s files (the expression ``files``, not its appended ones) as a
    Delta table (and its table of the catalog when read by name)."""
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
        return [f"optimize(spark, {target})"]
    return []


def run(spark, root: str, lines: list[str], rows=None) -> None:
    """Runs code ``lines`` over the case under ``root`` (``rows`` bound to the name rows)."""
    namespace = {"spark": spark, "root": root, "rows": rows, **data.NAMES}
    exec(CODE + "\n" + "\n".join(lines), namespace)   # noqa: S102 (own code)


def model(files: dict, following: int, step) -> int:
    """Applies the Delta source change ``step`` to the rows of ``files`` (by file number, in
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
    """``step`` (of ``dataset``, whose files hold ``live`` rows) with a random Delta source
    change other than an append (``source`` "append" when its rows are needed and none is
    left; the caller draws the appended rows)."""
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
