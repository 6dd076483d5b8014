"""Comparing a query's rows with and without the accelerator."""
from __future__ import annotations

from accelerator import Hyperspace


def rows(df):
    """The rows of ``df`` as sorted tuples."""
    return sorted(tuple(r) for r in df.collect())


def vanilla(spark, build):
    """Rows of the query built by ``build()`` with the accelerator disabled (then enabled again)."""
    Hyperspace.disable(spark)
    try:
        return rows(build())
    finally:
        Hyperspace.enable(spark)
