package org.strideweave;

/**
 * A residency policy: decides, for each request of a {@link TiledEvictable}, which tiles to
 * promote, retain and evict. It can only optimise: required tiles are always made available and
 * evictions wait until no work needs the tile. Implement it, or use the built-in
 * {@link LruPolicy}.
 *
 * <p>{@link #plan} is called on the thread that makes the request (a Java thread), at most once
 * per request, before any transfer starts. An exception it throws fails that request before
 * any work, changing nothing, and reaches the caller of the request as the same exception
 * object (a checked exception arrives as the cause of the StrideWeave exception of its
 * kind); the library sees it as an error of the exception's kind (a {@link StrideWeaveError}'s
 * code, VALUE for IllegalArgumentException, STATE for IllegalStateException, ... INTERNAL
 * otherwise). Returning null fails the request with {@link TypeMismatchException}; a plan that
 * does not fit the grid with {@link InvalidValueException}.
 *
 * <p>{@link #outcome} may run on a thread of the library (attached to the JVM as a daemon
 * thread, detached when it ends); it must not block on the TiledEvictable's requests, and what
 * it throws goes to that thread's uncaught-exception handler.
 */
@FunctionalInterface
public interface ResidencyPolicy {
  /**
   * Plans one request.
   *
   * @param required the tiles the request must read or write
   * @param purpose what the request is
   * @return the plan; never null
   */
  ResidencyPlan plan(TileSet required, Purpose purpose);

  /**
   * Tells the policy how a plan ended: called exactly once for every plan {@link #plan}
   * returned. With {@code committed} true, {@code promoted} and {@code evicted} are the tiles
   * the request made primary and dropped; with false both are empty and nothing happened.
   * Also called with {@code plan} null and {@code committed} true for residency changes
   * outside planned requests (explicit promote or evict, writes). The default does nothing.
   *
   * @param plan the plan, or null
   * @param committed whether the request succeeded
   * @param promoted tiles made primary
   * @param evicted tiles dropped from primary
   */
  default void outcome(ResidencyPlan plan, boolean committed, TileSet promoted, TileSet evicted) {}
}
