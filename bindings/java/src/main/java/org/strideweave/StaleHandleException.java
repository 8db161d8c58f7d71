package org.strideweave;

/**
 * A device handle, copy event or view from an older device generation, after a restart ({@code SW_ERROR_STALE_HANDLE}).
 *
 * <p>See {@link StrideWeaveError} for the exception hierarchy.
 */
public class StaleHandleException extends InvalidStateException {
  private static final long serialVersionUID = 1L;

  /**
   * An exception of this kind.
   *
   * @param message what went wrong, naming the problem
   */
  public StaleHandleException(String message) {
    super(ErrorCode.STALE_HANDLE, message);
  }

  /**
   * An exception of this kind with a cause.
   *
   * @param message what went wrong, naming the problem
   * @param cause the exception that caused it
   */
  public StaleHandleException(String message, Throwable cause) {
    super(ErrorCode.STALE_HANDLE, message, cause);
  }

  StaleHandleException(ErrorCode code, String message) {
    super(code, message);
  }

  StaleHandleException(ErrorCode code, String message, Throwable cause) {
    super(code, message, cause);
  }
}
