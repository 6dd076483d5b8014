"""How an index stands against its source's current files: what changed since its data was
built, and the refresh that brings it up to date (``Hyperspace.indexes()``'s ``warning``)."""
from __future__ import annotations

from typing import Any

from indexes.description import SourceDescription
from indexes.errors import InvalidIndexConfigError
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
