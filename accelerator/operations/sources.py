"""The Spark side of the index operations: the :class:`~indexes.actions.SourcePort` of one
session. It describes the file source a DataFrame reads (through the JVM's plan helpers), reads
an index's source again as it was built, tells why a source is gone or how it changed since an
index was built (for listings), prepares the executors for a kind's builds, suspends the
rewrite while builds read, lets Ctrl-C cancel a build, names a build's Spark jobs, and tells the rewriter when the indexes
changed."""
from __future__ import annotations

import json
from typing import Any, ContextManager

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructField, StructType, _parse_datatype_json_value

from accelerator.query import session
from accelerator.query.catalog import catalog
from accelerator.runtime import build_progress, interrupts, jvm, workers
from accelerator.runtime.settings import Settings
from accelerator.runtime.spark_versions import dataset_class
from indexes.description import SourceDescription
from indexes.errors import AcceleratorError, SourceNotFoundError, UnsupportedSourceError
from indexes.freshness import path_problem, source_warnings
from indexes.fs import HadoopFs
from indexes.kind import IndexKind
from indexes.log import IndexLogEntry
from indexes.plan import LOGICAL_RELATION, parse_plan
from indexes.source import read_options, relation_schema, source_name, table_change


class SparkSources:
    """The source port of one SparkSession (see the module docstring)."""

    def __init__(self, spark: SparkSession, fs: HadoopFs):
        self.spark = spark
        self.fs = fs

    def settings(self) -> Settings:
        """The session's accelerator settings as they are now."""
        return Settings.of_session(self.spark)

    def suspended(self) -> ContextManager[None]:
        """No rewriting of this thread's queries on the session while the block runs."""
        return session.suspended(self.spark)

    def interruptible(self) -> ContextManager[None]:
        """Ctrl-C during the block cancels the session's Spark jobs (from another thread,
        without py4j's tracebacks); the block then raises KeyboardInterrupt."""
        return interrupts.cancel_on_interrupt(self.spark)

    def building(self, what: str) -> ContextManager[None]:
        """The block's Spark jobs described as building ``what``, a long build's progress
        logged (:mod:`accelerator.runtime.build_progress`)."""
        return build_progress.building(self.spark, what)

    def changed(self) -> None:
        """Forgets the cached index list and reloads it, so the JVM rule knows at once which
        sources are indexed (it describes their files in the payload of the next query)."""
        catalog(self.spark).invalidate()
        rewriter = session.rewriter(self.spark)
        rewriter.forget_answers()
        rewriter.active_indexes(self.settings())

    def prepare_executors(self, kind: IndexKind) -> None:
        """Makes the executors ready to run the Python code of ``kind``'s builds (before any
        index state is written): the ``indexes`` package shipped, the workers' interpreter
        chosen, the modules the builds import checked."""
        workers.prepare(self.spark, kind.executor_modules)

    def describe_source(self, df: Any) -> SourceDescription:
        """Description of the file source ``df`` reads directly, or UnsupportedSourceError."""
        if not isinstance(df, DataFrame):
            shown = f"{type(df).__name__} {df!r}" if isinstance(df, str) else type(df).__name__
            raise UnsupportedSourceError(
                f"an index is built over a DataFrame that reads files, such as "
                f"spark.read.parquet(path); got {shown}")
        plans = jvm.helpers(self.spark).plans
        analyzed = df._jdf.queryExecution().analyzed()
        problem = plans.fileViewProblem(analyzed)
        if problem:
            raise UnsupportedSourceError(
                f"indexes are built over an Iceberg table only when Spark can read its snapshot "
                f"as plain Parquet files, and {problem}")
        analyzed = plans.fileView(analyzed)
        root = parse_plan(analyzed.toJSON())
        while root.cls == "SubqueryAlias" and len(root.children) == 1:   # spark.table(name)
            root = root.children[0]
        if root.cls == "HiveTableRelation":
            raise UnsupportedSourceError(
                "indexes are not built over Hive SerDe tables; use a data source table "
                "(CREATE TABLE ... USING parquet, or saveAsTable), or keep "
                "spark.sql.hive.convertMetastoreParquet/Orc on so Spark reads the table as one")
        if root.cls != LOGICAL_RELATION or len(plans.fileRelations(analyzed)) != 1:
            raise UnsupportedSourceError(
                "indexes can only be built over a DataFrame that reads files directly, such as "
                "spark.read.parquet(path) (also json, csv, orc; partitioned directories and glob "
                "patterns are fine), a Delta or Iceberg table (spark.read.format('delta')"
                ".load(path)) or spark.table(name) of a data source, Delta or Iceberg table; this "
                f"DataFrame's plan starts with {root.cls}. Create the index on the DataFrame "
                "returned by spark.read or spark.table and apply filters or projections in "
                "queries instead")
        source = SourceDescription.from_json(json.loads(plans.describe(analyzed, 0, 2)))
        if source.table_format == "iceberg" and (source.files is None or source.plain_files):
            raise UnsupportedSourceError(
                "indexes are built over an Iceberg table's snapshot read as plain Parquet files, "
                "and " + (f"{source.plain_files} (rewrite them: CALL <catalog>.system."
                          "rewrite_data_files with the option delete-file-threshold)"
                          if source.plain_files else "this snapshot holds files in another format"))
        if source.files is None:
            raise UnsupportedSourceError(
                "indexes need a source whose files Spark lists itself (spark.read over paths, "
                "or a catalog table); this relation uses a custom file index")
        # the Spark version is named when an index built under another Spark cannot serve this one
        return source.with_index_facts(
            relation_schema(root), json.loads(plans.currentReadSettings(self.spark._jsparkSession)),
            self.spark.version)

    def files_frame(self, df: DataFrame) -> DataFrame:
        """``df`` as index builds read it: itself, or, when it reads an Iceberg table, a read of
        the Parquet files of the snapshot it reads (the same rows, with Spark's file metadata
        column, which builds record as lineage)."""
        plans = jvm.helpers(self.spark).plans
        analyzed = df._jdf.queryExecution().analyzed()
        viewed = plans.fileView(analyzed)
        if viewed.equals(analyzed):
            return df
        return DataFrame(dataset_class(self.spark).ofRows(self.spark._jsparkSession, viewed),
                         self.spark)

    def source_problem(self, entry: IndexLogEntry) -> str | None:
        """Why an index's source is gone (its catalog table dropped, renamed or moved, a root
        path or every directory of its glob pattern removed), or None."""
        source = entry.source
        if source.table:
            return table_change(source, self._table(source.table))
        return path_problem(self.fs, source)

    def source_warnings(self, entries: list[IndexLogEntry]) -> dict[str, str]:
        """By index name, for the ACTIVE ``entries`` whose source is not as their data was
        built: why the source is gone (:meth:`source_problem`), or what changed and the refresh
        that fixes it (:func:`indexes.freshness.source_warnings`). Describes each source's
        current files once (a file listing): for listings, never on a query's path."""
        return source_warnings(entries, self.source_problem, self._current)

    def _current(self, entry: IndexLogEntry) -> SourceDescription | str:
        """The description of ``entry``'s source now, or why it cannot be read."""
        try:
            return self.describe_source(self.read_source(entry))
        except (AcceleratorError, AnalysisException) as exc:
            return f"its source cannot be read: {(str(exc).strip().splitlines() or [''])[0]}"

    def _table(self, name: str) -> SourceDescription | None:
        """The description (without files) of the catalog table now named ``name``, or None
        when there is none or it is not a table of files."""
        try:
            analyzed = self.spark.table(name)._jdf.queryExecution().analyzed()
        except AnalysisException:
            return None
        plans = jvm.helpers(self.spark).plans
        analyzed = plans.fileView(analyzed)
        if len(plans.fileRelations(analyzed)) != 1:
            return None
        return SourceDescription.from_json(json.loads(plans.describe(analyzed, 0, 0)))

    def read_source(self, entry: IndexLogEntry) -> DataFrame:
        """The source of an index read again as it was when the index was built: its catalog
        table, a Delta or Iceberg table by path, or the same format, options and schema over its paths or
        glob pattern (so an explicit schema or CSV options are kept), current files.
        SourceNotFoundError when the source is gone (see :meth:`source_problem`)."""
        problem = self.source_problem(entry)
        if problem:
            raise SourceNotFoundError(
                f"the source of index '{entry.name}' is gone: {problem}")
        source = entry.source
        try:
            if source.table:
                return self.spark.table(source.table)
            if source.table_format:   # a table by path: its current version
                return self.spark.read.format(source.table_format).load(source.root_paths[0])
            schema = StructType([StructField(name, _parse_datatype_json_value(t))
                                 for name, t in source.schema])
            return (self.spark.read.format(source.format).options(**read_options(source))
                    .schema(schema).load(source.glob_path or source.root_paths))
        except AnalysisException as exc:   # e.g. removed between the check and the read
            raise SourceNotFoundError(
                f"the source of index '{entry.name}' ({source_name(source)}) cannot "
                f"be read: {str(exc).splitlines()[0]}") from None

