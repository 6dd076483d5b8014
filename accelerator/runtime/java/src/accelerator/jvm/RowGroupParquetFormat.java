package accelerator.jvm;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.datasources.PartitionedFile;

import scala.Function1;
import scala.collection.AbstractIterator;
import scala.collection.Iterator;
import scala.runtime.AbstractFunction1;

/**
 * Spark's Parquet format reading only some row groups of some files: those a data-skipping
 * index's row-group statistics keep.
 *
 * <p>A selection is given per file (its path as {@code FileStatus.getPath().toString()}) as byte
 * ranges {@code [start, end)}, one per kept row group, from the row group's first byte to the
 * next one's (or the file's end). Parquet's reader reads the row groups whose midpoint lies in the
 * split it is given; a row group's midpoint lies inside its own range, so the split is cut to
 * each kept range in turn and read with Spark's own reader (vectorized, filters pushed down,
 * partition values), and the row groups of other ranges are never read. A file without a
 * selection is read whole.
 */
public final class RowGroupParquetFormat extends ReaderParquetFormat {
  private static final long serialVersionUID = 1L;

  private final String spec;
  private final HashMap<String, long[]> ranges;

  /**
   * {@code spec}: one line per file, {@code path \t start:end,start:end,...}.
   */
  public RowGroupParquetFormat(String spec) {
    this.spec = spec;
    this.ranges = parse(spec);
  }

  private static HashMap<String, long[]> parse(String spec) {
    HashMap<String, long[]> out = new HashMap<>();
    for (String line : spec.split("\n")) {
      if (line.isEmpty()) {
        continue;
      }
      int tab = line.lastIndexOf('\t');
      String[] parts = line.substring(tab + 1).split(",");
      long[] bounds = new long[parts.length * 2];
      for (int i = 0; i < parts.length; i++) {
        int colon = parts[i].indexOf(':');
        bounds[2 * i] = Long.parseLong(parts[i].substring(0, colon));
        bounds[2 * i + 1] = Long.parseLong(parts[i].substring(colon + 1));
        if (bounds[2 * i + 1] <= bounds[2 * i]) {
          throw new IllegalArgumentException("empty row-group range in " + line);
        }
      }
      out.put(line.substring(0, tab), bounds);
    }
    return out;
  }

  @Override
  protected Function1<PartitionedFile, Iterator<InternalRow>> wrap(
      Function1<PartitionedFile, Iterator<InternalRow>> reader) {
    return new Selecting(reader, ranges);
  }

  /** Reads a split's kept row groups, each through the wrapped reader. */
  private static final class Selecting extends AbstractFunction1<PartitionedFile,
      Iterator<InternalRow>> implements Serializable {
    private static final long serialVersionUID = 1L;
    private final Function1<PartitionedFile, Iterator<InternalRow>> reader;
    private final HashMap<String, long[]> ranges;

    Selecting(Function1<PartitionedFile, Iterator<InternalRow>> reader,
        HashMap<String, long[]> ranges) {
      this.reader = reader;
      this.ranges = ranges;
    }

    @Override
    public Iterator<InternalRow> apply(PartitionedFile file) {
      long[] kept = ranges.get(file.toPath().toString());
      if (kept == null) {
        return reader.apply(file);
      }
      long from = file.start();
      long to = file.start() + file.length();
      List<PartitionedFile> parts = new ArrayList<>();
      for (int i = 0; i < kept.length; i += 2) {
        long start = Math.max(from, kept[i]);
        long end = Math.min(to, kept[i + 1]);
        if (start < end) {
          parts.add(file.copy(file.partitionValues(), file.filePath(), start, end - start,
              file.locations(), file.modificationTime(), file.fileSize(),
              file.otherConstantMetadataColumnValues()));
        }
      }
      @SuppressWarnings("unchecked")
      Iterator<InternalRow> rows = (Iterator<InternalRow>) (Iterator<?>) new Concatenated(
          reader, parts.iterator());
      return rows;
    }
  }

  /**
   * The rows of each part in turn, each read when the previous one is exhausted. Elements are
   * Objects: Spark's vectorized reader hands out ColumnarBatches through its row iterators.
   */
  private static final class Concatenated extends AbstractIterator<Object> {
    private final Function1<PartitionedFile, Iterator<InternalRow>> reader;
    private final java.util.Iterator<PartitionedFile> pending;
    private Iterator<?> current;

    Concatenated(Function1<PartitionedFile, Iterator<InternalRow>> reader,
        java.util.Iterator<PartitionedFile> pending) {
      this.reader = reader;
      this.pending = pending;
    }

    @Override
    public boolean hasNext() {
      while ((current == null || !current.hasNext()) && pending.hasNext()) {
        current = reader.apply(pending.next());
      }
      return current != null && current.hasNext();
    }

    @Override
    public Object next() {
      if (!hasNext()) {
        throw new java.util.NoSuchElementException("no more rows in the kept row groups");
      }
      return current.next();
    }
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof RowGroupParquetFormat && ((RowGroupParquetFormat) o).spec.equals(spec);
  }

  @Override
  public int hashCode() {
    return spec.hashCode();
  }

  @Override
  public String toString() {
    return "Parquet, row groups selected in " + ranges.size() + " files";
  }
}
