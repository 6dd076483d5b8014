package accelerator.jvm;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;

/**
 * Whether an Iceberg relation's snapshot can be read as plain Parquet files ({@link
 * IcebergFiles}): its read options, its metadata columns, its files' format and the history of
 * its schemas (Spark's Parquet reader matches columns by name, Iceberg by field id). Iceberg is
 * read through reflection.
 */
final class IcebergTables {
  /** Iceberg's read options that choose another snapshot or a range of them. */
  private static final String[] SNAPSHOT_OPTIONS = {"snapshot-id", "as-of-timestamp", "branch",
    "tag", "start-snapshot-id", "end-snapshot-id", "start-timestamp", "end-timestamp"};
  /** Iceberg types whose Parquet columns Spark's own reader reads as Iceberg does. */
  private static final Set<String> PLAIN_TYPES = Set.of("BOOLEAN", "INTEGER", "LONG", "FLOAT",
      "DOUBLE", "DATE", "TIMESTAMP", "STRING", "BINARY", "DECIMAL", "STRUCT", "LIST", "MAP");
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

  private IcebergTables() {
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
    if (IcebergFiles.snapshotId(rel) == null) {
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
}
