/*
 * TiledEvictable benchmarks, each with its peer in the same run:
 *
 *  1. projection of primary-resident tiles (8 of 64 experts of 1024x1024 f32)
 *     into a reused destination, against memcpy of the same bytes into a
 *     reused buffer with the same threads;
 *  2. an MoE-style loop whose selected experts must first be promoted from the
 *     file tier while the previous batch computes, against max(compute,
 *     transfer) measured separately (target: step <= 1.15 x max).
 *
 *   bench_tiled [--threads N] [--reps R]
 * Prints a table and a BENCH_JSON line.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "strideweave/strideweave.h"

#define CHECK(expr)                                                                                    \
  do {                                                                                                 \
    sw_error_t* e_ = (expr);                                                                           \
    if (e_) {                                                                                          \
      fprintf(stderr, "bench_tiled: %s: %s: %s\n", #expr, sw_error_code_name(sw_error_code(e_)),       \
              sw_error_message(e_));                                                                   \
      exit(1);                                                                                         \
    }                                                                                                  \
  } while (0)

enum { EXPERTS = 64, DIM = 1024, PICK = 8 };
static const size_t TILE = (size_t)DIM * DIM;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof(double), cmp_double);
  return v[n / 2];
}

/* ---- memcpy peer with N threads ------------------------------------------- */

typedef struct copy_job {
  float** src;
  float* dst;
  int first, last; /* tiles */
} copy_job;

static void* copy_tiles(void* arg) {
  copy_job* j = arg;
  for (int t = j->first; t < j->last; ++t) memcpy(j->dst + (size_t)t * TILE, j->src[t], TILE * sizeof(float));
  return NULL;
}

static double memcpy_peer(float** src, float* dst, int threads) {
  pthread_t th[16];
  copy_job jobs[16];
  const double t0 = now();
  for (int i = 0; i < threads; ++i) {
    jobs[i] = (copy_job){src, dst, PICK * i / threads, PICK * (i + 1) / threads};
    if (i) pthread_create(&th[i], NULL, copy_tiles, &jobs[i]);
  }
  copy_tiles(&jobs[0]);
  for (int i = 1; i < threads; ++i) pthread_join(th[i], NULL);
  return now() - t0;
}

static sw_tile_selection_t* selection(const int* experts, int n) {
  int64_t ax[64];
  for (int i = 0; i < n; ++i) ax[i] = experts[i];
  const int64_t zero = 0;
  const int64_t* axes[3] = {ax, &zero, &zero};
  const size_t counts[3] = {(size_t)n, 1, 1};
  sw_tile_selection_t* s = NULL;
  CHECK(sw_tile_selection_create(axes, counts, 3, &s));
  return s;
}

static void fill(float* p, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
  }
}

