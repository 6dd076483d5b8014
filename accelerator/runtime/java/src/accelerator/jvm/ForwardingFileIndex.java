package accelerator.jvm;

import java.util.List;

import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.datasources.FileIndex;

/** A file index over another one ({@link #delegate}), under the same root paths. */
abstract class ForwardingFileIndex extends ListedFileIndex {
  protected final FileIndex delegate;

  ForwardingFileIndex(FileIndex delegate) {
    this.delegate = delegate;
  }

  @Override
  protected final List<Path> roots() {
    return Scala.list(delegate.rootPaths());
  }
}
