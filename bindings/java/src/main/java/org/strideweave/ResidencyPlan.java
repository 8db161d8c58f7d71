package org.strideweave;

import java.util.Objects;

/**
 * One immutable residency decision ({@code sw_residency_plan_t}): three disjoint TileSets of
 * tiles to promote, to retain and to evict. Value equality; thread-safe.
 */
public final class ResidencyPlan {
  private final TileSet promote;
  private final TileSet retain;
  private final TileSet evict;

  private ResidencyPlan(TileSet promote, TileSet retain, TileSet evict) {
    this.promote = promote;
    this.retain = retain;
    this.evict = evict;
  }

  /**
   * A plan; null fields are empty sets.
   *
   * @param promote tiles to make primary before the request consumes them
   * @param retain primary tiles to keep until the request is terminal
   * @param evict tiles to evict once the request no longer needs them
   * @return the plan
   * @throws InvalidValueException when a tile occurs in two fields or the ranks disagree
   */
  public static ResidencyPlan of(TileSet promote, TileSet retain, TileSet evict) {
    ResidencyPlan p = new ResidencyPlan(orEmpty(promote), orEmpty(retain), orEmpty(evict));
    Native.sw_residency_plan_release(p.newHandle()); // the library's checks
    return p;
  }

  /**
   * A plan that only promotes.
   *
   * @param promote tiles to make primary
   * @return the plan
   */
  public static ResidencyPlan promote(TileSet promote) {
    return of(promote, null, null);
  }

  private static TileSet orEmpty(TileSet s) {
    return s == null ? TileSet.empty() : s;
  }

  /** The value of a borrowed native plan. */
  static ResidencyPlan fromHandle(long plan) {
    return new ResidencyPlan(field(plan, 0), field(plan, 1), field(plan, 2));
  }

  private static TileSet field(long plan, int which) {
    long[] out = new long[1];
    if (which == 0) {
      Native.sw_residency_plan_promote(plan, out);
    } else if (which == 1) {
      Native.sw_residency_plan_retain_set(plan, out);
    } else {
      Native.sw_residency_plan_evict(plan, out);
    }
    try {
      return TileSet.fromHandle(out[0]);
    } finally {
      Native.sw_tile_set_release(out[0]);
    }
  }

  /** A new native plan (the caller, or the library it is handed to, releases it). */
  long newHandle() {
    long p = promote.newHandle();
    long r = 0;
    long e = 0;
    try {
      r = retain.newHandle();
      e = evict.newHandle();
      long[] out = new long[1];
      Native.sw_residency_plan_create(p, r, e, out);
      return out[0];
    } finally {
      Native.sw_tile_set_release(p);
      Native.sw_tile_set_release(r);
      Native.sw_tile_set_release(e);
    }
  }

  /**
   * Tiles to promote.
   *
   * @return the set
   */
  public TileSet promote() {
    return promote;
  }

  /**
   * Tiles to retain.
   *
   * @return the set
   */
  public TileSet retain() {
    return retain;
  }

  /**
   * Tiles to evict.
   *
   * @return the set
   */
  public TileSet evict() {
    return evict;
  }

  /** Value equality of the three sets. */
  @Override
  public boolean equals(Object o) {
    if (!(o instanceof ResidencyPlan)) {
      return false;
    }
    ResidencyPlan p = (ResidencyPlan) o;
    return p.promote.equals(promote) && p.retain.equals(retain) && p.evict.equals(evict);
  }

  @Override
  public int hashCode() {
    return Objects.hash(promote, retain, evict);
  }

  /** Such as {@code ResidencyPlan[promote=TileSet[(1,)], retain=TileSet[], evict=TileSet[]]}. */
  @Override
  public String toString() {
    return "ResidencyPlan[promote=" + promote + ", retain=" + retain + ", evict=" + evict + "]";
  }
}
