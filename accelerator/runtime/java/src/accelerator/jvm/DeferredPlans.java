package accelerator.jvm;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;

/**
 * Plans the rule does not hand to the Python rewriter while they are planned: those no index
 * or cache entry could serve ({@link IndexedRoots#mayBeServed}), planned under settings the
 * rewriter answered a plan under lately (so what it published about indexed roots holds for
 * them). Nothing can rewrite such a plan; only the query history wants it, and takes it later:
 * the rewriter drains the queue from a thread of its own, and the payloads are built then. A
 * plan of a session whose settings the rewriter has not answered under within the refresh delay
 * goes to the rewriter as before, which reloads what other processes changed.
 *
 * <p>At most {@link #MAX_QUEUED} plans wait; further ones are counted as dropped.
 */
final class DeferredPlans {
  static final int MAX_QUEUED = 10_000;
  private static final int MAX_SCOPES = 64;
  private static final String INDEX_EXPIRY_KEY = "spark.accelerator.index.cache.expirySeconds";
  private static final String CACHE_REFRESH_KEY = "spark.accelerator.cache.refreshSeconds";
  private static final String DEFAULT_SECONDS = "10";

  private static final ConcurrentLinkedQueue<Deferred> QUEUE = new ConcurrentLinkedQueue<>();
  private static final AtomicInteger QUEUED = new AtomicInteger();
  private static final AtomicLong DROPPED = new AtomicLong();
  /** Settings (PlanPayload.confJson) → System.nanoTime() of the rewriter's last answer. */
  private static final ConcurrentHashMap<String, Long> ANSWERED = new ConcurrentHashMap<>();
  /** Bumped by {@link #forget}: an answer begun before it does not make its settings fresh. */
  private static final AtomicLong GENERATION = new AtomicLong();

  private DeferredPlans() {}

  private static final class Deferred {
    final LogicalPlan plan;
    final SparkSession session;
    final String conf;
    final String queryId;
    final long plannedAt;

    Deferred(LogicalPlan plan, SparkSession session, String conf, String queryId) {
      this.plan = plan;
      this.session = session;
      this.conf = conf;
      this.queryId = queryId;
      this.plannedAt = System.currentTimeMillis();
    }
  }

  static long generation() {
    return GENERATION.get();
  }

  /** Records that the rewriter answered a plan under {@code conf}, unless {@link #forget} was
   * called since {@code generation} was read (before the rewriter was called). */
  static void answered(String conf, long generation) {
    if (GENERATION.get() != generation) {
      return;
    }
    if (ANSWERED.size() >= MAX_SCOPES) {
      ANSWERED.clear();
    }
    ANSWERED.put(conf, System.nanoTime());
  }

  /** Whether the rewriter answered a plan under {@code conf} within the refresh delay: the
   * smaller of the index list's expiry and the cache's refresh (0 or less: never). */
  static boolean fresh(String conf, SparkSession session) {
    Long at = ANSWERED.get(conf);
    if (at == null) {
      return false;
    }
    double seconds;
    try {
      seconds = Math.min(
          Double.parseDouble(session.conf().get(INDEX_EXPIRY_KEY, DEFAULT_SECONDS)),
          Double.parseDouble(session.conf().get(CACHE_REFRESH_KEY, DEFAULT_SECONDS)));
    } catch (NumberFormatException e) {
      return false;
    }
    return seconds > 0 && System.nanoTime() - at < (long) (seconds * 1e9);
  }

  /** Forgets every answer: the next plan of each session goes to the rewriter. */
  static void forget() {
    GENERATION.incrementAndGet();
    ANSWERED.clear();
  }

  /** Queues a plan for the query history (or counts it as dropped when the queue is full). */
  static void offer(LogicalPlan plan, SparkSession session, String conf, String queryId) {
    if (QUEUED.incrementAndGet() > MAX_QUEUED) {
      QUEUED.decrementAndGet();
      DROPPED.incrementAndGet();
      return;
    }
    QUEUE.add(new Deferred(plan, session, conf, queryId));
  }

  /** The payloads ({@link PlanPayload#payload}, with {@code plannedAt}: epoch milliseconds) of
   * at most {@code max} queued plans, oldest first, taken off the queue. */
  static String[] drain(int max) {
    List<String> out = new ArrayList<>();
    while (out.size() < max) {
      Deferred d = QUEUE.poll();
      if (d == null) {
        break;
      }
      QUEUED.decrementAndGet();
      try {
        out.add(PlanPayload.payload(d.plan, d.session, d.conf, d.queryId, d.plannedAt));
      } catch (Throwable t) {   // the history is best effort: never stop the drain
        DROPPED.incrementAndGet();
      }
    }
    return out.toArray(new String[0]);
  }

  /** Plans dropped since the last call (the queue was full, or describing one failed). */
  static long takeDropped() {
    return DROPPED.getAndSet(0);
  }
}
