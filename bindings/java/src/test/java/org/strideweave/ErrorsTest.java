package org.strideweave;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import org.junit.jupiter.api.Test;

/** Every error kind the library reports arrives as its exception class, with its code. */
class ErrorsTest extends Fixtures {
  @Test
  void typeValueStateAndIndex() {
    try (Tensor f = Tensor.fromArray(rt, new float[] {1, 2}, 2); Tensor d = Tensor.fromArray(rt, new double[] {1}, 1)) {
      assertEquals(ErrorCode.TYPE, exact(TypeMismatchException.class, () -> f.add(d)).code());
      assertEquals(ErrorCode.INDEX, exact(IndexOutOfRangeException.class, () -> f.get(2)).code());
    }
    assertEquals(ErrorCode.VALUE, exact(InvalidValueException.class, () -> Layout.parse("(4,")).code());
    try (Tensor i = Tensor.fromArray(rt, DType.I32, new int[] {1}, 1)) {
      InvalidValueException e = exact(InvalidValueException.class, () -> i.set(0.5, 0));
      assertTrue(e.getMessage().length() > 0);
    }
    try (Carrier c = Carrier.cpu(rt, DType.F32, 4)) {
      c.run(h -> Native.sw_testing_claim(h));
      InvalidStateException e = exact(InvalidStateException.class, () -> c.write(0, new float[] {1}));
      assertEquals(ErrorCode.STATE, e.code());
      assertTrue(e instanceof IllegalStateException);
      exact(InvalidStateException.class, c::dispose);
      c.run(h -> Native.sw_testing_unclaim(h));
      exact(InvalidStateException.class, () -> c.run(h -> Native.sw_testing_unclaim(h)));
    }
  }

  @Test
  void outOfMemoryThenRetry() {
    rt.run(h -> Native.sw_testing_inject_fault(h, 1, 1)); // SW_FAULT_ALLOCATION
    NativeOutOfMemoryException e = exact(NativeOutOfMemoryException.class, () -> Carrier.cpu(rt, DType.F32, 16));
    assertEquals(ErrorCode.OUT_OF_MEMORY, e.code());
    assertTrue(e.getMessage().contains("injected allocation failure"), e.getMessage());
    try (Carrier c = Carrier.cpu(rt, DType.F32, 16)) {
      assertEquals(16, c.size());
    }
    // Zero-copy imports allocate nothing, so the armed fault waits for the next carrier.
    rt.run(h -> Native.sw_testing_inject_fault(h, 1, 1));
    try (Carrier ext = Carrier.cpuExternal(rt, DType.F32, ByteBuffer.allocateDirect(16), false)) {
      assertEquals(4, ext.size());
    }
    exact(NativeOutOfMemoryException.class, () -> Carrier.host(rt, DType.F32, 4));
  }

  @Test
  void ioUnsupportedAndDataCorrupt() {
    try (Carrier sec = Carrier.file(rt, DType.F32, 8, null); Carrier cpu = Carrier.cpu(rt, DType.F32, 0);
         TiledEvictable te = TiledEvictable.create(cpu, sec, l(4), l(2), null)) {
      rt.run(h -> Native.sw_testing_inject_fault(h, 2, 1)); // SW_FAULT_READ
      assertEquals(ErrorCode.IO, exact(StorageIOException.class, () -> te.promote(tiles1(0))).code());
      assertEquals(TileState.Location.SECONDARY, te.tileState(0).location());
    }
    try (Carrier z = Carrier.zstd(rt, DType.F32, 64, 1, 16)) {
      assertEquals(ErrorCode.UNSUPPORTED, exact(UnsupportedFeatureException.class, z::hostBuffer).code());
      z.write(0, arange(64, 1, 0));
      z.run(h -> Native.sw_testing_corrupt_frame(h, 1));
      DataCorruptException e = exact(DataCorruptException.class, () -> z.read(16, new float[4]));
      assertEquals(ErrorCode.DATA_CORRUPT, e.code());
      assertTrue(e instanceof InvalidValueException);
      float[] intact = new float[4];
      z.read(0, intact); // other frames still read
      assertEquals(3f, intact[3]);
    }
    try (Carrier cpu = Carrier.cpu(rt, DType.F32, 4)) {
      exact(UnsupportedFeatureException.class, () -> cpu.run(h -> Native.sw_testing_corrupt_frame(h, 0)));
    }
  }

  @Test
  void cancelledAfterShutdown() {
    try (Tensor t = Tensor.fromArray(rt, new float[] {1}, 1); Carrier dest = Carrier.host(rt, DType.F32, 0)) {
      rt.shutdown();
      CancelledException e = exact(CancelledException.class, () -> t.moveTo(dest));
      assertEquals(ErrorCode.CANCELLED, e.code());
      assertEquals(1.0, t.get(0)); // synchronous calls keep working
    }
  }

  @Test
  void checksMadeInJavaUseTheSameClasses() {
    exact(InvalidValueException.class, () -> Tensor.fromArray(rt, new float[] {1}, 2));
    exact(TypeMismatchException.class, () -> Tensor.fromArray(rt, DType.I64, new int[] {1}, 1));
    exact(InvalidValueException.class, () -> DType.of(99));
    exact(InvalidValueException.class, () -> Layout.dense(new long[17]));
    exact(NullPointerException.class, () -> Carrier.cpu(null, DType.F32, 1));
  }
}
