package org.strideweave;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
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
 * @param replicas read replicas: from an endpoint (one of {@code endpoints}) to the servers
 *     holding a copy of its blocks, such as a redis-server started with {@code replicaof} that
 *     endpoint; reads go to a block's endpoint first and, when it cannot be reached or its
 *     connection is lost mid-read, to its replicas in order. A replica can lag its endpoint, so
 *     replicas serve only {@link Carrier#openRemote} with {@code readOnly}
 *     ({@link InvalidValueException} otherwise); empty for none
 * @param lease the time to live of the namespace's writer lease (a whole number of milliseconds,
 *     rounded up), or null for 15 s. A carrier that can write (made by {@link Carrier#remote}, or
 *     opened without {@code readOnly}) holds the lease, renewed while it lives: a second writer is
 *     refused ({@link InvalidStateException} naming the holder)
 */
public record RemoteOptions(List<String> endpoints, String namespace, String user, Path passwordFile,
                            boolean allowPlaintext, boolean readOnly, long blockElements, long placementSeed,
                            Duration deadline, long chunkBytes, int requestsInFlight, boolean persistent,
                            Map<String, List<String>> replicas, Duration lease) {
  /**
   * Options; the endpoints and the replicas are copied (null replicas: none).
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
   * @param replicas the read replicas of each endpoint (opening read-only only), or null
   * @param lease the writer lease's time to live, or null
   */
  public RemoteOptions {
    endpoints = List.copyOf(Objects.requireNonNull(endpoints, "endpoints"));
    Objects.requireNonNull(namespace, "namespace");
    replicas = copy(replicas);
  }

  /**
   * Options without replicas and with the default lease (the fields of the first remote
   * carriers); the endpoints are copied.
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
  public RemoteOptions(List<String> endpoints, String namespace, String user, Path passwordFile,
                       boolean allowPlaintext, boolean readOnly, long blockElements, long placementSeed,
                       Duration deadline, long chunkBytes, int requestsInFlight, boolean persistent) {
    this(endpoints, namespace, user, passwordFile, allowPlaintext, readOnly, blockElements, placementSeed, deadline,
        chunkBytes, requestsInFlight, persistent, Map.of(), null);
  }

  /** An unmodifiable copy of a replica map, in its iteration order; null is empty. */
  private static Map<String, List<String>> copy(Map<String, List<String>> replicas) {
    if (replicas == null || replicas.isEmpty()) {
      return Map.of();
    }
    Map<String, List<String>> out = new LinkedHashMap<>();
    replicas.forEach((endpoint, servers) -> out.put(Objects.requireNonNull(endpoint, "a replicas key"),
        List.copyOf(Objects.requireNonNull(servers, "the replicas of " + endpoint))));
    return Collections.unmodifiableMap(out);
  }

  /**
   * A builder of options over {@code endpoints} and {@code namespace}, every other field at its
   * default (no AUTH, loopback or unix sockets only, the library's block size, deadline, chunk
   * size, requests in flight and lease, placement seed 0, writable, no replicas, deleted with the
   * carrier).
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
    return millis(deadline, "deadline");
  }

  /** The lease in milliseconds as the C descriptor takes it, as {@link #deadlineMillis()}. */
  long leaseMillis() {
    return millis(lease, "lease");
  }

  private static long millis(Duration d, String what) {
    if (d == null) {
      return 0;
    }
    if (d.isNegative() || d.isZero()) {
      throw new InvalidValueException(what + " " + d + " is not positive");
    }
    long ms;
    try {
      ms = d.plusNanos(999_999).toMillis();
    } catch (ArithmeticException e) {
      ms = Long.MAX_VALUE;
    }
    if (ms > 0xFFFF_FFFFL) {
      throw new InvalidValueException(what + " " + d + " exceeds 4294967295 ms");
    }
    return ms;
  }

  /**
   * The replicas' servers as the C descriptor takes them: every endpoint's in order, the
   * endpoints in the map's order. {@link #replicaOf()} gives the endpoint each one copies.
   */
  List<String> replicaServers() {
    List<String> out = new ArrayList<>();
    replicas.values().forEach(out::addAll);
    return out;
  }

  /**
   * Beside each of {@link #replicaServers()}, the index in {@link #endpoints()} of the endpoint
   * it copies.
   *
   * @throws InvalidValueException when a key of {@link #replicas()} is not one of the endpoints
   */
  long[] replicaOf() {
    long[] out = new long[replicas.values().stream().mapToInt(List::size).sum()];
    int at = 0;
    for (Map.Entry<String, List<String>> e : replicas.entrySet()) {
      int index = endpoints.indexOf(e.getKey());
      if (index < 0) {
        throw new InvalidValueException("replicas: '" + e.getKey() + "' is not one of the endpoints " + endpoints);
      }
      for (int i = 0; i < e.getValue().size(); ++i) {
        out[at++] = index;
      }
    }
    return out;
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
    private Map<String, List<String>> replicas = Map.of();
    private Duration lease;

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
     * The read replicas of the endpoints (default empty: none; {@link Carrier#openRemote} with
     * {@link #readOnly(boolean)} only): from an endpoint to the servers holding a copy of its
     * blocks, tried in order when the endpoint cannot serve a read. Copied.
     *
     * @param replicas the replicas of each endpoint, or null for none
     * @return this builder
     */
    public Builder replicas(Map<String, List<String>> replicas) {
      this.replicas = copy(replicas);
      return this;
    }

    /**
     * The time to live of the namespace's writer lease, which a carrier that can write holds and
     * renews while it lives (default null: 15 s).
     *
     * @param lease the time to live, or null
     * @return this builder
     */
    public Builder lease(Duration lease) {
      this.lease = lease;
      return this;
    }

    /**
     * The options.
     *
     * @return the options
     */
    public RemoteOptions build() {
      return new RemoteOptions(endpoints, namespace, user, passwordFile, allowPlaintext, readOnly, blockElements,
          placementSeed, deadline, chunkBytes, requestsInFlight, persistent, replicas, lease);
    }
  }
}
