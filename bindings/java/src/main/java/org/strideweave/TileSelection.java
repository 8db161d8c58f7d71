package org.strideweave;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.StringJoiner;

/**
 * An immutable ordered Cartesian product of per-axis tile coordinates
 * ({@code sw_tile_selection_t}): the tiles one projection or scatter gathers into one compact
 * tensor. Each axis keeps the caller's order; {@link #coordinates()} enumerates the product
 * first mode fastest. Value equality; thread-safe.
 *
 * <pre>{@code
 * TileSelection experts = TileSelection.of(new long[] {2, 7, 19}, new long[] {0}, new long[] {0});
 * }</pre>
 */
public final class TileSelection {
  private final long[][] perAxis;

  private TileSelection(long[][] perAxis) {
    this.perAxis = perAxis;
  }

  /**
   * The selection of {@code perAxis[i]} on axis i.
   *
   * @param perAxis one non-empty array of coordinates per grid axis
   * @return the selection
   * @throws InvalidValueException for no axes, an empty axis, a duplicate within an axis, a
   *     negative coordinate, or more than {@code SW_MAX_TILES} tiles
   */
  public static TileSelection of(long[]... perAxis) {
    long[][] copy = new long[perAxis.length][];
    for (int i = 0; i < perAxis.length; ++i) {
      copy[i] = perAxis[i].clone();
    }
    long h = Native.tile_selection_create(copy);
    Native.sw_tile_selection_release(h);
    return new TileSelection(copy);
  }

  /** A new native selection (the caller releases it). */
  long newHandle() {
    return Native.tile_selection_create(perAxis);
  }

  /**
   * The number of axes.
   *
   * @return the rank
   */
  public int rank() {
    return perAxis.length;
  }

  /**
   * The coordinates of one axis, in the caller's order.
   *
   * @param axis an axis
   * @return a copy of its coordinates
   */
  public long[] axis(int axis) {
    return perAxis[axis].clone();
  }

  /**
   * The coordinates of every axis.
   *
   * @return copies, one array per axis
   */
  public long[][] perAxis() {
    long[][] out = new long[perAxis.length][];
    for (int i = 0; i < perAxis.length; ++i) {
      out[i] = perAxis[i].clone();
    }
    return out;
  }

  /**
   * The selected count per axis: the compact tensor's grid.
   *
   * @return the compact grid shape
   */
  public long[] compactGridShape() {
    long[] out = new long[perAxis.length];
    for (int i = 0; i < perAxis.length; ++i) {
      out[i] = perAxis[i].length;
    }
    return out;
  }

  /**
   * The number of selected tiles.
   *
   * @return the product of the per-axis counts
   */
  public long count() {
    long n = 1;
    for (long[] a : perAxis) {
      n *= a.length;
    }
    return n;
  }

  /**
   * Every selected source coordinate, first mode fastest (compact coordinate c selects
   * {@code (perAxis[0][c[0]], perAxis[1][c[1]], ...)}).
   *
   * @return the coordinates
   */
  public List<long[]> coordinates() {
    int n = Math.toIntExact(count());
    List<long[]> out = new ArrayList<>(n);
    for (int k = 0; k < n; ++k) {
      long[] c = new long[perAxis.length];
      int rest = k;
      for (int i = 0; i < perAxis.length; ++i) {
        c[i] = perAxis[i][rest % perAxis[i].length];
        rest /= perAxis[i].length;
      }
      out.add(c);
    }
    return out;
  }

  /**
   * The selected tiles as a TileSet.
   *
   * @return the set
   */
  public TileSet tileSet() {
    return TileSet.of(coordinates());
  }

  /** Value equality: the same axes in the same order. */
  @Override
  public boolean equals(Object o) {
    return o instanceof TileSelection && Arrays.deepEquals(((TileSelection) o).perAxis, perAxis);
  }

  @Override
  public int hashCode() {
    return Arrays.deepHashCode(perAxis);
  }

  /** Such as {@code TileSelection[(2, 7, 19), (0,)]}. */
  @Override
  public String toString() {
    StringJoiner j = new StringJoiner(", ", "TileSelection[", "]");
    for (long[] a : perAxis) {
      j.add(TileSet.tuple(a, 0, a.length));
    }
    return j.toString();
  }
}
