package org.strideweave;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.api.io.TempDir;

/**
 * The gated expert feed-forward (TiledEvictable.expertFfn over sw_tiled_expert_ffn): checked
 * exactly against a plain Java reference with RELU (small integer weights and inputs and
 * power-of-two gates keep every f32 value exact), and bit for bit against the unfused layer
 * (expertMatmul, sw_unary of the activation, sw_binary MUL, expertMatmul) for every activation.
 */
class ExpertFfnTest extends Fixtures {
  static final int E = 5;
  static final int H = 4; // model width
  static final int F = 3; // expert width
  static final int T = 4;
  static final int C = 2; // choices per token (top-k)
  static final long[] GRID = {1, 1, E};
  static final long[] GATE_TILE = {H, F, 1};
  static final long[] DOWN_TILE = {F, H, 1};
  /** Token 3 picks expert 4 twice; expert 2 is unused. */
  static final long[][] IDS = {{0, 3}, {3, 1}, {1, 0}, {4, 4}};
  static final float[][] GATES = {{0.5f, 0.25f}, {1f, -2f}, {0.75f, 0.125f}, {-1f, 4f}};
  static final int SW_UNARY_NEG = 1;
  static final int SW_UNARY_EXP = 3;
  static final int SW_BINARY_MUL = 3;

  static ExpertFfnOptions opts(Tensor gates, Activation activation, DType outDtype) {
    return ExpertFfnOptions.builder().gates(gates).activation(activation).outDtype(outDtype).build();
  }

  // ---- the experts: small integers in [-2, 2] ----

  /** Gate_e[hh, f]. */
  static float gw(int e, int hh, int f) {
    return (e * 3 + hh * 5 + f * 7) % 5 - 2;
  }

  /** Up_e[hh, f]. */
  static float uw(int e, int hh, int f) {
    return (e * 5 + hh * 3 + f * 2 + 1) % 5 - 2;
  }

  /** Down_e[f, hh]. */
  static float dw(int e, int f, int hh) {
    return (e * 7 + f * 3 + hh * 5 + 2) % 5 - 2;
  }

  /** Gate or up tiles one after another, each (H, F) first mode fastest: slot (e*F + f)*H + hh. */
  static float[] gateValues(boolean up) {
    float[] v = new float[E * F * H];
    for (int e = 0; e < E; ++e) {
      for (int f = 0; f < F; ++f) {
        for (int hh = 0; hh < H; ++hh) {
          v[(e * F + f) * H + hh] = up ? uw(e, hh, f) : gw(e, hh, f);
        }
      }
    }
    return v;
  }

  /** Down tiles, each (F, H) first mode fastest: slot (e*H + hh)*F + f. */
  static float[] downValues() {
    float[] v = new float[E * H * F];
    for (int e = 0; e < E; ++e) {
      for (int hh = 0; hh < H; ++hh) {
        for (int f = 0; f < F; ++f) {
          v[(e * H + hh) * F + f] = dw(e, f, hh);
        }
      }
    }
    return v;
  }

  /** x[t, (j,) hh] for a shared (choice -1) or per-choice input, in [-3, 3]. */
  static float xv(int t, int j, int hh, int seed) {
    return (t * 5 + hh * 3 + (j + 1) * 2 + seed) % 7 - 3;
  }

  /** A (T, H) x, or (T, C, H) when {@code perChoice}, first mode fastest. */
  static float[] xValues(boolean perChoice, int tokens, int seed) {
    int rows = perChoice ? C : 1;
    float[] v = new float[tokens * rows * H];
    for (int t = 0; t < tokens; ++t) {
      for (int j = 0; j < rows; ++j) {
        for (int hh = 0; hh < H; ++hh) {
          v[t + tokens * (j + rows * hh)] = xv(t, perChoice ? j : -1, hh, seed);
        }
      }
    }
    return v;
  }

  static float x(float[] xs, boolean perChoice, int tokens, int t, int j, int hh) {
    return perChoice ? xs[t + tokens * (j + C * hh)] : xs[t + tokens * hh];
  }

  /**
   * The RELU reference: (T, C, H) without gates, (T, H) with, first mode fastest. Every value is
   * an integer (times a power of two) far below 2^24, so any summation order is exact.
   */
  static float[] reference(float[] xs, boolean perChoice, long[][] ids, float[][] gates) {
    int tokens = ids.length;
    float[] y = new float[gates == null ? tokens * C * H : tokens * H];
    for (int t = 0; t < tokens; ++t) {
      for (int j = 0; j < C; ++j) {
        int e = (int) ids[t][j];
        float[] h = new float[F];
        for (int f = 0; f < F; ++f) {
          float a = 0;
          float b = 0;
          for (int hh = 0; hh < H; ++hh) {
            float xv = x(xs, perChoice, tokens, t, j, hh);
            a += xv * gw(e, hh, f);
            b += xv * uw(e, hh, f);
          }
          h[f] = Math.max(a, 0f) * b;
        }
        for (int hh = 0; hh < H; ++hh) {
          float s = 0;
          for (int f = 0; f < F; ++f) {
            s += h[f] * dw(e, f, hh);
          }
          if (gates == null) {
            y[t + tokens * (j + C * hh)] = s;
          } else {
            y[t + tokens * hh] += gates[t][j] * s;
          }
        }
      }
    }
    return y;
  }

