/*
 * bench_cpu: StrideWeave's CPU kernels, with the figures their peers are
 * compared against. tools/bench/bench_cpu.py runs this tool and, right
 * after it in the same run, PyTorch and NumPy on the same shapes and thread
 * counts, and prints the ratios.
 *
 *   matmul        sw_matmul in f32 and bf16 at 1024x1024x1024, the MoE
 *                 expert shapes (64,4096) @ (4096,1024) and (64,1024) @
 *                 (1024,3584), and decoding one token (1,4096) @ (4096,1024)
 *                 with the weights streamed from DRAM (a rotation over 768
 *                 MiB of weight matrices); GFLOP/s and weight GB/s. The
 *                 system cblas_sgemm on the same f32 buffers is printed for
 *                 information only (Debian's OpenBLAS runs its generic
 *                 kernels on this CPU).
 *   experts       a batched matmul over 8 resident experts in the geometry
 *                 docs/matmul.md recommends against 8 plain matmuls on the
 *                 same memory, and the cost of repacking interleaved ones.
 *   elementwise   sw_add, sw_elementwise_mul, sw_relu and sw_reduce_sum on
 *                 64 MiB f32 operands vs the DRAM read roof (N threads summing
 *                 64 MiB) and a 64 MiB memcpy into a warm destination; GB/s of
 *                 bytes moved, reads plus writes.
 *
 * Usage:
 *   OPENBLAS_NUM_THREADS=N build/tools/bench/bench_cpu --threads N [--reps R] [--mib M]
 *
 * Every figure is the median of R timed repetitions after warm-up; "best"
 * is the fastest repetition. The last line is "BENCH_JSON {...}".
 */
#define _GNU_SOURCE
#ifdef SW_BENCH_CBLAS
#include <cblas.h>
#endif
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "strideweave/strideweave.h"

#define BENCH_NAME "bench_cpu"
#include "bench_util.h"

#define MAX_THREADS 64

/* Buffers of a huge page or more start on a huge-page boundary and ask for
 * huge pages, as the runtime's own buffers of that size do: the roof and the
 * peers read memory mapped the way the runtime's operands are. (On a virtual
 * machine the difference is large: one core summing 768 MiB read 8.7 GB/s
 * through 4 KiB pages and 16 GB/s through 2 MiB ones.) */
