"""The JVM side of the accelerator: compiled from the Java sources shipped in the package.

The jar is never shipped prebuilt. On first use it is compiled with ``javac`` against the jars of
the running pyspark into a per-user cache, keyed by a hash of the sources, the Spark version, its
Scala version and the Java release, then loaded into the driver through a private class loader.
The sources under ``java/src`` are shared; the few classes whose signatures name Scala
collections (which differ between Scala 2.12, Spark 3.5, and 2.13, Spark 4) come from
``java/scala-2.12`` or ``java/scala-2.13``, chosen by the ``scala-library`` jar beside Spark's. The
classes target the Java release the driver runs (11 for a Spark 3.5 on Java 11, at most 17).
:class:`JvmHelpers` holds their instances in a driver: the rewriter
(:mod:`accelerator.query.rewriter` and the modules it runs) edits plans through them; explain,
warm-ups, source descriptions and the query history's listener call them too.
"""
from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from accelerator.runtime import application
from indexes.errors import JvmSetupError
from indexes.fs import HadoopFs

log = logging.getLogger("accelerator.runtime.jvm")

SOURCE_DIR = Path(__file__).parent / "java" / "src"
SCALA_DIRS = {v: Path(__file__).parent / "java" / f"scala-{v}" for v in ("2.12", "2.13")}
MIN_JAVA = 11        # Spark 3.5 also runs on Java 8, which the sources do not target
MAX_RELEASE = 17     # the classes need nothing newer; a newer JVM runs them
PACKAGE = "accelerator.jvm"
EXTENSIONS_CLASS = f"{PACKAGE}.AcceleratorExtensions"
_lock = threading.Lock()


@dataclass
class JvmHelpers:
    """Instances of the accelerator's Java classes in one driver JVM."""

    builder: Any        # AcceleratorRuleBuilder
    plans: Any          # PlanRewrite
    cache: Any          # CacheServing
    metrics: Any        # QueryMetrics: the listener of what executed queries cost
    files: Any          # BulkFiles: many small files listed or read in one call
    preinstalled: bool  # the rule came with spark.sql.extensions when the session was built


def configured_by_extensions(spark: Any) -> bool:
    """Whether the session was built with the accelerator in ``spark.sql.extensions``."""
    return EXTENSIONS_CLASS in spark.conf.get("spark.sql.extensions", "")


def cache_dir() -> Path:
    """Where compiled jars are kept (``ACCELERATOR_CACHE_DIR`` or the user's cache directory)."""
    root = os.environ.get("ACCELERATOR_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache"), "spark-accelerator")
    return Path(root)


def _sources(scala: str) -> list[Path]:
    return sorted(SOURCE_DIR.rglob("*.java")) + sorted(SCALA_DIRS[scala].rglob("*.java"))


def scala_version(jars: Path) -> str:
    """The Scala version (``2.12`` or ``2.13``) of the Spark whose jars are in ``jars``."""
    found = sorted(jars.glob("scala-library-*.jar"))
    for version in SCALA_DIRS:
        if any(f.name.startswith(f"scala-library-{version}.") for f in found):
            return version
    raise JvmSetupError(
        f"cannot tell Spark's Scala version from {jars}: expected a scala-library-2.12.*.jar or "
        f"scala-library-2.13.*.jar there, found {[f.name for f in found] or 'none'}")


def java_feature(version: str) -> int:
    """The feature release of a Java version string: ``1.8.0_402`` → 8, ``17.0.15`` → 17."""
    parts = version.strip().split(".")
    try:
        return int(parts[1]) if parts[0] == "1" else int(parts[0].split("-")[0].split("+")[0])
    except (IndexError, ValueError):
        raise JvmSetupError(f"cannot read the Java version {version!r}") from None


