"""The driver's py4j connections answer without Nagle's wait once the accelerator's JVM helpers
are loaded: the connections open then, and those of Python threads started later."""
from __future__ import annotations

import threading

from accelerator.runtime import jvm


def _no_delay_flags(spark) -> list[bool]:
    """TCP_NODELAY of each open py4j connection of the driver (read through Java reflection)."""
    server = spark.sparkContext._gateway.java_gateway_server
    field = spark.sparkContext._jvm.java.lang.Class.forName("py4j.GatewayServer") \
        .getDeclaredField("connections")
    field.setAccessible(True)
    return [bool(c.getSocket().getTcpNoDelay()) for c in list(field.get(server).toArray())
            if c.getSocket() is not None and not c.getSocket().isClosed()]


def test_py4j_connections_answer_without_nagles_wait(spark):
    jvm.helpers(spark)
    seen: list[list[bool]] = []
    worker = threading.Thread(target=lambda: seen.append(_no_delay_flags(spark)))
    worker.start()      # a new Python thread opens a connection of its own
    worker.join()
    assert len(seen[0]) >= 2
    assert all(seen[0])
    assert all(_no_delay_flags(spark))
