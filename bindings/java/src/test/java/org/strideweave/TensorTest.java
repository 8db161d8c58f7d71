package org.strideweave;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Layouts, carriers, tensors, ops and autograd through the Java classes. */
class TensorTest extends Fixtures {
  @Test
  void denseLayoutsAreFirstModeFastest() {
    try (Layout d = Layout.dense(4, 4); Layout p = Layout.parse("(4,4):(1,4)");
         Layout nested = Layout.parse("(4,(2,2)):(1,(4,8))")) {
      assertEquals("(4,4):(1,4)", d.toString());
      assertEquals(d, p);
      assertEquals(d.hashCode(), p.hashCode());
      assertEquals(16, d.size());
      assertEquals(16, d.cosize());
      assertTrue(d.isInjective());
      assertEquals(1 + 4 * 2, d.index(1, 2));
      assertEquals(9, d.encode(1, 2));
      assertArrayEquals(l(1, 2), d.decode(9));
      assertArrayEquals(l(4, 4), nested.extents());
      assertEquals(1 + 4 * 1 + 8 * 1, nested.index(1, 3));
      try (Layout t = d.permute(1, 0)) {
        assertEquals("(4,4):(4,1)", t.toString());
      }
      try (Layout g = Layout.group(Layout.dense(2), Layout.of(l(3), l(2)))) {
        assertEquals(2, g.rank());
      }
      assertNotEquals(d, nested);
    }
    InvalidValueException e = exact(InvalidValueException.class, () -> Layout.parse("(4,4):(1"));
    assertTrue(e.getMessage().length() > 0);
    exact(InvalidValueException.class, () -> Layout.of(l(2, 2), l(1)));
  }

  @Test
  void everyDtypeReadsAndWritesItsJavaArray() {
    Object[] arrays = {new float[] {1.5f, -2}, new double[] {1e300, -3}, new int[] {7, -8}, new long[] {1L << 40, -9},
                       new short[] {0x3c00, (short) 0xc000}, new short[] {0x3f80, (short) 0xc000},
                       new byte[] {(byte) 200, 3}, new byte[] {1, 0}};
    DType[] dtypes = {DType.F32, DType.F64, DType.I32, DType.I64, DType.F16, DType.BF16, DType.U8, DType.BOOL};
    for (int i = 0; i < dtypes.length; ++i) {
      try (Tensor t = Tensor.fromArray(rt, dtypes[i], arrays[i], 2)) {
        assertEquals(dtypes[i], t.dtype());
        Object back = t.toArray();
        assertEquals(arrays[i].getClass(), back.getClass());
        assertTrue(java.util.Objects.deepEquals(arrays[i], back), dtypes[i].label());
      }
    }
    try (Tensor f16 = Tensor.fromArray(rt, DType.F16, new short[] {0x3c00, (short) 0xc000}, 2)) {
      assertEquals(1.0, f16.get(0));
      assertEquals(-2.0, f16.get(1));
    }
    try (Tensor u8 = Tensor.fromArray(rt, DType.U8, new byte[] {(byte) 200, 3}, 2)) {
      assertEquals(200.0, u8.get(0));
    }
    exact(TypeMismatchException.class, () -> Tensor.fromArray(rt, DType.F64, new float[] {1}, 1));
    exact(InvalidValueException.class, () -> Tensor.fromArray(rt, new float[] {1, 2, 3}, 2, 2));
  }

  @Test
  void valuesAreFirstModeFastestAndElementsAddressable() {
    try (Tensor t = Tensor.fromArray(rt, new float[] {1, 2, 3, 4, 5, 6}, 2, 3)) {
      assertArrayEquals(l(2, 3), t.shape());
      assertEquals(2, t.rank());
      assertEquals(6, t.numel());
      assertEquals(2.0, t.get(1, 0));
      assertEquals(3.0, t.get(0, 1));
      long v0 = t.version();
      t.set(9, 1, 2);
      assertEquals(v0 + 1, t.version());
      assertArrayEquals(new float[] {1, 2, 3, 4, 5, 9}, t.toFloatArray());
      try (Tensor tt = t.transpose(0, 1); Layout lay = tt.layout()) {
        assertArrayEquals(l(3, 2), tt.shape());
        assertArrayEquals(new float[] {1, 3, 5, 2, 4, 9}, tt.toFloatArray());
        assertEquals("(3,2):(2,1)", lay.toString());
      }
      try (Tensor p = t.permute(1, 0)) {
        assertEquals(2.0, p.get(0, 1));
      }
      t.write(new float[] {0, 0, 0, 0, 0, 1});
      assertEquals(1.0, t.get(1, 2));
      exact(TypeMismatchException.class, t::toDoubleArray);
      exact(IndexOutOfRangeException.class, () -> t.get(2, 0));
    }
  }

