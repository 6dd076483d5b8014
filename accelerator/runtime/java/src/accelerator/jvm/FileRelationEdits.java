package accelerator.jvm;

import java.util.Arrays;

import org.apache.spark.sql.catalyst.catalog.BucketSpec;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;


/**
 * Copies of a file relation that keep its output but change how it reads: fewer files (and,
 * for Parquet, chosen row groups), or a declared bucketing of files written in buckets.
 */
final class FileRelationEdits {
  private FileRelationEdits() {
  }

  /**
   * Keeps only the files {@code keptLines} lists (newline-separated paths as the relation lists
   * them) in the file relation {@code original} of {@code plan}: the relation and its output
   * stay the same, its file index lists fewer files.
   */
  static LogicalPlan pruneFiles(LogicalPlan plan, LogicalPlan original, String keptLines,
      String rowGroupLines) {
    LogicalRelation rel = (LogicalRelation) original;
    HadoopFsRelation fs = (HadoopFsRelation) rel.relation();
    PrunedFileIndex pruned = new PrunedFileIndex(fs.location(), Lines.nonEmpty(keptLines));
    Object relation = CaseClasses.copy(fs, 0, pruned, fs.sparkSession());
    if (!rowGroupLines.isEmpty() && selectsRowGroups(rel)) {
      relation = CaseClasses.copy(relation, 4, new RowGroupParquetFormat(rowGroupLines),
          fs.sparkSession());
    }
    LogicalPlan replacement = (LogicalPlan) CaseClasses.copy(rel, 0, relation);
    return (LogicalPlan) plan.transformUp(new SameNode(rel, replacement));
  }

  /**
   * Whether the relation's row groups may be selected: it is read by Spark's own Parquet format
   * and reads no {@code _metadata} column (whose file block start and length are the split's).
   */
  private static boolean selectsRowGroups(LogicalRelation rel) {
    if (((HadoopFsRelation) rel.relation()).fileFormat().getClass() != ParquetFileFormat.class) {
      return false;
    }
    scala.collection.Seq<AttributeReference> out = rel.output();
    for (int i = 0; i < out.size(); i++) {
      if (out.apply(i).name().equalsIgnoreCase("_metadata")) {
        return false;
      }
    }
    return true;
  }

  /**
   * The same file relation, declared bucketed by {@code columns} (and sorted by them) into
   * {@code numBuckets} buckets, so Spark prunes buckets on equality filters and joins two such
   * relations without a shuffle. Its files must carry their bucket id in their names. With
   * {@code sortedScan}, they must also be sorted by {@code columns}: the relation is marked for
   * {@link SortedBucketScanExec}, which keeps its scan bucketed and reports that order when
   * each bucket is one file; a {@code coalescedBuckets} count below {@code numBuckets} (one of
   * its divisors) makes that scan read the buckets in that many groups instead (bucket b in
   * group b mod the count), unsorted.
   */
  static LogicalPlan withBucketSpec(LogicalPlan relation, int numBuckets, String columnLines,
                                    boolean sortedScan, int coalescedBuckets) {
    String[] columns = columnLines.split("\n", -1);
    LogicalRelation rel = (LogicalRelation) relation;
    HadoopFsRelation fs = (HadoopFsRelation) rel.relation();
    var cols = Scala.seq(Arrays.asList(columns));
    BucketSpec spec = new BucketSpec(numBuckets, cols, cols);
    HadoopFsRelation bucketed = (HadoopFsRelation) CaseClasses.copy(
        fs, 3, scala.Option.apply(spec), fs.sparkSession());
    if (!sortedScan) {
      return (LogicalPlan) CaseClasses.copy(rel, 0, bucketed);
    }
    scala.collection.immutable.Map<String, String> options =
        bucketed.options().updated(SortedBucketScanExec.MARKER, "true");
    if (coalescedBuckets > 0 && coalescedBuckets < numBuckets) {
      options = options.updated(SortedBucketScanExec.COALESCED, Integer.toString(coalescedBuckets));
    }
    Object marked = CaseClasses.copy(bucketed, 5, options, fs.sparkSession());
    return (LogicalPlan) CaseClasses.copy(rel, 0, marked);
  }
}
