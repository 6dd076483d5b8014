"""One local[2] SparkSession for the whole test run, and a fresh system path per test."""
from __future__ import annotations

import os
import sys

import pytest
from pyspark.sql import SparkSession

from tests.helpers import using_system_path


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)   # workers run index builds
    warehouse = tmp_path_factory.mktemp("warehouse")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("accelerator-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.driver.memory", "2g")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.maxMetadataStringLength", "1000")
        .config("spark.accelerator.index.numBuckets", "4")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def system_path(spark, tmp_path):
    """A fresh accelerator system path for one test, set on the session while it runs."""
    with using_system_path(spark, str(tmp_path / "indexes")) as path:
        yield path


@pytest.fixture
def hs(spark, system_path):
    """A Hyperspace over a fresh system path, with the rewrite enabled while the test runs."""
    from accelerator import Hyperspace

    hs = Hyperspace(spark)
    Hyperspace.enable(spark)
    yield hs
    Hyperspace.disable(spark)
