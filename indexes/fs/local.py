"""The local file system in pure Python, read only (:class:`LocalFs`): the reading methods of
the :class:`FileSystem` protocol without a JVM, for what reads a system path on the local disk
instead of starting Spark (the command line's listings), which by construction creates nothing.
Paths are local paths or ``file:`` URIs; every path it returns is qualified as Hadoop qualifies
a local one (``file:/tmp/x``), so index logs and listings read through it name the same paths
as through :class:`~indexes.fs.HadoopFs`.
Hadoop's glob syntax (``*``, ``?``, ``[a-c]``, ``[^a]``, ``{a,b}``, ``\\`` escapes) is
reproduced by :func:`glob_regex`."""
from __future__ import annotations

import os
import re
from pathlib import Path

from indexes.fs.parallel import in_parallel
from indexes.fs.protocol import FileInfo
from indexes.source import local_path


def is_local(path: str) -> bool:
    """Whether ``path`` names the local file system: no scheme, or ``file:`` (without a host
    other than ``localhost``)."""
    if local_path(path) is not None:
        return True
    colon, slash = path.find(":"), path.find("/")
    return colon == -1 or (slash != -1 and slash < colon)


class LocalFs:
    """The reading methods of :class:`~indexes.fs.FileSystem` over the local disk, in Python
    (see the module docstring), and Hadoop's :meth:`glob`. Relative paths are taken from the
    current directory, as Hadoop takes them."""

    @staticmethod
    def _os(path: str) -> str:
        found = local_path(path)
        if found is None:
            if not is_local(path):
                raise ValueError(f"not a local path: {path}")
            found = path
        return os.path.abspath(found)

    @staticmethod
    def _uri(os_path: str) -> str:
        return "file:" + os_path

    def qualify(self, path: str) -> str:
        return self._uri(self._os(path))

    def exists(self, path: str) -> bool:
        return os.path.exists(self._os(path))

    def _info(self, os_path: str) -> FileInfo:
        st = os.stat(os_path)
        is_dir = os.path.isdir(os_path)
        # Hadoop reports a directory's length as 0 and times in milliseconds
        return FileInfo(self._uri(os_path), 0 if is_dir else st.st_size,
                        st.st_mtime_ns // 1_000_000, is_dir)

    def list(self, path: str) -> list[FileInfo]:
        """Entries directly under ``path`` (a file lists itself); empty when it does not
        exist."""
        target = self._os(path)
        try:
            if not os.path.isdir(target):
                return [self._info(target)] if os.path.exists(target) else []
            return [self._info(os.path.join(target, name)) for name in sorted(os.listdir(target))]
        except FileNotFoundError:   # removed meanwhile
            return []

    def list_each(self, paths: list[str]) -> list[list[FileInfo]]:
        return in_parallel(self.list, paths)

    def glob(self, pattern: str) -> list[str]:
        """The paths matching the Hadoop glob ``pattern``, qualified, sorted; a pattern without
        glob characters matches itself when it exists."""
        parts = self._os(pattern).split("/")[1:]
        found = ["/"]
        for part in parts:
            regex = glob_regex(part)
            step = []
            for base in found:
                if regex is None:
                    candidate = os.path.join(base, part.replace("\\", ""))
                    if os.path.exists(candidate):
                        step.append(candidate)
                elif os.path.isdir(base):
                    step.extend(os.path.join(base, n) for n in sorted(os.listdir(base))
                                if regex.fullmatch(n))
            found = step
        return [self._uri(p) for p in found]

    def read_bytes(self, path: str) -> bytes:
        return Path(self._os(path)).read_bytes()

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8")


_GLOB_CHARS = re.compile(r"(?<!\\)[*?\[{]")


def glob_regex(component: str) -> re.Pattern | None:
    """The regular expression of one path component of a Hadoop glob (``*`` and ``?`` within
    the component, ``[...]`` classes with ``^`` negation, ``{a,b}`` alternatives, ``\\``
    escapes), or None when it has no glob character (it names itself)."""
    if not _GLOB_CHARS.search(component):
        return None
    out, i, depth = [], 0, 0
    while i < len(component):
        c = component[i]
        if c == "\\" and i + 1 < len(component):
            out.append(re.escape(component[i + 1]))
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = component.find("]", i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = component[i + 1:end]
                negate = body.startswith("^")
                body = body[1:] if negate else body
                out.append("[" + ("^" if negate else "") + body.replace("\\", "\\\\") + "]")
                i = end
        elif c == "{":
            depth += 1
            out.append("(?:")
        elif c == "," and depth:
            out.append("|")
        elif c == "}" and depth:
            depth -= 1
            out.append(")")
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + ")" * depth)
