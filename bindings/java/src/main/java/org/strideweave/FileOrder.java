package org.strideweave;

/**
 * How a model file lays out a tensor's elements ({@code sw_file_order_t}); the numbers are the C
 * ABI's.
 */
public enum FileOrder {
  /** C order, as NumPy, PyTorch and safetensors store tensors: the last index fastest. */
  ROW_MAJOR(1),
  /** Fortran order: the first index fastest, as StrideWeave's dense layouts. */
  FIRST_MODE_FASTEST(2);

  private final int value;

  FileOrder(int value) {
    this.value = value;
  }

  /**
   * The order's number in the C ABI.
   *
   * @return the number
   */
  public int value() {
    return value;
  }

  static FileOrder of(int value) {
    for (FileOrder o : values()) {
      if (o.value == value) {
        return o;
      }
    }
    throw new InternalErrorException("unknown file order " + value);
  }
}
