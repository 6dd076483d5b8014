"""What an acceleration kind supplies, so that the facade, the rewriter and explain serve every
kind the same way (the kinds themselves are listed in :mod:`indexes.kinds`).

A kind owns its config type, the build of its data (run by the lifecycle, never through the
query-time rewriter), the query-time state it reads (loaded once per index version), its
matching (a verdict per index and relation), how an applicable verdict is served (through
a :class:`PlanSurgery` port onto the JVM plan), and its row in ``indexes()``. Verdicts are
either ``indexes.source.NotApplicable`` (a stable code and a reason) or an applicable verdict of
the kind, which has ``index``, ``applicable = True``, ``cost`` (what serving it reads, to
compare kinds that prune), ``explain_line()`` (explain's "Indexes used" line) and
``applied_reason()`` (whyNot's APPLIED sentence); a pruning kind's (:attr:`Serving.PRUNE`)
also has ``kept`` (the paths of the files the relation still reads) and ``row_group_lines()``
(per kept file read in part, ``path \t start:end,...``; empty when none is).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Protocol, Sequence

from indexes.description import SourceDescription, SourceFile
from indexes.errors import InvalidIndexConfigError
from indexes.plan import PlanNode
from indexes.source import source_mismatch

REFRESH_MODES = ("full", "incremental", "quick")

#: ``check(where, mapping, required, optional) -> mapping``: validates the keys of a mapping
#: read from a spec file, raising an error that names ``where``
SpecCheck = Callable[[str, Any, set, set], dict]


class Serving(str, Enum):
    """How the rewriter serves an applicable verdict."""

    REPLACE = "replace"   # the relation is replaced by a relation over the index's data
    PRUNE = "prune"       # the relation keeps its schema, its file list shrinks


class PlanSurgery(Protocol):
    """What a kind may do to a query's JVM plan when it serves a relation (implemented over
    the Java helpers by :mod:`accelerator.query.index_serving`); relations and plans are JVM
    objects the kind only passes on."""

    def prune_files(self, plan: Any, ordinal: int, kept: list[str],
                    row_group_lines: str) -> Any:
        """The plan with relation ``ordinal`` reading only the ``kept`` files (and, per
        ``row_group_lines``, only those row groups of them)."""

    def read_parquet(self, schema_json: str, dirs: list[str], files_glob: str | None) -> Any:
        """A relation over the Parquet files of ``dirs`` (those matching ``files_glob``)."""

    def bucketed(self, relation: Any, num_buckets: int, columns: list[str], sorted_scan: bool,
                 groups: int) -> Any:
        """``relation`` bucketed by ``columns`` into ``num_buckets`` (a sorted scan reports the
        buckets' sort order; ``groups`` reads them in that many groups, unsorted)."""

    def replace_relation(self, plan: Any, ordinal: int, relation: Any, *, specs: list[str],
                         restore_order: bool, appended: list[str], deleted_ids: list[int],
                         deltas: Any, bucket_union: bool, lookup_buckets: int) -> Any:
        """The plan with relation ``ordinal`` replaced by ``relation``: its columns mapped by
        ``specs`` (the output order restored when ``restore_order``), ``appended`` source
        files read beside it and rows of ``deleted_ids`` (lineage) dropped (hybrid scan), the
        ``deltas`` relation unioned by bucket (with a bucket union when ``bucket_union``), and
        a lookup reading ``lookup_buckets`` buckets as plain files (0: none)."""

    def per_version(self, entry: Any, key: Any, make: Callable[[], Any]) -> Any:
        """``make()`` kept for ``entry``'s index version under ``key``."""


@dataclass(frozen=True)
class HybridScan:
    """When an index over a changed source is still used: appended files are read from the
    source next to the index, up to ``max_appended_ratio`` of the source's bytes; the rows of
    deleted files are filtered out of the index by its lineage column, up to
    ``max_deleted_ratio`` of the bytes the index holds."""

    max_appended_ratio: float
    max_deleted_ratio: float


@dataclass(frozen=True)
class MatchContext:
    """What matching needs of the query's session besides the plan."""

    case_sensitive: bool
    hybrid: HybridScan | None   # None when hybrid scan is off
    session_tz: str
    ansi: bool
    #: for dynamic file pruning, what the joins above the relation matched offer: the other
    #: sides' keys (:class:`indexes.skipping.join_keys.JoinKeys`) and the joins not used
    #: (``JoinNotUsed``); empty for a relation under no such join
    joins: tuple[Any, ...] = ()


def size_text(n: int) -> str:
    """``n`` bytes for a person: ``512 B``, ``3.4 MB``, ``1.2 GB``."""
    value, unit = float(n), "B"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1024 or unit == "TB":
            break
        value /= 1024
    return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"


@dataclass(frozen=True)
class IoStats:
    """Files, bytes and (where known) rows an operation read or wrote."""

    files: int = 0
    bytes: int = 0
    rows: int | None = None
    levels: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"files": self.files, "levels": list(self.levels), "rows": self.rows,
                "bytes": self.bytes}

    @staticmethod
    def of_files(files: Sequence[SourceFile]) -> "IoStats":
        """Of source files."""
        return IoStats(len(files), sum(int(f.size) for f in files))


