package org.strideweave;

import java.util.Objects;

/**
 * The operations of the C ABI, one enum constant per C function or per op code of
 * {@code sw_unary}, {@code sw_binary} and {@code sw_reduce}: adding an op is one constant here (its
 * {@code sw_*} function or op code; SWIG wraps the function from the header as it stands) and,
 * for convenience, one method on {@link Tensor}. Mixed dtypes promote as PyTorch does (bool &lt;
 * integer &lt; floating, the wider type within a category); f16 and bf16 compute in f32 and
 * round once. Results are fresh dense tensors on the compute
 * carrier kind of the inputs; inputs may be strided, nested or TiledEvictable tensors (the
 * whole logical tensor, made resident as needed). With grad mode on and an input that requires
 * grad, the result records one autograd node. Thread-safe.
 */
public final class Ops {
  private Ops() {}

  @FunctionalInterface
  interface UnaryFn {
    void call(long a, long[] out);
  }

  @FunctionalInterface
  interface BinaryFn {
    void call(long a, long b, long[] out);
  }

  @FunctionalInterface
  interface ScalarFn {
    void call(long a, double scalar, long[] out);
  }

  /**
   * Ops of one tensor: {@code sw_relu}, or {@code sw_unary} with the op's {@code sw_unary_op_t}.
   * Floating results of integer and bool inputs are f32. A tensor on a TiledEvictable is taken
   * by RELU only (the others fail {@link UnsupportedFeatureException}: project the tiles first).
   */
  public enum Unary {
    /** {@code max(a, 0)} ({@code sw_relu}). */
    RELU(Native::sw_relu, 11),
    /** {@code -a} ({@code SW_UNARY_NEG}); every dtype but bool (u8 wraps). */
    NEG(1),
    /** {@code |a|} ({@code SW_UNARY_ABS}); every dtype but bool. */
    ABS(2),
    /** {@code e^a} ({@code SW_UNARY_EXP}). */
    EXP(3),
    /** The natural logarithm ({@code SW_UNARY_LOG}). */
    LOG(4),
    /** The square root ({@code SW_UNARY_SQRT}). */
    SQRT(5),
    /** {@code 1 / sqrt(a)} ({@code SW_UNARY_RSQRT}). */
    RSQRT(6),
    /** {@code a * sigmoid(a)} ({@code SW_UNARY_SILU}). */
    SILU(7),
    /** {@code a * Phi(a)}, the exact (erf) form ({@code SW_UNARY_GELU}). */
    GELU(8),
    /** {@code 1 / (1 + e^-a)} ({@code SW_UNARY_SIGMOID}). */
    SIGMOID(9),
    /** {@code tanh(a)} ({@code SW_UNARY_TANH}). */
    TANH(10);

    final UnaryFn fn;
    /** The {@code sw_unary_op_t}. */
    final int code;

    Unary(UnaryFn fn, int code) {
      this.fn = fn;
      this.code = code;
    }

    Unary(int code) {
      this((a, out) -> Native.sw_unary(code, a, out), code);
    }
  }

  /**
   * Ops of two tensors; elementwise ones broadcast NumPy style. Those with a {@code sw_binary_op_t}
   * also have an in-place form ({@link #applyInPlace(Binary, Tensor, Tensor)}).
   */
  public enum Binary {
    /** {@code a + b} ({@code sw_add}; bool + bool is or). */
    ADD(Native::sw_add, 1),
    /** {@code a * b} elementwise ({@code sw_elementwise_mul}). */
    ELEMENTWISE_MUL(Native::sw_elementwise_mul, 3),
    /** {@code a * b}: elementwise for two tensors ({@code sw_mul}). */
    MUL(Native::sw_mul, 3),
    /** NumPy matmul ({@code sw_matmul}): (..., M, K) @ (..., K, N). */
    MATMUL(Native::sw_matmul, 0),
    /** {@code a - b} ({@code SW_BINARY_SUB}; TYPE for two bools). */
    SUB(2),
    /** True division ({@code SW_BINARY_DIV}): integer and bool operands give f32. */
    DIV(4),
    /** {@code a ^ b} ({@code SW_BINARY_POW}; integers exact). */
    POW(5),
    /** The larger, NaN if either is ({@code SW_BINARY_MAXIMUM}). */
    MAXIMUM(6),
    /** The smaller, NaN if either is ({@code SW_BINARY_MINIMUM}). */
    MINIMUM(7),
    /** {@code a == b}, bool ({@code SW_BINARY_EQ}; NaN is unequal to everything). */
    EQ(8),
    /** {@code a != b}, bool ({@code SW_BINARY_NE}). */
    NE(9),
    /** {@code a < b}, bool ({@code SW_BINARY_LT}). */
    LT(10),
    /** {@code a <= b}, bool ({@code SW_BINARY_LE}). */
    LE(11),
    /** {@code a > b}, bool ({@code SW_BINARY_GT}). */
    GT(12),
    /** {@code a >= b}, bool ({@code SW_BINARY_GE}). */
    GE(13);

