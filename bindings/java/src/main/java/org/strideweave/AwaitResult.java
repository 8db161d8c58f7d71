package org.strideweave;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.Executors;

/**
 * A handle on asynchronous work ({@code sw_await_t}): a move ({@link AwaitMove}), a projection
 * ({@link AwaitProjection}) or a residency transition ({@link AwaitResidency}). Any number of
 * threads may query or wait on it; every wait observes the same result or the same error. An
 * await is not a tensor and is never accepted as one.
 *
 * <p>{@link #get()} blocks; {@link #toFuture()} gives a {@link CompletableFuture} completed from
 * the runtime's loop thread through the library's completion callback (dependent stages then
 * run on a StrideWeave completion thread, never on the loop thread, so they may wait on other
 * work). Both give the same result object every time. The result tensor belongs to the caller:
 * closing the await does not close it.
 *
 * @param <T> the result: a {@link Tensor}, or {@link Void} for work without one
 */
public abstract class AwaitResult<T> extends NativeHandle {
  /** Where futures complete: daemon threads, so that no completion keeps the JVM alive. */
  private static final Executor COMPLETIONS = Executors.newCachedThreadPool(r -> {
    Thread t = new Thread(r, "strideweave-completion");
    t.setDaemon(true);
    return t;
  });

  private T result;
  private boolean resultKnown;
  private CompletableFuture<T> future;

  AwaitResult(long handle) {
    super(handle, NativeJNI::sw_await_release, "await");
  }

  /** The Java result of a tensor handle (a new reference, 0 for none). */
  abstract T wrap(long tensor);

  /** The state of an await. */
  public enum Status {
    /** Not terminal yet. */
    PENDING,
    /** Terminal with success. */
    SUCCEEDED,
    /** Terminal with an error. */
    FAILED
  }

  /** What an await stands for ({@code sw_await_kind_t}). */
  public enum Kind {
    /** A move, scatter or update. */
    MOVE,
    /** A projection. */
    PROJECTION,
    /** A promotion or eviction. */
    RESIDENCY
  }

  /**
   * The kind of work.
   *
   * @return the kind
   */
  public final Kind kind() {
    return call(h -> {
      int[] out = new int[1];
      Native.sw_await_kind(h, out);
      return Kind.values()[out[0] - 1];
    });
  }

  /**
   * The current state; non-blocking.
   *
   * @return the status
   */
  public final Status status() {
    return call(h -> {
      int[] out = new int[1];
      Native.sw_await_query(h, out);
      return Status.values()[out[0]];
    });
  }

  /**
   * Whether the work is terminal (succeeded or failed).
   *
   * @return true when done
   */
  public final boolean isDone() {
    return status() != Status.PENDING;
  }

  /**
   * Blocks until the work is terminal and returns its result (the same object every call).
   * Not interruptible; wait on {@link #toFuture()} for an interruptible wait.
   *
   * @return the result ({@code null} for work without one)
   * @throws RuntimeException the work's error: the exception class of its code
   */
  public final T get() {
    return call(h -> {
      Native.await_wait(h, -1);
      return result(h);
    });
  }

  /**
   * Blocks until the work is terminal or {@code timeout} passes.
   *
   * @param timeout the longest wait; zero polls
   * @return the result ({@code null} for work without one)
   * @throws WaitTimeoutException when the time ran out (the work stays pending)
   */
  public final T get(Duration timeout) {
    long ns = timeout.toNanos();
    return call(h -> {
      if (!Native.await_wait(h, ns)) {
        throw new WaitTimeoutException("wait timed out after " + ns + " ns; the work is still pending");
      }
      return result(h);
    });
  }

  /** The result, within a call on the handle (so a concurrent close waits for it too). */
  private synchronized T result(long handle) {
    if (!resultKnown) {
      long[] out = new long[1];
      Native.sw_await_result(handle, out);
      result = wrap(out[0]);
      resultKnown = true;
    }
    return result;
  }

  /** The result for a new tensor reference from the completion callback. */
  private synchronized T adoptResult(long tensor) {
    if (resultKnown) {
      if (tensor != 0) {
        Native.sw_tensor_release(tensor);
      }
    } else {
      result = wrap(tensor);
      resultKnown = true;
    }
    return result;
  }

  /**
   * A future of the result, completed when the work is terminal: with the result {@link #get()}
   * returns, or exceptionally with the work's error. The same future every call. The callback
   * that completes it is installed on the first call; the await keeps itself alive until then.
   *
   * @return the future
   */
  public final synchronized CompletableFuture<T> toFuture() {
    if (future == null) {
      future = new CompletableFuture<>();
      try {
        run(h -> Native.await_set_callback(h, this));
      } catch (RuntimeException e) {
        future = null;
        throw e;
      }
    }
    return future;
  }

  /**
   * The completion callback, on the loop thread (through AwaitBridge). It waits for
   * toFuture() to return (the callback of terminal work may fire at once), then completes the
   * future on a completion thread.
   */
  final void completed(int code, String message, long tensor) {
    CompletableFuture<T> f;
    synchronized (this) {
      f = future;
    }
    if (code == ErrorCode.OK.value()) {
      T value = adoptResult(tensor);
      COMPLETIONS.execute(() -> f.complete(value));
    } else {
      if (tensor != 0) {
        Native.sw_tensor_release(tensor);
      }
      RuntimeException e = Errors.of(ErrorCode.of(code), message, null);
      COMPLETIONS.execute(() -> f.completeExceptionally(e));
    }
  }
}
