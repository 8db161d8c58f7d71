/*
 * bench_cpu: StrideWeave's CPU kernels against their peers, measured in the
 * same process so that the ratios survive this machine's 10-30 % drift.
 *
 *   matmul        sw_matmul vs a direct cblas_sgemm on the same operands, f32,
 *                 at 1024x1024x1024 and at the MoE expert shape
 *                 (64,4096) @ (4096,1024); GFLOP/s.
 *   elementwise   sw_add, sw_elementwise_mul, sw_relu and sw_reduce_sum on
 *                 64 MiB f32 operands vs the DRAM read roof (N threads summing
 *                 64 MiB) and a 64 MiB memcpy into a warm destination; GB/s of
 *                 bytes moved, reads plus writes.
 *
 * Usage:
 *   OPENBLAS_NUM_THREADS=N build/tools/bench/bench_cpu --threads N [--reps R]
 *
 * OpenBLAS reads OPENBLAS_NUM_THREADS once, when the library loads, so the
 * peer's thread count is fixed for the whole process: run the tool once per
 * thread count, with the variable equal to --threads (tools/bench/bench_cpu.py
 * does that for 1 and 2 threads). The tool warns when they differ.
 *
 * Every figure is the median of R timed repetitions after warm-up; the
 * StrideWeave call and its peer alternate within each repetition so that
 * noise from other processes hits both alike. The "best" columns use the
 * fastest repetition instead: when other work competes for the cores (see
 * the load average printed at the end) medians of 2-thread runs mostly
 * measure the scheduler, while the fastest repetitions still compare the
 * code. The last line is "BENCH_JSON {...}" for scripts.
 */
#define _GNU_SOURCE
#include <cblas.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "strideweave/strideweave.h"

#define BENCH_NAME "bench_cpu"
#include "bench_util.h"

#define MAX_THREADS 64

static void* alloc_pages(size_t bytes) {
  void* p = NULL;
  if (posix_memalign(&p, 4096, bytes) != 0) {
    fprintf(stderr, "bench_cpu: out of memory\n");
    exit(2);
  }
  return p;
}

/* Deterministic values in [-1, 1): half of them negative, so relu branches. */
static void fill_values(float* x, size_t n, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    x[i] = (float)((double)(s >> 11) * (2.0 / 9007199254740992.0) - 1.0);
  }
}

static sw_tensor_t* tensor_from(sw_runtime_t* rt, const float* data, int64_t rows, int64_t cols) {
  const int64_t extents[2] = {rows, cols};
  sw_tensor_t* t = NULL;
  CHECK(sw_tensor_from_data(rt, SW_DTYPE_F32, extents, 2, data, &t));
  return t;
}

static float* host_pointer(sw_tensor_t* t) {
  sw_carrier_t* c = NULL;
  void* p = NULL;
  CHECK(sw_tensor_carrier(t, &c));
  CHECK(sw_carrier_host_pointer(c, &p));
  sw_carrier_release(c);
  return (float*)p;
}

/* ---- the roof: a team of plain threads reading or copying one buffer ---- */

typedef enum { TASK_READ, TASK_COPY, TASK_QUIT } roof_task_t;

typedef struct roof_team_t roof_team_t;
typedef struct roof_worker_arg_t {
  roof_team_t* team;
  int index;
} roof_worker_arg_t;

struct roof_team_t {
  int threads;
  pthread_t ids[MAX_THREADS];
  roof_worker_arg_t args[MAX_THREADS];
  pthread_barrier_t start, done;
  roof_task_t task;
  const void* src;
  void* dst;
  size_t bytes;
  volatile uint64_t sink[MAX_THREADS * 8]; /* one cache line per thread */
};

/* Sums 64-bit words with independent accumulators: integer adds vectorise at
 * any optimisation level that vectorises, float adds would not. */
static uint64_t sum_words(const uint64_t* p, size_t n) {
  uint64_t a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) a[j] += p[i + j];
  for (; i < n; ++i) a[0] += p[i];
  return a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

static void roof_slice(roof_team_t* team, int index) {
  /* Slices of whole cache lines, one per thread. */
  const size_t lines = team->bytes / 64;
  const size_t b = lines * (size_t)index / (size_t)team->threads * 64;
  const size_t e = lines * (size_t)(index + 1) / (size_t)team->threads * 64;
  if (team->task == TASK_READ)
    team->sink[index * 8] += sum_words((const uint64_t*)((const char*)team->src + b), (e - b) / 8);
  else
    memcpy((char*)team->dst + b, (const char*)team->src + b, e - b);
}

