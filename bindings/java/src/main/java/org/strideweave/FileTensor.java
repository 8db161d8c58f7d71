package org.strideweave;

import java.util.Arrays;
import java.util.Objects;

/**
 * A tensor of a model file opened as a read-only File carrier ({@link Carrier#openNpy},
 * {@link Carrier#openSafetensors}, {@link Carrier#openRaw}), with what the opener found
 * ({@code sw_file_tensor_info_t}) and the TiledEvictable geometry that makes each tile one
 * expert exactly as the file stores it.
 *
 * <p>A model file indexes its tensors row-major (the last index fastest); StrideWeave's dense
 * layouts are first mode fastest. So a row-major {@code (E, O, I)} file is, as it lies, the
 * tensor {@code (I, O, E)}: {@link #logicalShape()} is that tensor's shape, {@link #gridShape()}
 * and {@link #tileShape()} cut it into one tile per index of the file's slowest mode, and
 * {@link #view(Tensor)} indexes it as the file does. Pass the full tensor
 * ({@link TiledEvictable#fullTensor()}) to projection, scatter and ops; use the view to read
 * elements by the file's indices and to save.
 *
 * <pre>{@code
 * try (FileTensor ft = Carrier.openSafetensors(rt, path, names); // (E, O, I), one tensor per expert
 *      TiledEvictable tiled = ft.tiled();                       // grid (1, 1, E), tile (I, O, 1)
 *      Tensor full = tiled.fullTensor();                        // (I, O, E)
 *      Tensor view = ft.view(full)) {                           // (E, O, I): view.get(e, o, i)
 *   ...
 * }
 * }</pre>
 *
 * <p>The object holds the carrier: {@link #close()} closes it (the TiledEvictable made by
 * {@link #tiled()} keeps the file open on its own). Immutable otherwise; the arrays are copies.
 */
public final class FileTensor implements AutoCloseable {
  private final StrideWeaveRuntime runtime;
  private final Carrier carrier;
  private final DType dtype;
  private final long[] shape;
  private final FileOrder order;
  private final long dataOffset;
  private final long dataBytes;
  private final long segments;
  private final long[] logicalShape;
  private final long[] gridShape;
  private final long[] tileShape;
  private final long[] permutation;

  private FileTensor(StrideWeaveRuntime runtime, Carrier carrier, long[] v) {
    this.runtime = runtime;
    this.carrier = carrier;
    int rank = (int) v[2];
    this.dtype = DType.of((int) v[1]);
    this.order = FileOrder.of((int) v[3]);
    this.dataOffset = v[4];
    this.dataBytes = v[5];
    this.segments = v[6];
    this.shape = Arrays.copyOfRange(v, 7, 7 + rank);
    this.logicalShape = Arrays.copyOfRange(v, 7 + rank, 7 + 2 * rank);
    this.gridShape = Arrays.copyOfRange(v, 7 + 2 * rank, 7 + 3 * rank);
    this.tileShape = Arrays.copyOfRange(v, 7 + 3 * rank, 7 + 4 * rank);
    this.permutation = Arrays.copyOfRange(v, 7 + 4 * rank, 7 + 5 * rank);
  }

  /**
   * Takes over what a JNI opener returned: {carrier, dtype, rank, order, data offset, data bytes,
   * segments, shape, logical shape, grid shape, tile shape, permutation}.
   */
  static FileTensor adopt(StrideWeaveRuntime runtime, long[] opened) {
    Carrier carrier = new Carrier(opened[0]);
    try {
      return new FileTensor(runtime, carrier, opened);
    } catch (RuntimeException e) {
      carrier.close();
      throw e;
    }
  }

  /**
   * The read-only File carrier over the tensor's bytes (this object's; {@link #close()} closes
   * it).
   *
   * @return the carrier
   */
  public Carrier carrier() {
    return carrier;
  }

  /**
   * The element type.
   *
   * @return the dtype
   */
  public DType dtype() {
    return dtype;
  }

  /**
   * The number of modes.
   *
   * @return the rank
   */
  public int rank() {
    return shape.length;
  }

  /**
   * The shape as the file indexes it (NumPy's shape); a stack of tensors puts their count first.
   *
   * @return a copy of the shape
   */
  public long[] shape() {
    return shape.clone();
  }

