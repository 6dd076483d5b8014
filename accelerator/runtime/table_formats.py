"""The table formats the accelerator reads (Delta Lake, Apache Iceberg), and the Spark settings
that load a format's release for the running Spark line.

A table format's Spark support is a jar built for one Spark line (and Scala version); pip's
``delta-spark`` asks for jar versions that are not always published, so the coordinates are
pinned here, per Spark line, to releases on Maven Central that were tried with the accelerator.
:func:`configure` puts them on a session builder before the JVM starts (Spark resolves them
with Ivy); a format without a release for the running Spark gets
:class:`~indexes.errors.UnsupportedSparkError` naming the Spark lines that have one.
"""
from __future__ import annotations

from typing import Any

from accelerator.runtime.spark_versions import spark_line
from indexes.errors import UnsupportedSparkError

#: Delta Lake's Spark jar per Spark line (none is published for Spark 4.3 yet)
DELTA_PACKAGES = {
    (3, 5): "io.delta:delta-spark_2.12:3.3.3",
    (4, 0): "io.delta:delta-spark_4.0_2.13:4.4.0",
    (4, 1): "io.delta:delta-spark_4.1_2.13:4.4.0",
    (4, 2): "io.delta:delta-spark_4.2_2.13:4.4.0",
}
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"

#: Apache Iceberg's Spark runtime per Spark line (none is published for Spark 4.2 or 4.3 yet)
ICEBERG_PACKAGES = {
    (3, 5): "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.12.0",
    (4, 0): "org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:1.11.0",
    (4, 1): "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0",
}
ICEBERG_EXTENSION = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
#: the catalog implementation of an Iceberg catalog (``spark.sql.catalog.<name>``, with its
#: ``type``: ``hadoop``, ``hive`` or ``rest``); Iceberg keeps the session catalog as it is
ICEBERG_CATALOG = "org.apache.iceberg.spark.SparkCatalog"

CATALOG = "spark.sql.catalog.spark_catalog"

#: the formats :func:`configure` knows: their packages per Spark line, extension and session
#: catalog (None: the format leaves the session catalog alone)
FORMATS = {"delta": (DELTA_PACKAGES, DELTA_EXTENSION, DELTA_CATALOG),
           "iceberg": (ICEBERG_PACKAGES, ICEBERG_EXTENSION, None)}


def package(table_format: str, spark_version: str) -> str:
    """The Maven coordinates of ``table_format``'s Spark jar for ``spark_version``."""
    if table_format not in FORMATS:
        raise ValueError(f"unknown table format {table_format!r}; known: {', '.join(FORMATS)}")
    packages = FORMATS[table_format][0]
    line = spark_line(spark_version)
    if line not in packages:
        lines = [f"{major}.{minor}" for major, minor in sorted(packages)]
        raise UnsupportedSparkError(
            f"{table_format} has no release for Spark {spark_version}; it has one for Spark "
            f"{', '.join(lines)}: install one of those (pip install 'pyspark=={lines[-1]}.*'); "
            "without it the table cannot be read, nor indexed")
    return packages[line]


def session_settings(spark_version: str, *table_formats: str,
                     current: dict[str, str] | None = None) -> dict[str, str]:
    """The settings that load ``table_formats`` into a session of ``spark_version``: their
    packages added to ``spark.jars.packages``, their extensions to ``spark.sql.extensions``
    (after those ``current`` holds) and, unless ``current`` names one, the session catalog of
    the first format that has one (Delta's)."""
    current = current or {}
    packages = [p for p in current.get("spark.jars.packages", "").split(",") if p]
    extensions = [e for e in current.get("spark.sql.extensions", "").split(",") if e]
    settings: dict[str, str] = {}
    for name in table_formats:
        coordinates = package(name, spark_version)
        _, extension, catalog = FORMATS[name]
        packages += [coordinates] if coordinates not in packages else []
        extensions += [extension] if extension not in extensions else []
        if catalog and CATALOG not in current:
            settings.setdefault(CATALOG, catalog)
    settings["spark.jars.packages"] = ",".join(packages)
    settings["spark.sql.extensions"] = ",".join(extensions)
    return settings


def configure(builder: Any, *table_formats: str) -> Any:
    """``builder`` (a ``SparkSession.Builder``, before ``getOrCreate``) set up to read
    ``table_formats`` (e.g. ``"delta"``) with the releases pinned for the installed pyspark."""
    import pyspark

    current = {key: builder._options[key]
               for key in ("spark.jars.packages", "spark.sql.extensions", CATALOG)
               if key in getattr(builder, "_options", {})}
    for key, value in session_settings(pyspark.__version__, *table_formats,
                                       current=current).items():
        builder = builder.config(key, value)
    return builder
