package accelerator.jvm;

import java.util.List;

import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.PartitionDirectory;

/**
 * A file index that lists and names its roots through Java lists: the overrides whose
 * signatures name Scala 2.13 collections are here ({@code scala-2.12/} has the 2.12 ones).
 */
abstract class ListedFileIndex implements FileIndex {
  /** The partitions and their files for these filters. */
  protected abstract List<PartitionDirectory> listed(List<Expression> partitionFilters,
      List<Expression> dataFilters);

  /** The root paths of the index. */
  protected abstract List<Path> roots();

  @Override
  public final scala.collection.immutable.Seq<PartitionDirectory> listFiles(
      scala.collection.immutable.Seq<Expression> partitionFilters,
      scala.collection.immutable.Seq<Expression> dataFilters) {
    return Scala.seq(listed(Scala.list(partitionFilters), Scala.list(dataFilters)));
  }

  @Override
  public final scala.collection.immutable.Seq<Path> rootPaths() {
    return Scala.seq(roots());
  }
}
