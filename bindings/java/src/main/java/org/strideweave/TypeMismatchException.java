package org.strideweave;

/**
 * A wrong handle kind, dtype or class: a carrier of another kind where a tiled one is needed, operands of different dtypes, a policy that returned something other than a plan ({@code SW_ERROR_TYPE}).
 *
 * <p>See {@link StrideWeaveError} for the exception hierarchy.
 */
public class TypeMismatchException extends StrideWeaveException {
  private static final long serialVersionUID = 1L;

  /**
   * An exception of this kind.
   *
   * @param message what went wrong, naming the problem
   */
  public TypeMismatchException(String message) {
    super(ErrorCode.TYPE, message);
  }

  /**
   * An exception of this kind with a cause.
   *
   * @param message what went wrong, naming the problem
   * @param cause the exception that caused it
   */
  public TypeMismatchException(String message, Throwable cause) {
    super(ErrorCode.TYPE, message, cause);
  }

  TypeMismatchException(ErrorCode code, String message) {
    super(code, message);
  }

  TypeMismatchException(ErrorCode code, String message, Throwable cause) {
    super(code, message, cause);
  }
}
