package accelerator.jvm;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.spark.Dependency;
import org.apache.spark.NarrowDependency;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.DynamicPruning;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.InSet;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.NamedExpression$;
import org.apache.spark.sql.catalyst.expressions.Or;
import org.apache.spark.sql.catalyst.expressions.PlanExpression;
import org.apache.spark.sql.catalyst.expressions.ShiftRight;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.Union;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.execution.FileSourceScanExec;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.FilePartition;
import org.apache.spark.sql.execution.datasources.FileScanRDD;
import org.apache.spark.sql.execution.datasources.FileStatusWithMetadata;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.PartitionDirectory;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.PartitioningAwareFileIndex;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;


/**
 * The JVM half of the cache tier: serving (a file relation read as the union of its uncached
 * files and the cache's Parquet copies of the others) and warming (which files a query reads,
 * and a DataFrame over some of them). Which files are served is decided in Python; one
 * instance holds that decision for a relation's files and is reused by every query over them.
 */
public final class CacheServing {
  /** Which source files the cache serves for one relation's files, with their entries' files:
   * built once per decision, reused by every query over those files. */
  public static final class CachedFiles {
    private final Map<String, FileStatus[]> cached = new HashMap<>();
    private final Map<String, Long> tags = new HashMap<>();
    /** By pack number, how many source files its warm-up wrote into it (0: not known). */
    private final Map<Long, Integer> packSizes = new HashMap<>();

    private CachedFiles(String lines) {
      Map<String, FileStatus> packFiles = new HashMap<>();   // one FileStatus per pack file
      for (String line : lines.split("\n")) {
        if (line.isEmpty()) {
          continue;
        }
        String[] parts = line.split("\t", -1);
        FileStatus[] files = new FileStatus[(parts.length - 3) / 2];
        for (int i = 0; i < files.length; i++) {
          String path = parts[3 + 2 * i];
          long size = Long.parseLong(parts[4 + 2 * i]);
          files[i] = packFiles.computeIfAbsent(path,
              p -> new FileStatus(size, false, 1, 128L << 20, 0L, new Path(p)));
        }
        cached.put(parts[0], files);
        long tag = Long.parseLong(parts[1]);
        tags.put(parts[0], tag);
        packSizes.put(tag >> PACK_SHIFT, Integer.parseInt(parts[2]));
      }
    }

    /** The served files of each of the last few listings of a relation's files (by the
     * identity of their paths, which listings of the same files share). */
    private final Map<String[], Served> byListing =
        new java.util.LinkedHashMap<String[], Served>(4, 0.75f, true) {
          @Override
          protected boolean removeEldestEntry(Map.Entry<String[], Served> eldest) {
            return size() > LISTINGS_KEPT;
          }
        };

    /**
     * The files of {@code listing} served (of {@code index}'s files, when the relation's index
     * does not list them), found once per listing: a query over the same files planned again
     * looks up nothing per file.
     */
    private Served served(Listing listing, CachedFileIndex index) {
      if (listing == null) {
        return new Served(index.servedPaths(), false);
      }
      synchronized (byListing) {
        Served found = byListing.get(listing.paths);
        if (found != null) {
          return found;
        }
      }
      List<String> paths = new ArrayList<>();
      for (String path : listing.paths) {
        if (cached.containsKey(path)) {
          paths.add(path);
        }
      }
      Served found = new Served(paths, paths.size() == listing.paths.length);
      synchronized (byListing) {
        byListing.put(listing.paths, found);
      }
      return found;
    }

    /**
     * Which rows of the packs holding some served files belong to them: the rows of every
     * pack all of whose files are served (by its number, the high half of their tags: no list
     * of tags), and in the other packs the rows of the served files' tags. The served files'
     * tags of one pack number are one pack's: the Python side never serves two packs of one
     * number together.
     */
    private final class Served {
      private final scala.collection.immutable.Set<Object> wholePacks;
      private final scala.collection.immutable.Set<Object> tagsInPart;
      /** Whether every file of the relation is served. */
      private final boolean all;

      private Served(List<String> served, boolean all) {
        Map<Long, Set<Long>> byPack = new HashMap<>();
        for (String path : served) {
          long tag = tags.get(path);
          byPack.computeIfAbsent(tag >> PACK_SHIFT, n -> new HashSet<>()).add(tag);
        }
        List<Object> whole = new ArrayList<>();
        List<Object> partial = new ArrayList<>();
        for (Map.Entry<Long, Set<Long>> pack : byPack.entrySet()) {
          if (pack.getValue().size() == packSizes.get(pack.getKey())) {
            whole.add(pack.getKey());
          } else {
            partial.addAll(pack.getValue());
          }
        }
        wholePacks = Scala.seq(whole).toSet();
        tagsInPart = Scala.seq(partial).toSet();
        this.all = all;
      }

