"""Test sessions that read Delta Lake and Iceberg tables: the jar each format pins for the
running Spark line (:mod:`accelerator.runtime.table_formats`) and its runtime dependencies,
resolved from Maven Central by tests/services/maven.py (not by Spark's Ivy, which trips over
``~/.m2`` entries without jars), less what pyspark bundles; Delta's extension and session
catalog; Iceberg's extension and a Hadoop catalog ``ice`` (:data:`ICEBERG_CATALOG`)."""
from __future__ import annotations

import pyspark

from accelerator.runtime import table_formats
from accelerator.runtime.jvm import spark_jars_dir
from tests.services.maven import Artifact, artifact_name, resolve


#: the name of the tests' Iceberg catalog (a Hadoop catalog in a directory of the test run)
ICEBERG_CATALOG = "ice"


def format_jars(table_format: str) -> list:
    """The jars a session needs for ``table_format`` on the installed pyspark."""
    jars = resolve(table_format,
                   [Artifact(table_formats.package(table_format, pyspark.__version__))])
    bundled = {artifact_name(j.name) for j in spark_jars_dir().glob("*.jar")}
    return [j for j in jars if artifact_name(j.name) not in bundled]


def iceberg_catalog_conf(warehouse: str) -> dict[str, str]:
    """The Spark settings of the Hadoop catalog :data:`ICEBERG_CATALOG` over the directory
    ``warehouse``."""
    catalog = f"spark.sql.catalog.{ICEBERG_CATALOG}"
    return {catalog: table_formats.ICEBERG_CATALOG, f"{catalog}.type": "hadoop",
            f"{catalog}.warehouse": warehouse}


def iceberg_conf(warehouse: str) -> dict[str, str]:
    """The Spark settings of a session reading Iceberg tables: its jar, its extension and the
    Hadoop catalog :data:`ICEBERG_CATALOG` over the directory ``warehouse``."""
    return {"spark.jars": ",".join(map(str, format_jars("iceberg"))),
            "spark.sql.extensions": table_formats.ICEBERG_EXTENSION,
            **iceberg_catalog_conf(warehouse)}


def delta_conf() -> dict[str, str]:
    """The Spark settings of a session reading Delta tables (its jars on the class path)."""
    return {"spark.jars": ",".join(map(str, format_jars("delta"))),
            "spark.sql.extensions": table_formats.DELTA_EXTENSION,
            "spark.sql.catalog.spark_catalog": table_formats.DELTA_CATALOG}