static void* roof_worker(void* arg) {
  roof_team_t* team = ((roof_worker_arg_t*)arg)->team;
  const int index = ((roof_worker_arg_t*)arg)->index;
  for (;;) {
    pthread_barrier_wait(&team->start);
    if (team->task == TASK_QUIT) return NULL;
    roof_slice(team, index);
    pthread_barrier_wait(&team->done);
  }
}

static void roof_start(roof_team_t* team, int threads) {
  memset(team, 0, sizeof(*team));
  team->threads = threads;
  pthread_barrier_init(&team->start, NULL, (unsigned)threads);
  pthread_barrier_init(&team->done, NULL, (unsigned)threads);
  for (int i = 1; i < threads; ++i) {
    team->args[i] = (roof_worker_arg_t){team, i};
    pthread_create(&team->ids[i], NULL, roof_worker, &team->args[i]);
  }
}

/* Runs one task on every thread, the caller included; returns the seconds. */
static double roof_run(roof_team_t* team, roof_task_t task, const void* src, void* dst, size_t bytes) {
  team->task = task;
  team->src = src;
  team->dst = dst;
  team->bytes = bytes;
  const double t0 = now_seconds();
  pthread_barrier_wait(&team->start);
  roof_slice(team, 0);
  pthread_barrier_wait(&team->done);
  return now_seconds() - t0;
}

static void roof_stop(roof_team_t* team) {
  team->task = TASK_QUIT;
  pthread_barrier_wait(&team->start);
  for (int i = 1; i < team->threads; ++i) pthread_join(team->ids[i], NULL);
  pthread_barrier_destroy(&team->start);
  pthread_barrier_destroy(&team->done);
}

/* ---- matmul --------------------------------------------------------------- */

typedef struct matmul_result_t {
  const char* name;
  int64_t m, k, n;
  double sw_gflops, blas_gflops; /* medians */
  double sw_best, blas_best;     /* fastest repetitions */
  int identical;
} matmul_result_t;

/* (m,k) @ (k,n). Dense StrideWeave tensors are first mode fastest, i.e.
 * column major, so the peer is cblas_sgemm(ColMajor, NoTrans, NoTrans) with
 * leading dimensions m, k and m on the very same buffers. */
static matmul_result_t bench_matmul(sw_runtime_t* rt, const char* name, int64_t m, int64_t k, int64_t n,
                                    int reps) {
  float* ha = alloc_pages((size_t)(m * k) * sizeof(float));
  float* hb = alloc_pages((size_t)(k * n) * sizeof(float));
  fill_values(ha, (size_t)(m * k), 1);
  fill_values(hb, (size_t)(k * n), 2);
  sw_tensor_t* a = tensor_from(rt, ha, m, k);
  sw_tensor_t* b = tensor_from(rt, hb, k, n);
  const float* pa = host_pointer(a);
  const float* pb = host_pointer(b);
  float* c_blas = alloc_pages((size_t)(m * n) * sizeof(float));
  float* c_sw = alloc_pages((size_t)(m * n) * sizeof(float));
  memset(c_blas, 0, (size_t)(m * n) * sizeof(float));

  double t_sw[256], t_blas[256];
  const int warmup = 3;
  for (int r = -warmup; r < reps; ++r) {
    sw_tensor_t* c = NULL;
    double t0 = now_seconds();
    CHECK(sw_matmul(a, b, &c));
    const double ts = now_seconds() - t0;
    if (r == reps - 1) CHECK(sw_tensor_read(c, c_sw, (size_t)(m * n) * sizeof(float)));
    sw_tensor_release(c);
    t0 = now_seconds();
    cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, pa, (int)m, pb, (int)k,
                0.0f, c_blas, (int)m);
    const double tb = now_seconds() - t0;
    if (r >= 0) {
      t_sw[r] = ts;
      t_blas[r] = tb;
    }
  }
  const double flops = 2.0 * (double)m * (double)n * (double)k;
  matmul_result_t res = {name,
                         m,
                         k,
                         n,
                         flops / median(t_sw, reps) * 1e-9,
                         flops / median(t_blas, reps) * 1e-9,
                         flops / fastest(t_sw, reps) * 1e-9,
                         flops / fastest(t_blas, reps) * 1e-9,
                         memcmp(c_sw, c_blas, (size_t)(m * n) * sizeof(float)) == 0};
  sw_tensor_release(a);
  sw_tensor_release(b);
  free(ha);
  free(hb);
  free(c_blas);
  free(c_sw);
  return res;
}

/* ---- elementwise and reduce ------------------------------------------------- */

enum { OP_ADD, OP_MUL, OP_RELU, OP_SUM, OP_COUNT };
static const char* const kOpNames[OP_COUNT] = {"add", "elementwise_mul", "relu", "reduce_sum"};
/* Bytes moved per call in units of one operand: reads plus writes. */
static const int kOpOperands[OP_COUNT] = {3, 3, 2, 1};

