package accelerator.jvm;

import java.lang.reflect.Method;


/**
 * Copies Scala case class instances (Spark's plan nodes and relations) with one field replaced,
 * through reflection: the arity of their {@code copy} methods differs between Spark versions.
 */
final class CaseClasses {
  private CaseClasses() {
  }

  /**
   * Copies a Scala case class with field {@code index} replaced, through its {@code copy} method
   * and {@code copy$default$N} (their arity differs between Spark versions). Parameters of a
   * second parameter list, which have no defaults, come from {@code curried}.
   */
  static Object copy(Object obj, int index, Object value, Object... curried) {
    try {
      Method copy = copyMethod(obj);
      int n = copy.getParameterCount();
      int defaults = n - curried.length;
      Object[] args = new Object[n];
      for (int i = 0; i < defaults; i++) {
        args[i] = obj.getClass().getMethod("copy$default$" + (i + 1)).invoke(obj);
      }
      System.arraycopy(curried, 0, args, defaults, curried.length);
      args[index] = value;
      return copy.invoke(obj, args);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("cannot copy " + obj.getClass().getName(), e);
    }
  }

  /** The {@code copy} method of a Scala case class instance. */
  static Method copyMethod(Object obj) {
    Method copy = null;
    for (Method m : obj.getClass().getMethods()) {
      if (m.getName().equals("copy")) {
        copy = m;
      }
    }
    if (copy == null) {
      throw new IllegalStateException(obj.getClass().getName() + " has no copy method");
    }
    return copy;
  }
}
