/* Shared by the Vulkan suites: a runtime and the Vulkan device of whatever
 * ICD is present (Mesa lavapipe in CI), a skip when there is none, and the
 * same tensor made on a CPU carrier and a Vulkan carrier so results can be
 * compared with the CPU carrier's. Include once per test executable. */
#ifndef SW_VULKAN_TEST_H_
#define SW_VULKAN_TEST_H_

#include "sw_test.h"

#include <dlfcn.h>

/* Mesa's lavapipe keeps a few small per-thread buffers that it never frees.
 * The Vulkan loader unloads the driver when the instance goes, which leaves
 * LeakSanitizer with frames it cannot name; keeping the driver loaded (see
 * sw_vulkan_test_keep_driver) lets the suppression below name it, and only it. */
const char* __lsan_default_suppressions(void);
const char* __lsan_default_suppressions(void) { return "leak:libvulkan_lvp.so\n"; }

/* Call first in main(). */
static inline void sw_vulkan_test_keep_driver(void) { (void)dlopen("libvulkan_lvp.so", RTLD_NOW | RTLD_NODELETE); }

typedef struct {
  sw_runtime_t* rt;
  sw_device_t* dev;
} vk_fixture_t;

static inline int vk_setup(void** state) {
  vk_fixture_t* f = calloc(1, sizeof(*f));
  if (sw_runtime_create(NULL, &f->rt)) return -1;
  sw_error_t* e = sw_device_create_vulkan(f->rt, NULL, &f->dev);
  if (e) {
    fprintf(stderr, "no Vulkan device (%s: %s); Vulkan tests skip\n", sw_error_code_name(sw_error_code(e)),
            sw_error_message(e));
    sw_error_free(e);
    f->dev = NULL;
  }
  *state = f;
  return 0;
}

static inline int vk_teardown(void** state) {
  vk_fixture_t* f = *state;
  sw_device_release(f->dev);
  sw_runtime_release(f->rt);
  free(f);
  return 0;
}

#define NEED_DEVICE(f)                                  \
  do {                                                  \
    if (!(f)->dev) SW_SKIP("no Vulkan ICD present");    \
  } while (0)

/* Call in main() after sw_vulkan_test_keep_driver: false (the suite then
 * exits 77, a skip) when no Vulkan device can be made. */
static inline bool sw_vulkan_test_available(void) {
  sw_runtime_t* rt = NULL;
  if (sw_runtime_create(NULL, &rt)) return false;
  sw_device_t* dev = NULL;
  sw_error_t* e = sw_device_create_vulkan(rt, NULL, &dev);
  if (e) {
    fprintf(stderr, "no Vulkan device (%s: %s); the suite skips\n", sw_error_code_name(sw_error_code(e)),
            sw_error_message(e));
    sw_error_free(e);
  }
  sw_device_release(dev);
  sw_runtime_release(rt);
  return dev != NULL;
}

/* The same view on a CPU and on a Vulkan carrier. */
typedef struct {
  sw_tensor_t* cpu;
  sw_tensor_t* vk;
} vk_pair_t;

/* Carriers of `slots` elements of `dtype` holding `data` (slots values of
 * dtype size), viewed at `offset` through `layout`. */
static inline vk_pair_t vk_pair_view(vk_fixture_t* f, sw_dtype_t dtype, size_t slots, const void* data, int64_t offset,
                                     const sw_layout_t* layout) {
  vk_pair_t p;
  sw_carrier_t *cc = NULL, *vc = NULL;
  SW_OK_(sw_carrier_create_cpu(f->rt, dtype, slots, &cc));
  SW_OK_(sw_carrier_create_vulkan(f->rt, f->dev, dtype, slots, &vc));
  if (slots) {
    SW_OK_(sw_carrier_write(cc, 0, slots, data));
    SW_OK_(sw_carrier_write(vc, 0, slots, data));
  }
  SW_OK_(sw_tensor_create(cc, offset, layout, &p.cpu));
  SW_OK_(sw_tensor_create(vc, offset, layout, &p.vk));
  sw_carrier_release(cc);
  sw_carrier_release(vc);
  return p;
}

/* A dense pair of `shape` holding `data`. */
static inline vk_pair_t vk_pair(vk_fixture_t* f, sw_dtype_t dtype, const int64_t* shape, size_t rank,
                                const void* data) {
  size_t n = 1;
  for (size_t i = 0; i < rank; ++i) n *= (size_t)shape[i];
  sw_layout_t* l = NULL;
  SW_OK_(sw_layout_dense(shape, rank, &l));
  vk_pair_t p = vk_pair_view(f, dtype, n, data, 0, l);
  sw_layout_release(l);
  return p;
}

