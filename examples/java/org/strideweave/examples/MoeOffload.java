package org.strideweave.examples;

import java.io.IOException;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

import org.strideweave.AwaitMove;
import org.strideweave.AwaitProjection;
import org.strideweave.Carrier;
import org.strideweave.DType;
import org.strideweave.Device;
import org.strideweave.LruPolicy;
import org.strideweave.ScatterReduction;
import org.strideweave.StrideWeave;
import org.strideweave.StrideWeaveRuntime;
import org.strideweave.Tensor;
import org.strideweave.TileSelection;
import org.strideweave.TileSet;
import org.strideweave.TileState;
import org.strideweave.TiledEvictable;
import org.strideweave.UnsupportedFeatureException;

/**
 * MoE expert offloading with StrideWeave: the Java twin of {@code examples/c/moe_offload.c}.
 *
 * <p>A synthetic mixture-of-experts feed-forward layer keeps its expert weights (experts x dim
 * x dim) in one TiledEvictable, one expert per tile. The secondary tier (a file,
 * zstd-compressed memory or host memory) holds every expert; the primary tier (CPU memory, or
 * with {@code --compute vulkan} a Vulkan device's memory) holds at most a budget of them. A
 * router picks top-k experts per token batch from a skewed, repeatable distribution: the C
 * demo's generator (xorshift64*) with the C demo's seeds, so weights, tokens and routes are
 * the C demo's and so are the hits and the checksum it prints. The built-in LRU policy decides
 * what stays resident and prefetches the next batch's experts, and the projection of batch b+1
 * runs while batch b computes. The same routes then run with every expert resident and with
 * naive synchronous loading, and the final table compares the three. With {@code --train} the
 * layer is trained instead: backward through the projection gives tile-sparse gradients, an
 * SGD step adds them into the tiles in place, and evicted dirty experts are verified after
 * reloading them.
 *
 * <pre>
 *   java -cp strideweave-0.2.0.jar:examples org.strideweave.examples.MoeOffload
 *        [--experts 64] [--dim 1024] [--topk 4] [--tokens 32] [--batches 48]
 *        [--tier file|zstd|host] [--budget 0.25] [--dtype f32|bf16] [--policy lru|none]
 *        [--train] [--compute cpu|vulkan] [--csv FILE] [--dir DIR] [--quiet]
 * </pre>
 *
 * Exit status 0 on success, 1 when a check fails, 2 for bad arguments, 77 when
 * {@code --compute vulkan} finds no Vulkan device.
 */
public final class MoeOffload {
  private MoeOffload() {}

  /** The demo's options, as the C demo parses them. */
  static final class Options {
    int experts = 64;
    int dim = 1024;
    int topk = 4;
    int tokens = 32;
    int batches = 48;
    String tier = "file";
    double budget = 0.25;
    DType dtype = DType.F32;
    boolean usePolicy = true;
    boolean train;
    boolean quiet;
    String csv;
    String dir;
    String compute = "cpu";
    Device device; // --compute vulkan
  }

  /** One run's figures. */
  static final class RunStats {
    String name;
    double seconds;
    double waitSeconds;
    double checksum;
    long hits;
    long misses;
    long promoted;
    long evicted;
  }

  // ---- the C demo's generator: xorshift64* ----

  private static long rngState;

  private static double rngUniform() {
    rngState ^= rngState >>> 12;
    rngState ^= rngState << 25;
    rngState ^= rngState >>> 27;
    return (double) ((rngState * 2685821657736338717L) >>> 11) / 9007199254740992.0;
  }

