package org.strideweave;

import java.util.Objects;

/**
 * A bad shape, size, range or option: a duplicate tile coordinate, a selection of the wrong rank,
 * a tensor that is not tile-footprint compatible ({@code SW_ERROR_VALUE}). An
 * {@link IllegalArgumentException}, as Java code expects for a bad argument.
 *
 * <p>See {@link StrideWeaveError} for the exception hierarchy.
 */
public class InvalidValueException extends IllegalArgumentException implements StrideWeaveError {
  private static final long serialVersionUID = 1L;

  /** The code (VALUE, or a subclass's own); an enum, so it serialises by name. */
  private final ErrorCode code;

  /**
   * An exception of this kind.
   *
   * @param message what went wrong, naming the problem
   */
  public InvalidValueException(String message) {
    this(ErrorCode.VALUE, message);
  }

  /**
   * An exception of this kind with a cause.
   *
   * @param message what went wrong, naming the problem
   * @param cause the exception that caused it
   */
  public InvalidValueException(String message, Throwable cause) {
    this(ErrorCode.VALUE, message, cause);
  }

  InvalidValueException(ErrorCode code, String message) {
    super(message);
    this.code = Objects.requireNonNull(code, "code");
  }

  InvalidValueException(ErrorCode code, String message, Throwable cause) {
    super(message, cause);
    this.code = Objects.requireNonNull(code, "code");
  }

  @Override
  public ErrorCode code() {
    return code;
  }
}
