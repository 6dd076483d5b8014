"""The scheduler's lease: at most one scheduler service runs per system path.

Pure Python over :class:`indexes.fs.FileSystem` (no Spark): it works over ``MemoryFs`` in tests
and ``HadoopFs`` in production, object stores included. Mutual exclusion rests on
``create_exclusive`` alone (of two racing creators of a file exactly one wins); nothing relies on
an atomic rename.

Protocol
--------
The lease lives under ``<system path>/_scheduler/lease/`` as epoch-numbered records
``<epoch:012d>.json``; the record of the highest epoch is the current one. A record is JSON::

    {"host": "h1", "pid": 123, "owner": "<random id>", "since": <epoch ms>,
     "heartbeat": <epoch ms>, "ttlMs": 30000}

with ``"released": true`` added when its holder gave the lease up.

* **Acquire.** A candidate reads the clock, then the current record. With no record it creates
  epoch 1, and when the current record of epoch N is released or expired (``heartbeat + ttlMs``
  before the clock it read) it creates epoch N+1, both with ``create_exclusive``: of two standbys
  racing for a takeover exactly one wins. The winner then lists the epochs again and gives up if
  a higher one exists (a candidate that slept between reading epoch N and creating N+1 while
  others took N+1 and N+2 could otherwise revive a deleted N+1), and deletes the epochs older
  than the one it took over from (never the current one or its predecessor, which a racer may
  still be reading).
* **Renew** (the heartbeat, every ttl/3 by default). The holder checks that no higher epoch exists
  and that its own record still names it, else it has lost the lease. While more than a quarter of
  the ttl remains before its record would expire it overwrites its own record with a new
  heartbeat (only the holder ever writes its epoch's record) and checks again that no higher
  epoch appeared. A holder that renews later than that (it was paused, or its storage was slow)
  renews by taking the next epoch with ``create_exclusive`` instead, racing any standby that
  found its record expired: exactly one of them wins.
* **Release.** The holder rewrites its record with ``"released": true``; a standby takes the next
  epoch at once, without waiting for the ttl.
* **Torn records.** A record that cannot be parsed (an overwrite caught half-way) counts as held
  until the reader's ttl after the file's modification time, then as expired.

Guarantee: given ``create_exclusive``, at most one service holds the lease at a time, provided the
hosts' clock skew plus one record write takes less than a quarter of the ttl. A candidate only
takes over a record whose heartbeat is older than the ttl, while a holder only overwrites its
record in place while three quarters of the ttl remain, and otherwise competes for the next epoch
through ``create_exclusive``. A holder paused past the ttl (a long GC, a suspended VM) stops
counting itself as holder by its own clock (:attr:`Lease.held`) and finds on its next
:meth:`Lease.renew` that it lost the lease, so it must stop running jobs; :class:`Heartbeat`
renews in the background and reports the loss.
"""
from __future__ import annotations

import json
import logging
import os
import re
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable

from indexes.fs import FileSystem

log = logging.getLogger("accelerator.scheduler.lease")

#: where the lease records live, under the system path
LEASE_DIR = "_scheduler/lease"
#: the fraction of the ttl that must remain for a holder to renew its record in place
IN_PLACE_MARGIN = 0.25
_RECORD = re.compile(r"^(\d{12})\.json$")
_READ_ATTEMPTS = 5


