package accelerator.jvm;

import java.util.Collections;
import java.util.List;

import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.SortOrder;
import org.apache.spark.sql.catalyst.plans.physical.Distribution;
import org.apache.spark.sql.catalyst.plans.physical.UnspecifiedDistribution$;
import org.apache.spark.sql.execution.SparkPlan;

/**
 * A physical plan node of the accelerator's, written against Java lists: the overrides whose
 * signatures name Scala 2.12 collections are here ({@code scala-2.13/} has the 2.13 ones).
 * Nodes are immutable, so what the planner asks for again and again is converted once.
 */
abstract class PhysicalNode extends SparkPlan {
  private transient scala.collection.Seq<SparkPlan> childSeq;
  private transient scala.collection.Seq<Attribute> outputSeq;
  private transient scala.collection.Seq<SortOrder> orderingSeq;
  private transient scala.collection.Seq<Distribution> distributionSeq;

  /** The node's children. */
  protected abstract List<SparkPlan> childList();

  /** The node's output attributes. */
  protected abstract List<Attribute> outputList();

  /** This node over {@code children} instead. */
  protected abstract SparkPlan withChildren(List<SparkPlan> children);

  /** The order of the rows of each output partition (none by default). */
  protected List<SortOrder> orderingList() {
    return Collections.emptyList();
  }

  /** What each child's partitioning must satisfy (nothing by default). */
  protected List<Distribution> distributionList() {
    return Collections.nCopies(childList().size(), UnspecifiedDistribution$.MODULE$);
  }

  /** The column vector classes of the columnar output, or null when not known. */
  protected List<String> vectorTypeList() {
    return null;
  }

  @Override
  public final scala.collection.Seq<SparkPlan> children() {
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
  public final scala.collection.Seq<SortOrder> outputOrdering() {
    if (orderingSeq == null) {
      orderingSeq = Scala.seq(orderingList());
    }
    return orderingSeq;
  }

  @Override
  public final scala.collection.Seq<Distribution> requiredChildDistribution() {
    if (distributionSeq == null) {
      distributionSeq = Scala.seq(distributionList());
    }
    return distributionSeq;
  }

  @Override
  public final scala.Option<scala.collection.Seq<String>> vectorTypes() {
    List<String> types = vectorTypeList();
    return types == null ? scala.Option.empty() : scala.Option.apply(Scala.seq(types));
  }

  @Override
  public final SparkPlan withNewChildrenInternal(
      scala.collection.IndexedSeq<SparkPlan> children) {
    return withChildren(Scala.list(children));
  }
}
