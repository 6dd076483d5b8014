"""What this process keeps for each Spark application it drives: one :class:`Application` per
driver JVM (its py4j gateway), made on first use by :func:`of`.

Its fields are the state that must exist once per driver and outlive any one session or facade:
the Java helpers loaded into the JVM, the rewriter the JVM rule calls back, the listener's feed
of executed queries, which session extensions and listener managers hold the accelerator's
objects, and the cached index list. The modules that own each
piece fill it in (each under a lock of its own: the JVM may call back into Python on another
thread while one of them waits for it) and read it through :func:`of`.

Three registries are keyed otherwise on purpose: what the executors were given
(:mod:`accelerator.runtime.workers`, per SparkContext: a context stopped and started anew in the
same JVM needs them again), the cache tiers (:mod:`accelerator.cache.tier`, one per cache path,
shared by every session of the process and flushed when it exits) and the running schedulers
(:mod:`accelerator.scheduler.service`, one per job store, which APScheduler's stored jobs name by
path).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Application:
    """The accelerator's state for one driver JVM (see the module docstring)."""

    #: accelerator.runtime.jvm.JvmHelpers: the Java objects, loaded once
    jvm: Any = None
    #: accelerator.query.rewriter.Rewriter registered with the JVM rule, and the SparkContext
    #: it reads indexes through (a new context gets a new rewriter)
    rewriter: Any = None
    rewriter_context: Any = None
    #: identity hash codes of the session extensions the rule was injected into
    installed: set[int] = field(default_factory=set)
    #: rules.history.executions.ExecutionFeed of the JVM's query-metrics listener
    feed: Any = None
    #: identity hash codes of the listener managers the listener is registered with
    listening: set[int] = field(default_factory=set)
    #: accelerator.query.catalog.IndexCatalog: the latest index logs per system path
    catalog: Any = None


_lock = threading.Lock()
_applications: dict[int, Application] = {}


def of(spark: Any) -> Application:
    """The state of the driver JVM ``spark`` runs on, made on first use."""
    key = id(spark.sparkContext._gateway)
    with _lock:
        found = _applications.get(key)
        if found is None:
            found = _applications[key] = Application()
        return found
