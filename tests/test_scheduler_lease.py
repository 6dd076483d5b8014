"""The scheduler's lease over MemoryFs with a settable clock (and once over the local file system
through HadoopFs): acquiring, expiry takeovers, races between standbys, a paused holder, release,
standby polling, the heartbeat thread and torn records. Nothing here depends on timing: the clock
only moves when a test moves it, and threads meet at barriers or events."""
from __future__ import annotations

import json
import threading
from typing import Any, Callable

import pytest

from accelerator.scheduler.lease import Heartbeat, Lease, LeaseHolder
from indexes.fs import MemoryFs
from tests.fs_doubles import BrokenFs, Clock, RacingFs

SYSTEM = "memory:///sys"
LEASE_DIR = f"{SYSTEM}/_scheduler/lease"
TTL_MS = 30_000
START = 1_795_496_400_000      # 2026-11-24T05:00:00Z


@pytest.fixture
def clock():
    return Clock(now=START)


@pytest.fixture
def fs(clock):
    return MemoryFs(clock)


def lease(fs, clock, host="h1", pid=123) -> Lease:
    return Lease(fs, SYSTEM, ttl_seconds=TTL_MS / 1000, clock=clock, host=host, pid=pid)


def records(fs) -> list[str]:
    return [f.name for f in fs.list(LEASE_DIR)]


def record(fs, epoch: int) -> dict:
    return json.loads(fs.read_text(f"{LEASE_DIR}/{epoch:012d}.json"))


def in_threads(*actions: Callable[[], Any]) -> list[Any]:
    """Runs each action in its own thread; their results (or the exceptions they raised)."""
    results: list[Any] = [None] * len(actions)

    def run(i: int) -> None:
        try:
            results[i] = actions[i]()
        except Exception as exc:  # noqa: BLE001 - collected for the assertions
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(actions))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads)
    return results


class HookFs:
    """A file system running ``hook`` once, just before its first create_exclusive."""

    def __init__(self, fs, hook: Callable[[], None]):
        self._fs, self._hook = fs, hook

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fs, name)

    def create_exclusive(self, path: str, text: str) -> bool:
        hook, self._hook = self._hook, None
        if hook is not None:
            hook()
        return self._fs.create_exclusive(path, text)


class CountingFs:
    """A file system counting its listings (one per lease check), with an event per count."""

    def __init__(self, fs):
        self._fs = fs
        self.lists = 0
        self.changed = threading.Condition()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fs, name)

    def list(self, path: str):
        with self.changed:
            self.lists += 1
            self.changed.notify_all()
        return self._fs.list(path)

    def wait_for(self, lists: int) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: self.lists >= lists, timeout=30)


# ---------------------------------------------------------------------- acquiring and holding

def test_first_acquire_wins_and_others_wait_while_it_renews(fs, clock):
    first, second = lease(fs, clock), lease(fs, clock, host="h2", pid=456)
    assert first.holder() is None and not first.held
    assert first.try_acquire() and first.held and first.epoch == 1
    assert records(fs) == ["000000000001.json"]
    assert record(fs, 1) == {"host": "h1", "pid": 123, "owner": first.owner, "since": START,
                             "heartbeat": START, "ttlMs": TTL_MS}
    assert not second.try_acquire() and not second.held
    for _ in range(10):                      # five minutes of renewals every ttl/3
        clock.now += TTL_MS // 3
        assert first.renew()
        assert not second.try_acquire()
    holder = second.holder()
    assert (holder.host, holder.pid, holder.owner) == ("h1", 123, first.owner)
    assert (holder.since_ms, holder.heartbeat_ms, holder.epoch) == (START, clock.now, 1)
    assert records(fs) == ["000000000001.json"]          # renewed in place
    clock.now += 3_000
    assert holder.describe(clock.now) == \
        "host h1, pid 123, since 2026-11-24T05:00:00Z (last heartbeat 3 s ago)"


def test_acquiring_again_while_holding_renews(fs, clock):
    mine = lease(fs, clock)
    assert mine.try_acquire()
    clock.now += 5_000
    assert mine.try_acquire() and mine.epoch == 1
    assert record(fs, 1)["heartbeat"] == START + 5_000 and record(fs, 1)["since"] == START


