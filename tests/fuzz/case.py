"""A fuzz case (two datasets, their indexes, a query) set up in a session: files written
under a fresh directory (tables made over them for datasets read as tables), indexes built in
a fresh system path, views ``t`` and ``u``; change
steps applied to it (see :mod:`tests.fuzz.changes`); and one query run with and without the
accelerator."""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from accelerator import Hyperspace
from accelerator.query.session import conf_set
from tests.fuzz import changes, compare, data, indexes, tables
from tests.fuzz.queries import Query

INDEX_MARKERS = ("PrunedFileIndex", "CachedFileIndex")
# Vanilla Spark's second answer: without Parquet filter pushdown. With it, Spark itself loses
# rows equal to 0.0 for a -0.0 literal and the reverse (Parquet's dictionary and statistics
# filters tell the zeros apart, Spark's comparison does not). Over index and cache files the
# accelerator keeps such comparisons out of Parquet, so its answer is vanilla's without
# pushdown there, and vanilla's with pushdown over the source files it leaves: either answer
# passes, no other.
WITHOUT_PUSHDOWN = {"spark.sql.parquet.filterPushdown": "false"}


@dataclass
class Outcome:
    """One query's run: ``failure`` says how the answers differed (None: identical),
    ``used`` whether an index or the cache served it, ``skipped`` whether vanilla Spark
    raised too (nothing to compare)."""

    failure: str | None = None
    used: bool = False
    skipped: bool = False


@dataclass
class Setup:
    """The datasets and index specs of a case, where they were written (each dataset's
    directory in ``paths``, its files by number in ``files``: None for one not written) and
    the change steps applied since."""

    datasets: dict
    specs: list
    root: str = ""
    paths: dict = field(default_factory=dict)
    files: dict = field(default_factory=dict)
    steps: list = field(default_factory=list)

    def system_path(self) -> str:
        """The case's accelerator system path."""
        return os.path.join(self.root, "indexes")


def build(spark, setup: Setup) -> Setup:
    """Writes the datasets (and makes the tables of those read as tables), creates the indexes
    (in a fresh system path the session then uses), appends the files added later and
    registers the views; returns ``setup``."""
    setup.root = tempfile.mkdtemp(prefix="fuzz-")
    spark.conf.set("spark.accelerator.system.path", setup.system_path())
    hs = Hyperspace(spark)
    written = {}
    for name, dataset in setup.datasets.items():
        if dataset.format in data.TABLE_FORMATS:
            setup.paths[name] = os.path.join(setup.root, name)
            written[name] = [None] * len(dataset.files)   # its files are the table's
            tables.run(spark, setup.root, tables.build_code(dataset, "rows"), dataset.files,
                       dataset.format)
            continue
        setup.paths[name], written[name] = data.write(spark, dataset, setup.root)
        if dataset.access == "table":
            data.make_table(spark, dataset, setup.root)
    for spec in setup.specs:
        df = data.source(spark, setup.datasets[spec.dataset], setup.root)
        with conf_set(spark, {"spark.accelerator.index.lineage.enabled": str(spec.lineage).lower()}):
            indexes.create(spark, hs, df, spec)
    for name, dataset in setup.datasets.items():
        if dataset.format in data.TABLE_FORMATS:
            tables.run(spark, setup.root, tables.change_code(dataset, "rows"), dataset.appended,
                       dataset.format)
            setup.files[name] = written[name] + [None] * len(dataset.appended)
            continue
        setup.files[name] = written[name] + data.change(spark, dataset, setup.paths[name],
                                                        written[name])
    register_views(spark, setup)
    return setup


def apply(spark, setup: Setup, step: changes.Step) -> list[str]:
    """Applies change ``step`` to the built ``setup`` (its source change, the dataset's table
    refreshed, then its operations) and registers the views again (reading the files present
    now); returns the operations' statuses. An operation's unexpected error is raised."""
    dataset, files = setup.datasets[step.dataset], setup.files[step.dataset]
    if dataset.format in data.TABLE_FORMATS:
        rows = step.rows[0] if step.source == "merge" else list(step.rows)
        tables.run(spark, setup.root, tables.step_code(step, dataset, "rows"), rows,
                   dataset.format)
        if step.source == "merge":
            files.append(None)
        elif step.source == "append":
            files += [None] * len(step.rows)
    elif step.source == "append":
        files += data.write_files(spark, setup.paths[step.dataset], list(step.rows),
                                  dataset.partitioned, first=len(files),
                                  row_group_rows=dataset.row_group_rows, fmt=dataset.format,
                                  partitions=step.partitions)
    elif step.source == "delete":
        os.remove(files[step.file])
    elif step.source == "overwrite":
        data.replace_file(spark, dataset, files[step.file], step.rows[0])
    data.refresh(spark, dataset)
    setup.steps.append(step)
    hs = Hyperspace(spark)
    statuses = [changes.run_operation(spark, hs, setup.root,
                                      changes.operation_code(op, setup.specs, setup.datasets))
                for op in step.operations]
    register_views(spark, setup)
    return statuses


def replay(spark, setup: Setup, steps: list) -> None:
    """Applies ``steps`` in order to the built ``setup``."""
    for step in steps:
        apply(spark, setup, step)


def register_views(spark, setup: Setup) -> None:
    """Registers each dataset of the built ``setup`` (its table refreshed) as a view named
    after it."""
    for name in setup.paths:
        dataset = setup.datasets[name]
        data.refresh(spark, dataset)
        data.source(spark, dataset, setup.root).createOrReplaceTempView(name)


