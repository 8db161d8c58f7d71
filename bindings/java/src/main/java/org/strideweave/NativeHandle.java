package org.strideweave;

import java.lang.ref.Cleaner;
import java.util.function.LongConsumer;

/**
 * A Java object owning one reference to a native handle.
 *
 * <p>Every handle is {@link AutoCloseable}. {@link #close()} drops the reference; it is
 * idempotent and thread-safe, and it waits for calls on this object that are in flight on
 * other threads to return before it releases the handle (a use count and a closed flag: every
 * call acquires the handle and releases it on return). After close, every method that needs
 * the handle throws {@link InvalidStateException} (an {@link IllegalStateException}) naming the
 * object; methods answering from Java fields alone (such as {@link #isClosed()}) still answer.
 * An object that becomes unreachable without being closed has its reference released by a
 * {@link Cleaner}; close promptly where native memory matters.
 *
 * <p>Closing a Java object drops its reference only: the library keeps what it needs alive on
 * its own (a carrier keeps its runtime, in-flight work everything it touches), so objects may be
 * closed in any order. Close a handle from a thread other than one inside a call on that same
 * handle (a residency policy must not close the TiledEvictable that is calling it): close waits
 * for that call to return.
 */
public abstract class NativeHandle implements AutoCloseable {
  static final Cleaner CLEANER = Cleaner.create();

  private final Object lock = new Object();
  private final long handle;
  private final String what;
  private final Cleaner.Cleanable cleanable;
  private int uses;
  private boolean closed;

  /** Drops the reference; holds no reference to the handle object. */
  private static final class Release implements Runnable {
    private final long handle;
    private final LongConsumer release;

    Release(long handle, LongConsumer release) {
      this.handle = handle;
      this.release = release;
    }

    @Override
    public void run() {
      release.accept(handle);
    }
  }

  NativeHandle(long handle, LongConsumer release, String what) {
    if (handle == 0) {
      throw new InternalErrorException("the library returned a NULL " + what + " handle");
    }
    this.handle = handle;
    this.what = what;
    this.cleanable = CLEANER.register(this, new Release(handle, release));
  }

  /** The handle for one call; pair with {@link #end()} in a finally block. */
  final long begin() {
    synchronized (lock) {
      if (closed) {
        throw new InvalidStateException("this " + what + " is closed");
      }
      ++uses;
      return handle;
    }
  }

  /** Ends a call begun with {@link #begin()}. */
  final void end() {
    synchronized (lock) {
      if (--uses == 0 && closed) {
        lock.notifyAll();
      }
    }
  }

  /** A call on the handle. */
  @FunctionalInterface
  interface Call<T> {
    T apply(long handle);
  }

  /** A call on the handle that returns nothing. */
  @FunctionalInterface
  interface VoidCall {
    void apply(long handle);
  }

  final <T> T call(Call<T> call) {
    long h = begin();
    try {
      return call.apply(h);
    } finally {
      end();
    }
  }

  final void run(VoidCall call) {
    long h = begin();
    try {
      call.apply(h);
    } finally {
      end();
    }
  }

  /** The handle of {@code other} (or 0 for null) for a call on both; pair with end. */
  static long beginOrZero(NativeHandle other) {
    return other == null ? 0 : other.begin();
  }

  static void endIfNotNull(NativeHandle other) {
    if (other != null) {
      other.end();
    }
  }

  /**
   * Whether {@link #close()} was called.
   *
   * @return true once closed
   */
  public final boolean isClosed() {
    synchronized (lock) {
      return closed;
    }
  }

  /**
   * Whether this object and {@code other} hold references to the same native object (two Java
   * objects for one tensor or carrier, say).
   *
   * @param other another handle
   * @return true for the same native object
   */
  public final boolean isSameNative(NativeHandle other) {
    return other != null && other.handle == handle;
  }

  /**
   * Drops this object's reference to the native handle. Idempotent and thread-safe; waits for
   * calls in flight on this object to return first. Never throws.
   */
  @Override
  public void close() {
    boolean interrupted = false;
    synchronized (lock) {
      closed = true;
      while (uses > 0) {
        try {
          lock.wait();
        } catch (InterruptedException e) {
          interrupted = true;
        }
      }
    }
    cleanable.clean();
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }

  @Override
  public String toString() {
    return getClass().getSimpleName() + (isClosed() ? "[closed]" : "@" + Long.toHexString(handle));
  }
}
