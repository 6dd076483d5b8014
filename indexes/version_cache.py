"""A bounded, thread-safe cache of values derived from index versions (JVM relations over an
index's data, decoded statistics, text readers), which the rewriter consults on every query.

A value is stored under a key naming the index and what the value is, together with the
*stamp* of the log entry it was derived from. A lookup with another stamp reloads it (a
refreshed or recreated index reuses paths with other files); :meth:`VersionCache.retain` drops
the values of every index version that is no longer current, and the least recently used
value goes when the cache is full.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable

Stamp = tuple   # (index directory, log entry id, entry timestamp)


def stamp_of(entry: Any) -> Stamp:
    """The stamp of an index log entry: its index directory (unique across system paths),
    and what changes with every operation on the index."""
    return (entry.content["path"].rstrip("/").rsplit("/", 1)[0], entry.id, entry.timestamp)


class VersionCache:
    """Values per (index version, key), at most ``capacity`` of them."""

    def __init__(self, capacity: int = 64):
        self._capacity = max(1, capacity)
        self._lock = threading.Lock()
        self._values: OrderedDict[tuple[Hashable, ...], tuple[Stamp, Any]] = OrderedDict()

    def get(self, entry: Any, key: Hashable, load: Callable[[], Any]) -> Any:
        """The value of ``key`` for ``entry``'s version, loaded with ``load()`` when absent or
        derived from another version. Loads run under the cache's lock, so one value is
        never loaded twice at once."""
        stamp = stamp_of(entry)
        full_key = (stamp[0], key)
        with self._lock:
            found = self._values.get(full_key)
            if found is not None and found[0] == stamp:
                self._values.move_to_end(full_key)
                return found[1]
            value = load()
            self._values[full_key] = (stamp, value)
            self._values.move_to_end(full_key)
            while len(self._values) > self._capacity:
                self._values.popitem(last=False)
            return value

    def retain(self, under: str, entries: list[Any]) -> None:
        """Drops the values of the indexes under the directory ``under`` (a system path) that
        were not derived from ``entries`` (the current entries of its ACTIVE indexes): values
        of replaced versions and of indexes no longer in use."""
        current = {stamp_of(e) for e in entries}
        prefix = under.rstrip("/") + "/"
        with self._lock:
            for full_key in [k for k, (stamp, _) in self._values.items()
                             if k[0].startswith(prefix) and stamp not in current]:
                del self._values[full_key]

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)
