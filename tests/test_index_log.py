"""The index log (indexes/log.py) and the lifecycle actions over it (indexes/lifecycle.py).

The log and lifecycle tests run over both file systems, as the params of the fixture ``site``:
``memory`` (indexes.fs.MemoryFs: no JVM, no Spark; ``-k memory`` runs them alone) and ``hadoop``
(HadoopFs over a local temporary directory, through the session ``spark``). What belongs to one
file system stays with it: HadoopFs's create_exclusive and a Spark build here, MemoryFs's own
semantics in tests/test_lifecycle_memory.py."""
from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import dataclass

import pytest

from accelerator.runtime import jvm
from indexes import log_files
from indexes.description import SourceDescription
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
from indexes.fs import FileSystem, HadoopFs, MemoryFs
from indexes.lifecycle import IndexLifecycle
from indexes.log import (
    STABLE_STATES,
    TRANSIENT_STATES,
    IndexLogEntry,
    IndexLogManager,
    IndexState,
)
from tests.fs_doubles import BrokenFs, Clock, race

CONFIG = {"indexedColumns": ["id"], "includedColumns": ["name"], "numBuckets": 2}


def local(path: str) -> str:
    """The local path of a ``file:`` URI."""
    return path[len("file:"):] if path.startswith("file:") else path


@dataclass
class Site:
    """A file system under test and the system path the indexes live in on it."""

    kind: str   # "memory" or "hadoop"
    fs: FileSystem
    path: str   # the system path as the tests pass it
    root: str   # the same path fully qualified: what IndexLifecycle.system_path must be

    def listdir(self, path: str) -> list[str]:
        """Every name directly under the directory ``path``: in memory as MemoryFs lists it;
        on the local disk as the OS lists it, sorted (hidden checksum files too; a missing
        directory raises FileNotFoundError)."""
        if self.kind == "hadoop":
            return sorted(os.listdir(local(path)))
        return [info.name for info in self.fs.list(path)]

    def listed(self, paths: list[str]) -> list[str]:
        """``paths`` that an action returns in the order the file system lists them: as they
        are in memory (MemoryFs lists by name); sorted on the local disk, whose order is
        arbitrary."""
        return sorted(paths) if self.kind == "hadoop" else paths

    def write_outside(self, path: str, text: str) -> None:
        """Writes a new file as an edit outside the accelerator does: on the local disk with
        plain file I/O (no Hadoop checksum file), in memory through MemoryFs."""
        if self.kind == "hadoop":
            os.makedirs(os.path.dirname(local(path)), exist_ok=True)
            with open(local(path), "w") as f:
                f.write(text)
        else:
            self.fs.write_text(path, text)


@pytest.fixture(params=["memory", "hadoop"])
def site(request) -> Site:
    if request.param == "memory":
        # a clock that stands still: nothing of the log or the lifecycle may go by file times
        return Site("memory", MemoryFs(Clock()), "memory:///sys", "memory:///sys")
    path = request.getfixturevalue("system_path")
    return Site("hadoop", HadoopFs(request.getfixturevalue("spark")), path, f"file:{path}")


@pytest.fixture
def fs(site) -> FileSystem:
    return site.fs


@pytest.fixture
def lifecycle(site) -> IndexLifecycle:
    return IndexLifecycle(site.fs, site.path)


@pytest.fixture
def hadoop_fs(spark) -> HadoopFs:
    return HadoopFs(spark)


def make_build(fs: FileSystem, tag: str = "data", calls: list[str] | None = None):
    """A build that writes one small file into the data path and reports it."""

    def build(data_path: str) -> tuple[dict, dict]:
        if calls is not None:
            calls.append(data_path)
        fs.write_text(f"{data_path}/part-0.txt", tag)
        source = {"format": "parquet", "rootPaths": ["/lake/t"], "partitionColumns": [],
                  "options": {}, "files": [["/lake/t/a.parquet", 10, 1000]]}
        return SourceDescription.from_json(source), {"numFiles": 1, "sizeInBytes": len(tag)}

    return build


def failing_build(fs: FileSystem, error: BaseException, partial: bool = True):
    """A build that writes part of its data (nothing unless ``partial``), then fails with
    ``error``."""

    def build(data_path: str) -> tuple[dict, dict]:
        if partial:
            fs.write_text(f"{data_path}/part-0.txt", "partial")
        raise error

    return build


def log_states(lifecycle: IndexLifecycle, name: str) -> list[IndexState]:
    log = lifecycle.log_manager(name)
    return [log.get(i).state for i in log.ids()]


# ---------------------------------------------------------------------- entries


