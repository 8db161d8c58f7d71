package org.strideweave;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.sun.nio.file.ExtendedOpenOption;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The model-file openers and savers through Java: files written byte by byte here, opened as
 * FileTensors, their TiledEvictables promoted and projected with exact values, stacks over one
 * and two files, the options passed through (and what a carrier reports of them, fileIo),
 * ownership of the carrier, the string marshalling (exact UTF-8, NUL and null checks) and the
 * error kinds. The C suite (test_model_files.c) proves the parsers themselves.
 */
class ModelFilesTest extends Fixtures {
  static final int E = 4;
  static final int O = 2;
  static final int I = 3;

  @TempDir Path dir;

  /** The weight at [e, o, i] of the test experts. */
  static float w(long e, long o, long i) {
    return 100 * e + 10 * o + i;
  }

  /** Little-endian f32 bytes of experts {@code which}, each (O, I) row-major. */
  static byte[] experts(int... which) {
    ByteBuffer b = ByteBuffer.allocate(which.length * O * I * 4).order(ByteOrder.LITTLE_ENDIAN);
    for (int e : which) {
      for (int o = 0; o < O; ++o) {
        for (int i = 0; i < I; ++i) {
          b.putFloat(w(e, o, i));
        }
      }
    }
    return b.array();
  }

  /** An npy 1.0 file: magic, version, header length, the dictionary padded to 64 bytes, data. */
  static byte[] npy(String dict, byte[] data) {
    byte[] d = dict.getBytes(StandardCharsets.US_ASCII);
    int len = d.length + 1;
    int pad = (64 - (10 + len) % 64) % 64;
    ByteBuffer b = ByteBuffer.allocate(10 + len + pad + data.length).order(ByteOrder.LITTLE_ENDIAN);
    b.put((byte) 0x93).put("NUMPY".getBytes(StandardCharsets.US_ASCII)).put((byte) 1).put((byte) 0);
    b.putShort((short) (len + pad)).put(d);
    for (int k = 0; k < pad; ++k) {
      b.put((byte) ' ');
    }
    return b.put((byte) '\n').put(data).array();
  }

  /** A safetensors file: the header's length (8 bytes, little-endian), the JSON header, data. */
  static byte[] safetensors(String json, byte[] data) {
    byte[] h = json.getBytes(StandardCharsets.UTF_8);
    return ByteBuffer.allocate(8 + h.length + data.length).order(ByteOrder.LITTLE_ENDIAN)
        .putLong(h.length).put(h).put(data).array();
  }

  /**
   * The JSON entries of f32 tensors {@code names}, each of {@code shape}, one after another from
   * byte {@code start} of the data.
   */
  static String entries(long start, long[] shape, String... names) {
    long bytes = prod(shape) * 4;
    List<String> parts = new ArrayList<>();
    for (int k = 0; k < names.length; ++k) {
      parts.add("\"" + names[k] + "\":{\"dtype\":\"F32\",\"shape\":" + Arrays.toString(shape).replace(" ", "")
          + ",\"data_offsets\":[" + (start + k * bytes) + "," + (start + (k + 1) * bytes) + "]}");
    }
    return String.join(",", parts);
  }

