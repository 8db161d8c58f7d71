package org.strideweave;

/**
 * Stored data failed its checksum or decode: a corrupt zstd frame reads as this, never as
 * garbage ({@code SW_ERROR_DATA_CORRUPT}). An {@link InvalidValueException} (and so an
 * {@link IllegalArgumentException}), as the Python binding's {@code DataCorruptError} is a
 * {@code ValueError}.
 *
 * <p>See {@link StrideWeaveError} for the exception hierarchy.
 */
public class DataCorruptException extends InvalidValueException {
  private static final long serialVersionUID = 1L;

  /**
   * An exception of this kind.
   *
   * @param message what went wrong, naming the problem
   */
  public DataCorruptException(String message) {
    super(ErrorCode.DATA_CORRUPT, message);
  }

  /**
   * An exception of this kind with a cause.
   *
   * @param message what went wrong, naming the problem
   * @param cause the exception that caused it
   */
  public DataCorruptException(String message, Throwable cause) {
    super(ErrorCode.DATA_CORRUPT, message, cause);
  }

  DataCorruptException(ErrorCode code, String message) {
    super(code, message);
  }

  DataCorruptException(ErrorCode code, String message, Throwable cause) {
    super(code, message, cause);
  }
}