def _iso(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _age(now_ms: int, then_ms: int) -> str:
    seconds = round((now_ms - then_ms) / 1000)
    if seconds < 0:
        return f"{-seconds} s ahead of this host's clock"
    if seconds < 120:
        return f"{seconds} s ago"
    if seconds < 7200:
        return f"{seconds // 60} min ago"
    return f"{seconds // 3600} h ago"


@dataclass(frozen=True)
class LeaseHolder:
    """The holder of the lease as its current record names it.

    ``since_ms`` is when it took the lease and ``heartbeat_ms`` its last renewal (epoch ms, by its
    own clock); ``epoch`` numbers the record. An unparseable (torn) record has ``readable`` False,
    an empty ``owner`` and the file's modification time as ``since_ms`` and ``heartbeat_ms``.
    """

    host: str
    pid: int
    owner: str
    since_ms: int
    heartbeat_ms: int
    ttl_ms: int
    epoch: int = 0
    readable: bool = True

    def expired(self, now_ms: int) -> bool:
        """Whether the holder missed renewing for longer than its ttl at ``now_ms``."""
        return self.heartbeat_ms + self.ttl_ms < now_ms

    def describe(self, now_ms: int) -> str:
        """One line for people, e.g. ``host h1, pid 123, since 2026-11-24T05:00:00Z (last
        heartbeat 3 s ago)``."""
        expired = ", expired" if self.expired(now_ms) else ""
        if not self.readable:
            return (f"an unreadable lease record (epoch {self.epoch}, written "
                    f"{_iso(self.heartbeat_ms)}, {_age(now_ms, self.heartbeat_ms)}{expired})")
        return (f"host {self.host}, pid {self.pid}, since {_iso(self.since_ms)} "
                f"(last heartbeat {_age(now_ms, self.heartbeat_ms)}{expired})")


@dataclass(frozen=True)
class _Record:
    """One parsed lease record (a torn one too: see :meth:`Lease._parse`)."""

    epoch: int
    holder: LeaseHolder
    released: bool


class Lease:
    """The scheduler's lease on one system path, for one process (see the module docstring).

    ``clock`` returns epoch milliseconds (default: the wall clock); ``host`` and ``pid`` name this
    process in the records (default: ``socket.gethostname()`` and ``os.getpid()``). Each instance
    has its own random owner id, so two instances never mistake each other's records. Not
    thread-safe: one thread acquires, renews (or a :class:`Heartbeat` does) and releases.
    """

    def __init__(self, fs: FileSystem, system_path: str, ttl_seconds: float = 30.0,
                 clock: Callable[[], int] | None = None, host: str | None = None,
                 pid: int | None = None):
        if not ttl_seconds > 0:
            raise ValueError(f"the lease ttl must be positive, not {ttl_seconds}")
        self.fs = fs
        self.path = f"{system_path.rstrip('/')}/{LEASE_DIR}"
        self.ttl_ms = max(1, int(round(ttl_seconds * 1000)))
        self._clock = clock or (lambda: int(time.time() * 1000))
        self.host = host if host is not None else socket.gethostname()
        self.pid = pid if pid is not None else os.getpid()
        self.owner = uuid.uuid4().hex
        self._epoch: int | None = None     # the epoch we hold, None when we do not
        self._since_ms = 0
        self._heartbeat_ms = 0
        self._seen: LeaseHolder | None = None   # the holder met by the last failed try_acquire

    # ------------------------------------------------------------------ public API

    @property
    def ttl_seconds(self) -> float:
        """The ttl of this process's records."""
        return self.ttl_ms / 1000

    @property
    def epoch(self) -> int | None:
        """The epoch this process holds, None when it holds none."""
        return self._epoch

    @property
    def held(self) -> bool:
        """Whether this process holds the lease as far as it knows: it acquired it, neither
        released nor found it lost, and its last renewal is not older than the ttl by its clock
        (past that a standby may take over, so a holder that could not renew stops counting
        itself as holder without waiting for its next :meth:`renew`)."""
        return self._epoch is not None and self._clock() <= self._heartbeat_ms + self.ttl_ms

    def holder(self) -> LeaseHolder | None:
        """The current holder; None when nobody ever took the lease or it was released. An
        expired holder is returned too (check :meth:`LeaseHolder.expired`)."""
        record = self._current()
        return None if record is None or record.released else record.holder

    def try_acquire(self) -> bool:
        """Takes the lease when nobody holds it, it was released or its holder expired. True
        when this process holds it now; when it already did, this renews it (:meth:`renew`)."""
        if self._epoch is not None and self.renew():
            return True
        now = self._clock()     # read before the record: see the module docstring
        record = self._current()
        if record is not None and not record.released and not record.holder.expired(now):
            self._seen = record.holder
            return False
        previous = record.epoch if record is not None else 0
        if self._take(previous + 1, previous, now, since_ms=now):
            return True
        self._seen = self.holder()
        return False

    def renew(self) -> bool:
        """Renews the lease (the heartbeat). False when this process does not hold it or lost it
        (a higher epoch exists or its record names another owner): it must then stop running
        jobs. File-system errors propagate and leave the state as it was."""
        if self._epoch is None:
            return False
        now = self._clock()
        epoch = self._epoch
        epochs = self._epochs()
        if not epochs or max(epochs) != epoch or self._names_another(epoch):
            return self._lost(f"epoch {epoch} was taken over or its record replaced (epochs "
                              f"now up to {max(epochs) if epochs else 'none'})")
        if now + IN_PLACE_MARGIN * self.ttl_ms < self._heartbeat_ms + self.ttl_ms:
            self.fs.write_text(self._file(epoch), self._json(self._since_ms, now, False),
                               overwrite=True)
            epochs = self._epochs()
            if max(epochs, default=0) != epoch:
                return self._lost(f"epoch {max(epochs, default=0)} appeared while renewing "
                                  f"epoch {epoch}")
            self._heartbeat_ms = now
            return True
        # late: a standby may find our record expired, so compete with it for the next epoch
        if self._take(epoch + 1, epoch, now, since_ms=self._since_ms):
            return True
        return self._lost(f"a standby took over epoch {epoch} while its renewal was late")

    def release(self) -> None:
        """Gives the lease up now: its record is marked released, so a standby takes it at once.
        Does nothing when this process does not hold it; stop a :class:`Heartbeat` first."""
        epoch = self._epoch
        if epoch is None:
            return
        self._epoch = None
        self._seen = None
        if max(self._epochs(), default=0) == epoch:
            self.fs.write_text(self._file(epoch), self._json(self._since_ms, self._clock(), True),
                               overwrite=True)

    def wait_and_acquire(self, stop: threading.Event, poll_seconds: float,
                         on_wait: Callable[[LeaseHolder], None] | None = None) -> bool:
        """Standby: tries to acquire every ``poll_seconds`` until it does (True) or ``stop`` is set
        (False). ``on_wait`` is called once, with the holder, the first time it has to wait.
        File-system errors while waiting are logged and the polling goes on."""
        told = False
        while not stop.is_set():
            try:
                if self.try_acquire():
                    return True
            except Exception as exc:  # noqa: BLE001 - a standby outlives storage hiccups
                log.warning("could not check the scheduler lease at %s: %s", self.path, exc)
            else:
                if not told and on_wait is not None and self._seen is not None:
                    told = True
                    on_wait(self._seen)
            if stop.wait(poll_seconds):
                break
        return False

    # ------------------------------------------------------------------ internals

    def _file(self, epoch: int) -> str:
        return f"{self.path}/{epoch:012d}.json"

    def _json(self, since_ms: int, now: int, released: bool) -> str:
        record = {"host": self.host, "pid": self.pid, "owner": self.owner,
                  "since": since_ms, "heartbeat": now, "ttlMs": self.ttl_ms}
        if released:
            record["released"] = True
        return json.dumps(record, sort_keys=True)

    def _listing(self) -> dict[int, int]:
        """Epoch -> modification time of every record (other files are ignored)."""
        out = {}
        for info in self.fs.list(self.path):
            match = _RECORD.match(info.name)
            if match and not info.is_dir:
                out[int(match.group(1))] = info.modification_time
        return out

    def _epochs(self) -> list[int]:
        return sorted(self._listing())

    def _parse(self, epoch: int, text: str, modified_ms: int) -> _Record:
        """The record of ``epoch``; a torn one counts as held until our ttl after its
        modification time ``modified_ms``."""
        try:
            data = json.loads(text)
            holder = LeaseHolder(host=str(data["host"]), pid=int(data["pid"]),
                                 owner=str(data["owner"]), since_ms=int(data["since"]),
                                 heartbeat_ms=int(data["heartbeat"]), ttl_ms=int(data["ttlMs"]),
                                 epoch=epoch)
            return _Record(epoch, holder, data.get("released") is True)
        except (ValueError, TypeError, KeyError, AttributeError):
            torn = LeaseHolder(host="unknown", pid=0, owner="", since_ms=modified_ms,
                               heartbeat_ms=modified_ms, ttl_ms=self.ttl_ms, epoch=epoch,
                               readable=False)
            return _Record(epoch, torn, False)

    def _read(self, epoch: int, modified_ms: int) -> _Record | None:
        """The record of ``epoch``; None when its file is gone."""
        path = self._file(epoch)
        try:
            text = self.fs.read_text(path)
        except Exception:
            if not self.fs.exists(path):
                return None
            raise
        return self._parse(epoch, text, modified_ms)

    def _current(self) -> _Record | None:
        """The record of the highest epoch, None when there is none. Retries when that record
        vanishes while being read (two takeovers happened meanwhile)."""
        for _ in range(_READ_ATTEMPTS):
            listing = self._listing()
            if not listing:
                return None
            epoch = max(listing)
            record = self._read(epoch, listing[epoch])
            if record is not None:
                return record
        raise OSError(f"the scheduler lease at {self.path} keeps changing; try again")

    def _names_another(self, epoch: int) -> bool:
        """Whether our record of ``epoch`` is gone or names another owner (a torn one is ours:
        only we write it)."""
        record = self._read(epoch, 0)
        return record is None or (record.holder.readable and record.holder.owner != self.owner)

    def _take(self, epoch: int, previous: int, now: int, since_ms: int) -> bool:
        """Creates the record of ``epoch`` (taking over from ``previous``); whether we hold it."""
        if not self.fs.create_exclusive(self._file(epoch),
                                        self._json(since_ms, now, released=False)):
            return False
        epochs = self._epochs()
        if max(epochs, default=0) > epoch:     # we slept while others took later epochs
            self._delete(epoch)
            return False
        self._epoch, self._since_ms, self._heartbeat_ms, self._seen = epoch, since_ms, now, None
        for old in epochs:
            if old < previous:
                self._delete(old)
        return True

    def _delete(self, epoch: int) -> None:
        try:
            self.fs.delete(self._file(epoch), recursive=False)
        except Exception as exc:  # noqa: BLE001 - a leftover record is harmless
            log.debug("could not delete lease record %s: %s", self._file(epoch), exc)

    def _lost(self, why: str) -> bool:
        log.warning("lost the scheduler lease at %s: %s", self.path, why)
        self._epoch = None
        return False


class Heartbeat:
    """A daemon thread renewing a held lease every ``interval_seconds`` (default: a third of the
    ttl). It calls ``on_lost()`` once, from its thread, when :meth:`Lease.renew` returns False or
    keeps raising until the lease is no longer :attr:`Lease.held` (its last renewal is older than
    the ttl), then ends. Errors are logged; :meth:`stop` ends it without calling ``on_lost``."""

    def __init__(self, lease: Lease, on_lost: Callable[[], None],
                 interval_seconds: float | None = None):
        self.lease = lease
        self._on_lost = on_lost
        self.interval_seconds = (interval_seconds if interval_seconds is not None
                                 else lease.ttl_seconds / 3)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="accelerator-lease-heartbeat",
                                        daemon=True)

    def start(self) -> "Heartbeat":
        """Starts renewing; returns self."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops renewing and waits for the thread to end (the lease stays held: release it
        after)."""
        self._stopping.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        while not self._stopping.wait(self.interval_seconds):
            try:
                renewed = self.lease.renew()
            except Exception as exc:  # noqa: BLE001 - retried until the ttl runs out
                log.warning("could not renew the scheduler lease at %s: %s", self.lease.path, exc)
                if self.lease.held:
                    continue
                renewed = False
            if renewed:
                continue
            if not self._stopping.is_set():
                try:
                    self._on_lost()
                except Exception:  # noqa: BLE001 - nobody else would see it
                    log.exception("the lease-lost callback failed")
            return