  static byte[] concat(byte[]... parts) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (byte[] p : parts) {
      out.writeBytes(p);
    }
    return out.toByteArray();
  }

  Path write(String name, byte[] bytes) throws Exception {
    return Files.write(dir.resolve(name), bytes);
  }

  Path expertsNpy() throws Exception {
    return write("experts.npy",
        npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 2, 3), }", experts(0, 1, 2, 3)));
  }

  /** Expert names with a non-ASCII tail, a supplementary character included (exact UTF-8). */
  static String expert(int e) {
    return "layers.0.experts." + e + ".w1.\u00fc\u20ac\uD835\uDD3C";
  }

  /** A file holding "w", all experts as one (E, O, I) tensor, then each expert as its own. */
  Path model() throws Exception {
    String json = "{\"__metadata__\":{\"format\":\"pt\"}," + entries(0, l(E, O, I), "w") + ","
        + entries(E * O * I * 4, l(O, I), expert(0), expert(1), expert(2), expert(3)) + "}";
    return write("model.safetensors", safetensors(json, concat(experts(0, 1, 2, 3), experts(0, 1, 2, 3))));
  }

  /** Checks the geometry the openers give a row-major (count, O, I) tensor. */
  static void rowMajor(FileTensor ft, long count) {
    assertEquals(DType.F32, ft.dtype());
    assertEquals(3, ft.rank());
    assertArrayEquals(l(count, O, I), ft.shape());
    assertEquals(FileOrder.ROW_MAJOR, ft.order());
    assertEquals(count * O * I * 4, ft.dataBytes());
    assertArrayEquals(l(I, O, count), ft.logicalShape());
    assertArrayEquals(l(1, 1, count), ft.gridShape());
    assertArrayEquals(l(I, O, 1), ft.tileShape());
    assertArrayEquals(l(2, 1, 0), ft.permutation());
    assertEquals(CarrierKind.FILE, ft.carrier().kind());
    assertTrue(ft.carrier().isReadOnly());
    assertEquals(count * O * I, ft.carrier().size());
  }

  /** Projects tiles {@code chosen} and checks the compact tensor, permuted to file order. */
  static void projectsExperts(FileTensor ft, long[] chosen, long[] expertOfTile) {
    try (TiledEvictable tiled = ft.tiled(); Tensor full = tiled.fullTensor();
         AwaitProjection pending = tiled.project(full, sel(l(0), l(0), chosen), null);
         Tensor compact = pending.get(); Tensor experts = compact.permute(ft.permutation())) {
      assertArrayEquals(l(I, O, chosen.length), compact.shape());
      assertArrayEquals(l(chosen.length, O, I), experts.shape());
      for (int s = 0; s < chosen.length; ++s) {
        for (int o = 0; o < O; ++o) {
          for (int i = 0; i < I; ++i) {
            assertEquals(w(expertOfTile[(int) chosen[s]], o, i), experts.get(s, o, i), "at " + s + o + i);
          }
        }
      }
    }
  }

  static long[] identity(int n) {
    long[] v = new long[n];
    for (int k = 0; k < n; ++k) {
      v[k] = k;
    }
    return v;
  }

  @Test
  void anNpyFileOpensWithTheExpertGeometryAndItsTilesPromoteAndProject() throws Exception {
    try (FileTensor ft = Carrier.openNpy(rt, expertsNpy())) {
      rowMajor(ft, E);
      assertEquals(128, ft.dataOffset());
      assertEquals(1, ft.segments());
      try (TiledEvictable tiled = ft.tiled(); Tensor full = tiled.fullTensor(); Tensor view = ft.view(full)) {
        assertArrayEquals(l(I, O, E), full.shape());
        assertArrayEquals(l(E, O, I), view.shape());
        assertEquals(TileState.Location.SECONDARY, tiled.tileState(0, 0, 3).location());
        tiled.promote(TileSet.of(l(0, 0, 3)));
        assertEquals(TileState.Location.PRIMARY, tiled.tileState(0, 0, 3).location());
        assertEquals(312.0, view.get(3, 1, 2));
        assertEquals(312.0, full.get(2, 1, 3));
        assertEquals(12.0, view.get(0, 1, 2)); // from the file: tile 0 still secondary
      }
    }
    try (FileTensor ft = Carrier.openNpy(rt, dir.resolve("experts.npy"))) {
      projectsExperts(ft, l(3, 1), identity(E));
    }
  }

  @Test
  void aSafetensorsTensorAndAStackOfNamedTensorsOpen() throws Exception {
    Path model = model();
    try (FileTensor ft = Carrier.openSafetensors(rt, model, "w")) {
      rowMajor(ft, E);
      assertEquals(1, ft.segments());
      projectsExperts(ft, l(2, 0, 3), identity(E));
    }
    // A stack in another order than the file's: tile k is names[k].
    try (FileTensor ft = Carrier.openSafetensors(rt, model, List.of(expert(2), expert(0), expert(3)))) {
      rowMajor(ft, 3);
      assertEquals(3, ft.segments());
      projectsExperts(ft, l(0, 2, 1), l(2, 0, 3));
    }
    // One tensor of the stack alone: (O, I), one tile.
    try (FileTensor ft = Carrier.openSafetensors(rt, model, expert(1))) {
      assertArrayEquals(l(O, I), ft.shape());
      assertArrayEquals(l(I, O), ft.logicalShape());
      try (TiledEvictable tiled = ft.tiled(); Tensor full = tiled.fullTensor(); Tensor view = ft.view(full)) {
        assertEquals(112.0, view.get(1, 2));
      }
    }
  }

  @Test
  void aStackOverTwoShardFilesOpens() throws Exception {
    String json = "{" + entries(0, l(O, I), expert(0), expert(2)) + "}";
    Path a = write("model-00001-of-00002.safetensors", safetensors(json, experts(0, 2)));
    json = "{" + entries(0, l(O, I), expert(1), expert(3)) + "}";
    Path b = write("model-00002-of-00002.safetensors", safetensors(json, experts(1, 3)));
    List<String> names = List.of(expert(0), expert(1), expert(2), expert(3));
    try (FileTensor ft = Carrier.openSafetensors(rt, List.of(a, b, a, b), names)) {
      rowMajor(ft, E);
      assertEquals(E, ft.segments());
      projectsExperts(ft, l(3, 0, 1, 2), identity(E));
    }
    // The options reach the carrier: direct I/O (falling back where refused), small requests.
    FileOptions small = FileOptions.builder().directIo(true).chunkBytes(4096).requestsInFlight(2).build();
    try (FileTensor ft = Carrier.openSafetensors(rt, List.of(a, b, a, b), names, small)) {
      projectsExperts(ft, l(1, 3), identity(E));
    }
    InvalidValueException e = exact(InvalidValueException.class,
        () -> Carrier.openSafetensors(rt, List.of(a, b), names));
    assertTrue(e.getMessage().contains("2 paths for 4 tensor names"), e.getMessage());
    // A name its file lacks: the library's VALUE, naming the file.
    e = exact(InvalidValueException.class, () -> Carrier.openSafetensors(rt, List.of(b, a), names.subList(0, 2)));
    assertTrue(e.getMessage().contains(b.getFileName().toString()), e.getMessage());
  }

  @Test
  void aRawTensorOpensInEitherOrder() throws Exception {
    Path raw = write("w.bin", concat(new byte[16], experts(0, 1, 2, 3)));
    try (FileTensor ft = Carrier.openRaw(rt, raw, Carrier.RawSpec.of(DType.F32, E, O, I).at(16))) {
      rowMajor(ft, E);
      assertEquals(16, ft.dataOffset());
      projectsExperts(ft, l(1), identity(E));
    }
    // The same bytes read first mode fastest: (I, O, E) is the full tensor itself.
    Carrier.RawSpec fastest = new Carrier.RawSpec(DType.F32, 16, l(I, O, E), FileOrder.FIRST_MODE_FASTEST);
    try (FileTensor ft = Carrier.openRaw(rt, raw, fastest, FileOptions.builder().directIo(true).build())) {
      assertEquals(FileOrder.FIRST_MODE_FASTEST, ft.order());
      assertArrayEquals(l(I, O, E), ft.logicalShape());
      assertArrayEquals(l(0, 1, 2), ft.permutation());
      assertArrayEquals(l(1, 1, E), ft.gridShape());
      try (TiledEvictable tiled = ft.tiled(); Tensor full = tiled.fullTensor(); Tensor view = ft.view(full)) {
        assertEquals(312.0, view.get(2, 1, 3));
      }
    }
    exact(InvalidValueException.class, () -> Carrier.openRaw(rt, raw, Carrier.RawSpec.of(DType.F32, E, O, I).at(32)));
  }

  @Test
  void optionObjectsHoldWhatTheyWereGiven() {
    assertEquals(FileOptions.DEFAULTS, FileOptions.builder().build());
    assertEquals(new FileOptions(true, 4096, 2),
        FileOptions.builder().directIo(true).chunkBytes(4096).requestsInFlight(2).build());
    long[] shape = l(E, O, I);
    Carrier.RawSpec spec = Carrier.RawSpec.of(DType.BF16, shape).at(64).inOrder(FileOrder.FIRST_MODE_FASTEST);
    shape[0] = 99; // the spec copied the shape
    assertEquals(DType.BF16, spec.dtype());
    assertEquals(64, spec.byteOffset());
    assertArrayEquals(l(E, O, I), spec.shape());
    assertEquals(FileOrder.FIRST_MODE_FASTEST, spec.order());
    spec.shape()[0] = 99; // and hands out copies
    assertArrayEquals(l(E, O, I), spec.shape());
    exact(NullPointerException.class, () -> Carrier.RawSpec.of(null, 1));
    exact(NullPointerException.class, () -> new Carrier.RawSpec(DType.F32, 0, null, FileOrder.ROW_MAJOR));
    exact(NullPointerException.class, () -> Carrier.openNpy(rt, Path.of("x.npy"), null));
  }

  /** Whether the file system opens {@code path} with O_DIRECT (where it refuses, carriers read buffered). */
  static boolean opensWithODirect(Path path) {
    try (FileChannel c = FileChannel.open(path, StandardOpenOption.READ, ExtendedOpenOption.DIRECT)) {
      return true;
    } catch (IOException | UnsupportedOperationException e) {
      return false;
    }
  }

  @Test
  void aBufferedFileCarrierMovesItsBytesWithTheDefaults() throws Exception {
    try (Carrier scratch = Carrier.file(rt, DType.F32, 16, dir); FileTensor ft = Carrier.openNpy(rt, expertsNpy())) {
      for (Carrier c : List.of(scratch, ft.carrier())) {
        FileIo io = c.fileIo();
        assertEquals(4194304, io.chunkBytes());
        assertEquals(4, io.requestsInFlight());
        assertFalse(io.directIo());
        assertEquals(FileIo.Source.DEFAULT, io.source());
        assertEquals(0.0, io.deviceReadBytesPerSecond());
      }
      FileIo io = scratch.fileIo();
      assertEquals(io, new FileIo(4 << 20, 4, false, FileIo.Source.DEFAULT, io.device(), 0.0));
      scratch.dispose();
      assertEquals(io, scratch.fileIo()); // still answers
    }
  }

  @Test
  void aFileCarrierMovesItsBytesAsItsOptionsSay() throws Exception {
    Path raw = write("w.bin", concat(new byte[16], experts(0, 1, 2, 3)));
    for (boolean directIo : new boolean[] {false, true}) {
      FileOptions set = FileOptions.builder().directIo(directIo).chunkBytes(1 << 20).requestsInFlight(3).build();
      try (Carrier scratch = Carrier.file(rt, DType.F32, 1024, dir, set);
           FileTensor ft = Carrier.openRaw(rt, raw, Carrier.RawSpec.of(DType.F32, E, O, I).at(16), set)) {
        for (Carrier c : List.of(scratch, ft.carrier())) {
          FileIo io = c.fileIo();
          assertEquals(1048576, io.chunkBytes());
          assertEquals(3, io.requestsInFlight());
          assertEquals(FileIo.Source.DEFAULT, io.source());
          assertEquals(0.0, io.deviceReadBytesPerSecond());
          if (!directIo) {
            assertFalse(io.directIo());
          }
        }
      }
    }
  }

  @Test
  void aDirectIoFileCarrierReadsThroughODirectWhereTheFileSystemAllowsIt() throws Exception {
    Path raw = write("w.bin", concat(new byte[16], experts(0, 1, 2, 3)));
    FileOptions set = FileOptions.builder().directIo(true).chunkBytes(1 << 20).requestsInFlight(3).build();
    try (Carrier scratch = Carrier.file(rt, DType.F32, 1024, dir, set);
         FileTensor ft = Carrier.openRaw(rt, raw, Carrier.RawSpec.of(DType.F32, E, O, I).at(16), set)) {
      assumeTrue(opensWithODirect(raw), "the file system of " + dir + " refuses O_DIRECT: its carriers read buffered");
      assertTrue(scratch.fileIo().directIo());
      assertTrue(ft.carrier().fileIo().directIo());
    }
  }

  @Test
  void onlyAFileCarrierHasFileIo() {
    try (Carrier cpu = Carrier.cpu(rt, DType.F32, 4); Carrier host = Carrier.host(rt, DType.F32, 4);
         Carrier zstd = Carrier.zstd(rt, DType.F32, 4, 1, 0); Carrier file = Carrier.file(rt, DType.F32, 4, dir);
         Carrier primary = Carrier.cpu(rt, DType.F32, 0);
         TiledEvictable tiled = TiledEvictable.create(primary, file, l(2), l(2), null)) {
      for (Carrier c : List.of(cpu, host, zstd, tiled)) {
        TypeMismatchException e = exact(TypeMismatchException.class, c::fileIo);
        assertTrue(e.getMessage().contains("not a File carrier"), e.getMessage());
      }
    }
  }

  @Test
  @SuppressWarnings("deprecation")
  void theDeprecatedPositionalOpenersDelegate() throws Exception {
    Path raw = write("w.bin", concat(new byte[16], experts(0, 1, 2, 3)));
    try (FileTensor ft = Carrier.openRaw(rt, raw, DType.F32, 16, l(E, O, I), FileOrder.ROW_MAJOR, true, 4096, 2)) {
      rowMajor(ft, E);
      projectsExperts(ft, l(2), identity(E));
    }
    exact(InvalidValueException.class, () -> Carrier.openRaw(rt, raw, DType.F32, 32, l(E, O, I), FileOrder.ROW_MAJOR));
    exact(NullPointerException.class, () -> Carrier.openRaw(rt, null, null, 0, null, null));
    try (FileTensor ft = Carrier.openNpy(rt, expertsNpy(), true, 0, 0)) {
      rowMajor(ft, E);
    }
  }

  /**
   * A GGUF v3 file holding the experts as llama.cpp stacks them, ne (I, O, E), and a Q4_1 tensor (a
   * ggml type StrideWeave has no dtype for).
   */
  Path gguf() throws Exception {
    ByteBuffer b = ByteBuffer.allocate(4096).order(ByteOrder.LITTLE_ENDIAN);
    b.put("GGUF".getBytes(StandardCharsets.US_ASCII)).putInt(3).putLong(2).putLong(0);
    byte[] name = "blk.0.ffn_up_exps.weight".getBytes(StandardCharsets.US_ASCII);
    b.putLong(name.length).put(name).putInt(3).putLong(I).putLong(O).putLong(E).putInt(0).putLong(0);
    b.putLong(1).put((byte) 'q').putInt(1).putLong(32).putInt(3).putLong(E * O * I * 4);
    while (b.position() % 32 != 0) {
      b.put((byte) 0);
    }
    b.put(experts(0, 1, 2, 3)).put(new byte[20]);
    return write("experts.gguf", Arrays.copyOf(b.array(), b.position()));
  }

  @Test
  void aGgufStackedExpertTensorOpensOneExpertPerTile() throws Exception {
    Path path = gguf();
    try (FileTensor ft = Carrier.openGguf(rt, path, "blk.0.ffn_up_exps.weight", FileOptions.builder().directIo(true).build())) {
      rowMajor(ft, E);
      assertEquals(1, ft.segments());
      projectsExperts(ft, l(3, 0), identity(E));
    }
    UnsupportedFeatureException u = exact(UnsupportedFeatureException.class, () -> Carrier.openGguf(rt, path, "q"));
    assertTrue(u.getMessage().contains("unsupported dtype: ggml type Q4_1"), u.getMessage());
    exact(InvalidValueException.class, () -> Carrier.openGguf(rt, path, "nope"));
    Path notGguf = expertsNpy();
    DataCorruptException c = exact(DataCorruptException.class, () -> Carrier.openGguf(rt, notGguf, "w"));
    assertTrue(c.getMessage().contains("not a GGUF file"), c.getMessage());
  }

  @Test
  void errorsArriveAsTheirKinds() throws Exception {
    Path missing = dir.resolve("missing.safetensors");
    assertEquals(ErrorCode.IO, exact(StorageIOException.class, () -> Carrier.openNpy(rt, missing)).code());
    assertEquals(ErrorCode.IO, exact(StorageIOException.class, () -> Carrier.openSafetensors(rt, missing, "w")).code());
    Path badMagic = write("bad.npy", concat("\u0093NUMPX".getBytes(StandardCharsets.ISO_8859_1), new byte[128]));
    DataCorruptException c = exact(DataCorruptException.class, () -> Carrier.openNpy(rt, badMagic));
    assertEquals(ErrorCode.DATA_CORRUPT, c.code());
    assertTrue(c.getMessage().contains("bad.npy"), c.getMessage());
    Path badLength = write("bad.safetensors", concat(new byte[] {(byte) 0xff, 0x7f, 0, 0, 0, 0, 0, 0}, "{}".getBytes(
        StandardCharsets.US_ASCII)));
    exact(DataCorruptException.class, () -> Carrier.openSafetensors(rt, badLength, "w"));
    exact(DataCorruptException.class, () -> Carrier.openSafetensors(rt, List.of(badLength), List.of("w")));
    Path model = model();
    InvalidValueException v = exact(InvalidValueException.class, () -> Carrier.openSafetensors(rt, model, "nope"));
    assertEquals(ErrorCode.VALUE, v.code());
    assertTrue(v.getMessage().contains("nope"), v.getMessage());
    exact(InvalidValueException.class, () -> Carrier.openSafetensors(rt, model, List.of("w", "nope")));
    exact(InvalidValueException.class, () -> Carrier.openSafetensors(rt, model, List.of()));
    exact(InvalidValueException.class, () -> Carrier.openSafetensors(rt, model, List.of(expert(0), expert(0))));
    Path i8 = write("i8.safetensors", safetensors("{\"q\":{\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[0,2]}}",
        new byte[2]));
    exact(UnsupportedFeatureException.class, () -> Carrier.openSafetensors(rt, i8, "q"));
    // Checks of the Java side: a NUL inside a string, nulls.
    exact(InvalidValueException.class, () -> Carrier.openSafetensors(rt, model, "w\0"));
    exact(InvalidValueException.class, () -> Carrier.openSafetensors(rt, model, List.of("w", "x\0y")));
    exact(NullPointerException.class, () -> Carrier.openNpy(rt, null));
    exact(NullPointerException.class, () -> Carrier.openNpy(null, model));
    exact(NullPointerException.class, () -> Carrier.openSafetensors(rt, model, Arrays.asList("w", null)));
    try (FileTensor ft = Carrier.openSafetensors(rt, model, "w");
         Tensor flat = Tensor.fromArray(rt, new float[] {1, 2}, 2)) {
      exact(InvalidValueException.class, () -> ft.view(flat)); // ranks differ
    }
  }

  @Test
  void theFileTensorOwnsItsCarrierAndTheTiledEvictableKeepsTheFile() throws Exception {
    Path path = expertsNpy();
    FileTensor ft = Carrier.openNpy(rt, path);
    Carrier carrier = ft.carrier();
    TiledEvictable tiled = ft.tiled();
    assertTrue(carrier.isOwned());
    exact(InvalidStateException.class, ft::tiled); // the carrier is a tier of `tiled` now
    ft.close();
    ft.close(); // idempotent
    assertTrue(carrier.isClosed());
    exact(InvalidStateException.class, carrier::size);
    Tensor full = tiled.fullTensor();
    tiled.close();
    Tensor view = ft.view(full); // the view needs the tensor only, not the closed carrier
    assertArrayEquals(l(E, O, I), ft.shape()); // and the fields answer
    full.close();
    assertEquals(312.0, view.get(3, 1, 2)); // the view holds the TiledEvictable and its file
    view.close();
    // A primary of the caller's and a policy.
    try (FileTensor again = Carrier.openNpy(rt, path); Carrier cpu = Carrier.cpu(rt, DType.F32, 0);
         LruPolicy lru = LruPolicy.create(2); TiledEvictable te = again.tiled(cpu, lru);
         Tensor f = te.fullTensor();
         AwaitProjection p = te.project(f, sel(l(0), l(0), l(2, 3, 1)), null); Tensor compact = p.get()) {
      assertTrue(te.hasPolicy());
      try (Carrier primary = te.primary()) {
        assertTrue(primary.isSameNative(cpu));
      }
      assertEquals(w(1, 1, 2), compact.get(2, 1, 2));
      assertFalse(te.primaryTiles().contains(l(0, 0, 0)));
    }
  }

  @Test
  void tensorsSaveAndOpenAgain() throws Exception {
    try (FileTensor ft = Carrier.openNpy(rt, expertsNpy()); TiledEvictable tiled = ft.tiled();
         Tensor full = tiled.fullTensor(); Tensor view = ft.view(full);
         Tensor gate = Tensor.fromArray(rt, new float[] {1, 2, 3, 4, 5, 6}, 3, 2)) {
      Map<String, Tensor> tensors = new LinkedHashMap<>();
      tensors.put("experts.\u00fc\uD835\uDD3C", view);
      tensors.put("gate", gate);
      Path out = dir.resolve("out.safetensors");
      StrideWeave.saveSafetensors(out, tensors, Map.of("format", "pt"));
      String header = new String(Files.readAllBytes(out), StandardCharsets.UTF_8);
      assertTrue(header.contains("\"__metadata__\""), header);
      assertTrue(header.contains("\"format\":\"pt\""), header);
      try (FileTensor back = Carrier.openSafetensors(rt, out, "experts.\u00fc\uD835\uDD3C")) {
        rowMajor(back, E);
        projectsExperts(back, l(0, 3), identity(E));
      }
      try (FileTensor back = Carrier.openSafetensors(rt, out, "gate"); TiledEvictable t = back.tiled();
           Tensor f = t.fullTensor(); Tensor g = back.view(f)) {
        assertArrayEquals(l(3, 2), back.shape());
        for (int r = 0; r < 3; ++r) {
          for (int c = 0; c < 2; ++c) {
            assertEquals(gate.get(r, c), g.get(r, c));
          }
        }
      }
      Path npy = dir.resolve("experts-again.npy");
      StrideWeave.saveNpy(npy, view);
      try (FileTensor back = Carrier.openNpy(rt, npy)) {
        rowMajor(back, E);
        projectsExperts(back, l(2), identity(E));
      }
      Map<String, Tensor> dup = new LinkedHashMap<>();
      dup.put("__metadata__", gate);
      exact(InvalidValueException.class, () -> StrideWeave.saveSafetensors(dir.resolve("dup.safetensors"), dup));
      exact(StorageIOException.class, () -> StrideWeave.saveNpy(dir.resolve("no/such/dir/x.npy"), gate));
    }
    try (Tensor bf16 = Tensor.zeros(rt, DType.BF16, 2)) {
      exact(UnsupportedFeatureException.class, () -> StrideWeave.saveNpy(dir.resolve("bf16.npy"), bf16));
    }
    try (Tensor closed = Tensor.fromArray(rt, new float[] {1}, 1)) {
      closed.close();
      exact(InvalidStateException.class, () -> StrideWeave.saveNpy(dir.resolve("closed.npy"), closed));
      exact(InvalidStateException.class,
          () -> StrideWeave.saveSafetensors(dir.resolve("closed.safetensors"), Map.of("x", closed)));
    }
  }
}
