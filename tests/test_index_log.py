"""The index log (indexes/log.py) and the lifecycle actions over it (indexes/lifecycle.py)."""
from __future__ import annotations

import json
import os
import threading
from typing import Any

import pytest

from indexes.errors import (
    ConcurrentModificationError,
    IndexExistsError,
    IndexNotFoundError,
    IndexOperationError,
    IndexStateError,
    InvalidIndexConfigError,
)
from indexes.fs import HadoopFs
from indexes.lifecycle import IndexLifecycle
from indexes.log import STABLE_STATES, IndexLogEntry, IndexLogManager, IndexState

CONFIG = {"indexedColumns": ["id"], "includedColumns": ["name"], "numBuckets": 2}


@pytest.fixture
def fs(spark) -> HadoopFs:
    return HadoopFs(spark)


@pytest.fixture
def lifecycle(fs, system_path) -> IndexLifecycle:
    return IndexLifecycle(fs, system_path)


def local(path: str) -> str:
    """The local path of a ``file:`` URI."""
    return path[len("file:"):] if path.startswith("file:") else path


def make_build(fs: HadoopFs, tag: str = "data", calls: list[str] | None = None):
    """A build that writes one small file into the data path and reports it."""

    def build(data_path: str) -> tuple[dict, dict]:
        if calls is not None:
            calls.append(data_path)
        fs.write_text(f"{data_path}/part-0.txt", tag)
        source = {"format": "parquet", "rootPaths": ["/lake/t"], "partitionColumns": [],
                  "options": {}, "files": [["/lake/t/a.parquet", 10, 1000]]}
        return source, {"numFiles": 1, "sizeInBytes": len(tag)}

    return build


def failing_build(data_path: str) -> tuple[dict, dict]:
    raise RuntimeError("build blew up")


def log_states(lifecycle: IndexLifecycle, name: str) -> list[IndexState]:
    log = lifecycle.log_manager(name)
    return [log.get(i).state for i in log.ids()]


# ---------------------------------------------------------------------- entries


def test_entry_json_round_trip():
    entry = IndexLogEntry(
        id=3, name="MyIdx", kind="covering", state=IndexState.ACTIVE, timestamp=1700000000123,
        config=dict(CONFIG),
        source={"format": "parquet", "rootPaths": ["file:/lake/t"], "partitionColumns": ["d"],
                "options": {"mergeSchema": "false"}, "files": [["file:/lake/t/a", 10, 99]]},
        content={"dataVersion": 2, "path": "file:/sys/myidx/v__=2", "schema": "{}",
                 "numFiles": 2, "sizeInBytes": 1234},
        properties={"note": "x"})
    text = entry.to_json()
    assert IndexLogEntry.from_json(text) == entry
    assert text == IndexLogEntry.from_json(text).to_json()  # stable serialization
    data = json.loads(text)
    assert data["state"] == "ACTIVE" and data["id"] == 3 and data["kind"] == "covering"
    assert list(data) == sorted(data)
    assert entry.data_version == 2


def test_entry_from_json_rejects_garbage():
    for text in ["", "{", "[]", '{"id": 1}', '{"id": 0, "name": "a", "kind": "k", '
                                             '"state": "BOGUS", "timestamp": 1}']:
        with pytest.raises(ValueError):
            IndexLogEntry.from_json(text)


def test_states():
    assert STABLE_STATES == {IndexState.ACTIVE, IndexState.DELETED, IndexState.DOESNOTEXIST}
    assert not IndexState.CANCELLING.is_stable and IndexState.DELETED.is_stable
    assert IndexState("REFRESHING") is IndexState.REFRESHING and IndexState.ACTIVE == "ACTIVE"


# ---------------------------------------------------------------------- HadoopFs.create_exclusive


