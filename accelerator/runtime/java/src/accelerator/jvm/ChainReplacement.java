package accelerator.jvm;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GetStructField;
import org.apache.spark.sql.types.StructType;


/** Replaces struct-field chains by the index columns that hold them, in a plan's expressions. */
final class ChainReplacement
    extends scala.runtime.AbstractPartialFunction<Expression, Expression> {
  private final Map<String, Expression> chains;

  ChainReplacement(Map<String, Expression> chains) {
    this.chains = chains;
  }

  @Override
  public boolean isDefinedAt(Expression e) {
    String key = e instanceof GetStructField ? chainKey(e) : null;
    return key != null && chains.containsKey(key);
  }

  @Override
  public <A1 extends Expression, B1> B1 applyOrElse(A1 e, scala.Function1<A1, B1> dflt) {
    String key = e instanceof GetStructField ? chainKey(e) : null;
    Expression hit = key == null ? null : chains.get(key);
    @SuppressWarnings("unchecked")
    B1 out = hit != null ? (B1) hit : dflt.apply(e);
    return out;
  }

  /** Key of a struct-field chain over an attribute: exprId, then field names, \u0001-separated. */
  private static String chainKey(Expression e) {
    List<String> fields = new ArrayList<>();
    while (e instanceof GetStructField) {
      GetStructField g = (GetStructField) e;
      fields.add(0, ((StructType) g.child().dataType()).fields()[g.ordinal()].name());
      e = g.child();
    }
    if (fields.isEmpty() || !(e instanceof AttributeReference)) {
      return null;
    }
    return ((AttributeReference) e).exprId().id() + "\u0001" + String.join("\u0001", fields);
  }
}
