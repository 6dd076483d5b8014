package accelerator.jvm;

import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;


/** Replaces one plan node, matched by identity, in a {@code transformUp} of the plan. */
final class SameNode extends scala.runtime.AbstractPartialFunction<LogicalPlan, LogicalPlan> {
  private final LogicalPlan target;
  private final LogicalPlan replacement;

  SameNode(LogicalPlan target, LogicalPlan replacement) {
    this.target = target;
    this.replacement = replacement;
  }

  @Override
  public boolean isDefinedAt(LogicalPlan p) {
    return p == target;
  }

  @Override
  public <A1 extends LogicalPlan, B1> B1 applyOrElse(A1 p, scala.Function1<A1, B1> dflt) {
    @SuppressWarnings("unchecked")
    B1 out = p == target ? (B1) replacement : dflt.apply(p);
    return out;
  }
}
