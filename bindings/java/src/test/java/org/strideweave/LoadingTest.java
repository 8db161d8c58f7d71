package org.strideweave;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * How the native libraries are found, each case in a fresh JVM (a JVM loads them once): without
 * {@code strideweave.library.path} they are extracted from the packaged resources (the jar's
 * {@code org/strideweave/native/linux-x86_64/}, here {@code target/classes}) into a temporary
 * directory removed at exit; with it they are loaded from that directory, and a directory
 * without them fails naming the path.
 */
class LoadingTest {
  /** The child JVM's entry point: prints the version and where the JNI library was mapped from. */
  static final class Probe {
    public static void main(String[] args) throws Exception {
      System.out.println("version " + StrideWeave.versionString());
      try (Stream<String> maps = Files.lines(Paths.get("/proc/self/maps"))) {
        maps.filter(l -> l.endsWith("/" + NativeLibrary.JNI)).findFirst()
            .ifPresent(l -> System.out.println("jni " + l.substring(l.indexOf('/'))));
      }
    }
  }

  record Outcome(int status, String out) {}

  static Outcome runProbe(String libraryPath) throws Exception {
    Path target = Paths.get(System.getProperty("strideweave.jar.dir", "target"));
    Path classes = target.resolve("classes");
    assumeTrue(Files.isRegularFile(classes.resolve(NativeLibrary.resourceFolder() + NativeLibrary.JNI)),
               "the native libraries are not packed into " + classes);
    List<String> cmd = new ArrayList<>();
    cmd.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
    cmd.add("--enable-native-access=ALL-UNNAMED");
    if (libraryPath != null) {
      cmd.add("-D" + NativeLibrary.PATH_PROPERTY + "=" + libraryPath);
    }
    cmd.add("-cp");
    cmd.add(classes + File.pathSeparator + target.resolve("test-classes"));
    cmd.add(Probe.class.getName());
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    return new Outcome(p.waitFor(), out);
  }

  static String jniPath(String out) {
    for (String line : out.split("\n")) {
      if (line.startsWith("jni ")) {
        return line.substring(4).trim();
      }
    }
    throw new AssertionError("the probe did not report the JNI library: " + out);
  }

  @Test
  void withoutThePropertyTheLibrariesAreExtractedAndRemovedAtExit() throws Exception {
    Outcome o = runProbe(null);
    assertEquals(0, o.status(), o.out());
    assertTrue(o.out().contains("version 0.3.0"), o.out());
    Path jni = Paths.get(jniPath(o.out()));
    Path dir = jni.getParent();
    assertTrue(dir.getFileName().toString().startsWith("strideweave-native"), o.out());
    assertTrue(dir.startsWith(Paths.get(System.getProperty("java.io.tmpdir")).toRealPath()), o.out());
    assertFalse(Files.exists(dir), "the extracted libraries were left behind in " + dir);
  }

  @Test
  void thePropertyLoadsFromTheNamedDirectory() throws Exception {
    String dir = System.getProperty(NativeLibrary.PATH_PROPERTY);
    assumeTrue(dir != null && !dir.isEmpty(), "the suite runs without " + NativeLibrary.PATH_PROPERTY);
    Outcome o = runProbe(dir);
    assertEquals(0, o.status(), o.out());
    assertEquals(Paths.get(dir, NativeLibrary.JNI).toRealPath(), Paths.get(jniPath(o.out())).toRealPath());
  }

  @Test
  void aDirectoryWithoutTheLibrariesFailsNamingThePath(@TempDir Path empty) throws Exception {
    Outcome o = runProbe(empty.toString());
    assertNotEquals(0, o.status(), o.out());
    assertTrue(o.out().contains("UnsatisfiedLinkError"), o.out());
    assertTrue(o.out().contains(empty.resolve(NativeLibrary.CORE).toString()), o.out());
  }
}