    final BinaryFn fn;
    /** The {@code sw_binary_op_t}, or 0 for an op without one (MATMUL). */
    final int code;

    Binary(BinaryFn fn, int code) {
      this.fn = fn;
      this.code = code;
    }

    Binary(int code) {
      this((a, b, out) -> Native.sw_binary(code, a, b, out), code);
    }
  }

  /**
   * Ops of a tensor and a weak scalar, which takes the tensor's dtype (as a Python number does in
   * PyTorch: f16 + 0.1 stays f16; {@link InvalidValueException} when it cannot, such as 2.5 for
   * an integer tensor). The scalar may stand on either side
   * ({@link #apply(Scalar, Tensor, double)}, {@link #apply(Scalar, double, Tensor)}).
   */
  public enum Scalar {
    /** {@code a * scalar} ({@code sw_mul_scalar}). */
    MUL(Native::sw_mul_scalar, 3),
    /** {@code a + scalar} ({@code SW_BINARY_ADD}). */
    ADD(1),
    /** {@code a - scalar} ({@code SW_BINARY_SUB}). */
    SUB(2),
    /** {@code a / scalar} ({@code SW_BINARY_DIV}; an integer or bool tensor computes in f32). */
    DIV(4),
    /** {@code a ^ scalar} ({@code SW_BINARY_POW}). */
    POW(5),
    /** {@code max(a, scalar)} ({@code SW_BINARY_MAXIMUM}). */
    MAXIMUM(6),
    /** {@code min(a, scalar)} ({@code SW_BINARY_MINIMUM}). */
    MINIMUM(7),
    /** {@code a == scalar}, bool ({@code SW_BINARY_EQ}). */
    EQ(8),
    /** {@code a != scalar}, bool ({@code SW_BINARY_NE}). */
    NE(9),
    /** {@code a < scalar}, bool ({@code SW_BINARY_LT}). */
    LT(10),
    /** {@code a <= scalar}, bool ({@code SW_BINARY_LE}). */
    LE(11),
    /** {@code a > scalar}, bool ({@code SW_BINARY_GT}). */
    GT(12),
    /** {@code a >= scalar}, bool ({@code SW_BINARY_GE}). */
    GE(13);

    final ScalarFn fn;
    /** The {@code sw_binary_op_t}. */
    final int code;

    Scalar(ScalarFn fn, int code) {
      this.fn = fn;
      this.code = code;
    }

    Scalar(int code) {
      this((a, scalar, out) -> Native.sw_binary_scalar(code, a, scalar, out), code);
    }
  }

  /** Reductions ({@code sw_reduce_op_t}). */
  public enum Reduce {
    /** The sum ({@code SW_REDUCE_SUM}; integer and bool sums are i64). */
    SUM(1),
    /** The mean ({@code SW_REDUCE_MEAN}; floating dtypes only). */
    MEAN(2),
    /** The maximum ({@code SW_REDUCE_MAX}; NaN if any is). */
    MAX(3),
    /** The minimum ({@code SW_REDUCE_MIN}). */
    MIN(4);

    final int code;

    Reduce(int code) {
      this.code = code;
    }
  }

  /**
   * Two results of one op: values and their i64 indices ({@link #topk}, {@link #reduceIndex}).
   * Closing it closes both.
   *
   * @param values the values
   * @param indices the indices (i64)
   */
  public record ValuesAndIndices(Tensor values, Tensor indices) implements AutoCloseable {
    @Override
    public void close() {
      try {
        values.close();
      } finally {
        indices.close();
      }
    }
  }

  /**
   * Applies a unary op.
   *
   * @param op the op
   * @param a the operand
   * @return a new tensor
   */
  public static Tensor apply(Unary op, Tensor a) {
    return a.call(h -> {
      long[] out = new long[1];
      op.fn.call(h, out);
      return Tensor.adopt(out[0]);
    });
  }

