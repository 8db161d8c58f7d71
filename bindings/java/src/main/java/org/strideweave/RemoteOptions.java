package org.strideweave;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Objects;

/**
 * Where a remote carrier's blocks live and how it reaches them (the fields of
 * {@code sw_remote_carrier_desc_t}): what {@link Carrier#remote} and {@link Carrier#openRemote}
 * take. Immutable; made with {@link #builder(List, String)}:
 *
 * <pre>{@code
 * RemoteOptions o = RemoteOptions.builder(List.of("unix:///run/strideweave/redis.sock"), "experts")
 *     .blockElements(4096)
 *     .build();
 * }</pre>
 *
 * <p>Every client of a namespace lists the same servers in the same order: block {@code i} is
 * placed by rendezvous hashing of {@code (placementSeed, i)} over the endpoints' positions. A
 * {@code redis://} host that is not a loopback address is refused ({@link InvalidValueException})
 * unless {@link #allowPlaintext()}: the connection would be unencrypted.
 *
 * @param endpoints the servers, {@code unix:///path/to.sock} or {@code redis://host[:port]} (port
 *     6379 by default); at least one
 * @param namespace the namespace of every key of the carrier; not empty, no spaces
 * @param user the ACL user for AUTH, or null for {@code default}; needs {@code passwordFile}
 * @param passwordFile a file whose first line is the password, or null for no AUTH; neither its
 *     group nor others may read or write it
 * @param allowPlaintext allow {@code redis://} to a host that is not a loopback address
 * @param readOnly {@link Carrier#openRemote} only: refuse writes ({@link InvalidStateException})
 * @param blockElements slots per block; when creating, 0 for 262144; when opening, 0 for the
 *     header's, any other value must be the header's
 * @param placementSeed seeds the placement of blocks on endpoints; when opening, must be the
 *     header's
 * @param deadline the deadline of every request (a whole number of milliseconds, rounded up), or
 *     null for 5 s
 * @param chunkBytes bytes per GETRANGE or SETRANGE command; 0 for 1 MiB
 * @param requestsInFlight commands in flight per transfer; 0 for 4
 * @param persistent {@link Carrier#remote} only: the namespace outlives the carrier (a seeded
 *     tier other clients open); by default disposing or releasing the carrier deletes its keys
 */
