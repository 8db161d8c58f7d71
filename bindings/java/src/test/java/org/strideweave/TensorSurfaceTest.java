package org.strideweave;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The tensor surface's wrappers: each reaches its C function with its arguments in order, hands
 * back new handles the caller owns, and maps the library's errors. The values the functions
 * compute are the C suites'; the ones here only tell the arguments apart.
 */
class TensorSurfaceTest extends Fixtures {
  /** (2, 3), first mode fastest: element (i, j) is i + 2 * j. */
  Tensor t23() {
    return Tensor.fromArray(rt, new float[] {0, 1, 2, 3, 4, 5}, 2, 3);
  }

  @Test
  void factoriesFillRangeAndDraw() {
    try (Tensor f = Tensor.full(rt, DType.I32, 7, 2, 2); Tensor a = Tensor.arange(rt, DType.F64, 1, 2, 0.25)) {
      assertArrayEquals(new int[] {7, 7, 7, 7}, (int[]) f.toArray());
      assertArrayEquals(new double[] {1, 1.25, 1.5, 1.75}, a.toDoubleArray());
    }
    exact(InvalidValueException.class, () -> Tensor.full(rt, DType.I32, 2.5, 2));
    exact(InvalidValueException.class, () -> Tensor.arange(rt, DType.F32, 0, 1, 0));

    RandomOptions o = RandomOptions.uniform(2, 3).seed(9).dtype(DType.F64);
    try (Tensor r = Tensor.random(rt, o, 3, 4); Tensor same = Tensor.random(rt, o, 12);
         Tensor other = Tensor.random(rt, o.seed(10), 12); Tensor n = Tensor.random(rt, RandomOptions.normal(5, 0), 4)) {
      assertEquals(DType.F64, r.dtype());
      assertArrayEquals(l(3, 4), r.shape());
      double[] v = r.toDoubleArray();
      assertArrayEquals(v, same.toDoubleArray()); // counter based: the ordinal, not the shape
      assertFalse(java.util.Arrays.equals(v, other.toDoubleArray()));
      for (double x : v) {
        assertTrue(x >= 2 && x < 3, () -> "" + x);
      }
      assertEquals(DType.F32, n.dtype());
      assertArrayEquals(new float[] {5, 5, 5, 5}, n.toFloatArray()); // stddev 0: the mean
    }
    exact(TypeMismatchException.class, () -> Tensor.random(rt, RandomOptions.DEFAULTS.dtype(DType.I32), 2));
    exact(InvalidValueException.class, () -> Tensor.random(rt, RandomOptions.uniform(1, 0), 2));
    exact(NullPointerException.class, () -> Tensor.random(rt, null, 2));
    exact(NullPointerException.class, () -> RandomOptions.DEFAULTS.dtype(null));
  }

  @Test
  void viewsShareTheCarrierAndCopiesDoNot() {
    try (Tensor t = t23(); Tensor r = t.reshape(3, -1); Tensor v = t.view(6); Tensor f = t.flatten();
         Tensor u = t.unsqueeze(0); Tensor s = u.squeeze(); Tensor s0 = u.squeeze(0); Tensor e = u.expand(4, 2, 3);
         Tensor sl = t.slice(1, 2, Long.MAX_VALUE, 1); Tensor back = t.slice(1, -1, Long.MIN_VALUE, -2);
         Tensor row = t.select(0, 1); Tensor c = t.contiguous(); Tensor k = t.clone(); Tensor d = t.detach();
         Tensor h = t.toDtype(DType.F64); Tensor same = t.toDtype(DType.F32); Tensor ff = t.flatten(0, 1)) {
      assertArrayEquals(l(3, 2), r.shape());
      assertArrayEquals(new float[] {0, 1, 2, 3, 4, 5}, r.toFloatArray()); // first mode fastest
      assertArrayEquals(l(6), v.shape());
      assertArrayEquals(l(6), f.shape());
      assertArrayEquals(l(6), ff.shape());
      assertArrayEquals(l(1, 2, 3), u.shape());
      assertArrayEquals(l(2, 3), s.shape());
      assertArrayEquals(l(2, 3), s0.shape());
      assertArrayEquals(l(4, 2, 3), e.shape());
      assertArrayEquals(new float[] {4, 5}, sl.toFloatArray());
      assertArrayEquals(new float[] {4, 5, 0, 1}, back.toFloatArray());
      assertArrayEquals(new float[] {1, 3, 5}, row.toFloatArray());
      assertEquals(DType.F64, h.dtype());
      assertArrayEquals(new double[] {0, 1, 2, 3, 4, 5}, h.toDoubleArray());

      t.set(40, 0, 2); // element 4: seen by the views, not by the copies
      assertEquals(40, r.get(1, 1));
      assertEquals(40, sl.get(0, 0));
      assertEquals(40, c.get(0, 2)); // already dense: the same values
      assertEquals(40, d.get(0, 2));
      assertEquals(40, same.get(0, 2));
      assertEquals(4, k.get(0, 2));
      assertEquals(4, h.get(0, 2));

      k.fill(2);
      assertArrayEquals(new float[] {2, 2, 2, 2, 2, 2}, k.toFloatArray());
      try (Tensor col = Tensor.fromArray(rt, new float[] {-1, -2}, 2, 1)) {
        assertTrue(k.copyFrom(col) == k); // broadcast along the second mode
      }
      assertArrayEquals(new float[] {-1, -2, -1, -2, -1, -2}, k.toFloatArray());
    }
    try (Tensor t = t23()) {
      exact(InvalidValueException.class, () -> t.reshape(4, 2));
      exact(IndexOutOfRangeException.class, () -> t.select(0, 2));
      exact(IndexOutOfRangeException.class, () -> t.unsqueeze(4));
      exact(InvalidValueException.class, () -> t.slice(0, 0, 2, 0));
      exact(InvalidValueException.class, () -> t.expand(4, 3));
      try (Tensor i = Tensor.zeros(rt, DType.I32, 2)) {
        exact(InvalidValueException.class, () -> i.fill(0.5));
      }
      exact(NullPointerException.class, () -> t.toDtype(null));
      exact(NullPointerException.class, () -> t.copyFrom(null));
    }
    Tensor closed = t23();
    closed.close();
    exact(InvalidStateException.class, closed::clone);
  }

