package accelerator.jvm;

import java.util.function.BiFunction;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import py4j.ClientServerConnection;
import py4j.Gateway;
import py4j.PythonClient;
import py4j.reflection.PythonProxyHandler;

/**
 * Optimizer rule that hands each optimized plan to the Python rewriter, with everything the
 * rewriter needs to decide in one string (see {@link PlanPayload#payload}), so plans no index
 * applies to cost no py4j call back into the JVM.
 *
 * <p>It never fails or changes a query because of the accelerator: any Throwable, an unresolved
 * result or a result whose schema differs from the original makes it return the original plan.
 * Plans without a file-based relation are not sent to Python at all, nor are those no index or
 * cache entry could serve ({@link IndexedRoots#mayBeServed}) while the rewriter's answers under
 * the session's settings are fresh: those wait for the query history in {@link DeferredPlans}.
 * Over the relations a rewrite adds, {@link SignedZeroGuard} keeps comparisons with a floating
 * zero out of Parquet. Iceberg tables reach the rewriter as the files of their snapshot, and
 * come back wherever it did not serve them ({@link IcebergFiles}).
 */
public final class AcceleratorRule extends Rule<LogicalPlan> {
  static final String ENABLED_KEY = "spark.accelerator.enabled";
  /** A thread-local Spark property: queries of a thread that sets it are not rewritten (the
   * accelerator's own index builds), while other threads' queries still are. */
  static final String SUSPENDED_KEY = "spark.accelerator.suspended";
  static final String HISTORY_KEY = "spark.accelerator.history.enabled";
  /** A thread-local Spark property: plans of a thread that sets it always go to the rewriter
   * (explain and whyNot collect its verdicts), none is deferred. */
  static final String CAPTURING_KEY = "spark.accelerator.capturing";
  private static final Logger LOG = LoggerFactory.getLogger(AcceleratorRule.class);
  private static final ThreadLocal<Boolean> ACTIVE = ThreadLocal.withInitial(() -> Boolean.FALSE);
  private static volatile BiFunction<Object, String, Object> rewriter;

  private static volatile java.lang.reflect.Field gatewayField;
  private final SparkSession session;

  public AcceleratorRule(SparkSession session) {
    this.session = session;
  }

  /** Installs (or, with null, removes) the Python rewriter shared by all sessions of this JVM. */
  static void setRewriter(BiFunction<Object, String, Object> fn) {
    rewriter = fn;
  }

  /**
   * Sets TCP_NODELAY on this thread's py4j connection to Python. Without it, a payload or
   * answer just over 8 KB leaves its tail waiting for Python's delayed ACK: ~40 ms per query.
   * Best effort: any failure leaves the socket as it is.
   */
  private static void disableNagle(Object fn) {
    try {
      if (gatewayField == null) {
        java.lang.reflect.Field f = PythonProxyHandler.class.getDeclaredField("gateway");
        f.setAccessible(true);
        gatewayField = f;
      }
      Object handler = java.lang.reflect.Proxy.getInvocationHandler(fn);
      Object client = ((Gateway) gatewayField.get(handler)).getCallbackClient();
      if (client instanceof PythonClient) {
        ClientServerConnection connection = ((PythonClient) client).getPerThreadConnection();
        if (connection != null && !connection.getSocket().getTcpNoDelay()) {
          connection.getSocket().setTcpNoDelay(true);
        }
      }
    } catch (Throwable t) {
      // not a py4j proxy or another py4j version: keep the default socket options
    }
  }

  @Override
  public LogicalPlan apply(LogicalPlan plan) {
    BiFunction<Object, String, Object> fn = rewriter;
    if (fn == null || ACTIVE.get()) {
      return plan;
    }
    LogicalPlan viewed;
    try {
      if (!"true".equalsIgnoreCase(session.conf().get(ENABLED_KEY, "false"))
          || "true".equals(session.sparkContext().getLocalProperty(SUSPENDED_KEY))) {
        return plan;
      }
      viewed = IcebergFiles.views(plan);
      if (!PlanTree.hasFileRelation(viewed)) {
        return plan;
      }
    } catch (Throwable t) {
      LOG.warn("accelerator: cannot read the plan's Iceberg tables as files; running the "
          + "original plan", t);
      return plan;
    }
    ACTIVE.set(Boolean.TRUE);
    try {
      // an id to report the query's cost under, when the history records queries
      String queryId = "false".equalsIgnoreCase(session.conf().get(HISTORY_KEY, "true"))
          ? null : QueryMetrics.queryId();
      String conf = PlanPayload.confJson(session);
      if (!"true".equals(session.sparkContext().getLocalProperty(CAPTURING_KEY))
          && DeferredPlans.fresh(conf, session) && !IndexedRoots.mayBeServed(viewed)) {
        // nothing could serve this plan: only the history wants it, and describes it later
        if (queryId != null) {
          DeferredPlans.offer(viewed, session, conf, queryId);
        }
        return plan;
      }
      disableNagle(fn);
      long generation = DeferredPlans.generation();
      Object result = fn.apply(viewed, PlanPayload.payload(viewed, session, conf, queryId, -1));
      DeferredPlans.answered(conf, generation);
      if (!(result instanceof LogicalPlan) || result == viewed) {
        return plan;
      }
      LogicalPlan rewritten = viewed == plan ? (LogicalPlan) result
          : IcebergFiles.restore((LogicalPlan) result);
      if (!rewritten.resolved()) {
        LOG.warn("accelerator: rewritten plan is not resolved; running the original plan");
        return plan;
      }
      if (!rewritten.schema().asNullable().equals(plan.schema().asNullable())) {
        LOG.warn("accelerator: rewritten plan changed the schema; running the original plan");
        return plan;
      }
      return SignedZeroGuard.apply(plan, rewritten);
    } catch (Throwable t) {
      LOG.warn("accelerator: rewrite failed; running the original plan", t);
      return plan;
    } finally {
      ACTIVE.set(Boolean.FALSE);
    }
  }
}
