/* Versioning, runtime creation from a desc, and the host hooks (allocator,
 * log callback) that an embedder installs. */
#include <unistd.h>

#include "sw_test.h"

/* ---- versioning ---------------------------------------------------------- */

static void version_matches_header(void** state) {
  (void)state;
  assert_int_equal(sw_version(), SW_VERSION);
  assert_int_equal(SW_VERSION, SW_MAKE_VERSION(SW_VERSION_MAJOR, SW_VERSION_MINOR, SW_VERSION_PATCH));
  assert_int_equal(SW_VERSION_MAJOR, 0);
  assert_int_equal(SW_VERSION_MINOR, 3);
  assert_int_equal(SW_VERSION_PATCH, 0);
  assert_int_equal(sw_version(), 12288u); /* 0 << 22 | 3 << 12 | 0 */
}

static void packing_macro(void** state) {
  (void)state;
  assert_int_equal(SW_MAKE_VERSION(0, 0, 0), 0u);
  assert_int_equal(SW_MAKE_VERSION(0, 0, 1), 1u);
  assert_int_equal(SW_MAKE_VERSION(0, 1, 0), 4096u);
  assert_int_equal(SW_MAKE_VERSION(1, 0, 0), 4194304u);
  assert_int_equal(SW_MAKE_VERSION(1, 2, 3), (1u << 22) | (2u << 12) | 3u);
  /* The fields use 10, 10 and 12 bits and fill the 32 bits exactly. */
  assert_int_equal(SW_MAKE_VERSION(1023, 1023, 4095), 0xffffffffu);
  const uint32_t v = SW_MAKE_VERSION(7, 300, 2049);
  assert_int_equal(v >> 22, 7);
  assert_int_equal((v >> 12) & 0x3ff, 300);
  assert_int_equal(v & 0xfff, 2049);
  /* Ordering by packed value is ordering by (major, minor, patch). */
  assert_true(SW_MAKE_VERSION(0, 2, 0) > SW_MAKE_VERSION(0, 1, 4095));
  assert_true(SW_MAKE_VERSION(1, 0, 0) > SW_MAKE_VERSION(0, 1023, 4095));
}

static void version_string(void** state) {
  (void)state;
  const char* s = sw_version_string();
  assert_non_null(s);
  assert_string_equal(s, "0.3.0");
  char expect[32];
  snprintf(expect, sizeof expect, "%d.%d.%d", SW_VERSION_MAJOR, SW_VERSION_MINOR, SW_VERSION_PATCH);
  assert_string_equal(s, expect);
  const uint32_t v = sw_version();
  snprintf(expect, sizeof expect, "%u.%u.%u", v >> 22, (v >> 12) & 0x3ff, v & 0xfff);
  assert_string_equal(s, expect);
}

/* ---- runtime desc and creation ------------------------------------------ */

static void desc_init_fills_defaults(void** state) {
  (void)state;
  sw_runtime_desc_t d;
  memset(&d, 0xab, sizeof d);
  sw_runtime_desc_init(&d);
  assert_int_equal(d.struct_size, sizeof(sw_runtime_desc_t));
  assert_int_equal(d.compute_threads, 0);
  assert_int_equal(d.worker_threads, 0);
  assert_true(d.pool_limit_bytes == SIZE_MAX);
  assert_null(d.log);
  assert_null(d.log_user_data);
  assert_null(d.allocator);
  sw_runtime_desc_init(NULL); /* must not crash */
}

static uint32_t online_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1u : (uint32_t)n;
}

static void create_with_null_desc(void** state) {
  (void)state;
  sw_runtime_t* rt = NULL;
  SW_OK_(sw_runtime_create(NULL, &rt));
  assert_non_null(rt);
  uint32_t threads = 0;
  SW_OK_(sw_runtime_compute_threads(rt, &threads));
  assert_int_equal(threads, online_cores()); /* 0 = one per core */
  sw_runtime_release(rt);
}

