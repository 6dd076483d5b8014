package accelerator.jvm;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Set;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.FileStatusWithMetadata;
import org.apache.spark.sql.execution.datasources.PartitionDirectory;
import org.apache.spark.sql.types.StructType;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A file index that lists only the files a data-skipping index kept, or all but the files the
 * cache serves (their paths as {@code FileStatus.getPath().toString()}); partitioning and
 * everything else come from the index it wraps. Spark's own partition pruning still applies on
 * top.
 */
public final class PrunedFileIndex implements FileIndex {
  private final FileIndex delegate;
  private final Set<String> listed;
  private final boolean keep;

  /** Keeps the {@code kept} files of {@code delegate}. */
  public PrunedFileIndex(FileIndex delegate, Set<String> kept) {
    this(delegate, kept, true);
  }

  /** With {@code keep}, the {@code listed} files of {@code delegate}; without, all others. */
  public PrunedFileIndex(FileIndex delegate, Set<String> listed, boolean keep) {
    this.delegate = delegate;
    this.listed = listed;
    this.keep = keep;
  }

  private boolean keeps(FileStatus f) {
    return listed.contains(f.getPath().toString()) == keep;
  }

  @Override
  public Seq<Path> rootPaths() {
    return delegate.rootPaths();
  }

  @Override
  public Seq<PartitionDirectory> listFiles(Seq<Expression> partitionFilters,
      Seq<Expression> dataFilters) {
    Seq<PartitionDirectory> dirs = delegate.listFiles(partitionFilters, dataFilters);
    List<PartitionDirectory> out = new ArrayList<>(dirs.size());
    for (int i = 0; i < dirs.size(); i++) {
      PartitionDirectory dir = dirs.apply(i);
      Seq<FileStatusWithMetadata> files = dir.files();
      List<FileStatusWithMetadata> keptFiles = new ArrayList<>(files.size());
      for (int j = 0; j < files.size(); j++) {
        if (keeps(files.apply(j).fileStatus())) {
          keptFiles.add(files.apply(j));
        }
      }
      if (!keptFiles.isEmpty()) {
        out.add(new PartitionDirectory(dir.values(),
            CollectionConverters.asScala(keptFiles).toSeq()));
      }
    }
    return CollectionConverters.asScala(out).toSeq();
  }

  private List<FileStatus> keptFiles() {
    scala.collection.immutable.Seq<Expression> none =
        CollectionConverters.asScala(new ArrayList<Expression>()).toSeq();
    Seq<PartitionDirectory> dirs = listFiles(none, none);
    List<FileStatus> out = new ArrayList<>();
    for (int i = 0; i < dirs.size(); i++) {
      Seq<FileStatusWithMetadata> files = dirs.apply(i).files();
      for (int j = 0; j < files.size(); j++) {
        out.add(files.apply(j).fileStatus());
      }
    }
    return out;
  }

  @Override
  public String[] inputFiles() {
    List<FileStatus> files = keptFiles();
    String[] out = new String[files.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = files.get(i).getPath().toUri().toString();
    }
    return out;
  }

  @Override
  public void refresh() {
    delegate.refresh();
  }

  @Override
  public long sizeInBytes() {
    long total = 0;
    for (FileStatus f : keptFiles()) {
      total += f.getLen();
    }
    return total;
  }

  @Override
  public StructType partitionSchema() {
    return delegate.partitionSchema();
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
