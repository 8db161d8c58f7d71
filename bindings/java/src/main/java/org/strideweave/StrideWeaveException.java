package org.strideweave;

import java.util.Objects;

/**
 * The root of the kinds the JDK has no matching exception for: {@link NativeOutOfMemoryException}
 * (OUT_OF_MEMORY), {@link StorageIOException} (IO), {@link WaitTimeoutException} (TIMEOUT) and
 * {@link InternalErrorException} (INTERNAL). Unchecked; carries the library's {@link ErrorCode}.
 * The other kinds extend their JDK counterparts ({@link IllegalArgumentException},
 * {@link IndexOutOfBoundsException}, {@link UnsupportedOperationException},
 * {@link IllegalStateException}); {@link StrideWeaveError} is the type common to all of them and
 * has the table.
 */
public class StrideWeaveException extends RuntimeException implements StrideWeaveError {
  private static final long serialVersionUID = 1L;

  /** The code; an enum, so it serialises by name. */
  private final ErrorCode code;

  /**
   * An exception with a code and message.
   *
   * @param code the error code
   * @param message what went wrong, naming the problem
   */
  public StrideWeaveException(ErrorCode code, String message) {
    super(message);
    this.code = Objects.requireNonNull(code, "code");
  }

  /**
   * An exception with a code, message and cause.
   *
   * @param code the error code
   * @param message what went wrong, naming the problem
   * @param cause the exception that caused it
   */
  public StrideWeaveException(ErrorCode code, String message, Throwable cause) {
    super(message, cause);
    this.code = Objects.requireNonNull(code, "code");
  }

  @Override
  public ErrorCode code() {
    return code;
  }
}