  /** Top-k distinct experts per batch, Zipf-skewed (exponent 1.1) over a fixed shuffle. */
  static int[][] routeAll(Options o) {
    int[] order = new int[o.experts];
    double[] weight = new double[o.experts];
    rngState = 0x5eed1234abcdL;
    for (int e = 0; e < o.experts; ++e) {
      order[e] = e;
    }
    for (int e = o.experts - 1; e > 0; --e) {
      int j = (int) (rngUniform() * (e + 1));
      int t = order[e];
      order[e] = order[j];
      order[j] = t;
    }
    double total = 0;
    for (int r = 0; r < o.experts; ++r) {
      weight[r] = 1.0 / Math.pow(r + 1.0, 1.1);
      total += weight[r];
    }
    int[][] picks = new int[o.batches][o.topk];
    for (int b = 0; b < o.batches; ++b) {
      int[] p = picks[b];
      for (int k = 0; k < o.topk;) {
        double u = rngUniform() * total;
        double acc = 0;
        int r = 0;
        while (r < o.experts - 1 && (acc += weight[r]) < u) {
          ++r;
        }
        int e = order[r];
        boolean dup = false;
        for (int j = 0; j < k; ++j) {
          dup |= p[j] == e;
        }
        if (!dup) {
          p[k++] = e;
        }
      }
    }
    return picks;
  }

  static TileSelection selectionFor(int[] experts) {
    long[] axis = new long[experts.length];
    for (int k = 0; k < experts.length; ++k) {
      axis[k] = experts[k];
    }
    return TileSelection.of(axis, new long[] {0}, new long[] {0});
  }

  static TileSet tileSetFor(int[] experts) {
    long[][] coords = new long[experts.length][];
    for (int k = 0; k < experts.length; ++k) {
      coords[k] = new long[] {experts[k], 0, 0};
    }
    return TileSet.of(coords);
  }

  // ---- bf16, rounded to nearest even as the C demo does ----

  static short f32ToBf16(float v) {
    int bits = Float.floatToRawIntBits(v);
    bits += 0x7fff + ((bits >>> 16) & 1);
    return (short) (bits >>> 16);
  }

  static float bf16ToF32(short h) {
    return Float.intBitsToFloat((h & 0xffff) << 16);
  }

  /** The secondary tier holding every expert, tile-major, from the C demo's generator. */
  static Carrier makeSecondary(StrideWeaveRuntime rt, Options o, long seed) {
    int tile = o.dim * o.dim;
    long total = (long) tile * o.experts;
    Carrier c;
    if (o.tier.equals("file")) {
      c = Carrier.file(rt, o.dtype, total, o.dir == null ? null : Paths.get(o.dir));
    } else if (o.tier.equals("zstd")) {
      c = Carrier.zstd(rt, o.dtype, total, 1, tile);
    } else {
      c = Carrier.host(rt, o.dtype, total);
    }
    rngState = seed;
    double scale = 1.0 / Math.sqrt(o.dim);
    float[] f = new float[tile];
    short[] h = new short[tile];
    for (int e = 0; e < o.experts; ++e) {
      for (int i = 0; i < tile; ++i) {
        f[i] = (float) ((rngUniform() * 2.0 - 1.0) * scale);
        h[i] = f32ToBf16(f[i]);
      }
      c.write((long) e * tile, o.dtype == DType.F32 ? f : h);
    }
    return c;
  }

  static Carrier makePrimary(StrideWeaveRuntime rt, Options o) {
    return o.device != null ? Carrier.vulkan(rt, o.device, o.dtype, 0) : Carrier.cpu(rt, o.dtype, 0);
  }

  /** {@code t} moved to the primary tier's compute carrier, where the projected experts are. */
  static Tensor onCompute(StrideWeaveRuntime rt, Options o, Tensor t) {
    if (o.device == null) {
      return t;
    }
    try (Carrier c = Carrier.vulkan(rt, o.device, t.dtype(), 0); AwaitMove a = t.moveTo(c)) {
      return a.get();
    } finally {
      t.close();
    }
  }

  /** factor * g; a bf16 gradient is scaled on the host in f32 and rounded back once. */
  static Tensor scaled(StrideWeaveRuntime rt, Options o, Tensor g, double factor) {
    if (g.dtype() != DType.BF16) {
      return g.mul(factor);
    }
    short[] h = (short[]) g.toArray();
    for (int i = 0; i < h.length; ++i) {
      h[i] = f32ToBf16((float) (bf16ToF32(h[i]) * factor));
    }
    return onCompute(rt, o, Tensor.fromArray(rt, DType.BF16, h, g.shape()));
  }