  @Test
  void directBuffersAreReadAndWrittenInPlace() {
    ByteBuffer in = ByteBuffer.allocateDirect(16).order(ByteOrder.nativeOrder());
    in.asFloatBuffer().put(new float[] {1, 2, 3, 4});
    try (Tensor t = Tensor.fromBuffer(rt, DType.F32, in, 2, 2)) {
      ByteBuffer out = ByteBuffer.allocateDirect(16).order(ByteOrder.nativeOrder());
      t.read(out);
      assertEquals(16, out.position());
      assertEquals(4f, out.getFloat(12));
      in.clear();
      in.asFloatBuffer().put(new float[] {5, 6, 7, 8});
      t.write(in);
      assertArrayEquals(new float[] {5, 6, 7, 8}, t.toFloatArray());
      exact(InvalidValueException.class, () -> t.read(ByteBuffer.allocate(16)));
      exact(InvalidValueException.class, () -> t.read(ByteBuffer.allocateDirect(8)));
    }
  }

  @Test
  void zeroCopyCarriersShareMemoryBothWays() {
    ByteBuffer memory = ByteBuffer.allocateDirect(16).order(ByteOrder.nativeOrder());
    memory.asFloatBuffer().put(new float[] {1, 2, 3, 4});
    try (Carrier c = Carrier.cpuExternal(rt, DType.F32, memory, false); Layout lay = Layout.dense(4);
         Tensor t = Tensor.of(c, 0, lay)) {
      assertEquals(CarrierKind.CPU, c.kind());
      assertEquals(10.0, with(t.sum(), s -> s.get()));
      memory.putFloat(0, 10); // what Java writes is what ops read
      assertEquals(19.0, with(t.sum(), s -> s.get()));
      t.set(-1, 3); // what the library writes lands in the buffer
      assertEquals(-1f, memory.getFloat(12));
      ByteBuffer shared = c.hostBuffer();
      assertEquals(16, shared.capacity());
      assertEquals(10f, shared.getFloat(0));
    }
    try (Carrier ro = Carrier.cpuExternal(rt, DType.F32, ByteBuffer.allocateDirect(8), true)) {
      assertTrue(ro.isReadOnly());
      exact(InvalidStateException.class, () -> ro.write(0, new float[] {1}));
    }
    exact(InvalidValueException.class, () -> Carrier.cpuExternal(rt, DType.F32, ByteBuffer.allocateDirect(6), false));
    try (Carrier cpu = Carrier.cpu(rt, DType.F32, 4)) {
      ByteBuffer b = cpu.hostBuffer();
      b.putFloat(4, 2.5f);
      float[] got = new float[4];
      cpu.read(0, got);
      assertArrayEquals(new float[] {0, 2.5f, 0, 0}, got);
    }
    try (Carrier z = Carrier.zstd(rt, DType.F32, 4, 1, 0)) {
      exact(UnsupportedFeatureException.class, z::hostBuffer);
    }
  }

  @Test
  void carriersReportTheirStateAndDisposeIdempotently(@TempDir Path dir) throws Exception {
    try (Carrier c = Carrier.cpuFrom(rt, DType.F32, new float[] {1, 2, 3})) {
      assertEquals(3, c.size());
      assertEquals(DType.F32, c.dtype());
      assertTrue(c.isMutable());
      assertFalse(c.isOwned());
      long v = c.version();
      c.write(1, new float[] {7});
      assertEquals(v + 1, c.version());
      float[] got = new float[2];
      c.read(1, got);
      assertArrayEquals(new float[] {7, 3}, got);
      exact(IndexOutOfRangeException.class, () -> c.read(2, new float[2]));
      c.dispose();
      c.dispose();
      assertTrue(c.isDisposed());
      assertEquals(3, c.size());
      exact(InvalidStateException.class, () -> c.read(0, new float[1]));
    }
    Path weights = dir.resolve("w.bin");
    ByteBuffer b = ByteBuffer.allocate(16).order(ByteOrder.nativeOrder());
    b.asFloatBuffer().put(new float[] {1, 2, 3, 4});
    Files.write(weights, b.array());
    try (Carrier f = Carrier.openFile(rt, DType.F32, weights, 4, 3)) {
      assertEquals(CarrierKind.FILE, f.kind());
      assertTrue(f.isReadOnly());
      float[] got = new float[3];
      f.read(0, got);
      assertArrayEquals(new float[] {2, 3, 4}, got);
      exact(InvalidStateException.class, () -> f.write(0, new float[] {1}));
    }
    exact(InvalidValueException.class, () -> Carrier.openFile(rt, DType.F32, weights, 0, 5));
    exact(StorageIOException.class, () -> Carrier.openFile(rt, DType.F32, dir.resolve("missing"), 0, 1));
    try (Carrier z = Carrier.zstd(rt, DType.F32, 1024, 1, 256)) {
      assertEquals(CarrierKind.ZSTD, z.kind());
      z.write(0, new float[1024]);
      assertTrue(z.storedBytes() < 4096);
    }
  }

