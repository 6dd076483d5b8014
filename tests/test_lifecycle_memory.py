"""The in-memory file system (indexes/fs.py MemoryFs), and the index log and every lifecycle
action over it: no JVM, no Spark."""
from __future__ import annotations

import inspect
import re
import threading
from typing import Any

import pytest

from indexes.errors import (
    AcceleratorError,
    ConcurrentModificationError,
    CorruptLogError,
    IndexExistsError,
    IndexNotFoundError,
    IndexOperationError,
    IndexStateError,
    InvalidIndexConfigError,
)
from indexes.fs import FileInfo, FileSystem, HadoopFs, MemoryFs
from indexes.lifecycle import IndexLifecycle
from indexes.log import (
    LATEST_STABLE,
    TRANSIENT_STATES,
    IndexLogEntry,
    IndexLogManager,
    IndexState,
)

CONFIG = {"indexedColumns": ["id"], "includedColumns": ["name"], "numBuckets": 2}
SYSTEM = "memory:///sys"


class Clock:
    """A settable clock in epoch milliseconds."""

    def __init__(self, now: int = 1_000):
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def fs() -> MemoryFs:
    return MemoryFs()


@pytest.fixture
def lifecycle(fs) -> IndexLifecycle:
    return IndexLifecycle(fs, SYSTEM)


def make_build(fs: FileSystem, tag: str = "data", calls: list[str] | None = None):
    """A build that writes one small file into the data path and reports it."""

    def build(data_path: str) -> tuple[dict, dict]:
        if calls is not None:
            calls.append(data_path)
        fs.write_text(f"{data_path}/part-0.txt", tag)
        source = {"format": "parquet", "rootPaths": ["/lake/t"], "files": [["/lake/t/a", 10, 1]]}
        return source, {"numFiles": 1, "sizeInBytes": len(tag)}

    return build


def log_states(lifecycle: IndexLifecycle, name: str) -> list[IndexState]:
    log = lifecycle.log_manager(name)
    return [log.get(i).state for i in log.ids()]


def names(fs: MemoryFs, path: str) -> list[str]:
    return [info.name for info in fs.list(path)]


# ---------------------------------------------------------------------- MemoryFs


def test_memory_fs_has_the_protocol_of_hadoop_fs():
    members = [n for n, v in vars(FileSystem).items() if callable(v) and not n.startswith("_")]
    assert {"qualify", "exists", "mkdirs", "list", "read_bytes", "read_text", "write_bytes",
            "write_text", "create_exclusive", "size", "copy", "delete", "rename"} == set(members)
    for name in members:
        expected = list(inspect.signature(getattr(FileSystem, name)).parameters)
        for cls in (HadoopFs, MemoryFs):
            assert list(inspect.signature(getattr(cls, name)).parameters) == expected, (cls, name)


def test_qualify_and_path_forms(fs):
    assert fs.qualify("/a/b/") == "memory:///a/b"
    assert fs.qualify("memory:///a//b") == "memory:///a/b"
    assert fs.qualify("memory:/a/b") == "memory:///a/b"
    assert fs.qualify("a/./c/../b") == "memory:///a/b"
    assert fs.qualify(fs.qualify("/x")) == "memory:///x"
    fs.write_text("/a/b", "x")
    assert fs.read_text("memory:/a/b") == fs.read_text("memory:///a/b") == "x"
    with pytest.raises(ValueError, match="not a path of the in-memory file system"):
        fs.exists("file:/tmp/x")
    with pytest.raises(ValueError, match="in-memory"):
        fs.write_text("hdfs://nn/x", "x")


def test_write_read_and_overwrite(fs):
    assert not fs.exists("/d/f.txt")
    fs.write_text("/d/f.txt", "héllo")
    assert fs.exists("/d/f.txt") and fs.exists("/d")   # parents are created
    assert fs.read_text("/d/f.txt") == "héllo" and fs.read_bytes("/d/f.txt") == "héllo".encode()
    assert fs.size("/d/f.txt") == len("héllo".encode()) and fs.size("/d") == 0
    with pytest.raises(FileExistsError):
        fs.write_text("/d/f.txt", "again")
    assert fs.read_text("/d/f.txt") == "héllo"
    fs.write_bytes("/d/f.txt", b"new", overwrite=True)
    assert fs.read_bytes("/d/f.txt") == b"new"
    with pytest.raises(IsADirectoryError):
        fs.write_text("/d", "x", overwrite=True)
    with pytest.raises(IsADirectoryError):
        fs.read_text("/d")
    with pytest.raises(FileNotFoundError):
        fs.read_bytes("/d/missing")
    with pytest.raises(FileNotFoundError):
        fs.size("/missing")
    with pytest.raises(FileExistsError):   # a file is in the way of a parent directory
        fs.write_text("/d/f.txt/g", "x")


