package accelerator.jvm;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.Join;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;

/**
 * The root paths the Python rewriter last published: those some index or the cache is over,
 * those a data-skipping kind is over, and what a plan over each must hold for an index to
 * serve it. The rule asks {@link #mayBeServed} before calling into Python: a plan no index
 * and no cache entry could serve goes to the query history alone (see {@link DeferredPlans}).
 */
final class IndexedRoots {
  /** What the indexes over one root need of a plan: any plan at all, or a join, or a Filter
   * right above the relation naming one of {@code columns} (lower case). */
  private static final class Use {
    final boolean anyPlan;
    final boolean joins;
    final Set<String> columns;

    Use(boolean anyPlan, boolean joins, Set<String> columns) {
      this.anyPlan = anyPlan;
      this.joins = joins;
      this.columns = columns;
    }
  }

  private static volatile Set<String> indexed = Collections.emptySet();
  private static volatile Set<String> skipping = Collections.emptySet();
  private static volatile Map<String, Use> uses = Collections.emptyMap();

  private IndexedRoots() {}

  /**
   * Publishes the roots: {@code lines} those some index or the cache is over, {@code
   * skippingLines} those some data-skipping index is over (newline-separated), and {@code
   * useLines}, per root, tab-separated: the path, flags ({@code A}: any plan may be served,
   * {@code J}: a join may be, {@code -}: neither) and the columns a Filter right above its
   * relation must name. A root without a use line may serve any plan.
   */
  static void publish(String lines, String skippingLines, String useLines) {
    Map<String, Use> parsed = new HashMap<>();
    for (String line : useLines.split("\n")) {
      if (line.isEmpty()) {
        continue;
      }
      String[] parts = line.split("\t", -1);
      Set<String> columns = new HashSet<>();
      for (int i = 2; i < parts.length; i++) {
        columns.add(parts[i]);
      }
      String flags = parts.length > 1 ? parts[1] : "A";
      parsed.put(parts[0], new Use(flags.contains("A"), flags.contains("J"), columns));
    }
    uses = parsed;
    skipping = Lines.nonEmpty(skippingLines);
    indexed = Lines.nonEmpty(lines);
  }

  /** Whether some index or the cache is over a root path of the file relation. */
  static boolean indexed(LogicalPlan relation) {
    return reads(relation, indexed);
  }

  /** Whether some data-skipping index is over a root path of the file relation. */
  static boolean skipping(LogicalPlan relation) {
    return reads(relation, skipping);
  }

  private static boolean reads(LogicalPlan relation, Set<String> roots) {
    if (roots.isEmpty()) {
      return false;
    }
    for (String root : rootPaths(relation)) {
      if (roots.contains(root)) {
        return true;
      }
    }
    return false;
  }

  private static List<String> rootPaths(LogicalPlan relation) {
    HadoopFsRelation fs = (HadoopFsRelation) ((LogicalRelation) relation).relation();
    scala.collection.Seq<Path> paths = fs.location().rootPaths();
    List<String> out = new ArrayList<>(paths.size());
    for (int i = 0; i < paths.size(); i++) {
      out.add(paths.apply(i).toString());
    }
    return out;
  }

  /**
   * Whether an index or the cache might serve some file relation of the plan, as published:
   * false only when every relation over an indexed root has a use that the plan misses (no
   * join where a join could be served, no Filter right above the relation naming one of the
   * columns). A yes may still find nothing to serve; a no is never wrong.
   */
  static boolean mayBeServed(LogicalPlan plan) {
    if (indexed.isEmpty()) {
      return false;
    }
    boolean joins = PlanTree.anyNode(plan, p -> p instanceof Join);
    return mayBeServed(plan, new ArrayList<>(), joins);
  }

  private static boolean mayBeServed(LogicalPlan node, List<LogicalPlan> ancestors,
                                     boolean joins) {
    if (PlanTree.isFileRelation(node)) {
      return relationMayBeServed(node, ancestors, joins);
    }
    ancestors.add(node);
    try {
      scala.collection.Seq<LogicalPlan> children = node.children();
      for (int i = 0; i < children.size(); i++) {
        if (mayBeServed(children.apply(i), ancestors, joins)) {
          return true;
        }
      }
      return false;
    } finally {
      ancestors.remove(ancestors.size() - 1);
    }
  }

  private static boolean relationMayBeServed(LogicalPlan relation, List<LogicalPlan> ancestors,
                                             boolean joins) {
    Set<String> roots = indexed;
    Map<String, Use> byRoot = uses;
    Set<String> filtered = null;
    for (String root : rootPaths(relation)) {
      if (!roots.contains(root)) {
        continue;
      }
      Use use = byRoot.get(root);
      if (use == null || use.anyPlan || (use.joins && joins)) {
        return true;
      }
      if (filtered == null) {
        filtered = filteredColumns(ancestors);
      }
      for (String column : filtered) {
        if (use.columns.contains(column)) {
          return true;
        }
      }
    }
    return false;
  }

  /** The names (lower case) of the attributes the Filters right above a relation read: the
   * Filters ending {@code ancestors} (its parent last). */
  private static Set<String> filteredColumns(List<LogicalPlan> ancestors) {
    Set<String> out = new HashSet<>();
    for (int i = ancestors.size() - 1; i >= 0 && ancestors.get(i) instanceof Filter; i--) {
      scala.collection.Iterator<Attribute> refs =
          ((Filter) ancestors.get(i)).condition().references().iterator();
      while (refs.hasNext()) {
        out.add(refs.next().name().toLowerCase(java.util.Locale.ROOT));
      }
    }
    return out;
  }
}
