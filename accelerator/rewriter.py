"""The Python side of the optimizer rule: decides which indexes answer a plan and applies them.

The JVM rule calls :meth:`Rewriter.apply` with each optimized plan that reads files, and a
payload holding the plan's JSON, the session's settings and its file relations. The analysis is
pure Python (:mod:`indexes.plan`, :mod:`indexes.covering.match`); the JVM is called back only to
build the replacement (and to describe a relation whose fingerprint the payload lacks). Any
failure returns None, which makes the JVM run the original plan.
"""
from __future__ import annotations

import contextlib
import json
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator

from accelerator import jvm
from accelerator.catalog import CATALOG
from accelerator.history import new_recorder
from accelerator.settings import Settings
from indexes.covering import join_match, match as covering_match
from indexes.covering.build import BUCKET_FILES, DELTA_FILES, data_dirs, delta_dirs
from indexes.covering.config import KIND as COVERING
from indexes.skipping import match as skipping_match
from indexes.skipping.build import sketch_specs
from indexes.skipping.config import KIND as SKIPPING
from indexes.skipping.store import STATS_FILE, FileEntry, decode
from indexes.text import match as text_match
from indexes.text.config import KIND as TEXT
from indexes.text.reader import TextIndexReader
from indexes.fs import HadoopFs
from indexes.lifecycle import IndexLifecycle
from indexes.log import IndexState
from indexes.plan import PlanNode, file_relations, parse_plan, unsupported_reason
from rules.recorder import HistoryRecorder

log = logging.getLogger("accelerator.rewriter")

FILE_LISTS_CACHED = 16
SUSPENDED = "spark.accelerator.suspended"   # see AcceleratorRule.SUSPENDED_KEY
FILE_PRUNING = (SKIPPING, TEXT)   # index kinds that prune a relation's file list


@dataclass
class RelationDecision:
    """What the rewriter decided for one file relation of a plan."""

    ordinal: int
    description: dict
    results: list[Any] = field(default_factory=list)   # Applicable | Pruning | NotApplicable
    chosen: Any = None                                  # the Applicable or Pruning used, if any


@dataclass
class RewriteResult:
    """The outcome of one rewrite: the (possibly new) JVM plan and the decisions behind it."""

    plan: Any
    root: PlanNode
    relations: list[RelationDecision]
    skipped_reason: str | None = None

    @property
    def applied(self) -> list[str]:
        return [d.chosen.index.name for d in self.relations if d.chosen is not None]