def test_mkdirs_and_list(fs):
    assert fs.list("/nope") == []
    fs.mkdirs("/a/b/c")
    fs.mkdirs("/a/b/c")   # idempotent
    fs.write_text("/a/b/z.txt", "12345")
    fs.write_text("/a/b/y.txt", "1")
    infos = fs.list("/a/b")
    assert [(i.path, i.size, i.is_dir) for i in infos] == [
        ("memory:///a/b/c", 0, True), ("memory:///a/b/y.txt", 1, False),
        ("memory:///a/b/z.txt", 5, False)]
    assert infos[0].name == "c"
    assert fs.list("memory:///a/b/z.txt") == [FileInfo("memory:///a/b/z.txt", 5,
                                                         infos[2].modification_time, False)]
    assert names(fs, "/") == ["a"]
    with pytest.raises(FileExistsError):
        fs.mkdirs("/a/b/z.txt/x")


def test_modification_times():
    clock = Clock(1_000)
    fs = MemoryFs(clock)
    fs.mkdirs("/d")
    clock.now = 2_000
    fs.write_text("/d/f", "x")
    assert fs.list("/d/f")[0].modification_time == 2_000
    assert fs.list("/")[0].modification_time == 2_000   # /d changed: an entry was added
    clock.now = 3_000
    fs.write_text("/d/f", "y", overwrite=True)
    assert fs.list("/d/f")[0].modification_time == 3_000
    clock.now = 4_000
    fs.delete("/d/f")
    assert fs.list("/")[0].modification_time == 4_000


def test_delete(fs):
    assert fs.delete("/missing") is False
    fs.write_text("/d/e/f", "x")
    with pytest.raises(OSError, match="not empty"):
        fs.delete("/d", recursive=False)
    assert fs.exists("/d/e/f")
    assert fs.delete("/d/e/f", recursive=False) is True
    assert fs.delete("/d/e", recursive=False) is True
    fs.write_text("/d/e/f", "x")
    assert fs.delete("/d") is True
    assert not fs.exists("/d/e/f") and not fs.exists("/d/e") and fs.list("/") == []
    fs.write_text("/dx", "keep")   # a sibling sharing the prefix survives a recursive delete
    fs.write_text("/d/f", "x")
    fs.delete("/d")
    assert fs.read_text("/dx") == "keep"
    with pytest.raises(OSError, match="root"):
        fs.delete("/")


def test_rename(fs):
    fs.write_text("/a/x", "1")
    fs.write_text("/a/sub/y", "2")
    fs.write_text("/b", "taken")
    assert fs.rename("/missing", "/c") is False
    assert fs.rename("/a", "/b") is False                # the target exists
    assert fs.rename("/a/x", "/nodir/x") is False        # no parent directory
    assert fs.rename("/a", "/a/sub/inner") is False      # into itself
    assert fs.exists("/a/x") and fs.read_text("/b") == "taken"
    assert fs.rename("/a", "/c") is True
    assert not fs.exists("/a") and not fs.exists("/a/sub/y")
    assert fs.read_text("/c/x") == "1" and fs.read_text("/c/sub/y") == "2"
    assert fs.rename("/c/x", "/c/sub/x") is True and names(fs, "/c/sub") == ["x", "y"]


def test_copy(fs):
    fs.write_text("/a/x", "1")
    fs.write_text("/a/sub/y", "2")
    fs.copy("/a/x", "/b/x")
    assert fs.read_text("/b/x") == "1" and fs.read_text("/a/x") == "1"
    with pytest.raises(FileExistsError):
        fs.copy("/a/x", "/b/x")
    with pytest.raises(FileNotFoundError):
        fs.copy("/missing", "/b/m")
    fs.copy("/a", "/c")
    assert fs.read_text("/c/sub/y") == "2" and names(fs, "/c") == ["sub", "x"]
    with pytest.raises(OSError, match="into itself"):
        fs.copy("/a", "/a/sub/deeper")


def test_create_exclusive_one_winner_among_racing_threads(fs):
    for round_ in range(20):
        target = f"/log/{round_}.json"
        barrier = threading.Barrier(8)
        results: dict[int, bool] = {}

        def writer(i: int) -> None:
            barrier.wait(timeout=30)
            results[i] = fs.create_exclusive(target, f"writer{i}")

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert sorted(results.values()) == [False] * 7 + [True]
        winner = next(i for i, won in results.items() if won)
        assert fs.read_text(target) == f"writer{winner}"
    assert fs.create_exclusive("/log/0.json", "late") is False
    assert names(fs, "/log") == sorted(f"{i}.json" for i in range(20))


# ---------------------------------------------------------------------- IndexLogManager