def test_entry_json_round_trip():
    entry = IndexLogEntry(
        id=3, name="MyIdx", kind="covering", state=IndexState.ACTIVE, timestamp=1700000000123,
        config=dict(CONFIG),
        source=SourceDescription.from_json(
            {"format": "parquet", "rootPaths": ["file:/lake/t"], "partitionColumns": ["d"],
             "options": {"mergeSchema": "false"}, "files": [["file:/lake/t/a", 10, 99]]}),
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


def test_create_exclusive_two_writers_one_winner(hadoop_fs, tmp_path):
    fs = hadoop_fs
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


def test_missing_paths_list_empty_and_read_as_file_not_found(site, fs):
    """What a reader racing a deletion relies on (e.g. the cache manifest re-lists a key whose
    old version was collected): the same answers from every file system."""
    gone = f"{site.path}/gone"
    assert fs.list(gone) == []
    with pytest.raises(FileNotFoundError):
        fs.read_text(f"{gone}/0.json")
    assert fs.create_exclusive(f"{gone}/0.json", "x")
    fs.delete(f"{gone}/0.json", recursive=False)
    with pytest.raises(FileNotFoundError):
        fs.read_text(f"{gone}/0.json")


@pytest.mark.parametrize("kind", ["memory", "hadoop", "hadoop-bulk"])
def test_list_each_and_read_each_answer_as_list_and_read_text(kind, spark, tmp_path):
    """What the cache manifest reads thousands of entries with, in one call each: the same
    answers as one list or read per path (the JVM's BulkFiles for ``hadoop-bulk``)."""
    fs = {"memory": lambda: MemoryFs(Clock()), "hadoop": lambda: HadoopFs(spark),
          "hadoop-bulk": lambda: jvm.hadoop_fs(spark)}[kind]()
    root = "memory:///bulk" if kind == "memory" else f"file:{tmp_path}"
    texts = {"a/0.json": '{"k": 1}', "a/1.json": "\u00e9\u2026 \U0001f600", "b/x/2.json": ""}
    for name, text in texts.items():
        fs.write_text(f"{root}/{name}", text)
    folders = [f"{root}/{p}" for p in ("a", "b", "b/x", "gone", "a/0.json")]
    assert fs.list_each(folders) == [fs.list(p) for p in folders]
    assert [len(listed) for listed in fs.list_each(folders)] == [2, 1, 1, 0, 1]
    files = [f"{root}/{n}" for n in texts] + [f"{root}/gone/0.json"]
    assert fs.read_each(files) == [*texts.values(), None]
    assert fs.list_each([]) == [] and fs.read_each([]) == []


# ---------------------------------------------------------------------- IndexLogManager


def _entry(id: int, state: IndexState) -> IndexLogEntry:
    return IndexLogEntry(id=id, name="idx", kind="covering", state=state,
                         content={"dataVersion": id})


def test_log_manager_write_get_latest(site, fs):
    log = IndexLogManager(fs, f"{site.path}/idx/")
    assert log.log_path == f"{site.path}/idx/_log"
    assert log.latest_id() is None and log.latest() is None and log.latest_stable() is None
    assert log.get(0) is None
    assert log.write(_entry(0, IndexState.CREATING))
    assert not log.write(_entry(0, IndexState.ACTIVE))  # id taken: lost race
    assert log.get(0).state is IndexState.CREATING
    assert log.write(_entry(1, IndexState.ACTIVE))
    # junk in _log is ignored
    for junk in ["foo.txt", "7.json.abc.tmp", "x.json", "01.json", "9.json.crc"]:
        site.write_outside(f"{log.log_path}/{junk}", "junk")
    fs.mkdirs(f"{log.log_path}/8.json")
    assert log.ids() == [0, 1]
    assert log.latest_id() == 1 and log.latest().state is IndexState.ACTIVE
    assert log.latest_stable().id == 1  # no latestStable copy yet: a scan
    log.write_latest_stable(log.get(1))
    assert IndexLogEntry.from_json(fs.read_text(f"{log.log_path}/latestStable")) == log.get(1)
    assert log.latest_stable() == log.get(1)
    assert not [n for n in site.listdir(log.log_path) if n.startswith("latestStable.")]
    with pytest.raises(ValueError):
        log.write_latest_stable(_entry(0, IndexState.CREATING))


def test_latest_stable_ignores_stale_or_broken_copy(site, fs):
    log = IndexLogManager(fs, f"{site.path}/idx")
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


def test_log_entry_modified_outside(site, fs):
    log = IndexLogManager(fs, f"{site.path}/idx")
    log.write(_entry(0, IndexState.CREATING))
    fs.write_text(f"{log.log_path}/1.json", _entry(5, IndexState.ACTIVE).to_json())
    with pytest.raises(CorruptLogError, match=r"1\.json holds id 5") as info:
        log.get(1)
    assert info.value.path == f"{site.path}/idx/_log/1.json"
    assert isinstance(info.value, AcceleratorError)
    fs.write_text(f"{log.log_path}/0.json", "{not json", overwrite=True)
    with pytest.raises(CorruptLogError, match=r"0\.json is corrupt \(not valid JSON.*restore it "
                                              r"from a backup, or remove the index and its data "
                                              r"with vacuum\('idx'\)"):
        log.get(0)


def _listed_entry(id: int, state: IndexState, count: int) -> IndexLogEntry:
    """An entry whose source lists ``count`` files (the last with a deletion vector), with the
    lineage id of each."""
    files = [[f"file:/lake/t/part-{i:05d}.parquet", 100 + i, 1_700_000_000_000 + i]
             for i in range(count)]
    files[-1].append("dv:abc")
    source = SourceDescription.from_json({"format": "parquet", "rootPaths": ["file:/lake/t"],
                                          "fingerprint": "h128:x", "files": files})
    ids = {f[0]: i for i, f in enumerate(files)}   # a covering index's lineage ids
    return IndexLogEntry(id=id, name="idx", kind="covering", state=state, timestamp=1,
                         source=source, content={"dataVersion": 0, "fileIds": ids})


def test_many_source_files_are_kept_beside_the_log_and_read_back(site, fs, monkeypatch):
    monkeypatch.setattr(log_files, "INLINE_FILES", 2)
    log = IndexLogManager(fs, f"{site.path}/idx")
    assert log.write(_listed_entry(0, IndexState.CREATING, 3))
    assert log.write(_listed_entry(1, IndexState.ACTIVE, 3))
    log.write_latest_stable(log.get(1))
    written = json.loads(fs.read_text(f"{log.log_path}/1.json"))
    stored, content = written["source"], written["content"]
    assert "files" not in stored and stored["filesRef"]["count"] == 3
    assert stored["fingerprint"] == "h128:x"
    assert "fileIds" not in content and content["fileIdsRef"]["count"] == 3
    # one file for the three writes of the same files, one for their ids, no temp file left
    names = site.listdir(f"{log.log_path}/files")
    assert sorted(n for n in names if n.endswith(".parquet")) == sorted(
        [stored["filesRef"]["file"], content["fileIdsRef"]["file"]])
    assert not [n for n in names if n.endswith(".tmp")]
    assert log.get(1) == _listed_entry(1, IndexState.ACTIVE, 3)
    assert log.get(1).source.files[-1].deletion_vector == "dv:abc"
    assert log.get(1).content["fileIds"]["file:/lake/t/part-00002.parquet"] == 2
    assert log.latest_stable() == log.get(1)
    # as another process reads it (nothing parsed before), and the same listing reused
    assert IndexLogManager(fs, f"{site.path}/idx").get(0).source == log.get(1).source
    # at most INLINE_FILES files stay in the entry, as do entries written before listings
    # were kept beside the log
    assert log.write(_listed_entry(2, IndexState.REFRESHING, 2))
    inline = json.loads(fs.read_text(f"{log.log_path}/2.json"))
    assert "files" in inline["source"] and "fileIds" in inline["content"]
    site.write_outside(f"{log.log_path}/3.json", _listed_entry(3, IndexState.ACTIVE, 5).to_json())
    assert log.get(3) == _listed_entry(3, IndexState.ACTIVE, 5)


def test_an_entry_whose_listing_is_missing_or_altered_is_corrupt(site, fs, monkeypatch):
    monkeypatch.setattr(log_files, "INLINE_FILES", 2)
    # (a path of its own: an entry read before under the same path with the same text is not
    # parsed again, and its listing not read again)
    log = IndexLogManager(fs, f"{site.path}/altered")
    assert log.write(_listed_entry(0, IndexState.ACTIVE, 3))
    text = fs.read_text(f"{log.log_path}/0.json")
    listing = f"{log.log_path}/files/{json.loads(text)['source']['filesRef']['file']}"
    # another listing's bytes under this one's name
    other = IndexLogManager(fs, f"{site.path}/other")
    other.write(_listed_entry(0, IndexState.ACTIVE, 4))
    fs.delete(listing, recursive=False)
    fs.write_bytes(listing, fs.read_bytes(f"{other.log_path}/files/" + json.loads(
        fs.read_text(f"{other.log_path}/0.json"))["source"]["filesRef"]["file"]))
    site.write_outside(f"{log.log_path}/1.json", text.replace('"id": 0', '"id": 1'))
    with pytest.raises(CorruptLogError, match=r"1\.json is corrupt \(its file .* does not "
                                              r"hold the bytes it was written with\)"):
        log.get(1)
    fs.delete(listing, recursive=False)
    site.write_outside(f"{log.log_path}/2.json", text.replace('"id": 0', '"id": 2'))
    with pytest.raises(CorruptLogError, match=r"2\.json is corrupt \(its file .* is missing"):
        log.get(2)
    latest = log.latest()
    assert latest.state is IndexState.CORRUPT and latest.properties["corruptFile"].endswith(
        "/altered/_log/2.json")


# ---------------------------------------------------------------------- lifecycle actions


def test_create_with_spark_build(spark, hadoop_fs, system_path):
    lifecycle = IndexLifecycle(hadoop_fs, system_path)

    def build(data_path: str) -> tuple[dict, dict]:
        df = spark.range(10).selectExpr("id", "cast(id as string) as name")
        df.write.parquet(data_path)
        return (SourceDescription.from_json({"format": "parquet", "rootPaths": ["/lake"]}),
                {"schema": df.schema.json()})

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


def test_create(site, fs, lifecycle):
    entry = lifecycle.create("MyIndex", "covering", CONFIG, make_build(fs, "v0"))
    assert lifecycle.system_path == site.root
    assert entry.state is IndexState.ACTIVE and entry.id == 1 and entry.data_version == 0
    assert entry.name == "MyIndex" and entry.kind == "covering" and entry.config == CONFIG
    assert entry.content == {"numFiles": 1, "sizeInBytes": 2, "dataVersion": 0,
                             "path": f"{site.root}/myindex/v__=0"}
    assert fs.read_text(f"{site.root}/myindex/v__=0/part-0.txt") == "v0"
    assert log_states(lifecycle, "myindex") == [IndexState.CREATING, IndexState.ACTIVE]
    assert lifecycle.log_manager("MYINDEX").latest_stable() == entry
    assert lifecycle.get("myINDEX") == entry
    assert lifecycle.list() == [entry]
    with pytest.raises(IndexExistsError, match=r"index 'MyIndex' already exists \(state ACTIVE\)"):
        lifecycle.create("myindex", "covering", CONFIG, make_build(fs))


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


def test_refresh_and_optimize_write_next_versions(site, fs, lifecycle):
    created = lifecycle.create("idx", "covering", CONFIG, make_build(fs, "v0"))
    refreshed = lifecycle.refresh("idx", make_build(fs, "v1"))
    assert refreshed.id == 3 and refreshed.state is IndexState.ACTIVE
    assert refreshed.data_version == 1 and refreshed.content["path"] == f"{site.root}/idx/v__=1"
    assert fs.read_text(f"{site.root}/idx/v__=1/part-0.txt") == "v1"
    assert fs.exists(created.content["path"])  # the old version is kept
    assert refreshed.config == CONFIG and refreshed.kind == "covering"
    again = lifecycle.refresh("idx", make_build(fs, "v2"))
    assert again.data_version == 2 and again.content["path"] == f"{site.root}/idx/v__=2"
    optimized = lifecycle.refresh("idx", make_build(fs, "v3"), IndexState.OPTIMIZING)
    assert optimized.data_version == 3
    assert log_states(lifecycle, "idx") == [
        IndexState.CREATING, IndexState.ACTIVE, IndexState.REFRESHING, IndexState.ACTIVE,
        IndexState.REFRESHING, IndexState.ACTIVE, IndexState.OPTIMIZING, IndexState.ACTIVE]


def test_record(site, fs, lifecycle):
    created = lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    seen: list[IndexLogEntry] = []

    def update(entry: IndexLogEntry) -> tuple[dict, dict]:
        seen.append(entry)
        return (SourceDescription.from_json({**entry.source.to_json(),
                                             "appended": [["/lake/t/b", 5, 2]]}), entry.content)

    recorded = lifecycle.record("idx", update)
    assert seen == [created]
    assert recorded.id == 3 and recorded.source.extra["appended"] == [["/lake/t/b", 5, 2]]
    assert recorded.content == created.content and recorded.data_version == 0
    assert site.listdir(f"{site.root}/idx") == ["_log", "v__=0"]  # no new data version
    assert log_states(lifecycle, "idx")[-2:] == [IndexState.REFRESHING, IndexState.ACTIVE]


def test_delete_restore_vacuum(site, fs, lifecycle):
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
    assert not fs.exists(f"{site.root}/idx")
    assert site.listdir(site.root) == [] and lifecycle.list() == []
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
    for action in [lambda: lifecycle.refresh("idx", make_build(fs)),
                   lambda: lifecycle.record("idx", lambda e: (e.source, e.content)),
                   lambda: lifecycle.vacuum_outdated("idx", lambda e: [])]:
        with pytest.raises(IndexStateError, match=r"index 'idx'.*DELETED.*restore\('idx'\)"):
            action()
    with pytest.raises(IndexStateError, match="cannot delete index 'idx'.*DELETED"):
        lifecycle.delete("idx")
    for action in [lifecycle.get, lifecycle.delete, lifecycle.cancel]:
        with pytest.raises(IndexNotFoundError, match="no index named 'other'.*existing: idx"):
            action("other")


def test_not_found_lists_existing(site, fs, lifecycle):
    for name in ["beta", "Alpha"]:
        lifecycle.create(name, "covering", CONFIG, make_build(fs))
    fs.mkdirs(f"{site.root}/_history/date=2024-01-01")
    fs.mkdirs(f"{site.root}/_events")
    assert [e.name for e in lifecycle.list()] == ["Alpha", "beta"]
    for action in [lifecycle.get, lifecycle.delete, lifecycle.restore, lifecycle.vacuum,
                   lifecycle.cancel, lambda n: lifecycle.refresh(n, make_build(fs))]:
        with pytest.raises(IndexNotFoundError) as info:
            action("gamma")
        assert str(info.value) == (f"no index named 'gamma' in {lifecycle.system_path}; "
                                   f"existing: Alpha, beta")


@pytest.mark.parametrize("name", ["", "a/b", "../x", "a b", "a.b", "_history", "idx*", None])
def test_invalid_names_rejected(site, fs, lifecycle, name):
    with pytest.raises(InvalidIndexConfigError, match="invalid index name.*letters, digits"):
        lifecycle.create(name, "covering", CONFIG, make_build(fs))
    with pytest.raises(InvalidIndexConfigError, match="invalid index name"):
        lifecycle.get(name)
    assert not fs.exists(site.root) or site.listdir(site.root) == []


def test_valid_names(fs, lifecycle):
    for name in ["a", "A-1_b", "123", "x-"]:
        assert lifecycle.create(name, "covering", CONFIG, make_build(fs)).name == name


def test_vacuum_outdated_keeps_referenced_and_recent_versions(site, fs, lifecycle):
    lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    lifecycle.refresh("idx", make_build(fs))
    lifecycle.refresh("idx", make_build(fs))
    current = lifecycle.get("idx")
    # keeps what the current entry reads, and versions replaced less than an hour ago
    removed, kept = lifecycle.vacuum_outdated("idx", lambda e: [e.content["path"]], 3_600_000)
    assert removed == [] and site.listed(kept) == [f"{site.root}/idx/v__=0",
                                                   f"{site.root}/idx/v__=1"]
    removed, kept = lifecycle.vacuum_outdated(
        "idx", lambda e: [e.content["path"], f"{site.path}/idx/v__=0"])
    assert removed == [f"{site.root}/idx/v__=1"] and kept == []
    assert site.listdir(f"{site.root}/idx") == ["_log", "v__=0", "v__=2"]
    after = lifecycle.get("idx")
    assert after.state is IndexState.ACTIVE and after.content == current.content
    assert log_states(lifecycle, "idx")[-2:] == [IndexState.VACUUMING_OUTDATED, IndexState.ACTIVE]


# ---------------------------------------------------------------------- crashed operations


def _crash(lifecycle: IndexLifecycle, name: str, state: IndexState) -> IndexLogEntry:
    """Writes the begin entry of an operation whose process then died."""
    log = lifecycle.log_manager(name)
    latest = log.latest()
    entry = latest.derive(latest.id + 1, state)
    assert log.write(entry)
    return entry


@pytest.mark.parametrize("state", [IndexState.REFRESHING, IndexState.OPTIMIZING,
                                   IndexState.DELETING, IndexState.VACUUMING_OUTDATED])
def test_transient_state_blocks_until_cancel(site, fs, lifecycle, state):
    created = lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    # a process that died mid-operation: its begin entry and part of its data, nothing more
    _crash(lifecycle, "idx", state)
    fs.write_text(f"{site.root}/idx/v__=1/part-0.txt", "partial")
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
    assert cancelled.data_version == 0
    assert not fs.exists(f"{site.root}/idx/v__=1")  # partial data gone
    assert log_states(lifecycle, "idx") == [IndexState.CREATING, IndexState.ACTIVE, state,
                                            IndexState.CANCELLING, IndexState.ACTIVE]
    assert lifecycle.log_manager("idx").latest_stable() == cancelled
    assert lifecycle.refresh("idx", make_build(fs, "ok")).data_version == 1


def test_crashed_create_and_restore_are_cancelled(site, fs, lifecycle):
    base = IndexLogEntry(id=-1, name="Idx", kind="covering", state=IndexState.DOESNOTEXIST)
    assert lifecycle.log_manager("idx").write(base.derive(0, IndexState.CREATING))
    fs.write_text(f"{site.root}/idx/v__=0/part-0.txt", "partial")
    assert lifecycle.get("idx").state is IndexState.CREATING
    with pytest.raises(IndexStateError, match=r"cannot create index 'Idx'.*CREATING.*cancel"):
        lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    assert lifecycle.cancel("idx").state is IndexState.DOESNOTEXIST
    assert site.listdir(site.root) == []
    with pytest.raises(IndexNotFoundError):
        lifecycle.get("idx")
    assert lifecycle.create("idx", "covering", CONFIG, make_build(fs)).state is IndexState.ACTIVE
    lifecycle.delete("idx")
    _crash(lifecycle, "idx", IndexState.RESTORING)
    assert lifecycle.cancel("idx").state is IndexState.DELETED


def test_crashed_vacuum_is_finished_by_cancel(site, fs, lifecycle):
    lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    lifecycle.delete("idx")
    _crash(lifecycle, "idx", IndexState.VACUUMING)
    fs.delete(f"{site.root}/idx/v__=0/part-0.txt")  # its data partly gone
    with pytest.raises(IndexStateError, match="VACUUMING.*cancel"):
        lifecycle.restore("idx")
    assert lifecycle.cancel("idx").state is IndexState.DOESNOTEXIST
    assert site.listdir(site.root) == []


def test_a_crash_mid_create_still_needs_cancel(site, fs, lifecycle):
    """A process that dies after writing the begin entry rolls nothing back: the index stays
    CREATING (listed, unusable) until cancel."""
    lifecycle.create("other", "covering", CONFIG, make_build(fs))
    base = IndexLogEntry(id=-1, name="idx", kind="covering", state=IndexState.DOESNOTEXIST)
    assert lifecycle.log_manager("idx").write(base.derive(0, IndexState.CREATING))
    fs.write_text(f"{site.root}/idx/v__=0/part-0.txt", "partial")  # then the process died
    assert lifecycle.get("idx").state is IndexState.CREATING
    assert [e.state for e in lifecycle.list()] == [IndexState.CREATING, IndexState.ACTIVE]
    with pytest.raises(IndexStateError, match=r"cannot create index 'idx'.*CREATING.*its "
                                              r"process died.*cancel\('idx'\)"):
        lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    assert lifecycle.cancel("idx").state is IndexState.DOESNOTEXIST
    assert site.listdir(site.root) == ["other"]
    assert lifecycle.create("idx", "covering", CONFIG, make_build(fs)).state is IndexState.ACTIVE


# ---------------------------------------------------------------------- concurrent operations


def _assert_well_formed(site: Site, lifecycle: IndexLifecycle, name: str) -> None:
    log = lifecycle.log_manager(name)
    ids = log.ids()
    assert ids == list(range(len(ids)))
    entries = [log.get(i) for i in ids]
    assert all(e.id == i for i, e in zip(ids, entries))
    assert log.latest_stable() == entries[-1]
    assert not [n for n in site.listdir(log.log_path) if n.endswith(".tmp")]


def test_concurrent_creates_one_wins(site, fs, lifecycle):
    for round_ in range(5):
        name = f"race{round_}"
        builds: list[str] = []

        def create(lc: IndexLifecycle, i: int) -> IndexLogEntry:
            return lc.create(name, "covering", CONFIG, make_build(fs, f"writer{i}", builds))

        results = race(fs, site.path, "/_log/0.json", create)
        winners = [r for r in results if isinstance(r, IndexLogEntry)]
        losers = [r for r in results if isinstance(r, Exception)]
        assert len(winners) == 1 and len(losers) == 1, results
        assert isinstance(losers[0], ConcurrentModificationError)
        assert f"index '{name}' was changed by another operation at the same time" in str(losers[0])
        assert "retry" in str(losers[0])
        assert len(builds) == 1  # the loser never built anything
        assert lifecycle.get(name) == winners[0]
        assert log_states(lifecycle, name) == [IndexState.CREATING, IndexState.ACTIVE]
        assert lifecycle.log_manager(name).latest_stable() == winners[0]
        _assert_well_formed(site, lifecycle, name)


@pytest.mark.parametrize("operation, states, data_version", [
    ("delete", [IndexState.DELETING, IndexState.DELETED], 0),
    ("refresh", [IndexState.REFRESHING, IndexState.ACTIVE], 1)])
def test_concurrent_deletes_or_refreshes_one_wins(site, fs, lifecycle, operation, states,
                                                 data_version):
    lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    action = {"delete": lambda lc, i: lc.delete("idx"),
              "refresh": lambda lc, i: lc.refresh("idx", make_build(fs, f"writer{i}"))}[operation]
    results = race(fs, site.path, "/_log/2.json", action)
    assert sorted(type(r).__name__ for r in results) == ["ConcurrentModificationError",
                                                         "IndexLogEntry"]
    winner = next(r for r in results if isinstance(r, IndexLogEntry))
    assert lifecycle.get("idx") == winner and winner.data_version == data_version
    assert log_states(lifecycle, "idx") == [IndexState.CREATING, IndexState.ACTIVE, *states]
    _assert_well_formed(site, lifecycle, "idx")


def test_concurrent_create_and_late_create(fs, lifecycle):
    """A create that starts after another finished sees the index and says it exists."""
    lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    other = IndexLifecycle(fs, lifecycle.system_path)
    with pytest.raises(IndexExistsError):
        other.create("idx", "covering", CONFIG, make_build(fs))


# ---------------------------------------------------------------------- failed operations roll back


@pytest.mark.parametrize("partial", [True, False], ids=["half-written", "nothing-written"])
def test_failed_create_leaves_the_name_free(site, fs, lifecycle, partial):
    cause = RuntimeError("build blew up")
    with pytest.raises(IndexOperationError) as info:
        lifecycle.create("Idx", "covering", CONFIG, failing_build(fs, cause, partial))
    assert str(info.value) == ("createIndex of index 'Idx' failed and was rolled back (the index "
                               "does not exist): RuntimeError: build blew up")
    assert info.value.__cause__ is cause
    assert (info.value.index, info.value.operation) == ("Idx", "createIndex")
    assert isinstance(info.value, AcceleratorError)
    with pytest.raises(IndexNotFoundError):
        lifecycle.get("idx")
    assert lifecycle.list() == [] and site.listdir(site.root) == []  # its data directory is gone
    created = lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    assert created.id == 1 and created.state is IndexState.ACTIVE


def test_failed_create_keeps_the_users_error(site, fs, lifecycle):
    cause = InvalidIndexConfigError("index 'idx': column 'x' has an unsupported type")
    with pytest.raises(InvalidIndexConfigError) as info:
        lifecycle.create("idx", "covering", CONFIG, failing_build(fs, cause))
    assert info.value is cause
    assert lifecycle.list() == [] and site.listdir(site.root) == []


def _assert_failed_refresh_rolls_back(site: Site, lifecycle: IndexLifecycle, state: IndexState,
                                      operation: str, previous: IndexLogEntry) -> None:
    """A refresh (or optimize) of 'idx' whose build fails leaves it on ``previous``."""
    version = previous.data_version
    with pytest.raises(IndexOperationError) as info:
        lifecycle.refresh("idx", failing_build(site.fs, ValueError("executor lost")), state)
    assert str(info.value) == (f"{operation} of index 'idx' failed and was rolled back (the "
                               f"index is ACTIVE on data version {version}): ValueError: "
                               f"executor lost")
    after = lifecycle.get("idx")
    assert after.state is IndexState.ACTIVE and after.content == previous.content
    assert after.source == previous.source and after.data_version == version
    assert [e.state for e in lifecycle.list()] == [IndexState.ACTIVE]
    # the partial data of version + 1 is removed
    assert site.listdir(f"{site.root}/idx") == ["_log", *(f"v__={v}" for v in range(version + 1))]
    assert log_states(lifecycle, "idx")[-4:] == [IndexState.ACTIVE, state,
                                                 IndexState.CANCELLING, IndexState.ACTIVE]
    assert lifecycle.log_manager("idx").latest_stable() == after


@pytest.mark.parametrize("state, operation", [(IndexState.REFRESHING, "refreshIndex"),
                                              (IndexState.OPTIMIZING, "optimizeIndex")])
def test_failed_refresh_stays_on_the_previous_version(site, fs, lifecycle, state, operation):
    created = lifecycle.create("idx", "covering", CONFIG, make_build(fs, "v0"))
    _assert_failed_refresh_rolls_back(site, lifecycle, state, operation, created)
    assert log_states(lifecycle, "idx") == [IndexState.CREATING, IndexState.ACTIVE, state,
                                            IndexState.CANCELLING, IndexState.ACTIVE]
    previous = lifecycle.refresh("idx", make_build(fs, "v1"))
    assert previous.data_version == 1 and previous.content["path"] == f"{site.root}/idx/v__=1"
    assert fs.read_text(previous.content["path"] + "/part-0.txt") == "v1"
    _assert_failed_refresh_rolls_back(site, lifecycle, state, operation, previous)
    again = lifecycle.refresh("idx", make_build(fs, "v2"))
    assert again.data_version == 2 and fs.read_text(f"{site.root}/idx/v__=2/part-0.txt") == "v2"


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


def test_failed_vacuum_outdated_is_rolled_back(site, fs, lifecycle):
    lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    current = lifecycle.refresh("idx", make_build(fs))
    broken = BrokenFs(fs, "delete", marker="/v__=")
    broken.broken = True
    with pytest.raises(IndexOperationError) as info:
        IndexLifecycle(broken, site.path).vacuum_outdated("idx", lambda e: [e.content["path"]])
    assert str(info.value) == (
        f"vacuumIndex of index 'idx' failed and was rolled back (the index is ACTIVE on data "
        f"version 1): OSError: delete failed on {site.root}/idx/v__=0")
    assert lifecycle.get("idx").content == current.content
    assert site.listdir(f"{site.root}/idx") == ["_log", "v__=0", "v__=1"]


def test_failed_vacuum_whose_rollback_fails_needs_cancel(site, fs, lifecycle):
    lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    lifecycle.delete("idx")
    # the vacuum fails, and so does its rollback (which finishes the vacuum)
    broken = BrokenFs(fs, "delete", marker="/v__=")
    broken.broken = True
    with pytest.raises(IndexOperationError) as info:
        IndexLifecycle(broken, site.path).vacuum("idx")
    assert str(info.value) == (
        f"vacuumIndex of index 'idx' failed (OSError: delete failed on {site.root}/idx/v__=0), "
        f"and rolling it back failed too (OSError: delete failed on {site.root}/idx/v__=0); "
        f"run cancel('idx') to roll it back")
    assert isinstance(info.value.__cause__, OSError)
    assert lifecycle.get("idx").state is IndexState.CANCELLING
    assert IndexState.VACUUMING in log_states(lifecycle, "idx")
    with pytest.raises(IndexStateError, match=r"CANCELLING.*cancel\('idx'\)"):
        lifecycle.restore("idx")
    assert lifecycle.cancel("idx").state is IndexState.DOESNOTEXIST
    assert site.listdir(site.root) == []


def test_failed_refresh_whose_rollback_fails_needs_cancel(site, fs, lifecycle):
    created = lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    broken = BrokenFs(fs, "create_exclusive")

    def build(data_path: str) -> tuple[dict, dict]:
        fs.write_text(f"{data_path}/part-0.txt", "partial")
        broken.broken = True  # the file system fails from now on: no rollback entry either
        raise RuntimeError("disk gone")

    with pytest.raises(IndexOperationError) as info:
        IndexLifecycle(broken, site.path).refresh("idx", build)
    assert str(info.value) == (
        f"refreshIndex of index 'idx' failed (RuntimeError: disk gone), and rolling it back "
        f"failed too (OSError: create_exclusive failed on {site.root}/idx/_log/3.json); "
        f"run cancel('idx') to roll it back")
    assert lifecycle.get("idx").state is IndexState.REFRESHING
    assert fs.exists(f"{site.root}/idx/v__=1")
    cancelled = lifecycle.cancel("idx")
    assert cancelled.state is IndexState.ACTIVE and cancelled.content == created.content
    assert not fs.exists(f"{site.root}/idx/v__=1")


def test_interrupted_build_is_rolled_back_and_interrupt_kept(site, fs, lifecycle):
    lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    with pytest.raises(KeyboardInterrupt):
        lifecycle.refresh("idx", failing_build(fs, KeyboardInterrupt()))
    assert lifecycle.get("idx").state is IndexState.ACTIVE
    assert site.listdir(f"{site.root}/idx") == ["_log", "v__=0"]


# ---------------------------------------------------------------------- corrupt log entries


@pytest.mark.parametrize("text, error", [
    ("{ partial", r"is corrupt \(not valid JSON: "),
    ('{"id": 2, "name": "Idx"}', r"is corrupt \(not a valid index log entry: KeyError\('kind'\)\)"),
    ('[1, 2]', r"is corrupt \(not a valid index log entry: not a JSON object\)"),
    (_entry(7, IndexState.ACTIVE).to_json(), r"holds id 7"),
])
def test_corrupt_newest_entry_is_listed_as_corrupt(site, fs, lifecycle, caplog, text, error):
    lifecycle.create("Idx", "covering", CONFIG, make_build(fs))
    other = lifecycle.create("other", "covering", CONFIG, make_build(fs))
    corrupt_file = f"{site.root}/idx/_log/2.json"
    fs.write_text(corrupt_file, text)
    with caplog.at_level("WARNING", logger="accelerator.indexes.log"):
        listed = lifecycle.list()
    assert [e.state for e in listed] == [IndexState.CORRUPT, IndexState.ACTIVE]
    corrupt = listed[0]
    assert listed[1] == other
    assert (corrupt.id, corrupt.name, corrupt.kind, corrupt.config) == (2, "Idx", "covering",
                                                                      CONFIG)
    assert corrupt.source == SourceDescription() and corrupt.content == {}
    assert corrupt.data_version is None
    assert corrupt.properties["corruptFile"] == corrupt_file
    assert re.search(rf"^index log entry {re.escape(corrupt_file)} " + error,
                     corrupt.properties["error"])
    assert [r.getMessage() for r in caplog.records] == [corrupt.properties["error"]]
    assert not corrupt.state.is_stable and corrupt.state not in TRANSIENT_STATES
    assert lifecycle.get("IDX") == corrupt


def test_corrupt_log_entry_on_disk_is_listed_and_vacuumed(site, fs, lifecycle):
    lifecycle.create("Idx", "covering", CONFIG, make_build(fs))
    lifecycle.create("other", "covering", CONFIG, make_build(fs))
    site.write_outside(f"{site.root}/idx/_log/2.json", '{"id": 2')  # truncated by an outside edit
    corrupt, other = lifecycle.list()
    assert (corrupt.name, corrupt.state, other.state) == ("Idx", IndexState.CORRUPT,
                                                          IndexState.ACTIVE)
    assert corrupt.properties["corruptFile"] == f"{lifecycle.system_path}/idx/_log/2.json"
    with pytest.raises(IndexStateError, match=r"cannot delete index 'Idx': it is CORRUPT: .*"
                                              r"2\.json is corrupt.*vacuum\('idx'\)"):
        lifecycle.delete("idx")
    assert lifecycle.vacuum("idx").state is IndexState.DOESNOTEXIST
    assert site.listdir(site.root) == ["other"]


def test_corrupt_index_rejects_every_action_but_vacuum(site, fs, lifecycle):
    lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    fs.write_text(f"{site.root}/idx/_log/2.json", "garbage")
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
            f"{site.root}/idx/_log/2.json is corrupt (not valid JSON: ")
        assert str(info.value).endswith(
            "it was modified outside the accelerator: restore it from a backup, or remove the "
            "index and its data with vacuum('idx')")
    assert site.listdir(f"{site.root}/idx") == ["_log", "v__=0"]  # nothing was changed