  /**
   * How the file lays out the elements.
   *
   * @return the order
   */
  public FileOrder order() {
    return order;
  }

  /**
   * The byte offset of element 0 in the file (for a stack over several files, in the first
   * tensor's file).
   *
   * @return the offset
   */
  public long dataOffset() {
    return dataOffset;
  }

  /**
   * The bytes of all the elements.
   *
   * @return the bytes
   */
  public long dataBytes() {
    return dataBytes;
  }

  /**
   * The file regions the carrier reads: 1, or the number of stacked tensors.
   *
   * @return the segments
   */
  public long segments() {
    return segments;
  }

  /**
   * The full tensor's first-mode-fastest shape: {@link #shape()} reversed for a row-major file,
   * the same for a Fortran-order one.
   *
   * @return a copy of the logical shape
   */
  public long[] logicalShape() {
    return logicalShape.clone();
  }

  /**
   * Tiles per mode of the geometry giving each tile one index of the file's slowest mode (one
   * expert of a row-major {@code (E, O, I)} tensor: {@code (1, 1, E)}).
   *
   * @return a copy of the grid shape
   */
  public long[] gridShape() {
    return gridShape.clone();
  }

  /**
   * The extents of one tile of that geometry ({@code (I, O, 1)} for a row-major
   * {@code (E, O, I)} tensor).
   *
   * @return a copy of the tile shape
   */
  public long[] tileShape() {
    return tileShape.clone();
  }

  /**
   * Mode i of the file's indexing is mode {@code permutation()[i]} of the full tensor: permuting
   * a compact projection with it ({@link Tensor#permute}) indexes it as the file does.
   *
   * @return a copy of the permutation
   */
  public long[] permutation() {
    return permutation.clone();
  }

  /**
   * A TiledEvictable over the file with this geometry and an empty CPU primary of the file's
   * dtype, without a residency policy. Every tile starts in the file (secondary): promote or
   * project to read them.
   *
   * @return the TiledEvictable
   * @throws InvalidStateException when the carrier is already a tier of another TiledEvictable
   */
  public TiledEvictable tiled() {
    return tiled(null, null);
  }

  /**
   * A TiledEvictable over the file with this geometry.
   *
   * @param primary an empty compute carrier of the file's dtype, or null for a new empty CPU one
   * @param policy a {@link ResidencyPolicy}, an {@link LruPolicy}, or null for none
   * @return the TiledEvictable
   * @throws InvalidStateException when the carrier is already a tier of another TiledEvictable
   */
  public TiledEvictable tiled(Carrier primary, ResidencyPolicy policy) {
    if (primary != null) {
      return TiledEvictable.create(primary, carrier, gridShape, tileShape, policy);
    }
    try (Carrier cpu = Carrier.cpu(runtime, dtype, 0)) {
      return TiledEvictable.create(cpu, carrier, gridShape, tileShape, policy);
    }
  }

  /**
   * {@code tensor} (the full tensor of {@link #tiled()}, or any tensor of this rank) indexed as
   * the file does ({@code sw_file_tensor_view}): {@code view.get(e, o, i)} is
   * {@code numpy.load(path)[e, o, i]}. A layout permutation over the same carrier, no copy, not
   * recorded for autograd (a fresh leaf). Projection and ops take the full tensor, not the view.
   *
   * @param tensor a tensor of {@link #rank()} modes
   * @return the view
   * @throws InvalidValueException when the ranks differ
   */
  public Tensor view(Tensor tensor) {
    Objects.requireNonNull(tensor, "tensor");
    return tensor.call(h -> Tensor.adopt(Native.file_tensor_view(h, permutation.clone())));
  }

  /** Closes the carrier. Idempotent. */
  @Override
  public void close() {
    carrier.close();
  }

  @Override
  public String toString() {
    return "FileTensor(shape=" + Arrays.toString(shape) + ", dtype=" + dtype + ", order=" + order
        + ", logicalShape=" + Arrays.toString(logicalShape) + ", gridShape=" + Arrays.toString(gridShape)
        + ", tileShape=" + Arrays.toString(tileShape) + ")";
  }
}
