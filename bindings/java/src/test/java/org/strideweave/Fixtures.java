package org.strideweave;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.function.Function;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.function.Executable;

/** Shared fixtures: a runtime per test, seeded TiledEvictables, exact-kind assertions, holds. */
abstract class Fixtures {
  StrideWeaveRuntime rt;

  @BeforeEach
  void createRuntime() {
    rt = StrideWeaveRuntime.create();
  }

  @AfterEach
  void shutdownRuntime() {
    rt.shutdown();
    rt.close();
  }

  /** Which secondary tier a seeded TiledEvictable uses. */
  enum Tier { HOST, FILE, ZSTD }

  Carrier secondary(Tier tier, long size) {
    switch (tier) {
      case FILE: return Carrier.file(rt, DType.F32, size, null);
      case ZSTD: return Carrier.zstd(rt, DType.F32, size, 1, 0);
      default: return Carrier.host(rt, DType.F32, size);
    }
  }

  /**
   * A TiledEvictable whose secondary tier holds {@code values} (tiles one after another, each
   * first mode fastest) and whose primary is a new empty CPU carrier.
   */
  TiledEvictable seeded(float[] values, long[] grid, long[] tile, Tier tier, ResidencyPolicy policy) {
    try (Carrier sec = secondary(tier, values.length); Carrier primary = Carrier.cpu(rt, DType.F32, 0)) {
      if (values.length > 0) {
        sec.write(0, values);
      }
      return TiledEvictable.create(primary, sec, grid, tile, policy);
    }
  }

  static float[] arange(int n, float scale, float shift) {
    float[] v = new float[n];
    for (int i = 0; i < n; ++i) {
      v[i] = i * scale + shift;
    }
    return v;
  }

  static long prod(long[] a) {
    long p = 1;
    for (long x : a) {
      p *= x;
    }
    return p;
  }

  /** The logical values (first mode fastest) of a tiled carrier seeded with {@code values}. */
  static float[] tilesToLogical(float[] values, long[] grid, long[] tile) {
    int rank = grid.length;
    long[] logical = new long[rank];
    for (int i = 0; i < rank; ++i) {
      logical[i] = grid[i] * tile[i];
    }
    float[] out = new float[values.length];
    int per = (int) prod(tile);
    for (int s = 0; s < values.length; ++s) {
      long rest = s;
      long tileOrdinal = 0;
      long within = 0;
      long gm = 1;
      long tm = 1;
      for (int i = 0; i < rank; ++i) {
        long x = rest % logical[i];
        rest /= logical[i];
        tileOrdinal += (x / tile[i]) * gm;
        within += (x % tile[i]) * tm;
        gm *= grid[i];
        tm *= tile[i];
      }
      out[s] = values[(int) (tileOrdinal * per + within)];
    }
    return out;
  }

  /** The first-mode-fastest ordinal of {@code coord} in {@code shape}. */
  static int ordinal(long[] shape, long... coord) {
    long o = 0;
    long m = 1;
    for (int i = 0; i < shape.length; ++i) {
      o += coord[i] * m;
      m *= shape[i];
    }
    return (int) o;
  }

  /** Asserts {@code call} throws exactly {@code cls} and returns the exception. */
  static <T extends Throwable> T exact(Class<T> cls, Executable call) {
    Throwable t = assertThrows(Throwable.class, call);
    assertSame(cls, t.getClass(), () -> "got " + t.getClass().getName() + ": " + t.getMessage());
    if (t instanceof StrideWeaveError) {
      assertEquals(ErrorCode.class, ((StrideWeaveError) t).code().getClass());
    }
    return cls.cast(t);
  }

  static TileSet tiles1(long... coords) {
    long[][] c = new long[coords.length][];
    for (int i = 0; i < coords.length; ++i) {
      c[i] = new long[] {coords[i]};
    }
    return TileSet.of(c);
  }

  static TileSelection sel(long[]... perAxis) {
    return TileSelection.of(perAxis);
  }

  static long[] l(long... v) {
    return v;
  }

  /**
   * Holds the next asynchronous storage read (or write) of this runtime in flight until the
   * returned hold is closed (sw_testing_hold): work that needs it stays pending,
   * deterministically.
   */
  final class Hold implements AutoCloseable {
    private final int kind;

    Hold(boolean write) {
      kind = write ? 3 : 2; // SW_FAULT_WRITE, SW_FAULT_READ
      rt.run(h -> Native.sw_testing_hold(h, kind, 1));
    }

    /** Blocks until the held transfer is caught. */
    void caught() {
      rt.run(h -> Native.sw_testing_wait_held(h, 60_000_000_000L));
    }

    @Override
    public void close() {
      rt.run(h -> {
        Native.sw_testing_hold(h, kind, 0);
        try {
          Native.sw_testing_release_hold(h);
        } catch (InvalidStateException e) {
          // released already, or the transfer never came
        }
      });
    }
  }

  Hold hold() {
    return new Hold(false);
  }

  /** Elements per tile where a test needs work still pending. */
  static final int BIG = 1 << 21;

  TiledEvictable bigTiled(int tiles) {
    float[] ones = new float[tiles * BIG];
    java.util.Arrays.fill(ones, 1f);
    return seeded(ones, l(tiles), l(BIG), Tier.FILE, null);
  }

  static <A, B> B with(A a, Function<A, B> f) {
    return f.apply(a);
  }
}
