package accelerator.jvm;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation$;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;

/**
 * Apache Iceberg tables as the Parquet files of the snapshot a relation reads.
 *
 * <p>Spark reads an Iceberg table through a data source V2 relation, not through files the
 * indexes could prune or replace. When reading the snapshot's data files as plain Parquet gives
 * exactly the table's rows ({@link IcebergTables#problem} is null), {@link #views} puts in the
 * table's place a file relation over those files ({@link SnapshotFileIndex}), with the same
 * output: the
 * rewriter decides on it as on any directory of Parquet files, and {@link #restore} puts the
 * table back wherever nothing replaced or pruned it, so a query no index serves runs on
 * Iceberg's own scan. Files with delete files attached are listed with a key of those files
 * (as a Delta file with its deletion vector), so that the indexes refuse to prune or copy them.
 * Iceberg is not on the compile class path: it is read through reflection.
 */
final class IcebergFiles {
  static final String FORMAT = "iceberg";
  private static final String SPARK_TABLE = "org.apache.iceberg.spark.source.SparkTable";
  private static final RecentListings LISTINGS = new RecentListings();

  private IcebergFiles() {
  }

  /** Whether {@code plan} is a relation reading an Iceberg table. */
  static boolean isIceberg(LogicalPlan plan) {
    return plan instanceof DataSourceV2Relation
        && ((DataSourceV2Relation) plan).table().getClass().getName().equals(SPARK_TABLE);
  }

  /** Whether some node of {@code plan} reads an Iceberg table. */
  private static boolean hasIceberg(LogicalPlan plan) {
    return PlanTree.anyNode(plan, IcebergFiles::isIceberg);
  }

  /** The snapshot the relation reads: the one it was loaded at (time travel too), else the
   * table's current one; null for a table without snapshot. */
  static Long snapshotId(DataSourceV2Relation rel) {
    Object id = Reflection.call(rel.table(), "snapshotId");
    if (id != null) {
      return ((Number) id).longValue();
    }
    Object current = Reflection.call(Reflection.call(rel.table(), "table"), "currentSnapshot");
    return current == null ? null : ((Number) Reflection.call(current, "snapshotId"))
        .longValue();
  }

  /** The first problem ({@link IcebergTables#problem}) of an Iceberg relation of {@code plan}, or null. */
  static String problemOf(LogicalPlan plan) {
    List<String> found = new ArrayList<>();
    PlanTree.anyNode(plan, p -> {
      String problem = isIceberg(p) ? IcebergTables.problem((DataSourceV2Relation) p) : null;
      if (problem != null) {
        found.add(problem);
      }
      return problem != null;
    });
    return found.isEmpty() ? null : found.get(0);
  }

  /** {@code plan} with each Iceberg relation that can be read as its files replaced by a
   * view of them (see the class comment); {@code plan} itself when it reads no Iceberg table. */
  static LogicalPlan views(LogicalPlan plan) {
    if (!hasIceberg(plan)) {
      return plan;
    }
    return swap(plan, p -> isIceberg(p) && IcebergTables.problem((DataSourceV2Relation) p) == null
        ? view((DataSourceV2Relation) p) : null);
  }

  /** {@code plan} with every view {@link #views} made and nothing replaced or pruned given
   * back its Iceberg relation. */
  static LogicalPlan restore(LogicalPlan plan) {
    return swap(plan, p -> {
      FileIndex location = PlanTree.isFileRelation(p)
          ? ((HadoopFsRelation) ((LogicalRelation) p).relation()).location() : null;
      return location instanceof SnapshotFileIndex ? ((SnapshotFileIndex) location).original
          : null;
    });
  }

  private static LogicalPlan view(DataSourceV2Relation rel) {
    Object table = Reflection.call(rel.table(), "table");
    String location = qualified(String.valueOf(Reflection.call(table, "location")));
    Object uuid;
    try {
      uuid = Reflection.call(table, "uuid");
    } catch (IllegalStateException e) {   // a table class without uuid: its location names it
      uuid = location;
    }
    SnapshotFileIndex files = new SnapshotFileIndex(rel, tableName(rel), location,
        String.valueOf(uuid), snapshotId(rel));
    HadoopFsRelation fs = new HadoopFsRelation(files, new org.apache.spark.sql.types.StructType(),
        rel.schema(), scala.Option.empty(), new ParquetFileFormat(),
        scala.collection.immutable.Map$.MODULE$.empty(), SparkSession.active());
    LogicalRelation relation = LogicalRelation$.MODULE$.apply(fs, false);
    return (LogicalPlan) CaseClasses.copy(relation, 1, rel.output());
  }

