package org.strideweave;

import java.util.Objects;

/**
 * A valid request this build or machine cannot do: a Vulkan device without a driver, host memory
 * of a carrier that has none ({@code SW_ERROR_UNSUPPORTED}). An
 * {@link UnsupportedOperationException}, as Java code expects for an operation not supported.
 *
 * <p>See {@link StrideWeaveError} for the exception hierarchy.
 */
public class UnsupportedFeatureException extends UnsupportedOperationException implements StrideWeaveError {
  private static final long serialVersionUID = 1L;

  /** The code (UNSUPPORTED, or a subclass's own); an enum, so it serialises by name. */
  private final ErrorCode code;

  /**
   * An exception of this kind.
   *
   * @param message what went wrong, naming the problem
   */
  public UnsupportedFeatureException(String message) {
    this(ErrorCode.UNSUPPORTED, message);
  }

  /**
   * An exception of this kind with a cause.
   *
   * @param message what went wrong, naming the problem
   * @param cause the exception that caused it
   */
  public UnsupportedFeatureException(String message, Throwable cause) {
    this(ErrorCode.UNSUPPORTED, message, cause);
  }

  UnsupportedFeatureException(ErrorCode code, String message) {
    super(message);
    this.code = Objects.requireNonNull(code, "code");
  }

  UnsupportedFeatureException(ErrorCode code, String message, Throwable cause) {
    super(message, cause);
    this.code = Objects.requireNonNull(code, "code");
  }

  @Override
  public ErrorCode code() {
    return code;
  }
}
