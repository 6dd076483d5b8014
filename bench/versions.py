"""``python -m bench versions [--spark 3.5 --spark 4.3]``: the default workloads
(``bench/workloads.py``'s ``WORKLOADS``) on several Spark lines, same data, same machine, one
after the other in one run, and each workload's speed-up compared between them.

Each line runs ``python -m bench run --only <every workload>`` in a virtual environment of its own
(``--envs``/``spark-<line>``, made with ``pip install <checkout>[bench] 'pyspark[sql]==<line>.*'``
when missing) over the shared ``--data-dir``, so both read the same generated files. The report
(JSON, to ``--out`` and stdout) gives per workload the ratio vanilla/accelerated of each line (the
median of its alternating pairs), the relative difference of each line's ratio to the first
line's, whether that is within ``--tolerance`` (0.15), each line's median seconds of vanilla, the
accelerator and the limit (a ratio moves with vanilla's own time, which differs between Spark
versions), and whether every result equalled vanilla's. Exits 1 when a result differed or a line's run failed. Timings are reported, never
asserted.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import venv
from pathlib import Path

log = logging.getLogger("bench.versions")
ROOT = Path(__file__).resolve().parents[1]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--spark", action="append", dest="lines",
                        help="a Spark line to run (repeatable; default 3.5 and 4.3, in that "
                             "order; the first is the reference of the comparison)")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--tolerance", type=float, default=0.15,
                        help="largest relative difference of a ratio to the reference line's")
    parser.add_argument("--envs", default=os.path.expanduser("~/.cache/spark-accelerator/bench-envs"),
                        help="where each line's virtual environment is kept")
    parser.add_argument("--data-dir", default=os.path.expanduser("~/.cache/spark-accelerator/bench-data"))
    parser.add_argument("--work-dir", default="/tmp/accelerator-bench-versions",
                        help="each line's indexes and reports under <work-dir>/<line> (wiped)")
    parser.add_argument("--out", help="write the JSON report here")


def environment(envs: Path, line: str) -> Path:
    """The Python of the line's virtual environment, made and installed when missing."""
    home = envs / f"spark-{line}"
    python = home / "bin" / "python"
    if not python.exists():
        log.info("making the environment of Spark %s in %s", line, home)
        venv.create(home, with_pip=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", f"{ROOT}[bench]",
                        f"pyspark[sql]=={line}.*"], check=True)
    return python


def run_line(python: Path, line: str, args: argparse.Namespace, workloads: list[str]) -> dict | None:
    """The ``bench run`` report of one line, or None when its run failed."""
    work = Path(args.work_dir) / line
    report = work.parent / f"{line}.json"
    work.parent.mkdir(parents=True, exist_ok=True)
    cmd = [str(python), "-m", "bench", "run", "--scale", str(args.scale), "--pairs",
           str(args.pairs), "--data-dir", args.data_dir, "--work-dir", str(work),
           "--out", str(report), *(a for w in workloads for a in ("--only", w))]
    log.info("Spark %s: %s", line, " ".join(cmd))
    done = subprocess.run(cmd, cwd=ROOT)
    if not report.exists():
        log.error("Spark %s: the run failed (exit %s)", line, done.returncode)
        return None
    return json.loads(report.read_text())


def compare(reports: dict[str, dict], tolerance: float) -> dict:
    """Per workload, each line's ratio and its relative difference to the first line's."""
    lines = list(reports)
    reference = lines[0]
    by_name = {line: {w["name"]: w for w in r["workloads"]} for line, r in reports.items()}
    rows = []
    for name, first in by_name[reference].items():
        ratios = {line: by_name[line][name]["ratio_vanilla_over_accelerated"]["median"]
                  for line in lines if name in by_name[line]}
        differences = {line: round(ratios[line] / ratios[reference] - 1, 3)
                       for line in ratios if line != reference}
        medians = {side: {line: _median(by_name[line][name][f"{side}_s"]) for line in ratios}
                   for side in ("vanilla", "accelerated", "limit")}
        rows.append({"name": name, "ratios": {k: round(v, 3) for k, v in ratios.items()},
                     "difference_to_" + reference: differences,
                     **{f"{side}_s": values for side, values in medians.items()},
                     "within_tolerance": all(abs(d) <= tolerance for d in differences.values()),
                     "identical": all(by_name[line][name]["identical"] for line in ratios)})
    return {"lines": {line: reports[line]["spark"] for line in lines}, "tolerance": tolerance,
            "workloads": rows,
            "all_within_tolerance": all(r["within_tolerance"] for r in rows),
            "all_identical": all(r["identical"] for r in rows)}


def _median(timing: dict | None) -> float | None:
    return None if not timing else round(timing["median"], 3)


def run(args: argparse.Namespace) -> int:
    from bench.workloads import WORKLOADS
    lines = args.lines or ["3.5", "4.3"]
    workloads = [w.name for w in WORKLOADS]
    reports = {}
    for line in lines:
        found = run_line(environment(Path(args.envs), line), line, args, workloads)
        if found is not None:
            reports[line] = found
    if len(reports) < len(lines):
        print(json.dumps({"failed": sorted(set(lines) - set(reports))}))
        return 1
    result = compare(reports, args.tolerance)
    text = json.dumps(result, indent=2)
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    return 0 if result["all_identical"] else 1