  /**
   * Applies a binary op.
   *
   * @param op the op
   * @param a the left operand
   * @param b the right operand
   * @return a new tensor
   * @throws TypeMismatchException when the dtypes or carrier kinds differ
   */
  public static Tensor apply(Binary op, Tensor a, Tensor b) {
    Objects.requireNonNull(b, "b");
    return a.call(ha -> b.call(hb -> {
      long[] out = new long[1];
      op.fn.call(ha, hb, out);
      return Tensor.adopt(out[0]);
    }));
  }

  /**
   * Applies a tensor-scalar op.
   *
   * @param op the op
   * @param a the tensor
   * @param scalar the weak scalar
   * @return a new tensor
   */
  public static Tensor apply(Scalar op, Tensor a, double scalar) {
    return a.call(h -> {
      long[] out = new long[1];
      op.fn.call(h, scalar, out);
      return Tensor.adopt(out[0]);
    });
  }

  /**
   * Sums over {@code axes} ({@code sw_reduce_sum}); no axes sums over every axis.
   *
   * @param a the tensor
   * @param keepdims whether the reduced modes stay with extent 1
   * @param axes the axes (negative counts from the end)
   * @return a new tensor
   */
  public static Tensor reduceSum(Tensor a, boolean keepdims, long... axes) {
    return a.call(h -> {
      long[] out = new long[1];
      Native.sw_reduce_sum(h, axes.length == 0 ? null : axes.clone(), keepdims, out);
      return Tensor.adopt(out[0]);
    });
  }

  /**
   * {@code a * b} with the weak scalar on the left ({@code sw_scalar_mul}).
   *
   * @param scalar the weak scalar
   * @param b the tensor
   * @return a new tensor
   */
  public static Tensor scalarMul(double scalar, Tensor b) {
    return b.call(h -> {
      long[] out = new long[1];
      Native.sw_scalar_mul(scalar, h, out);
      return Tensor.adopt(out[0]);
    });
  }

  /**
   * matmul with the result's dtype chosen ({@code sw_matmul_ex}): {@link DType#F32} with f16 or
   * bf16 operands gives the unrounded f32 sums; null gives the operands' dtype.
   *
   * @param a the left operand
   * @param b the right operand
   * @param outDtype the result's dtype, or null
   * @return a new tensor
   */
  public static Tensor matmul(Tensor a, Tensor b, DType outDtype) {
    Objects.requireNonNull(b, "b");
    return a.call(ha -> b.call(hb -> Tensor.adopt(Native.matmul_ex(ha, hb, outDtype == null ? 0 : outDtype.value()))));
  }

  /**
   * {@code scalar op b}, the weak scalar on the left ({@code sw_scalar_binary}).
   *
   * @param op the op
   * @param scalar the weak scalar
   * @param b the tensor
   * @return a new tensor
   */
  public static Tensor apply(Scalar op, double scalar, Tensor b) {
    Objects.requireNonNull(op, "op");
    return b.call(h -> {
      long[] out = new long[1];
      Native.sw_scalar_binary(op.code, scalar, h, out);
      return Tensor.adopt(out[0]);
    });
  }

  /**
   * {@code a op= b} in place ({@code sw_binary_inplace}): {@code b} broadcast to a's shape, the
   * result converted to a's dtype; one version step.
   *
   * @param op an op with a {@code sw_binary_op_t} (every one but MATMUL)
   * @param a the tensor written
   * @param b the other operand
   * @throws InvalidValueException for MATMUL, or shapes that do not broadcast to a's
   * @throws TypeMismatchException when the result's category is higher than a's (an i32 tensor
   *     += an f32 one)
   */
  public static void applyInPlace(Binary op, Tensor a, Tensor b) {
    Objects.requireNonNull(b, "b");
    if (op.code == 0) {
      throw new InvalidValueException(op + " has no in-place form");
    }
    a.run(ha -> b.run(hb -> Native.sw_binary_inplace(op.code, ha, hb)));
  }

  /**
   * {@code a op= scalar} in place ({@code sw_binary_scalar_inplace}); one version step.
   *
   * @param op the op
   * @param a the tensor written
   * @param scalar the weak scalar
   */
  public static void applyInPlace(Scalar op, Tensor a, double scalar) {
    Objects.requireNonNull(op, "op");
    a.run(h -> Native.sw_binary_scalar_inplace(op.code, h, scalar));
  }

