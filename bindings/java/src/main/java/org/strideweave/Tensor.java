package org.strideweave;

import java.nio.ByteBuffer;
import java.util.Objects;

/**
 * A tensor ({@code sw_tensor_t}): (carrier, offset, layout); element {@code c} lives at slot
 * {@code offset + layout.index(c)}. Its shape is the layout's top-level extents. A tensor is
 * also its autograd identity ({@link #requiresGrad}, {@link #grad()}, {@link #backward()}).
 * Bulk reads and writes are first mode fastest.
 *
 * <p>Values move through primitive arrays of the dtype's Java type ({@code float[]} for f32,
 * {@code double[]} for f64, {@code int[]}, {@code long[]}, {@code short[]} holding f16 or bf16
 * bits, {@code byte[]} for u8 and bool; see {@link DType}) or through direct
 * {@link ByteBuffer}s in native byte order, which the library reads and writes in place.
 * {@link Carrier#hostBuffer()} shares a CPU carrier's memory without any copy.
 */
public final class Tensor extends NativeHandle {
  private Tensor(long handle) {
    super(handle, NativeJNI::sw_tensor_release, "tensor");
  }

  static Tensor adopt(long handle) {
    return new Tensor(handle);
  }

  /**
   * A tensor over an existing carrier.
   *
   * @param carrier the carrier
   * @param offset slot of coordinate 0
   * @param layout the layout
   * @return the tensor
   * @throws IndexOutOfRangeException when a reachable slot is outside the carrier
   */
  public static Tensor of(Carrier carrier, long offset, Layout layout) {
    return carrier.call(c -> layout.call(l -> {
      long[] out = new long[1];
      Native.sw_tensor_create(c, offset, l, out);
      return new Tensor(out[0]);
    }));
  }

  /**
   * A dense CPU tensor holding a copy of a primitive array, first mode fastest.
   *
   * @param runtime the runtime
   * @param dtype the element type, which the array's class must hold
   * @param values numel(shape) values
   * @param shape the extents
   * @return the tensor
   */
  public static Tensor fromArray(StrideWeaveRuntime runtime, DType dtype, Object values, long... shape) {
    Buffers.check(values, dtype);
    ByteBuffer b = Buffers.pack(values);
    long bytes = (long) Buffers.length(values) * dtype.size();
    long numel = 1;
    for (long e : shape) {
      numel *= e;
    }
    if (numel != Buffers.length(values)) {
      throw new InvalidValueException("the shape holds " + numel + " elements; " + Buffers.length(values)
          + " values were given");
    }
    return runtime.call(r -> new Tensor(Native.tensor_from_buffer(r, dtype.value(), shape.clone(), b, 0, bytes)));
  }

  /**
   * A dense f32 CPU tensor holding a copy of {@code values}, first mode fastest.
   *
   * @param runtime the runtime
   * @param values numel(shape) values
   * @param shape the extents
   * @return the tensor
   */
  public static Tensor fromArray(StrideWeaveRuntime runtime, float[] values, long... shape) {
    return fromArray(runtime, DType.F32, values, shape);
  }

  /**
   * A dense f64 CPU tensor holding a copy of {@code values}, first mode fastest.
   *
   * @param runtime the runtime
   * @param values numel(shape) values
   * @param shape the extents
   * @return the tensor
   */
  public static Tensor fromArray(StrideWeaveRuntime runtime, double[] values, long... shape) {
    return fromArray(runtime, DType.F64, values, shape);
  }

  /**
   * A dense CPU tensor holding a copy of the remaining bytes of a direct buffer (exactly
   * numel(shape) elements, native byte order).
   *
   * @param runtime the runtime
   * @param dtype the element type
   * @param values a direct buffer
   * @param shape the extents
   * @return the tensor
   */
  public static Tensor fromBuffer(StrideWeaveRuntime runtime, DType dtype, ByteBuffer values, long... shape) {
    Buffers.checkDirect(values);
    return runtime.call(r -> new Tensor(Native.tensor_from_buffer(r, dtype.value(), shape.clone(), values,
        values.position(), values.remaining())));
  }

  /**
   * A dense zero-filled CPU tensor.
   *
   * @param runtime the runtime
   * @param dtype the element type
   * @param shape the extents
   * @return the tensor
   */
  public static Tensor zeros(StrideWeaveRuntime runtime, DType dtype, long... shape) {
    return runtime.call(r -> {
      long[] out = new long[1];
      Native.sw_tensor_zeros(r, dtype.value(), shape.clone(), out);
      return new Tensor(out[0]);
    });
  }

