package accelerator.jvm;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.SparkSession;
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
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.types.StructType;


/**
 * The few plan operations the Python rewriter cannot do cheaply through py4j: find file
 * relations, describe their files in one answer, and swap one relation for an index relation
 * while replacing struct-field chains by flattened index columns everywhere in the plan.
 */
public final class PlanRewrite {
  /**
   * Publishes the root paths some index or the cache is over, those some data-skipping index
   * is over, and what a plan over each must hold for an index to serve it (see {@link
   * IndexedRoots#publish}): relations reading the first get their file fingerprint in the
   * payload, so deciding on an index needs no extra call while the files are those the index
   * knows; plans reading the second get their IN lists spelled out; a plan that holds nothing
   * an index needs is not handed to the rewriter.
   */
  public void setIndexedRoots(String lines, String skippingLines, String useLines) {
    IndexedRoots.publish(lines, skippingLines, useLines);
  }

  /** Forgets which settings the rewriter answered plans under, so that the next plan of every
   * session goes to it (after this process changed indexes or the cache). */
  public void forgetAnswers() {
    DeferredPlans.forget();
  }

  /** At most {@code max} payloads of plans queued for the query history (see
   * {@link DeferredPlans}), oldest first. */
  public String[] drainDeferred(int max) {
    return DeferredPlans.drain(max);
  }

  /** How many plans the query history lost since the last call (the queue was full). */
  public long takeDroppedDeferred() {
    return DeferredPlans.takeDropped();
  }

  /** The current values of the settings that change what Spark reads from files, as JSON (see
   * {@link PlanPayload#readSettings}). */
  public String currentReadSettings(SparkSession session) {
    return PlanPayload.readSettings(session);
  }

  /** The file relations of the plan, in pre-order (the order of {@code plan.toJSON()}). */
  public LogicalPlan[] fileRelations(LogicalPlan plan) {
    return PlanTree.fileRelations(plan).toArray(new LogicalPlan[0]);
  }

  /**
   * Describes the {@code ordinal}-th file relation of the plan as JSON, with its files'
   * fingerprint and the files themselves as {@code detail} asks (see {@link
   * RelationDescriptions#describe}).
   */
  public String describe(LogicalPlan plan, int ordinal, int detail) {
    return RelationDescriptions.describe(PlanTree.fileRelations(plan).get(ordinal), detail);
  }

  /**
   * Replaces the {@code ordinal}-th file relation of {@code plan} by a fresh instance of
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
  public LogicalPlan replaceRelation(LogicalPlan plan, int ordinal, LogicalPlan indexRelation,
      String specLines, boolean restoreOrder, String appendedLines, String excludedIdLines,
      LogicalPlan deltaRelation, boolean bucketUnion, int lookupBuckets) {
    String[] specs = specLines.split("\n", -1);
    LogicalPlan original = fileRelations(plan)[ordinal];
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

  /**
   * Adds the accelerator's planner strategies to the session: {@link BucketUnion} (where Spark
   * can run it, 4.1 and later; elsewhere hybrid scans under the join rule use Spark's Union)
   * and the sorted bucketed scans of index relations ({@link SortedBucketScanExec}).
   */
  public void installStrategies(SparkSession session) {
    if (BucketUnionExec.supported()) {
      Strategies.install(session, new BucketUnion.Strategy());
    }
    Strategies.install(session, new SortedBucketScanExec.Strategy());
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

  /**
   * Keeps only the files {@code keptLines} lists (newline-separated paths as the relation lists
   * them) in the {@code ordinal}-th file relation of {@code plan}: the relation and its output
   * stay the same, its file index lists fewer files.
   */
  public LogicalPlan pruneFiles(LogicalPlan plan, int ordinal, String keptLines,
      String rowGroupLines) {
    LogicalRelation rel = (LogicalRelation) fileRelations(plan)[ordinal];
    HadoopFsRelation fs = (HadoopFsRelation) rel.relation();
    PrunedFileIndex pruned = new PrunedFileIndex(fs.location(), Lines.nonEmpty(keptLines));
    Object relation = CaseClasses.copy(fs, 0, pruned, fs.sparkSession());
    if (!rowGroupLines.isEmpty() && selectsRowGroups(rel)) {
      relation = CaseClasses.copy(relation, 4, new RowGroupParquetFormat(rowGroupLines),
          fs.sparkSession());
    }
    LogicalPlan replacement = (LogicalPlan) CaseClasses.copy(rel, 0, relation);
    return (LogicalPlan) plan.transformUp(new SameNode(rel, replacement));
  }

  /**
   * Whether the relation's row groups may be selected: it is read by Spark's own Parquet format
   * and reads no {@code _metadata} column (whose file block start and length are the split's).
   */
  private static boolean selectsRowGroups(LogicalRelation rel) {
    if (((HadoopFsRelation) rel.relation()).fileFormat().getClass() != ParquetFileFormat.class) {
      return false;
    }
    scala.collection.Seq<AttributeReference> out = rel.output();
    for (int i = 0; i < out.size(); i++) {
      if (out.apply(i).name().equalsIgnoreCase("_metadata")) {
        return false;
      }
    }
    return true;
  }

  /** Key of a struct-field chain over an attribute: exprId, then field names, \u0001-separated. */
  static String chainKey(Expression e) {
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

  /**
   * The same file relation, declared bucketed by {@code columns} (and sorted by them) into
   * {@code numBuckets} buckets, so Spark prunes buckets on equality filters and joins two such
   * relations without a shuffle. Its files must carry their bucket id in their names. With
   * {@code sortedScan}, they must also be sorted by {@code columns}: the relation is marked for
   * {@link SortedBucketScanExec}, which keeps its scan bucketed and reports that order when
   * each bucket is one file; a {@code coalescedBuckets} count below {@code numBuckets} (one of
   * its divisors) makes that scan read the buckets in that many groups instead (bucket b in
   * group b mod the count), unsorted.
   */
  public LogicalPlan withBucketSpec(LogicalPlan relation, int numBuckets, String columnLines,
                                    boolean sortedScan, int coalescedBuckets) {
    String[] columns = columnLines.split("\n", -1);
    LogicalRelation rel = (LogicalRelation) relation;
    HadoopFsRelation fs = (HadoopFsRelation) rel.relation();
    var cols = Scala.seq(Arrays.asList(columns));
    BucketSpec spec = new BucketSpec(numBuckets, cols, cols);
    HadoopFsRelation bucketed = (HadoopFsRelation) CaseClasses.copy(
        fs, 3, scala.Option.apply(spec), fs.sparkSession());
    if (!sortedScan) {
      return (LogicalPlan) CaseClasses.copy(rel, 0, bucketed);
    }
    scala.collection.immutable.Map<String, String> options =
        bucketed.options().updated(SortedBucketScanExec.MARKER, "true");
    if (coalescedBuckets > 0 && coalescedBuckets < numBuckets) {
      options = options.updated(SortedBucketScanExec.COALESCED, Integer.toString(coalescedBuckets));
    }
    Object marked = CaseClasses.copy(bucketed, 5, options, fs.sparkSession());
    return (LogicalPlan) CaseClasses.copy(rel, 0, marked);
  }

  /** Copies a LogicalRelation with another output, by field name (its arity varies by version). */
  private static LogicalPlan withOutput(LogicalRelation rel, List<AttributeReference> output) {
    return (LogicalPlan) CaseClasses.copy(rel, 1, Scala.seq(output));
  }

  /** Replaces struct-field chains by the index columns that hold them. */
  private static final class ChainReplacement
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
  }
}
