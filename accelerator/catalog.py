"""A per-process cache of the index log entries the rewriter consults on every query.

Reading index logs costs file system calls; queries must not pay them each time. Entries are
reloaded after ``spark.accelerator.index.cache.expirySeconds`` and immediately after any lifecycle
operation of this process.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable


class IndexCatalog:
    """Latest log entries of every index, per system path, cached with an expiry."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[float, list[Any]]] = {}

    def entries(self, system_path: str, load: Callable[[], list[Any]], expiry_seconds: float) -> list[Any]:
        """The cached entries of ``system_path``, loaded with ``load()`` when stale."""
        now = time.monotonic()
        with self._lock:
            cached = self._entries.get(system_path)
            if cached is not None and now - cached[0] < expiry_seconds:
                return cached[1]
        loaded = load()
        with self._lock:
            self._entries[system_path] = (now, loaded)
        return loaded

    def invalidate(self, system_path: str | None = None) -> None:
        """Forgets the entries of ``system_path`` (or of every path)."""
        with self._lock:
            if system_path is None:
                self._entries.clear()
            else:
                self._entries.pop(system_path, None)


CATALOG = IndexCatalog()
