"""Query history on Spark: the recorder of a session over Hadoop, the history as a DataFrame.

The history itself (the record model, the plan analysis, the buffered recorder and the reader)
is pure Python in :mod:`rules.history`; this module only binds it to a SparkSession.
"""
from __future__ import annotations

import logging
import threading
from typing import Any

from accelerator.runtime import application, jvm
from accelerator.runtime.settings import Settings
from indexes.fs import HadoopFs
from rules.history.executions import ExecutionFeed
from rules.history.recorder import HistoryRecorder
from rules.history.records import history_path, spark_ddl

log = logging.getLogger("accelerator.query.history")

__all__ = ["listen", "new_recorder", "read_history", "wait_for_executions"]

_lock = threading.Lock()


def _feed(spark: Any) -> ExecutionFeed:
    app = application.of(spark)
    with _lock:
        if app.feed is None:
            app.feed = ExecutionFeed(jvm.helpers(spark).metrics.drain)
        return app.feed


def listen(spark: Any) -> None:
    """Registers the listener that reports what executed queries cost with ``spark`` (once
    per session state)."""
    manager = spark._jsparkSession.listenerManager()
    key = int(spark.sparkContext._jvm.java.lang.System.identityHashCode(manager))
    listening = application.of(spark).listening
    with _lock:
        if key not in listening:
            manager.register(jvm.helpers(spark).metrics)
            listening.add(key)


def wait_for_executions(spark: Any, timeout_s: float = 5.0) -> None:
    """Waits (at most ``timeout_s``) until Spark delivered the events of the queries that
    already finished, so their costs reach the history's next write."""
    try:
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(int(timeout_s * 1000))
    except Exception:  # noqa: BLE001 - a late cost is recorded with the next write
        log.debug("listener events still pending", exc_info=True)


def new_recorder(spark: Any, system_path: str, fs: HadoopFs | None = None) -> HistoryRecorder:
    """A recorder of the query history under ``system_path``, written through Hadoop (``fs``,
    default a new :class:`HadoopFs` of ``spark``) at least every
    ``spark.accelerator.history.flushIntervalSeconds`` (as ``spark`` sets it now), with the
    costs of the queries' executions."""
    interval = Settings.of_session(spark).history_flush_interval_seconds
    return HistoryRecorder(fs or HadoopFs(spark), system_path, flush_interval_s=interval,
                           feed=_feed(spark))


def read_history(spark: Any, system_path: str) -> Any:
    """All recorded queries as a DataFrame: the columns of
    :data:`rules.history.records.HISTORY_SCHEMA`, with ``timestamp`` as a TIMESTAMP (stored as
    epoch milliseconds), plus ``date`` (DATE, the UTC day of the record). Empty, with that
    schema, when nothing was written. Unreadable files (e.g. left by a crashed writer) are
    skipped."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    schema = spark_ddl()
    path = history_path(system_path)
    stored = None
    if HadoopFs(spark).exists(path):
        try:
            stored = spark.read.schema(schema).option("ignoreCorruptFiles", "true").parquet(path)
        except AnalysisException as exc:  # e.g. the directory vanished meanwhile
            log.debug("no readable history under %s: %s", path, exc)
    if stored is None:
        stored = spark.createDataFrame([], schema)
    return stored.withColumn("timestamp", F.timestamp_millis("timestamp"))
