"""A per-driver cache of the index log entries the rewriter consults on every query.

Reading index logs costs file system calls; queries must not pay them. The entries of a system
path are loaded once by the first query; once older than
``spark.accelerator.index.cache.expirySeconds`` they are reloaded in the background (one reload
at a time per path) while queries keep using the loaded ones, so indexes other processes create or
change are seen within about that delay and no query waits for the reload. Any lifecycle
operation of this process forgets them, so its next query loads them at once. An expiry of 0 or
less reloads on every query, synchronously.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from accelerator.runtime import application

log = logging.getLogger("accelerator.query.catalog")
_lock = threading.Lock()


class IndexCatalog:
    """Latest log entries of every index, per system path, cached with an expiry."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[float, list[Any]]] = {}
        self._reloading: set[str] = set()
        self._generation = 0   # bumped by invalidate: a reload started before it is discarded

    def entries(self, system_path: str, load: Callable[[], list[Any]], expiry_seconds: float) -> list[Any]:
        """The cached entries of ``system_path``: loaded with ``load()`` now when there are
        none (or ``expiry_seconds`` <= 0), reloaded in the background when stale."""
        now = self._clock()
        with self._lock:
            cached = self._entries.get(system_path)
            generation = self._generation
            if cached is not None and expiry_seconds > 0:
                if now - cached[0] >= expiry_seconds and system_path not in self._reloading:
                    self._reloading.add(system_path)
                    threading.Thread(target=self._reload, args=(system_path, load, generation),
                                     daemon=True, name="accelerator-catalog").start()
                return cached[1]
        loaded = load()
        self._store(system_path, now, loaded, generation)
        return loaded

    def _store(self, system_path: str, at: float, loaded: list[Any], generation: int) -> None:
        with self._lock:
            if generation == self._generation:
                self._entries[system_path] = (at, loaded)

    def _reload(self, system_path: str, load: Callable[[], list[Any]], generation: int) -> None:
        started = self._clock()
        try:
            self._store(system_path, started, load(), generation)
        except Exception:  # noqa: BLE001 - queries keep the loaded entries; retried when stale
            log.warning("could not reload the indexes of %s; using the ones loaded before",
                        system_path, exc_info=True)
            with self._lock:
                cached = self._entries.get(system_path)
                if cached is not None and generation == self._generation:
                    self._entries[system_path] = (started, cached[1])
        finally:
            with self._lock:
                self._reloading.discard(system_path)

    def reloading(self) -> bool:
        """Whether a reload in the background is running."""
        with self._lock:
            return bool(self._reloading)

    def invalidate(self, system_path: str | None = None) -> None:
        """Forgets the entries of ``system_path`` (or of every path); a reload under way is
        discarded."""
        with self._lock:
            self._generation += 1
            if system_path is None:
                self._entries.clear()
            else:
                self._entries.pop(system_path, None)



def catalog(spark: Any) -> IndexCatalog:
    """The index catalog of ``spark``'s driver, made on first use."""
    app = application.of(spark)
    with _lock:
        if app.catalog is None:
            app.catalog = IndexCatalog()
        return app.catalog
