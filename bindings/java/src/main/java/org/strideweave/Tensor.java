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
   * A dense CPU tensor with every element {@code value} ({@code sw_tensor_full}).
   *
   * @param runtime the runtime
   * @param dtype the element type
   * @param value the value
   * @param shape the extents
   * @return the tensor
   * @throws InvalidValueException when the value does not fit an integer or bool dtype exactly
   */
  public static Tensor full(StrideWeaveRuntime runtime, DType dtype, double value, long... shape) {
    Objects.requireNonNull(dtype, "dtype");
    return runtime.call(r -> {
      long[] out = new long[1];
      Native.sw_tensor_full(r, dtype.value(), shape.clone(), value, out);
      return new Tensor(out[0]);
    });
  }

  /**
   * A rank-1 CPU tensor of {@code ceil((stop - start) / step)} elements, element i being
   * {@code start + i * step} computed in double and converted to the dtype
   * ({@code sw_tensor_arange}).
   *
   * @param runtime the runtime
   * @param dtype the element type
   * @param start the first value
   * @param stop the bound, not reached
   * @param step the step, not 0
   * @return the tensor
   * @throws InvalidValueException for step 0 or a non-finite argument
   */
  public static Tensor arange(StrideWeaveRuntime runtime, DType dtype, double start, double stop, double step) {
    Objects.requireNonNull(dtype, "dtype");
    return runtime.call(r -> {
      long[] out = new long[1];
      Native.sw_tensor_arange(r, dtype.value(), start, stop, step, out);
      return new Tensor(out[0]);
    });
  }

  /**
   * A dense CPU tensor of random values ({@code sw_tensor_random}); see {@link RandomOptions}.
   *
   * @param runtime the runtime
   * @param options the distribution, its parameters, the dtype and the seed
   * @param shape the extents
   * @return the tensor
   * @throws TypeMismatchException for a dtype that is not floating
   * @throws InvalidValueException for non-finite parameters, low &gt; high or a negative stddev
   */
  public static Tensor random(StrideWeaveRuntime runtime, RandomOptions options, long... shape) {
    Objects.requireNonNull(options, "options");
    return runtime.call(r -> new Tensor(Native.tensor_random(r, options.distribution().value,
        options.dtype().value(), options.seed(), options.first(), options.second(), shape.clone())));
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

  // ---- views and copies ----

  /**
   * A tensor of {@code shape} holding these elements in first-mode-fastest order: a view when
   * the layout allows one, else a copy ({@code sw_tensor_reshape}); one extent may be -1.
   *
   * @param shape the new extents
   * @return the view or copy
   * @throws InvalidValueException when the element counts differ
   */
  public Tensor reshape(long... shape) {
    return view1((h, out) -> Native.sw_tensor_reshape(h, shape.clone(), out));
  }

  /**
   * {@link #reshape} that is always a view ({@code sw_tensor_view}).
   *
   * @param shape the new extents
   * @return the view
   * @throws InvalidValueException when the layout cannot be viewed so
   */
  public Tensor view(long... shape) {
    return view1((h, out) -> Native.sw_tensor_view(h, shape.clone(), out));
  }

  /**
   * Every mode merged into one ({@code sw_tensor_flatten}).
   *
   * @return the view or copy
   */
  public Tensor flatten() {
    return flatten(0, -1);
  }

  /**
   * Modes {@code startAxis..endAxis} merged into one ({@code sw_tensor_flatten}).
   *
   * @param startAxis the first mode (negative counts from the end)
   * @param endAxis the last mode, included
   * @return the view or copy
   */
  public Tensor flatten(long startAxis, long endAxis) {
    return view1((h, out) -> Native.sw_tensor_flatten(h, startAxis, endAxis, out));
  }

  /**
   * A view with a new mode of extent 1 at {@code axis} ({@code sw_tensor_unsqueeze}).
   *
   * @param axis where, in {@code [-rank - 1, rank]}
   * @return the view
   */
  public Tensor unsqueeze(long axis) {
    return view1((h, out) -> Native.sw_tensor_unsqueeze(h, axis, out));
  }

  /**
   * A view without the given extent-1 modes, or without every extent-1 mode when none is given
   * ({@code sw_tensor_squeeze}).
   *
   * @param axes the modes (negative counts from the end)
   * @return the view
   */
  public Tensor squeeze(long... axes) {
    return view1((h, out) -> Native.sw_tensor_squeeze(h, axes.length == 0 ? null : axes.clone(), out));
  }

  /**
   * A broadcast view of {@code shape}: extent-1 modes stretch with stride 0, new leading modes
   * are added, -1 keeps an extent ({@code sw_tensor_expand}).
   *
   * @param shape the extents
   * @return the view
   */
  public Tensor expand(long... shape) {
    return view1((h, out) -> Native.sw_tensor_expand(h, shape.clone(), out));
  }

  /**
   * The view of elements {@code start, start + step, ...} before {@code stop} along
   * {@code axis}, as Python's {@code t[start:stop:step]} ({@code sw_tensor_slice}): negative
   * bounds count from the end and both are clamped ({@link Long#MAX_VALUE} is "to the end"), and
   * a negative step walks backwards.
   *
   * @param axis the axis
   * @param start the first index
   * @param stop the bound, not included
   * @param step the step, not 0
   * @return the view
   */
  public Tensor slice(long axis, long start, long stop, long step) {
    return view1((h, out) -> Native.sw_tensor_slice(h, axis, start, stop, step, out));
  }

  /**
   * The view at {@code index} of {@code axis}, without that mode ({@code sw_tensor_select}).
   *
   * @param axis the axis
   * @param index the index (negative counts from the end)
   * @return the view
   * @throws IndexOutOfRangeException for an index out of range
   */
  public Tensor select(long axis, long index) {
    return view1((h, out) -> Native.sw_tensor_select(h, axis, index, out));
  }

  /**
   * This tensor if it is dense on its carrier, else a dense copy ({@code sw_tensor_contiguous}).
   *
   * @return a new Java object (sharing the values when already dense)
   */
  public Tensor contiguous() {
    return view1((h, out) -> Native.sw_tensor_contiguous(h, out));
  }

  /**
   * A dense copy with its own carrier ({@code sw_tensor_clone}); differentiable.
   *
   * @return the copy
   */
  @Override
  public Tensor clone() {
    return view1((h, out) -> Native.sw_tensor_clone(h, out));
  }

  /**
   * A view of the same values outside autograd ({@code sw_tensor_detach}).
   *
   * @return the view
   */
  public Tensor detach() {
    return view1((h, out) -> Native.sw_tensor_detach(h, out));
  }

  /**
   * The values converted to {@code dtype} ({@code sw_tensor_to_dtype}): this tensor's values
   * again (a new Java object) when the dtype is already its own.
   *
   * @param dtype the element type
   * @return the tensor
   */
  public Tensor toDtype(DType dtype) {
    Objects.requireNonNull(dtype, "dtype");
    return view1((h, out) -> Native.sw_tensor_to_dtype(h, dtype.value(), out));
  }

  /**
   * Writes {@code value} to every element ({@code sw_tensor_fill}); one version step.
   *
   * @param value the value
   * @return this tensor
   * @throws InvalidValueException when the value does not fit the dtype
   */
  public Tensor fill(double value) {
    run(h -> Native.sw_tensor_fill(h, value));
    return this;
  }

  /**
   * Copies {@code source}, broadcast to this shape and converted to this dtype, into this tensor
   * ({@code sw_tensor_copy_from}); one version step.
   *
   * @param source the values
   * @return this tensor
   */
  public Tensor copyFrom(Tensor source) {
    Objects.requireNonNull(source, "source");
    run(h -> source.run(hs -> Native.sw_tensor_copy_from(h, hs)));
    return this;
  }

  @FunctionalInterface
  private interface OutCall {
    void call(long handle, long[] out);
  }

  /** Runs a call writing one new tensor handle into {@code out[0]} and adopts it. */
  private Tensor view1(OutCall c) {
    return call(h -> {
      long[] out = new long[1];
      c.call(h, out);
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
   * The mean over {@code axes} (every axis when none is given); floating dtypes only.
   *
   * @param keepdims whether reduced modes stay with extent 1
   * @param axes the axes (negative counts from the end)
   * @return a new tensor
   */
  public Tensor mean(boolean keepdims, long... axes) {
    return Ops.reduce(Ops.Reduce.MEAN, this, keepdims, axes);
  }

  /**
   * The maximum over {@code axes} (every axis when none is given).
   *
   * @param keepdims whether reduced modes stay with extent 1
   * @param axes the axes (negative counts from the end)
   * @return a new tensor
   */
  public Tensor max(boolean keepdims, long... axes) {
    return Ops.reduce(Ops.Reduce.MAX, this, keepdims, axes);
  }

  /**
   * The minimum over {@code axes} (every axis when none is given).
   *
   * @param keepdims whether reduced modes stay with extent 1
   * @param axes the axes (negative counts from the end)
   * @return a new tensor
   */
  public Tensor min(boolean keepdims, long... axes) {
    return Ops.reduce(Ops.Reduce.MIN, this, keepdims, axes);
  }

  /**
   * The i64 index of the first maximum along {@code axis}.
   *
   * @param axis the axis (negative counts from the end)
   * @return a new tensor
   */
  public Tensor argmax(long axis) {
    Ops.ValuesAndIndices r = Ops.reduceIndex(Ops.Reduce.MAX, this, axis, false);
    r.values().close();
    return r.indices();
  }

  /**
   * The i64 index of the first minimum along {@code axis}.
   *
   * @param axis the axis (negative counts from the end)
   * @return a new tensor
   */
  public Tensor argmin(long axis) {
    Ops.ValuesAndIndices r = Ops.reduceIndex(Ops.Reduce.MIN, this, axis, false);
    r.values().close();
    return r.indices();
  }

  /**
   * Softmax along {@code axis}.
   *
   * @param axis the axis (negative counts from the end)
   * @return a new tensor
   */
  public Tensor softmax(long axis) {
    return Ops.softmax(this, axis);
  }

  /**
   * Log-softmax along {@code axis}.
   *
   * @param axis the axis (negative counts from the end)
   * @return a new tensor
   */
  public Tensor logSoftmax(long axis) {
    return Ops.logSoftmax(this, axis);
  }

  /**
   * The {@code k} largest values along {@code axis} and their indices.
   *
   * @param k how many
   * @param axis the axis (negative counts from the end)
   * @return the values and i64 indices
   */
  public Ops.ValuesAndIndices topk(long k, long axis) {
    return Ops.topk(this, k, axis);
  }

  /**
   * {@code -this}.
   *
   * @return a new tensor
   */
  public Tensor neg() {
    return Ops.apply(Ops.Unary.NEG, this);
  }

  /**
   * {@code |this|}.
   *
   * @return a new tensor
   */
  public Tensor abs() {
    return Ops.apply(Ops.Unary.ABS, this);
  }

  /**
   * {@code e^this}.
   *
   * @return a new tensor
   */
  public Tensor exp() {
    return Ops.apply(Ops.Unary.EXP, this);
  }

  /**
   * The natural logarithm.
   *
   * @return a new tensor
   */
  public Tensor log() {
    return Ops.apply(Ops.Unary.LOG, this);
  }

  /**
   * The square root.
   *
   * @return a new tensor
   */
  public Tensor sqrt() {
    return Ops.apply(Ops.Unary.SQRT, this);
  }

  /**
   * {@code 1 / sqrt(this)}.
   *
   * @return a new tensor
   */
  public Tensor rsqrt() {
    return Ops.apply(Ops.Unary.RSQRT, this);
  }

  /**
   * {@code this * sigmoid(this)}.
   *
   * @return a new tensor
   */
  public Tensor silu() {
    return Ops.apply(Ops.Unary.SILU, this);
  }

  /**
   * {@code this * Phi(this)}, the exact (erf) GELU.
   *
   * @return a new tensor
   */
  public Tensor gelu() {
    return Ops.apply(Ops.Unary.GELU, this);
  }

  /**
   * {@code 1 / (1 + e^-this)}.
   *
   * @return a new tensor
   */
  public Tensor sigmoid() {
    return Ops.apply(Ops.Unary.SIGMOID, this);
  }

  /**
   * {@code tanh(this)}.
   *
   * @return a new tensor
   */
  public Tensor tanh() {
    return Ops.apply(Ops.Unary.TANH, this);
  }

  /**
   * {@code this - other}, broadcasting.
   *
   * @param other the other operand
   * @return a new tensor
   */
  public Tensor sub(Tensor other) {
    return Ops.apply(Ops.Binary.SUB, this, other);
  }

  /**
   * {@code this / other}, true division, broadcasting.
   *
   * @param other the other operand
   * @return a new tensor
   */
  public Tensor div(Tensor other) {
    return Ops.apply(Ops.Binary.DIV, this, other);
  }

  /**
   * {@code this ^ other}, broadcasting.
   *
   * @param other the exponent
   * @return a new tensor
   */
  public Tensor pow(Tensor other) {
    return Ops.apply(Ops.Binary.POW, this, other);
  }

  /**
   * The elementwise larger of this and {@code other}.
   *
   * @param other the other operand
   * @return a new tensor
   */
  public Tensor maximum(Tensor other) {
    return Ops.apply(Ops.Binary.MAXIMUM, this, other);
  }

  /**
   * The elementwise smaller of this and {@code other}.
   *
   * @param other the other operand
   * @return a new tensor
   */
  public Tensor minimum(Tensor other) {
    return Ops.apply(Ops.Binary.MINIMUM, this, other);
  }

  /**
   * {@code this + scalar}, the scalar taking this tensor's dtype.
   *
   * @param scalar the scalar
   * @return a new tensor
   */
  public Tensor add(double scalar) {
    return Ops.apply(Ops.Scalar.ADD, this, scalar);
  }

  /**
   * {@code this - scalar}, the scalar taking this tensor's dtype.
   *
   * @param scalar the scalar
   * @return a new tensor
   */
  public Tensor sub(double scalar) {
    return Ops.apply(Ops.Scalar.SUB, this, scalar);
  }

  /**
   * {@code this / scalar}.
   *
   * @param scalar the scalar
   * @return a new tensor
   */
  public Tensor div(double scalar) {
    return Ops.apply(Ops.Scalar.DIV, this, scalar);
  }

  /**
   * {@code this ^ scalar}.
   *
   * @param scalar the exponent
   * @return a new tensor
   */
  public Tensor pow(double scalar) {
    return Ops.apply(Ops.Scalar.POW, this, scalar);
  }

  /**
   * {@code this == other}, bool.
   *
   * @param other the other operand
   * @return a new bool tensor
   */
  public Tensor eq(Tensor other) {
    return Ops.apply(Ops.Binary.EQ, this, other);
  }

  /**
   * {@code this != other}, bool.
   *
   * @param other the other operand
   * @return a new bool tensor
   */
  public Tensor ne(Tensor other) {
    return Ops.apply(Ops.Binary.NE, this, other);
  }

  /**
   * {@code this < other}, bool.
   *
   * @param other the other operand
   * @return a new bool tensor
   */
  public Tensor lt(Tensor other) {
    return Ops.apply(Ops.Binary.LT, this, other);
  }

  /**
   * {@code this <= other}, bool.
   *
   * @param other the other operand
   * @return a new bool tensor
   */
  public Tensor le(Tensor other) {
    return Ops.apply(Ops.Binary.LE, this, other);
  }

  /**
   * {@code this > other}, bool.
   *
   * @param other the other operand
   * @return a new bool tensor
   */
  public Tensor gt(Tensor other) {
    return Ops.apply(Ops.Binary.GT, this, other);
  }

  /**
   * {@code this >= other}, bool.
   *
   * @param other the other operand
   * @return a new bool tensor
   */
  public Tensor ge(Tensor other) {
    return Ops.apply(Ops.Binary.GE, this, other);
  }

  /**
   * {@code this += other} in place (see {@link Ops#applyInPlace(Ops.Binary, Tensor, Tensor)}).
   *
   * @param other the other operand, broadcast to this shape
   * @return this tensor
   */
  public Tensor addInPlace(Tensor other) {
    Ops.applyInPlace(Ops.Binary.ADD, this, other);
    return this;
  }

  /**
   * {@code this *= scalar} in place.
   *
   * @param scalar the scalar
   * @return this tensor
   */
  public Tensor mulInPlace(double scalar) {
    Ops.applyInPlace(Ops.Scalar.MUL, this, scalar);
    return this;
  }

  /**
   * Rows along {@code axis} picked by {@code index} (see {@link Ops#indexSelect}).
   *
   * @param axis the axis
   * @param index an i32 or i64 tensor of rank 0 or 1
   * @return a new tensor
   */
  public Tensor indexSelect(long axis, Tensor index) {
    return Ops.indexSelect(this, axis, index);
  }

  /**
   * Elements along {@code axis} picked by {@code index} (see {@link Ops#gather}).
   *
   * @param axis the axis
   * @param index an i32 or i64 tensor of this rank
   * @return a new tensor
   */
  public Tensor gather(long axis, Tensor index) {
    return Ops.gather(this, axis, index);
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
