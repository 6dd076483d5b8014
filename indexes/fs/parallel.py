"""Many file-system calls made several at once (each is a few round trips to Hadoop)."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable


#: threads doing file-system round trips at once
IO_THREADS = 8


def in_parallel(fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """``fn`` of each item, in order, several at once: each is a few file-system round trips
    (py4j calls to Hadoop, network calls under them), so thousands are made in parallel."""
    if len(items) < 2 * IO_THREADS:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(IO_THREADS, thread_name_prefix="accelerator-fs-io") as pool:
        return list(pool.map(fn, items))
