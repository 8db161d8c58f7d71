/* Every path of the CPU GEMM through sw_matmul, against a double-precision
 * reference: f32, f64, bf16 and f16 (half and f32 results), each operand
 * column major, row major and padded, batches of expert matrices in the
 * recommended geometry and interleaved, K = 0, vector products (M = 1
 * decoding, N = 1), the odd shapes 1000x999x1003, 17x4096x1024 and
 * 65x4095x1023, on one and two compute threads. Outputs come from a buffer
 * pool poisoned with NaN first, so a kernel that skips an element (or reads
 * C with beta = 0) shows. Large products are checked on their edge rows and
 * columns and a sample of other elements, and scanned for non-finite values.
 *
 * Run again with ONEDNN_MAX_CPU_ISA=AVX2 (tests/c/meson.build): the path a
 * CPU without AVX-512 or bf16 instructions takes. */
#include "sw_ops_test.h"

typedef struct gemm_fixture {
  sw_runtime_t* rt[2]; /* 1 and 2 compute threads */
  int threads;         /* of the process once both runtimes exist */
} gemm_fixture;

static int thread_count(void);

static int gemm_setup(void** state) {
  gemm_fixture* f = (gemm_fixture*)calloc(1, sizeof *f);
  for (int t = 0; t < 2; ++t) {
    sw_runtime_desc_t desc;
    sw_runtime_desc_init(&desc);
    desc.compute_threads = (uint32_t)(t + 1);
    if (sw_runtime_create(&desc, &f->rt[t])) return -1;
  }
  f->threads = thread_count();
  *state = f;
  return 0;
}

static int gemm_teardown(void** state) {
  gemm_fixture* f = (gemm_fixture*)*state;
  for (int t = 0; t < 2; ++t) sw_runtime_release(f->rt[t]);
  free(f);
  return 0;
}

/* Multiples of 1/16 in [-4, 4): exact in bf16 and f16. */
static double pat_sixteenth(int64_t s, int seed) {
  return (double)(((s * 37 + seed * 101 + 5) % 128 + 128) % 128 - 64) / 16.0;
}

/* A (rows, cols) operand with strides (rs, cs) at slot 0 of its own carrier,
 * slot s holding pat_sixteenth(s, seed): op_strided for matrices, walking
 * 64 x 64 blocks so that row-major operands of millions of elements build
 * quickly. */
static operand op_matrix_at(sw_runtime_t* rt, sw_dtype_t dtype, int64_t rows, int64_t cols, int64_t rs, int64_t cs,
                            int seed, int64_t offset) {
  const int64_t shape[2] = {rows, cols};
  operand o = operand_alloc(2, shape);
  const int64_t slots = offset + (rows && cols ? (rows - 1) * rs + (cols - 1) * cs + 1 : 1);
  double* slot_values = (double*)malloc(sizeof(double) * (size_t)slots);
  for (int64_t s = 0; s < slots; ++s) slot_values[s] = pat_sixteenth(s, seed);
  void* raw = malloc(8 * (size_t)slots);
  encode_elements(dtype, slot_values, slots, raw);
  sw_carrier_t* carrier = NULL;
  SW_OK_(sw_carrier_create_cpu_from(rt, dtype, raw, (size_t)slots, &carrier));
  sw_layout_t* layout = NULL;
  const int64_t strides[2] = {rs, cs};
  SW_OK_(sw_layout_create(shape, strides, 2, &layout));
  SW_OK_(sw_tensor_create(carrier, offset, layout, &o.t));
  for (int64_t j0 = 0; j0 < cols; j0 += 64)
    for (int64_t i0 = 0; i0 < rows; i0 += 64)
      for (int64_t j = j0; j < cols && j < j0 + 64; ++j)
        for (int64_t i = i0; i < rows && i < i0 + 64; ++i) o.v[i + rows * j] = slot_values[offset + i * rs + j * cs];
  sw_layout_release(layout);
  sw_carrier_release(carrier);
  free(raw);
  free(slot_values);
  return o;
}

static operand op_matrix(sw_runtime_t* rt, sw_dtype_t dtype, int64_t rows, int64_t cols, int64_t rs, int64_t cs,
                         int seed) {
  return op_matrix_at(rt, dtype, rows, cols, rs, cs, seed, 0);
}

/* Leaves `count` elements of NaN in the runtime's buffer pool, where the
 * next result of that size comes from. */