  static long[] flatIds(long[][] ids) {
    long[] v = new long[ids.length * C];
    for (int t = 0; t < ids.length; ++t) {
      for (int j = 0; j < C; ++j) {
        v[t + ids.length * j] = ids[t][j];
      }
    }
    return v;
  }

  static float[] flatGates(float[][] gates) {
    float[] v = new float[gates.length * C];
    for (int t = 0; t < gates.length; ++t) {
      for (int j = 0; j < C; ++j) {
        v[t + gates.length * j] = gates[t][j];
      }
    }
    return v;
  }

  Tensor ids64(long[][] ids) {
    return Tensor.fromArray(rt, DType.I64, flatIds(ids), ids.length, C);
  }

  Tensor ids32(long[][] ids) {
    long[] flat = flatIds(ids);
    int[] v = new int[flat.length];
    for (int i = 0; i < v.length; ++i) {
      v[i] = (int) flat[i];
    }
    return Tensor.fromArray(rt, DType.I32, v, ids.length, C);
  }

  Tensor xTensor(boolean perChoice) {
    return perChoice ? Tensor.fromArray(rt, xValues(true, T, 0), T, C, H)
        : Tensor.fromArray(rt, xValues(false, T, 0), T, H);
  }

  Tensor gatesTensor() {
    return Tensor.fromArray(rt, flatGates(GATES), T, C);
  }

  /** The three TiledEvictables of a layer, every expert on the secondary tier at first. */
  final class Layer implements AutoCloseable {
    final TiledEvictable gate;
    final TiledEvictable up;
    final TiledEvictable down;
    final Tensor gateFull;
    final Tensor upFull;
    final Tensor downFull;

    Layer(float[] gateValues, float[] upValues, float[] downValues, Tier tier, ResidencyPolicy[] policies) {
      gate = seeded(gateValues, GRID, GATE_TILE, tier, policies == null ? null : policies[0]);
      up = seeded(upValues, GRID, GATE_TILE, tier, policies == null ? null : policies[1]);
      down = seeded(downValues, GRID, DOWN_TILE, tier, policies == null ? null : policies[2]);
      gateFull = gate.fullTensor();
      upFull = up.fullTensor();
      downFull = down.fullTensor();
    }

    List<TiledEvictable> all() {
      return List.of(gate, up, down);
    }

    AwaitProjection ffn(Tensor x, Tensor ids, Tensor gates) {
      return TiledEvictable.expertFfn(x, ids, gateFull, upFull, downFull, opts(gates, Activation.RELU, null));
    }

    AwaitProjection ffn(Tensor x, Tensor ids, Tensor gates, Activation activation) {
      return TiledEvictable.expertFfn(x, ids, gateFull, upFull, downFull, opts(gates, activation, null));
    }

    List<States> states() {
      return List.of(ExpertFfnTest.states(gate), ExpertFfnTest.states(up), ExpertFfnTest.states(down));
    }

    @Override
    public void close() {
      gateFull.close();
      upFull.close();
      downFull.close();
      gate.close();
      up.close();
      down.close();
    }
  }

  Layer layer(Tier tier, ResidencyPolicy... policies) {
    return new Layer(gateValues(false), gateValues(true), downValues(), tier, policies.length == 0 ? null : policies);
  }

  static TileSet expertTiles(long... e) {
    long[][] c = new long[e.length][];
    for (int i = 0; i < e.length; ++i) {
      c[i] = new long[] {0, 0, e[i]};
    }
    return TileSet.of(c);
  }

  record States(TileSet primary, TileSet valid, TileSet dirty, long version) {}

  static States states(TiledEvictable te) {
    return new States(te.primaryTiles(), te.validTiles(), te.dirtyTiles(), te.version());
  }

  // ---- exact values (RELU) ----

  @Test
  void eachChoiceGoesThroughItsExpertsGateUpAndDown() {
    try (Layer layer = layer(Tier.HOST); Tensor x = xTensor(false); Tensor ids = ids64(IDS);
         AwaitProjection pending = layer.ffn(x, ids, null); Tensor y = pending.get(); Carrier yc = y.carrier()) {
      assertEquals(AwaitResult.Kind.PROJECTION, pending.kind());
      assertArrayEquals(l(T, C, H), y.shape());
      assertEquals(DType.F32, y.dtype());
      assertEquals(CarrierKind.CPU, yc.kind());
      assertArrayEquals(reference(xValues(false, T, 0), false, IDS, null), y.toFloatArray());
      // No policy: the experts used are now primary in all three, as after a projection.
      for (TiledEvictable te : layer.all()) {
        assertEquals(expertTiles(0, 1, 3, 4), te.primaryTiles());
        assertEquals(new TileState(TileState.Location.SECONDARY, true, false), te.tileState(0, 0, 2));
        assertEquals(TileSet.empty(), te.dirtyTiles());
      }
    }
  }

