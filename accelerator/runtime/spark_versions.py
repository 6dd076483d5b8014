"""The Spark versions the accelerator supports, and the pyspark calls that differ between them.

Supported: Spark 3.5 (Scala 2.12, Java 11 or 17) and 4.0 to 4.3 (Scala 2.13, Java 17+). Each
call that one of these versions lacks has its fallback here, chosen once when this module is
imported from the installed pyspark's version, so the rest of the code calls one function:

- ``parse_ddl``: ``DataType.fromDDL`` (4.0+); before, Spark's own parser through the JVM.
- ``arrow_schema``: ``to_arrow_schema`` with UTC timestamps (``timezone="UTC"`` from 4.2,
  ``timestamp_utc=True`` in 4.0 and 4.1, always UTC in 3.5).
- ``arrow_frame``: a DataFrame from an Arrow table (``createDataFrame(pa.Table)`` from 4.0); in
  3.5 the table's batches go to the JVM as an Arrow stream, as pyspark's own pandas path does.
- ``dataset_class``: the JVM's classic ``Dataset`` (``org.apache.spark.sql.classic`` from 4.0,
  ``org.apache.spark.sql`` before).

The JVM side's differences (Scala 2.12 against 2.13 collections) are in
:mod:`accelerator.runtime.jvm`.
"""
from __future__ import annotations

import re
from typing import Any

import pyarrow as pa
import pyspark
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import DataType, StructType

from indexes.errors import UnsupportedSparkError

OLDEST = (3, 5)
NEWEST = (4, 3)
SUPPORTED = "3.5 to 4.3 (3.5, 4.0, 4.1, 4.2, 4.3)"


def spark_line(version: str) -> tuple[int, int]:
    """The (major, minor) line of a Spark version string such as ``3.5.9`` or ``4.1.0.dev2``."""
    found = re.match(r"(\d+)\.(\d+)", version.strip())
    if not found:
        raise UnsupportedSparkError(f"cannot read the Spark version {version!r}")
    return int(found.group(1)), int(found.group(2))


def check_supported(version: str, what: str = "Spark") -> None:
    """Raises :class:`UnsupportedSparkError` naming ``version`` and the supported range unless
    it is a supported line."""
    line = spark_line(version)
    if not OLDEST <= line <= NEWEST:
        raise UnsupportedSparkError(
            f"{what} {version} is not supported: the accelerator supports Spark {SUPPORTED}; "
            f"install one of them (pip install 'pyspark>=3.5,<4.4') or run on a cluster that "
            f"has one")


PYSPARK = spark_line(pyspark.__version__)


def check_session(spark: Any) -> None:
    """Raises :class:`UnsupportedSparkError` unless both pyspark and the Spark its session runs
    on (the JVM's, from ``SPARK_HOME`` or a cluster) are supported lines."""
    check_supported(pyspark.__version__, "pyspark")
    check_supported(spark.version, "Spark")


if PYSPARK >= (4, 0):
    def parse_ddl(ddl: str) -> DataType:
        """The data type a DDL string (``a int, b string`` or a single type) describes."""
        return DataType.fromDDL(ddl)
else:
    def parse_ddl(ddl: str) -> DataType:
        """The data type a DDL string (``a int, b string`` or a single type) describes (parsed by
        the JVM of the active SparkContext)."""
        from pyspark.sql.types import _parse_datatype_string
        return _parse_datatype_string(ddl)


if PYSPARK >= (4, 2):
    def arrow_schema(struct: StructType) -> pa.Schema:
        """The Arrow schema of ``struct``, timestamps in UTC."""
        return to_arrow_schema(struct, timezone="UTC")
elif PYSPARK >= (4, 0):
    def arrow_schema(struct: StructType) -> pa.Schema:
        """The Arrow schema of ``struct``, timestamps in UTC."""
        return to_arrow_schema(struct, timestamp_utc=True)
else:
    def arrow_schema(struct: StructType) -> pa.Schema:
        """The Arrow schema of ``struct``, timestamps in UTC."""
        return to_arrow_schema(struct)


if PYSPARK >= (4, 0):
    def arrow_frame(spark: Any, table: pa.Table, struct: StructType) -> DataFrame:
        """A DataFrame of ``table`` (whose schema is ``arrow_schema(struct)``) as a local
        relation."""
        return spark.createDataFrame(table, struct)
else:
    def arrow_frame(spark: Any, table: pa.Table, struct: StructType) -> DataFrame:
        """A DataFrame of ``table`` (whose schema is ``arrow_schema(struct)``): its batches
        are handed to the JVM as one Arrow stream, as pyspark 3.5 does for pandas frames."""
        from pyspark.sql.pandas.serializers import ArrowStreamSerializer
        jvm = spark.sparkContext._jvm
        batches = table.to_batches() or [pa.record_batch(
            [pa.array([], type=f.type) for f in table.schema], schema=table.schema)]
        jiter = spark.sparkContext._serialize_to_jvm(
            batches, ArrowStreamSerializer(), jvm.PythonSQLUtils.readArrowStreamFromFile,
            jvm.ArrowIteratorServer)
        jdf = jvm.PythonSQLUtils.toDataFrame(jiter, struct.json(), spark._jsparkSession)
        return DataFrame(jdf, spark)


def dataset_class(spark: Any) -> Any:
    """The JVM class whose ``ofRows(session, plan)`` makes a DataFrame of a logical plan: the
    classic ``Dataset`` of the JVM's Spark (which may differ from pyspark's)."""
    jvm = spark.sparkContext._jvm
    if spark_line(spark.version) >= (4, 0):
        return jvm.org.apache.spark.sql.classic.Dataset
    return jvm.org.apache.spark.sql.Dataset
