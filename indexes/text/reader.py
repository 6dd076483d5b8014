"""Reading a text index on the driver: its shards are copied from the system path into a local
cache directory on first use (keyed by the data version and its log entry, so a recreated index
never meets a stale copy), then opened with tantivy."""
from __future__ import annotations

import hashlib
import io
import os
import shutil
import threading
import uuid
from typing import Iterable

from indexes.fs import HadoopFs
from indexes.source import local_path
from indexes.text.literals import Requirement
from indexes.text.shards import Shard


class TextIndexReader:
    """The shards of one data version of a text index, opened lazily."""

    def __init__(self, fs: HadoopFs, shards: list[dict], stamp: str, cache_dir: str):
        self._fs = fs
        self._manifests = shards
        self._dir = os.path.join(cache_dir, hashlib.sha256(stamp.encode()).hexdigest()[:24])
        self._opened: list[Shard] | None = None
        self._lock = threading.Lock()

    def shards(self) -> list[Shard]:
        """Every shard, copied into the local cache first if needed."""
        with self._lock:
            if self._opened is None:
                self._opened = [Shard.open(self._local(m), m["files"], grouped(m))
                                for m in self._manifests]
            return self._opened

    def _local(self, manifest: dict) -> str:
        target = os.path.join(self._dir, manifest["id"])
        if os.path.exists(os.path.join(target, "meta.json")):
            return target
        import pyarrow.parquet as pq

        path = manifest["path"]
        local = local_path(path)
        if local is not None:
            table = pq.read_table(local)
        else:
            table = pq.read_table(io.BytesIO(self._fs.read_bytes(path)))
        rows = [r for r in table.select(["name", "part", "data"]).to_pylist() if r["name"] is not None]
        tmp = f"{target}.{uuid.uuid4().hex}.tmp"
        os.makedirs(tmp)
        try:
            for name in sorted({r["name"] for r in rows}):
                with open(os.path.join(tmp, name), "wb") as out:
                    for r in sorted((r for r in rows if r["name"] == name), key=lambda r: r["part"]):
                        out.write(r["data"])
            try:
                os.rename(tmp, target)
            except OSError:     # another reader placed it first
                pass
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return target

    def may_match(self, req: Requirement) -> tuple[set[str], int, int]:
        """The files holding a row that may meet ``req`` (files no shard knows are not in it),
        the number of shards whose postings were looked up and the number kept whole because
        the literal is frequent there."""
        files: set[str] = set()
        looked = frequent = 0
        for shard in self.shards():
            found, looked_up = shard.may_match(req)
            files |= found
            looked += looked_up
            frequent += not looked_up and bool(found)
        return files, looked, frequent

    def matching_ranges(self, req: Requirement,
                        limit: int) -> dict[str, list[tuple[int, int]]] | None:
        """Per file, ranges of row positions (first, last) holding every row that may meet
        ``req`` (a superset), or None when a shard has more than ``limit`` documents holding
        it."""
        out: dict[str, list[tuple[int, int]]] = {}
        for shard in self.shards():
            found = shard.matching_ranges(req, limit)
            if found is None:
                return None
            for path, ranges in found.items():
                out.setdefault(path, []).extend(ranges)
        return out

    def scores_rows(self) -> bool:
        """Whether every shard holds one document per row (needed for scores)."""
        return not any(grouped(m) for m in self._manifests)

    def candidate_files(self, query: str) -> set[str]:
        """The indexed files that may hold a row matching the full-text query."""
        return set().union(*(shard.candidate_files(query) for shard in self.shards()))

    def search(self, query: str) -> Iterable[tuple[str, int, float]]:
        """(file, row position, score) of every indexed row matching the full-text query;
        only when :meth:`scores_rows`."""
        for shard in self.shards():
            yield from shard.search(query)


def grouped(manifest: dict) -> bool:
    """Whether a shard's documents are groups of rows (manifests before groups: rows)."""
    return manifest.get("docs") == "groups"