def java_release(java_version: str) -> int:
    """The ``--release`` the classes are compiled for, to run on a JVM of ``java_version``."""
    feature = java_feature(java_version)
    if feature < MIN_JAVA:
        raise JvmSetupError(
            f"Spark runs on Java {feature} here; the accelerator needs Java {MIN_JAVA} or newer "
            f"(Spark 3.5 on Java 11 or 17, Spark 4 on Java 17+): set JAVA_HOME to a newer JDK")
    return min(feature, MAX_RELEASE)


def _launcher_java_version() -> str:
    """The version of the ``java`` Spark would launch (``JAVA_HOME``'s, else the ``PATH``'s)."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        raise JvmSetupError("no java found (JAVA_HOME or PATH): install a JDK 17+")
    out = subprocess.run([java, "-XshowSettings:properties", "-version"],
                         capture_output=True, text=True).stderr
    for line in out.splitlines():
        if line.strip().startswith("java.specification.version"):
            return line.split("=", 1)[1].strip()
    raise JvmSetupError(f"cannot read the version of {java}")


def driver_java_version(spark: Any) -> str:
    """The Java specification version the driver JVM of ``spark`` runs (``11``, ``17``, ...)."""
    return str(spark.sparkContext._jvm.java.lang.System.getProperty("java.specification.version"))


def spark_jars_dir() -> Path:
    import pyspark
    home = os.environ.get("SPARK_HOME")
    candidates = [Path(home) / "jars"] if home else []
    candidates.append(Path(pyspark.__file__).parent / "jars")
    for c in candidates:
        if c.is_dir() and any(c.glob("spark-catalyst*.jar")):
            return c
    raise JvmSetupError("cannot find Spark's jars (looked in $SPARK_HOME/jars and pyspark/jars)")


def _javac() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").exists():
        return str(Path(home) / "bin" / "javac")
    found = shutil.which("javac")
    if not found:
        raise JvmSetupError(
            "the accelerator compiles its small JVM rule on first use and needs a JDK (javac), "
            "but none was found: install a JDK 17+ (e.g. 'apt install openjdk-17-jdk-headless') "
            "or set JAVA_HOME to one")
    return found


def jar_path(spark_version: str, scala: str, release: int) -> Path:
    """The cached jar for these sources, this Spark and Scala version and this Java release."""
    digest = hashlib.sha256(f"{spark_version} {scala} {release}".encode())
    for src in _sources(scala):
        digest.update(src.name.encode())
        digest.update(src.read_bytes())
    return cache_dir() / f"accelerator-jvm-{digest.hexdigest()[:16]}.jar"


def build_jar(spark_version: str, java_version: str | None = None) -> Path:
    """Compiles the Java sources into the cached jar unless it is already there: against the
    jars of the Spark of ``spark_version`` (its Scala version's adapters), for a JVM of
    ``java_version`` (default: the ``java`` Spark would launch)."""
    jars = spark_jars_dir()
    scala = scala_version(jars)
    release = java_release(java_version or _launcher_java_version())
    target = jar_path(spark_version, scala, release)
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="accelerator-javac-") as tmp:
        classes = Path(tmp) / "classes"
        cmd = [_javac(), "-nowarn", "-encoding", "UTF-8", "--release", str(release),
               "-d", str(classes), "-cp", str(jars / "*"), *map(str, _sources(scala))]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            raise JvmSetupError(f"compiling the accelerator's JVM rule failed:\n{result.stderr.strip()}")
        staging = Path(tmp) / target.name
        with zipfile.ZipFile(staging, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
            for cls in sorted(classes.rglob("*.class")):
                jar.write(cls, cls.relative_to(classes).as_posix())
        os.replace(staging, target)
    log.info("compiled the accelerator JVM rule into %s", target)
    return target


def session_jar(spark: Any) -> Path:
    """The jar for the Spark and the driver JVM of ``spark``, compiled when needed."""
    return build_jar(spark.version, driver_java_version(spark))


def helpers(spark: Any) -> JvmHelpers:
    """The accelerator's Java objects in the driver JVM of ``spark``, built and loaded once.

    Normally the jar is compiled (once) and loaded through a private class loader. A session
    built with ``spark.sql.extensions=accelerator.jvm.AcceleratorExtensions`` and the jar on
    ``spark.jars`` already holds the rule; then Spark's own class loader provides the classes,
    so the rewriter is registered with the rule Spark injected.
    """
    jvm = spark.sparkContext._jvm
    app = application.of(spark)
    with _lock:
        if app.jvm is not None:
            return app.jvm
        gateway = spark.sparkContext._gateway
        spark_loader = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
        preinstalled = configured_by_extensions(spark)
        if preinstalled:
            loader = spark_loader
        else:
            urls = gateway.new_array(jvm.java.net.URL, 1)
            urls[0] = jvm.java.io.File(str(session_jar(spark))).toURI().toURL()
            loader = jvm.java.net.URLClassLoader(urls, spark_loader)

        def new(name: str) -> Any:
            try:
                cls = jvm.java.lang.Class.forName(f"{PACKAGE}.{name}", True, loader)
            except Exception as exc:
                raise JvmSetupError(
                    f"spark.sql.extensions names {EXTENSIONS_CLASS} but its jar is not on the "
                    "driver's class path: add the path printed by 'accelerator jar' to spark.jars, "
                    "or drop the setting and let Hyperspace.enable load it") from exc
            return cls.getConstructor(gateway.new_array(jvm.java.lang.Class, 0)).newInstance(
                gateway.new_array(jvm.java.lang.Object, 0))

        found = JvmHelpers(builder=new("AcceleratorRuleBuilder"), plans=new("PlanRewrite"),
                           cache=new("CacheServing"), metrics=new("QueryMetrics"),
                           files=new("BulkFiles"),
                           preinstalled=preinstalled)
        app.jvm = found
        _quick_answers(gateway, new)
        return found


def hadoop_fs(spark: Any) -> HadoopFs:
    """The session's file system, listing and reading many small files (a cache manifest's
    entries) in one py4j call each."""
    return HadoopFs(spark, bulk=helpers(spark).files)


def _quick_answers(gateway: Any, new: Callable[[str], Any]) -> None:
    """Turns off Nagle's algorithm on the driver's py4j connections (see ``Py4jNoDelay``): an
    answer of more than 8 KB (an index log entry, a history file) otherwise waits ~40 ms for
    the Python side's delayed acknowledgement. Without effect, logged, when py4j differs."""
    try:
        changed = new("Py4jNoDelay").install(gateway.java_gateway_server)
        log.debug("TCP_NODELAY set on %d open py4j connections", changed)
    except Exception:  # noqa: BLE001 - answers stay correct, only slower
        log.debug("cannot set TCP_NODELAY on py4j connections", exc_info=True)


