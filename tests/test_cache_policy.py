"""The demoter's policy without a JVM: unit cases and a property test over random entry sets."""
from __future__ import annotations

import random

import pytest

from accelerator.cache.model import CacheCapacityError, EntryState, Priority
from accelerator.cache.policy import (
    EvictionReason,
    check_always_fits,
    choose_evictions,
    usage_percent,
)
from indexes.errors import InvalidIndexConfigError
from tests.test_cache_model import entry

EXPIRED, SPACE = EvictionReason.EXPIRED, EvictionReason.SPACE


def chosen(evictions):
    return [(v.entry.key, v.reason) for v in evictions]


def test_below_the_threshold_only_expired_entries_go():
    entries = [entry("old", ttl=10, last_used=0.0), entry("fresh", ttl=10, last_used=95.0),
               entry("pinned", Priority.ALWAYS, ttl=10, last_used=0.0), entry("no-ttl")]
    assert chosen(choose_evictions(entries, 100.0, max_bytes=10_000)) == [("old", EXPIRED)]


def test_above_the_threshold_lowest_priority_then_least_recently_used_go():
    entries = [entry("high", Priority.HIGH, 100, last_used=1.0),
               entry("low-new", Priority.LOW, 100, last_used=9.0),
               entry("low-old", Priority.LOW, 100, last_used=2.0),
               entry("medium", Priority.MEDIUM, 100, last_used=0.0),
               entry("always", Priority.ALWAYS, 100, last_used=0.0)]
    # 500 of 520 bytes = 96% > 90%: evict until below 80% (416 bytes): one LOW entry is enough
    assert chosen(choose_evictions(entries, 10.0, max_bytes=520)) == [("low-old", SPACE)]
    # 500 of 500: 400 is not below 80%, so both LOW entries go
    assert chosen(choose_evictions(entries, 10.0, max_bytes=500)) == [
        ("low-old", SPACE), ("low-new", SPACE)]
    # 500 of 360: below 288 bytes needs MEDIUM too; HIGH stays
    assert chosen(choose_evictions(entries, 10.0, max_bytes=360)) == [
        ("low-old", SPACE), ("low-new", SPACE), ("medium", SPACE)]


def test_expired_entries_go_first_and_count_as_freed():
    entries = [entry("expired", Priority.HIGH, 300, ttl=5, last_used=0.0),
               entry("low", Priority.LOW, 100, last_used=9.0),
               entry("medium", Priority.MEDIUM, 100, last_used=9.0)]
    assert chosen(choose_evictions(entries, 10.0, max_bytes=500)) == [("expired", EXPIRED)]


def test_at_exactly_the_threshold_nothing_goes_for_space():
    entries = [entry(f"e{i}", Priority.LOW, 90) for i in range(10)]
    assert choose_evictions(entries, 0.0, max_bytes=1000) == []
    assert len(choose_evictions(entries, 0.0, max_bytes=999)) == 2   # 900/999 → < 80% needs 2


def test_always_and_evicted_entries_are_never_chosen():
    entries = [entry("always", Priority.ALWAYS, 1000),
               entry("gone", Priority.LOW, 1000, state=EntryState.EVICTED, evicted_at=0.0)]
    assert choose_evictions(entries, 0.0, max_bytes=100) == []
    assert usage_percent(entries, 2000) == 50.0


@pytest.mark.parametrize("max_bytes, high, low", [(0, 90, 80), (100, 80, 80), (100, 90, 95),
                                                  (100, 101, 80), (100, 90, 0)])
def test_bad_thresholds_are_refused(max_bytes, high, low):
    with pytest.raises(InvalidIndexConfigError):
        choose_evictions([], 0.0, max_bytes, high, low)


def test_always_bytes_must_fit_in_the_cache():
    entries = [entry("a", Priority.ALWAYS, 600), entry("b", Priority.HIGH, 900)]
    check_always_fits(entries, 400, max_bytes=1000)
    with pytest.raises(CacheCapacityError) as err:
        check_always_fits(entries, 401, max_bytes=1000)
    assert "401" in str(err.value) and "600" in str(err.value) and "1000" in str(err.value)
    check_always_fits(entries, 1000, max_bytes=1000, replacing=[entries[0]])


# ---------------------------------------------------------------- property test

def random_entries(rng: random.Random) -> list:
    out = []
    for i in range(rng.randint(0, 25)):
        ttl = rng.choice([None, None, rng.randint(1, 100)])
        state = EntryState.EVICTED if rng.random() < 0.1 else EntryState.ACTIVE
        out.append(entry(f"k{i:02d}", rng.choice(list(Priority)[1:]), rng.randint(0, 200),
                         last_used=float(rng.randint(0, 100)), ttl=ttl, state=state,
                         evicted_at=0.0 if state is EntryState.EVICTED else None))
    return out


@pytest.mark.parametrize("seed", range(8))
def test_policy_properties_over_random_entry_sets(seed):
    rng = random.Random(seed)
    for _ in range(100):
        entries = random_entries(rng)
        now = float(rng.randint(0, 200))
        max_bytes = rng.randint(1, 3000)
        high = rng.choice([90.0, 92.0, 75.0, 100.0])
        low = rng.choice([x for x in (80.0, 50.0, high - 1) if x < high])
        evictions = choose_evictions(entries, now, max_bytes, high, low)
        keys = [v.entry.key for v in evictions]
        assert len(keys) == len(set(keys))
        gone = set(keys)
        active = [e for e in entries if e.active]
        for_space = [v.entry for v in evictions if v.reason is SPACE]
        # never ALWAYS, never an EVICTED entry
        assert all(v.entry.priority is not Priority.ALWAYS and v.entry.active for v in evictions)
        # every expired entry, and only those, for EXPIRED
        assert {v.entry.key for v in evictions if v.reason is EXPIRED} == \
            {e.key for e in active if e.expired(now)}
        # expired ones come first
        reasons = [v.reason for v in evictions]
        assert reasons == sorted(reasons, key=lambda r: r is SPACE)
        after_expiry = sum(e.bytes for e in active if not e.expired(now))
        left = [e for e in active if e.key not in gone]
        used = sum(e.bytes for e in left)
        if 100.0 * after_expiry / max_bytes <= high:
            assert for_space == []
        else:
            assert 100.0 * used / max_bytes < low or \
                all(e.priority is Priority.ALWAYS for e in left)
        for victim in for_space:
            for stay in left:
                if stay.priority is Priority.ALWAYS:
                    continue
                # no higher priority goes for space while a lower one stays
                assert victim.priority <= stay.priority
                # within one priority, no more recently used one goes while an older one stays
                if victim.priority == stay.priority:
                    assert victim.last_used <= stay.last_used
        # evicting for space stops as soon as usage is below the cleanup threshold
        if for_space:
            before_last = used + for_space[-1].bytes
            assert 100.0 * before_last / max_bytes >= low
