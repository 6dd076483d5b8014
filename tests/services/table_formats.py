"""Test sessions that read Delta Lake tables: the Delta jar pinned for the running Spark line
(:mod:`accelerator.runtime.table_formats`) and its runtime dependencies, resolved from Maven
Central by tests/services/maven.py (not by Spark's Ivy, which trips over ``~/.m2`` entries
without jars), less what pyspark bundles, and Delta's extension and catalog."""
from __future__ import annotations

import pyspark

from accelerator.runtime import table_formats
from accelerator.runtime.jvm import spark_jars_dir
from tests.services.maven import Artifact, artifact_name, resolve


def delta_jars() -> list:
    """The jars a session needs for Delta Lake on the installed pyspark."""
    jars = resolve("delta", [Artifact(table_formats.package("delta", pyspark.__version__))])
    bundled = {artifact_name(j.name) for j in spark_jars_dir().glob("*.jar")}
    return [j for j in jars if artifact_name(j.name) not in bundled]


def delta_conf() -> dict[str, str]:
    """The Spark settings of a session reading Delta tables (its jars on the class path)."""
    return {"spark.jars": ",".join(map(str, delta_jars())),
            "spark.sql.extensions": table_formats.DELTA_EXTENSION,
            "spark.sql.catalog.spark_catalog": table_formats.DELTA_CATALOG}
