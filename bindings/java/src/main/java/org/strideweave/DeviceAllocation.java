package org.strideweave;

import java.nio.ByteBuffer;

/**
 * A device allocation ({@code sw_device_allocation_t}). The last reference frees the memory
 * once nothing uses it; {@link #free()} frees it now. Thread-safe.
 */
public final class DeviceAllocation extends NativeHandle {
  DeviceAllocation(long handle) {
    super(handle, NativeJNI::sw_device_allocation_release, "device allocation");
  }

  /**
   * Frees the memory now (the handle stays until close).
   *
   * @throws InvalidStateException "in use" while compute, a pending copy or a live view uses
   *     it, or when already freed
   * @throws StaleHandleException for an older generation
   */
  public void free() {
    run(Native::sw_device_free);
  }

  /**
   * The allocation's size.
   *
   * @return its bytes
   */
  public long extentBytes() {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_device_allocation_extent(h, out);
      return out[0];
    });
  }

  /**
   * The generation it was made in.
   *
   * @return the generation
   */
  public long generation() {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_device_allocation_generation(h, out);
      return out[0];
    });
  }

  /** Marks compute work that uses the allocation: free is refused until {@link #endCompute()}. */
  public void beginCompute() {
    run(Native::sw_device_compute_begin);
  }

  /** Ends the compute work of {@link #beginCompute()}. */
  public void endCompute() {
    run(Native::sw_device_compute_end);
  }

  /**
   * Copies exactly the remaining bytes of a direct buffer to {@code [deviceOffset,
   * deviceOffset + remaining)}. Synchronous: on return the buffer may be reused. Asynchronous:
   * the buffer must stay untouched until the event reports the host bytes released (the event
   * keeps it reachable).
   *
   * @param deviceOffset where the bytes land
   * @param host a direct buffer
   * @param async whether to return before the copy completes
   * @return the copy's event
   * @throws IndexOutOfRangeException when the range passes the extent
   * @throws InvalidValueException for 0 bytes
   * @throws StorageIOException when the copy fails
   */
  public CopyEvent copyFromHost(long deviceOffset, ByteBuffer host, boolean async) {
    Buffers.checkDirect(host);
    long[] e = call(h -> Native.device_copy(h, true, deviceOffset, host, host.position(), host.remaining(), async));
    return new CopyEvent(e, async ? host : null);
  }

  /**
   * Copies exactly {@code [deviceOffset, deviceOffset + remaining)} into a direct buffer's
   * remaining bytes, valid on return (synchronous) or once the event reports complete.
   *
   * @param deviceOffset where the bytes come from
   * @param host a direct buffer
   * @param async whether to return before the copy completes
   * @return the copy's event
   */
  public CopyEvent copyToHost(long deviceOffset, ByteBuffer host, boolean async) {
    Buffers.checkDirect(host);
    long[] e = call(h -> Native.device_copy(h, false, deviceOffset, host, host.position(), host.remaining(), async));
    return new CopyEvent(e, async ? host : null);
  }

  /**
   * A view of the allocation as a dense first-mode-fastest tensor of the spec's dtype and
   * shape. A live view counts as a use of the allocation.
   *
   * @param dtype the spec's dtype
   * @param shape the spec's shape
   * @return the view
   * @throws TypeMismatchException when the dtype is not the spec's
   * @throws InvalidValueException when the shape is not the spec's
   * @throws StorageIOException when the backend cannot map the memory
   */
  public DeviceView view(DType dtype, long... shape) {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_device_view(h, dtype.value(), shape.clone(), out);
      return new DeviceView(out[0]);
    });
  }
}
