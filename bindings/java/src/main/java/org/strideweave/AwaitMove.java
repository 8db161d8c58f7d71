package org.strideweave;

/** A move, a scatter or an in-place update ({@code SW_AWAIT_MOVE}): its result is the moved tensor or the scatter's full result; an update has none (null). */
public final class AwaitMove extends AwaitResult<Tensor> {
  AwaitMove(long handle) {
    super(handle);
  }

  @Override
  Tensor wrap(long tensor) {
    return tensor == 0 ? null : Tensor.adopt(tensor);
  }
}