def _entry(id: int, state: IndexState) -> IndexLogEntry:
    return IndexLogEntry(id=id, name="idx", kind="covering", state=state,
                         content={"dataVersion": id})


def test_log_manager_write_get_latest(fs):
    log = IndexLogManager(fs, "memory:///sys/idx/")
    assert log.log_path == "memory:///sys/idx/_log"
    assert log.latest_id() is None and log.latest() is None and log.latest_stable() is None
    assert log.get(0) is None
    assert log.write(_entry(0, IndexState.CREATING))
    assert not log.write(_entry(0, IndexState.ACTIVE))   # id taken: lost race
    assert log.get(0).state is IndexState.CREATING
    assert log.write(_entry(1, IndexState.ACTIVE))
    for junk in ["foo.txt", "7.json.abc.tmp", "x.json", "01.json", "9.json.crc"]:
        fs.write_text(f"{log.log_path}/{junk}", "junk")
    fs.mkdirs(f"{log.log_path}/8.json")
    assert log.ids() == [0, 1]
    assert log.latest().state is IndexState.ACTIVE
    assert log.latest_stable().id == 1   # no copy yet: a scan
    log.write_latest_stable(log.get(1))
    assert IndexLogEntry.from_json(fs.read_text(f"{log.log_path}/{LATEST_STABLE}")) == log.get(1)
    assert log.latest_stable() == log.get(1)
    assert not [n for n in names(fs, log.log_path) if n.startswith(LATEST_STABLE + ".")]
    with pytest.raises(ValueError):
        log.write_latest_stable(_entry(0, IndexState.CREATING))


def test_latest_stable_ignores_stale_or_broken_copy(fs):
    log = IndexLogManager(fs, "/sys/idx")
    for i, state in enumerate([IndexState.CREATING, IndexState.ACTIVE, IndexState.DELETING,
                               IndexState.DELETED, IndexState.RESTORING]):
        assert log.write(_entry(i, state))
    log.write_latest_stable(log.get(1))   # stale: a crash between the end entry and the copy
    assert log.latest_stable().id == 3
    fs.write_text(f"{log.log_path}/{LATEST_STABLE}", "{ partial", overwrite=True)
    assert log.latest_stable().id == 3
    inconsistent = log.get(3)
    inconsistent.content = {"dataVersion": 42}
    fs.write_text(f"{log.log_path}/{LATEST_STABLE}", inconsistent.to_json(), overwrite=True)
    assert log.latest_stable() == log.get(3)


def test_log_entry_modified_outside(fs):
    log = IndexLogManager(fs, "/sys/idx")
    log.write(_entry(0, IndexState.CREATING))
    fs.write_text(f"{log.log_path}/1.json", _entry(5, IndexState.ACTIVE).to_json())
    with pytest.raises(CorruptLogError, match=r"1\.json holds id 5") as info:
        log.get(1)
    assert info.value.path == "/sys/idx/_log/1.json"
    assert isinstance(info.value, AcceleratorError)
    fs.write_text(f"{log.log_path}/0.json", "{not json", overwrite=True)
    with pytest.raises(CorruptLogError, match=r"0\.json is corrupt \(not valid JSON.*restore it "
                                              r"from a backup, or remove the index and its data "
                                              r"with vacuum\('idx'\)"):
        log.get(0)


# ---------------------------------------------------------------------- lifecycle actions


def test_create(fs, lifecycle):
    entry = lifecycle.create("MyIndex", "covering", CONFIG, make_build(fs, "v0"))
    assert lifecycle.system_path == "memory:///sys"
    assert entry.state is IndexState.ACTIVE and entry.id == 1 and entry.data_version == 0
    assert entry.name == "MyIndex" and entry.kind == "covering" and entry.config == CONFIG
    assert entry.content == {"numFiles": 1, "sizeInBytes": 2, "dataVersion": 0,
                             "path": "memory:///sys/myindex/v__=0"}
    assert fs.read_text("/sys/myindex/v__=0/part-0.txt") == "v0"
    assert log_states(lifecycle, "myindex") == [IndexState.CREATING, IndexState.ACTIVE]
    assert lifecycle.log_manager("MYINDEX").latest_stable() == entry
    assert lifecycle.get("myINDEX") == entry
    assert lifecycle.list() == [entry]
    with pytest.raises(IndexExistsError, match=r"index 'MyIndex' already exists \(state ACTIVE\)"):
        lifecycle.create("myindex", "covering", CONFIG, make_build(fs))