  /**
   * {@code condition ? a : b} elementwise, the three broadcast together ({@code sw_where}).
   *
   * @param condition a bool tensor
   * @param a where the condition holds
   * @param b elsewhere
   * @return a new tensor
   * @throws TypeMismatchException when the condition is not bool
   */
  public static Tensor where(Tensor condition, Tensor a, Tensor b) {
    Objects.requireNonNull(a, "a");
    Objects.requireNonNull(b, "b");
    return condition.call(hc -> a.call(ha -> b.call(hb -> {
      long[] out = new long[1];
      Native.sw_where(hc, ha, hb, out);
      return Tensor.adopt(out[0]);
    })));
  }

  /**
   * Reduces over {@code axes} ({@code sw_reduce}); no axes reduces over every axis.
   *
   * @param op the reduction
   * @param a the tensor
   * @param keepdims whether the reduced modes stay with extent 1
   * @param axes the axes (negative counts from the end)
   * @return a new tensor
   * @throws InvalidValueException for a duplicate axis
   * @throws IndexOutOfRangeException for an axis out of range
   */
  public static Tensor reduce(Reduce op, Tensor a, boolean keepdims, long... axes) {
    Objects.requireNonNull(op, "op");
    return a.call(h -> {
      long[] out = new long[1];
      Native.sw_reduce(op.code, h, axes.length == 0 ? null : axes.clone(), keepdims, out);
      return Tensor.adopt(out[0]);
    });
  }

  /**
   * The max or min along {@code axis} with the index of the first element reaching it
   * ({@code sw_reduce_index}).
   *
   * @param op {@link Reduce#MAX} or {@link Reduce#MIN}
   * @param a the tensor
   * @param axis the axis (negative counts from the end)
   * @param keepdims whether the axis stays with extent 1
   * @return the values and their i64 indices
   * @throws InvalidValueException for SUM or MEAN, or an axis of extent 0
   */
  public static ValuesAndIndices reduceIndex(Reduce op, Tensor a, long axis, boolean keepdims) {
    Objects.requireNonNull(op, "op");
    return a.call(h -> {
      long[] values = new long[1];
      long[] indices = new long[1];
      Native.sw_reduce_index(op.code, h, axis, keepdims, values, indices);
      return new ValuesAndIndices(Tensor.adopt(values[0]), Tensor.adopt(indices[0]));
    });
  }

  /**
   * {@code exp(a - max) / sum(exp(a - max))} along {@code axis} ({@code sw_softmax}).
   *
   * @param a a floating tensor
   * @param axis the axis (negative counts from the end)
   * @return a new tensor
   * @throws TypeMismatchException for a non-floating dtype
   */
  public static Tensor softmax(Tensor a, long axis) {
    return a.call(h -> {
      long[] out = new long[1];
      Native.sw_softmax(h, axis, out);
      return Tensor.adopt(out[0]);
    });
  }

  /**
   * The logarithm of {@link #softmax}, computed as {@code (a - max) - log(sum(exp(a - max)))}
   * ({@code sw_log_softmax}).
   *
   * @param a a floating tensor
   * @param axis the axis (negative counts from the end)
   * @return a new tensor
   */
  public static Tensor logSoftmax(Tensor a, long axis) {
    return a.call(h -> {
      long[] out = new long[1];
      Native.sw_log_softmax(h, axis, out);
      return Tensor.adopt(out[0]);
    });
  }

  /**
   * The {@code k} largest values along {@code axis}, sorted descending (ties by the lower index,
   * NaN the largest), and their i64 indices ({@code sw_topk}).
   *
   * @param a the tensor
   * @param k how many, in {@code [0, extent]}
   * @param axis the axis (negative counts from the end)
   * @return the values and indices, a's shape with {@code k} along the axis
   * @throws InvalidValueException for k outside {@code [0, extent]}
   * @throws TypeMismatchException for bool
   */
  public static ValuesAndIndices topk(Tensor a, long k, long axis) {
    return a.call(h -> {
      long[] values = new long[1];
      long[] indices = new long[1];
      Native.sw_topk(h, k, axis, values, indices);
      return new ValuesAndIndices(Tensor.adopt(values[0]), Tensor.adopt(indices[0]));
    });
  }

