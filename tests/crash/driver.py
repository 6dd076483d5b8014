"""The process a crash test kills: a PySpark driver (``local[1]``, its own JVM) that runs one
scenario's operation under a :class:`~tests.crash.tracer.Tracer` armed with a kill point.

``python -m tests.crash.driver '<spec JSON>'`` with ``scenario``, ``ctx`` (the scenario's
directories), ``kill`` (a kill point's label, or null to run uninterrupted), ``scratch`` (a
local directory for Spark's own files) and ``inline_files`` (the index log's
``indexes.log_files.INLINE_FILES`` of the process that counted the calls: the files it writes
beside the log are calls too). It must be started as the leader of a new process
group (``start_new_session=True``): the kill takes the whole group, JVM included. When the
operation ends without being killed, it prints one line ``crash-report <JSON>`` with the calls
and writes it counted.
"""
from __future__ import annotations

import json
import os
import sys

from pyspark.sql import SparkSession

#: the settings of the test session (tests/conftest.py) that decide how many files and calls an
#: operation makes, so the driver's operation counts as the test process's counting run
SESSION_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.accelerator.index.numBuckets": "4",
    "spark.sql.maxMetadataStringLength": "1000",
}


def session(ctx: dict, scratch: str) -> SparkSession:
    """A ``local[1]`` session on the scenario's system path, its scratch files under
    ``scratch``."""
    builder = (SparkSession.builder.master("local[1]").appName("crash-driver")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", "1g")
               # a short-lived JVM running tiny jobs: with the quick JIT alone it takes about 40%
               # less CPU time (as in tests/cluster_driver.py)
               .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
               .config("spark.local.dir", scratch)
               .config("spark.sql.warehouse.dir", os.path.join(scratch, "warehouse"))
               .config("spark.accelerator.text.localCacheDir", os.path.join(scratch, "text"))
               .config("spark.accelerator.system.path", ctx["system_path"]))
    for key, value in SESSION_CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(argv: list[str]) -> int:
    """Runs the spec's operation (see the module docstring); 0 when it ended by itself."""
    from accelerator import Hyperspace
    from indexes import log_files
    from tests.crash.points import KillPoint
    from tests.crash.scenarios import SCENARIOS
    from tests.crash.tracer import Tracer

    spec = json.loads(argv[0])
    if os.getpgrp() != os.getpid():
        sys.stderr.write("crash driver: not started in a process group of its own\n")
        return 2
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    log_files.INLINE_FILES = int(spec.get("inline_files", log_files.INLINE_FILES))
    ctx = spec["ctx"]
    spark = session(ctx, spec["scratch"])
    hs = Hyperspace(spark)
    kill = KillPoint.parse(spec["kill"]) if spec.get("kill") else None
    with Tracer(spark, kill) as tracer:
        SCENARIOS[spec["scenario"]].operation(spark, hs, ctx)
    print("crash-report " + json.dumps({"calls": tracer.calls, "writes": tracer.writes}),
          flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