def test_refresh_and_optimize(fs, lifecycle):
    created = lifecycle.create("idx", "covering", CONFIG, make_build(fs, "v0"))
    refreshed = lifecycle.refresh("idx", make_build(fs, "v1"))
    assert refreshed.id == 3 and refreshed.state is IndexState.ACTIVE
    assert refreshed.data_version == 1 and refreshed.content["path"] == "memory:///sys/idx/v__=1"
    assert fs.read_text("/sys/idx/v__=1/part-0.txt") == "v1"
    assert fs.exists(created.content["path"])   # the old version is kept
    optimized = lifecycle.refresh("idx", make_build(fs, "v2"), IndexState.OPTIMIZING)
    assert optimized.data_version == 2
    assert log_states(lifecycle, "idx") == [
        IndexState.CREATING, IndexState.ACTIVE, IndexState.REFRESHING, IndexState.ACTIVE,
        IndexState.OPTIMIZING, IndexState.ACTIVE]


def test_record(fs, lifecycle):
    created = lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    seen: list[IndexLogEntry] = []

    def update(entry: IndexLogEntry) -> tuple[dict, dict]:
        seen.append(entry)
        return {**entry.source, "appended": [["/lake/t/b", 5, 2]]}, entry.content

    recorded = lifecycle.record("idx", update)
    assert seen == [created]
    assert recorded.id == 3 and recorded.source["appended"] == [["/lake/t/b", 5, 2]]
    assert recorded.content == created.content and recorded.data_version == 0
    assert names(fs, "/sys/idx") == ["_log", "v__=0"]   # no new data version
    assert log_states(lifecycle, "idx")[-2:] == [IndexState.REFRESHING, IndexState.ACTIVE]


def test_delete_restore_vacuum(fs, lifecycle):
    created = lifecycle.create("Idx", "covering", CONFIG, make_build(fs))
    deleted = lifecycle.delete("idx")
    assert deleted.state is IndexState.DELETED and deleted.content == created.content
    assert fs.exists(created.content["path"])
    restored = lifecycle.restore("IDX")
    assert restored.state is IndexState.ACTIVE and restored.content == created.content
    lifecycle.delete("idx")
    gone = lifecycle.vacuum("idx")
    assert gone.state is IndexState.DOESNOTEXIST
    assert fs.list(SYSTEM) == [] and lifecycle.list() == []
    with pytest.raises(IndexNotFoundError, match="no index named 'idx'"):
        lifecycle.get("idx")
    again = lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    assert again.id == 1 and again.data_version == 0


def test_wrong_state_errors(fs, lifecycle):
    lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    with pytest.raises(IndexStateError, match=r"cannot vacuum index 'idx'.*ACTIVE.*delete\('idx'\)"):
        lifecycle.vacuum("idx")
    with pytest.raises(IndexStateError, match="cannot restore index 'idx'.*ACTIVE"):
        lifecycle.restore("idx")
    with pytest.raises(IndexStateError, match="nothing to cancel for index 'idx'"):
        lifecycle.cancel("idx")
    lifecycle.delete("idx")
    for action in [lambda: lifecycle.refresh("idx", make_build(fs)),
                   lambda: lifecycle.record("idx", lambda e: (e.source, e.content)),
                   lambda: lifecycle.vacuum_outdated("idx", lambda e: [])]:
        with pytest.raises(IndexStateError, match=r"index 'idx'.*DELETED.*restore\('idx'\)"):
            action()
    for action in [lifecycle.get, lifecycle.delete, lifecycle.cancel]:
        with pytest.raises(IndexNotFoundError, match="no index named 'other'.*existing: idx"):
            action("other")


def test_vacuum_outdated_keeps_referenced_and_recent_versions():
    clock = Clock()
    fs = MemoryFs(clock)
    lifecycle = IndexLifecycle(fs, SYSTEM)
    lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    lifecycle.refresh("idx", make_build(fs))
    lifecycle.refresh("idx", make_build(fs))
    current = lifecycle.get("idx")
    # keeps what the current entry reads, and versions replaced less than an hour ago
    removed, kept = lifecycle.vacuum_outdated("idx", lambda e: [e.content["path"]], 3_600_000)
    assert removed == [] and kept == ["memory:///sys/idx/v__=0", "memory:///sys/idx/v__=1"]
    removed, kept = lifecycle.vacuum_outdated(
        "idx", lambda e: [e.content["path"], f"{SYSTEM}/idx/v__=0"])
    assert removed == ["memory:///sys/idx/v__=1"] and kept == []
    assert names(fs, "/sys/idx") == ["_log", "v__=0", "v__=2"]
    after = lifecycle.get("idx")
    assert after.state is IndexState.ACTIVE and after.content == current.content
    assert log_states(lifecycle, "idx")[-2:] == [IndexState.VACUUMING_OUTDATED, IndexState.ACTIVE]


def _crash(lifecycle: IndexLifecycle, name: str, state: IndexState) -> IndexLogEntry:
    """Writes the begin entry of an operation whose process then died."""
    log = lifecycle.log_manager(name)
    latest = log.latest()
    entry = latest.derive(latest.id + 1, state)
    assert log.write(entry)
    return entry


