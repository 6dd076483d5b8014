"""The SparkSession a command runs in: the active one, or a new local one, with the system path
it names; shared by the command line and the demo. A new session leaves no empty
``spark-warehouse`` directory behind (Spark's catalog makes one for any SQL)."""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import unquote, urlparse

from accelerator.query.session import conf_set
from accelerator.runtime import jvm
from accelerator.runtime.settings import ENABLED, SYSTEM_PATH


@contextlib.contextmanager
def spark_session(args: argparse.Namespace, app: str, system_path: str | None) -> Iterator[Any]:
    """The active SparkSession (its settings restored afterwards, never stopped), or a new local
    one (stopped afterwards), with ``system_path`` as accelerator system path when given."""
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    created = spark is None
    warehouse = None
    if created:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)   # workers run index builds
        spark = (SparkSession.builder.master(args.master).appName(app)
                 .config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.shuffle.partitions", "8")
                 .config("spark.sql.maxMetadataStringLength", "1000")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        jvm.load_quietly(spark)   # DataSketches' restricted-mode warning, printed mid-run
        warehouse = _absent_local_dir(spark.conf.get("spark.sql.warehouse.dir"))
    # the system path, and the rewrite that explain/whynot turn on, restored afterwards
    overrides = {ENABLED: spark.conf.get(ENABLED, "false")}
    if system_path:
        overrides[SYSTEM_PATH] = system_path
    try:
        with conf_set(spark, overrides):
            yield spark
    finally:
        if created:
            spark.stop()
        if warehouse is not None and warehouse.is_dir() and not any(warehouse.iterdir()):
            warehouse.rmdir()   # made by Spark's catalog for the command's SQL, left empty


def _absent_local_dir(uri: str) -> Path | None:
    """The local directory ``uri`` names when it does not exist (yet), else None."""
    parsed = urlparse(uri)
    if parsed.scheme not in ("", "file"):
        return None
    path = Path(unquote(parsed.path))
    return None if path.exists() else path