      /** The condition on a relation's {@link #FILE_ID} {@code fileId} keeping these rows. */
      private Expression rows(AttributeReference fileId) {
        Expression inWhole = new InSet(new ShiftRight(fileId, Literal.create(PACK_SHIFT,
            DataTypes.IntegerType)), wholePacks);
        Expression inPart = new InSet(fileId, tagsInPart);
        if (tagsInPart.isEmpty()) {
          return inWhole;
        }
        return wholePacks.isEmpty() ? inPart : new Or(inWhole, inPart);
      }
    }
  }

  /** How many listings' served files a {@link CachedFiles} remembers. */
  private static final int LISTINGS_KEPT = 4;

  /** The bits of a tag below its pack's number (see accelerator.cache.serving). */
  private static final int PACK_SHIFT = 32;

  /** The hidden column of the cache's packs: which source file each row comes from. */
  public static final String FILE_ID = "__accelerator_file";

  /**
   * {@code lines}: one line per cached source file, tab-separated: the source file's path (as
   * {@code FileStatus.getPath().toString()}), its rows' value of {@link #FILE_ID} in its pack,
   * how many source files its pack holds (0 when not known), then pairs of a pack file's path
   * and size (the pack files holding its rows).
   */
  public CachedFiles files(String lines) {
    return new CachedFiles(lines);
  }

  /**
   * The plan with its {@code ordinal}-th file relation read as the union of the relation
   * without the {@code files} the cache serves and a Parquet relation over the packs holding
   * them, filtered to their rows by {@link #FILE_ID} (a pack may hold rows of files not served:
   * changed, evicted, pruned by an index, or never read by this relation; a relation reading
   * only packs all of whose files it serves reads them without that column), both projected
   * to the data columns {@code requiredLines} names (newline-separated) and the partition
   * columns, under the original attribute ids; a Filter right above the relation is applied to
   * both branches. When every file of the relation is cached, the Parquet relation alone. Null when the relation cannot be served this way (it is bucketed, exposes
   * metadata columns, or has partition columns among its data columns).
   */
  public LogicalPlan swap(LogicalPlan plan, int ordinal, CachedFiles files,
      String requiredLines) {
    Map<String, FileStatus[]> cached = files.cached;
    LogicalRelation rel = (LogicalRelation) PlanTree.fileRelations(plan).get(ordinal);
    HadoopFsRelation fs = (HadoopFsRelation) rel.relation();
    StructType data = fs.dataSchema();
    StructType partitions = fs.partitionSchema();
    scala.collection.Seq<AttributeReference> out = rel.output();
    if (fs.bucketSpec().isDefined() || out.size() != data.size() + partitions.size()) {
      return null;
    }
    for (String name : partitions.fieldNames()) {
      if (Arrays.asList(data.fieldNames()).contains(name)) {
        return null;
      }
    }
    Set<String> required = new HashSet<>(Arrays.asList(requiredLines.split("\n")));
    Set<Long> used = new HashSet<>();
    referenced(plan, used);
    scala.collection.Seq<Attribute> output = plan.output();
    for (int i = 0; i < output.size(); i++) {
      used.add(output.apply(i).exprId().id());
    }
    for (int i = 0; i < data.size(); i++) {
      if (used.contains(out.apply(i).exprId().id())
          && !required.contains(data.fields()[i].name())) {
        return null;   // a column the decision did not count on: keep the original plan
      }
    }
    List<AttributeReference> kept = new ArrayList<>();
    List<StructField> keptFields = new ArrayList<>();
    for (int i = 0; i < out.size(); i++) {
      if (i >= data.size() || required.contains(data.fields()[i].name())) {
        kept.add(out.apply(i));
        if (i < data.size()) {
          keptFields.add(data.fields()[i]);
        }
      }
    }
    SparkSession session = fs.sparkSession();
    Listing listing = listingOf(fs.location());
    Map<FileStatus, String> paths = pathsOf(listing);
    PrunedFileIndex restIndex = new PrunedFileIndex(fs.location(), cached.keySet(), false, paths);
    Object rest = CaseClasses.copy(fs, 0, restIndex, session);
    CachedFileIndex cachedIndex = new CachedFileIndex(fs.location(), cached, paths);
    CachedFiles.Served served = files.served(listing, cachedIndex);
    // every pack read holds only served rows: read without the tag column, nothing to filter
    boolean whole = served.tagsInPart.isEmpty() && !keptFields.isEmpty();
    Object cache = CaseClasses.copy(fs, 0, cachedIndex, session);
    if (!whole) {
      keptFields.add(new StructField(FILE_ID, DataTypes.LongType, true, Metadata.empty()));
    }
    cache = CaseClasses.copy(cache, 2, new StructType(keptFields.toArray(new StructField[0])),
        session);
    cache = CaseClasses.copy(cache, 4, new ParquetFileFormat(), session);
    cache = CaseClasses.copy(cache, 5, scala.collection.immutable.Map$.MODULE$.empty(),
        session);
    List<AttributeReference> read = new ArrayList<>(kept);
    AttributeReference fileId = new AttributeReference(FILE_ID, DataTypes.LongType, true,
        Metadata.empty(), NamedExpression$.MODULE$.newExprId(), Scala.seq(List.<String>of()));
    if (!whole) {
      read.add(keptFields.size() - 1, fileId);   // after the data columns, before partitions
    }
    LogicalPlan cacheRel = (LogicalPlan) CaseClasses.copy(CaseClasses.copy(rel, 0, cache), 1,
        Scala.seq(read));
    if (!whole) {
      cacheRel = new Project(Scala.seq(new ArrayList<NamedExpression>(kept)),
          new Filter(served.rows(fileId), cacheRel));
    }
    LogicalPlan restRel = (LogicalPlan) CaseClasses.copy(rel, 0, rest);
    if (kept.size() < out.size()) {
      restRel = new Project(Scala.seq(new ArrayList<NamedExpression>(kept)), restRel);
    }
    if (served.all) {   // every file is cached: no union needed
      return (LogicalPlan) plan.transformUp(new SameNode(rel, cacheRel));
    }
    LogicalPlan parent = PlanTree.parentOf(plan, rel);
    LogicalPlan anchor = parent instanceof Filter ? parent : rel;
    List<LogicalPlan> branches = new ArrayList<>();
    for (LogicalPlan branch : new LogicalPlan[] {restRel, cacheRel}) {
      branches.add(anchor == rel ? branch : new Filter(((Filter) anchor).condition(), branch));
    }
    LogicalPlan union = new Union(Scala.seq(branches), false, false);
    return (LogicalPlan) plan.transformUp(new SameNode(anchor, union));
  }

