/* Products with block-quantized weights through the C ABI: sw_matmul of f32
 * activations and Q8_0 / Q4_0 / MXFP4 weights whose values make every sum
 * exact in f32 (activations on their blocks' grid), the result's dtype, and the
 * refusals: a non-float left operand, a batched or rank-3 weight, a result
 * dtype the kernels do not give, gradients. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sw_test.h"

static void put_half_one(unsigned char* p) { /* f16 1.0 = 0x3c00 */
  p[0] = 0x00;
  p[1] = 0x3c;
}

/* W (64, 3) in Q8_0: column j's code at row p is ((p * 7 + j * 13) % 255) - 127, d = 1. */
static sw_tensor_t* q8_weights(sw_runtime_t* rt, int32_t codes[3][64]) {
  unsigned char bytes[3 * 2 * 34];
  for (int j = 0; j < 3; ++j)
    for (int b = 0; b < 2; ++b) {
      unsigned char* blk = bytes + (j * 2 + b) * 34;
      put_half_one(blk);
      for (int l = 0; l < 32; ++l) {
        const int p = 32 * b + l;
        codes[j][p] = (p * 7 + j * 13) % 255 - 127;
        blk[2 + l] = (unsigned char)(int8_t)codes[j][p];
      }
    }
  const int64_t shape[2] = {64, 3};
  sw_tensor_t* w = NULL;
  SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_Q8_0, shape, 2, bytes, &w));
  return w;
}

/* x (2, 64), first mode fastest: each 32-value block holds a 127 (its
 * largest magnitude), so every value is an exact multiple of its scale 1. */
static sw_tensor_t* grid_x(sw_runtime_t* rt, float x[2][64]) {
  float buf[128];
  for (int i = 0; i < 2; ++i)
    for (int p = 0; p < 64; ++p) {
      x[i][p] = (p % 32 == 0) ? 127.0f : (float)((p * (i + 3)) % 41 - 20);
      buf[i + 2 * p] = x[i][p];
    }
  const int64_t shape[2] = {2, 64};
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_F32, shape, 2, buf, &t));
  return t;
}

static void test_q8_0_matmul_is_exact_on_the_grid(void** state) {
  sw_runtime_t* rt = *state;
  int32_t codes[3][64];
  float x[2][64];
  sw_tensor_t* w = q8_weights(rt, codes);
  sw_tensor_t* a = grid_x(rt, x);
  sw_tensor_t* y = NULL;
  SW_OK_(sw_matmul(a, w, &y));
  sw_dtype_t dt;
  SW_OK_(sw_tensor_dtype(y, &dt));
  assert_int_equal(dt, SW_DTYPE_F32);
  size_t rank;
  SW_OK_(sw_tensor_rank(y, &rank));
  assert_int_equal(rank, 2);
  int64_t shape[2];
  SW_OK_(sw_tensor_shape(y, shape, 2));
  assert_int_equal(shape[0], 2);
  assert_int_equal(shape[1], 3);
  float got[6];
  SW_OK_(sw_tensor_read(y, got, sizeof got));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      int64_t want = 0;
      for (int p = 0; p < 64; ++p) want += (int64_t)codes[j][p] * (int64_t)x[i][p];
      if (got[i + 2 * j] != (float)want) fail_msg("y[%d, %d] = %.9g, expected %lld", i, j, got[i + 2 * j], (long long)want);
    }
  /* bf16: the f32 sums rounded once. */
  sw_matmul_desc_t d;
  sw_matmul_desc_init(&d);
  d.out_dtype = SW_DTYPE_BF16;
  sw_tensor_t* yb = NULL;
  SW_OK_(sw_matmul_ex(a, w, &d, &yb));
  SW_OK_(sw_tensor_dtype(yb, &dt));
  assert_int_equal(dt, SW_DTYPE_BF16);
  sw_tensor_release(yb);
  sw_tensor_release(y);
  sw_tensor_release(a);
  sw_tensor_release(w);
}