@pytest.mark.parametrize("state", [IndexState.REFRESHING, IndexState.OPTIMIZING,
                                   IndexState.DELETING, IndexState.VACUUMING_OUTDATED])
def test_transient_state_blocks_until_cancel(fs, lifecycle, state):
    created = lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    _crash(lifecycle, "idx", state)
    fs.write_text("/sys/idx/v__=1/part-0.txt", "partial")   # what a crashed refresh left
    assert lifecycle.get("idx").state is state
    assert [e.state for e in lifecycle.list()] == [state]
    for action in [lifecycle.delete, lifecycle.restore, lifecycle.vacuum,
                   lambda n: lifecycle.refresh(n, make_build(fs)),
                   lambda n: lifecycle.record(n, lambda e: (e.source, e.content)),
                   lambda n: lifecycle.vacuum_outdated(n, lambda e: []),
                   lambda n: lifecycle.create(n, "covering", CONFIG, make_build(fs))]:
        with pytest.raises(IndexStateError, match=rf"index 'idx'.*{state}.*cancel\('idx'\)"):
            action("idx")
    cancelled = lifecycle.cancel("idx")
    assert cancelled.state is IndexState.ACTIVE and cancelled.content == created.content
    assert not fs.exists("/sys/idx/v__=1")
    assert log_states(lifecycle, "idx")[-3:] == [state, IndexState.CANCELLING, IndexState.ACTIVE]
    assert lifecycle.log_manager("idx").latest_stable() == cancelled
    assert lifecycle.refresh("idx", make_build(fs, "ok")).data_version == 1


def test_crashed_create_and_restore_are_cancelled(fs, lifecycle):
    log = lifecycle.log_manager("idx")
    log.write(IndexLogEntry(id=0, name="idx", kind="covering", state=IndexState.CREATING))
    fs.write_text("/sys/idx/v__=0/part-0.txt", "partial")
    with pytest.raises(IndexStateError, match=r"cannot create index 'idx'.*CREATING.*cancel"):
        lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    assert lifecycle.cancel("idx").state is IndexState.DOESNOTEXIST
    assert fs.list(SYSTEM) == []
    lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    lifecycle.delete("idx")
    _crash(lifecycle, "idx", IndexState.RESTORING)
    assert lifecycle.cancel("idx").state is IndexState.DELETED


def test_crashed_vacuum_is_finished_by_cancel(fs, lifecycle):
    lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    lifecycle.delete("idx")
    _crash(lifecycle, "idx", IndexState.VACUUMING)
    fs.delete("/sys/idx/v__=0/part-0.txt")   # its data partly gone
    with pytest.raises(IndexStateError, match="VACUUMING.*cancel"):
        lifecycle.restore("idx")
    assert lifecycle.cancel("idx").state is IndexState.DOESNOTEXIST
    assert fs.list(SYSTEM) == []


class _RacingFs:
    """A MemoryFs that makes its first write of one log entry wait for the other racer."""

    def __init__(self, fs: MemoryFs, barrier: threading.Barrier, entry_file: str):
        self._fs, self._barrier, self._entry_file = fs, barrier, entry_file
        self._waited = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fs, name)

    def create_exclusive(self, path: str, text: str) -> bool:
        if path.endswith(self._entry_file) and not self._waited:
            self._waited = True
            self._barrier.wait(timeout=30)
        return self._fs.create_exclusive(path, text)


def _race(fs: MemoryFs, entry_file: str, action) -> list[Any]:
    """Runs ``action(lifecycle, i)`` in two threads with separate lifecycles; their results."""
    barrier = threading.Barrier(2)
    results: list[Any] = [None, None]

    def run(i: int) -> None:
        try:
            results[i] = action(IndexLifecycle(_RacingFs(fs, barrier, entry_file), SYSTEM), i)
        except Exception as exc:  # noqa: BLE001 - collected for the assertions
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results


def test_concurrent_creates_one_wins(fs, lifecycle):
    for round_ in range(5):
        name = f"race{round_}"
        builds: list[str] = []
        results = _race(fs, "/_log/0.json", lambda lc, i: lc.create(
            name, "covering", CONFIG, make_build(fs, f"writer{i}", builds)))
        winners = [r for r in results if isinstance(r, IndexLogEntry)]
        losers = [r for r in results if isinstance(r, Exception)]
        assert len(winners) == 1 and len(losers) == 1, results
        assert isinstance(losers[0], ConcurrentModificationError)
        assert f"index '{name}' was changed by another operation at the same time" in str(losers[0])
        assert len(builds) == 1   # the loser never built anything
        assert lifecycle.get(name) == winners[0]
        assert log_states(lifecycle, name) == [IndexState.CREATING, IndexState.ACTIVE]
        assert lifecycle.log_manager(name).latest_stable() == winners[0]


