package accelerator.jvm;

import java.util.List;

import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.PartitionDirectory;

/**
 * A file index that lists and names its roots through Java lists: the overrides whose
 * signatures name Scala 2.12 collections are here ({@code scala-2.13/} has the 2.13 ones).
 */
abstract class ListedFileIndex implements FileIndex {
  /** The partitions and their files for these filters. */
  protected abstract List<PartitionDirectory> listed(List<Expression> partitionFilters,
      List<Expression> dataFilters);

  /** The root paths of the index. */
  protected abstract List<Path> roots();

  @Override
  public final scala.collection.Seq<PartitionDirectory> listFiles(
      scala.collection.Seq<Expression> partitionFilters,
      scala.collection.Seq<Expression> dataFilters) {
    return Scala.seq(listed(Scala.list(partitionFilters), Scala.list(dataFilters)));
  }

  @Override
  public final scala.collection.Seq<Path> rootPaths() {
    return Scala.seq(roots());
  }
}
