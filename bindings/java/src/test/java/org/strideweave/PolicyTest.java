package org.strideweave;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BiFunction;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/** Residency policies written in Java, and the built-in LRU policy. */
class PolicyTest extends Fixtures {
  /** Plans to promote what is required (or what {@code makePlan} says); records every call. */
  static final class Recorder implements ResidencyPolicy {
    final List<Object[]> calls = Collections.synchronizedList(new ArrayList<>());
    final List<Object[]> outcomes = Collections.synchronizedList(new ArrayList<>());
    final BiFunction<TileSet, Purpose, ResidencyPlan> makePlan;

    Recorder(BiFunction<TileSet, Purpose, ResidencyPlan> makePlan) {
      this.makePlan = makePlan;
    }

    Recorder() {
      this((required, purpose) -> ResidencyPlan.promote(required));
    }

    @Override
    public ResidencyPlan plan(TileSet required, Purpose purpose) {
      calls.add(new Object[] {required, purpose});
      return makePlan.apply(required, purpose);
    }

    final List<Thread> outcomeThreads = Collections.synchronizedList(new ArrayList<>());

    @Override
    public void outcome(ResidencyPlan plan, boolean committed, TileSet promoted, TileSet evicted) {
      outcomes.add(new Object[] {plan, committed, promoted, evicted});
      outcomeThreads.add(Thread.currentThread());
    }
  }

  float[] values = arange(8, 1, 0);

  TiledEvictable make(ResidencyPolicy policy) {
    return seeded(values, l(4), l(2), Tier.HOST, policy);
  }

  @Test
  void thePolicyIsCalledWithTheRequiredTilesAndPurpose() {
    Recorder rec = new Recorder();
    try (TiledEvictable te = make(rec); Tensor full = te.fullTensor()) {
      assertSame(rec, te.residencyPolicy());
      assertTrue(te.hasPolicy());
      TileSelection s = sel(l(3, 1));
      assertArrayEquals(new float[] {6, 7, 2, 3}, te.project(full, s, null).get().toFloatArray());
      assertEquals(1, rec.calls.size());
      assertEquals(s.tileSet(), rec.calls.get(0)[0]);
      assertEquals(Purpose.PROJECTION, rec.calls.get(0)[1]);
      rec.calls.clear();
      full.sum();
      assertEquals(tiles1(0, 1, 2, 3), rec.calls.get(0)[0]);
      assertEquals(Purpose.OPERATION, rec.calls.get(0)[1]);
      rec.calls.clear();
      try (Tensor zeros = Tensor.zeros(rt, DType.F32, 2)) {
        te.scatter(zeros, full, sel(l(0)), ScatterReduction.REPLACE).get();
      }
      assertEquals(Purpose.SCATTER, rec.calls.get(0)[1]);
      // outcome: every plan is reported, committed with what it promoted
      Object[] first = rec.outcomes.stream().filter(o -> o[0] != null).findFirst().orElseThrow();
      assertEquals(ResidencyPlan.promote(s.tileSet()), first[0]);
      assertEquals(true, first[1]);
      assertEquals(s.tileSet(), first[2]);
    }
  }

  @Test
  void aLibraryThreadCallingJavaIsAttachedAsADaemon() throws Exception {
    Recorder rec = new Recorder();
    float[] v = arange(8, 1, 0);
    try (TiledEvictable te = seeded(v, l(4), l(2), Tier.FILE, rec); Tensor full = te.fullTensor()) {
      for (long tile = 0; tile < 4; ++tile) {
        te.project(full, sel(l(tile)), null).get(); // commits on the runtime's loop thread
      }
    }
    List<Thread> fromLibrary = new ArrayList<>();
    for (Thread t : rec.outcomeThreads) {
      if (t != Thread.currentThread()) {
        fromLibrary.add(t);
      }
    }
    assertTrue(!fromLibrary.isEmpty(), "no outcome came from a library thread");
    for (Thread t : fromLibrary) {
      assertTrue(t.isDaemon(), t.getName());
      assertEquals("strideweave-native", t.getName());
    }
    rt.shutdown(); // the loop thread ends, and with it its attachment
    for (Thread t : fromLibrary) {
      t.join(60_000); // a bound, not a timing: detaching ends the Java thread at once
      assertTrue(!t.isAlive(), "the library thread was not detached when it ended");
    }
  }

