"""Executors ready for index builds: the workers' interpreter in local mode is the driver's
(not ``python3`` from the PATH) unless the user chose one, and a worker that cannot import a
module a build needs fails the build up front with a message naming the module and the
settings that fix it."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from accelerator.runtime import workers
from indexes.errors import ExecutorEnvironmentError

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("master, env, conf, expected", [
    ("local[2]", None, None, "/driver/python"),           # local: the driver's interpreter
    ("local", None, None, "/driver/python"),
    ("local[2]", "/env/python", None, "python-from-env"),  # PYSPARK_PYTHON: PySpark's choice
    ("local[2]", None, "/conf/python", "/conf/python"),    # spark.pyspark.python honoured
    ("yarn", None, "/conf/python", "/conf/python"),
    ("yarn", "/env/python", "/conf/python", "python-from-env"),
    ("spark://host:7077", None, None, "python3"),          # a cluster: left to the user
])
def test_worker_python(master, env, conf, expected):
    current = "python-from-env" if env else "python3"
    assert workers.worker_python(master, env, conf, current, "/driver/python") == expected


class _Context:
    """What ``ship`` reads of a SparkContext; ``_jsc`` shared, as the same id() could be."""

    _jsc = object()

    def __init__(self, app: str, start: int):
        self.applicationId, self.startTime, self.added = app, start, []

    def addPyFile(self, path: str) -> None:
        self.added.append(path)


class _Session:
    def __init__(self, sc: _Context):
        self.sparkContext = sc


def test_the_package_is_shipped_once_to_each_spark_context():
    first, again, later = _Context("local-1", 1), _Context("local-1", 1), _Context("local-2", 2)
    for sc in (first, again, later):
        workers.ship(_Session(sc))
    # a new context is shipped the package even where its Python objects reuse an old id()
    assert [len(sc.added) for sc in (first, again, later)] == [1, 0, 1]
    assert later.added[0].endswith(".zip")


def test_check_executors_names_the_missing_module_and_the_settings(spark):
    workers.check_executors(spark, ("pyarrow", "pandas"))
    with pytest.raises(ExecutorEnvironmentError) as caught:
        workers.check_executors(spark, ("pyarrow", "no_such_module_xyz"))
    message = str(caught.value)
    assert "cannot import 'no_such_module_xyz'" in message and "'pyarrow'" not in message
    assert "ModuleNotFoundError" in message
    assert "spark.pyspark.python" in message and "PYSPARK_PYTHON" in message
    assert "spark.archives" in message


def test_check_executors_reports_an_interpreter_that_does_not_run(spark):
    sc = spark.sparkContext
    previous, sc.pythonExec = sc.pythonExec, "/no/such/python"
    try:
        with pytest.raises(ExecutorEnvironmentError) as caught:
            workers.check_executors(spark, ("pyarrow",))
    finally:
        sc.pythonExec = previous
    message = str(caught.value)
    assert "interpreter '/no/such/python' could not run there" in message
    assert 'Cannot run program "/no/such/python"' in message and "spark.pyspark.python" in message


def test_prepare_in_local_mode_checks_the_driver_imports(spark):
    with pytest.raises(ExecutorEnvironmentError, match="cannot import 'no_such_module_xyz'"):
        workers.prepare(spark, ("no_such_module_xyz",))


LOCAL_SCRIPT = """
import sys
from pyspark.sql import SparkSession
from accelerator import BloomFilterSketch, DataSkippingIndexConfig, Hyperspace

base = sys.argv[1]
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.accelerator.system.path", base + "/indexes").getOrCreate())
spark.createDataFrame([(i, f"k{i}") for i in range(20)], "id long, key string") \\
    .repartition(2).write.parquet(base + "/src")
Hyperspace(spark).createIndex(spark.read.parquet(base + "/src"), DataSkippingIndexConfig(
    "ds", BloomFilterSketch("key", expectedDistinctCountPerFile=100)))
Hyperspace.enable(spark)
q = spark.read.parquet(base + "/src").where("key = 'k3'")
print("rows", q.count(), "files", len(q.inputFiles()), "workers", spark.sparkContext.pythonExec)
spark.stop()
"""


def test_local_mode_builds_run_the_drivers_interpreter(tmp_path):
    """A script run as ``<venv>/bin/python script.py`` without activating the venv: Spark
    would run ``python3`` from the PATH, here one without the project's dependencies (the
    same interpreter without its site-packages)."""
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    (shim / "python3").chmod(0o755)
    venv_bin = str(Path(sys.executable).parent)
    path = [str(shim)] + [p for p in os.environ.get("PATH", "").split(os.pathsep)
                          if p and p != venv_bin]
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "VIRTUAL_ENV")}
    env.update(PATH=os.pathsep.join(path),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", LOCAL_SCRIPT, str(tmp_path / "work")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"rows 1 files 1 workers {sys.executable}" in done.stdout, done.stdout
