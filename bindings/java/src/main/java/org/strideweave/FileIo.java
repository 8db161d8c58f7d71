package org.strideweave;

/**
 * How a File carrier moves its bytes ({@code sw_file_carrier_io_t}), as
 * {@link Carrier#fileIo()} reports it: the chunk size and requests in flight its transfers use,
 * whether it reads through O_DIRECT, and where the settings came from. Options left 0 in
 * {@link FileOptions} take the device profile's values: for a carrier reading through O_DIRECT,
 * the best pair measured for its device (once, by a short probe when a large enough read-only
 * file is opened, then kept in a cache file); otherwise 4 MiB and 4. Options set override it.
 *
 * @param chunkBytes bytes per request its transfers use
 * @param requestsInFlight requests in flight per transfer
 * @param directIo whether every file of the carrier reads through O_DIRECT
 * @param source where the device profile came from
 * @param device the {@code st_dev} of the carrier's (first) file
 * @param deviceReadBytesPerSecond the profile's measured read rate; 0 when not measured
 */
public record FileIo(long chunkBytes, int requestsInFlight, boolean directIo, Source source, long device,
                     double deviceReadBytesPerSecond) {
  /** Where a file carrier's device profile came from ({@code sw_io_profile_source_t}). */
  public enum Source {
    /** No measure of the device: the defaults. */
    DEFAULT,
    /** Measured by this process when the carrier opened. */
    PROBED,
    /** Measured earlier: by this process, or read from the cache file. */
    CACHED
  }
}
