"""Events of index operations: one JSON file per operation (create, refresh, optimize, delete,
restore, vacuum, cancel, the rule engine's reverts, and the runs of the scheduler's jobs) under
``<system path>/_events/``, with the statistics of what it read and wrote."""
from __future__ import annotations

import json
import uuid
from typing import Any

from indexes.fs import FileSystem

EVENTS_DIR = "_events"


class EventLog:
    """Writes and reads the operation events of one system path."""

    def __init__(self, fs: FileSystem, system_path: str):
        self._fs = fs
        self.path = f"{fs.qualify(system_path).rstrip('/')}/{EVENTS_DIR}"

    def write(self, operation: str, index: str, mode: str, started: int, finished: int,
              data_version: int | None, input_stats: dict, output_stats: dict,
              error: str | None = None, message: str | None = None, job: str | None = None,
              status: str | None = None) -> dict[str, Any]:
        """Records one finished ``operation`` ("create", "refresh", "optimize", ...) on
        ``index``; times in epoch milliseconds; ``input_stats`` and ``output_stats`` are
        ``{files, levels, rows, bytes}``. With ``error`` (what it raised), the operation
        failed: its status is "failed", else "succeeded" (``status`` overrides it, e.g. "timed
        out"). ``message`` says why it was done (e.g. why the rule engine reverted an action)
        or what it did; ``job`` names the scheduler's job of a job run. Returns the event."""
        event = {"operation": operation, "index": index, "mode": mode, "started": started,
                 "finished": finished, "dataVersion": data_version,
                 "input": input_stats, "output": output_stats,
                 "status": status or ("failed" if error is not None else "succeeded"),
                 "error": error, "message": message, "job": job}
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
                event = json.loads(self._fs.read_text(info.path))
            except ValueError:   # being written
                continue
            if "operation" not in event:   # written before events named it so
                event["operation"] = event.pop("name", None)
            events.append(event)
        return events
