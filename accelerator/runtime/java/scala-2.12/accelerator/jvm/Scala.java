package accelerator.jvm;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;

import scala.collection.JavaConverters;

/**
 * Conversions between Java collections and the Scala collections of Spark's API, for Scala 2.12
 * (Spark 3.5). {@code scala-2.13/} holds the same methods for Scala 2.13 (Spark 4); the shared
 * sources call only these, never a Scala version's converters.
 */
final class Scala {
  private Scala() {
  }

  /** An immutable Scala sequence of {@code items} (a copy), as Spark's constructors take. */
  static <T> scala.collection.Seq<T> seq(Collection<? extends T> items) {
    return JavaConverters.asScalaBuffer(new ArrayList<T>(items)).toList();
  }

  /** {@code seq} as a Java list (a view). */
  static <T> List<T> list(scala.collection.Seq<T> seq) {
    return JavaConverters.seqAsJavaList(seq);
  }

  /** {@code set} as a Java set (a view). */
  static <T> Set<T> set(scala.collection.Set<T> set) {
    return JavaConverters.setAsJavaSet(set);
  }

  /** {@code map} as a Java map (a view). */
  static <K, V> Map<K, V> map(scala.collection.Map<K, V> map) {
    return JavaConverters.mapAsJavaMap(map);
  }
}
