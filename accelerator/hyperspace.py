"""The Hyperspace-compatible public API: create and manage indexes, turn the rewrite on and off,
and see which indexes a query uses and why others are not used."""
from __future__ import annotations

import json
import logging
from typing import Any

from pyspark.sql import DataFrame, SparkSession, functions as F
from pyspark.sql.types import StructField, StructType, _parse_datatype_json_value

from accelerator import explain as explain_mod
from accelerator import jvm, session, workers
from accelerator.catalog import CATALOG
from accelerator.settings import Settings
from indexes.covering.build import write_covering_index
from indexes.covering.config import KIND as COVERING, CoveringIndexConfig
from indexes.covering.rule import index_columns
from indexes.source import read_options, relation_schema, source_mismatch
from indexes.errors import InvalidIndexConfigError, UnsupportedSourceError
from indexes.skipping import rule as skipping_rule
from indexes.skipping.build import compute_stats, resolve_sketches, sketch_specs
from indexes.skipping.config import KIND as SKIPPING, DataSkippingIndexConfig
from indexes.skipping.store import STATS_FILE, FileEntry, encode
from indexes.text.build import resolve_column, write_shards
from indexes.text.config import KIND as TEXT, TextIndexConfig
from indexes.text.literals import UNICODE_VERSION
from indexes.text import search as text_search
from indexes.fs import HadoopFs
from indexes.lifecycle import IndexLifecycle
from indexes.log import IndexLogEntry, IndexState
from indexes.plan import LOGICAL_RELATION, parse_plan

log = logging.getLogger("accelerator.hyperspace")

