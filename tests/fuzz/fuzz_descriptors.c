/* Every versioned struct (the *_desc_t and other structs that begin with
 * struct_size) with a fuzzed struct_size and fuzzed plain fields; pointer
 * fields are always valid or NULL, as the contract requires. The oracle:
 * a call that accepts a struct accepts only a struct_size this library
 * documents (sizeof, or the size of an older released version); whatever
 * it creates works (values written read back) and releases cleanly, and
 * host hooks run exactly as often as documented. */
#include <sched.h>
#include <stddef.h>

#include "fuzz.h"

/* A struct_size: mostly the right one, else a nearby or arbitrary value. */
static uint32_t fz_struct_size(fz_in* in, size_t right) {
  const uint8_t sel = fz_u8(in);
  if (sel < 128) return (uint32_t)right;
  if (sel < 192) return (uint32_t)(right + (size_t)(sel & 15) - 8);
  if (sel < 224) return (uint32_t)(sel & 31);
  return (uint32_t)fz_u64(in, 4);
}

#define KNOWN(size, ...) fz_known((size), (const size_t[]){__VA_ARGS__}, sizeof((const size_t[]){__VA_ARGS__}) / sizeof(size_t))
static bool fz_known(uint32_t size, const size_t* known, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (size == known[i]) return true;
  return false;
}
#define ACCEPTED_ONLY_KNOWN(code, size, ...) \
  FZ_REQUIRE((code) != SW_OK || KNOWN((size), __VA_ARGS__), "struct_size %u accepted", (unsigned)(size))

static int release_calls, destroy_calls, callback_calls;
static void on_release(void* user) { (void)user; ++release_calls; }
static void on_destroy(void* user) { (void)user; ++destroy_calls; }
static void on_callback(void* user, sw_await_t* a, sw_error_code_t code, const char* message) {
  (void)user, (void)a, (void)code, (void)message;
  __atomic_add_fetch(&callback_calls, 1, __ATOMIC_SEQ_CST);
}
static sw_error_t* plan_all(void* user, const sw_tile_set_t* required, sw_residency_purpose_t purpose,
                            sw_residency_plan_t** out) {
  (void)user, (void)purpose;
  return sw_residency_plan_create(required, NULL, NULL, out);
}

static void roundtrip(sw_carrier_t* c, size_t n) {
  uint8_t* v = (uint8_t*)malloc(n ? n * 4 : 1);
  uint8_t* back = (uint8_t*)malloc(n ? n * 4 : 1);
  for (size_t i = 0; i < n * 4; ++i) v[i] = (uint8_t)(i * 7 + 3);
  FZ_OK(sw_carrier_write(c, 0, n, v));
  FZ_OK(sw_carrier_read(c, 0, n, back));
  FZ_REQUIRE(n == 0 || memcmp(v, back, n * 4) == 0, "values written did not read back");
  free(v);
  free(back);
}

static void runtime_desc(fz_in* in) {
  sw_runtime_desc_t d;
  sw_runtime_desc_init(&d);
  d.struct_size = fz_struct_size(in, sizeof d);
  d.compute_threads = (uint32_t)fz_range(in, 0, 2);
  d.worker_threads = (uint32_t)fz_range(in, 0, 2);
  if (fz_bool(in)) d.pool_limit_bytes = (size_t)fz_i64(in);
  d.log_level = (sw_log_level_t)fz_range(in, -1, 5);
  sw_runtime_t* rt = NULL;
  const sw_error_code_t code = FZ_CHECK(sw_runtime_create(&d, &rt));
  ACCEPTED_ONLY_KNOWN(code, d.struct_size, sizeof d);
  if (code == SW_OK) {
    sw_carrier_t* c = NULL;
    FZ_OK(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 16, &c));
    roundtrip(c, 16);
    sw_carrier_release(c);
  }
  sw_runtime_release(rt);
}

