package accelerator.jvm;

import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Map;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;


/**
 * The files an index version recorded of its source, as the hashes of {@link FileHashes} in a
 * hash table, so a relation's {@link Listing} answers its difference to them
 * ({@link Listing#changes}) in one pass over its own hashes. The last few are kept by the key
 * the rewriter names them with (the recorded fingerprint): an index version's listing crosses
 * py4j once, not per query.
 */
final class RecordedListing {
  private static final int KEPT = 16;
  private static final JsonFactory JSON = new JsonFactory();
  private static final Map<String, RecordedListing> RECORDED =
      new LinkedHashMap<String, RecordedListing>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, RecordedListing> eldest) {
          return size() > KEPT;
        }
      };

  /** The fingerprint (of {@link FileHashes}) of the recorded files. */
  final String fingerprint;
  final long[] high;
  final long[] low;
  /** Open addressing: a file's position + 1 in the slot its hash leads to, 0 for none. */
  private final int[] slots;

  private RecordedListing(long[] high, long[] low) {
    this.high = high;
    this.low = low;
    fingerprint = FileHashes.fingerprint(high, low);
    slots = new int[Integer.highestOneBit(Math.max(4, high.length * 2 + 1)) * 2];
    int mask = slots.length - 1;
    for (int i = 0; i < high.length; i++) {
      int s = (int) low[i] & mask;
      while (slots[s] != 0) {
        s = (s + 1) & mask;
      }
      slots[s] = i + 1;
    }
  }

  /** The recorded listing kept under {@code key}, or null (then {@link #record} it). */
  static RecordedListing of(String key) {
    synchronized (RECORDED) {
      return RECORDED.get(key);
    }
  }

  /**
   * Keeps the files of the JSON array {@code filesJson} ({@code [path, size, mtime]} lists,
   * a deletion vector fourth when a file has one, as an index log entry records them) under
   * {@code key}; their positions in the array are how {@link Listing#changes} names them.
   */
  static RecordedListing record(String key, String filesJson) throws IOException {
    long[] high = new long[64];
    long[] low = new long[64];
    int n = 0;
    try (JsonParser p = JSON.createParser(filesJson)) {
      expect(p.nextToken(), JsonToken.START_ARRAY);
      while (p.nextToken() == JsonToken.START_ARRAY) {
        String path = p.nextTextValue();
        expect(p.nextToken(), JsonToken.VALUE_NUMBER_INT);
        long size = p.getLongValue();
        expect(p.nextToken(), JsonToken.VALUE_NUMBER_INT);
        long mtime = p.getLongValue();
        JsonToken t = p.nextToken();
        String dv = null;
        if (t == JsonToken.VALUE_STRING) {
          dv = p.getText();
          t = p.nextToken();
        }
        expect(t, JsonToken.END_ARRAY);
        if (path == null) {
          throw new IOException("a recorded file without a path");
        }
        if (n == high.length) {
          high = java.util.Arrays.copyOf(high, n * 2);
          low = java.util.Arrays.copyOf(low, n * 2);
        }
        FileHashes.hash(path, size, mtime, dv, high, low, n++);
      }
    }
    RecordedListing made = new RecordedListing(java.util.Arrays.copyOf(high, n),
        java.util.Arrays.copyOf(low, n));
    synchronized (RECORDED) {
      RECORDED.put(key, made);
    }
    return made;
  }

  private static void expect(JsonToken found, JsonToken wanted) throws IOException {
    if (found != wanted) {
      throw new IOException("not a recorded listing: " + found + " where " + wanted
          + " belongs");
    }
  }

  /** How many files were recorded. */
  int size() {
    return high.length;
  }

  /** The position of the recorded file with hash ({@code h}, {@code l}), or -1. */
  int find(long h, long l) {
    int mask = slots.length - 1;
    for (int s = (int) l & mask; slots[s] != 0; s = (s + 1) & mask) {
      int i = slots[s] - 1;
      if (low[i] == l && high[i] == h) {
        return i;
      }
    }
    return -1;
  }
}
