package org.strideweave;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.List;
import java.util.Objects;

/**
 * A carrier ({@code sw_carrier_t}): a flat run of slots of one dtype with a version counter (one
 * step per public write), an ownership state (a carrier claimed by in-flight work or by a
 * TiledEvictable is not publicly mutable) and {@link #dispose()}. Compute carriers (CPU, Vulkan)
 * run ops; storage carriers (host, file, zstd, remote) are secondary tiers of a
 * {@link TiledEvictable}.
 * Size 0 makes an empty carrier, which a move, a projection or a TiledEvictable fills.
 *
 * <p>Carriers may be read from several threads at once; concurrent writes to one carrier must
 * be serialised by the caller. Closing this object drops its reference; it does not dispose the
 * values (see {@link #dispose()}).
 */
public class Carrier extends NativeHandle {
  Carrier(long handle) {
    super(handle, NativeJNI::sw_carrier_release, "carrier");
  }

  /** The Java object for a new carrier reference: a TiledEvictable for a tiled carrier. */
  static Carrier adopt(long handle) {
    int[] kind = new int[1];
    try {
      Native.sw_carrier_kind(handle, kind);
    } catch (RuntimeException e) {
      Native.sw_carrier_release(handle);
      throw e;
    }
    return kind[0] == CarrierKind.TILED.value() ? new TiledEvictable(handle, null) : new Carrier(handle);
  }

  private static long rt(StrideWeaveRuntime runtime) {
    return Objects.requireNonNull(runtime, "runtime").begin();
  }

  /**
   * A zero-filled CPU carrier (aligned host memory from the runtime's pool).
   *
   * @param runtime the runtime
   * @param dtype the element type
   * @param size slots; 0 for an empty carrier
   * @return the carrier
   */
  public static Carrier cpu(StrideWeaveRuntime runtime, DType dtype, long size) {
    long r = rt(runtime);
    try {
      long[] out = new long[1];
      Native.sw_carrier_create_cpu(r, dtype.value(), size, out);
      return new Carrier(out[0]);
    } finally {
      runtime.end();
    }
  }

  /**
   * A CPU carrier holding a copy of a primitive array ({@code float[]} for f32, ...; see
   * {@link DType}).
   *
   * @param runtime the runtime
   * @param dtype the element type, which the array's class must hold
   * @param values the values
   * @return the carrier
   */
  public static Carrier cpuFrom(StrideWeaveRuntime runtime, DType dtype, Object values) {
    Buffers.check(values, dtype);
    ByteBuffer b = Buffers.pack(values);
    long r = rt(runtime);
    try {
      return new Carrier(Native.carrier_create_cpu_from(r, dtype.value(), b, 0, Buffers.length(values)));
    } finally {
      runtime.end();
    }
  }

  /**
   * A CPU carrier whose slots are the memory of a direct buffer, without a copy: what Java
   * writes there is what ops read, and what the library writes lands there. The carrier keeps
   * the buffer alive until it releases the memory (on dispose, a move out of it, or its last
   * reference). The buffer's whole capacity is used; it must be aligned to the dtype's size.
   *
   * @param runtime the runtime
   * @param dtype the element type
   * @param memory a direct buffer whose capacity is a multiple of the dtype's size
   * @param readOnly whether the library must not write it (public writes then fail STATE)
   * @return the carrier
   */
  public static Carrier cpuExternal(StrideWeaveRuntime runtime, DType dtype, ByteBuffer memory, boolean readOnly) {
    Buffers.checkDirect(memory);
    long r = rt(runtime);
    try {
      return new Carrier(Native.carrier_create_cpu_external(r, dtype.value(), memory, readOnly));
    } finally {
      runtime.end();
    }
  }

  /**
   * Plain zero-filled host memory: a secondary tier, not a compute carrier.
   *
   * @param runtime the runtime
   * @param dtype the element type
   * @param size slots
   * @return the carrier
   */
  public static Carrier host(StrideWeaveRuntime runtime, DType dtype, long size) {
    long r = rt(runtime);
    try {
      long[] out = new long[1];
      Native.sw_carrier_create_host(r, dtype.value(), size, out);
      return new Carrier(out[0]);
    } finally {
      runtime.end();
    }
  }

  /**
   * A zero-filled carrier backed by a new file, removed when the carrier is disposed or
   * destroyed.
   *
   * @param runtime the runtime
   * @param dtype the element type
   * @param size slots
   * @param directory where the file is created; null for {@code $TMPDIR} or /tmp
   * @return the carrier
   * @throws StorageIOException when the file cannot be created
   */
  public static Carrier file(StrideWeaveRuntime runtime, DType dtype, long size, Path directory) {
    return file(runtime, dtype, size, directory, FileOptions.DEFAULTS);
  }

  /**
   * A file carrier with the I/O options of {@code sw_file_carrier_desc_t}.
   *
   * @param runtime the runtime
   * @param dtype the element type
   * @param size slots
   * @param directory where the file is created; null for {@code $TMPDIR} or /tmp
   * @param options the I/O options ({@link FileOptions#DEFAULTS}: buffered, 4 MiB requests, 4
   *     in flight)
   * @return the carrier
   * @throws StorageIOException when the file cannot be created
   */
  public static Carrier file(StrideWeaveRuntime runtime, DType dtype, long size, Path directory,
                             FileOptions options) {
    Objects.requireNonNull(options, "options");
    long r = rt(runtime);
    try {
      return new Carrier(Native.carrier_create_file(r, dtype.value(), size,
          directory == null ? null : directory.toString(), options.directIo(), options.chunkBytes(),
          options.requestsInFlight()));
    } finally {
      runtime.end();
    }
  }

