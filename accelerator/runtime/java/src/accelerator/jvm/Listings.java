package accelerator.jvm;

import java.util.ArrayList;
import java.util.LinkedList;
import java.util.List;

import org.apache.hadoop.fs.FileStatus;


/** Remembers the {@link Listing} of the last few file indexes described. */
final class Listings {
  private static final int LISTINGS_KEPT = 16;
  private static final LinkedList<Listing> LISTINGS = new LinkedList<>();

  private Listings() {
  }

  /**
   * The listing of a file index's files, remembered for the last few indexes: while an index
   * lists the same FileStatus objects (until it is refreshed), queries over one DataFrame
   * describe thousands of files once, not once per query; a new DataFrame over the same
   * unchanged files (new FileStatus objects, in the same order) reuses the lines and the
   * fingerprint of the last one, compared file by file without building them.
   */
  static Listing of(Object index, scala.collection.Seq<FileStatus> all) {
    Listing found = find(index, all);
    synchronized (LISTINGS) {   // the latest of an index first (see latest)
      LISTINGS.remove(found);
      LISTINGS.addFirst(found);
      if (LISTINGS.size() > LISTINGS_KEPT) {
        LISTINGS.removeLast();
      }
    }
    return found;
  }

  /**
   * The listing made last of {@code index} (null when none is remembered): the files a
   * planning described of a relation, which what it then decides rests on, without listing
   * them again. (An index lists other files only once refreshed, and is described again then.)
   */
  static Listing latest(Object index) {
    synchronized (LISTINGS) {
      for (Listing l : LISTINGS) {
        if (l.index == index) {
          return l;
        }
      }
    }
    return null;
  }

  private static Listing find(Object index, scala.collection.Seq<FileStatus> all) {
    FileStatus[] files = new FileStatus[all.size()];
    int n = 0;
    for (FileStatus f : Scala.list(all)) {   // a List's apply is linear
      files[n++] = f;
    }
    List<Listing> kept;
    synchronized (LISTINGS) {
      for (Listing l : LISTINGS) {
        if (l.same(index, files)) {
          return l;
        }
      }
      kept = new ArrayList<>(LISTINGS);
    }
    Listing fresh = null;
    for (int i = 0; i < kept.size() && fresh == null; i++) {
      fresh = kept.get(i).alike(index, files);
    }
    return fresh != null ? fresh : new Listing(index, files);
  }
}
