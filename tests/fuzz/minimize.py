"""Shrinking a failing case: fewer predicate parts and columns, fewer change steps and index
operations, fewer indexes, files and rows, as long as the answers still differ; then a
standalone Python snippet reproducing it (the change steps applied before the failing query
included)."""
from __future__ import annotations

import time
from dataclasses import replace

from tests.fuzz import case, changes, data, tables
from tests.fuzz.queries import Query


def minimize(spark, setup: case.Setup, query: Query, seconds: float, log=print) -> str:
    """The reproduction of ``query`` failing over ``setup`` (already built, its change steps
    applied), shrunk for at most about ``seconds``: Python code that prints the difference and
    fails."""
    deadline = time.monotonic() + seconds
    query = _shrink_query(spark, setup, query, deadline)
    datasets, specs, steps = dict(setup.datasets), list(setup.specs), list(setup.steps)

    def fails(candidate_datasets, candidate_specs, candidate_steps) -> bool:
        if time.monotonic() > deadline or candidate_steps is None:
            return False
        trial = case.Setup(candidate_datasets, candidate_specs)
        try:
            case.build(spark, trial)
            case.replay(spark, trial, candidate_steps)
            return case.run(spark, trial, query).failure is not None
        except Exception as e:   # noqa: BLE001 (a smaller case that cannot be built)
            log(f"minimize: candidate not built: {type(e).__name__}: {str(e)[:200]}")
            return False
        finally:
            case.teardown(trial)

    note = ""
    if steps and not fails(datasets, specs, steps):
        note = ("# NOTE: a fresh build with these change steps did not fail: the failure also "
                "needs the queries run between the changes (not minimized)\n")
    else:
        steps = _shrink_steps(steps, datasets,
                              lambda candidate: fails(datasets, specs, candidate))
        for spec in list(specs):
            candidate = [s for s in specs if s is not spec]
            candidate_steps = changes.without_index(steps, spec.name)
            if fails(datasets, candidate, candidate_steps):
                specs, steps = candidate, candidate_steps
        for name in list(datasets):
            original = steps   # the candidates change the dataset as it was before this loop
            for candidate, removed in _smaller_datasets(datasets[name]):
                candidate_steps = changes.refit(original, candidate, removed)
                if fails({**datasets, name: candidate}, specs, candidate_steps):
                    datasets[name], steps = candidate, candidate_steps
    # the original system path was replaced by the trials': restore a built setup for the caller
    spark.conf.set("spark.accelerator.system.path", setup.system_path())
    case.register_views(spark, setup)
    return note + snippet(datasets, specs, query, steps)


def _shrink_steps(steps: list, datasets: dict, fails) -> list:
    """The smallest list of change steps over ``datasets`` found (one change less at a time)
    that ``fails``."""
    improved = True
    while improved:
        improved = False
        for candidate in changes.smaller(steps, datasets):
            if fails(candidate):
                steps, improved = candidate, True
                break
    return steps


def _shrink_query(spark, setup: case.Setup, query: Query, deadline: float) -> Query:
    improved = True
    while improved and time.monotonic() < deadline:
        improved = False
        for candidate in query.smaller():
            if time.monotonic() > deadline:
                break
            if case.run(spark, setup, candidate).failure is not None:
                query, improved = candidate, True
                break
    return query


