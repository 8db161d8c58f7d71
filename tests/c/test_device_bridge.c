/* The device bridge contract against the fake backend: allocation, both copy
 * directions with exact ranges, release points, views, lifetime, typed
 * faults, generations and stale events. */
#include <dlpack/dlpack.h>

#include "sw_test.h"

typedef struct {
  sw_runtime_t* rt;
  sw_device_t* dev;
} fixture_t;

static int setup(void** state) {
  fixture_t* f = calloc(1, sizeof(*f));
  if (sw_runtime_create(NULL, &f->rt)) return -1;
  if (sw_device_create_fake(f->rt, NULL, &f->dev)) return -1;
  *state = f;
  return 0;
}

static int teardown(void** state) {
  fixture_t* f = *state;
  sw_device_release(f->dev);
  sw_runtime_release(f->rt);
  free(f);
  return 0;
}

static sw_object_spec_t spec_f32(int64_t n) {
  sw_object_spec_t s;
  sw_object_spec_init(&s);
  s.dtype = SW_DTYPE_F32;
  s.rank = 1;
  s.shape[0] = n;
  s.max_extent_bytes = 4096;
  s.alignment = 64;
  return s;
}

static size_t log_count(sw_device_t* d) {
  size_t n = 0;
  SW_OK_(sw_fake_device_log_count(d, &n));
  return n;
}

static void assert_log(sw_device_t* d, size_t index, const char* expected) {
  char line[256];
  size_t len = 0;
  SW_OK_(sw_fake_device_log_entry(d, index, line, sizeof line, &len));
  assert_string_equal(line, expected);
  assert_int_equal(len, strlen(expected));
}

static sw_device_allocation_t* alloc64(fixture_t* f) {
  sw_object_spec_t s = spec_f32(16);
  sw_device_allocation_t* a = NULL;
  SW_OK_(sw_device_alloc(f->dev, &s, 64, &a));
  return a;
}

static void test_alloc_logs_exact_arguments(void** state) {
  fixture_t* f = *state;
  sw_device_allocation_t* a = alloc64(f);
  uint64_t extent = 0, gen = 0;
  SW_OK_(sw_device_allocation_extent(a, &extent));
  SW_OK_(sw_device_allocation_generation(a, &gen));
  assert_int_equal(extent, 64);
  assert_int_equal(gen, 1);
  assert_int_equal(log_count(f->dev), 1);
  assert_log(f->dev, 0, "alloc alloc=1 bytes=64 alignment=64");
  SW_OK_(sw_device_free(a));
  assert_log(f->dev, 1, "free alloc=1");
  SW_FAILS(sw_device_free(a), SW_ERROR_STATE, "already freed");
  sw_device_allocation_release(a);
  assert_int_equal(log_count(f->dev), 2);
}

static void test_alloc_rejects_bad_extent_and_alignment_without_backend(void** state) {
  fixture_t* f = *state;
  sw_object_spec_t s = spec_f32(16);
  sw_device_allocation_t* a = NULL;
  SW_FAILS(sw_device_alloc(f->dev, &s, 0, &a), SW_ERROR_VALUE, "extent 0");
  SW_FAILS(sw_device_alloc(f->dev, &s, 8192, &a), SW_ERROR_VALUE, "max extent");
  SW_FAILS(sw_device_alloc(f->dev, &s, 32, &a), SW_ERROR_VALUE, "smaller");
  s.alignment = 48;
  SW_FAILS(sw_device_alloc(f->dev, &s, 64, &a), SW_ERROR_VALUE, "power of two");
  s.alignment = 64;
  s.dtype = SW_DTYPE_INVALID;
  SW_FAILS(sw_device_alloc(f->dev, &s, 64, &a), SW_ERROR_TYPE, NULL);
  assert_null(a);
  assert_int_equal(log_count(f->dev), 0);
}

