package accelerator.jvm;

import java.lang.reflect.Method;
import java.util.Map;

/**
 * Calls methods of the table formats' classes (Delta Lake, Apache Iceberg), which are not on the
 * compile class path: by name and the arguments' types, on classes a session loaded from its
 * jars.
 */
final class Reflection {
  private static final Map<Class<?>, Class<?>> BOXES = Map.of(int.class, Integer.class,
      long.class, Long.class, boolean.class, Boolean.class, double.class, Double.class);

  private Reflection() {
  }

  /** {@code target.name(args)}; IllegalStateException naming the call when it fails. */
  static Object call(Object target, String name, Object... args) {
    for (Method m : target.getClass().getMethods()) {
      if (m.getName().equals(name) && accepts(m, args)) {
        try {
          m.setAccessible(true);   // public methods of non-public classes (GenericDataFile)
          return m.invoke(target, args);
        } catch (ReflectiveOperationException | RuntimeException e) {
          throw new IllegalStateException("cannot call " + name + "() of "
              + target.getClass().getName(), e);
        }
      }
    }
    throw new IllegalStateException(target.getClass().getName() + " has no method " + name
        + " for " + args.length + " arguments");
  }

  /** {@code target.name(args)}, or null when the class has no such method (older releases). */
  static Object callIfPresent(Object target, String name, Object... args) {
    for (Method m : target.getClass().getMethods()) {
      if (m.getName().equals(name) && accepts(m, args)) {
        return call(target, name, args);
      }
    }
    return null;
  }

  /** Whether {@code m} takes {@code args} (non-null; primitives boxed). */
  private static boolean accepts(Method m, Object[] args) {
    Class<?>[] types = m.getParameterTypes();
    if (types.length != args.length) {
      return false;
    }
    for (int i = 0; i < types.length; i++) {
      if (!BOXES.getOrDefault(types[i], types[i]).isInstance(args[i])) {
        return false;
      }
    }
    return true;
  }
}
