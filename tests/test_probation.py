"""Probation without a JVM: an engine action is judged by the medians of its query templates
before and after it, reverted when one got more than 10% slower, and a reverted target cools
down; actions are stored one JSON file each."""
from __future__ import annotations

import pytest

from indexes.fs import MemoryFs
from rules.history.records import QueryRecord
from rules.probation import ActionLog, cooling_down, new_action, verdict

APPLIED = 1_000_000


def runs(template: str, durations: list[int], start: int) -> list[QueryRecord]:
    return [QueryRecord(start + i, f"{template}-{start}-{i}", template=template, duration_ms=d)
            for i, d in enumerate(durations)]


def action(*templates: str):
    return new_action("create", "bloom", "file:/lake/e", ["uid"], "auto_bloom_e_uid", templates,
                      APPLIED)


def test_waits_for_five_runs_on_each_side_after_two_settling_runs():
    records = runs("t", [100] * 5, 0) + runs("t", [300] * 6, APPLIED)
    state, why = verdict(action("t"), records)
    assert state == "wait" and "4 after the first 2" in why
    # planning records without a duration do not count as runs
    untimed = [QueryRecord(APPLIED + 9, "x", template="t")]
    assert verdict(action("t"), records + untimed)[0] == "wait"
    assert verdict(action("t"), records + runs("t", [300], APPLIED + 6))[0] == "revert"


def test_reverts_a_template_more_than_ten_percent_slower():
    records = (runs("fast", [100, 110, 90, 100, 105], 0) + runs("fast", [50] * 7, APPLIED)
               + runs("slow", [100] * 5, 0)
               + runs("slow", [100, 100, 111, 120, 115, 112, 130], APPLIED))
    state, why = verdict(action("fast", "slow"), records)
    assert state == "revert"
    assert "template slow" in why and "median 100 ms before, 115 ms after" in why


def test_keeps_an_action_within_the_tolerance():
    records = runs("t", [100] * 5, 0) + runs("t", [100, 100, 109, 110, 108, 105, 200], APPLIED)
    state, why = verdict(action("t"), records)
    assert state == "keep" and "+9%" in why


def test_the_first_runs_after_an_action_settle_and_are_not_judged():
    """The first lookups over a new index pay for loading it (seen in the replay: 1.09, 0.59,
    0.68 s, then 0.21 s): the first two runs after the action (in time order, whatever the
    records' order) are left out, so the verdict waits for seven."""
    before = runs("t", [200] * 5, 0)
    after = runs("t", [1090, 590, 680, 210, 205, 215, 200], APPLIED)
    assert verdict(action("t"), before + after[:5], settle_runs=0)[0] == "revert"   # 590 ms
    assert verdict(action("t"), before + after[:5])[0] == "wait"
    state, why = verdict(action("t"), before + after[::-1])
    assert state == "keep" and "median 200 ms before, 210 ms after" in why


def test_log_stores_decisions_and_cooldown_covers_reverted_targets():
    fs = MemoryFs()
    log = ActionLog(fs, "memory:///sys")
    kept, reverted = action("a"), action("b")
    log.write(kept)
    log.write(reverted)
    log.decide(kept, "kept", "fine", APPLIED + 10)
    log.decide(reverted, "reverted", "slower", APPLIED + 20)
    read = {a.id: a for a in log.read()}
    assert read[kept.id].state == "kept" and read[reverted.id].reason == "slower"
    assert read[reverted.id].templates == ("b",)
    target = ("/lake/e", "bloom", ("uid",))
    assert cooling_down(read.values(), APPLIED + 1000, cooldown_s=60) == {target}
    assert cooling_down(read.values(), APPLIED + 61_000, cooldown_s=60) == set()
    with pytest.raises(ValueError, match="unknown state"):
        log.decide(kept, "maybe", "", 0)


def test_a_template_with_few_runs_before_can_revert_but_never_keep():
    """The star benchmark records 2 runs of a template, then advises: no more runs before the
    action can come. Judged on those, a slowdown reverts the action (saying on how few runs);
    no slowdown keeps it on probation (waiting, judged again), never kept. One template
    waiting does not stop another's slowdown from reverting."""
    slower = runs("t", [100, 110], 0) + runs("t", [200] * 7, APPLIED)
    state, why = verdict(action("t"), slower)
    assert state == "revert" and "median 105 ms before, 200 ms after (+90%)" in why
    assert "low confidence: 2 runs before, 5 wanted" in why
    faster = runs("t", [100, 110], 0) + runs("t", [50] * 30, APPLIED)
    state, why = verdict(action("t"), faster)
    assert state == "wait" and "2 runs before the action, 5 needed to keep it" in why
    assert verdict(action("t"), runs("t", [100], 0) + runs("t", [900] * 7, APPLIED))[0] == "wait"
    waiting = runs("u", [100] * 5, 0) + runs("u", [100] * 3, APPLIED)
    full = runs("t", [100] * 5, 0) + runs("t", [200] * 7, APPLIED)
    state, why = verdict(action("t", "u"), waiting + full)
    assert state == "revert" and "template t" in why and "confidence" not in why
