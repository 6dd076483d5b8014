"""The supported Spark versions: the clear error for another one, the JVM rule built for the
running Spark's Scala version and Java release, and the calls whose fallback differs by version."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pyspark
import pytest

from accelerator import Hyperspace
from accelerator.runtime import jvm, spark_versions
from indexes.errors import JvmSetupError, UnsupportedSparkError


@pytest.mark.parametrize("version, line", [("3.5.9", (3, 5)), ("4.0.0", (4, 0)),
                                           ("4.1.0.dev2", (4, 1)), ("4.3.0", (4, 3))])
def test_spark_line_reads_the_major_and_minor_version(version, line):
    assert spark_versions.spark_line(version) == line


@pytest.mark.parametrize("version", ["3.5.0", "3.5.9", "4.0.5", "4.1.4", "4.2.1", "4.3.0"])
def test_supported_lines_pass(version):
    spark_versions.check_supported(version)


@pytest.mark.parametrize("version", ["3.4.4", "3.3.0", "4.4.0", "5.0.0"])
def test_other_lines_are_refused_naming_the_version_and_the_range(version):
    with pytest.raises(UnsupportedSparkError) as raised:
        spark_versions.check_supported(version)
    assert version in str(raised.value) and "3.5 to 4.3" in str(raised.value)


def test_an_unreadable_version_is_refused():
    with pytest.raises(UnsupportedSparkError, match="cannot read the Spark version"):
        spark_versions.spark_line("master-SNAPSHOT")


@pytest.mark.compat
def test_hyperspace_refuses_a_session_on_an_unsupported_spark(spark, monkeypatch):
    """A session whose JVM runs another Spark (SPARK_HOME, a cluster) than pyspark's is judged
    by the JVM's version, before anything is built."""
    monkeypatch.setattr(type(spark), "version", property(lambda self: "3.4.1"))
    with pytest.raises(UnsupportedSparkError, match=r"Spark 3\.4\.1 is not supported"):
        Hyperspace(spark)


@pytest.mark.compat
def test_the_session_runs_the_installed_pyspark_and_a_supported_line(spark):
    spark_versions.check_session(spark)
    assert spark_versions.spark_line(spark.version) == spark_versions.PYSPARK
    assert spark_versions.spark_line(pyspark.__version__) == spark_versions.PYSPARK


@pytest.mark.parametrize("version, feature", [("1.8.0_402", 8), ("11", 11), ("11.0.22", 11),
                                              ("17.0.15", 17), ("21", 21), ("22-ea", 22)])
def test_java_feature_release(version, feature):
    assert jvm.java_feature(version) == feature


def test_the_rule_targets_the_drivers_java_release_up_to_17():
    assert jvm.java_release("11") == 11
    assert jvm.java_release("17") == 17
    assert jvm.java_release("21") == 17


def test_java_8_is_refused_with_the_reason():
    with pytest.raises(JvmSetupError, match="needs Java 11 or newer"):
        jvm.java_release("1.8")


@pytest.mark.parametrize("jar, scala", [("scala-library-2.12.18.jar", "2.12"),
                                        ("scala-library-2.13.16.jar", "2.13")])
def test_scala_version_from_the_spark_jars(tmp_path, jar, scala):
    (tmp_path / jar).write_bytes(b"")
    assert jvm.scala_version(tmp_path) == scala


def test_spark_jars_without_a_scala_library_are_reported(tmp_path):
    with pytest.raises(JvmSetupError, match="cannot tell Spark's Scala version"):
        jvm.scala_version(tmp_path)


def test_each_scala_version_has_the_same_adapter_classes():
    """The version-specific sources are the same few classes for both Scala versions, and none
    of them is also among the shared sources."""
    names = {v: sorted(p.name for p in d.rglob("*.java")) for v, d in jvm.SCALA_DIRS.items()}
    assert names["2.12"] == names["2.13"] and names["2.12"]
    shared = {p.name for p in jvm.SOURCE_DIR.rglob("*.java")}
    assert not shared & set(names["2.12"])


@pytest.mark.compat
def test_the_jar_is_built_for_the_running_spark(spark):
    """The session's jar: compiled against this Spark's jars with its Scala version's adapters,
    and cached under a name that tells Scala versions and Java releases apart."""
    jar = jvm.session_jar(spark)
    assert jar.exists()
    scala = jvm.scala_version(jvm.spark_jars_dir())
    assert scala == ("2.12" if spark_versions.PYSPARK < (4, 0) else "2.13")
    release = jvm.java_release(jvm.driver_java_version(spark))
    assert jar == jvm.jar_path(spark.version, scala, release)
    other = "2.13" if scala == "2.12" else "2.12"
    assert jvm.jar_path(spark.version, other, release) != jar
    assert jvm.jar_path(spark.version, scala, 11 if release != 11 else 17) != jar


@pytest.mark.compat
def test_ddl_parsing_and_arrow_schemas_agree_with_spark(spark):
    parsed = spark_versions.parse_ddl("a int, b array<string>, c timestamp")
    assert parsed == spark.createDataFrame([], "a int, b array<string>, c timestamp").schema
    arrow = spark_versions.arrow_schema(parsed)
    assert str(arrow.field("c").type) == "timestamp[us, tz=UTC]"


def test_dataset_class_follows_the_jvms_version():
    """Spark 4 moved the classic Dataset to org.apache.spark.sql.classic."""
    sql = SimpleNamespace(Dataset="sql.Dataset", classic=SimpleNamespace(Dataset="classic.Dataset"))
    jvm_ = SimpleNamespace(org=SimpleNamespace(apache=SimpleNamespace(spark=SimpleNamespace(sql=sql))))

    def session(version):
        return SimpleNamespace(version=version, sparkContext=SimpleNamespace(_jvm=jvm_))

    assert spark_versions.dataset_class(session("3.5.9")) == "sql.Dataset"
    assert spark_versions.dataset_class(session("4.0.5")) == "classic.Dataset"


def test_the_sources_ship_in_the_package():
    """pyproject's package data names every directory of Java sources."""
    text = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    for version in jvm.SCALA_DIRS:
        assert f"runtime/java/scala-{version}/accelerator/jvm/*.java" in text
