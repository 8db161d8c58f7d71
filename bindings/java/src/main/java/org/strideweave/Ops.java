package org.strideweave;

import java.util.Objects;

/**
 * The operations of the C ABI, one enum constant per C function: adding an op is one constant
 * here (its {@code sw_*} function, which SWIG wraps from the header as it stands) and, for
 * convenience, one method on {@link Tensor}. Results are fresh dense tensors on the compute
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

  /** Ops of one tensor. */
  public enum Unary {
    /** {@code max(a, 0)} ({@code sw_relu}). */
    RELU(Native::sw_relu);

    final UnaryFn fn;

    Unary(UnaryFn fn) {
      this.fn = fn;
    }
  }

  /** Ops of two tensors; elementwise ones broadcast NumPy style. */
  public enum Binary {
    /** {@code a + b} ({@code sw_add}). */
    ADD(Native::sw_add),
    /** {@code a * b} elementwise ({@code sw_elementwise_mul}). */
    ELEMENTWISE_MUL(Native::sw_elementwise_mul),
    /** {@code a * b}: elementwise for two tensors ({@code sw_mul}). */
    MUL(Native::sw_mul),
    /** NumPy matmul ({@code sw_matmul}): (..., M, K) @ (..., K, N). */
    MATMUL(Native::sw_matmul);

    final BinaryFn fn;

    Binary(BinaryFn fn) {
      this.fn = fn;
    }
  }

  /** Ops of a tensor and a weak scalar (which takes the tensor's dtype). */
  public enum Scalar {
    /** {@code a * scalar} ({@code sw_mul_scalar}). */
    MUL(Native::sw_mul_scalar);

    final ScalarFn fn;

    Scalar(ScalarFn fn) {
      this.fn = fn;
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
}