  /**
   * A file carrier with every option of {@code sw_file_carrier_desc_t}, given one by one.
   *
   * @param runtime the runtime
   * @param dtype the element type
   * @param size slots
   * @param directory where the file is created; null for {@code $TMPDIR} or /tmp
   * @param directIo open with O_DIRECT where the file system allows it
   * @param chunkBytes bytes per read or write request; 0 for 4 MiB
   * @param requestsInFlight requests in flight per transfer; 0 for 4
   * @return the carrier
   * @deprecated use {@link #file(StrideWeaveRuntime, DType, long, Path, FileOptions)}
   */
  @Deprecated
  public static Carrier file(StrideWeaveRuntime runtime, DType dtype, long size, Path directory, boolean directIo,
                             long chunkBytes, int requestsInFlight) {
    return file(runtime, dtype, size, directory, new FileOptions(directIo, chunkBytes, requestsInFlight));
  }

  /**
   * A read-only carrier over {@code size} elements at {@code byteOffset} of an existing file (a
   * weights file, say), which is never written or removed.
   *
   * @param runtime the runtime
   * @param dtype the element type
   * @param path the file
   * @param byteOffset where the elements start
   * @param size elements
   * @return the carrier
   * @throws StorageIOException when the file cannot be opened
   * @throws InvalidValueException when the region passes the end of the file
   */
  public static Carrier openFile(StrideWeaveRuntime runtime, DType dtype, Path path, long byteOffset, long size) {
    long r = rt(runtime);
    try {
      return new Carrier(Native.carrier_open_file(r, dtype.value(), path.toString(), byteOffset, size, false));
    } finally {
      runtime.end();
    }
  }

  /**
   * {@code count} slots at byte {@code byteOffset} of a file: one piece of
   * {@link #openFileSegments}.
   *
   * @param byteOffset where the piece starts
   * @param count slots
   */
  public record Segment(long byteOffset, long count) {}

  /**
   * A read-only File carrier whose slots are the segments' slots, segment after segment
   * ({@code sw_carrier_open_file_segments}): the segments may lie anywhere in the file, in any
   * order, and may be empty. The file is never written or removed.
   *
   * @param runtime the runtime
   * @param dtype the element type
   * @param path the file
   * @param segments the pieces, in slot order
   * @return the carrier
   * @throws StorageIOException when the file cannot be opened
   * @throws InvalidValueException for a segment passing the end of the file (naming it)
   */
  public static Carrier openFileSegments(StrideWeaveRuntime runtime, DType dtype, Path path, List<Segment> segments) {
    return openFileSegments(runtime, dtype, path, segments, FileOptions.DEFAULTS);
  }

  /**
   * {@link #openFileSegments(StrideWeaveRuntime, DType, Path, List)} with the I/O options of
   * {@code sw_file_carrier_desc_t}.
   *
   * @param runtime the runtime
   * @param dtype the element type
   * @param path the file
   * @param segments the pieces, in slot order
   * @param options the I/O options
   * @return the carrier
   */
  public static Carrier openFileSegments(StrideWeaveRuntime runtime, DType dtype, Path path, List<Segment> segments,
                                         FileOptions options) {
    Objects.requireNonNull(dtype, "dtype");
    byte[] p = CStrings.of(path, "path");
    Objects.requireNonNull(segments, "segments");
    Objects.requireNonNull(options, "options");
    long[] offsets = new long[segments.size()];
    long[] counts = new long[offsets.length];
    for (int i = 0; i < offsets.length; ++i) {
      Segment seg = Objects.requireNonNull(segments.get(i), "segments[" + i + "]");
      if (seg.byteOffset() < 0 || seg.count() < 0) {
        throw new InvalidValueException("segment " + i + " has byte offset " + seg.byteOffset() + " and count "
            + seg.count() + "; neither may be negative");
      }
      offsets[i] = seg.byteOffset();
      counts[i] = seg.count();
    }
    long r = rt(runtime);
    try {
      return new Carrier(Native.carrier_open_file_segments(r, dtype.value(), p, offsets, counts, options.directIo(),
          options.chunkBytes(), options.requestsInFlight()));
    } finally {
      runtime.end();
    }
  }

  /**
   * The array of a {@code .npy} file (format 1.0 or 2.0, C or Fortran order) as a read-only File
   * carrier ({@code sw_carrier_open_npy}), with the geometry that makes each tile one index of
   * the file's slowest mode (one expert). See {@link FileTensor}.
   *
   * @param runtime the runtime
   * @param path the file
   * @return the carrier and what the header says
   * @throws StorageIOException when the file cannot be opened or read
   * @throws DataCorruptException for a bad header
   * @throws UnsupportedFeatureException for a dtype, version or rank StrideWeave cannot hold
   * @throws InvalidValueException for an array with no elements or of rank 0
   */
  public static FileTensor openNpy(StrideWeaveRuntime runtime, Path path) {
    return openNpy(runtime, path, FileOptions.DEFAULTS);
  }

