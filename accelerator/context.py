"""The composition root: what the accelerator's parts need of one SparkSession, made once.

An :class:`AcceleratorContext` holds the session, its file system, the Spark side of its sources,
the index operations (:class:`indexes.actions.IndexActions` over those sources) and the cache
operations, and answers the session's settings, the index lifecycle, the event log and
the query history of its system path. The facade (:class:`accelerator.api.hyperspace.Hyperspace`)
makes one and hands it to the rule engine's advisor, the scheduler and its job runner (the
command line's scheduler commands make their own); none of them takes the facade or reaches into
another's members. The operations return values; only :mod:`accelerator.api.rows` turns them
into rows. Settings are read at each call, so a ``spark.conf.set`` between two calls counts.
"""
from __future__ import annotations

from typing import Any

from accelerator.operations.cache import CacheOperations
from accelerator.operations.sources import SparkSources
from accelerator.query import session
from accelerator.query.history import read_history, wait_for_executions
from accelerator.runtime import spark_versions
from accelerator.runtime.settings import Settings
from indexes.actions import IndexActions
from indexes.events import EventLog
from indexes.fs import HadoopFs
from indexes.lifecycle import IndexLifecycle


class AcceleratorContext:
    """The accelerator's parts for one SparkSession (see the module docstring)."""

    def __init__(self, spark: Any):
        """The parts for ``spark``; UnsupportedSparkError when its Spark version is not
        supported."""
        spark_versions.check_session(spark)
        self.spark = spark
        self.fs = HadoopFs(spark)
        #: the Spark side of the index operations (describing and reading sources)
        self.sources = SparkSources(spark, self.fs)
        self.indexes = IndexActions(self.sources)
        self.cache = CacheOperations(spark)

    def settings(self) -> Settings:
        """The session's accelerator settings as they are now."""
        return Settings.of_session(self.spark)

    def lifecycle(self) -> IndexLifecycle:
        """The index logs of the session's system path."""
        return self.indexes.lifecycle()

    def events(self) -> EventLog:
        """The event log of the session's system path."""
        return EventLog(self.fs, self.settings().system_path)

    def flush_history(self) -> int:
        """Writes the query history this process buffered for the system path, with the costs
        of the queries that finished; returns how many records were written."""
        return flush_history(self.spark)

    def history(self) -> Any:
        """The query history recorded under the system path, as a DataFrame."""
        return read_history(self.spark, self.settings().system_path)


def flush_history(spark: Any) -> int:
    """Writes the query history this process buffered for ``spark``'s system path now, with
    the costs of the queries that finished; returns how many records were written."""
    system_path = Settings.of_session(spark).system_path
    wait_for_executions(spark)
    return session.rewriter(spark).flush_history(system_path)
