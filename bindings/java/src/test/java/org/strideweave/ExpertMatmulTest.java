package org.strideweave;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/**
 * The expert-indexed matmul (TiledEvictable.expertMatmul over sw_tiled_expert_matmul), checked
 * exactly against a plain Java reference: small integer weights and inputs and power-of-two
 * gates keep every f32 sum exact.
 */
class ExpertMatmulTest extends Fixtures {
  static final int E = 6;
  static final int N = 5;
  static final int K = 7;
  static final int T = 4;
  static final int C = 2; // choices per token (top-k)
  static final long[] GRID = {1, 1, E};
  static final long[] TILE = {K, N, 1};
  /** Token 3 picks expert 5 twice; experts 2 and 4 are unused. */
  static final long[][] IDS = {{0, 3}, {3, 5}, {1, 0}, {5, 5}};
  static final float[][] GATES = {{0.5f, 0.25f}, {1f, -2f}, {0.75f, 0.125f}, {-1f, 3f}};

  /** Expert e's weight at (kk, n): W_e[kk, n]. */
  static float w(int e, int n, int kk) {
    return (e * 3 + n * 5 + kk * 7) % 9 - 4;
  }

  /** Tiles one after another, each (K, N) first mode fastest: slot e*K*N + n*K + kk. */
  static float[] weights() {
    float[] v = new float[E * N * K];
    for (int e = 0; e < E; ++e) {
      for (int n = 0; n < N; ++n) {
        for (int kk = 0; kk < K; ++kk) {
          v[(e * N + n) * K + kk] = w(e, n, kk);
        }
      }
    }
    return v;
  }

  /** x[t, (j,) kk] for a shared (choice -1) or per-choice input. */
  static float xv(int t, int j, int kk, int seed) {
    return (t * 5 + kk * 3 + (j + 1) * 2 + seed) % 7 - 3;
  }

  /** A (T, K) x, or (T, C, K) when {@code perChoice}, first mode fastest. */
  static float[] xValues(boolean perChoice, int tokens, int seed) {
    int rows = perChoice ? C : 1;
    float[] v = new float[tokens * rows * K];
    for (int t = 0; t < tokens; ++t) {
      for (int j = 0; j < rows; ++j) {
        for (int kk = 0; kk < K; ++kk) {
          v[t + tokens * (j + rows * kk)] = xv(t, perChoice ? j : -1, kk, seed);
        }
      }
    }
    return v;
  }

  static float x(float[] xs, boolean perChoice, int tokens, int t, int j, int kk) {
    return perChoice ? xs[t + tokens * (j + C * kk)] : xs[t + tokens * kk];
  }

