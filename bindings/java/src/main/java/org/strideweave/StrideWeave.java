package org.strideweave;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Library-wide facts, the per-thread autograd switch, and saving tensors to model files
 * ({@link #saveSafetensors}, {@link #saveNpy}; {@link Carrier#openNpy} and
 * {@link Carrier#openSafetensors} open them).
 *
 * <p>Grad mode is per thread and on by default:
 *
 * <pre>{@code
 * try (StrideWeave.GradMode off = StrideWeave.noGrad()) {
 *   // ops here record no autograd nodes
 * }
 * }</pre>
 */
public final class StrideWeave {
  private StrideWeave() {}

  /** The largest rank tensors, layouts and tile grids take ({@code SW_MAX_RANK}). */
  public static final int MAX_RANK = 16;

  /**
   * The loaded library's version, packed as {@code major << 22 | minor << 12 | patch}.
   *
   * @return the version
   */
  public static int version() {
    return (int) Native.sw_version();
  }

  /**
   * The loaded library's version as {@code "major.minor.patch"}.
   *
   * @return the version
   */
  public static String versionString() {
    return Native.sw_version_string();
  }

  /**
   * Saves tensors to a {@code .safetensors} file ({@code sw_save_safetensors}), in the map's
   * iteration order (use a {@link java.util.LinkedHashMap} to choose it), each with its shape and
   * its own indexing: what the safetensors readers give back as {@code tensor[c]} is
   * {@code tensor.get(c)}, so save {@link FileTensor#view} to keep a file's {@code (E, O, I)}
   * indexing. A tensor of a TiledEvictable is read tile by tile from the tier each tile is in,
   * dirty values included, with no promotion. The file is written under a temporary name beside
   * {@code path} and renamed over it at the end: a failure leaves nothing.
   *
   * @param path the file to write
   * @param tensors name to tensor
   * @throws InvalidValueException for an empty or duplicate name, or the name "__metadata__"
   * @throws StorageIOException when the file cannot be written
   */
  public static void saveSafetensors(Path path, Map<String, Tensor> tensors) {
    saveSafetensors(path, tensors, Map.of());
  }

  /**
   * {@link #saveSafetensors(Path, Map)} with string pairs written as the file's
   * {@code "__metadata__"} (Hugging Face writes {@code {"format": "pt"}}).
   *
   * @param path the file to write
   * @param tensors name to tensor
   * @param metadata key to value
   */
  public static void saveSafetensors(Path path, Map<String, Tensor> tensors, Map<String, String> metadata) {
    byte[] p = CStrings.of(path, "path");
    Objects.requireNonNull(tensors, "tensors");
    Objects.requireNonNull(metadata, "metadata");
    List<String> names = new ArrayList<>();
    List<Tensor> values = new ArrayList<>();
    for (Map.Entry<String, Tensor> e : tensors.entrySet()) {
      names.add(e.getKey());
      values.add(Objects.requireNonNull(e.getValue(), "tensors[" + e.getKey() + "]"));
    }
    List<String> keys = new ArrayList<>();
    List<String> texts = new ArrayList<>();
    for (Map.Entry<String, String> e : metadata.entrySet()) {
      keys.add(e.getKey());
      texts.add(e.getValue());
    }
    Object[] n = CStrings.strings(names, "names");
    Object[] k = CStrings.strings(keys, "metadata keys");
    Object[] v = CStrings.strings(texts, "metadata values");
    long[] handles = new long[values.size()];
    int held = 0;
    try {
      for (; held < handles.length; ++held) {
        handles[held] = values.get(held).begin();
      }
      Native.save_safetensors(p, n, handles, k, v);
    } finally {
      for (int i = 0; i < held; ++i) {
        values.get(i).end();
      }
    }
  }

  /**
   * Saves one tensor to a {@code .npy} file (format 1.0, C order; {@code sw_save_npy}) that
   * {@code numpy.load} reads back with the tensor's shape and indexing; written as
   * {@link #saveSafetensors(Path, Map)} writes.
   *
   * @param path the file to write
   * @param tensor the tensor
   * @throws UnsupportedFeatureException for bf16, which NumPy has no dtype for
   * @throws StorageIOException when the file cannot be written
   */
  public static void saveNpy(Path path, Tensor tensor) {
    byte[] p = CStrings.of(path, "path");
    Objects.requireNonNull(tensor, "tensor").run(h -> Native.save_npy(p, h));
  }

  /**
   * Whether the calling thread records autograd nodes.
   *
   * @return the thread's grad mode
   */
  public static boolean isGradEnabled() {
    return Native.sw_is_grad_enabled();
  }

  /**
   * Sets the calling thread's grad mode.
   *
   * @param enabled the new mode
   * @return the previous mode
   */
  public static boolean setGradEnabled(boolean enabled) {
    return Native.sw_set_grad_enabled(enabled);
  }

  /**
   * Turns grad mode off on this thread until the returned scope is closed, which restores the
   * previous mode.
   *
   * @return the scope
   */
  public static GradMode noGrad() {
    return new GradMode(setGradEnabled(false));
  }

  /** A scope of grad mode; {@link #close()} restores the mode it replaced. */
  public static final class GradMode implements AutoCloseable {
    private final boolean previous;
    private final Thread thread = Thread.currentThread();
    private boolean closed;

    private GradMode(boolean previous) {
      this.previous = previous;
    }

    /** Restores the previous grad mode (once; on the thread that opened the scope). */
    @Override
    public void close() {
      if (!closed && Thread.currentThread() == thread) {
        closed = true;
        setGradEnabled(previous);
      }
    }
  }
}
