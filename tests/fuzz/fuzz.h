/* Shared pieces of the fuzz targets. Each target is one file defining
 * LLVMFuzzerTestOneInput over the public C ABI; it builds twice: with
 * libFuzzer under clang (tools/fuzz/run_fuzzers.sh) and, with replay.c as its
 * main, as an ordinary test that replays its corpus (tests/corpus/<target>/)
 * under any compiler and sanitizer.
 *
 * The oracle every target shares: a call either succeeds or returns an error
 * with one of the documented codes (never SW_ERROR_INTERNAL, never an
 * unknown code) and a non-empty message; a broken expectation aborts with a
 * message, so libFuzzer and the replay driver both report it. */
#ifndef SW_FUZZ_H_
#define SW_FUZZ_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strideweave/strideweave.h"
#include "strideweave/strideweave_testing.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#define FZ_REQUIRE(cond, ...)                                            \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "%s:%d: expectation failed: %s: ", __FILE__,       \
              __LINE__, #cond);                                          \
      fprintf(stderr, __VA_ARGS__);                                      \
      fputc('\n', stderr);                                               \
      abort();                                                           \
    }                                                                    \
  } while (0)

/* The input as a stream of values; past its end every read gives 0. */
typedef struct fz_in {
  const uint8_t* p;
  size_t n;
} fz_in;

static inline uint8_t fz_u8(fz_in* in) {
  if (in->n == 0) return 0;
  --in->n;
  return *in->p++;
}

static inline uint64_t fz_u64(fz_in* in, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= (uint64_t)fz_u8(in) << (8 * i);
  return v;
}

static inline bool fz_bool(fz_in* in) { return fz_u8(in) & 1; }

/* A value in [lo, hi] (hi >= lo), from one or two bytes. */
static inline int64_t fz_range(fz_in* in, int64_t lo, int64_t hi) {
  const uint64_t span = (uint64_t)(hi - lo) + 1;
  const uint64_t v = span <= 256 ? fz_u8(in) : fz_u64(in, 2);
  return lo + (int64_t)(v % span);
}

/* An int64 that is often small and sometimes an edge: negative, huge, the
 * limits. */
static inline int64_t fz_i64(fz_in* in) {
  const uint8_t sel = fz_u8(in);
  switch (sel >> 5) {
    case 0:
    case 1:
    case 2: return sel & 31;                      /* small, the common case */
    case 3: return -(int64_t)(sel & 7) - 1;       /* small negative */
    case 4: return (int64_t)fz_u64(in, 2);        /* medium */
    case 5: {
      static const int64_t edge[8] = {INT64_MAX, INT64_MIN, INT64_MAX / 2, (int64_t)1 << 32,
                                      ((int64_t)1 << 31) - 1, (int64_t)1 << 62, -((int64_t)1 << 62), 1 << 24};
      return edge[sel & 7];
    }
    default: return (int64_t)fz_u64(in, 8);       /* anything */
  }
}

/* The rest of the input, NUL-terminated, in a fresh allocation. */
static inline char* fz_text(fz_in* in) {
  char* s = (char*)malloc(in->n + 1);
  FZ_REQUIRE(s != NULL, "out of memory");
  memcpy(s, in->p, in->n);
  s[in->n] = '\0';
  in->p += in->n;
  in->n = 0;
  return s;
}

/* Checks an error against the oracle and frees it; returns its code (SW_OK
 * for success). */
static inline sw_error_code_t fz_check_(sw_error_t* e, const char* what, const char* file, int line) {
  if (!e) return SW_OK;
  const sw_error_code_t code = sw_error_code(e);
  const char* message = sw_error_message(e);
  if (code < SW_ERROR_TYPE || code >= SW_ERROR_INTERNAL || !message || !message[0]) {
    fprintf(stderr, "%s:%d: %s failed with %s (%d): \"%s\"\n", file, line, what, sw_error_code_name(code), (int)code,
            message ? message : "(null)");
    abort();
  }
  sw_error_free(e);
  return code;
}
#define FZ_CHECK(expr) fz_check_((expr), #expr, __FILE__, __LINE__)
/* The call must succeed. */
#define FZ_OK(expr)                                                          \
  do {                                                                       \
    sw_error_t* fz_e_ = (expr);                                              \
    if (fz_e_) {                                                             \
      fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__,      \
              #expr, sw_error_code_name(sw_error_code(fz_e_)),               \
              sw_error_message(fz_e_));                                      \
      abort();                                                               \
    }                                                                        \
  } while (0)

/* One runtime for the whole process (threads are costly to start per
 * input), released at exit so leak checks see everything freed. */
static sw_runtime_t* fz_runtime_;
static void fz_release_runtime(void) {
  sw_runtime_release(fz_runtime_);
  fz_runtime_ = NULL;
}
static inline sw_runtime_t* fz_runtime(void) {
  if (!fz_runtime_) {
    sw_runtime_desc_t d;
    sw_runtime_desc_init(&d);
    d.compute_threads = 1;
    d.worker_threads = 1;
    FZ_OK(sw_runtime_create(&d, &fz_runtime_));
    atexit(fz_release_runtime);
  }
  return fz_runtime_;
}

#endif /* SW_FUZZ_H_ */
