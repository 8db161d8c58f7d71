package org.strideweave;

/** Carrier kinds ({@code sw_carrier_kind_t}); the numbers are the C ABI's. */
public enum CarrierKind {
  /** Aligned host memory, the default compute carrier. */
  CPU(1),
  /** Plain host memory, a secondary tier (not a compute carrier). */
  HOST(2),
  /** A file, a secondary tier. */
  FILE(3),
  /** zstd-compressed host memory, a secondary tier. */
  ZSTD(4),
  /** Device-local memory of a Vulkan device, a compute carrier. */
  VULKAN(5),
  /** A {@link TiledEvictable}. */
  TILED(6),
  /** Blocks on Valkey or Redis servers, a secondary tier ({@link Carrier#remote}). */
  REMOTE(7);

  private final int value;

  CarrierKind(int value) {
    this.value = value;
  }

  /**
   * The kind's number in the C ABI.
   *
   * @return the number
   */
  public int value() {
    return value;
  }

  static CarrierKind of(int value) {
    for (CarrierKind k : values()) {
      if (k.value == value) {
        return k;
      }
    }
    throw new InternalErrorException("unknown carrier kind " + value);
  }
}
