package org.strideweave;

/**
 * A wait expired; the work is still pending ({@code SW_ERROR_TIMEOUT}).
 *
 * <p>See {@link StrideWeaveError} for the exception hierarchy.
 */
public class WaitTimeoutException extends StrideWeaveException {
  private static final long serialVersionUID = 1L;

  /**
   * An exception of this kind.
   *
   * @param message what went wrong, naming the problem
   */
  public WaitTimeoutException(String message) {
    super(ErrorCode.TIMEOUT, message);
  }

  /**
   * An exception of this kind with a cause.
   *
   * @param message what went wrong, naming the problem
   * @param cause the exception that caused it
   */
  public WaitTimeoutException(String message, Throwable cause) {
    super(ErrorCode.TIMEOUT, message, cause);
  }

  WaitTimeoutException(ErrorCode code, String message) {
    super(code, message);
  }

  WaitTimeoutException(ErrorCode code, String message, Throwable cause) {
    super(code, message, cause);
  }
}
