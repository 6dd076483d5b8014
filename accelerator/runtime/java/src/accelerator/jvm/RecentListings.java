package accelerator.jvm;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Supplier;

/**
 * The listings of a table format's recent snapshots by key (table, id and version): a
 * snapshot's files never change, so its listing is made once while it is among the last few.
 */
final class RecentListings {
  private static final int KEPT = 16;
  private final Map<String, Listing> kept = new LinkedHashMap<>(16, 0.75f, true) {
    @Override
    protected boolean removeEldestEntry(Map.Entry<String, Listing> eldest) {
      return size() > KEPT;
    }
  };

  /** The listing kept under {@code key}, else the one {@code list} makes (kept, unless null). */
  Listing get(String key, Supplier<Listing> list) {
    synchronized (kept) {
      Listing found = kept.get(key);
      if (found != null) {
        return found;
      }
    }
    Listing made = list.get();
    if (made != null) {
      synchronized (kept) {
        kept.put(key, made);
      }
    }
    return made;
  }
}
