package org.strideweave;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/** The tiled-carrier-composition spec, scenario by scenario, through the Java classes. */
class TiledTest extends Fixtures {
  static final long E = 4;
  static final long O = 2;
  static final long I = 3;
  static final long[] EGRID = {E, 1, 1};
  static final long[] ETILE = {1, O, I};
  static final long[] ESHAPE = {E, O, I};

  float[] evalues = arange((int) (E * O * I), 1, 0);
  float[] elogical = tilesToLogical(evalues, EGRID, ETILE);

  TiledEvictable experts() {
    return seeded(evalues, EGRID, ETILE, Tier.HOST, null);
  }

  float[] gvalues = arange(16, 0.5f, -3);
  float[] glogical = tilesToLogical(gvalues, l(2, 2), l(2, 2));

  TiledEvictable grid2d() {
    return seeded(gvalues, l(2, 2), l(2, 2), Tier.HOST, null);
  }

  /** The selected tiles of {@code logical} packed compactly, first mode fastest. */
  static float[] expectedProjection(float[] logical, long[] logicalShape, long[] tile, TileSelection sel) {
    long[] counts = sel.compactGridShape();
    int rank = tile.length;
    long[] shape = new long[rank];
    for (int i = 0; i < rank; ++i) {
      shape[i] = counts[i] * tile[i];
    }
    float[] out = new float[(int) prod(shape)];
    for (int k = 0; k < out.length; ++k) {
      long rest = k;
      long[] src = new long[rank];
      for (int i = 0; i < rank; ++i) {
        long x = rest % shape[i];
        rest /= shape[i];
        src[i] = sel.axis(i)[(int) (x / tile[i])] * tile[i] + x % tile[i];
      }
      out[k] = logical[ordinal(logicalShape, src)];
    }
    return out;
  }

  float[] expertsAt(long... chosen) {
    return expectedProjection(elogical, ESHAPE, ETILE, sel(chosen, l(0), l(0)));
  }

  record States(TileSet primary, TileSet secondary, TileSet valid, TileSet dirty, long version) {}

  static States states(TiledEvictable te) {
    return new States(te.primaryTiles(), te.secondaryTiles(), te.validTiles(), te.dirtyTiles(), te.version());
  }

  // ---- one flat logical storage extent ----

  @Test
  void aTiledEvictableExposesItsGeometry() {
    try (TiledEvictable te = experts(); Tensor full = te.fullTensor(); Carrier primary = te.primary();
         Carrier secondary = te.secondary(); Layout layout = full.layout(); Layout dense = Layout.dense(ESHAPE);
         Carrier back = full.carrier()) {
      assertArrayEquals(EGRID, te.gridShape());
      assertArrayEquals(ETILE, te.tileShape());
      assertArrayEquals(ESHAPE, te.logicalShape());
      assertEquals(3, te.rank());
      assertEquals(E * O * I, te.size());
      assertEquals(DType.F32, te.dtype());
      assertEquals(CarrierKind.TILED, te.kind());
      assertNull(te.residencyPolicy());
      assertFalse(te.hasPolicy());
      assertEquals(CarrierKind.CPU, primary.kind());
      assertEquals(CarrierKind.HOST, secondary.kind());
      assertTrue(primary.isOwned() && secondary.isOwned());
      assertTrue(back instanceof TiledEvictable && back.isSameNative(te));
      assertArrayEquals(ESHAPE, full.shape());
      assertEquals(dense, layout);
      assertArrayEquals(elogical, full.toFloatArray());
    }
  }

  @Test
  void promoteOneExpertTile() {
    try (TiledEvictable te = experts(); Tensor full = te.fullTensor()) {
      long version = full.version();
      te.promote(sel(l(2), l(0), l(0)).tileSet());
      assertEquals(TileSet.of(l(2, 0, 0)), te.primaryTiles());
      assertEquals(new TileState(TileState.Location.PRIMARY, true, false), te.tileState(2, 0, 0));
      assertEquals(new TileState(TileState.Location.SECONDARY, true, false), te.tileState(1, 0, 0));
      assertArrayEquals(ESHAPE, full.shape());
      assertEquals(version, full.version());
      assertArrayEquals(elogical, full.toFloatArray());
    }
  }