def _smaller_datasets(dataset: data.Dataset):
    """Candidates, each a change of ``dataset`` (the last one that still fails is kept), with
    the numbers of the files they drop (see :func:`tests.fuzz.changes.refit`): without the
    appended files, each file dropped, unpartitioned (an Iceberg table: by ``p``), in one row
    group a file, as Parquet, without deletion vectors (of format version 2), read by path,
    then each file halved repeatedly."""
    if dataset.appended:
        count = len(dataset.files)
        yield replace(dataset, appended=[]), set(range(count, count + len(dataset.appended)))
    if dataset.deleted:
        yield replace(dataset, deleted=()), set()
    for i in range(len(dataset.files)):
        if len(dataset.files) > 1 and i not in dataset.deleted:
            deleted = tuple(d - (d > i) for d in dataset.deleted)
            yield (replace(dataset, files=dataset.files[:i] + dataset.files[i + 1:],
                           deleted=deleted), {i})
    if dataset.partitioned:
        yield replace(dataset, partitioned=False, partitioning=""), set()
    if dataset.partitioning:
        yield replace(dataset, partitioning=""), set()
    if dataset.row_group_rows:
        yield replace(dataset, row_group_rows=None), set()
    if dataset.format not in ("parquet", *data.TABLE_FORMATS):   # JSON's or CSV's, as Parquet
        yield dataset.in_format("parquet"), set()
    if dataset.deletion_vectors:   # a table's failure without deletion vectors too
        yield replace(dataset, deletion_vectors=False), set()
    if dataset.format_version > 2:   # an Iceberg table's failure in format version 2 too
        yield replace(dataset, format_version=2), set()
    if dataset.access != "path":   # a table's or glob's failure that its path shows too
        yield replace(dataset, access="path"), set()
    for i in range(len(dataset.files)):
        rows = dataset.files[i]
        while len(rows) > 1:
            half = len(rows) // 2
            for part in (rows[:half], rows[half:]):
                files = dataset.files[:i] + [part] + dataset.files[i + 1:]
                yield replace(dataset, files=files), set()
            rows = rows[:half]


def _py(value) -> str:
    """``value`` as a Python literal (floats NaN and infinities included)."""
    if isinstance(value, float):
        return f"float({str(value)!r})" if value != value or abs(value) == float("inf") else repr(value)
    if isinstance(value, tuple):
        return "(" + "".join(_py(v) + ", " for v in value) + ")"
    if isinstance(value, list):
        return "[" + ", ".join(_py(v) for v in value) + "]"
    return repr(value)


def _write_args(dataset: data.Dataset) -> str:
    """The arguments after the rows of the reproduction's ``write`` for ``dataset``."""
    return (f"{dataset.partitioned}, {data.SUFFIXES[dataset.format]!r}, "
            f"{data.write_code(dataset.format, dataset.row_group_rows)}")


