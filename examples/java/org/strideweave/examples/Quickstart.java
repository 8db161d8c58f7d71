package org.strideweave.examples;

import java.io.PrintStream;
import java.util.Arrays;
import java.util.Random;

import org.strideweave.AwaitProjection;
import org.strideweave.Carrier;
import org.strideweave.DType;
import org.strideweave.LruPolicy;
import org.strideweave.StrideWeaveRuntime;
import org.strideweave.Tensor;
import org.strideweave.TileSelection;
import org.strideweave.TiledEvictable;

/** The snippet of docs/quickstart-java.md, as a program (the suite runs it and checks its output). */
public final class Quickstart {
  private Quickstart() {}

  /**
   * Runs the snippet.
   *
   * @param out where it prints
   */
  public static void run(PrintStream out) {
    // --- docs/quickstart-java.md ---
    try (StrideWeaveRuntime rt = StrideWeaveRuntime.create()) {
      // Tensors, ops and autograd: NumPy shapes and broadcasting, first-mode-fastest storage.
      // The 2x3 matrix [[1, 2, 3], [4, 5, 6]] lists its first mode fastest: 1, 4, 2, 5, 3, 6.
      try (Tensor a = Tensor.fromArray(rt, new float[] {1, 4, 2, 5, 3, 6}, 2, 3).requiresGrad(true);
           Tensor minusTen = Tensor.fromArray(rt, new float[] {-10}, 1);
           Tensor loss = a.matmul(a.transpose(0, 1)).add(minusTen).relu().sum()) {
        loss.backward();
        out.println(loss.get() + " " + Arrays.toString(a.grad().toFloatArray()));
      }

      // A TiledEvictable: 8 experts of 64x64 f32, one per tile, kept in a scratch file (the
      // secondary tier); at most 2 of them in CPU memory (the primary).
      int experts = 8;
      int dim = 64;
      float[] weights = new float[experts * dim * dim]; // tile after tile, each first mode fastest
      Random random = new Random(0);
      for (int i = 0; i < weights.length; ++i) {
        weights[i] = (float) random.nextGaussian();
      }
      try (Carrier secondary = Carrier.file(rt, DType.F32, weights.length, null);
           Carrier primary = Carrier.cpu(rt, DType.F32, 0);
           LruPolicy lru = LruPolicy.create(2)) {
        secondary.write(0, weights);
        try (TiledEvictable table = TiledEvictable.create(primary, secondary, new long[] {experts, 1, 1},
                 new long[] {1, dim, dim}, lru);
             Tensor full = table.fullTensor()) {                  // (8, 64, 64), logical
          TileSelection chosen = TileSelection.of(new long[] {5, 2}, new long[] {0}, new long[] {0});
          try (AwaitProjection pending = table.project(full, chosen, null); // promotes and gathers meanwhile
               Tensor x = Tensor.fromArray(rt, ones(dim * 4), dim, 4);
               Tensor compact = pending.get();                     // (2, 64, 64): experts 5 and 2
               Tensor y = compact.matmul(x)) {                     // (2, 64, 4)
            float rowSum = 0;
            for (int k = 0; k < dim; ++k) {
              rowSum += weights[5 * dim * dim + k * dim];        // expert 5, row 0, column k
            }
            if (Math.abs(y.get(0, 0, 0) - rowSum) > 1e-3) {
              throw new AssertionError("expert 5 does not multiply as expected");
            }
            out.println(Arrays.toString(compact.shape()) + " " + Arrays.toString(y.shape()) + " "
                + table.primaryTiles().size() + " " + lru.stats());
          }
          table.dispose(); // both tiers go, the scratch file with them
        }
      }
    }
    // --- end ---
  }

  static float[] ones(int n) {
    float[] v = new float[n];
    Arrays.fill(v, 1f);
    return v;
  }

  /**
   * The command line entry point.
   *
   * @param args none
   */
  public static void main(String[] args) {
    run(System.out);
  }
}
