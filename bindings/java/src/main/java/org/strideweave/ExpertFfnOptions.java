package org.strideweave;

import java.util.Objects;

/**
 * What {@link TiledEvictable#expertFfn(Tensor, Tensor, Tensor, Tensor, Tensor, ExpertFfnOptions)}
 * takes beside its operands (the options of {@code sw_expert_ffn_desc_t}, and the gate weights).
 * Immutable; made with {@link #builder()}:
 *
 * <pre>{@code
 * ExpertFfnOptions o = ExpertFfnOptions.builder().gates(gates).activation(Activation.GELU).build();
 * }</pre>
 *
 * @param gates null for the per-choice result {@code Y (T, k, H)}, or a CPU {@code (T, k)} float
 *     tensor of gate weights for the gated sum {@code (T, H)}
 * @param activation the activation of the gate product: {@link Activation#SILU} (SwiGLU, the
 *     default), {@link Activation#GELU} (GeGLU), {@link Activation#RELU},
 *     {@link Activation#SIGMOID} or {@link Activation#TANH}
 * @param outDtype the result's dtype, or null for the experts'; {@link DType#F32} with f16 or
 *     bf16 experts keeps each expert's output and the gated sum unrounded
 */
public record ExpertFfnOptions(Tensor gates, Activation activation, DType outDtype) {
  /** No gates, SiLU, the experts' dtype. */
  public static final ExpertFfnOptions DEFAULTS = new ExpertFfnOptions(null, Activation.SILU, null);

  /**
   * Options; the activation is required.
   *
   * @param gates the gate weights, or null
   * @param activation the activation
   * @param outDtype the result's dtype, or null
   */
  public ExpertFfnOptions {
    Objects.requireNonNull(activation, "activation");
  }

  /**
   * A builder starting from {@link #DEFAULTS}.
   *
   * @return the builder
   */
  public static Builder builder() {
    return new Builder();
  }

  /** Builds an {@link ExpertFfnOptions}; every setter returns the builder. */
  public static final class Builder {
    private Tensor gates;
    private Activation activation = Activation.SILU;
    private DType outDtype;

    private Builder() {}

    /**
     * The gate weights (default null: the per-choice result).
     *
     * @param gates a CPU {@code (T, k)} float tensor, or null
     * @return this builder
     */
    public Builder gates(Tensor gates) {
      this.gates = gates;
      return this;
    }

    /**
     * The activation of the gate product (default {@link Activation#SILU}).
     *
     * @param activation the activation
     * @return this builder
     */
    public Builder activation(Activation activation) {
      this.activation = Objects.requireNonNull(activation, "activation");
      return this;
    }

    /**
     * The result's dtype (default null: the experts').
     *
     * @param outDtype the dtype, or null
     * @return this builder
     */
    public Builder outDtype(DType outDtype) {
      this.outDtype = outDtype;
      return this;
    }

    /**
     * The options.
     *
     * @return the options
     */
    public ExpertFfnOptions build() {
      return new ExpertFfnOptions(gates, activation, outDtype);
    }
  }
}
