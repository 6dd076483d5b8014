"""The API's answers (summaries, listings) are local relations equal to what
``createDataFrame`` gives for the same rows: same schema and values, in any session time zone,
with timestamps, arrays, structs, nulls and no rows at all."""
from __future__ import annotations

import os
import time
from datetime import datetime

import pytest

from accelerator.api.frames import local_frame
from accelerator.api.rows import (CACHE_SUMMARY_SCHEMA, ENTRIES_SCHEMA, EVENTS_SCHEMA, INDEX_SCHEMA,
                              RECOMMENDATIONS_SCHEMA)
from tests.helpers import session_conf

pytestmark = pytest.mark.compat   # local_frame's Arrow path differs by pyspark version

CASES = [
    (CACHE_SUMMARY_SCHEMA, [(32, 123_456_789_012, 45_678, 6.5)]),
    (ENTRIES_SCHEMA, [
        ("/lake/a", "/lake/a/f.json.gz", ["ts", "user"], "HIGH", "P7D", 10,
         datetime(2025, 11, 24, 17, 0, 0, 123456), datetime(2026, 3, 29, 3, 0, 0, 500000), 3,
         "ACTIVE"),
        ("/lake/a", "/lake/a/g.json.gz", [], "ALWAYS", None, 0,
         datetime(1970, 1, 1, 1), datetime(2030, 3, 17, 18, 46, 40), 0, "EVICTED")]),
    (ENTRIES_SCHEMA, []),
    (EVENTS_SCHEMA, [
        ("create", "idx", None, datetime(2017, 7, 14, 4, 40), datetime(2020, 10, 25, 2, 30),
         None, (1, [0, 1], 5, 6), (None, None, None, None), "succeeded", None, "é ✓", None)]),
    (INDEX_SCHEMA, [
        ("n", "covering", ["a__b"], [], 8, "ACTIVE", "/x", 3, 4, None, "user", 5, "parquet",
         ["/p", "/q"], 1, None, 2, "src")]),
    (RECOMMENDATIONS_SCHEMA, [
        ("create", "bloom", "/lake/a", ["trace_id"], [], "auto_bloom_a", "HIGH", None,
         "engine", 1.5, float("nan"), 1 << 40, 12, "lookups")]),
]


@pytest.fixture
def local_zone():
    """The driver's local time zone (naive datetimes are local times) set apart from UTC."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "Europe/Berlin"
    time.tzset()
    yield
    if before is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = before
    time.tzset()


@pytest.mark.parametrize("zone", ["UTC", "America/Los_Angeles", "Asia/Kolkata"])
@pytest.mark.parametrize("schema, rows", CASES, ids=lambda c: str(c)[:24])
def test_local_frames_equal_created_frames(spark, local_zone, zone, schema, rows):
    with session_conf(spark, spark__sql__session__timeZone=zone):
        got, want = local_frame(spark, rows, schema), spark.createDataFrame(rows, schema)
        assert got.schema == want.schema
        assert repr(got.collect()) == repr(want.collect())
        shown = lambda df: df._jdf.showString(20, 0, False)  # noqa: E731
        assert shown(got) == shown(want)   # timestamps rendered in the session's zone


def test_answers_are_local_relations(spark, hs):
    plan = hs.cacheStats()._jdf.queryExecution().optimizedPlan()
    assert plan.getClass().getSimpleName() == "LocalRelation"
