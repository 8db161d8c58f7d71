package org.strideweave;

/**
 * What every StrideWeave exception is: an unchecked exception carrying the library's stable
 * {@link ErrorCode}. This interface is the common type of every kind; each class also extends
 * the JDK exception Java code expects for its kind:
 *
 * <table>
 *   <caption>Error kinds</caption>
 *   <tr><th>code</th><th>class</th><th>JDK superclass</th></tr>
 *   <tr><td>TYPE</td><td>{@link TypeMismatchException}</td><td>{@link IllegalArgumentException}</td></tr>
 *   <tr><td>VALUE</td><td>{@link InvalidValueException}</td><td>{@link IllegalArgumentException}</td></tr>
 *   <tr><td>DATA_CORRUPT</td><td>{@link DataCorruptException}</td><td>{@link InvalidValueException}</td></tr>
 *   <tr><td>INDEX</td><td>{@link IndexOutOfRangeException}</td><td>{@link IndexOutOfBoundsException}</td></tr>
 *   <tr><td>UNSUPPORTED</td><td>{@link UnsupportedFeatureException}</td>
 *       <td>{@link UnsupportedOperationException}</td></tr>
 *   <tr><td>STATE</td><td>{@link InvalidStateException}</td><td>{@link IllegalStateException}</td></tr>
 *   <tr><td>STALE_HANDLE</td><td>{@link StaleHandleException}</td><td>{@link InvalidStateException}</td></tr>
 *   <tr><td>DEVICE_LOST</td><td>{@link DeviceLostException}</td><td>{@link InvalidStateException}</td></tr>
 *   <tr><td>CANCELLED</td><td>{@link CancelledException}</td><td>{@link InvalidStateException}</td></tr>
 *   <tr><td>OUT_OF_MEMORY</td><td>{@link NativeOutOfMemoryException}</td>
 *       <td>{@link StrideWeaveException}</td></tr>
 *   <tr><td>IO</td><td>{@link StorageIOException}</td><td>{@link StrideWeaveException}</td></tr>
 *   <tr><td>TIMEOUT</td><td>{@link WaitTimeoutException}</td><td>{@link StrideWeaveException}</td></tr>
 *   <tr><td>INTERNAL</td><td>{@link InternalErrorException}</td><td>{@link StrideWeaveException}</td></tr>
 * </table>
 *
 * <p>({@link StrideWeaveException} is a {@link RuntimeException}, the root of the kinds the JDK
 * has no matching exception for.) Every kind is a {@link RuntimeException}, so catching them
 * all is one catch and one test:
 *
 * <pre>{@code
 * try { ... } catch (RuntimeException e) {
 *   if (!(e instanceof StrideWeaveError err)) throw e;
 *   log(err.code(), err.getMessage());
 * }
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
