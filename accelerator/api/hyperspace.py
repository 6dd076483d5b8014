"""The Hyperspace-compatible public API: a thin facade to create and manage indexes, turn the
plan rewrite on and off, and see which indexes a query uses and why others are not used.

The work happens elsewhere: the facade makes the session's
:class:`~accelerator.context.AcceleratorContext` (the composition root) and calls its index
operations (:mod:`indexes.actions`, through the index kinds of :mod:`indexes.kinds`), cache
operations and rule engine (:mod:`accelerator.engine.advisor`); the rewrite is
:mod:`accelerator.query.rewriter`'s, explain and whyNot :mod:`accelerator.api.explain`'s,
search's checks :mod:`accelerator.api.search`'s. The facade only turns their results into
DataFrames (:mod:`accelerator.api.rows`).
"""
from __future__ import annotations

from typing import Any, Callable

from pyspark.sql import DataFrame, SparkSession

from accelerator.api import explain as explain_mod
from accelerator.api import rows as R
from accelerator.api import search as search_mod
from accelerator.api.frames import local_frame
from accelerator.context import AcceleratorContext, flush_history
from accelerator.engine.advisor import Advisor
from accelerator.query import session
from accelerator.runtime.settings import RULES_PATH
from accelerator.scheduler.service import Scheduler
from indexes.actions import OperationResult
from indexes.covering.config import CoveringIndexConfig
from indexes.skipping.config import DataSkippingIndexConfig
from indexes.text.config import TextIndexConfig
from rules.user_rules import load_rules_file


