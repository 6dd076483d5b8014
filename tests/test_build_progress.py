"""Long builds named and followed (:mod:`accelerator.runtime.build_progress`): an index build's
and a cache warm-up's Spark jobs carry a description naming what they build, a build running
past the quiet time logs its progress at INFO on ``accelerator.build``, a short one logs
nothing, and the thread's own job description comes back afterwards."""
from __future__ import annotations

import logging

import pytest

from accelerator import IndexConfig
from accelerator.runtime import build_progress
from indexes.kind import size_text

LOGGER = "accelerator.build"


@pytest.fixture
def source(spark, tmp_path):
    path = str(tmp_path / "src")
    spark.range(2000, numPartitions=4).selectExpr("id", "id % 10 AS k", "'x' AS v") \
        .write.parquet(path)
    return path


def descriptions(spark) -> list[str]:
    """The descriptions of the jobs Spark's status store holds, oldest first."""
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)
    found = []
    for i in range(jobs.size()):
        d = jobs.apply(i).description()
        if d.isDefined():
            found.append((jobs.apply(i).jobId(), d.get()))
    return [text for _, text in sorted(found)]


@pytest.fixture
def own_description(spark):
    """The test thread's own job description, taken away after the test whatever happens."""
    spark.sparkContext.setJobDescription("my own job")
    yield "my own job"
    spark.sparkContext.setJobDescription(None)


def test_a_long_build_is_named_and_followed_in_the_log(spark, hs, source, caplog, monkeypatch,
                                                        own_description):
    monkeypatch.setattr(build_progress, "QUIET_SECONDS", 0.0)   # every build counts as long
    monkeypatch.setattr(build_progress, "EVERY_SECONDS", 0.05)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        hs.createIndex(spark.read.parquet(source), IndexConfig("ix", ["k"], ["v"]))
    what = "create of CoveringIndex 'ix' over 4 source files ("
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert lines and all(line.startswith(what) for line in lines), lines
    assert any("s so far" in line for line in lines), lines
    assert lines[-1].split(": ")[-1].startswith("finished after"), lines
    assert any(d.startswith(f"accelerator: {what}") for d in descriptions(spark))
    # the thread's description is its own again
    assert spark.sparkContext.getLocalProperty("spark.job.description") == own_description


def test_a_short_build_logs_nothing_but_still_names_its_jobs(spark, hs, source, caplog):
    with caplog.at_level(logging.INFO, logger=LOGGER):
        hs.createIndex(spark.read.parquet(source), IndexConfig("ix", ["k"], ["v"]))
        hs.cache(spark.read.parquet(source).select("id", "v"))
    assert not [r for r in caplog.records if r.name == LOGGER]
    names = descriptions(spark)
    assert any(d.startswith("accelerator: create of CoveringIndex 'ix'") for d in names)
    assert any(d.startswith("accelerator: cache warm-up of 4 files of ") for d in names), names
    assert spark.sparkContext.getLocalProperty("spark.job.description") is None


def test_time_left_and_sizes():
    assert build_progress.time_left(30, 10, 20.0) == 60.0
    assert build_progress.time_left(30, 0, 20.0) is None
    assert [size_text(n) for n in (512, 3 * 2 ** 20 + 2 ** 19, 5 * 2 ** 40)] == \
        ["512 B", "3.5 MB", "5.0 TB"]
