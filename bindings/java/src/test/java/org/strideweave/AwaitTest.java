package org.strideweave;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Awaits: blocking get, timeouts, futures completed from the loop, failures, shutdown. */
class AwaitTest extends Fixtures {
  /** A promotion whose first read is held in flight until release(): pending, deterministically. */
  final class HeldPromotion implements AutoCloseable {
    final TiledEvictable te;
    final AwaitResidency handle;
    final Hold hold;

    HeldPromotion() {
      try (Carrier sec = Carrier.file(rt, DType.F32, 4 * 16, null); Carrier cpu = Carrier.cpu(rt, DType.F32, 0)) {
        te = TiledEvictable.create(cpu, sec, l(4), l(16), null);
      }
      hold = hold();
      handle = te.promoteAsync(tiles1(0, 1, 2, 3));
      hold.caught();
    }

    @Override
    public void close() {
      hold.close();
      handle.get(Duration.ofSeconds(60));
      handle.close();
      te.close();
    }
  }

  @Test
  void waitWithATimeoutAndDone() {
    try (HeldPromotion p = new HeldPromotion()) {
      AwaitResidency h = p.handle;
      assertFalse(h.isDone());
      assertEquals(AwaitResult.Status.PENDING, h.status());
      WaitTimeoutException e = exact(WaitTimeoutException.class, () -> h.get(Duration.ZERO));
      assertEquals(ErrorCode.TIMEOUT, e.code());
      assertTrue(e.getMessage().contains("still pending"), e.getMessage());
      assertFalse(h.isDone());
      p.hold.close();
      assertNull(h.get(Duration.ofSeconds(60)));
      assertTrue(h.isDone());
      assertNull(h.get());
    }
  }

  @Test
  void theFutureCompletesWithTheSameTensorGetReturns() throws Exception {
    try (TiledEvictable te = bigTiled(2); Tensor full = te.fullTensor()) {
      AwaitProjection h;
      CompletableFuture<Tensor> f;
      try (Hold hold = hold()) {
        h = te.project(full, sel(l(1, 0)), null);
        hold.caught();
        f = h.toFuture();
        assertSame(f, h.toFuture());
        assertFalse(f.isDone());
      }
      Tensor viaFuture = f.get(60, TimeUnit.SECONDS);
      assertSame(viaFuture, h.get());
      assertEquals(2.0 * BIG, viaFuture.sum().get());
      // A dependent stage runs off the loop thread, so it may wait on other work.
      String thread = f.thenApply(t -> Thread.currentThread().getName()).get(60, TimeUnit.SECONDS);
      assertFalse(thread.startsWith("strideweave-native"), thread);
      h.close();
    }
  }

  @Test
  void aFutureOfFinishedWorkCompletesAtOnceWithTheCachedResult() throws Exception {
    try (TiledEvictable te = seeded(arange(8, 1, 0), l(4), l(2), Tier.HOST, null); Tensor full = te.fullTensor();
         AwaitProjection h = te.project(full, sel(l(2)), null)) {
      Tensor first = h.get();
      assertSame(first, h.toFuture().get(60, TimeUnit.SECONDS));
      assertArrayEquals(new float[] {4, 5}, first.toFloatArray());
    }
    try (TiledEvictable te = seeded(arange(8, 1, 0), l(4), l(2), Tier.HOST, null);
         AwaitResidency r = te.promoteAsync(tiles1(1))) {
      assertNull(r.toFuture().get(60, TimeUnit.SECONDS));
    }
  }

  @Test
  void prefetchPromotesFromAFileTier() throws Exception {
    try (Carrier sec = Carrier.file(rt, DType.F32, 8, null); Carrier cpu = Carrier.cpu(rt, DType.F32, 0);
         TiledEvictable te = TiledEvictable.create(cpu, sec, l(4), l(2), null);
         AwaitResidency h = te.prefetchAsync(tiles1(1, 3))) {
      assertNull(h.get());
      assertEquals(tiles1(1, 3), te.primaryTiles());
      exact(InvalidValueException.class, () -> te.prefetchAsync(tiles1(4)));
      assertEquals(tiles1(1, 3), te.primaryTiles());
    }
  }

  @Test
  void failedWorkThrowsTheSameKindEveryWaitAndFailsTheFuture() throws Exception {
    try (Carrier sec = Carrier.file(rt, DType.F32, 8, null); Carrier cpu = Carrier.cpu(rt, DType.F32, 0);
         TiledEvictable te = TiledEvictable.create(cpu, sec, l(4), l(2), null)) {
      rt.run(h -> Native.sw_testing_inject_fault(h, 2, 1)); // SW_FAULT_READ
      try (AwaitResidency h = te.promoteAsync(tiles1(0, 1))) {
        StorageIOException first = exact(StorageIOException.class, h::get);
        StorageIOException second = exact(StorageIOException.class, h::get);
        assertNotSame(first, second);
        assertEquals(first.getMessage(), second.getMessage());
        assertTrue(h.isDone());
        assertEquals(AwaitResult.Status.FAILED, h.status());
        ExecutionException e = assertThrows(ExecutionException.class, () -> h.toFuture().get(60, TimeUnit.SECONDS));
        assertSame(StorageIOException.class, e.getCause().getClass());
        assertEquals(first.getMessage(), e.getCause().getMessage());
      }
      assertEquals(TileSet.empty(), te.primaryTiles());
    }
  }

  @Test
  void shutdownCancelsPendingWork() throws Exception {
    HeldPromotion p = new HeldPromotion();
    CompletableFuture<Void> f = p.handle.toFuture();
    rt.shutdown(); // also lets the held read complete, into a cancelled request
    CancelledException e = exact(CancelledException.class, p.handle::get);
    assertTrue(e instanceof IllegalStateException);
    assertEquals(ErrorCode.CANCELLED, e.code());
    ExecutionException ee = assertThrows(ExecutionException.class, () -> f.get(60, TimeUnit.SECONDS));
    assertSame(CancelledException.class, ee.getCause().getClass());
    assertEquals(TileSet.empty(), p.te.primaryTiles()); // usable and unchanged
    exact(CancelledException.class, () -> p.te.promoteAsync(tiles1(0)));
    p.handle.close();
    p.te.close();
  }

  @Test
  void aCallbackCanBeInstalledOnlyOnce() {
    try (TiledEvictable te = seeded(arange(8, 1, 0), l(4), l(2), Tier.HOST, null);
         AwaitResidency r = te.promoteAsync(tiles1(1))) {
      r.toFuture();
      exact(InvalidStateException.class, () -> r.run(h -> Native.await_set_callback(h, r)));
    }
  }

  @Test
  void eventsOfTheRuntimeAreExposed() {
    assertTrue(rt.eventFd() >= 0);
    assertEquals(0, rt.processEvents());
    assertTrue(rt.computeThreads() >= 1);
    try (StrideWeaveRuntime two = StrideWeaveRuntime.create(2, 1, 1 << 20)) {
      assertEquals(2, two.computeThreads());
    }
    exact(InvalidValueException.class, () -> StrideWeaveRuntime.create(-1, 0, -1));
  }
}