  /**
   * {@link #openNpy(StrideWeaveRuntime, Path)} with the I/O options of
   * {@code sw_file_carrier_desc_t}.
   *
   * @param runtime the runtime
   * @param path the file
   * @param options the I/O options (direct I/O reads through O_DIRECT where the file system
   *     allows it)
   * @return the carrier and what the header says
   */
  public static FileTensor openNpy(StrideWeaveRuntime runtime, Path path, FileOptions options) {
    byte[] p = CStrings.of(path, "path");
    Objects.requireNonNull(options, "options");
    long r = rt(runtime);
    try {
      return FileTensor.adopt(runtime, Native.carrier_open_npy(r, p, options.directIo(), options.chunkBytes(),
          options.requestsInFlight()));
    } finally {
      runtime.end();
    }
  }

  /**
   * {@link #openNpy(StrideWeaveRuntime, Path, FileOptions)} with the options given one by one.
   *
   * @param runtime the runtime
   * @param path the file
   * @param directIo read through O_DIRECT where the file system allows it
   * @param chunkBytes bytes per read request; 0 for 4 MiB
   * @param requestsInFlight requests in flight per transfer; 0 for 4
   * @return the carrier and what the header says
   * @deprecated use {@link #openNpy(StrideWeaveRuntime, Path, FileOptions)}
   */
  @Deprecated
  public static FileTensor openNpy(StrideWeaveRuntime runtime, Path path, boolean directIo, long chunkBytes,
                                   int requestsInFlight) {
    return openNpy(runtime, path, new FileOptions(directIo, chunkBytes, requestsInFlight));
  }

  /**
   * Tensor {@code name} of a {@code .safetensors} file as a read-only File carrier
   * ({@code sw_carrier_open_safetensors}; {@code "__metadata__"} is ignored).
   *
   * @param runtime the runtime
   * @param path the file
   * @param name the tensor's name
   * @return the carrier and what the header says
   * @throws StorageIOException when the file cannot be opened or read
   * @throws DataCorruptException for a bad header
   * @throws UnsupportedFeatureException for a dtype or rank StrideWeave cannot hold
   * @throws InvalidValueException for a name the file lacks, a tensor with no elements or of
   *     rank 0
   */
  public static FileTensor openSafetensors(StrideWeaveRuntime runtime, Path path, String name) {
    return openSafetensors(runtime, path, name, FileOptions.DEFAULTS);
  }

  /**
   * {@link #openSafetensors(StrideWeaveRuntime, Path, String)} with the I/O options of
   * {@code sw_file_carrier_desc_t}.
   *
   * @param runtime the runtime
   * @param path the file
   * @param name the tensor's name
   * @param options the I/O options
   * @return the carrier and what the header says
   */
  public static FileTensor openSafetensors(StrideWeaveRuntime runtime, Path path, String name, FileOptions options) {
    byte[] p = CStrings.of(path, "path");
    byte[] n = CStrings.of(name, "name");
    Objects.requireNonNull(options, "options");
    long r = rt(runtime);
    try {
      return FileTensor.adopt(runtime, Native.carrier_open_safetensors(r, p, n, options.directIo(),
          options.chunkBytes(), options.requestsInFlight()));
    } finally {
      runtime.end();
    }
  }

  /**
   * {@link #openSafetensors(StrideWeaveRuntime, Path, String, FileOptions)} with the options
   * given one by one.
   *
   * @param runtime the runtime
   * @param path the file
   * @param name the tensor's name
   * @param directIo read through O_DIRECT where the file system allows it
   * @param chunkBytes bytes per read request; 0 for 4 MiB
   * @param requestsInFlight requests in flight per transfer; 0 for 4
   * @return the carrier and what the header says
   * @deprecated use {@link #openSafetensors(StrideWeaveRuntime, Path, String, FileOptions)}
   */
  @Deprecated
  public static FileTensor openSafetensors(StrideWeaveRuntime runtime, Path path, String name, boolean directIo,
                                           long chunkBytes, int requestsInFlight) {
    return openSafetensors(runtime, path, name, new FileOptions(directIo, chunkBytes, requestsInFlight));
  }

  /**
   * Tensor {@code name} of a GGUF file (llama.cpp's format, versions 2 and 3) as a read-only File
   * carrier ({@code sw_carrier_open_gguf}). ggml lists a tensor's dimensions {@code ne} fastest
   * first, this library's first-mode-fastest order: {@link FileTensor#shape()} is ne reversed
   * (row-major) and {@link FileTensor#logicalShape()} is ne, so a stacked expert tensor ({@code
   * blk.L.ffn_up_exps.weight}, ne {@code (n_embd, n_ff, n_expert)}) tiles one expert per tile.
   *
   * @param runtime the runtime
   * @param path the file
   * @param name the tensor's name
   * @return the carrier and what the header says
   * @throws StorageIOException when the file cannot be opened or read
   * @throws DataCorruptException for a lying header (offsets past the end, overlapping or
   *     misaligned tensors, a block that does not divide the first dimension, absurd counts)
   * @throws UnsupportedFeatureException for a GGUF version other than 2 and 3 or a ggml type
   *     StrideWeave has no dtype for (such as Q4_1 and Q5_K; Q8_0, Q4_0, Q4_K, Q6_K and MXFP4 open)
   * @throws InvalidValueException for a name the file lacks, a tensor with no elements or of
   *     rank 0
   */
  public static FileTensor openGguf(StrideWeaveRuntime runtime, Path path, String name) {
    return openGguf(runtime, path, name, FileOptions.DEFAULTS);
  }

