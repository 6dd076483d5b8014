"""The README's main job: ``accelerator demo`` end to end, then ``accelerator indexes``."""
from __future__ import annotations

import subprocess
import sys


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accelerator.cli", *args],
                          capture_output=True, text=True, timeout=600)


def test_demo_then_list_indexes(tmp_path):
    work = str(tmp_path / "demo")
    demo = run_cli("demo", "--work-dir", work, "--rows", "20000", "--files", "4", "--runs", "1")
    assert demo.returncode == 0, demo.stderr[-3000:]
    out = demo.stdout
    assert "results identical: True" in out
    assert "rows: 0 " not in out
    used = out.split("Indexes used:")[1]
    assert "idx_nested: file:" in used
    with_plan = out.split("Plan with indexes:")[1].split("Plan without indexes:")[0]
    assert "nested__nst__field1" in with_plan and "idx_nested/v__=0" in with_plan

    listing = run_cli("indexes", "--system-path", f"{work}/indexes")
    assert listing.returncode == 0, listing.stderr[-3000:]
    assert "idx_nested" in listing.stdout and "ACTIVE" in listing.stdout
