package accelerator.jvm;

import java.util.Collections;
import java.util.List;
import java.util.Map;

import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.datasources.CatalogFileIndex;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.PartitioningAwareFileIndex;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;


/**
 * Describes file relations as JSON for the Python rewriter: what they read (format, table or
 * glob pattern, root paths, partition columns, options, data schema) and, when asked, the
 * fingerprint of their files and the files themselves.
 */
final class RelationDescriptions {
  /** Quoted JSON of the data schemas described lately (equal schemas render alike): rendering
   * one costs more than the rest of a relation's description. */
  private static final Map<StructType, String> SCHEMA_JSON = Collections.synchronizedMap(
      new java.util.LinkedHashMap<StructType, String>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<StructType, String> eldest) {
          return size() > 64;
        }
      });

  private static final String GLOB_CHARS = "{}[]*?\\";

  private RelationDescriptions() {
  }

  /**
   * Describes a file relation as JSON: format, root paths, partition columns, options, a
   * fingerprint of its files (see {@link FileHashes}) and the files themselves, as
   * {@code detail} asks: 0 neither, 1 the fingerprint, 2 both (one py4j answer instead of
   * thousands of calls).
   */
  static String describe(LogicalPlan relation, int detail) {
    LogicalRelation rel = (LogicalRelation) relation;
    FileIndex location = ((HadoopFsRelation) rel.relation()).location();
    String table = rel.catalogTable().isDefined()
        ? rel.catalogTable().get().identifier().unquotedString()
        : location instanceof SnapshotFileIndex ? ((SnapshotFileIndex) location).table : null;
    return describeFs((HadoopFsRelation) rel.relation(), detail, table);
  }

  /**
   * {@link #describe} of a relation's HadoopFsRelation read by path (no catalog table); a Delta
   * or Iceberg table's with at least its fingerprint and deletion vectors (delete files), which
   * are part of what it is.
   */
  static String describeFs(HadoopFsRelation fs, int detail) {
    if (detail == 0 && (DeltaFiles.isDelta(fs.location())
        || fs.location() instanceof SnapshotFileIndex)) {
      return describeFs(fs, 1, null);
    }
    return describeFs(fs, detail, null);
  }

  /**
   * {@link #describe} of a relation's HadoopFsRelation: {@code table} is the qualified name of
   * the catalog table it reads (or null); {@code globPath}, the relation's {@code path} option
   * qualified when it holds glob characters (the pattern Spark expanded into its root paths).
   */
  private static String describeFs(HadoopFsRelation fs, int detail, String table) {
    StringBuilder sb = new StringBuilder(256);
    Object format = fs.fileFormat();
    String name = format instanceof DataSourceRegister
        ? ((DataSourceRegister) format).shortName() : format.getClass().getName();
    sb.append("{\"format\":").append(Json.quote(name));
    if (table != null) {
      sb.append(",\"table\":").append(Json.quote(table));
    } else {
      String glob = globPath(fs);
      if (glob != null) {
        sb.append(",\"globPath\":").append(Json.quote(glob));
      }
    }
    sb.append(",\"rootPaths\":[");
    scala.collection.Seq<Path> roots = fs.location().rootPaths();
    for (int i = 0; i < roots.size(); i++) {
      sb.append(i == 0 ? "" : ",").append(Json.quote(roots.apply(i).toString()));
    }
    sb.append("],\"partitionColumns\":[");
    String[] parts = fs.partitionSchema().fieldNames();
    for (int i = 0; i < parts.length; i++) {
      sb.append(i == 0 ? "" : ",").append(Json.quote(parts[i]));
    }
    sb.append("],\"options\":{");
    Map<String, String> options = Scala.map(fs.options());
    boolean first = true;
    for (Map.Entry<String, String> e : options.entrySet()) {
      sb.append(first ? "" : ",").append(Json.quote(e.getKey())).append(':')
          .append(Json.quote(e.getValue()));
      first = false;
    }
    sb.append("},\"bucketed\":").append(fs.bucketSpec().isDefined());
    if (DeltaFiles.isDelta(fs.location())) {
      sb.append(",\"tableFormat\":\"delta\",\"tableVersion\":")
          .append(DeltaFiles.version(fs.location()));
      String mapping = DeltaFiles.columnMapping(fs.location());
      if (!"none".equals(mapping)) {
        sb.append(",\"columnMapping\":").append(Json.quote(mapping));
      }
    } else if (fs.location() instanceof SnapshotFileIndex) {
      sb.append(",\"tableFormat\":").append(Json.quote(IcebergFiles.FORMAT))
          .append(",\"tableVersion\":").append(((SnapshotFileIndex) fs.location()).snapshotId);
    }
    sb.append(",\"dataSchema\":").append(schemaJson(fs.dataSchema()));
    if (detail == 0) {
      return sb.append('}').toString();
    }
    Listing listing = listing(fs.location());
    if (listing == null) {
      return sb.append(",\"fingerprint\":null,\"files\":null}").toString();
    }
    sb.append(",\"fingerprint\":").append(Json.quote(listing.fingerprint));
    if (listing.deletionVectors > 0) {
      sb.append(",\"deletionVectors\":").append(listing.deletionVectors);
    }
    if (detail > 1) {
      sb.append(",\"files\":[").append(String.join(",", listing.lines())).append(']');
    }
    return sb.append('}').toString();
  }

  /**
   * The difference between a file relation's files and those an index recorded (kept under
   * {@code recordedKey}, see {@link RecordedListing}) as {@link Listing#changes} gives it;
   * {@code "null"} for a relation that does not list its files, null when nothing is kept
   * under the key.
   */
  static String changes(LogicalPlan relation, String recordedKey) {
    RecordedListing recorded = RecordedListing.of(recordedKey);
    if (recorded == null) {
      return null;
    }
    Listing listing = listing(((HadoopFsRelation) ((LogicalRelation) relation).relation())
        .location());
    return listing == null ? "null" : listing.changes(recorded);
  }

  private static String schemaJson(StructType schema) {
    return SCHEMA_JSON.computeIfAbsent(schema, s -> Json.quote(s.json()));
  }

  /**
   * The listing of every file {@code location} can read: its own when it lists files, that of
   * all partitions of a catalog table's {@link CatalogFileIndex} (which prunes partitions only
   * when planned), a Delta table's snapshot files ({@link DeltaFiles}), an Iceberg snapshot's
   * ({@link IcebergFiles}; null when they are not all Parquet), else null.
   */
  private static Listing listing(FileIndex location) {
    if (location instanceof PartitioningAwareFileIndex) {
      return Listings.of(location, ((PartitioningAwareFileIndex) location).allFiles());
    }
    if (location instanceof CatalogFileIndex) {
      PartitioningAwareFileIndex all = ((CatalogFileIndex) location)
          .filterPartitions(Scala.seq(List.<Expression>of()));
      return Listings.of(all, all.allFiles());
    }
    if (location instanceof SnapshotFileIndex) {
      return ((SnapshotFileIndex) location).listing();
    }
    return DeltaFiles.isDelta(location) ? DeltaFiles.listing(location) : null;
  }

  /** The relation's single {@code path} option, qualified, when it is a glob pattern. */
  private static String globPath(HadoopFsRelation fs) {
    scala.Option<String> option = fs.options().get("path");
    if (option.isEmpty()) {
      return null;
    }
    String path = option.get();
    boolean glob = false;
    for (int i = 0; i < path.length() && !glob; i++) {
      glob = GLOB_CHARS.indexOf(path.charAt(i)) >= 0;
    }
    if (!glob) {
      return null;
    }
    try {
      Path p = new Path(path);
      return p.getFileSystem(fs.sparkSession().sparkContext().hadoopConfiguration())
          .makeQualified(p).toString();
    } catch (Exception e) {   // not a path Hadoop can qualify: no pattern to record
      return null;
    }
  }
}