  @Test
  void opsComputeAndBroadcast() {
    try (Tensor a = Tensor.fromArray(rt, new float[] {1, -2, 3, -4}, 2, 2);
         Tensor b = Tensor.fromArray(rt, new float[] {10, 20}, 2, 1)) {
      assertArrayEquals(new float[] {11, 18, 13, 16}, a.add(b).toFloatArray());
      assertArrayEquals(new float[] {10, -40, 30, -80}, a.mul(b).toFloatArray());
      assertArrayEquals(new float[] {10, -40, 30, -80}, a.elementwiseMul(b).toFloatArray());
      assertArrayEquals(new float[] {2, -4, 6, -8}, a.mul(2.0).toFloatArray());
      assertArrayEquals(new float[] {3, -6, 9, -12}, Ops.scalarMul(3.0, a).toFloatArray());
      assertArrayEquals(new float[] {1, 0, 3, 0}, a.relu().toFloatArray());
      assertEquals(-2.0, a.sum().get());
      assertArrayEquals(new float[] {-1, -1}, a.sum(false, 0).toFloatArray());
      assertArrayEquals(l(1, 2), a.sum(true, 0).shape());
      // (2,2) @ (2,1): rows of a are (1, 3) and (-2, -4)
      assertArrayEquals(new float[] {70, -100}, a.matmul(b).toFloatArray());
      try (Tensor d = Tensor.fromArray(rt, new double[] {1, 2}, 2, 1)) {
        exact(TypeMismatchException.class, () -> a.add(d));
      }
      exact(InvalidValueException.class, () -> a.sum(false, 0, 0));
      exact(IndexOutOfRangeException.class, () -> a.sum(false, 5));
    }
    try (Tensor h = Tensor.fromArray(rt, DType.BF16, new short[] {0x3f80, 0x4000, 0x4040, 0x4080}, 2, 2);
         Tensor f32 = h.matmul(h, DType.F32)) {
      assertEquals(DType.F32, f32.dtype());
      assertArrayEquals(new float[] {7, 10, 15, 22}, f32.toFloatArray());
    }
  }

  @Test
  void autogradAccumulatesLeafGradients() {
    try (Tensor w = Tensor.fromArray(rt, new float[] {1, 2, 3}, 3).requiresGrad(true)) {
      assertTrue(w.requiresGrad());
      assertTrue(w.isLeaf());
      assertNull(w.grad());
      Tensor y = w.elementwiseMul(w).sum();
      assertFalse(y.isLeaf());
      y.backward();
      assertArrayEquals(new float[] {2, 4, 6}, w.grad().toFloatArray());
      exact(InvalidStateException.class, y::backward); // the graph was freed
      Tensor z = w.mul(3.0).sum();
      z.backward(null, true);
      z.backward(null, false);
      assertArrayEquals(new float[] {8, 10, 12}, w.grad().toFloatArray());
      w.clearGrad();
      assertNull(w.grad());
      exact(InvalidValueException.class, () -> y.requiresGrad(true));
      try (StrideWeave.GradMode off = StrideWeave.noGrad()) {
        assertTrue(w.mul(2.0).isLeaf());
      }
      try (Tensor c = Tensor.fromArray(rt, new float[] {1, 1, 1}, 3); Tensor v = w.mul(c)) {
        v.backward(Tensor.fromArray(rt, new float[] {1, 2, 3}, 3), false);
        assertArrayEquals(new float[] {1, 2, 3}, w.grad().toFloatArray());
      }
    }
    try (Tensor i = Tensor.fromArray(rt, DType.I32, new int[] {1}, 1)) {
      exact(TypeMismatchException.class, () -> i.requiresGrad(true));
    }
  }

  @Test
  void aMoveDisposesTheSourceAndModifiedInPlaceIsRefused() {
    try (Tensor t = Tensor.fromArray(rt, new float[] {1, 2}, 2); Carrier dest = Carrier.cpu(rt, DType.F32, 0);
         AwaitMove m = t.moveTo(dest); Tensor moved = m.get(); Carrier src = t.carrier()) {
      assertSame(moved, m.get());
      assertArrayEquals(new float[] {1, 2}, moved.toFloatArray());
      assertTrue(src.isDisposed());
      assertEquals(2, dest.size());
    }
    try (Tensor w = Tensor.fromArray(rt, new float[] {1, 2}, 2).requiresGrad(true);
         Tensor x = Tensor.fromArray(rt, new float[] {3, 4}, 2)) {
      Tensor y = w.mul(x).sum();
      x.set(0, 0);
      InvalidStateException e = exact(InvalidStateException.class, y::backward);
      assertTrue(e.getMessage().contains("modified in-place"), e.getMessage());
    }
  }

  static void assertSame(Object a, Object b) {
    org.junit.jupiter.api.Assertions.assertSame(a, b);
  }
}