  @Test
  void gatesWeightTheSumOfATokensChoices() {
    try (Layer layer = layer(Tier.HOST); Tensor x = xTensor(false); Tensor ids = ids32(IDS);
         Tensor gates = gatesTensor();
         AwaitProjection pending = layer.ffn(x, ids, gates); Tensor y = pending.get()) {
      assertEquals(AwaitResult.Kind.PROJECTION, pending.kind());
      assertArrayEquals(l(T, H), y.shape());
      assertEquals(DType.F32, y.dtype());
      assertArrayEquals(reference(xValues(false, T, 0), false, IDS, GATES), y.toFloatArray());
    }
  }

  @Test
  void oneInputRowPerChoiceUngatedAndGated() {
    try (Layer layer = layer(Tier.HOST); Tensor x = xTensor(true); Tensor ids = ids64(IDS);
         Tensor gates = gatesTensor();
         AwaitProjection p1 = layer.ffn(x, ids, null); Tensor y = p1.get();
         AwaitProjection p2 = layer.ffn(x, ids, gates); Tensor g = p2.get()) {
      float[] xs = xValues(true, T, 0);
      assertArrayEquals(l(T, C, H), y.shape());
      assertArrayEquals(reference(xs, true, IDS, null), y.toFloatArray());
      assertArrayEquals(l(T, H), g.shape());
      assertArrayEquals(reference(xs, true, IDS, GATES), g.toFloatArray());
      assertFalse(Arrays.equals(reference(xs, true, IDS, null), reference(xValues(false, T, 0), false, IDS, null)));
    }
  }

  @Test
  void residentAndMissingExpertsOverAFileTierGiveTheSameValues() {
    try (Layer layer = layer(Tier.FILE); Tensor x = xTensor(false); Tensor ids = ids64(IDS);
         Tensor gates = gatesTensor()) {
      // Each TiledEvictable has other experts resident; the rest are read during the call.
      layer.gate.promote(expertTiles(0, 3));
      layer.up.promote(expertTiles(3));
      layer.down.promote(expertTiles(1, 2, 4));
      try (AwaitProjection pending = layer.ffn(x, ids, gates); Tensor y = pending.get()) {
        assertEquals(AwaitResult.Kind.PROJECTION, pending.kind());
        assertArrayEquals(l(T, H), y.shape());
        assertArrayEquals(reference(xValues(false, T, 0), false, IDS, GATES), y.toFloatArray());
      }
      assertEquals(expertTiles(0, 1, 3, 4), layer.gate.primaryTiles());
      assertEquals(expertTiles(0, 1, 3, 4), layer.up.primaryTiles());
      assertEquals(expertTiles(0, 1, 2, 3, 4), layer.down.primaryTiles());
      // Every expert the call uses resident in all three, and no policy: done on return.
      try (AwaitProjection pending = layer.ffn(x, ids, null)) {
        assertTrue(pending.isDone());
        try (Tensor y = pending.get()) {
          assertArrayEquals(l(T, C, H), y.shape());
          assertArrayEquals(reference(xValues(false, T, 0), false, IDS, null), y.toFloatArray());
        }
      }
    }
  }

  @Test
  void underLruBudgetsSmallerThanTheExpertsUsedEveryStepIsExact() {
    Random random = new Random(3);
    int tokens = 3;
    try (LruPolicy lg = LruPolicy.create(2); LruPolicy lu = LruPolicy.create(2); LruPolicy ld = LruPolicy.create(2);
         Layer layer = layer(Tier.FILE, lg, lu, ld)) {
      layer.gate.promote(expertTiles(4)); // some experts resident before the first call
      layer.down.promote(expertTiles(0, 2));
      for (int step = 0; step < 10; ++step) {
        // The first step uses all five experts, more than any budget holds.
        long[][] ids = step == 0 ? new long[][] {{0, 1}, {2, 3}, {4, 0}} : new long[tokens][C];
        if (step > 0) {
          for (long[] row : ids) {
            for (int j = 0; j < C; ++j) {
              row[j] = random.nextInt(E);
            }
          }
        }
        float[] gate = new float[tokens * C];
        float[][] gates = new float[tokens][C];
        for (int t = 0; t < tokens; ++t) {
          for (int j = 0; j < C; ++j) {
            gates[t][j] = (random.nextInt(9) - 4) / 4f;
            gate[t + tokens * j] = gates[t][j];
          }
        }
        float[] xs = xValues(false, tokens, step);
        try (Tensor x = Tensor.fromArray(rt, xs, tokens, H); Tensor idt = ids64(ids);
             Tensor g = Tensor.fromArray(rt, gate, tokens, C);
             AwaitProjection p1 = layer.ffn(x, idt, null); Tensor y = p1.get();
             AwaitProjection p2 = layer.ffn(x, idt, g); Tensor s = p2.get()) {
          assertArrayEquals(reference(xs, false, ids, null), y.toFloatArray(), "step " + step);
          assertArrayEquals(reference(xs, false, ids, gates), s.toFloatArray(), "step " + step);
        }
        for (TiledEvictable te : layer.all()) {
          assertTrue(te.primaryTiles().size() <= 2, () -> "primary " + te.primaryTiles());
        }
      }
      for (LruPolicy lru : List.of(lg, lu, ld)) {
        LruPolicy.LruStats stats = lru.stats();
        assertTrue(stats.requests() >= 20, stats::toString);
        assertTrue(stats.misses() > 0 && stats.evicted() > 0, stats::toString);
      }
      for (TiledEvictable te : layer.all()) {
        assertEquals(TileSet.empty(), te.dirtyTiles());
      }
    }
  }