static double run_op(int op, sw_tensor_t* a, sw_tensor_t* b) {
  sw_tensor_t* out = NULL;
  const double t0 = now_seconds();
  switch (op) {
    case OP_ADD: CHECK(sw_add(a, b, &out)); break;
    case OP_MUL: CHECK(sw_elementwise_mul(a, b, &out)); break;
    case OP_RELU: CHECK(sw_relu(a, &out)); break;
    default: CHECK(sw_reduce_sum(a, NULL, 0, false, &out)); break;
  }
  const double t = now_seconds() - t0;
  sw_tensor_release(out); /* back to the runtime's pool for the next call */
  return t;
}

typedef struct stream_result_t {
  double read_gbs, memcpy_gbs, op_gbs[OP_COUNT];    /* medians */
  double read_best, memcpy_best, op_best[OP_COUNT]; /* fastest repetitions */
} stream_result_t;

static stream_result_t bench_stream(sw_runtime_t* rt, int threads, int reps, int mib) {
  const size_t STREAM_BYTES = (size_t)mib << 20;
  const size_t n = STREAM_BYTES / sizeof(float);
  const int64_t rows = 4096, cols = (int64_t)n / rows; /* (4096, 4096) f32 at 64 MiB */
  float* staging = alloc_pages(STREAM_BYTES);
  fill_values(staging, n, 3);
  sw_tensor_t* a = tensor_from(rt, staging, rows, cols);
  fill_values(staging, n, 4);
  sw_tensor_t* b = tensor_from(rt, staging, rows, cols);
  free(staging);
  /* The roof reads the very buffer the ops read; memcpy writes a warm one. */
  const void* src = host_pointer(a);
  void* dst = alloc_pages(STREAM_BYTES);
  memset(dst, 1, STREAM_BYTES);

  roof_team_t* team = alloc_pages(sizeof(roof_team_t));
  roof_start(team, threads);
  double t_read[256], t_copy[256], t_op[OP_COUNT][256];
  const int warmup = 2;
  for (int r = -warmup; r < reps; ++r) {
    const double tr = roof_run(team, TASK_READ, src, NULL, STREAM_BYTES);
    const double tc = roof_run(team, TASK_COPY, src, dst, STREAM_BYTES);
    double to[OP_COUNT];
    for (int op = 0; op < OP_COUNT; ++op) to[op] = run_op(op, a, b);
    if (r < 0) continue;
    t_read[r] = tr;
    t_copy[r] = tc;
    for (int op = 0; op < OP_COUNT; ++op) t_op[op][r] = to[op];
  }
  roof_stop(team);
  free(team);
  free(dst);
  sw_tensor_release(a);
  sw_tensor_release(b);

  stream_result_t res;
  const double gb = (double)STREAM_BYTES * 1e-9;
  res.read_gbs = gb / median(t_read, reps);
  res.memcpy_gbs = 2 * gb / median(t_copy, reps);
  res.read_best = gb / fastest(t_read, reps);
  res.memcpy_best = 2 * gb / fastest(t_copy, reps);
  for (int op = 0; op < OP_COUNT; ++op) {
    res.op_gbs[op] = kOpOperands[op] * gb / median(t_op[op], reps);
    res.op_best[op] = kOpOperands[op] * gb / fastest(t_op[op], reps);
  }
  return res;
}

/* ---- main ------------------------------------------------------------------ */

static void usage(void) {
  fprintf(stderr,
          "usage: OPENBLAS_NUM_THREADS=N bench_cpu --threads N [--reps R] [--mib M]\n"
          "  --threads N  compute threads of the runtime (and, through the environment, of OpenBLAS)\n"
          "  --reps R     timed repetitions per figure, median reported (default 15, at most 255)\n"
          "  --mib M      size of each elementwise operand in MiB (default 64)\n");
  exit(2);
}