static void external_desc(fz_in* in) {
  static _Alignas(64) uint8_t memory[256];
  sw_external_memory_desc_t d;
  sw_external_memory_desc_init(&d);
  d.struct_size = fz_struct_size(in, sizeof d);
  const size_t offset = (size_t)fz_range(in, 0, 16);
  d.data = fz_u8(in) == 0 ? NULL : memory + offset;
  d.bytes = (size_t)fz_range(in, 0, 256 - 16);
  d.read_only = fz_bool(in);
  d.release = fz_bool(in) ? on_release : NULL;
  const sw_dtype_t dtype = (sw_dtype_t)fz_range(in, 0, 14);
  release_calls = 0;
  sw_carrier_t* c = NULL;
  const sw_error_code_t code = FZ_CHECK(sw_carrier_create_cpu_external(fz_runtime(), dtype, &d, &c));
  ACCEPTED_ONLY_KNOWN(code, d.struct_size, sizeof d);
  if (code != SW_OK) {
    FZ_REQUIRE(release_calls == 0, "release called for memory the library refused");
    return;
  }
  size_t n = 0;
  FZ_OK(sw_carrier_size(c, &n));
  // A quantized dtype's slots are its blocks' elements: count its bytes by blocks.
  FZ_REQUIRE(n % sw_dtype_block_elements(dtype) == 0 &&
                 n / sw_dtype_block_elements(dtype) * sw_dtype_block_bytes(dtype) == d.bytes,
             "%zu slots of %s over %zu bytes", n, sw_dtype_name(dtype), d.bytes);
  if (d.read_only) {
    uint8_t v[8] = {0};
    FZ_REQUIRE(n == 0 || FZ_CHECK(sw_carrier_write(c, 0, 1, v)) == SW_ERROR_STATE, "a read-only carrier took a write");
  }
  sw_carrier_release(c);
  FZ_REQUIRE(release_calls == (d.release ? 1 : 0), "release called %d times", release_calls);
}

static void file_desc(fz_in* in) {
  sw_file_carrier_desc_t d;
  sw_file_carrier_desc_init(&d);
  d.struct_size = fz_struct_size(in, sizeof d);
  static const char* dirs[4] = {NULL, "/tmp", "", "/nonexistent-strideweave-fuzz"};
  d.directory = dirs[fz_u8(in) & 3];
  d.direct_io = fz_bool(in);
  const uint8_t chunk = fz_u8(in);
  d.chunk_bytes = chunk < 200 ? (size_t)chunk * 4 : chunk < 250 ? (size_t)fz_u64(in, 3) : SIZE_MAX - chunk;
  d.requests_in_flight = (uint32_t)fz_range(in, 0, 80);
  const size_t n = (size_t)fz_range(in, 0, 300);
  sw_carrier_t* c = NULL;
  const sw_error_code_t code = FZ_CHECK(sw_carrier_create_file(fz_runtime(), SW_DTYPE_F32, n, &d, &c));
  ACCEPTED_ONLY_KNOWN(code, d.struct_size, sizeof d);
  if (code != SW_OK) return;
  roundtrip(c, n);
  /* Asynchronously too: a move out of the file carrier reads it through its
   * chunked requests. */
  sw_carrier_t* dst = NULL;
  FZ_OK(sw_carrier_create_cpu(fz_runtime(), SW_DTYPE_F32, 0, &dst));
  const int64_t extent = (int64_t)n;
  sw_layout_t* l = NULL;
  FZ_OK(sw_layout_dense(&extent, 1, &l));
  sw_tensor_t* t = NULL;
  FZ_OK(sw_tensor_create(c, 0, l, &t));
  sw_await_t* a = NULL;
  if (FZ_CHECK(sw_move_async(t, dst, &a)) == SW_OK) {
    FZ_OK(sw_await_wait(a, -1));
    sw_await_release(a);
  }
  sw_tensor_release(t);
  sw_layout_release(l);
  sw_carrier_release(dst);
  sw_carrier_release(c);
}

