"""Events of index operations: one JSON file per create, refresh or optimize under
``<system path>/_events/``, with the statistics of the data files it read and wrote."""
from __future__ import annotations

import json
import uuid
from typing import Any

from indexes.covering.compaction import level
from indexes.fs import HadoopFs

EVENTS_DIR = "_events"


def file_stats(files: list[list[Any]] | None, content: dict | None = None) -> dict[str, Any]:
    """Files, levels, rows and bytes of data files given as ``[name, bucket, rows, bytes]``
    lists; without them (an index kind that does not record them), the totals of ``content``."""
    if files is not None:
        return {"files": len(files), "levels": sorted(level(int(f[2])) for f in files),
                "rows": sum(int(f[2]) for f in files), "bytes": sum(int(f[3]) for f in files)}
    content = content or {}
    return {"files": int(content.get("numFiles") or 0), "levels": [],
            "rows": int(content.get("numRows") or 0), "bytes": int(content.get("sizeInBytes") or 0)}


class EventLog:
    """Writes and reads the operation events of one system path."""

    def __init__(self, fs: HadoopFs, system_path: str):
        self._fs = fs
        self.path = f"{fs.qualify(system_path).rstrip('/')}/{EVENTS_DIR}"

    def write(self, name: str, index: str, mode: str, started: int, finished: int,
              data_version: int | None, input_stats: dict, output_stats: dict,
              error: str | None = None) -> dict[str, Any]:
        """Records one finished operation ``name`` ("create", "refresh", "optimize") on
        ``index``; times in epoch milliseconds. With ``error`` (what it raised), the operation
        failed: its status is "failed", else "succeeded". Returns the event."""
        event = {"name": name, "index": index, "mode": mode, "started": started,
                 "finished": finished, "dataVersion": data_version,
                 "input": input_stats, "output": output_stats,
                 "status": "failed" if error is not None else "succeeded", "error": error}
        self._fs.mkdirs(self.path)
        self._fs.write_text(f"{self.path}/{started:013d}-{uuid.uuid4().hex}.json",
                            json.dumps(event, sort_keys=True), overwrite=False)
        return event

    def read(self) -> list[dict[str, Any]]:
        """All events, oldest first (files that are not events are ignored)."""
        events = []
        for info in sorted(self._fs.list(self.path), key=lambda i: i.name):
            if info.is_dir or not info.name.endswith(".json"):
                continue
            try:
                events.append(json.loads(self._fs.read_text(info.path)))
            except ValueError:   # being written
                continue
        return events
