package org.strideweave;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.strideweave.examples.MoeOffload;

/** The MoE example runs, and prints the C demo's hits and checksum on the same options. */
class ExampleTest {
  static final String[] SMALL = {"--experts", "8", "--dim", "64", "--topk", "2", "--tokens", "4", "--batches", "6",
                                 "--tier", "host", "--quiet"};

  static String runJava(String[] args) throws Exception {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    int status = MoeOffload.run(args, new PrintStream(bytes, true, StandardCharsets.UTF_8));
    String out = bytes.toString(StandardCharsets.UTF_8);
    assertEquals(0, status, out);
    return out;
  }

  static String runC(String[] args) throws Exception {
    Path demo = Paths.get(System.getProperty("strideweave.c.demo", "../../build/examples/c/moe_offload"));
    assumeTrue(Files.isExecutable(demo), "the C demo is not built: " + demo);
    List<String> cmd = new ArrayList<>();
    cmd.add(demo.toString());
    cmd.addAll(Arrays.asList(args));
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertEquals(0, p.waitFor(), out);
    return out;
  }

  /** The table's deterministic columns (run, hit rate, promoted and evicted MiB) per run. */
  static List<String> table(String out) {
    List<String> rows = new ArrayList<>();
    for (String line : out.split("\n")) {
      String[] f = line.trim().split("\\s+");
      if (f.length == 7 && (f[0].equals("offloaded") || f[0].equals("resident") || f[0].equals("naive"))) {
        rows.add(f[0] + " " + f[2] + " " + f[4] + " " + f[5]);
      }
    }
    return rows;
  }

  static String checksum(String out) {
    int at = out.indexOf("(checksum ");
    assertTrue(at >= 0, out);
    return out.substring(at, out.indexOf(')', at) + 1);
  }

  static List<String> hitsPerBatch(Path csv) throws Exception {
    return Files.readAllLines(csv).stream().skip(1).map(r -> {
      String[] f = r.split(",");
      return f[0] + "," + f[1] + "," + f[4];
    }).collect(Collectors.toList());
  }

  static String[] with(String[] args, String... more) {
    String[] all = Arrays.copyOf(args, args.length + more.length);
    System.arraycopy(more, 0, all, args.length, more.length);
    return all;
  }

  @Test
  void theExamplePrintsTheCDemosHitsAndChecksum(@TempDir Path tmp) throws Exception {
    Path javaCsv = tmp.resolve("java.csv");
    Path cCsv = tmp.resolve("c.csv");
    String java = runJava(with(SMALL, "--csv", javaCsv.toString()));
    String c = runC(with(SMALL, "--csv", cCsv.toString()));
    assertTrue(java.contains("outputs identical across runs"), java);
    assertEquals(checksum(c), checksum(java));
    assertEquals(table(c), table(java));
    assertEquals(3, table(java).size(), java);
    assertEquals(hitsPerBatch(cCsv), hitsPerBatch(javaCsv));
    assertEquals(18, hitsPerBatch(javaCsv).size());
  }

  @Test
  void withoutAPolicyAndOnAFileOrZstdTierTheFiguresStillMatch() throws Exception {
    for (String[] options : new String[][] {{"--policy", "none"}, {"--tier", "file", "--budget", "0.5"},
                                            {"--tier", "zstd", "--dtype", "bf16"}}) {
      String[] args = with(SMALL, options);
      String java = runJava(args);
      String c = runC(args);
      assertEquals(checksum(c), checksum(java), String.join(" ", options));
      assertEquals(table(c), table(java), String.join(" ", options));
    }
  }

  @Test
  void trainingFitsAndEveryUpdateSurvivesEviction() throws Exception {
    String[] args = {"--experts", "6", "--dim", "16", "--tokens", "8", "--batches", "24", "--train", "--quiet"};
    String java = runJava(args);
    assertTrue(java.contains("training verified"), java);
    String c = runC(args);
    // The same losses: the library computes both runs from the same weights and tokens.
    assertEquals(c.substring(c.indexOf("training:")), java.substring(java.indexOf("training:")));
  }

  @Test
  void onAVulkanPrimaryTheFiguresMatchToo() throws Exception {
    String[] args = with(SMALL, "--compute", "vulkan");
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    int status = MoeOffload.run(args, new PrintStream(bytes, true, StandardCharsets.UTF_8));
    assumeTrue(status != 77, "no Vulkan device");
    String java = bytes.toString(StandardCharsets.UTF_8);
    assertEquals(0, status, java);
    assertTrue(java.contains("Vulkan device memory"), java);
    String c = runC(args);
    assertEquals(checksum(c), checksum(java));
    assertEquals(table(c), table(java));
  }

  @Test
  void badArgumentsExitWithTheUsageStatus() throws Exception {
    assertEquals(2, MoeOffload.run(new String[] {"--tier", "tape"}, new PrintStream(new ByteArrayOutputStream())));
  }
}