/* Q4_0 with d = 1: values q - 8; x a vector (K). */
static void test_q4_0_vector_times_matrix(void** state) {
  sw_runtime_t* rt = *state;
  unsigned char bytes[2 * 18];
  int32_t v[2][32];
  for (int j = 0; j < 2; ++j) {
    unsigned char* blk = bytes + 18 * j;
    put_half_one(blk);
    for (int l = 0; l < 16; ++l) {
      const int lo = (l + 3 * j) % 16, hi = (l * 5 + j) % 16;
      blk[2 + l] = (unsigned char)(lo | (hi << 4));
      v[j][l] = lo - 8;
      v[j][l + 16] = hi - 8;
    }
  }
  const int64_t wshape[2] = {32, 2};
  sw_tensor_t* w = NULL;
  SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_Q4_0, wshape, 2, bytes, &w));
  float xs[32];
  for (int p = 0; p < 32; ++p) xs[p] = p == 5 ? -127.0f : (float)(p % 9 - 4);
  const int64_t k = 32;
  sw_tensor_t* a = NULL;
  SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_F32, &k, 1, xs, &a));
  sw_tensor_t* y = NULL;
  SW_OK_(sw_matmul(a, w, &y));
  size_t rank;
  SW_OK_(sw_tensor_rank(y, &rank));
  assert_int_equal(rank, 1);
  float got[2];
  SW_OK_(sw_tensor_read(y, got, sizeof got));
  for (int j = 0; j < 2; ++j) {
    int64_t want = 0;
    for (int p = 0; p < 32; ++p) want += (int64_t)v[j][p] * (int64_t)xs[p];
    assert_true(got[j] == (float)want);
  }
  sw_tensor_release(y);
  sw_tensor_release(a);
  sw_tensor_release(w);
}

/* Q8_0, Q4_0 and MXFP4 weights of unit scale, K = 288: nine blocks per
 * column, which the AVX-512 kernels take as two steps of four blocks (Q8_0:
 * four of two) and one block by itself, against x (2, K) on its grid (every
 * block of 32 holds a 127), rows at stride 1 and values at stride 2 (first
 * mode fastest), and against row 0 alone as a vector (K): exact sums. */
enum { GRID_K = 288, GRID_N = 5, GRID_BLOCKS = GRID_K / 32 };

static const int kFp4Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* Column j's block b of `dtype` at `blk`; doubled[l] gets twice each value. */
static size_t grid_block(sw_dtype_t dtype, int j, int b, unsigned char* blk, int32_t doubled[32]) {
  for (int l = 0; l < 32; ++l) doubled[l] = 0;
  if (dtype == SW_DTYPE_Q8_0) {
    put_half_one(blk);
    for (int l = 0; l < 32; ++l) {
      const int q = (l * 11 + b * 7 + j * 29) % 255 - 127;
      blk[2 + l] = (unsigned char)(int8_t)q;
      doubled[l] = 2 * q;
    }
    return 34;
  }
  const int q4 = dtype == SW_DTYPE_Q4_0;
  if (q4)
    put_half_one(blk);
  else
    blk[0] = 127; /* 2^0 */
  for (int l = 0; l < 16; ++l) {
    const int lo = (l * 5 + b * 3 + j) % 16, hi = (l * 7 + b + 3 * j) % 16;
    blk[(q4 ? 2 : 1) + l] = (unsigned char)(lo | (hi << 4));
    doubled[l] = q4 ? 2 * (lo - 8) : kFp4Doubled[lo];
    doubled[l + 16] = q4 ? 2 * (hi - 8) : kFp4Doubled[hi];
  }
  return q4 ? 18 : 17;
}

