package org.strideweave;

import java.util.Objects;

/**
 * A coordinate, slot or axis out of range ({@code SW_ERROR_INDEX}). An
 * {@link IndexOutOfBoundsException}, as Java code expects for an index out of range.
 *
 * <p>See {@link StrideWeaveError} for the exception hierarchy.
 */
public class IndexOutOfRangeException extends IndexOutOfBoundsException implements StrideWeaveError {
  private static final long serialVersionUID = 1L;

  /** The code (INDEX, or a subclass's own); an enum, so it serialises by name. */
  private final ErrorCode code;

  /**
   * An exception of this kind.
   *
   * @param message what went wrong, naming the problem
   */
  public IndexOutOfRangeException(String message) {
    this(ErrorCode.INDEX, message);
  }

  /**
   * An exception of this kind with a cause.
   *
   * @param message what went wrong, naming the problem
   * @param cause the exception that caused it
   */
  public IndexOutOfRangeException(String message, Throwable cause) {
    this(ErrorCode.INDEX, message, cause);
  }

  IndexOutOfRangeException(ErrorCode code, String message) {
    super(message);
    this.code = Objects.requireNonNull(code, "code");
  }

  IndexOutOfRangeException(ErrorCode code, String message, Throwable cause) {
    super(message);
    initCause(cause);
    this.code = Objects.requireNonNull(code, "code");
  }

  @Override
  public ErrorCode code() {
    return code;
  }
}