  /** x: (1, dim, tokens), broadcast over the selected experts. */
  static Tensor makeTokens(StrideWeaveRuntime rt, Options o, int batch) {
    int n = o.dim * o.tokens;
    float[] v = new float[n];
    rngState = 0x70c3e5L + (long) batch * 7919L;
    for (int i = 0; i < n; ++i) {
      v[i] = (float) (rngUniform() * 2.0 - 1.0);
    }
    Tensor t;
    if (o.dtype == DType.F32) {
      t = Tensor.fromArray(rt, v, 1, o.dim, o.tokens);
    } else {
      short[] h = new short[n];
      for (int i = 0; i < n; ++i) {
        h[i] = f32ToBf16(v[i]);
      }
      t = Tensor.fromArray(rt, DType.BF16, h, 1, o.dim, o.tokens);
    }
    return onCompute(rt, o, t);
  }

  static Tensor makeTarget(StrideWeaveRuntime rt, Options o, int batch) {
    int n = o.dim * o.tokens;
    float[] v = new float[n];
    rngState = 0x7a26e7L + (long) batch * 104729L;
    for (int i = 0; i < n; ++i) {
      v[i] = (float) (rngUniform() - 0.5);
    }
    return onCompute(rt, o, Tensor.fromArray(rt, v, o.dim, o.tokens));
  }

  /** y = sum over the selected experts of W_e @ x -> (dim, tokens), f32 sums. */
  static Tensor expertLayer(Tensor w, Tensor x) {
    try (Tensor y = w.matmul(x, w.dtype() == DType.F64 ? null : DType.F32)) {
      return y.sum(false, 0);
    }
  }

  static double scalarOf(Tensor t) {
    try (Tensor s = t.sum()) {
      return s.get();
    }
  }

  /** How many of a batch's experts are primary as its projection is issued (no policy). */
  static int residentCount(TiledEvictable weights, int[] experts) {
    int n = 0;
    for (int e : experts) {
      n += weights.tileState(e, 0, 0).location() == TileState.Location.PRIMARY ? 1 : 0;
    }
    return n;
  }

  /** Makes the LRU policy's counters the run's; returns the hits since the last call. */
  static long takeLruCounters(LruPolicy lru, RunStats st) {
    LruPolicy.LruStats s = lru.stats();
    long hits = s.hits() - st.hits;
    st.hits = s.hits();
    st.misses = s.misses();
    st.promoted = s.promoted();
    st.evicted = s.evicted();
    return hits;
  }

  private static final String[] NAMES = {"offloaded", "resident", "naive"};
  private static final int OFFLOAD = 0;
  private static final int RESIDENT = 1;
  private static final int NAIVE = 2;

