package org.strideweave;

import java.util.Objects;

/**
 * A wrong handle kind, dtype or class: a carrier of another kind where a tiled one is needed,
 * operands of different dtypes, a policy that returned something other than a plan
 * ({@code SW_ERROR_TYPE}). An {@link IllegalArgumentException}, as Java code expects for an
 * argument of the wrong kind.
 *
 * <p>See {@link StrideWeaveError} for the exception hierarchy.
 */
public class TypeMismatchException extends IllegalArgumentException implements StrideWeaveError {
  private static final long serialVersionUID = 1L;

  /** The code (TYPE, or a subclass's own); an enum, so it serialises by name. */
  private final ErrorCode code;

  /**
   * An exception of this kind.
   *
   * @param message what went wrong, naming the problem
   */
  public TypeMismatchException(String message) {
    this(ErrorCode.TYPE, message);
  }

  /**
   * An exception of this kind with a cause.
   *
   * @param message what went wrong, naming the problem
   * @param cause the exception that caused it
   */
  public TypeMismatchException(String message, Throwable cause) {
    this(ErrorCode.TYPE, message, cause);
  }

  TypeMismatchException(ErrorCode code, String message) {
    super(message);
    this.code = Objects.requireNonNull(code, "code");
  }

  TypeMismatchException(ErrorCode code, String message, Throwable cause) {
    super(message, cause);
    this.code = Objects.requireNonNull(code, "code");
  }

  @Override
  public ErrorCode code() {
    return code;
  }
}
