package org.strideweave;

/**
 * A runtime ({@code sw_runtime_t}): the worker threads, the loop thread that completes
 * asynchronous work, and the host buffer pool. Every carrier and tensor belongs to one runtime
 * and keeps it alive natively, so closing this object while carriers live is fine: the runtime
 * shuts down once the last of them is released. Thread-safe.
 *
 * <pre>{@code
 * try (StrideWeaveRuntime rt = StrideWeaveRuntime.create()) {
 *   Tensor t = Tensor.fromArray(rt, new float[] {1, 2, 3, 4}, 2, 2);
 * }
 * }</pre>
 */
public final class StrideWeaveRuntime extends NativeHandle {
  private StrideWeaveRuntime(long handle) {
    super(handle, NativeJNI::sw_runtime_release, "runtime");
  }

  /**
   * A runtime with the defaults: one compute thread per core, two background workers, a 1 GiB
   * buffer pool.
   *
   * @return the runtime
   */
  public static StrideWeaveRuntime create() {
    return create(0, 0, -1);
  }

  /**
   * A runtime with explicit thread counts and pool limit.
   *
   * @param computeThreads threads computing kernels, the caller included; 0 for one per core
   * @param workerThreads threads for background work (decompression, copies); 0 for 2
   * @param poolLimitBytes bytes of freed host buffers kept for reuse; negative for the default
   * @return the runtime
   */
  public static StrideWeaveRuntime create(int computeThreads, int workerThreads, long poolLimitBytes) {
    if (computeThreads < 0 || workerThreads < 0) {
      throw new InvalidValueException("thread counts must be >= 0");
    }
    return new StrideWeaveRuntime(Native.runtime_create(computeThreads, workerThreads, poolLimitBytes));
  }

  static StrideWeaveRuntime adopt(long handle) {
    return new StrideWeaveRuntime(handle);
  }

  /**
   * The number of compute threads, the caller included.
   *
   * @return the thread count
   */
  public int computeThreads() {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_runtime_compute_threads(h, out);
      return (int) out[0];
    });
  }

  /**
   * Completes every pending await with {@link CancelledException} (their carriers stay usable
   * and unchanged), stops the loop thread and joins the runtime's threads. Later asynchronous
   * calls fail CANCELLED; synchronous calls keep working. Idempotent. Must not be called from a
   * completion callback or a residency policy.
   */
  public void shutdown() {
    run(Native::sw_runtime_shutdown);
  }

  /**
   * A file descriptor that is readable while waiting-thread completions are ready: register it
   * with a selector and call {@link #processEvents()} when it fires. Owned by the runtime.
   *
   * @return the descriptor
   */
  public int eventFd() {
    return call(h -> {
      int[] out = new int[1];
      Native.sw_runtime_event_fd(h, out);
      return out[0];
    });
  }

  /**
   * Fires the waiting-thread callbacks owed for completed awaits on the calling thread and
   * drains the event fd. Non-blocking. (The futures of {@link AwaitResult#toFuture()} complete
   * from the loop thread and need no call to this.)
   *
   * @return how many callbacks fired
   */
  public long processEvents() {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_runtime_process_events(h, out);
      return out[0];
    });
  }

  /**
   * Closes this runtime reference. Idempotent; see {@link NativeHandle#close()}. Releasing the
   * last reference of the runtime shuts it down.
   */
  @Override
  public void close() {
    super.close();
  }
}