  /**
   * {@link #openGguf(StrideWeaveRuntime, Path, String)} with the I/O options of {@code
   * sw_file_carrier_desc_t}.
   *
   * @param runtime the runtime
   * @param path the file
   * @param name the tensor's name
   * @param options the I/O options
   * @return the carrier and what the header says
   */
  public static FileTensor openGguf(StrideWeaveRuntime runtime, Path path, String name, FileOptions options) {
    byte[] p = CStrings.of(path, "path");
    byte[] n = CStrings.of(name, "name");
    Objects.requireNonNull(options, "options");
    long r = rt(runtime);
    try {
      return FileTensor.adopt(runtime, Native.carrier_open_gguf(r, p, n, options.directIo(), options.chunkBytes(),
          options.requestsInFlight()));
    } finally {
      runtime.end();
    }
  }

  /**
   * Several tensors of one {@code .safetensors} file, all of one dtype and shape {@code S}, as one
   * read-only carrier over their regions in the order given ({@code
   * sw_carrier_open_safetensors_stack}): the tensor of shape {@code (names.size(), *S)} that
   * stacks them, tile i being {@code names.get(i)} (a Hugging Face checkpoint storing each expert
   * as its own tensor).
   *
   * @param runtime the runtime
   * @param path the file
   * @param names the tensors' names, in tile order
   * @return the carrier and what the header says
   * @throws InvalidValueException for a name the file lacks, tensors that differ in dtype or
   *     shape, a name given twice, or no names
   */
  public static FileTensor openSafetensors(StrideWeaveRuntime runtime, Path path, List<String> names) {
    return openSafetensors(runtime, path, names, FileOptions.DEFAULTS);
  }

  /**
   * {@link #openSafetensors(StrideWeaveRuntime, Path, List)} with the I/O options of
   * {@code sw_file_carrier_desc_t}.
   *
   * @param runtime the runtime
   * @param path the file
   * @param names the tensors' names, in tile order
   * @param options the I/O options
   * @return the carrier and what the header says
   */
  public static FileTensor openSafetensors(StrideWeaveRuntime runtime, Path path, List<String> names,
                                           FileOptions options) {
    byte[] p = CStrings.of(path, "path");
    Object[] n = CStrings.strings(names, "names");
    Objects.requireNonNull(options, "options");
    long r = rt(runtime);
    try {
      return FileTensor.adopt(runtime, Native.carrier_open_safetensors_stack(r, p, n, options.directIo(),
          options.chunkBytes(), options.requestsInFlight()));
    } finally {
      runtime.end();
    }
  }

  /**
   * {@link #openSafetensors(StrideWeaveRuntime, Path, List, FileOptions)} with the options given
   * one by one.
   *
   * @param runtime the runtime
   * @param path the file
   * @param names the tensors' names, in tile order
   * @param directIo read through O_DIRECT where the file system allows it
   * @param chunkBytes bytes per read request; 0 for 4 MiB
   * @param requestsInFlight requests in flight per transfer; 0 for 4
   * @return the carrier and what the header says
   * @deprecated use {@link #openSafetensors(StrideWeaveRuntime, Path, List, FileOptions)}
   */
  @Deprecated
  public static FileTensor openSafetensors(StrideWeaveRuntime runtime, Path path, List<String> names,
                                           boolean directIo, long chunkBytes, int requestsInFlight) {
    return openSafetensors(runtime, path, names, new FileOptions(directIo, chunkBytes, requestsInFlight));
  }

  /**
   * The stack of {@link #openSafetensors(StrideWeaveRuntime, Path, List)} over several
   * {@code .safetensors} files, for a checkpoint sharded into files ({@code
   * sw_carrier_open_safetensors_stack_files}): tensor {@code names.get(i)} of file
   * {@code paths.get(i)}, tile i being that tensor. Paths may repeat and come in any order; each
   * file is opened and its header read once.
   *
   * @param runtime the runtime
   * @param paths one file per name (a {@code weight_map} lookup of each name)
   * @param names the tensors' names, in tile order
   * @return the carrier and what the headers say
   * @throws InvalidValueException for lists of two lengths, a name its file lacks, tensors that
   *     differ in dtype or shape, one tensor of one file given twice, or no names
   * @throws StorageIOException when a file cannot be opened or read
   * @throws DataCorruptException for a bad header
   */
  public static FileTensor openSafetensors(StrideWeaveRuntime runtime, List<Path> paths, List<String> names) {
    return openSafetensors(runtime, paths, names, FileOptions.DEFAULTS);
  }

