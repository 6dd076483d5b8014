"""Executor CPU seconds of the Spark stages a block of work ran: the sum of ``executorCpuTime``
over the stages the application's status store lists with an id above the last one before the
block (waiting for the listener bus to deliver their events first). CPU time is what a job
costs whatever else the machine runs: on a shared machine wall times spread 2× while the CPU
seconds of one job move a few percent. It does not count the driver's own work around the
jobs (planning, commits), nor GC and JIT threads."""
from __future__ import annotations

from typing import Any


class StageCpu:
    """``with StageCpu(spark) as cpu: ...``; then ``cpu.seconds``."""

    def __init__(self, spark: Any):
        self._sc = spark.sparkContext
        self._store = self._sc._jsc.sc().statusStore()
        self._quantiles = self._sc._gateway.new_array(self._sc._jvm.double, 0)
        self._last = -1
        self.seconds = 0.0

    def _stages(self) -> list:
        seq = self._store.stageList(None, False, False, self._quantiles, None)
        return [seq.apply(i) for i in range(seq.size())]

    def _drain(self) -> None:
        self._sc._jsc.sc().listenerBus().waitUntilEmpty()

    def __enter__(self) -> "StageCpu":
        self._drain()
        self._last = max((s.stageId() for s in self._stages()), default=-1)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._drain()
        self.seconds = sum(s.executorCpuTime() for s in self._stages()
                           if s.stageId() > self._last) / 1e9
