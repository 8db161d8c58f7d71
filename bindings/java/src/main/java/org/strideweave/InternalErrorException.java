package org.strideweave;

/**
 * A bug in StrideWeave, or an exception of no other kind thrown by a Java residency policy ({@code SW_ERROR_INTERNAL}).
 *
 * <p>See {@link StrideWeaveError} for the exception hierarchy.
 */
public class InternalErrorException extends StrideWeaveException {
  private static final long serialVersionUID = 1L;

  /**
   * An exception of this kind.
   *
   * @param message what went wrong, naming the problem
   */
  public InternalErrorException(String message) {
    super(ErrorCode.INTERNAL, message);
  }

  /**
   * An exception of this kind with a cause.
   *
   * @param message what went wrong, naming the problem
   * @param cause the exception that caused it
   */
  public InternalErrorException(String message, Throwable cause) {
    super(ErrorCode.INTERNAL, message, cause);
  }

  InternalErrorException(ErrorCode code, String message) {
    super(code, message);
  }

  InternalErrorException(ErrorCode code, String message, Throwable cause) {
    super(code, message, cause);
  }
}