  static RunStats run(StrideWeaveRuntime rt, Options o, int[][] picks, int mode, PrintStream out, PrintWriter csv) {
    RunStats st = new RunStats();
    st.name = NAMES[mode];
    int budgetTiles = (int) Math.ceil(o.budget * o.experts);
    boolean withPolicy = mode == OFFLOAD && o.usePolicy;
    try (Carrier secondary = makeSecondary(rt, o, 0xa11ce5L);
         Carrier primary = makePrimary(rt, o);
         LruPolicy lru = withPolicy ? LruPolicy.create(budgetTiles) : null;
         TiledEvictable weights = TiledEvictable.create(primary, secondary, new long[] {o.experts, 1, 1},
             new long[] {1, o.dim, o.dim}, lru);
         Tensor full = weights.fullTensor()) {
      if (mode == RESIDENT) {
        weights.promote(weights.validTiles());
      }
      long t0 = System.nanoTime();
      AwaitProjection next = null;
      TileSelection nextSel = null;
      int nextHits = 0;
      for (int b = 0; b < o.batches; ++b) {
        int[] experts = picks[b];
        long tb = System.nanoTime();
        TileSelection sel = nextSel;
        AwaitProjection pending = next;
        int hits = nextHits;
        if (pending == null) {
          sel = selectionFor(experts);
          hits = lru != null ? 0 : residentCount(weights, experts);
          pending = weights.project(full, sel, null);
        }
        next = null;
        nextSel = null;
        long tw = System.nanoTime();
        Tensor w = pending.get();
        double waited = (System.nanoTime() - tw) * 1e-9;
        // This batch's request is the last one committed: the next is issued below.
        if (lru != null) {
          hits = (int) takeLruCounters(lru, st);
        }
        pending.close();
        if (mode == OFFLOAD && b + 1 < o.batches) {
          // Start the next batch's gather now, and hint the one after it.
          if (lru != null && b + 2 < o.batches) {
            lru.hint(tileSetFor(picks[b + 2]));
          }
          nextSel = selectionFor(picks[b + 1]);
          nextHits = lru != null ? 0 : residentCount(weights, picks[b + 1]);
          next = weights.project(full, nextSel, null);
        }
        try (Tensor x = makeTokens(rt, o, b); Tensor y = expertLayer(w, x)) {
          st.checksum += scalarOf(y);
        }
        w.close();
        if (mode == NAIVE) {
          weights.evict(sel.tileSet());
        }
        double latency = (System.nanoTime() - tb) * 1e-9;
        st.waitSeconds += waited;
        long hitsNow = hits;
        long missesNow = o.topk - hits;
        if (lru == null) {
          // Without a policy a projection promotes what it misses and nothing is evicted but
          // what the naive run evicts after each batch.
          st.hits += hitsNow;
          st.misses += missesNow;
          st.promoted += missesNow;
          if (mode == NAIVE) {
            st.evicted += o.topk;
          }
        }
        if (!o.quiet) {
          out.printf(Locale.ROOT, "[%-9s] batch %3d/%d  experts %2d,%2d,...  latency %s ms  waited %s ms  hits %d/%d%n",
              st.name, b + 1, o.batches, experts[0], experts[o.topk > 1 ? 1 : 0], f(latency * 1e3, 7, 2),
              f(waited * 1e3, 6, 2), hitsNow, o.topk);
        }
        if (csv != null) {
          csv.printf(Locale.ROOT, "%s,%d,%s,%s,%s%n", st.name, b, f(latency * 1e3, 0, 4), f(waited * 1e3, 0, 4),
              f((double) hitsNow / o.topk, 0, 4));
        }
      }
      st.seconds = (System.nanoTime() - t0) * 1e-9;
      if (lru != null) {
        takeLruCounters(lru, st); // promotions the last hint started
      }
      weights.dispose();
    }
    return st;
  }

  /** An FNV-1a digest of every weight's bytes, read through the full tensor, and their sum. */
  static long weightsDigest(Tensor full, Options o, double[] outSum) {
    Object values = full.toArray();
    long h = 0xcbf29ce484222325L;
    double sum = 0;
    if (values instanceof float[]) {
      for (float v : (float[]) values) {
        int bits = Float.floatToRawIntBits(v);
        for (int k = 0; k < 4; ++k) {
          h = (h ^ ((bits >>> (8 * k)) & 0xff)) * 0x100000001b3L;
        }
        sum += v;
      }
    } else {
      for (short v : (short[]) values) {
        for (int k = 0; k < 2; ++k) {
          h = (h ^ ((v >>> (8 * k)) & 0xff)) * 0x100000001b3L;
        }
        sum += bf16ToF32(v);
      }
    }
    outSum[0] = sum;
    return h;
  }

