"""NEVER markers: source roots whose files must never be cached (Warp Speed's NEVER priority,
a user's black list). One small JSON file per root under the manifest's ``never`` folder, named
by the sha256 of the root, written with ``create_exclusive``. No JVM here.

Roots and paths are compared as given, so callers pass qualified paths (``fs.qualify``).
"""
from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass

from accelerator.cache.manifest import CacheManifest
from accelerator.cache.model import CacheNeverError

logger = logging.getLogger("accelerator.cache.never")


@dataclass(frozen=True)
class NeverMarker:
    """A source root whose files must never be cached; ``path`` is the marker's file."""

    root: str
    set_at: float
    reason: str
    path: str


def under(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or lies below it (``/a/b2`` is not below ``/a/b``)."""
    root = root.rstrip("/")
    return path.rstrip("/") == root or path.startswith(root + "/")


class NeverMarkers:
    """The NEVER markers of one cache path, through its manifest."""

    def __init__(self, manifest: CacheManifest):
        self.manifest = manifest
        self.fs = manifest.fs

    def _marker_path(self, root: str) -> str:
        digest = hashlib.sha256(root.rstrip("/").encode("utf-8")).hexdigest()
        return f"{self.manifest.never_path}/{digest}.json"

    def set(self, root: str, reason: str = "", now: float | None = None) -> NeverMarker:
        """Marks the source ``root`` NEVER: its files are not cached any more, and its ACTIVE
        entries are evicted at once. Setting it again keeps the first marker."""
        root = root.rstrip("/")
        path = self._marker_path(root)
        now = self.manifest.now() if now is None else now
        self.fs.create_exclusive(path, json.dumps({"root": root, "set_at": now, "reason": reason}))
        self.manifest.evict([e for e in self.manifest.entries()
                             if under(e.source_root, root) or under(e.file_path, root)], now)
        return next(m for m in self.list() if m.path == path)

    def lift(self, root: str) -> bool:
        """Removes the NEVER marker of ``root``; whether there was one."""
        return self.fs.delete(self._marker_path(root), recursive=False)

    def list(self) -> list[NeverMarker]:
        """Every marker, by root (unreadable marker files are logged and skipped)."""
        out = []
        for f in self.fs.list(self.manifest.never_path):
            if f.is_dir or not f.name.endswith(".json"):
                continue
            try:
                data = json.loads(self.fs.read_text(f.path))
                out.append(NeverMarker(str(data["root"]), float(data["set_at"]),
                                       str(data.get("reason", "")), f.path))
            except FileNotFoundError:   # lifted meanwhile
                continue
            except (ValueError, KeyError, TypeError) as exc:
                logger.warning("unreadable NEVER marker %s ignored: %s", f.path, exc)
        return sorted(out, key=lambda m: m.root)

    def check(self, path: str) -> None:
        """Raises :class:`CacheNeverError` when ``path`` (a source root or file) lies under a
        root marked NEVER, naming the root and the marker."""
        for marker in self.list():
            if under(path, marker.root):
                why = f" ({marker.reason})" if marker.reason else ""
                raise CacheNeverError(
                    f"{path} cannot be cached: its source {marker.root} has priority NEVER"
                    f"{why}, marker {marker.path}; lift the NEVER marker to cache it")