static void create_with_desc_threads(void** state) {
  (void)state;
  for (uint32_t want = 1; want <= 2; ++want) {
    sw_runtime_desc_t d;
    sw_runtime_desc_init(&d);
    d.compute_threads = want;
    sw_runtime_t* rt = NULL;
    SW_OK_(sw_runtime_create(&d, &rt));
    uint32_t threads = 0;
    SW_OK_(sw_runtime_compute_threads(rt, &threads));
    assert_int_equal(threads, want);
    sw_runtime_release(rt);
  }
  /* A default-initialised desc behaves like NULL. */
  sw_runtime_desc_t d;
  sw_runtime_desc_init(&d);
  sw_runtime_t* rt = NULL;
  SW_OK_(sw_runtime_create(&d, &rt));
  uint32_t threads = 0;
  SW_OK_(sw_runtime_compute_threads(rt, &threads));
  assert_int_equal(threads, online_cores());
  sw_runtime_release(rt);
}

static void bad_struct_size_is_value(void** state) {
  (void)state;
  /* Too small to hold even the leading fields, or larger than any desc this
   * library knows. */
  const uint32_t bad[] = {0, 1, 4, (uint32_t)sizeof(sw_runtime_desc_t) + 1, (uint32_t)sizeof(sw_runtime_desc_t) * 2,
                          0xffffffffu};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    sw_runtime_desc_t d;
    sw_runtime_desc_init(&d);
    d.struct_size = bad[i];
    sw_runtime_t* rt = (sw_runtime_t*)(uintptr_t)0x5151;
    SW_FAILS(sw_runtime_create(&d, &rt), SW_ERROR_VALUE, "struct_size");
    assert_ptr_equal(rt, (sw_runtime_t*)(uintptr_t)0x5151);
  }
}

/* A negative log level is refused (it is no value of the enum in C++, so the
 * library must not load it as one); a level above SW_LOG_ERROR reports
 * nothing and is accepted. Found by the descriptors fuzz target under clang's
 * UndefinedBehaviorSanitizer. */
static void negative_log_level_is_value(void** state) {
  (void)state;
  const int32_t bad[] = {-1, -2, INT32_MIN};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    sw_runtime_desc_t d;
    sw_runtime_desc_init(&d);
    memcpy(&d.log_level, &bad[i], sizeof bad[i]);
    sw_runtime_t* rt = (sw_runtime_t*)(uintptr_t)0x5151;
    SW_FAILS(sw_runtime_create(&d, &rt), SW_ERROR_VALUE, "log_level");
    assert_ptr_equal(rt, (sw_runtime_t*)(uintptr_t)0x5151);
  }
  sw_runtime_desc_t d;
  sw_runtime_desc_init(&d);
  d.log_level = (sw_log_level_t)4;
  sw_runtime_t* rt = NULL;
  SW_OK_(sw_runtime_create(&d, &rt));
  sw_runtime_release(rt);
}

static void null_out_runtime_is_value(void** state) {
  (void)state;
  SW_FAILS(sw_runtime_create(NULL, NULL), SW_ERROR_VALUE, "out_runtime");
  sw_runtime_desc_t d;
  sw_runtime_desc_init(&d);
  SW_FAILS(sw_runtime_create(&d, NULL), SW_ERROR_VALUE, "out_runtime");
}

static void retain_release_runtime(void** state) {
  (void)state;
  sw_runtime_t* rt = NULL;
  SW_OK_(sw_runtime_create(NULL, &rt));
  sw_runtime_retain(rt);
  sw_runtime_release(rt);
  uint32_t threads = 0; /* still alive: one reference left */
  SW_OK_(sw_runtime_compute_threads(rt, &threads));
  assert_true(threads >= 1);
  sw_runtime_release(rt);
  sw_runtime_release(NULL);
  sw_runtime_retain(NULL);
}

/* ---- host allocator ------------------------------------------------------ */

#define MAX_BLOCKS 64

typedef struct counting_allocator {
  int allocs;
  int frees;
  int bad_frees; /* pointer, size or alignment not as handed out */
  int misaligned;
  size_t live_bytes;
  int fail; /* return NULL from alloc */
  struct {
    void* p;
    size_t size;
    size_t alignment;
  } blocks[MAX_BLOCKS];
} counting_allocator;