  /**
   * {@link #openSafetensors(StrideWeaveRuntime, List, List)} with the I/O options of
   * {@code sw_file_carrier_desc_t} (with direct I/O, each file falls back to buffered reads on
   * its own).
   *
   * @param runtime the runtime
   * @param paths one file per name
   * @param names the tensors' names, in tile order
   * @param options the I/O options
   * @return the carrier and what the headers say
   */
  public static FileTensor openSafetensors(StrideWeaveRuntime runtime, List<Path> paths, List<String> names,
                                           FileOptions options) {
    Object[] p = CStrings.paths(paths, "paths");
    Object[] n = CStrings.strings(names, "names");
    Objects.requireNonNull(options, "options");
    if (p.length != n.length) {
      throw new InvalidValueException(p.length + " paths for " + n.length
          + " tensor names: give one path per name");
    }
    long r = rt(runtime);
    try {
      return FileTensor.adopt(runtime, Native.carrier_open_safetensors_stack_files(r, p, n, options.directIo(),
          options.chunkBytes(), options.requestsInFlight()));
    } finally {
      runtime.end();
    }
  }

  /**
   * {@link #openSafetensors(StrideWeaveRuntime, List, List, FileOptions)} with the options
   * given one by one.
   *
   * @param runtime the runtime
   * @param paths one file per name
   * @param names the tensors' names, in tile order
   * @param directIo read through O_DIRECT where the file system allows it (each file falls back
   *     to buffered reads on its own)
   * @param chunkBytes bytes per read request; 0 for 4 MiB
   * @param requestsInFlight requests in flight per transfer; 0 for 4
   * @return the carrier and what the headers say
   * @deprecated use {@link #openSafetensors(StrideWeaveRuntime, List, List, FileOptions)}
   */
  @Deprecated
  public static FileTensor openSafetensors(StrideWeaveRuntime runtime, List<Path> paths, List<String> names,
                                           boolean directIo, long chunkBytes, int requestsInFlight) {
    return openSafetensors(runtime, paths, names, new FileOptions(directIo, chunkBytes, requestsInFlight));
  }

  /**
   * What {@link #openRaw(StrideWeaveRuntime, Path, RawSpec)} reads: a tensor of {@code shape}
   * and {@code dtype} whose element 0 is at {@code byteOffset} of the file, laid out in
   * {@code order}.
   *
   * @param dtype the element type
   * @param byteOffset where element 0 is
   * @param shape the shape as the file indexes it (copied)
   * @param order how the file lays out the elements
   */
  public record RawSpec(DType dtype, long byteOffset, long[] shape, FileOrder order) {
    /**
     * A spec; the shape is copied.
     *
     * @param dtype the element type
     * @param byteOffset where element 0 is
     * @param shape the shape as the file indexes it
     * @param order how the file lays out the elements
     */
    public RawSpec {
      Objects.requireNonNull(dtype, "dtype");
      Objects.requireNonNull(order, "order");
      shape = Objects.requireNonNull(shape, "shape").clone();
    }

    /**
     * A row-major tensor at the start of the file ({@link FileOrder#ROW_MAJOR}, byte offset 0);
     * {@link #at} and {@link #inOrder} change either.
     *
     * @param dtype the element type
     * @param shape the shape as the file indexes it
     * @return the spec
     */
    public static RawSpec of(DType dtype, long... shape) {
      return new RawSpec(dtype, 0, shape, FileOrder.ROW_MAJOR);
    }

    /**
     * This spec with element 0 at {@code byteOffset}.
     *
     * @param byteOffset where element 0 is
     * @return a new spec
     */
    public RawSpec at(long byteOffset) {
      return new RawSpec(dtype, byteOffset, shape, order);
    }

    /**
     * This spec laid out in {@code order}.
     *
     * @param order how the file lays out the elements
     * @return a new spec
     */
    public RawSpec inOrder(FileOrder order) {
      return new RawSpec(dtype, byteOffset, shape, order);
    }

    /**
     * The shape (a copy).
     *
     * @return the extents
     */
    @Override
    public long[] shape() {
      return shape.clone();
    }
  }

  /**
   * A raw tensor of a file as a read-only File carrier ({@code sw_carrier_open_raw_tensor}).
   *
   * @param runtime the runtime
   * @param path the file
   * @param spec the tensor's dtype, byte offset, shape and order
   * @return the carrier and its geometry
   * @throws StorageIOException when the file cannot be opened
   * @throws InvalidValueException for a region past the end of the file, a rank above
   *     {@link StrideWeave#MAX_RANK}, or no elements
   */
  public static FileTensor openRaw(StrideWeaveRuntime runtime, Path path, RawSpec spec) {
    return openRaw(runtime, path, spec, FileOptions.DEFAULTS);
  }

  /**
   * {@link #openRaw(StrideWeaveRuntime, Path, RawSpec)} with the I/O options of
   * {@code sw_file_carrier_desc_t}.
   *
   * @param runtime the runtime
   * @param path the file
   * @param spec the tensor's dtype, byte offset, shape and order
   * @param options the I/O options
   * @return the carrier and its geometry
   */
  public static FileTensor openRaw(StrideWeaveRuntime runtime, Path path, RawSpec spec, FileOptions options) {
    byte[] p = CStrings.of(path, "path");
    Objects.requireNonNull(spec, "spec");
    Objects.requireNonNull(options, "options");
    long r = rt(runtime);
    try {
      return FileTensor.adopt(runtime, Native.carrier_open_raw_tensor(r, p, spec.dtype().value(), spec.byteOffset(),
          spec.shape(), spec.order().value(), options.directIo(), options.chunkBytes(), options.requestsInFlight()));
    } finally {
      runtime.end();
    }
  }

