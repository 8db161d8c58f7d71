package org.strideweave;

import java.io.IOException;
import java.io.UncheckedIOException;

/**
 * Makes the exception for a library error (called from the JNI layer, which throws what this
 * returns) and carries exceptions thrown by Java residency policies back to the caller.
 */
final class Errors {
  private Errors() {}

  /** An exception a Java policy threw on this thread, until the library hands its error back. */
  private record Stash(Throwable thrown, int code, String message) {}

  private static final ThreadLocal<Stash> STASH = new ThreadLocal<>();

  /**
   * The exception for a library error of {@code code} and {@code message}. When it is the error
   * a Java residency policy's exception became on this thread, that exception itself (wrapped
   * as the cause when it is a checked exception).
   */
  static Throwable create(int code, String message) {
    Stash s = STASH.get();
    if (s != null) {
      STASH.remove();
      if (s.code == code && s.message.equals(message)) {
        Throwable t = s.thrown;
        if (t instanceof RuntimeException || t instanceof Error) {
          return t;
        }
        return of(ErrorCode.of(code), message, t);
      }
    }
    return of(ErrorCode.of(code), message, null);
  }

  /** The exception class of {@code code}, with a message and an optional cause. */
  static RuntimeException of(ErrorCode code, String message, Throwable cause) {
    switch (code) {
      case TYPE: return new TypeMismatchException(code, message, cause);
      case VALUE: return new InvalidValueException(code, message, cause);
      case STATE: return new InvalidStateException(code, message, cause);
      case UNSUPPORTED: return new UnsupportedFeatureException(code, message, cause);
      case INDEX: return new IndexOutOfRangeException(code, message, cause);
      case OUT_OF_MEMORY: return new NativeOutOfMemoryException(code, message, cause);
      case IO: return new StorageIOException(code, message, cause);
      case DATA_CORRUPT: return new DataCorruptException(code, message, cause);
      case DEVICE_LOST: return new DeviceLostException(code, message, cause);
      case STALE_HANDLE: return new StaleHandleException(code, message, cause);
      case TIMEOUT: return new WaitTimeoutException(code, message, cause);
      case CANCELLED: return new CancelledException(code, message, cause);
      default: return new InternalErrorException(ErrorCode.INTERNAL, message, cause);
    }
  }

  /** The error code a Java exception stands for when a policy throws it. */
  static ErrorCode codeOf(Throwable t) {
    if (t instanceof StrideWeaveError) {
      return ((StrideWeaveError) t).code();
    }
    if (t instanceof ClassCastException) {
      return ErrorCode.TYPE;
    }
    if (t instanceof IndexOutOfBoundsException) {
      return ErrorCode.INDEX;
    }
    if (t instanceof IllegalArgumentException) {
      return ErrorCode.VALUE;
    }
    if (t instanceof UnsupportedOperationException) {
      return ErrorCode.UNSUPPORTED;
    }
    if (t instanceof IllegalStateException) {
      return ErrorCode.STATE;
    }
    if (t instanceof UncheckedIOException || t instanceof IOException) {
      return ErrorCode.IO;
    }
    if (t instanceof OutOfMemoryError) {
      return ErrorCode.OUT_OF_MEMORY;
    }
    return ErrorCode.INTERNAL;
  }

  /**
   * Keeps a policy's exception for {@link #create} and returns the native error (a new
   * {@code sw_error_t*}) the policy hands the library instead.
   */
  static long stash(Throwable t, String what) {
    ErrorCode code = codeOf(t);
    String message = what + " threw " + t.getClass().getName() + ": " + t.getMessage();
    long error = Native.error_create(code.value(), message);
    STASH.set(new Stash(t, code.value(), message));
    return error;
  }
}