  /** Training: loss = 0.5 * || sum_e W_e x - target ||^2 with a fixed teacher. */
  static int train(StrideWeaveRuntime rt, Options o, int[][] picks, PrintStream out) {
    // An optimiser step updates a batch's experts together, so the budget holds at least
    // those (the LRU refuses an update larger than its budget).
    int budgetTiles = Math.max((int) Math.ceil(o.budget * o.experts), o.topk);
    try (Carrier secondary = makeSecondary(rt, o, 0xa11ce5L);
         Carrier primary = makePrimary(rt, o);
         LruPolicy lru = LruPolicy.create(budgetTiles);
         TiledEvictable weights = TiledEvictable.create(primary, secondary, new long[] {o.experts, 1, 1},
             new long[] {1, o.dim, o.dim}, lru);
         Tensor full = weights.fullTensor()) {
      full.requiresGrad(true);
      double lr = 1.0 / ((double) o.dim * o.topk);
      double first = 0;
      double last = 0;
      double early = 0;
      double late = 0;
      int window = o.batches / 4 > 0 ? o.batches / 4 : 1;
      for (int b = 0; b < o.batches; ++b) {
        TileSelection sel = selectionFor(picks[b]);
        List<AutoCloseable> scratch = new ArrayList<>();
        try {
          AwaitProjection a = keep(scratch, weights.project(full, sel, null));
          Tensor w = keep(scratch, a.get());
          Tensor x = keep(scratch, makeTokens(rt, o, b % 8));
          Tensor y = keep(scratch, expertLayer(w, x));
          // A fixed target per input batch: a regression the experts can fit.
          Tensor target = keep(scratch, makeTarget(rt, o, b % 8));
          Tensor neg = keep(scratch, target.mul(-1.0));
          Tensor diff = keep(scratch, y.add(neg));
          Tensor sq = keep(scratch, diff.elementwiseMul(diff));
          Tensor half = keep(scratch, sq.mul(0.5));
          Tensor lossT = keep(scratch, half.sum());
          double loss = lossT.get();
          lossT.backward();
          // SGD on the touched experts only: the gradient is a tiled tensor whose untouched
          // tiles are implicit zeros.
          Tensor grad = keep(scratch, full.grad());
          TiledEvictable gradTiles = (TiledEvictable) keep(scratch, grad.carrier());
          try (StrideWeave.GradMode off = StrideWeave.noGrad()) {
            Tensor g = keep(scratch, keep(scratch, gradTiles.project(grad, sel, null)).get());
            Tensor step = keep(scratch, scaled(rt, o, g, -lr));
            keep(scratch, weights.updateAsync(full, step, sel, ScatterReduction.ADD)).get();
          }
          full.clearGrad();
          if (b == 0) {
            first = loss;
          }
          last = loss;
          if (b < window) {
            early += loss / window;
          }
          if (b >= o.batches - window) {
            late += loss / window;
          }
          if (!o.quiet) {
            out.printf(Locale.ROOT, "[train    ] batch %3d/%d  loss %s%n", b + 1, o.batches, f(loss, 0, 6));
          }
        } finally {
          closeAll(scratch);
        }
      }
      // Dirty experts must survive eviction: read every expert, evict all, read them again.
      StrideWeave.setGradEnabled(false);
      int dirtyCount = weights.dirtyTiles().size();
      double[] sumBefore = new double[1];
      double[] sumAfter = new double[1];
      long hashBefore = weightsDigest(full, o, sumBefore);
      weights.evict(weights.primaryTiles());
      int still = weights.dirtyTiles().size();
      long hashAfter = weightsDigest(full, o, sumAfter);
      StrideWeave.setGradEnabled(true);
      out.printf(Locale.ROOT, "%ntraining: loss %s -> %s (mean of first %d batches %s, last %d %s)%n", f(first, 0, 6),
          f(last, 0, 6), window, f(early, 0, 6), window, f(late, 0, 6));
      out.printf(Locale.ROOT, "write-back: %d dirty experts evicted, %d still dirty, weight sum %s before and %s after "
          + "reload, %s%n", dirtyCount, still, f(sumBefore[0], 0, 6), f(sumAfter[0], 0, 6),
          hashBefore == hashAfter ? "every byte identical" : "BYTES DIFFER");
      boolean ok = late < early && still == 0 && hashBefore == hashAfter;
      out.println(ok ? "training verified: loss fell and every update survived eviction" : "TRAINING CHECK FAILED");
      weights.dispose();
      return ok ? 0 : 1;
    }
  }

  private static <T extends AutoCloseable> T keep(List<AutoCloseable> scratch, T value) {
    if (value != null) {
      scratch.add(value);
    }
    return value;
  }

