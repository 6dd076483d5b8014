package accelerator.jvm;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.BinaryComparison;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.ExprId;
import org.apache.spark.sql.catalyst.expressions.GetStructField;
import org.apache.spark.sql.catalyst.expressions.In;
import org.apache.spark.sql.catalyst.expressions.InSet;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.optimizer.NormalizeNaNAndZero;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DoubleType$;
import org.apache.spark.sql.types.FloatType$;

/**
 * Keeps comparisons of a floating-point column with a zero literal out of the Parquet reader.
 *
 * <p>Spark compares -0.0 and 0.0 as equal, but Parquet's dictionary and statistics filters do
 * not: with filter pushdown, {@code w = 0.0} skips a row group whose dictionary holds only -0.0
 * (and {@code w = -0.0} one holding only 0.0), so Spark itself returns fewer rows with pushdown
 * than without. Index and cache files group rows differently from the source files, so over
 * them the loss would differ from vanilla Spark's too. Over the relations a rewrite adds (index
 * data, cached entries), such a comparison reads its column through {@code NormalizeNaNAndZero},
 * which Spark cannot translate into a data source filter: the rows are filtered after the scan,
 * with Spark's semantics, as vanilla Spark does without pushdown.
 */
final class SignedZeroGuard {
  private SignedZeroGuard() {}

  /** {@code rewritten} with the guard applied over each relation {@code original} lacks. */
  static LogicalPlan apply(LogicalPlan original, LogicalPlan rewritten) {
    Set<LogicalPlan> kept = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
    kept.addAll(relations(original));
    Set<ExprId> columns = new HashSet<>();
    for (LogicalPlan relation : relations(rewritten)) {
      if (!kept.contains(relation)) {
        for (Attribute a : Scala.list(relation.output())) {
          columns.add(a.exprId());
        }
      }
    }
    if (columns.isEmpty()) {
      return rewritten;
    }
    return (LogicalPlan) rewritten.transformAllExpressions(new Guard(columns));
  }

  private static List<LogicalPlan> relations(LogicalPlan plan) {
    List<LogicalPlan> out = new ArrayList<>();
    plan.foreach(new scala.runtime.AbstractFunction1<LogicalPlan, scala.runtime.BoxedUnit>() {
      @Override
      public scala.runtime.BoxedUnit apply(LogicalPlan node) {
        if (node instanceof LogicalRelation) {
          out.add(node);
        }
        return scala.runtime.BoxedUnit.UNIT;
      }
    });
    return out;
  }

  private static boolean isFloating(DataType type) {
    return type == DoubleType$.MODULE$ || type == FloatType$.MODULE$;
  }

  private static boolean isZero(Object value) {
    return (value instanceof Double || value instanceof Float)
        && ((Number) value).doubleValue() == 0.0;
  }

  /** Rewrites the comparisons of a guarded column with a zero literal (see the class). */
  private static final class Guard
      extends scala.runtime.AbstractPartialFunction<Expression, Expression> {
    private final Set<ExprId> columns;

    Guard(Set<ExprId> columns) {
      this.columns = columns;
    }

    /** An attribute of a guarded relation, or a chain of struct fields over one. */
    private boolean isColumn(Expression e) {
      if (!isFloating(e.dataType())) {
        return false;
      }
      while (e instanceof GetStructField) {
        e = ((GetStructField) e).child();
      }
      return e instanceof Attribute && columns.contains(((Attribute) e).exprId());
    }

    private static boolean comparesZero(Expression e) {
      if (e instanceof InSet) {
        for (Object v : Scala.set(((InSet) e).hset())) {
          if (isZero(v)) {
            return true;
          }
        }
        return false;
      }
      for (Expression child : Scala.list(e.children())) {
        if (child instanceof Literal && isZero(((Literal) child).value())) {
          return true;
        }
      }
      return false;
    }

    @Override
    public boolean isDefinedAt(Expression e) {
      if (!(e instanceof BinaryComparison || e instanceof In || e instanceof InSet)
          || !comparesZero(e)) {
        return false;
      }
      for (Expression child : Scala.list(e.children())) {
        if (isColumn(child)) {
          return true;
        }
      }
      return false;
    }

    @Override
    public <A1 extends Expression, B1> B1 applyOrElse(A1 e, scala.Function1<A1, B1> dflt) {
      if (!isDefinedAt(e)) {
        return dflt.apply(e);
      }
      List<Expression> children = new ArrayList<>();
      for (Expression child : Scala.list(e.children())) {
        children.add(isColumn(child) ? new NormalizeNaNAndZero(child) : child);
      }
      @SuppressWarnings("unchecked")
      B1 out = (B1) e.withNewChildren(Scala.seq(children));
      return out;
    }
  }
}