class Rewriter:
    """Rewrites plans of one driver; registered with the JVM rule by ``Hyperspace.enable``."""

    def __init__(self, spark: Any):
        self._spark = spark
        self._helpers = jvm.helpers(spark)
        self._fs = HadoopFs(spark)
        # (data version path, kind) → (log entry stamp, JVM relation); a recreated index
        # reuses paths
        self._index_relations: dict[tuple[str, tuple[str, int]], tuple[tuple, Any]] = {}
        # fingerprint → files of a source whose files no index recorded (oldest dropped first)
        self._file_lists: dict[str, list] = {}
        # data version path → (log entry stamp, statistics of a data-skipping index)
        self._skipping_tables: dict[str, tuple[tuple, dict[str, FileEntry]]] = {}
        # data version path → (log entry stamp, reader of a text index's shards)
        self._text_readers: dict[str, tuple[tuple, TextIndexReader]] = {}
        self._captures: list[list[RewriteResult]] = []
        self._lock = threading.Lock()
        self._recorders: dict[str, HistoryRecorder] = {}
        self._roots: dict[str, set[str]] = {}   # indexed root paths per system path

    # --- JVM callback -------------------------------------------------------------------
    def apply(self, plan: Any, payload: str) -> Any:
        """Called by the JVM rule with a plan and its payload (PlanRewrite.payload: settings,
        file relations, plan JSON); returns a new plan or None for "keep the original"."""
        try:
            capturing = bool(self._captures)
            result = self.rewrite(plan, json.loads(payload), record=not capturing,
                                  with_files=capturing)
            for captured in list(self._captures):
                captured.append(result)
            return result.plan if result.applied else None
        except Exception:  # an accelerator bug must never fail a query
            log.warning("rewrite failed; running the original plan", exc_info=True)
            return None

    class Java:
        implements = ["java.util.function.BiFunction"]

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        """No rewriting of the queries this thread runs while the block runs (index builds read
        the source itself); other threads' queries are still rewritten. A thread-local Spark
        property that the JVM rule checks (PySpark pins each Python thread to a JVM thread)."""
        context = self._spark.sparkContext
        previous = context.getLocalProperty(SUSPENDED)
        context.setLocalProperty(SUSPENDED, "true")
        try:
            yield
        finally:
            context.setLocalProperty(SUSPENDED, previous)

    @contextlib.contextmanager
    def capturing(self) -> Iterator[list[RewriteResult]]:
        """Collects the results of the rewrites done while the block runs (for explain)."""
        captured: list[RewriteResult] = []
        with self._lock:
            self._captures.append(captured)
        try:
            yield captured
        finally:
            with self._lock:
                self._captures.remove(captured)

    # --- analysis -----------------------------------------------------------------------
    def active_indexes(self, settings: Settings) -> list[Any]:
        """ACTIVE indexes of the system path, from the per-process catalog cache."""
        entries = CATALOG.entries(settings.system_path, lambda: self._load(settings.system_path),
                                  settings.cache_expiry_seconds)
        return [e for e in entries if e.state == IndexState.ACTIVE]

    def _load(self, system_path: str) -> list[Any]:
        """Reads the index logs and tells the JVM which root paths are indexed."""
        entries = IndexLifecycle(self._fs, system_path).list()
        with self._lock:
            self._roots[system_path] = {(p, e.kind in FILE_PRUNING) for e in entries
                                        for p in e.source.get("rootPaths", [])}
            roots = set().union(*self._roots.values())
        self._helpers.plans.setIndexedRoots("\n".join(sorted(p for p, _ in roots)),
                                            "\n".join(sorted(p for p, s in roots if s)))
        return entries

    def rewrite(self, plan: Any, payload: dict, record: bool = False,
                with_files: bool = False) -> RewriteResult:
        """Analyses a JVM optimized plan and replaces relations by covering indexes.

        ``payload`` is what the JVM rule sends along (settings, relations, plan JSON); the JVM
        is called back only when some index is over one of the plan's sources.
        """
        settings = Settings.of_conf(payload["conf"])
        root = parse_plan(payload["plan"])
        relations = file_relations(root)
        plans = self._helpers.plans
        decisions = [RelationDecision(i, d) for i, d in enumerate(payload["relations"])]
        result = RewriteResult(plan, root, decisions)
        indexes = [e for e in self.active_indexes(settings) if e.kind in (COVERING, *FILE_PRUNING)]
        result.skipped_reason = unsupported_reason(root) if indexes else None
        if result.skipped_reason:
            indexes = []
        for decision, relation in zip(decisions, relations):
            candidates = [e for e in indexes
                          if e.source.get("rootPaths") == decision.description.get("rootPaths")]
            if not candidates:
                continue
            if with_files or "fingerprint" not in decision.description:
                decision.description = json.loads(
                    plans.describe(plan, decision.ordinal, 2 if with_files else 1))
            fingerprint = decision.description.get("fingerprint")
            listed = [e for e in candidates if e.kind in FILE_PRUNING or (settings.hybrid_scan and (
                e.source.get("fingerprint") != fingerprint or e.content.get("quickRefresh")))]
            if listed and "files" not in decision.description:
                decision.description["files"] = self._files(plan, decision, candidates)
            decision.description["readSettings"] = payload["readSettings"]
            decision.results = [self._evaluate(root, relation, decision.description, e, settings,
                                               payload)
                                for e in candidates]
            decision.chosen = covering_match.choose(decision.results) or skipping_match.choose(
                decision.results)
        joined = self._join_rule(root, relations, decisions, indexes, settings,
                                 payload.get("joinHints", [])) if indexes else {}
        # last relation first: a hybrid scan adds source relations, which would shift the
        # (pre-order) ordinals of the relations after it
        for decision in reversed(decisions):
            chosen = decision.chosen
            if isinstance(chosen, skipping_match.Pruning):
                result.plan = plans.pruneFiles(result.plan, decision.ordinal, "\n".join(chosen.kept))
            elif chosen is not None:
                joins = decision.ordinal in joined
                bucketed = joins or settings.filter_rule_bucket_spec
                relation = self.index_relation(chosen.index, bucketed, sorted_scan=joins,
                                               groups=joined.get(decision.ordinal, 0))
                deltas = self.delta_relation(chosen.index) if bucketed else None
                result.plan = plans.replaceRelation(result.plan, decision.ordinal, relation,
                                                    "\n".join(chosen.specs), chosen.restore_order,
                                                    "\n".join(chosen.appended),
                                                    "\n".join(map(str, chosen.deleted_ids)),
                                                    deltas,
                                                    joins and bool(payload.get("bucketUnion")))
        if record and settings.history_enabled:
            self.recorder(settings.system_path).record_plan(
                root, [(r, d.description) for r, d in zip(relations, decisions)], result.applied)
        return result

    def _join_rule(self, root: PlanNode, relations: list[PlanNode],
                   decisions: list[RelationDecision], indexes: list[Any], settings: Settings,
                   hints: list[str]) -> dict[int, int]:
        """Serves the plan's equi-joins from pairs of covering indexes bucketed on the join
        keys (see :mod:`indexes.covering.join_match`): both sides' decisions become the join's
        indexes. Returns the ordinals of the relations it replaced, each with the number of
        partitions its buckets are read in (see :func:`join_match.bucket_groups`). A side the
        filter rule answers by a lookup of literals on its index's first column is left to the
        filter rule."""
        ordinal_of = {id(r): i for i, r in enumerate(relations)}
        covering = [e for e in indexes if e.kind == COVERING]
        joined: dict[int, int] = {}
        joins = [n for n in root.walk() if n.cls == "Join"]
        for join, hint in zip(joins, hints):
            below = [join_match.side_relation(child) for child in join.children]
            if None in below:
                continue
            pair = [decisions[ordinal_of[id(r)]] for r in below]
            if any(d.ordinal in joined for d in pair):
                continue
            candidates = tuple([e for e in covering if e.source.get("rootPaths")
                                == d.description.get("rootPaths")] for d in pair)
            missing = [side for side, found in zip(("left", "right"), candidates) if not found]
            sides = join_match.join_sides(join, settings.case_sensitive)
            if isinstance(sides, str):
                reason = sides
            elif missing:
                reason = f"the {missing[0]} side has no covering index over its source"
            else:
                reason = self._join_obstacle(hint, pair, candidates, settings)
            if reason is None:
                found = join_match.evaluate(root, sides, candidates,
                                           tuple(d.description for d in pair),
                                           settings.case_sensitive, settings.hybrid)
                if isinstance(found, join_match.JoinApplicable):
                    groups = self._bucket_groups(found)
                    for d, applied in zip(pair, (found.left, found.right)):
                        d.results = [applied] + [r for r in d.results
                                                 if r.index.name != applied.index.name]
                        d.chosen = applied
                        joined[d.ordinal] = groups
                    continue
                reason = found
            for d in pair:
                d.results = [join_match.with_join_reason(r, reason) for r in d.results]
                if isinstance(d.chosen, covering_match.Applicable):   # the completed verdict
                    d.chosen = next(r for r in d.results if r.index is d.chosen.index)
        return joined

    def _bucket_groups(self, found: Any) -> int:
        """The partitions a join reads its two indexes' buckets in (as many as buckets while
        a bucket union adds appended or delta rows to them, hashed into every bucket)."""
        sides = (found.left, found.right)
        num_buckets = int(found.left.index.config["numBuckets"])
        if any(a.appended or delta_dirs(a.index.content) for a in sides):
            return num_buckets
        return join_match.bucket_groups(num_buckets, self._spark.sparkContext.defaultParallelism,
                                       sum(int(a.index.content.get("sizeInBytes", 0))
                                           for a in sides))

    @staticmethod
    def _join_obstacle(hint: str, pair: list[RelationDecision],
                       candidates: tuple[list[Any], ...], settings: Settings) -> str | None:
        """Why the join rule leaves a join alone before looking at indexes, if it does."""
        if not settings.bucketing:
            return "spark.sql.sources.bucketing.enabled is false"
        if "broadcast" in hint.lower():
            return "a hint asks for a broadcast join"
        for d, entries in zip(pair, candidates):
            # the side's files, as its indexes recorded them (they must match to be used)
            size = min(sum(f[1] for f in e.source.get("files", [])) for e in entries)
            if 0 <= size <= settings.broadcast_threshold:
                return (f"a side is {size} bytes, within spark.sql.autoBroadcastJoinThreshold "
                        f"({settings.broadcast_threshold}): Spark broadcasts it")
            chosen = d.chosen
            if isinstance(chosen, covering_match.Applicable) and chosen.point_lookup:
                return (f"the filter compares the first indexed column of '{chosen.index.name}' "
                        "with literals: the filter rule looks the rows up in it, cheaper than "
                        "joining every bucket")
        return None

    def _files(self, plan: Any, decision: RelationDecision, entries: list[Any]) -> list | None:
        """The files of a relation: those an index recorded when the fingerprints match (no
        JVM call), else described by the JVM, cached per fingerprint."""
        fingerprint = decision.description.get("fingerprint")
        for e in entries:
            if fingerprint is not None and e.source.get("fingerprint") == fingerprint:
                return e.source.get("files")
        files = self._file_lists.get(fingerprint) if fingerprint is not None else None
        if files is None:
            files = json.loads(self._helpers.plans.describe(plan, decision.ordinal, 2)).get("files")
            if fingerprint is not None:
                with self._lock:
                    if len(self._file_lists) >= FILE_LISTS_CACHED:
                        self._file_lists.pop(next(iter(self._file_lists)))
                    self._file_lists[fingerprint] = files
        return files

    def _evaluate(self, root: PlanNode, relation: PlanNode, description: dict, entry: Any,
                  settings: Settings, payload: dict) -> Any:
        if entry.kind == COVERING:
            return covering_match.evaluate(root, relation, description, entry,
                                          settings.case_sensitive, settings.hybrid)
        tz = payload["readSettings"].get("spark.sql.session.timeZone", "UTC")
        ansi = payload["conf"].get("spark.sql.ansi.enabled", "false").lower() == "true"
        if entry.kind == TEXT:
            return text_match.evaluate(relation, description, entry,
                                      self.text_reader(entry, settings), tz, ansi)
        return skipping_match.evaluate(relation, description, entry, self.skipping_table(entry),
                                      tz, ansi)

    def skipping_table(self, entry: Any) -> dict[str, FileEntry]:
        """The per-file statistics of a data-skipping index, cached per data version."""
        path = entry.content["path"]
        stamp = (entry.id, entry.timestamp)
        cached = self._skipping_tables.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        specs = sketch_specs(skipping_match.sketches_of(entry.config))
        table = decode(specs, self._fs.read_bytes(path.rstrip("/") + "/" + STATS_FILE))
        self._skipping_tables[path] = (stamp, table)
        return table

    def text_reader(self, entry: Any, settings: Settings) -> TextIndexReader:
        """The shards of a text index's data version, cached per data version and log entry."""
        path = entry.content["path"]
        stamp = (entry.id, entry.timestamp)
        with self._lock:
            cached = self._text_readers.get(path)
            if cached is None or cached[0] != stamp:
                reader = TextIndexReader(self._fs, entry.content["shards"],
                                         f"{path}|{entry.id}|{entry.timestamp}",
                                         settings.text_cache_dir)
                cached = self._text_readers[path] = (stamp, reader)
        return cached[1]

    def recorder(self, system_path: str) -> HistoryRecorder:
        """The query history recorder of a system path (one per path, created on first use,
        flushing at the interval the session's settings say then)."""
        with self._lock:
            found = self._recorders.get(system_path)
            if found is None:
                found = self._recorders[system_path] = new_recorder(self._spark, system_path,
                                                                    self._fs)
            return found

    def index_relation(self, entry: Any, bucketed: bool = True, sorted_scan: bool = False,
                       groups: int = 0) -> Any:
        """The JVM relation reading an index's data version, bucketed by the indexed columns
        (Spark then prunes buckets on equality filters and joins two such relations without a
        shuffle) unless ``bucketed`` is false. A bucketed relation reads only the bucket files;
        the delta files of incremental refreshes are read by :meth:`delta_relation`. With
        ``sorted_scan`` (for a join), its scan stays bucketed and reports the buckets' sort
        order where each bucket is one file, so a sort-merge join does not sort it; without,
        Spark may read a bucketed relation as plain files where no operator needs its buckets
        (a lookup reading one bucket of 200 in one task, not 200). ``groups`` below the
        bucket count makes a sorted scan read the buckets in that many groups, unsorted (see
        :func:`join_match.bucket_groups`)."""
        if not (bucketed and sorted_scan and 0 < groups < int(entry.config["numBuckets"])):
            groups = 0
        kind = ("sorted" if sorted_scan else "bucketed") if bucketed else "plain"
        return self._cached_relation(entry, (kind, groups), lambda: self._read_index(
            entry, data_dirs(entry.content), BUCKET_FILES if bucketed else None,
            (sorted_scan, groups) if bucketed else None))

    def delta_relation(self, entry: Any) -> Any | None:
        """The JVM relation reading only the delta files of an index's data version (rows of
        files an incremental refresh indexed, in any bucket), which a bucketed read of the index
        unions with its bucket files; None when it has none."""
        dirs = delta_dirs(entry.content)
        if not dirs:
            return None
        return self._cached_relation(entry, ("delta", 0),
                                     lambda: self._read_index(entry, dirs, DELTA_FILES))

    def _cached_relation(self, entry: Any, kind: tuple[str, int], read: Any) -> Any:
        """A relation over an index's data, cached per data version path and kind while the log
        entry stays the same: a vacuumed and recreated index reuses the path with other files,
        and a cached relation lists files."""
        stamp = (entry.id, entry.timestamp, entry.content["schema"])
        key = (entry.content["path"], kind)
        cached = self._index_relations.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        found = read()
        self._index_relations[key] = (stamp, found)
        return found

    def _read_index(self, entry: Any, dirs: list[str], files_glob: str | None,
                    bucket_spec: tuple[bool, int] | None = None) -> Any:
        """The relation over ``dirs`` (files matching ``files_glob``); with ``bucket_spec``
        (sorted scan, groups), bucketed by the indexed columns (see :meth:`index_relation`)."""
        jvm_ = self._spark.sparkContext._jvm
        schema = jvm_.org.apache.spark.sql.types.DataType.fromJson(entry.content["schema"])
        reader = self._spark._jsparkSession.read().schema(schema).format("parquet")
        if files_glob is not None:
            reader = reader.option("pathGlobFilter", files_glob)
        found = reader.load(jvm_.org.apache.spark.api.python.PythonUtils.toSeq(dirs)) \
            .queryExecution().analyzed()
        if bucket_spec is not None:
            indexed, _ = covering_match.index_columns(entry.config)
            sorted_scan, groups = bucket_spec
            found = self._helpers.plans.withBucketSpec(
                found, int(entry.config["numBuckets"]), "\n".join(c.name for c in indexed),
                sorted_scan, groups)
        return found
