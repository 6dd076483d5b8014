"""The index operations as actions (after Hyperspace's ``actions/``): each validates its input,
runs one lifecycle action (:mod:`indexes.lifecycle`: validate → begin → op → end) through the
index's kind (:mod:`indexes.kinds`), writes an event and reports what it did as an
:class:`OperationResult`.

What an action needs of the engine that reads sources (Spark) comes through a
:class:`SourcePort`: describing and reading a source, preparing the executors for a kind's
builds, suspending the query rewrite while a build reads the source, and hearing that the set of
indexes changed. A no-op (nothing to refresh or compact) writes nothing and says so in its
result. A failed operation is rolled back by the lifecycle, recorded as a failed event, and its
error raised.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Protocol

from indexes import kinds
from indexes.description import SourceDescription
from indexes.errors import IndexOperationError, IndexStateError, InvalidIndexConfigError
from indexes.events import EventLog
from indexes.kind import REFRESH_MODES, BuildJob, IndexKind, IoStats, size_text
from indexes.lifecycle import IndexLifecycle, reject_busy
from indexes.log import IndexLogEntry, IndexState, now_ms
from indexes.source import file_changes, source_mismatch

log = logging.getLogger("accelerator.indexes.actions")

#: the key of an index's config naming the rule engine's instruction that created it:
#: "engine" (its own choice) or "user" (a user rule); absent for an index created by hand
ORIGIN_KEY = "createdBy"
#: the status of the event of an operation stopped by Ctrl-C (KeyboardInterrupt), rolled back
INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class OperationResult:
    """What one operation did (the facade shows it as one summary row)."""

    index: str
    operation: str
    status: str                 # "succeeded" or "noop"
    data_version: int | None
    read: IoStats
    written: IoStats
    seconds: float
    message: str


@dataclass
class _Outcome:
    """What an operation's action hands back to :meth:`IndexActions._run`."""

    entry: IndexLogEntry
    read: IoStats
    written: IoStats
    message: str
    events_io: tuple[dict, dict] | None = None   # the event's input and output (default: read, written)


class SourcePort(Protocol):
    """What the actions need of the engine that reads the sources (one session's)."""

    spark: Any
    fs: Any     # an indexes.fs file system

    def settings(self) -> Any:
        """The session's settings now (``system_path``, ``optimize_bytes``,
        ``vacuum_retention_seconds`` and its key, and what the kinds' ``resolve`` reads)."""

    def describe_source(self, df: Any) -> SourceDescription:
        """The description of the file source ``df`` reads directly."""

    def files_frame(self, df: Any) -> Any:
        """``df`` as builds read it (for a table format read through a connector, a read of its
        snapshot's files; else ``df`` itself)."""

    def read_source(self, entry: IndexLogEntry) -> Any:
        """An index's source read again as it was when the index was built."""

    def prepare_executors(self, kind: IndexKind) -> None:
        """Makes the executors ready to run ``kind``'s builds."""

    def suspended(self) -> ContextManager[None]:
        """No rewriting of this thread's queries while the block runs."""

    def interruptible(self) -> ContextManager[None]:
        """Ctrl-C during the block cancels its Spark jobs; the block then raises
        KeyboardInterrupt."""

    def building(self, what: str) -> ContextManager[None]:
        """The block's Spark jobs build ``what`` (a description, e.g. ``create covering index
        'x' over 32 files (1.2 GB)``): named so, and a long build's progress reported."""

    def changed(self) -> None:
        """The set of indexes or their versions changed."""