  /**
   * {@link #openRaw(StrideWeaveRuntime, Path, RawSpec)} with the spec given field by field.
   *
   * @param runtime the runtime
   * @param path the file
   * @param dtype the element type
   * @param byteOffset where element 0 is
   * @param shape the shape as the file indexes it
   * @param order how the file lays out the elements
   * @return the carrier and its geometry
   * @deprecated use {@link #openRaw(StrideWeaveRuntime, Path, RawSpec)}
   */
  @Deprecated
  public static FileTensor openRaw(StrideWeaveRuntime runtime, Path path, DType dtype, long byteOffset, long[] shape,
                                   FileOrder order) {
    CStrings.of(path, "path");
    return openRaw(runtime, path, new RawSpec(dtype, byteOffset, shape, order), FileOptions.DEFAULTS);
  }

  /**
   * {@link #openRaw(StrideWeaveRuntime, Path, RawSpec, FileOptions)} with the spec and the
   * options given one by one.
   *
   * @param runtime the runtime
   * @param path the file
   * @param dtype the element type
   * @param byteOffset where element 0 is
   * @param shape the shape as the file indexes it
   * @param order how the file lays out the elements
   * @param directIo read through O_DIRECT where the file system allows it
   * @param chunkBytes bytes per read request; 0 for 4 MiB
   * @param requestsInFlight requests in flight per transfer; 0 for 4
   * @return the carrier and its geometry
   * @deprecated use {@link #openRaw(StrideWeaveRuntime, Path, RawSpec, FileOptions)}
   */
  @Deprecated
  public static FileTensor openRaw(StrideWeaveRuntime runtime, Path path, DType dtype, long byteOffset, long[] shape,
                                   FileOrder order, boolean directIo, long chunkBytes, int requestsInFlight) {
    CStrings.of(path, "path");
    return openRaw(runtime, path, new RawSpec(dtype, byteOffset, shape, order),
        new FileOptions(directIo, chunkBytes, requestsInFlight));
  }

  /**
   * A zero-filled carrier holding its values zstd-compressed in host memory, each frame
   * checksummed: a corrupt frame reads as {@link DataCorruptException}, never as garbage.
   *
   * @param runtime the runtime
   * @param dtype the element type
   * @param size slots
   * @param level the zstd level (1 is the default)
   * @param frameElements elements per independently compressed frame; 0 for 1 Mi
   * @return the carrier
   */
  public static Carrier zstd(StrideWeaveRuntime runtime, DType dtype, long size, int level, long frameElements) {
    long r = rt(runtime);
    try {
      return new Carrier(Native.carrier_create_zstd(r, dtype.value(), size, level, frameElements, -1));
    } finally {
      runtime.end();
    }
  }

  /**
   * A zero-filled carrier of {@code size} slots in a new namespace on Valkey or Redis servers
   * ({@code sw_carrier_create_remote}): a secondary tier whose blocks are one string key each,
   * with a CRC-32C checked on every read. Its header and every block are written. Unless
   * {@link RemoteOptions#persistent()}, the carrier owns its keys: disposing or releasing it
   * deletes them.
   *
   * <p>Choose {@link RemoteOptions#blockElements()} equal to the tile size of the
   * TiledEvictable it serves: every promotion and eviction is then one block.
   *
   * @param runtime the runtime
   * @param dtype the element type
   * @param size slots; 0 for an empty carrier, which a TiledEvictable or a move fills
   * @param options the servers, the namespace and the descriptor's other fields
   * @return the carrier
   * @throws InvalidStateException when the namespace already has a header on one of the servers,
   *     or another writer holds its lease ("has a writer already", naming the holder)
   * @throws StorageIOException when a server cannot be reached, refuses the credentials or a
   *     command (naming the server)
   * @throws WaitTimeoutException when a server does not answer within the deadline
   * @throws InvalidValueException for a bad endpoint (a plaintext one to a host that is not a
   *     loopback address without {@link RemoteOptions#allowPlaintext()}), namespace or password
   *     file, or {@code readOnly} or {@link RemoteOptions#replicas()} set
   * @throws UnsupportedFeatureException for {@code rediss://}, or in builds without hiredis
   */
  public static Carrier remote(StrideWeaveRuntime runtime, DType dtype, long size, RemoteOptions options) {
    return remoteCarrier(runtime, dtype, size, options, false);
  }

