"""The replay benchmark's share of the oracle's saving, split by the engine's first advising round
in each phase, and the most an engine advising at its rounds could reach; the order of its runs.
Without a JVM."""
from __future__ import annotations

import pytest

from bench.replay import RUNS, block_order, share_by_phase


def _query(index: int, phase: int, vanilla: float, engine: float, oracle: float) -> dict:
    return {"index": index, "phase": phase, "vanilla_s": vanilla, "engine_s": engine,
            "oracle_s": oracle}


def test_shares_split_at_each_phases_first_round():
    # two phases of four queries; the engine advises after queries 2 and 6
    rows = [_query(0, 1, 1.0, 1.0, 0.2), _query(1, 1, 1.0, 1.0, 0.2),
            _query(2, 1, 1.0, 0.3, 0.2), _query(3, 1, 1.0, 0.2, 0.2),
            _query(4, 2, 2.0, 2.0, 1.0), _query(5, 2, 2.0, 2.0, 1.0),
            _query(6, 2, 2.0, 1.0, 1.0), _query(7, 2, 2.0, 2.0, 1.0)]
    out = share_by_phase(rows, [2, 6])
    first = out["1"]
    assert first["first_round_after_query"] == 2
    assert first["before_first_round"]["engine_share_of_oracle_saving"] == 0.0
    assert first["after_first_round"]["engine_share_of_oracle_saving"] == pytest.approx(1.5 / 1.6)
    assert out["2"]["after_first_round"]["engine_share_of_oracle_saving"] == pytest.approx(0.5)
    whole = out["all"]
    # the oracle saves 3.2 + 4.0 s, of which 1.6 + 2.0 s after the engine's first rounds
    assert whole["all"]["engine_share_of_oracle_saving"] == pytest.approx(2.5 / 7.2)
    assert whole["reachable_share"] == pytest.approx(3.6 / 7.2)


def test_nothing_reachable_is_reported_when_the_oracle_saves_nothing():
    rows = [_query(0, 1, 1.0, 1.0, 1.0), _query(1, 1, 1.0, 0.9, 1.0)]
    out = share_by_phase(rows, [1])
    assert out["all"]["reachable_share"] is None
    assert out["1"]["all"]["engine_share_of_oracle_saving"] is None


def test_each_run_takes_each_place_in_turn_over_three_blocks():
    orders = [block_order(n) for n in range(6)]
    assert orders[0] == list(RUNS) and orders[3] == list(RUNS)
    for run in RUNS:
        assert sorted(order.index(run) for order in orders[:3]) == [0, 1, 2]
