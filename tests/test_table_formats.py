"""The table-format releases pinned per Spark line and the session settings that load them
(pure Python: the Delta and Iceberg tests themselves run in the table-format lanes, ``-m delta``
and ``-m iceberg``)."""
from __future__ import annotations

import pytest

from accelerator.runtime import table_formats
from indexes.errors import UnsupportedSparkError


@pytest.mark.parametrize("version, jar", [
    ("3.5.8", "io.delta:delta-spark_2.12:3.3.3"),
    ("4.1.4", "io.delta:delta-spark_4.1_2.13:4.4.0"),
    ("4.2.0", "io.delta:delta-spark_4.2_2.13:4.4.0"),
])
def test_delta_jar_is_the_one_pinned_for_the_spark_line(version, jar):
    assert table_formats.package("delta", version) == jar


@pytest.mark.parametrize("version, jar", [
    ("3.5.8", "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.12.0"),
    ("4.0.1", "org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:1.11.0"),
    ("4.1.4", "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0"),
])
def test_iceberg_runtime_is_the_one_pinned_for_the_spark_line(version, jar):
    assert table_formats.package("iceberg", version) == jar


def test_a_spark_line_without_an_iceberg_release_gets_an_error_naming_those_with_one():
    with pytest.raises(UnsupportedSparkError, match=r"iceberg has no release for Spark 4\.2\.0.*"
                                                     r"3\.5, 4\.0, 4\.1: .*pyspark==4\.1\.\*"):
        table_formats.package("iceberg", "4.2.0")


def test_iceberg_leaves_the_session_catalog_to_delta_or_as_it_is():
    both = table_formats.session_settings("4.1.0", "iceberg", "delta")
    assert both["spark.sql.extensions"] == (
        "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions,"
        "io.delta.sql.DeltaSparkSessionExtension")
    assert both["spark.sql.catalog.spark_catalog"] == table_formats.DELTA_CATALOG
    assert "spark.sql.catalog.spark_catalog" not in table_formats.session_settings("3.5.1",
                                                                                   "iceberg")


def test_a_spark_line_without_a_delta_release_gets_an_error_naming_those_with_one():
    with pytest.raises(UnsupportedSparkError, match=r"no release for Spark 4\.3\.0.*3\.5, 4\.0, "
                                                     r"4\.1, 4\.2: .*pyspark==4\.2\.\*"):
        table_formats.package("delta", "4.3.0")


def test_an_unknown_table_format_is_refused():
    with pytest.raises(ValueError, match="unknown table format 'hudi'"):
        table_formats.package("hudi", "4.1.0")


def test_session_settings_add_to_the_packages_and_extensions_already_set():
    settings = table_formats.session_settings("4.1.0", "delta", current={
        "spark.jars.packages": "org.example:lib:1.0",
        "spark.sql.extensions": "accelerator.jvm.AcceleratorExtensions"})
    assert settings == {
        "spark.jars.packages": "org.example:lib:1.0,io.delta:delta-spark_4.1_2.13:4.4.0",
        "spark.sql.extensions": "accelerator.jvm.AcceleratorExtensions,"
                                "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog"}


def test_a_session_catalog_already_set_is_kept():
    settings = table_formats.session_settings(
        "3.5.1", "delta", current={"spark.sql.catalog.spark_catalog": "my.Catalog"})
    assert "spark.sql.catalog.spark_catalog" not in settings
    assert settings["spark.jars.packages"] == "io.delta:delta-spark_2.12:3.3.3"


def test_configure_sets_the_builder_for_the_installed_pyspark():
    from pyspark.sql import SparkSession
    import pyspark

    builder = SparkSession.Builder().config("spark.sql.extensions", "x.Ext")   # not the shared one
    try:
        expected = table_formats.package("delta", pyspark.__version__)
    except UnsupportedSparkError:
        with pytest.raises(UnsupportedSparkError):
            table_formats.configure(builder, "delta")
        return
    table_formats.configure(builder, "delta")
    assert builder._options["spark.jars.packages"] == expected
    assert builder._options["spark.sql.extensions"] == "x.Ext,io.delta.sql.DeltaSparkSessionExtension"