static void zstd_desc(fz_in* in) {
  sw_zstd_carrier_desc_t d;
  sw_zstd_carrier_desc_init(&d);
  d.struct_size = fz_struct_size(in, sizeof d);
  d.level = fz_bool(in) ? (int32_t)fz_range(in, -10, 25) : (int32_t)fz_u64(in, 4);
  const uint8_t fe = fz_u8(in);
  d.frame_elements = fe < 250 ? fe : (size_t)fz_i64(in);
  d.shuffle = fz_bool(in) ? (int32_t)fz_range(in, -2, 2) : (int32_t)fz_u64(in, 4);
  const size_t n = (size_t)fz_range(in, 0, 300);
  sw_carrier_t* c = NULL;
  const sw_error_code_t code = FZ_CHECK(sw_carrier_create_zstd(fz_runtime(), SW_DTYPE_F32, n, &d, &c));
  ACCEPTED_ONLY_KNOWN(code, d.struct_size, sizeof d);
  if (code != SW_OK) return;
  roundtrip(c, n);
  sw_carrier_release(c);
}

static sw_tensor_t* small(sw_dtype_t dtype, int64_t m, int64_t k) {
  const int64_t ext[2] = {m, k};
  sw_tensor_t* t = NULL;
  FZ_OK(sw_tensor_zeros(fz_runtime(), dtype, ext, 2, &t));
  return t;
}

static void matmul_desc(fz_in* in) {
  sw_matmul_desc_t d;
  sw_matmul_desc_init(&d);
  d.struct_size = fz_struct_size(in, sizeof d);
  d.out_dtype = (sw_dtype_t)fz_range(in, 0, 9);
  static const sw_dtype_t dtypes[4] = {SW_DTYPE_F32, SW_DTYPE_F64, SW_DTYPE_F16, SW_DTYPE_BF16};
  const sw_dtype_t dt = dtypes[fz_u8(in) & 3];
  sw_tensor_t *a = small(dt, 2, 3), *b = small(dt, 3, 2), *r = NULL;
  const sw_error_code_t code = FZ_CHECK(sw_matmul_ex(a, b, &d, &r));
  ACCEPTED_ONLY_KNOWN(code, d.struct_size, sizeof d);
  sw_tensor_release(r);
  sw_tensor_release(a);
  sw_tensor_release(b);
}

static void callback_info(fz_in* in) {
  sw_await_callback_info_t info;
  sw_await_callback_info_init(&info);
  info.struct_size = fz_struct_size(in, sizeof info);
  info.mode = (sw_callback_mode_t)fz_range(in, 0, 3);
  info.callback = fz_u8(in) == 0 ? NULL : on_callback;
  sw_tensor_t* t = small(SW_DTYPE_F32, 2, 2);
  sw_carrier_t* dst = NULL;
  FZ_OK(sw_carrier_create_cpu(fz_runtime(), SW_DTYPE_F32, 0, &dst));
  sw_await_t* a = NULL;
  FZ_OK(sw_move_async(t, dst, &a));
  callback_calls = 0;
  const sw_error_code_t code = FZ_CHECK(sw_await_set_callback(a, &info));
  ACCEPTED_ONLY_KNOWN(code, info.struct_size, sizeof info);
  FZ_OK(sw_await_wait(a, -1));
  size_t fired = 0;
  sw_runtime_t* rt = fz_runtime();
  /* A loop-thread callback may still be on its way: wait for it. */
  for (int spin = 0; spin < 100000 && code == SW_OK && __atomic_load_n(&callback_calls, __ATOMIC_SEQ_CST) == 0; ++spin) {
    FZ_OK(sw_runtime_process_events(rt, &fired));
    sched_yield();
  }
  FZ_REQUIRE(__atomic_load_n(&callback_calls, __ATOMIC_SEQ_CST) == (code == SW_OK ? 1 : 0), "callback fired %d times",
             callback_calls);
  /* A second callback is refused. */
  if (code == SW_OK) {
    sw_await_callback_info_init(&info);
    info.callback = on_callback;
    FZ_REQUIRE(FZ_CHECK(sw_await_set_callback(a, &info)) == SW_ERROR_STATE, "a second callback was accepted");
  }
  sw_await_release(a);
  sw_carrier_release(dst);
  sw_tensor_release(t);
}