int main(int argc, char** argv) {
  int threads = 2, reps = 15;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
  }
  if (threads < 1 || threads > 16 || reps < 3) {
    fprintf(stderr, "usage: bench_tiled [--threads 1..16] [--reps >=3]\n");
    return 2;
  }
  sw_runtime_desc_t desc;
  sw_runtime_desc_init(&desc);
  desc.compute_threads = (uint32_t)threads;
  sw_runtime_t* rt = NULL;
  CHECK(sw_runtime_create(&desc, &rt));

  /* ---- 1. projection of resident tiles vs memcpy ---------------------------- */
  float* seed = malloc(EXPERTS * TILE * sizeof(float));
  fill(seed, EXPERTS * TILE, 7);
  sw_carrier_t *primary, *secondary, *te, *dest;
  CHECK(sw_carrier_create_cpu_from(rt, SW_DTYPE_F32, seed, EXPERTS * TILE, &primary));
  CHECK(sw_carrier_create_host(rt, SW_DTYPE_F32, 0, &secondary));
  const int64_t grid[3] = {EXPERTS, 1, 1}, tile[3] = {1, DIM, DIM};
  CHECK(sw_tiled_create(primary, secondary, grid, tile, 3, NULL, &te));
  sw_tensor_t* full;
  CHECK(sw_tiled_full_tensor(te, &full));
  CHECK(sw_carrier_create_cpu(rt, SW_DTYPE_F32, PICK * TILE, &dest));
  const int picks[PICK] = {3, 17, 42, 5, 60, 11, 29, 50};
  sw_tile_selection_t* sel = selection(picks, PICK);
  double* t_proj = malloc(sizeof(double) * reps);
  double* t_copy = malloc(sizeof(double) * reps);
  float* tiles[PICK];
  for (int i = 0; i < PICK; ++i) tiles[i] = seed + (size_t)picks[i] * TILE;
  float* peer_dst = malloc(PICK * TILE * sizeof(float));
  memset(peer_dst, 0, PICK * TILE * sizeof(float));
  for (int r = -2; r < reps; ++r) {
    double t0 = now();
    sw_await_t* a;
    CHECK(sw_tiled_project(te, full, sel, dest, &a));
    CHECK(sw_await_wait(a, -1));
    sw_tensor_t* out;
    CHECK(sw_await_result(a, &out));
    const double tp = now() - t0;
    sw_tensor_release(out);
    sw_await_release(a);
    const double tc = memcpy_peer(tiles, peer_dst, threads);
    if (r >= 0) {
      t_proj[r] = tp;
      t_copy[r] = tc;
    }
  }
  const double bytes = (double)PICK * TILE * sizeof(float);
  const double gp = bytes / median(t_proj, reps) / 1e9, gc = bytes / median(t_copy, reps) / 1e9;

  /* ---- 2. MoE loop with promotion from the file tier -------------------------- */
  const int batches = 24, topk = 4, tokens = 64;
  sw_carrier_t *fprim, *ffile, *fte;
  CHECK(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 0, &fprim));
  CHECK(sw_carrier_create_file(rt, SW_DTYPE_F32, EXPERTS * TILE, NULL, &ffile));
  CHECK(sw_carrier_write(ffile, 0, EXPERTS * TILE, seed));
  CHECK(sw_tiled_create(fprim, ffile, grid, tile, 3, NULL, &fte));
  sw_tensor_t* ffull;
  CHECK(sw_tiled_full_tensor(fte, &ffull));
  float* xv = malloc((size_t)DIM * tokens * sizeof(float));
  fill(xv, (size_t)DIM * tokens, 11);
  const int64_t xe[3] = {1, DIM, tokens};
  sw_tensor_t* x;
  CHECK(sw_tensor_from_data(rt, SW_DTYPE_F32, xe, 3, xv, &x));
  int order[batches * topk];
  for (int i = 0; i < batches * topk; ++i) order[i] = (i * 7 + i / topk) % EXPERTS; /* mostly new experts */
  for (int b = 0; b < batches; ++b)  /* distinct within a batch */
    for (int k = 0; k < topk; ++k) order[b * topk + k] = (b * topk + k) % EXPERTS;
  sw_tile_set_t* all;
  CHECK(sw_tiled_tiles(fte, SW_TILES_PRIMARY, &all));
  /* transfer alone: project from the file tier (page cache), then evict */
  double transfer = 0, compute = 0, pipelined = 0;
  for (int pass = 0; pass < 3; ++pass) {
    double t0 = now();
    for (int b = 0; b < batches; ++b) {
      sw_tile_selection_t* s = selection(order + b * topk, topk);
      sw_await_t* a;
      CHECK(sw_tiled_project(fte, ffull, s, NULL, &a));
      CHECK(sw_await_wait(a, -1));
      sw_tensor_t* w;
      CHECK(sw_await_result(a, &w));
      if (pass == 1) {
        /* compute alone on the already projected weights */
      }
      CHECK(sw_tiled_evict(fte, s));
      sw_tensor_release(w);
      sw_await_release(a);
      sw_tile_selection_release(s);
    }
    if (pass > 0) transfer = now() - t0; /* first pass warms the page cache */
  }
  {
    /* compute alone: matmul + reduction on resident compact weights */
    sw_tile_selection_t* s = selection(order, topk);
    sw_await_t* a;
    CHECK(sw_tiled_project(fte, ffull, s, NULL, &a));
    CHECK(sw_await_wait(a, -1));
    sw_tensor_t* w;
    CHECK(sw_await_result(a, &w));
    double t0 = now();
    for (int b = 0; b < batches; ++b) {
      sw_tensor_t *y, *z;
      const int64_t ax0 = 0;
      CHECK(sw_matmul(w, x, &y));
      CHECK(sw_reduce_sum(y, &ax0, 1, false, &z));
      sw_tensor_release(z);
      sw_tensor_release(y);
    }
    compute = now() - t0;
    CHECK(sw_tiled_evict(fte, s));
    sw_tensor_release(w);
    sw_await_release(a);
    sw_tile_selection_release(s);
  }
  {
    double t0 = now();
    sw_tile_selection_t* s = selection(order, topk);
    sw_await_t* next;
    CHECK(sw_tiled_project(fte, ffull, s, NULL, &next));
    for (int b = 0; b < batches; ++b) {
      CHECK(sw_await_wait(next, -1));
      sw_tensor_t* w;
      CHECK(sw_await_result(next, &w));
      sw_await_release(next);
      sw_tile_selection_t* done = s;
      s = NULL;
      next = NULL;
      if (b + 1 < batches) {
        s = selection(order + (b + 1) * topk, topk);
        CHECK(sw_tiled_project(fte, ffull, s, NULL, &next));
      }
      sw_tensor_t *y, *z;
      const int64_t ax0 = 0;
      CHECK(sw_matmul(w, x, &y));
      CHECK(sw_reduce_sum(y, &ax0, 1, false, &z));
      sw_tensor_release(z);
      sw_tensor_release(y);
      sw_tensor_release(w);
      CHECK(sw_tiled_evict(fte, done));
      sw_tile_selection_release(done);
    }
    pipelined = now() - t0;
  }
  const double bound = transfer > compute ? transfer : compute;

  printf("StrideWeave bench_tiled, %d thread(s)\n\n", threads);
  printf("%-52s %10s %10s %8s\n", "case", "ours", "peer", "ratio");
  printf("%-52s %8.2f GB/s %6.2f GB/s %7.0f%%\n", "projection of 8x4 MiB resident tiles vs memcpy", gp, gc, 100 * gp / gc);
  printf("%-52s %8.1f ms %8.1f ms %7.2fx\n", "MoE step from file tier vs max(compute, transfer)", pipelined / batches * 1e3,
         bound / batches * 1e3, pipelined / bound);
  printf("  (compute alone %.1f ms/step, transfer alone %.1f ms/step, their sum %.1f ms/step)\n",
         compute / batches * 1e3, transfer / batches * 1e3, (compute + transfer) / batches * 1e3);
  printf("BENCH_JSON {\"bench\":\"tiled\",\"threads\":%d,\"project_gbps\":%.3f,\"memcpy_gbps\":%.3f,"
         "\"project_ratio\":%.3f,\"moe_step_ms\":%.3f,\"compute_ms\":%.3f,\"transfer_ms\":%.3f,"
         "\"overlap_ratio\":%.3f}\n",
         threads, gp, gc, gp / gc, pipelined / batches * 1e3, compute / batches * 1e3, transfer / batches * 1e3,
         pipelined / bound);

  sw_tile_set_release(all);
  sw_tensor_release(x);
  sw_tensor_release(ffull);
  sw_tensor_release(full);
  sw_tile_selection_release(sel);
  CHECK(sw_carrier_dispose(fte));
  CHECK(sw_carrier_dispose(te));
  sw_carrier_release(fte);
  sw_carrier_release(ffile);
  sw_carrier_release(fprim);
  sw_carrier_release(te);
  sw_carrier_release(dest);
  sw_carrier_release(secondary);
  sw_carrier_release(primary);
  free(peer_dst);
  free(xv);
  free(t_proj);
  free(t_copy);
  free(seed);
  sw_runtime_release(rt);
  return 0;
}