  @Test
  void unaryBinaryScalarAndInPlaceOpsReachTheirCodes() {
    try (Tensor a = Tensor.fromArray(rt, new float[] {-4, 1, 9}, 3); Tensor b = Tensor.fromArray(rt, new float[] {2, 1, 3}, 3)) {
      Object[][] unary = {
          {Ops.Unary.NEG, new float[] {4, -1, -9}}, {Ops.Unary.ABS, new float[] {4, 1, 9}},
          {Ops.Unary.RELU, new float[] {0, 1, 9}}};
      for (Object[] u : unary) {
        try (Tensor r = Ops.apply((Ops.Unary) u[0], a)) {
          assertArrayEquals((float[]) u[1], r.toFloatArray(), u[0].toString());
        }
      }
      try (Tensor s = b.sqrt(); Tensor rs = b.rsqrt(); Tensor z = Tensor.zeros(rt, DType.F32, 3); Tensor ex = z.exp();
           Tensor lg = ex.log()) {
        assertEquals((float) Math.sqrt(3), s.get(2));
        assertEquals(1 / Math.sqrt(2), rs.get(0), 1e-6);
        assertArrayEquals(new float[] {1, 1, 1}, ex.toFloatArray());
        assertArrayEquals(new float[] {0, 0, 0}, lg.toFloatArray());
      }
      for (Ops.Unary op : new Ops.Unary[] {Ops.Unary.SILU, Ops.Unary.GELU, Ops.Unary.SIGMOID, Ops.Unary.TANH}) {
        try (Tensor z = Tensor.zeros(rt, DType.F32, 1); Tensor r = Ops.apply(op, z)) {
          assertEquals(op == Ops.Unary.SIGMOID ? 0.5 : 0, r.get(0), op.toString());
        }
      }
      Object[][] binary = {
          {Ops.Binary.SUB, new float[] {-6, 0, 6}}, {Ops.Binary.DIV, new float[] {-2, 1, 3}},
          {Ops.Binary.POW, new float[] {16, 1, 729}}, {Ops.Binary.MAXIMUM, new float[] {2, 1, 9}},
          {Ops.Binary.MINIMUM, new float[] {-4, 1, 3}}};
      for (Object[] o : binary) {
        try (Tensor r = Ops.apply((Ops.Binary) o[0], a, b)) {
          assertArrayEquals((float[]) o[1], r.toFloatArray(), o[0].toString());
        }
      }
      Object[][] compare = {
          {Ops.Binary.EQ, new byte[] {0, 1, 0}}, {Ops.Binary.NE, new byte[] {1, 0, 1}},
          {Ops.Binary.LT, new byte[] {1, 0, 0}}, {Ops.Binary.LE, new byte[] {1, 1, 0}},
          {Ops.Binary.GT, new byte[] {0, 0, 1}}, {Ops.Binary.GE, new byte[] {0, 1, 1}}};
      for (Object[] o : compare) {
        try (Tensor r = Ops.apply((Ops.Binary) o[0], a, b)) {
          assertEquals(DType.BOOL, r.dtype());
          assertArrayEquals((byte[]) o[1], (byte[]) r.toArray(), o[0].toString());
        }
      }
      try (Tensor s = a.sub(1); Tensor left = Ops.apply(Ops.Scalar.SUB, 1, a); Tensor d = a.div(2);
           Tensor p = b.pow(2); Tensor ge = Ops.apply(Ops.Scalar.GE, a, 1); Tensor ad = a.add(0.5)) {
        assertArrayEquals(new float[] {-5, 0, 8}, s.toFloatArray());
        assertArrayEquals(new float[] {5, 0, -8}, left.toFloatArray()); // scalar - a
        assertArrayEquals(new float[] {-2, 0.5f, 4.5f}, d.toFloatArray());
        assertArrayEquals(new float[] {4, 1, 9}, p.toFloatArray());
        assertArrayEquals(new byte[] {0, 1, 1}, (byte[]) ge.toArray());
        assertArrayEquals(new float[] {-3.5f, 1.5f, 9.5f}, ad.toFloatArray());
      }
      try (Tensor i = Tensor.fromArray(rt, DType.I32, new int[] {1, 2, 3}, 3)) {
        exact(InvalidValueException.class, () -> i.add(0.5)); // a weak scalar takes the dtype
      }
      try (Tensor cond = Ops.apply(Ops.Binary.GT, a, b); Tensor w = Ops.where(cond, a, b)) {
        assertArrayEquals(new float[] {2, 1, 9}, w.toFloatArray());
        exact(TypeMismatchException.class, () -> Ops.where(a, a, b));
      }
      try (Tensor c = a.clone()) {
        long v = c.version();
        assertTrue(c.addInPlace(b) == c);
        Ops.applyInPlace(Ops.Binary.SUB, c, b);
        Ops.applyInPlace(Ops.Scalar.ADD, c, 1);
        c.mulInPlace(2);
        assertArrayEquals(new float[] {-6, 4, 20}, c.toFloatArray());
        assertEquals(v + 4, c.version());
        exact(InvalidValueException.class, () -> Ops.applyInPlace(Ops.Binary.MATMUL, c, b));
        try (Tensor i = Tensor.zeros(rt, DType.I32, 3)) {
          exact(TypeMismatchException.class, () -> i.addInPlace(b)); // f32 into i32
        }
      }
      exact(NullPointerException.class, () -> a.sub((Tensor) null));
    }
  }