def test_create_exclusive_two_writers_one_winner(fs, tmp_path):
    target = str(tmp_path / "log" / "0.json")
    barrier = threading.Barrier(2)
    results: dict[str, bool] = {}

    def writer(text: str) -> None:
        barrier.wait(timeout=30)
        results[text] = fs.create_exclusive(target, text)

    for _ in range(5):
        if os.path.exists(target):
            os.remove(target)
        results.clear()
        threads = [threading.Thread(target=writer, args=(t,)) for t in ("first", "second")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert sorted(results.values()) == [False, True]
        winner = next(text for text, won in results.items() if won)
        assert fs.read_text(target) == winner
    # an existing file is never replaced, and no temp files are left behind
    assert fs.create_exclusive(target, "late") is False
    assert fs.read_text(target) == winner
    assert [n for n in os.listdir(tmp_path / "log") if not n.startswith(".")] == ["0.json"]


# ---------------------------------------------------------------------- IndexLogManager


def _entry(id: int, state: IndexState) -> IndexLogEntry:
    return IndexLogEntry(id=id, name="idx", kind="covering", state=state,
                         content={"dataVersion": id})


def test_log_manager_write_get_latest(fs, tmp_path):
    log = IndexLogManager(fs, str(tmp_path / "idx"))
    assert log.latest_id() is None and log.latest() is None and log.latest_stable() is None
    assert log.get(0) is None
    assert log.write(_entry(0, IndexState.CREATING))
    assert not log.write(_entry(0, IndexState.ACTIVE))  # id taken: lost race
    assert log.get(0).state is IndexState.CREATING
    assert log.write(_entry(1, IndexState.ACTIVE))
    # junk in _log is ignored
    logdir = tmp_path / "idx" / "_log"
    for junk in ["foo.txt", "7.json.abc.tmp", "x.json", "01.json", "9.json.crc"]:
        (logdir / junk).write_text("junk")
    (logdir / "8.json").mkdir()
    assert log.ids() == [0, 1]
    assert log.latest_id() == 1 and log.latest().state is IndexState.ACTIVE
    # no latestStable copy yet: scan
    assert log.latest_stable().id == 1
    log.write_latest_stable(log.get(1))
    assert log.latest_stable() == log.get(1)
    with pytest.raises(ValueError):
        log.write_latest_stable(_entry(0, IndexState.CREATING))


def test_latest_stable_ignores_stale_or_broken_copy(fs, tmp_path):
    log = IndexLogManager(fs, str(tmp_path / "idx"))
    states = [IndexState.CREATING, IndexState.ACTIVE, IndexState.DELETING, IndexState.DELETED,
              IndexState.RESTORING]
    for i, state in enumerate(states):
        assert log.write(_entry(i, state))
    log.write_latest_stable(log.get(1))  # stale: crash between the end entry and the copy
    assert log.latest_stable().id == 3
    log.write_latest_stable(log.get(3))
    assert log.latest_stable().id == 3
    fs.write_text(f"{log.log_path}/latestStable", "{ partial", overwrite=True)
    assert log.latest_stable().id == 3
    inconsistent = log.get(3)
    inconsistent.content = {"dataVersion": 42}
    fs.write_text(f"{log.log_path}/latestStable", inconsistent.to_json(), overwrite=True)
    assert log.latest_stable() == log.get(3)


# ---------------------------------------------------------------------- lifecycle


def test_create_with_spark_build(spark, fs, lifecycle, system_path):
    def build(data_path: str) -> tuple[dict, dict]:
        df = spark.range(10).selectExpr("id", "cast(id as string) as name")
        df.write.parquet(data_path)
        return {"format": "parquet", "rootPaths": ["/lake"]}, {"schema": df.schema.json()}

    entry = lifecycle.create("MyIndex", "covering", CONFIG, build)
    assert entry.state is IndexState.ACTIVE and entry.id == 1
    assert entry.name == "MyIndex" and entry.kind == "covering" and entry.config == CONFIG
    assert entry.data_version == 0
    assert entry.content["path"] == f"{lifecycle.system_path}/myindex/v__=0"
    assert spark.read.parquet(entry.content["path"]).count() == 10
    assert os.path.isdir(os.path.join(system_path, "myindex", "_log"))
    assert log_states(lifecycle, "myindex") == [IndexState.CREATING, IndexState.ACTIVE]
    assert lifecycle.log_manager("MYINDEX").latest_stable() == entry
    assert lifecycle.get("myINDEX") == entry
    assert [e.name for e in lifecycle.list()] == ["MyIndex"]


def test_create_existing_index_fails(fs, lifecycle):
    lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    calls: list[str] = []
    with pytest.raises(IndexExistsError, match=r"index 'idx' already exists \(state ACTIVE\)"
                                                r".*delete and vacuum"):
        lifecycle.create("IDX", "covering", CONFIG, make_build(fs, calls=calls))
    assert calls == []
    lifecycle.delete("idx")
    with pytest.raises(IndexExistsError, match="state DELETED"):
        lifecycle.create("idx", "covering", CONFIG, make_build(fs))


def test_refresh_writes_next_version(fs, lifecycle):
    created = lifecycle.create("idx", "covering", CONFIG, make_build(fs, "v0"))
    refreshed = lifecycle.refresh("idx", make_build(fs, "v1"))
    assert refreshed.state is IndexState.ACTIVE and refreshed.id == 3
    assert refreshed.data_version == 1
    assert refreshed.content["path"].endswith("/idx/v__=1")
    assert fs.read_text(refreshed.content["path"] + "/part-0.txt") == "v1"
    assert fs.exists(created.content["path"])  # old version kept
    assert refreshed.config == CONFIG and refreshed.kind == "covering"
    again = lifecycle.refresh("idx", make_build(fs, "v2"))
    assert again.data_version == 2 and again.content["path"].endswith("/v__=2")
    assert log_states(lifecycle, "idx") == [IndexState.CREATING, IndexState.ACTIVE,
                                            IndexState.REFRESHING, IndexState.ACTIVE,
                                            IndexState.REFRESHING, IndexState.ACTIVE]


def test_delete_restore_vacuum(fs, lifecycle, system_path):
    created = lifecycle.create("Idx", "covering", CONFIG, make_build(fs))
    deleted = lifecycle.delete("idx")
    assert deleted.state is IndexState.DELETED and deleted.id == 3
    assert deleted.content == created.content and fs.exists(created.content["path"])
    assert lifecycle.get("idx").state is IndexState.DELETED
    restored = lifecycle.restore("IDX")
    assert restored.state is IndexState.ACTIVE and restored.content == created.content
    assert restored.name == "Idx"
    lifecycle.delete("idx")
    gone = lifecycle.vacuum("idx")
    assert gone.state is IndexState.DOESNOTEXIST
    assert not os.path.exists(os.path.join(system_path, "idx"))
    assert [n for n in os.listdir(system_path)] == []
    assert lifecycle.list() == []
    with pytest.raises(IndexNotFoundError, match="no index named 'idx'"):
        lifecycle.get("idx")
    # the name can be reused, and the log starts over
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
    with pytest.raises(IndexStateError, match=r"cannot refresh index 'idx'.*DELETED.*restore"):
        lifecycle.refresh("idx", make_build(fs))
    with pytest.raises(IndexStateError, match="cannot delete index 'idx'.*DELETED"):
        lifecycle.delete("idx")


def test_not_found_lists_existing(fs, lifecycle, system_path):
    for name in ["beta", "Alpha"]:
        lifecycle.create(name, "covering", CONFIG, make_build(fs))
    os.makedirs(os.path.join(system_path, "_history", "date=2024-01-01"))
    os.makedirs(os.path.join(system_path, "_events"))
    assert [e.name for e in lifecycle.list()] == ["Alpha", "beta"]
    for action in [lifecycle.get, lifecycle.delete, lifecycle.restore, lifecycle.vacuum,
                   lifecycle.cancel, lambda n: lifecycle.refresh(n, make_build(fs))]:
        with pytest.raises(IndexNotFoundError) as info:
            action("gamma")
        assert str(info.value) == (f"no index named 'gamma' in {lifecycle.system_path}; "
                                   f"existing: Alpha, beta")


@pytest.mark.parametrize("name", ["", "a/b", "../x", "a b", "a.b", "_history", "idx*", None])
def test_invalid_names_rejected(fs, lifecycle, system_path, name):
    with pytest.raises(InvalidIndexConfigError, match="invalid index name.*letters, digits"):
        lifecycle.create(name, "covering", CONFIG, make_build(fs))
    with pytest.raises(InvalidIndexConfigError, match="invalid index name"):
        lifecycle.get(name)
    assert not os.path.exists(system_path) or os.listdir(system_path) == []


def test_valid_names(fs, lifecycle):
    for name in ["a", "A-1_b", "123", "x-"]:
        assert lifecycle.create(name, "covering", CONFIG, make_build(fs)).name == name


def test_failed_refresh_rolls_back(fs, lifecycle):
    created = lifecycle.create("idx", "covering", CONFIG, make_build(fs))

    def half_written(data_path: str) -> tuple[dict, dict]:
        fs.write_text(f"{data_path}/part-0.txt", "partial")
        raise RuntimeError("executor lost")

    with pytest.raises(IndexOperationError, match=r"^refreshIndex of index 'idx' failed and was "
                                                  r"rolled back \(the index is ACTIVE on data "
                                                  r"version 0\): RuntimeError: executor lost$"):
        lifecycle.refresh("idx", half_written)
    rolled_back = lifecycle.get("idx")
    assert rolled_back.state is IndexState.ACTIVE
    assert [e.state for e in lifecycle.list()] == [IndexState.ACTIVE]
    assert rolled_back.content == created.content and rolled_back.data_version == 0
    assert not fs.exists(created.content["path"].replace("v__=0", "v__=1"))  # partial data gone
    assert log_states(lifecycle, "idx") == [IndexState.CREATING, IndexState.ACTIVE,
                                            IndexState.REFRESHING, IndexState.CANCELLING,
                                            IndexState.ACTIVE]
    assert lifecycle.log_manager("idx").latest_stable() == rolled_back
    refreshed = lifecycle.refresh("idx", make_build(fs, "ok"))
    assert refreshed.data_version == 1
    assert fs.read_text(refreshed.content["path"] + "/part-0.txt") == "ok"


def test_crashed_refresh_blocks_until_cancel(fs, lifecycle):
    created = lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    # a process that died mid-refresh: its begin entry and part of its data, nothing more
    lifecycle.log_manager("idx").write(created.derive(created.id + 1, IndexState.REFRESHING))
    fs.write_text(created.content["path"].replace("v__=0", "v__=1") + "/part-0.txt", "partial")
    assert lifecycle.get("idx").state is IndexState.REFRESHING
    assert [e.state for e in lifecycle.list()] == [IndexState.REFRESHING]
    for action in [lifecycle.delete, lifecycle.restore, lifecycle.vacuum,
                   lambda n: lifecycle.refresh(n, make_build(fs)),
                   lambda n: lifecycle.create(n, "covering", CONFIG, make_build(fs))]:
        with pytest.raises(IndexStateError, match=r"index 'idx'.*REFRESHING.*cancel\('idx'\)"):
            action("idx")
    cancelled = lifecycle.cancel("idx")
    assert cancelled.state is IndexState.ACTIVE
    assert cancelled.content == created.content and cancelled.data_version == 0
    assert not fs.exists(created.content["path"].replace("v__=0", "v__=1"))  # partial data gone
    assert log_states(lifecycle, "idx") == [IndexState.CREATING, IndexState.ACTIVE,
                                            IndexState.REFRESHING, IndexState.CANCELLING,
                                            IndexState.ACTIVE]
    assert lifecycle.log_manager("idx").latest_stable() == cancelled


def test_failed_create_rolls_back_to_doesnotexist(fs, lifecycle, system_path):
    with pytest.raises(IndexOperationError, match=r"^createIndex of index 'Idx' failed and was "
                                                  r"rolled back \(the index does not exist\): "
                                                  r"RuntimeError: build blew up$"):
        lifecycle.create("Idx", "covering", CONFIG, failing_build)
    assert os.listdir(system_path) == []
    with pytest.raises(IndexNotFoundError):
        lifecycle.get("idx")
    assert lifecycle.create("idx", "covering", CONFIG, make_build(fs)).state is IndexState.ACTIVE


def test_crashed_create_cancels_to_doesnotexist(fs, lifecycle, system_path):
    base = IndexLogEntry(id=-1, name="Idx", kind="covering", state=IndexState.DOESNOTEXIST)
    lifecycle.log_manager("idx").write(base.derive(0, IndexState.CREATING))
    assert lifecycle.get("idx").state is IndexState.CREATING
    with pytest.raises(IndexStateError, match=r"cannot create index 'Idx'.*CREATING.*cancel"):
        lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    gone = lifecycle.cancel("idx")
    assert gone.state is IndexState.DOESNOTEXIST
    assert os.listdir(system_path) == []
    with pytest.raises(IndexNotFoundError):
        lifecycle.get("idx")
    assert lifecycle.create("idx", "covering", CONFIG, make_build(fs)).state is IndexState.ACTIVE


def test_failed_delete_cancels_to_active(fs, lifecycle):
    created = lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    log = lifecycle.log_manager("idx")
    log.write(created.derive(created.id + 1, IndexState.DELETING))  # a crashed delete
    with pytest.raises(IndexStateError, match="DELETING"):
        lifecycle.restore("idx")
    assert lifecycle.cancel("idx").state is IndexState.ACTIVE


class _FailingDeleteFs:
    """A HadoopFs whose recursive deletes of data versions fail (a vacuum that crashes)."""

    def __init__(self, fs: HadoopFs):
        self._fs = fs

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fs, name)

    def delete(self, path: str, recursive: bool = True) -> bool:
        if "v__=" in path:
            raise OSError(f"cannot delete {path}")
        return self._fs.delete(path, recursive)


