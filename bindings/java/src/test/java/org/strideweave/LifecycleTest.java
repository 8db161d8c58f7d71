package org.strideweave;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.ref.WeakReference;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/** close(): idempotent, thread-safe, waits for calls in flight; use after close; the Cleaner. */
class LifecycleTest extends Fixtures {
  @Test
  void useAfterCloseThrowsInvalidStateExceptionNamingTheObject() {
    Tensor t = Tensor.fromArray(rt, new float[] {1, 2}, 2);
    Layout lay = Layout.dense(2);
    Carrier c = Carrier.cpu(rt, DType.F32, 2);
    LruPolicy lru = LruPolicy.create(1);
    t.close();
    lay.close();
    c.close();
    lru.close();
    assertTrue(t.isClosed());
    List<Executable> calls = List.of(t::toFloatArray, t::shape, () -> t.add(t), t::backward, lay::size,
        () -> Tensor.of(c, 0, Layout.dense(2)), c::size, () -> lru.hint(tiles1(0)));
    for (Executable call : calls) {
      InvalidStateException e = exact(InvalidStateException.class, call);
      assertTrue(e instanceof IllegalStateException);
      assertEquals(ErrorCode.STATE, e.code());
      assertTrue(e.getMessage().endsWith("is closed"), e.getMessage());
    }
    assertEquals("this tensor is closed", exact(InvalidStateException.class, t::numel).getMessage());
    assertEquals("Tensor[closed]", t.toString());
    assertEquals("Layout[closed]", lay.toString());
  }

  @Test
  void doubleCloseIsHarmlessAndClosingOneObjectLeavesTheOthers() {
    Tensor t = Tensor.fromArray(rt, new float[] {1, 2}, 2);
    Carrier c = t.carrier();
    t.close();
    t.close();
    assertTrue(t.isClosed());
    assertEquals(2, c.size()); // the carrier object holds its own reference
    c.close();
    c.close();
    StrideWeaveRuntime other = StrideWeaveRuntime.create();
    Tensor u = Tensor.fromArray(other, new float[] {3}, 1);
    other.close(); // the tensor keeps its runtime alive natively
    other.close();
    assertEquals(3.0, u.get(0));
    u.close();
  }

  @Test
  void closeFromManyThreadsAtOnceReleasesOnce() throws Exception {
    for (int round = 0; round < 20; ++round) {
      Tensor t = Tensor.fromArray(rt, new float[] {1}, 1);
      Thread[] threads = new Thread[4];
      for (int k = 0; k < threads.length; ++k) {
        threads[k] = new Thread(t::close);
        threads[k].start();
      }
      for (Thread th : threads) {
        th.join();
      }
      assertTrue(t.isClosed());
    }
  }

  @Test
  void closeWaitsForACallInFlightOnTheSameObject() throws Exception {
    try (TiledEvictable te = bigTiled(2); Tensor full = te.fullTensor()) {
      AwaitProjection h;
      AtomicReference<Object> got = new AtomicReference<>();
      Thread waiter;
      Thread closer;
      try (Hold hold = hold()) {
        h = te.project(full, sel(l(0, 1)), null);
        hold.caught();
        waiter = new Thread(() -> {
          try {
            got.set(h.get()); // blocks inside the native wait: a call in flight on h
          } catch (Throwable t) {
            got.set(t);
          }
        });
        waiter.start();
        while (waiter.isAlive() && !isInNativeWait(waiter)) {
          Thread.onSpinWait();
        }
        assertTrue(waiter.isAlive(), () -> "the waiter ended early: " + got.get());
        closer = new Thread(h::close);
        closer.start();
        while (closer.isAlive() && closer.getState() != Thread.State.WAITING) {
          Thread.onSpinWait();
        }
        assertTrue(closer.isAlive(), "close() returned while a call was in flight");
        assertTrue(h.isClosed());
        assertTrue(waiter.isAlive());
        exact(InvalidStateException.class, h::isDone); // new calls are refused at once
      }
      waiter.join();
      closer.join();
      Tensor compact = (Tensor) got.get();
      assertEquals(2.0 * BIG, compact.sum().get());
      compact.close();
    }
  }

  /** Whether the thread is inside the native await wait (its top frame is NativeJNI.await_wait). */
  static boolean isInNativeWait(Thread t) {
    StackTraceElement[] stack = t.getStackTrace();
    return stack.length > 0 && stack[0].getMethodName().equals("await_wait");
  }

  /** A tensor over {@code c} that nothing but the returned weak reference reaches. */
  static WeakReference<Tensor> forget(Carrier c) {
    try (Layout lay = Layout.dense(4)) {
      return new WeakReference<>(Tensor.of(c, 0, lay));
    }
  }

  @Test
  void theCleanerReleasesWhatTheUserForgot() throws Exception {
    Carrier c = Carrier.cpu(rt, DType.F32, 4);
    Carrier probe = c.call(h -> {
      Native.sw_carrier_retain(h);
      return new Carrier(h);
    });
    WeakReference<Tensor> ref = forget(c);
    c.close();
    for (int i = 0; i < 200 && ref.get() != null; ++i) {
      System.gc();
      Thread.sleep(10);
    }
    assertFalse(ref.get() != null, "the tensor stayed reachable");
    // the carrier is still alive through the probe's own reference
    assertArrayEquals(new float[] {0, 0, 0, 0}, with(probe, p -> {
      float[] v = new float[4];
      p.read(0, v);
      return v;
    }));
    probe.close();
  }
}