  @Test
  void constructionErrors() {
    try (Carrier cpu = Carrier.cpu(rt, DType.F32, 0); Carrier host0 = Carrier.host(rt, DType.F32, 0);
         Carrier host4 = Carrier.host(rt, DType.F32, 4); Carrier host3 = Carrier.host(rt, DType.F32, 3);
         Carrier f64 = Carrier.host(rt, DType.F64, 4); Carrier released = Carrier.host(rt, DType.F32, 4)) {
      exact(TypeMismatchException.class, () -> TiledEvictable.create(host0, host4, l(2), l(2), null));
      exact(TypeMismatchException.class, () -> TiledEvictable.create(cpu, f64, l(2), l(2), null));
      exact(InvalidValueException.class, () -> TiledEvictable.create(cpu, host3, l(2), l(2), null));
      exact(InvalidValueException.class, () -> TiledEvictable.create(cpu, host0, l(2, 2), l(2), null));
      exact(InvalidValueException.class, () -> TiledEvictable.create(cpu, host0, l(0), l(2), null));
      released.dispose();
      exact(InvalidStateException.class, () -> TiledEvictable.create(cpu, released, l(2), l(2), null));
      assertFalse(cpu.isOwned());
      assertFalse(host4.isOwned());
    }
  }

  @Test
  void seedsDecideTheInitialResidency() {
    try (Carrier cpu4 = Carrier.cpu(rt, DType.F32, 4); Carrier host4 = Carrier.host(rt, DType.F32, 4);
         TiledEvictable both = TiledEvictable.create(cpu4, host4, l(2), l(2), null)) {
      assertEquals(tiles1(0, 1), both.dirtyTiles());
      assertEquals(tiles1(0, 1), both.primaryTiles());
      exact(InvalidStateException.class, () -> cpu4.read(0, new float[1])); // owned by a TiledEvictable
    }
    try (Carrier cpu = Carrier.cpu(rt, DType.F32, 0); Carrier host = Carrier.host(rt, DType.F32, 0);
         TiledEvictable empty = TiledEvictable.create(cpu, host, l(2), l(2), null); Tensor full = empty.fullTensor()) {
      assertEquals(TileSet.empty(), empty.validTiles());
      assertEquals(new TileState(TileState.Location.INVALID, false, false), empty.tileState(0));
      exact(InvalidStateException.class, () -> empty.project(full, sel(l(0)), null));
    }
  }

  // ---- footprint compatibility ----

  @Test
  void acceptAWithinTilePermutation() {
    try (TiledEvictable te = grid2d(); Layout permuted = Layout.parse("((2,2),(2,2)):((4,2),(1,8))");
         Tensor t = Tensor.of(te, 0, permuted)) {
      float[] expected = new float[16];
      for (long j = 0; j < 4; ++j) {
        for (long i = 0; i < 4; ++i) {
          expected[(int) (i + 4 * j)] = glogical[(int) permuted.index(i, j)];
        }
      }
      assertArrayEquals(expected, t.toFloatArray());
      TileSelection s = sel(l(1, 0), l(1));
      try (AwaitProjection p = te.project(t, s, null)) {
        assertArrayEquals(expectedProjection(expected, l(4, 4), l(2, 2), s), p.get().toFloatArray());
      }
      float sum = 0;
      for (float v : expected) {
        sum += v;
      }
      assertEquals(sum, t.sum().get(), 1e-5);
    }
  }

  @Test
  void rejectIncompatibleTensorsBeforeAnyChange() {
    try (TiledEvictable te = grid2d()) {
      States before = states(te);
      for (String text : new String[] {"(4,4):(4,1)", "((2,2),(2,2)):((1,1),(4,8))"}) {
        try (Layout lay = Layout.parse(text); Tensor t = Tensor.of(te, 0, lay);
             Tensor zeros = Tensor.zeros(rt, DType.F32, 2, 2)) {
          exact(InvalidValueException.class, () -> te.project(t, sel(l(0), l(1)), null));
          exact(InvalidValueException.class, t::sum);
          exact(InvalidValueException.class, () -> te.scatter(zeros, t, sel(l(0), l(1)), ScatterReduction.REPLACE));
        }
      }
      assertEquals(before, states(te));
    }
    float[] v = arange(16, 1, 0);
    try (TiledEvictable te = seeded(v, l(2, 4), l(2, 1), Tier.HOST, null); Layout lay = Layout.parse("(4,4):(4,1)");
         Tensor t = Tensor.of(te, 0, lay)) {
      exact(InvalidValueException.class, () -> te.project(t, sel(l(0), l(0)), null)); // spans physical tiles
    }
  }

