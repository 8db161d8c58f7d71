package org.strideweave;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import org.junit.jupiter.api.Test;
import org.strideweave.examples.Quickstart;

/**
 * The first java block of docs/quickstart-java.md is examples/java's Quickstart.java (its package
 * line aside), and the program prints the page's text block.
 */
class QuickstartTest {
  static final Path ROOT = Paths.get("").toAbsolutePath().getParent().getParent();
  static final String PACKAGE = "package org.strideweave.examples;\n\n";

  @Test
  void theSnippetRunsAndPrintsWhatThePageSays() throws Exception {
    String doc = Files.readString(ROOT.resolve("docs/quickstart-java.md"));
    String[] afterFence = doc.split("```java\n", 2)[1].split("```\n", 2);
    String code = afterFence[0];
    String source = Files.readString(ROOT.resolve("examples/java/org/strideweave/examples/Quickstart.java"));
    assertTrue(source.startsWith(PACKAGE), "Quickstart.java starts with " + PACKAGE.strip());
    assertEquals(code, source.substring(PACKAGE.length()));

    // The promised output: the ```text block right after the code ("It prints:" before it).
    String rest = afterFence[1];
    int text = rest.indexOf("```text\n");
    assertTrue(text >= 0, "no ```text block after the java block");
    String between = rest.substring(0, text).strip();
    assertTrue(between.isEmpty() || (!between.contains("\n") && between.endsWith(":")),
        "only a line ending with ':' may stand between the code and its output, not: " + between);
    String stated = rest.substring(text + "```text\n".length()).split("```", 2)[0];

    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    Method run = Quickstart.class.getDeclaredMethod("run", PrintStream.class);
    run.setAccessible(true);
    run.invoke(null, new PrintStream(bytes, true, StandardCharsets.UTF_8));
    String printed = bytes.toString(StandardCharsets.UTF_8);
    assertEquals(stated, printed);
    assertTrue(printed.startsWith("115.0 "));
  }
}
