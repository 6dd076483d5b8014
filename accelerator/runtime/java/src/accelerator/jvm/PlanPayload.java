package accelerator.jvm;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.In;
import org.apache.spark.sql.catalyst.expressions.InSet;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.plans.logical.Join;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;


/**
 * Builds the payload of a plan: the one JSON string the Python rewriter reads to decide on it
 * (settings, read settings, relation descriptions, join hints and the plan itself).
 */
final class PlanPayload {
  /** Settings that change the values Spark reads from files: an index is only valid under the
   * values it was built with. */
  private static final String[] READ_SETTINGS = {
    "spark.sql.session.timeZone", "spark.sql.legacy.timeParserPolicy", "spark.sql.caseSensitive",
    "spark.sql.files.ignoreCorruptFiles", "spark.sql.files.ignoreMissingFiles",
    "spark.sql.parquet.binaryAsString", "spark.sql.parquet.int96AsTimestamp",
    "spark.sql.parquet.int96TimestampConversion", "spark.sql.parquet.datetimeRebaseModeInRead",
    "spark.sql.parquet.int96RebaseModeInRead",
  };

  private PlanPayload() {
  }

  /** The session's settings the rewriter reads ({@code conf} of {@link #payload}), as one
   * JSON object: also the key under which {@link DeferredPlans} remembers its answers. */
  static String confJson(SparkSession session) {
    StringBuilder sb = new StringBuilder(512).append('{');
    Map<String, String> all = Scala.map(session.sessionState().conf().getAllConfs());
    for (Map.Entry<String, String> e : all.entrySet()) {
      String k = e.getKey();
      if (k.startsWith("spark.accelerator.") || k.equals("spark.sql.caseSensitive")) {
        sb.append(Json.quote(k)).append(':').append(Json.quote(e.getValue())).append(',');
      }
    }
    sb.append("\"spark.sql.ansi.enabled\":")
        .append(Json.quote(session.conf().get("spark.sql.ansi.enabled"))).append(',');
    for (String key : new String[] {"spark.sql.autoBroadcastJoinThreshold",
        "spark.sql.sources.bucketing.enabled"}) {
      sb.append(Json.quote(key)).append(':').append(Json.quote(session.conf().get(key)))
          .append(',');
    }
    sb.append("\"spark.sql.warehouse.dir\":")
        .append(Json.quote(session.conf().get("spark.sql.warehouse.dir")));
    return sb.append('}').toString();
  }

  /**
   * What the Python rewriter needs about a plan, as one JSON object: the session's
   * {@code spark.accelerator.*} settings and the few SQL settings it reads ({@code conf}), a
   * description of each file relation without its files ({@code relations}, in pre-order; with
   * the fingerprint when an index is over its root paths) and the plan itself ({@code plan}, as
   * {@code toJSON}), with the settings that change what is read from files ({@code
   * readSettings}), the hints of its joins ({@code joinHints}, in pre-order: "" for none) and
   * whether the session plans a {@link BucketUnion} ({@code bucketUnion}). The settings come
   * already as JSON ({@code conf}, see {@link #confJson}); with {@code queryId} not null, it
   * holds the query's id ({@code "queryId"}, under which {@link QueryMetrics} reports what it
   * cost); with {@code plannedAt} not negative, the epoch milliseconds the plan was planned at
   * ({@code "plannedAt"}: a plan described later, see {@link DeferredPlans}).
   */
  static String payload(LogicalPlan plan, SparkSession session, String conf, String queryId,
                        long plannedAt) {
    StringBuilder sb = new StringBuilder(4096).append('{');
    if (queryId != null) {
      sb.append("\"queryId\":").append(Json.quote(queryId)).append(',');
    }
    if (plannedAt >= 0) {
      sb.append("\"plannedAt\":").append(plannedAt).append(',');
    }
    sb.append("\"conf\":").append(conf);
    sb.append(",\"bucketUnion\":").append(BucketUnion.installed(session));
    sb.append(",\"readSettings\":").append(readSettings(session));
    sb.append(",\"relations\":[");
    List<LogicalPlan> relations = PlanTree.fileRelations(plan);
    boolean skipping = false;
    for (int i = 0; i < relations.size(); i++) {
      LogicalPlan rel = relations.get(i);
      boolean skips = IndexedRoots.skipping(rel);
      skipping |= skips;
      sb.append(i == 0 ? "" : ",").append(RelationDescriptions.describe(rel,
          skips || IndexedRoots.indexed(rel) ? 1 : 0));
    }
    sb.append("],\"joinHints\":[");
    List<LogicalPlan> joins = PlanTree.joins(plan);
    for (int i = 0; i < joins.size(); i++) {
      sb.append(i == 0 ? "" : ",").append(Json.quote(((Join) joins.get(i)).hint().toString()));
    }
    // toJSON drops the values of InSet (IN lists over 10 items): spell them out for data skipping
    LogicalPlan shown = skipping ? (LogicalPlan) plan.transformAllExpressions(new InSetAsIn()) : plan;
    return sb.append("],\"plan\":").append(shown.toJSON()).append('}').toString();
  }

  /** The current values of the settings that change what Spark reads from files, as JSON. */
  static String readSettings(SparkSession session) {
    StringBuilder sb = new StringBuilder("{");
    for (int i = 0; i < READ_SETTINGS.length; i++) {
      String value;
      try {
        value = session.conf().get(READ_SETTINGS[i]);
      } catch (java.util.NoSuchElementException e) {
        value = "";
      }
      sb.append(i == 0 ? "" : ",").append(Json.quote(READ_SETTINGS[i])).append(':')
          .append(Json.quote(value));
    }
    return sb.append('}').toString();
  }

  /** Writes an InSet as the equivalent In over literals (for the plan's JSON only). */
  private static final class InSetAsIn
      extends scala.runtime.AbstractPartialFunction<Expression, Expression> {
    @Override
    public boolean isDefinedAt(Expression e) {
      return e instanceof InSet;
    }

    @Override
    public <A1 extends Expression, B1> B1 applyOrElse(A1 e, scala.Function1<A1, B1> dflt) {
      if (!(e instanceof InSet)) {
        return dflt.apply(e);
      }
      InSet in = (InSet) e;
      List<Expression> values = new ArrayList<>();
      for (Object v : Scala.set(in.hset())) {
        values.add(new Literal(v, in.child().dataType()));
      }
      @SuppressWarnings("unchecked")
      B1 out = (B1) new In(in.child(), Scala.seq(values));
      return out;
    }
  }
}
