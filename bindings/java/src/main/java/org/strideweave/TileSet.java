package org.strideweave;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.StringJoiner;

/**
 * An immutable finite set of full-rank tile coordinates ({@code sw_tile_set_t}), ordered first
 * coordinate fastest (sorted by reversed tuple). Need not be a Cartesian product. Value
 * equality; thread-safe. The empty set is rank-agnostic.
 *
 * <pre>{@code
 * TileSet cache = TileSet.of(new long[] {0, 0}, new long[] {0, 1}, new long[] {1, 0});
 * }</pre>
 */
public final class TileSet {
  private static final TileSet EMPTY = new TileSet(0, new long[0]);

  private final int rank;
  private final long[] flat; // count * rank, in the set's order

  private TileSet(int rank, long[] flat) {
    this.rank = rank;
    this.flat = flat;
  }

  /**
   * The set of {@code coordinates}, in any order.
   *
   * @param coordinates full-rank tile coordinates
   * @return the set
   * @throws InvalidValueException for mixed ranks, a negative entry or a duplicate
   */
  public static TileSet of(long[]... coordinates) {
    if (coordinates.length == 0) {
      return EMPTY;
    }
    int r = coordinates[0].length;
    long[] values = new long[coordinates.length * r];
    for (int i = 0; i < coordinates.length; ++i) {
      if (coordinates[i].length != r) {
        throw new InvalidValueException("tile coordinates of ranks " + r + " and " + coordinates[i].length
            + " in one TileSet");
      }
      System.arraycopy(coordinates[i], 0, values, i * r, r);
    }
    long h = Native.tile_set_create(values, r);
    try {
      return fromHandle(h);
    } finally {
      Native.sw_tile_set_release(h);
    }
  }

  /**
   * The set of {@code coordinates}.
   *
   * @param coordinates full-rank tile coordinates
   * @return the set
   */
  public static TileSet of(Collection<long[]> coordinates) {
    return of(coordinates.toArray(new long[0][]));
  }

  /**
   * The empty set.
   *
   * @return the empty set
   */
  public static TileSet empty() {
    return EMPTY;
  }

  /** The value of a borrowed native set. */
  static TileSet fromHandle(long handle) {
    long[] rank = new long[1];
    Native.sw_tile_set_rank(handle, rank);
    long[] flat = Native.tile_set_coordinates(handle);
    return flat.length == 0 ? EMPTY : new TileSet((int) rank[0], flat);
  }

  /** A new native set (the caller releases it). */
  long newHandle() {
    return Native.tile_set_create(flat, rank);
  }

  /**
   * The number of coordinates.
   *
   * @return the count
   */
  public int size() {
    return rank == 0 ? 0 : flat.length / rank;
  }

  /**
   * Whether the set is empty.
   *
   * @return true when empty
   */
  public boolean isEmpty() {
    return flat.length == 0;
  }

  /**
   * The rank of the coordinates (0 for the empty set).
   *
   * @return the rank
   */
  public int rank() {
    return rank;
  }

  /**
   * Coordinate {@code i} in the set's order.
   *
   * @param i an index below {@link #size()}
   * @return a copy of the coordinate
   */
  public long[] get(int i) {
    if (i < 0 || i >= size()) {
      throw new IndexOutOfRangeException("index " + i + " of a TileSet of " + size());
    }
    return Arrays.copyOfRange(flat, i * rank, (i + 1) * rank);
  }

  /**
   * Every coordinate, in the set's order.
   *
   * @return copies of the coordinates
   */
  public List<long[]> coordinates() {
    List<long[]> out = new ArrayList<>(size());
    for (int i = 0; i < size(); ++i) {
      out.add(get(i));
    }
    return out;
  }

  /**
   * Whether the set holds {@code coord}.
   *
   * @param coord a coordinate
   * @return true when present
   */
  public boolean contains(long... coord) {
    if (coord.length != rank) {
      return false;
    }
    for (int i = 0; i < size(); ++i) {
      if (Arrays.equals(flat, i * rank, (i + 1) * rank, coord, 0, rank)) {
        return true;
      }
    }
    return false;
  }

  /**
   * The union of two sets.
   *
   * @param other another set of the same rank (or empty)
   * @return the union
   */
  public TileSet union(TileSet other) {
    if (other.isEmpty()) {
      return this;
    }
    if (isEmpty()) {
      return other;
    }
    List<long[]> all = coordinates();
    for (long[] c : other.coordinates()) {
      if (!contains(c)) {
        all.add(c);
      }
    }
    return of(all);
  }

  /** Value equality: the same coordinates. */
  @Override
  public boolean equals(Object o) {
    return o instanceof TileSet && ((TileSet) o).rank == rank && Arrays.equals(((TileSet) o).flat, flat);
  }

  @Override
  public int hashCode() {
    return 31 * rank + Arrays.hashCode(flat);
  }

  /** Such as {@code TileSet[(0, 1), (2, 1)]}. */
  @Override
  public String toString() {
    StringJoiner j = new StringJoiner(", ", "TileSet[", "]");
    for (int i = 0; i < size(); ++i) {
      j.add(tuple(flat, i * rank, rank));
    }
    return j.toString();
  }

  static String tuple(long[] values, int from, int n) {
    StringJoiner j = new StringJoiner(", ", "(", n == 1 ? ",)" : ")");
    for (int k = 0; k < n; ++k) {
      j.add(Long.toString(values[from + k]));
    }
    return j.toString();
  }
}
