package org.strideweave;

/**
 * The activation of the gate product in {@link TiledEvictable#expertFfn(Tensor, Tensor, Tensor,
 * Tensor, Tensor, ExpertFfnOptions)} ({@link ExpertFfnOptions#activation()},
 * {@code sw_expert_ffn_desc_t.activation}): the {@code sw_unary_op_t} ops the C function takes.
 * The numbers are the C ABI's, pinned forever; the activation rounds as {@code sw_unary} of that
 * op does.
 */
public enum Activation {
  /** {@code a * sigmoid(a)} ({@code SW_UNARY_SILU}): SwiGLU, as Mixtral, Qwen-MoE and DeepSeek-MoE. */
  SILU(7),
  /** {@code a * Phi(a)}, the exact (erf) form ({@code SW_UNARY_GELU}): GeGLU. */
  GELU(8),
  /** {@code 1 / (1 + exp(-a))} ({@code SW_UNARY_SIGMOID}). */
  SIGMOID(9),
  /** {@code tanh(a)} ({@code SW_UNARY_TANH}). */
  TANH(10),
  /** {@code max(a, 0)} ({@code SW_UNARY_RELU}). */
  RELU(11);

  private final int value;

  Activation(int value) {
    this.value = value;
  }

  /**
   * The activation's number in the C ABI ({@code sw_unary_op_t}).
   *
   * @return the number
   */
  public int value() {
    return value;
  }
}
