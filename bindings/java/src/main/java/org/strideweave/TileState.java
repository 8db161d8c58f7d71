package org.strideweave;

/**
 * The residency metadata of one tile ({@code sw_tile_state_t}).
 *
 * @param location where the tile's value lives
 * @param valid whether the tile holds a readable value
 * @param dirty whether its primary value is not yet written to the secondary tier
 */
public record TileState(Location location, boolean valid, boolean dirty) {
  /** Where a tile lives ({@code sw_tile_location_t}). */
  public enum Location {
    /** In the primary (compute) tier. */
    PRIMARY,
    /** In the secondary (storage) tier only. */
    SECONDARY,
    /** A valid implicit zero (untouched gradient tiles). */
    IMPLICIT,
    /** Not readable until initialised. */
    INVALID
  }
}
