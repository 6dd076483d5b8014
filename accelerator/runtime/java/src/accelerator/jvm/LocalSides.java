package accelerator.jvm;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Alias$;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Cast;
import org.apache.spark.sql.catalyst.expressions.ExprId;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.IsNotNull;
import org.apache.spark.sql.catalyst.expressions.Literal$;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.UnixMicros;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.optimizer.ConvertToLocalRelation$;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.Join;
import org.apache.spark.sql.catalyst.plans.logical.Limit$;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation$;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;


/**
 * Dynamic file pruning's other sides without a Spark job: the columns a side reads of a small
 * file relation, copied into driver memory once (one job), stand in for the relation as a
 * {@code LocalRelation} with the relation's own attributes. Spark's optimizer then filters and
 * projects those rows while it plans the side's keys query ({@code ConvertToLocalRelation}),
 * evaluating the side's own expressions, so collecting the keys starts no job; what it cannot
 * fold runs as a job over the copy, with the same answer.
 */
final class LocalSides {
  /** Spark's setting choosing compiled or interpreted expressions (internal, since 2.4). */
  private static final String CODEGEN_FACTORY_MODE = "spark.sql.codegen.factoryMode";
  private static final String EXCLUDED_RULES = "spark.sql.optimizer.excludedRules";
  /** The most nodes {@link #fold} folds one by one before it runs the whole optimizer. */
  private static final int MAX_FOLDS = 32;

  private LocalSides() {
  }

  /** Columns of a file relation copied into driver memory: its rows and their size. */
  public static final class Copy {
    private final scala.collection.Seq<InternalRow> rows;
    private final long bytes;
    private final int count;

    Copy(scala.collection.Seq<InternalRow> rows, long bytes, int count) {
      this.rows = rows;
      this.bytes = bytes;
      this.count = count;
    }

    /** The bytes the copied rows take (their UnsafeRow sizes). */
    public long bytes() {
      return bytes;
    }

    /** How many rows were copied. */
    public int count() {
      return count;
    }
  }

  /**
   * The names of the columns of {@code relation} (a leaf of {@code side}) that some node of
   * {@code side} references or {@code side} outputs, in the relation's order.
   */
  static String[] columnsRead(LogicalPlan side, LogicalPlan relation) {
    Set<ExprId> referenced = new HashSet<>();
    for (Attribute a : Scala.list(side.output())) {
      referenced.add(a.exprId());
    }
    references(side, referenced);
    List<String> names = new ArrayList<>();
    for (Attribute a : Scala.list(relation.output())) {
      if (referenced.contains(a.exprId())) {
        names.add(a.name());
      }
    }
    return names.toArray(new String[0]);
  }

  private static void references(LogicalPlan plan, Set<ExprId> out) {
    scala.collection.Iterator<Attribute> it = plan.references().iterator();
    while (it.hasNext()) {
      out.add(it.next().exprId());
    }
    scala.collection.Seq<LogicalPlan> children = plan.children();
    for (int i = 0; i < children.size(); i++) {
      references(children.apply(i), out);
    }
  }

  /** {@code relation} read for the columns {@code names} alone (a Project of its attributes). */
  static LogicalPlan columns(LogicalPlan relation, String[] names) {
    return new Project(Scala.seq(attributes(relation, names)), relation);
  }

  /**
   * Runs {@code plan} (the physical plan of {@link #columns}, limited to more rows than may be
   * kept) and keeps its rows, or null when there are more than {@code maxRows} or they take
   * more than {@code maxBytes}.
   */
  static Copy copy(SparkPlan plan, int maxRows, long maxBytes) {
    InternalRow[] rows = (InternalRow[]) plan.executeCollect();
    if (rows.length > maxRows) {
      return null;
    }
    long bytes = 0;
    List<InternalRow> kept = new ArrayList<>(rows.length);
    for (InternalRow row : rows) {
      bytes += row instanceof UnsafeRow ? ((UnsafeRow) row).getSizeInBytes() : 64;
      kept.add(row);
    }
    return bytes > maxBytes ? null : new Copy(Scala.seq(kept), bytes, rows.length);
  }

  /**
   * {@code side} with its file relation {@code relation} replaced by a LocalRelation over the
   * rows of {@code copy}, made by {@link #columns} with the same {@code names}: its output is
   * the relation's attributes of those names, so the plan above reads it unchanged.
   */
  static LogicalPlan localized(LogicalPlan side, LogicalPlan relation, String[] names,
      Copy copy) {
    LocalRelation empty = LocalRelation$.MODULE$.apply(Scala.seq(attributes(relation, names)));
    LogicalPlan local = (LogicalPlan) CaseClasses.copy(empty, 1, copy.rows);
    return (LogicalPlan) side.transformUp(new SameNode(relation, local));
  }

