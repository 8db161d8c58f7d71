/*
 * bench_vulkan: op throughput and submit latency on the Vulkan device present
 * (Mesa lavapipe on CI machines), beside the CPU carrier, in one run.
 *
 *   add          sw_add on 4 Mi f32 elements, GB/s (two reads, one write)
 *   matmul       sw_matmul 256x256x256 f32, GFLOP/s
 *   submit       one 1-element write + read round trip (a submit and a wait), us
 *
 * Usage: build/tools/bench/bench_vulkan [--reps R]
 * Each figure is the median of R repetitions; results are read back so the
 * batched Vulkan work is included. The last line is "BENCH_JSON {...}".
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "strideweave/strideweave.h"

static void check(sw_error_t* e, const char* what) {
  if (!e) return;
  fprintf(stderr, "%s: %s: %s\n", what, sw_error_code_name(sw_error_code(e)), sw_error_message(e));
  exit(1);
}
static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}
static double median(double* v, int n) {
  qsort(v, n, sizeof *v, cmp);
  return v[n / 2];
}

static sw_tensor_t* make(sw_runtime_t* rt, sw_device_t* dev, const int64_t* shape, size_t rank, const float* data) {
  size_t n = 1;
  for (size_t i = 0; i < rank; ++i) n *= (size_t)shape[i];
  sw_carrier_t* c;
  if (dev)
    check(sw_carrier_create_vulkan(rt, dev, SW_DTYPE_F32, n, &c), "carrier");
  else
    check(sw_carrier_create_cpu(rt, SW_DTYPE_F32, n, &c), "carrier");
  check(sw_carrier_write(c, 0, n, data), "write");
  sw_layout_t* l;
  check(sw_layout_dense(shape, rank, &l), "layout");
  sw_tensor_t* t;
  check(sw_tensor_create(c, 0, l, &t), "tensor");
  sw_layout_release(l);
  sw_carrier_release(c);
  return t;
}

typedef struct { double add_gbs, matmul_gflops, submit_us; } figures_t;

static figures_t run(sw_runtime_t* rt, sw_device_t* dev, int reps) {
  figures_t f;
  const int64_t n = 4 << 20, m = 256;
  float* x = malloc(sizeof(float) * n);
  for (int64_t i = 0; i < n; ++i) x[i] = (float)(i % 17);
  sw_tensor_t* a = make(rt, dev, &n, 1, x);
  int64_t ms[2] = {m, m};
  sw_tensor_t* p = make(rt, dev, ms, 2, x);
  double t[64];
  float one = 0;
  for (int r = 0; r < reps; ++r) {
    double t0 = now();
    sw_tensor_t* s;
    check(sw_add(a, a, &s), "add");
    sw_carrier_t* c;
    check(sw_tensor_carrier(s, &c), "carrier");
    check(sw_carrier_read(c, 0, 1, &one), "read");
    t[r] = now() - t0;
    sw_carrier_release(c);
    sw_tensor_release(s);
  }
  f.add_gbs = 3.0 * n * 4 / median(t, reps) / 1e9;
  for (int r = 0; r < reps; ++r) {
    double t0 = now();
    sw_tensor_t* s;
    check(sw_matmul(p, p, &s), "matmul");
    sw_carrier_t* c;
    check(sw_tensor_carrier(s, &c), "carrier");
    check(sw_carrier_read(c, 0, 1, &one), "read");
    t[r] = now() - t0;
    sw_carrier_release(c);
    sw_tensor_release(s);
  }
  f.matmul_gflops = 2.0 * m * m * m / median(t, reps) / 1e9;
  sw_carrier_t* c;
  check(sw_tensor_carrier(a, &c), "carrier");
  for (int r = 0; r < reps; ++r) {
    double t0 = now();
    check(sw_carrier_write(c, 0, 1, &one), "write");
    check(sw_carrier_read(c, 0, 1, &one), "read");
    t[r] = now() - t0;
  }
  f.submit_us = median(t, reps) * 1e6;
  sw_carrier_release(c);
  sw_tensor_release(a);
  sw_tensor_release(p);
  free(x);
  return f;
}

int main(int argc, char** argv) {
  int reps = 9;
  if (argc == 3 && !strcmp(argv[1], "--reps")) reps = atoi(argv[2]);
  if (reps < 1 || reps > 64) reps = 9;
  sw_runtime_t* rt;
  check(sw_runtime_create(NULL, &rt), "runtime");
  sw_device_t* dev = NULL;
  sw_error_t* e = sw_device_create_vulkan(rt, NULL, &dev);
  if (e) {
    fprintf(stderr, "bench_vulkan: no Vulkan device: %s\n", sw_error_message(e));
    sw_error_free(e);
    return 0;
  }
  figures_t cpu = run(rt, NULL, reps), vk = run(rt, dev, reps);
  printf("add     cpu %8.2f GB/s      vulkan %8.2f GB/s\n", cpu.add_gbs, vk.add_gbs);
  printf("matmul  cpu %8.2f GFLOP/s   vulkan %8.2f GFLOP/s\n", cpu.matmul_gflops, vk.matmul_gflops);
  printf("submit  cpu %8.2f us        vulkan %8.2f us\n", cpu.submit_us, vk.submit_us);
  printf("BENCH_JSON {\"bench\":\"vulkan\",\"cpu\":{\"add_gbs\":%.3f,\"matmul_gflops\":%.3f,\"roundtrip_us\":%.2f},"
         "\"vulkan\":{\"add_gbs\":%.3f,\"matmul_gflops\":%.3f,\"submit_us\":%.2f}}\n",
         cpu.add_gbs, cpu.matmul_gflops, cpu.submit_us, vk.add_gbs, vk.matmul_gflops, vk.submit_us);
  sw_device_release(dev);
  sw_runtime_release(rt);
  return 0;
}