def test_describe():
    holder = LeaseHolder("h1", 123, "o", START, START + 60_000, TTL_MS, epoch=3)
    assert holder.describe(START + 60_000) == \
        "host h1, pid 123, since 2026-11-24T05:00:00Z (last heartbeat 0 s ago)"
    assert not holder.expired(START + 60_000 + TTL_MS)
    assert holder.expired(START + 60_000 + TTL_MS + 1)
    assert holder.describe(START + 360_000) == \
        "host h1, pid 123, since 2026-11-24T05:00:00Z (last heartbeat 5 min ago, expired)"
    torn = LeaseHolder("unknown", 0, "", START, START, TTL_MS, epoch=2, readable=False)
    assert torn.describe(START + 1_000) == \
        "an unreadable lease record (epoch 2, written 2026-11-24T05:00:00Z, 1 s ago)"


def test_each_lease_has_its_own_owner_and_defaults_name_this_process(fs):
    import os
    import socket

    a, b = Lease(fs, SYSTEM), Lease(fs, SYSTEM)
    assert a.owner != b.owner
    assert (a.host, a.pid, a.ttl_ms) == (socket.gethostname(), os.getpid(), 30_000)
    assert a.try_acquire() and not b.try_acquire()
    with pytest.raises(ValueError):
        Lease(fs, SYSTEM, ttl_seconds=0)


# ---------------------------------------------------------------------- takeovers

def test_an_expired_holder_is_taken_over_and_loses_the_lease(fs, clock):
    paused, standby = lease(fs, clock), lease(fs, clock, host="h2", pid=456)
    assert paused.try_acquire()
    clock.now += TTL_MS                      # exactly the ttl: not expired yet
    assert not standby.try_acquire()
    clock.now += 1
    assert not paused.held                   # its own clock tells it before any renewal
    assert standby.try_acquire() and standby.epoch == 2
    holder = paused.holder()
    assert (holder.host, holder.owner, holder.since_ms) == ("h2", standby.owner, clock.now)
    assert not paused.renew() and not paused.held and paused.epoch is None   # wakes: lost it
    assert not paused.try_acquire()
    assert standby.renew()


def test_two_standbys_racing_a_takeover_exactly_one_wins(fs, clock):
    assert lease(fs, clock).try_acquire()
    clock.now += TTL_MS + 1
    meet = threading.Barrier(2)    # both reach the creation of epoch 2 before either creates it
    standbys = [lease(RacingFs(fs, meet, "000000000002.json"), clock, host=f"s{i}")
                for i in range(2)]
    results = in_threads(*(s.try_acquire for s in standbys))
    assert sorted(results) == [False, True]
    winner, loser = standbys[results.index(True)], standbys[results.index(False)]
    assert winner.held and not loser.held and winner.epoch == 2
    assert loser.holder().owner == winner.owner
    assert records(fs) == ["000000000001.json", "000000000002.json"]
    assert winner.renew() and not loser.renew()


def test_a_late_holder_racing_a_standby_for_the_next_epoch(fs, clock):
    meet = threading.Barrier(2)
    holder = lease(RacingFs(fs, meet, "000000000002.json"), clock)
    standby = lease(RacingFs(fs, meet, "000000000002.json"), clock, host="h2")
    assert holder.try_acquire()
    clock.now += TTL_MS + 1                 # paused: it renews after the ttl ran out
    results = in_threads(holder.renew, standby.try_acquire)
    assert sorted(results) == [False, True]
    assert holder.held == results[0] and standby.held == results[1]
    assert fs.exists(f"{LEASE_DIR}/000000000002.json")


def test_a_late_holder_nobody_took_over_renews_through_the_next_epoch(fs, clock):
    mine = lease(fs, clock)
    assert mine.try_acquire()
    clock.now += TTL_MS * 4
    assert mine.renew() and mine.held and mine.epoch == 2
    assert record(fs, 2)["since"] == START and record(fs, 2)["heartbeat"] == clock.now
    clock.now += 10_000
    assert mine.renew() and mine.epoch == 2          # on time again: in place


