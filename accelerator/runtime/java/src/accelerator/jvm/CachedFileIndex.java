package accelerator.jvm;

import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.hadoop.fs.FileStatus;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.FileStatusWithMetadata;
import org.apache.spark.sql.execution.datasources.PartitionDirectory;


/**
 * The cache tier's Parquet files standing in for source files: lists, for each source file the
 * wrapped index lists that has an entry in {@code cached}, the pack files holding its rows,
 * under the source file's partition values, each pack file once (a pack holds the rows of
 * several source files, all of one partition; the relation over this index keeps the rows of
 * the files served, see {@link CacheServing#swap}). So Spark's partition pruning (and a
 * data-skipping index that pruned the wrapped index) apply to the cached files exactly as to
 * the source's.
 */
public final class CachedFileIndex extends DerivedFileIndex {
  private final Map<String, FileStatus[]> cached;

  /** {@code cached}: source file path ({@code FileStatus.getPath().toString()}) to its
   * entry's files; {@code paths}: see {@link DerivedFileIndex}. */
  public CachedFileIndex(FileIndex delegate, Map<String, FileStatus[]> cached,
      Map<FileStatus, String> paths) {
    super(delegate, paths);
    this.cached = cached;
  }

  @Override
  protected List<PartitionDirectory> listed(List<Expression> partitionFilters,
      List<Expression> dataFilters) {
    scala.collection.Seq<PartitionDirectory> dirs =
        delegate.listFiles(Scala.seq(partitionFilters), Scala.seq(dataFilters));
    scala.collection.immutable.Map<String, Object> noMetadata =
        scala.collection.immutable.Map$.MODULE$.empty();
    List<PartitionDirectory> out = new ArrayList<>();
    Set<FileStatus> seen = java.util.Collections.newSetFromMap(new IdentityHashMap<>());
    for (PartitionDirectory dir : Scala.list(dirs)) {
      List<FileStatusWithMetadata> served = new ArrayList<>();
      for (FileStatusWithMetadata file : Scala.list(dir.files())) {
        FileStatus[] entry = cached.get(pathOf(file.fileStatus()));
        if (entry != null) {
          for (FileStatus f : entry) {
            if (seen.add(f)) {
              served.add(new FileStatusWithMetadata(f, noMetadata));
            }
          }
        }
      }
      if (!served.isEmpty()) {
        out.add(new PartitionDirectory(dir.values(),
            Scala.seq(served)));
      }
    }
    return out;
  }

  /** The source files the wrapped index lists (without filters) that {@code cached} serves. */
  List<String> servedPaths() {
    List<String> out = new ArrayList<>();
    for (PartitionDirectory dir : Scala.list(
        delegate.listFiles(Scala.seq(List.of()), Scala.seq(List.of())))) {
      for (FileStatusWithMetadata file : Scala.list(dir.files())) {
        String path = pathOf(file.fileStatus());
        if (cached.containsKey(path)) {
          out.add(path);
        }
      }
    }
    return out;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof CachedFileIndex && ((CachedFileIndex) o).delegate.equals(delegate)
        && ((CachedFileIndex) o).cached == cached;
  }

  @Override
  public int hashCode() {
    return 31 * delegate.hashCode() + System.identityHashCode(cached);
  }

  @Override
  public String toString() {
    return "CachedFileIndex(" + cached.size() + " cached source files, " + delegate + ")";
  }
}
