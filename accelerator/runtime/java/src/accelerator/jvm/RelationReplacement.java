package accelerator.jvm;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.catalyst.catalog.BucketSpec;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GetStructField;
import org.apache.spark.sql.catalyst.expressions.In;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.Not;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.RepartitionByExpression$;
import org.apache.spark.sql.catalyst.plans.logical.Union;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.types.StructType;


/**
 * Swaps a file relation of a plan for an index relation: flattened index columns stand for
 * the struct-field chains they hold everywhere in the plan, and a hybrid scan adds the source
 * files the index misses (and its delta files) as union branches.
 */
final class RelationReplacement {
  private RelationReplacement() {
  }

  /**
   * Replaces the file relation {@code original} of {@code plan} by a fresh instance of
   * {@code indexRelation}. {@code specs[i]} says what the i-th index column stands for:
   * {@code "=<exprId>"} keeps the identity of the original attribute with that id,
   * {@code "~<exprId>\u0001<field>\u0001<field>..."} replaces that struct-field chain of the
   * original attribute, wherever it occurs in the plan, by the index column, and {@code "#"}
   * marks the lineage column (the id of each row's source file). With {@code restoreOrder}, a
   * Project on top gives the original relation's output, in its order. The specs come
   * newline-separated in one string (one py4j argument).
   *
   * <p>Hybrid scan: {@code excludedIdLines} (newline-separated lineage ids, or empty) are source
   * files deleted or modified since the index was built, whose rows a Filter over the index
   * drops. {@code appendedLines} (newline-separated paths, or empty) are source files the index
   * does not hold: the Filter right above the replacement (or the replacement itself when no
   * Filter is) becomes the union of itself and the same plan over those files alone, projected
   * to the index's columns under the same attribute ids. With {@code bucketUnion}, that second
   * branch is hash-partitioned on the index's bucket columns into its buckets and the union is a
   * {@link BucketUnion}, which keeps the index scan's partitioning, so a join over it needs no
   * shuffle of this side (Spark's own Union does not keep a bucketed scan's partitioning).
   *
   * <p>{@code deltaRelation} (or null) reads the index's delta files (rows an incremental
   * refresh added, in any bucket) with the index's schema: it joins the union as a third
   * branch, treated like the index scan (same attributes, same lineage filter), under the same
   * Filter and, with {@code bucketUnion}, hash-partitioned into the buckets.
   *
   * <p>{@code lookupBuckets} above 0 is the bucket count of an index read as plain files whose
   * first column (an original attribute) the Filters above the relation pin to literals: the
   * replacement reads only the files of their buckets (see {@link BucketLookup}).
   */
  static LogicalPlan replace(LogicalPlan plan, LogicalPlan original, LogicalPlan indexRelation,
      String specLines, boolean restoreOrder, String appendedLines, String excludedIdLines,
      LogicalPlan deltaRelation, boolean bucketUnion, int lookupBuckets) {
    String[] specs = specLines.split("\n", -1);
    Map<Long, Attribute> originalById = new HashMap<>();
    scala.collection.Seq<Attribute> origOut = original.output();
    for (int i = 0; i < origOut.size(); i++) {
      originalById.put(origOut.apply(i).exprId().id(), origOut.apply(i));
    }
    LogicalRelation fresh = ((LogicalRelation) indexRelation).newInstance();
    scala.collection.Seq<AttributeReference> freshOut = fresh.output();
    if (freshOut.size() != specs.length) {
      throw new IllegalArgumentException("expected " + freshOut.size() + " column specs");
    }
    List<AttributeReference> output = new ArrayList<>();
    Map<String, Expression> chains = new HashMap<>();
    AttributeReference lineage = null;
    for (int i = 0; i < specs.length; i++) {
      AttributeReference attr = freshOut.apply(i);
      String spec = specs[i];
      if (spec.startsWith("=")) {
        Attribute orig = originalById.get(Long.parseLong(spec.substring(1)));
        if (orig == null) {
          throw new IllegalArgumentException("no original attribute for " + spec);
        }
        attr = (AttributeReference) attr.withName(orig.name()).withQualifier(orig.qualifier())
            .withExprId(orig.exprId());
      } else if (spec.startsWith("~")) {
        chains.put(spec.substring(1), attr);
      } else if (spec.equals("#")) {
        lineage = attr;
      } else if (!spec.isEmpty()) {
        throw new IllegalArgumentException("bad column spec " + spec);
      }
      output.add(attr);
    }
    if (lookupBuckets > 0 && specs[0].startsWith("=")) {
      Set<Integer> buckets = BucketLookup.buckets(filtersAbove(plan, original),
          originalById.get(Long.parseLong(specs[0].substring(1))), lookupBuckets);
      if (buckets != null) {
        fresh = (LogicalRelation) BucketLookup.only(fresh, buckets);
      }
    }
    Expression excluded = null;
    if (!excludedIdLines.isEmpty()) {
      if (lineage == null) {
        throw new IllegalArgumentException("excluding files needs the lineage column");
      }
      List<Expression> ids = new ArrayList<>();
      for (String id : excludedIdLines.split("\n")) {
        ids.add(Literal.create(Long.parseLong(id), lineage.dataType()));
      }
      excluded = new Not(new In(lineage, Scala.seq(ids)));
    }
    LogicalPlan replacement = indexBranch(fresh, output, excluded, restoreOrder, origOut);
    LogicalPlan swapped = (LogicalPlan) plan.transformUp(new SameNode(original, replacement));
    if (!chains.isEmpty()) {
      swapped = (LogicalPlan) swapped.transformAllExpressions(new ChainReplacement(chains));
    }
    List<LogicalPlan> extra = new ArrayList<>();
    if (!appendedLines.isEmpty()) {
      LogicalPlan appended = appendedPart((LogicalRelation) original, Lines.nonEmpty(appendedLines),
          specs, originalById, output);
      extra.add(restoreOrder ? restored(origOut, appended) : appended);
    }
    if (deltaRelation != null) {
      extra.add(indexBranch(((LogicalRelation) deltaRelation).newInstance(), output, excluded,
          restoreOrder, origOut));
    }
    if (extra.isEmpty()) {
      return swapped;
    }
    LogicalPlan filter = PlanTree.parentOf(swapped, replacement);
    LogicalPlan anchor = filter instanceof Filter ? filter : replacement;
    List<LogicalPlan> branches = new ArrayList<>();
    branches.add(anchor);
    for (LogicalPlan branch : extra) {
      if (anchor != replacement) {
        branch = filter.withNewChildren(
            Scala.seq(Arrays.asList(branch)));
      }
      if (bucketUnion) {
        branch = bucketed(branch, (LogicalRelation) indexRelation, freshOut, output);
      }
      branches.add(branch);
    }
    LogicalPlan union = bucketUnion ? new BucketUnion(branches)
        : new Union(Scala.seq(branches), false, false);
    return (LogicalPlan) swapped.transformUp(new SameNode(anchor, union));
  }

