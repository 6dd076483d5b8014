"""Test doubles over the file-system protocol (indexes.fs.FileSystem): a settable clock for
MemoryFs, a file system that makes two racing lifecycles meet at one log entry, and one whose
chosen methods fail. They wrap any FileSystem, so the same test runs over MemoryFs and HadoopFs."""
from __future__ import annotations

import threading
from typing import Any, Callable

from indexes.fs import FileSystem
from indexes.lifecycle import IndexLifecycle


class Clock:
    """A settable clock in epoch milliseconds."""

    def __init__(self, now: int = 1_000):
        self.now = now

    def __call__(self) -> int:
        return self.now


class RacingFs:
    """A file system that makes its first write of one log entry wait for the other racer."""

    def __init__(self, fs: FileSystem, barrier: threading.Barrier, entry_file: str):
        self._fs, self._barrier, self._entry_file = fs, barrier, entry_file
        self._waited = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fs, name)

    def create_exclusive(self, path: str, text: str) -> bool:
        if path.endswith(self._entry_file) and not self._waited:
            self._waited = True
            self._barrier.wait(timeout=30)
        return self._fs.create_exclusive(path, text)


def race(fs: FileSystem, system_path: str, entry_file: str,
         action: Callable[[IndexLifecycle, int], Any]) -> list[Any]:
    """Runs ``action(lifecycle, i)`` in two threads with separate lifecycles over ``fs``, both
    writing ``entry_file`` at the same time; their results (or the exceptions they raised)."""
    barrier = threading.Barrier(2)
    results: list[Any] = [None, None]

    def run(i: int) -> None:
        try:
            results[i] = action(IndexLifecycle(RacingFs(fs, barrier, entry_file), system_path), i)
        except Exception as exc:  # noqa: BLE001 - collected for the assertions
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results


class BrokenFs:
    """A file system whose methods named in ``failing`` raise OSError, once ``broken`` is set, on
    paths containing ``marker``."""

    def __init__(self, fs: FileSystem, *failing: str, marker: str = ""):
        self._fs, self._failing, self._marker = fs, failing, marker
        self.broken = False

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._fs, name)
        if name not in self._failing:
            return method

        def fail(*args: Any, **kwargs: Any) -> Any:
            if self.broken and self._marker in args[0]:
                raise OSError(f"{name} failed on {args[0]}")
            return method(*args, **kwargs)

        return fail