class Hyperspace:
    """Index management for one SparkSession.

    Every operation returns a one-row summary DataFrame (``index, operation, status,
    dataVersion, filesRead, bytesRead, filesWritten, bytesWritten, seconds, message``);
    ``status`` is ``succeeded``, or ``noop`` when there was nothing to do. An operation that
    fails is rolled back to the index's last stable state and raises an ``AcceleratorError``
    naming the index and the cause; every operation is recorded in :meth:`events`.

    >>> hs = Hyperspace(spark)
    >>> hs.createIndex(df, IndexConfig("idx", ["nested.nst.field1"], ["id", "nested.nst.field2"]))
    >>> Hyperspace.enable(spark)   # queries over df's files now read the index where it applies
    """

    def __init__(self, spark: SparkSession):
        """The facade of ``spark``; UnsupportedSparkError when its Spark version is not
        supported."""
        self.spark = spark
        #: the session's accelerator parts (:class:`~accelerator.context.AcceleratorContext`)
        self.context = AcceleratorContext(spark)
        self._advisor = Advisor(self.context)

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

    def _summary(self, result: OperationResult) -> DataFrame:
        return local_frame(self.spark, [R.summary_row(result)], R.SUMMARY_SCHEMA)

    # --- lifecycle ----------------------------------------------------------------------
    def createIndex(self, df: DataFrame,
                    config: CoveringIndexConfig | DataSkippingIndexConfig | TextIndexConfig
                    ) -> DataFrame:
        """Builds an index over the files ``df`` reads and records it in the system path.

        Raises InvalidIndexConfigError for a bad config (unknown, duplicate or overlapping
        columns, unsupported types, name collisions, invalid sketch expressions, a text index
        over a non-string column), UnsupportedSourceError when ``df`` is not a DataFrame that
        reads files directly, IndexExistsError when the name is taken.
        """
        return self._summary(self.context.indexes.create(df, config))

    def refreshIndex(self, indexName: str, mode: str = "full") -> DataFrame:
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
        have changed, nothing is done (status ``noop``). Raises SourceNotFoundError when the
        source's directory no longer exists.
        """
        return self._summary(self.context.indexes.refresh(indexName, mode))

    def optimizeIndex(self, indexName: str, mode: str = "quick") -> DataFrame:
        """Compacts a covering index's small data files, per bucket, into one sorted file each,
        in a new data version.

        ``mode="quick"`` selects files level by level (a file's level is floor(log10(rows)); the
        files of one bucket and level are compacted once together they reach the next level),
        lowest level first, up to ``spark.accelerator.index.optimize.bytesPerIteration`` bytes,
        so repeated calls converge instead of rewriting the same files. ``mode="full"``
        compacts every bucket with more than one file. Either mode folds the delta files of
        incremental refreshes into the buckets (quick mode oldest first within the same byte
        budget, at least one, and only when that cannot leave more files than it found; full
        mode all of them, and every bucket then ends as one file). When nothing qualifies,
        nothing is done (status ``noop``).
        """
        return self._summary(self.context.indexes.optimize(indexName, mode))

    def deleteIndex(self, indexName: str) -> DataFrame:
        """Soft-deletes the index: it is no longer used, its data is kept for restoreIndex."""
        return self._summary(self.context.indexes.delete(indexName))

    def restoreIndex(self, indexName: str) -> DataFrame:
        """Brings a deleted index back into use."""
        return self._summary(self.context.indexes.restore(indexName))

    def vacuumIndex(self, indexName: str, retentionSeconds: float | None = None) -> DataFrame:
        """Removes a deleted index and its data for good; on an ACTIVE index, removes the data
        versions it no longer uses (left by refresh and optimize) once they were replaced more
        than ``retentionSeconds`` ago (default
        ``spark.accelerator.index.vacuum.retentionSeconds``, one hour): queries planned before
        a refresh, here or in another process (which sees it within
        ``spark.accelerator.index.cache.expirySeconds``), may still read the older version.
        Raises InvalidIndexConfigError for a negative retention."""
        return self._summary(self.context.indexes.vacuum(indexName, retentionSeconds))

    def cancel(self, indexName: str) -> DataFrame:
        """Rolls back an operation that did not finish because its process died, restoring the
        last stable state (an operation that fails with an error rolls back by itself)."""
        return self._summary(self.context.indexes.cancel(indexName))

    def events(self) -> DataFrame:
        """The events of index operations under the system path, oldest first: ``operation``,
        ``index``, ``mode``, start and end time, the data version written, ``input`` and
        ``output`` (files, levels, rows, bytes: for a create the source files it read and the
        data it wrote, for a refresh the index data before and after, for an optimize the data
        files it compacted and wrote), and ``status`` (``succeeded`` or ``failed``) with, for a
        failure, the ``error`` it raised; ``message`` says why the rule engine did it (a
        ``revert`` of an action its probation found harmful) or what a job did. A run of one
        of the scheduler's jobs is an event too: its ``operation`` is the job's kind (warmup,
        advise, refresh, optimize, evict, vacuum), ``job`` its name, ``status`` succeeded,
        failed or ``timed out``, input and output what it read and wrote."""
        rows = [R.event_row(e) for e in self.context.events().read()]
        return local_frame(self.spark, rows, R.EVENTS_SCHEMA)

    # --- full-text search ---------------------------------------------------------------
    def search(self, df: DataFrame, indexName: str, query: str, score: bool = False) -> DataFrame:
        """The rows of ``df`` whose indexed column matches the full-text ``query``.

        ``query`` is in tantivy's query language over the column's words (lower-cased, split
        at non-alphanumeric characters): terms, ``"phrases"``, ``AND``/``OR``, ``-x`` to
        exclude, prefixes (``time*``). The index selects the files that may hold a match; every row
        of those files (and of files the index does not know yet) is checked exactly, so the
        result is the same whether or not the index is up to date. ``score=True`` adds a
        ``score`` column (tantivy's BM25 over the whole index; Parquet sources and indexes
        created with ``TextIndexConfig(..., scoring=True)`` only; null for rows of files the
        index does not hold).

        Raises IndexNotFoundError, InvalidIndexConfigError when the index is not an ACTIVE
        text index over ``df``'s source or the query does not parse, and
        UnsupportedSourceError when ``df`` does not read files directly.
        """
        return search_mod.search(self.context, df, indexName, query, score)

    # --- listing ------------------------------------------------------------------------
    def indexes(self) -> DataFrame:
        """All indexes of the system path: ``name, kind, indexedColumns, includedColumns,
        numBuckets, state, location, numFiles, sizeInBytes, warning, createdBy`` (``warning``:
        null when the index is up to date with its source; else why it cannot be used as it
        is, with what fixes it: its source is gone, is read differently, or has appended,
        modified or deleted files since the index was built (and the refresh that brings it up
        to date: ``refreshIndex('x', mode='incremental')``, or ``'full'`` when an incremental
        one cannot), or its log is corrupt; ``createdBy``: ``engine`` for an index the rule
        engine chose, else ``user``). Lists each source's files once."""
        entries = self.context.lifecycle().list()
        warnings = self.context.sources.source_warnings(entries)
        return local_frame(self.spark, R.index_rows(entries, warnings), R.INDEXES_SCHEMA)

    def index(self, indexName: str) -> DataFrame:
        """One index with the columns of :meth:`indexes` plus ``sourceFiles, sourceFormat,
        sourcePaths, dataVersion, numRows, logVersion, source`` (``source``: what the index
        is over: ``table <name> at <location>``, the glob pattern, or the paths)."""
        entry = self.context.lifecycle().get(indexName)
        warning = self.context.sources.source_warnings([entry]).get(entry.name)
        return local_frame(self.spark, [R.index_detail_row(entry, warning)], R.INDEX_SCHEMA)

    # --- the cache tier -----------------------------------------------------------------
    def cache(self, df: DataFrame, columns: list[str] | None = None, priority: str = "HIGH",
              ttl: str | None = "P7D") -> DataFrame:
        """Copies the columns ``df`` reads (or ``columns``; a nested field caches its top-level
        column) of the files it reads (after partition pruning and data skipping) into the
        cache as Parquet, one entry per file; queries over those files then read them from the
        cache while the files are unchanged. ``priority``: ALWAYS (never evicted), HIGH,
        MEDIUM, LOW, or NEVER (drops df's sources' entries and refuses to cache them until
        :meth:`uncache`); an existing entry's priority is raised, never lowered. ``ttl``: an
        ISO-8601 duration counted from the last use (None: none). Returns one row: ``files,
        bytesRead, bytesWritten, seconds``."""
        warmed = self.context.cache.cache(df, list(columns) if columns is not None else None,
                                          priority, ttl)
        return local_frame(self.spark, [R.warmup_row(warmed)], R.CACHE_SUMMARY_SCHEMA)

    def uncache(self, df: DataFrame) -> DataFrame:
        """Evicts the entries of the files ``df`` reads and lifts the NEVER marker of its
        sources; one row: ``entries, bytes`` evicted (their files go after
        ``spark.accelerator.cache.deleteGraceSeconds``)."""
        return local_frame(self.spark, [self.context.cache.uncache(df)], R.UNCACHE_SCHEMA)

    def cacheEntries(self) -> DataFrame:
        """The cache's entries: ``source, file, columns, priority, ttl, bytes, created,
        lastUsed, hits, state`` (``EVICTED`` ones are no longer served; their files are
        deleted after the grace period)."""
        return local_frame(self.spark, R.entry_rows(self.context.cache.entries()),
                           R.ENTRIES_SCHEMA)

    def cacheStats(self) -> DataFrame:
        """One row: ``capacityBytes`` (``spark.accelerator.cache.maxBytes``), ``usedBytes`` and
        ``entries`` (ACTIVE ones), ``hits``, ``misses`` (files read from the source by queries
        over cached sources), ``bytesServed`` (bytes of the entries served) and
        ``evictions``."""
        return local_frame(self.spark, [R.stats_row(self.context.cache.stats())], R.STATS_SCHEMA)

    def evictCache(self) -> DataFrame:
        """Runs the demoter now (expired entries, then the lowest priorities, least recently
        used first, while usage is above ``maxUsagePercent``, down to ``cleanupPercent``) and
        deletes files whose grace period is over; one row per entry evicted: ``source, file,
        priority, bytes, reason`` (``EXPIRED`` or ``SPACE``)."""
        return local_frame(self.spark, R.eviction_rows(self.context.cache.evict()),
                           R.EVICTED_SCHEMA)

    # --- query history ------------------------------------------------------------------
    def history(self) -> DataFrame:
        """The query history recorded under the system path (one row per query the rewrite saw),
        including records still buffered in this process only after :meth:`flushHistory`."""
        return self.context.history()

    @staticmethod
    def flushHistory(spark: SparkSession) -> int:
        """Writes the query history this process buffered for ``spark``'s system path now
        (it is otherwise written in the background), with the costs of the queries that
        finished; returns how many records were written."""
        return flush_history(spark)

    # --- the rule engine ----------------------------------------------------------------
    def loadRules(self, path: str) -> DataFrame:
        """Checks the user rules file at ``path`` (see ``configs/rules.yaml``) and makes the
        session follow it (``spark.accelerator.rules.path``). Raises ``RulesError`` listing
        every problem with its file, line and column (a column the rule's source does not
        have is one, for a source the history read or one the rule names the format of).
        Returns the rules as understood: one row
        per rule, ``source, kind, columns, includedColumns, priority, ttl, line``."""
        rules = load_rules_file(path, self._advisor.columns_of)
        self.spark.conf.set(RULES_PATH, str(path))
        return local_frame(self.spark, [R.rule_row(r) for r in rules.rules], R.RULES_SCHEMA)

    def recommend(self, since: Any = None) -> DataFrame:
        """What the rule engine would do now, from the query history (since ``since``: a
        datetime, a date or an ISO string; None: all of it) and the user rules: one row per
        instruction, ``action`` (create, drop, cache ...), ``kind`` (covering, minmax, bloom,
        valuelist, text, cache), ``source, columns, includedColumns, name, priority, ttl,
        origin`` (engine or user), ``score``, ``estimatedSecondsSaved`` (per query),
        ``estimatedBytes``, ``queries`` and a one-sentence ``reason``. Recorded queries the
        engine could not take into account are reported, not raised: one ``skip`` row per
        reason, its ``kind`` a stable code (``unreadable-record``, ``unprofiled-source``,
        ``analysis-failed``), ``queries`` how many, ``reason`` the first example; the other
        queries' advice stands. Writes this process's buffered history first, so the queries
        just run count."""
        rows = [R.instruction_row(i) for i in self._advisor.recommend(since)]
        return local_frame(self.spark, rows, R.RECOMMENDATIONS_SCHEMA)

    def applyRecommendations(self, recs: DataFrame | None = None,
                             dryRun: bool = False) -> DataFrame:
        """Carries out ``recs`` (rows of :meth:`recommend`, possibly filtered; None: what
        :meth:`recommend` returns now) in order; one failing instruction does not stop the
        others. Returns one row per instruction: ``action, kind, source, columns, name, origin,
        status`` (applied, failed, planned when ``dryRun``, or skipped for a ``skip`` row,
        which does nothing), ``message, seconds``."""
        instructions = (self._advisor.recommend() if recs is None
                        else [R.instruction_of(r) for r in recs.collect()])
        rows = [R.applied_row(a) for a in self._advisor.apply(instructions, dry_run=dryRun)]
        return local_frame(self.spark, rows, R.APPLIED_SCHEMA)

    # --- the scheduler ------------------------------------------------------------------
    def scheduler(self, path: str) -> Scheduler:
        """The jobs of the scheduler configuration file at ``path`` (see
        ``configs/accelerator.yaml``; its ``systemPath`` must be this session's) to run in this
        session: ``.start()`` runs them in background threads (taking the system path's lease:
        an error names the scheduler that holds it), ``.shutdown()`` stops them, ``.jobs()``
        lists them with their last and next runs, ``.run_job(name)`` runs one now. Start the
        session with ``spark.scheduler.mode=FAIR`` so the jobs' Spark work runs in a low-weight
        pool beside your queries. Raises ``ConfigError`` listing the file's problems."""
        return Scheduler(self.context, path)

    # --- plan analysis ------------------------------------------------------------------
    def explain(self, df: DataFrame, verbose: bool = False,
                redirectFunc: Callable[[str], Any] = print) -> str:
        """Shows (through ``redirectFunc``, ``print`` by default) and returns the plan with
        indexes, the plan without, and the indexes used; ``verbose`` adds every candidate."""
        text = explain_mod.explain(self.spark, df, verbose)
        redirectFunc(text)
        return text

    def whyNot(self, df: DataFrame, indexName: str | None = None,
               redirectFunc: Callable[[str], Any] = print) -> list[explain_mod.WhyNot]:
        """Why each index (or the named one) is not used by ``df``: one reason per source,
        shown through ``redirectFunc`` (``print`` by default) and returned."""
        reasons = explain_mod.why_not(self.spark, df, indexName)
        redirectFunc(explain_mod.format_why_not(reasons))
        return reasons


IndexConfig = CoveringIndexConfig