  // ---- project ----

  @Test
  void projectReturnsTheSameCompactTensorInSelectionOrder() {
    try (TiledEvictable te = experts(); Tensor full = te.fullTensor();
         AwaitProjection h = te.project(full, sel(l(2, 0, 3), l(0), l(0)), null)) {
      Tensor compact = h.get();
      assertSame(compact, h.get());
      assertSame(compact, h.get(Duration.ofSeconds(1)));
      assertEquals(AwaitResult.Kind.PROJECTION, h.kind());
      assertEquals(AwaitResult.Status.SUCCEEDED, h.status());
      assertArrayEquals(l(3, O, I), compact.shape());
      assertEquals(DType.F32, compact.dtype());
      try (Layout lay = compact.layout(); Layout dense = Layout.dense(3, O, I); Carrier c = compact.carrier()) {
        assertEquals(dense, lay);
        assertEquals(CarrierKind.CPU, c.kind());
      }
      assertArrayEquals(expertsAt(2, 0, 3), compact.toFloatArray());
      compact.close();
    }
  }

  @Test
  void keepTheFullTensorUnchanged() {
    try (TiledEvictable te = experts(); Tensor full = te.fullTensor()) {
      long version = full.version();
      te.project(full, sel(l(1, 2, 3), l(0), l(0)), null).get();
      assertEquals(version, full.version());
      assertArrayEquals(ESHAPE, full.shape());
      assertArrayEquals(elogical, full.toFloatArray());
    }
  }

  @Test
  void overlapProjectionWithComputation() {
    try (TiledEvictable te = bigTiled(4); Tensor full = te.fullTensor()) {
      AwaitProjection h;
      try (Hold hold = hold()) {
        h = te.project(full, sel(l(3, 1)), null);
        hold.caught();
        assertFalse(h.isDone()); // the transfer is in flight; project did not wait for it
        try (Tensor ones = Tensor.fromArray(rt, new float[] {1, 1, 1}, 3)) {
          assertEquals(3.0, ones.sum().get()); // unrelated work meanwhile
        }
      }
      Tensor compact = h.get();
      assertArrayEquals(l(2L * BIG), compact.shape());
      assertEquals(2.0 * BIG, compact.sum().get());
      h.close();
    }
  }

  @Test
  void gatherPermutedAndMultiAxisSelections() {
    float[] values = arange(40, 1, 0);
    try (TiledEvictable te = seeded(values, l(20), l(2), Tier.HOST, null); Tensor full = te.fullTensor()) {
      assertArrayEquals(new float[] {14, 15, 4, 5, 38, 39}, te.project(full, sel(l(7, 2, 19)), null).get()
          .toFloatArray());
    }
    float[] v2 = arange(160, 0.5f, -3);
    try (TiledEvictable te = seeded(v2, l(8, 10), l(1, 2), Tier.HOST, null); Tensor full = te.fullTensor()) {
      TileSelection s = sel(l(7, 2), l(4, 9));
      float[] logical = tilesToLogical(v2, l(8, 10), l(1, 2));
      assertArrayEquals(expectedProjection(logical, l(8, 20), l(1, 2), s), te.project(full, s, null).get()
          .toFloatArray());
    }
  }

  @Test
  void projectArgumentErrorsChangeNothing() {
    try (TiledEvictable te = experts(); TiledEvictable other = experts(); Tensor full = te.fullTensor();
         Tensor otherFull = other.fullTensor(); Carrier host = Carrier.host(rt, DType.F32, 0);
         Carrier f64 = Carrier.cpu(rt, DType.F64, 0); Carrier small = Carrier.cpu(rt, DType.F32, 3);
         Carrier released = Carrier.cpu(rt, DType.F32, O * I); Carrier claimed = Carrier.cpu(rt, DType.F32, O * I)) {
      TileSelection s = sel(l(1), l(0), l(0));
      States before = states(te);
      exact(TypeMismatchException.class, () -> te.project(otherFull, s, null));
      exact(InvalidValueException.class, () -> te.project(full, sel(l(1), l(0)), null));
      exact(InvalidValueException.class, () -> te.project(full, sel(l(E), l(0), l(0)), null));
      exact(TypeMismatchException.class, () -> te.project(full, s, other));
      exact(TypeMismatchException.class, () -> te.project(full, s, host));
      exact(TypeMismatchException.class, () -> te.project(full, s, f64));
      exact(InvalidValueException.class, () -> te.project(full, s, small));
      released.dispose();
      exact(InvalidStateException.class, () -> te.project(full, s, released));
      claimed.run(h -> Native.sw_testing_claim(h));
      exact(InvalidStateException.class, () -> te.project(full, s, claimed));
      claimed.run(h -> Native.sw_testing_unclaim(h));
      assertEquals(before, states(te));
    }
  }

