"""The Hyperspace-compatible public API: create and manage indexes, turn the rewrite on and off,
and see which indexes a query uses and why others are not used."""
from __future__ import annotations

import contextlib
import json
import logging
from datetime import datetime
from typing import Any, Iterator

from pyspark.sql import DataFrame, SparkSession, functions as F
from pyspark.sql.types import StructField, StructType, _parse_datatype_json_value

from accelerator import explain as explain_mod
from accelerator import jvm, session, workers
from accelerator.catalog import CATALOG
from accelerator.history import read_history
from accelerator.settings import VACUUM_RETENTION, Settings
from indexes.covering import compaction
from indexes.covering.build import (
    data_dirs,
    data_facts,
    index_rows,
    write_buckets,
    write_delta,
)
from indexes.covering.config import KIND as COVERING, CoveringIndexConfig
from indexes.covering.match import LINEAGE_COLUMN, index_columns
from indexes.events import EventLog, file_stats
from indexes.source import (
    covered_files,
    file_changes,
    read_options,
    relation_schema,
    source_mismatch,
)
from indexes.errors import IndexStateError, InvalidIndexConfigError, UnsupportedSourceError
from indexes.skipping import match as skipping_match
from indexes.skipping.build import compute_stats, resolve_sketches, sketch_specs
from indexes.skipping.config import KIND as SKIPPING, DataSkippingIndexConfig
from indexes.skipping.store import STATS_FILE, FileEntry, encode
from indexes.text.build import resolve_column, write_shards
from indexes.text.config import KIND as TEXT, TextIndexConfig
from indexes.text.literals import UNICODE_VERSION
from indexes.text import search as text_search
from indexes.fs import HadoopFs
from indexes.lifecycle import IndexLifecycle
from indexes.log import IndexLogEntry, IndexState, now_ms
from indexes.plan import LOGICAL_RELATION, parse_plan

log = logging.getLogger("accelerator.hyperspace")

REFRESH_MODES = ("full", "incremental", "quick")