static void policy_and_out_structs(fz_in* in) {
  sw_residency_policy_t p;
  sw_residency_policy_init(&p);
  p.struct_size = fz_struct_size(in, sizeof p);
  if (fz_bool(in)) p.struct_size = (uint32_t)offsetof(sw_residency_policy_t, outcome);
  p.plan = fz_u8(in) == 0 ? NULL : plan_all;
  p.destroy = on_destroy;
  sw_carrier_t *cpu = NULL, *host = NULL, *te = NULL;
  FZ_OK(sw_carrier_create_cpu(fz_runtime(), SW_DTYPE_F32, 8, &cpu));
  FZ_OK(sw_carrier_create_host(fz_runtime(), SW_DTYPE_F32, 0, &host));
  const int64_t grid[1] = {2}, tile[1] = {4};
  destroy_calls = 0;
  const sw_error_code_t code = FZ_CHECK(sw_tiled_create(cpu, host, grid, tile, 1, &p, &te));
  ACCEPTED_ONLY_KNOWN(code, p.struct_size, sizeof p, offsetof(sw_residency_policy_t, outcome),
                      offsetof(sw_residency_policy_t, attach));
  if (code != SW_OK) FZ_REQUIRE(destroy_calls == 0, "destroy ran for a refused policy");
  if (code == SW_OK) {
    sw_tile_state_t st;
    sw_tile_state_init(&st);
    st.struct_size = fz_struct_size(in, sizeof st);
    const int64_t coord[1] = {fz_range(in, -1, 2)};
    const sw_error_code_t sc = FZ_CHECK(sw_tiled_tile_state(te, coord, 1, &st));
    ACCEPTED_ONLY_KNOWN(sc, st.struct_size, sizeof st);
    sw_carrier_release(te);
    FZ_REQUIRE(destroy_calls == 1, "destroy ran %d times", destroy_calls);
  }
  sw_carrier_release(cpu);
  sw_carrier_release(host);

  sw_lru_policy_t* lru = NULL;
  FZ_OK(sw_lru_policy_create((size_t)fz_range(in, 1, 4), &lru));
  sw_lru_stats_t s;
  sw_lru_stats_init(&s);
  s.struct_size = fz_struct_size(in, sizeof s);
  ACCEPTED_ONLY_KNOWN(FZ_CHECK(sw_lru_policy_stats(lru, &s)), s.struct_size, sizeof s,
                      offsetof(sw_lru_stats_t, transient));
  sw_lru_policy_release(lru);
}

