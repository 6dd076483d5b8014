package accelerator.jvm;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Set;

import org.apache.hadoop.fs.FileStatus;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.FileStatusWithMetadata;
import org.apache.spark.sql.execution.datasources.PartitionDirectory;


/**
 * A file index that lists only the files a data-skipping index kept, or all but the files the
 * cache serves (their paths as {@code FileStatus.getPath().toString()}); partitioning and
 * everything else come from the index it wraps. Spark's own partition pruning still applies on
 * top.
 */
public final class PrunedFileIndex extends DerivedFileIndex {
  private final Set<String> listed;
  private final boolean keep;

  /** Keeps the {@code kept} files of {@code delegate}. */
  public PrunedFileIndex(FileIndex delegate, Set<String> kept) {
    this(delegate, kept, true, new java.util.IdentityHashMap<>());
  }

  /** With {@code keep}, the {@code listed} files of {@code delegate}; without, all others
   * ({@code paths}: see {@link DerivedFileIndex}). */
  public PrunedFileIndex(FileIndex delegate, Set<String> listed, boolean keep,
      java.util.Map<FileStatus, String> paths) {
    super(delegate, paths);
    this.listed = listed;
    this.keep = keep;
  }

  private boolean keeps(FileStatus f) {
    return listed.contains(pathOf(f)) == keep;
  }

  @Override
  protected List<PartitionDirectory> listed(List<Expression> partitionFilters,
      List<Expression> dataFilters) {
    scala.collection.Seq<PartitionDirectory> dirs =
        delegate.listFiles(Scala.seq(partitionFilters), Scala.seq(dataFilters));
    List<PartitionDirectory> out = new ArrayList<>();
    for (PartitionDirectory dir : Scala.list(dirs)) {
      List<FileStatusWithMetadata> keptFiles = new ArrayList<>();
      for (FileStatusWithMetadata f : Scala.list(dir.files())) {
        if (keeps(f.fileStatus())) {
          keptFiles.add(f);
        }
      }
      if (!keptFiles.isEmpty()) {
        out.add(new PartitionDirectory(dir.values(),
            Scala.seq(keptFiles)));
      }
    }
    return out;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof PrunedFileIndex && ((PrunedFileIndex) o).delegate.equals(delegate)
        && ((PrunedFileIndex) o).listed.equals(listed) && ((PrunedFileIndex) o).keep == keep;
  }

  @Override
  public int hashCode() {
    return Objects.hash(delegate, listed, keep);
  }

  @Override
  public String toString() {
    return "PrunedFileIndex(" + (keep ? "" : "all but ") + listed.size() + " files, " + delegate
        + ")";
  }
}
