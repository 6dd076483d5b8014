"""How an index stands against its source's current files: what changed since its data was
built, and the refresh that brings it up to date (``Hyperspace.indexes()``'s ``warning``).

:func:`source_warnings` judges a list of indexes through two functions of a source port: why
a source is gone, and its description now. Spark's port describes any source
(``accelerator.operations.sources``); :class:`ListedSources` lists a source's files in Python
(:mod:`indexes.file_listing`), for listings that start no JVM, and says for which sources it
cannot."""
from __future__ import annotations

import json
from typing import Any, Callable

from indexes import kinds
from indexes.description import SourceDescription
from indexes.errors import InvalidIndexConfigError
from indexes.file_listing import leaf_files, listing_obstacle
from indexes.log import IndexState
from indexes.source import file_changes, source_mismatch


def _counted(appended: list, deleted: list) -> str:
    """``1 appended file, 3 deleted files`` (a modified file is in both lists)."""
    modified = {f.path for f in appended} & {f.path for f in deleted}
    counts = [(len(appended) - len(modified), "appended"), (len(modified), "modified"),
              (len(deleted) - len(modified), "deleted")]
    return ", ".join(f"{n} {what} file{'s' if n > 1 else ''}" for n, what in counts if n)


def staleness(entry: Any, kind: Any, current: SourceDescription) -> str | None:
    """None when the data of ``entry`` (an ACTIVE index of ``kind``) holds exactly the files
    of ``current`` (its source's description now) read as before; else what changed and the
    refresh that fixes it: incremental when the kind can do it (a covering index drops deleted
    files' rows only with its lineage column), else full, with the reason."""
    name = entry.name
    mismatch = source_mismatch(entry.source, current, current.schema, check_files=False)
    if mismatch:
        return (f"{mismatch}; refreshIndex('{name}', mode='full') rebuilds it over the source "
                "as it is read now")
    appended, deleted = file_changes(entry, current.files or ())
    if not appended and not deleted:
        return None
    recorded = entry.content.get("quickRefresh") and source_mismatch(
        entry.source, current, current.schema) is None
    changed = (f"a quick refresh recorded {_counted(appended, deleted)}, which queries read "
               "beside the index (hybrid scan)" if recorded else
               f"its source changed since the index was built: {_counted(appended, deleted)}")
    try:
        kind.check_refresh(entry, current, "incremental")
    except InvalidIndexConfigError as exc:
        return f"{changed}; refreshIndex('{name}', mode='full') brings it up to date ({exc})"
    return f"{changed}; refreshIndex('{name}', mode='incremental') brings it up to date"


def source_warnings(entries: list[Any], problem: Callable[[Any], str | None],
                    current: Callable[[Any], SourceDescription | str]) -> dict[str, str]:
    """By index name, for the ACTIVE ``entries`` whose source is not as their data was built:
    ``problem(entry)`` (why the source is gone, or cannot be judged), else what changed and
    the refresh that fixes it (:func:`staleness` against ``current(entry)``, the source's
    description now or why it cannot be read). ``current`` runs once per source (as it is
    read)."""
    out: dict[str, str] = {}
    described: dict[str, SourceDescription | str] = {}   # by how the source is read
    for entry in entries:
        kind = kinds.kind_of(entry)
        if entry.state is not IndexState.ACTIVE or kind is None:
            continue
        found = problem(entry)
        if found is None:
            key = json.dumps({k: v for k, v in entry.source.to_json().items()
                              if k not in ("files", "fingerprint")}, sort_keys=True)
            if key not in described:
                described[key] = current(entry)
            now = described[key]
            found = now if isinstance(now, str) else staleness(entry, kind, now)
        if found:
            out[entry.name] = found
    return out


def path_problem(fs: Any, source: SourceDescription) -> str | None:
    """Why a source over paths is gone (every directory of its glob pattern, or a root path,
    removed), or None."""
    if source.glob_path:
        if not fs.glob(source.glob_path):
            return (f"no directory matches its glob pattern {source.glob_path}; "
                    "restore one, or delete and vacuum the index")
        return None
    missing = [p for p in source.root_paths or [] if not fs.exists(p)]
    if missing:
        return (f"its source path no longer exists: {', '.join(missing)}; restore it, or "
                "delete and vacuum the index")
    return None


#: the warning of an index whose source only Spark can describe, in a listing without Spark
NOT_CHECKED = ("not checked without Spark: {obstacle}; `accelerator indexes --spark` (or "
               "hs.indexes()) checks it")


class ListedSources:
    """The two functions :func:`source_warnings` needs, for sources whose files Python lists
    over ``fs`` (a local file system) as Spark would: the source as read when the index was
    built (format, options, schema, read settings), its files as they are now. An index over
    a source Python cannot list (:func:`~indexes.file_listing.listing_obstacle`) gets the
    :data:`NOT_CHECKED` note, never a verdict."""

    def __init__(self, fs: Any):
        self.fs = fs

    def problem(self, entry: Any) -> str | None:
        """The note for a source Python cannot list, or why a listed one is gone."""
        obstacle = listing_obstacle(entry.source)
        if obstacle:
            return NOT_CHECKED.format(obstacle=obstacle)
        return path_problem(self.fs, entry.source)

    def current(self, entry: Any) -> SourceDescription:
        """The index's source as recorded, holding its files now."""
        source = entry.source
        roots = self.fs.glob(source.glob_path) if source.glob_path else list(source.root_paths)
        return source.with_files(leaf_files(self.fs, roots))
