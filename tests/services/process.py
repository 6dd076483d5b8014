"""A service in a child process: started, waited for until it prints its address, and stopped.

The child's standard output and error go to a log file, its standard input is a pipe the child
watches: closing it (``stop``) or the death of the test process ends the service. A service that
exits or stays silent while starting raises :class:`ServiceError` with the tail of its log.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


class ServiceError(RuntimeError):
    """A service could not start; the message ends with the tail of its log."""


def log_tail(log: Path, lines: int = 60) -> str:
    """The last ``lines`` lines of ``log`` (empty when it does not exist)."""
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@dataclass(frozen=True)
class Finished:
    """A child run to its end by :func:`run_in_own_group`."""

    returncode: int
    out: str
    err: str
    timed_out: bool


def run_in_own_group(command: list[str], env: dict, cwd: str | Path,
                     timeout_s: float) -> Finished:
    """Runs ``command`` in a process group of its own (a PySpark driver: its JVM and Python
    workers are in it too) and waits for it; after ``timeout_s`` kills the whole group."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env, cwd=cwd, start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        timed_out = True
    return Finished(process.returncode, out, err, timed_out)


class ServiceProcess:
    """One started service: ``address`` is what it printed after ``ready_prefix``."""

    def __init__(self, name: str, command: list[str], log: Path, ready_prefix: str,
                 timeout_s: float = 180.0, cwd: Path | None = None):
        self.name, self.log = name, log
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as out:
            self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=out,
                                            stderr=subprocess.STDOUT, cwd=cwd)
        try:
            self.address = self._wait(ready_prefix, timeout_s)
        except BaseException:
            self.stop()
            raise

    def _wait(self, prefix: str, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            for line in self.log.read_text(errors="replace").splitlines():
                if line.startswith(prefix):
                    return line[len(prefix):].strip()
            code = self.process.poll()
            if code is not None or time.monotonic() > deadline:
                why = (f"exited with {code}" if code is not None
                       else f"not ready in {timeout_s:.0f} s")
                raise ServiceError(f"{self.name} {why}; the end of its log {self.log}:\n"
                                   f"{log_tail(self.log)}")
            time.sleep(0.2)

    def stop(self, timeout_s: float = 60.0) -> None:
        """Closes the service's standard input and waits for it to exit (kills it after
        ``timeout_s``)."""
        if self.process.poll() is None:
            try:
                self.process.stdin.close()
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
