"""Benchmark data, generated once into a cache directory and reused by later runs."""
from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger("bench.datasets")

DONE = "_BENCH_DONE.json"   # written last: a directory without it is incomplete


def tpch_parts(scale: float) -> int:
    """Files per TPC-H table: 16 at SF1, 32 from SF10, 4 for tiny smoke scales."""
    return 4 if scale < 1 else 16 if scale < 10 else 32


def _tpchgen() -> str:
    found = shutil.which("tpchgen-cli") or str(Path(sys.executable).parent / "tpchgen-cli")
    if not os.path.exists(found):
        raise RuntimeError("tpchgen-cli is not installed: pip install '.[bench]'")
    return found


def tpch(data_dir: str, scale: float, tables: tuple[str, ...] = ("lineitem", "orders")) -> dict[str, str]:
    """Paths of TPC-H tables at ``scale`` as Parquet (``tpchgen-cli parquet``), generated once."""
    out = Path(data_dir) / f"tpch-sf{scale:g}"
    if not (out / DONE).exists():
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        log.info("generating TPC-H SF%g into %s", scale, out)
        subprocess.run([_tpchgen(), "parquet", "-s", f"{scale:g}", f"--parts={tpch_parts(scale)}",
                        f"--tables={','.join(tables)}", f"--output-dir={out}"], check=True)
        (out / DONE).write_text(json.dumps({"scale": scale, "tables": list(tables)}))
    return {t: str(out / t) for t in tables}


def eventlog_rows(scale: float) -> int:
    """Event-log rows: 5 million per unit of scale, at least 20,000."""
    return max(20_000, int(5_000_000 * scale))


def eventlog(spark: Any, data_dir: str, scale: float, seed: int = 7) -> dict[str, Any]:
    """The synthetic event log at ``scale`` (see bench/eventlog.py), generated once; its facts."""
    from bench import eventlog as generator

    out = Path(data_dir) / f"eventlog-sf{scale:g}-seed{seed}"
    done = out / DONE
    if not done.exists():
        shutil.rmtree(out, ignore_errors=True)
        files = 64 if scale >= 1 else 8
        log.info("generating the event log (%d rows, %d files) into %s", eventlog_rows(scale), files, out)
        facts = generator.generate(spark, str(out / "events"), eventlog_rows(scale), files, seed)
        done.write_text(json.dumps(facts, default=str))
    return json.loads(done.read_text())
