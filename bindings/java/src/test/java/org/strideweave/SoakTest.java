package org.strideweave;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * A bounded concurrency soak: threads project, update (scatter-add in place), promote and
 * evict one shared TiledEvictable under the LRU policy. Refusals (STATE: a conflicting request)
 * are counted, not failed; every update that succeeded is in a ledger, and the final values
 * must equal the seed plus the ledger's sum, computed sequentially.
 */
class SoakTest extends Fixtures {
  static final int TILES = 12;
  static final int TILE = 64;
  static final int THREADS = 4;
  static final int OPS = 150;

  @Test
  void threadsShareOneTiledEvictableUnderTheLruPolicy() throws Exception {
    float[] seed = arange(TILES * TILE, 1, 0);
    long[][] ledger = new long[THREADS][TILES]; // per thread: sum of deltas added to each tile
    AtomicLong done = new AtomicLong();
    AtomicLong refused = new AtomicLong();
    AtomicReference<Throwable> failure = new AtomicReference<>();
    try (LruPolicy lru = LruPolicy.create(4); TiledEvictable te = seeded(seed, l(TILES), l(TILE), Tier.FILE, lru);
         Tensor full = te.fullTensor()) {
      List<Thread> threads = new ArrayList<>();
      for (int k = 0; k < THREADS; ++k) {
        int me = k;
        threads.add(new Thread(() -> {
          long rng = 0x9e3779b97f4a7c15L * (me + 1);
          try {
            for (int op = 0; op < OPS; ++op) {
              rng ^= rng << 13;
              rng ^= rng >>> 7;
              rng ^= rng << 17;
              int tile = Math.floorMod(rng, TILES);
              int other = (tile + 1 + Math.floorMod(rng >>> 8, TILES - 1)) % TILES;
              int kind = Math.floorMod(rng >>> 16, 5);
              try {
                switch (kind) {
                  case 0: {
                    try (AwaitProjection p = te.project(full, sel(l(tile, other)), null); Tensor c = p.get()) {
                      assertArrayEquals(l(2L * TILE), c.shape());
                    }
                    break;
                  }
                  case 1: {
                    int delta = 1 + Math.floorMod(rng >>> 24, 3);
                    float[] step = new float[TILE];
                    java.util.Arrays.fill(step, delta);
                    try (Tensor s = Tensor.fromArray(rt, step, TILE);
                         AwaitMove u = te.updateAsync(full, s, sel(l(tile)), ScatterReduction.ADD)) {
                      u.get();
                    }
                    ledger[me][tile] += delta;
                    break;
                  }
                  case 2:
                    try (AwaitResidency r = te.promoteAsync(tiles1(tile))) {
                      r.get();
                    }
                    break;
                  case 3:
                    try (AwaitResidency r = te.evictAsync(tiles1(tile, other))) {
                      r.get();
                    }
                    break;
                  default:
                    try (Tensor s = full.sum()) {
                      assertTrue(s.get() > 0);
                    }
                }
                done.incrementAndGet();
              } catch (InvalidStateException e) {
                refused.incrementAndGet(); // a conflicting request: refused, changing nothing
              }
            }
          } catch (Throwable t) {
            failure.compareAndSet(null, t);
          }
        }, "soak-" + k));
      }
      for (Thread t : threads) {
        t.start();
      }
      for (Thread t : threads) {
        t.join();
      }
      if (failure.get() != null) {
        throw new AssertionError(failure.get());
      }
      assertEquals((long) THREADS * OPS, done.get() + refused.get());
      assertTrue(done.get() > 0);
      float[] want = seed.clone();
      for (long[] thread : ledger) {
        for (int t = 0; t < TILES; ++t) {
          for (int i = 0; i < TILE; ++i) {
            want[t * TILE + i] += thread[t];
          }
        }
      }
      assertArrayEquals(want, full.toFloatArray());
      // Every dirty value survives eviction.
      te.evict(te.primaryTiles());
      assertEquals(TileSet.empty(), te.dirtyTiles());
      assertArrayEquals(want, full.toFloatArray());
      System.out.println("soak: " + done.get() + " operations done, " + refused.get() + " refused");
    }
  }
}