  @Test
  void reductionsSoftmaxAndTopk() {
    try (Tensor t = t23(); Tensor m = t.mean(false, 1); Tensor mx = t.max(true); Tensor mn = t.min(false, 0);
         Tensor am = t.argmax(1); Tensor an = t.argmin(-1); Tensor sum = Ops.reduce(Ops.Reduce.SUM, t, false)) {
      assertArrayEquals(new float[] {2, 3}, m.toFloatArray());
      assertArrayEquals(l(1, 1), mx.shape());
      assertEquals(5, mx.get(0, 0));
      assertArrayEquals(new float[] {0, 2, 4}, mn.toFloatArray());
      assertEquals(DType.I64, am.dtype());
      assertArrayEquals(new long[] {2, 2}, (long[]) am.toArray());
      assertArrayEquals(new long[] {0, 0}, (long[]) an.toArray());
      assertEquals(15, sum.get());
      try (Ops.ValuesAndIndices r = Ops.reduceIndex(Ops.Reduce.MAX, t, 0, true)) {
        assertArrayEquals(l(1, 3), r.values().shape());
        assertArrayEquals(new float[] {1, 3, 5}, r.values().toFloatArray());
        assertArrayEquals(new long[] {1, 1, 1}, (long[]) r.indices().toArray());
      }
      exact(InvalidValueException.class, () -> Ops.reduceIndex(Ops.Reduce.SUM, t, 0, false));
      exact(IndexOutOfRangeException.class, () -> t.mean(false, 2));
    }
    try (Tensor x = Tensor.fromArray(rt, new float[] {0, 0, 1, 1}, 2, 2); Tensor s = x.softmax(0);
         Tensor ls = x.logSoftmax(1)) {
      assertArrayEquals(new float[] {0.5f, 0.5f, 0.5f, 0.5f}, s.toFloatArray());
      assertEquals((float) Math.log(1 / (1 + Math.E)), ls.get(0, 0), 1e-6);
      try (Tensor i = Tensor.zeros(rt, DType.I32, 2)) {
        exact(TypeMismatchException.class, () -> i.softmax(0));
      }
    }
    try (Tensor v = Tensor.fromArray(rt, new float[] {3, 9, 1, 9}, 4); Ops.ValuesAndIndices top = v.topk(3, 0)) {
      assertArrayEquals(new float[] {9, 9, 3}, top.values().toFloatArray());
      assertArrayEquals(new long[] {1, 3, 0}, (long[]) top.indices().toArray()); // ties: the lower index
      exact(InvalidValueException.class, () -> v.topk(5, 0));
    }
  }