  /** The reference: (T, C, N) without gates, (T, N) with, first mode fastest. */
  static float[] reference(float[] xs, boolean perChoice, long[][] ids, float[][] gates) {
    int tokens = ids.length;
    float[] y = new float[gates == null ? tokens * C * N : tokens * N];
    for (int t = 0; t < tokens; ++t) {
      for (int j = 0; j < C; ++j) {
        int e = (int) ids[t][j];
        for (int n = 0; n < N; ++n) {
          float s = 0;
          for (int kk = 0; kk < K; ++kk) {
            s += x(xs, perChoice, tokens, t, j, kk) * w(e, n, kk);
          }
          if (gates == null) {
            y[t + tokens * (j + C * n)] = s;
          } else {
            y[t + tokens * n] += gates[t][j] * s;
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
    return perChoice ? Tensor.fromArray(rt, xValues(true, T, 0), T, C, K) : Tensor.fromArray(rt, xValues(false, T, 0), T, K);
  }

  Tensor gatesTensor() {
    return Tensor.fromArray(rt, flatGates(GATES), T, C);
  }

  /** Every expert starts on the secondary tier. */
  TiledEvictable experts(Tier tier, ResidencyPolicy policy) {
    return seeded(weights(), GRID, TILE, tier, policy);
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

  // ---- values ----

  @Test
  void eachTokenIsMultipliedByItsExperts() {
    try (TiledEvictable te = experts(Tier.HOST, null); Tensor full = te.fullTensor(); Tensor x = xTensor(false);
         Tensor ids = ids64(IDS); AwaitProjection pending = te.expertMatmul(full, x, ids); Tensor y = pending.get();
         Carrier yc = y.carrier()) {
      assertArrayEquals(l(T, C, N), y.shape());
      assertEquals(DType.F32, y.dtype());
      assertEquals(CarrierKind.CPU, yc.kind());
      assertArrayEquals(reference(xValues(false, T, 0), false, IDS, null), y.toFloatArray());
      // No policy: the experts used are now primary, as after a projection; the others never moved.
      assertEquals(expertTiles(0, 1, 3, 5), te.primaryTiles());
      assertEquals(new TileState(TileState.Location.SECONDARY, true, false), te.tileState(0, 0, 2));
      assertEquals(new TileState(TileState.Location.SECONDARY, true, false), te.tileState(0, 0, 4));
      assertEquals(TileSet.empty(), te.dirtyTiles());
    }
  }

  @Test
  void gatesWeightTheSumOfATokensExperts() {
    try (TiledEvictable te = experts(Tier.HOST, null); Tensor full = te.fullTensor(); Tensor x = xTensor(false);
         Tensor ids = ids32(IDS); Tensor gates = gatesTensor();
         AwaitProjection pending = te.expertMatmul(full, x, ids, gates); Tensor y = pending.get()) {
      assertArrayEquals(l(T, N), y.shape());
      assertEquals(DType.F32, y.dtype());
      assertArrayEquals(reference(xValues(false, T, 0), false, IDS, GATES), y.toFloatArray());
    }
  }

  @Test
  void oneInputRowPerChoiceUngatedAndGated() {
    try (TiledEvictable te = experts(Tier.HOST, null); Tensor full = te.fullTensor(); Tensor x = xTensor(true);
         Tensor ids = ids64(IDS); Tensor gates = gatesTensor();
         AwaitProjection p1 = te.expertMatmul(full, x, ids); Tensor y = p1.get();
         AwaitProjection p2 = te.expertMatmul(full, x, ids, gates); Tensor g = p2.get()) {
      float[] xs = xValues(true, T, 0);
      assertArrayEquals(l(T, C, N), y.shape());
      assertArrayEquals(reference(xs, true, IDS, null), y.toFloatArray());
      assertArrayEquals(l(T, N), g.shape());
      assertArrayEquals(reference(xs, true, IDS, GATES), g.toFloatArray());
      // The per-choice rows differ from the shared x's: the two cases are distinct.
      assertFalse(java.util.Arrays.equals(reference(xs, true, IDS, null),
          reference(xValues(false, T, 0), false, IDS, null)));
    }
  }

  @Test
  void residentAndMissingExpertsOverAFileTierGiveTheSameValues() {
    try (TiledEvictable te = experts(Tier.FILE, null); Tensor full = te.fullTensor(); Tensor x = xTensor(false);
         Tensor ids = ids64(IDS); Tensor gates = gatesTensor()) {
      te.promote(expertTiles(3, 5)); // two resident, two read during the call
      try (AwaitProjection pending = te.expertMatmul(full, x, ids, gates); Tensor y = pending.get()) {
        assertArrayEquals(reference(xValues(false, T, 0), false, IDS, GATES), y.toFloatArray());
      }
      assertEquals(expertTiles(0, 1, 3, 5), te.primaryTiles());
    }
  }

  @Test
  void underAnLruBudgetOverAFileTierEveryStepIsExactAndTheBudgetHolds() {
    Random random = new Random(1);
    try (LruPolicy lru = LruPolicy.create(3); TiledEvictable te = experts(Tier.FILE, lru);
         Tensor full = te.fullTensor()) {
      assertTrue(te.hasPolicy());
      for (int step = 0; step < 12; ++step) {
        long[][] ids = new long[2][C];
        for (long[] row : ids) {
          for (int j = 0; j < C; ++j) {
            row[j] = random.nextInt(E);
          }
        }
        float[] xs = xValues(false, 2, step);
        try (Tensor x = Tensor.fromArray(rt, xs, 2, K); Tensor idt = ids64(ids);
             AwaitProjection pending = te.expertMatmul(full, x, idt); Tensor y = pending.get()) {
          assertArrayEquals(reference(xs, false, ids, null), y.toFloatArray(), "step " + step);
        }
        assertTrue(te.primaryTiles().size() <= 3, () -> "primary " + te.primaryTiles());
      }
      LruPolicy.LruStats stats = lru.stats();
      assertEquals(12, stats.requests());
      assertTrue(stats.misses() > 0 && stats.evicted() > 0, stats::toString);
      assertEquals(TileSet.empty(), te.dirtyTiles());
    }
  }

  @Test
  void bf16ExpertsGiveTheirDtypeAndExactSmallIntegers() {
    float[] values = weights();
    short[] bits = new short[values.length];
    for (int i = 0; i < values.length; ++i) {
      bits[i] = (short) (Float.floatToIntBits(values[i]) >>> 16); // exact for small integers
    }
    float[] xs = xValues(false, T, 0);
    short[] xbits = new short[xs.length];
    for (int i = 0; i < xs.length; ++i) {
      xbits[i] = (short) (Float.floatToIntBits(xs[i]) >>> 16);
    }
    try (Carrier host = Carrier.host(rt, DType.BF16, values.length); Carrier cpu = Carrier.cpu(rt, DType.BF16, 0)) {
      host.write(0, bits);
      try (TiledEvictable te = TiledEvictable.create(cpu, host, GRID, TILE, null); Tensor full = te.fullTensor();
           Tensor x = Tensor.fromArray(rt, DType.BF16, xbits, T, K); Tensor ids = ids64(IDS);
           AwaitProjection pending = te.expertMatmul(full, x, ids); Tensor y = pending.get();
           Tensor x32 = xTensor(false)) {
        assertEquals(DType.BF16, y.dtype());
        assertArrayEquals(l(T, C, N), y.shape());
        float[] want = reference(xs, false, IDS, null);
        for (int t = 0; t < T; ++t) {
          for (int j = 0; j < C; ++j) {
            for (int n = 0; n < N; ++n) {
              assertEquals(want[t + T * (j + C * n)], y.get(t, j, n), "at " + t + "," + j + "," + n);
            }
          }
        }
        // An f32 x is not of the experts' dtype.
        TypeMismatchException e = exact(TypeMismatchException.class, () -> te.expertMatmul(full, x32, ids));
        assertTrue(e.getMessage().contains("x is f32, the experts bf16"), e::getMessage);
      }
    }
  }

  // ---- autograd ----

  @Test
  void gradientsOfExpertsInputsAndGatesAreExact() {
    float[] xs = xValues(false, T, 0);
    float[] cot = new float[T * N];
    for (int i = 0; i < cot.length; ++i) {
      cot[i] = i % 5 - 2;
    }
    try (TiledEvictable te = experts(Tier.HOST, null); Tensor full = te.fullTensor().requiresGrad(true);
         Tensor x = Tensor.fromArray(rt, xs, T, K).requiresGrad(true); Tensor ids = ids64(IDS);
         Tensor gates = gatesTensor().requiresGrad(true); Tensor c = Tensor.fromArray(rt, cot, T, N);
         AwaitProjection pending = te.expertMatmul(full, x, ids, gates); Tensor y = pending.get()) {
      y.backward(c, false);
      float[] gx = new float[T * K];
      float[] gg = new float[T * C];
      float[] gw = new float[K * N * E];
      for (int t = 0; t < T; ++t) {
        for (int j = 0; j < C; ++j) {
          int e = (int) IDS[t][j];
          float g = GATES[t][j];
          for (int n = 0; n < N; ++n) {
            float ct = cot[t + T * n];
            for (int kk = 0; kk < K; ++kk) {
              float xv = xs[t + T * kk];
              gx[t + T * kk] += g * ct * w(e, n, kk);
              gg[t + T * j] += ct * xv * w(e, n, kk);
              gw[kk + K * (n + N * e)] += g * ct * xv;
            }
          }
        }
      }
      try (Tensor dx = x.grad(); Tensor dg = gates.grad(); Tensor dw = full.grad(); Carrier dwc = dw.carrier()) {
        assertArrayEquals(gx, dx.toFloatArray());
        assertArrayEquals(gg, dg.toFloatArray());
        assertArrayEquals(l(K, N, E), dw.shape());
        assertArrayEquals(gw, dw.toFloatArray());
        // A tile-sparse TiledEvictable: the unused experts are implicit zeros.
        assertTrue(dwc instanceof TiledEvictable);
        TiledEvictable g = (TiledEvictable) dwc;
        for (int e = 0; e < E; ++e) {
          assertEquals(e == 2 || e == 4, g.tileState(0, 0, e).location() == TileState.Location.IMPLICIT, "expert " + e);
        }
      }
    }
  }

  // ---- pending work ----

  @Test
  void aPendingCallPinsItsExperts() {
    try (TiledEvictable te = experts(Tier.FILE, null); Tensor full = te.fullTensor(); Tensor x = xTensor(false);
         Tensor ids = ids64(IDS)) {
      AwaitProjection pending;
      AwaitResidency eviction;
      try (Hold hold = hold()) { // the first expert read stays in flight
        pending = te.expertMatmul(full, x, ids);
        hold.caught();
        assertFalse(pending.isDone());
        exact(InvalidStateException.class, te::dispose);
        eviction = te.evictAsync(expertTiles(0)); // accepted; it waits for the call
        assertFalse(eviction.isDone());
      }
      try (pending; eviction; Tensor y = pending.get()) {
        eviction.get();
        assertArrayEquals(reference(xValues(false, T, 0), false, IDS, null), y.toFloatArray());
      }
      assertEquals(TileState.Location.SECONDARY, te.tileState(0, 0, 0).location());
    }
  }

  // ---- errors: the right kind, a message naming the problem, no state changed ----

  @Test
  void badArgumentsAreRefusedBeforeAnyWork() {
    try (TiledEvictable te = experts(Tier.HOST, null); Tensor full = te.fullTensor(); Tensor x = xTensor(false);
         Tensor ids = ids64(IDS); Tensor gates = gatesTensor();
         Tensor idsOut = ids64(new long[][] {{0, 3}, {3, 6}, {1, 0}, {5, 5}});
         Tensor idsNeg = ids32(new long[][] {{-1, 0}, {0, 0}, {0, 0}, {0, 0}});
         Tensor x64 = Tensor.fromArray(rt, new double[T * K], T, K);
         Tensor idsF32 = Tensor.zeros(rt, DType.F32, T, C);
         Tensor gatesI64 = ids64(IDS);
         Tensor xShort = Tensor.fromArray(rt, new float[T * (K - 1)], T, K - 1);
         Tensor gatesNarrow = Tensor.fromArray(rt, new float[T], T, 1);
         Tensor ids1d = Tensor.fromArray(rt, DType.I64, new long[] {0, 1}, 2);
         Layout transposed = Layout.of(l(K, N, E), l(N, 1, (long) K * N));
         Tensor view = Tensor.of(te, 0, transposed);
         Tensor plain = Tensor.fromArray(rt, tilesToLogical(weights(), GRID, TILE), K, N, E)) {
      States before = states(te);

      IndexOutOfRangeException index = refused(te, IndexOutOfRangeException.class, "expert id 6 at (token 1, slot 1) is outside [0, 6)",
          () -> te.expertMatmul(full, x, idsOut));
      assertTrue(index instanceof StrideWeaveError);
      assertTrue(index instanceof IndexOutOfBoundsException);
      assertEquals(ErrorCode.INDEX, index.code());
      refused(te, IndexOutOfRangeException.class, "expert id -1", () -> te.expertMatmul(full, x, idsNeg, gates));

      TypeMismatchException type = refused(te, TypeMismatchException.class, "x is f64, the experts f32",
          () -> te.expertMatmul(full, x64, ids));
      assertEquals(ErrorCode.TYPE, type.code());
      refused(te, TypeMismatchException.class, "ids must be i32 or i64, not f32", () -> te.expertMatmul(full, x, idsF32));
      refused(te, TypeMismatchException.class, "gates must be a float tensor",
          () -> te.expertMatmul(full, x, ids, gatesI64));
      refused(te, TypeMismatchException.class, "not by this TiledEvictable", () -> te.expertMatmul(plain, x, ids));

      InvalidValueException value = refused(te, InvalidValueException.class, "x must be (tokens, K) = (4, 7)",
          () -> te.expertMatmul(full, xShort, ids));
      assertEquals(ErrorCode.VALUE, value.code());
      refused(te, InvalidValueException.class, "gates must be (tokens, k) = (4, 2), not (4, 1)",
          () -> te.expertMatmul(full, x, ids, gatesNarrow));
      refused(te, InvalidValueException.class, "ids must be (tokens, k)", () -> te.expertMatmul(full, x, ids1d));
      refused(te, InvalidValueException.class, "not a view of it", () -> te.expertMatmul(view, x, ids));

      // Checked in Java before the call.
      exact(NullPointerException.class, () -> te.expertMatmul(full, null, ids));
      exact(NullPointerException.class, () -> te.expertMatmul(null, x, ids, gates));
      assertEquals(before, states(te));

      // The call still works afterwards.
      try (AwaitProjection pending = te.expertMatmul(full, x, ids, gates); Tensor y = pending.get()) {
        assertArrayEquals(reference(xValues(false, T, 0), false, IDS, GATES), y.toFloatArray());
      }
    }
  }

  @Test
  void anotherGeometryIsAValueError() {
    // Experts interleaved: grid (E, 1, 1), tile (1, N, K).
    try (TiledEvictable te = seeded(weights(), l(E, 1, 1), l(1, N, K), Tier.HOST, null); Tensor full = te.fullTensor();
         Tensor x = xTensor(false); Tensor ids = ids64(IDS)) {
      States before = states(te);
      refused(te, InvalidValueException.class,
          "grid (1, 1, E) and tile (K, N, 1); this TiledEvictable has grid (6, 1, 1) and tile (1, 5, 7)",
          () -> te.expertMatmul(full, x, ids));
      assertEquals(before, states(te));
    }
  }

  @Test
  void closedAndDisposedHandlesAreStateErrors() {
    try (TiledEvictable te = experts(Tier.HOST, null); Tensor full = te.fullTensor(); Tensor ids = ids64(IDS)) {
      Tensor x = xTensor(false);
      x.close();
      InvalidStateException closed = exact(InvalidStateException.class, () -> te.expertMatmul(full, x, ids));
      assertEquals("this tensor is closed", closed.getMessage());
      try (Tensor live = xTensor(false)) {
        te.dispose();
        exact(InvalidStateException.class, () -> te.expertMatmul(full, live, ids));
      }
    }
  }

  /** Asserts the exact class and a message naming the problem, with the carrier unchanged. */
  <X extends Throwable> X refused(TiledEvictable te, Class<X> cls, String message, Executable call) {
    States before = states(te);
    X e = exact(cls, call);
    assertTrue(e.getMessage().contains(message), () -> "message: " + e.getMessage());
    assertEquals(before, states(te));
    return e;
  }
}