  /**
   * {@code relation} (a fresh instance of an index relation) with the attributes {@code output}
   * (positionally), without the rows {@code excluded} (or null) rejects, and with
   * {@code restoreOrder}, under a Project giving {@code origOut}.
   */
  private static LogicalPlan indexBranch(LogicalRelation relation,
      List<AttributeReference> output, Expression excluded, boolean restoreOrder,
      scala.collection.Seq<Attribute> origOut) {
    LogicalPlan branch = withOutput(relation, output);
    if (excluded != null) {
      branch = new Filter(excluded, branch);
    }
    return restoreOrder ? restored(origOut, branch) : branch;
  }

  /**
   * {@code plan} hash-partitioned like the buckets of {@code indexRelation}: on the attributes
   * that stand for its bucket columns, into as many partitions as it has buckets (Spark's
   * bucket id is the partition id of that hash partitioning).
   */
  private static LogicalPlan bucketed(LogicalPlan plan, LogicalRelation indexRelation,
      scala.collection.Seq<AttributeReference> freshOut, List<AttributeReference> output) {
    BucketSpec spec = ((HadoopFsRelation) indexRelation.relation()).bucketSpec().get();
    List<Expression> keys = new ArrayList<>();
    scala.collection.Seq<String> columns = spec.bucketColumnNames();
    for (int c = 0; c < columns.size(); c++) {
      for (int i = 0; i < freshOut.size(); i++) {
        if (freshOut.apply(i).name().equals(columns.apply(c))) {
          keys.add(output.get(i));
        }
      }
    }
    return RepartitionByExpression$.MODULE$.apply(
        Scala.seq(keys), plan, spec.numBuckets());
  }

  /** A Project giving {@code columns} (the original relation's output) over {@code child}. */
  private static LogicalPlan restored(scala.collection.Seq<Attribute> columns, LogicalPlan child) {
    List<NamedExpression> projection = new ArrayList<>();
    for (int i = 0; i < columns.size(); i++) {
      projection.add(columns.apply(i));
    }
    return new Project(Scala.seq(projection), child);
  }

  /**
   * The source relation reading only {@code files}, projected to the index's columns: a column
   * kept by identity is the source attribute itself; a nested field is its struct-field chain
   * under the index column's name and attribute id; the lineage column is null.
   */
  private static LogicalPlan appendedPart(LogicalRelation rel, java.util.Set<String> files,
      String[] specs, Map<Long, Attribute> originalById, List<AttributeReference> indexOutput) {
    HadoopFsRelation fs = (HadoopFsRelation) rel.relation();
    PrunedFileIndex only = new PrunedFileIndex(fs.location(), files);
    LogicalPlan scan = (LogicalPlan) CaseClasses.copy(rel, 0,
        CaseClasses.copy(fs, 0, only, fs.sparkSession()));
    List<NamedExpression> columns = new ArrayList<>();
    var none = Scala.seq(List.<String>of());
    for (int i = 0; i < specs.length; i++) {
      if (specs[i].startsWith("=")) {
        columns.add(originalById.get(Long.parseLong(specs[i].substring(1))));
        continue;
      }
      AttributeReference target = indexOutput.get(i);
      Expression e;
      if (specs[i].equals("#")) {
        e = Literal.create(null, target.dataType());
      } else {
        String[] parts = specs[i].substring(1).split("\u0001", -1);
        e = originalById.get(Long.parseLong(parts[0]));
        for (int j = 1; j < parts.length; j++) {
          StructType st = (StructType) e.dataType();
          e = new GetStructField(e, st.fieldIndex(parts[j]), scala.Option.apply(parts[j]));
        }
      }
      columns.add(new Alias(e, target.name(), target.exprId(), none, scala.Option.empty(), none));
    }
    return new Project(Scala.seq(columns), scan);
  }

  /** The Filters right above {@code relation} in {@code plan}, nearest first. */
  private static List<Filter> filtersAbove(LogicalPlan plan, LogicalPlan relation) {
    List<Filter> out = new ArrayList<>();
    for (LogicalPlan node = PlanTree.parentOf(plan, relation); node instanceof Filter;
         node = PlanTree.parentOf(plan, node)) {
      out.add((Filter) node);
    }
    return out;
  }

  /** Copies a LogicalRelation with another output, by field name (its arity varies by version). */
  private static LogicalPlan withOutput(LogicalRelation rel, List<AttributeReference> output) {
    return (LogicalPlan) CaseClasses.copy(rel, 1, Scala.seq(output));
  }
}
