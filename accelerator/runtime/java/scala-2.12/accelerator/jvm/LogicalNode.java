package accelerator.jvm;

import java.util.List;

import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;

/**
 * A logical plan node of the accelerator's, written against Java lists: the overrides whose
 * signatures name Scala 2.12 collections are here ({@code scala-2.13/} has the 2.13 ones).
 * Nodes are immutable, so children and output are converted once.
 */
abstract class LogicalNode extends LogicalPlan {
  private transient scala.collection.Seq<LogicalPlan> childSeq;
  private transient scala.collection.Seq<Attribute> outputSeq;

  /** The node's children. */
  protected abstract List<LogicalPlan> childList();

  /** The node's output attributes. */
  protected abstract List<Attribute> outputList();

  /** This node over {@code children} instead. */
  protected abstract LogicalPlan withChildren(List<LogicalPlan> children);

  @Override
  public final scala.collection.Seq<LogicalPlan> children() {
    if (childSeq == null) {
      childSeq = Scala.seq(childList());
    }
    return childSeq;
  }

  @Override
  public final scala.collection.Seq<Attribute> output() {
    if (outputSeq == null) {
      outputSeq = Scala.seq(outputList());
    }
    return outputSeq;
  }

  @Override
  public final LogicalPlan withNewChildrenInternal(
      scala.collection.IndexedSeq<LogicalPlan> children) {
    return withChildren(Scala.list(children));
  }
}