static void* counting_alloc(void* user_data, size_t size, size_t alignment) {
  counting_allocator* a = (counting_allocator*)user_data;
  if (a->fail) return NULL;
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) a->misaligned++;
  void* p = NULL;
  if (posix_memalign(&p, alignment < sizeof(void*) ? sizeof(void*) : alignment, size ? size : 1) != 0) return NULL;
  for (int i = 0; i < MAX_BLOCKS; ++i) {
    if (!a->blocks[i].p) {
      a->blocks[i].p = p;
      a->blocks[i].size = size;
      a->blocks[i].alignment = alignment;
      break;
    }
  }
  a->allocs++;
  a->live_bytes += size;
  return p;
}

static void counting_free(void* user_data, void* pointer, size_t size, size_t alignment) {
  counting_allocator* a = (counting_allocator*)user_data;
  int found = 0;
  for (int i = 0; i < MAX_BLOCKS; ++i) {
    if (a->blocks[i].p == pointer) {
      if (a->blocks[i].size != size || a->blocks[i].alignment != alignment) a->bad_frees++;
      a->blocks[i].p = NULL;
      found = 1;
      break;
    }
  }
  if (!found) a->bad_frees++;
  a->frees++;
  a->live_bytes -= size;
  free(pointer);
}

/* Whether `p` lies inside a block the allocator handed out and has not seen
 * freed. */
static int owns(const counting_allocator* a, const void* p) {
  for (int i = 0; i < MAX_BLOCKS; ++i) {
    const char* b = (const char*)a->blocks[i].p;
    if (b && (const char*)p >= b && (const char*)p < b + a->blocks[i].size) return 1;
  }
  return 0;
}

static sw_runtime_t* runtime_with(counting_allocator* a, size_t pool_limit, uint32_t threads) {
  sw_allocator_t alloc = {counting_alloc, counting_free, a};
  sw_runtime_desc_t d;
  sw_runtime_desc_init(&d);
  d.allocator = &alloc;
  d.pool_limit_bytes = pool_limit;
  d.compute_threads = threads;
  sw_runtime_t* rt = NULL;
  SW_OK_(sw_runtime_create(&d, &rt));
  /* The desc says the allocator is copied at creation: scribble over ours. */
  memset(&alloc, 0, sizeof alloc);
  return rt;
}

static void allocator_serves_cpu_carriers(void** state) {
  (void)state;
  counting_allocator a;
  memset(&a, 0, sizeof a);
  /* Pool limit 0: nothing is cached, so every release reaches free. */
  sw_runtime_t* rt = runtime_with(&a, 0, 1);
  const int allocs0 = a.allocs, frees0 = a.frees;
  const size_t live0 = a.live_bytes;

  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 1000, &c));
  assert_int_equal(a.allocs, allocs0 + 1);
  assert_true(a.live_bytes - live0 >= 4000);
  void* p = NULL;
  SW_OK_(sw_carrier_host_pointer(c, &p));
  assert_true(owns(&a, p));
  assert_int_equal(a.misaligned, 0);

  const double values[3] = {1.5, -2.0, 8.25};
  sw_carrier_t* d = NULL;
  SW_OK_(sw_carrier_create_cpu_from(rt, SW_DTYPE_F64, values, 3, &d));
  assert_int_equal(a.allocs, allocs0 + 2);
  SW_OK_(sw_carrier_host_pointer(d, &p));
  assert_true(owns(&a, p));
  double back[3] = {0, 0, 0};
  SW_OK_(sw_carrier_read(d, 0, 3, back));
  assert_memory_equal(back, values, sizeof values);

  sw_carrier_release(c);
  assert_int_equal(a.frees, frees0 + 1);
  sw_carrier_release(d);
  assert_int_equal(a.frees, frees0 + 2);
  assert_int_equal(a.bad_frees, 0);
  assert_int_equal(a.live_bytes, live0);
  sw_runtime_release(rt);
  assert_int_equal(a.allocs, a.frees);
  assert_int_equal(a.live_bytes, 0);
}

/* With the default pool, released buffers may be cached, but everything is
 * returned to the host allocator by the time the runtime is gone. */