def test_a_holder_whose_record_names_another_owner_lost_it(fs, clock):
    mine = lease(fs, clock)
    assert mine.try_acquire()
    other = dict(record(fs, 1), owner="someone-else")
    fs.write_text(f"{LEASE_DIR}/000000000001.json", json.dumps(other), overwrite=True)
    assert not mine.renew() and not mine.held


def test_takeovers_keep_only_the_current_record_and_its_predecessor(fs, clock):
    for i in range(5):
        assert lease(fs, clock, host=f"h{i}").try_acquire()
        clock.now += TTL_MS + 1
    assert records(fs) == ["000000000004.json", "000000000005.json"]
    assert lease(fs, clock).holder().host == "h4"


def test_a_standby_that_slept_through_later_takeovers_does_not_revive_an_old_epoch(fs, clock):
    assert lease(fs, clock).try_acquire()
    clock.now += TTL_MS + 1

    def others_take_epochs_2_to_4():
        for i in range(3):
            assert lease(fs, clock, host=f"o{i}").try_acquire()
            clock.now += TTL_MS + 1
        clock.now -= TTL_MS + 1              # epoch 4 is fresh
        assert records(fs) == ["000000000003.json", "000000000004.json"]   # epoch 2 is gone

    sleeper = lease(HookFs(fs, others_take_epochs_2_to_4), clock, host="sleeper")
    assert not sleeper.try_acquire() and not sleeper.held   # it created epoch 2, then saw 4
    assert records(fs) == ["000000000003.json", "000000000004.json"]
    assert sleeper.holder().host == "o2"


# ---------------------------------------------------------------------- release and standby

def test_release_lets_a_standby_acquire_at_once(fs, clock):
    mine, standby = lease(fs, clock), lease(fs, clock, host="h2")
    assert mine.try_acquire() and not standby.try_acquire()
    clock.now += 1_000
    mine.release()
    assert not mine.held and mine.holder() is None
    assert record(fs, 1)["released"] is True
    assert standby.try_acquire() and standby.epoch == 2     # no waiting for the ttl
    assert not mine.renew()
    mine.release()                                          # not held: nothing happens
    assert standby.holder().owner == standby.owner


def test_releasing_a_lost_lease_leaves_the_new_record_alone(fs, clock):
    paused, standby = lease(fs, clock), lease(fs, clock, host="h2")
    assert paused.try_acquire()
    clock.now += TTL_MS + 1
    assert standby.try_acquire()
    paused.release()
    assert "released" not in record(fs, 1) and standby.holder().owner == standby.owner


def test_wait_and_acquire_returns_false_when_stopped_and_tells_once(fs, clock):
    holder = lease(fs, clock)
    assert holder.try_acquire()
    counting = CountingFs(fs)
    standby = lease(counting, clock, host="h2")
    stop, told = threading.Event(), []

    def waiting():
        return standby.wait_and_acquire(stop, poll_seconds=0.001, on_wait=told.append)

    def stop_after_polls():
        counting.wait_for(20)             # several polls, each listing the lease records
        stop.set()

    results = in_threads(waiting, stop_after_polls)
    assert results[0] is False and not standby.held
    assert [h.owner for h in told] == [holder.owner]
    assert standby.wait_and_acquire(stop, poll_seconds=0.001) is False      # already stopped


def test_wait_and_acquire_takes_the_lease_when_its_holder_releases(fs, clock):
    holder, standby = lease(fs, clock), lease(fs, clock, host="h2")
    assert holder.try_acquire()
    waiting = threading.Event()
    told = []

    def on_wait(h):
        told.append(h)
        waiting.set()

    def release_when_waiting():
        assert waiting.wait(timeout=30)
        holder.release()

    results = in_threads(
        lambda: standby.wait_and_acquire(threading.Event(), 0.001, on_wait),
        release_when_waiting)
    assert results[0] is True and standby.held and standby.epoch == 2
    assert [h.host for h in told] == ["h1"]