def test_concurrent_refreshes_one_wins(fs, lifecycle):
    lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    results = _race(fs, "/_log/2.json",
                    lambda lc, i: lc.refresh("idx", make_build(fs, f"writer{i}")))
    assert sorted(type(r).__name__ for r in results) == ["ConcurrentModificationError",
                                                         "IndexLogEntry"]
    winner = next(r for r in results if isinstance(r, IndexLogEntry))
    assert lifecycle.get("idx") == winner and winner.data_version == 1
    assert log_states(lifecycle, "idx") == [IndexState.CREATING, IndexState.ACTIVE,
                                            IndexState.REFRESHING, IndexState.ACTIVE]


# ---------------------------------------------------------------------- failed operations roll back


class _Broken:
    """A MemoryFs whose methods named in ``failing`` raise OSError, once ``broken`` is set, on
    paths containing ``marker``."""

    def __init__(self, fs: MemoryFs, *failing: str, marker: str = ""):
        self._fs, self._failing, self._marker = fs, failing, marker
        self.broken = False

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._fs, name)
        if name not in self._failing:
            return method

        def fail(*args: Any, **kwargs: Any) -> Any:
            if self.broken and self._marker in args[0]:
                raise OSError(f"{name} failed on {args[0]}")
            return method(*args, **kwargs)

        return fail


def half_written(fs: FileSystem, error: BaseException):
    """A build that writes part of its data, then fails with ``error``."""

    def build(data_path: str) -> tuple[dict, dict]:
        fs.write_text(f"{data_path}/part-0.txt", "partial")
        raise error

    return build


def test_failed_create_leaves_the_name_free(fs, lifecycle):
    cause = RuntimeError("build blew up")
    with pytest.raises(IndexOperationError) as info:
        lifecycle.create("Idx", "covering", CONFIG, half_written(fs, cause))
    assert str(info.value) == ("createIndex of index 'Idx' failed and was rolled back (the index "
                               "does not exist): RuntimeError: build blew up")
    assert info.value.__cause__ is cause
    assert (info.value.index, info.value.operation) == ("Idx", "createIndex")
    assert isinstance(info.value, AcceleratorError)
    with pytest.raises(IndexNotFoundError):
        lifecycle.get("idx")
    assert lifecycle.list() == [] and fs.list(SYSTEM) == []   # its data directory is gone
    created = lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    assert created.id == 1 and created.state is IndexState.ACTIVE


def test_failed_create_keeps_the_users_error(fs, lifecycle):
    cause = InvalidIndexConfigError("index 'idx': column 'x' has an unsupported type")
    with pytest.raises(InvalidIndexConfigError) as info:
        lifecycle.create("idx", "covering", CONFIG, half_written(fs, cause))
    assert info.value is cause
    assert lifecycle.list() == [] and fs.list(SYSTEM) == []


@pytest.mark.parametrize("state, operation", [(IndexState.REFRESHING, "refreshIndex"),
                                              (IndexState.OPTIMIZING, "optimizeIndex")])
def test_failed_refresh_stays_on_the_previous_version(fs, lifecycle, state, operation):
    lifecycle.create("idx", "covering", CONFIG, make_build(fs, "v0"))
    previous = lifecycle.refresh("idx", make_build(fs, "v1"))
    with pytest.raises(IndexOperationError) as info:
        lifecycle.refresh("idx", half_written(fs, ValueError("executor lost")), state)
    assert str(info.value) == (f"{operation} of index 'idx' failed and was rolled back (the "
                               f"index is ACTIVE on data version 1): ValueError: executor lost")
    after = lifecycle.get("idx")
    assert after.state is IndexState.ACTIVE and after.content == previous.content
    assert after.source == previous.source
    assert names(fs, "/sys/idx") == ["_log", "v__=0", "v__=1"]   # v__=2 removed
    assert log_states(lifecycle, "idx")[-4:] == [IndexState.ACTIVE, state,
                                                 IndexState.CANCELLING, IndexState.ACTIVE]
    assert lifecycle.log_manager("idx").latest_stable() == after
    again = lifecycle.refresh("idx", make_build(fs, "v2"))
    assert again.data_version == 2 and fs.read_text("/sys/idx/v__=2/part-0.txt") == "v2"


def test_failed_record_is_rolled_back(fs, lifecycle):
    created = lifecycle.create("idx", "covering", CONFIG, make_build(fs))

    def update(entry: IndexLogEntry) -> tuple[dict, dict]:
        raise KeyError("files")

    with pytest.raises(IndexOperationError, match=r"^refreshIndex of index 'idx' failed and was "
                                                  r"rolled back \(the index is ACTIVE on data "
                                                  r"version 0\): KeyError: 'files'$"):
        lifecycle.record("idx", update)
    assert lifecycle.get("idx").content == created.content
    assert lifecycle.get("idx").state is IndexState.ACTIVE


