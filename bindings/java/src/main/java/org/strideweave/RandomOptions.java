package org.strideweave;

import java.util.Objects;

/**
 * What {@link Tensor#random(StrideWeaveRuntime, RandomOptions, long...)} draws (the options of
 * {@code sw_random_desc_t}): a distribution and its two parameters, a floating dtype and a seed.
 * Immutable; start from {@link #uniform} or {@link #normal} and change the dtype or seed with
 * {@link #dtype(DType)} and {@link #seed(long)}:
 *
 * <pre>{@code
 * RandomOptions o = RandomOptions.normal(0, 0.02).dtype(DType.BF16).seed(42);
 * }</pre>
 *
 * <p>The generator is counter based: element i (first mode fastest) of a given seed, distribution
 * and parameters is the same on every machine, for every thread count and for any shape holding
 * it at ordinal i (the values differ from NumPy's and PyTorch's generators).
 *
 * @param distribution the distribution
 * @param dtype a floating dtype
 * @param seed the seed
 * @param first low (uniform) or mean (normal)
 * @param second high (uniform) or standard deviation (normal)
 */
public record RandomOptions(Distribution distribution, DType dtype, long seed, double first, double second) {
  /** The distributions ({@code sw_random_distribution_t}). */
  public enum Distribution {
    /** Uniform in {@code [low, high)} ({@code SW_RANDOM_UNIFORM}). */
    UNIFORM(1),
    /** Normal with a mean and a standard deviation ({@code SW_RANDOM_NORMAL}). */
    NORMAL(2);

    final int value;

    Distribution(int value) {
      this.value = value;
    }
  }

  /** The defaults of {@code sw_random_desc_init}: uniform in {@code [0, 1)}, f32, seed 0. */
  public static final RandomOptions DEFAULTS = uniform(0, 1);

  /**
   * Options; the distribution and dtype are required (the library checks the rest).
   *
   * @param distribution the distribution
   * @param dtype a floating dtype
   * @param seed the seed
   * @param first low or mean
   * @param second high or standard deviation
   */
  public RandomOptions {
    Objects.requireNonNull(distribution, "distribution");
    Objects.requireNonNull(dtype, "dtype");
  }

  /**
   * Uniform values in {@code [low, high)}, f32, seed 0.
   *
   * @param low the lower bound
   * @param high the upper bound (never drawn once rounded to the dtype)
   * @return the options
   */
  public static RandomOptions uniform(double low, double high) {
    return new RandomOptions(Distribution.UNIFORM, DType.F32, 0, low, high);
  }

  /**
   * Normal values (Box-Muller pairs), f32, seed 0.
   *
   * @param mean the mean
   * @param stddev the standard deviation
   * @return the options
   */
  public static RandomOptions normal(double mean, double stddev) {
    return new RandomOptions(Distribution.NORMAL, DType.F32, 0, mean, stddev);
  }

  /**
   * These options with another dtype.
   *
   * @param dtype a floating dtype
   * @return new options
   */
  public RandomOptions dtype(DType dtype) {
    return new RandomOptions(distribution, dtype, seed, first, second);
  }

  /**
   * These options with another seed.
   *
   * @param seed the seed
   * @return new options
   */
  public RandomOptions seed(long seed) {
    return new RandomOptions(distribution, dtype, seed, first, second);
  }
}