  @Test
  void indexOpsAndJoins() {
    try (Tensor t = t23(); Tensor idx = Tensor.fromArray(rt, DType.I64, new long[] {2, 0}, 2);
         Tensor cols = t.indexSelect(1, idx)) {
      assertArrayEquals(new float[] {4, 5, 0, 1}, cols.toFloatArray());
      try (Tensor g = Tensor.fromArray(rt, DType.I32, new int[] {1, 0}, 2, 1); Tensor picked = t.gather(0, g)) {
        assertArrayEquals(new float[] {1, 0}, picked.toFloatArray());
      }
      try (Tensor src = Tensor.full(rt, DType.F32, 10, 2, 2); Tensor added = Ops.indexAdd(t, 1, idx, src)) {
        assertArrayEquals(new float[] {10, 11, 2, 3, 14, 15}, added.toFloatArray());
      }
      try (Tensor g = Tensor.fromArray(rt, DType.I64, new long[] {1, 1}, 1, 2); Tensor src = Tensor.full(rt, DType.F32, 1, 1, 2);
           Tensor sc = Ops.scatterAdd(t, 0, g, src)) {
        assertArrayEquals(new float[] {0, 2, 2, 4, 4, 5}, sc.toFloatArray());
      }
      try (Tensor bad = Tensor.fromArray(rt, DType.I64, new long[] {3}, 1)) {
        exact(IndexOutOfRangeException.class, () -> t.indexSelect(1, bad));
      }
      try (Tensor fl = Tensor.zeros(rt, DType.F32, 1)) {
        exact(TypeMismatchException.class, () -> t.indexSelect(1, fl));
      }
      try (Tensor c = Ops.cat(1, t, cols); Tensor s = Ops.stack(0, t, t); Tensor i = Tensor.arange(rt, DType.I32, 0, 2, 1);
           Tensor f = Tensor.arange(rt, DType.F64, 2, 3, 1); Tensor mixed = Ops.cat(0, i, f)) {
        assertArrayEquals(l(2, 5), c.shape());
        assertArrayEquals(new float[] {0, 1, 2, 3, 4, 5, 4, 5, 0, 1}, c.toFloatArray());
        assertArrayEquals(l(2, 2, 3), s.shape());
        assertEquals(DType.F64, mixed.dtype()); // promoted
        assertArrayEquals(new double[] {0, 1, 2}, mixed.toDoubleArray());
      }
      exact(InvalidValueException.class, () -> Ops.cat(0));
      exact(InvalidValueException.class, () -> Ops.stack(0, t, cols));
      exact(NullPointerException.class, () -> Ops.cat(0, t, null));
      Tensor closed = t23();
      closed.close();
      exact(InvalidStateException.class, () -> Ops.stack(0, t, closed));
      // The first operands' uses ended although a later one was closed: t still closes.
    }
  }

  @Test
  void fileSegmentsReadPiecesInOrder(@TempDir Path dir) throws Exception {
    ByteBuffer b = ByteBuffer.allocate(8 * 4).order(ByteOrder.nativeOrder());
    for (int i = 0; i < 8; ++i) {
      b.putFloat(i * 10);
    }
    Path file = Files.write(dir.resolve("w.bin"), b.array());
    List<Carrier.Segment> pieces = List.of(new Carrier.Segment(24, 2), new Carrier.Segment(0, 1),
        new Carrier.Segment(8, 0), new Carrier.Segment(4, 2));
    try (Carrier c = Carrier.openFileSegments(rt, DType.F32, file, pieces);
         Carrier d = Carrier.openFileSegments(rt, DType.F32, file, pieces, FileOptions.builder().directIo(true).build())) {
      assertEquals(5, c.size());
      float[] v = new float[5];
      c.read(0, v);
      assertArrayEquals(new float[] {60, 70, 0, 10, 20}, v);
      d.read(0, v);
      assertArrayEquals(new float[] {60, 70, 0, 10, 20}, v);
      exact(InvalidStateException.class, () -> c.write(0, new float[] {1}));
    }
    InvalidValueException e = exact(InvalidValueException.class,
        () -> Carrier.openFileSegments(rt, DType.F32, file, List.of(new Carrier.Segment(28, 2))));
    assertTrue(e.getMessage().contains("segment"), e.getMessage());
    exact(InvalidValueException.class,
        () -> Carrier.openFileSegments(rt, DType.F32, file, List.of(new Carrier.Segment(-4, 1))));
    exact(StorageIOException.class, () -> Carrier.openFileSegments(rt, DType.F32, dir.resolve("none"), List.of()));
    exact(NullPointerException.class, () -> Carrier.openFileSegments(rt, DType.F32, file, null));
  }
}