def test_failed_vacuum_outdated_is_rolled_back(fs):
    lifecycle = IndexLifecycle(fs, SYSTEM)
    lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    current = lifecycle.refresh("idx", make_build(fs))
    broken = _Broken(fs, "delete", marker="/v__=")
    broken.broken = True
    with pytest.raises(IndexOperationError, match=(
            r"^vacuumIndex of index 'idx' failed and was rolled back \(the index is ACTIVE on "
            r"data version 1\): OSError: delete failed on memory:///sys/idx/v__=0$")):
        IndexLifecycle(broken, SYSTEM).vacuum_outdated("idx", lambda e: [e.content["path"]])
    assert lifecycle.get("idx").content == current.content
    assert names(fs, "/sys/idx") == ["_log", "v__=0", "v__=1"]


def test_failed_vacuum_whose_rollback_fails_needs_cancel(fs, lifecycle):
    lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    lifecycle.delete("idx")
    broken = _Broken(fs, "delete", marker="/v__=")
    broken.broken = True
    with pytest.raises(IndexOperationError) as info:
        IndexLifecycle(broken, SYSTEM).vacuum("idx")
    assert str(info.value) == (
        "vacuumIndex of index 'idx' failed (OSError: delete failed on memory:///sys/idx/v__=0), "
        "and rolling it back failed too (OSError: delete failed on memory:///sys/idx/v__=0); "
        "run cancel('idx') to roll it back")
    assert isinstance(info.value.__cause__, OSError)
    assert lifecycle.get("idx").state is IndexState.CANCELLING
    with pytest.raises(IndexStateError, match=r"CANCELLING.*cancel\('idx'\)"):
        lifecycle.restore("idx")
    assert lifecycle.cancel("idx").state is IndexState.DOESNOTEXIST
    assert fs.list(SYSTEM) == []


def test_failed_refresh_whose_rollback_fails_needs_cancel(fs, lifecycle):
    created = lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    broken = _Broken(fs, "create_exclusive")

    def build(data_path: str) -> tuple[dict, dict]:
        fs.write_text(f"{data_path}/part-0.txt", "partial")
        broken.broken = True   # the file system fails from now on: no rollback entry either
        raise RuntimeError("disk gone")

    with pytest.raises(IndexOperationError, match=(
            r"^refreshIndex of index 'idx' failed \(RuntimeError: disk gone\), and rolling it "
            r"back failed too \(OSError: create_exclusive failed on memory:///sys/idx/_log/"
            r"3\.json\); run cancel\('idx'\) to roll it back$")):
        IndexLifecycle(broken, SYSTEM).refresh("idx", build)
    assert lifecycle.get("idx").state is IndexState.REFRESHING
    assert fs.exists("/sys/idx/v__=1")
    cancelled = lifecycle.cancel("idx")
    assert cancelled.state is IndexState.ACTIVE and cancelled.content == created.content
    assert not fs.exists("/sys/idx/v__=1")


def test_interrupted_build_is_rolled_back_and_interrupt_kept(fs, lifecycle):
    lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    with pytest.raises(KeyboardInterrupt):
        lifecycle.refresh("idx", half_written(fs, KeyboardInterrupt()))
    assert lifecycle.get("idx").state is IndexState.ACTIVE
    assert names(fs, "/sys/idx") == ["_log", "v__=0"]


def test_a_crash_mid_create_still_needs_cancel(fs, lifecycle):
    """A process that dies after writing the begin entry rolls nothing back: the index stays
    CREATING (listed, unusable) until cancel."""
    lifecycle.create("other", "covering", CONFIG, make_build(fs))
    base = IndexLogEntry(id=-1, name="idx", kind="covering", state=IndexState.DOESNOTEXIST)
    assert lifecycle.log_manager("idx").write(base.derive(0, IndexState.CREATING))
    fs.write_text("/sys/idx/v__=0/part-0.txt", "partial")   # then the process died
    assert lifecycle.get("idx").state is IndexState.CREATING
    assert [e.state for e in lifecycle.list()] == [IndexState.CREATING, IndexState.ACTIVE]
    with pytest.raises(IndexStateError, match=r"cannot create index 'idx'.*CREATING.*its "
                                              r"process died.*cancel\('idx'\)"):
        lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    assert lifecycle.cancel("idx").state is IndexState.DOESNOTEXIST
    assert names(fs, SYSTEM) == ["other"]
    assert lifecycle.create("idx", "covering", CONFIG, make_build(fs)).state is IndexState.ACTIVE