class IndexActions:
    """The operations on the indexes of one session's system path, through ``port``."""

    def __init__(self, port: SourcePort):
        self._port = port

    def settings(self) -> Any:
        """The session's settings now."""
        return self._port.settings()

    def lifecycle(self) -> IndexLifecycle:
        """The index logs of the session's system path."""
        return IndexLifecycle(self._port.fs, self.settings().system_path)

    def _target(self, name: str, operation: str, mode: str,
                modes: tuple[str, ...]) -> tuple[IndexLifecycle, IndexLogEntry, IndexKind]:
        """The lifecycle, latest entry and kind of the index an ``operation`` in ``mode``
        (one of ``modes``) works on."""
        if mode not in modes:
            raise InvalidIndexConfigError(
                f"{operation} mode {mode!r} is not supported; use one of {', '.join(modes)}")
        lifecycle = self.lifecycle()
        entry = lifecycle.get(name)
        reject_busy(entry, operation)
        return lifecycle, entry, _known_kind(entry)

    def _run(self, operation: str, index: str, mode: str, failed_input: IoStats,
             action: Callable[[], _Outcome]) -> OperationResult:
        """Runs ``action`` timed; records its event (a failed one with ``failed_input`` as
        what it read, status ``interrupted`` for Ctrl-C, then the error is raised unchanged)."""
        events = EventLog(self._port.fs, self.settings().system_path)
        started = now_ms()
        try:
            outcome = action()
        except BaseException as exc:
            # the cause of an operation the lifecycle rolled back, else the error itself
            cause = (exc.__cause__ if isinstance(exc, IndexOperationError)
                     and exc.__cause__ is not None else exc)
            try:
                events.write(operation, index, mode, started, now_ms(), None,
                             failed_input.to_json(), IoStats().to_json(),
                             error=f"{type(cause).__name__}: {cause}".rstrip(": "),
                             status=None if isinstance(exc, Exception) else INTERRUPTED)
            except Exception:   # the operation's own error is the one to report
                log.warning("could not record the failed %s of index '%s'", operation, index,
                            exc_info=True)
            raise
        finally:
            self._port.changed()
        finished = now_ms()
        inputs, outputs = outcome.events_io or (outcome.read.to_json(), outcome.written.to_json())
        try:
            events.write(operation, outcome.entry.name, mode, started, finished,
                         outcome.entry.data_version, inputs, outputs)
        except Exception:   # the operation itself succeeded
            log.warning("could not record the %s of index '%s'", operation, index, exc_info=True)
        return OperationResult(outcome.entry.name, operation, "succeeded",
                               outcome.entry.data_version, outcome.read, outcome.written,
                               (finished - started) / 1000, outcome.message)

    def _noop(self, entry: IndexLogEntry, operation: str, message: str) -> OperationResult:
        log.info("index '%s': %s", entry.name, message)
        return OperationResult(entry.name, operation, "noop", entry.data_version, IoStats(),
                               IoStats(), 0.0, message)

    def _build(self, build: Callable[[BuildJob], tuple[dict, dict]], job: BuildJob,
               what: str) -> Callable[[str], tuple[SourceDescription, dict]]:
        """The lifecycle's build function: ``build(job)`` into the data path it is given, with
        the rewrite suspended for the session's queries of this thread, interruptible by
        Ctrl-C (rolled back as an interrupted operation), its Spark jobs described as ``what``
        and their progress reported when long."""
        def run(data_path: str) -> tuple[SourceDescription, dict]:
            job.data_path = data_path
            with self._port.interruptible(), self._port.suspended(), \
                    self._port.building(what):
                return build(job)
        return run

    def _job(self, kind: IndexKind, df: Any, config: dict, source: SourceDescription,
             previous: IndexLogEntry | None = None) -> BuildJob:
        """A build job, with the executors prepared for the kind's builds."""
        self._port.prepare_executors(kind)
        return BuildJob(self._port.spark, df, config, source, "", self._port.fs, previous)

    # --- operations ---------------------------------------------------------------------
    def create(self, df: Any, config: Any, origin: str | None = None) -> OperationResult:
        """Creates an index; ``origin`` (``engine`` or ``user``: made by a rule) is recorded
        in its config as :data:`ORIGIN_KEY` (none: created by hand)."""
        kind = kinds.kind_for_config(config)
        source = self._port.describe_source(df)
        df = self._port.files_frame(df)
        with self._port.suspended():
            cfg = kind.resolve(df, config, source, self.settings())
        if origin is not None:
            cfg = {**cfg, ORIGIN_KEY: origin}
        job = self._job(kind, df, cfg, source)

        def action() -> _Outcome:
            entry = self.lifecycle().create(
                config.indexName, kind.name, cfg,
                self._build(kind.build, job, _building("create", kind, config.indexName, source)))
            return _Outcome(entry, job.read, job.written,
                            f"created {kind.display_name} over {len(source.files)} files",
                            (job.read.to_json(), _data_stats(entry)))
        return self._run("create", config.indexName, "full", IoStats.of_files(source.files),
                         action)

    def refresh(self, name: str, mode: str) -> OperationResult:
        """Brings index ``name`` up to date with its source (``mode``: full, incremental or
        quick; see ``Hyperspace.refreshIndex``); a no-op when nothing changed."""
        lifecycle, entry, kind = self._target(name, "refresh", mode, REFRESH_MODES)
        df = self._port.read_source(entry)
        source = self._port.describe_source(df)
        df = self._port.files_frame(df)
        if (entry.state is IndexState.ACTIVE
                and source_mismatch(entry.source, source, source.schema) is None
                and (mode == "quick" or not entry.content.get("quickRefresh"))
                and (mode != "full" or kind.session_difference(entry, self._port.spark) is None)):
            return self._noop(entry, "refresh", "the index is up to date with its source; "
                                                "nothing to refresh")
        if mode != "full":
            kind.check_refresh(entry, source, mode)

        def action() -> _Outcome:
            if mode == "quick":
                new = lifecycle.record(name, lambda e: _quick(e, source))
                appended, deleted = file_changes(entry, source.files)
                return _Outcome(new, IoStats(), IoStats(),
                                f"recorded {len(appended)} appended and {len(deleted)} deleted "
                                "files for hybrid scan", (_data_stats(entry), _data_stats(new)))
            same_reading = source_mismatch(entry.source, source, source.schema,
                                           check_files=False) is None
            previous = entry if mode == "incremental" and same_reading else None
            job = self._job(kind, df, entry.config, source, previous)
            new = lifecycle.refresh(name, self._build(
                kind.build, job, _building(f"{mode} refresh", kind, entry.name, source)))
            how = "incrementally" if previous is not None else "fully"
            return _Outcome(new, job.read, job.written,
                            f"refreshed {how} into data version {new.data_version}",
                            (_data_stats(entry), _data_stats(new)))
        return self._run("refresh", entry.name, mode, _data_stats_io(entry), action)

    def optimize(self, name: str, mode: str) -> OperationResult:
        """Compacts the data files of index ``name`` that its kind selects in ``mode``; a
        no-op when none qualify."""
        lifecycle, entry, kind = self._target(name, "optimize", mode, kinds.optimize_modes())
        if entry.state is not IndexState.ACTIVE:
            raise IndexStateError(
                f"cannot optimize index '{entry.name}': it is {entry.state}, and optimize needs "
                "it ACTIVE")
        job = self._job(kind, None, entry.config, entry.source, entry)
        with self._port.suspended():
            chosen = kind.optimize_selection(entry, mode, self.settings().optimize_bytes, job)
        if not chosen:
            return self._noop(entry, "optimize", f"no data files to compact (mode={mode})")

        def action() -> _Outcome:
            what = (f"{mode} optimize of {kind.display_name} '{entry.name}' "
                    f"({len(chosen)} data files, {size_text(sum(int(f[3]) for f in chosen))})")
            new = lifecycle.refresh(name, self._build(lambda j: kind.optimize(j, chosen), job,
                                                      what), IndexState.OPTIMIZING)
            return _Outcome(new, job.read, job.written,
                            f"compacted {job.read.files} files into {job.written.files}")
        return self._run("optimize", entry.name, mode,
                         IoStats(len(chosen), sum(int(f[3]) for f in chosen),
                                 sum(int(f[2]) for f in chosen)), action)

    def delete(self, name: str) -> OperationResult:
        """Soft-deletes index ``name``: no longer used, its data kept."""
        return self._run("delete", name, "", IoStats(), lambda: _Outcome(
            self.lifecycle().delete(name), IoStats(), IoStats(),
            "deleted (soft): not used by queries; restoreIndex brings it back, vacuumIndex "
            "removes it"))

    def restore(self, name: str) -> OperationResult:
        """Brings the deleted index ``name`` back into use."""
        return self._run("restore", name, "", IoStats(), lambda: _Outcome(
            self.lifecycle().restore(name), IoStats(), IoStats(), "restored: used by queries"))

    def cancel(self, name: str) -> OperationResult:
        """Rolls back an operation on ``name`` that its process left unfinished."""
        def action() -> _Outcome:
            entry = self.lifecycle().cancel(name)
            return _Outcome(entry, IoStats(), IoStats(), f"rolled back to {entry.state}")
        return self._run("cancel", name, "", IoStats(), action)

    def vacuum(self, name: str, retention_seconds: float | None) -> OperationResult:
        """Removes a deleted index for good, or an ACTIVE one's data versions replaced more
        than ``retention_seconds`` ago (None: the session's setting)."""
        settings = self.settings()
        retention = (settings.vacuum_retention_seconds if retention_seconds is None
                     else retention_seconds)
        if not isinstance(retention, (int, float)) or not retention >= 0:
            raise InvalidIndexConfigError(
                f"vacuum retention must be 0 seconds or more, got {retention!r}")
        lifecycle = self.lifecycle()
        entry = lifecycle.get(name)
        if entry.state is not IndexState.ACTIVE:
            def remove() -> _Outcome:
                final = lifecycle.vacuum(name)
                return _Outcome(final, IoStats(), IoStats(),
                                "removed the index and its data for good")
            return self._run("vacuum", entry.name, "all", IoStats(), remove)
        kind = _known_kind(entry)

        def outdated() -> _Outcome:
            removed, kept = lifecycle.vacuum_outdated(name, kind.data_dirs, int(retention * 1000))
            message = f"removed {len(removed)} unreferenced data versions"
            if kept:
                message += (f"; kept {len(kept)} replaced less than {retention:g} s ago "
                            f"({settings.vacuum_retention_key}): {', '.join(kept)}")
            return _Outcome(lifecycle.get(name), IoStats(), IoStats(), message)
        return self._run("vacuum", entry.name, "outdated", IoStats(), outdated)


