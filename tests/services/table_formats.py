"""Test sessions that read Delta Lake and Iceberg tables: the jar each format pins for the
running Spark line (:mod:`accelerator.runtime.table_formats`) and its runtime dependencies,
resolved from Maven Central by tests/services/maven.py (not by Spark's Ivy, which trips over
``~/.m2`` entries without jars), less what pyspark bundles; Delta's extension and session
catalog; Iceberg's extension and a Hadoop catalog ``ice`` (:data:`ICEBERG_CATALOG`)."""
from __future__ import annotations

import pyspark

from accelerator.runtime import table_formats
from tests.services.maven import Artifact, resolve, unbundled


#: settings that hold comma-separated lists, which each service's settings extend
LISTED_SETTINGS = ("spark.jars", "spark.sql.extensions")

#: the name of the tests' Iceberg catalog (a Hadoop catalog in a directory of the test run)
ICEBERG_CATALOG = "ice"


def format_jars(table_format: str) -> list:
    """The jars a session needs for ``table_format`` on the installed pyspark."""
    return unbundled(resolve(
        table_format, [Artifact(table_formats.package(table_format, pyspark.__version__))]))


def iceberg_catalog_conf(warehouse: str, catalog_name: str = ICEBERG_CATALOG) -> dict[str, str]:
    """The Spark settings of the Hadoop catalog ``catalog_name`` over the directory
    ``warehouse``."""
    catalog = f"spark.sql.catalog.{catalog_name}"
    return {catalog: table_formats.ICEBERG_CATALOG, f"{catalog}.type": "hadoop",
            f"{catalog}.warehouse": warehouse}


def iceberg_conf(warehouse: str, catalog_name: str = ICEBERG_CATALOG) -> dict[str, str]:
    """The Spark settings of a session reading Iceberg tables: its jar, its extension and the
    Hadoop catalog ``catalog_name`` over the directory ``warehouse``."""
    return {"spark.jars": ",".join(map(str, format_jars("iceberg"))),
            "spark.sql.extensions": table_formats.ICEBERG_EXTENSION,
            **iceberg_catalog_conf(warehouse, catalog_name)}


def merged_conf(*confs: dict[str, str]) -> dict[str, str]:
    """The settings of ``confs`` together: those holding comma-separated lists
    (:data:`LISTED_SETTINGS`) joined, the others the last one's."""
    out: dict[str, str] = {}
    for conf in confs:
        for key, value in conf.items():
            listed = out.get(key) if key in LISTED_SETTINGS else None
            out[key] = f"{listed},{value}" if listed else value
    return out


def delta_conf() -> dict[str, str]:
    """The Spark settings of a session reading Delta tables (its jars on the class path)."""
    return {"spark.jars": ",".join(map(str, format_jars("delta"))),
            "spark.sql.extensions": table_formats.DELTA_EXTENSION,
            "spark.sql.catalog.spark_catalog": table_formats.DELTA_CATALOG}