# ---------------------------------------------------------------------- corrupt log entries


@pytest.mark.parametrize("text, error", [
    ("{ partial", r"is corrupt \(not valid JSON: "),
    ('{"id": 2, "name": "Idx"}', r"is corrupt \(not a valid index log entry: KeyError\('kind'\)\)"),
    ('[1, 2]', r"is corrupt \(not a valid index log entry: not a JSON object\)"),
    (_entry(7, IndexState.ACTIVE).to_json(), r"holds id 7"),
])
def test_corrupt_newest_entry_is_listed_as_corrupt(fs, lifecycle, caplog, text, error):
    lifecycle.create("Idx", "covering", CONFIG, make_build(fs))
    other = lifecycle.create("other", "covering", CONFIG, make_build(fs))
    fs.write_text("/sys/idx/_log/2.json", text)
    with caplog.at_level("WARNING", logger="accelerator.indexes.log"):
        listed = lifecycle.list()
    assert [e.state for e in listed] == [IndexState.CORRUPT, IndexState.ACTIVE]
    corrupt = listed[0]
    assert listed[1] == other
    assert (corrupt.id, corrupt.name, corrupt.kind, corrupt.config) == (2, "Idx", "covering",
                                                                      CONFIG)
    assert corrupt.source == {} and corrupt.content == {} and corrupt.data_version is None
    assert corrupt.properties["corruptFile"] == "memory:///sys/idx/_log/2.json"
    assert re.search(r"^index log entry memory:///sys/idx/_log/2\.json " + error,
                     corrupt.properties["error"])
    assert [r.getMessage() for r in caplog.records] == [corrupt.properties["error"]]
    assert not corrupt.state.is_stable and corrupt.state not in TRANSIENT_STATES
    assert lifecycle.get("IDX") == corrupt


def test_corrupt_index_rejects_every_action_but_vacuum(fs, lifecycle):
    lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    fs.write_text("/sys/idx/_log/2.json", "garbage")
    for action, verb in [(lifecycle.delete, "delete"), (lifecycle.restore, "restore"),
                         (lifecycle.cancel, "cancel"),
                         (lambda n: lifecycle.refresh(n, make_build(fs)), "refresh"),
                         (lambda n: lifecycle.refresh(n, make_build(fs), IndexState.OPTIMIZING),
                          "optimize"),
                         (lambda n: lifecycle.record(n, lambda e: (e.source, e.content)),
                          "refresh"),
                         (lambda n: lifecycle.vacuum_outdated(n, lambda e: []),
                          "vacuum outdated data of"),
                         (lambda n: lifecycle.create(n, "covering", CONFIG, make_build(fs)),
                          "create")]:
        with pytest.raises(IndexStateError) as info:
            action("idx")
        assert str(info.value).startswith(
            f"cannot {verb} index 'idx': it is CORRUPT: index log entry "
            f"memory:///sys/idx/_log/2.json is corrupt (not valid JSON: ")
        assert str(info.value).endswith(
            "it was modified outside the accelerator: restore it from a backup, or remove the "
            "index and its data with vacuum('idx')")
    assert names(fs, "/sys/idx") == ["_log", "v__=0"]   # nothing was changed


def test_vacuum_removes_a_corrupt_index(fs, lifecycle):
    lifecycle.create("Idx", "covering", CONFIG, make_build(fs))
    lifecycle.refresh("idx", make_build(fs))
    lifecycle.create("other", "covering", CONFIG, make_build(fs))
    fs.write_text("/sys/idx/_log/4.json", "")
    gone = lifecycle.vacuum("idx")
    assert gone.state is IndexState.DOESNOTEXIST and gone.name == "Idx" and gone.id == 5
    assert names(fs, SYSTEM) == ["other"]
    with pytest.raises(IndexNotFoundError):
        lifecycle.get("idx")
    assert lifecycle.create("idx", "covering", CONFIG, make_build(fs)).id == 1


def test_corrupt_only_entry_is_named_after_its_directory(fs, lifecycle):
    fs.write_text("/sys/lost/_log/0.json", "{}")
    [corrupt] = lifecycle.list()
    assert (corrupt.name, corrupt.kind, corrupt.state) == ("lost", "unknown", IndexState.CORRUPT)
    assert lifecycle.vacuum("lost").state is IndexState.DOESNOTEXIST
    assert fs.list(SYSTEM) == []


def test_corrupt_older_entry_does_not_matter_to_the_newest(fs, lifecycle):
    lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    latest = lifecycle.delete("idx")
    fs.write_text("/sys/idx/_log/0.json", "garbage", overwrite=True)
    assert lifecycle.list() == [latest] and lifecycle.get("idx") == latest
    assert lifecycle.restore("idx").state is IndexState.ACTIVE