class Hyperspace:
    """Index management for one SparkSession.

    >>> hs = Hyperspace(spark)
    >>> hs.createIndex(df, IndexConfig("idx", ["nested.nst.field1"], ["id", "nested.nst.field2"]))
    >>> Hyperspace.enable(spark)   # queries over df's files now read the index where it applies
    """

    def __init__(self, spark: SparkSession):
        self.spark = spark
        self._fs = HadoopFs(spark)

    # --- session ------------------------------------------------------------------------
    @staticmethod
    def enable(spark: SparkSession) -> None:
        """Rewrites DataFrame and SQL queries of ``spark`` to use indexes from now on."""
        session.enable(spark)

    @staticmethod
    def disable(spark: SparkSession) -> None:
        """Stops rewriting queries of ``spark``."""
        session.disable(spark)

    @staticmethod
    def isEnabled(spark: SparkSession) -> bool:
        """Whether queries of ``spark`` are rewritten."""
        return session.is_enabled(spark)

    # --- helpers ------------------------------------------------------------------------
    def _settings(self) -> Settings:
        return Settings.of_session(self.spark)

    def _lifecycle(self) -> IndexLifecycle:
        return IndexLifecycle(self._fs, self._settings().system_path)

    def _changed(self) -> None:
        """Forgets the cached index list and reloads it, so the JVM rule knows at once which
        sources are indexed (it describes their files in the payload of the next query)."""
        CATALOG.invalidate()
        session.rewriter(self.spark).active_indexes(self._settings())

    def _source(self, df: DataFrame) -> dict:
        """Description of the file source ``df`` reads directly, or UnsupportedSourceError."""
        analyzed = df._jdf.queryExecution().analyzed()
        root = parse_plan(analyzed.toJSON())
        plans = jvm.helpers(self.spark).plans
        if root.cls != LOGICAL_RELATION or len(plans.fileRelations(analyzed)) != 1:
            raise UnsupportedSourceError(
                "indexes can only be built over a DataFrame that reads files directly, such as "
                "spark.read.parquet(path) (also json, csv, orc; partitioned directories are fine); "
                f"this DataFrame's plan starts with {root.cls}. Create the index on the DataFrame "
                "returned by spark.read and apply filters or projections in queries instead")
        source = json.loads(plans.describe(analyzed, 0, 2))
        if source.get("files") is None:
            raise UnsupportedSourceError(
                "indexes need a source whose files Spark lists itself (spark.read over paths); "
                "this relation uses a catalog or custom file index")
        source["schema"] = relation_schema(root)
        source["readSettings"] = json.loads(plans.currentReadSettings(self.spark._jsparkSession))
        return source

    # --- lifecycle ----------------------------------------------------------------------
    def createIndex(self, df: DataFrame,
                    config: CoveringIndexConfig | DataSkippingIndexConfig | TextIndexConfig) -> None:
        """Builds an index over the files ``df`` reads and records it in the system path.

        Raises InvalidIndexConfigError for a bad config (unknown, duplicate or overlapping
        columns, unsupported types, name collisions, invalid sketch expressions, a text index
        over a non-string column), UnsupportedSourceError when ``df`` does not read files
        directly, IndexExistsError when the name is taken.
        """
        if isinstance(config, DataSkippingIndexConfig):
            self._create_skipping(df, config)
            return
        if isinstance(config, TextIndexConfig):
            self._create_text(df, config)
            return
        if not isinstance(config, CoveringIndexConfig):
            raise InvalidIndexConfigError(
                "createIndex expects an IndexConfig/CoveringIndexConfig, a "
                f"DataSkippingIndexConfig or a TextIndexConfig, got {type(config).__name__}")
        settings = self._settings()
        indexed, included = config.resolve(df.schema, settings.case_sensitive)
        source = self._source(df)
        num_buckets = config.numBuckets or settings.num_buckets
        cfg = {"indexedColumns": [c.to_json() for c in indexed],
               "includedColumns": [c.to_json() for c in included],
               "numBuckets": num_buckets}
        if settings.lineage:
            clash = [f.name for f in df.schema.fields
                     if f.name.lower() == LINEAGE_COLUMN.lower()]
            if clash:
                raise InvalidIndexConfigError(
                    f"index '{config.indexName}': the source has a column '{clash[0]}', the "
                    f"name of the lineage column (spark.accelerator.index.lineage.enabled); "
                    "rename it or disable lineage for this index")
            cfg["lineage"] = True
        self._create(config.indexName, COVERING, cfg,
                     lambda path: self._build(df, cfg, source, path))

    def _create(self, name: str, kind: str, cfg: dict, build: Any) -> None:
        with self._failure_event("create", name, "full", None) as started:
            entry = self._lifecycle().create(name, kind, cfg, build)
        self._event("create", None, entry, "full", started)
        self._changed()

    def _build(self, df: DataFrame, cfg: dict, source: dict, data_path: str) -> tuple[dict, dict]:
        """A covering index's data: every row of ``source``; with lineage, each row carries
        the id of its source file (ids recorded in the content as ``fileIds``)."""
        indexed, included = index_columns(cfg)
        ids = ({f[0]: i for i, f in enumerate(source["files"])} if cfg.get("lineage") else None)
        with session.rewriter(self.spark).suspended():
            rows = index_rows(df, indexed, included, self._by_uri(ids))
            content = write_buckets(rows, [c.name for c in indexed], cfg["numBuckets"],
                                    data_path, self._fs)
        return source, content if ids is None else {**content, "fileIds": ids}

    def _by_uri(self, ids: dict[str, int] | None) -> dict[str, int] | None:
        """File ids keyed by the URI Spark gives as ``_metadata.file_path``."""
        return None if ids is None else {self._uri(p): i for p, i in ids.items()}

    @staticmethod
    def _check_refreshable(entry: Any, source: dict, mode: str) -> None:
        """An incremental or quick refresh handles files appended to a source read as before,
        and (for a covering index, with lineage only) deleted or modified files."""
        mismatch = source_mismatch(entry.source, source, source["schema"], check_files=False)
        if mismatch and (mode == "quick" or entry.kind == COVERING):
            raise InvalidIndexConfigError(
                f"index '{entry.name}' cannot be refreshed with mode='{mode}': {mismatch}; use "
                "mode='full'")
        _, deleted = file_changes(entry, source["files"])
        if deleted and entry.kind == COVERING and not entry.config.get("lineage"):
            raise InvalidIndexConfigError(
                f"index '{entry.name}' cannot be refreshed with mode='{mode}': {len(deleted)} "
                f"indexed source files were deleted or modified (e.g. {deleted[0][0]}), and the "
                "index has no lineage column to drop their rows (create it with "
                "spark.accelerator.index.lineage.enabled=true); use mode='full'")

    def _build_incremental(self, df: DataFrame, entry: Any, source: dict,
                           data_path: str) -> tuple[dict, dict]:
        """A covering index's new data version after files were appended, deleted or modified:
        the rows of the new files, written as a few delta files sorted by the indexed columns
        (see :func:`write_delta`; bucketed reads add them to the buckets, ``optimizeIndex``
        folds them in); the previous version's files stay in use where they are (the version
        then spans several directories). When files were deleted, all rows but those files'
        are rewritten into buckets."""
        indexed, included = index_columns(entry.config)
        appended, deleted = file_changes(entry, source["files"])
        ids = dict(entry.content.get("fileIds") or {}) if entry.config.get("lineage") else None
        gone: list[int] = []
        if ids is not None:
            gone = sorted({ids.pop(f[0]) for f in deleted if f[0] in ids})
            start = max(ids.values(), default=-1) + 1
            ids.update({f[0]: start + i for i, f in enumerate(appended)})
        new_ids = None if ids is None else {f[0]: ids[f[0]] for f in appended}
        keys, buckets = [c.name for c in indexed], entry.config["numBuckets"]
        with session.rewriter(self.spark).suspended():
            rows = index_rows(
                df.where(F.col("_metadata.file_path").isin([self._uri(f[0]) for f in appended])),
                indexed, included, self._by_uri(new_ids))
            if gone:
                kept = (self.spark.read.parquet(*data_dirs(entry.content))
                        .where(~F.col(LINEAGE_COLUMN).isin(gone)))
                content = write_buckets(kept.unionByName(rows), keys, buckets, data_path,
                                        self._fs)
            else:
                # the new rows alone, as delta files; the previous versions' files stay in use
                added = write_delta(rows, keys, data_path, self._fs) if appended else []
                self._fs.mkdirs(data_path)
                files = self._data_files(entry) + added
                content = {"schema": entry.content["schema"], "files": files,
                           "numRows": sum(f[2] for f in files), "numFiles": len(files),
                           "sizeInBytes": sum(f[3] for f in files)}
        extra = {"appendedFiles": len(appended), "deletedFiles": len(deleted)}
        return source, {**content, **extra, **({} if ids is None else {"fileIds": ids})}

    def _data_files(self, entry: Any) -> list[list]:
        """The ``[name, bucket, rows, bytes]`` of a covering index's data files (recorded in
        its content; counted for an index built before they were recorded)."""
        files = entry.content.get("files")
        if files is None:
            with session.rewriter(self.spark).suspended():
                files = data_facts(self.spark, entry.content["path"], self._fs)["files"]
        return [list(f) for f in files]

    def _copy_data(self, entry: Any, files: list[list], data_path: str) -> list[list]:
        """Copies ``files`` (``[name, ...]`` records, names relative to the index directory)
        of ``entry``'s data into ``data_path``; returns their records there."""
        root = entry.content["path"].rstrip("/").rsplit("/", 1)[0]
        version = data_path.rstrip("/").rsplit("/", 1)[-1]
        self._fs.mkdirs(data_path)
        copied = []
        for name, *facts in files:
            base = name.rsplit("/", 1)[-1]
            self._fs.copy(f"{root}/{name}", f"{data_path.rstrip('/')}/{base}")
            copied.append([f"{version}/{base}", *facts])
        return copied

    @staticmethod
    def _quick(entry: Any, source: dict) -> tuple[dict, dict]:
        """A quick refresh's log entry: the current source, and the files the data does not
        match recorded for hybrid scan to handle at query time."""
        appended, deleted = file_changes(entry, source["files"])
        content = {k: v for k, v in entry.content.items() if k != "quickRefresh"}
        if appended or deleted:
            content["quickRefresh"] = {"appended": appended, "deleted": deleted}
        return source, content

    def _create_skipping(self, df: DataFrame, config: DataSkippingIndexConfig) -> None:
        source = self._source(df)
        with session.rewriter(self.spark).suspended():
            sketches = resolve_sketches(df, config, source["partitionColumns"])
        ansi = str(self.spark.conf.get("spark.sql.ansi.enabled")).lower() == "true"
        cfg = {"sketches": [s.to_json() for s in sketches], "ansi": ansi}
        self._create(config.indexName, SKIPPING, cfg,
                     lambda path: self._build_skipping(df, cfg, source, path, {}))

    def _build_skipping(self, df: DataFrame, cfg: dict, source: dict, data_path: str,
                        previous: dict[str, FileEntry]) -> tuple[dict, dict]:
        """Writes the statistics of ``source``'s files, reusing ``previous`` entries of files
        that did not change (an incremental refresh sketches only the others)."""
        files = source["files"]
        reused = {p: previous[p] for p, size, mtime in files
                  if p in previous and (previous[p].size, previous[p].mtime) == (size, mtime)}
        todo = [f for f in files if f[0] not in reused]
        sketches = skipping_match.sketches_of(cfg)
        entries, facts = dict(reused), {}
        if todo:
            workers.ship(self.spark)
            scope = df if not reused else df.where(
                F.col("_metadata.file_path").isin([self._uri(p) for p, _, _ in todo]))
            with session.rewriter(self.spark).suspended():
                computed, facts = compute_stats(scope, source, sketches, todo)
            entries.update(computed)
        data = encode(sketch_specs(sketches), entries)
        self._fs.mkdirs(data_path)
        self._fs.write_bytes(data_path.rstrip("/") + "/" + STATS_FILE, data)
        content = {"numFiles": 1, "sizeInBytes": len(data), "indexedFiles": len(entries),
                   "sketchedFiles": len(todo), "reusedFiles": len(reused), **facts}
        return source, content

    def _create_text(self, df: DataFrame, config: TextIndexConfig) -> None:
        source = self._source(df)
        with session.rewriter(self.spark).suspended():
            cfg = {**resolve_column(df, config), "unicodeVersion": UNICODE_VERSION}
        self._create(config.indexName, TEXT, cfg,
                     lambda path: self._build_text(df, cfg, source, path, None))

    def _build_text(self, df: DataFrame, cfg: dict, source: dict, data_path: str,
                    previous: Any) -> tuple[dict, dict]:
        """Writes the shards of ``source``'s files; an incremental refresh (``previous``: the
        current entry) indexes only appended or modified files and keeps the earlier shards,
        in which modified and deleted files are ignored from then on."""
        current = {p: (size, mtime) for p, size, mtime in source["files"]}
        kept: list[dict] = []
        todo = source["files"]
        if previous is not None:
            old = {p: (size, mtime) for p, size, mtime in covered_files(previous)}
            todo = [f for f in source["files"] if old.get(f[0]) != (f[1], f[2])]
            for shard in previous.content["shards"]:
                files = [f if f is not None and current.get(f) == old.get(f) else None
                         for f in shard["files"]]
                if any(files):
                    kept.append({**shard, "files": files})
        self._fs.mkdirs(data_path)
        for i, shard in enumerate(kept):   # each data version holds all its shards
            target = f"{data_path.rstrip('/')}/shards/kept-{i:05d}.parquet"
            self._fs.copy(shard["path"], target)
            kept[i] = {**shard, "path": self._fs.qualify(target)}
        built: list[dict] = []
        if todo:
            workers.ship(self.spark)
            scope = df if previous is None else df.where(
                F.col("_metadata.file_path").isin([self._uri(p) for p, _, _ in todo]))
            with session.rewriter(self.spark).suspended():
                built = write_shards(scope, cfg, source["format"],
                                     f"{data_path.rstrip('/')}/{'new' if kept else 'all'}")
        shards = kept + built
        size = sum(self._fs.size(s["path"]) for s in shards)
        content = {"shards": shards, "numFiles": len(shards), "sizeInBytes": size,
                   "numRows": sum(s["rows"] for s in shards),
                   "textBytes": sum(s["textBytes"] for s in shards),
                   "indexedFiles": len(todo), "reusedShards": len(kept)}
        return source, content

    def _uri(self, path: str) -> str:
        return self.spark.sparkContext._jvm.org.apache.hadoop.fs.Path(path).toUri().toString()

    def refreshIndex(self, indexName: str, mode: str = "full") -> None:
        """Brings the index up to date with its source's current files.

        ``mode="full"`` rebuilds it into a new data version. ``mode="incremental"`` indexes only
        the files appended (or modified) since, into a new data version: a covering index adds
        their rows to its previous files (which it keeps using), and drops the rows of deleted or
        modified files when it has a lineage column (without one, those need a full
        refresh); a data-skipping index sketches the new files and drops deleted ones; a text
        index indexes the new files and ignores deleted ones. ``mode="quick"`` only records
        the changed files in the index log: queries read appended files next to the index and
        filter deleted files' rows out by lineage (hybrid scan), within the hybrid-scan limits.
        When neither the source's files nor the settings that change what is read from them
        have changed, nothing is done and a message is logged. Each refresh writes an event
        (see :meth:`events`).
        """
        if mode not in REFRESH_MODES:
            raise InvalidIndexConfigError(
                f"refresh mode {mode!r} is not supported; use one of {', '.join(REFRESH_MODES)}")
        lifecycle = self._lifecycle()
        entry = lifecycle.get(indexName)
        df = self._read_source(entry.source)
        source = self._source(df)
        unchanged = source_mismatch(entry.source, source, source["schema"]) is None
        if (entry.state is IndexState.ACTIVE and unchanged
                and (mode == "quick" or not entry.content.get("quickRefresh"))):
            log.info("index '%s' is up to date with its source; nothing to refresh", entry.name)
            return
        if mode != "full":
            self._check_refreshable(entry, source, mode)
        with self._failure_event("refresh", entry.name, mode, entry) as started:
            if mode == "quick":
                new = lifecycle.record(indexName, lambda e: self._quick(e, source))
            else:
                new = lifecycle.refresh(indexName, self._refresh_build(df, entry, source, mode))
        self._event("refresh", entry, new, mode, started)
        self._changed()

    def _refresh_build(self, df: DataFrame, entry: Any, source: dict, mode: str) -> Any:
        """The build function of a full or incremental refresh of ``entry``."""
        same_reading = source_mismatch(entry.source, source, source["schema"],
                                       check_files=False) is None
        incremental = mode == "incremental" and same_reading
        if entry.kind == TEXT:
            previous_entry = entry if incremental else None
            return lambda path: self._build_text(df, entry.config, source, path, previous_entry)
        if entry.kind == SKIPPING:
            previous = session.rewriter(self.spark).skipping_table(entry) if incremental else {}
            return lambda path: self._build_skipping(df, entry.config, source, path, previous)
        if incremental:
            return lambda path: self._build_incremental(df, entry, source, path)
        return lambda path: self._build(df, entry.config, source, path)

    def _event(self, name: str, before: IndexLogEntry | None, after: IndexLogEntry, mode: str,
               started: int, stats: tuple[dict, dict] | None = None) -> None:
        """Records a finished operation; ``stats`` (input, output) default to the data of the
        versions before (none for a create) and after."""
        if stats is None:
            stats = (_input_stats(before), file_stats(after.content.get("files"), after.content))
        EventLog(self._fs, self._settings().system_path).write(
            name, after.name, mode, started, now_ms(), after.data_version, *stats)

    @contextlib.contextmanager
    def _failure_event(self, name: str, index: str, mode: str,
                       before: IndexLogEntry | list[list] | None) -> Iterator[int]:
        """Yields the start time of operation ``name`` on ``index``; when the block raises,
        records a failed event (input: ``before``, the entry or the data files the operation
        read; no output) and lets the error through unchanged."""
        started = now_ms()
        try:
            yield started
        except Exception as exc:
            try:
                EventLog(self._fs, self._settings().system_path).write(
                    name, index, mode, started, now_ms(), None, _input_stats(before),
                    file_stats([]), error=f"{type(exc).__name__}: {exc}")
            except Exception:   # the operation's own error is the one to report
                log.warning("could not record the failed %s of index '%s'", name, index,
                            exc_info=True)
            raise

    def optimizeIndex(self, indexName: str, mode: str = "quick") -> None:
        """Compacts a covering index's small data files, per bucket, into one sorted file each,
        in a new data version.

        ``mode="quick"`` selects files level by level (a file's level is floor(log10(rows)); the
        files of one bucket and level are compacted once together they reach the next level),
        lowest level first, up to ``spark.accelerator.index.optimize.bytesPerIteration`` bytes,
        so repeated calls converge instead of rewriting the same files. ``mode="full"``
        compacts every bucket with more than one file. Either mode folds the delta files of
        incremental refreshes into the buckets (quick mode oldest first within the same byte
        budget, at least one; full mode all of them, and every bucket then ends as one file).
        When nothing qualifies, nothing is done and a message is logged. Writes an event (see
        :meth:`events`).
        """
        if mode not in compaction.MODES:
            raise InvalidIndexConfigError(
                f"optimize mode {mode!r} is not supported; use one of "
                f"{', '.join(compaction.MODES)}")
        lifecycle = self._lifecycle()
        entry = lifecycle.get(indexName)
        if entry.kind != COVERING:
            raise InvalidIndexConfigError(
                f"index '{entry.name}' is a {entry.kind} index; optimizeIndex compacts the data "
                "files of covering indexes")
        if entry.state is not IndexState.ACTIVE:
            raise IndexStateError(
                f"cannot optimize index '{entry.name}': it is {entry.state}, and optimize needs "
                "it ACTIVE")
        files = [compaction.DataFile.of(f) for f in self._data_files(entry)]
        groups = compaction.select(files, mode, self._settings().optimize_bytes,
                                  int(entry.config["numBuckets"]))
        if not groups:
            log.info("index '%s': no data files to compact (mode=%s)", entry.name, mode)
            return
        chosen = {f.name for g in groups for f in g}
        before = [[f.name, f.bucket, f.rows, f.bytes] for f in files if f.name in chosen]
        with self._failure_event("optimize", entry.name, mode, before) as started:
            new = lifecycle.refresh(indexName, lambda path: self._compact(entry, chosen, path),
                                    IndexState.OPTIMIZING)
        old = {f.name for f in files}
        after = [f for f in new.content["files"] if f[0] not in old]
        self._event("optimize", entry, new, mode, started, (file_stats(before), file_stats(after)))
        self._changed()

    def _compact(self, entry: Any, chosen: set[str], data_path: str) -> tuple[dict, dict]:
        """The new data version of an optimize: the ``chosen`` files of ``entry`` rewritten,
        one sorted file per bucket, next to copies of its other files."""
        root = entry.content["path"].rstrip("/").rsplit("/", 1)[0]
        indexed, _ = index_columns(entry.config)
        schema = StructType.fromJson(json.loads(entry.content["schema"]))
        with session.rewriter(self.spark).suspended():
            rows = self.spark.read.schema(schema).parquet(*[f"{root}/{n}" for n in sorted(chosen)])
            written = write_buckets(rows, [c.name for c in indexed], entry.config["numBuckets"],
                                    data_path, self._fs)
        kept = [f for f in self._data_files(entry) if f[0] not in chosen]
        files = written["files"] + self._copy_data(entry, kept, data_path)
        content = {**entry.content, "files": files, "numFiles": len(files),
                   "numRows": sum(f[2] for f in files), "sizeInBytes": sum(f[3] for f in files)}
        return entry.source, content

    def events(self) -> DataFrame:
        """The events of index operations (create, refresh, optimize) under the system path,
        oldest first: operation name, index, mode, start and end time, data version written,
        the input and output data files' stats (files, levels, rows, bytes), and the status
        ("succeeded" or "failed") with, for a failure, the error it raised (a failed operation
        leaves the index in a transient state until ``cancel``)."""
        rows = []
        for e in EventLog(self._fs, self._settings().system_path).read():
            stats = [(s["files"], s["levels"], s["rows"], s["bytes"])
                     for s in (e["input"], e["output"])]
            rows.append((e["name"], e["index"], e["mode"],
                         datetime.fromtimestamp(e["started"] / 1000),
                         datetime.fromtimestamp(e["finished"] / 1000),
                         e.get("dataVersion"), *stats, e.get("status", "succeeded"),
                         e.get("error")))
        return self.spark.createDataFrame(rows, _EVENTS_SCHEMA)

    def _read_source(self, source: dict) -> DataFrame:
        """The source of an index read again as it was when the index was built: same format,
        options and schema (so an explicit schema or CSV options are kept), current files."""
        schema = StructType([StructField(name, _parse_datatype_json_value(t))
                             for name, t in source["schema"]])
        return (self.spark.read.format(source["format"]).options(**read_options(source))
                .schema(schema).load(source["rootPaths"]))

    def deleteIndex(self, indexName: str) -> None:
        """Soft-deletes the index: it is no longer used, its data is kept for restoreIndex."""
        self._lifecycle().delete(indexName)
        self._changed()

    def restoreIndex(self, indexName: str) -> None:
        """Brings a deleted index back into use."""
        self._lifecycle().restore(indexName)
        self._changed()

    def vacuumIndex(self, indexName: str, retentionSeconds: float | None = None) -> None:
        """Removes a deleted index and its data for good; on an ACTIVE index, removes the data
        versions it no longer uses (left by refresh and optimize) once they were replaced more
        than ``retentionSeconds`` ago (default
        ``spark.accelerator.index.vacuum.retentionSeconds``, one hour): queries planned before
        a refresh, here or in another process (which sees it within
        ``spark.accelerator.index.cache.expirySeconds``), may still read the older version.
        Raises InvalidIndexConfigError for a negative retention."""
        retention = (self._settings().vacuum_retention_seconds if retentionSeconds is None
                     else retentionSeconds)
        if not retention >= 0:
            raise InvalidIndexConfigError(
                f"vacuum retention must be 0 seconds or more, got {retention!r}")
        lifecycle = self._lifecycle()
        if lifecycle.get(indexName).state is IndexState.ACTIVE:
            removed, kept = lifecycle.vacuum_outdated(indexName, self._referenced_dirs,
                                                      int(retention * 1000))
            log.info("index '%s': removed %d unreferenced data versions", indexName, len(removed))
            if kept:
                log.info("index '%s': kept %d unreferenced data versions replaced less than "
                         "%g s ago (%s): %s", indexName, len(kept), retention, VACUUM_RETENTION,
                         ", ".join(kept))
        else:
            lifecycle.vacuum(indexName)
        self._changed()

    @staticmethod
    def _referenced_dirs(entry: IndexLogEntry) -> list[str]:
        """The data version directories an index's current entry reads."""
        return data_dirs(entry.content) if entry.kind == COVERING else [entry.content["path"]]

    def cancel(self, indexName: str) -> None:
        """Rolls back an operation that did not finish, restoring the last stable state."""
        self._lifecycle().cancel(indexName)
        self._changed()

    # --- full-text search ---------------------------------------------------------------
    def search(self, df: DataFrame, indexName: str, query: str, score: bool = False) -> DataFrame:
        """The rows of ``df`` whose indexed column matches the full-text ``query``.

        ``query`` is in tantivy's query language over the column's words (lower-cased, split
        at non-alphanumeric characters): terms, ``"phrases"``, ``AND``/``OR``/``NOT`` (``-x``),
        prefixes (``time*``). The index selects the files holding a match; every row of those
        files (and of files the index does not know yet) is checked exactly, so the result is
        the same whether or not the index is up to date. ``score=True`` adds a ``score`` column
        (tantivy's BM25 over the whole index; Parquet sources only; null for rows of files the
        index does not hold).

        Raises IndexNotFoundError, InvalidIndexConfigError when the index is not an ACTIVE
        text index over ``df``'s source or the query does not parse, and
        UnsupportedSourceError when ``df`` does not read files directly.
        """
        entry = self._lifecycle().get(indexName)
        if entry.kind != TEXT:
            raise InvalidIndexConfigError(
                f"index '{entry.name}' is a {entry.kind} index; search needs a text index "
                "(TextIndexConfig)")
        if entry.state is not IndexState.ACTIVE:
            raise InvalidIndexConfigError(
                f"index '{entry.name}' is {entry.state}; search needs an ACTIVE index")
        source = self._source(df)
        if source.get("rootPaths") != entry.source.get("rootPaths"):
            raise InvalidIndexConfigError(
                f"index '{entry.name}' is over {', '.join(entry.source.get('rootPaths', []))}, "
                f"the DataFrame reads {', '.join(source.get('rootPaths', []))}")
        mismatch = source_mismatch(entry.source, source, source["schema"], check_files=False)
        if mismatch:
            raise InvalidIndexConfigError(f"index '{entry.name}' cannot answer this DataFrame: "
                                          f"{mismatch}; refresh the index")
        if score and source["format"] != "parquet":
            raise InvalidIndexConfigError(
                f"index '{entry.name}': score=True needs a Parquet source (rows are matched to "
                f"the index by their position in the file); the source is {source['format']}")
        try:
            text_search.check_query(query)
        except ValueError as e:
            raise InvalidIndexConfigError(
                f"index '{entry.name}': invalid full-text query {query!r}: {e}") from None
        reader = session.rewriter(self.spark).text_reader(entry, self._settings())
        workers.ship(self.spark)
        with session.rewriter(self.spark).suspended():
            return text_search.search(df, entry, source, reader, query, score, self._uri)

    # --- listing ------------------------------------------------------------------------
    def indexes(self) -> DataFrame:
        """All indexes of the system path: name, kind, columns, buckets, state, location, size."""
        rows = [_summary(e) for e in self._lifecycle().list()]
        return self.spark.createDataFrame(rows, _SUMMARY_SCHEMA)

    def index(self, indexName: str) -> DataFrame:
        """One index with its details: source files, data version and statistics."""
        entry = self._lifecycle().get(indexName)
        row = _summary(entry) + (
            len(entry.source.get("files", [])), entry.source.get("format"),
            list(entry.source.get("rootPaths", [])), entry.data_version,
            entry.content.get("numRows"), entry.id)
        return self.spark.createDataFrame([row], _DETAIL_SCHEMA)

    def history(self) -> DataFrame:
        """The query history recorded under the system path (one row per query the rewrite saw),
        including records still buffered in this process only after :meth:`flushHistory`."""
        return read_history(self.spark, self._settings().system_path)

    @staticmethod
    def flushHistory(spark: SparkSession) -> int:
        """Writes the query history this process buffered for ``spark``'s system path now
        (it is otherwise written in the background); returns how many records were written."""
        system_path = Settings.of_session(spark).system_path
        return session.rewriter(spark).recorder(system_path).flush()

    # --- plan analysis ------------------------------------------------------------------
    def explain(self, df: DataFrame, verbose: bool = False) -> str:
        """Prints and returns the plan with indexes, the plan without, and the indexes used."""
        text = explain_mod.explain(self.spark, df, verbose)
        print(text)
        return text

    def whyNot(self, df: DataFrame, indexName: str | None = None) -> list[explain_mod.WhyNot]:
        """Why each index (or the named one) is not used by ``df``: one reason per source."""
        reasons = explain_mod.why_not(self.spark, df, indexName)
        print(explain_mod.format_why_not(reasons))
        return reasons


