/* Shared by the C benchmarks (tools/bench/bench_*.c): a check that exits on
 * a library error, clocks, the load average, and summaries of repeated
 * timings. A tool defines BENCH_NAME (its name, for messages) and includes
 * this once. */
#ifndef SW_BENCH_UTIL_H_
#define SW_BENCH_UTIL_H_

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "strideweave/strideweave.h"

#ifndef BENCH_NAME
#error "define BENCH_NAME before including bench_util.h"
#endif

/* Exits 2, naming `what`, when `err` is an error. */
static inline void check(sw_error_t* err, const char* what) {
  if (!err) return;
  fprintf(stderr, BENCH_NAME ": %s failed: %s: %s\n", what, sw_error_code_name(sw_error_code(err)),
          sw_error_message(err));
  sw_error_free(err);
  exit(2);
}
#define CHECK(call) check((call), #call)

/* Monotonic wall-clock time. */
static inline double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* CPU seconds of every thread of the process: the library's workers and loop
 * thread as well as a peer's threads. Ratios of CPU time measure speed per
 * core and hold up when other processes compete for the cores. */
static inline double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The 1-minute load average, or -1 where /proc/loadavg is missing: other
 * processes competing for the cores make every figure noisy. */
static inline double load_average(void) {
  double load = -1;
  FILE* f = fopen("/proc/loadavg", "r");
  if (f) {
    if (fscanf(f, "%lf", &load) != 1) load = -1;
    fclose(f);
  }
  return load;
}

static inline int compare_doubles(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

#define BENCH_MAX_REPS 256

/* The median of n (1..BENCH_MAX_REPS) values: the middle one, or the mean of
 * the middle two for even n. `values` is left as it is. */
static inline double median(const double* values, int n) {
  double sorted[BENCH_MAX_REPS];
  if (n < 1 || n > BENCH_MAX_REPS) {
    fprintf(stderr, BENCH_NAME ": median of %d values (1 to %d)\n", n, BENCH_MAX_REPS);
    exit(2);
  }
  memcpy(sorted, values, (size_t)n * sizeof(double));
  qsort(sorted, (size_t)n, sizeof(double), compare_doubles);
  return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

/* The smallest of n >= 1 values. */
static inline double fastest(const double* values, int n) {
  double best = values[0];
  for (int i = 1; i < n; ++i)
    if (values[i] < best) best = values[i];
  return best;
}

#endif
