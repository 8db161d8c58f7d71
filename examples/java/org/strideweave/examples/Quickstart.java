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

public final class Quickstart {
  public static void main(String[] args) {
    run(System.out);
  }

  static void run(PrintStream out) {
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
      // secondary tier); at most 2 of them in CPU memory (the primary). Experts are the last
      // mode: grid (1, 1, E), tile (K, N, 1), the geometry expertMatmul and expertFfn take.
      int experts = 8;
      int dim = 64;
      float[] weights = new float[experts * dim * dim]; // expert after expert, each first mode fastest
      Random random = new Random(0);
      for (int i = 0; i < weights.length; ++i) {
        weights[i] = (float) random.nextGaussian();
      }
      try (Carrier secondary = Carrier.file(rt, DType.F32, weights.length, null);
           Carrier primary = Carrier.cpu(rt, DType.F32, 0);
           LruPolicy lru = LruPolicy.create(2)) {
        secondary.write(0, weights);
        try (TiledEvictable table = TiledEvictable.create(primary, secondary, new long[] {1, 1, experts},
                 new long[] {dim, dim, 1}, lru);
             Tensor full = table.fullTensor()) {                  // (64, 64, 8), logical
          TileSelection chosen = TileSelection.of(new long[] {0}, new long[] {0}, new long[] {5, 2});
          try (AwaitProjection pending = table.project(full, chosen, null); // promotes and gathers meanwhile
               Tensor x = Tensor.fromArray(rt, ones(dim * 4), dim, 4);
               Tensor compact = pending.get();                     // (64, 64, 2): experts 5 and 2
               Tensor w = compact.permute(2, 0, 1);                // (2, 64, 64), a free view
               Tensor y = w.matmul(x)) {                           // (2, 64, 4)
            float rowSum = 0;
            for (int n = 0; n < dim; ++n) {
              rowSum += weights[5 * dim * dim + n * dim];        // expert 5, row 0, column n
            }
            if (Math.abs(y.get(0, 0, 0) - rowSum) > 1e-3) {
              throw new AssertionError("expert 5 does not multiply as expected");
            }
            out.println(Arrays.toString(w.shape()) + " " + Arrays.toString(y.shape()) + " "
                + table.primaryTiles().size() + " " + lru.stats());
          }
          table.dispose(); // both tiers go, the scratch file with them
        }
      }
    }
  }

  static float[] ones(int n) {
    float[] v = new float[n];
    Arrays.fill(v, 1f);
    return v;
  }
}
