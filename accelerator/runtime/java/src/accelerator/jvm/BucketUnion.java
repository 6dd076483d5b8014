package accelerator.jvm;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.SparkPlan;

/**
 * The union of a bucketed index scan (the first child) and rows hash-partitioned into the same
 * buckets (the second child): unlike Spark's Union, it is planned ({@link BucketUnionExec}) to
 * keep the index scan's partitioning, so a join over it needs no shuffle of that side. Planned
 * by {@link Strategy}, which {@link PlanRewrite#installStrategies} adds to a session.
 */
public final class BucketUnion extends LogicalNode {
  private final List<LogicalPlan> children;

  public BucketUnion(List<LogicalPlan> children) {
    this.children = List.copyOf(children);
  }

  /** The constructor Spark's {@code makeCopy} (as in {@code clone}) calls with {@link
   * #productElement}'s children. */
  public BucketUnion(scala.collection.Seq<LogicalPlan> children) {
    this(Scala.list(children));
  }

  @Override
  protected List<LogicalPlan> childList() {
    return children;
  }

  @Override
  protected List<Attribute> outputList() {
    return unionOutput(children);
  }

  /** The first child's attributes, nullable where any child's column is. */
  static <P extends org.apache.spark.sql.catalyst.plans.QueryPlan<P>>
      List<Attribute> unionOutput(List<P> children) {
    scala.collection.Seq<Attribute> first = children.get(0).output();
    List<Attribute> out = new ArrayList<>();
    for (int i = 0; i < first.size(); i++) {
      boolean nullable = false;
      for (P child : children) {
        nullable |= child.output().apply(i).nullable();
      }
      out.add(first.apply(i).withNullability(nullable));
    }
    return out;
  }

  @Override
  protected LogicalPlan withChildren(List<LogicalPlan> c) {
    return new BucketUnion(c);
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
    return that instanceof BucketUnion;
  }

  @Override
  public boolean equals(Object that) {
    return that instanceof BucketUnion && ((BucketUnion) that).children.equals(children);
  }

  @Override
  public int hashCode() {
    return children.hashCode();
  }

  /** Whether the session's planner knows how to plan a BucketUnion. */
  public static boolean installed(SparkSession session) {
    return Strategies.installed(session, Strategy.class);
  }

  /** Plans a {@link BucketUnion} as a {@link BucketUnionExec}. */
  public static final class Strategy extends PlannerStrategy {
    @Override
    protected List<SparkPlan> plan(LogicalPlan plan) {
      List<SparkPlan> out = new ArrayList<>();
      if (plan instanceof BucketUnion) {
        List<SparkPlan> kids = new ArrayList<>();
        for (LogicalPlan child : ((BucketUnion) plan).children) {
          kids.add(planLater(child));
        }
        out.add(new BucketUnionExec(kids));
      }
      return out;
    }
  }
}
