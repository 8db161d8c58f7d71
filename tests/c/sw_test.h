/* Shared helpers for the cmocka suites. Tests use only the public header. */
#ifndef SW_TEST_H_
#define SW_TEST_H_

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "strideweave/strideweave.h"
#include "strideweave/strideweave_testing.h"

/* Fails the test with the error's code and message unless `expr` succeeds. */
#define SW_OK_(expr)                                                                     \
  do {                                                                                   \
    sw_error_t* sw_e_ = (expr);                                                          \
    if (sw_e_) {                                                                         \
      fail_msg("%s failed: %s: %s", #expr, sw_error_code_name(sw_error_code(sw_e_)),     \
               sw_error_message(sw_e_));                                                 \
    }                                                                                    \
  } while (0)

/* Whether a message lacks `needle` (never, when needle is NULL). */
static inline int sw_test_lacks(const char* message, const char* needle) {
  return needle != NULL && strstr(message, needle) == NULL;
}

/* Asserts that `expr` fails with `code`; if `needle` is non-NULL the message
 * must contain it. */
#define SW_FAILS(expr, code, needle)                                                     \
  do {                                                                                   \
    sw_error_t* sw_e_ = (expr);                                                          \
    if (!sw_e_) fail_msg("%s succeeded; expected %s", #expr, sw_error_code_name(code));  \
    if (sw_error_code(sw_e_) != (code))                                                  \
      fail_msg("%s failed with %s (%s); expected %s", #expr,                             \
               sw_error_code_name(sw_error_code(sw_e_)), sw_error_message(sw_e_),        \
               sw_error_code_name(code));                                                \
    if (sw_test_lacks(sw_error_message(sw_e_), (needle)))                                \
      fail_msg("%s message \"%s\" lacks \"%s\"", #expr, sw_error_message(sw_e_),         \
               (const char*)(needle));                                                   \
    sw_error_free(sw_e_);                                                                \
  } while (0)

/* A test that cannot run here calls SW_SKIP. cmocka counts a skipped test as
 * passed, so a suite returns sw_test_result(cmocka_run_group_tests(...)):
 * its failure count when a test failed, else 77 (a skip to meson) when any
 * test skipped, else 0. */
static int sw_test_skipped_count;
#define SW_SKIP(why)                                 \
  do {                                               \
    fprintf(stderr, "skipped: %s\n", (why));        \
    ++sw_test_skipped_count;                         \
    skip();                                          \
  } while (0)
static inline int sw_test_result(int failed) { return failed ? failed : sw_test_skipped_count ? 77 : 0; }

/* A runtime per test: cmocka group setup/teardown use these. */
static inline int sw_test_runtime_setup(void** state) {
  sw_runtime_t* rt = NULL;
  sw_error_t* e = sw_runtime_create(NULL, &rt);
  if (e) {
    sw_error_free(e);
    return -1;
  }
  *state = rt;
  return 0;
}

static inline int sw_test_runtime_teardown(void** state) {
  sw_runtime_release((sw_runtime_t*)*state);
  return 0;
}

/* A dense f32/f64 tensor from doubles (converted to `dtype`). */
static inline sw_tensor_t* sw_test_tensor(sw_runtime_t* rt, sw_dtype_t dtype, const int64_t* extents, size_t rank,
                                          const double* values) {
  int64_t n = 1;
  for (size_t i = 0; i < rank; ++i) n *= extents[i];
  sw_tensor_t* t = NULL;
  if (dtype == SW_DTYPE_F64) {
    SW_OK_(sw_tensor_from_data(rt, dtype, extents, rank, values, &t));
  } else {
    float* f = (float*)malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; ++i) f[i] = (float)values[i];
    SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_F32, extents, rank, f, &t));
    free(f);
  }
  return t;
}

/* The tests' deterministic pseudo-random numbers: xorshift64 over *state
 * (never 0), the next value returned. */
static inline uint64_t sw_test_random(uint64_t* state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return *state;
}

/* Reads every element of a tensor as doubles (first mode fastest). */
static inline double* sw_test_values(const sw_tensor_t* t, int64_t* out_n) {
  int64_t n = 0;
  SW_OK_(sw_tensor_numel(t, &n));
  sw_dtype_t d;
  SW_OK_(sw_tensor_dtype(t, &d));
  double* out = (double*)malloc(sizeof(double) * (size_t)(n ? n : 1));
  size_t es = sw_dtype_size(d);
  unsigned char* raw = (unsigned char*)malloc(es * (size_t)(n ? n : 1));
  SW_OK_(sw_tensor_read(t, raw, es * (size_t)n));
  for (int64_t i = 0; i < n; ++i) {
    if (d == SW_DTYPE_F32) {
      float v;
      memcpy(&v, raw + i * 4, 4);
      out[i] = v;
    } else if (d == SW_DTYPE_F64) {
      memcpy(&out[i], raw + i * 8, 8);
    } else {
      int64_t c[1] = {i};
      (void)c;
      out[i] = NAN;
    }
  }
  free(raw);
  if (out_n) *out_n = n;
  return out;
}

#endif /* SW_TEST_H_ */
