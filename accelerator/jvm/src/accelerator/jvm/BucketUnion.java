package accelerator.jvm;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.SparkStrategy;

import scala.jdk.javaapi.CollectionConverters;

/**
 * The union of a bucketed index scan (the first child) and rows hash-partitioned into the same
 * buckets (the second child): unlike Spark's Union, it is planned ({@link BucketUnionExec}) to
 * keep the index scan's partitioning, so a join over it needs no shuffle of that side. Planned
 * by {@link Strategy}, which {@link PlanRewrite#installStrategies} adds to a session.
 */
public final class BucketUnion extends LogicalPlan {
  private final scala.collection.immutable.Seq<LogicalPlan> children;

  public BucketUnion(scala.collection.immutable.Seq<LogicalPlan> children) {
    this.children = children;
  }

  @Override
  public scala.collection.immutable.Seq<LogicalPlan> children() {
    return children;
  }

  @Override
  public scala.collection.immutable.Seq<Attribute> output() {
    return unionOutput(children);
  }

  /** The first child's attributes, nullable where any child's column is. */
  static <P extends org.apache.spark.sql.catalyst.plans.QueryPlan<P>>
      scala.collection.immutable.Seq<Attribute> unionOutput(scala.collection.Seq<P> children) {
    scala.collection.Seq<Attribute> first = children.apply(0).output();
    List<Attribute> out = new ArrayList<>();
    for (int i = 0; i < first.size(); i++) {
      boolean nullable = false;
      for (int c = 0; c < children.size(); c++) {
        nullable |= children.apply(c).output().apply(i).nullable();
      }
      out.add(first.apply(i).withNullability(nullable));
    }
    return CollectionConverters.asScala(out).toSeq();
  }

  @Override
  public LogicalPlan withNewChildrenInternal(scala.collection.immutable.IndexedSeq<LogicalPlan> c) {
    return new BucketUnion(c.toSeq());
  }

  @Override
  public int productArity() {
    return 1;
  }

  @Override
  public Object productElement(int n) {
    return children;
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
  public static final class Strategy extends SparkStrategy {
    @Override
    public scala.collection.immutable.Seq<org.apache.spark.sql.execution.SparkPlan> apply(
        LogicalPlan plan) {
      List<org.apache.spark.sql.execution.SparkPlan> out = new ArrayList<>();
      if (plan instanceof BucketUnion) {
        List<org.apache.spark.sql.execution.SparkPlan> kids = new ArrayList<>();
        scala.collection.Seq<LogicalPlan> children = plan.children();
        for (int i = 0; i < children.size(); i++) {
          kids.add(planLater(children.apply(i)));
        }
        out.add(new BucketUnionExec(CollectionConverters.asScala(kids).toSeq()));
      }
      return CollectionConverters.asScala(out).toSeq();
    }
  }
}
