"""Making the accelerator's pure-Python modules importable by Spark's Python workers.

Index builds run Python code on executors (``mapInArrow``), which must import ``indexes``. On a
cluster the package may not be installed there, so it is shipped with ``addPyFile`` once per
SparkContext, as a zip keyed by its content.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import zipfile
from pathlib import Path
from typing import Any

import indexes

_lock = threading.Lock()
_shipped: set[int] = set()


def _package_zip() -> str:
    root = Path(indexes.__file__).resolve().parent
    files = sorted(p for p in root.rglob("*.py"))
    digest = hashlib.sha256()
    for p in files:
        digest.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes())
    target = Path(tempfile.gettempdir()) / f"accelerator-indexes-{digest.hexdigest()[:16]}.zip"
    if not target.exists():
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        with zipfile.ZipFile(tmp, "w") as z:
            for p in files:
                z.write(p, str(Path("indexes") / p.relative_to(root)))
        os.replace(tmp, target)
    return str(target)


def ship(spark: Any) -> None:
    """Adds the ``indexes`` package to the Python path of ``spark``'s executors (once)."""
    sc = spark.sparkContext
    key = id(sc._jsc)
    with _lock:
        if key in _shipped:
            return
        sc.addPyFile(_package_zip())
        _shipped.add(key)
