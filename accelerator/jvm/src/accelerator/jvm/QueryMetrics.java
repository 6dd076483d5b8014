package accelerator.jvm;

import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.WeakHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.QueryPlanningTracker;
import org.apache.spark.sql.execution.FileSourceScanExec;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec;
import org.apache.spark.sql.execution.adaptive.QueryStageExec;
import org.apache.spark.sql.execution.metric.SQLMetric;
import org.apache.spark.sql.util.QueryExecutionListener;

import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * What the queries the accelerator planned cost once they ran, for the query history.
 *
 * <p>The rule asks {@link #queryId()} for an id while it plans a query; the id is kept per
 * planning tracker (the object Spark keeps for one QueryExecution), so when the query succeeds
 * this listener finds it again and queues one line of JSON: the id, the wall time and, per file
 * scan of the executed plan, its root paths and the files, bytes and rows it read. Python drains
 * the queue when it writes the history ({@link #drain()}): no I/O and no call into Python per
 * query. Nothing here ever fails a query; at most {@link #MAX_QUEUED} executions wait.
 */
public final class QueryMetrics implements QueryExecutionListener {
  static final int MAX_QUEUED = 10_000;
  private static final Map<QueryPlanningTracker, String> IDS =
      Collections.synchronizedMap(new WeakHashMap<>());
  private static final ConcurrentLinkedQueue<String> DONE = new ConcurrentLinkedQueue<>();
  private static final AtomicInteger QUEUED = new AtomicInteger();

  /** The id of the query being planned on this thread (the same for every call while it is
   * planned), or null when no query is being planned. */
  static String queryId() {
    Option<QueryPlanningTracker> tracker = QueryPlanningTracker.get();
    if (tracker.isEmpty()) {
      return null;
    }
    synchronized (IDS) {
      return IDS.computeIfAbsent(tracker.get(), t -> UUID.randomUUID().toString());
    }
  }

  @Override
  public void onSuccess(String funcName, QueryExecution qe, long durationNs) {
    try {
      String id = IDS.get(qe.tracker());
      if (id == null || QUEUED.get() >= MAX_QUEUED) {
        return;
      }
      StringBuilder sb = new StringBuilder(256)
          .append("{\"queryId\":").append(PlanRewrite.quote(id))
          .append(",\"endMs\":").append(System.currentTimeMillis())
          .append(",\"durationMs\":").append(durationNs / 1_000_000L)
          .append(",\"scans\":[");
      List<FileSourceScanExec> found = new ArrayList<>();
      scans(qe.executedPlan(), found, Collections.newSetFromMap(new IdentityHashMap<>()));
      for (int i = 0; i < found.size(); i++) {
        FileSourceScanExec scan = found.get(i);
        sb.append(i == 0 ? "{\"roots\":[" : ",{\"roots\":[");
        List<Path> roots = CollectionConverters.asJava(scan.relation().location().rootPaths());
        for (int j = 0; j < roots.size(); j++) {
          sb.append(j == 0 ? "" : ",").append(PlanRewrite.quote(roots.get(j).toString()));
        }
        sb.append("],\"files\":").append(metric(scan, "numFiles"))
            .append(",\"bytes\":").append(metric(scan, "filesSize"))
            .append(",\"rows\":").append(metric(scan, "numOutputRows")).append('}');
      }
      DONE.add(sb.append("]}").toString());
      QUEUED.incrementAndGet();
    } catch (Throwable t) {
      // metrics are best effort: a query never fails or waits because of them
    }
  }

  @Override
  public void onFailure(String funcName, QueryExecution qe, Exception exception) {
    // failed queries are not timed
  }

  private static long metric(SparkPlan scan, String name) {
    Option<SQLMetric> m = scan.metrics().get(name);
    return m.isDefined() ? m.get().value() : -1L;
  }

  /** File scans of an executed plan, through adaptive plans, query stages and subqueries; a
   * reused exchange or subquery is not counted twice. */
  private static void scans(SparkPlan plan, List<FileSourceScanExec> out, Set<SparkPlan> seen) {
    if (plan == null || !seen.add(plan) || plan.getClass().getSimpleName().startsWith("Reused")) {
      return;
    }
    if (plan instanceof AdaptiveSparkPlanExec) {
      scans(((AdaptiveSparkPlanExec) plan).executedPlan(), out, seen);
      return;
    }
    if (plan instanceof QueryStageExec) {
      scans(((QueryStageExec) plan).plan(), out, seen);
      return;
    }
    if (plan instanceof FileSourceScanExec) {
      out.add((FileSourceScanExec) plan);
    }
    for (SparkPlan child : CollectionConverters.asJava(plan.children())) {
      scans(child, out, seen);
    }
    for (SparkPlan sub : CollectionConverters.asJava(plan.subqueries())) {
      scans(sub, out, seen);
    }
  }

  /** The executions finished since the last call, one JSON object per line ("" for none). */
  public String drain() {
    StringBuilder sb = new StringBuilder();
    for (String line = DONE.poll(); line != null; line = DONE.poll()) {
      QUEUED.decrementAndGet();
      sb.append(line).append('\n');
    }
    return sb.toString();
  }
}
