package org.strideweave;

/** The entry point of the native completion callback (see AwaitResult#toFuture). */
final class AwaitBridge {
  private AwaitBridge() {}

  /** Called by the JNI layer on the runtime's loop thread; never throws back into C. */
  static void complete(Object target, int code, String message, long tensor) {
    try {
      ((AwaitResult<?>) target).completed(code, message == null ? "" : message, tensor);
    } catch (Throwable t) {
      Thread.UncaughtExceptionHandler h = Thread.currentThread().getUncaughtExceptionHandler();
      if (h != null) {
        h.uncaughtException(Thread.currentThread(), t);
      }
    }
  }
}