static void allocator_gets_everything_back(void** state) {
  (void)state;
  counting_allocator a;
  memset(&a, 0, sizeof a);
  sw_runtime_t* rt = runtime_with(&a, SIZE_MAX, 2);
  const int64_t ext[2] = {16, 16};
  for (int round = 0; round < 3; ++round) {
    sw_tensor_t* t = NULL;
    SW_OK_(sw_tensor_zeros(rt, SW_DTYPE_F32, ext, 2, &t));
    sw_carrier_t* c = NULL;
    SW_OK_(sw_tensor_carrier(t, &c));
    void* p = NULL;
    SW_OK_(sw_carrier_host_pointer(c, &p));
    assert_true(owns(&a, p));
    sw_carrier_release(c);
    sw_tensor_release(t);
  }
  assert_true(a.allocs >= 1);
  sw_runtime_release(rt);
  assert_int_equal(a.allocs, a.frees);
  assert_int_equal(a.bad_frees, 0);
  assert_int_equal(a.live_bytes, 0);
}

/* A full pool makes room for the buffer freed last by dropping the ones
 * freed longest ago: a program that moves on to another size reuses its new
 * buffers instead of paying fresh ones on every call. */
static void pool_keeps_the_newest_buffers(void** state) {
  (void)state;
  counting_allocator a;
  memset(&a, 0, sizeof a);
  /* Room for one buffer of either size (64 KiB and 96 KiB of f32), not both. */
  sw_runtime_t* rt = runtime_with(&a, 128 * 1024, 1);
  const int64_t small[1] = {16384}, large[1] = {24576};
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_zeros(rt, SW_DTYPE_F32, small, 1, &t));
  sw_tensor_release(t); /* cached */
  const int allocs0 = a.allocs, frees0 = a.frees;
  for (int round = 0; round < 4; ++round) {
    SW_OK_(sw_tensor_zeros(rt, SW_DTYPE_F32, large, 1, &t));
    sw_tensor_release(t);
  }
  /* One fresh large buffer, kept from then on; the small one made room. */
  assert_int_equal(a.allocs, allocs0 + 1);
  assert_int_equal(a.frees, frees0 + 1);
  /* The small size comes back: it replaces the large one the same way. */
  for (int round = 0; round < 3; ++round) {
    SW_OK_(sw_tensor_zeros(rt, SW_DTYPE_F32, small, 1, &t));
    sw_tensor_release(t);
  }
  assert_int_equal(a.allocs, allocs0 + 2);
  assert_int_equal(a.frees, frees0 + 2);
  sw_runtime_release(rt);
  assert_int_equal(a.allocs, a.frees);
  assert_int_equal(a.bad_frees, 0);
  assert_int_equal(a.live_bytes, 0);
}

/* A carrier keeps its runtime (and so the allocator) alive. */
static void carrier_keeps_runtime_alive(void** state) {
  (void)state;
  counting_allocator a;
  memset(&a, 0, sizeof a);
  sw_runtime_t* rt = runtime_with(&a, SIZE_MAX, 1);
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_I32, 64, &c));
  void* p = NULL;
  SW_OK_(sw_carrier_host_pointer(c, &p));
  sw_runtime_release(rt);
  assert_true(owns(&a, p)); /* the carrier's buffer was not given back */
  const int32_t v[2] = {7, -9};
  SW_OK_(sw_carrier_write(c, 10, 2, v));
  int32_t back[2] = {0, 0};
  SW_OK_(sw_carrier_read(c, 10, 2, back));
  assert_int_equal(back[0], 7);
  assert_int_equal(back[1], -9);
  sw_carrier_release(c);
  assert_int_equal(a.allocs, a.frees);
  assert_int_equal(a.live_bytes, 0);
}