def test_crashed_vacuum_cancels_to_doesnotexist(fs, lifecycle, system_path):
    lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    lifecycle.delete("idx")
    # the vacuum fails, and so does its rollback (which finishes the vacuum)
    with pytest.raises(IndexOperationError, match=r"vacuumIndex of index 'idx' failed \(OSError: "
                                                  r"cannot delete .*rolling it back failed too "
                                                  r".*run cancel\('idx'\)"):
        IndexLifecycle(_FailingDeleteFs(fs), system_path).vacuum("idx")
    assert lifecycle.get("idx").state is IndexState.CANCELLING
    assert IndexState.VACUUMING in log_states(lifecycle, "idx")
    with pytest.raises(IndexStateError, match="CANCELLING.*cancel"):
        lifecycle.restore("idx")
    assert lifecycle.cancel("idx").state is IndexState.DOESNOTEXIST
    assert os.listdir(system_path) == []


class _RacingFs:
    """A HadoopFs that makes its first write of one log entry wait for the other racer."""

    def __init__(self, fs: HadoopFs, barrier: threading.Barrier, entry_file: str):
        self._fs, self._barrier, self._entry_file = fs, barrier, entry_file
        self._waited = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fs, name)

    def create_exclusive(self, path: str, text: str) -> bool:
        if path.endswith(self._entry_file) and not self._waited:
            self._waited = True
            self._barrier.wait(timeout=30)
        return self._fs.create_exclusive(path, text)