REFRESH_MODES = {COVERING: ("full", "incremental"), SKIPPING: ("full", "incremental"),
                 TEXT: ("full", "incremental")}


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
        self._lifecycle().create(config.indexName, COVERING, cfg,
                                 lambda path: self._build(df, cfg, source, path))
        self._changed()

    def _build(self, df: DataFrame, cfg: dict, source: dict, data_path: str) -> tuple[dict, dict]:
        indexed, included = index_columns(cfg)
        with session.rewriter(self.spark).suspended():
            content = write_covering_index(df, indexed, included, cfg["numBuckets"], data_path,
                                           self._fs)
        return source, content

    @staticmethod
    def _check_appended_only(entry: Any, source: dict) -> None:
        """An incremental refresh of a covering index adds the rows of appended files; a source
        read otherwise, or with files deleted or modified, needs a full refresh."""
        mismatch = source_mismatch(entry.source, source, source["schema"], check_files=False)
        if mismatch:
            raise InvalidIndexConfigError(
                f"index '{entry.name}' cannot be refreshed incrementally: {mismatch}; use "
                "mode='full'")
        current = {tuple(f) for f in source["files"]}
        gone = [f[0] for f in entry.source.get("files", []) if tuple(f) not in current]
        if gone:
            raise InvalidIndexConfigError(
                f"index '{entry.name}' cannot be refreshed incrementally: {len(gone)} indexed "
                f"source files were deleted or modified (e.g. {gone[0]}), and the index cannot "
                "drop their rows; use mode='full'")

    def _build_appended(self, df: DataFrame, entry: Any, source: dict,
                        data_path: str) -> tuple[dict, dict]:
        """A covering index's new data version: the rows of the appended files, bucketed like
        the index, next to copies of the previous version's files (a bucket may then span
        several files, which bucketed reads allow)."""
        indexed, included = index_columns(entry.config)
        recorded = {f[0] for f in entry.source.get("files", [])}
        appended = [self._uri(p) for p, _, _ in source["files"] if p not in recorded]
        with session.rewriter(self.spark).suspended():
            added = write_covering_index(df.where(F.col("_metadata.file_path").isin(appended)),
                                         indexed, included, entry.config["numBuckets"],
                                         data_path, self._fs)
        previous = entry.content["path"].rstrip("/")
        for info in self._fs.list(previous):
            if not info.is_dir and info.name.endswith(".parquet"):
                self._fs.copy(info.path, f"{data_path.rstrip('/')}/{info.name}")
        content = {key: entry.content[key] + added[key]
                   for key in ("numRows", "numFiles", "sizeInBytes")}
        return source, {**added, **content, "appendedFiles": len(appended)}

    def _create_skipping(self, df: DataFrame, config: DataSkippingIndexConfig) -> None:
        source = self._source(df)
        with session.rewriter(self.spark).suspended():
            sketches = resolve_sketches(df, config, source["partitionColumns"])
        ansi = str(self.spark.conf.get("spark.sql.ansi.enabled")).lower() == "true"
        cfg = {"sketches": [s.to_json() for s in sketches], "ansi": ansi}
        self._lifecycle().create(config.indexName, SKIPPING, cfg,
                                 lambda path: self._build_skipping(df, cfg, source, path, {}))
        self._changed()

    def _build_skipping(self, df: DataFrame, cfg: dict, source: dict, data_path: str,
                        previous: dict[str, FileEntry]) -> tuple[dict, dict]:
        """Writes the statistics of ``source``'s files, reusing ``previous`` entries of files
        that did not change (an incremental refresh sketches only the others)."""
        files = source["files"]
        reused = {p: previous[p] for p, size, mtime in files
                  if p in previous and (previous[p].size, previous[p].mtime) == (size, mtime)}
        todo = [f for f in files if f[0] not in reused]
        sketches = skipping_rule.sketches_of(cfg)
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
        self._lifecycle().create(config.indexName, TEXT, cfg,
                                 lambda path: self._build_text(df, cfg, source, path, None))
        self._changed()

    def _build_text(self, df: DataFrame, cfg: dict, source: dict, data_path: str,
                    previous: Any) -> tuple[dict, dict]:
        """Writes the shards of ``source``'s files; an incremental refresh (``previous``: the
        current entry) indexes only appended or modified files and keeps the earlier shards,
        in which modified and deleted files are ignored from then on."""
        current = {p: (size, mtime) for p, size, mtime in source["files"]}
        kept: list[dict] = []
        todo = source["files"]
        if previous is not None:
            old = {p: (size, mtime) for p, size, mtime in previous.source["files"]}
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
        """Brings the index up to date with its source's current files, in a new data version.

        ``mode="full"`` rebuilds it; ``mode="incremental"`` indexes only the files appended
        since: a covering index adds their rows (its other files are copied into the new
        version; deleted or modified files need a full refresh), a data-skipping index sketches
        appended or modified files and drops deleted ones, a text index indexes them and
        ignores deleted ones. When neither the source's files nor the settings that change what
        is read from them have changed, nothing is done and a message is logged.
        """
        known = sorted({m for modes in REFRESH_MODES.values() for m in modes})
        if mode not in known:
            raise InvalidIndexConfigError(
                f"refresh mode {mode!r} is not supported; use one of {', '.join(known)}")
        lifecycle = self._lifecycle()
        entry = lifecycle.get(indexName)
        modes = REFRESH_MODES.get(entry.kind, ("full",))
        if mode not in modes:
            raise InvalidIndexConfigError(
                f"refresh mode {mode!r} is not supported for {entry.kind} index '{entry.name}'; "
                f"use one of {', '.join(modes)}")
        df = self._read_source(entry.source)
        source = self._source(df)
        if entry.state is IndexState.ACTIVE and source_mismatch(entry.source, source, source["schema"]) is None:
            log.info("index '%s' is up to date with its source; nothing to refresh", entry.name)
            return
        if entry.kind == TEXT:
            previous_entry = entry if mode == "incremental" and source_mismatch(
                entry.source, source, source["schema"], check_files=False) is None else None
            build = lambda path: self._build_text(df, entry.config, source, path, previous_entry)  # noqa: E731
        elif entry.kind == SKIPPING:
            previous = {}
            if mode == "incremental" and source_mismatch(entry.source, source, source["schema"],
                                                         check_files=False) is None:
                previous = session.rewriter(self.spark).skipping_table(entry)
            build = lambda path: self._build_skipping(df, entry.config, source, path, previous)  # noqa: E731
        elif mode == "incremental":
            self._check_appended_only(entry, source)
            build = lambda path: self._build_appended(df, entry, source, path)  # noqa: E731
        else:
            build = lambda path: self._build(df, entry.config, source, path)  # noqa: E731
        lifecycle.refresh(indexName, build)
        self._changed()

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

    def vacuumIndex(self, indexName: str) -> None:
        """Removes a deleted index and its data for good."""
        self._lifecycle().vacuum(indexName)
        self._changed()

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


_SUMMARY_SCHEMA = ("name string, kind string, indexedColumns array<string>, "
                   "includedColumns array<string>, numBuckets int, state string, location string, "
                   "numFiles long, sizeInBytes long")
_DETAIL_SCHEMA = _SUMMARY_SCHEMA + (", sourceFiles long, sourceFormat string, sourcePaths array<string>,"
                                    " dataVersion int, numRows long, logVersion int")
