package org.strideweave;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.Comparator;
import java.util.Locale;
import java.util.stream.Stream;

/**
 * Loads the native libraries once: {@code libstrideweave.so.0} and the JNI layer
 * {@code libstrideweave_jni.so} beside it.
 *
 * <p>With the system property {@code strideweave.library.path} set to a directory, both are
 * loaded from there (the test suite points it at the build tree's
 * {@code build/bindings/java/native}). Otherwise they are extracted from the jar
 * ({@code org/strideweave/native/<os>-<arch>/}) into a fresh temporary directory, which is
 * removed when the JVM exits.
 */
final class NativeLibrary {
  /** The system property naming a directory that holds both libraries. */
  static final String PATH_PROPERTY = "strideweave.library.path";

  static final String CORE = "libstrideweave.so.0";
  static final String JNI = "libstrideweave_jni.so";

  private static boolean loaded;

  private NativeLibrary() {}

  /** Loads both libraries if they are not loaded yet. */
  static synchronized void load() {
    if (loaded) {
      return;
    }
    String dir = System.getProperty(PATH_PROPERTY);
    Path base = dir != null && !dir.isEmpty() ? Paths.get(dir) : extract();
    // The core library first: the JNI library's dependency on it is then satisfied by the
    // loaded copy, whatever the dynamic linker's search path holds.
    System.load(base.resolve(CORE).toAbsolutePath().toString());
    System.load(base.resolve(JNI).toAbsolutePath().toString());
    loaded = true;
  }

  /** The jar's resource folder of this platform. */
  static String resourceFolder() {
    String os = System.getProperty("os.name").toLowerCase(Locale.ROOT).startsWith("linux") ? "linux" : "unknown";
    String arch = System.getProperty("os.arch");
    if (arch.equals("amd64") || arch.equals("x86_64")) {
      arch = "x86_64";
    }
    return "org/strideweave/native/" + os + "-" + arch + "/";
  }

  private static Path extract() {
    String folder = resourceFolder();
    try {
      Path dir = Files.createTempDirectory("strideweave-native");
      for (String name : new String[] {CORE, JNI}) {
        try (InputStream in = NativeLibrary.class.getClassLoader().getResourceAsStream(folder + name)) {
          if (in == null) {
            throw new UnsatisfiedLinkError("StrideWeave: " + folder + name + " is not in the jar (this platform "
                + "has no native library); set -D" + PATH_PROPERTY + "=DIR to load it from DIR");
          }
          Files.copy(in, dir.resolve(name), StandardCopyOption.REPLACE_EXISTING);
        }
      }
      java.lang.Runtime.getRuntime().addShutdownHook(new Thread(() -> removeQuietly(dir), "strideweave-native-cleanup"));
      return dir;
    } catch (IOException e) {
      throw new UncheckedIOException("StrideWeave: cannot extract the native libraries", e);
    }
  }

  private static void removeQuietly(Path dir) {
    try (Stream<Path> files = Files.walk(dir)) {
      files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException e) {
      // a temporary directory left behind is harmless
    }
  }
}
