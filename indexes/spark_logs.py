"""pyspark's loggers that repeat a Spark error with its JVM stack trace (pyspark 4.0+ logs
every captured error that has a query context to ``SQLQueryContextLogger`` or
``DataFrameQueryContextLogger``, before raising it; 3.5 has no such loggers). When the
accelerator probes a user's input through Spark and turns the error into its own, that log is
noise: :func:`quiet_query_context` mutes it in the probing thread."""
from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from typing import Iterator

QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


def query_context_loggers() -> list[logging.Logger]:
    """pyspark's query-context loggers (none before pyspark 4.0). They are made by
    ``PySparkLogger.getLogger``: made as plain loggers first, pyspark's calls would fail."""
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:
        return []
    return [PySparkLogger.getLogger(name) for name in QUERY_CONTEXT_LOGGERS]


def silence_query_context_logs() -> None:
    """Mutes the query-context loggers for good (the command line reports errors itself)."""
    for logger in query_context_loggers():
        logger.setLevel(logging.CRITICAL)


class _MutedThreads(logging.Filter):
    """Drops the records of the threads inside :func:`quiet_query_context`."""

    def __init__(self) -> None:
        super().__init__()
        self.depth: dict[int, int] = {}
        self.lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        return record.thread not in self.depth

    def enter(self) -> None:
        with self.lock:
            me = threading.get_ident()
            self.depth[me] = self.depth.get(me, 0) + 1

    def leave(self) -> None:
        with self.lock:
            me = threading.get_ident()
            self.depth[me] -= 1
            if not self.depth[me]:
                del self.depth[me]


_MUTED = _MutedThreads()
_INSTALLED = threading.Lock()


@contextmanager
def quiet_query_context() -> Iterator[None]:
    """Within: the query-context loggers drop what this thread logs (other threads' queries
    still log theirs)."""
    with _INSTALLED:
        for logger in query_context_loggers():
            if _MUTED not in logger.filters:
                logger.addFilter(_MUTED)
    _MUTED.enter()
    try:
        yield
    finally:
        _MUTED.leave()
