"""A Spark standalone cluster for tests: a master and workers started from pyspark's own
``bin/spark-class`` on 127.0.0.1 and free ports, each in a process group of its own so that
stopping the cluster kills exactly what it started: the daemons and their executors (the
executors' PySpark daemons put themselves in groups of their own and exit when their executor's
pipe closes)."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import sys
import textwrap
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pyspark

SPARK_HOME = Path(pyspark.__file__).resolve().parent
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


class ClusterError(RuntimeError):
    """The cluster did not start; the message holds the tail of every daemon's log."""


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of the file at ``path`` ('' if it does not exist)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return ""


@dataclass
class Daemon:
    """One started master or worker JVM and the file its output goes to."""

    name: str
    process: subprocess.Popen
    log: Path


@dataclass
class SparkCluster:
    """A standalone master and its workers under ``base`` (logs, work and local directories)."""

    base: Path
    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    host: str = "127.0.0.1"
    port: int = field(default_factory=free_port)
    web_port: int = field(default_factory=free_port)
    daemons: list[Daemon] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        """The URL drivers connect to: ``spark://127.0.0.1:<port>``."""
        return f"spark://{self.host}:{self.port}"

    def environment(self) -> dict[str, str]:
        """The daemons' environment: pyspark's Spark home, an empty configuration directory and
        no ``PYTHONPATH`` (executors find only what is installed or shipped, as on a cluster)."""
        conf = self.base / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "SPARK_CONF_DIR", "SPARK_MASTER_OPTS",
                            "SPARK_WORKER_OPTS", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
        env.update(SPARK_HOME=str(SPARK_HOME), SPARK_CONF_DIR=str(conf),
                   SPARK_LOCAL_IP=self.host, SPARK_LOCAL_DIRS=str(self.base / "local"),
                   SPARK_DAEMON_MEMORY="512m",
                   # a port taken meanwhile fails the start (its log says so) instead of
                   # moving the daemon to another port than the one the cluster uses
                   SPARK_DAEMON_JAVA_OPTS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC "
                                          "-Dspark.port.maxRetries=0")
        return env

    def _spawn(self, name: str, *args: str) -> None:
        log = self.base / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [str(SPARK_HOME / "bin" / "spark-class"), *args], stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.environment(),
                cwd=self.base, start_new_session=True)
        self.daemons.append(Daemon(name, process, log))

    def start(self, timeout_s: float = 90.0) -> None:
        """Starts the master and the workers and waits until every worker is ALIVE at the
        master; raises ClusterError with the daemons' logs otherwise."""
        self._spawn("master", MASTER_CLASS, "--host", self.host, "--port", str(self.port),
                    "--webui-port", str(self.web_port))
        for i in range(self.workers):
            work = self.base / f"worker-{i}"
            work.mkdir(parents=True, exist_ok=True)
            self._spawn(f"worker-{i}", WORKER_CLASS, self.master_url, "--host", self.host,
                        "--cores", str(self.cores), "--memory", self.memory,
                        "--webui-port", str(free_port()), "--work-dir", str(work))
        deadline = time.monotonic() + timeout_s
        while self.alive_workers() < self.workers:
            dead = [d for d in self.daemons if d.process.poll() is not None]
            if dead or time.monotonic() > deadline:
                why = (f"{', '.join(d.name for d in dead)} exited" if dead
                       else f"not {self.workers} workers ALIVE within {timeout_s:.0f} s")
                raise ClusterError(f"the Spark standalone cluster did not start: {why}\n"
                                   + self.logs())
            time.sleep(0.5)

    def state(self) -> dict:
        """The master's state as its web UI's ``/json/`` gives it ({} while it does not answer)."""
        try:
            with urllib.request.urlopen(f"http://{self.host}:{self.web_port}/json/",
                                        timeout=2) as r:
                return json.load(r)
        except (OSError, ValueError):
            return {}

    def alive_workers(self) -> int:
        """How many workers the master counts as ALIVE."""
        return sum(w.get("state") == "ALIVE" for w in self.state().get("workers", []))

    def logs(self, lines: int = 40) -> str:
        """The tail of each daemon's log and of its executors' stderr, for error messages."""
        parts = [f"--- {d.name} ({d.log}) ---\n{tail(d.log, lines)}" for d in self.daemons]
        for stderr in sorted(self.base.glob("worker-*/app-*/*/stderr")):
            parts.append(f"--- executor {stderr} ---\n{tail(stderr, lines)}")
        return "\n".join(parts)

    def stop(self, grace_s: float = 10.0) -> None:
        """Stops the workers and the master: SIGTERM to each one's process group, then, once
        the daemons exited or after ``grace_s``, SIGKILL to the groups (an executor may outlive
        its worker). A daemon is reaped only after that, so its process group id cannot have
        been reused by another process."""
        for d in self.daemons:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(d.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and not all(map(_exited, self.daemons)):
            time.sleep(0.2)
        for d in self.daemons:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(d.process.pid, signal.SIGKILL)
            d.process.wait()
        self.daemons.clear()


def _exited(daemon: Daemon) -> bool:
    """Whether the daemon's process exited (a zombie not reaped yet: Linux's /proc)."""
    try:
        stat = Path(f"/proc/{daemon.process.pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


# Run at the start of a wrapped interpreter (as ``sitecustomize``): makes the modules named in
# HIDDEN_MODULES unimportable and those in HIDDEN_INSTALLED importable only from outside
# site-packages (from what Spark ships, such as an addPyFile zip).
_SITECUSTOMIZE = textwrap.dedent("""\
    import importlib.machinery, os, sys

    _MISSING = set(filter(None, os.environ.get("HIDDEN_MODULES", "").split(",")))
    _INSTALLED = set(filter(None, os.environ.get("HIDDEN_INSTALLED", "").split(",")))


    class _Hide:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name in _MISSING:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            if name in _INSTALLED:
                shipped = [p for p in sys.path if "site-packages" not in p]
                spec = importlib.machinery.PathFinder.find_spec(name, shipped)
                if spec is None:
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                return spec
            return None


    sys.meta_path.insert(0, _Hide)
""")


def executor_python(directory: Path, hidden_installed: tuple[str, ...] = (),
                    hidden: tuple[str, ...] = ()) -> str:
    """An interpreter for executors (a shell script in ``directory`` running this Python): the
    modules ``hidden`` do not import, and the packages ``hidden_installed`` import only from
    what Spark ships, not from this Python's site-packages, as on a cluster's machines where
    they are not installed. Returns the script's path."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    script = directory / "python"
    script.write_text(
        "#!/bin/sh\n"
        f"export HIDDEN_MODULES='{','.join(hidden)}' HIDDEN_INSTALLED='{','.join(hidden_installed)}'\n"
        f'export PYTHONPATH="{directory}${{PYTHONPATH:+:$PYTHONPATH}}"\n'
        f'exec "{sys.executable}" "$@"\n')
    script.chmod(0o755)
    return str(script)


@contextlib.contextmanager
def standalone_cluster(base: Path, workers: int = 2, cores: int = 1,
                       memory: str = "1g") -> Iterator[SparkCluster]:
    """A started cluster of ``workers`` workers with ``cores`` cores and ``memory`` each, stopped
    when the block ends (also when it failed to start)."""
    cluster = SparkCluster(Path(base), workers=workers, cores=cores, memory=memory)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
