package org.strideweave;

import java.time.Duration;

/**
 * One backend's memory seen through the device bridge ({@code sw_device_t}): host memory, the
 * fake backend that tests observe, or a Vulkan device. Allocations, copies with exact byte
 * ranges, copy events, and views. A device has a generation, 1 at creation and bumped by every
 * {@link #restart()}; each allocation, event and view belongs to its generation and fails with
 * {@link StaleHandleException} once the generation moves on. Thread-safe.
 */
public final class Device extends NativeHandle {
  private Device(long handle) {
    super(handle, NativeJNI::sw_device_release, "device");
  }

  /** Device backends ({@code sw_device_kind_t}). */
  public enum Kind {
    /** Host memory; asynchronous copies complete on the loop thread. */
    HOST,
    /** The fake backend: logs every call, fails one armed call, completes copies on request. */
    FAKE,
    /** A Vulkan device. */
    VULKAN
  }

  /**
   * Host memory behind the bridge.
   *
   * @param runtime the runtime
   * @return the device
   */
  public static Device host(StrideWeaveRuntime runtime) {
    return runtime.call(r -> {
      long[] out = new long[1];
      Native.sw_device_create_host(r, out);
      return new Device(out[0]);
    });
  }

  /**
   * The fake backend, whose asynchronous copies happen only when a test completes them.
   *
   * @param runtime the runtime
   * @return the device
   */
  public static Device fake(StrideWeaveRuntime runtime) {
    return runtime.call(r -> new Device(Native.device_create_fake(r)));
  }

  /**
   * A Vulkan device the library creates on the first physical device.
   *
   * @param runtime the runtime
   * @return the device
   * @throws UnsupportedFeatureException without Vulkan in the build or a driver on the machine
   */
  public static Device vulkan(StrideWeaveRuntime runtime) {
    return runtime.call(r -> new Device(Native.device_create_vulkan(r)));
  }

  /**
   * The backend.
   *
   * @return the kind
   */
  public Kind kind() {
    return call(h -> {
      int[] out = new int[1];
      Native.sw_device_kind(h, out);
      return Kind.values()[out[0] - 1];
    });
  }

  /**
   * The current generation.
   *
   * @return the generation
   */
  public long generation() {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_device_generation(h, out);
      return out[0];
    });
  }

  /** Abandons every pending copy, frees every allocation and bumps the generation. */
  public void restart() {
    run(Native::sw_device_restart);
  }

  /**
   * Allocates {@code extentBytes} for an object of {@code spec}.
   *
   * @param spec what the allocation holds
   * @param extentBytes its size
   * @return the allocation
   * @throws InvalidValueException for extent 0, below the spec's element bytes or above its
   *     maximum, or an alignment that is not a power of two
   * @throws NativeOutOfMemoryException when the backend fails
   */
  public DeviceAllocation allocate(ObjectSpec spec, long extentBytes) {
    return call(h -> new DeviceAllocation(Native.device_alloc(h, spec.dtype().value(), spec.shape(),
        spec.maxExtentBytes(), spec.alignment(), extentBytes)));
  }

  /**
   * Whether a copy's host bytes may be reused and whether it completed; non-blocking.
   *
   * @param event the copy's event
   * @return the status
   * @throws StaleHandleException for an event of an older generation
   * @throws StorageIOException when the copy failed
   */
  public CopyEvent.Status query(CopyEvent event) {
    int[] v = call(h -> Native.device_event_query(h, event.toArray()));
    return new CopyEvent.Status(v[0] != 0, v[1] != 0);
  }

  /**
   * Blocks until the copy is complete or {@code timeout} passes.
   *
   * @param event the copy's event
   * @param timeout the longest wait; null for no limit
   * @throws WaitTimeoutException when the time ran out
   */
  public void await(CopyEvent event, Duration timeout) {
    run(h -> Native.device_event_wait(h, event.toArray(), timeout == null ? -1 : timeout.toNanos()));
  }

  /**
   * What an allocation holds: the tensor view spec of its role ({@code sw_object_spec_t}).
   *
   * @param dtype the element type
   * @param shape the extents
   * @param maxExtentBytes the largest extent an allocation may have
   * @param alignment the start's alignment, a power of two; 0 for 16
   */
  public record ObjectSpec(DType dtype, long[] shape, long maxExtentBytes, long alignment) {
    /**
     * A spec; the shape is copied.
     *
     * @param dtype the element type
     * @param shape the extents
     * @param maxExtentBytes the largest extent an allocation may have
     * @param alignment the start's alignment, a power of two; 0 for 16
     */
    public ObjectSpec {
      shape = shape.clone();
    }

    /**
     * The extents.
     *
     * @return a copy
     */
    @Override
    public long[] shape() {
      return shape.clone();
    }
  }

}
