package org.strideweave;

/**
 * A valid request this build or machine cannot do: a Vulkan device without a driver, host memory of a carrier that has none ({@code SW_ERROR_UNSUPPORTED}).
 *
 * <p>See {@link StrideWeaveError} for the exception hierarchy.
 */
public class UnsupportedFeatureException extends StrideWeaveException {
  private static final long serialVersionUID = 1L;

  /**
   * An exception of this kind.
   *
   * @param message what went wrong, naming the problem
   */
  public UnsupportedFeatureException(String message) {
    super(ErrorCode.UNSUPPORTED, message);
  }

  /**
   * An exception of this kind with a cause.
   *
   * @param message what went wrong, naming the problem
   * @param cause the exception that caused it
   */
  public UnsupportedFeatureException(String message, Throwable cause) {
    super(ErrorCode.UNSUPPORTED, message, cause);
  }

  UnsupportedFeatureException(ErrorCode code, String message) {
    super(code, message);
  }

  UnsupportedFeatureException(ErrorCode code, String message, Throwable cause) {
    super(code, message, cause);
  }
}
