package accelerator.jvm;

import java.util.List;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.execution.datasources.FileStatusWithMetadata;
import org.apache.spark.sql.execution.datasources.PartitionDirectory;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;
import org.apache.spark.sql.types.StructType;

/**
 * The data files of one snapshot of an Apache Iceberg table, as the file index of the relation
 * {@link IcebergFiles#view} puts in place of the table's own: unpartitioned (Iceberg's data
 * files hold every column), listed from the table's manifests on first use. It keeps the
 * relation it stands for, which takes its place again when no index or cache served it.
 */
final class SnapshotFileIndex extends ListedFileIndex {
  final DataSourceV2Relation original;
  /** The table's qualified name, or null for a table read by path. */
  final String table;
  final String location;
  final String uuid;
  final long snapshotId;
  private volatile Listing listing;

  SnapshotFileIndex(DataSourceV2Relation original, String table, String location, String uuid,
      long snapshotId) {
    this.original = original;
    this.table = table;
    this.location = location;
    this.uuid = uuid;
    this.snapshotId = snapshotId;
  }

  /** The snapshot's data files with their delete files (see {@link IcebergFiles#listing}). */
  Listing listing() {
    if (listing == null) {
      listing = IcebergFiles.listing(this);
    }
    return listing;
  }

  @Override
  protected List<PartitionDirectory> listed(List<Expression> partitionFilters,
      List<Expression> dataFilters) {
    scala.collection.immutable.Map<String, Object> noMetadata =
        scala.collection.immutable.Map$.MODULE$.empty();
    List<FileStatusWithMetadata> files = new java.util.ArrayList<>();
    for (FileStatus f : listing().statuses) {
      files.add(new FileStatusWithMetadata(f, noMetadata));
    }
    return List.of(new PartitionDirectory(InternalRow.empty(), Scala.seq(files)));
  }

  @Override
  protected List<Path> roots() {
    return List.of(new Path(location));
  }

  @Override
  public String[] inputFiles() {
    FileStatus[] statuses = listing().statuses;
    String[] out = new String[statuses.length];
    for (int i = 0; i < out.length; i++) {
      out[i] = statuses[i].getPath().toUri().toString();
    }
    return out;
  }

  @Override
  public void refresh() {
    // a snapshot's files never change
  }

  @Override
  public long sizeInBytes() {
    long total = 0;
    for (FileStatus f : listing().statuses) {
      total += f.getLen();
    }
    return total;
  }

  @Override
  public StructType partitionSchema() {
    return new StructType();
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof SnapshotFileIndex && ((SnapshotFileIndex) o).uuid.equals(uuid)
        && ((SnapshotFileIndex) o).snapshotId == snapshotId;
  }

  @Override
  public int hashCode() {
    return 31 * uuid.hashCode() + Long.hashCode(snapshotId);
  }

  @Override
  public String toString() {
    return "IcebergSnapshot(" + (table != null ? table : location) + "@" + snapshotId + ")";
  }
}
