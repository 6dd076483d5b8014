package accelerator.jvm;

import java.util.function.BiFunction;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;

/** Builds an {@link AcceleratorRule} per session; what {@code injectPreCBORule} expects. */
public final class AcceleratorRuleBuilder
    extends scala.runtime.AbstractFunction1<SparkSession, Rule<LogicalPlan>> {

  @Override
  public Rule<LogicalPlan> apply(SparkSession session) {
    return new AcceleratorRule(session);
  }

  /** Sets the Python rewriter every rule of this JVM calls (null removes it). */
  public void setRewriter(BiFunction<Object, String, Object> fn) {
    AcceleratorRule.setRewriter(fn);
  }
}
