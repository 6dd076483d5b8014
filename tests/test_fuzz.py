"""The differential fuzzer in CI: random datasets, index sets of every kind and at least 1,000
random queries in about three minutes, each answer compared with vanilla Spark's; fails with
the seed and a minimized reproduction when one differs. ``python -m tests.fuzz`` runs longer."""
from __future__ import annotations

import json
import time

import pytest

from tests.fuzz import runner
from tests.helpers import using_system_path

SEED = 20261124
SECONDS = 170.0
MIN_QUERIES = 1000
MIN_USED_SHARE = 0.25


@pytest.mark.fuzz
def test_random_queries_over_random_indexes_equal_vanilla(spark, tmp_path):
    started = time.monotonic()
    with using_system_path(spark, str(tmp_path / "indexes")):
        summary = runner.run(spark, SEED, SECONDS, queries_per_round=300, batch=40,
                             max_queries=1200, minimize_seconds=60.0)
    report = json.dumps(summary.as_dict(), indent=2, default=str)
    print(report, f"wall time {time.monotonic() - started:.0f} s")
    assert not summary.failures, report
    assert summary.queries >= MIN_QUERIES, report
    assert summary.used >= MIN_USED_SHARE * summary.queries, report