  @Test
  void projectIntoASuppliedDestination() {
    try (TiledEvictable te = experts(); Tensor full = te.fullTensor()) {
      for (long size : new long[] {0, 2 * O * I + 5}) {
        try (Carrier dest = Carrier.cpu(rt, DType.F32, size);
             Tensor compact = te.project(full, sel(l(3, 1), l(0), l(0)), dest).get(); Carrier c = compact.carrier()) {
          assertTrue(c.isSameNative(dest));
          assertArrayEquals(expertsAt(3, 1), compact.toFloatArray());
        }
      }
    }
  }

  // ---- autograd through projection ----

  @Test
  void backpropagateThroughProjectThenOperation() {
    try (TiledEvictable te = experts(); Tensor full = te.fullTensor().requiresGrad(true)) {
      TileSelection s = sel(l(2, 0), l(0), l(0));
      Tensor compact = te.project(full, s, null).get();
      assertFalse(compact.isLeaf());
      float[] w = arange((int) (2 * O * I), 0.25f, -1);
      compact.relu().mul(Tensor.fromArray(rt, w, 2, O, I)).sum().backward();
      try (Tensor grad = full.grad(); Carrier g = grad.carrier(); Layout gl = grad.layout();
           Layout fl = full.layout()) {
        assertTrue(g instanceof TiledEvictable && !g.isSameNative(te));
        TiledEvictable gt = (TiledEvictable) g;
        assertArrayEquals(EGRID, gt.gridShape());
        assertArrayEquals(ETILE, gt.tileShape());
        assertEquals(fl, gl);
        assertEquals(new TileState(TileState.Location.IMPLICIT, true, false), gt.tileState(1, 0, 0));
        float[] want = new float[(int) (E * O * I)];
        float[] chosen = expertsAt(2, 0);
        for (int c = 0; c < 2; ++c) {
          long e = c == 0 ? 2 : 0;
          for (long o = 0; o < O; ++o) {
            for (long i = 0; i < I; ++i) {
              int k = ordinal(l(2, O, I), c, o, i);
              want[ordinal(ESHAPE, e, o, i)] = chosen[k] > 0 ? w[k] : 0;
            }
          }
        }
        assertArrayEquals(want, grad.toFloatArray());
      }
    }
  }

  @Test
  void accumulateOverlappingProjections() {
    try (TiledEvictable te = experts(); Tensor full = te.fullTensor().requiresGrad(true)) {
      Tensor a = te.project(full, sel(l(0, 1), l(0), l(0)), null).get();
      Tensor b = te.project(full, sel(l(1, 2), l(0), l(0)), null).get();
      a.mul(2.0).add(b.mul(3.0).sum()).sum().backward();
      try (Tensor grad = full.grad(); TiledEvictable g = (TiledEvictable) grad.carrier()) {
        float[] got = grad.toFloatArray();
        float both = 3f * 2 * O * I;
        for (long o = 0; o < O; ++o) {
          for (long i = 0; i < I; ++i) {
            assertEquals(2f, got[ordinal(ESHAPE, 0, o, i)]);
            assertEquals(2f + both, got[ordinal(ESHAPE, 1, o, i)]);
            assertEquals(both, got[ordinal(ESHAPE, 2, o, i)]);
            assertEquals(0f, got[ordinal(ESHAPE, 3, o, i)]);
          }
        }
        assertEquals(TileState.Location.IMPLICIT, g.tileState(3, 0, 0).location());
      }
    }
  }

  // ---- residency ----

