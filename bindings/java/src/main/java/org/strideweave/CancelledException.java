package org.strideweave;

/**
 * Work cancelled, e.g. by {@link StrideWeaveRuntime#shutdown()} ({@code SW_ERROR_CANCELLED}).
 *
 * <p>See {@link StrideWeaveError} for the exception hierarchy.
 */
public class CancelledException extends InvalidStateException {
  private static final long serialVersionUID = 1L;

  /**
   * An exception of this kind.
   *
   * @param message what went wrong, naming the problem
   */
  public CancelledException(String message) {
    super(ErrorCode.CANCELLED, message);
  }

  /**
   * An exception of this kind with a cause.
   *
   * @param message what went wrong, naming the problem
   * @param cause the exception that caused it
   */
  public CancelledException(String message, Throwable cause) {
    super(ErrorCode.CANCELLED, message, cause);
  }

  CancelledException(ErrorCode code, String message) {
    super(code, message);
  }

  CancelledException(ErrorCode code, String message, Throwable cause) {
    super(code, message, cause);
  }
}