  @Test
  void backwardHasItsPurposeAndAnUnreachableBranchNoCall() {
    Recorder recA = new Recorder();
    Recorder recB = new Recorder();
    try (TiledEvictable a = make(recA); TiledEvictable b = make(recB); Tensor fa = a.fullTensor();
         Tensor fb = b.fullTensor(); Tensor w = Tensor.fromArray(rt, new float[] {1, 1, 1, 1, 1, 1, 1, 1}, 8)) {
      w.requiresGrad(true);
      Tensor ya = fa.elementwiseMul(w); // saves a's tiles for backward
      Tensor yb = fb.elementwiseMul(w); // a branch the loss never reaches
      a.evict(tiles1(0, 1, 2, 3));
      recA.calls.clear();
      recB.calls.clear();
      ya.sum().backward();
      assertEquals(1, recA.calls.size());
      assertEquals(tiles1(0, 1, 2, 3), recA.calls.get(0)[0]);
      assertEquals(Purpose.BACKWARD, recA.calls.get(0)[1]);
      assertEquals(0, recB.calls.size());
      assertArrayEquals(values, w.grad().toFloatArray());
      assertArrayEquals(l(8), yb.shape());
    }
  }

  @Test
  void aValidPlanPromotesRetainsAndEvicts() {
    Recorder rec = new Recorder((required, purpose) -> ResidencyPlan.of(tiles1(0).union(required), null, tiles1(3)));
    try (TiledEvictable te = make(rec); Tensor full = te.fullTensor()) {
      te.promote(tiles1(3));
      te.project(full, sel(l(1)), null).get();
      assertEquals(TileState.Location.PRIMARY, te.tileState(0).location());
      assertEquals(TileState.Location.PRIMARY, te.tileState(1).location());
      assertEquals(TileState.Location.SECONDARY, te.tileState(3).location());
    }
  }