  @Test
  void cacheUnrelatedTiles() {
    try (TiledEvictable te = grid2d(); Tensor full = te.fullTensor()) {
      TileSet cache = TileSet.of(l(0, 0), l(0, 1), l(1, 0));
      te.promote(cache);
      assertEquals(cache, te.primaryTiles());
      assertEquals(TileSet.of(l(1, 1)), te.secondaryTiles());
      assertArrayEquals(glogical, full.toFloatArray());
    }
  }

  @Test
  void residencyTransitionsAsyncAndBlocking() {
    try (TiledEvictable te = experts(); Tensor full = te.fullTensor()) {
      TileSelection s = sel(l(1, 3), l(0), l(0));
      try (AwaitResidency h = te.promoteAsync(s)) {
        assertNull(h.get());
        assertNull(h.get());
        assertEquals(AwaitResult.Kind.RESIDENCY, h.kind());
      }
      assertEquals(s.tileSet(), te.primaryTiles());
      te.promote(s.tileSet()); // idempotent
      assertEquals(s.tileSet(), te.primaryTiles());
      te.evict(s.tileSet());
      assertEquals(TileSet.empty(), te.primaryTiles());
      te.evict(s.tileSet());
      te.evictAsync(s).get();
      assertArrayEquals(elogical, full.toFloatArray());
    }
  }

  @Test
  void residencyArgumentErrorsChangeNothing() {
    try (TiledEvictable te = experts()) {
      States before = states(te);
      for (TileSet bad : new TileSet[] {TileSet.of(l(1, 0)), TileSet.of(l(E, 0, 0))}) {
        exact(InvalidValueException.class, () -> te.promoteAsync(bad));
        exact(InvalidValueException.class, () -> te.evictAsync(bad));
        exact(InvalidValueException.class, () -> te.promote(bad));
        exact(InvalidValueException.class, () -> te.evict(bad));
      }
      assertEquals(before, states(te));
    }
  }

  @Test
  void evictASelectedDirtyTileSet() {
    try (TiledEvictable te = experts(); Tensor full = te.fullTensor()) {
      TileSelection s = sel(l(0, 2), l(0), l(0));
      float[] sevens = new float[(int) (2 * O * I)];
      java.util.Arrays.fill(sevens, 7f);
      try (Tensor compact = Tensor.fromArray(rt, sevens, 2, O, I);
           Tensor result = te.scatter(compact, full, s, ScatterReduction.REPLACE).get();
           TiledEvictable r = (TiledEvictable) result.carrier()) {
        assertEquals(s.tileSet(), r.dirtyTiles());
        r.evict(s.tileSet());
        assertEquals(TileSet.empty(), r.dirtyTiles());
        assertEquals(s.tileSet(), r.secondaryTiles());
        assertArrayEquals(sevens, r.project(result, s, null).get().toFloatArray());
      }
    }
  }

  @Test
  void prefetchWithoutChangingAutograd() {
    try (TiledEvictable te = experts(); Tensor full = te.fullTensor().requiresGrad(true)) {
      TileSelection s = sel(l(1, 2), l(0), l(0));
      te.promoteAsync(s).get();
      assertTrue(full.isLeaf() && full.requiresGrad());
      assertNull(full.grad());
      assertEquals(s.tileSet(), te.primaryTiles());
    }
  }

  @Test
  void aFailedResidencyRequestKeepsThePriorState() {
    try (Carrier sec = Carrier.host(rt, DType.F32, 8); Carrier cpu = Carrier.cpu(rt, DType.F32, 0);
         TiledEvictable te = TiledEvictable.create(cpu, sec, l(4), l(2), null)) {
      States before = states(te);
      rt.run(h -> Native.sw_testing_inject_fault(h, 1, 2)); // SW_FAULT_ALLOCATION, the second
      NativeOutOfMemoryException e = exact(NativeOutOfMemoryException.class, () -> te.promote(tiles1(0, 1, 2)));
      assertTrue(e.getMessage().startsWith("injected allocation failure"), e.getMessage());
      assertEquals(before, states(te));
    }
  }

  @Test
  void refuseHiddenWaitingOnAnExternalTransition() {
    try (TiledEvictable te = bigTiled(16); Tensor full = te.fullTensor()) {
      te.evictAsync(tiles1(0)).get();
      AwaitResidency p;
      long[] all = new long[16];
      for (int i = 0; i < 16; ++i) {
        all[i] = i;
      }
      try (Hold hold = hold()) {
        p = te.promoteAsync(tiles1(all));
        hold.caught();
        assertFalse(p.isDone());
        InvalidStateException e = exact(InvalidStateException.class, full::sum);
        assertTrue(e instanceof IllegalStateException);
        exact(InvalidStateException.class, () -> te.project(full, sel(l(0)), null));
      }
      p.get();
      assertEquals(16.0 * BIG, full.sum().get());
    }
  }

