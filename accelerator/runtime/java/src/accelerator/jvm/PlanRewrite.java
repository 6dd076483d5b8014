package accelerator.jvm;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.SparkPlan;


/**
 * The py4j entry point of the Python rewriter: the one object through which it reaches the
 * plan operations it cannot do cheaply through py4j (finding file relations, describing them,
 * swapping or editing one, found by its ordinal in pre-order), the published indexed roots, the
 * query history's queue and the planner strategies; the classes named do each.
 */
public final class PlanRewrite {
  /**
   * Publishes the root paths some index or the cache is over, those some data-skipping index
   * is over, and what a plan over each must hold for an index to serve it (see {@link
   * IndexedRoots#publish}): relations reading the first get their file fingerprint in the
   * payload, so deciding on an index needs no extra call while the files are those the index
   * knows; plans reading the second get their IN lists spelled out; a plan that holds nothing
   * an index needs is not handed to the rewriter.
   */
  public void setIndexedRoots(String lines, String skippingLines, String useLines) {
    IndexedRoots.publish(lines, skippingLines, useLines);
  }

  /** Forgets which settings the rewriter answered plans under, so that the next plan of every
   * session goes to it (after this process changed indexes or the cache). */
  public void forgetAnswers() {
    DeferredPlans.forget();
  }

  /** At most {@code max} payloads of plans queued for the query history (see
   * {@link DeferredPlans}), oldest first. */
  public String[] drainDeferred(int max) {
    return DeferredPlans.drain(max);
  }

  /** How many plans the query history lost since the last call (the queue was full). */
  public long takeDroppedDeferred() {
    return DeferredPlans.takeDropped();
  }

  /** The current values of the settings that change what Spark reads from files, as JSON (see
   * {@link PlanPayload#readSettings}). */
  public String currentReadSettings(SparkSession session) {
    return PlanPayload.readSettings(session);
  }

  /**
   * {@code plan} with each Iceberg table that can be read as the Parquet files of its snapshot
   * in the form of a file relation over them (see {@link IcebergFiles}): what indexes are built
   * from and described by.
   */
  public LogicalPlan fileView(LogicalPlan plan) {
    return IcebergFiles.views(plan);
  }

  /** Why an Iceberg table {@code plan} reads cannot be read as its files, or null (see {@link
   * IcebergFiles#problem}). */
  public String fileViewProblem(LogicalPlan plan) {
    return IcebergFiles.problemOf(plan);
  }

  /** The file relations of the plan, in pre-order (the order of {@code plan.toJSON()}). */
  public LogicalPlan[] fileRelations(LogicalPlan plan) {
    return PlanTree.fileRelations(plan).toArray(new LogicalPlan[0]);
  }

  /**
   * Describes the {@code ordinal}-th file relation of the plan as JSON, with its files'
   * fingerprint and the files themselves as {@code detail} asks (see {@link
   * RelationDescriptions#describe}).
   */
  public String describe(LogicalPlan plan, int ordinal, int detail) {
    return RelationDescriptions.describe(fileRelation(plan, ordinal), detail);
  }

  /**
   * The difference between the files of the {@code ordinal}-th file relation of the plan and
   * those recorded under {@code recordedKey} (see {@link RelationDescriptions#changes}): null
   * when none are, then {@link #recordListing} them.
   */
  public String changes(LogicalPlan plan, int ordinal, String recordedKey) {
    return RelationDescriptions.changes(fileRelation(plan, ordinal), recordedKey);
  }

  /**
   * Keeps an index version's recorded files ({@code filesJson}: the JSON array of its log
   * entry's {@code files}) under {@code recordedKey}; returns their fingerprint.
   */
  public String recordListing(String recordedKey, String filesJson) throws java.io.IOException {
    return RecordedListing.record(recordedKey, filesJson).fingerprint;
  }

  /**
   * Replaces the {@code ordinal}-th file relation of {@code plan} by a fresh instance of
   * {@code indexRelation}, as {@link RelationReplacement#replace} says ({@code specLines},
   * {@code appendedLines} and {@code excludedIdLines}: newline-separated, one py4j argument
   * each).
   */
  public LogicalPlan replaceRelation(LogicalPlan plan, int ordinal, LogicalPlan indexRelation,
      String specLines, boolean restoreOrder, String appendedLines, String excludedIdLines,
      LogicalPlan deltaRelation, boolean bucketUnion, int lookupBuckets) {
    return RelationReplacement.replace(plan, fileRelation(plan, ordinal), indexRelation,
        specLines, restoreOrder, appendedLines, excludedIdLines, deltaRelation, bucketUnion,
        lookupBuckets);
  }

