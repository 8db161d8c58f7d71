package org.strideweave;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/** Conversions between Java primitive arrays and the native-order bytes the library reads. */
final class Buffers {
  private Buffers() {}

  /** The dtypes a Java array of this class holds; null for a class that is no primitive array. */
  static DType[] dtypesOf(Object array) {
    if (array instanceof float[]) {
      return new DType[] {DType.F32};
    }
    if (array instanceof double[]) {
      return new DType[] {DType.F64};
    }
    if (array instanceof int[]) {
      return new DType[] {DType.I32};
    }
    if (array instanceof long[]) {
      return new DType[] {DType.I64};
    }
    if (array instanceof short[]) {
      return new DType[] {DType.F16, DType.BF16};
    }
    if (array instanceof byte[]) {
      return new DType[] {DType.U8, DType.BOOL};
    }
    return null;
  }

  /** Throws TypeMismatchException unless {@code array} holds elements of {@code dtype}. */
  static void check(Object array, DType dtype) {
    DType[] ok = dtypesOf(array);
    if (ok == null) {
      throw new TypeMismatchException("expected a primitive array, got " + array.getClass().getName());
    }
    for (DType d : ok) {
      if (d == dtype) {
        return;
      }
    }
    throw new TypeMismatchException("a " + array.getClass().getSimpleName() + " cannot hold " + dtype.label()
        + " elements");
  }

  static int length(Object array) {
    return java.lang.reflect.Array.getLength(array);
  }

  static ByteBuffer allocate(long bytes) {
    if (bytes > Integer.MAX_VALUE) {
      throw new InvalidValueException(bytes + " bytes do not fit one Java buffer; read into several");
    }
    return ByteBuffer.allocateDirect((int) Math.max(bytes, 1)).order(ByteOrder.nativeOrder());
  }

  /** A direct native-order buffer holding the array's elements. */
  static ByteBuffer pack(Object array) {
    int n = length(array);
    if (array instanceof float[]) {
      ByteBuffer b = allocate(4L * n);
      b.asFloatBuffer().put((float[]) array);
      return b;
    }
    if (array instanceof double[]) {
      ByteBuffer b = allocate(8L * n);
      b.asDoubleBuffer().put((double[]) array);
      return b;
    }
    if (array instanceof int[]) {
      ByteBuffer b = allocate(4L * n);
      b.asIntBuffer().put((int[]) array);
      return b;
    }
    if (array instanceof long[]) {
      ByteBuffer b = allocate(8L * n);
      b.asLongBuffer().put((long[]) array);
      return b;
    }
    if (array instanceof short[]) {
      ByteBuffer b = allocate(2L * n);
      b.asShortBuffer().put((short[]) array);
      return b;
    }
    ByteBuffer b = allocate(n);
    b.put((byte[]) array);
    b.clear();
    return b;
  }

  /** Copies the buffer's elements (from position 0) into the array. */
  static void unpack(ByteBuffer b, Object array) {
    b.clear();
    if (array instanceof float[]) {
      b.asFloatBuffer().get((float[]) array);
    } else if (array instanceof double[]) {
      b.asDoubleBuffer().get((double[]) array);
    } else if (array instanceof int[]) {
      b.asIntBuffer().get((int[]) array);
    } else if (array instanceof long[]) {
      b.asLongBuffer().get((long[]) array);
    } else if (array instanceof short[]) {
      b.asShortBuffer().get((short[]) array);
    } else {
      b.get((byte[]) array);
    }
  }

  /** A new array of the Java type of {@code dtype}. */
  static Object newArray(DType dtype, int n) {
    switch (dtype) {
      case F32: return new float[n];
      case F64: return new double[n];
      case I32: return new int[n];
      case I64: return new long[n];
      case F16:
      case BF16: return new short[n];
      default: return new byte[n];
    }
  }

  /** Throws unless {@code b} is direct; its remaining bytes are the range used. */
  static void checkDirect(ByteBuffer b) {
    if (!b.isDirect()) {
      throw new InvalidValueException("the buffer must be a direct ByteBuffer (ByteBuffer.allocateDirect)");
    }
  }

  static int toInt(long n, String what) {
    if (n > Integer.MAX_VALUE) {
      throw new InvalidValueException(what + " has " + n + " elements, more than a Java array holds");
    }
    return (int) n;
  }
}