def test_wait_and_acquire_without_a_holder_acquires_at_once(fs, clock):
    told = []
    assert lease(fs, clock).wait_and_acquire(threading.Event(), 0.001, told.append)
    assert told == []


# ---------------------------------------------------------------------- heartbeat

def test_heartbeat_renews_until_stopped(fs, clock):
    mine = lease(fs, clock)
    assert mine.try_acquire()
    clock.now += 5_000
    counting = CountingFs(fs)
    mine.fs = counting
    lost = threading.Event()
    beat = Heartbeat(mine, lost.set, interval_seconds=0.001).start()
    counting.wait_for(10)
    beat.stop()
    assert not lost.is_set() and mine.held
    assert record(fs, 1)["heartbeat"] == START + 5_000 and mine.epoch == 1
    assert Heartbeat(mine, lost.set).interval_seconds == 10.0       # ttl / 3 by default


def test_heartbeat_reports_a_takeover(fs, clock):
    mine, standby = lease(fs, clock), lease(fs, clock, host="h2")
    assert mine.try_acquire()
    clock.now += TTL_MS + 1                  # paused before its heartbeat ran
    assert standby.try_acquire()
    lost = []
    done = threading.Event()

    def on_lost():
        lost.append(1)
        done.set()

    beat = Heartbeat(mine, on_lost, interval_seconds=0.001).start()
    assert done.wait(timeout=30)
    beat.stop()
    assert lost == [1] and not mine.held


def test_heartbeat_reports_failures_lasting_past_the_ttl(fs, clock):
    broken = BrokenFs(fs, "list", marker="_scheduler/lease")
    mine = lease(broken, clock)
    assert mine.try_acquire()
    failing = CountingFs(broken)
    mine.fs = failing
    broken.broken = True
    lost = threading.Event()
    beat = Heartbeat(mine, lost.set, interval_seconds=0.001).start()
    failing.wait_for(10)                     # failing renewals within the ttl: still held
    assert not lost.is_set() and mine.held
    clock.now += TTL_MS + 1
    assert lost.wait(timeout=30)
    beat.stop()
    assert not mine.held


# ---------------------------------------------------------------------- torn records

def test_a_torn_record_counts_as_held_until_the_ttl_after_it(fs, clock):
    assert lease(fs, clock).try_acquire()
    clock.now += 7_000
    fs.write_text(f"{LEASE_DIR}/000000000001.json", '{"host": "h', overwrite=True)  # mtime: now
    torn_at = clock.now
    standby = lease(fs, clock, host="h2")
    holder = standby.holder()
    assert not holder.readable and holder.heartbeat_ms == torn_at and holder.epoch == 1
    clock.now = torn_at + TTL_MS
    assert not standby.try_acquire()
    clock.now += 1
    assert standby.try_acquire() and standby.epoch == 2


def test_a_holder_renews_over_its_own_torn_record(fs, clock):
    mine = lease(fs, clock)
    assert mine.try_acquire()
    fs.write_text(f"{LEASE_DIR}/000000000001.json", "", overwrite=True)  # a failed overwrite
    clock.now += 1_000
    assert mine.renew() and record(fs, 1)["owner"] == mine.owner


# ---------------------------------------------------------------------- a real file system

def test_over_the_local_file_system(spark, tmp_path):
    from indexes.fs import HadoopFs

    real, clock = HadoopFs(spark), Clock(now=START)
    system = str(tmp_path / "system")
    first = Lease(real, system, ttl_seconds=30, clock=clock, host="h1", pid=1)
    second = Lease(real, system, ttl_seconds=30, clock=clock, host="h2", pid=2)
    assert first.try_acquire() and not second.try_acquire()
    clock.now += 10_000
    assert first.renew() and second.holder().heartbeat_ms == clock.now
    clock.now += TTL_MS + 1
    assert second.try_acquire() and not first.renew()
    second.release()
    assert first.holder() is None and first.try_acquire() and first.epoch == 3
    names = sorted(p.name for p in (tmp_path / "system" / "_scheduler" / "lease").iterdir()
                   if not p.name.startswith("."))
    assert names == ["000000000002.json", "000000000003.json"]
