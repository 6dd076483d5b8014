package accelerator.jvm;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Predicate;

import org.apache.spark.sql.catalyst.plans.logical.Join;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;


/** Finds nodes in a logical plan: its file relations, its joins, the parent of a node. */
final class PlanTree {
  private PlanTree() {
  }

  /** Whether {@code plan} is a relation reading files through a HadoopFsRelation. */
  static boolean isFileRelation(LogicalPlan plan) {
    return plan instanceof LogicalRelation
        && ((LogicalRelation) plan).relation() instanceof HadoopFsRelation;
  }

  /** True when some leaf of the plan reads files through a HadoopFsRelation. */
  static boolean hasFileRelation(LogicalPlan plan) {
    return anyNode(plan, PlanTree::isFileRelation);
  }

  /** Whether {@code plan} or a node below it passes {@code test}. */
  static boolean anyNode(LogicalPlan plan, Predicate<LogicalPlan> test) {
    if (test.test(plan)) {
      return true;
    }
    scala.collection.Seq<LogicalPlan> children = plan.children();
    for (int i = 0; i < children.size(); i++) {
      if (anyNode(children.apply(i), test)) {
        return true;
      }
    }
    return false;
  }

  /** The file relations of the plan, in pre-order (the order of {@code plan.toJSON()}). */
  static List<LogicalPlan> fileRelations(LogicalPlan plan) {
    List<LogicalPlan> out = new ArrayList<>();
    collect(plan, out);
    return out;
  }

  private static void collect(LogicalPlan plan, List<LogicalPlan> out) {
    if (isFileRelation(plan)) {
      out.add(plan);
    }
    scala.collection.Seq<LogicalPlan> children = plan.children();
    for (int i = 0; i < children.size(); i++) {
      collect(children.apply(i), out);
    }
  }

  /** The Join nodes of the plan in pre-order (their hints are not in {@code toJSON}). */
  static List<LogicalPlan> joins(LogicalPlan plan) {
    List<LogicalPlan> out = new ArrayList<>();
    collectJoins(plan, out);
    return out;
  }

  private static void collectJoins(LogicalPlan plan, List<LogicalPlan> out) {
    if (plan instanceof Join) {
      out.add(plan);
    }
    scala.collection.Seq<LogicalPlan> children = plan.children();
    for (int i = 0; i < children.size(); i++) {
      collectJoins(children.apply(i), out);
    }
  }

  /** The node of {@code plan} whose child is {@code child} (by identity), or null. */
  static LogicalPlan parentOf(LogicalPlan plan, LogicalPlan child) {
    scala.collection.Seq<LogicalPlan> children = plan.children();
    for (int i = 0; i < children.size(); i++) {
      if (children.apply(i) == child) {
        return plan;
      }
      LogicalPlan found = parentOf(children.apply(i), child);
      if (found != null) {
        return found;
      }
    }
    return null;
  }
}