static void test_alloc_failure_is_typed(void** state) {
  fixture_t* f = *state;
  sw_object_spec_t s = spec_f32(16);
  sw_device_allocation_t* a = NULL;
  SW_OK_(sw_fake_device_arm_failure(f->dev, SW_FAKE_FAIL_ALLOCATION));
  SW_FAILS(sw_device_alloc(f->dev, &s, 64, &a), SW_ERROR_OUT_OF_MEMORY, "device allocation failed");
  assert_null(a);
  /* One-shot. */
  SW_OK_(sw_device_alloc(f->dev, &s, 64, &a));
  sw_device_allocation_release(a);
}

static void test_sync_round_trip_exact_ranges(void** state) {
  fixture_t* f = *state;
  sw_device_allocation_t* a = alloc64(f);
  uint8_t in[24], out[64];
  for (int i = 0; i < 24; ++i) in[i] = (uint8_t)(100 + i);
  sw_copy_event_t ev;
  sw_copy_event_init(&ev);
  SW_OK_(sw_device_host_to_device(a, 16, in, 24, false, &ev));
  /* Synchronous: released and complete on return. */
  bool released = false, complete = false;
  SW_OK_(sw_device_event_query(f->dev, &ev, &released, &complete));
  assert_true(released && complete);
  assert_int_equal(ev.generation, 1);
  memset(in, 0, sizeof in); /* the host bytes were safe to release */
  memset(out, 0xee, sizeof out);
  SW_OK_(sw_device_device_to_host(a, 0, out, 64, false, NULL));
  for (int i = 0; i < 64; ++i) {
    uint8_t want = (i >= 16 && i < 40) ? (uint8_t)(100 + i - 16) : 0;
    assert_int_equal(out[i], want);
  }
  uint8_t part[5];
  SW_OK_(sw_device_device_to_host(a, 20, part, 5, false, NULL));
  for (int i = 0; i < 5; ++i) assert_int_equal(part[i], 104 + i);
  assert_log(f->dev, 1, "host_to_device alloc=1 offset=16 bytes=24 async=0");
  assert_log(f->dev, 2, "device_to_host alloc=1 offset=0 bytes=64 async=0");
  assert_log(f->dev, 3, "device_to_host alloc=1 offset=20 bytes=5 async=0");
  sw_device_allocation_release(a);
}

static void test_copy_ranges_checked_before_backend(void** state) {
  fixture_t* f = *state;
  sw_device_allocation_t* a = alloc64(f);
  uint8_t buf[128] = {0};
  size_t before = log_count(f->dev);
  SW_FAILS(sw_device_host_to_device(a, 60, buf, 8, false, NULL), SW_ERROR_INDEX, "extent 64");
  SW_FAILS(sw_device_host_to_device(a, 0, buf, 65, false, NULL), SW_ERROR_INDEX, NULL);
  SW_FAILS(sw_device_device_to_host(a, 65, buf, 1, false, NULL), SW_ERROR_INDEX, NULL);
  SW_FAILS(sw_device_device_to_host(a, UINT64_MAX, buf, 2, false, NULL), SW_ERROR_INDEX, NULL);
  SW_FAILS(sw_device_host_to_device(a, 0, buf, 0, false, NULL), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_device_host_to_device(a, 0, NULL, 4, false, NULL), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_device_host_to_device(a, 0, buf, 4, true, NULL), SW_ERROR_VALUE, "out_event");
  assert_int_equal(log_count(f->dev), before);
  /* The full extent exactly is fine. */
  SW_OK_(sw_device_host_to_device(a, 0, buf, 64, false, NULL));
  sw_device_allocation_release(a);
}

