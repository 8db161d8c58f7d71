package org.strideweave;

/**
 * A coordinate, slot or axis out of range ({@code SW_ERROR_INDEX}).
 *
 * <p>See {@link StrideWeaveError} for the exception hierarchy.
 */
public class IndexOutOfRangeException extends StrideWeaveException {
  private static final long serialVersionUID = 1L;

  /**
   * An exception of this kind.
   *
   * @param message what went wrong, naming the problem
   */
  public IndexOutOfRangeException(String message) {
    super(ErrorCode.INDEX, message);
  }

  /**
   * An exception of this kind with a cause.
   *
   * @param message what went wrong, naming the problem
   * @param cause the exception that caused it
   */
  public IndexOutOfRangeException(String message, Throwable cause) {
    super(ErrorCode.INDEX, message, cause);
  }

  IndexOutOfRangeException(ErrorCode code, String message) {
    super(code, message);
  }

  IndexOutOfRangeException(ErrorCode code, String message, Throwable cause) {
    super(code, message, cause);
  }
}