  /** The ids of the attributes the plan's nodes refer to. */
  private static void referenced(LogicalPlan plan, Set<Long> out) {
    scala.collection.Iterator<Attribute> refs = plan.references().iterator();
    while (refs.hasNext()) {
      out.add(refs.next().exprId().id());
    }
    scala.collection.Seq<LogicalPlan> children = plan.children();
    for (int i = 0; i < children.size(); i++) {
      if (!(children.apply(i) instanceof LogicalRelation)) {
        referenced(children.apply(i), out);
      }
    }
  }

  /** The listing the payload's fingerprint already made of a file index's files, on which the
   * decision to serve rests (null for an index that does not list them). */
  private static Listing listingOf(FileIndex location) {
    if (!(location instanceof PartitioningAwareFileIndex)) {
      return null;
    }
    Listing described = Listings.latest(location);
    return described != null ? described
        : Listings.of(location, ((PartitioningAwareFileIndex) location).allFiles());
  }

  /**
   * The source files' paths for the two file indexes of one swap, filled from {@code listing}
   * (or left to fill, when null), so a fresh DataFrame over thousands of files turns each path
   * into a string once per query, not three times.
   */
  private static Map<FileStatus, String> pathsOf(Listing listing) {
    Map<FileStatus, String> paths = java.util.Collections.synchronizedMap(
        new java.util.IdentityHashMap<>(listing == null ? 32 : listing.statuses.length));
    if (listing != null) {
      for (int i = 0; i < listing.statuses.length; i++) {
        paths.put(listing.statuses[i], listing.paths[i]);
      }
    }
    return paths;
  }

  // --- warming --------------------------------------------------------------------------

  /** The file scans of a physical plan (before adaptive execution), in plan order. */
  public FileSourceScanExec[] scans(SparkPlan plan) {
    List<FileSourceScanExec> out = new ArrayList<>();
    scala.collection.Seq<SparkPlan> leaves = plan.collectLeaves();
    for (int i = 0; i < leaves.size(); i++) {
      if (leaves.apply(i) instanceof FileSourceScanExec) {
        out.add((FileSourceScanExec) leaves.apply(i));
      }
    }
    return out.toArray(new FileSourceScanExec[0]);
  }

