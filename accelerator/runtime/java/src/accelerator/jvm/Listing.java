package accelerator.jvm;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.hadoop.fs.FileStatus;


/**
 * A file index's files: each one's path, its 128-bit hash ({@link FileHashes}) and the
 * listing's order-independent fingerprint (the fingerprint of a relation's files), made in one
 * pass without sorting; as sorted JSON lines [path,size,mtime] (a fourth element names a
 * file's deletion vector, when it has one) only when the files themselves are asked for; and
 * its difference to an index's {@link RecordedListing} ({@link #changes}), kept for the last
 * few. {@link Listings} remembers the last few listings, {@link DeltaFiles} those of Delta
 * tables.
 */
final class Listing {
  private static final int CHANGES_KEPT = 4;
  final Object index;
  final FileStatus[] statuses;
  final String[] paths;      // statuses[i].getPath().toString()
  private final String[] deletionVectorOf;
  private final long[] high;
  private final long[] low;
  final String fingerprint;
  /** How many of the files carry a deletion vector (a table format's; 0 for plain files). */
  final int deletionVectors;
  /** The files' bytes. */
  final long bytes;
  private final Shared shared;

  /** What listings of the same files (in the same order) share: lines and changes, made once. */
  private static final class Shared {
    private List<String> lines;
    private final Map<RecordedListing, String> changes =
        new LinkedHashMap<RecordedListing, String>(4, 0.75f, true) {
          @Override
          protected boolean removeEldestEntry(Map.Entry<RecordedListing, String> eldest) {
            return size() > CHANGES_KEPT;
          }
        };
  }

  Listing(Object index, FileStatus[] statuses) {
    this(index, statuses, new String[statuses.length]);
  }

  /**
   * The listing of {@code statuses}, of which those with a non-null {@code deletionVectors}
   * entry carry that deletion vector (a Delta table's files): it is part of the file's hash
   * and line, so a file whose deleted rows changed is another file.
   */
  Listing(Object index, FileStatus[] statuses, String[] deletionVectors) {
    this.index = index;
    this.statuses = statuses;
    paths = new String[statuses.length];
    high = new long[statuses.length];
    low = new long[statuses.length];
    int withDv = 0;
    long total = 0;
    for (int i = 0; i < statuses.length; i++) {
      FileStatus f = statuses[i];
      paths[i] = f.getPath().toString();
      FileHashes.hash(paths[i], f.getLen(), f.getModificationTime(), deletionVectors[i], high,
          low, i);
      withDv += deletionVectors[i] == null ? 0 : 1;
      total += f.getLen();
    }
    deletionVectorOf = deletionVectors;
    this.deletionVectors = withDv;
    bytes = total;
    fingerprint = FileHashes.fingerprint(high, low);
    shared = new Shared();
  }

  /** {@code statuses} of {@code index}, which describe the files of {@code same} alike. */
  private Listing(Object index, FileStatus[] statuses, Listing same) {
    this.index = index;
    this.statuses = statuses;
    paths = same.paths;
    deletionVectorOf = same.deletionVectorOf;
    high = same.high;
    low = same.low;
    fingerprint = same.fingerprint;
    deletionVectors = same.deletionVectors;
    bytes = same.bytes;
    shared = same.shared;
  }

  /** The files' JSON lines, sorted (made on the first call). */
  List<String> lines() {
    synchronized (shared) {
      if (shared.lines == null) {
        List<String> lines = new ArrayList<>(statuses.length);
        for (int i = 0; i < statuses.length; i++) {
          lines.add(line(i));
        }
        Collections.sort(lines);
        shared.lines = lines;
      }
      return shared.lines;
    }
  }

  private String line(int i) {
    FileStatus f = statuses[i];
    String dv = deletionVectorOf[i] == null ? "" : "," + Json.quote(deletionVectorOf[i]);
    return "[" + Json.quote(paths[i]) + "," + f.getLen() + "," + f.getModificationTime() + dv
        + "]";
  }

  /**
   * The difference between these files and the {@code recorded} ones, as JSON: this listing's
   * {@code fingerprint}, {@code count} and {@code bytes}, the recorded listing's fingerprint as
   * {@code recorded}, the lines of the files not recorded ({@code appended}: new, modified or
   * with another deletion vector) and the positions in the recorded array of the files no longer
   * listed ({@code deleted}). One pass over the hashes; kept for the last few recorded listings.
   */
  String changes(RecordedListing recorded) {
    synchronized (shared) {
      String found = shared.changes.get(recorded);
      if (found != null) {
        return found;
      }
    }
    boolean[] seen = new boolean[recorded.size()];
    List<String> appended = new ArrayList<>();
    for (int i = 0; i < high.length; i++) {
      int at = recorded.find(high[i], low[i]);
      if (at < 0 || seen[at]) {
        appended.add(line(i));
      } else {
        seen[at] = true;
      }
    }
    Collections.sort(appended);
    StringBuilder sb = new StringBuilder(64 + 64 * appended.size());
    sb.append("{\"fingerprint\":").append(Json.quote(fingerprint))
        .append(",\"count\":").append(statuses.length)
        .append(",\"bytes\":").append(bytes)
        .append(",\"recorded\":").append(Json.quote(recorded.fingerprint))
        .append(",\"appended\":[").append(String.join(",", appended)).append("],\"deleted\":[");
    boolean first = true;
    for (int i = 0; i < seen.length; i++) {
      if (!seen[i]) {
        sb.append(first ? "" : ",").append(i);
        first = false;
      }
    }
    String made = sb.append("]}").toString();
    synchronized (shared) {
      shared.changes.put(recorded, made);
    }
    return made;
  }

  /** Whether {@code files} are the very objects listed (a refreshed index lists new ones). */
  boolean same(Object index, FileStatus[] files) {
    if (this.index != index || files.length != statuses.length) {
      return false;
    }
    for (int i = 0; i < files.length; i++) {
      if (files[i] != statuses[i]) {
        return false;
      }
    }
    return true;
  }

  /**
   * This listing's hashes over {@code files} of {@code index}, when they describe the same
   * files in the same order (another DataFrame reading the same unchanged files): else null.
   */
  Listing alike(Object index, FileStatus[] files) {
    if (files.length != statuses.length) {
      return null;
    }
    for (int i = 0; i < files.length; i++) {
      if (!sameFile(files[i], statuses[i])) {
        return null;
      }
    }
    return new Listing(index, files, this);
  }

  /**
   * Whether two statuses give one listing line: the same size, modification time and path
   * string (compared by the raw URI parts the string is made of, without building it).
   */
  private static boolean sameFile(FileStatus a, FileStatus b) {
    if (a == b) {
      return true;
    }
    if (a.getLen() != b.getLen() || a.getModificationTime() != b.getModificationTime()) {
      return false;
    }
    java.net.URI x = a.getPath().toUri();
    java.net.URI y = b.getPath().toUri();
    return java.util.Objects.equals(x.getRawPath(), y.getRawPath())
        && java.util.Objects.equals(x.getScheme(), y.getScheme())
        && java.util.Objects.equals(x.getRawAuthority(), y.getRawAuthority())
        && java.util.Objects.equals(x.getRawQuery(), y.getRawQuery())
        && java.util.Objects.equals(x.getRawFragment(), y.getRawFragment());
  }
}