  /**
   * The keys query of a join's other side {@code side} (over copies, see {@link #localized}),
   * planned without a Spark job: the side's column {@code exprId} (through the cast of it to
   * {@code castType} that the condition of {@code join} holds, when not empty; as microseconds
   * since the epoch when {@code micros}), its non-null values, at most {@code limit} of them,
   * optimized by {@code session}. Their values as JSON (see {@link #values}) when the optimizer
   * folded the query into local rows, else null (the caller then runs the query).
   */
  static String keys(SparkSession session, LogicalPlan side, LogicalPlan join, long exprId,
      String castType, boolean micros, int limit) {
    Expression key = null;
    for (Attribute a : Scala.list(side.output())) {
      if (a.exprId().id() == exprId) {
        key = a;
      }
    }
    if (key != null && !castType.isEmpty()) {
      key = join instanceof Join && ((Join) join).condition().isDefined()
          ? castOf(((Join) join).condition().get(), exprId, castType) : null;
    }
    if (key == null) {
      return null;
    }
    if (micros) {
      key = new UnixMicros(key);
    }
    Alias k = new Alias(key, "k", Alias$.MODULE$.apply$default$3(key, "k"),
        Alias$.MODULE$.apply$default$4(key, "k"), Alias$.MODULE$.apply$default$5(key, "k"),
        Alias$.MODULE$.apply$default$6(key, "k"));
    List<NamedExpression> projection = new ArrayList<>();
    projection.add(k);
    LogicalPlan plan = new Filter(new IsNotNull(k.toAttribute()),
        new Project(Scala.seq(projection), side));
    plan = (LogicalPlan) (Object) Limit$.MODULE$.apply(Literal$.MODULE$.apply(limit), plan);
    return values(fold(session, plan));
  }

  /**
   * {@code plan} folded into local rows by Spark's {@code ConvertToLocalRelation} alone when a
   * chain of projections, filters and limits over a copy is all it holds (the usual side: a
   * filtered dimension), else by {@code session}'s whole optimizer; either way with expressions
   * interpreted. A side's filter has new literals each query, so compiling it (the default)
   * costs tens of milliseconds where interpreting it over a copy's rows costs a few, and a
   * hundred optimizer rules over a three-node plan cost more than the one that folds it. The
   * rows are the same: it is Spark's rule, and its interpreted evaluation, either way (not
   * run alone when {@code spark.sql.optimizer.excludedRules} names it).
   */
  static LogicalPlan fold(SparkSession session, LogicalPlan plan) {
    SQLConf conf = session.sessionState().conf().clone();
    conf.setConfString(CODEGEN_FACTORY_MODE, "NO_CODEGEN");
    return SQLConf.withExistingConf(conf, new scala.runtime.AbstractFunction0<LogicalPlan>() {
      @Override
      public LogicalPlan apply() {
        LogicalPlan folded = plan;
        int folds = excluded(conf, ConvertToLocalRelation$.MODULE$.ruleName()) ? 0 : MAX_FOLDS;
        for (int i = 0; i < folds && !(folded instanceof LocalRelation); i++) {
          LogicalPlan next = ConvertToLocalRelation$.MODULE$.apply(folded);
          if (next == folded) {
            break;
          }
          folded = next;
        }
        return folded instanceof LocalRelation ? folded
            : session.sessionState().optimizer().execute(plan);
      }
    });
  }

  /** Whether {@code spark.sql.optimizer.excludedRules} names {@code rule}. */
  private static boolean excluded(SQLConf conf, String rule) {
    for (String name : conf.getConfString(EXCLUDED_RULES, "").split(",")) {
      if (name.trim().equals(rule)) {
        return true;
      }
    }
    return false;
  }

  /** The cast of the attribute {@code exprId} to {@code type} (its type name) in {@code
   * expression}, or null. */
  private static Expression castOf(Expression expression, long exprId, String type) {
    if (expression instanceof Cast && ((Cast) expression).child() instanceof Attribute
        && ((Attribute) ((Cast) expression).child()).exprId().id() == exprId
        && expression.dataType().typeName().equals(type)) {
      return expression;
    }
    scala.collection.Seq<Expression> children = expression.children();
    for (int i = 0; i < children.size(); i++) {
      Expression found = castOf(children.apply(i), exprId, type);
      if (found != null) {
        return found;
      }
    }
    return null;
  }

  /**
   * The values of the one column of {@code plan} as a JSON array, when {@code plan} (an
   * optimized plan) is a LocalRelation: integers, dates (days since the epoch), timestamps
   * (microseconds), decimals (as strings), strings and booleans; null for any other plan or
   * type (the caller then runs it).
   */
  static String values(LogicalPlan plan) {
    if (!(plan instanceof LocalRelation) || plan.output().size() != 1) {
      return null;
    }
    DataType type = plan.output().apply(0).dataType();
    StringBuilder sb = new StringBuilder("[");
    boolean first = true;
    for (InternalRow row : Scala.list(((LocalRelation) plan).data())) {
      sb.append(first ? "" : ",");
      first = false;
      if (row.isNullAt(0)) {
        sb.append("null");
      } else if (type instanceof IntegerType || type instanceof DateType) {
        sb.append(row.getInt(0));
      } else if (type instanceof LongType || type instanceof TimestampType
          || type instanceof TimestampNTZType) {
        sb.append(row.getLong(0));
      } else if (type instanceof ShortType) {
        sb.append(row.getShort(0));
      } else if (type instanceof ByteType) {
        sb.append(row.getByte(0));
      } else if (type instanceof BooleanType) {
        sb.append(row.getBoolean(0));
      } else if (type instanceof DecimalType) {
        DecimalType d = (DecimalType) type;
        sb.append(Json.quote(row.getDecimal(0, d.precision(), d.scale()).toJavaBigDecimal()
            .toPlainString()));
      } else if (type instanceof StringType) {
        sb.append(Json.quote(row.getUTF8String(0).toString()));
      } else {
        return null;
      }
    }
    return sb.append(']').toString();
  }

  private static List<Attribute> attributes(LogicalPlan relation, String[] names) {
    List<Attribute> out = new ArrayList<>();
    for (String name : names) {
      Attribute found = null;
      for (Attribute a : Scala.list(relation.output())) {
        if (a.name().equals(name)) {
          found = a;
          break;
        }
      }
      if (found == null) {
        throw new IllegalArgumentException("the relation has no column " + name);
      }
      out.add(found);
    }
    return out;
  }
}
