"""Where the command line finds the system path (and the scheduler's configuration file),
without starting Spark and without creating anything.

The system path is the first of: ``--system-path``; ``$ACCELERATOR_SYSTEM_PATH``; the
``systemPath`` of the scheduler's configuration file (``--config``, else ``$ACCELERATOR_CONFIG``,
else ``./accelerator.yaml`` when it exists, as ``accelerator init`` writes it); the Spark
session's ``spark.accelerator.system.path`` when the command runs inside a Python process with
an active session; ``spark.accelerator.system.path`` in ``spark-defaults.conf``
(``$SPARK_CONF_DIR``, else ``$SPARK_HOME/conf``, else pyspark's own ``conf``); else Spark's
default, ``<spark.sql.warehouse.dir>/indexes`` (the warehouse directory from the same
``spark-defaults.conf``, else ``./spark-warehouse``).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from accelerator.runtime.settings import SYSTEM_PATH, WAREHOUSE_DIR
from indexes.errors import AcceleratorError
from indexes.fs.local import LocalFs, is_local

#: the environment variable that gives the commands' --system-path when it is not given
SYSTEM_PATH_VARIABLE = "ACCELERATOR_SYSTEM_PATH"
#: the environment variable naming the scheduler's configuration file when --config is not given
CONFIG_VARIABLE = "ACCELERATOR_CONFIG"
#: the configuration file looked for in the current directory (what ``accelerator init`` writes)
CONFIG_FILE = "accelerator.yaml"


class NoConfigError(AcceleratorError):
    """A command that needs the scheduler's configuration file found none."""


@dataclass(frozen=True)
class SystemPath:
    """The system path a command works on and where it came from (for messages)."""

    path: str
    origin: str

    @property
    def local(self) -> bool:
        """Whether it is on the local file system (read without a JVM)."""
        return is_local(self.path)


def config_file(given: str | None, environ: Mapping[str, str] = os.environ) -> str | None:
    """The scheduler's configuration file: ``given``, else ``$ACCELERATOR_CONFIG``, else
    ``./accelerator.yaml`` when it exists, else None."""
    if given:
        return given
    if environ.get(CONFIG_VARIABLE):
        return environ[CONFIG_VARIABLE]
    return CONFIG_FILE if Path(CONFIG_FILE).is_file() else None


def spark_defaults_file(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The ``spark-defaults.conf`` Spark would read, when it exists."""
    if environ.get("SPARK_CONF_DIR"):
        conf = Path(environ["SPARK_CONF_DIR"])
    elif environ.get("SPARK_HOME"):
        conf = Path(environ["SPARK_HOME"]) / "conf"
    else:
        import pyspark
        conf = Path(pyspark.__file__).parent / "conf"
    found = conf / "spark-defaults.conf"
    return found if found.is_file() else None


_SEPARATOR = re.compile(r"\s*[=:]\s*|\s+")


def read_properties(path: Path) -> dict[str, str]:
    """The settings of a ``spark-defaults.conf`` (Java properties: ``key value``, ``key=value``
    or ``key: value`` lines, ``#`` and ``!`` comments)."""
    found = {}
    for line in path.read_text(errors="replace").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        parts = _SEPARATOR.split(line, 1)
        found[parts[0]] = parts[1].strip() if len(parts) > 1 else ""
    return found


def resolve(flag: str | None, config: str | None, session: Any = None,
            environ: Mapping[str, str] = os.environ) -> SystemPath:
    """The system path of a command (see the module docstring): ``flag`` is
    ``--system-path``, ``config`` the configuration file (:func:`config_file`), ``session`` an
    active SparkSession (None when there is none). Reads files only: creates nothing.
    ConfigError when the configuration file cannot be used."""
    if flag:
        return SystemPath(flag, "--system-path")
    if environ.get(SYSTEM_PATH_VARIABLE):
        return SystemPath(environ[SYSTEM_PATH_VARIABLE], f"${SYSTEM_PATH_VARIABLE}")
    if config:
        from accelerator.scheduler.config import load_config_file
        found = load_config_file(config).system_path
        if found:
            return SystemPath(found, f"systemPath of {config}")
    if session is not None:
        from accelerator.runtime.settings import Settings
        return SystemPath(Settings.of_session(session).system_path, "the active Spark session")
    defaults = spark_defaults_file(environ)
    settings = read_properties(defaults) if defaults else {}
    if settings.get(SYSTEM_PATH):
        return SystemPath(settings[SYSTEM_PATH], f"{SYSTEM_PATH} in {defaults}")
    warehouse = settings.get(WAREHOUSE_DIR) or "spark-warehouse"
    if is_local(warehouse):
        warehouse = LocalFs().qualify(warehouse)
    return SystemPath(warehouse.rstrip("/") + "/indexes",
                      f"the default, <{WAREHOUSE_DIR}>/indexes")