def teardown(setup: Setup) -> None:
    """Removes the case's files, indexes and tables (an Iceberg table's namespace too)."""
    held = [d for d in setup.datasets.values() if d.access == "table" or d.format == data.ICEBERG]
    spark = SparkSession.getActiveSession() if held and setup.root else None
    if spark:
        for dataset in held:
            spark.sql(f"DROP TABLE IF EXISTS {data.table_name(dataset, setup.root)}")
        for namespace in {data.table_name(d, setup.root).rsplit(".", 1)[0] for d in held
                          if d.format == data.ICEBERG}:
            spark.sql(f"DROP NAMESPACE IF EXISTS {namespace}")
    shutil.rmtree(setup.root, ignore_errors=True)


def run(spark, setup: Setup, query: Query) -> Outcome:
    """Runs ``query`` with the accelerator and without it and compares the rows."""
    Hyperspace.enable(spark)
    try:
        df = query.build(spark)
        got = df.collect()
        plan = df._jdf.queryExecution().executedPlan().toString()
        accel_error = None
    except Exception as e:   # noqa: BLE001 (compared with vanilla's behaviour)
        got, plan, accel_error = None, "", e
    finally:
        Hyperspace.disable(spark)
    try:
        want = query.build(spark).collect()
        if accel_error is None and compare.difference(got, want) is not None:
            with conf_set(spark, WITHOUT_PUSHDOWN):
                if compare.difference(got, query.build(spark).collect()) is None:
                    want = got
    except Exception as e:   # noqa: BLE001
        if accel_error is not None:
            return Outcome(skipped=True)
        return Outcome(failure=f"vanilla raised {type(e).__name__}: {str(e)[:300]}; "
                               f"accelerated returned {len(got)} rows")
    if accel_error is not None:
        return Outcome(failure=f"accelerated raised {type(accel_error).__name__}: "
                               f"{str(accel_error)[:500]}")
    used = setup.system_path() in plan or any(m in plan for m in INDEX_MARKERS)
    return Outcome(failure=compare.difference(got, want), used=used)


TAG = "fuzz_q"
_TAG_LINE = re.compile(rf"\b(\d+) AS {TAG}#")


def _tagged(spark, queries: list[Query]):
    """One DataFrame: the union of the queries' rows as JSON, each tagged with its number (a
    union of the queries' DataFrames, so each keeps its own plan: an ORDER BY ... LIMIT or a
    set operation stays inside its member)."""
    parts = []
    for number, query in enumerate(queries):
        df = query.build(spark)
        df = df.toDF(*[f"c{i}" for i in range(len(df.columns))])
        parts.append(df.select(F.lit(number).alias(TAG), F.to_json(F.struct("*")).alias("r")))
    union = parts[0]
    for part in parts[1:]:
        union = union.unionAll(part)
    return union


def _answers(rows, count: int) -> list[list]:
    out: list[list] = [[] for _ in range(count)]
    for row in rows:
        out[row[0]].append((json.loads(row[1]),) if row[1] is not None else (None,))
    return out


def used_by(plan: str, count: int, system_path: str) -> list[bool]:
    """Which of the tagged queries of a batch's physical plan (its text) read an index or the
    cache: a scan line with a marker counts for the nearest tagged projection above it."""
    used = [False] * count
    stack: list[tuple[int, int | None]] = []   # (indentation, query number) of the ancestors
    for line in plan.splitlines():
        indent = len(line) - len(line.lstrip(" :+-"))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        found = _TAG_LINE.search(line)
        number = int(found.group(1)) if found else next(
            (n for _, n in reversed(stack) if n is not None), None)
        stack.append((indent, number))
        if number is not None and number < count and (
                system_path in line or any(m in line for m in INDEX_MARKERS)):
            used[number] = True
    return used


def _replanned(df):
    """``df``'s query as a new DataFrame, optimized and planned afresh when it runs (a DataFrame
    keeps the plan of its first run), under the accelerator's switch and the settings of then;
    a no-op projection, which the optimizer removes, over the analyzed plan (not analyzed
    again)."""
    return df.select("*")


def _second_vanilla(spark, queries: list[Query], got: list, want: list) -> list:
    """Vanilla's answers ``want``, each replaced by the accelerated one ``got`` where that
    differs from it but equals vanilla's answer without Parquet filter pushdown (see
    :data:`WITHOUT_PUSHDOWN`); only the queries that differ run again."""
    differing = [i for i, (g, w) in enumerate(zip(got, want))
                 if compare.difference(g, w) is not None]
    if not differing:
        return want
    with conf_set(spark, WITHOUT_PUSHDOWN):
        second = _answers(_tagged(spark, [queries[i] for i in differing]).collect(),
                          len(differing))
    want = list(want)
    for i, rows in zip(differing, second):
        if compare.difference(got[i], rows) is None:
            want[i] = got[i]
    return want


def run_batch(spark, setup: Setup, queries: list[Query]) -> list[Outcome]:
    """Runs the queries as one tagged union with the accelerator and without it (the union
    built once, planned for each) and compares each query's rows; when either raises, runs
    each half again (single queries alone)."""
    if len(queries) == 1:
        return [run(spark, setup, queries[0])]
    try:
        Hyperspace.enable(spark)
        try:
            df = _tagged(spark, queries)
            got = _answers(df.collect(), len(queries))
            plan = df._jdf.queryExecution().executedPlan().toString()
        finally:
            Hyperspace.disable(spark)
        want = _answers(_replanned(df).collect(), len(queries))
        want = _second_vanilla(spark, queries, got, want)
    except Exception:   # noqa: BLE001 (some query raised: find it)
        half = len(queries) // 2
        return run_batch(spark, setup, queries[:half]) + run_batch(spark, setup, queries[half:])
    used = used_by(plan, len(queries), setup.system_path())
    return [Outcome(failure=compare.difference(g, w), used=u) for g, w, u in zip(got, want, used)]