static void poison_pool(sw_runtime_t* rt, sw_dtype_t dtype, int64_t count) {
  if (count <= 0) return;
  const size_t es = sw_dtype_size(dtype);
  unsigned char* raw = (unsigned char*)malloc(es * (size_t)count);
  for (int64_t i = 0; i < count; ++i) {
    if (dtype == SW_DTYPE_F32) {
      const float v = NAN;
      memcpy(raw + 4 * i, &v, 4);
    } else if (dtype == SW_DTYPE_F64) {
      const double v = NAN;
      memcpy(raw + 8 * i, &v, 8);
    } else {
      const uint16_t v = dtype == SW_DTYPE_BF16 ? 0x7fc0 : 0x7e00;
      memcpy(raw + 2 * i, &v, 2);
    }
  }
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_from_data(rt, dtype, &count, 1, raw, &t));
  sw_tensor_release(t);
  free(raw);
}

/* An (rows, cols) operand column major, row major, or either with a padded
 * leading dimension. */
typedef enum { COL, ROW, COL_PADDED, ROW_PADDED } form_t;
static const char* const kForms[] = {"column major", "row major", "column major, padded", "row major, padded"};

static operand op_form(sw_runtime_t* rt, sw_dtype_t dtype, form_t form, int64_t rows, int64_t cols, int seed) {
  switch (form) {
    case COL: return op_matrix(rt, dtype, rows, cols, 1, rows, seed);
    case ROW: return op_matrix(rt, dtype, rows, cols, cols, 1, seed);
    case COL_PADDED: return op_matrix(rt, dtype, rows, cols, 1, rows + 3, seed);
    default: return op_matrix(rt, dtype, rows, cols, cols + 5, 1, seed);
  }
}

/* Allowed error of a result element: the f32 (f64) accumulation's, relative
 * to sum |a b|, plus one rounding of a half result. */
static double tolerance(sw_dtype_t in, sw_dtype_t out, double want, double abs_sum) {
  const double acc = in == SW_DTYPE_F64 ? 1e-13 : 1e-5;
  const double round = out == SW_DTYPE_BF16 ? 1.0 / 256 : out == SW_DTYPE_F16 ? 1.0 / 2048 : 0.0;
  return acc * abs_sum + round * fabs(want) + 1e-30;
}

/* Checks r = a @ b for 2-D a (M, K), b (K, N) given as logical values: every
 * element when the product is small, else the edge rows and columns and a
 * sample; every element must be finite. */
static void check_product(const char* what, sw_tensor_t* r, const operand* a, const operand* b, sw_dtype_t in,
                          sw_dtype_t out) {
  const int64_t M = a->shape[0], K = a->shape[1], N = b->shape[1];
  const int64_t shape[2] = {M, N};
  double* got = result_values(r, out, shape, 2);
  for (int64_t e = 0; e < M * N; ++e)
    if (!isfinite(got[e])) fail_msg("%s: element (%lld, %lld) is %g", what, (long long)(e % M), (long long)(e / M), got[e]);
  const bool all = (double)M * (double)N * (double)K <= 4e6;
  int64_t checked = 0;
  uint64_t s = 0x9E3779B97F4A7C15ull;
  const int64_t samples = all ? M * N : M + N + 128;
  for (int64_t q = 0; q < samples; ++q) {
    int64_t i, j;
    if (all) {
      i = q % M;
      j = q / M;
    } else if (q < N) { /* the last row: every column block's edge */
      i = M - 1;
      j = q;
    } else if (q < N + M) { /* the last column */
      i = q - N;
      j = N - 1;
    } else {
      s ^= s << 13;
      s ^= s >> 7;
      s ^= s << 17;
      i = (int64_t)(s % (uint64_t)M);
      j = (int64_t)((s >> 32) % (uint64_t)N);
    }
    double want = 0, abs_sum = 0;
    for (int64_t k = 0; k < K; ++k) {
      const double x = a->v[i + M * k] * b->v[k + K * j];
      want += x;
      abs_sum += fabs(x);
    }
    const double g = got[i + M * j];
    if (!(fabs(g - want) <= tolerance(in, out, want, abs_sum)))
      fail_msg("%s: element (%lld, %lld) is %.9g, expected %.9g", what, (long long)i, (long long)j, g, want);
    ++checked;
  }
  assert_true(checked > 0);
  free(got);
  sw_tensor_release(r);
}