  /**
   * A carrier over an existing namespace on Valkey or Redis servers
   * ({@code sw_carrier_open_remote}), seeded by {@link #remote} with
   * {@link RemoteOptions#persistent()} or by {@code python -m strideweave.remote seed}. Every
   * server's header must match the dtype, {@code size}, the block size (when
   * {@link RemoteOptions#blockElements()} is not 0), the endpoint count and the placement seed.
   * The carrier never deletes the keys. Unless {@link RemoteOptions#readOnly()}, it takes the
   * namespace's writer lease.
   *
   * @param runtime the runtime
   * @param dtype the element type, which must be the header's
   * @param size slots, which must be the header's
   * @param options the servers, the namespace and the descriptor's other fields
   * @return the carrier
   * @throws InvalidValueException when the header differs (naming the field and the server), for
   *     a bad endpoint, namespace or password file, {@code persistent} set, or
   *     {@link RemoteOptions#replicas()} without {@code readOnly} or with a key that is not one of
   *     the endpoints
   * @throws InvalidStateException without {@code readOnly}, when another writer holds the
   *     namespace's lease ("has a writer already", naming the holder)
   * @throws StorageIOException when a server has no header, cannot be reached, or refuses the
   *     credentials or a command
   * @throws WaitTimeoutException when a server does not answer within the deadline
   * @throws UnsupportedFeatureException for {@code rediss://}, or in builds without hiredis
   */
  public static Carrier openRemote(StrideWeaveRuntime runtime, DType dtype, long size, RemoteOptions options) {
    return remoteCarrier(runtime, dtype, size, options, true);
  }

  private static Carrier remoteCarrier(StrideWeaveRuntime runtime, DType dtype, long size, RemoteOptions options,
                                       boolean open) {
    Objects.requireNonNull(dtype, "dtype");
    Objects.requireNonNull(options, "options");
    if (size < 0 || options.blockElements() < 0 || options.chunkBytes() < 0 || options.requestsInFlight() < 0) {
      throw new InvalidValueException("size " + size + ", blockElements " + options.blockElements() + ", chunkBytes "
          + options.chunkBytes() + " and requestsInFlight " + options.requestsInFlight() + ": none may be negative");
    }
    Object[] endpoints = CStrings.strings(options.endpoints(), "endpoints");
    byte[] ns = CStrings.of(options.namespace(), "namespace");
    byte[] user = options.user() == null ? null : CStrings.of(options.user(), "user");
    byte[] passwordFile = options.passwordFile() == null ? null : CStrings.of(options.passwordFile(), "passwordFile");
    long deadlineMs = options.deadlineMillis();
    long leaseMs = options.leaseMillis();
    long[] replicaOf = options.replicaOf(); // checks every key is an endpoint
    Object[] replicas = CStrings.strings(options.replicaServers(), "replicas");
    long r = rt(runtime);
    try {
      return new Carrier(Native.carrier_remote(r, dtype.value(), size, open, endpoints, ns, user, passwordFile,
          options.allowPlaintext(), options.readOnly(), options.blockElements(), options.placementSeed(), deadlineMs,
          options.chunkBytes(), options.requestsInFlight(), options.persistent(), replicas, replicaOf, leaseMs));
    } finally {
      runtime.end();
    }
  }

  /**
   * A zero-filled compute carrier in device-local memory of a Vulkan device.
   *
   * @param runtime the runtime
   * @param device a Vulkan device ({@link Device#vulkan})
   * @param dtype the element type
   * @param size slots; 0 for an empty carrier
   * @return the carrier
   * @throws TypeMismatchException when the device is not a Vulkan device
   * @throws UnsupportedFeatureException in builds without Vulkan
   */
  public static Carrier vulkan(StrideWeaveRuntime runtime, Device device, DType dtype, long size) {
    long r = rt(runtime);
    long d = device.begin();
    try {
      long[] out = new long[1];
      Native.sw_carrier_create_vulkan(r, d, dtype.value(), size, out);
      return new Carrier(out[0]);
    } finally {
      device.end();
      runtime.end();
    }
  }

  /**
   * The carrier's kind.
   *
   * @return the kind
   */
  public final CarrierKind kind() {
    return call(h -> {
      int[] out = new int[1];
      Native.sw_carrier_kind(h, out);
      return CarrierKind.of(out[0]);
    });
  }

  /**
   * The element type.
   *
   * @return the dtype
   */
  public final DType dtype() {
    return call(h -> {
      int[] out = new int[1];
      Native.sw_carrier_dtype(h, out);
      return DType.of(out[0]);
    });
  }