@dataclass
class BuildJob:
    """One build of an index's data into ``data_path``: a create, a full or incremental
    refresh, or an optimize. The rewrite is suspended for the session while it runs."""

    spark: Any
    df: Any                      # the source, read as the index records it
    config: dict                 # the index's config as its log entry records it
    source: SourceDescription    # the source's description now (files, format, schema...)
    data_path: str
    fs: Any                      # an indexes.fs file system
    previous: Any = None         # incremental refresh and optimize: the entry being replaced
    read: IoStats = field(default_factory=IoStats)      # set by the build
    written: IoStats = field(default_factory=IoStats)   # set by the build


class IndexKind(ABC):
    """One kind of acceleration; subclasses set the class attributes and implement the rest."""

    name: str                    # the ``kind`` of its log entries
    display_name: str            # its ``kind`` in ``indexes()``
    spec_name: str               # its ``kind`` in spec files (the command line's ``create``)
    optimize_modes: tuple[str, ...] = ()   # the modes in which optimizeIndex compacts its data
    config_type: type
    serving: Serving
    executor_modules: tuple[str, ...] = ()   # Python modules its builds import on executors
    joins: bool = False          # whether the join rule may pair its indexes
    #: whether its matching prunes by the keys of joins above the relation (MatchContext.joins)
    prunes_through_joins: bool = False
    stateful: bool = False       # whether matching reads a state :meth:`load` gives
    searchable: bool = False     # whether ``Hyperspace.search`` answers full-text queries with it
    #: the rule engine's kinds (:data:`rules.user_rules.RULE_KINDS`) its indexes answer
    engine_kinds: tuple[str, ...] = ()

    @property
    def compacts(self) -> bool:
        """Whether optimizeIndex compacts its data files (it has :attr:`optimize_modes`)."""
        return bool(self.optimize_modes)

    @abstractmethod
    def resolve(self, df: Any, config: Any, source: SourceDescription, settings: Any) -> dict:
        """The config recorded in the log for ``config`` over ``df`` (reading ``source``);
        InvalidIndexConfigError when it does not fit the source."""

    @abstractmethod
    def config_from_spec(self, name: str, fields: dict, where: str, check: SpecCheck) -> Any:
        """The config a spec file's index mapping describes: ``fields`` are its keys besides
        ``kind`` and ``name``, checked with ``check``; ``where`` names the mapping."""

    @abstractmethod
    def build(self, job: BuildJob) -> tuple[SourceDescription, dict]:
        """Writes the index data for ``job``; returns (source, content) for the log and sets
        ``job.read`` and ``job.written``."""

    def session_difference(self, entry: Any, spark: Any) -> str | None:
        """Why ``entry``'s data, computed under settings of another session (or another
        Spark version's defaults), cannot serve ``spark``'s queries although its source is
        unchanged; a full refresh in such a session recomputes it. None by default."""
        return None

    def check_refresh(self, entry: Any, source: SourceDescription, mode: str) -> None:
        """Raises InvalidIndexConfigError when ``entry`` cannot be refreshed with ``mode``
        (incremental or quick) over ``source``; by default, a quick refresh needs the source
        read as before."""
        if mode == "quick":
            mismatch = source_mismatch(entry.source, source, source.schema, check_files=False)
            if mismatch:
                raise InvalidIndexConfigError(
                    f"index '{entry.name}' cannot be refreshed with mode='{mode}': {mismatch}; "
                    "use mode='full'")

    def optimize_selection(self, entry: Any, mode: str, budget: int, job: BuildJob) -> list[list]:
        """The data files (``[name, bucket, rows, bytes]``) an optimizeIndex in ``mode`` would
        compact within ``budget`` bytes; empty when nothing qualifies. Kinds whose data is not
        compacted raise InvalidIndexConfigError."""
        raise InvalidIndexConfigError(
            f"index '{entry.name}' is a {self.display_name}; optimizeIndex compacts the data "
            "files of covering indexes")

    def optimize(self, job: BuildJob, chosen: list[list]) -> tuple[SourceDescription, dict]:
        """Writes the data version of an optimize that compacts ``chosen`` (see
        :meth:`optimize_selection`)."""
        raise NotImplementedError

    def load(self, entry: Any, fs: Any, settings: Any) -> Any:
        """The query-time state of an index version (read once, cached per version) of a
        ``stateful`` kind."""
        return None

    @abstractmethod
    def match(self, root: PlanNode, relation: PlanNode, description: SourceDescription,
              entry: Any, state: Any, ctx: MatchContext) -> Any:
        """The verdict of ``entry`` (its loaded ``state``) for ``relation`` of the plan
        ``root``, described (fingerprint, files, read settings) by ``description``."""

    @abstractmethod
    def choose(self, verdicts: list[Any]) -> Any:
        """The best of this kind's applicable ``verdicts`` for one relation, or None."""

    def filter_columns(self, entry: Any) -> frozenset[str] | None:
        """The source's top-level columns (lower case) of which the Filters right above a
        relation must name one for ``entry`` to serve the relation outside a join, or None
        when it may serve any plan over its source. A superset is fine: the JVM rule hands
        only plans that name none of them to the query history without asking the rewriter."""
        return None

    def needs_files(self, entry: Any, fingerprint: str | None, settings: Any) -> bool:
        """Whether matching ``entry`` needs the relation's file list."""
        return self.serving is Serving.PRUNE

    def needs_changes(self, entry: Any, fingerprint: str | None, settings: Any) -> bool:
        """Whether matching ``entry`` needs how the relation's files differ from those it
        recorded (:meth:`SourceDescription.changes_since`; the JVM answers it without the
        files), when it does not need the files."""
        return False

    def serve_joins(self, root: PlanNode, relations: list[PlanNode], decisions: list[Any],
                    indexes: list[Any], settings: Any, hints: list[str],
                    parallelism: Callable[[], int]) -> dict[int, int]:
        """For a kind with :attr:`joins`: serves the plan's joins it can from pairs of its
        ``indexes``, setting both sides' ``decisions``; returns the ordinals of the relations it
        serves, each with the partitions its data is read in. ``hints`` are the JVM's, one per
        join; ``parallelism()`` the session's default parallelism. None served by default."""
        return {}

    def serve(self, plan: Any, ordinal: int, verdict: Any, surgery: PlanSurgery,
              join_groups: int | None, settings: Any, payload: dict) -> Any:
        """The plan with relation ``ordinal`` served from ``verdict``'s index; ``join_groups``
        is set when the join rule serves it (the partitions its buckets are read in). A
        pruning kind's relation reads only the files (and row groups) the verdict kept;
        replacing kinds implement their own."""
        return surgery.prune_files(plan, ordinal, verdict.kept, verdict.row_group_lines())

    @abstractmethod
    def columns(self, entry: Any) -> tuple[list[str], list[str]]:
        """(indexed, included) as ``indexes()`` shows them."""

    def engine_targets(self, entry: Any) -> list[tuple[str, tuple[str, ...]]]:
        """What ``entry`` serves, in the rule engine's terms: (engine kind, columns) pairs; by
        default, its indexed columns under the kind's first engine kind (none when it has
        none)."""
        if not self.engine_kinds:
            return []
        indexed, _ = self.columns(entry)
        return [(self.engine_kinds[0], tuple(indexed))]

    def config_for(self, engine_kind: str, name: str, columns: list[str],
                   included_columns: list[str], distinct_per_file: float | None) -> Any:
        """The config of an index ``name`` the rule engine asks for: one of its
        :attr:`engine_kinds` over ``columns`` (with ``included_columns``);
        ``distinct_per_file`` is the distinct values per source file it profiled of the first
        column (None when it did not profile it). Kinds with :attr:`engine_kinds` implement
        it."""
        raise NotImplementedError

    def data_stats(self, content: dict) -> IoStats:
        """The files, bytes and rows of an index version's data (its log entry's content)."""
        return IoStats(int(content.get("numFiles") or 0), int(content.get("sizeInBytes") or 0),
                       int(content.get("numRows") or 0))

    def data_dirs(self, entry: Any) -> list[str]:
        """The data directories the entry reads (vacuum keeps them)."""
        return [entry.content["path"]]