/* Which runtimes a case runs on: bit t for t + 1 threads. */
enum { ONE = 1, TWO = 2, BOTH = 3 };

/* a @ b into each result dtype of `dtype` operands (itself, and f32 for
 * half ones), each from a pool left holding NaNs; `label` names the case. */
static void check_outputs(sw_runtime_t* rt, const operand* a, const operand* b, sw_dtype_t dtype, const char* label) {
  char what[320];
  const bool half = dtype == SW_DTYPE_BF16 || dtype == SW_DTYPE_F16;
  for (int wide = 0; wide < (half ? 2 : 1); ++wide) {
    const sw_dtype_t out = wide ? SW_DTYPE_F32 : dtype;
    snprintf(what, sizeof what, "%s -> %s", label, sw_dtype_name(out));
    poison_pool(rt, out, a->shape[0] * b->shape[1]);
    sw_matmul_desc_t desc;
    sw_matmul_desc_init(&desc);
    desc.out_dtype = out;
    sw_tensor_t* r = NULL;
    SW_OK_(sw_matmul_ex(a->t, b->t, &desc, &r));
    check_product(what, r, a, b, dtype, out);
  }
}

/* a (M, K) in form fa, b (K, N) in form fb, on the thread counts of
 * `threads`; half operands also with an f32 result. */
static void check_gemm(gemm_fixture* f, int threads, sw_dtype_t dtype, int64_t M, int64_t K, int64_t N, form_t fa,
                       form_t fb) {
  char label[256];
  for (int t = 0; t < 2; ++t) {
    if (!(threads & (1 << t))) continue;
    operand a = op_form(f->rt[t], dtype, fa, M, K, 1);
    operand b = op_form(f->rt[t], dtype, fb, K, N, 2);
    snprintf(label, sizeof label, "%s %lldx%lldx%lld, a %s, b %s, %d thread(s)", sw_dtype_name(dtype), (long long)M,
             (long long)K, (long long)N, kForms[fa], kForms[fb], t + 1);
    check_outputs(f->rt[t], &a, &b, dtype, label);
    operand_free(&a);
    operand_free(&b);
  }
}

static const sw_dtype_t kDtypes[] = {SW_DTYPE_F32, SW_DTYPE_F64, SW_DTYPE_BF16, SW_DTYPE_F16};

/* Each operand column major or row major (NN, NT, TN, TT in BLAS terms),
 * with and without padding. */
static const form_t kFormPairs[][2] = {{COL, COL},          {COL, ROW}, {ROW, COL}, {ROW, ROW},
                                       {COL_PADDED, ROW_PADDED}, {ROW_PADDED, COL_PADDED}};
#define FORM_PAIRS (sizeof kFormPairs / sizeof kFormPairs[0])

/* Small and medium shapes, every pair of operand forms, every dtype. */
static void gemm_layouts(void** state) {
  gemm_fixture* f = (gemm_fixture*)*state;
  static const int64_t shapes[][3] = {{1, 1, 1}, {15, 17, 13}, {257, 129, 511}, {64, 256, 96}};
  for (size_t d = 0; d < 4; ++d)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
      for (size_t p = 0; p < FORM_PAIRS; ++p)
        check_gemm(f, BOTH, kDtypes[d], shapes[s][0], shapes[s][1], shapes[s][2], kFormPairs[p][0], kFormPairs[p][1]);
}

/* The odd shapes past every block size; f64 and f16, whose blocks run the
 * same code on either thread count, on two threads only. */
static void gemm_odd_shapes(void** state) {
  gemm_fixture* f = (gemm_fixture*)*state;
  for (size_t d = 0; d < 4; ++d) {
    const int threads = kDtypes[d] == SW_DTYPE_F32 || kDtypes[d] == SW_DTYPE_BF16 ? BOTH : TWO;
    check_gemm(f, threads, kDtypes[d], 17, 4096, 1024, COL, COL);
    check_gemm(f, threads, kDtypes[d], 17, 4096, 1024, ROW_PADDED, ROW);
    check_gemm(f, threads, kDtypes[d], 65, 4095, 1023, COL, ROW);
    check_gemm(f, threads, kDtypes[d], 65, 4095, 1023, ROW, COL_PADDED);
  }
  check_gemm(f, BOTH, SW_DTYPE_F32, 1000, 999, 1003, COL, COL);
  check_gemm(f, TWO, SW_DTYPE_F32, 1000, 999, 1003, ROW, ROW_PADDED);
  check_gemm(f, BOTH, SW_DTYPE_BF16, 1000, 999, 1003, COL, COL);
  check_gemm(f, TWO, SW_DTYPE_BF16, 1000, 999, 1003, ROW_PADDED, COL);
}

