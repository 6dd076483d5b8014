package accelerator.jvm;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import org.apache.hadoop.fs.FileStatus;


/**
 * A file index's files as sorted JSON lines [path,size,mtime] (a fourth element names a file's
 * deletion vector, when it has one) and their SHA-256 (the fingerprint of a relation's files);
 * {@link Listings} remembers the last few, {@link DeltaFiles} those of Delta tables.
 */
final class Listing {
  final Object index;
  final FileStatus[] statuses;
  final String[] paths;      // statuses[i].getPath().toString()
  final List<String> lines;
  final String fingerprint;
  /** How many of the files carry a deletion vector (a table format's; 0 for plain files). */
  final int deletionVectors;

  Listing(Object index, FileStatus[] statuses) {
    this(index, statuses, new String[statuses.length]);
  }

  /**
   * The listing of {@code statuses}, of which those with a non-null {@code deletionVectors}
   * entry carry that deletion vector (a Delta table's files): their line names it as a fourth
   * element, so a file whose deleted rows changed is another file.
   */
  Listing(Object index, FileStatus[] statuses, String[] deletionVectors) {
    this.index = index;
    this.statuses = statuses;
    paths = new String[statuses.length];
    lines = new ArrayList<>(statuses.length);
    for (int i = 0; i < statuses.length; i++) {
      FileStatus f = statuses[i];
      paths[i] = f.getPath().toString();
      String dv = deletionVectors[i] == null ? "" : "," + Json.quote(deletionVectors[i]);
      lines.add("[" + Json.quote(paths[i]) + "," + f.getLen() + "," + f.getModificationTime()
          + dv + "]");
    }
    int withDv = 0;
    for (String dv : deletionVectors) {
      withDv += dv == null ? 0 : 1;
    }
    this.deletionVectors = withDv;
    Collections.sort(lines);
    fingerprint = sha256(lines);
  }

  /** {@code statuses} of {@code index}, which describe the files of {@code same} alike. */
  private Listing(Object index, FileStatus[] statuses, Listing same) {
    this.index = index;
    this.statuses = statuses;
    paths = same.paths;
    lines = same.lines;
    fingerprint = same.fingerprint;
    deletionVectors = same.deletionVectors;
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
   * This listing's lines over {@code files} of {@code index}, when they describe the same
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

  private static String sha256(List<String> lines) {
    try {
      MessageDigest md = MessageDigest.getInstance("SHA-256");
      for (String line : lines) {
        md.update(line.getBytes(StandardCharsets.UTF_8));
        md.update((byte) '\n');
      }
      StringBuilder hex = new StringBuilder();
      for (byte b : md.digest()) {
        hex.append(String.format("%02x", b));
      }
      return hex.toString();
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