  /** Fused gate_up tiles, each (H, 2F) first mode fastest: expert e's gate tile, then its up tile. */
  static float[] gateUpValues() {
    float[] g = gateValues(false);
    float[] u = gateValues(true);
    float[] v = new float[2 * E * F * H];
    for (int e = 0; e < E; ++e) {
      System.arraycopy(g, e * F * H, v, 2 * e * F * H, F * H);
      System.arraycopy(u, e * F * H, v, (2 * e + 1) * F * H, F * H);
    }
    return v;
  }

  @Test
  void aFusedGateUpTileWithANullUpGivesTheSameValues() {
    try (TiledEvictable gateUp = seeded(gateUpValues(), GRID, l(H, 2 * F, 1), Tier.FILE, null);
         TiledEvictable down = seeded(downValues(), GRID, DOWN_TILE, Tier.FILE, null);
         Tensor gateUpFull = gateUp.fullTensor(); Tensor downFull = down.fullTensor();
         Tensor x = xTensor(false); Tensor ids = ids64(IDS); Tensor gates = gatesTensor()) {
      down.promote(expertTiles(0, 1)); // partly resident, partly read during the call
      try (AwaitProjection p1 = TiledEvictable.expertFfn(x, ids, gateUpFull, null, downFull,
               opts(null, Activation.RELU, null));
           Tensor y = p1.get()) {
        assertArrayEquals(l(T, C, H), y.shape());
        assertArrayEquals(reference(xValues(false, T, 0), false, IDS, null), y.toFloatArray());
      }
      assertEquals(expertTiles(0, 1, 3, 4), gateUp.primaryTiles());
      // Every expert used resident in both: done on return.
      try (AwaitProjection p2 = TiledEvictable.expertFfn(x, ids, gateUpFull, null, downFull,
               opts(gates, Activation.RELU, null))) {
        assertTrue(p2.isDone());
        try (Tensor y = p2.get()) {
          assertArrayEquals(reference(xValues(false, T, 0), false, IDS, GATES), y.toFloatArray());
        }
      }
    }
  }

  // ---- bit for bit the unfused layer ----

  /** Pseudo-random weights in (-1, 1), tiles one after another. */
  static float[] randomValues(Random random, int n) {
    float[] v = new float[n];
    for (int i = 0; i < n; ++i) {
      v[i] = random.nextFloat() * 2 - 1;
    }
    return v;
  }

  /** {@code sw_unary(op, a)}. */
  static Tensor unary(int op, Tensor a) {
    return a.call(h -> {
      long[] out = new long[1];
      Native.sw_unary(op, h, out);
      return Tensor.adopt(out[0]);
    });
  }

  /** {@code sw_binary(SW_BINARY_MUL, a, b)}. */
  static Tensor mul(Tensor a, Tensor b) {
    return a.call(ha -> b.call(hb -> {
      long[] out = new long[1];
      Native.sw_binary(SW_BINARY_MUL, ha, hb, out);
      return Tensor.adopt(out[0]);
    }));
  }

  /** The unfused layer: expertMatmul of gate and up, the activation, MUL, expertMatmul of down. */
  static Tensor unfused(TiledEvictable gate, Tensor gateFull, TiledEvictable up, Tensor upFull, TiledEvictable down,
                        Tensor downFull, Tensor x, Tensor ids, Activation activation) {
    try (AwaitProjection pa = gate.expertMatmul(gateFull, x, ids); Tensor a = pa.get();
         AwaitProjection pb = up.expertMatmul(upFull, x, ids); Tensor b = pb.get();
         Tensor act = unary(activation.value(), a); Tensor h = mul(act, b);
         AwaitProjection py = down.expertMatmul(downFull, h, ids)) {
      return py.get();
    }
  }

  static Tensor unfused(Layer layer, Tensor x, Tensor ids, Activation activation) {
    return unfused(layer.gate, layer.gateFull, layer.up, layer.upFull, layer.down, layer.downFull, x, ids, activation);
  }

  /** The call with an activation number {@link Activation} has no constant for. */
  static AwaitProjection ffnWithOp(Layer layer, Tensor x, Tensor ids, int op) {
    return x.call(xh -> ids.call(i -> layer.gateFull.call(g -> layer.upFull.call(u -> layer.downFull.call(
        d -> new AwaitProjection(Native.tiled_expert_ffn(g, u, d, xh, i, 0, op, 0)))))));
  }

