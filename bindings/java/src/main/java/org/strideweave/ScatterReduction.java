package org.strideweave;

/** How a scatter or update combines the compact values ({@code sw_scatter_reduction_t}). */
public enum ScatterReduction {
  /** The compact values replace the selected tiles'. */
  REPLACE(1),
  /** The compact values are added to the selected tiles' (an optimiser step). */
  ADD(2);

  private final int value;

  ScatterReduction(int value) {
    this.value = value;
  }

  /**
   * The reduction's number in the C ABI.
   *
   * @return the number
   */
  public int value() {
    return value;
  }
}
