package accelerator.jvm;

import java.util.function.BiFunction;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Optimizer rule that hands each optimized plan to the Python rewriter, with everything the
 * rewriter needs to decide in one string (see {@link PlanRewrite#payload}), so plans no index
 * applies to cost no py4j call back into the JVM.
 *
 * <p>It never fails or changes a query because of the accelerator: any Throwable, an unresolved
 * result or a result whose schema differs from the original makes it return the original plan.
 * Plans without a file-based relation are not sent to Python at all.
 */
public final class AcceleratorRule extends Rule<LogicalPlan> {
  static final String ENABLED_KEY = "spark.accelerator.enabled";
  private static final Logger LOG = LoggerFactory.getLogger(AcceleratorRule.class);
  private static final ThreadLocal<Boolean> ACTIVE = ThreadLocal.withInitial(() -> Boolean.FALSE);
  private static volatile BiFunction<Object, String, Object> rewriter;

  private final SparkSession session;

  public AcceleratorRule(SparkSession session) {
    this.session = session;
  }

  /** Installs (or, with null, removes) the Python rewriter shared by all sessions of this JVM. */
  static void setRewriter(BiFunction<Object, String, Object> fn) {
    rewriter = fn;
  }

  @Override
  public LogicalPlan apply(LogicalPlan plan) {
    BiFunction<Object, String, Object> fn = rewriter;
    if (fn == null || ACTIVE.get()) {
      return plan;
    }
    try {
      if (!"true".equalsIgnoreCase(session.conf().get(ENABLED_KEY, "false"))
          || !PlanRewrite.hasFileRelation(plan)) {
        return plan;
      }
    } catch (Throwable t) {
      return plan;
    }
    ACTIVE.set(Boolean.TRUE);
    try {
      Object result = fn.apply(plan, PlanRewrite.payload(plan, session));
      if (!(result instanceof LogicalPlan) || result == plan) {
        return plan;
      }
      LogicalPlan rewritten = (LogicalPlan) result;
      if (!rewritten.resolved()) {
        LOG.warn("accelerator: rewritten plan is not resolved; running the original plan");
        return plan;
      }
      if (!rewritten.schema().asNullable().equals(plan.schema().asNullable())) {
        LOG.warn("accelerator: rewritten plan changed the schema; running the original plan");
        return plan;
      }
      return rewritten;
    } catch (Throwable t) {
      LOG.warn("accelerator: rewrite failed; running the original plan", t);
      return plan;
    } finally {
      ACTIVE.set(Boolean.FALSE);
    }
  }
}