static void allocator_needs_both_functions(void** state) {
  (void)state;
  counting_allocator a;
  memset(&a, 0, sizeof a);
  sw_allocator_t only_alloc = {counting_alloc, NULL, &a};
  sw_allocator_t only_free = {NULL, counting_free, &a};
  sw_allocator_t neither = {NULL, NULL, &a};
  const sw_allocator_t* cases[3] = {&only_alloc, &only_free, &neither};
  for (int i = 0; i < 3; ++i) {
    sw_runtime_desc_t d;
    sw_runtime_desc_init(&d);
    d.allocator = cases[i];
    sw_runtime_t* rt = (sw_runtime_t*)(uintptr_t)0x5151;
    SW_FAILS(sw_runtime_create(&d, &rt), SW_ERROR_VALUE, "alloc");
    assert_ptr_equal(rt, (sw_runtime_t*)(uintptr_t)0x5151);
  }
  assert_int_equal(a.allocs, 0);
  assert_int_equal(a.frees, 0);
}

static void failing_allocator_is_out_of_memory(void** state) {
  (void)state;
  counting_allocator a;
  memset(&a, 0, sizeof a);
  sw_runtime_t* rt = runtime_with(&a, SIZE_MAX, 1);
  a.fail = 1;
  sw_carrier_t* c = (sw_carrier_t*)(uintptr_t)0x5151;
  SW_FAILS(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 256, &c), SW_ERROR_OUT_OF_MEMORY, NULL);
  assert_ptr_equal(c, (sw_carrier_t*)(uintptr_t)0x5151);
  a.fail = 0;
  c = NULL;
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 256, &c));
  sw_carrier_release(c);
  sw_runtime_release(rt);
  assert_int_equal(a.allocs, a.frees);
}

/* ---- two runtimes -------------------------------------------------------- */

static void two_runtimes_are_independent(void** state) {
  (void)state;
  counting_allocator a1, a2;
  memset(&a1, 0, sizeof a1);
  memset(&a2, 0, sizeof a2);
  sw_runtime_t* r1 = runtime_with(&a1, 0, 1);
  sw_runtime_t* r2 = runtime_with(&a2, 0, 2);
  uint32_t t1 = 0, t2 = 0;
  SW_OK_(sw_runtime_compute_threads(r1, &t1));
  SW_OK_(sw_runtime_compute_threads(r2, &t2));
  assert_int_equal(t1, 1);
  assert_int_equal(t2, 2);

  const int a1_0 = a1.allocs, a2_0 = a2.allocs, f2_0 = a2.frees;
  sw_carrier_t *c1 = NULL, *c2 = NULL;
  SW_OK_(sw_carrier_create_cpu(r1, SW_DTYPE_F32, 8, &c1));
  assert_int_equal(a1.allocs, a1_0 + 1);
  assert_int_equal(a2.allocs, a2_0);
  SW_OK_(sw_carrier_create_cpu(r2, SW_DTYPE_F32, 8, &c2));
  assert_int_equal(a1.allocs, a1_0 + 1);
  assert_int_equal(a2.allocs, a2_0 + 1);

  /* Writes in one runtime's carrier leave the other's alone. */
  const float v = 3.5f;
  SW_OK_(sw_carrier_write(c1, 0, 1, &v));
  float back = -1.0f;
  SW_OK_(sw_carrier_read(c2, 0, 1, &back));
  assert_true(back == 0.0f);
  uint64_t ver1 = 99, ver2 = 99;
  SW_OK_(sw_carrier_version(c1, &ver1));
  SW_OK_(sw_carrier_version(c2, &ver2));
  assert_int_equal(ver1, 1);
  assert_int_equal(ver2, 0);

  /* Tearing down the first runtime does not disturb the second. */
  sw_carrier_release(c1);
  sw_runtime_release(r1);
  assert_int_equal(a1.allocs, a1.frees);
  assert_int_equal(a2.frees, f2_0);
  SW_OK_(sw_carrier_write(c2, 7, 1, &v));
  SW_OK_(sw_carrier_read(c2, 7, 1, &back));
  assert_true(back == 3.5f);
  sw_tensor_t* t = NULL;
  const int64_t ext[1] = {4};
  SW_OK_(sw_tensor_zeros(r2, SW_DTYPE_F32, ext, 1, &t));
  assert_int_equal(a2.allocs, a2_0 + 2);
  assert_int_equal(a1.allocs, a1_0 + 1);
  sw_tensor_release(t);
  sw_carrier_release(c2);
  sw_runtime_release(r2);
  assert_int_equal(a2.allocs, a2.frees);
  assert_int_equal(a2.bad_frees, 0);
  assert_int_equal(a1.bad_frees, 0);
}

