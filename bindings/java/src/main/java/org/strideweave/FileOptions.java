package org.strideweave;

/**
 * How a file carrier does its I/O (the options of {@code sw_file_carrier_desc_t}): what
 * {@link Carrier#file(StrideWeaveRuntime, DType, long, java.nio.file.Path, FileOptions)} and the
 * model-file openers ({@link Carrier#openNpy(StrideWeaveRuntime, java.nio.file.Path, FileOptions)},
 * {@code openSafetensors}, {@link Carrier#openRaw(StrideWeaveRuntime, java.nio.file.Path,
 * Carrier.RawSpec, FileOptions)}) take. Immutable; made with {@link #builder()}:
 *
 * <pre>{@code
 * FileOptions o = FileOptions.builder().directIo(true).chunkBytes(1 << 20).build();
 * }</pre>
 *
 * @param directIo read and write through O_DIRECT where the file system allows it (buffered
 *     where it refuses it)
 * @param chunkBytes bytes per read or write request; 0 for 4 MiB, or with direct I/O the best
 *     measured for the file's device where one is known ({@link Carrier#fileIo()} says which)
 * @param requestsInFlight requests in flight per transfer; 0 for 4, or as {@code chunkBytes}
 */
public record FileOptions(boolean directIo, long chunkBytes, int requestsInFlight) {
  /** The defaults: buffered I/O, 4 MiB requests, 4 in flight. */
  public static final FileOptions DEFAULTS = new FileOptions(false, 0, 0);

  /**
   * A builder starting from {@link #DEFAULTS}.
   *
   * @return the builder
   */
  public static Builder builder() {
    return new Builder();
  }

  /** Builds a {@link FileOptions}; every setter returns the builder. */
  public static final class Builder {
    private boolean directIo;
    private long chunkBytes;
    private int requestsInFlight;

    private Builder() {}

    /**
     * Whether to use O_DIRECT where the file system allows it (default false).
     *
     * @param directIo the flag
     * @return this builder
     */
    public Builder directIo(boolean directIo) {
      this.directIo = directIo;
      return this;
    }

    /**
     * Bytes per read or write request (default 0: 4 MiB).
     *
     * @param chunkBytes the bytes
     * @return this builder
     */
    public Builder chunkBytes(long chunkBytes) {
      this.chunkBytes = chunkBytes;
      return this;
    }

    /**
     * Requests in flight per transfer (default 0: 4).
     *
     * @param requestsInFlight the count
     * @return this builder
     */
    public Builder requestsInFlight(int requestsInFlight) {
      this.requestsInFlight = requestsInFlight;
      return this;
    }

    /**
     * The options.
     *
     * @return the options
     */
    public FileOptions build() {
      return new FileOptions(directIo, chunkBytes, requestsInFlight);
    }
  }
}
