package org.strideweave;

/**
 * The built-in LRU policy ({@code sw_lru_policy_t}): keeps at most a budget of tiles primary,
 * promotes what a request needs, evicts the least recently used tiles no request needs, and
 * promotes prefetch hints while the budget allows. Its view follows what requests committed.
 * Give it to {@link TiledEvictable#create}; the library then calls it natively, without a JNI
 * upcall. Thread-safe.
 */
public final class LruPolicy extends NativeHandle implements ResidencyPolicy {
  private LruPolicy(long handle) {
    super(handle, NativeJNI::sw_lru_policy_release, "LRU policy");
  }

  /**
   * An LRU policy.
   *
   * @param budgetTiles most tiles kept primary
   * @return the policy
   */
  public static LruPolicy create(long budgetTiles) {
    long[] out = new long[1];
    Native.sw_lru_policy_create(budgetTiles, out);
    return new LruPolicy(out[0]);
  }

  /**
   * Tiles expected soon (the next batch's experts): promoted by the next plan while the budget
   * allows. Replaces earlier hints.
   *
   * @param tiles the hint
   */
  public void hint(TileSet tiles) {
    run(h -> {
      long s = tiles.newHandle();
      try {
        Native.sw_lru_policy_hint(h, s);
      } finally {
        Native.sw_tile_set_release(s);
      }
    });
  }

  /**
   * Statistics of committed requests.
   *
   * @return the statistics
   */
  public LruStats stats() {
    long[] v = call(Native::lru_policy_stats);
    return new LruStats(v[0], v[1], v[2], v[3], v[4]);
  }

  /**
   * What the policy would plan for {@code required}, without committing anything: its view
   * and statistics stay as they were (for composing it into a policy of your own).
   */
  @Override
  public ResidencyPlan plan(TileSet required, Purpose purpose) {
    return call(h -> {
      long s = required.newHandle();
      long p = 0;
      try {
        p = Native.lru_policy_plan(h, s, purpose.value());
        return ResidencyPlan.fromHandle(p);
      } finally {
        Native.sw_tile_set_release(s);
        Native.sw_residency_plan_release(p);
      }
    });
  }

  /**
   * Statistics of an LRU policy ({@code sw_lru_stats_t}), of committed requests only.
   *
   * @param requests planned requests that committed
   * @param hits required tiles already primary when planned
   * @param misses required tiles it had to promote
   * @param promoted tiles planned for promotion (misses and prefetches)
   * @param evicted tiles its plans evicted
   */
  public record LruStats(long requests, long hits, long misses, long promoted, long evicted) {}
}
