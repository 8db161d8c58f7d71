package org.strideweave;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * Strings for the library's {@code const char*} parameters: exact UTF-8 ending in a NUL, as the
 * {@code byte[]}s (and {@code Object[]}s of them) the JNI helpers of the model-file functions
 * take. A null string is a {@link NullPointerException}, a NUL character inside one an
 * {@link InvalidValueException}.
 */
final class CStrings {
  private CStrings() {}

  static byte[] of(String s, String what) {
    Objects.requireNonNull(s, what);
    if (s.indexOf('\0') >= 0) {
      throw new InvalidValueException(what + " holds a NUL character");
    }
    byte[] b = s.getBytes(StandardCharsets.UTF_8);
    return Arrays.copyOf(b, b.length + 1);
  }

  static byte[] of(Path path, String what) {
    return of(Objects.requireNonNull(path, what).toString(), what);
  }

  static Object[] strings(List<String> list, String what) {
    Objects.requireNonNull(list, what);
    Object[] out = new Object[list.size()];
    for (int i = 0; i < out.length; ++i) {
      out[i] = of(list.get(i), what + "[" + i + "]");
    }
    return out;
  }

  static Object[] paths(List<Path> list, String what) {
    Objects.requireNonNull(list, what);
    Object[] out = new Object[list.size()];
    for (int i = 0; i < out.length; ++i) {
      out[i] = of(list.get(i), what + "[" + i + "]");
    }
    return out;
  }
}
