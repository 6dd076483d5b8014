package accelerator.jvm;

import java.util.List;

import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.SparkStrategy;

/**
 * A planner strategy of the accelerator's, answering a Java list: the override whose signature
 * names a Scala 2.13 collection is here ({@code scala-2.12/} has the 2.12 one).
 */
abstract class PlannerStrategy extends SparkStrategy {
  /** The physical plans for {@code plan}, none when the strategy does not plan it. */
  protected abstract List<SparkPlan> plan(LogicalPlan plan);

  @Override
  public final scala.collection.immutable.Seq<SparkPlan> apply(LogicalPlan plan) {
    return Scala.seq(plan(plan));
  }
}
