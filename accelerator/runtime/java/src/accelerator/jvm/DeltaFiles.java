package accelerator.jvm;

import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.fs.FileStatus;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.FileStatusWithMetadata;
import org.apache.spark.sql.execution.datasources.PartitionDirectory;

/**
 * The live files of a Delta Lake table's snapshot, as the table's own file index lists them
 * from the Delta log (never a directory listing, so files of removed versions are never
 * seen), with the deletion vector each carries. Delta is not on the compile class path: its
 * file indexes are recognised by their package and read through {@link FileIndex} and
 * reflection ({@code version()}, {@code metadata()}). A version's files never change, so
 * listings are kept per table (path and id) and version.
 */
final class DeltaFiles {
  /** Delta's key of a file's deletion vector in its listing's metadata. */
  private static final String DELETION_VECTOR = "row_index_filter_id_encoded";
  private static final String DELTA_PACKAGE = "org.apache.spark.sql.delta.";
  private static final RecentListings LISTINGS = new RecentListings();

  private DeltaFiles() {
  }

  /** Whether {@code location} is the file index of a Delta table. */
  static boolean isDelta(FileIndex location) {
    return location.getClass().getName().startsWith(DELTA_PACKAGE);
  }

  /** The table version {@code location} reads (its snapshot's, a time-travelled one's too). */
  static long version(FileIndex location) {
    return ((Number) Reflection.call(location, "version")).longValue();
  }

  /**
   * The table's column mapping mode ({@code none}, {@code name} or {@code id}): under the last
   * two its Parquet files hold columns under physical names of their own.
   */
  static String columnMapping(FileIndex location) {
    Object mode = Reflection.call(Reflection.call(location, "metadata"), "columnMappingMode");
    return String.valueOf(Reflection.call(mode, "name"));
  }

  /** The listing of every live file of the snapshot {@code location} reads. */
  static Listing listing(FileIndex location) {
    // the table's id too: a table dropped and created again at the path starts at version 0
    String key = location.rootPaths().head() + "@"
        + Reflection.call(Reflection.call(location, "metadata"), "id")
        + "@" + version(location);
    return LISTINGS.get(key, () -> list(location));
  }

  private static Listing list(FileIndex location) {
    List<FileStatus> statuses = new ArrayList<>();
    List<String> deletionVectors = new ArrayList<>();
    List<Expression> none = List.of();
    for (PartitionDirectory dir : Scala.list(location.listFiles(Scala.seq(none),
        Scala.seq(none)))) {
      for (FileStatusWithMetadata f : Scala.list(dir.files())) {
        statuses.add(f.fileStatus());
        scala.Option<Object> dv = f.metadata().get(DELETION_VECTOR);
        deletionVectors.add(dv.isDefined() ? String.valueOf(dv.get()) : null);
      }
    }
    return new Listing(location, statuses.toArray(new FileStatus[0]),
        deletionVectors.toArray(new String[0]));
  }
}
