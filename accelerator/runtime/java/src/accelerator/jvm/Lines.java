package accelerator.jvm;

import java.util.HashSet;
import java.util.Set;


/** Reads the newline-separated lists that py4j arguments carry (one string for many values). */
final class Lines {
  private Lines() {
  }

  /** The non-empty lines of {@code lines}. */
  static Set<String> nonEmpty(String lines) {
    Set<String> out = new HashSet<>();
    for (String line : lines.split("\n")) {
      if (!line.isEmpty()) {
        out.add(line);
      }
    }
    return out;
  }
}
