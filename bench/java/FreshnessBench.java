package accelerator.jvm;

import java.util.Arrays;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;


/**
 * The JVM's side of the freshness check over synthesized listings (bench/freshness.py compiles
 * and runs it beside the accelerator's jar): per size, milliseconds of a new listing, of the
 * same FileStatus objects again (a query over the same DataFrame), of new objects for the same
 * files (a new DataFrame), of a listing with one file deleted and one appended, of recording an
 * index version's files, of the changed listing's difference to them (first, then kept), and
 * of the files' sorted JSON lines (what a full answer costs). Best of {@code runs}; one JSON
 * line per size.
 */
public final class FreshnessBench {
  private FreshnessBench() {
  }

  private static FileStatus[] files(int n, int from) {
    FileStatus[] out = new FileStatus[n];
    for (int i = 0; i < n; i++) {
      out[i] = new FileStatus(1000 + from + i, false, 1, 128L << 20, 7,
          new Path(String.format("file:/lake/t/part-%07d.parquet", from + i)));
    }
    return out;
  }

  private static scala.collection.Seq<FileStatus> seq(FileStatus[] files) {
    return Scala.seq(Arrays.asList(files));
  }

  private static String json(FileStatus[] files) {
    StringBuilder sb = new StringBuilder("[");
    for (int i = 0; i < files.length; i++) {
      sb.append(i == 0 ? "[" : ",[").append(Json.quote(files[i].getPath().toString()))
          .append(',').append(files[i].getLen()).append(',')
          .append(files[i].getModificationTime()).append(']');
    }
    return sb.append(']').toString();
  }

  public static void main(String[] args) throws Exception {
    int runs = Integer.parseInt(args[0]);
    for (int a = 1; a < args.length; a++) {
      int n = Integer.parseInt(args[a]);
      double[] best = new double[8];
      Arrays.fill(best, Double.MAX_VALUE);
      long answer = 0;
      for (int r = 0; r < runs; r++) {
        FileStatus[] base = files(n, r * 7 * n);   // no listing of an earlier run is alike
        Object index = new Object();
        long t = System.nanoTime();
        Listing first = Listings.of(index, seq(base));
        best[0] = Math.min(best[0], (System.nanoTime() - t) / 1e6);
        scala.collection.Seq<FileStatus> same = seq(base);
        t = System.nanoTime();
        Listings.of(index, same);
        best[1] = Math.min(best[1], (System.nanoTime() - t) / 1e6);
        scala.collection.Seq<FileStatus> alike = seq(files(n, r * 7 * n));
        t = System.nanoTime();
        Listings.of(new Object(), alike);
        best[2] = Math.min(best[2], (System.nanoTime() - t) / 1e6);
        scala.collection.Seq<FileStatus> changedFiles = seq(files(n, r * 7 * n + 1));
        t = System.nanoTime();
        Listing changed = Listings.of(new Object(), changedFiles);
        best[3] = Math.min(best[3], (System.nanoTime() - t) / 1e6);
        String recordedJson = json(base);
        t = System.nanoTime();
        RecordedListing recorded = RecordedListing.record("bench" + r, recordedJson);
        best[4] = Math.min(best[4], (System.nanoTime() - t) / 1e6);
        t = System.nanoTime();
        answer = changed.changes(recorded).length();
        best[5] = Math.min(best[5], (System.nanoTime() - t) / 1e6);
        t = System.nanoTime();
        changed.changes(recorded);
        best[6] = Math.min(best[6], (System.nanoTime() - t) / 1e6);
        t = System.nanoTime();
        String.join(",", first.lines());
        best[7] = Math.min(best[7], (System.nanoTime() - t) / 1e6);
      }
      System.out.printf("{\"files\":%d,\"new_listing_ms\":%.2f,\"same_objects_ms\":%.2f,"
          + "\"new_objects_same_files_ms\":%.2f,\"changed_listing_ms\":%.2f,"
          + "\"record_index_files_ms\":%.2f,\"difference_first_ms\":%.2f,"
          + "\"difference_kept_ms\":%.2f,\"difference_answer_bytes\":%d,"
          + "\"sorted_lines_ms\":%.2f}%n", n, best[0], best[1], best[2], best[3], best[4],
          best[5], best[6], answer, best[7]);
    }
  }
}
