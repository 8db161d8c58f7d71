package org.strideweave;

/** Element types ({@code sw_dtype_t}); the numbers are the C ABI's, pinned forever. */
public enum DType {
  /** 32-bit IEEE float; Java {@code float[]}. */
  F32(1, 4, "f32"),
  /** 64-bit IEEE float; Java {@code double[]}. */
  F64(2, 8, "f64"),
  /** 16-bit IEEE float; its bits in a Java {@code short[]}. */
  F16(3, 2, "f16"),
  /** bfloat16; its bits in a Java {@code short[]}. */
  BF16(4, 2, "bf16"),
  /** 32-bit signed integer; Java {@code int[]}. */
  I32(5, 4, "i32"),
  /** 64-bit signed integer; Java {@code long[]}. */
  I64(6, 8, "i64"),
  /** 8-bit unsigned integer; Java {@code byte[]} (the same bits). */
  U8(7, 1, "u8"),
  /** Boolean, one byte (0 or 1); Java {@code byte[]}. */
  BOOL(8, 1, "bool"),
  /** GGUF Q8_0 blocks (32 elements in 34 bytes along the first mode); size 0: elements share their block. */
  Q8_0(9, 0, "q8_0"),
  /** GGUF Q4_0 blocks (32 elements in 18 bytes). */
  Q4_0(10, 0, "q4_0"),
  /** GGUF Q4_K blocks (256 elements in 144 bytes). */
  Q4_K(11, 0, "q4_k"),
  /** GGUF Q6_K blocks (256 elements in 210 bytes). */
  Q6_K(12, 0, "q6_k"),
  /** GGUF MXFP4 blocks (32 elements in 17 bytes). */
  MXFP4(13, 0, "mxfp4");

  private final int value;
  private final int size;
  private final String label;

  DType(int value, int size, String label) {
    this.value = value;
    this.size = size;
    this.label = label;
  }

  /**
   * The dtype's number in the C ABI.
   *
   * @return the number
   */
  public int value() {
    return value;
  }

  /**
   * Bytes per element (0 for a block-quantized dtype, whose elements share their block's bytes).
   *
   * @return the size
   */
  public int size() {
    return size;
  }

  /**
   * The library's name of the dtype ({@code "f32"}, {@code "bf16"}, ...).
   *
   * @return the name
   */
  public String label() {
    return label;
  }

  /**
   * Whether the dtype is a floating-point type (autograd takes these).
   *
   * @return true for f32, f64, f16 and bf16
   */
  public boolean isFloatingPoint() {
    return this == F32 || this == F64 || this == F16 || this == BF16;
  }

  /**
   * The dtype of a C ABI number.
   *
   * @param value the number
   * @return the dtype
   * @throws InvalidValueException for a number that is no dtype
   */
  public static DType of(int value) {
    for (DType d : values()) {
      if (d.value == value) {
        return d;
      }
    }
    throw new InvalidValueException("unknown dtype " + value);
  }
}
