"""Shrinking a failing case: fewer predicate parts and columns, fewer indexes, files and rows,
as long as the answers still differ; then a standalone Python snippet reproducing it."""
from __future__ import annotations

import time
from dataclasses import replace

from tests.fuzz import case, data
from tests.fuzz.queries import Query


def minimize(spark, setup: case.Setup, query: Query, seconds: float, log=print) -> str:
    """The reproduction of ``query`` failing over ``setup`` (already built), shrunk for at most
    about ``seconds``: Python code that prints the difference and fails."""
    deadline = time.monotonic() + seconds
    query = _shrink_query(spark, setup, query, deadline)
    datasets, specs = dict(setup.datasets), list(setup.specs)

    def fails(candidate_datasets, candidate_specs) -> bool:
        if time.monotonic() > deadline:
            return False
        trial = case.Setup(candidate_datasets, candidate_specs)
        try:
            case.build(spark, trial)
            return case.run(spark, trial, query).failure is not None
        except Exception as e:   # noqa: BLE001 (a smaller case that cannot be built)
            log(f"minimize: candidate not built: {type(e).__name__}: {str(e)[:200]}")
            return False
        finally:
            case.teardown(trial)

    for spec in list(specs):
        candidate = [s for s in specs if s is not spec]
        if fails(datasets, candidate):
            specs = candidate
    for name in list(datasets):
        for candidate in _smaller_datasets(datasets[name]):
            if fails({**datasets, name: candidate}, specs):
                datasets[name] = candidate
    # the original system path was replaced by the trials': restore a built setup for the caller
    spark.conf.set("spark.accelerator.system.path", setup.system_path())
    case.register_views(spark, setup)
    return snippet(datasets, specs, query)


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
    """Candidates, each tried against the current best: without the appended files, each file
    dropped, unpartitioned, in one row group a file, then each file halved repeatedly."""
    if dataset.appended:
        yield replace(dataset, appended=[])
    if dataset.deleted:
        yield replace(dataset, deleted=())
    for i in range(len(dataset.files)):
        if len(dataset.files) > 1 and i not in dataset.deleted:
            deleted = tuple(d - (d > i) for d in dataset.deleted)
            yield replace(dataset, files=dataset.files[:i] + dataset.files[i + 1:], deleted=deleted)
    if dataset.partitioned:
        yield replace(dataset, partitioned=False)
    if dataset.row_group_rows:
        yield replace(dataset, row_group_rows=None)
    if dataset.format != "parquet":   # a JSON or CSV source's failure that Parquet shows too
        yield dataset.in_format("parquet")
    for i in range(len(dataset.files)):
        rows = dataset.files[i]
        while len(rows) > 1:
            half = len(rows) // 2
            yield replace(dataset, files=dataset.files[:i] + [rows[:half]] + dataset.files[i + 1:])
            yield replace(dataset, files=dataset.files[:i] + [rows[half:]] + dataset.files[i + 1:])
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


def snippet(datasets: dict, specs: list, query: Query) -> str:
    """A standalone Python program that writes the datasets, builds the indexes, runs the query
    with and without the accelerator and fails when the rows differ."""
    lines = [
        "import datetime, glob, os, tempfile",
        "from collections import Counter",
        "from decimal import Decimal",
        "from pyspark.sql import SparkSession, Window, functions as F",
        "from accelerator import *",
        "spark = (SparkSession.builder.master('local[2]')"
        ".config('spark.accelerator.index.numBuckets', '4').getOrCreate())",
        "root = tempfile.mkdtemp()",
        "spark.conf.set('spark.accelerator.system.path', root + '/indexes')",
        "hs = Hyperspace(spark)",
        *(f"{name} = {value!r}" for name, value in data.NAMES.items()),
        "def write(name, files, partitioned, suffix, save, first=0):",
        "    # each list of rows saved as one file by save(rows, directory); the new files' names",
        "    written = []",
        "    pattern = root + '/' + name + '/**/*' + suffix",
        "    for i, rows in enumerate(files, start=first):",
        "        before = set(glob.glob(pattern, recursive=True))",
        "        if rows:",
        "            save(rows, root + '/' + name + (f'/p={i % 3}' if partitioned else ''))",
        "        written.append(set(glob.glob(pattern, recursive=True)) - before)",
        "    return written",
    ]
    for name, ds in datasets.items():
        lines.append(f"{name}_files = write({name!r}, {_py(ds.files)}, {_write_args(ds)})")
    for spec in specs:
        source = data.read_code(datasets[spec.dataset].format, f"root + '/{spec.dataset}'")
        lines.append(f"{spec.dataset}_df = {source}")
        lines.append(spec.code(f"{spec.dataset}_df"))
    for name, ds in datasets.items():
        if ds.appended:
            lines.append(f"write({name!r}, {_py(ds.appended)}, {_write_args(ds)}, "
                         f"first={len(ds.files)})")
        for i in ds.deleted:
            lines.append(f"[os.remove(f) for f in {name}_files[{i}]]   # deleted after indexing")
        source = data.read_code(ds.format, f"root + '/{name}'")
        lines.append(f"{source}.createOrReplaceTempView({name!r})")
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