def _building(operation: str, kind: IndexKind, name: str, source: SourceDescription) -> str:
    """What a build builds, for its Spark jobs' description and progress lines."""
    files = source.files or []
    return (f"{operation} of {kind.display_name} '{name}' over {len(files)} source files "
            f"({size_text(sum(int(f.size) for f in files))})")


def _quick(entry: IndexLogEntry, source: SourceDescription) -> tuple[SourceDescription, dict]:
    """A quick refresh's log entry: the current source, and the files the data does not match
    recorded for hybrid scan to handle at query time."""
    appended, deleted = file_changes(entry, source.files)
    content = {k: v for k, v in entry.content.items() if k != "quickRefresh"}
    if appended or deleted:
        content["quickRefresh"] = {"appended": [f.to_json() for f in appended],
                                   "deleted": [f.to_json() for f in deleted]}
    return source, content


def _data_stats(entry: IndexLogEntry) -> dict:
    """The stats of an index version's data files, as events record them."""
    return _data_stats_io(entry).to_json()


def _data_stats_io(entry: IndexLogEntry) -> IoStats:
    kind = kinds.kind_of(entry)
    return IoStats() if kind is None else kind.data_stats(entry.content)


def _known_kind(entry: IndexLogEntry) -> IndexKind:
    """The kind of ``entry``; IndexStateError for a kind this version does not know."""
    kind = kinds.kind_of(entry)
    if kind is None:
        raise IndexStateError(
            f"index '{entry.name}' is of kind '{entry.kind}', which this version of the "
            "accelerator does not know; delete and vacuum it, or upgrade")
    return kind
