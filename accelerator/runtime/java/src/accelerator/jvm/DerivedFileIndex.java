package accelerator.jvm;

import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.fs.FileStatus;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.FileStatusWithMetadata;
import org.apache.spark.sql.execution.datasources.PartitionDirectory;
import org.apache.spark.sql.types.StructType;

/**
 * A file index listing files derived from the files of the index it wraps (some of them, or
 * others in their place), under the same partitions: root paths, partition schema and refresh
 * are the wrapped index's; input files and size are those {@link #listFiles} gives without
 * filters, computed once.
 */
abstract class DerivedFileIndex extends ForwardingFileIndex {
  private volatile List<FileStatus> derived;

  private final java.util.Map<FileStatus, String> paths;

  /** {@code paths}: where {@link #pathOf} remembers paths (an identity map, which indexes
   * derived from the same listing may share). */
  DerivedFileIndex(FileIndex delegate, java.util.Map<FileStatus, String> paths) {
    super(delegate);
    this.paths = paths;
  }

  /**
   * {@code f.getPath().toString()}, remembered per FileStatus object: the wrapped index lists
   * the same objects on every call, and building the string from the path's URI dominated
   * planning over thousands of files.
   */
  protected String pathOf(FileStatus f) {
    synchronized (paths) {
      String found = paths.get(f);
      if (found == null) {
        found = f.getPath().toString();
        paths.put(f, found);
      }
      return found;
    }
  }

  /** Every file {@link #listed} gives without filters. */
  private List<FileStatus> allListed() {
    if (derived == null) {
      List<FileStatus> out = new ArrayList<>();
      for (PartitionDirectory dir : listed(List.of(), List.of())) {
        for (FileStatusWithMetadata f : Scala.list(dir.files())) {
          out.add(f.fileStatus());
        }
      }
      derived = out;
    }
    return derived;
  }

  @Override
  public String[] inputFiles() {
    List<FileStatus> files = allListed();
    String[] out = new String[files.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = files.get(i).getPath().toUri().toString();
    }
    return out;
  }

  @Override
  public void refresh() {
    delegate.refresh();
    derived = null;
  }

  @Override
  public long sizeInBytes() {
    long total = 0;
    for (FileStatus f : allListed()) {
      total += f.getLen();
    }
    return total;
  }

  @Override
  public StructType partitionSchema() {
    return delegate.partitionSchema();
  }
}