static void test_async_h2d_releases_only_at_completion(void** state) {
  fixture_t* f = *state;
  sw_device_allocation_t* a = alloc64(f);
  uint8_t in[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  sw_copy_event_t ev;
  sw_copy_event_init(&ev);
  SW_OK_(sw_device_host_to_device(a, 8, in, 8, true, &ev));
  bool released = true, complete = true;
  SW_OK_(sw_device_event_query(f->dev, &ev, &released, &complete));
  assert_false(released);
  assert_false(complete);
  SW_FAILS(sw_device_event_wait(f->dev, &ev, 1000000), SW_ERROR_TIMEOUT, NULL);
  /* The fake reads the host bytes only when completing: the caller may still
   * change them, and the device gets what they hold then. */
  in[0] = 42;
  SW_OK_(sw_fake_device_complete(f->dev, &ev));
  SW_OK_(sw_device_event_query(f->dev, &ev, &released, &complete));
  assert_true(released && complete);
  SW_OK_(sw_device_event_wait(f->dev, &ev, 0));
  uint8_t out[8];
  SW_OK_(sw_device_device_to_host(a, 8, out, 8, false, NULL));
  assert_int_equal(out[0], 42);
  assert_int_equal(out[7], 8);
  char expect[96];
  snprintf(expect, sizeof expect, "host_to_device alloc=1 offset=8 bytes=8 async=1 event=%llu",
           (unsigned long long)ev.id);
  assert_log(f->dev, 1, expect);
  snprintf(expect, sizeof expect, "complete event=%llu", (unsigned long long)ev.id);
  assert_log(f->dev, 2, expect);
  SW_FAILS(sw_fake_device_complete(f->dev, &ev), SW_ERROR_VALUE, "not pending");
  sw_device_allocation_release(a);
}

static void test_async_d2h_valid_only_at_completion(void** state) {
  fixture_t* f = *state;
  sw_device_allocation_t* a = alloc64(f);
  uint8_t in[4] = {9, 8, 7, 6};
  SW_OK_(sw_device_host_to_device(a, 4, in, 4, false, NULL));
  uint8_t out[4] = {0, 0, 0, 0};
  sw_copy_event_t ev;
  sw_copy_event_init(&ev);
  SW_OK_(sw_device_device_to_host(a, 4, out, 4, true, &ev));
  assert_int_equal(out[0], 0); /* not written before completion */
  size_t n = 0;
  SW_OK_(sw_fake_device_complete_all(f->dev, &n));
  assert_int_equal(n, 1);
  SW_OK_(sw_device_event_wait(f->dev, &ev, -1));
  assert_memory_equal(out, in, 4);
  sw_device_allocation_release(a);
}

static void test_free_refused_while_in_use(void** state) {
  fixture_t* f = *state;
  sw_device_allocation_t* a = alloc64(f);
  uint8_t buf[4] = {0};
  /* A pending copy. */
  sw_copy_event_t ev;
  sw_copy_event_init(&ev);
  SW_OK_(sw_device_host_to_device(a, 0, buf, 4, true, &ev));
  SW_FAILS(sw_device_free(a), SW_ERROR_STATE, "in use");
  SW_OK_(sw_fake_device_complete(f->dev, &ev));
  /* Compute. */
  SW_OK_(sw_device_compute_begin(a));
  SW_FAILS(sw_device_free(a), SW_ERROR_STATE, "in use");
  SW_OK_(sw_device_compute_end(a));
  SW_FAILS(sw_device_compute_end(a), SW_ERROR_STATE, NULL);
  /* A live view. */
  int64_t shape[1] = {16};
  sw_device_view_t* v = NULL;
  SW_OK_(sw_device_view(a, SW_DTYPE_F32, shape, 1, &v));
  SW_FAILS(sw_device_free(a), SW_ERROR_STATE, "in use");
  sw_device_view_release(v);
  size_t before = log_count(f->dev);
  SW_OK_(sw_device_free(a));
  assert_log(f->dev, before, "free alloc=1");
  SW_FAILS(sw_device_host_to_device(a, 0, buf, 4, false, NULL), SW_ERROR_STATE, "freed");
  sw_device_allocation_release(a);
}

static void test_view_checks_dtype_then_shape(void** state) {
  fixture_t* f = *state;
  sw_object_spec_t s = spec_f32(0);
  s.rank = 2;
  s.shape[0] = 4;
  s.shape[1] = 3;
  sw_device_allocation_t* a = NULL;
  SW_OK_(sw_device_alloc(f->dev, &s, 48, &a));
  int64_t good[2] = {4, 3}, bad[2] = {3, 4};
  sw_device_view_t* v = NULL;
  SW_FAILS(sw_device_view(a, SW_DTYPE_F64, bad, 2, &v), SW_ERROR_TYPE, "dtype");
  SW_FAILS(sw_device_view(a, SW_DTYPE_F32, bad, 2, &v), SW_ERROR_VALUE, "shape");
  SW_FAILS(sw_device_view(a, SW_DTYPE_F32, good, 1, &v), SW_ERROR_VALUE, "shape");
  SW_OK_(sw_fake_device_arm_failure(f->dev, SW_FAKE_FAIL_VIEW));
  SW_FAILS(sw_device_view(a, SW_DTYPE_F32, good, 2, &v), SW_ERROR_IO, "view failed");
  assert_null(v);
  SW_OK_(sw_device_view(a, SW_DTYPE_F32, good, 2, &v));
  sw_view_info_t info;
  sw_view_info_init(&info);
  SW_OK_(sw_device_view_describe(v, &info));
  assert_non_null(info.pointer);
  assert_int_equal(((uintptr_t)info.pointer) % 64, 0);
  assert_int_equal(info.dtype, SW_DTYPE_F32);
  assert_int_equal(info.rank, 2);
  assert_int_equal(info.shape[0], 4);
  assert_int_equal(info.shape[1], 3);
  assert_int_equal(info.strides_bytes[0], 4);
  assert_int_equal(info.strides_bytes[1], 16);
  /* The view describes the allocation's memory. */
  float x = 2.5f;
  SW_OK_(sw_device_host_to_device(a, 20, &x, 4, false, NULL));
  assert_true(((float*)info.pointer)[5] == 2.5f);
  /* DLPack export keeps the view (a use) alive. */
  void* managed = NULL;
  SW_OK_(sw_device_view_to_dlpack(v, &managed));
  sw_device_view_release(v);
  SW_FAILS(sw_device_free(a), SW_ERROR_STATE, "in use");
  DLManagedTensor* m = managed;
  assert_ptr_equal(m->dl_tensor.data, info.pointer);
  assert_int_equal(m->dl_tensor.ndim, 2);
  assert_int_equal(m->dl_tensor.dtype.code, kDLFloat);
  assert_int_equal(m->dl_tensor.dtype.bits, 32);
  assert_int_equal(m->dl_tensor.strides[1], 4);
  m->deleter(m);
  SW_OK_(sw_device_free(a));
  sw_device_allocation_release(a);
}

static void test_copy_failures_are_typed(void** state) {
  fixture_t* f = *state;
  sw_device_allocation_t* a = alloc64(f);
  uint8_t buf[4] = {1, 2, 3, 4};
  SW_OK_(sw_fake_device_arm_failure(f->dev, SW_FAKE_FAIL_COPY));
  SW_FAILS(sw_device_host_to_device(a, 0, buf, 4, false, NULL), SW_ERROR_IO, "copy failed");
  /* An async copy fails at completion; its event reports the error, and the
   * allocation is no longer in use. */
  sw_copy_event_t ev;
  sw_copy_event_init(&ev);
  SW_OK_(sw_device_device_to_host(a, 0, buf, 4, true, &ev));
  SW_OK_(sw_fake_device_arm_failure(f->dev, SW_FAKE_FAIL_COPY));
  SW_OK_(sw_fake_device_complete(f->dev, &ev));
  bool r, c;
  SW_FAILS(sw_device_event_query(f->dev, &ev, &r, &c), SW_ERROR_IO, "copy failed");
  SW_FAILS(sw_device_event_wait(f->dev, &ev, -1), SW_ERROR_IO, "copy failed");
  SW_OK_(sw_device_free(a));
  sw_device_allocation_release(a);
}

static void test_restart_abandons_and_rejects_stale(void** state) {
  fixture_t* f = *state;
  sw_device_allocation_t* a = alloc64(f);
  uint8_t buf[4] = {1, 2, 3, 4};
  int64_t shape[1] = {16};
  sw_device_view_t* v = NULL;
  SW_OK_(sw_device_view(a, SW_DTYPE_F32, shape, 1, &v));
  sw_copy_event_t pending, done;
  sw_copy_event_init(&pending);
  sw_copy_event_init(&done);
  SW_OK_(sw_device_host_to_device(a, 0, buf, 4, false, &done));
  SW_OK_(sw_device_host_to_device(a, 0, buf, 4, true, &pending));
  SW_OK_(sw_device_restart(f->dev));
  uint64_t gen = 0;
  SW_OK_(sw_device_generation(f->dev, &gen));
  assert_int_equal(gen, 2);
  bool r, c;
  SW_FAILS(sw_device_event_query(f->dev, &pending, &r, &c), SW_ERROR_STALE_HANDLE, "generation 1");
  SW_FAILS(sw_device_event_query(f->dev, &done, &r, &c), SW_ERROR_STALE_HANDLE, NULL);
  SW_FAILS(sw_device_event_wait(f->dev, &pending, -1), SW_ERROR_STALE_HANDLE, NULL);
  SW_FAILS(sw_fake_device_complete(f->dev, &pending), SW_ERROR_STALE_HANDLE, NULL);
  size_t n = 99;
  SW_OK_(sw_fake_device_complete_all(f->dev, &n));
  assert_int_equal(n, 0); /* abandoned: never completes */
  SW_FAILS(sw_device_free(a), SW_ERROR_STALE_HANDLE, NULL);
  SW_FAILS(sw_device_host_to_device(a, 0, buf, 4, false, NULL), SW_ERROR_STALE_HANDLE, NULL);
  SW_FAILS(sw_device_device_to_host(a, 0, buf, 4, false, NULL), SW_ERROR_STALE_HANDLE, NULL);
  SW_FAILS(sw_device_view(a, SW_DTYPE_F32, shape, 1, &v), SW_ERROR_STALE_HANDLE, NULL);
  SW_FAILS(sw_device_compute_begin(a), SW_ERROR_STALE_HANDLE, NULL);
  sw_view_info_t info;
  sw_view_info_init(&info);
  SW_FAILS(sw_device_view_describe(v, &info), SW_ERROR_STALE_HANDLE, NULL);
  void* m = NULL;
  SW_FAILS(sw_device_view_to_dlpack(v, &m), SW_ERROR_STALE_HANDLE, NULL);
  /* A second restart never goes backwards; new allocations carry it. */
  SW_OK_(sw_device_restart(f->dev));
  SW_OK_(sw_device_generation(f->dev, &gen));
  assert_int_equal(gen, 3);
  sw_device_allocation_t* b = alloc64(f);
  SW_OK_(sw_device_allocation_generation(b, &gen));
  assert_int_equal(gen, 3);
  sw_copy_event_t ev;
  sw_copy_event_init(&ev);
  SW_OK_(sw_device_host_to_device(b, 0, buf, 4, false, &ev));
  assert_int_equal(ev.generation, 3);
  sw_device_view_release(v);
  sw_device_allocation_release(a);
  sw_device_allocation_release(b);
}

static void test_device_lost_restarts(void** state) {
  fixture_t* f = *state;
  sw_device_allocation_t* a = alloc64(f);
  uint8_t buf[4] = {1, 2, 3, 4};
  sw_copy_event_t pending;
  sw_copy_event_init(&pending);
  SW_OK_(sw_device_host_to_device(a, 0, buf, 4, true, &pending));
  SW_OK_(sw_fake_device_arm_failure(f->dev, SW_FAKE_FAIL_DEVICE_LOST));
  SW_FAILS(sw_device_device_to_host(a, 0, buf, 4, false, NULL), SW_ERROR_DEVICE_LOST, NULL);
  uint64_t gen = 0;
  SW_OK_(sw_device_generation(f->dev, &gen));
  assert_int_equal(gen, 2);
  bool r, c;
  SW_FAILS(sw_device_event_query(f->dev, &pending, &r, &c), SW_ERROR_STALE_HANDLE, NULL);
  SW_FAILS(sw_device_free(a), SW_ERROR_STALE_HANDLE, NULL);
  /* A loss reported by an async completion restarts too. */
  sw_device_allocation_t* b = alloc64(f);
  sw_copy_event_t ev;
  sw_copy_event_init(&ev);
  SW_OK_(sw_device_host_to_device(b, 0, buf, 4, true, &ev));
  SW_OK_(sw_fake_device_arm_failure(f->dev, SW_FAKE_FAIL_DEVICE_LOST));
  SW_OK_(sw_fake_device_complete(f->dev, &ev));
  SW_OK_(sw_device_generation(f->dev, &gen));
  assert_int_equal(gen, 3);
  SW_FAILS(sw_device_event_wait(f->dev, &ev, -1), SW_ERROR_STALE_HANDLE, NULL);
  sw_device_allocation_release(a);
  sw_device_allocation_release(b);
}

static void test_log_entry_buffer_rules_and_type(void** state) {
  fixture_t* f = *state;
  sw_device_allocation_t* a = alloc64(f);
  size_t len = 0;
  SW_OK_(sw_fake_device_log_entry(f->dev, 0, NULL, 0, &len));
  assert_int_equal(len, strlen("alloc alloc=1 bytes=64 alignment=64"));
  char small[4];
  SW_FAILS(sw_fake_device_log_entry(f->dev, 0, small, sizeof small, &len), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_fake_device_log_entry(f->dev, 5, small, sizeof small, &len), SW_ERROR_INDEX, NULL);
  sw_device_t* host = NULL;
  SW_OK_(sw_device_create_host(f->rt, &host));
  size_t n;
  SW_FAILS(sw_fake_device_log_count(host, &n), SW_ERROR_TYPE, "fake");
  SW_FAILS(sw_device_free((sw_device_allocation_t*)host), SW_ERROR_TYPE, "device allocation");
  sw_device_release(host);
  sw_device_allocation_release(a);
}

/* An embedder's own storage through the vtable. */
typedef struct {
  uint8_t memory[256];
  int allocs, frees, restarts, destroyed;
} user_dev_t;
static sw_error_code_t u_alloc(void* u, uint64_t id, uint64_t bytes, uint64_t align, void** out) {
  (void)id; (void)align;
  user_dev_t* d = u;
  if (bytes > sizeof d->memory) return SW_ERROR_OUT_OF_MEMORY;
  d->allocs++;
  *out = d->memory;
  return SW_OK;
}
static void u_free(void* u, uint64_t id) { (void)id; ((user_dev_t*)u)->frees++; }
static sw_error_code_t u_h2d(void* u, uint64_t id, uint64_t off, const void* host, uint64_t bytes) {
  (void)id;
  memcpy(((user_dev_t*)u)->memory + off, host, bytes);
  return SW_OK;
}
static void u_restart(void* u, uint64_t gen) { (void)gen; ((user_dev_t*)u)->restarts++; }
static void u_destroy(void* u) { ((user_dev_t*)u)->destroyed++; }

static void test_user_vtable(void** state) {
  fixture_t* f = *state;
  user_dev_t ud;
  memset(&ud, 0, sizeof ud);
  sw_fake_device_vtable_t vt;
  sw_fake_device_vtable_init(&vt);
  vt.user_data = &ud;
  vt.allocate = u_alloc;
  vt.free = u_free;
  vt.host_to_device = u_h2d;
  vt.restart = u_restart;
  vt.destroy = u_destroy;
  sw_device_t* d = NULL;
  SW_OK_(sw_device_create_fake(f->rt, &vt, &d));
  sw_object_spec_t s = spec_f32(16);
  s.max_extent_bytes = 0;
  sw_device_allocation_t* a = NULL;
  SW_FAILS(sw_device_alloc(d, &s, 1024, &a), SW_ERROR_OUT_OF_MEMORY, "device allocation failed");
  SW_OK_(sw_device_alloc(d, &s, 64, &a));
  uint8_t in[3] = {7, 8, 9};
  SW_OK_(sw_device_host_to_device(a, 10, in, 3, false, NULL));
  assert_memory_equal(ud.memory + 10, in, 3);
  uint8_t out[3] = {0};
  SW_OK_(sw_device_device_to_host(a, 10, out, 3, false, NULL)); /* built-in d2h over the user's pointer */
  assert_memory_equal(out, in, 3);
  SW_OK_(sw_device_free(a));
  SW_OK_(sw_device_restart(d));
  assert_int_equal(ud.allocs, 1);
  assert_int_equal(ud.frees, 1);
  assert_int_equal(ud.restarts, 1);
  sw_device_allocation_release(a);
  sw_device_release(d);
  assert_int_equal(ud.destroyed, 1);
}

static void test_host_device_async(void** state) {
  fixture_t* f = *state;
  sw_device_t* d = NULL;
  SW_OK_(sw_device_create_host(f->rt, &d));
  sw_device_kind_t kind;
  SW_OK_(sw_device_kind(d, &kind));
  assert_int_equal(kind, SW_DEVICE_HOST);
  sw_object_spec_t s = spec_f32(16);
  sw_device_allocation_t* a = NULL;
  SW_OK_(sw_device_alloc(d, &s, 64, &a));
  float in[4] = {1, 2, 3, 4}, out[4] = {0};
  sw_copy_event_t e1, e2;
  sw_copy_event_init(&e1);
  sw_copy_event_init(&e2);
  SW_OK_(sw_device_host_to_device(a, 12, in, 16, true, &e1));
  SW_OK_(sw_device_event_wait(d, &e1, -1));
  SW_OK_(sw_device_device_to_host(a, 12, out, 16, true, &e2));
  SW_OK_(sw_device_event_wait(d, &e2, -1));
  bool r, c;
  SW_OK_(sw_device_event_query(d, &e2, &r, &c));
  assert_true(r && c);
  assert_memory_equal(in, out, 16);
  SW_OK_(sw_device_free(a));
  sw_device_allocation_release(a);
  sw_device_release(d);
}

static void test_tensor_to_dlpack(void** state) {
  fixture_t* f = *state;
  int64_t shape[2] = {2, 3};
  float data[6] = {0, 1, 2, 3, 4, 5};
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_from_data(f->rt, SW_DTYPE_F32, shape, 2, data, &t));
  void* managed = NULL;
  SW_OK_(sw_tensor_to_dlpack(t, &managed));
  sw_tensor_release(t); /* the export keeps it alive */
  DLManagedTensor* m = managed;
  assert_int_equal(m->dl_tensor.device.device_type, kDLCPU);
  assert_int_equal(m->dl_tensor.ndim, 2);
  assert_int_equal(m->dl_tensor.shape[1], 3);
  assert_int_equal(m->dl_tensor.strides[0], 1);
  assert_int_equal(m->dl_tensor.strides[1], 2);
  assert_true(((float*)m->dl_tensor.data)[5] == 5.0f);
  m->deleter(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_alloc_logs_exact_arguments, setup, teardown),
      cmocka_unit_test_setup_teardown(test_alloc_rejects_bad_extent_and_alignment_without_backend, setup, teardown),
      cmocka_unit_test_setup_teardown(test_alloc_failure_is_typed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sync_round_trip_exact_ranges, setup, teardown),
      cmocka_unit_test_setup_teardown(test_copy_ranges_checked_before_backend, setup, teardown),
      cmocka_unit_test_setup_teardown(test_async_h2d_releases_only_at_completion, setup, teardown),
      cmocka_unit_test_setup_teardown(test_async_d2h_valid_only_at_completion, setup, teardown),
      cmocka_unit_test_setup_teardown(test_free_refused_while_in_use, setup, teardown),
      cmocka_unit_test_setup_teardown(test_view_checks_dtype_then_shape, setup, teardown),
      cmocka_unit_test_setup_teardown(test_copy_failures_are_typed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_restart_abandons_and_rejects_stale, setup, teardown),
      cmocka_unit_test_setup_teardown(test_device_lost_restarts, setup, teardown),
      cmocka_unit_test_setup_teardown(test_log_entry_buffer_rules_and_type, setup, teardown),
      cmocka_unit_test_setup_teardown(test_user_vtable, setup, teardown),
      cmocka_unit_test_setup_teardown(test_host_device_async, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tensor_to_dlpack, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