def _race(fs: HadoopFs, system_path: str, entry_file: str, action) -> list[Any]:
    """Runs ``action(lifecycle, i)`` in two threads with separate lifecycles; their results."""
    barrier = threading.Barrier(2)
    results: list[Any] = [None, None]

    def run(i: int) -> None:
        lifecycle = IndexLifecycle(_RacingFs(fs, barrier, entry_file), system_path)
        try:
            results[i] = action(lifecycle, i)
        except Exception as exc:  # noqa: BLE001 - collected for the assertions
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results


def _assert_well_formed(lifecycle: IndexLifecycle, name: str) -> None:
    log = lifecycle.log_manager(name)
    ids = log.ids()
    assert ids == list(range(len(ids)))
    entries = [log.get(i) for i in ids]
    assert all(e.id == i for i, e in zip(ids, entries))
    assert log.latest_stable() == entries[-1]
    names = os.listdir(local(log.log_path))
    assert not [n for n in names if n.endswith(".tmp")]


def test_concurrent_creates_one_wins(fs, lifecycle, system_path):
    for round_ in range(3):
        name = f"race{round_}"
        builds: list[str] = []

        def create(lc: IndexLifecycle, i: int) -> IndexLogEntry:
            return lc.create(name, "covering", CONFIG, make_build(fs, f"writer{i}", builds))

        results = _race(fs, system_path, "/_log/0.json", create)
        winners = [r for r in results if isinstance(r, IndexLogEntry)]
        losers = [r for r in results if isinstance(r, Exception)]
        assert len(winners) == 1 and len(losers) == 1, results
        assert isinstance(losers[0], ConcurrentModificationError)
        assert f"index '{name}' was changed by another operation at the same time" in str(losers[0])
        assert "retry" in str(losers[0])
        assert len(builds) == 1  # the loser never built anything
        assert lifecycle.get(name) == winners[0]
        assert log_states(lifecycle, name) == [IndexState.CREATING, IndexState.ACTIVE]
        _assert_well_formed(lifecycle, name)