  @Test
  void evictionRacesWithExecution() {
    try (TiledEvictable te = bigTiled(4); Tensor full = te.fullTensor()) {
      TileSelection s = sel(l(0, 1));
      AwaitProjection h;
      AwaitResidency e;
      try (Hold hold = hold()) {
        h = te.project(full, s, null);
        hold.caught();
        assertFalse(h.isDone());
        e = te.evictAsync(s); // accepted; it waits for the projection before it evicts
        assertFalse(e.isDone());
      }
      assertEquals(2.0 * BIG, h.get().sum().get());
      e.get();
      assertEquals(TileSet.empty(), te.primaryTiles());
    }
  }

  // ---- direct operations ----

  @Test
  void executeOnAPartiallyResidentFullTensor() {
    try (TiledEvictable te = grid2d(); Tensor full = te.fullTensor()) {
      te.promote(TileSet.of(l(0, 1)));
      double sum = 0;
      float[] twice = new float[16];
      float[] square = new float[16];
      float[] relu = new float[16];
      float[] thrice = new float[16];
      for (int k = 0; k < 16; ++k) {
        sum += glogical[k];
        twice[k] = 2 * glogical[k];
        square[k] = glogical[k] * glogical[k];
        relu[k] = Math.max(glogical[k], 0);
        thrice[k] = 3 * glogical[k];
      }
      assertEquals(sum, full.sum().get(), 1e-5);
      assertArrayEquals(twice, full.add(full).toFloatArray());
      assertArrayEquals(square, full.elementwiseMul(full).toFloatArray());
      assertArrayEquals(square, full.mul(full).toFloatArray());
      assertArrayEquals(thrice, full.mul(3.0).toFloatArray());
      assertArrayEquals(thrice, Ops.scalarMul(3.0, full).toFloatArray());
      assertArrayEquals(relu, full.relu().toFloatArray());
      float[] mm = new float[16];
      for (int i = 0; i < 4; ++i) {
        for (int j = 0; j < 4; ++j) {
          float acc = 0;
          for (int k = 0; k < 4; ++k) {
            acc += glogical[i + 4 * k] * glogical[k + 4 * j];
          }
          mm[i + 4 * j] = acc;
        }
      }
      assertArrayEquals(mm, full.matmul(full).toFloatArray(), 1e-4f);
      try (Tensor result = full.add(full); Carrier c = result.carrier(); Layout lay = result.layout();
           Layout dense = Layout.dense(4, 4)) {
        assertEquals(CarrierKind.CPU, c.kind());
        assertEquals(dense, lay);
      }
    }
  }

  @Test
  void directOpsWithAutogradOnTheFullTensor() {
    try (TiledEvictable te = experts(); Tensor full = te.fullTensor().requiresGrad(true)) {
      full.mul(2.0).sum().backward();
      float[] want = new float[(int) (E * O * I)];
      java.util.Arrays.fill(want, 2f);
      assertArrayEquals(want, full.grad().toFloatArray());
    }
  }

  // ---- scatter ----

  @Test
  void scatterACompactResultAndProjectItBack() {
    try (TiledEvictable te = experts(); Tensor full = te.fullTensor()) {
      TileSelection s = sel(l(3, 0, 2), l(0), l(0));
      float[] values = arange((int) (3 * O * I), -0.75f, 2);
      try (Tensor compact = Tensor.fromArray(rt, values, 3, O, I);
           AwaitMove h = te.scatter(compact, full, s, ScatterReduction.REPLACE)) {
        Tensor result = h.get();
        assertSame(result, h.get());
        try (TiledEvictable r = (TiledEvictable) result.carrier(); Carrier rp = r.primary();
             Carrier rs = r.secondary()) {
          assertFalse(r.isSameNative(te));
          assertArrayEquals(ESHAPE, result.shape());
          assertArrayEquals(EGRID, r.gridShape());
          assertEquals(CarrierKind.CPU, rp.kind());
          assertEquals(CarrierKind.HOST, rs.kind());
          assertEquals(s.tileSet(), r.validTiles());
          assertEquals(s.tileSet(), r.dirtyTiles());
          assertEquals(new TileState(TileState.Location.INVALID, false, false), r.tileState(1, 0, 0));
          assertEquals(1, r.version());
          assertArrayEquals(values, r.project(result, s, null).get().toFloatArray());
        }
        assertArrayEquals(values, compact.toFloatArray());
        assertArrayEquals(elogical, full.toFloatArray());
        result.close();
      }
    }
  }