  /**
   * A scan as JSON: its relation (as {@link RelationDescriptions#describe} describes one), the data
   * columns it reads ({@code required}) and the files it reads after partition pruning and
   * any data-skipping index ({@code files}: [path, size, mtime, the name
   * {@code input_file_name()} gives its rows]).
   */
  public String describeScan(FileSourceScanExec scan) {
    HadoopFsRelation fs = scan.relation();
    List<Expression> filters = new ArrayList<>();
    scala.collection.Seq<Expression> all = scan.partitionFilters();
    for (int i = 0; i < all.size(); i++) {
      if (!runtimeOnly(all.apply(i))) {
        filters.add(all.apply(i));
      }
    }
    scala.collection.Seq<PartitionDirectory> dirs =
        fs.location().listFiles(Scala.seq(filters), Scala.seq(List.<Expression>of()));
    StringBuilder files = new StringBuilder("[");
    for (PartitionDirectory dir : Scala.list(dirs)) {
      for (FileStatusWithMetadata listed : Scala.list(dir.files())) {
        FileStatus f = listed.fileStatus();
        files.append(files.length() > 1 ? "," : "").append('[')
            .append(Json.quote(f.getPath().toString())).append(',').append(f.getLen())
            .append(',').append(f.getModificationTime()).append(',')
            .append(Json.quote(f.getPath().toUri().toString())).append(']');
      }
    }
    StringBuilder required = new StringBuilder("[");
    for (String name : scan.requiredSchema().fieldNames()) {
      required.append(required.length() > 1 ? "," : "").append(Json.quote(name));
    }
    String relation = RelationDescriptions.describeFs(fs, 0);
    return relation.substring(0, relation.length() - 1) + ",\"required\":" + required
        + "],\"files\":" + files + "]}";
  }

  private static boolean runtimeOnly(Expression e) {
    if (e instanceof DynamicPruning || e instanceof PlanExpression) {
      return true;
    }
    scala.collection.Seq<Expression> children = e.children();
    for (int i = 0; i < children.size(); i++) {
      if (runtimeOnly(children.apply(i))) {
        return true;
      }
    }
    return false;
  }

  /** A DataFrame reading the scan's relation exactly as the query does, over {@code fileLines}
   * (newline-separated paths, as {@link #describeScan} lists them) only. */
  public Dataset<Row> read(FileSourceScanExec scan, String fileLines) {
    HadoopFsRelation fs = scan.relation();
    Set<String> files = new HashSet<>(Arrays.asList(fileLines.split("\n")));
    Object only = CaseClasses.copy(fs, 0, new PrunedFileIndex(fs.location(), files),
        fs.sparkSession());
    @SuppressWarnings("unchecked")
    Dataset<Row> out = (Dataset<Row>) fs.sparkSession().baseRelationToDataFrame(
        (HadoopFsRelation) only);
    return out;
  }

  /**
   * The files each partition of {@code rdd} reads, as JSON: one list per partition, in order, of
   * the names {@code input_file_name()} gives their rows; null when a partition depends on
   * anything but file scans through narrow dependencies (its files then unknown). A partition's
   * rows come from the files named for it only (a file named may give it none).
   */
  public String partitionFiles(RDD<?> rdd) {
    StringBuilder out = new StringBuilder("[");
    int partitions = rdd.partitions().length;
    for (int i = 0; i < partitions; i++) {
      Set<String> names = new LinkedHashSet<>();
      if (!readFiles(rdd, i, names)) {
        return null;
      }
      StringBuilder list = new StringBuilder("[");
      for (String name : names) {
        list.append(list.length() > 1 ? "," : "").append(Json.quote(name));
      }
      out.append(i > 0 ? "," : "").append(list).append(']');
    }
    return out.append(']').toString();
  }

  private static boolean readFiles(RDD<?> rdd, int partition, Set<String> names) {
    if (rdd instanceof FileScanRDD) {
      for (PartitionedFile f : ((FilePartition) rdd.partitions()[partition]).files()) {
        names.add(f.urlEncodedPath());
      }
      return true;
    }
    List<Dependency<?>> deps = Scala.list(rdd.dependencies());
    if (deps.isEmpty()) {
      return false;   // rows from another source than files
    }
    for (Dependency<?> dep : deps) {
      if (!(dep instanceof NarrowDependency)) {
        return false;   // a shuffle: any partition's rows may come from any file
      }
      scala.collection.Seq<Object> parents = ((NarrowDependency<?>) dep).getParents(partition);
      for (int j = 0; j < parents.size(); j++) {
        if (!readFiles(dep.rdd(), (Integer) parents.apply(j), names)) {
          return false;
        }
      }
    }
    return true;
  }

}