  /**
   * The number of slots; still answers after dispose.
   *
   * @return the size
   */
  public final long size() {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_carrier_size(h, out);
      return out[0];
    });
  }

  /**
   * The version counter: one step per successful public write (residency moves never step it).
   *
   * @return the version
   */
  public final long version() {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_carrier_version(h, out);
      return out[0];
    });
  }

  /**
   * Whether public writes would be accepted (live and not owned).
   *
   * @return true when mutable
   */
  public final boolean isMutable() {
    return flag(Native::sw_carrier_is_mutable);
  }

  /**
   * Whether the carrier refuses public writes for good (an opened file, read-only memory).
   *
   * @return true when read-only
   */
  public final boolean isReadOnly() {
    return flag(Native::sw_carrier_is_read_only);
  }

  /**
   * Whether in-flight work or a composite carrier (a TiledEvictable) claims it.
   *
   * @return true when owned
   */
  public final boolean isOwned() {
    return flag(Native::sw_carrier_is_owned);
  }

  /**
   * Whether the values were disposed.
   *
   * @return true after dispose
   */
  public final boolean isDisposed() {
    return flag(Native::sw_carrier_is_disposed);
  }

  @FunctionalInterface
  private interface FlagFn {
    void get(long handle, boolean[] out);
  }

  private boolean flag(FlagFn fn) {
    return call(h -> {
      boolean[] out = new boolean[1];
      fn.get(h, out);
      return out[0];
    });
  }

  /**
   * Bytes the storage occupies now (compressed bytes for zstd, file bytes for file).
   *
   * @return the bytes
   */
  public final long storedBytes() {
    return call(h -> {
      long[] out = new long[1];
      Native.sw_carrier_stored_bytes(h, out);
      return out[0];
    });
  }

  /**
   * How a File carrier moves its bytes ({@code sw_file_carrier_io}): the chunk size and requests
   * in flight its transfers use, whether it reads through O_DIRECT, and where the settings came
   * from. Still answers after dispose.
   *
   * @return the carrier's I/O
   * @throws TypeMismatchException when the carrier is not a File carrier
   */
  public final FileIo fileIo() {
    return call(h -> {
      double[] rate = new double[1];
      long[] v = Native.file_carrier_io(h, rate);
      return new FileIo(v[0], (int) v[1], v[2] != 0, FileIo.Source.values()[(int) v[3]], v[4], rate[0]);
    });
  }

  /**
   * Frees the values (the handle stays: size, dtype and kind still answer). Idempotent. For a
   * TiledEvictable, releases every tile and both tiers.
   *
   * @throws InvalidStateException while the carrier is owned or has work pending
   */
  public final void dispose() {
    run(Native::sw_carrier_dispose);
  }

  /**
   * Copies slots starting at {@code firstSlot} into a primitive array of the dtype's Java type,
   * filling it.
   *
   * @param firstSlot the first slot
   * @param destination the array ({@code float[]} for f32, ...)
   * @throws IndexOutOfRangeException when the range passes the carrier's end
   */
  public final void read(long firstSlot, Object destination) {
    DType dtype = dtype();
    Buffers.check(destination, dtype);
    int n = Buffers.length(destination);
    ByteBuffer b = Buffers.allocate((long) n * dtype.size());
    run(h -> Native.carrier_read_buffer(h, firstSlot, n, b, 0, (long) n * dtype.size()));
    Buffers.unpack(b, destination);
  }

  /**
   * Copies slots into a direct buffer: as many whole elements as its remaining bytes hold, from
   * its position (which is then advanced past them). No copy through the Java heap.
   *
   * @param firstSlot the first slot
   * @param destination a direct buffer
   */
  public final void read(long firstSlot, ByteBuffer destination) {
    Buffers.checkDirect(destination);
    int size = dtype().size();
    long count = destination.remaining() / size;
    run(h -> Native.carrier_read_buffer(h, firstSlot, count, destination, destination.position(), count * size));
    destination.position(destination.position() + (int) (count * size));
  }

  /**
   * Writes a primitive array of the dtype's Java type into slots starting at
   * {@code firstSlot}; one version step.
   *
   * @param firstSlot the first slot
   * @param source the values
   * @throws InvalidStateException when the carrier is owned, disposed or read-only
   */
  public final void write(long firstSlot, Object source) {
    DType dtype = dtype();
    Buffers.check(source, dtype);
    int n = Buffers.length(source);
    ByteBuffer b = Buffers.pack(source);
    run(h -> Native.carrier_write_buffer(h, firstSlot, n, b, 0, (long) n * dtype.size()));
  }

  /**
   * Writes the whole elements in a direct buffer's remaining bytes into slots from
   * {@code firstSlot}; one version step. The buffer's position advances past them.
   *
   * @param firstSlot the first slot
   * @param source a direct buffer
   */
  public final void write(long firstSlot, ByteBuffer source) {
    Buffers.checkDirect(source);
    int size = dtype().size();
    long count = source.remaining() / size;
    run(h -> Native.carrier_write_buffer(h, firstSlot, count, source, source.position(), count * size));
    source.position(source.position() + (int) (count * size));
  }

  /**
   * The carrier's memory as a direct buffer, without a copy (CPU carriers): slot i is at byte
   * {@code i * dtype().size()}, native byte order. The buffer keeps a reference to the carrier
   * while it is reachable, but the memory is valid only until the carrier is disposed (a
   * finished move out of it disposes it); writes through it bypass the version counter and
   * must not be made to a read-only carrier.
   *
   * @return the buffer
   * @throws UnsupportedFeatureException for carriers whose memory is not host addressable
   */
  public final ByteBuffer hostBuffer() {
    return call(h -> {
      long address = Native.carrier_host_pointer(h);
      long[] size = new long[1];
      Native.sw_carrier_size(h, size);
      int[] dtype = new int[1];
      Native.sw_carrier_dtype(h, dtype);
      long bytes = size[0] * DType.of(dtype[0]).size();
      if (bytes > Integer.MAX_VALUE) {
        throw new InvalidValueException("the carrier's " + bytes + " bytes do not fit one Java buffer");
      }
      ByteBuffer b = ((ByteBuffer) Native.direct_buffer(address, bytes)).order(ByteOrder.nativeOrder());
      Native.sw_carrier_retain(h);
      CLEANER.register(b, new Unretain(h));
      return b;
    });
  }

  /** Drops the reference a host buffer holds. */
  private static final class Unretain implements Runnable {
    private final long handle;

    Unretain(long handle) {
      this.handle = handle;
    }

    @Override
    public void run() {
      Native.sw_carrier_release(handle);
    }
  }
}
