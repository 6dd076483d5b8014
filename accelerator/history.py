"""Query history on Spark: the recorder of a session over Hadoop, the history as a DataFrame.

The history itself (the record model, the plan analysis, the buffered recorder and the reader)
is pure Python in :mod:`rules`; this module only binds it to a SparkSession.
"""
from __future__ import annotations

import logging
from typing import Any

from accelerator.settings import Settings
from indexes.fs import HadoopFs
from rules.history import history_path, spark_ddl
from rules.recorder import HistoryRecorder

log = logging.getLogger("accelerator.history")

__all__ = ["new_recorder", "read_history"]


def new_recorder(spark: Any, system_path: str, fs: HadoopFs | None = None) -> HistoryRecorder:
    """A recorder of the query history under ``system_path``, written through Hadoop (``fs``,
    default a new :class:`HadoopFs` of ``spark``) at least every
    ``spark.accelerator.history.flushIntervalSeconds`` (as ``spark`` sets it now)."""
    interval = Settings.of_session(spark).history_flush_interval_seconds
    return HistoryRecorder(fs or HadoopFs(spark), system_path, flush_interval_s=interval)


def read_history(spark: Any, system_path: str) -> Any:
    """All recorded queries as a DataFrame: the columns of :data:`rules.history.HISTORY_SCHEMA`,
    with ``timestamp`` as a TIMESTAMP (stored as epoch milliseconds), plus ``date`` (DATE, the
    UTC day of the record). Empty, with that schema, when nothing was written. Unreadable files
    (e.g. left by a crashed writer) are skipped."""
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
