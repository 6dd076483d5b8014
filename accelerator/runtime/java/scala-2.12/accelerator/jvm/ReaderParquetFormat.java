package accelerator.jvm;

import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructType;

import scala.Function1;
import scala.collection.Iterator;

/**
 * Spark's Parquet format with its file reader wrapped: the override whose signature names a
 * Scala 2.12 collection is here ({@code scala-2.13/} has the 2.13 one).
 */
abstract class ReaderParquetFormat extends ParquetFileFormat {
  private static final long serialVersionUID = 1L;

  /** The reader to use in place of Spark's {@code reader}. */
  protected abstract Function1<PartitionedFile, Iterator<InternalRow>> wrap(
      Function1<PartitionedFile, Iterator<InternalRow>> reader);

  @Override
  public final Function1<PartitionedFile, Iterator<InternalRow>> buildReaderWithPartitionValues(
      SparkSession session, StructType dataSchema, StructType partitionSchema,
      StructType requiredSchema, scala.collection.Seq<Filter> filters,
      scala.collection.immutable.Map<String, String> options, Configuration hadoopConf) {
    return wrap(super.buildReaderWithPartitionValues(session, dataSchema, partitionSchema,
        requiredSchema, filters, options, hadoopConf));
  }
}
