package org.strideweave;

/** A projection ({@code SW_AWAIT_PROJECTION}): its result is the compact tensor of the selected tiles, in selection order. */
public final class AwaitProjection extends AwaitResult<Tensor> {
  AwaitProjection(long handle) {
    super(handle);
  }

  @Override
  Tensor wrap(long tensor) {
    return tensor == 0 ? null : Tensor.adopt(tensor);
  }
}