def test_vacuum_removes_a_corrupt_index(site, fs, lifecycle):
    lifecycle.create("Idx", "covering", CONFIG, make_build(fs))
    lifecycle.refresh("idx", make_build(fs))
    lifecycle.create("other", "covering", CONFIG, make_build(fs))
    fs.write_text(f"{site.root}/idx/_log/4.json", "")
    gone = lifecycle.vacuum("idx")
    assert gone.state is IndexState.DOESNOTEXIST and gone.name == "Idx" and gone.id == 5
    assert site.listdir(site.root) == ["other"]
    with pytest.raises(IndexNotFoundError):
        lifecycle.get("idx")
    assert lifecycle.create("idx", "covering", CONFIG, make_build(fs)).id == 1


def test_corrupt_only_entry_is_named_after_its_directory(site, fs, lifecycle):
    fs.write_text(f"{site.root}/lost/_log/0.json", "{}")
    [corrupt] = lifecycle.list()
    assert (corrupt.name, corrupt.kind, corrupt.state) == ("lost", "unknown", IndexState.CORRUPT)
    assert lifecycle.vacuum("lost").state is IndexState.DOESNOTEXIST
    assert site.listdir(site.root) == []


def test_corrupt_older_entry_does_not_matter_to_the_newest(site, fs, lifecycle):
    lifecycle.create("idx", "covering", CONFIG, make_build(fs))
    latest = lifecycle.delete("idx")
    fs.write_text(f"{site.root}/idx/_log/0.json", "garbage", overwrite=True)
    assert lifecycle.list() == [latest] and lifecycle.get("idx") == latest
    assert lifecycle.restore("idx").state is IndexState.ACTIVE