#: the class of DataSketches (bundled in spark-catalyst from Spark 4.2, used by the hll_sketch
#: functions the rule engine's profiling runs) whose static initializer prints "Warning: Java
#: versions > Java 11 can only operate in restricted mode ..." to System.err on Java 17 and later
RESTRICTED_MODE_WARNER = "org.apache.datasketches.memory.internal.ResourceImpl"


def load_quietly(spark: Any, class_name: str = RESTRICTED_MODE_WARNER) -> bool:
    """Loads (initializes) ``class_name`` in the driver with ``System.err`` silenced for that
    moment, so what its static initializer prints (the DataSketches restricted-mode warning,
    printed once per JVM, not through a logger: no log level or JVM option silences it) never
    shows; for sessions the accelerator starts itself, before they run anything. Returns
    whether the class exists (False on Spark lines without it: nothing to silence)."""
    jvm = spark.sparkContext._jvm
    system = jvm.java.lang.System
    err = system.err
    system.setErr(jvm.java.io.PrintStream(jvm.java.io.OutputStream.nullOutputStream()))
    try:
        loader = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
        jvm.java.lang.Class.forName(class_name, True, loader)
        return True
    except Exception:  # noqa: BLE001 - ClassNotFoundException: no such class on this line
        return False
    finally:
        system.setErr(err)