/* Vector products: one token through a weight matrix in either layout
 * (x @ W^T of a row-major (out, in) weight is the column-major (K, N) one),
 * and a matrix times one column. */
static void gemm_vectors(void** state) {
  gemm_fixture* f = (gemm_fixture*)*state;
  for (size_t d = 0; d < 4; ++d) {
    check_gemm(f, ONE, kDtypes[d], 1, 4096, 1024, COL, COL);
    check_gemm(f, TWO, kDtypes[d], 1, 4096, 1024, ROW, ROW);
    check_gemm(f, TWO, kDtypes[d], 1024, 4096, 1, ROW, COL);
    for (int fo = 0; fo < 4; ++fo) {
      check_gemm(f, BOTH, kDtypes[d], 1, 1023, 333, ROW, fo);
      check_gemm(f, BOTH, kDtypes[d], 333, 1023, 1, fo, ROW);
    }
  }
}

/* One token through bf16 weights that start anywhere (a tile a direct-I/O
 * read filled in place starts at its file offset's remainder): every even
 * byte offset into a cache line, the contraction (K) contiguous with a
 * leading dimension that keeps the columns' alignment equal (a multiple of
 * 32) or not, K shorter than, equal to and longer than the aligning head. */
static void gemm_unaligned_weights(void** state) {
  gemm_fixture* f = (gemm_fixture*)*state;
  static const int64_t shapes[][2] = {{1024, 1024}, {1000, 1024}, {5, 32}, {32, 64}, {1023, 1023}, {77, 96}};
  char label[256];
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
    for (int64_t offset = 0; offset < 32; offset += (s == 0 ? 1 : 7)) {
      const int64_t K = shapes[s][0], ld = shapes[s][1], N = 19;
      operand a = op_matrix(f->rt[1], SW_DTYPE_BF16, 1, K, K, 1, 1);
      operand b = op_matrix_at(f->rt[1], SW_DTYPE_BF16, K, N, 1, ld, 2, offset);
      snprintf(label, sizeof label, "bf16 1x%lldx%lld, ld %lld, weights at element %lld", (long long)K, (long long)N,
               (long long)ld, (long long)offset);
      check_outputs(f->rt[1], &a, &b, SW_DTYPE_BF16, label);
      operand_free(&a);
      operand_free(&b);
    }
}

/* K = 0: zeros, whatever the pool held. */
static void gemm_empty_contraction(void** state) {
  gemm_fixture* f = (gemm_fixture*)*state;
  for (size_t d = 0; d < 4; ++d)
    for (int t = 0; t < 2; ++t) {
      const int64_t sa[2] = {300, 0}, sb[2] = {0, 200}, sv[2] = {1, 0};
      operand a = op_dense(f->rt[t], kDtypes[d], sa, 2, pat_sixteenth, 1);
      operand b = op_dense(f->rt[t], kDtypes[d], sb, 2, pat_sixteenth, 2);
      operand v = op_dense(f->rt[t], kDtypes[d], sv, 2, pat_sixteenth, 3);
      poison_pool(f->rt[t], kDtypes[d], 300 * 200);
      sw_tensor_t* r = NULL;
      SW_OK_(sw_matmul(a.t, b.t, &r));
      check_product("K = 0", r, &a, &b, kDtypes[d], kDtypes[d]);
      poison_pool(f->rt[t], kDtypes[d], 200);
      SW_OK_(sw_matmul(v.t, b.t, &r));
      check_product("K = 0, M = 1", r, &v, &b, kDtypes[d], kDtypes[d]);
      operand_free(&a);
      operand_free(&b);
      operand_free(&v);
    }
}

/* Batches of expert matrices. S experts of a row-major (E, O, I) weight are
 * the first-mode-fastest (I, O, S) compact tensor; its view (S, I, O)
 * gives each expert as a column-major (K = I, N = O) matrix, read in place.
 * Tokens shared by every expert (x (M, I) broadcast) and per-expert tokens
 * (S, M, I); and the interleaved (S, I, O) layout (expert mode fastest),
 * which is packed per expert. */
