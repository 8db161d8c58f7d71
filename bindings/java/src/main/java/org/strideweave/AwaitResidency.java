package org.strideweave;

/** A promotion or eviction ({@code SW_AWAIT_RESIDENCY}); it has no result. */
public final class AwaitResidency extends AwaitResult<Void> {
  AwaitResidency(long handle) {
    super(handle);
  }

  @Override
  Void wrap(long tensor) {
    if (tensor != 0) {
      Native.sw_tensor_release(tensor);
    }
    return null;
  }
}