static void test_blocks_of_32_in_whole_steps_and_alone_are_exact(void** state) {
  sw_runtime_t* rt = *state;
  float x[2][GRID_K], buf[2 * GRID_K];
  for (int i = 0; i < 2; ++i)
    for (int p = 0; p < GRID_K; ++p) {
      x[i][p] = (p % 32 == (i * 5 + p / 32) % 32) ? (i ? -127.0f : 127.0f) : (float)((p * (i + 3)) % 61 - 30);
      buf[i + 2 * p] = x[i][p];
    }
  const int64_t xshape[2] = {2, GRID_K}, k = GRID_K;
  sw_tensor_t *a = NULL, *a0 = NULL;
  SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_F32, xshape, 2, buf, &a));
  SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_F32, &k, 1, x[0], &a0));
  const sw_dtype_t dtypes[3] = {SW_DTYPE_Q8_0, SW_DTYPE_Q4_0, SW_DTYPE_MXFP4};
  for (int t = 0; t < 3; ++t) {
    unsigned char bytes[GRID_N * GRID_BLOCKS * 34];
    static int32_t doubled[GRID_N][GRID_K];
    size_t at = 0;
    for (int j = 0; j < GRID_N; ++j)
      for (int b = 0; b < GRID_BLOCKS; ++b) at += grid_block(dtypes[t], j, b, bytes + at, doubled[j] + 32 * b);
    const int64_t wshape[2] = {GRID_K, GRID_N};
    sw_tensor_t* w = NULL;
    SW_OK_(sw_tensor_from_data(rt, dtypes[t], wshape, 2, bytes, &w));
    sw_tensor_t *y = NULL, *y0 = NULL;
    SW_OK_(sw_matmul(a, w, &y));
    SW_OK_(sw_matmul(a0, w, &y0));
    float got[2 * GRID_N], got0[GRID_N];
    SW_OK_(sw_tensor_read(y, got, sizeof got));
    SW_OK_(sw_tensor_read(y0, got0, sizeof got0));
    for (int j = 0; j < GRID_N; ++j)
      for (int i = 0; i < 2; ++i) {
        int64_t twice = 0;
        for (int p = 0; p < GRID_K; ++p) twice += (int64_t)doubled[j][p] * (int64_t)x[i][p];
        const float want = (float)twice / 2.0f;
        if (got[i + 2 * j] != want)
          fail_msg("dtype %d: y[%d, %d] = %.9g, expected %.9g", (int)dtypes[t], i, j, got[i + 2 * j], want);
        if (i == 0 && got0[j] != want)
          fail_msg("dtype %d: y0[%d] = %.9g, expected %.9g", (int)dtypes[t], j, got0[j], want);
      }
    sw_tensor_release(y0);
    sw_tensor_release(y);
    sw_tensor_release(w);
  }
  sw_tensor_release(a0);
  sw_tensor_release(a);
}

static void test_refusals(void** state) {
  sw_runtime_t* rt = *state;
  int32_t codes[3][64];
  float x[2][64];
  sw_tensor_t* w = q8_weights(rt, codes);
  sw_tensor_t* a = grid_x(rt, x);
  sw_tensor_t* out = NULL;
  /* An integer left operand. */
  sw_tensor_t* ai = NULL;
  SW_OK_(sw_tensor_to_dtype(a, SW_DTYPE_I32, &ai));
  SW_FAILS(sw_matmul(ai, w, &out), SW_ERROR_TYPE, "float left operand");
  /* A result the kernels do not give. */
  sw_matmul_desc_t d;
  sw_matmul_desc_init(&d);
  d.out_dtype = SW_DTYPE_F64;
  SW_FAILS(sw_matmul_ex(a, w, &d, &out), SW_ERROR_TYPE, "f32, bf16 or f16, not f64");
  /* Quantized on the left. */
  SW_FAILS(sw_matmul(w, a, &out), SW_ERROR_TYPE, "q8_0");
  /* A contraction that does not match. */
  sw_tensor_t* at = NULL;
  SW_OK_(sw_tensor_transpose(a, 0, 1, &at));
  SW_FAILS(sw_matmul(at, w, &out), SW_ERROR_VALUE, "contraction extents differ (2 and 64)");
  /* Gradients. */
  sw_tensor_t* ag = NULL;
  SW_OK_(sw_tensor_to_dtype(a, SW_DTYPE_F32, &ag));
  SW_OK_(sw_tensor_set_requires_grad(ag, true));
  SW_FAILS(sw_matmul(ag, w, &out), SW_ERROR_UNSUPPORTED, "gradients through q8_0");
  sw_tensor_release(ag);
  sw_tensor_release(at);
  sw_tensor_release(ai);
  sw_tensor_release(a);
  sw_tensor_release(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_q8_0_matmul_is_exact_on_the_grid, sw_test_runtime_setup,
                                      sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(test_q4_0_vector_times_matrix, sw_test_runtime_setup, sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(test_blocks_of_32_in_whole_steps_and_alone_are_exact, sw_test_runtime_setup,
                                      sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(test_refusals, sw_test_runtime_setup, sw_test_runtime_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
