package org.strideweave;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.strideweave.examples.Quickstart;

/** docs/quickstart-java.md's snippet is Quickstart.java's, and prints what the page says. */
class QuickstartTest {
  static final Path ROOT = Paths.get("").toAbsolutePath().getParent().getParent();

  @Test
  void theSnippetRunsAndPrintsWhatThePageSays() throws Exception {
    String doc = Files.readString(ROOT.resolve("docs/quickstart-java.md"));
    String code = doc.split("```java\n", 2)[1].split("```", 2)[0];
    String source = Files.readString(ROOT.resolve("examples/java/org/strideweave/examples/Quickstart.java"));
    String body = source.split("    // --- docs/quickstart-java.md ---\n", 2)[1].split("    // --- end ---\n", 2)[0];
    String dedented = body.lines().map(l -> l.startsWith("    ") ? l.substring(4) : l)
        .collect(Collectors.joining("\n", "", "\n"));
    assertEquals(dedented, code);
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    Quickstart.run(new PrintStream(bytes, true, StandardCharsets.UTF_8));
    String printed = bytes.toString(StandardCharsets.UTF_8);
    String stated = doc.split("It prints:\n\n", 2)[1].split("\n\n", 2)[0].lines().map(String::strip)
        .collect(Collectors.joining("\n", "", "\n"));
    assertEquals(stated, printed);
    assertTrue(printed.startsWith("115.0 "));
  }
}
