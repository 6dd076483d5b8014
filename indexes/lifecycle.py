"""Lifecycle actions over the index log: create, refresh, delete, restore, vacuum, cancel.

Modeled on Hyperspace's actions: each one *validates* the latest entry, *begins* by writing entry
``base.id + 1`` in a transient state, runs its *op*, and *ends* by writing ``base.id + 2`` in the
final stable state (and refreshing the ``latestStable`` copy). Losing the race for an entry id
raises :class:`ConcurrentModificationError`.

When the op raises (a failing build, a failing update), the action rolls itself back as
:meth:`IndexLifecycle.cancel` does (a failed create leaves the name free and removes the data it
began writing; a failed refresh or optimize leaves the index ACTIVE on its previous version and
removes the new one), then raises: an :class:`AcceleratorError` of the op unchanged (the user's
error), any other error wrapped in :class:`IndexOperationError` naming the index, the operation
and the cause. Only a process that dies mid-operation (or a rollback that fails too, which the
error then says) leaves the index in the transient state: every other action then fails with
:class:`IndexStateError` until :meth:`IndexLifecycle.cancel` rolls it back.
"""
from __future__ import annotations

import functools
import logging
from typing import Callable, NoReturn

from indexes.description import SourceDescription
from indexes.errors import (
    AcceleratorError,
    ConcurrentModificationError,
    IndexExistsError,
    IndexNotFoundError,
    IndexOperationError,
    IndexStateError,
)
from indexes.fs import FileSystem
from indexes.layout import IndexLayout, data_version, replaced_at
from indexes.log import IndexLogEntry, IndexLogManager, IndexState, now_ms
from indexes.names import validate_index_name

logger = logging.getLogger("accelerator.indexes.lifecycle")

#: ``build(data_path) -> (source, content)``: writes the index data into ``data_path``.
BuildFn = Callable[[str], tuple[SourceDescription, dict]]

#: The operation named in errors, per transient state an op can fail in (the facade's names).
_OPERATIONS = {
    IndexState.CREATING: "createIndex",
    IndexState.REFRESHING: "refreshIndex",
    IndexState.OPTIMIZING: "optimizeIndex",
    IndexState.VACUUMING_OUTDATED: "vacuumIndex",
    IndexState.VACUUMING: "vacuumIndex",
}

def reject_corrupt(entry: IndexLogEntry, action: str) -> None:
    """Raises IndexStateError when ``entry`` is CORRUPT (its log cannot be read), naming
    ``action``."""
    if entry.state is IndexState.CORRUPT:
        raise IndexStateError(
            f"cannot {action} index '{entry.name}': it is CORRUPT: {entry.properties['error']}")


def reject_busy(entry: IndexLogEntry, action: str) -> None:
    """Raises IndexStateError when ``entry`` is CORRUPT or in a transient state, naming
    ``action`` and what to do."""
    reject_corrupt(entry, action)
    if not entry.state.is_stable:
        raise IndexStateError(
            f"cannot {action} index '{entry.name}': it is in state {entry.state} because an "
            f"earlier operation did not finish (it is still running, or its process died). "
            f"If nothing else is working on it, run cancel('{entry.name}') to roll it back, "
            f"then retry")


def _write(log: IndexLogManager, entry: IndexLogEntry) -> None:
    """Writes ``entry``; ConcurrentModificationError when its id is taken."""
    if not log.write(entry):
        raise ConcurrentModificationError(
            f"index '{entry.name}' was changed by another operation at the same time (log "
            f"entry {entry.id} already exists, this operation wanted {entry.state}); check "
            f"its state with get('{entry.name}') and retry")


def _begin(log: IndexLogManager, base: IndexLogEntry, state: IndexState) -> IndexLogEntry:
    """Writes entry ``base.id + 1`` in the transient ``state``: the op's begin."""
    entry = base.derive(base.id + 1, state)
    _write(log, entry)
    logger.info("index '%s': %s (entry %d)", entry.name, state, entry.id)
    return entry


