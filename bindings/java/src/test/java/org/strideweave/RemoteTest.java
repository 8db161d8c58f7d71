package org.strideweave;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The remote carrier through the Java classes, against redis-server processes of the test's own
 * on unix sockets in temporary directories. The C suite tests the carrier's semantics and
 * failures; this tests the binding: every descriptor field reaches the library, the carrier
 * serves a TiledEvictable exactly as a host tier does, and the library's refusals arrive as the
 * exception classes of their codes. A missing redis-server fails these tests: it does not skip.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class RemoteTest extends Fixtures {
  /** A redis-server on a unix socket in a new directory; closing it stops it and removes both. */
  static final class Server implements AutoCloseable {
    final Path dir;
    final Path socket;
    final String password;
    private final Process process;

    Server(String password) throws IOException, InterruptedException {
      String binary = binary();
      dir = Files.createTempDirectory("sw-remote-java-");
      socket = dir.resolve("redis.sock");
      this.password = password;
      List<String> argv = new ArrayList<>(List.of(binary, "--port", "0", "--unixsocket", socket.toString(),
          "--unixsocketperm", "700", "--save", "", "--appendonly", "no", "--dir", dir.toString(),
          "--protected-mode", "yes", "--maxmemory-policy", "noeviction", "--logfile",
          dir.resolve("redis.log").toString(), "--daemonize", "no"));
      if (password != null) {
        argv.addAll(List.of("--requirepass", password));
      }
      process = new ProcessBuilder(argv).redirectErrorStream(true)
          .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
      long until = System.nanoTime() + Duration.ofSeconds(10).toNanos();
      while (true) {
        try {
          if (command("PING").equals("+PONG")) {
            return;
          }
        } catch (IOException e) {
          // not listening yet
        }
        if (!process.isAlive() || System.nanoTime() > until) {
          close();
          fail("redis-server did not answer PING within 10 s (see " + dir.resolve("redis.log") + ")");
        }
        Thread.sleep(10);
      }
    }

    /** The path of redis-server on the PATH, or a failure: these tests need it. */
    static String binary() {
      String path = System.getenv().getOrDefault("PATH", "/usr/bin:/bin");
      for (String d : path.split(File.pathSeparator)) {
        Path p = Path.of(d.isEmpty() ? "." : d, "redis-server");
        if (Files.isExecutable(p)) {
          return p.toString();
        }
      }
      return fail("redis-server is not on the PATH; the remote tests need it "
          + "(tools/install_deps.sh installs redis-server)");
    }

    String endpoint() {
      return "unix://" + socket;
    }

    /**
     * Runs one command (after AUTH when the server has a password) and returns the first line
     * of its reply: "+PONG", ":3", "-ERR ...".
     */
    String command(String... args) throws IOException {
      try (SocketChannel ch = SocketChannel.open(StandardProtocolFamily.UNIX)) {
        ch.connect(UnixDomainSocketAddress.of(socket));
        String reply = null;
        List<String[]> commands = new ArrayList<>();
        if (password != null) {
          commands.add(new String[] {"AUTH", password});
        }
        commands.add(args);
        for (String[] c : commands) {
          StringBuilder b = new StringBuilder("*").append(c.length).append("\r\n");
          for (String a : c) {
            b.append('$').append(a.getBytes(StandardCharsets.UTF_8).length).append("\r\n").append(a).append("\r\n");
          }
          ByteBuffer out = ByteBuffer.wrap(b.toString().getBytes(StandardCharsets.UTF_8));
          while (out.hasRemaining()) {
            ch.write(out);
          }
          reply = readLine(ch);
        }
        return reply;
      }
    }

    private static String readLine(SocketChannel ch) throws IOException {
      ByteArrayOutputStream line = new ByteArrayOutputStream();
      ByteBuffer one = ByteBuffer.allocate(1);
      while (true) {
        one.clear();
        if (ch.read(one) < 0) {
          throw new IOException("the server closed the connection");
        }
        byte c = one.get(0);
        if (c == '\n') {
          break;
        }
        if (c != '\r') {
          line.write(c);
        }
      }
      return line.toString(StandardCharsets.UTF_8);
    }

    /** Keys of the server's database, within 5 s of it reaching {@code want}. */
    long dbsize(long want) throws IOException, InterruptedException {
      long n = -1;
      for (long until = System.nanoTime() + Duration.ofSeconds(5).toNanos(); System.nanoTime() < until;
           Thread.sleep(10)) {
        n = Long.parseLong(command("DBSIZE").substring(1));
        if (n == want) {
          break;
        }
      }
      return n;
    }

    @Override
    public void close() {
      process.destroy();
      try {
        if (!process.waitFor(10, TimeUnit.SECONDS)) {
          process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        }
      } catch (InterruptedException e) {
        process.destroyForcibly();
        Thread.currentThread().interrupt();
      }
      try (Stream<Path> files = Files.walk(dir)) {
        files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      } catch (IOException e) {
        // best effort
      }
    }
  }

  static final long[] GRID = {4, 3};
  static final long[] TILE = {8, 5};
  static final int N = (int) (prod(GRID) * prod(TILE));
  static final int PER_TILE = (int) prod(TILE);

  /** Tiles by ordinal (first mode fastest) in GRID. */
  static TileSet ordinals(long... ks) {
    long[][] c = new long[ks.length][];
    for (int i = 0; i < ks.length; ++i) {
      c[i] = new long[] {ks[i] % GRID[0], ks[i] / GRID[0]};
    }
    return TileSet.of(c);
  }

  /**
   * A fixed sequence of evictions, a projection, an in-place update, a prefetch and promotions on
   * a TiledEvictable whose primary is seeded and whose secondary is {@code secondary} (empty);
   * returns every value it saw, one after another.
   */
  float[] runSequence(Carrier secondary) {
    float[] seed = arange(N, 0.37f, -5.5f);
    List<float[]> seen = new ArrayList<>();
    try (Carrier primary = Carrier.cpuFrom(rt, DType.F32, seed);
         TiledEvictable te = TiledEvictable.create(primary, secondary, GRID, TILE, null);
         Tensor full = te.fullTensor()) {
      // Dirty evictions, one block each.
      te.evict(ordinals(0, 2, 5, 7, 11));
      assertEquals(ordinals(0, 2, 5, 7, 11), te.secondaryTiles());
      // A projection over evicted and resident tiles.
      TileSelection s = sel(l(0, 2, 3), l(1, 2));
      try (Tensor compact = te.project(full, s, null).get()) {
        seen.add(compact.toFloatArray());
        // The projected values added back into the selected tiles (promoting the evicted ones).
        te.updateAsync(full, compact, s, ScatterReduction.ADD).get();
      }
      seen.add(full.toFloatArray());
      // Everything evicted, prefetched in part, promoted, read whole.
      te.evict(te.validTiles());
      assertEquals(TileSet.empty(), te.primaryTiles());
      try (Carrier sec = te.secondary()) {
        float[] stored = new float[N];
        sec.read(0, stored);
        seen.add(stored);
      }
      te.prefetchAsync(ordinals(1, 4, 9)).get();
      assertEquals(ordinals(1, 4, 9), te.primaryTiles());
      te.promote(te.validTiles());
      seen.add(full.toFloatArray());
    }
    int n = seen.stream().mapToInt(a -> a.length).sum();
    float[] out = new float[n];
    int at = 0;
    for (float[] a : seen) {
      System.arraycopy(a, 0, out, at, a.length);
      at += a.length;
    }
    return out;
  }

  static int[] bits(float[] v) {
    int[] out = new int[v.length];
    for (int i = 0; i < v.length; ++i) {
      out[i] = Float.floatToRawIntBits(v[i]);
    }
    return out;
  }

  @Test
  void aRemoteTierServesATiledEvictableAsAHostTierDoes() throws Exception {
    float[] want;
    try (Carrier host = Carrier.host(rt, DType.F32, 0)) {
      want = runSequence(host);
    }
    try (Server srv = new Server(null)) {
      for (boolean chunked : new boolean[] {false, true}) {
        RemoteOptions o = RemoteOptions.builder(srv.endpoint(), "java-tiled-" + chunked)
            .blockElements(PER_TILE) // one block per tile
            .chunkBytes(chunked ? 24 : 0) // several GETRANGE / SETRANGE commands a block, or one
            .requestsInFlight(chunked ? 3 : 0)
            .deadline(Duration.ofSeconds(10))
            .build();
        float[] got;
        try (Carrier remote = Carrier.remote(rt, DType.F32, 0, o)) {
          assertEquals(CarrierKind.REMOTE, remote.kind());
          got = runSequence(remote);
        }
        assertArrayEquals(bits(want), bits(got), "chunked " + chunked);
        // The namespace was the carrier's: releasing it deleted its keys.
        assertEquals(0, srv.dbsize(0));
      }
    }
  }

  @Test
  void aPersistentNamespaceIsOpenedAgainAndChecked() throws Exception {
    float[] values = arange(1000, 0.5f, 1);
    try (Server srv = new Server(null)) {
      RemoteOptions.Builder b = RemoteOptions.builder(List.of(srv.endpoint()), "java-seeded").blockElements(64);
      try (Carrier c = Carrier.remote(rt, DType.F32, values.length, b.persistent(true).build())) {
        assertEquals(CarrierKind.REMOTE, c.kind());
        assertEquals(values.length * 4L, c.storedBytes());
        c.write(0, values);
      }
      // Persistent: the keys outlive the carrier (header, CRCs, 16 blocks).
      assertEquals(18, srv.dbsize(18));
      RemoteOptions open = RemoteOptions.builder(srv.endpoint(), "java-seeded").build(); // the header's block size
      try (Carrier o = Carrier.openRemote(rt, DType.F32, values.length, open)) {
        assertEquals(CarrierKind.REMOTE, o.kind());
        float[] back = new float[values.length];
        o.read(0, back);
        assertArrayEquals(bits(values), bits(back));
        assertFalse(o.isReadOnly());
      }
      // A namespace the server does not hold.
      StorageIOException io = exact(StorageIOException.class, () -> Carrier.openRemote(rt, DType.F32, 960,
          RemoteOptions.builder(srv.endpoint(), "java-nothing-here").build()));
      assertTrue(io.getMessage().contains(srv.socket.toString()), io.getMessage());
      RemoteOptions ro = RemoteOptions.builder(srv.endpoint(), "java-seeded").blockElements(64).readOnly(true).build();
      try (Carrier o = Carrier.openRemote(rt, DType.F32, values.length, ro)) {
        assertTrue(o.isReadOnly());
        exact(InvalidStateException.class, () -> o.write(0, new float[] {1f}));
      }
      // Another block size, dtype, size, placement seed or endpoint count is refused, naming it.
      InvalidValueException e = exact(InvalidValueException.class, () -> Carrier.openRemote(rt, DType.F32,
          values.length, b.persistent(false).blockElements(32).build()));
      assertTrue(e.getMessage().contains("block_elements"), e.getMessage());
      e = exact(InvalidValueException.class, () -> Carrier.openRemote(rt, DType.F64, values.length, open));
      assertTrue(e.getMessage().contains("dtype"), e.getMessage());
      e = exact(InvalidValueException.class, () -> Carrier.openRemote(rt, DType.F32, values.length - 1, open));
      assertTrue(e.getMessage().contains("size"), e.getMessage());
      e = exact(InvalidValueException.class, () -> Carrier.openRemote(rt, DType.F32, values.length,
          RemoteOptions.builder(srv.endpoint(), "java-seeded").placementSeed(7).build()));
      assertTrue(e.getMessage().contains("placement_seed"), e.getMessage());
      e = exact(InvalidValueException.class, () -> Carrier.openRemote(rt, DType.F32, values.length,
          RemoteOptions.builder(List.of(srv.endpoint(), srv.endpoint()), "java-seeded").build()));
      assertTrue(e.getMessage().contains("endpoints"), e.getMessage());
      // Creating it again is a conflict; persistent is for creating only, read-only for opening.
      InvalidStateException s = exact(InvalidStateException.class,
          () -> Carrier.remote(rt, DType.F32, values.length, open));
      assertTrue(s.getMessage().contains("already exists"), s.getMessage());
      exact(InvalidValueException.class, () -> Carrier.openRemote(rt, DType.F32, values.length,
          RemoteOptions.builder(srv.endpoint(), "java-seeded").persistent(true).build()));
      exact(InvalidValueException.class, () -> Carrier.remote(rt, DType.F32, 4,
          RemoteOptions.builder(srv.endpoint(), "java-ro").readOnly(true).build()));
      // Opening never deletes: the keys are all there.
      assertEquals(18, srv.dbsize(18));
    }
  }

  @Test
  void anOpenedNamespaceServesATiledEvictable() throws Exception {
    try (Server srv = new Server(null)) {
      float[] want;
      RemoteOptions seed = RemoteOptions.builder(srv.endpoint(), "java-te").blockElements(PER_TILE).persistent(true)
          .build();
      try (Carrier host = Carrier.host(rt, DType.F32, 0); Carrier remote = Carrier.remote(rt, DType.F32, 0, seed)) {
        float[] a = runSequence(host);
        float[] b = runSequence(remote);
        assertArrayEquals(bits(a), bits(b));
        want = java.util.Arrays.copyOfRange(a, a.length - N, a.length); // the logical values at the end
      }
      // The secondary tier of the sequence holds its last values, tile after tile: open it and
      // promote through a new TiledEvictable.
      RemoteOptions open = RemoteOptions.builder(srv.endpoint(), "java-te").readOnly(true).build();
      try (Carrier tier = Carrier.openRemote(rt, DType.F32, N, open);
           Carrier primary = Carrier.cpu(rt, DType.F32, 0);
           TiledEvictable te = TiledEvictable.create(primary, tier, GRID, TILE, null);
           Tensor full = te.fullTensor()) {
        assertEquals(te.validTiles(), te.secondaryTiles());
        te.promote(te.validTiles());
        assertArrayEquals(bits(want), bits(full.toFloatArray()));
        try (Tensor compact = te.project(full, sel(l(3, 1), l(2)), null).get();
             Carrier hostTier = Carrier.host(rt, DType.F32, N)) {
          float[] stored = new float[N];
          tier.read(0, stored);
          hostTier.write(0, stored);
          try (Carrier p2 = Carrier.cpu(rt, DType.F32, 0);
               TiledEvictable ref = TiledEvictable.create(p2, hostTier, GRID, TILE, null);
               Tensor rfull = ref.fullTensor();
               Tensor rcompact = ref.project(rfull, sel(l(3, 1), l(2)), null).get()) {
            assertArrayEquals(bits(rcompact.toFloatArray()), bits(compact.toFloatArray()));
          }
        }
      }
    }
  }

  @Test
  void aNamespaceHasOneWriter() throws Exception {
    try (Server srv = new Server(null)) {
      RemoteOptions.Builder b = RemoteOptions.builder(srv.endpoint(), "java-lease").blockElements(64);
      RemoteOptions open = b.build();
      RemoteOptions reader = RemoteOptions.builder(srv.endpoint(), "java-lease").readOnly(true).build();
      try (Carrier w = Carrier.remote(rt, DType.F32, 256,
          b.persistent(true).lease(Duration.ofMinutes(2)).build())) {
        // The lease reached the library: its key lives up to 2 minutes, not the default 15 s.
        long ttl = Long.parseLong(srv.command("PTTL", "java-lease:w").substring(1));
        assertTrue(ttl > 15_000 && ttl <= 120_000, "PTTL " + ttl);
        // A second writer is refused, naming the holder (host:pid:id).
        InvalidStateException s = exact(InvalidStateException.class,
            () -> Carrier.openRemote(rt, DType.F32, 256, open));
        assertTrue(s.getMessage().contains("has a writer already"), s.getMessage());
        assertTrue(s.getMessage().contains("java-lease:w"), s.getMessage());
        assertTrue(s.getMessage().contains(":" + ProcessHandle.current().pid() + ":"), s.getMessage());
        // Readers are not writers: one opens beside the writer and reads what it wrote.
        try (Carrier r = Carrier.openRemote(rt, DType.F32, 256, reader)) {
          w.write(3, new float[] {2.5f});
          float[] one = new float[1];
          r.read(3, one);
          assertEquals(2.5f, one[0]);
        }
      }
      // Releasing the writer ended its lease: the next writer takes it.
      assertEquals("$-1", srv.command("GET", "java-lease:w"));
      try (Carrier w = Carrier.openRemote(rt, DType.F32, 256, open)) {
        assertFalse(w.isReadOnly());
      }
      // The binding's own checks of the lease.
      exact(InvalidValueException.class, () -> Carrier.openRemote(rt, DType.F32, 256,
          RemoteOptions.builder(srv.endpoint(), "java-lease").lease(Duration.ZERO).build()));
      exact(InvalidValueException.class, () -> Carrier.openRemote(rt, DType.F32, 256,
          RemoteOptions.builder(srv.endpoint(), "java-lease").lease(Duration.ofDays(100)).build()));
    }
  }

  @Test
  void readReplicasServeAReaderWhoseEndpointIsDown() throws Exception {
    float[] values = arange(N, 0.25f, -3);
    try (Server srv = new Server(null)) {
      // The endpoint is a socket nobody listens on; the live server is named as its replica.
      String down = "unix://" + srv.dir.resolve("down.sock");
      Map<String, List<String>> replicas = Map.of(down, List.of(srv.endpoint()));
      RemoteOptions seed = RemoteOptions.builder(srv.endpoint(), "java-rep").blockElements(PER_TILE).build();
      RemoteOptions ro = RemoteOptions.builder(down, "java-rep").readOnly(true).replicas(replicas).build();
      assertEquals(replicas, ro.replicas());
      assertThrows(UnsupportedOperationException.class, () -> ro.replicas().clear());
      try (Carrier writer = Carrier.remote(rt, DType.F32, N, seed);
           Carrier host = Carrier.host(rt, DType.F32, N)) {
        writer.write(0, values);
        host.write(0, values);
        // The writer is alive: the reader opens read-only, through the replica.
        try (Carrier tier = Carrier.openRemote(rt, DType.F32, N, ro)) {
          float[] back = new float[N];
          tier.read(0, back);
          assertArrayEquals(bits(values), bits(back));
          // Promotions read it too, as they read a host tier of the same values.
          try (Carrier p1 = Carrier.cpu(rt, DType.F32, 0);
               TiledEvictable te = TiledEvictable.create(p1, tier, GRID, TILE, null);
               Tensor full = te.fullTensor();
               Carrier p2 = Carrier.cpu(rt, DType.F32, 0);
               TiledEvictable ref = TiledEvictable.create(p2, host, GRID, TILE, null);
               Tensor rfull = ref.fullTensor()) {
            te.promote(te.validTiles());
            ref.promote(ref.validTiles());
            assertArrayEquals(bits(rfull.toFloatArray()), bits(full.toFloatArray()));
          }
        }
        // Without the replica the endpoint is down: IO naming it.
        StorageIOException io = exact(StorageIOException.class, () -> Carrier.openRemote(rt, DType.F32, N,
            RemoteOptions.builder(down, "java-rep").readOnly(true).build()));
        assertTrue(io.getMessage().contains("down.sock"), io.getMessage());
        // Replicas serve only read-only carriers.
        InvalidValueException v = exact(InvalidValueException.class, () -> Carrier.openRemote(rt, DType.F32, N,
            RemoteOptions.builder(down, "java-rep").replicas(replicas).build()));
        assertTrue(v.getMessage().contains("read replicas serve only"), v.getMessage());
        v = exact(InvalidValueException.class, () -> Carrier.remote(rt, DType.F32, N,
            RemoteOptions.builder(down, "java-rep2").replicas(replicas).build()));
        assertTrue(v.getMessage().contains("read replicas serve only"), v.getMessage());
        // A key that is not one of the endpoints: the binding's own check, naming it.
        v = exact(InvalidValueException.class, () -> Carrier.openRemote(rt, DType.F32, N,
            RemoteOptions.builder(down, "java-rep").readOnly(true)
                .replicas(Map.of("unix:///elsewhere.sock", List.of(srv.endpoint()))).build()));
        assertTrue(v.getMessage().contains("unix:///elsewhere.sock"), v.getMessage());
        assertThrows(NullPointerException.class, () -> RemoteOptions.builder(down, "java-rep")
            .replicas(java.util.Collections.singletonMap(down, null)));
      }
    }
  }

  @Test
  void credentialsAndTransportRules() throws Exception {
    Path dir = Files.createTempDirectory("sw-remote-java-pw-");
    try (Server srv = new Server("right-horse-battery")) {
      Path right = dir.resolve("right");
      Path wrong = dir.resolve("wrong");
      Path open = dir.resolve("open");
      Files.writeString(right, "right-horse-battery\n");
      Files.writeString(wrong, "wrong-staple\n");
      Files.writeString(open, "right-horse-battery\n");
      Files.setPosixFilePermissions(right, PosixFilePermissions.fromString("rw-------"));
      Files.setPosixFilePermissions(wrong, PosixFilePermissions.fromString("rw-------"));
      Files.setPosixFilePermissions(open, PosixFilePermissions.fromString("rw-r--r--"));
      RemoteOptions.Builder b = RemoteOptions.builder(srv.endpoint(), "java-auth").blockElements(128);
      // No password: the server refuses the commands.
      StorageIOException io = exact(StorageIOException.class, () -> Carrier.remote(rt, DType.F32, 512, b.build()));
      assertTrue(io.getMessage().contains("NOAUTH"), io.getMessage());
      // A wrong one, never printed.
      io = exact(StorageIOException.class, () -> Carrier.remote(rt, DType.F32, 512, b.passwordFile(wrong).build()));
      assertTrue(io.getMessage().contains("refused the credentials of user 'default'"), io.getMessage());
      assertFalse(io.getMessage().contains("wrong-staple"), io.getMessage());
      // A password file others may read is refused before use.
      InvalidValueException v = exact(InvalidValueException.class,
          () -> Carrier.remote(rt, DType.F32, 512, b.passwordFile(open).build()));
      assertTrue(v.getMessage().contains("mode 0644"), v.getMessage());
      // A user without a password file.
      exact(InvalidValueException.class,
          () -> Carrier.remote(rt, DType.F32, 512, b.passwordFile(null).user("someone").build()));
      // The right one, as the default user named explicitly.
      float[] values = arange(512, 1, 9);
      try (Carrier c = Carrier.remote(rt, DType.F32, 512, b.user("default").passwordFile(right).build())) {
        c.write(0, values);
        float[] back = new float[512];
        c.read(0, back);
        assertArrayEquals(bits(values), bits(back));
      }
      assertEquals(0, srv.dbsize(0));
    } finally {
      try (Stream<Path> files = Files.walk(dir)) {
        files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    }
    // Plaintext TCP to a host that is not a loopback address, unless allowed; no TLS in this build.
    RemoteOptions plain = RemoteOptions.builder("redis://10.1.2.3:6379", "t").build();
    InvalidValueException v = exact(InvalidValueException.class, () -> Carrier.remote(rt, DType.F32, 64, plain));
    assertTrue(v.getMessage().contains("not a loopback address"), v.getMessage());
    exact(UnsupportedFeatureException.class, () -> Carrier.remote(rt, DType.F32, 64,
        RemoteOptions.builder("rediss://127.0.0.1:6380", "t").build()));
    exact(InvalidValueException.class, () -> Carrier.remote(rt, DType.F32, 64,
        RemoteOptions.builder(List.of(), "t").build()));
    // With allowPlaintext such an endpoint passes the check and is connected to: port 1 of
    // 0.0.0.0 (this machine) refuses at once.
    RemoteOptions allowed = RemoteOptions.builder("redis://0.0.0.0:1", "t").allowPlaintext(true)
        .deadline(Duration.ofMillis(500)).build();
    exact(InvalidValueException.class, () -> Carrier.remote(rt, DType.F32, 64,
        RemoteOptions.builder("redis://0.0.0.0:1", "t").build()));
    Throwable t = assertThrows(Throwable.class, () -> Carrier.remote(rt, DType.F32, 64, allowed));
    assertTrue(t instanceof StorageIOException || t instanceof WaitTimeoutException, t.toString());
    // The binding's own checks.
    exact(InvalidValueException.class, () -> Carrier.remote(rt, DType.F32, 64,
        RemoteOptions.builder("unix:///tmp/x.sock", "t").deadline(Duration.ZERO).build()));
    exact(InvalidValueException.class, () -> Carrier.remote(rt, DType.F32, 64,
        RemoteOptions.builder("unix:///tmp/x.sock", "t").chunkBytes(-1).build()));
    exact(InvalidValueException.class, () -> Carrier.remote(rt, DType.F32, 64,
        RemoteOptions.builder("unix:///tmp/x.sock", "a\0b").build()));
    assertThrows(NullPointerException.class, () -> RemoteOptions.builder("unix:///tmp/x.sock", null));
  }
}
