package org.strideweave;

/**
 * File or system I/O failed, or a device copy failed ({@code SW_ERROR_IO}). Unchecked, like {@link java.io.UncheckedIOException}.
 *
 * <p>See {@link StrideWeaveError} for the exception hierarchy.
 */
public class StorageIOException extends StrideWeaveException {
  private static final long serialVersionUID = 1L;

  /**
   * An exception of this kind.
   *
   * @param message what went wrong, naming the problem
   */
  public StorageIOException(String message) {
    super(ErrorCode.IO, message);
  }

  /**
   * An exception of this kind with a cause.
   *
   * @param message what went wrong, naming the problem
   * @param cause the exception that caused it
   */
  public StorageIOException(String message, Throwable cause) {
    super(ErrorCode.IO, message, cause);
  }

  StorageIOException(ErrorCode code, String message) {
    super(code, message);
  }

  StorageIOException(ErrorCode code, String message, Throwable cause) {
    super(code, message, cause);
  }
}