  @Test
  void scatterAddCombinesWithTheTemplate() {
    try (TiledEvictable te = experts(); Tensor full = te.fullTensor()) {
      TileSelection s = sel(l(1), l(0), l(0));
      float[] ones = new float[(int) (O * I)];
      java.util.Arrays.fill(ones, 1f);
      try (Tensor result = te.scatter(Tensor.fromArray(rt, ones, 1, O, I), full, s, ScatterReduction.ADD).get();
           TiledEvictable r = (TiledEvictable) result.carrier()) {
        float[] want = expertsAt(1);
        for (int k = 0; k < want.length; ++k) {
          want[k] += 1;
        }
        assertArrayEquals(want, r.project(result, s, null).get().toFloatArray());
      }
    }
  }

  @Test
  void rejectACompactShapeMismatchAndOtherScatterErrors() {
    try (TiledEvictable te = experts(); TiledEvictable other = experts(); Tensor full = te.fullTensor();
         Tensor otherFull = other.fullTensor(); Tensor good = Tensor.zeros(rt, DType.F32, 2, O, I);
         Tensor three = Tensor.zeros(rt, DType.F32, 3, O, I); Tensor f64 = Tensor.zeros(rt, DType.F64, 2, O, I);
         Carrier host = Carrier.host(rt, DType.F32, 2 * O * I); Layout dense = Layout.dense(2, O, I);
         Tensor onHost = Tensor.of(host, 0, dense)) {
      TileSelection s = sel(l(1, 2), l(0), l(0));
      States before = states(te);
      ScatterReduction r = ScatterReduction.REPLACE;
      Executable[] values = {() -> te.scatter(three, full, s, r), () -> te.scatter(good, full, sel(l(1, 2), l(0)), r),
                             () -> te.scatter(good, full, sel(l(1, E), l(0), l(0)), r)};
      for (Executable call : values) {
        exact(InvalidValueException.class, call);
      }
      Executable[] types = {() -> te.scatter(good, otherFull, s, r), () -> te.scatter(otherFull, full, s, r),
                            () -> te.scatter(onHost, full, s, r), () -> te.scatter(f64, full, s, r)};
      for (Executable call : types) {
        exact(TypeMismatchException.class, call);
      }
      assertEquals(before, states(te));
      try (Tensor released = Tensor.zeros(rt, DType.F32, 2, O, I); Carrier rc = released.carrier()) {
        rc.dispose();
        exact(InvalidStateException.class, () -> te.scatter(released, full, s, r));
      }
    }
  }

  @Test
  void differentiateReplaceScatter() {
    try (TiledEvictable te = experts(); Tensor full = te.fullTensor()) {
      TileSelection s = sel(l(0, 3), l(0), l(0));
      float[] ones = new float[(int) (2 * O * I)];
      java.util.Arrays.fill(ones, 1f);
      float[] w = arange((int) (2 * O * I), 1, 0);
      try (Tensor compact = Tensor.fromArray(rt, ones, 2, O, I).requiresGrad(true);
           Tensor result = te.scatter(compact, full, s, ScatterReduction.REPLACE).get();
           TiledEvictable r = (TiledEvictable) result.carrier()) {
        Tensor gathered = r.project(result, s, null).get();
        gathered.mul(Tensor.fromArray(rt, w, 2, O, I)).sum().backward();
        assertArrayEquals(w, compact.grad().toFloatArray());
      }
    }
  }

  // ---- release ----

