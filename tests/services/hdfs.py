"""HDFS for the tests: a MiniDFSCluster (one name node, one data node) in its own JVM.

``start_hdfs(tmp_dir)`` returns an :class:`Hdfs` with ``.url`` (``hdfs://127.0.0.1:<port>``) and
``.stop()``; the session fixture ``hdfs`` (registered in tests/conftest.py) starts one for the
test session. The cluster's jars come from Maven Central (``hadoop-client-minicluster`` of
pyspark's Hadoop version, through tests/services/maven.py) and its launcher, MiniHdfs.java
beside this file, is compiled with ``javac`` into the same cache. The test session's Spark reaches
the cluster with pyspark's bundled Hadoop client: nothing is added to its class path.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from tests.services.maven import Artifact, hadoop_version, jars_root, materialize, resolve
from tests.services.process import ServiceError, ServiceProcess

LAUNCHER = Path(__file__).with_name("MiniHdfs.java")


class Hdfs:
    """A running MiniDFSCluster: ``url`` is its file system URI, ``stop()`` shuts it down."""

    def __init__(self, service: ServiceProcess):
        self._service = service
        self.url = service.address
        self.log = service.log

    def stop(self) -> None:
        """Shuts the cluster down (waits for its JVM to exit)."""
        self._service.stop()


def jdk_tool(tool: str) -> str:
    """The JDK's ``tool`` (``java``, ``javac``) as Spark's launcher finds java: under
    ``JAVA_HOME``, else on the path."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / tool).exists():
        return str(Path(home) / "bin" / tool)
    return shutil.which(tool) or tool


def class_path() -> str:
    """The MiniDFSCluster's jars and its compiled launcher, as one class path."""
    version = hadoop_version()
    jars = resolve("hdfs", [Artifact(f"org.apache.hadoop:hadoop-client-minicluster:{version}")])
    classpath = os.pathsep.join(map(str, jars))
    source = LAUNCHER.read_bytes()
    digest = hashlib.sha256(source + version.encode()).hexdigest()[:12]

    def compile_into(classes: Path) -> None:
        result = subprocess.run([jdk_tool("javac"), "-nowarn", "--release", "17", "-cp", classpath,
                                 "-d", str(classes), str(LAUNCHER)], capture_output=True, text=True)
        if result.returncode != 0:
            raise ServiceError(f"compiling {LAUNCHER} failed:\n{result.stdout}{result.stderr}")

    classes = materialize(jars_root() / f"minihdfs-{digest}", compile_into)
    return os.pathsep.join([str(classes), classpath])


def start_hdfs(tmp_dir: str | os.PathLike) -> Hdfs:
    """Starts a MiniDFSCluster storing its blocks under ``tmp_dir`` (its log is
    ``tmp_dir/minihdfs.log``); raises ServiceError with the log's tail when it cannot start."""
    base = Path(tmp_dir)
    command = [jdk_tool("java"), "-Xmx512m", "-Djava.net.preferIPv4Stack=true", "-cp", class_path(),
               "MiniHdfs", str(base / "data")]
    return Hdfs(ServiceProcess("MiniDFSCluster", command, base / "minihdfs.log", "MINIHDFS "))
