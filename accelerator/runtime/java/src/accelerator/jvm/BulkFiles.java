package accelerator.jvm;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Lists or reads many small files in one py4j call (a cache manifest of thousands of entries
 * is thousands of folders of one small file each: through py4j, each listing or read costs
 * several round trips, so 5,000 entries took ~18 s; here they take one call).
 *
 * <p>Paths come and results go as JSON text (one string each way, no per-element py4j
 * calls). Several files are handled at once, since on HDFS or an object store each is a
 * network round trip.
 */
public final class BulkFiles {
  private static final int THREADS = 8;
  private static final ObjectMapper JSON = new ObjectMapper();

  private interface Task {
    Object run(String path) throws IOException;
  }

  /**
   * The entries directly under each path of the JSON array {@code pathsJson}, as a JSON array
   * with one element per path: an array of {@code [path, length, modificationTime, isDir]},
   * empty when the path does not exist.
   */
  public String listEach(String pathsJson, Configuration conf) throws Exception {
    return each(pathsJson, path -> {
      Path p = new Path(path);
      FileSystem fs = p.getFileSystem(conf);
      List<Object[]> out = new ArrayList<>();
      try {
        for (FileStatus st : fs.listStatus(p)) {
          out.add(new Object[] {st.getPath().toString(), st.getLen(), st.getModificationTime(),
              st.isDirectory()});
        }
      } catch (FileNotFoundException e) {
        // not there (or deleted since): no entries
      }
      return out;
    });
  }

  /**
   * The UTF-8 text of each file of the JSON array {@code pathsJson}, as a JSON array with one
   * element per path: the text, or null when the file does not exist.
   */
  public String readEach(String pathsJson, Configuration conf) throws Exception {
    return each(pathsJson, path -> {
      Path p = new Path(path);
      try (InputStream in = p.getFileSystem(conf).open(p)) {
        return new String(in.readAllBytes(), StandardCharsets.UTF_8);
      } catch (FileNotFoundException e) {
        return null;
      }
    });
  }

  private static String each(String pathsJson, Task task) throws Exception {
    String[] paths = JSON.readValue(pathsJson, String[].class);
    if (paths.length == 1) {   // one listing or read (HadoopFs.list, read_text): no pool
      return JSON.writeValueAsString(new Object[] {task.run(paths[0])});
    }
    Object[] out = new Object[paths.length];
    ExecutorService pool = Executors.newFixedThreadPool(Math.max(1, Math.min(THREADS,
        paths.length)));
    try {
      List<Future<Object>> futures = new ArrayList<>();
      for (String path : paths) {
        futures.add(pool.submit(() -> task.run(path)));
      }
      for (int i = 0; i < paths.length; i++) {
        try {
          out[i] = futures.get(i).get();
        } catch (ExecutionException e) {   // the file system's own error, not the wrapper
          throw e.getCause() instanceof Exception ? (Exception) e.getCause() : e;
        }
      }
    } finally {
      pool.shutdownNow();
    }
    return JSON.writeValueAsString(out);
  }
}
