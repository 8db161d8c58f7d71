package org.strideweave;

/**
 * A bad shape, size, range or option: a duplicate tile coordinate, a selection of the wrong rank, a tensor that is not tile-footprint compatible ({@code SW_ERROR_VALUE}).
 *
 * <p>See {@link StrideWeaveError} for the exception hierarchy.
 */
public class InvalidValueException extends StrideWeaveException {
  private static final long serialVersionUID = 1L;

  /**
   * An exception of this kind.
   *
   * @param message what went wrong, naming the problem
   */
  public InvalidValueException(String message) {
    super(ErrorCode.VALUE, message);
  }

  /**
   * An exception of this kind with a cause.
   *
   * @param message what went wrong, naming the problem
   * @param cause the exception that caused it
   */
  public InvalidValueException(String message, Throwable cause) {
    super(ErrorCode.VALUE, message, cause);
  }

  InvalidValueException(ErrorCode code, String message) {
    super(code, message);
  }

  InvalidValueException(ErrorCode code, String message, Throwable cause) {
    super(code, message, cause);
  }
}
