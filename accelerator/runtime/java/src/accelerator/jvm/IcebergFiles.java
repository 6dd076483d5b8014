package accelerator.jvm;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
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
 * exactly the table's rows ({@link #problem} is null), {@link #views} puts in the table's place
 * a file relation over those files ({@link SnapshotFileIndex}), with the same output: the
 * rewriter decides on it as on any directory of Parquet files, and {@link #restore} puts the
 * table back wherever nothing replaced or pruned it, so a query no index serves runs on
 * Iceberg's own scan. Files with delete files attached are listed with a key of those files
 * (as a Delta file with its deletion vector), so that the indexes refuse to prune or copy them.
 * Iceberg is not on the compile class path: it is read through reflection.
 */
final class IcebergFiles {
  static final String FORMAT = "iceberg";
  private static final String SPARK_TABLE = "org.apache.iceberg.spark.source.SparkTable";
  /** Iceberg's read options that choose another snapshot or a range of them. */
  private static final String[] SNAPSHOT_OPTIONS = {"snapshot-id", "as-of-timestamp", "branch",
    "tag", "start-snapshot-id", "end-snapshot-id", "start-timestamp", "end-timestamp"};
  /** Iceberg types whose Parquet columns Spark's own reader reads as Iceberg does. */
  private static final Set<String> PLAIN_TYPES = Set.of("BOOLEAN", "INTEGER", "LONG", "FLOAT",
      "DOUBLE", "DATE", "TIMESTAMP", "STRING", "BINARY", "DECIMAL", "STRUCT", "LIST", "MAP");
  private static final RecentListings LISTINGS = new RecentListings();
  /** {@link #schemaProblem} of recent tables' schemas (null values: none), by location, current
   * schema id and number of schemas: checking every column of every schema per query would
   * cost more than the query's planning. */
  private static final Map<String, String> SCHEMA_PROBLEMS = new java.util.LinkedHashMap<>(
      16, 0.75f, true) {
    @Override
    protected boolean removeEldestEntry(Map.Entry<String, String> eldest) {
      return size() > 64;
    }
  };

  private IcebergFiles() {
  }

  /** Whether {@code plan} is a relation reading an Iceberg table. */
  static boolean isIceberg(LogicalPlan plan) {
    return plan instanceof DataSourceV2Relation
        && ((DataSourceV2Relation) plan).table().getClass().getName().equals(SPARK_TABLE);
  }

  /** Whether some node of {@code plan} reads an Iceberg table. */
  static boolean hasIceberg(LogicalPlan plan) {
    return PlanTree.anyNode(plan, IcebergFiles::isIceberg);
  }

  /**
   * Why the Iceberg relation cannot be read as the Parquet files of its snapshot, or null when
   * it can: a branch, tag or snapshot range; a table without snapshot; Iceberg's metadata
   * columns; files imported without field ids; a file format or column type Spark reads
   * otherwise than Iceberg; a column renamed, retyped or reused since older files were written
   * (Spark's Parquet reader matches columns by name, Iceberg by field id); default values.
   */
  static String problem(DataSourceV2Relation rel) {
    try {
      return readProblem(rel);
    } catch (RuntimeException e) {   // another release's API: the table keeps Iceberg's scan
      return "the accelerator cannot read this Iceberg release's table metadata (" + e + ")";
    }
  }

  private static String readProblem(DataSourceV2Relation rel) {
    Object sparkTable = rel.table();
    Object branch = Reflection.callIfPresent(sparkTable, "branch");
    if (branch != null && !"main".equals(branch)) {
      return "it reads the branch or tag " + branch;
    }
    for (String option : SNAPSHOT_OPTIONS) {
      if (rel.options().containsKey(option)) {
        return "it is read with Iceberg's option " + option + " (VERSION AS OF or TIMESTAMP AS "
            + "OF in SQL, or the versionAsOf / timestampAsOf options, read a snapshot that can "
            + "be accelerated)";
      }
    }
    Object table = Reflection.call(sparkTable, "table");
    if (snapshotId(rel) == null) {
      return "the table has no snapshot yet";
    }
    Map<?, ?> properties = (Map<?, ?>) Reflection.call(table, "properties");
    if (properties.containsKey("schema.name-mapping.default")) {
      return "the table has files imported without Iceberg's field ids "
          + "(schema.name-mapping.default is set)";
    }
    Object format = properties.get("write.format.default");
    if (format != null && !"parquet".equalsIgnoreCase(String.valueOf(format))) {
      return "the table writes " + format + " files; only Parquet files are read as files";
    }
    Object schema = Reflection.call(table, "schema");
    for (AttributeReference a : Scala.list(rel.output())) {
      if (Reflection.call(schema, "findField", a.name()) == null) {
        return "the query reads Iceberg's metadata column " + a.name();
      }
    }
    // a table's schemas are only ever added to: their count and the current one's id key them
    String key = Reflection.call(table, "location") + "@" + Reflection.call(schema, "schemaId")
        + "@" + ((Map<?, ?>) Reflection.call(table, "schemas")).size();
    synchronized (SCHEMA_PROBLEMS) {
      if (SCHEMA_PROBLEMS.containsKey(key)) {
        return SCHEMA_PROBLEMS.get(key);
      }
    }
    String found = schemaProblem(table, schema);
    synchronized (SCHEMA_PROBLEMS) {
      SCHEMA_PROBLEMS.put(key, found);
    }
    return found;
  }

  /** Why older files of the table may hold a column of {@code schema} under another name or
   * type, or a type Spark's Parquet reader reads otherwise; null when none may. Names are
   * Iceberg's names of every schema alike (a field in a list or map has two: {@code
   * items.element.q} and {@code items.q}). */
  private static String schemaProblem(Object table, Object schema) {
    Map<?, ?> byName = namesOf(schema);
    List<Object> schemas = new ArrayList<>(((Map<?, ?>) Reflection.call(table, "schemas"))
        .values());
    List<Map<?, ?>> older = new ArrayList<>();   // each schema's names to ids
    List<Map<Object, Set<Object>>> olderIds = new ArrayList<>();   // and ids to their names
    for (Object old : schemas) {
      Map<?, ?> names = namesOf(old);
      Map<Object, Set<Object>> ids = new java.util.HashMap<>();
      for (Map.Entry<?, ?> e : names.entrySet()) {
        ids.computeIfAbsent(e.getValue(), id -> new java.util.HashSet<>()).add(e.getKey());
      }
      older.add(names);
      olderIds.add(ids);
    }
    for (Map.Entry<?, ?> e : byName.entrySet()) {
      Object field = Reflection.call(schema, "findField", e.getValue());
      Object type = Reflection.call(field, "type");
      String typeId = String.valueOf(Reflection.call(type, "typeId"));
      if (!PLAIN_TYPES.contains(typeId)) {
        return "column " + e.getKey() + " has Iceberg type " + type
            + ", which Spark reads from Parquet otherwise than Iceberg";
      }
      if (Reflection.callIfPresent(field, "initialDefault") != null) {
        return "column " + e.getKey() + " has a default value for files written before it";
      }
      for (int i = 0; i < schemas.size(); i++) {
        Set<Object> thenNames = olderIds.get(i).get(e.getValue());
        Object thenId = older.get(i).get(e.getKey());
        Object then = thenNames == null ? null
            : Reflection.call(schemas.get(i), "findField", e.getValue());
        boolean renamed = thenNames != null && !thenNames.contains(e.getKey());
        boolean retyped = then != null && (Boolean) Reflection.call(type, "isPrimitiveType")
            && !type.equals(Reflection.call(then, "type"));
        boolean reused = thenId != null && !thenId.equals(e.getValue());
        if (renamed || retyped || reused) {
          return "column " + e.getKey() + " was " + (renamed ? "renamed" : retyped ? "retyped"
              : "dropped and added again") + " since older files were written; Spark's Parquet "
              + "reader matches columns by name";
        }
      }
    }
    return null;
  }

  /** Iceberg's names of every field of {@code schema} to its id. */
  private static Map<?, ?> namesOf(Object schema) {
    return (Map<?, ?>) invokeStatic("org.apache.iceberg.types.TypeUtil", "indexByName",
        Reflection.call(schema, "asStruct"));
  }

  private static Object invokeStatic(String className, String name, Object arg) {
    try {
      Class<?> cls = Class.forName(className, true, arg.getClass().getClassLoader());
      for (java.lang.reflect.Method m : cls.getMethods()) {
        if (m.getName().equals(name) && m.getParameterCount() == 1
            && m.getParameterTypes()[0].isInstance(arg)) {
          return m.invoke(null, arg);
        }
      }
      throw new IllegalStateException(className + " has no method " + name);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("cannot call " + className + "." + name, e);
    }
  }

  /** The snapshot the relation reads: the one it was loaded at (time travel too), else the
   * table's current one; null for a table without snapshot. */
  private static Long snapshotId(DataSourceV2Relation rel) {
    Object id = Reflection.call(rel.table(), "snapshotId");
    if (id != null) {
      return ((Number) id).longValue();
    }
    Object current = Reflection.call(Reflection.call(rel.table(), "table"), "currentSnapshot");
    return current == null ? null : ((Number) Reflection.call(current, "snapshotId"))
        .longValue();
  }

  /** The first problem ({@link #problem}) of an Iceberg relation of {@code plan}, or null. */
  static String problemOf(LogicalPlan plan) {
    List<String> found = new ArrayList<>();
    PlanTree.anyNode(plan, p -> {
      String problem = isIceberg(p) ? problem((DataSourceV2Relation) p) : null;
      if (problem != null) {
        found.add(problem);
      }
      return problem != null;
    });
    return found.isEmpty() ? null : found.get(0);
  }

  /** {@code plan} with each Iceberg relation that can be read as its files replaced by a
   * view of them (see the class comment). */
  static LogicalPlan views(LogicalPlan plan) {
    return swap(plan, p -> isIceberg(p) && problem((DataSourceV2Relation) p) == null
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