  private static void closeAll(List<AutoCloseable> scratch) {
    for (int i = scratch.size() - 1; i >= 0; --i) {
      try {
        scratch.get(i).close();
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    }
  }

  // ---- C's printf, so that figures print as the C demo's do ----

  /** C's {@code %W.Pf}: the exact binary value rounded half-even, right-aligned in W. */
  static String f(double v, int width, int precision) {
    BigDecimal r = new BigDecimal(v).setScale(precision, RoundingMode.HALF_EVEN);
    String s = r.toPlainString();
    if (r.signum() == 0 && (v < 0 || 1 / v < 0)) {
      s = "-" + s; // C keeps the sign of a negative value that rounds to zero
    }
    return pad(s, width);
  }

  /** C's {@code %.Pg} (without '#'): P significant digits, trailing zeros dropped. */
  static String g(double v, int precision) {
    if (v == 0) {
      return (1 / v < 0) ? "-0" : "0";
    }
    BigDecimal r = new BigDecimal(v).round(new MathContext(precision, RoundingMode.HALF_EVEN));
    int exponent = r.precision() - r.scale() - 1;
    String s;
    if (exponent < -4 || exponent >= precision) {
      BigDecimal mantissa = r.movePointLeft(exponent);
      s = strip(mantissa.setScale(precision - 1, RoundingMode.HALF_EVEN).toPlainString())
          + (exponent < 0 ? "e-" : "e+") + (Math.abs(exponent) < 10 ? "0" : "") + Math.abs(exponent);
    } else {
      s = strip(r.setScale(Math.max(precision - 1 - exponent, 0), RoundingMode.HALF_EVEN).toPlainString());
    }
    return s;
  }

  private static String strip(String s) {
    if (!s.contains(".")) {
      return s;
    }
    s = s.replaceAll("0+$", "");
    return s.endsWith(".") ? s.substring(0, s.length() - 1) : s;
  }

  private static String pad(String s, int width) {
    StringBuilder b = new StringBuilder();
    for (int i = s.length(); i < width; ++i) {
      b.append(' ');
    }
    return b.append(s).toString();
  }

  private static String padRight(String s, int width) {
    StringBuilder b = new StringBuilder(s);
    while (b.length() < width) {
      b.append(' ');
    }
    return b.toString();
  }

  static Options parse(String[] args) {
    Options o = new Options();
    for (int i = 0; i < args.length; ++i) {
      String a = args[i];
      if (a.equals("--train")) {
        o.train = true;
        continue;
      }
      if (a.equals("--quiet")) {
        o.quiet = true;
        continue;
      }
      if (i + 1 >= args.length) {
        return null;
      }
      String v = args[++i];
      try {
        switch (a) {
          case "--experts": o.experts = Integer.parseInt(v); break;
          case "--dim": o.dim = Integer.parseInt(v); break;
          case "--topk": o.topk = Integer.parseInt(v); break;
          case "--tokens": o.tokens = Integer.parseInt(v); break;
          case "--batches": o.batches = Integer.parseInt(v); break;
          case "--tier": o.tier = v; break;
          case "--budget": o.budget = Double.parseDouble(v); break;
          case "--dtype": o.dtype = v.equals("bf16") ? DType.BF16 : DType.F32; break;
          case "--policy": o.usePolicy = !v.equals("none"); break;
          case "--csv": o.csv = v; break;
          case "--dir": o.dir = v; break;
          case "--compute": o.compute = v; break;
          default: return null;
        }
      } catch (NumberFormatException e) {
        return null;
      }
    }
    boolean ok = o.experts >= 1 && o.dim >= 1 && o.topk >= 1 && o.topk <= o.experts && o.tokens >= 1
        && o.batches >= 1 && o.budget > 0 && o.budget <= 1
        && (o.tier.equals("file") || o.tier.equals("zstd") || o.tier.equals("host"))
        && (o.compute.equals("cpu") || o.compute.equals("vulkan"));
    return ok ? o : null;
  }

  /**
   * Runs the demo.
   *
   * @param args the options (see the class comment)
   * @param out where it prints
   * @return the exit status
   * @throws IOException when the CSV file cannot be written
   */
  public static int run(String[] args, PrintStream out) throws IOException {
    Options o = parse(args);
    if (o == null) {
      System.err.println("usage: MoeOffload [--experts N] [--dim D] [--topk K] [--tokens T] [--batches B]\n"
          + "                  [--tier file|zstd|host] [--budget F] [--dtype f32|bf16]\n"
          + "                  [--policy lru|none] [--train] [--compute cpu|vulkan] [--csv FILE] [--dir DIR]\n"
          + "                  [--quiet]");
      return 2;
    }
    try (StrideWeaveRuntime rt = StrideWeaveRuntime.create()) {
      if (o.compute.equals("vulkan")) {
        try {
          o.device = Device.vulkan(rt);
        } catch (UnsupportedFeatureException e) {
          System.err.println("MoeOffload: no Vulkan device for --compute vulkan (" + e.code() + ": " + e.getMessage()
              + ")");
          return 77; // a skip, for the test runner
        }
      }
      try {
        return runWith(rt, o, out);
      } finally {
        if (o.device != null) {
          o.device.close();
        }
      }
    }
  }

  private static int runWith(StrideWeaveRuntime rt, Options o, PrintStream out) throws IOException {
    double mib = (double) o.experts * o.dim * o.dim * o.dtype.size() / (1 << 20);
    out.printf(Locale.ROOT, "StrideWeave %s MoE offload: %d experts of %dx%d %s (%s MiB) on the %s tier, top-%d of %d "
        + "tokens per batch, primary budget %s%% (%d experts) in %s memory, policy %s%n%n", StrideWeave.versionString(),
        o.experts, o.dim, o.dim, o.dtype.label(), f(mib, 0, 0), o.tier, o.topk, o.tokens, f(o.budget * 100, 0, 0),
        (int) Math.ceil(o.budget * o.experts), o.device != null ? "Vulkan device" : "CPU",
        o.usePolicy ? "LRU + prefetch" : "none");
    int[][] picks = routeAll(o);
    if (o.train) {
      return train(rt, o, picks, out);
    }
    RunStats[] r = new RunStats[3];
    PrintWriter csv = o.csv == null ? null : new PrintWriter(Files.newBufferedWriter(Path.of(o.csv)));
    try {
      if (csv != null) {
        csv.println("run,batch,latency_ms,wait_ms,hit_rate");
      }
      for (int mode = 0; mode < 3; ++mode) {
        r[mode] = run(rt, o, picks, mode, out, csv);
      }
    } finally {
      if (csv != null) {
        csv.close();
      }
    }
    double tileMib = (double) o.dim * o.dim * o.dtype.size() / (1 << 20);
    out.printf(Locale.ROOT, "%n%-10s %12s %10s %10s %14s %14s %12s%n", "run", "tokens/s", "hit rate", "wait s",
        "promoted MiB", "evicted MiB", "vs resident");
    for (int i = 0; i < 3; ++i) {
      double hits = r[i].hits;
      double total = r[i].hits + r[i].misses;
      out.println(padRight(r[i].name, 10) + " " + f(o.batches * o.tokens / r[i].seconds, 12, 0) + " "
          + f(total > 0 ? 100.0 * hits / total : 0.0, 9, 1) + "% " + f(r[i].waitSeconds, 10, 3) + " "
          + f(r[i].promoted * tileMib, 14, 1) + " " + f(r[i].evicted * tileMib, 14, 1) + " "
          + f(r[1].seconds / r[i].seconds, 11, 2) + "x");
    }
    boolean same = Math.abs(r[0].checksum - r[1].checksum) <= 1e-6 * Math.abs(r[1].checksum)
        && Math.abs(r[2].checksum - r[1].checksum) <= 1e-6 * Math.abs(r[1].checksum);
    out.printf(Locale.ROOT, "%noffloaded is %sx faster than naive loading; outputs %s (checksum %s)%n",
        f(r[2].seconds / r[0].seconds, 0, 2), same ? "identical across runs" : "DIFFER", g(r[1].checksum, 6));
    return same ? 0 : 1;
  }

  /**
   * The command line entry point.
   *
   * @param args the options (see the class comment)
   * @throws IOException when the CSV file cannot be written
   */
  public static void main(String[] args) throws IOException {
    System.exit(run(args, System.out));
  }
}
