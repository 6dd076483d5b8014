"""Ctrl-C during an index build: the session's Spark jobs are cancelled from another thread,
and the build raises KeyboardInterrupt once the running JVM call has returned.

pyspark's own SIGINT handler calls the JVM from inside the handler, while the main thread
waits in a py4j call on the same connection: py4j then logs some hundred lines of tracebacks
("reentrant call", "Error while sending or receiving") before the KeyboardInterrupt. Here the
handler only starts a thread that cancels the jobs (every second until the block ends, so
that jobs started later are cancelled too); the main thread's call returns with the
cancellation, and :func:`cancel_on_interrupt` turns whatever the block raised (or its end)
into one KeyboardInterrupt, which the index lifecycle rolls back and records as
``interrupted``. A second Ctrl-C raises at once, as before.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator

_CANCEL_EVERY_SECONDS = 1.0


@contextmanager
def cancel_on_interrupt(spark: Any) -> Iterator[None]:
    """Within (in the main thread; elsewhere nothing changes): Ctrl-C cancels ``spark``'s
    jobs, and the block then raises KeyboardInterrupt (see the module docstring)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed, done = threading.Event(), threading.Event()

    def cancel_until_done() -> None:   # again every second: jobs that start later too
        while not done.is_set():
            spark.sparkContext.cancelAllJobs()
            done.wait(_CANCEL_EVERY_SECONDS)

    def on_sigint(signum: int, frame: Any) -> None:
        if pressed.is_set():
            raise KeyboardInterrupt()
        pressed.set()
        threading.Thread(target=cancel_until_done, daemon=True,
                         name="accelerator-cancel-on-interrupt").start()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    except Exception:
        if pressed.is_set():
            raise KeyboardInterrupt() from None   # the cancelled jobs' error is not news
        raise
    finally:
        done.set()
        signal.signal(signal.SIGINT, previous)
    if pressed.is_set():
        raise KeyboardInterrupt()