  /**
   * Rows of {@code a} along {@code axis} picked by {@code index}, an i32 or i64 tensor of rank 0
   * or 1 ({@code sw_index_select}).
   *
   * @param a the tensor
   * @param axis the axis
   * @param index the rows
   * @return a new tensor
   * @throws IndexOutOfRangeException for an index outside {@code [0, extent)}
   */
  public static Tensor indexSelect(Tensor a, long axis, Tensor index) {
    Objects.requireNonNull(index, "index");
    return a.call(h -> index.call(hi -> {
      long[] out = new long[1];
      Native.sw_index_select(h, axis, hi, out);
      return Tensor.adopt(out[0]);
    }));
  }

  /**
   * {@code out[c] = a[c with c[axis] = index[c]]} ({@code sw_gather}): the result has index's
   * shape.
   *
   * @param a the tensor
   * @param axis the axis
   * @param index an i32 or i64 tensor of a's rank
   * @return a new tensor
   */
  public static Tensor gather(Tensor a, long axis, Tensor index) {
    Objects.requireNonNull(index, "index");
    return a.call(h -> index.call(hi -> {
      long[] out = new long[1];
      Native.sw_gather(h, axis, hi, out);
      return Tensor.adopt(out[0]);
    }));
  }

  /**
   * A copy of {@code a} with source's rows added at the rows {@code index} picks
   * ({@code sw_index_add}); repeated indices accumulate.
   *
   * @param a the tensor
   * @param axis the axis
   * @param index an i32 or i64 tensor of rank 0 or 1
   * @param source a's shape with numel(index) along the axis, a's dtype
   * @return a new tensor
   */
  public static Tensor indexAdd(Tensor a, long axis, Tensor index, Tensor source) {
    Objects.requireNonNull(index, "index");
    Objects.requireNonNull(source, "source");
    return a.call(h -> index.call(hi -> source.call(hs -> {
      long[] out = new long[1];
      Native.sw_index_add(h, axis, hi, hs, out);
      return Tensor.adopt(out[0]);
    })));
  }

  /**
   * A copy of {@code a} with {@code source[c]} added at {@code c} with {@code c[axis] = index[c]}
   * ({@code sw_scatter_add}); repeated indices accumulate.
   *
   * @param a the tensor
   * @param axis the axis
   * @param index an i32 or i64 tensor of a's rank
   * @param source of a's rank and dtype
   * @return a new tensor
   */
  public static Tensor scatterAdd(Tensor a, long axis, Tensor index, Tensor source) {
    Objects.requireNonNull(index, "index");
    Objects.requireNonNull(source, "source");
    return a.call(h -> index.call(hi -> source.call(hs -> {
      long[] out = new long[1];
      Native.sw_scatter_add(h, axis, hi, hs, out);
      return Tensor.adopt(out[0]);
    })));
  }

  /**
   * The tensors joined along an existing {@code axis} ({@code sw_cat}: one rank, the same extents
   * elsewhere), promoted to one dtype.
   *
   * @param axis the axis (negative counts from the end)
   * @param tensors at least one tensor
   * @return a new tensor
   * @throws InvalidValueException for no tensors, shapes that differ, or rank-0 tensors
   */
  public static Tensor cat(long axis, Tensor... tensors) {
    return join(axis, false, tensors);
  }

  /**
   * The tensors of one shape stacked along a new {@code axis} ({@code sw_stack}; axis in
   * {@code [-rank - 1, rank]}), promoted to one dtype.
   *
   * @param axis the new axis
   * @param tensors at least one tensor
   * @return a new tensor
   * @throws InvalidValueException for no tensors or shapes that differ
   */
  public static Tensor stack(long axis, Tensor... tensors) {
    return join(axis, true, tensors);
  }

  private static Tensor join(long axis, boolean stack, Tensor[] tensors) {
    Tensor[] list = tensors.clone();
    for (int i = 0; i < list.length; ++i) {
      Objects.requireNonNull(list[i], "tensors[" + i + "]");
    }
    long[] handles = new long[list.length];
    int begun = 0;
    try {
      for (; begun < list.length; ++begun) {
        handles[begun] = list[begun].begin();
      }
      return Tensor.adopt(Native.tensor_join(handles, axis, stack));
    } finally {
      for (int i = 0; i < begun; ++i) {
        list[i].end();
      }
    }
  }
}
