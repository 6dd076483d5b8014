"""Turning the plan rewrite on and off for a SparkSession."""
from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any, Iterator

from pyspark.java_gateway import ensure_callback_server_started

from accelerator.query.history import listen
from accelerator.query.rewriter import Rewriter
from accelerator.runtime import application, jvm, spark_versions
from accelerator.runtime.settings import ENABLED

log = logging.getLogger("accelerator.query.session")
SUSPENDED = "spark.accelerator.suspended"   # see AcceleratorRule.SUSPENDED_KEY
CAPTURING = "spark.accelerator.capturing"   # see AcceleratorRule.CAPTURING_KEY
_lock = threading.Lock()


def rewriter(spark: Any) -> Rewriter:
    """The driver's rewriter, created and registered with the JVM rule on first use and again
    when the SparkContext changed (stopped and started anew in this process): a rewriter
    reads indexes through the session it was made with."""
    app = application.of(spark)
    with _lock:
        if app.rewriter is None or app.rewriter_context is not spark.sparkContext:
            ensure_callback_server_started(spark.sparkContext._gateway)
            app.rewriter = Rewriter(spark, lambda: suspended(spark))
            app.rewriter_context = spark.sparkContext
            jvm.helpers(spark).builder.setRewriter(app.rewriter)
        return app.rewriter


def install(spark: Any) -> Rewriter:
    """Injects the optimizer rule into ``spark``'s extensions once; returns the rewriter.

    Sessions made with ``newSession()`` share the extensions, hence the rule. It stays inert
    while ``spark.accelerator.enabled`` is false.
    """
    found = rewriter(spark)
    extensions = spark._jsparkSession.extensions()
    key = int(spark.sparkContext._jvm.java.lang.System.identityHashCode(extensions))
    installed = application.of(spark).installed
    with _lock:
        if key not in installed:
            spark_versions.check_session(spark)
            helpers = jvm.helpers(spark)
            if not helpers.preinstalled:   # else spark.sql.extensions injected it already
                extensions.injectPreCBORule(helpers.builder)
                # the physical operators it plans travel inside tasks: executors need the jar
                spark._jsc.addJar(str(jvm.session_jar(spark)))
            installed.add(key)
    return found


def enable(spark: Any) -> None:
    """Installs the optimizer rule in ``spark`` (once) and turns rewriting on.

    DataFrames built before this call are rewritten when they run.
    """
    install(spark)
    # the planners of the bucket-aware union (hybrid scan under the join rule) and of index
    # scans that report their buckets' sort order
    jvm.helpers(spark).plans.installStrategies(spark._jsparkSession)
    listen(spark)   # what queries cost, for the history
    spark.conf.set(ENABLED, "true")
    log.info("accelerator enabled")


def disable(spark: Any) -> None:
    """Turns rewriting off for ``spark`` (the rule stays installed but inert)."""
    spark.conf.set(ENABLED, "false")


def is_enabled(spark: Any) -> bool:
    """Whether queries of ``spark`` are rewritten."""
    extensions = spark._jsparkSession.extensions()
    key = int(spark.sparkContext._jvm.java.lang.System.identityHashCode(extensions))
    return (key in application.of(spark).installed
            and spark.conf.get(ENABLED, "false").lower() == "true")


@contextlib.contextmanager
def suspended(spark: Any) -> Iterator[None]:
    """No rewriting of the queries this thread runs on ``spark`` while the block runs (index
    builds read the source itself); other threads' queries are still rewritten. A
    thread-local Spark property that the JVM rule checks (PySpark pins each Python thread to
    a JVM thread)."""
    with _local_property(spark, SUSPENDED):
        yield


@contextlib.contextmanager
def _local_property(spark: Any, key: str) -> Iterator[None]:
    """Sets the thread-local Spark property ``key`` to "true" for the block."""
    context = spark.sparkContext
    previous = context.getLocalProperty(key)
    context.setLocalProperty(key, "true")
    try:
        yield
    finally:
        context.setLocalProperty(key, previous)


@contextlib.contextmanager
def capturing(spark: Any) -> Iterator[None]:
    """The JVM rule hands every plan this thread plans on ``spark`` to the rewriter while the
    block runs, deferring none (explain and whyNot read the verdicts of each)."""
    with _local_property(spark, CAPTURING):
        yield


@contextlib.contextmanager
def conf_set(spark: Any, values: dict[str, str]) -> Iterator[None]:
    """Sets session settings for the block, then restores each one as it was (unset where it
    was unset)."""
    previous = {key: spark.conf.get(key, None) for key in values}
    for key, value in values.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
