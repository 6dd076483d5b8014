"""``accelerator config validate FILE`` in process, without Spark: each job with its next three
run times in its time zone (exit 0), or every problem as file:line:column (exit 1)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

import accelerator.commands.cli as cli
from accelerator.commands.cli import main

EXAMPLE = Path(__file__).resolve().parent.parent / "configs" / "accelerator.yaml"


@pytest.fixture(autouse=True)
def no_spark(monkeypatch):
    """Validating a configuration never asks for a Spark session."""
    def refuse(*args, **kwargs):
        raise AssertionError("config validate asked for a Spark session")
    monkeypatch.setattr(cli, "spark_session", refuse)


def validate(capsys, path) -> tuple[int, str, str]:
    code = main(["config", "validate", str(path)])
    out, err = capsys.readouterr()
    return code, out, err


def next_runs(out: str, name: str) -> list[datetime]:
    """The run times printed under the job ``name``."""
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if f": {name}: " in line)
    label, _, times = lines[at + 1].partition("next runs: ")
    assert label == "    "
    return [datetime.fromisoformat(t) for t in times.split(", ")]


def test_the_example_prints_every_job_with_its_next_three_runs(capsys):
    before = datetime.now(timezone.utc)
    code, out, err = validate(capsys, EXAMPLE)
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == (f"{EXAMPLE}: 6 jobs on system path /lake/_accelerator; job "
                                   f"store {EXAMPLE.parent / 'accelerator.jobs.sqlite'}; 2 rules")
    assert f"{EXAMPLE}:16: /lake/archive/*: never index or cache" in out
    for name in ("morning-report", "advise", "refresh", "optimize", "evict", "vacuum"):
        runs = next_runs(out, name)
        assert len(runs) == 3 and runs == sorted(runs) and runs[0] >= before - timedelta(
            seconds=1)
    report = next_runs(out, "morning-report")    # 30 6 * * 1-5 in Europe/Paris
    for run in report:
        assert (run.hour, run.minute, run.weekday() < 5) == (6, 30, True)
        assert run.utcoffset() == run.astimezone(ZoneInfo("Europe/Paris")).utcoffset()
    vacuum = next_runs(out, "vacuum")            # 0 4 * * 0: Sundays at 04:00 UTC
    assert [(r.weekday(), r.hour, r.utcoffset()) for r in vacuum] == [(6, 4, timedelta(0))] * 3
    assert [b - a for a, b in zip(vacuum, vacuum[1:])] == [timedelta(days=7)] * 2
    evict = next_runs(out, "evict")              # every five minutes
    assert [b - a for a, b in zip(evict, evict[1:])] == [timedelta(minutes=5)] * 2


def test_times_are_shown_in_each_jobs_time_zone(tmp_path, capsys):
    path = tmp_path / "acc.yaml"
    path.write_text("version: 1\nsystemPath: /s\njobs:\n"
                    "  - {name: noon, kind: evict, cron: '0 12 * * *', timezone: Asia/Tokyo}\n"
                    "  - {name: often, kind: vacuum, interval: PT20M, timezone: America/Bogota}\n")
    code, out, err = validate(capsys, path)
    assert (code, err) == (0, "")
    noon = next_runs(out, "noon")
    assert [(r.hour, r.minute, r.utcoffset()) for r in noon] == [(12, 0, timedelta(hours=9))] * 3
    assert [b - a for a, b in zip(noon, noon[1:])] == [timedelta(days=1)] * 2
    assert noon[0] - datetime.now(timezone.utc) <= timedelta(days=1)
    often = next_runs(out, "often")
    assert {r.utcoffset() for r in often} == {timedelta(hours=-5)}   # Bogota has no DST
    assert [b - a for a, b in zip(often, often[1:])] == [timedelta(minutes=20)] * 2
    assert f"{path}:4: noon: evict; cron '0 12 * * *' in Asia/Tokyo, misfire grace PT1H" in out
    assert f"{path}:5: often: vacuum; every PT20M in America/Bogota, misfire grace PT1H" in out


def test_every_problem_goes_to_stderr_with_exit_code_1(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("version: 1\nsystemPath: /s\njobs:\n"
                    "  - {name: a, kind: evict, cron: '30 6 * * 1-8'}\n"
                    "  - {name: a, kind: evict, interval: PT5M, timezone: Mars/Olympus}\n"
                    "rules: [{source: /x, kind: cach, columns: [c]}]\n")
    code, out, err = validate(capsys, path)
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        f"{path}:4:34: cron: invalid cron expression '30 6 * * 1-8': day of week 8 is out of "
        "range 0-7",
        f"{path}:5:12: the job name 'a' is already used by the job at line 4",
        f"{path}:5:54: timezone: unknown time zone 'Mars/Olympus': expected an IANA name such "
        "as Europe/Paris or UTC",
        f"{path}:6:28: unknown kind 'cach': did you mean 'cache'? expected one of covering, "
        "minmax, bloom, valuelist, text, cache",
    ]


def test_a_missing_file_and_a_missing_argument(tmp_path, capsys):
    code, out, err = validate(capsys, tmp_path / "none.yaml")
    assert (code, out) == (1, "")
    assert err.startswith(f"{tmp_path / 'none.yaml'}:1:1: cannot read the configuration file: ")
    with pytest.raises(SystemExit) as usage:
        main(["config", "validate"])
    assert usage.value.code == 2
    assert "the following arguments are required: file" in capsys.readouterr().err