  /**
   * The carrier (a new Java object holding its own reference; a {@link TiledEvictable} for a
   * tiled carrier).
   *
   * @return the carrier
   */
  public Carrier carrier() {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_tensor_carrier(h, out);
      return Carrier.adopt(out[0]);
    });
  }

  /**
   * The layout.
   *
   * @return the layout (a new reference)
   */
  public Layout layout() {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_tensor_layout(h, out);
      return Layout.adopt(out[0]);
    });
  }

  /**
   * The slot of coordinate 0.
   *
   * @return the offset
   */
  public long offset() {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_tensor_offset(h, out);
      return out[0];
    });
  }

  /**
   * The element type.
   *
   * @return the dtype
   */
  public DType dtype() {
    return call(h -> {
      int[] out = new int[1];
      Native.sw_tensor_dtype(h, out);
      return DType.of(out[0]);
    });
  }

  /**
   * The number of modes.
   *
   * @return the rank
   */
  public int rank() {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_tensor_rank(h, out);
      return (int) out[0];
    });
  }

  /**
   * The top-level extents.
   *
   * @return the shape
   */
  public long[] shape() {
    return call(Native::tensor_shape);
  }

  /**
   * The number of elements.
   *
   * @return numel
   */
  public long numel() {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_tensor_numel(h, out);
      return out[0];
    });
  }

  /**
   * The carrier's version.
   *
   * @return the version
   */
  public long version() {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_tensor_version(h, out);
      return out[0];
    });
  }

  /**
   * One element as a double (integers exact up to 2^53, bool as 0/1).
   *
   * @param coord one entry per mode (none for a scalar)
   * @return the value
   */
  public double get(long... coord) {
    return call(h -> {
      double[] out = new double[1];
      Native.sw_tensor_get(h, coord.clone(), out);
      return out[0];
    });
  }

  /**
   * Writes one element converted from a double; one version step.
   *
   * @param value the value
   * @param coord one entry per mode
   * @throws InvalidValueException when the value does not fit an integer dtype
   */
  public void set(double value, long... coord) {
    run(h -> Native.sw_tensor_set(h, coord.clone(), value));
  }

  /**
   * Every element, first mode fastest, in a new array of the dtype's Java type.
   *
   * @return a {@code float[]}, {@code double[]}, ... (see {@link DType})
   */
  public Object toArray() {
    DType dtype = dtype();
    Object a = Buffers.newArray(dtype, Buffers.toInt(numel(), "the tensor"));
    read(a);
    return a;
  }

  /**
   * Every element of an f32 tensor, first mode fastest.
   *
   * @return the values
   * @throws TypeMismatchException for another dtype
   */
  public float[] toFloatArray() {
    float[] a = new float[Buffers.toInt(numel(), "the tensor")];
    read(a);
    return a;
  }

  /**
   * Every element of an f64 tensor, first mode fastest.
   *
   * @return the values
   * @throws TypeMismatchException for another dtype
   */
  public double[] toDoubleArray() {
    double[] a = new double[Buffers.toInt(numel(), "the tensor")];
    read(a);
    return a;
  }

  /**
   * Copies every element, first mode fastest, into a primitive array of the dtype's Java type
   * holding exactly numel elements.
   *
   * @param destination the array
   */
  public void read(Object destination) {
    DType dtype = dtype();
    Buffers.check(destination, dtype);
    long bytes = (long) Buffers.length(destination) * dtype.size();
    ByteBuffer b = Buffers.allocate(bytes);
    run(h -> Native.tensor_read_buffer(h, b, 0, bytes));
    Buffers.unpack(b, destination);
  }

  /**
   * Copies every element, first mode fastest, into a direct buffer from its position (at least
   * numel * dtype size bytes must remain), advancing the position past them.
   *
   * @param destination a direct buffer
   */
  public void read(ByteBuffer destination) {
    Buffers.checkDirect(destination);
    long bytes = numel() * dtype().size();
    run(h -> Native.tensor_read_buffer(h, destination, destination.position(), bytes));
    destination.position(destination.position() + (int) bytes);
  }

  /**
   * Writes every element from a primitive array of the dtype's Java type (numel values, first
   * mode fastest); one version step.
   *
   * @param source the values
   * @throws InvalidValueException when the layout is not injective
   */
  public void write(Object source) {
    DType dtype = dtype();
    Buffers.check(source, dtype);
    ByteBuffer b = Buffers.pack(source);
    long bytes = (long) Buffers.length(source) * dtype.size();
    run(h -> Native.tensor_write_buffer(h, b, 0, bytes));
  }

  /**
   * Writes every element from a direct buffer's remaining bytes (exactly numel * dtype size);
   * one version step. The position advances past them.
   *
   * @param source a direct buffer
   */
  public void write(ByteBuffer source) {
    Buffers.checkDirect(source);
    int bytes = source.remaining();
    run(h -> Native.tensor_write_buffer(h, source, source.position(), bytes));
    source.position(source.position() + bytes);
  }

  /**
   * A view whose mode i is mode {@code perm[i]} (same carrier and offset); differentiable.
   *
   * @param perm a permutation of the modes
   * @return the view
   */
  public Tensor permute(long... perm) {
    return call(h -> new Tensor(Native.tensor_permute(h, perm.clone())));
  }

  /**
   * The view with two modes swapped.
   *
   * @param axis0 a mode
   * @param axis1 another mode
   * @return the view
   */
  public Tensor transpose(int axis0, int axis1) {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_tensor_transpose(h, axis0, axis1, out);
      return new Tensor(out[0]);
    });
  }

  // ---- ops (see Ops) ----

  /**
   * {@code this + other}, broadcasting.
   *
   * @param other the other operand
   * @return a new tensor
   */
  public Tensor add(Tensor other) {
    return Ops.apply(Ops.Binary.ADD, this, other);
  }

  /**
   * {@code this * other} elementwise, broadcasting.
   *
   * @param other the other operand
   * @return a new tensor
   */
  public Tensor mul(Tensor other) {
    return Ops.apply(Ops.Binary.MUL, this, other);
  }

  /**
   * {@code this * other} elementwise ({@code sw_elementwise_mul}).
   *
   * @param other the other operand
   * @return a new tensor
   */
  public Tensor elementwiseMul(Tensor other) {
    return Ops.apply(Ops.Binary.ELEMENTWISE_MUL, this, other);
  }

  /**
   * {@code this * scalar}, the scalar taking this tensor's dtype.
   *
   * @param scalar the scalar
   * @return a new tensor
   */
  public Tensor mul(double scalar) {
    return Ops.apply(Ops.Scalar.MUL, this, scalar);
  }

  /**
   * {@code max(this, 0)}.
   *
   * @return a new tensor
   */
  public Tensor relu() {
    return Ops.apply(Ops.Unary.RELU, this);
  }

  /**
   * The sum over every element, as a 0-d tensor.
   *
   * @return a new tensor
   */
  public Tensor sum() {
    return Ops.reduceSum(this, false);
  }

  /**
   * The sum over {@code axes}.
   *
   * @param keepdims whether reduced modes stay with extent 1
   * @param axes the axes (negative counts from the end)
   * @return a new tensor
   */
  public Tensor sum(boolean keepdims, long... axes) {
    return Ops.reduceSum(this, keepdims, axes);
  }

  /**
   * NumPy matmul, {@code (..., M, K) @ (..., K, N)}.
   *
   * @param other the right operand
   * @return a new tensor
   */
  public Tensor matmul(Tensor other) {
    return Ops.apply(Ops.Binary.MATMUL, this, other);
  }

  /**
   * matmul with the result's dtype chosen (see {@link Ops#matmul(Tensor, Tensor, DType)}).
   *
   * @param other the right operand
   * @param outDtype the result's dtype
   * @return a new tensor
   */
  public Tensor matmul(Tensor other, DType outDtype) {
    return Ops.matmul(this, other, outDtype);
  }

  // ---- autograd ----

  /**
   * Marks a leaf tensor as requiring gradients.
   *
   * @param requiresGrad the flag
   * @return this tensor
   * @throws TypeMismatchException for non-float dtypes
   * @throws InvalidValueException for a tensor produced by a recorded op
   */
  public Tensor requiresGrad(boolean requiresGrad) {
    run(h -> Native.sw_tensor_set_requires_grad(h, requiresGrad));
    return this;
  }

  /**
   * Whether the tensor requires gradients.
   *
   * @return the flag
   */
  public boolean requiresGrad() {
    return call(h -> {
      boolean[] out = new boolean[1];
      Native.sw_tensor_requires_grad(h, out);
      return out[0];
    });
  }

  /**
   * Whether the tensor was not produced by a recorded op.
   *
   * @return true for a leaf
   */
  public boolean isLeaf() {
    return call(h -> {
      boolean[] out = new boolean[1];
      Native.sw_tensor_is_leaf(h, out);
      return out[0];
    });
  }

  /**
   * The accumulated gradient (a new Java object each call), or null. The gradient of a
   * TiledEvictable tensor is a TiledEvictable tensor whose untouched tiles are implicit zeros.
   *
   * @return the gradient or null
   */
  public Tensor grad() {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_tensor_grad(h, out);
      return out[0] == 0 ? null : new Tensor(out[0]);
    });
  }

  /** Drops the accumulated gradient. */
  public void clearGrad() {
    run(Native::sw_tensor_clear_grad);
  }

  /** Reverse mode from this one-element tensor (cotangent 1), freeing the graph. */
  public void backward() {
    backward(null, false);
  }

  /**
   * Reverse mode from this tensor.
   *
   * @param cotangent of this tensor's shape and dtype, or null for a one-element tensor
   * @param retainGraph keep the graph's saved tensors for another backward
   * @throws InvalidStateException when a saved tensor was modified in place, or the graph was
   *     freed by an earlier backward
   */
  public void backward(Tensor cotangent, boolean retainGraph) {
    run(h -> {
      long c = beginOrZero(cotangent);
      try {
        Native.sw_backward(h, c, retainGraph);
      } finally {
        endIfNotNull(cotangent);
      }
    });
  }

  /**
   * Moves the values into {@code destination} (of the dtype, holding at least numel slots, or
   * empty to be allocated). On success the result is a dense tensor at slot 0 of the
   * destination and this tensor's carrier is disposed; on failure both are unchanged.
   *
   * @param destination the destination carrier
   * @return the MOVE await
   */
  public AwaitMove moveTo(Carrier destination) {
    Objects.requireNonNull(destination, "destination");
    return call(h -> destination.call(d -> {
      long[] out = new long[1];
      Native.sw_move_async(h, d, out);
      return new AwaitMove(out[0]);
    }));
  }
}
