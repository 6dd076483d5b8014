package accelerator.jvm;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.plans.physical.Partitioning;
import org.apache.spark.sql.execution.SparkPlan;

/**
 * Physical {@link BucketUnion}: partition i is partition i of every child, concatenated. The
 * children must have as many partitions as the first has buckets (the index scan reads one
 * bucket per partition, the other child is hash-partitioned into that many), so the output keeps
 * the first child's partitioning.
 */
public final class BucketUnionExec extends PhysicalNode {
  private final List<SparkPlan> children;

  public BucketUnionExec(List<SparkPlan> children) {
    this.children = List.copyOf(children);
  }

  /** The constructor Spark's {@code makeCopy} calls with {@link #productElement}'s children. */
  public BucketUnionExec(scala.collection.Seq<SparkPlan> children) {
    this(Scala.list(children));
  }

  @Override
  protected List<SparkPlan> childList() {
    return children;
  }

  @Override
  protected List<Attribute> outputList() {
    return BucketUnion.unionOutput(children);
  }

  @Override
  public Partitioning outputPartitioning() {
    return children.get(0).outputPartitioning();
  }

  @Override
  public RDD<InternalRow> doExecute() {
    List<RDD<InternalRow>> rdds = new ArrayList<>();
    int partitions = -1;
    for (SparkPlan child : children) {
      RDD<InternalRow> rdd = child.execute();
      if (partitions >= 0 && rdd.getNumPartitions() != partitions) {
        throw new IllegalStateException("bucket union: " + rdd.getNumPartitions()
            + " partitions next to " + partitions + " buckets");
      }
      partitions = rdd.getNumPartitions();
      rdds.add(rdd);
    }
    // a Spark class: the accelerator's own classes are not on the executors' class path
    if (UNION_RDD == null) {
      throw new IllegalStateException("bucket union: this Spark has no " + UNION_RDD_CLASS);
    }
    try {
      @SuppressWarnings("unchecked")
      RDD<InternalRow> union = (RDD<InternalRow>) UNION_RDD.newInstance(
          sparkContext(), Scala.seq(rdds), partitions,
          scala.reflect.ClassTag$.MODULE$.apply(InternalRow.class));
      return union;
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("bucket union: cannot build its RDD", e);
    }
  }

  private static final String UNION_RDD_CLASS =
      "org.apache.spark.rdd.SQLPartitioningAwareUnionRDD";
  /**
   * The constructor {@code (SparkContext, Seq, int, ClassTag)} of Spark's union RDD that keeps
   * partition i of every child as partition i (Spark 4.1 and later), or null.
   */
  private static final java.lang.reflect.Constructor<?> UNION_RDD = unionRddConstructor();

  private static java.lang.reflect.Constructor<?> unionRddConstructor() {
    try {
      for (java.lang.reflect.Constructor<?> c : Class.forName(UNION_RDD_CLASS).getConstructors()) {
        if (c.getParameterCount() == 4) {
          return c;
        }
      }
    } catch (ClassNotFoundException e) {
      // Spark 4.0
    }
    return null;
  }

  /** Whether this Spark can run a bucket union (its union RDD is there: Spark 4.1+). */
  static boolean supported() {
    return UNION_RDD != null;
  }

  @Override
  protected SparkPlan withChildren(List<SparkPlan> c) {
    return new BucketUnionExec(c);
  }

  @Override
  public int productArity() {
    return 1;
  }

  @Override
  public Object productElement(int n) {
    return children();
  }

  @Override
  public boolean canEqual(Object that) {
    return that instanceof BucketUnionExec;
  }

  @Override
  public boolean equals(Object that) {
    return that instanceof BucketUnionExec && ((BucketUnionExec) that).children.equals(children);
  }

  @Override
  public int hashCode() {
    return children.hashCode();
  }
}
