package accelerator.jvm;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.execution.SparkStrategy;


/** The accelerator's planner strategies, added to a session's experimental extra strategies. */
final class Strategies {
  private Strategies() {
  }

  /** Adds {@code strategy} to the session's planner unless one of its class is there. */
  static synchronized void install(SparkSession session, SparkStrategy strategy) {
    if (!installed(session, strategy.getClass())) {
      List<SparkStrategy> strategies = new ArrayList<>(
          Scala.list(session.experimental().extraStrategies()));
      strategies.add(strategy);
      session.experimental().extraStrategies_$eq(Scala.seq(strategies));
    }
  }

  /** Whether the session's planner has a strategy of class {@code kind}. */
  static boolean installed(SparkSession session, Class<?> kind) {
    scala.collection.Seq<SparkStrategy> strategies = session.experimental().extraStrategies();
    for (int i = 0; i < strategies.size(); i++) {
      if (kind.isInstance(strategies.apply(i))) {
        return true;
      }
    }
    return false;
  }
}