  /**
   * Keeps only the files {@code keptLines} lists (and, for Parquet, the row groups {@code
   * rowGroupLines} lists) in the {@code ordinal}-th file relation of {@code plan} (see {@link
   * FileRelationEdits#pruneFiles}).
   */
  public LogicalPlan pruneFiles(LogicalPlan plan, int ordinal, String keptLines,
      String rowGroupLines) {
    return FileRelationEdits.pruneFiles(plan, fileRelation(plan, ordinal), keptLines,
        rowGroupLines);
  }

  /**
   * The same file relation declared bucketed by {@code columnLines} (newline-separated) into
   * {@code numBuckets} buckets (see {@link FileRelationEdits#withBucketSpec}).
   */
  public LogicalPlan withBucketSpec(LogicalPlan relation, int numBuckets, String columnLines,
                                    boolean sortedScan, int coalescedBuckets) {
    return FileRelationEdits.withBucketSpec(relation, numBuckets, columnLines, sortedScan,
        coalescedBuckets);
  }

  /**
   * The names of the columns of the {@code ordinal}-th file relation of {@code side} (a join's
   * other side) that {@code side} reads, newline-separated (see {@link LocalSides#columnsRead}).
   */
  public String sideColumns(LogicalPlan side, int ordinal) {
    return String.join("\n", LocalSides.columnsRead(side, fileRelation(side, ordinal)));
  }

  /** The {@code ordinal}-th file relation of {@code side} read for the columns {@code
   * nameLines} (newline-separated) alone: the plan whose rows {@link #copyRows} keeps. */
  public LogicalPlan sideColumnsPlan(LogicalPlan side, int ordinal, String nameLines) {
    return LocalSides.columns(fileRelation(side, ordinal), nameLines.split("\n"));
  }

  /** The rows {@code plan} gives, kept in driver memory, or null when more than {@code
   * maxRows} or {@code maxBytes} (see {@link LocalSides#copy}). */
  public LocalSides.Copy copyRows(SparkPlan plan, int maxRows, long maxBytes) {
    return LocalSides.copy(plan, maxRows, maxBytes);
  }

  /** {@code side} with its {@code ordinal}-th file relation replaced by the rows of {@code
   * copy}, made of its columns {@code nameLines} (see {@link LocalSides#localized}). */
  public LogicalPlan localSide(LogicalPlan side, int ordinal, String nameLines,
      LocalSides.Copy copy) {
    return LocalSides.localized(side, fileRelation(side, ordinal), nameLines.split("\n"),
        copy);
  }


  /** The keys of a join's other side over copies, planned without a Spark job, as JSON; null
   * when they take a job (see {@link LocalSides#keys}). */
  public String localKeys(SparkSession session, LogicalPlan side, LogicalPlan join, long exprId,
      String castType, boolean micros, int limit) {
    return LocalSides.keys(session, side, join, exprId, castType, micros, limit);
  }

  /**
   * Adds the accelerator's planner strategies to the session: {@link BucketUnion} (where Spark
   * can run it, 4.1 and later; elsewhere hybrid scans under the join rule use Spark's Union)
   * and the sorted bucketed scans of index relations ({@link SortedBucketScanExec}).
   */
  public void installStrategies(SparkSession session) {
    if (BucketUnionExec.supported()) {
      Strategies.install(session, new BucketUnion.Strategy());
    }
    Strategies.install(session, new SortedBucketScanExec.Strategy());
  }

  /** The node of {@code plan} reached by following {@code path} (child ordinals from the
   * root, comma-separated; empty for {@code plan} itself): one py4j call for a whole walk. */
  public LogicalPlan nodeAt(LogicalPlan plan, String path) {
    LogicalPlan node = plan;
    for (String step : path.split(",")) {
      if (!step.isEmpty()) {
        node = node.children().apply(Integer.parseInt(step));
      }
    }
    return node;
  }

  /** The size Spark estimates {@code plan} reads, in bytes (Long.MAX_VALUE past it). */
  public long estimatedBytes(LogicalPlan plan) {
    scala.math.BigInt size = plan.stats().sizeInBytes();
    return size.isValidLong() ? size.toLong() : Long.MAX_VALUE;
  }

  /** The {@code ordinal}-th file relation of {@code plan}, in pre-order. */
  private static LogicalPlan fileRelation(LogicalPlan plan, int ordinal) {
    return PlanTree.fileRelations(plan).get(ordinal);
  }
}