static void* alloc_pages(size_t bytes) {
  const size_t huge = (size_t)2 << 20;
  void* p = NULL;
  if (posix_memalign(&p, bytes >= huge ? huge : 4096, bytes) != 0) {
    fprintf(stderr, "bench_cpu: out of memory\n");
    exit(2);
  }
#ifdef MADV_HUGEPAGE
  if (bytes >= huge) madvise(p, bytes, MADV_HUGEPAGE); /* advice only */
#endif
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

/* ---- matmul ----------------------------------------------------------------- */

/* (m, k) @ (k, n) on the bytes PyTorch's peer multiplies: x (m, k) row
 * major, as torch and NumPy lay it out (the transposed view of a dense
 * StrideWeave (k, m) tensor), and the weight (k, n) dense, k fastest, the
 * bytes of a row-major (n, k) nn.Linear weight, so x @ W^T reads both as they
 * lie. A decode shape (one token) rotates through `copies` weight matrices,
 * 768 MiB in all, so that every call streams its weights from DRAM. */
typedef struct matmul_shape_t {
  const char* name;
  int64_t m, k, n;
  int decode;
} matmul_shape_t;

static const matmul_shape_t kShapes[] = {
    {"1024x1024x1024", 1024, 1024, 1024, 0},
    {"moe 64x4096->1024", 64, 4096, 1024, 0},
    {"moe 64x1024->3584", 64, 1024, 3584, 0},
    {"decode 1x4096->1024", 1, 4096, 1024, 1},
};
#define SHAPES (int)(sizeof kShapes / sizeof kShapes[0])
static const sw_dtype_t kMatmulDtypes[2] = {SW_DTYPE_F32, SW_DTYPE_BF16};
#define DECODE_BYTES ((size_t)768 << 20)
#define MAX_COPIES 128

typedef struct matmul_result_t {
  const matmul_shape_t* shape;
  sw_dtype_t dtype;
  int copies;
  double sw_gflops, sw_best;     /* per call: median, fastest */
  double blas_gflops, blas_best; /* f32 only: the system cblas_sgemm, informational */
  double sw_weight_gbs;          /* weight bytes per second (median) */
} matmul_result_t;

static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static sw_tensor_t* matrix_of(sw_runtime_t* rt, sw_dtype_t dtype, int64_t rows, int64_t cols, uint64_t seed) {
  const size_t n = (size_t)(rows * cols);
  float* v = alloc_pages(n * sizeof(float));
  fill_values(v, n, seed);
  const int64_t extents[2] = {rows, cols};
  sw_tensor_t* t = NULL;
  if (dtype == SW_DTYPE_BF16) {
    uint16_t* h = (uint16_t*)v; /* narrowed in place, front to back */
    for (size_t i = 0; i < n; ++i) h[i] = to_bf16(v[i]);
  }
  CHECK(sw_tensor_from_data(rt, dtype, extents, 2, v, &t));
  free(v);
  return t;
}

/* Runs 1024^3 f32 products on every compute thread for `seconds`. The cores
 * of these machines come up to their sustained speed over the first ~50 ms
 * of work (the first products of a cold process take 1.3x as long, PyTorch's
 * as much as ours), and the first figure would carry that ramp alone. */
static void warm_up(sw_runtime_t* rt, double seconds) {
  sw_tensor_t* a = matrix_of(rt, SW_DTYPE_F32, 1024, 1024, 1);
  const double end = now_seconds() + seconds;
  while (now_seconds() < end) {
    sw_tensor_t* out = NULL;
    CHECK(sw_matmul(a, a, &out));
    sw_tensor_release(out);
  }
  sw_tensor_release(a);
}

/* Times sw_matmul, or with `blas` the system cblas_sgemm (f32) on the same
 * buffers. The cblas runs come after every StrideWeave figure: OpenBLAS's
 * workers spin for a while after each call, and would take a core from the
 * runtime's threads if the two alternated. */
static matmul_result_t bench_matmul(sw_runtime_t* rt, const matmul_shape_t* sh, sw_dtype_t dtype, int reps,
                                    int blas) {
  const int64_t m = sh->m, k = sh->k, n = sh->n;
  const size_t es = sw_dtype_size(dtype), weight_bytes = (size_t)(k * n) * es;
  int copies = sh->decode ? (int)(DECODE_BYTES / weight_bytes) : 1;
  if (copies > MAX_COPIES) copies = MAX_COPIES;
  sw_tensor_t* a_dense = matrix_of(rt, dtype, k, m, 1);
  sw_tensor_t* a = NULL;
  CHECK(sw_tensor_transpose(a_dense, 0, 1, &a)); /* (m, k), row major */
  sw_tensor_release(a_dense);
  sw_tensor_t* w[MAX_COPIES];
  for (int c = 0; c < copies; ++c) w[c] = matrix_of(rt, dtype, k, n, 2 + (uint64_t)c);
#ifdef SW_BENCH_CBLAS
  float* c_blas = blas && dtype == SW_DTYPE_F32 ? alloc_pages((size_t)(m * n) * sizeof(float)) : NULL;
#endif
  double t_sw[BENCH_MAX_REPS], t_blas[BENCH_MAX_REPS];
  const int warmup = 2;
  for (int r = -warmup; r < reps; ++r) {
    /* One sample: a pass over every copy; the figures are per call. */
    double t0 = now_seconds();
    for (int c = 0; c < copies && !blas; ++c) {
      sw_tensor_t* out = NULL;
      CHECK(sw_matmul(a, w[c], &out));
      sw_tensor_release(out);
    }
    const double ts = (now_seconds() - t0) / copies;
    double tb = 0;
#ifdef SW_BENCH_CBLAS
    if (c_blas) {
      t0 = now_seconds();
      for (int c = 0; c < copies; ++c)
        cblas_sgemm(CblasColMajor, CblasTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, host_pointer(a), (int)k,
                    host_pointer(w[c]), (int)k, 0.0f, c_blas, (int)m);
      tb = (now_seconds() - t0) / copies;
    }
#endif
    if (r >= 0) {
      t_sw[r] = ts;
      t_blas[r] = tb;
    }
  }
  const double flops = 2.0 * (double)m * (double)n * (double)k;
  matmul_result_t res = {sh, dtype, copies, flops / median(t_sw, reps) * 1e-9, flops / fastest(t_sw, reps) * 1e-9,
                         0, 0, (double)weight_bytes / median(t_sw, reps) * 1e-9};
  if (t_blas[0] > 0) {
    res.blas_gflops = flops / median(t_blas, reps) * 1e-9;
    res.blas_best = flops / fastest(t_blas, reps) * 1e-9;
  }
#ifdef SW_BENCH_CBLAS
  free(c_blas);
#endif
  sw_tensor_release(a);
  for (int c = 0; c < copies; ++c) sw_tensor_release(w[c]);
  return res;
}

/* ---- expert matmul on resident experts -------------------------------------- */

/* S experts (I, O) f32 and shared tokens x (M, I): y = x @ W_e for each e.
 *  - one block per expert: the (I, O, S) compact tensor a projection of a
 *    row-major (E, O, I) weight file gives, viewed as (S, I, O) (a free
 *    permutation): the batched matmul reads each expert in place;
 *  - plain: S separate matmuls on single-expert views of the same memory;
 *  - interleaved: the same values in a dense (S, I, O) tensor (the expert
 *    mode fastest), which the matmul must pack expert by expert. */
typedef struct experts_result_t {
  int64_t s, m, i, o;
  double view_ms, plain_ms, interleaved_ms; /* medians */
} experts_result_t;

static experts_result_t bench_experts(sw_runtime_t* rt, int reps) {
  const int64_t S = 8, M = 64, IN = 4096, OUT = 1024;
  experts_result_t res = {S, M, IN, OUT, 0, 0, 0};
  sw_tensor_t* x = matrix_of(rt, SW_DTYPE_F32, M, IN, 5);
  const size_t n = (size_t)(S * IN * OUT);
  float* v = alloc_pages(n * sizeof(float));
  fill_values(v, n, 6);
  const int64_t block_ext[3] = {IN, OUT, S}, inter_ext[3] = {S, IN, OUT};
  sw_tensor_t *blocks = NULL, *interleaved = NULL, *view = NULL;
  CHECK(sw_tensor_from_data(rt, SW_DTYPE_F32, block_ext, 3, v, &blocks));
  float* iv = alloc_pages(n * sizeof(float)); /* element (s, i, o) at s + S * (i + IN * o) */
  for (int64_t s = 0; s < S; ++s)
    for (int64_t e = 0; e < IN * OUT; ++e) iv[s + S * e] = v[e + IN * OUT * s];
  CHECK(sw_tensor_from_data(rt, SW_DTYPE_F32, inter_ext, 3, iv, &interleaved));
  free(v);
  free(iv);
  const size_t perm[3] = {2, 0, 1};
  CHECK(sw_tensor_permute(blocks, perm, 3, &view));
  sw_carrier_t* carrier = NULL;
  CHECK(sw_tensor_carrier(blocks, &carrier));
  int64_t offset = 0;
  CHECK(sw_tensor_offset(blocks, &offset));
  sw_layout_t* one = NULL;
  const int64_t one_ext[2] = {IN, OUT};
  CHECK(sw_layout_dense(one_ext, 2, &one));
  sw_tensor_t* expert[8];
  for (int64_t s = 0; s < S; ++s) CHECK(sw_tensor_create(carrier, offset + s * IN * OUT, one, &expert[s]));
  sw_layout_release(one);
  sw_carrier_release(carrier);
  double t_view[BENCH_MAX_REPS], t_plain[BENCH_MAX_REPS], t_inter[BENCH_MAX_REPS];
  for (int r = -2; r < reps; ++r) {
    sw_tensor_t* y = NULL;
    double t0 = now_seconds();
    CHECK(sw_matmul(x, view, &y));
    const double tv = now_seconds() - t0;
    sw_tensor_release(y);
    t0 = now_seconds();
    for (int64_t s = 0; s < S; ++s) {
      CHECK(sw_matmul(x, expert[s], &y));
      sw_tensor_release(y);
    }
    const double tp = now_seconds() - t0;
    t0 = now_seconds();
    CHECK(sw_matmul(x, interleaved, &y));
    const double ti = now_seconds() - t0;
    sw_tensor_release(y);
    if (r >= 0) {
      t_view[r] = tv;
      t_plain[r] = tp;
      t_inter[r] = ti;
    }
  }
  res.view_ms = median(t_view, reps) * 1e3;
  res.plain_ms = median(t_plain, reps) * 1e3;
  res.interleaved_ms = median(t_inter, reps) * 1e3;
  for (int64_t s = 0; s < S; ++s) sw_tensor_release(expert[s]);
  sw_tensor_release(view);
  sw_tensor_release(blocks);
  sw_tensor_release(interleaved);
  sw_tensor_release(x);
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

/* ---- quantized decode ---------------------------------------------------------- */

/* One token times a (4096, 1024) weight of each block-quantized dtype,
 * rotating through copies that fill 768 MiB as the float decode shape does:
 * the weight GB/s counted in quantized bytes, against the same DRAM read
 * roof. The blocks are arbitrary bytes with modest f16 scales (a product's
 * time does not depend on the values). */
static const sw_dtype_t kQuantDtypes[] = {SW_DTYPE_Q8_0, SW_DTYPE_Q4_0, SW_DTYPE_Q4_K, SW_DTYPE_Q6_K, SW_DTYPE_MXFP4};
#define QUANT_DTYPES (int)(sizeof kQuantDtypes / sizeof kQuantDtypes[0])
#define QUANT_MAX_COPIES 512

typedef struct quant_result_t {
  sw_dtype_t dtype;
  int copies;
  double gbs, best; /* quantized weight bytes per second: median, fastest */
} quant_result_t;

static sw_tensor_t* quant_matrix(sw_runtime_t* rt, sw_dtype_t dtype, int64_t k, int64_t n, uint64_t seed) {
  const size_t be = (size_t)sw_dtype_block_elements(dtype), bb = sw_dtype_block_bytes(dtype);
  const size_t blocks = (size_t)(k * n) / be, bytes = blocks * bb;
  unsigned char* b = alloc_pages(bytes);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < bytes; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b[i] = (unsigned char)x;
  }
  const unsigned char h[2] = {0x1f, 0x20}; /* f16 0.0079 */
  for (size_t i = 0; i < blocks; ++i) {
    unsigned char* blk = b + i * bb;
    if (dtype == SW_DTYPE_Q8_0 || dtype == SW_DTYPE_Q4_0) memcpy(blk, h, 2);
    if (dtype == SW_DTYPE_Q4_K) {
      memcpy(blk, h, 2);
      memcpy(blk + 2, h, 2);
    }
    if (dtype == SW_DTYPE_Q6_K) memcpy(blk + 208, h, 2);
    if (dtype == SW_DTYPE_MXFP4) blk[0] = 120;
  }
  const int64_t extents[2] = {k, n};
  sw_tensor_t* t = NULL;
  CHECK(sw_tensor_from_data(rt, dtype, extents, 2, b, &t));
  free(b);
  return t;
}

static quant_result_t bench_quant_decode(sw_runtime_t* rt, sw_dtype_t dtype, int reps) {
  const int64_t k = 4096, n = 1024;
  const size_t weight_bytes = (size_t)(k * n) / (size_t)sw_dtype_block_elements(dtype) * sw_dtype_block_bytes(dtype);
  int copies = (int)(DECODE_BYTES / weight_bytes);
  if (copies > QUANT_MAX_COPIES) copies = QUANT_MAX_COPIES;
  sw_tensor_t* a = matrix_of(rt, SW_DTYPE_F32, 1, k, 1);
  sw_tensor_t** w = malloc((size_t)copies * sizeof *w);
  for (int c = 0; c < copies; ++c) w[c] = quant_matrix(rt, dtype, k, n, 2 + (uint64_t)c);
  double t[BENCH_MAX_REPS];
  for (int r = -2; r < reps; ++r) {
    const double t0 = now_seconds();
    for (int c = 0; c < copies; ++c) {
      sw_tensor_t* out = NULL;
      CHECK(sw_matmul(a, w[c], &out));
      sw_tensor_release(out);
    }
    if (r >= 0) t[r] = (now_seconds() - t0) / copies;
  }
  quant_result_t res = {dtype, copies, (double)weight_bytes / median(t, reps) * 1e-9,
                        (double)weight_bytes / fastest(t, reps) * 1e-9};
  for (int c = 0; c < copies; ++c) sw_tensor_release(w[c]);
  free(w);
  sw_tensor_release(a);
  return res;
}

/* ---- ggml's quantized vec_dot: the quantized decode's peer ---------------------- */

/* With --ggml DIR (a directory holding libggml-base.so and libggml-cpu.so,
 * tools/bench/bench_cpu.py finds one), the quantized decode is also timed
 * with ggml's own kernel on the same weight bytes: per product, x is
 * quantized with the CPU type traits' from_float into the vec_dot type
 * (Q8_0 or Q8_K), then vec_dot runs over the N rows (the weight's columns,
 * K/block blocks each, the bytes StrideWeave multiplies), split in halves
 * across 2 threads that meet at a spinning barrier after the quantization
 * and after the rows, as ggml's mul_mat does. This is the plain vec_dot
 * path, not the repacked buffers llama.cpp may use for some types.
 *
 * The library is loaded at run time, so the tool needs no ggml headers; the
 * declarations below mirror ggml.h / ggml-cpu.h (ggml_type values are
 * GGUF's, fixed). */
typedef void (*ggml_from_float_fn)(const float* x, void* y, int64_t k);
typedef void (*ggml_vec_dot_fn)(int n, float* s, size_t bs, const void* x, size_t bx, const void* y, size_t by,
                                int nrc);
typedef struct ggml_traits_cpu_t {
  ggml_from_float_fn from_float;
  ggml_vec_dot_fn vec_dot;
  int vec_dot_type; /* enum ggml_type */
  int64_t nrows;
} ggml_traits_cpu_t;

typedef struct ggml_peer_t {
  int available;
  char reason[512], version[64];
  const ggml_traits_cpu_t* (*traits)(int);
  const char* (*type_name)(int);
  int64_t (*blck_size)(int);
  size_t (*type_size)(int);
} ggml_peer_t;

/* `text` for a JSON string: quotes, backslashes and control characters
 * become spaces (reasons are dlerror() messages and paths). Two calls may
 * share one printf. */
static const char* json_safe(const char* text) {
  static char bufs[2][512];
  static int which;
  char* b = bufs[which ^= 1];
  size_t i = 0;
  for (; text && text[i] && i + 1 < sizeof bufs[0]; ++i)
    b[i] = (text[i] == '"' || text[i] == '\\' || (unsigned char)text[i] < 0x20) ? ' ' : text[i];
  b[i] = 0;
  return b;
}

static int ggml_type_of(sw_dtype_t dtype, const char** name) {
  switch (dtype) {
    case SW_DTYPE_Q8_0: *name = "q8_0"; return 8;
    case SW_DTYPE_Q4_0: *name = "q4_0"; return 2;
    case SW_DTYPE_Q4_K: *name = "q4_K"; return 12;
    case SW_DTYPE_Q6_K: *name = "q6_K"; return 14;
    case SW_DTYPE_MXFP4: *name = "mxfp4"; return 39;
    default: *name = "?"; return -1;
  }
}

static void ggml_peer_open(ggml_peer_t* p, const char* dir) {
  memset(p, 0, sizeof *p);
  if (!dir) {
    snprintf(p->reason, sizeof p->reason, "no --ggml DIR given");
    return;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/libggml-base.so", dir);
  void* base = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (!base) {
    snprintf(p->reason, sizeof p->reason, "cannot load %s: %s", path, dlerror());
    return;
  }
  snprintf(path, sizeof path, "%s/libggml-cpu.so", dir);
  void* cpu = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (!cpu) {
    snprintf(p->reason, sizeof p->reason, "cannot load %s: %s", path, dlerror());
    return;
  }
  void (*cpu_init)(void) = (void (*)(void))dlsym(cpu, "ggml_cpu_init");
  p->traits = (const ggml_traits_cpu_t* (*)(int))dlsym(cpu, "ggml_get_type_traits_cpu");
  p->type_name = (const char* (*)(int))dlsym(base, "ggml_type_name");
  p->blck_size = (int64_t(*)(int))dlsym(base, "ggml_blck_size");
  p->type_size = (size_t(*)(int))dlsym(base, "ggml_type_size");
  if (!cpu_init || !p->traits || !p->type_name || !p->blck_size || !p->type_size) {
    snprintf(p->reason, sizeof p->reason, "%s lacks ggml_cpu_init or ggml_get_type_traits_cpu (too old a ggml)", dir);
    return;
  }
  const char* (*version)(void) = (const char* (*)(void))dlsym(base, "ggml_version");
  snprintf(p->version, sizeof p->version, "%s", version ? version() : "unknown");
  cpu_init();
  p->available = 1;
}

/* Why ggml cannot multiply `dtype` here, or NULL when it can. */
static const char* ggml_type_missing(const ggml_peer_t* p, sw_dtype_t dtype) {
  const char* name;
  const int type = ggml_type_of(dtype, &name);
  if (!p->available) return p->reason;
  /* ggml_type_name gives "NONE" past the version's last type. */
  if (type < 0 || strcmp(p->type_name(type), name) != 0) return "this ggml has no such type";
  if (p->blck_size(type) != (int64_t)sw_dtype_block_elements(dtype) ||
      p->type_size(type) != sw_dtype_block_bytes(dtype))
    return "ggml's block differs from StrideWeave's";
  const ggml_traits_cpu_t* tr = p->traits(type);
  if (!tr->vec_dot || !p->traits(tr->vec_dot_type)->from_float) return "no CPU vec_dot for this type";
  return NULL;
}

/* A barrier the threads spin on, as ggml's thread pool does inside a graph. */
typedef struct spin_barrier_t {
  atomic_int arrived, phase;
  int n;
} spin_barrier_t;

static void spin_barrier_wait(spin_barrier_t* b) {
  const int phase = atomic_load_explicit(&b->phase, memory_order_acquire);
  if (atomic_fetch_add_explicit(&b->arrived, 1, memory_order_acq_rel) == b->n - 1) {
    atomic_store_explicit(&b->arrived, 0, memory_order_relaxed);
    atomic_store_explicit(&b->phase, phase + 1, memory_order_release);
    return;
  }
  while (atomic_load_explicit(&b->phase, memory_order_acquire) == phase) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

typedef struct ggml_team_t ggml_team_t;
typedef struct ggml_worker_arg_t {
  ggml_team_t* team;
  int index;
} ggml_worker_arg_t;

struct ggml_team_t {
  int threads, quit;
  pthread_t ids[MAX_THREADS];
  ggml_worker_arg_t args[MAX_THREADS];
  pthread_barrier_t start, done; /* between passes the workers sleep */
  spin_barrier_t spin;           /* within a pass they spin */
  const ggml_traits_cpu_t* tr;
  ggml_from_float_fn from_float;
  int k, n, copies;
  size_t row_bytes;
  unsigned char* const* w;
  const float* x;
  void* xq;
  float* out;
};

/* One pass over the copies: thread `index`'s rows of each product. */
static void ggml_pass(ggml_team_t* t, int index) {
  const int b = t->n * index / t->threads, e = t->n * (index + 1) / t->threads;
  for (int c = 0; c < t->copies; ++c) {
    if (index == 0) t->from_float(t->x, t->xq, t->k);
    if (t->threads > 1) spin_barrier_wait(&t->spin);
    const unsigned char* w = t->w[c];
    for (int j = b; j < e; ++j) t->tr->vec_dot(t->k, &t->out[j], 0, w + (size_t)j * t->row_bytes, 0, t->xq, 0, 1);
    if (t->threads > 1) spin_barrier_wait(&t->spin);
  }
}

static void* ggml_worker(void* p) {
  ggml_worker_arg_t* a = p;
  for (;;) {
    pthread_barrier_wait(&a->team->start);
    if (a->team->quit) return NULL;
    ggml_pass(a->team, a->index);
    pthread_barrier_wait(&a->team->done);
  }
}

typedef struct ggml_result_t {
  const char* missing; /* NULL when timed */
  double gbs, best;
  double check; /* max over the N outputs of |StrideWeave - ggml| / the allowance; <= 1 passes */
} ggml_result_t;

/* Times ggml on `copies` weights of `dtype` made as bench_quant_decode makes
 * them (the same seeds: the same bytes), after checking that its products
 * agree with StrideWeave's on the first: each side is within the bound of
 * docs/quantization.md ("Error bound") of the exact product of x and the
 * dequantized weights, so the two may differ by the sum of the bounds,
 * sum over x's blocks b of (d_b / 2 + d'_b / 2) * sum_{i in b} |w_ij|, with
 * d'_b ggml's block scale (for a Q8_0 x block stored in f16, whose rounding
 * moves each value by up to 127 * 2^-11 d_b more: d'_b = 1.125 d_b), plus
 * 2e-5 * sum_i |x_i w_ij| for the f32 sums. */
static ggml_result_t bench_ggml_decode(sw_runtime_t* rt, const ggml_peer_t* p, sw_dtype_t dtype, int copies,
                                       int threads, int reps) {
  ggml_result_t res = {ggml_type_missing(p, dtype), 0, 0, 0};
  if (res.missing) return res;
  const char* name;
  const int type = ggml_type_of(dtype, &name);
  const int64_t k = 4096, n = 1024;
  const ggml_traits_cpu_t* tr = p->traits(type);
  const int qtype = tr->vec_dot_type;
  const size_t row_bytes = (size_t)k / (size_t)sw_dtype_block_elements(dtype) * sw_dtype_block_bytes(dtype);
  const size_t weight_bytes = row_bytes * (size_t)n;
  sw_tensor_t* a = matrix_of(rt, SW_DTYPE_F32, 1, k, 1);
  sw_tensor_t** w = malloc((size_t)copies * sizeof *w);
  unsigned char** wb = malloc((size_t)copies * sizeof *wb);
  for (int c = 0; c < copies; ++c) {
    w[c] = quant_matrix(rt, dtype, k, n, 2 + (uint64_t)c);
    wb[c] = (unsigned char*)host_pointer(w[c]);
  }
  float* x = malloc((size_t)k * sizeof *x);
  CHECK(sw_tensor_read(a, x, (size_t)k * sizeof *x));
  void* xq = alloc_pages((size_t)k / (size_t)p->blck_size(qtype) * p->type_size(qtype) + 64);
  float* out = alloc_pages((size_t)n * sizeof *out);

  ggml_team_t* team = alloc_pages(sizeof(ggml_team_t));
  memset(team, 0, sizeof *team);
  team->threads = threads;
  team->tr = tr;
  team->from_float = p->traits(qtype)->from_float;
  team->k = (int)k;
  team->n = (int)n;
  team->row_bytes = row_bytes;
  team->w = wb;
  team->x = x;
  team->xq = xq;
  team->out = out;
  team->spin.n = threads;

  { /* the check, on the first copy */
    team->threads = 1;
    team->copies = 1;
    ggml_pass(team, 0);
    team->threads = threads;
    sw_tensor_t* y = NULL;
    sw_tensor_t* wf = NULL;
    CHECK(sw_matmul(a, w[0], &y));
    CHECK(sw_tensor_to_dtype(w[0], SW_DTYPE_F32, &wf));
    float* ys = malloc((size_t)n * sizeof *ys);
    float* deq = malloc((size_t)(k * n) * sizeof *deq); /* (K, N), K fastest: column j at j * K */
    CHECK(sw_tensor_read(y, ys, (size_t)n * sizeof *ys));
    CHECK(sw_tensor_read(wf, deq, (size_t)(k * n) * sizeof *deq));
    const int xb = (qtype == 15) ? 256 : 32; /* Q8_K or Q8_0 blocks of x */
    const double ggml_scale = (qtype == 15) ? 1.0 : 1.125;
    for (int64_t j = 0; j < n; ++j) {
      double allowance = 0, abs_sum = 0;
      for (int64_t b0 = 0; b0 < k; b0 += xb) {
        double amax = 0, wsum = 0;
        for (int64_t i = b0; i < b0 + xb; ++i) {
          const double xi = fabs((double)x[i]), wi = fabs((double)deq[j * k + i]);
          amax = xi > amax ? xi : amax;
          wsum += wi;
          abs_sum += xi * wi;
        }
        allowance += (amax / 127.0) * 0.5 * (1.0 + ggml_scale) * wsum;
      }
      allowance += 2e-5 * abs_sum;
      const double r = fabs((double)ys[j] - (double)out[j]) / (allowance > 0 ? allowance : 1e-30);
      if (!(r <= res.check)) res.check = r; /* NaN sticks */
    }
    free(deq);
    free(ys);
    sw_tensor_release(wf);
    sw_tensor_release(y);
  }

  /* The runtime's compute threads may spin a while after its last product:
   * let them park before timing ggml's threads. */
  const struct timespec settle = {0, 50 * 1000 * 1000};
  nanosleep(&settle, NULL);
  team->copies = copies;
  pthread_barrier_init(&team->start, NULL, (unsigned)threads);
  pthread_barrier_init(&team->done, NULL, (unsigned)threads);
  for (int i = 1; i < threads; ++i) {
    team->args[i] = (ggml_worker_arg_t){team, i};
    pthread_create(&team->ids[i], NULL, ggml_worker, &team->args[i]);
  }
  double t[BENCH_MAX_REPS];
  for (int r = -2; r < reps; ++r) {
    if (threads > 1) pthread_barrier_wait(&team->start);
    const double t0 = now_seconds();
    ggml_pass(team, 0);
    const double s = (now_seconds() - t0) / copies;
    if (threads > 1) pthread_barrier_wait(&team->done);
    if (r >= 0) t[r] = s;
  }
  team->quit = 1;
  if (threads > 1) pthread_barrier_wait(&team->start);
  for (int i = 1; i < threads; ++i) pthread_join(team->ids[i], NULL);
  pthread_barrier_destroy(&team->start);
  pthread_barrier_destroy(&team->done);
  res.gbs = (double)weight_bytes / median(t, reps) * 1e-9;
  res.best = (double)weight_bytes / fastest(t, reps) * 1e-9;

  free(team);
  free(out);
  free(xq);
  free(x);
  for (int c = 0; c < copies; ++c) sw_tensor_release(w[c]);
  free(wb);
  free(w);
  sw_tensor_release(a);
  return res;
}

/* The DRAM read roof of the decode shapes: N threads summing 768 MiB, the
 * bytes the decode figures rotate through (64 MiB may sit in a large
 * last-level cache). */
static double bench_dram_roof(int threads, int reps) {
  unsigned char* buf = alloc_pages(DECODE_BYTES);
  memset(buf, 1, DECODE_BYTES);
  roof_team_t* team = alloc_pages(sizeof(roof_team_t));
  roof_start(team, threads);
  double t[BENCH_MAX_REPS];
  for (int r = -1; r < reps; ++r) {
    const double s = roof_run(team, TASK_READ, buf, NULL, DECODE_BYTES);
    if (r >= 0) t[r] = s;
  }
  roof_stop(team);
  free(team);
  free(buf);
  return (double)DECODE_BYTES * 1e-9 / median(t, reps);
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
          "  --threads N  compute threads of the runtime (and, through the environment, of the informational OpenBLAS)\n"
          "  --reps R     timed repetitions per figure, median reported (default 15, at most 255)\n"
          "  --mib M      size of each elementwise operand in MiB (default 64)\n"
          "  --ggml DIR   also time ggml's vec_dot on the quantized decode weights, DIR holding libggml-base.so\n"
          "               and libggml-cpu.so\n");
  exit(2);
}

int main(int argc, char** argv) {
  int threads = 1, reps = 15, mib = 64;
  const char* ggml_dir = NULL;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--mib") && i + 1 < argc)
      mib = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--ggml") && i + 1 < argc)
      ggml_dir = argv[++i];
    else
      usage();
  }
  if (threads < 1 || threads > MAX_THREADS || reps < 1 || reps > 255 || mib < 1 || mib > 4096) usage();

  printf("bench_cpu: StrideWeave %s, %d compute thread(s), %d repetitions per figure (medians)\n",
         sw_version_string(), threads, reps);
  int blas_threads = 0;
#ifdef SW_BENCH_CBLAS
  blas_threads = openblas_get_num_threads();
  const char* env = getenv("OPENBLAS_NUM_THREADS");
  printf("informational: system OpenBLAS %s, core %s, %d thread(s) (OPENBLAS_NUM_THREADS=%s)\n",
         openblas_get_config(), openblas_get_corename(), blas_threads, env ? env : "unset");
#endif

  const double load_before = load_average();
  sw_runtime_desc_t desc;
  sw_runtime_desc_init(&desc);
  desc.compute_threads = (uint32_t)threads;
  sw_runtime_t* rt = NULL;
  CHECK(sw_runtime_create(&desc, &rt));

  warm_up(rt, 0.3);
  matmul_result_t mm[SHAPES * 2];
  int count = 0;
  for (int d = 0; d < 2; ++d)
    for (int i = 0; i < SHAPES; ++i) mm[count++] = bench_matmul(rt, &kShapes[i], kMatmulDtypes[d], reps, 0);
  const experts_result_t ex = bench_experts(rt, reps);
  quant_result_t qd[QUANT_DTYPES];
  for (int i = 0; i < QUANT_DTYPES; ++i) qd[i] = bench_quant_decode(rt, kQuantDtypes[i], reps);
  stream_result_t st = bench_stream(rt, threads, reps, mib);
  const double dram_gbs = bench_dram_roof(threads, reps < 5 ? reps : 5);
#ifdef SW_BENCH_CBLAS
  for (int i = 0; i < SHAPES; ++i) { /* mm[i] are the f32 figures */
    const matmul_result_t b = bench_matmul(rt, &kShapes[i], SW_DTYPE_F32, reps, 1);
    mm[i].blas_gflops = b.blas_gflops;
    mm[i].blas_best = b.blas_best;
  }
#endif
  /* ggml after every StrideWeave figure, as the system BLAS. */
  ggml_peer_t ggml;
  ggml_peer_open(&ggml, ggml_dir);
  ggml_result_t gq[QUANT_DTYPES];
  for (int i = 0; i < QUANT_DTYPES; ++i)
    gq[i] = bench_ggml_decode(rt, &ggml, kQuantDtypes[i], qd[i].copies, threads, reps);
  sw_runtime_release(rt);
  const double load_after = load_average();
  printf("load average (1 min, this benchmark included): %.2f before, %.2f after\n", load_before, load_after);

  printf("\nmatmul, GFLOP/s (per call)            dtype   StrideWeave   best   weights GB/s   cblas_sgemm (info)\n");
  for (int i = 0; i < count; ++i)
    printf("  %-36s %-6s %11.1f %7.1f %14.2f %12.1f\n", mm[i].shape->name, sw_dtype_name(mm[i].dtype), mm[i].sw_gflops,
           mm[i].sw_best, mm[i].sw_weight_gbs, mm[i].blas_gflops);
  printf("  DRAM read roof (%d thread(s) summing 768 MiB): %.2f GB/s\n", threads, dram_gbs);
  printf("\nquantized decode 1x4096->1024 (x f32), GB/s of quantized weight bytes   / DRAM read roof\n");
  for (int i = 0; i < QUANT_DTYPES; ++i)
    printf("  %-8s %4d copies %8.2f %8.3f   best %8.2f\n", sw_dtype_name(qd[i].dtype), qd[i].copies, qd[i].gbs,
           qd[i].gbs / dram_gbs, qd[i].best);
  if (ggml.available) {
    printf("  ggml %s peer (from_float + vec_dot per row, %d thread(s)), same weight bytes:\n", ggml.version, threads);
    printf("    dtype      ggml GB/s   best   StrideWeave/ggml   check (|SW - ggml| / bound, <= 1)\n");
    for (int i = 0; i < QUANT_DTYPES; ++i) {
      if (gq[i].missing)
        printf("    %-8s   not timed: %s\n", sw_dtype_name(qd[i].dtype), gq[i].missing);
      else
        printf("    %-8s %11.2f %6.2f %18.3f   %.2g %s\n", sw_dtype_name(qd[i].dtype), gq[i].gbs, gq[i].best,
               qd[i].gbs / gq[i].gbs, gq[i].check, gq[i].check <= 1.0 ? "ok" : "FAIL");
    }
  } else {
    printf("  ggml peer: not available (%s)\n", ggml.reason);
  }
  printf("\nexperts: %lld of (%lld, %lld) f32, x (%lld, %lld) shared, ms per batched matmul\n", (long long)ex.s,
         (long long)ex.i, (long long)ex.o, (long long)ex.m, (long long)ex.i);
  printf("  one block per expert, (S, I, O) view  %8.2f\n", ex.view_ms);
  printf("  %lld plain matmuls on the same memory   %8.2f   view / plain time %.3f\n", (long long)ex.s, ex.plain_ms,
         ex.view_ms / ex.plain_ms);
  printf("  interleaved (expert mode fastest)     %8.2f   repacking costs %.2f ms (%.2fx the view)\n",
         ex.interleaved_ms, ex.interleaved_ms - ex.view_ms, ex.interleaved_ms / ex.view_ms);
  printf("\n%d MiB f32, GB/s moved (reads + writes)   GB/s   / read roof   / memcpy   best: GB/s   / roof\n", mib);
  printf("  %-37s %7.2f %12.3f %10.3f %12.2f %8.3f\n", "roof: read (sum)", st.read_gbs, 1.0,
         st.read_gbs / st.memcpy_gbs, st.read_best, 1.0);
  printf("  %-37s %7.2f %12.3f %10.3f %12.2f %8.3f\n", "roof: memcpy, warm destination", st.memcpy_gbs,
         st.memcpy_gbs / st.read_gbs, 1.0, st.memcpy_best, st.memcpy_best / st.read_best);
  for (int op = 0; op < OP_COUNT; ++op)
    printf("  %-37s %7.2f %12.3f %10.3f %12.2f %8.3f\n", kOpNames[op], st.op_gbs[op], st.op_gbs[op] / st.read_gbs,
           st.op_gbs[op] / st.memcpy_gbs, st.op_best[op], st.op_best[op] / st.read_best);

  printf("\nBENCH_JSON {\"threads\": %d, \"openblas_threads\": %d, \"reps\": %d, \"mib\": %d, \"load\": [%.2f, %.2f], "
         "\"matmul\": [",
         threads, blas_threads, reps, mib, load_before, load_after);
  for (int i = 0; i < count; ++i)
    printf("%s{\"shape\": \"%s\", \"dtype\": \"%s\", \"m\": %lld, \"k\": %lld, \"n\": %lld, \"decode\": %s, "
           "\"copies\": %d, \"sw_gflops\": %.2f, \"sw_best\": %.2f, \"sw_weight_gbs\": %.3f, \"blas_gflops\": %.2f, "
           "\"blas_best\": %.2f}",
           i ? ", " : "", mm[i].shape->name, sw_dtype_name(mm[i].dtype), (long long)mm[i].shape->m,
           (long long)mm[i].shape->k, (long long)mm[i].shape->n, mm[i].shape->decode ? "true" : "false", mm[i].copies,
           mm[i].sw_gflops, mm[i].sw_best, mm[i].sw_weight_gbs, mm[i].blas_gflops, mm[i].blas_best);
  printf("], \"quant_decode\": [");
  for (int i = 0; i < QUANT_DTYPES; ++i) {
    printf("%s{\"dtype\": \"%s\", \"copies\": %d, \"gbs\": %.3f, \"best\": %.3f", i ? ", " : "",
           sw_dtype_name(qd[i].dtype), qd[i].copies, qd[i].gbs, qd[i].best);
    if (ggml.available && !gq[i].missing)
      printf(", \"ggml_gbs\": %.3f, \"ggml_best\": %.3f, \"ggml_check\": %.5f", gq[i].gbs, gq[i].best, gq[i].check);
    else
      printf(", \"ggml_missing\": \"%s\"", json_safe(gq[i].missing));
    printf("}");
  }
  printf("], \"ggml\": {\"available\": %s, \"version\": \"%s\", \"reason\": \"%s\"", ggml.available ? "true" : "false",
         json_safe(ggml.version), json_safe(ggml.available ? "" : ggml.reason));
  printf("}, \"experts\": {\"s\": %lld, \"m\": %lld, \"i\": %lld, \"o\": %lld, \"view_ms\": %.3f, \"plain_ms\": %.3f, "
         "\"interleaved_ms\": %.3f}",
         (long long)ex.s, (long long)ex.m, (long long)ex.i, (long long)ex.o, ex.view_ms, ex.plain_ms,
         ex.interleaved_ms);
  printf(", \"roof\": {\"read_gbs\": %.3f, \"memcpy_gbs\": %.3f, \"read_best\": %.3f, \"memcpy_best\": %.3f, "
         "\"dram_read_gbs\": %.3f}, \"elementwise\": [",
         st.read_gbs, st.memcpy_gbs, st.read_best, st.memcpy_best, dram_gbs);
  for (int op = 0; op < OP_COUNT; ++op)
    printf("%s{\"op\": \"%s\", \"gbs\": %.3f, \"ratio_read_roof\": %.4f, \"ratio_memcpy\": %.4f, "
           "\"best\": %.3f, \"ratio_best\": %.4f}",
           op ? ", " : "", kOpNames[op], st.op_gbs[op], st.op_gbs[op] / st.read_gbs, st.op_gbs[op] / st.memcpy_gbs,
           st.op_best[op], st.op_best[op] / st.read_best);
  printf("]}\n");
  return 0;
}
