"""``python -m tests.crash [--points 200] [--seed S] [--root URI | --hdfs] [--scenario NAME ...]``:
a crash campaign outside the test suite, with many more kill points (every scenario, the CI ones
and the extra refreshes of data-skipping and text indexes), on a local directory, a file-system
root given as a URI or (``--hdfs``) a MiniDFSCluster started for the campaign. Prints each
point's outcome and a summary per scenario; exit 1 when a check failed. A scenario has as many
points as its operation has mutating calls, plus two per Spark write job: a budget above that
runs them all."""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback

from pyspark.sql import SparkSession

from tests.crash.campaign import Campaign
from tests.crash.driver import SESSION_CONF
from tests.crash.scenarios import SCENARIOS
from tests.services.hdfs import start_hdfs


def _session(scratch: str) -> SparkSession:
    """A session like the test suite's (tests/conftest.py)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.master("local[2]").appName("crash-campaign")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", "2g")
               .config("spark.sql.warehouse.dir", os.path.join(scratch, "warehouse")))
    for key, value in SESSION_CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(argv: list[str]) -> int:
    """Runs the campaign the arguments describe (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m tests.crash")
    parser.add_argument("--points", type=int, default=200, help="kill points in all")
    parser.add_argument("--seed", default="22")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--root", help="file-system root (default: a new local directory)")
    where.add_argument("--hdfs", action="store_true",
                       help="on a MiniDFSCluster started for the campaign (tests/services/hdfs.py)")
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS),
                        help="only these scenarios (repeatable; default: all)")
    args = parser.parse_args(argv)
    scratch = tempfile.mkdtemp(prefix="crash-")
    hdfs = start_hdfs(os.path.join(scratch, "hdfs")) if args.hdfs else None
    try:
        return _campaign(args, scratch,
                         f"{hdfs.url}/crash" if hdfs else args.root or os.path.join(scratch, "root"))
    finally:
        if hdfs:
            hdfs.stop()


def _campaign(args: argparse.Namespace, scratch: str, root: str) -> int:
    """The campaign of ``args`` under ``root``; 1 when a check failed."""
    scenarios = [SCENARIOS[n] for n in args.scenario] if args.scenario else list(SCENARIOS.values())
    spark = _session(scratch)
    started = time.monotonic()
    failed: dict[str, list[str]] = {}
    done: dict[str, list[str]] = {}
    with Campaign(spark, root, os.path.join(scratch, "drivers"), scenarios, args.points,
                  args.seed) as campaign:
        for run in campaign.start():
            try:
                cancelled = campaign.check(run)
                outcome = "ok" + (f" (cancelled {', '.join(cancelled)})" if cancelled else "")
            except Exception as exc:   # noqa: BLE001 - every point is reported
                outcome = f"FAILED: {exc}"
                failed.setdefault(run.scenario.name, []).append(run.point.label)
                traceback.print_exc()
            done.setdefault(run.scenario.name, []).append(run.point.label)
            print(f"{run.name}: {outcome} (driver {run.driver.result().seconds:.0f} s)",
                  flush=True)
    print(f"\n{sum(map(len, done.values()))} kill points in {time.monotonic() - started:.0f} s "
          f"under {root} (seed {args.seed})")
    for name, labels in done.items():
        calls, writes = campaign.counts[name]
        print(f"  {name}: {len(labels)} points over {calls} calls and {writes} writes, "
              f"{len(failed.get(name, []))} failed {failed.get(name, '')}")
    spark.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
