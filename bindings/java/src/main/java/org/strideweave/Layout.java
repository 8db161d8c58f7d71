package org.strideweave;

import java.util.Arrays;

/**
 * A layout ({@code sw_layout_t}): congruent (shape, stride) trees, CuTe style, written
 * {@code "(4,(2,2)):(1,(4,8))"}. Immutable and thread-safe. Dense layouts are first mode
 * fastest: {@code Layout.dense(4, 4)} has strides (1, 4).
 */
public final class Layout extends NativeHandle {
  private Layout(long handle) {
    super(handle, NativeJNI::sw_layout_release, "layout");
  }

  static Layout adopt(long handle) {
    return new Layout(handle);
  }

  /**
   * The dense first-mode-fastest layout of {@code extents}.
   *
   * @param extents the extent of each mode (none: a scalar)
   * @return the layout
   */
  public static Layout dense(long... extents) {
    long[] out = new long[1];
    Native.sw_layout_dense(extents.clone(), out);
    return new Layout(out[0]);
  }

  /**
   * A flat layout with one leaf mode per entry.
   *
   * @param shape extents, each >= 0
   * @param stride strides (negative allowed), as many as extents
   * @return the layout
   * @throws InvalidValueException when the ranks differ or the size or span overflows
   */
  public static Layout of(long[] shape, long[] stride) {
    return new Layout(Native.layout_create(shape.clone(), stride.clone()));
  }

  /**
   * Parses the text form, {@code "shape:stride"}.
   *
   * @param text such as {@code "(4,(2,2)):(1,(4,8))"} or {@code "8:1"}
   * @return the layout
   * @throws InvalidValueException naming the position of a syntax error
   */
  public static Layout parse(String text) {
    long[] out = new long[1];
    Native.sw_layout_parse(text, out);
    return new Layout(out[0]);
  }

  /**
   * A layout whose mode i is {@code modes[i]} (the nested grouping).
   *
   * @param modes the modes
   * @return the layout
   */
  public static Layout group(Layout... modes) {
    long[] h = new long[modes.length];
    for (int i = 0; i < modes.length; ++i) {
      h[i] = modes[i].begin();
    }
    try {
      return new Layout(Native.layout_group(h));
    } finally {
      for (Layout m : modes) {
        m.end();
      }
    }
  }

  /**
   * The layout with top-level modes reordered: mode i is mode {@code perm[i]}.
   *
   * @param perm a permutation of the modes
   * @return the layout
   */
  public Layout permute(long... perm) {
    return call(h -> new Layout(Native.layout_permute(h, perm.clone())));
  }

  /**
   * The number of top-level modes.
   *
   * @return the rank
   */
  public int rank() {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_layout_rank(h, out);
      return (int) out[0];
    });
  }

  /**
   * The extent of each top-level mode.
   *
   * @return the extents
   */
  public long[] extents() {
    return call(Native::layout_extents);
  }

  /**
   * The number of coordinates.
   *
   * @return the size
   */
  public long size() {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_layout_size(h, out);
      return out[0];
    });
  }

  /**
   * One past the largest index reached.
   *
   * @return the cosize
   */
  public long cosize() {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_layout_cosize(h, out);
      return out[0];
    });
  }

  /**
   * Whether distinct coordinates reach distinct indices.
   *
   * @return true when injective
   */
  public boolean isInjective() {
    return call(h -> {
      boolean[] out = new boolean[1];
      Native.sw_layout_is_injective(h, out);
      return out[0];
    });
  }

  /**
   * The index of a coordinate: one entry per top-level mode, or one per leaf.
   *
   * @param coord the coordinate
   * @return the index
   */
  public long index(long... coord) {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_layout_index(h, coord.clone(), out);
      return out[0];
    });
  }

  /**
   * The first-mode-fastest ordinal of a per-mode coordinate.
   *
   * @param coord the coordinate
   * @return the ordinal
   */
  public long encode(long... coord) {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_layout_encode(h, coord.clone(), out);
      return out[0];
    });
  }

  /**
   * The per-mode coordinate of an ordinal.
   *
   * @param ordinal the ordinal
   * @return the coordinate
   */
  public long[] decode(long ordinal) {
    return call(h -> Native.layout_decode(h, ordinal));
  }

  /** Value equality: the same trees, extents and strides. */
  @Override
  public boolean equals(Object o) {
    if (!(o instanceof Layout)) {
      return false;
    }
    Layout other = (Layout) o;
    return call(a -> other.call(b -> {
      boolean[] out = new boolean[1];
      Native.sw_layout_equal(a, b, out);
      return out[0];
    }));
  }

  @Override
  public int hashCode() {
    return Arrays.hashCode(extents()) * 31 + toString().hashCode();
  }

  /** The text form, {@code "(4,4):(1,4)"}; {@code "Layout[closed]"} once closed. */
  @Override
  public String toString() {
    if (isClosed()) {
      return "Layout[closed]";
    }
    return call(Native::layout_to_string);
  }
}
