"""One local[2] SparkSession for the whole test run, and a fresh system path per test; the
session-wide services of the environment tests (``hdfs``, ``s3``: tests/services/); the
longest test files first; the JVM options of every Spark driver of the run; the log's
listings beside it from two files on."""
from __future__ import annotations

import os
import sys

import pytest
from pyspark.sql import SparkSession

from indexes import log_files
from tests.helpers import using_system_path
from tests.services import driver_jvm, table_formats

# Index log entries of this process keep the files of any source of more than one file beside
# the log (indexes/log_files.py), as a lake's thousands do: the suite's small sources take the
# path a large one takes. The processes tests start keep the default (inline up to 1,000), so
# entries of both forms are read by both; crash drivers take this value (tests/crash/driver.py).
log_files.INLINE_FILES = 1

# The test files that take longest (the fuzz test: 9 of the suite's 2 x 20 minutes), run first:
# under the README's `-n 2 --dist loadfile` (with pyproject's `--no-loadscope-reorder`) one
# process takes each while the other files fill both processes after them, so the two finish
# together. (Tried: the next longest files third to sixth (remote file systems, bench smoke, demo,
# standalone cluster): the suite took 35.5 minutes instead of 31, probably those multi-process
# files contending with the fuzz test where light files had filled the gaps it leaves.)
LONGEST_FIRST = ("test_fuzz.py", "test_crash_consistency.py")


def pytest_configure(config):
    """Before any JVM starts, in the process that starts pytest's workers (they inherit its
    environment): ``SPARK_SUBMIT_OPTS`` gives every driver JVM the run starts, its own
    sessions' and those of the processes tests start, the quick JIT and this Spark install's
    class archive (tests/services/driver_jvm.py)."""
    if hasattr(config, "workerinput"):
        return
    os.environ["SPARK_SUBMIT_OPTS"] = " ".join(
        filter(None, [os.environ.get("SPARK_SUBMIT_OPTS"), driver_jvm.spark_submit_opts()]))


def pytest_collection_modifyitems(items):
    """Moves the files of :data:`LONGEST_FIRST` to the front (in that order), keeping the order
    of every file's tests."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(scope="session")
def spark(request, tmp_path_factory):
    """The test run's SparkSession; when a test marked ``s3`` is collected, with S3A's jars on
    its class path and ``s3a://`` pointed at the session's S3 server (fixture ``s3``); when one
    marked ``delta`` is, with Delta Lake's jar, extension and catalog; when one marked
    ``iceberg`` is, with Iceberg's jar, extension and the Hadoop catalog ``ice``."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)   # workers run index builds
    warehouse = tmp_path_factory.mktemp("warehouse")
    builder = (
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
        # the tests' sources are KB: what an index saves their queries is milliseconds
        .config("spark.accelerator.rules.minSecondsSaved", "0")
    )
    confs = []
    if any(item.get_closest_marker("s3") for item in request.session.items):
        from tests.services import s3

        endpoint = request.getfixturevalue("s3").endpoint
        confs += [{"spark.jars": ",".join(map(str, s3.s3a_jars()))}, s3.spark_conf(endpoint)]
    if any(item.get_closest_marker("delta") for item in request.session.items):
        # Delta rebuilds a table's state from its log in 50 shuffle partitions by default: the
        # tests' tables have a few files each (Delta's own test suites set it low too); two
        # Delta tests took 110 s with 50, 70 s with 2 (a slow 2-core machine, alone)
        confs += [table_formats.delta_conf(), {"spark.databricks.delta.snapshotPartitions": "2"}]
    if any(item.get_closest_marker("iceberg") for item in request.session.items):
        confs.append(table_formats.iceberg_conf(str(tmp_path_factory.mktemp("iceberg"))))
    for key, value in table_formats.merged_conf(*confs).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def hdfs(tmp_path_factory):
    """A MiniDFSCluster for the test session (tests/services/hdfs.py): ``.url`` is its
    ``hdfs://127.0.0.1:<port>``."""
    from tests.services.hdfs import start_hdfs

    service = start_hdfs(tmp_path_factory.mktemp("hdfs"))
    yield service
    service.stop()


@pytest.fixture(scope="session")
def s3(tmp_path_factory):
    """An S3-compatible server for the test session (tests/services/s3.py): ``.endpoint``,
    ``.create_bucket(name)``; the ``spark`` fixture points ``s3a://`` at it."""
    from tests.services.s3 import start_s3

    service = start_s3(tmp_path_factory.mktemp("s3"))
    yield service
    service.stop()


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
