package org.strideweave;

/**
 * What every StrideWeave exception is: an unchecked exception carrying the library's stable
 * {@link ErrorCode}.
 *
 * <p>The hierarchy. Java has no multiple inheritance, so the kinds that Java code expects as
 * {@link IllegalStateException} extend it, and every other kind extends
 * {@link StrideWeaveException}; both roots implement this interface:
 *
 * <ul>
 *   <li>{@link StrideWeaveException} ({@link RuntimeException}): {@link TypeMismatchException}
 *       (TYPE), {@link InvalidValueException} (VALUE) and its {@link DataCorruptException}
 *       (DATA_CORRUPT), {@link IndexOutOfRangeException} (INDEX),
 *       {@link UnsupportedFeatureException} (UNSUPPORTED), {@link NativeOutOfMemoryException}
 *       (OUT_OF_MEMORY), {@link StorageIOException} (IO), {@link WaitTimeoutException} (TIMEOUT),
 *       {@link InternalErrorException} (INTERNAL).
 *   <li>{@link InvalidStateException} ({@link IllegalStateException}; STATE: released, pending,
 *       owned, pinned, conflicting, modified in place, and every use of a closed handle) and its
 *       {@link StaleHandleException} (STALE_HANDLE), {@link DeviceLostException} (DEVICE_LOST)
 *       and {@link CancelledException} (CANCELLED).
 * </ul>
 *
 * <p>To catch every kind, catch both roots; the multi-catch variable is then a
 * {@code RuntimeException} and a {@code StrideWeaveError} at once:
 *
 * <pre>{@code
 * try { ... } catch (StrideWeaveException | InvalidStateException e) { log(e.code(), e.getMessage()); }
 * }</pre>
 *
 * <p>Errors are thrown from the native library through JNI (never unwinding through C), one
 * class per code, and a request that fails changes nothing. Arguments that are {@code null}
 * where an object is required throw {@link NullPointerException} before any native call.
 */
public interface StrideWeaveError {
  /**
   * The library's error code of this exception.
   *
   * @return the code, never {@link ErrorCode#OK}
   */
  ErrorCode code();

  /**
   * The message, naming the problem.
   *
   * @return the message
   */
  String getMessage();
}