def _end(log: IndexLogManager, begin: IndexLogEntry, final: IndexLogEntry) -> IndexLogEntry:
    """Writes ``final`` (and the ``latestStable`` copy) after ``begin``, which must still be
    the entry it wrote."""
    written = log.get(begin.id)
    if written is None or written.to_json() != begin.to_json():  # log removed meanwhile
        raise ConcurrentModificationError(
            f"index '{begin.name}' was changed by another operation at the same time (its "
            f"log entry {begin.id} disappeared while {begin.state}); check its state with "
            f"get('{begin.name}') and retry")
    final = IndexLogEntry.from_json(final.to_json())  # exactly what readers will see
    _write(log, final)
    log.write_latest_stable(final)
    logger.info("index '%s': %s (entry %d)", final.name, final.state, final.id)
    return final


def _vacuum_started(log: IndexLogManager, stable: IndexLogEntry | None,
                    latest: IndexLogEntry) -> bool:
    """Whether a vacuum began after the last stable entry (its data may be partly gone)."""
    first = 0 if stable is None else stable.id + 1
    for id in range(first, latest.id + 1):
        entry = latest if id == latest.id else log.get(id)
        if entry is not None and entry.state is IndexState.VACUUMING:
            return True
    return False


class IndexLifecycle:
    """Lifecycle actions for the indexes stored under one system path (their files:
    :attr:`layout`)."""

    def __init__(self, fs: FileSystem, system_path: str):
        self.layout = IndexLayout(fs, system_path)
        self.system_path = self.layout.system_path
        self.index_path = self.layout.index_path
        self.data_path = self.layout.data_path
        self.log_manager = self.layout.log_manager

    # ------------------------------------------------------------------ reads

    def list(self) -> list[IndexLogEntry]:
        """The latest entry of every index under the system path, by name.

        Directories starting with ``_`` (``_history``, ``_events``...) and indexes that no longer
        exist are skipped; indexes in a transient state are included, and so are indexes whose
        newest log entry cannot be read, as a CORRUPT entry (see
        :meth:`IndexLogManager.latest`).
        """
        out = []
        for log in self.layout.index_logs():
            entry = log.latest()
            if entry is not None and entry.state is not IndexState.DOESNOTEXIST:
                out.append(entry)
        return out

    def get(self, name: str) -> IndexLogEntry:
        """The latest entry of the index ``name`` (a CORRUPT one when it cannot be read);
        IndexNotFoundError when there is none."""
        entry = self.log_manager(name).latest()
        if entry is None or entry.state is IndexState.DOESNOTEXIST:
            raise self._not_found(name)
        return entry

    def _not_found(self, name: str) -> IndexNotFoundError:
        existing = ", ".join(e.name for e in self.list()) or "(none)"
        return IndexNotFoundError(
            f"no index named '{name}' in {self.system_path}; existing: {existing}")

    # ------------------------------------------------------------------ validation helpers

    def _require(self, name: str, allowed: IndexState, action: str, hint: str) -> IndexLogEntry:
        """The latest entry, which must be in state ``allowed`` for ``action``."""
        entry = self.get(name)
        reject_busy(entry, action)
        if entry.state is not allowed:
            raise IndexStateError(
                f"cannot {action} index '{entry.name}': it is {entry.state}, and {action} needs "
                f"it {allowed}; {hint}")
        return entry

    # ------------------------------------------------------------------ running an op

    def _run(self, log: IndexLogManager, begin: IndexLogEntry,
             op: Callable[[], IndexLogEntry]) -> IndexLogEntry:
        """Runs ``op`` (which returns the final entry) after ``begin``, then ends with its
        result; when ``op`` raises, rolls back and raises (see the module docstring)."""
        try:
            final = op()
        except BaseException as exc:
            self._fail(log, begin, exc)
        return _end(log, begin, final)

    def _fail(self, log: IndexLogManager, begin: IndexLogEntry, exc: BaseException) -> NoReturn:
        """Rolls back the operation ``begin`` started, which failed with ``exc``, and raises."""
        operation = _OPERATIONS[begin.state]
        cause = f"{type(exc).__name__}: {exc}"
        try:
            rolled_back = self._roll_back(log, begin)
        except Exception as rollback_exc:
            raise IndexOperationError(
                f"{operation} of index '{begin.name}' failed ({cause}), and rolling it back "
                f"failed too ({type(rollback_exc).__name__}: {rollback_exc}); run "
                f"cancel('{begin.name}') to roll it back", begin.name, operation) from exc
        if rolled_back.state is IndexState.DOESNOTEXIST:
            outcome = "the index does not exist"
        else:
            outcome = f"the index is {rolled_back.state}"
            if rolled_back.data_version is not None:
                outcome += f" on data version {rolled_back.data_version}"
        logger.warning("index '%s': %s failed (%s) and was rolled back: %s", begin.name,
                       operation, cause, outcome)
        if isinstance(exc, AcceleratorError) or not isinstance(exc, Exception):
            raise exc   # the user's error (or an interrupt), as it was raised
        raise IndexOperationError(
            f"{operation} of index '{begin.name}' failed and was rolled back ({outcome}): "
            f"{cause}", begin.name, operation) from exc

    def _build_version(self, begin: IndexLogEntry, build: BuildFn, version: int) -> IndexLogEntry:
        """Builds data version ``version`` after ``begin``; the ACTIVE entry recording it."""
        data_path = self.data_path(begin.name, version)
        self.layout.clear_data_dir(data_path)
        source, content = build(data_path)
        content = {**dict(content), "dataVersion": version, "path": data_path}
        return begin.derive(begin.id + 1, IndexState.ACTIVE, source=source, content=content)

    # ------------------------------------------------------------------ actions

    def create(self, name: str, kind: str, config: dict, build: BuildFn) -> IndexLogEntry:
        """Creates the index ``name``: CREATING → ACTIVE, data version 0.

        ``build(data_path)`` writes the index data into ``<index dir>/v__=0`` and returns
        ``(source, content)``; ``content`` gets ``dataVersion`` and ``path`` added. Raises
        IndexExistsError when the index exists, ConcurrentModificationError when another
        operation on the same name wins the race. When ``build`` raises, the create is rolled
        back (the name is free again, ``v__=0`` removed) and its AcceleratorError is raised
        as it is, any other error as IndexOperationError.
        """
        latest = self.free_name(name)
        log = self.log_manager(name)
        base = IndexLogEntry(id=-1 if latest is None else latest.id, name=name, kind=kind,
                             state=IndexState.DOESNOTEXIST, config=dict(config))
        begin = _begin(log, base, IndexState.CREATING)
        return self._run(log, begin, lambda: self._build_version(begin, build, 0))

    def free_name(self, name: str) -> IndexLogEntry | None:
        """The latest entry of ``name`` (None: never used) when a create may take the name:
        InvalidIndexConfigError for an invalid name, IndexExistsError when the index exists,
        IndexStateError when an operation on it is in progress."""
        validate_index_name(name)
        latest = self.log_manager(name).latest()
        if latest is not None:
            reject_busy(latest, "create")
            if latest.state is not IndexState.DOESNOTEXIST:
                raise IndexExistsError(
                    f"index '{latest.name}' already exists (state {latest.state}); delete and "
                    f"vacuum it or choose another name")
        return latest

    def refresh(self, name: str, build: BuildFn,
                state: IndexState = IndexState.REFRESHING) -> IndexLogEntry:
        """Rebuilds an ACTIVE index into a new data version: REFRESHING (or ``state``, e.g.
        OPTIMIZING) → ACTIVE.

        ``build(data_path)`` writes into ``v__=<n+1>`` where ``n`` is the current
        ``dataVersion``. Older versions are kept. Returns the new ACTIVE entry. When ``build``
        raises, the index is rolled back to its ACTIVE entry (``v__=<n+1>`` removed) and the
        error raised as :meth:`create` does.
        """
        log = self.log_manager(name)
        action = "optimize" if state is IndexState.OPTIMIZING else "refresh"
        base = self._require(name, IndexState.ACTIVE, action, f"run restore('{name}') first")
        version = (base.data_version if base.data_version is not None else -1) + 1
        begin = _begin(log, base, state)
        return self._run(log, begin, lambda: self._build_version(begin, build, version))

    def record(self, name: str, update: Callable[[IndexLogEntry], tuple[SourceDescription, dict]]
               ) -> IndexLogEntry:
        """Records a new source and content for an ACTIVE index without new data (a quick
        refresh): REFRESHING → ACTIVE with ``update(entry) -> (source, content)``, called with
        the ACTIVE entry."""
        log = self.log_manager(name)
        base = self._require(name, IndexState.ACTIVE, "refresh", f"run restore('{name}') first")
        begin = _begin(log, base, IndexState.REFRESHING)

        def op() -> IndexLogEntry:
            source, content = update(base)
            return begin.derive(begin.id + 1, IndexState.ACTIVE, source=source,
                                content=dict(content))

        return self._run(log, begin, op)

    def vacuum_outdated(self, name: str, referenced: Callable[[IndexLogEntry], list[str]],
                        retention_ms: int = 0) -> tuple[list[str], list[str]]:
        """Removes the data versions of an ACTIVE index older than the one it uses, not among
        the directories ``referenced(entry)`` it still reads, and replaced (no longer read by
        the ACTIVE state of the log) more than ``retention_ms`` ago: queries planned before the
        replacement may still read a version for a while. VACUUMINGOUTDATED → ACTIVE. Then
        empties the system path's trash (directories of removed indexes whose removal was
        killed). Returns (the removed directories, the unreferenced ones kept for the
        retention)."""
        log = self.log_manager(name)
        base = self._require(name, IndexState.ACTIVE, "vacuum outdated data of",
                             f"run restore('{name}') first")
        # the log's entries name the same few directories again and again: qualify each once
        qualify = functools.cache(lambda d: self.layout.fs.qualify(d).rstrip("/"))
        replaced = replaced_at(log, referenced, qualify)
        begin = _begin(log, base, IndexState.VACUUMING_OUTDATED)
        current = base.data_version if base.data_version is not None else -1
        keep = {qualify(d) for d in referenced(base)}
        unreferenced = [d for d in self.layout.data_dirs(log.index_path)
                        if data_version(d) < current and qualify(d) not in keep]
        cutoff = now_ms() - retention_ms
        removed = [d for d in unreferenced if replaced.get(qualify(d), 0) <= cutoff]

        def op() -> IndexLogEntry:
            for data_dir in removed:
                logger.info("removing unreferenced data version %s", data_dir)
                self.layout.fs.delete(data_dir, recursive=True)
            return base.derive(begin.id + 1, IndexState.ACTIVE)

        self._run(log, begin, op)
        self.layout.empty_trash()
        return removed, [d for d in unreferenced if d not in removed]

    def delete(self, name: str) -> IndexLogEntry:
        """Soft-deletes an ACTIVE index: DELETING → DELETED; its data is kept for restore."""
        log = self.log_manager(name)
        base = self._require(name, IndexState.ACTIVE, "delete",
                             "it is already deleted; restore or vacuum it")
        begin = _begin(log, base, IndexState.DELETING)
        return _end(log, begin, begin.derive(begin.id + 1, IndexState.DELETED))

    def restore(self, name: str) -> IndexLogEntry:
        """Brings a DELETED index back: RESTORING → ACTIVE."""
        log = self.log_manager(name)
        base = self._require(name, IndexState.DELETED, "restore",
                             "only a deleted index can be restored")
        begin = _begin(log, base, IndexState.RESTORING)
        return _end(log, begin, begin.derive(begin.id + 1, IndexState.ACTIVE))

    def vacuum(self, name: str) -> IndexLogEntry:
        """Removes a DELETED index for good: VACUUMING → DOESNOTEXIST, then its directory.

        Afterwards the name is free and the index no longer appears in :meth:`list`. Returns
        the final DOESNOTEXIST entry (no longer on disk). A CORRUPT index (its newest log entry
        cannot be read) is removed at once, its directory with its log and data, as no log
        entry can be written on top of it: this is how to get rid of one.
        """
        log = self.log_manager(name)
        latest = self.get(name)
        if latest.state is IndexState.CORRUPT:
            logger.warning("removing CORRUPT index '%s' with its log and data: %s", latest.name,
                           latest.properties["error"])
            self.layout.remove_index_dir(log.index_path)
            return latest.derive(latest.id + 1, IndexState.DOESNOTEXIST)
        base = self._require(name, IndexState.DELETED, "vacuum",
                             f"run delete('{name}') first (on an active index, "
                             f"vacuum_outdated removes its unreferenced data versions)")
        begin = _begin(log, base, IndexState.VACUUMING)
        final = self._run(log, begin, lambda: self._remove_data(log, begin))
        self.layout.remove_index_dir(log.index_path)
        return final

    def _remove_data(self, log: IndexLogManager, begin: IndexLogEntry) -> IndexLogEntry:
        """Removes every data version of the index (the op of a vacuum); the final entry."""
        self.layout.remove_data_dirs(log.index_path)
        return begin.derive(begin.id + 1, IndexState.DOESNOTEXIST, source=SourceDescription(),
                            content={})

    def _finish_vacuum(self, log: IndexLogManager, begin: IndexLogEntry) -> IndexLogEntry:
        final = _end(log, begin, self._remove_data(log, begin))
        self.layout.remove_index_dir(log.index_path)
        return final

    def cancel(self, name: str) -> IndexLogEntry:
        """Rolls back an operation that did not finish: CANCELLING → the last stable state.

        The final entry repeats the last stable entry's state and content under new ids. With
        no earlier stable entry (a crashed create) or a crashed vacuum (data partly gone), the
        final state is DOESNOTEXIST and the index directory is removed. Data versions newer
        than the restored one (left by a failed refresh) are removed. Raises IndexStateError
        when the index is in a stable state.
        """
        log = self.log_manager(name)
        latest = log.latest()
        if latest is None or latest.state is IndexState.DOESNOTEXIST:
            raise self._not_found(name)
        reject_corrupt(latest, "cancel")
        if latest.state.is_stable:
            raise IndexStateError(
                f"nothing to cancel for index '{latest.name}': it is {latest.state} and no "
                f"operation is in progress")
        return self._roll_back(log, latest)

    def _roll_back(self, log: IndexLogManager, latest: IndexLogEntry) -> IndexLogEntry:
        """Rolls back the operation that wrote ``latest`` (a transient entry) as :meth:`cancel`
        describes; the final entry."""
        stable = log.latest_stable()
        vacuuming = _vacuum_started(log, stable, latest)
        begin = _begin(log, latest, IndexState.CANCELLING)
        if vacuuming:
            return self._finish_vacuum(log, begin)
        if stable is None or stable.state is IndexState.DOESNOTEXIST:
            final = begin.derive(begin.id + 1, IndexState.DOESNOTEXIST,
                                 source=SourceDescription(), content={})
            _end(log, begin, final)
            self.layout.remove_index_dir(log.index_path)
            return final
        self.layout.remove_data_dirs(log.index_path, newer_than=stable.data_version)
        final = stable.derive(begin.id + 1, stable.state)
        return _end(log, begin, final)