/* ---- logging -------------------------------------------------------------- */

typedef struct log_record {
  int calls;
  int below_level;
  int wrong_user_data;
} log_record;

static log_record* g_expected_user_data;

static void recording_log(void* user_data, sw_log_level_t level, const char* message) {
  log_record* r = (log_record*)user_data;
  if (r != g_expected_user_data) {
    if (g_expected_user_data) g_expected_user_data->wrong_user_data++;
    return;
  }
  r->calls++;
  if (level < SW_LOG_ERROR) r->below_level++;
  (void)message;
}

/* Runs a batch of failing and succeeding calls on `rt`. */
static void exercise(sw_runtime_t* rt) {
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 4, &c));
  float buf[4] = {0};
  sw_error_free(sw_carrier_read(c, 3, 4, buf));
  sw_error_free(sw_carrier_create_cpu(rt, (sw_dtype_t)99, 4, &c));
  sw_layout_t* l = NULL;
  sw_error_free(sw_layout_parse("(((", &l));
  SW_OK_(sw_carrier_dispose(c));
  sw_error_free(sw_carrier_write(c, 0, 1, buf));
  sw_carrier_release(c);
}

/* The runtime hands its log callback the user data it was given and never
 * reports below the requested level. */
static void log_callback_respects_level(void** state) {
  (void)state;
  log_record r;
  memset(&r, 0, sizeof r);
  g_expected_user_data = &r;
  sw_runtime_desc_t d;
  sw_runtime_desc_init(&d);
  d.log = recording_log;
  d.log_user_data = &r;
  d.log_level = SW_LOG_ERROR;
  sw_runtime_t* rt = NULL;
  SW_OK_(sw_runtime_create(&d, &rt));
  exercise(rt);
  sw_runtime_release(rt);
  g_expected_user_data = NULL;
  assert_int_equal(r.below_level, 0);
  assert_int_equal(r.wrong_user_data, 0);
}

/* The library never prints on its own: failures go to the caller as errors,
 * not to stdout or stderr. */
static void library_never_prints(void** state) {
  (void)state;
  fflush(stdout);
  fflush(stderr);
  FILE* sink = tmpfile();
  assert_non_null(sink);
  const int saved_out = dup(1), saved_err = dup(2);
  assert_true(saved_out >= 0 && saved_err >= 0);
  dup2(fileno(sink), 1);
  dup2(fileno(sink), 2);

  sw_runtime_t* rt = NULL;
  sw_error_t* e = sw_runtime_create(NULL, &rt);
  if (!e) {
    exercise(rt);
    sw_runtime_release(rt);
  }

  fflush(stdout);
  fflush(stderr);
  dup2(saved_out, 1);
  dup2(saved_err, 2);
  close(saved_out);
  close(saved_err);
  assert_null(e);
  fseek(sink, 0, SEEK_END);
  const long written = ftell(sink);
  fclose(sink);
  assert_int_equal(written, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(version_matches_header),
      cmocka_unit_test(packing_macro),
      cmocka_unit_test(version_string),
      cmocka_unit_test(desc_init_fills_defaults),
      cmocka_unit_test(create_with_null_desc),
      cmocka_unit_test(create_with_desc_threads),
      cmocka_unit_test(bad_struct_size_is_value),
      cmocka_unit_test(negative_log_level_is_value),
      cmocka_unit_test(null_out_runtime_is_value),
      cmocka_unit_test(retain_release_runtime),
      cmocka_unit_test(allocator_serves_cpu_carriers),
      cmocka_unit_test(allocator_gets_everything_back),
      cmocka_unit_test(pool_keeps_the_newest_buffers),
      cmocka_unit_test(carrier_keeps_runtime_alive),
      cmocka_unit_test(allocator_needs_both_functions),
      cmocka_unit_test(failing_allocator_is_out_of_memory),
      cmocka_unit_test(two_runtimes_are_independent),
      cmocka_unit_test(log_callback_respects_level),
      cmocka_unit_test(library_never_prints),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
