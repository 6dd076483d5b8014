"""The in-memory file system (indexes/fs/memory.py): its own semantics, which HadoopFs shares.

The index log and every lifecycle action run over MemoryFs in tests/test_index_log.py (its
``memory`` param, which needs no JVM and no Spark: ``-k memory``), and over HadoopFs there too."""
from __future__ import annotations

import inspect
import threading

import pytest

from indexes.fs import FileInfo, FileSystem, HadoopFs, MemoryFs
from tests.fs_doubles import Clock


@pytest.fixture
def fs() -> MemoryFs:
    return MemoryFs()


def names(fs: MemoryFs, path: str) -> list[str]:
    return [info.name for info in fs.list(path)]


# ---------------------------------------------------------------------- MemoryFs


def test_memory_fs_has_the_protocol_of_hadoop_fs():
    members = [n for n, v in vars(FileSystem).items() if callable(v) and not n.startswith("_")]
    assert {"qualify", "exists", "mkdirs", "list", "list_each", "read_bytes", "read_text",
            "read_each", "write_bytes", "write_text", "create_exclusive", "size", "copy", "delete",
            "rename"} == set(members)
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