  /** The sum over j of gates[t, j] * Y[t, j], in f32 and in j order: (T, H). */
  static float[] gatedSum(float[] y, float[][] gates) {
    float[] out = new float[T * H];
    for (int t = 0; t < T; ++t) {
      for (int hh = 0; hh < H; ++hh) {
        float s = 0;
        for (int j = 0; j < C; ++j) {
          s += gates[t][j] * y[t + T * (j + C * hh)];
        }
        out[t + T * hh] = s;
      }
    }
    return out;
  }

  @Test
  @SuppressWarnings("deprecation") // p3 checks the positional overload still delegates
  void everyActivationIsBitForBitTheUnfusedLayer() {
    Random random = new Random(7);
    float[] g = randomValues(random, E * H * F);
    float[] u = randomValues(random, E * H * F);
    float[] d = randomValues(random, E * H * F);
    float[] xs = randomValues(random, T * H);
    float[][] gates = new float[T][C];
    for (float[] row : gates) {
      for (int j = 0; j < C; ++j) {
        row[j] = random.nextFloat();
      }
    }
    try (Layer fused = new Layer(g, u, d, Tier.FILE, null); Layer plain = new Layer(g, u, d, Tier.HOST, null);
         Tensor x = Tensor.fromArray(rt, xs, T, H); Tensor ids = ids64(IDS);
         Tensor gt = Tensor.fromArray(rt, flatGates(gates), T, C)) {
      fused.up.promote(expertTiles(1, 4)); // partly resident, partly read during the call
      fused.down.promote(expertTiles(0));
      for (Activation activation : Activation.values()) {
        try (Tensor want = unfused(plain, x, ids, activation);
             AwaitProjection p1 = fused.ffn(x, ids, null, activation); Tensor y = p1.get();
             AwaitProjection p2 = fused.ffn(x, ids, gt, activation); Tensor s = p2.get()) {
          assertEquals(AwaitResult.Kind.PROJECTION, p1.kind());
          assertArrayEquals(l(T, C, H), y.shape());
          assertArrayEquals(want.toFloatArray(), y.toFloatArray(), activation.name());
          assertArrayEquals(l(T, H), s.shape());
          assertArrayEquals(gatedSum(want.toFloatArray(), gates), s.toFloatArray(), activation.name());
        }
      }
      // The default activation is SILU, and the default result dtype the experts'.
      try (Tensor want = unfused(plain, x, ids, Activation.SILU);
           AwaitProjection p1 = TiledEvictable.expertFfn(x, ids, fused.gateFull, fused.upFull, fused.downFull);
           Tensor y = p1.get();
           AwaitProjection p2 = TiledEvictable.expertFfn(x, ids, fused.gateFull, fused.upFull, fused.downFull,
               ExpertFfnOptions.builder().gates(gt).build());
           Tensor s = p2.get();
           AwaitProjection p3 = TiledEvictable.expertFfn(x, ids, fused.gateFull, fused.upFull, fused.downFull, gt,
               Activation.SILU, DType.F32);
           Tensor s32 = p3.get()) {
        assertEquals(AwaitResult.Kind.PROJECTION, p2.kind());
        assertEquals(DType.F32, y.dtype());
        assertArrayEquals(want.toFloatArray(), y.toFloatArray());
        assertArrayEquals(gatedSum(want.toFloatArray(), gates), s.toFloatArray());
        assertArrayEquals(s.toFloatArray(), s32.toFloatArray());
      }
    }
  }

  static short bf16(float v) {
    return (short) (Float.floatToIntBits(v) >>> 16); // exact for the small integers used here
  }

