package org.strideweave;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * A view over a device allocation ({@code sw_device_view_t}): the descriptor handed to other
 * frameworks. Thread-safe.
 */
public final class DeviceView extends NativeHandle {
  DeviceView(long handle) {
    super(handle, NativeJNI::sw_device_view_release, "device view");
  }

  /**
   * The view's description.
   *
   * @return the description
   * @throws StaleHandleException after the device restarted
   */
  public Info describe() {
    long[] v = call(Native::device_view_describe);
    int rank = (int) v[2];
    long[] shape = new long[rank];
    long[] strides = new long[rank];
    System.arraycopy(v, 3, shape, 0, rank);
    System.arraycopy(v, 3 + rank, strides, 0, rank);
    return new Info(v[0], DType.of((int) v[1]), shape, strides);
  }

  /**
   * The viewed memory as a direct buffer without a copy, when it is host visible. Valid while
   * this view is open and the device has not restarted.
   *
   * @return the buffer, native byte order
   * @throws UnsupportedFeatureException when the memory is not host visible
   */
  public ByteBuffer hostBuffer() {
    Info info = describe();
    if (info.pointer() == 0) {
      throw new UnsupportedFeatureException("the view's memory is not host visible");
    }
    long bytes = info.dtype().size();
    for (int i = 0; i < info.shape().length; ++i) {
      bytes = Math.max(bytes, info.stridesBytes()[i] * info.shape()[i]);
    }
    return ((ByteBuffer) Native.direct_buffer(info.pointer(), bytes)).order(ByteOrder.nativeOrder());
  }

  /**
   * A view's description ({@code sw_view_info_t}); strides are first mode fastest, in bytes.
   *
   * @param pointer the host address of element 0, or 0 when not host visible
   * @param dtype the element type
   * @param shape the extents
   * @param stridesBytes the strides in bytes
   */
  public record Info(long pointer, DType dtype, long[] shape, long[] stridesBytes) {}
}
