package org.strideweave;

/**
 * A native allocation failed ({@code SW_ERROR_OUT_OF_MEMORY}). Not an {@link OutOfMemoryError}: the Java heap is fine and the request changed nothing.
 *
 * <p>See {@link StrideWeaveError} for the exception hierarchy.
 */
public class NativeOutOfMemoryException extends StrideWeaveException {
  private static final long serialVersionUID = 1L;

  /**
   * An exception of this kind.
   *
   * @param message what went wrong, naming the problem
   */
  public NativeOutOfMemoryException(String message) {
    super(ErrorCode.OUT_OF_MEMORY, message);
  }

  /**
   * An exception of this kind with a cause.
   *
   * @param message what went wrong, naming the problem
   * @param cause the exception that caused it
   */
  public NativeOutOfMemoryException(String message, Throwable cause) {
    super(ErrorCode.OUT_OF_MEMORY, message, cause);
  }

  NativeOutOfMemoryException(ErrorCode code, String message) {
    super(code, message);
  }

  NativeOutOfMemoryException(ErrorCode code, String message, Throwable cause) {
    super(code, message, cause);
  }
}