static inline void vk_pair_release(vk_pair_t p) {
  sw_tensor_release(p.cpu);
  sw_tensor_release(p.vk);
}

/* Small integers as f32: sums and products of a few thousand of them are
 * exact in any order, so Vulkan and CPU results compare exactly. */
static inline void vk_fill_ints(float* x, size_t n, int seed) {
  for (size_t i = 0; i < n; ++i) x[i] = (float)((int)((i * 7 + (size_t)seed * 13) % 9) - 4);
}

/* Smooth values with fractions, for tolerance comparisons. */
static inline void vk_fill(float* x, size_t n, float seed) {
  for (size_t i = 0; i < n; ++i) x[i] = sinf(seed + (float)i * 0.37f) * 3.0f;
}

/* Asserts that `vk` is on a Vulkan carrier and equals `cpu` (same dtype and
 * shape): exactly when tol is 0, else within tol * (1 + |cpu|) per element
 * (f32 results; f64 compared as doubles). */
static inline void vk_assert_matches(sw_tensor_t* cpu, sw_tensor_t* vk, double tol) {
  int64_t n = 0, m = 0;
  SW_OK_(sw_tensor_numel(cpu, &n));
  SW_OK_(sw_tensor_numel(vk, &m));
  assert_int_equal(n, m);
  size_t rc = 0, rv = 0;
  int64_t sc[SW_MAX_RANK], sv[SW_MAX_RANK];
  SW_OK_(sw_tensor_rank(cpu, &rc));
  SW_OK_(sw_tensor_rank(vk, &rv));
  assert_int_equal(rc, rv);
  SW_OK_(sw_tensor_shape(cpu, sc, SW_MAX_RANK));
  SW_OK_(sw_tensor_shape(vk, sv, SW_MAX_RANK));
  for (size_t i = 0; i < rc; ++i) assert_int_equal(sc[i], sv[i]);
  sw_dtype_t dc, dv;
  SW_OK_(sw_tensor_dtype(cpu, &dc));
  SW_OK_(sw_tensor_dtype(vk, &dv));
  assert_int_equal(dc, dv);
  sw_carrier_t* c = NULL;
  SW_OK_(sw_tensor_carrier(vk, &c));
  sw_carrier_kind_t kind;
  SW_OK_(sw_carrier_kind(c, &kind));
  assert_int_equal(kind, SW_CARRIER_VULKAN);
  sw_carrier_release(c);
  const size_t es = sw_dtype_size(dc);
  unsigned char* a = malloc(es * (size_t)(n ? n : 1));
  unsigned char* b = malloc(es * (size_t)(n ? n : 1));
  SW_OK_(sw_tensor_read(cpu, a, es * (size_t)n));
  SW_OK_(sw_tensor_read(vk, b, es * (size_t)n));
  if (tol == 0 || (dc != SW_DTYPE_F32 && dc != SW_DTYPE_F64)) {
    for (int64_t i = 0; i < n; ++i)
      if (memcmp(a + i * es, b + i * es, es)) {
        if (dc == SW_DTYPE_F32)
          fail_msg("element %lld: cpu %.9g vulkan %.9g", (long long)i, ((float*)a)[i], ((float*)b)[i]);
        fail_msg("element %lld differs", (long long)i);
      }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      double x = dc == SW_DTYPE_F32 ? ((float*)a)[i] : ((double*)a)[i];
      double y = dc == SW_DTYPE_F32 ? ((float*)b)[i] : ((double*)b)[i];
      if (fabs(x - y) > tol * (1 + fabs(x))) fail_msg("element %lld: cpu %.9g vulkan %.9g", (long long)i, x, y);
    }
  }
  free(a);
  free(b);
}

static inline sw_layout_t* vk_layout(const int64_t* shape, const int64_t* stride, size_t rank) {
  sw_layout_t* l = NULL;
  SW_OK_(sw_layout_create(shape, stride, rank, &l));
  return l;
}

static inline sw_vulkan_counters_t vk_counters(vk_fixture_t* f) {
  sw_vulkan_counters_t c;
  sw_vulkan_counters_init(&c);
  SW_OK_(sw_testing_vulkan_counters(f->dev, &c));
  return c;
}

#endif /* SW_VULKAN_TEST_H_ */