static void device_structs(fz_in* in) {
  sw_fake_device_vtable_t vt;
  sw_fake_device_vtable_init(&vt);
  vt.struct_size = fz_struct_size(in, sizeof vt);
  sw_device_t* dev = NULL;
  const bool fake = fz_bool(in);
  sw_error_code_t code = fake ? FZ_CHECK(sw_device_create_fake(fz_runtime(), &vt, &dev))
                              : FZ_CHECK(sw_device_create_host(fz_runtime(), &dev));
  if (fake) ACCEPTED_ONLY_KNOWN(code, vt.struct_size, sizeof vt);
  if (code != SW_OK) return;

  sw_object_spec_t spec;
  sw_object_spec_init(&spec);
  spec.struct_size = fz_struct_size(in, sizeof spec);
  spec.dtype = (sw_dtype_t)fz_range(in, 0, 9);
  spec.rank = (size_t)fz_range(in, 0, SW_MAX_RANK + 1);
  for (size_t i = 0; i < SW_MAX_RANK; ++i) spec.shape[i] = fz_range(in, -1, 4);
  spec.max_extent_bytes = fz_bool(in) ? 0 : (uint64_t)fz_i64(in);
  spec.alignment = fz_bool(in) ? 0 : (uint64_t)fz_range(in, 0, 4096);
  /* Small, or beyond any machine's memory (refused OUT_OF_MEMORY or VALUE):
   * a real allocation of gigabytes would only exhaust the fuzzer. */
  const uint64_t extent = fz_bool(in) ? (uint64_t)fz_range(in, 0, 4096) : (uint64_t)fz_i64(in) | (UINT64_C(1) << 62);
  sw_device_allocation_t* a = NULL;
  code = FZ_CHECK(sw_device_alloc(dev, &spec, extent, &a));
  ACCEPTED_ONLY_KNOWN(code, spec.struct_size, sizeof spec);
  if (code == SW_OK) {
    sw_copy_event_t ev;
    sw_copy_event_init(&ev);
    ev.struct_size = fz_struct_size(in, sizeof ev);
    uint8_t host[64] = {1, 2, 3};
    const uint64_t bytes = extent < sizeof host ? extent : sizeof host;
    code = FZ_CHECK(sw_device_host_to_device(a, 0, host, bytes, fz_bool(in), &ev));
    ACCEPTED_ONLY_KNOWN(code, ev.struct_size, sizeof ev);
    /* A fake device completes copies when told; a host device's asynchronous
     * copy completes on a worker: wait for it. */
    if (fake)
      FZ_CHECK(sw_fake_device_complete_all(dev, &(size_t){0}));
    else if (code == SW_OK)
      FZ_CHECK(sw_device_event_wait(dev, &ev, -1));
    sw_copy_event_t q = ev;
    q.struct_size = fz_struct_size(in, sizeof q);
    bool released = false, complete = false;
    code = FZ_CHECK(sw_device_event_query(dev, &q, &released, &complete));
    ACCEPTED_ONLY_KNOWN(code, q.struct_size, sizeof q);
    if (code == SW_OK) FZ_REQUIRE(released && complete, "a completed copy reads as pending");

    sw_device_view_t* v = NULL;
    int64_t shape[SW_MAX_RANK];
    const size_t rank = spec.rank <= SW_MAX_RANK ? spec.rank : SW_MAX_RANK;
    memcpy(shape, spec.shape, sizeof shape);
    if (FZ_CHECK(sw_device_view(a, spec.dtype, shape, rank, &v)) == SW_OK) {
      sw_view_info_t info;
      sw_view_info_init(&info);
      info.struct_size = fz_struct_size(in, sizeof info);
      ACCEPTED_ONLY_KNOWN(FZ_CHECK(sw_device_view_describe(v, &info)), info.struct_size, sizeof info);
      sw_device_view_release(v);
    }
    sw_vulkan_counters_t counters;
    sw_vulkan_counters_init(&counters);
    counters.struct_size = fz_struct_size(in, sizeof counters);
    FZ_REQUIRE(FZ_CHECK(sw_testing_vulkan_counters(dev, &counters)) != SW_OK, "counters of a device that is not Vulkan");
    sw_device_allocation_release(a);
  }
  /* A Vulkan desc of a size this library does not know is refused before
   * any device is made (a valid one would bring up a device: not here). */
  sw_vulkan_device_desc_t vd;
  sw_vulkan_device_desc_init(&vd);
  vd.struct_size = fz_struct_size(in, sizeof vd);
  if (!KNOWN(vd.struct_size, sizeof vd, offsetof(sw_vulkan_device_desc_t, enabled_features))) {
    sw_device_t* vk = NULL;
    const sw_error_code_t vc = FZ_CHECK(sw_device_create_vulkan(fz_runtime(), &vd, &vk));
    FZ_REQUIRE(vc == SW_ERROR_VALUE || vc == SW_ERROR_UNSUPPORTED, "Vulkan desc of struct_size %u: %s",
               (unsigned)vd.struct_size, sw_error_code_name(vc));
    sw_device_release(vk);
  }
  sw_device_release(dev);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fz_in in = {data, size};
  while (in.n > 0) {
    switch (fz_u8(&in) % 8) {
      case 0: runtime_desc(&in); break;
      case 1: external_desc(&in); break;
      case 2: file_desc(&in); break;
      case 3: zstd_desc(&in); break;
      case 4: matmul_desc(&in); break;
      case 5: callback_info(&in); break;
      case 6: policy_and_out_structs(&in); break;
      default: device_structs(&in); break;
    }
  }
  return 0;
}