  /** {@code catalog.namespace.name} of the relation's table, or null when it is read by path. */
  private static String tableName(DataSourceV2Relation rel) {
    if (rel.identifier().isEmpty() || rel.catalog().isEmpty()) {
      return null;
    }
    Identifier id = rel.identifier().get();
    if (id.getClass().getName().endsWith("PathIdentifier")) {
      return null;
    }
    List<String> parts = new ArrayList<>();
    parts.add(quoted(rel.catalog().get().name()));
    for (String part : id.namespace()) {
      parts.add(quoted(part));
    }
    parts.add(quoted(id.name()));
    return String.join(".", parts);
  }

  /** A part of a multi-part name as Spark's parser reads it back: in backquotes unless it is
   * letters, digits and underscores (not digits alone). */
  private static String quoted(String part) {
    return part.matches("[A-Za-z0-9_]+") && !part.matches("[0-9]+") ? part
        : "`" + part.replace("`", "``") + "`";
  }

  private static String qualified(String path) {
    Path p = new Path(path);
    try {
      FileSystem fs = p.getFileSystem(SparkSession.active().sparkContext().hadoopConfiguration());
      return fs.makeQualified(p).toString();
    } catch (java.io.IOException e) {
      throw new IllegalStateException("cannot qualify " + path, e);
    }
  }

  /**
   * The data files of the snapshot {@code index} reads, from the table's manifests (kept per
   * table and snapshot): each with a key of its delete files, when it has some (position or
   * equality deletes that apply to it), in place of a deletion vector. A snapshot holding a
   * data file not in Parquet gives null: its files cannot be read as Parquet.
   */
  static Listing listing(SnapshotFileIndex index) {
    return LISTINGS.get(index.uuid + "@" + index.snapshotId, () -> list(index));
  }

  private static Listing list(SnapshotFileIndex index) {
    Object table = Reflection.call(index.original.table(), "table");
    Object scan = Reflection.call(Reflection.call(table, "newScan"), "useSnapshot",
        index.snapshotId);
    Iterable<?> tasks = (Iterable<?>) Reflection.call(scan, "planFiles");
    List<FileStatus> statuses = new ArrayList<>();
    List<String> deletes = new ArrayList<>();
    try {
      FileSystem fs = new Path(index.location).getFileSystem(
          SparkSession.active().sparkContext().hadoopConfiguration());
      for (Object task : tasks) {
        Object file = Reflection.call(task, "file");
        if (!"PARQUET".equals(String.valueOf(Reflection.call(file, "format")))) {
          return null;
        }
        Path path = fs.makeQualified(new Path(location(file)));
        long size = ((Number) Reflection.call(file, "fileSizeInBytes")).longValue();
        statuses.add(new FileStatus(size, false, 1, 0, 0, path));
        deletes.add(deleteKey((List<?>) Reflection.call(task, "deletes")));
      }
    } catch (java.io.IOException e) {
      throw new IllegalStateException("cannot list the files of " + index, e);
    } finally {
      try {
        ((java.io.Closeable) tasks).close();
      } catch (java.io.IOException e) {
        // the manifests were read; nothing is left open that matters
      }
    }
    return new Listing(index, statuses.toArray(new FileStatus[0]),
        deletes.toArray(new String[0]));
  }

  /** A content file's location ({@code location()} from Iceberg 1.7, {@code path()} before). */
  private static String location(Object file) {
    Object location = Reflection.callIfPresent(file, "location");
    return String.valueOf(location != null ? location : Reflection.call(file, "path"));
  }

  /** The key of a data file's delete files: their count and a digest of their locations;
   * null for none. */
  private static String deleteKey(List<?> deleteFiles) {
    if (deleteFiles.isEmpty()) {
      return null;
    }
    List<String> locations = new ArrayList<>();
    for (Object f : deleteFiles) {
      locations.add(location(f));
    }
    java.util.Collections.sort(locations);
    try {
      byte[] digest = MessageDigest.getInstance("SHA-256").digest(
          String.join("\n", locations).getBytes(StandardCharsets.UTF_8));
      StringBuilder sb = new StringBuilder("iceberg-deletes:" + locations.size() + ":");
      for (int i = 0; i < 8; i++) {
        sb.append(String.format("%02x", digest[i]));
      }
      return sb.toString();
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /** {@code plan} transformed bottom-up by {@code swap} (null: keep the node). */
  private static LogicalPlan swap(LogicalPlan plan, Function<LogicalPlan, LogicalPlan> swap) {
    return (LogicalPlan) plan.transformUp(
        new scala.runtime.AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
          @Override
          public boolean isDefinedAt(LogicalPlan p) {
            return swap.apply(p) != null;
          }

          @Override
          public <A1 extends LogicalPlan, B1> B1 applyOrElse(A1 p,
              scala.Function1<A1, B1> dflt) {
            LogicalPlan out = swap.apply(p);
            @SuppressWarnings("unchecked")
            B1 result = out != null ? (B1) out : dflt.apply(p);
            return result;
          }
        });
  }
}