  static final class Boom extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Boom(String message) {
      super(message);
    }
  }

  @Test
  void anExceptionThrownByTheJavaPolicyReachesTheCallerAsTheSameObjectBeforeAnyWork() {
    Boom raised = new Boom("no plan today");
    try (TiledEvictable te = make(new Recorder((r, p) -> {
      throw raised;
    })); Tensor full = te.fullTensor(); Tensor zeros = Tensor.zeros(rt, DType.F32, 2)) {
      TiledTest.States before = TiledTest.states(te);
      List<Executable> calls = List.of(() -> te.project(full, sel(l(1)), null), full::sum,
          () -> te.scatter(zeros, full, sel(l(0)), ScatterReduction.REPLACE));
      for (Executable call : calls) {
        Boom got = assertThrows(Boom.class, call);
        assertSame(raised, got);
      }
      assertEquals(before, TiledTest.states(te));
    }
  }

  @Test
  void aPolicyExceptionOfAKnownKindTravelsWithItsCode() {
    IllegalArgumentException bad = new IllegalArgumentException("bad tile");
    InvalidStateException busy = new InvalidStateException("busy");
    for (RuntimeException thrown : new RuntimeException[] {bad, busy}) {
      try (TiledEvictable te = make(new Recorder((r, p) -> {
        throw thrown;
      })); Tensor full = te.fullTensor()) {
        assertSame(thrown, assertThrows(RuntimeException.class, () -> te.project(full, sel(l(1)), null)));
      }
    }
    assertEquals(ErrorCode.VALUE, Errors.codeOf(bad));
    assertEquals(ErrorCode.STATE, Errors.codeOf(busy));
    assertEquals(ErrorCode.INTERNAL, Errors.codeOf(new RuntimeException()));
  }

  /** Throws a checked exception past the compiler, as some libraries do. */
  @SuppressWarnings("unchecked")
  static <E extends Throwable> RuntimeException sneaky(Throwable t) throws E {
    throw (E) t;
  }

  @Test
  void aCheckedExceptionArrivesAsTheCauseOfAnExceptionOfItsKind() {
    IOException io = new IOException("disk on fire");
    Exception plain = new Exception("plain");
    try (TiledEvictable te = make(new Recorder((r, p) -> {
      throw sneaky(io);
    })); Tensor full = te.fullTensor()) {
      StorageIOException e = exact(StorageIOException.class, () -> te.project(full, sel(l(1)), null));
      assertSame(io, e.getCause());
      assertTrue(e.getMessage().contains("residency policy threw java.io.IOException: disk on fire"), e.getMessage());
    }
    try (TiledEvictable te = make(new Recorder((r, p) -> {
      throw sneaky(plain);
    })); Tensor full = te.fullTensor()) {
      InternalErrorException e = exact(InternalErrorException.class, () -> te.project(full, sel(l(1)), null));
      assertSame(plain, e.getCause());
      assertEquals(ErrorCode.INTERNAL, e.code());
    }
  }

  @Test
  void rejectAnInvalidPolicyResultBeforeExecution() {
    try (TiledEvictable te = make(new Recorder((r, p) -> null)); Tensor full = te.fullTensor()) {
      TiledTest.States before = TiledTest.states(te);
      exact(TypeMismatchException.class, () -> te.project(full, sel(l(1)), null));
      assertEquals(before, TiledTest.states(te));
    }
  }

  @Test
  void aPlanIncompatibleWithTheGridIsInvalidValue() {
    try (TiledEvictable te = make(new Recorder((r, p) -> ResidencyPlan.promote(tiles1(9))));
         Tensor full = te.fullTensor()) {
      exact(InvalidValueException.class, () -> te.project(full, sel(l(1)), null));
    }
    try (TiledEvictable te = make(new Recorder((r, p) -> ResidencyPlan.promote(TileSet.of(l(0, 0)))));
         Tensor full = te.fullTensor()) {
      exact(InvalidValueException.class, () -> te.project(full, sel(l(1)), null));
    }
  }

  @Test
  void backwardWithoutAPolicyAfterEviction() {
    try (TiledEvictable te = make(null); Tensor full = te.fullTensor().requiresGrad(true);
         Tensor w = Tensor.fromArray(rt, arange(8, 1, -2), 8).requiresGrad(true)) {
      Tensor loss = full.elementwiseMul(w).sum();
      Tensor compact = te.project(full, sel(l(2, 0)), null).get();
      Tensor loss2 = compact.mul(compact).sum();
      te.evict(tiles1(0, 1, 2, 3));
      assertEquals(TileSet.empty(), te.primaryTiles());
      loss.backward();
      loss2.backward();
      assertArrayEquals(values, w.grad().toFloatArray());
      float[] want = arange(8, 1, -2);
      for (int k : new int[] {4, 5, 0, 1}) {
        want[k] += 2 * values[k];
      }
      assertArrayEquals(want, full.grad().toFloatArray());
    }
  }

  @Test
  void theBuiltInLruPolicyKeepsABudget() {
    try (LruPolicy lru = LruPolicy.create(2); TiledEvictable te = make(lru); Tensor full = te.fullTensor()) {
      assertSame(lru, te.residencyPolicy());
      for (long tile : new long[] {0, 1, 2, 0, 3}) {
        te.project(full, sel(l(tile)), null).get();
        assertTrue(te.primaryTiles().size() <= 2);
      }
      LruPolicy.LruStats stats = lru.stats();
      assertEquals(5, stats.requests());
      assertTrue(stats.misses() >= 4 && stats.evicted() >= 2, stats.toString());
      lru.hint(tiles1(1));
      ResidencyPlan plan = lru.plan(tiles1(2), Purpose.PROJECTION);
      assertTrue(plan.promote().contains(2) || te.primaryTiles().contains(2), plan.toString());
      assertEquals(stats, lru.stats()); // planning alone commits nothing
      assertArrayEquals(values, full.toFloatArray());
    }
    exact(InvalidValueException.class, () -> LruPolicy.create(0));
  }

  @Test
  void aJavaPolicyServesSeveralThreads() throws Exception {
    Recorder rec = new Recorder();
    float[] v = arange(32, 1, 0);
    try (TiledEvictable te = seeded(v, l(8), l(4), Tier.HOST, rec); Tensor full = te.fullTensor()) {
      AtomicReference<Throwable> failure = new AtomicReference<>();
      Thread[] threads = new Thread[4];
      for (int k = 0; k < threads.length; ++k) {
        int base = k;
        threads[k] = new Thread(() -> {
          try {
            for (int i = 0; i < 20; ++i) {
              int tile = (base + i) % 8;
              try (AwaitProjection p = te.project(full, sel(l(tile)), null); Tensor got = p.get()) {
                assertArrayEquals(java.util.Arrays.copyOfRange(v, 4 * tile, 4 * tile + 4), got.toFloatArray());
              }
            }
          } catch (Throwable t) {
            failure.compareAndSet(null, t);
          }
        });
        threads[k].start();
      }
      for (Thread t : threads) {
        t.join();
      }
      if (failure.get() != null) {
        throw new AssertionError(failure.get());
      }
      assertEquals(80, rec.calls.size());
    }
  }
}
