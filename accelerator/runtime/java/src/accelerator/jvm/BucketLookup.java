package accelerator.jvm;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.hadoop.fs.FileStatus;
import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.EqualNullSafe;
import org.apache.spark.sql.catalyst.expressions.EqualTo;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.In;
import org.apache.spark.sql.catalyst.expressions.InSet;
import org.apache.spark.sql.catalyst.expressions.IsNull;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning;
import org.apache.spark.sql.execution.datasources.BucketingUtils;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.PartitioningAwareFileIndex;


/**
 * A point lookup on a covering index's only indexed column, read as plain files: the files of
 * the buckets its literals hash to (and files of no bucket, the delta files of incremental
 * refreshes), chosen without Spark's bucket pruning, which generates code for every literal.
 * A bucket is Spark's own {@code pmod(murmur3(value), numBuckets)}, evaluated interpreted; the
 * Filter stays above the scan, so reading a file too many never changes an answer.
 */
final class BucketLookup {
  /** Per listing of an index's files: the paths of each bucket (key -1: files of no bucket).
   * File indexes over the same root paths are equal: an entry holds for the very instance it
   * names (weakly) alone. */
  private static final Map<FileIndex, Listed> BY_BUCKET =
      Collections.synchronizedMap(new java.util.WeakHashMap<>());

  private static final class Listed {
    final java.lang.ref.WeakReference<FileIndex> location;
    final Map<Integer, List<String>> byBucket;

    Listed(FileIndex location, Map<Integer, List<String>> byBucket) {
      this.location = new java.lang.ref.WeakReference<>(location);
      this.byBucket = byBucket;
    }
  }

  private BucketLookup() {}

  /**
   * The buckets of {@code numBuckets} that hold every row of {@code column} the Filters
   * {@code filters} keep, or null when no conjunct of theirs pins the column to literals
   * ({@code =}, {@code <=>}, {@code IN}, {@code IS NULL}).
   */
  static Set<Integer> buckets(List<Filter> filters, Attribute column, int numBuckets) {
    Set<Integer> out = null;
    for (Filter filter : filters) {
      for (Expression conjunct : conjuncts(filter.condition(), new ArrayList<>())) {
        Set<Integer> pinned = pinned(conjunct, column, numBuckets);
        if (pinned != null) {
          if (out == null) {
            out = pinned;
          } else {
            out.retainAll(pinned);
          }
        }
      }
    }
    return out;
  }

  private static List<Expression> conjuncts(Expression e, List<Expression> out) {
    if (e instanceof And) {
      conjuncts(((And) e).left(), out);
      conjuncts(((And) e).right(), out);
    } else {
      out.add(e);
    }
    return out;
  }

  /** The buckets one conjunct lets rows of {@code column} be in, or null when it says nothing
   * of them. */
  private static Set<Integer> pinned(Expression e, Attribute column, int numBuckets) {
    Set<Integer> out = new HashSet<>();
    if (e instanceof EqualTo || e instanceof EqualNullSafe) {
      Expression left = e.children().apply(0);
      Expression right = e.children().apply(1);
      Expression value = isColumn(left, column) ? right : isColumn(right, column) ? left : null;
      if (!(value instanceof Literal)) {
        return null;
      }
      if (((Literal) value).value() != null || e instanceof EqualNullSafe) {
        out.add(bucket(((Literal) value).value(), column, numBuckets));
      }   // = NULL keeps no row
      return out;
    }
    if (e instanceof IsNull && isColumn(((IsNull) e).child(), column)) {
      out.add(bucket(null, column, numBuckets));
      return out;
    }
    if (e instanceof In && isColumn(((In) e).value(), column)) {
      scala.collection.Seq<Expression> list = ((In) e).list();
      for (int i = 0; i < list.size(); i++) {
        if (!(list.apply(i) instanceof Literal)) {
          return null;
        }
        Object value = ((Literal) list.apply(i)).value();
        if (value != null) {
          out.add(bucket(value, column, numBuckets));
        }
      }
      return out;
    }
    if (e instanceof InSet && isColumn(((InSet) e).child(), column)) {
      scala.collection.Iterator<Object> values = ((InSet) e).hset().iterator();
      while (values.hasNext()) {
        Object value = values.next();
        if (value != null) {
          out.add(bucket(value, column, numBuckets));
        }
      }
      return out;
    }
    return null;
  }

  private static boolean isColumn(Expression e, Attribute column) {
    return e instanceof Attribute && ((Attribute) e).exprId().equals(column.exprId());
  }

  /** The bucket of a value (Spark's internal form) of {@code column}, as Spark computes it
   * when it prunes buckets: the value taken as the column's type. */
  private static int bucket(Object value, Attribute column, int numBuckets) {
    List<Expression> keys = Collections.singletonList(new Literal(value, column.dataType()));
    HashPartitioning partitioning =
        new HashPartitioning(Scala.seq(keys), numBuckets);
    return (Integer) partitioning.partitionIdExpression().eval(null);
  }

  /** {@code relation} (over an index's files, read plainly) reading only the files of
   * {@code buckets} and those of no bucket; itself when its files are not listed in memory. */
  static LogicalPlan only(LogicalRelation relation, Set<Integer> buckets) {
    HadoopFsRelation fs = (HadoopFsRelation) relation.relation();
    if (!(fs.location() instanceof PartitioningAwareFileIndex)) {
      return relation;
    }
    Map<Integer, List<String>> byBucket = byBucket((PartitioningAwareFileIndex) fs.location());
    Set<String> kept = new HashSet<>(byBucket.getOrDefault(-1, Collections.emptyList()));
    for (int b : buckets) {
      kept.addAll(byBucket.getOrDefault(b, Collections.emptyList()));
    }
    PrunedFileIndex pruned = new PrunedFileIndex(fs.location(), kept);
    Object prunedFs = CaseClasses.copy(fs, 0, pruned, fs.sparkSession());
    return (LogicalPlan) CaseClasses.copy(relation, 0, prunedFs);
  }

  private static Map<Integer, List<String>> byBucket(PartitioningAwareFileIndex location) {
    Listed found = BY_BUCKET.get(location);
    if (found != null && found.location.get() == location) {
      return found.byBucket;
    }
    Map<Integer, List<String>> out = new HashMap<>();
    scala.collection.Seq<FileStatus> files = location.allFiles();
    for (int i = 0; i < files.size(); i++) {
      FileStatus f = files.apply(i);
      scala.Option<Object> id = BucketingUtils.getBucketId(f.getPath().getName());
      out.computeIfAbsent(id.isDefined() ? (Integer) id.get() : -1, k -> new ArrayList<>())
          .add(f.getPath().toString());
    }
    BY_BUCKET.put(location, new Listed(location, out));
    return out;
  }
}
