package org.strideweave;

/**
 * The device was lost and has restarted ({@code SW_ERROR_DEVICE_LOST}).
 *
 * <p>See {@link StrideWeaveError} for the exception hierarchy.
 */
public class DeviceLostException extends InvalidStateException {
  private static final long serialVersionUID = 1L;

  /**
   * An exception of this kind.
   *
   * @param message what went wrong, naming the problem
   */
  public DeviceLostException(String message) {
    super(ErrorCode.DEVICE_LOST, message);
  }

  /**
   * An exception of this kind with a cause.
   *
   * @param message what went wrong, naming the problem
   * @param cause the exception that caused it
   */
  public DeviceLostException(String message, Throwable cause) {
    super(ErrorCode.DEVICE_LOST, message, cause);
  }

  DeviceLostException(ErrorCode code, String message) {
    super(code, message);
  }

  DeviceLostException(ErrorCode code, String message, Throwable cause) {
    super(code, message, cause);
  }
}