public record RemoteOptions(List<String> endpoints, String namespace, String user, Path passwordFile,
                            boolean allowPlaintext, boolean readOnly, long blockElements, long placementSeed,
                            Duration deadline, long chunkBytes, int requestsInFlight, boolean persistent) {
  /**
   * Options; the endpoints are copied.
   *
   * @param endpoints the servers
   * @param namespace the namespace
   * @param user the ACL user, or null
   * @param passwordFile the password file, or null
   * @param allowPlaintext allow unencrypted TCP to a host that is not a loopback address
   * @param readOnly refuse writes (opening only)
   * @param blockElements slots per block, or 0
   * @param placementSeed the placement seed
   * @param deadline the deadline of every request, or null
   * @param chunkBytes bytes per command, or 0
   * @param requestsInFlight commands in flight per transfer, or 0
   * @param persistent keep the namespace after the carrier (creating only)
   */
  public RemoteOptions {
    endpoints = List.copyOf(Objects.requireNonNull(endpoints, "endpoints"));
    Objects.requireNonNull(namespace, "namespace");
  }

  /**
   * A builder of options over {@code endpoints} and {@code namespace}, every other field at its
   * default (no AUTH, loopback or unix sockets only, the library's block size, deadline, chunk
   * size and requests in flight, placement seed 0, writable, deleted with the carrier).
   *
   * @param endpoints the servers, in the order every client of the namespace lists them
   * @param namespace the namespace of the carrier's keys
   * @return the builder
   */
  public static Builder builder(List<String> endpoints, String namespace) {
    return new Builder(endpoints, namespace);
  }

  /**
   * {@link #builder(List, String)} with one endpoint.
   *
   * @param endpoint the server
   * @param namespace the namespace of the carrier's keys
   * @return the builder
   */
  public static Builder builder(String endpoint, String namespace) {
    return new Builder(List.of(Objects.requireNonNull(endpoint, "endpoint")), namespace);
  }

  /**
   * The deadline in milliseconds as the C descriptor takes it: 0 for the default, else the
   * deadline rounded up to a whole millisecond.
   */
  long deadlineMillis() {
    if (deadline == null) {
      return 0;
    }
    if (deadline.isNegative() || deadline.isZero()) {
      throw new InvalidValueException("deadline " + deadline + " is not positive");
    }
    long ms;
    try {
      ms = deadline.plusNanos(999_999).toMillis();
    } catch (ArithmeticException e) {
      ms = Long.MAX_VALUE;
    }
    if (ms > 0xFFFF_FFFFL) {
      throw new InvalidValueException("deadline " + deadline + " exceeds 4294967295 ms");
    }
    return ms;
  }

  /** Builds a {@link RemoteOptions}; every setter returns the builder. */
  public static final class Builder {
    private final List<String> endpoints;
    private final String namespace;
    private String user;
    private Path passwordFile;
    private boolean allowPlaintext;
    private boolean readOnly;
    private long blockElements;
    private long placementSeed;
    private Duration deadline;
    private long chunkBytes;
    private int requestsInFlight;
    private boolean persistent;

    private Builder(List<String> endpoints, String namespace) {
      this.endpoints = List.copyOf(Objects.requireNonNull(endpoints, "endpoints"));
      this.namespace = Objects.requireNonNull(namespace, "namespace");
    }

    /**
     * The ACL user for AUTH (default null: {@code default}); needs a password file.
     *
     * @param user the user, or null
     * @return this builder
     */
    public Builder user(String user) {
      this.user = user;
      return this;
    }

    /**
     * The file whose first line is the password (default null: no AUTH). Neither its group nor
     * others may read or write it.
     *
     * @param passwordFile the file, or null
     * @return this builder
     */
    public Builder passwordFile(Path passwordFile) {
      this.passwordFile = passwordFile;
      return this;
    }

    /**
     * Whether {@code redis://} to a host that is not a loopback address is allowed (default
     * false): the connection is unencrypted.
     *
     * @param allowPlaintext the flag
     * @return this builder
     */
    public Builder allowPlaintext(boolean allowPlaintext) {
      this.allowPlaintext = allowPlaintext;
      return this;
    }

    /**
     * Whether an opened carrier refuses writes (default false; {@link Carrier#openRemote} only).
     *
     * @param readOnly the flag
     * @return this builder
     */
    public Builder readOnly(boolean readOnly) {
      this.readOnly = readOnly;
      return this;
    }

    /**
     * Slots per block (default 0: 262144 when creating, the header's when opening).
     *
     * @param blockElements the slots
     * @return this builder
     */
    public Builder blockElements(long blockElements) {
      this.blockElements = blockElements;
      return this;
    }

    /**
     * The seed of the placement of blocks on endpoints (default 0).
     *
     * @param placementSeed the seed
     * @return this builder
     */
    public Builder placementSeed(long placementSeed) {
      this.placementSeed = placementSeed;
      return this;
    }

    /**
     * The deadline of every request (default null: 5 s).
     *
     * @param deadline the deadline, or null
     * @return this builder
     */
    public Builder deadline(Duration deadline) {
      this.deadline = deadline;
      return this;
    }

    /**
     * Bytes per GETRANGE or SETRANGE command (default 0: 1 MiB).
     *
     * @param chunkBytes the bytes
     * @return this builder
     */
    public Builder chunkBytes(long chunkBytes) {
      this.chunkBytes = chunkBytes;
      return this;
    }

    /**
     * Commands in flight per transfer (default 0: 4).
     *
     * @param requestsInFlight the count
     * @return this builder
     */
    public Builder requestsInFlight(int requestsInFlight) {
      this.requestsInFlight = requestsInFlight;
      return this;
    }

    /**
     * Whether a created namespace outlives its carrier (default false: disposing or releasing
     * the carrier deletes its keys; {@link Carrier#remote} only).
     *
     * @param persistent the flag
     * @return this builder
     */
    public Builder persistent(boolean persistent) {
      this.persistent = persistent;
      return this;
    }

    /**
     * The options.
     *
     * @return the options
     */
    public RemoteOptions build() {
      return new RemoteOptions(endpoints, namespace, user, passwordFile, allowPlaintext, readOnly, blockElements,
          placementSeed, deadline, chunkBytes, requestsInFlight, persistent);
    }
  }
}
