"""Making Spark's Python workers ready to run index builds.

Index builds run Python code on executors (``mapInArrow``), which must import ``indexes`` and
the libraries a kind's build needs (pyarrow, pandas, tantivy). :func:`prepare`
does what it takes before a build writes anything:

- ships the ``indexes`` package with ``addPyFile`` once per SparkContext, as a zip keyed by
  its content (on a cluster it may not be installed there);
- chooses the interpreter the workers run: PySpark runs ``PYSPARK_PYTHON`` as read when the
  SparkContext started, else ``python3`` from the ``PATH`` (it ignores ``spark.pyspark.python``
  set in the builder). A ``spark.pyspark.python`` setting is honoured, and in local mode,
  without either, the driver's own interpreter is used: it has the project's dependencies,
  while ``python3`` from the ``PATH`` may be another one (a venv's python run without
  activating the venv);
- checks, with one tiny job, that the workers can import the modules, unless they run the
  driver's interpreter on the driver's machine; the error names the module missing and the
  settings that fix it.
"""
from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import threading
import zipfile
from pathlib import Path
from typing import Any, Callable

import indexes
from indexes.errors import ExecutorEnvironmentError

_lock = threading.Lock()
_shipped: set[str] = set()
_checked: set[tuple[str, str, str]] = set()   # (SparkContext, interpreter, module) found


def _context(sc: Any) -> str:
    """A key naming one SparkContext for its whole life and no other: its application id and
    start time (``id()`` of its Python objects could be reused by a later context)."""
    return f"{sc.applicationId}@{sc.startTime}"


def _package_zip() -> str:
    root = Path(indexes.__file__).resolve().parent
    files = sorted(p for p in root.rglob("*.py"))
    digest = hashlib.sha256()
    for p in files:
        digest.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes())
    target = Path(tempfile.gettempdir()) / f"accelerator-indexes-{digest.hexdigest()[:16]}.zip"
    if not target.exists():
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        with zipfile.ZipFile(tmp, "w") as z:
            for p in files:
                z.write(p, str(Path("indexes") / p.relative_to(root)))
        os.replace(tmp, target)
    return str(target)


def ship(spark: Any) -> None:
    """Adds the ``indexes`` package to the Python path of ``spark``'s executors (once)."""
    sc = spark.sparkContext
    key = _context(sc)
    with _lock:
        if key in _shipped:
            return
        sc.addPyFile(_package_zip())
        _shipped.add(key)


def worker_python(master: str, env_python: str | None, conf_python: str | None,
                  current: str, driver: str) -> str:
    """The interpreter Python workers should run: ``current`` (PySpark's choice) when
    ``PYSPARK_PYTHON`` (``env_python``) set it, else the ``spark.pyspark.python`` setting,
    else, in local mode, the ``driver``'s interpreter."""
    if env_python:
        return current
    if conf_python:
        return conf_python
    return driver if master.startswith("local") else current


_FIX = ("set spark.pyspark.python (or PYSPARK_PYTHON) to an interpreter that is on every "
        "executor and has the accelerator's dependencies, or ship a packed virtual environment "
        "with spark.archives (e.g. venv-pack's env.tar.gz#env with "
        "spark.pyspark.python=./env/bin/python)")


def _import_errors() -> Callable[[list[str]], list[tuple[str, str]]]:
    """A function giving the ``(module, error)`` of each module that does not import where it
    runs; nested, so that it is pickled by value (executors may lack this package)."""
    def run(modules: list[str]) -> list[tuple[str, str]]:
        import importlib as lib

        failed = []
        for name in modules:
            try:
                lib.import_module(name)
            except Exception as e:  # ImportError, or a library failing to load
                failed.append((name, f"{type(e).__name__}: {e}"))
        return failed
    return run


def _missing(python: str, failed: list[tuple[str, str]]) -> ExecutorEnvironmentError:
    names = ", ".join(repr(m) for m, _ in failed)
    return ExecutorEnvironmentError(
        f"index builds run Python on the executors, and their interpreter {python!r} cannot "
        f"import {names} ({failed[0][1]}); install {'them' if len(failed) > 1 else 'it'} "
        f"there, or {_FIX}")


def _cause(error: Exception) -> str:
    """The cause of a failed job, from its message: the first line naming an exception, from
    the failed task's own error on (not py4j's call or Spark's "Job aborted")."""
    lines = str(error).strip().splitlines()
    named = [x for x in lines[1:] if "Exception: " in x or "Error: " in x] or lines[:1]
    return named[0].rsplit("): ", 1)[-1].strip() if named else type(error).__name__


def check_executors(spark: Any, modules: tuple[str, ...]) -> None:
    """Raises ExecutorEnvironmentError unless a Python worker of ``spark``'s executors imports every
    one of ``modules`` (one task; each module found is remembered per SparkContext and
    interpreter)."""
    sc = spark.sparkContext
    python = sc.pythonExec
    key = _context(sc)
    todo = [m for m in modules if (key, python, m) not in _checked]
    if not todo:
        return
    try:
        failed = sc.parallelize([todo], 1).flatMap(_import_errors()).collect()
    except Exception as e:  # the interpreter itself could not run
        raise ExecutorEnvironmentError(
            f"index builds run Python on the executors, and Python interpreter {python!r} "
            f"could not run there ({_cause(e)}); {_FIX}") from None
    if failed:
        raise _missing(python, failed)
    with _lock:
        _checked.update((key, python, m) for m in todo)


def prepare(spark: Any, modules: tuple[str, ...] = ()) -> None:
    """Makes ``spark``'s executors ready for a build importing ``modules`` (see the module
    docstring): ships ``indexes``, chooses the workers' interpreter and checks the imports;
    raises ExecutorEnvironmentError naming a module the workers cannot import and what to set."""
    ship(spark)
    sc = spark.sparkContext
    sc.pythonExec = worker_python(sc.master, os.environ.get("PYSPARK_PYTHON"),
                                  sc.getConf().get("spark.pyspark.python", None),
                                  sc.pythonExec, sys.executable)
    if sc.master.startswith("local") and sc.pythonExec == sys.executable:
        failed = _import_errors()(list(modules))   # the driver's interpreter and machine
        if failed:
            raise _missing(sys.executable, failed)
        return
    check_executors(spark, modules)
