package org.strideweave;

/** Why a request needs tiles ({@code sw_residency_purpose_t}), as a policy is told. */
public enum Purpose {
  /** A direct op on the full tensor. */
  OPERATION(1, "operation"),
  /** A projection. */
  PROJECTION(2, "projection"),
  /** A scatter or an in-place update. */
  SCATTER(3, "scatter"),
  /** Backward through saved tiles. */
  BACKWARD(4, "backward");

  private final int value;
  private final String label;

  Purpose(int value, String label) {
    this.value = value;
    this.label = label;
  }

  /**
   * The purpose's number in the C ABI.
   *
   * @return the number
   */
  public int value() {
    return value;
  }

  /**
   * The library's name ({@code "projection"}, ...).
   *
   * @return the name
   */
  public String label() {
    return label;
  }

  static Purpose of(int value) {
    for (Purpose p : values()) {
      if (p.value == value) {
        return p;
      }
    }
    throw new InternalErrorException("unknown residency purpose " + value);
  }
}
