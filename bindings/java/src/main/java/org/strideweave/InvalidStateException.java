package org.strideweave;

import java.util.Objects;

/**
 * The state kinds (STATE and its relatives): a released or disposed carrier, work still
 * pending, a carrier owned by other work or by a TiledEvictable, a conflicting residency
 * request, a value modified in place since autograd saved it, and every use of a closed Java
 * handle. An {@link IllegalStateException}, as Java code expects for such misuse; see
 * {@link StrideWeaveError} for the hierarchy.
 */
public class InvalidStateException extends IllegalStateException implements StrideWeaveError {
  private static final long serialVersionUID = 1L;

  /** The code (STATE, or a state kind's own). */
  private final ErrorCode code;

  /**
   * A STATE exception.
   *
   * @param message what went wrong, naming the problem
   */
  public InvalidStateException(String message) {
    this(ErrorCode.STATE, message);
  }

  /**
   * A STATE exception with a cause.
   *
   * @param message what went wrong, naming the problem
   * @param cause the exception that caused it
   */
  public InvalidStateException(String message, Throwable cause) {
    this(ErrorCode.STATE, message, cause);
  }

  InvalidStateException(ErrorCode code, String message) {
    super(message);
    this.code = Objects.requireNonNull(code, "code");
  }

  InvalidStateException(ErrorCode code, String message, Throwable cause) {
    super(message, cause);
    this.code = Objects.requireNonNull(code, "code");
  }

  @Override
  public ErrorCode code() {
    return code;
  }
}