IndexConfig = CoveringIndexConfig


def _summary(e: IndexLogEntry) -> tuple:
    cfg = e.config
    indexed = ([".".join(c["path"]) for c in cfg.get("indexedColumns", [])]
               or [f"{s['kind']}({s['expression']})" for s in cfg.get("sketches", [])]
               or ([cfg["column"]] if "column" in cfg else []))
    return (e.name, e.kind, indexed,
            [".".join(c["path"]) for c in cfg.get("includedColumns", [])],
            cfg.get("numBuckets"), e.state.value, e.content.get("path"),
            e.content.get("numFiles"), e.content.get("sizeInBytes"))


def _input_stats(before: IndexLogEntry | list[list] | None) -> dict:
    """The stats of what an operation read: an index version's data files (none before a
    create), or the data files given."""
    if before is None or isinstance(before, list):
        return file_stats(before or [])
    return file_stats(before.content.get("files"), before.content)


_SUMMARY_SCHEMA = ("name string, kind string, indexedColumns array<string>, "
                   "includedColumns array<string>, numBuckets int, state string, location string, "
                   "numFiles long, sizeInBytes long")
_STATS = "struct<files:long, levels:array<int>, rows:long, bytes:long>"
_EVENTS_SCHEMA = (f"name string, index string, mode string, started timestamp, "
                  f"finished timestamp, dataVersion int, input {_STATS}, output {_STATS}, "
                  "status string, error string")
_DETAIL_SCHEMA = _SUMMARY_SCHEMA + (", sourceFiles long, sourceFormat string, sourcePaths array<string>,"
                                    " dataVersion int, numRows long, logVersion int")
