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
 * signatures name Scala 2.13 collections are here ({@code scala-2.12/} has the 2.12 ones).
 * Nodes are immutable, so what the planner asks for again and again is converted once.
 */
abstract class PhysicalNode extends SparkPlan {
  private transient scala.collection.immutable.Seq<SparkPlan> childSeq;
  private transient scala.collection.immutable.Seq<Attribute> outputSeq;
  private transient scala.collection.immutable.Seq<SortOrder> orderingSeq;
  private transient scala.collection.immutable.Seq<Distribution> distributionSeq;

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
  public final scala.collection.immutable.Seq<SparkPlan> children() {
    if (childSeq == null) {
      childSeq = Scala.seq(childList());
    }
    return childSeq;
  }

  @Override
  public final scala.collection.immutable.Seq<Attribute> output() {
    if (outputSeq == null) {
      outputSeq = Scala.seq(outputList());
    }
    return outputSeq;
  }

  @Override
  public final scala.collection.immutable.Seq<SortOrder> outputOrdering() {
    if (orderingSeq == null) {
      orderingSeq = Scala.seq(orderingList());
    }
    return orderingSeq;
  }

  @Override
  public final scala.collection.immutable.Seq<Distribution> requiredChildDistribution() {
    if (distributionSeq == null) {
      distributionSeq = Scala.seq(distributionList());
    }
    return distributionSeq;
  }

  @Override
  public final scala.Option<scala.collection.immutable.Seq<String>> vectorTypes() {
    List<String> types = vectorTypeList();
    return types == null ? scala.Option.empty() : scala.Option.apply(Scala.seq(types));
  }

  @Override
  public final SparkPlan withNewChildrenInternal(
      scala.collection.immutable.IndexedSeq<SparkPlan> children) {
    return withChildren(Scala.list(children));
  }
}
