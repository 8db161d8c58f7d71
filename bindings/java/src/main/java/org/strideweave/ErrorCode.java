package org.strideweave;

/**
 * The library's stable error codes ({@code sw_error_code_t}); the numbers never change. Each
 * maps onto one exception class ({@link #exceptionClass()}).
 */
public enum ErrorCode {
  /** Not an error. */
  OK(0),
  /** Wrong handle kind, dtype or class: {@link TypeMismatchException}. */
  TYPE(1),
  /** Bad shape, size, range or option: {@link InvalidValueException}. */
  VALUE(2),
  /** Released, pending, owned, pinned, conflict, modified in place: {@link InvalidStateException}. */
  STATE(3),
  /** A valid request this build cannot do: {@link UnsupportedFeatureException}. */
  UNSUPPORTED(4),
  /** Coordinate, slot or axis out of range: {@link IndexOutOfRangeException}. */
  INDEX(5),
  /** A native allocation failed: {@link NativeOutOfMemoryException}. */
  OUT_OF_MEMORY(6),
  /** File or system I/O failed: {@link StorageIOException}. */
  IO(7),
  /** Stored data failed its checksum or decode: {@link DataCorruptException}. */
  DATA_CORRUPT(8),
  /** The device was lost: {@link DeviceLostException}. */
  DEVICE_LOST(9),
  /** A handle from an older device generation: {@link StaleHandleException}. */
  STALE_HANDLE(10),
  /** A wait expired: {@link WaitTimeoutException}. */
  TIMEOUT(11),
  /** Work cancelled, e.g. by shutdown: {@link CancelledException}. */
  CANCELLED(12),
  /** A bug in StrideWeave: {@link InternalErrorException}. */
  INTERNAL(13);

  private final int value;

  ErrorCode(int value) {
    this.value = value;
  }

  /**
   * The code's number in the C ABI.
   *
   * @return the number
   */
  public int value() {
    return value;
  }

  /**
   * The code of a number; {@link #INTERNAL} for a number this binding does not know.
   *
   * @param value the number
   * @return the code
   */
  public static ErrorCode of(int value) {
    for (ErrorCode c : values()) {
      if (c.value == value) {
        return c;
      }
    }
    return INTERNAL;
  }

  /**
   * The exception class thrown for this code.
   *
   * @return the class; {@code null} for {@link #OK}
   */
  public Class<? extends RuntimeException> exceptionClass() {
    switch (this) {
      case OK: return null;
      case TYPE: return TypeMismatchException.class;
      case VALUE: return InvalidValueException.class;
      case STATE: return InvalidStateException.class;
      case UNSUPPORTED: return UnsupportedFeatureException.class;
      case INDEX: return IndexOutOfRangeException.class;
      case OUT_OF_MEMORY: return NativeOutOfMemoryException.class;
      case IO: return StorageIOException.class;
      case DATA_CORRUPT: return DataCorruptException.class;
      case DEVICE_LOST: return DeviceLostException.class;
      case STALE_HANDLE: return StaleHandleException.class;
      case TIMEOUT: return WaitTimeoutException.class;
      case CANCELLED: return CancelledException.class;
      default: return InternalErrorException.class;
    }
  }
}
