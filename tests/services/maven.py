"""Test-only JVM artifacts from Maven Central, resolved with ``mvn`` into a cache outside the repo.

:func:`resolve` writes a throw-away pom naming the wanted artifacts, runs
``mvn dependency:copy-dependencies`` on it (Maven's own local repository, ``~/.m2``, keeps the
downloads) and moves the copied jars into ``accelerator.jvm.cache_dir() / "test-jars" / <name>``.
The directory is filled in a private staging directory and renamed into place, so it either holds
every jar or does not exist: two processes resolving at once both run Maven, one rename wins and
the other process uses the winner's jars. Once there, a set is never resolved again.

:func:`hadoop_version` is the Hadoop version pyspark bundles, so the artifacts match its client.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from xml.sax.saxutils import escape

from accelerator.runtime.jvm import cache_dir

MVN_TIMEOUT_S = 1800


class MavenError(RuntimeError):
    """Maven could not resolve a set of artifacts; the message ends with the tail of its output."""


@dataclass(frozen=True)
class Artifact:
    """One Maven dependency: ``group:artifact:version``, with the ``group:artifact`` pairs of
    its transitive dependencies to leave out (``"*:*"`` leaves out all of them)."""

    coordinates: str
    exclusions: tuple[str, ...] = ()

    def pom_xml(self) -> str:
        """The ``<dependency>`` element of this artifact."""
        group, artifact, version = self.coordinates.split(":")
        excluded = "".join(
            "<exclusion><groupId>{}</groupId><artifactId>{}</artifactId></exclusion>".format(
                *map(escape, pair.split(":"))) for pair in self.exclusions)
        return (f"<dependency><groupId>{escape(group)}</groupId>"
                f"<artifactId>{escape(artifact)}</artifactId><version>{escape(version)}</version>"
                f"<exclusions>{excluded}</exclusions></dependency>")


def hadoop_version() -> str:
    """The Hadoop version of pyspark's bundled client, read from its ``hadoop-client-api`` jar."""
    from accelerator.runtime.jvm import spark_jars_dir

    found = sorted(spark_jars_dir().glob("hadoop-client-api-*.jar"))
    if not found:
        raise MavenError(f"no hadoop-client-api jar in {spark_jars_dir()}")
    return found[-1].name[len("hadoop-client-api-"):-len(".jar")]


def artifact_name(jar: str) -> str:
    """``netty-common`` of ``netty-common-4.1.126.Final.jar``: the name before the version."""
    found = re.match(r"(.+?)-\d", jar)
    return found.group(1) if found else jar


def unbundled(jars: list[Path]) -> list[Path]:
    """``jars`` less the artifacts pyspark already has (the same artifact in another version
    would otherwise shadow or be shadowed by Spark's)."""
    from accelerator.runtime.jvm import spark_jars_dir

    bundled = {artifact_name(j.name) for j in spark_jars_dir().glob("*.jar")}
    return [j for j in jars if artifact_name(j.name) not in bundled]


def jars_root() -> Path:
    """Where resolved artifact sets live: ``<accelerator cache>/test-jars``."""
    return cache_dir() / "test-jars"


def _pom(artifacts: list[Artifact]) -> str:
    return ("<project xmlns=\"http://maven.apache.org/POM/4.0.0\">"
            "<modelVersion>4.0.0</modelVersion>"
            "<groupId>accelerator.tests</groupId><artifactId>test-jars</artifactId>"
            "<version>0</version><packaging>pom</packaging><dependencies>"
            + "".join(a.pom_xml() for a in artifacts) + "</dependencies></project>")


def resolve(name: str, artifacts: list[Artifact]) -> list[Path]:
    """The jars of ``artifacts`` and their runtime dependencies, sorted, resolved once into
    ``jars_root() / <name>-<hash of the pom>``; raises :class:`MavenError` when Maven fails."""
    pom = _pom(artifacts)
    target = jars_root() / f"{name}-{hashlib.sha256(pom.encode()).hexdigest()[:12]}"
    materialize(target, lambda jars: _download(pom, jars))
    return sorted(target.glob("*.jar"))


def materialize(target: Path, fill: Callable[[Path], None]) -> Path:
    """The directory ``target``, made once by ``fill(staging directory)`` unless it exists.

    ``fill`` must create the directory it is given; it is then renamed to ``target``. Of two
    processes filling at once, one rename wins and the other's work is discarded.
    """
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        fill(staging / "out")
        try:
            os.rename(staging / "out", target)
        except OSError:
            if not target.is_dir():   # not a concurrent process's finished copy
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _download(pom: str, jars: Path) -> None:
    """Copies the runtime jars of ``pom`` into the new directory ``jars``."""
    work = Path(tempfile.mkdtemp(prefix="accelerator-mvn-"))
    try:
        (work / "pom.xml").write_text(pom)
        command = [shutil.which("mvn") or "mvn", "-B", "-Dstyle.color=never", "-f",
                   str(work / "pom.xml"),
                   "dependency:copy-dependencies", "-DincludeScope=runtime",
                   f"-DoutputDirectory={jars}"]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=MVN_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise MavenError(f"running {' '.join(command)} failed: {exc}") from exc
        if result.returncode != 0 or not jars.is_dir():
            tail = "\n".join((result.stdout + result.stderr).splitlines()[-40:])
            raise MavenError(f"Maven could not resolve the test jars for {jars.parent.name} "
                             f"(exit {result.returncode}); the pom is\n{pom}\n"
                             f"the end of Maven's output:\n{tail}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