def snippet(datasets: dict, specs: list, query: Query | None, steps: list = ()) -> str:
    """A standalone Python program that writes the datasets, builds the indexes, applies the
    change ``steps``, runs the query with and without the accelerator and fails when the rows
    differ (without a query: ends after the steps, the last of which raised)."""
    formats = sorted({ds.format for ds in datasets.values()} & set(data.TABLE_FORMATS))
    builder = ("SparkSession.builder.master('local[2]')"
               ".config('spark.accelerator.index.numBuckets', '4')")
    lines = [
        "import datetime, glob, os, shutil, tempfile",
        "from collections import Counter",
        "from decimal import Decimal",
        "from pyspark.sql import SparkSession, Window, functions as F",
        "from accelerator import *",
        *(["from accelerator.runtime.table_formats import configure",
           f"spark = configure({builder}, {', '.join(map(repr, formats))})"
           f"{tables.session_code(formats)}.getOrCreate()"] if formats
          else [f"spark = ({builder}.getOrCreate())"]),
        "root = tempfile.mkdtemp()",
        "spark.conf.set('spark.accelerator.system.path', root + '/indexes')",
        "hs = Hyperspace(spark)",
        *(f"{name} = {value!r}" for name, value in data.NAMES.items()),
        "def write(name, files, partitioned, suffix, save, first=0, partitions=()):",
        "    # each list of rows saved as one file by save(rows, directory) (partition p=i % 3,",
        "    # or the i-th of partitions); the new files' names",
        "    written = []",
        "    pattern = root + '/' + name + '/**/*' + suffix",
        "    for i, rows in enumerate(files, start=first):",
        "        before = set(glob.glob(pattern, recursive=True))",
        "        p = partitions[i - first] if partitions else i % 3",
        "        if rows:",
        "            save(rows, root + '/' + name + (f'/p={p}' if partitioned else ''))",
        "        written.append(set(glob.glob(pattern, recursive=True)) - before)",
        "    return written",
    ]
    if steps:
        lines += [data.REPLACE_CODE.rstrip(), changes.OPERATE_CODE.rstrip()]
    if any(ds.access == "table" for ds in datasets.values()):
        lines.append(data.TABLE_CODE.rstrip())
    if formats:
        lines.append(tables.code(formats).rstrip())
    for name, ds in datasets.items():
        if ds.format in data.TABLE_FORMATS:
            lines += tables.build_code(ds, _py(ds.files))
            continue
        lines.append(f"{name}_files = write({name!r}, {_py(ds.files)}, {_write_args(ds)})")
        if ds.access == "table":
            lines.append(data.table_code(ds, "root"))
            lines += _refreshed(ds)
    for spec in specs:
        lines.append(f"{spec.dataset}_df = {data.source_code(datasets[spec.dataset], 'root')}")
        lines.append(spec.code(f"{spec.dataset}_df"))
    for name, ds in datasets.items():
        if ds.format in data.TABLE_FORMATS:
            lines += tables.change_code(ds, _py(ds.appended))
            continue
        for i in ds.deleted:
            lines.append(f"[os.remove(f) for f in {name}_files[{i}]]   # deleted after indexing")
        if ds.appended:
            lines.append(f"{name}_files += write({name!r}, {_py(ds.appended)}, "
                         f"{_write_args(ds)}, first={len(ds.files)})")
        if ds.deleted or ds.appended:
            lines += _refreshed(ds)
    for number, step in enumerate(steps, start=1):
        lines += _step_lines(number, step, datasets, specs)
    if query is None:
        return "\n".join(lines)
    for name, ds in datasets.items():
        lines.append(f"{data.source_code(ds, 'root')}.createOrReplaceTempView({name!r})")
    lines += [
        "def canon(v):",
        "    if isinstance(v, float):",
        "        return 'NaN' if v != v else (0.0 if v == 0.0 else v)",
        "    return tuple(canon(x) for x in v) if isinstance(v, (tuple, list)) else v",
        "Hyperspace.enable(spark)",
        f"got = Counter(canon(tuple(r)) for r in {query.code()}.collect())",
        "Hyperspace.disable(spark)",
        f"want = Counter(canon(tuple(r)) for r in {query.code()}.collect())",
        "print('extra:', list((got - want).elements()), 'missing:', list((want - got).elements()))",
        "spark.conf.set('spark.sql.parquet.filterPushdown', 'false')   # vanilla's other answer",
        f"assert got in (want, Counter(canon(tuple(r)) for r in {query.code()}.collect()))",
    ]
    return "\n".join(lines)


def _refreshed(dataset: data.Dataset) -> list[str]:
    """The reproduction's line refreshing the table of ``dataset`` after its files changed
    (none for a dataset read by path or glob)."""
    return ([data.refresh_code(dataset)]
            if dataset.access == "table" and dataset.format not in data.TABLE_FORMATS else [])


def _step_lines(number: int, step: changes.Step, datasets: dict, specs: list) -> list[str]:
    """The reproduction's code of change step ``number``: its source change, then its
    operations (each printing its status)."""
    name, ds = step.dataset, datasets[step.dataset]
    lines = [f"# change step {number}: {step.describe()}"]
    if ds.format in data.TABLE_FORMATS:
        rows = step.rows[0] if step.source == "merge" else list(step.rows)
        lines += tables.step_code(step, ds, _py(rows))
    elif step.source == "append":
        lines.append(f"{name}_files += write({name!r}, {_py(list(step.rows))}, "
                     f"{_write_args(ds)}, partitions={step.partitions!r})")
    elif step.source == "delete":
        lines.append(f"[os.remove(f) for f in {name}_files[{step.file}]]")
    elif step.source == "overwrite":
        save = data.write_code(ds.format, ds.row_group_rows)
        lines.append(f"[replace_file(f, {_py(step.rows[0])}, {save}) "
                     f"for f in {name}_files[{step.file}]]")
    if step.source and ds.format not in data.TABLE_FORMATS:
        lines += _refreshed(ds)
    for op in step.operations:
        lines.append(f"print({op!r}, {changes.operation_code(op, specs, datasets)})")
    return lines
