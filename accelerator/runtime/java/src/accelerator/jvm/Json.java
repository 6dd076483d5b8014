package accelerator.jvm;


/** Quotes strings as JSON string literals, for the JSON answers the Java side builds. */
final class Json {
  private Json() {
  }

  /** {@code s} as a JSON string literal: quotes, backslashes and control characters escaped. */
  static String quote(String s) {
    StringBuilder sb = new StringBuilder(s.length() + 2).append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '"' || c == '\\') {
        sb.append('\\').append(c);
      } else if (c < 0x20) {
        sb.append(String.format("\\u%04x", (int) c));
      } else {
        sb.append(c);
      }
    }
    return sb.append('"').toString();
  }
}