static void gemm_expert_batches(void** state) {
  gemm_fixture* f = (gemm_fixture*)*state;
  const int64_t S = 3, M = 17, I = 300, O = 130;
  for (size_t d = 0; d < 4; ++d)
    for (int t = 0; t < 2; ++t) {
      sw_runtime_t* rt = f->rt[t];
      char lw[128], lx[64], lxs[128];
      snprintf(lw, sizeof lw, "(%lld,%lld,%lld):(%lld,1,%lld)", (long long)S, (long long)I, (long long)O,
               (long long)(I * O + 7), (long long)I);
      snprintf(lx, sizeof lx, "(%lld,%lld):(1,%lld)", (long long)M, (long long)I, (long long)M);
      snprintf(lxs, sizeof lxs, "(%lld,%lld,%lld):(%lld,1,%lld)", (long long)S, (long long)M, (long long)I,
               (long long)(M * I), (long long)M);
      const char* interleaved = NULL;
      char li[128];
      snprintf(li, sizeof li, "(%lld,%lld,%lld):(1,%lld,%lld)", (long long)S, (long long)I, (long long)O, (long long)S,
               (long long)(S * I));
      interleaved = li;
      const char* weights[2] = {lw, interleaved};
      for (int w = 0; w < 2; ++w) {
        operand wt = op_strided(rt, kDtypes[d], weights[w], 0, pat_sixteenth, 4);
        operand x = op_strided(rt, kDtypes[d], lx, 0, pat_sixteenth, 5);
        operand xs = op_strided(rt, kDtypes[d], lxs, 0, pat_sixteenth, 6);
        for (int per_expert = 0; per_expert < 2; ++per_expert) {
          const operand* xa = per_expert ? &xs : &x;
          poison_pool(rt, kDtypes[d], S * M * O);
          sw_tensor_t* r = NULL;
          SW_OK_(sw_matmul(xa->t, wt.t, &r));
          int64_t shape[SW_MAX_RANK];
          size_t rank = 0;
          double* abs_sum = NULL;
          double* want = ref_matmul(xa, &wt, shape, &rank, &abs_sum);
          assert_int_equal(rank, 3);
          double* got = result_values(r, kDtypes[d], shape, rank);
          double* tol = (double*)malloc(sizeof(double) * (size_t)(S * M * O));
          for (int64_t e = 0; e < S * M * O; ++e) tol[e] = tolerance(kDtypes[d], kDtypes[d], want[e], abs_sum[e]);
          char what[160];
          snprintf(what, sizeof what, "%s experts %s, %s tokens, %d thread(s)", sw_dtype_name(kDtypes[d]),
                   w ? "interleaved" : "one block each", per_expert ? "per-expert" : "shared", t + 1);
          expect_within(what, got, want, tol, S * M * O);
          free(tol);
          free(got);
          free(want);
          free(abs_sum);
          sw_tensor_release(r);
        }
        operand_free(&wt);
        operand_free(&x);
        operand_free(&xs);
      }
    }
}

/* Threads of this process, from /proc (Linux); -1 elsewhere. */
static int thread_count(void) {
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  int n = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "Threads: %d", &n) == 1) break;
  fclose(f);
  return n;
}

/* The GEMM runs on the runtimes' own threads: after every product of the
 * suite (it runs last) the process has no thread more than when the two
 * runtimes had just been created, so oneDNN's OpenMP runtime never started
 * a team of its own. */
static void gemm_starts_no_threads(void** state) {
  gemm_fixture* f = (gemm_fixture*)*state;
  if (f->threads < 0) skip();
  const sw_dtype_t dtypes[3] = {SW_DTYPE_F32, SW_DTYPE_BF16, SW_DTYPE_F16};
  for (int d = 0; d < 3; ++d) check_gemm(f, BOTH, dtypes[d], 256, 512, 384, COL, COL);
  assert_int_equal(thread_count(), f->threads);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(gemm_layouts),
      cmocka_unit_test(gemm_odd_shapes),
      cmocka_unit_test(gemm_vectors),
      cmocka_unit_test(gemm_unaligned_weights),
      cmocka_unit_test(gemm_empty_contraction),
      cmocka_unit_test(gemm_expert_batches),
      cmocka_unit_test(gemm_starts_no_threads),
  };
  return cmocka_run_group_tests(tests, gemm_setup, gemm_teardown);
}