  @Test
  void releaseAfterCompletedTiledWork() {
    try (TiledEvictable te = experts(); Tensor full = te.fullTensor(); Carrier primary = te.primary();
         Carrier secondary = te.secondary(); Tensor zeros = Tensor.zeros(rt, DType.F32, 1, O, I)) {
      te.promote(TileSet.of(l(0, 0, 0)));
      te.project(full, sel(l(1), l(0), l(0)), null).get();
      te.dispose();
      assertTrue(te.isDisposed());
      te.dispose(); // idempotent
      assertTrue(primary.isDisposed() && secondary.isDisposed());
      TileSelection s = sel(l(0), l(0), l(0));
      List<Executable> calls = List.of(() -> te.project(full, s, null), () -> te.promote(s.tileSet()),
          () -> te.evict(s.tileSet()), () -> te.promoteAsync(s), () -> te.evictAsync(s), full::sum,
          () -> te.scatter(zeros, full, s, ScatterReduction.REPLACE), full::toFloatArray, te::fullTensor,
          () -> full.get(0, 0, 0));
      for (Executable call : calls) {
        exact(InvalidStateException.class, call);
      }
    }
  }

  @Test
  void releaseIsRefusedWhileWorkIsPending() {
    try (TiledEvictable te = bigTiled(4); Tensor full = te.fullTensor()) {
      AwaitProjection h;
      try (Hold hold = hold()) {
        h = te.project(full, sel(l(0, 1, 2)), null);
        hold.caught();
        assertFalse(h.isDone());
        exact(InvalidStateException.class, te::dispose);
        assertFalse(te.isDisposed());
      }
      assertEquals(3.0 * BIG, h.get().sum().get());
      te.dispose();
      assertTrue(te.isDisposed());
    }
  }

  // ---- in-place update ----

  @Test
  void updateInPlaceAddsIntoTheSelectedTiles() {
    try (TiledEvictable te = experts(); Tensor full = te.fullTensor()) {
      TileSelection s = sel(l(3, 1), l(0), l(0));
      long version = te.version();
      float[] ones = new float[(int) (2 * O * I)];
      java.util.Arrays.fill(ones, 1f);
      try (Tensor step = Tensor.fromArray(rt, ones, 2, O, I);
           AwaitMove h = te.updateAsync(full, step, s, ScatterReduction.ADD)) {
        assertNull(h.get());
      }
      assertEquals(version + 1, te.version());
      assertEquals(s.tileSet(), te.dirtyTiles());
      float[] want = elogical.clone();
      for (long e : new long[] {3, 1}) {
        for (long o = 0; o < O; ++o) {
          for (long i = 0; i < I; ++i) {
            want[ordinal(ESHAPE, e, o, i)] += 1;
          }
        }
      }
      assertArrayEquals(want, full.toFloatArray());
    }
  }

  // ---- other tiers ----

  @Test
  void fileAndZstdSecondaryTiersRoundTripDirtyValues() {
    for (Tier tier : new Tier[] {Tier.FILE, Tier.ZSTD}) {
      try (TiledEvictable te = seeded(evalues, EGRID, ETILE, tier, null); Tensor full = te.fullTensor()) {
        TileSelection s = sel(l(2, 1), l(0), l(0));
        try (Tensor step = Tensor.fromArray(rt, arange((int) (2 * O * I), 1, 1), 2, O, I)) {
          te.updateAsync(full, step, s, ScatterReduction.REPLACE).get();
        }
        float[] before = full.toFloatArray();
        te.evict(te.primaryTiles());
        assertEquals(TileSet.empty(), te.dirtyTiles(), tier.name());
        assertArrayEquals(before, full.toFloatArray(), tier.name());
      }
    }
  }

  @Test
  void aVulkanPrimaryTierProjectsLikeACpuOne() {
    Device dev;
    try {
      dev = Device.vulkan(rt);
    } catch (UnsupportedFeatureException e) {
      Assumptions.abort("Vulkan unavailable: " + e.getMessage());
      return;
    }
    try (Device d = dev; Carrier vk = Carrier.vulkan(rt, d, DType.F32, 0);
         Carrier sec = Carrier.host(rt, DType.F32, evalues.length)) {
      sec.write(0, evalues);
      try (TiledEvictable te = TiledEvictable.create(vk, sec, EGRID, ETILE, null); Tensor full = te.fullTensor();
           Tensor compact = te.project(full, sel(l(3, 0), l(0), l(0)), null).get(); Carrier c = compact.carrier()) {
        assertEquals(CarrierKind.VULKAN, c.kind());
        assertArrayEquals(expertsAt(3, 0), compact.toFloatArray());
        assertNotNull(te.primaryTiles());
      }
    }
  }
}
