package org.strideweave;

/**
 * Library-wide facts and the per-thread autograd switch.
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
