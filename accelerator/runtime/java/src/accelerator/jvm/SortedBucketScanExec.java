package accelerator.jvm;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.catalog.BucketSpec;
import org.apache.spark.sql.catalyst.expressions.Ascending$;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.NullsFirst$;
import org.apache.spark.sql.catalyst.expressions.SortOrder;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.physical.ClusteredDistribution$;
import org.apache.spark.sql.catalyst.plans.physical.Distribution;
import org.apache.spark.sql.catalyst.plans.physical.Partitioning;
import org.apache.spark.sql.catalyst.plans.physical.UnspecifiedDistribution$;
import org.apache.spark.sql.execution.FileSourceScanExec;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.datasources.BucketingUtils;
import org.apache.spark.sql.execution.datasources.FileSourceStrategy$;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * A bucketed scan of a covering index whose files the accelerator wrote sorted by the index's
 * sort columns, reporting that order: with one file per bucket, each partition (one bucket, read
 * front to back) is sorted, so a sort-merge join over it needs no sort. Spark reports this order
 * itself only under a legacy setting for every bucketed table; this node reports it only for
 * the index relations the join rule reads, marked ({@link #MARKER}) because the accelerator wrote
 * their files sorted.
 *
 * <p>It passes its child's rows or batches through unchanged, and requires its child clustered on
 * the bucket columns (which the bucketed scan already is), so Spark's rule that turns unneeded
 * bucketed scans into plain ones never changes the scan under an order it reported (a join
 * needs the buckets anyway).
 */
public final class SortedBucketScanExec extends PhysicalNode {
  /** The relation option marking an index relation whose bucket files are sorted. */
  public static final String MARKER = "spark.accelerator.sortedBuckets";
  /** The relation option asking its bucketed scan to read that many groups of buckets. */
  public static final String COALESCED = "spark.accelerator.coalescedBuckets";

  private final SparkPlan child;

  public SortedBucketScanExec(SparkPlan child) {
    this.child = child;
  }

  /** Whether {@code relation} is marked as an index relation whose bucket files are sorted. */
  static boolean marked(HadoopFsRelation relation) {
    return relation.options().get(MARKER).contains("true") && relation.bucketSpec().isDefined();
  }

  /** The scan below, while it reads one bucket per partition, each from a single file. */
  private FileSourceScanExec sortedScan() {
    if (!(child instanceof FileSourceScanExec)) {
      return null;
    }
    FileSourceScanExec scan = (FileSourceScanExec) child;
    boolean sorted = scan.bucketedScan() && scan.optionalNumCoalescedBuckets().isEmpty()
        && marked(scan.relation()) && singleFileBuckets(scan.relation());
    return sorted ? scan : null;
  }

  /** Whether no two files of {@code relation} (an index: not partitioned) share a bucket. */
  private static boolean singleFileBuckets(HadoopFsRelation relation) {
    Set<Object> buckets = new HashSet<>();
    for (String file : relation.location().inputFiles()) {
      String name = file.substring(file.lastIndexOf('/') + 1);
      scala.Option<Object> bucket = BucketingUtils.getBucketId(name);
      if (bucket.isEmpty() || !buckets.add(bucket.get())) {
        return false;
      }
    }
    return true;
  }

  /** The scan's attributes named {@code names}, up to the first one it does not output. */
  private static List<Attribute> attributes(FileSourceScanExec scan,
                                            scala.collection.Seq<String> names) {
    List<Attribute> found = new ArrayList<>();
    for (int i = 0; i < names.size(); i++) {
      Attribute match = null;
      for (int j = 0; j < scan.output().size() && match == null; j++) {
        if (scan.output().apply(j).name().equals(names.apply(i))) {
          match = scan.output().apply(j);
        }
      }
      if (match == null) {
        break;
      }
      found.add(match);
    }
    return found;
  }

  @Override
  protected List<SortOrder> orderingList() {
    List<SortOrder> order = new ArrayList<>();
    FileSourceScanExec scan = sortedScan();
    if (scan != null) {
      BucketSpec spec = scan.relation().bucketSpec().get();
      for (Attribute a : attributes(scan, spec.sortColumnNames())) {
        order.add(new SortOrder(a, Ascending$.MODULE$, NullsFirst$.MODULE$,
            Scala.seq(List.<Expression>of())));
      }
    }
    return order;
  }

  @Override
  protected List<Distribution> distributionList() {
    Distribution distribution = UnspecifiedDistribution$.MODULE$;
    if (child instanceof FileSourceScanExec && ((FileSourceScanExec) child).bucketedScan()) {
      FileSourceScanExec scan = (FileSourceScanExec) child;
      scala.collection.Seq<String> columns =
          scan.relation().bucketSpec().get().bucketColumnNames();
      List<Attribute> keys = attributes(scan, columns);
      if (keys.size() == columns.size()) {
        distribution = clustered(new ArrayList<Expression>(keys));
      }
    }
    return List.of(distribution);
  }

  /** ClusteredDistribution over {@code keys} with its defaults (its arity varies by version). */
  private static Distribution clustered(List<Expression> keys) {
    try {
      Object companion = ClusteredDistribution$.MODULE$;
      for (Method m : companion.getClass().getMethods()) {
        if (m.getName().equals("apply") && m.getParameterTypes()[0] != Object.class) {
          Object[] args = new Object[m.getParameterCount()];
          args[0] = Scala.seq(keys);
          for (int i = 1; i < args.length; i++) {
            args[i] = companion.getClass().getMethod("apply$default$" + (i + 1)).invoke(companion);
          }
          return (Distribution) m.invoke(companion, args);
        }
      }
      throw new IllegalStateException("no ClusteredDistribution.apply");
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("cannot make a ClusteredDistribution", e);
    }
  }

  @Override
  protected List<SparkPlan> childList() {
    return List.of(child);
  }

  @Override
  protected List<Attribute> outputList() {
    return Scala.list(child.output());
  }

  @Override
  public Partitioning outputPartitioning() {
    return child.outputPartitioning();
  }

  @Override
  public boolean supportsColumnar() {
    return child.supportsColumnar();
  }

  @Override
  protected List<String> vectorTypeList() {
    scala.Option<? extends scala.collection.Seq<String>> types = child.vectorTypes();
    return types.isEmpty() ? null : Scala.list(types.get());
  }

  @Override
  public RDD<InternalRow> doExecute() {
    return child.execute();
  }

  @Override
  public RDD<ColumnarBatch> doExecuteColumnar() {
    return child.executeColumnar();
  }

  @Override
  protected SparkPlan withChildren(List<SparkPlan> c) {
    return new SortedBucketScanExec(c.get(0));
  }

  @Override
  public int productArity() {
    return 1;
  }

  @Override
  public Object productElement(int n) {
    return child;
  }

  @Override
  public boolean canEqual(Object that) {
    return that instanceof SortedBucketScanExec;
  }

  @Override
  public boolean equals(Object that) {
    return that instanceof SortedBucketScanExec
        && ((SortedBucketScanExec) that).child.equals(child);
  }

  @Override
  public int hashCode() {
    return child.hashCode();
  }

  /**
   * The scan reading its buckets in the number of groups its relation asks for ({@link
   * #COALESCED}), as Spark's own coalescing of buckets for joins does: partition i holds the
   * buckets b with b mod n = i, so its rows are those of HashPartitioning(keys, n) when n divides
   * the bucket count. The scan as it is when the relation asks for none.
   */
  private static FileSourceScanExec coalesced(FileSourceScanExec scan) {
    scala.Option<String> asked = scan.relation().options().get(COALESCED);
    if (asked.isEmpty() || !scan.bucketedScan()) {
      return scan;
    }
    int groups = Integer.parseInt(asked.get());
    if (scan.relation().bucketSpec().get().numBuckets() % groups != 0) {
      return scan;
    }
    java.lang.reflect.Type[] types = CaseClasses.copyMethod(scan).getGenericParameterTypes();
    for (int i = 0; i < types.length; i++) {
      // optionalNumCoalescedBuckets: the only Option[Int] (its place varies by version)
      if (types[i].getTypeName().equals("scala.Option<java.lang.Object>")) {
        return (FileSourceScanExec) CaseClasses.copy(
            scan, i, scala.Option.apply((Object) Integer.valueOf(groups)));
      }
    }
    return scan;
  }

  /**
   * Plans a Project/Filter chain over a marked index relation as Spark's file source strategy
   * does, with each scan under a {@link SortedBucketScanExec}.
   */
  public static final class Strategy extends PlannerStrategy {
    @Override
    protected List<SparkPlan> plan(LogicalPlan plan) {
      List<SparkPlan> out = new ArrayList<>();
      if (overMarkedRelation(plan)) {
        scala.collection.Seq<SparkPlan> planned = FileSourceStrategy$.MODULE$.apply(plan);
        for (int i = 0; i < planned.size(); i++) {
          out.add(wrapScans(planned.apply(i)));
        }
      }
      return out;
    }

    private static boolean overMarkedRelation(LogicalPlan plan) {
      while (plan instanceof Project || plan instanceof Filter) {
        plan = plan.children().apply(0);
      }
      return plan instanceof LogicalRelation
          && ((LogicalRelation) plan).relation() instanceof HadoopFsRelation
          && marked((HadoopFsRelation) ((LogicalRelation) plan).relation());
    }

    private static SparkPlan wrapScans(SparkPlan plan) {
      if (plan instanceof FileSourceScanExec) {
        return new SortedBucketScanExec(coalesced((FileSourceScanExec) plan));
      }
      List<SparkPlan> children = new ArrayList<>();
      for (int i = 0; i < plan.children().size(); i++) {
        children.add(wrapScans(plan.children().apply(i)));
      }
      return plan.withNewChildren(Scala.seq(children));
    }
  }
}