int main(int argc, char** argv) {
  int threads = 1, reps = 15, mib = 64;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--mib") && i + 1 < argc)
      mib = atoi(argv[++i]);
    else
      usage();
  }
  if (threads < 1 || threads > MAX_THREADS || reps < 1 || reps > 255 || mib < 1 || mib > 4096) usage();

  const int blas_threads = openblas_get_num_threads();
  const char* env = getenv("OPENBLAS_NUM_THREADS");
  printf("bench_cpu: StrideWeave %s, %d compute thread(s), %d repetitions per figure (medians)\n",
         sw_version_string(), threads, reps);
  printf("peer: OpenBLAS %s, core %s, %d thread(s) (OPENBLAS_NUM_THREADS=%s)\n", openblas_get_config(),
         openblas_get_corename(), blas_threads, env ? env : "unset");
  if (blas_threads != threads)
    printf("WARNING: OpenBLAS runs %d thread(s) but --threads is %d: set OPENBLAS_NUM_THREADS=%d before starting\n",
           blas_threads, threads, threads);

  const double load_before = load_average();
  sw_runtime_desc_t desc;
  sw_runtime_desc_init(&desc);
  desc.compute_threads = (uint32_t)threads;
  sw_runtime_t* rt = NULL;
  CHECK(sw_runtime_create(&desc, &rt));

  matmul_result_t mm[2];
  mm[0] = bench_matmul(rt, "1024x1024x1024", 1024, 1024, 1024, reps);
  mm[1] = bench_matmul(rt, "moe 64x4096->1024", 64, 4096, 1024, 2 * reps < 255 ? 2 * reps : 255);
  stream_result_t st = bench_stream(rt, threads, reps, mib);
  sw_runtime_release(rt);
  const double load_after = load_average();
  printf("load average (1 min, this benchmark included): %.2f before, %.2f after\n", load_before, load_after);

  printf("\nf32 matmul, GFLOP/s          StrideWeave    cblas_sgemm    ratio   best: ratio   same bits\n");
  for (int i = 0; i < 2; ++i)
    printf("  %-26s %11.1f %14.1f %8.3f %13.3f   %s\n", mm[i].name, mm[i].sw_gflops, mm[i].blas_gflops,
           mm[i].sw_gflops / mm[i].blas_gflops, mm[i].sw_best / mm[i].blas_best, mm[i].identical ? "yes" : "NO");
  printf("\n%d MiB f32, GB/s moved (reads + writes)   GB/s   / read roof   / memcpy   best: GB/s   / roof\n", mib);
  printf("  %-37s %7.2f %12.3f %10.3f %12.2f %8.3f\n", "roof: read (sum)", st.read_gbs, 1.0,
         st.read_gbs / st.memcpy_gbs, st.read_best, 1.0);
  printf("  %-37s %7.2f %12.3f %10.3f %12.2f %8.3f\n", "roof: memcpy, warm destination", st.memcpy_gbs,
         st.memcpy_gbs / st.read_gbs, 1.0, st.memcpy_best, st.memcpy_best / st.read_best);
  for (int op = 0; op < OP_COUNT; ++op)
    printf("  %-37s %7.2f %12.3f %10.3f %12.2f %8.3f\n", kOpNames[op], st.op_gbs[op], st.op_gbs[op] / st.read_gbs,
           st.op_gbs[op] / st.memcpy_gbs, st.op_best[op], st.op_best[op] / st.read_best);

  printf("\nBENCH_JSON {\"threads\": %d, \"openblas_threads\": %d, \"reps\": %d, \"mib\": %d, \"load\": [%.2f, %.2f], \"matmul\": [",
         threads, blas_threads, reps, mib, load_before, load_after);
  for (int i = 0; i < 2; ++i)
    printf("%s{\"shape\": \"%s\", \"m\": %lld, \"k\": %lld, \"n\": %lld, \"sw_gflops\": %.2f, "
           "\"blas_gflops\": %.2f, \"ratio\": %.4f, \"sw_best\": %.2f, \"blas_best\": %.2f, "
           "\"ratio_best\": %.4f, \"identical\": %s}",
           i ? ", " : "", mm[i].name, (long long)mm[i].m, (long long)mm[i].k, (long long)mm[i].n, mm[i].sw_gflops,
           mm[i].blas_gflops, mm[i].sw_gflops / mm[i].blas_gflops, mm[i].sw_best, mm[i].blas_best,
           mm[i].sw_best / mm[i].blas_best, mm[i].identical ? "true" : "false");
  printf("], \"roof\": {\"read_gbs\": %.3f, \"memcpy_gbs\": %.3f, \"read_best\": %.3f, \"memcpy_best\": %.3f}, "
         "\"elementwise\": [",
         st.read_gbs, st.memcpy_gbs, st.read_best, st.memcpy_best);
  for (int op = 0; op < OP_COUNT; ++op)
    printf("%s{\"op\": \"%s\", \"gbs\": %.3f, \"ratio_read_roof\": %.4f, \"ratio_memcpy\": %.4f, "
           "\"best\": %.3f, \"ratio_best\": %.4f}",
           op ? ", " : "", kOpNames[op], st.op_gbs[op], st.op_gbs[op] / st.read_gbs, st.op_gbs[op] / st.memcpy_gbs,
           st.op_best[op], st.op_best[op] / st.read_best);
  printf("]}\n");
  return 0;
}
