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
import org.apache.spark.sql.execution.exchange.ReusedExchangeExec;
import org.apache.spark.sql.execution.joins.BroadcastHashJoinExec;
import org.apache.spark.sql.execution.joins.BroadcastNestedLoopJoinExec;
import org.apache.spark.sql.execution.joins.ShuffledHashJoinExec;
import org.apache.spark.sql.execution.joins.SortMergeJoinExec;
import org.apache.spark.sql.execution.metric.SQLMetric;
import org.apache.spark.sql.util.QueryExecutionListener;

import scala.Option;

/**
 * What the queries the accelerator planned cost once they ran, for the query history.
 *
 * <p>The rule asks {@link #queryId()} for an id while it plans a query; the id is kept per
 * planning tracker (the object Spark keeps for one QueryExecution), so when the query succeeds
 * this listener finds it again and queues one line of JSON: the id, the wall time and, per file
 * scan of the executed plan, its root paths and the files, bytes and rows it read, and per join
 * its strategy ({@code broadcast} or {@code shuffle}) with the root paths of the scans under each
 * side (what the rule engine needs to know whether a join of two sources shuffles). Python drains
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
          .append("{\"queryId\":").append(Json.quote(id))
          .append(",\"endMs\":").append(System.currentTimeMillis())
          .append(",\"durationMs\":").append(durationNs / 1_000_000L)
          .append(",\"scans\":[");
      List<SparkPlan> found = new ArrayList<>();
      walk(qe.executedPlan(), found, Collections.newSetFromMap(new IdentityHashMap<>()), false);
      String sep = "{";
      for (SparkPlan node : found) {
        if (node instanceof FileSourceScanExec) {
          FileSourceScanExec scan = (FileSourceScanExec) node;
          roots(sb.append(sep).append("\"roots\":"), scan);
          sb.append(",\"files\":").append(metric(scan, "numFiles"))
              .append(",\"bytes\":").append(metric(scan, "filesSize"))
              .append(",\"rows\":").append(metric(scan, "numOutputRows")).append('}');
          sep = ",{";
        }
      }
      sb.append("],\"joins\":[");
      sep = "{";
      for (SparkPlan node : found) {
        String strategy = strategy(node);
        if (strategy != null && node.children().size() == 2) {
          sb.append(sep).append("\"strategy\":\"").append(strategy).append('"');
          side(sb.append(",\"left\":"), node.children().apply(0));
          side(sb.append(",\"right\":"), node.children().apply(1));
          sb.append('}');
          sep = ",{";
        }
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

  /** A join's strategy: {@code broadcast} (one side sent whole to every task),
   * {@code shuffle} (both sides partitioned by the keys: sort-merge or shuffled hash joins,
   * bucketed ones included), null for another node. */
  private static String strategy(SparkPlan node) {
    if (node instanceof BroadcastHashJoinExec || node instanceof BroadcastNestedLoopJoinExec) {
      return "broadcast";
    }
    if (node instanceof SortMergeJoinExec || node instanceof ShuffledHashJoinExec) {
      return "shuffle";
    }
    return null;
  }

  /** The root paths of the file scans under one side of a join, a list per scan. */
  private static void side(StringBuilder sb, SparkPlan child) {
    List<SparkPlan> found = new ArrayList<>();
    walk(child, found, Collections.newSetFromMap(new IdentityHashMap<>()), true);
    sb.append('[');
    String sep = "";
    for (SparkPlan node : found) {
      if (node instanceof FileSourceScanExec) {
        roots(sb.append(sep), (FileSourceScanExec) node);
        sep = ",";
      }
    }
    sb.append(']');
  }

  private static void roots(StringBuilder sb, FileSourceScanExec scan) {
    List<Path> roots = Scala.list(scan.relation().location().rootPaths());
    sb.append('[');
    for (int j = 0; j < roots.size(); j++) {
      sb.append(j == 0 ? "" : ",").append(Json.quote(roots.get(j).toString()));
    }
    sb.append(']');
  }

  /** The nodes of an executed plan, through adaptive plans and query stages. {@code side}: the
   * nodes under one side of a join (a reused exchange followed to what it reuses, subqueries
   * left out); else the whole plan with its subqueries, a reused exchange or subquery not
   * followed (its scans are not counted twice). */
  private static void walk(SparkPlan plan, List<SparkPlan> out, Set<SparkPlan> seen,
      boolean side) {
    if (plan == null || !seen.add(plan)) {
      return;
    }
    if (plan instanceof ReusedExchangeExec) {
      if (side) {
        walk(((ReusedExchangeExec) plan).child(), out, seen, true);
      }
      return;
    }
    if (plan.getClass().getSimpleName().startsWith("Reused")) {
      return;
    }
    if (plan instanceof AdaptiveSparkPlanExec) {
      walk(((AdaptiveSparkPlanExec) plan).executedPlan(), out, seen, side);
      return;
    }
    if (plan instanceof QueryStageExec) {
      walk(((QueryStageExec) plan).plan(), out, seen, side);
      return;
    }
    out.add(plan);
    for (SparkPlan child : Scala.list(plan.children())) {
      walk(child, out, seen, side);
    }
    if (!side) {
      for (SparkPlan sub : Scala.list(plan.subqueries())) {
        walk(sub, out, seen, false);
      }
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