  /** bfloat16 bits of an f32 value, rounded to nearest even (no NaNs here). */
  static short roundBf16(float v) {
    int bits = Float.floatToIntBits(v);
    return (short) ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16);
  }

  TiledEvictable seededBf16(float[] values, long[] tile) {
    short[] bits = new short[values.length];
    for (int i = 0; i < values.length; ++i) {
      bits[i] = bf16(values[i]);
    }
    try (Carrier host = Carrier.host(rt, DType.BF16, values.length); Carrier cpu = Carrier.cpu(rt, DType.BF16, 0)) {
      host.write(0, bits);
      return TiledEvictable.create(cpu, host, GRID, tile, null);
    }
  }

  @Test
  void bf16ExpertsGiveTheirDtypeOrUnroundedF32() {
    float[] xs = xValues(false, T, 0);
    short[] xbits = new short[xs.length];
    for (int i = 0; i < xs.length; ++i) {
      xbits[i] = bf16(xs[i]);
    }
    try (TiledEvictable gate = seededBf16(gateValues(false), GATE_TILE);
         TiledEvictable up = seededBf16(gateValues(true), GATE_TILE);
         TiledEvictable down = seededBf16(downValues(), DOWN_TILE);
         Tensor gf = gate.fullTensor(); Tensor uf = up.fullTensor(); Tensor df = down.fullTensor();
         Tensor x = Tensor.fromArray(rt, DType.BF16, xbits, T, H); Tensor ids = ids64(IDS);
         AwaitProjection p1 = TiledEvictable.expertFfn(x, ids, gf, uf, df, opts(null, Activation.RELU, null));
         Tensor y = p1.get();
         AwaitProjection p2 = TiledEvictable.expertFfn(x, ids, gf, uf, df, opts(null, Activation.RELU, DType.F32));
         Tensor y32 = p2.get();
         Tensor want = unfused(gate, gf, up, uf, down, df, x, ids, Activation.RELU); // in bf16
         Tensor x32 = xTensor(false)) {
      assertEquals(DType.BF16, y.dtype());
      assertArrayEquals(l(T, C, H), y.shape());
      assertArrayEquals((short[]) want.toArray(), (short[]) y.toArray());
      // f32: each Y[t, j] unrounded; rounding it to bf16 gives the bf16 result.
      assertEquals(DType.F32, y32.dtype());
      float[] wide = y32.toFloatArray();
      short[] rounded = new short[wide.length];
      for (int i = 0; i < wide.length; ++i) {
        rounded[i] = roundBf16(wide[i]);
      }
      assertArrayEquals((short[]) y.toArray(), rounded);
      // An f32 x is not of the experts' dtype.
      TypeMismatchException e = exact(TypeMismatchException.class,
          () -> TiledEvictable.expertFfn(x32, ids, gf, uf, df));
      assertTrue(e.getMessage().contains("x is f32, the experts bf16"), e::getMessage);
    }
  }

  // ---- docs/quickstart-java.md ----

  /** The page's expert feed-forward snippet, verbatim between the markers. */
  static void quickstartSnippet(StrideWeaveRuntime rt, Path dir, int E, int H, int F, Tensor x, Tensor ids,
                                Tensor gates, PrintStream out) {
    // --- docs/quickstart-java.md: the expert feed-forward ---
    long[] grid = {1, 1, E};
    try (Carrier w1 = Carrier.openFile(rt, DType.BF16, dir.resolve("w1.bin"), 0, (long) E * F * H);
         Carrier w3 = Carrier.openFile(rt, DType.BF16, dir.resolve("w3.bin"), 0, (long) E * F * H);
         Carrier w2 = Carrier.openFile(rt, DType.BF16, dir.resolve("w2.bin"), 0, (long) E * H * F);
         Carrier cpu1 = Carrier.cpu(rt, DType.BF16, 0);
         Carrier cpu3 = Carrier.cpu(rt, DType.BF16, 0);
         Carrier cpu2 = Carrier.cpu(rt, DType.BF16, 0);
         LruPolicy lru1 = LruPolicy.create(8);
         LruPolicy lru3 = LruPolicy.create(8);
         LruPolicy lru2 = LruPolicy.create(8);
         TiledEvictable gate = TiledEvictable.create(cpu1, w1, grid, new long[] {H, F, 1}, lru1);
         TiledEvictable up = TiledEvictable.create(cpu3, w3, grid, new long[] {H, F, 1}, lru3);
         TiledEvictable down = TiledEvictable.create(cpu2, w2, grid, new long[] {F, H, 1}, lru2);
         Tensor gateW = gate.fullTensor();
         Tensor upW = up.fullTensor();
         Tensor downW = down.fullTensor();
         // x: (T, H) bf16; ids: (T, k) i64, the router's top-k; gates: (T, k) f32, its weights
         AwaitProjection pending = TiledEvictable.expertFfn(x, ids, gateW, upW, downW,
             ExpertFfnOptions.builder().gates(gates).build()); // SiLU
         Tensor y = pending.get()) { // (T, H) bf16: the gate-weighted sum over a token's k choices
      out.println(Arrays.toString(y.shape()) + " " + y.dtype());
    }
    // --- end ---
  }

  /** Row-major (E, F, H) / (E, H, F) bf16 bits as a weight file holds them: the tiles as they lie. */
  static void writeBf16(Path file, float[] values) throws Exception {
    ByteBuffer b = ByteBuffer.allocate(values.length * 2).order(ByteOrder.LITTLE_ENDIAN);
    for (float v : values) {
      b.putShort(bf16(v));
    }
    Files.write(file, b.array());
  }

  @Test
  void theQuickstartSnippetRunsAsThePageShowsIt(@TempDir Path dir) throws Exception {
    Path root = Paths.get("").toAbsolutePath().getParent().getParent();
    String doc = Files.readString(root.resolve("docs/quickstart-java.md"));
    String code = doc.split("## The expert feed-forward\n", 2)[1].split("```java\n", 2)[1].split("```", 2)[0];
    String source = Files.readString(root.resolve("bindings/java/src/test/java/org/strideweave/ExpertFfnTest.java"));
    String body = source.split("    // --- docs/quickstart-java.md: the expert feed-forward ---\n", 2)[1]
        .split("    // --- end ---\n", 2)[0];
    String dedented = body.lines().map(l -> l.startsWith("    ") ? l.substring(4) : l)
        .collect(Collectors.joining("\n", "", "\n"));
    assertEquals(dedented, code);

    writeBf16(dir.resolve("w1.bin"), gateValues(false));
    writeBf16(dir.resolve("w3.bin"), gateValues(true));
    writeBf16(dir.resolve("w2.bin"), downValues());
    float[] xs = xValues(false, T, 0);
    short[] xbits = new short[xs.length];
    for (int i = 0; i < xs.length; ++i) {
      xbits[i] = bf16(xs[i]);
    }
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    try (Tensor x = Tensor.fromArray(rt, DType.BF16, xbits, T, H); Tensor ids = ids64(IDS);
         Tensor gates = gatesTensor()) {
      quickstartSnippet(rt, dir, E, H, F, x, ids, gates, new PrintStream(bytes, true, StandardCharsets.UTF_8));
    }
    assertEquals("[4, 4] BF16\n", bytes.toString(StandardCharsets.UTF_8));
  }

  // ---- pending work ----

  @Test
  void aPendingCallPinsItsExperts() {
    try (Layer layer = layer(Tier.FILE); Tensor x = xTensor(false); Tensor ids = ids64(IDS)) {
      AwaitProjection pending;
      AwaitResidency eviction;
      try (Hold hold = hold()) { // the first read, of a gate expert, stays in flight
        pending = layer.ffn(x, ids, null);
        hold.caught();
        assertFalse(pending.isDone());
        // The gate request waits for its read; the other two, which commit with it, for the
        // gate's.
        InvalidStateException e = exact(InvalidStateException.class, layer.gate::dispose);
        assertTrue(e.getMessage().contains("not terminal"), e::getMessage);
        exact(InvalidStateException.class, layer.down::dispose);
        eviction = layer.gate.evictAsync(expertTiles(0)); // accepted; it waits for the call
        assertFalse(eviction.isDone());
      }
      try (pending; eviction; Tensor y = pending.get()) {
        eviction.get();
        assertArrayEquals(reference(xValues(false, T, 0), false, IDS, null), y.toFloatArray());
      }
      assertEquals(TileState.Location.SECONDARY, layer.gate.tileState(0, 0, 0).location());
      assertEquals(expertTiles(0, 1, 3, 4), layer.down.primaryTiles());
    }
  }

  // ---- the activations are the library's unary ops ----

  @Test
  void theActivationsCarryTheLibrarysNumbers() {
    double phi025 = 0.598706325682924; // Phi(0.25)
    double phi4 = 0.999968328758167; // Phi(4)
    double[][] want = {
        {0.25 / (1 + Math.exp(-0.25)), 4 / (1 + Math.exp(-4))}, // SILU
        {0.25 * phi025, 4 * phi4}, // GELU
        {1 / (1 + Math.exp(-0.25)), 1 / (1 + Math.exp(-4))}, // SIGMOID
        {Math.tanh(0.25), Math.tanh(4)}, // TANH
        {0.25, 4}, // RELU
    };
    Activation[] all = Activation.values();
    assertEquals(want.length, all.length);
    try (Tensor a = Tensor.fromArray(rt, new float[] {0.25f, 4f}, 2)) {
      for (int i = 0; i < all.length; ++i) {
        try (Tensor r = unary(all[i].value(), a)) {
          float[] got = r.toFloatArray();
          for (int k = 0; k < 2; ++k) {
            assertEquals(want[i][k], got[k], 1e-6 * Math.max(1, Math.abs(want[i][k])), all[i].name());
          }
        }
      }
      try (Tensor b = Tensor.fromArray(rt, new float[] {-1f, 2f}, 2); Tensor r = unary(Activation.RELU.value(), b)) {
        assertArrayEquals(new float[] {0f, 2f}, r.toFloatArray());
      }
    }
  }

  // ---- errors: the right kind, a message naming the problem, no state changed ----

  @Test
  void badArgumentsAreRefusedBeforeAnyWork() {
    try (Layer layer = layer(Tier.FILE); Tensor x = xTensor(false); Tensor ids = ids64(IDS);
         Tensor gates = gatesTensor();
         Tensor idsOut = ids64(new long[][] {{0, 3}, {3, 5}, {1, 0}, {4, 4}});
         Tensor idsNeg = ids32(new long[][] {{-1, 0}, {0, 0}, {0, 0}, {0, 0}});
         Tensor x64 = Tensor.fromArray(rt, new double[T * H], T, H);
         Tensor xShort = Tensor.fromArray(rt, new float[T * (H - 1)], T, H - 1);
         Tensor gatesNarrow = Tensor.fromArray(rt, new float[T], T, 1);
         Tensor gatesI64 = ids64(IDS);
         Tensor plain = Tensor.fromArray(rt, tilesToLogical(gateValues(false), GRID, GATE_TILE), H, F, E);
         // A down TiledEvictable with the gate's tile (H, F, 1) instead of (F, H, 1).
         TiledEvictable wrongDown = seeded(downValues(), GRID, GATE_TILE, Tier.HOST, null);
         Tensor wrongDownFull = wrongDown.fullTensor()) {
      layer.gate.promote(expertTiles(0, 3)); // some state to keep
      layer.down.promote(expertTiles(1));
      List<States> before = layer.states();
      States wrongBefore = states(wrongDown);

      InvalidValueException activation = refused(layer, InvalidValueException.class,
          "the activation must be silu, gelu, relu, sigmoid or tanh, not exp",
          () -> ffnWithOp(layer, x, ids, SW_UNARY_EXP));
      assertEquals(ErrorCode.VALUE, activation.code());
      refused(layer, InvalidValueException.class, "the activation must be",
          () -> ffnWithOp(layer, x, ids, SW_UNARY_NEG));
      refused(layer, InvalidValueException.class, "unknown sw_unary_op_t 12", () -> ffnWithOp(layer, x, ids, 12));

      refused(layer, InvalidValueException.class, "the down experts must be grid (1, 1, 5) and tile (3, 4, 1)",
          () -> TiledEvictable.expertFfn(x, ids, layer.gateFull, layer.upFull, wrongDownFull,
              opts(gates, Activation.SILU, null)));
      assertEquals(wrongBefore, states(wrongDown));
      refused(layer, InvalidValueException.class, "x must be (tokens, H) = (4, 4)", () -> layer.ffn(xShort, ids, null));
      refused(layer, InvalidValueException.class, "gates must be (tokens, k) = (4, 2), not (4, 1)",
          () -> layer.ffn(x, ids, gatesNarrow));

      IndexOutOfRangeException index = refused(layer, IndexOutOfRangeException.class,
          "expert id 5 at (token 1, slot 1) is outside [0, 5)", () -> layer.ffn(x, idsOut, gates));
      assertEquals(ErrorCode.INDEX, index.code());
      refused(layer, IndexOutOfRangeException.class, "expert id -1", () -> layer.ffn(x, idsNeg, null));

      TypeMismatchException type = refused(layer, TypeMismatchException.class, "x is f64, the experts f32",
          () -> layer.ffn(x64, ids, gates));
      assertEquals(ErrorCode.TYPE, type.code());
      refused(layer, TypeMismatchException.class, "gates must be a float tensor", () -> layer.ffn(x, ids, gatesI64));
      refused(layer, TypeMismatchException.class, "the result of f32 experts is f32, not f64",
          () -> TiledEvictable.expertFfn(x, ids, layer.gateFull, layer.upFull, layer.downFull,
              ExpertFfnOptions.builder().outDtype(DType.F64).build()));
      refused(layer, TypeMismatchException.class, "expected a TiledEvictable",
          () -> TiledEvictable.expertFfn(x, ids, plain, layer.upFull, layer.downFull));

      // Checked in Java before the call.
      exact(NullPointerException.class,
          () -> TiledEvictable.expertFfn(null, ids, layer.gateFull, layer.upFull, layer.downFull));
      // A null up is the fused form: the gate's (4, 3) tile is no gate_up.
      refused(layer, InvalidValueException.class, "they have tile (4, 3, 1), an odd second extent",
          () -> TiledEvictable.expertFfn(x, ids, layer.gateFull, null, layer.downFull));
      exact(NullPointerException.class,
          () -> TiledEvictable.expertFfn(x, ids, layer.gateFull, layer.upFull, layer.downFull, (ExpertFfnOptions) null));
      exact(NullPointerException.class, () -> ExpertFfnOptions.builder().activation(null));
      exact(NullPointerException.class, () -> new ExpertFfnOptions(null, null, null));
      assertEquals(ExpertFfnOptions.DEFAULTS, ExpertFfnOptions.builder().build());
      assertEquals(Activation.SILU, ExpertFfnOptions.DEFAULTS.activation());
      exact(NullPointerException.class, () -> layer.ffn(x, ids, gates, (Activation) null));
      assertEquals(before, layer.states());

      // The call still works afterwards.
      try (AwaitProjection pending = layer.ffn(x, ids, gates); Tensor y = pending.get()) {
        assertArrayEquals(reference(xValues(false, T, 0), false, IDS, GATES), y.toFloatArray());
      }
    }
  }

  @Test
  void closedAndDisposedHandlesAreStateErrors() {
    try (Layer layer = layer(Tier.HOST); Tensor ids = ids64(IDS)) {
      Tensor x = xTensor(false);
      x.close();
      InvalidStateException closed = exact(InvalidStateException.class, () -> layer.ffn(x, ids, null));
      assertEquals("this tensor is closed", closed.getMessage());
      try (Tensor live = xTensor(false)) {
        layer.up.dispose();
        exact(InvalidStateException.class, () -> layer.ffn(live, ids, null));
      }
    }
  }

  /** Asserts the exact class and a message naming the problem, with the three unchanged. */
  <X extends Throwable> X refused(Layer layer, Class<X> cls, String message, Executable call) {
    List<States> before = layer.states();
    X e = exact(cls, call);
    assertTrue(e.getMessage().contains(message), () -> "message: " + e.getMessage());
    assertEquals(before, layer.states());
    return e;
  }
}