def test_concurrent_deletes_one_wins(fs, lifecycle, system_path):
    lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    results = _race(fs, system_path, "/_log/2.json", lambda lc, i: lc.delete("idx"))
    assert sorted(type(r).__name__ for r in results) == ["ConcurrentModificationError",
                                                         "IndexLogEntry"]
    assert log_states(lifecycle, "idx") == [IndexState.CREATING, IndexState.ACTIVE,
                                            IndexState.DELETING, IndexState.DELETED]
    _assert_well_formed(lifecycle, "idx")


def test_concurrent_create_and_late_create(fs, lifecycle):
    """A create that starts after another finished sees the index and says it exists."""
    lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    other = IndexLifecycle(fs, lifecycle.system_path)
    with pytest.raises(IndexExistsError):
        other.create("idx", "covering", CONFIG, make_build(fs))


def test_corrupt_log_entry_on_disk_is_listed_and_vacuumed(fs, lifecycle, system_path):
    lifecycle.create("Idx", "covering", CONFIG, make_build(fs))
    lifecycle.create("other", "covering", CONFIG, make_build(fs))
    with open(os.path.join(system_path, "idx", "_log", "2.json"), "w") as f:
        f.write('{"id": 2')   # truncated by an outside edit
    corrupt, other = lifecycle.list()
    assert (corrupt.name, corrupt.state, other.state) == ("Idx", IndexState.CORRUPT,
                                                          IndexState.ACTIVE)
    assert corrupt.properties["corruptFile"] == f"{lifecycle.system_path}/idx/_log/2.json"
    with pytest.raises(IndexStateError, match=r"cannot delete index 'Idx': it is CORRUPT: .*"
                                              r"2\.json is corrupt.*vacuum\('idx'\)"):
        lifecycle.delete("idx")
    assert lifecycle.vacuum("idx").state is IndexState.DOESNOTEXIST
    assert sorted(os.listdir(system_path)) == ["other"]
