/* SW_FAULT_ALLOCATION on carrier creation: every creating call fails
 * OUT_OF_MEMORY when its allocation is the armed one, writes no
 * out-parameter, claims nothing and leaks nothing (the ASan build checks the
 * last part), and the next call succeeds. Carriers that allocate no storage
 * (a file opened read-only, external memory) do not count. Vulkan carriers
 * are covered in test_vulkan.c, which knows the driver's own leaks. */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sw_test.h"

#define SENTINEL ((void*)(uintptr_t)0x1)

static bool owned(const sw_carrier_t* c) {
  bool v = true;
  SW_OK_(sw_carrier_is_owned(c, &v));
  return v;
}

static size_t slots(const sw_carrier_t* c) {
  size_t n = 0;
  SW_OK_(sw_carrier_size(c, &n));
  return n;
}

/* Arms the next allocation, expects `call` to fail with the injected
 * OUT_OF_MEMORY and leave *out untouched, then expects the same call to
 * succeed. */
#define FAILS_ONCE_THEN_SUCCEEDS(rt, out, call, what)                         \
  do {                                                                        \
    SW_OK_(sw_testing_inject_fault((rt), SW_FAULT_ALLOCATION, 1));            \
    (out) = SENTINEL;                                                         \
    SW_FAILS((call), SW_ERROR_OUT_OF_MEMORY, "injected allocation failure: " what); \
    assert_ptr_equal((out), SENTINEL);                                        \
    (out) = NULL;                                                             \
    SW_OK_(call);                                                             \
    assert_non_null(out);                                                     \
  } while (0)

static void memory_carriers(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const size_t sizes[2] = {0, 1000};
  for (int k = 0; k < 2; ++k) {
    const size_t n = sizes[k];
    sw_carrier_t* c = NULL;
    FAILS_ONCE_THEN_SUCCEEDS(rt, c, sw_carrier_create_cpu(rt, SW_DTYPE_F32, n, (sw_carrier_t**)&c), "CPU carrier");
    assert_int_equal(slots(c), n);
    sw_carrier_release(c);

    float values[1000];
    for (size_t i = 0; i < 1000; ++i) values[i] = (float)i;
    FAILS_ONCE_THEN_SUCCEEDS(rt, c, sw_carrier_create_cpu_from(rt, SW_DTYPE_F32, values, n, (sw_carrier_t**)&c),
                             "CPU carrier");
    if (n) {
      float got = 0;
      SW_OK_(sw_carrier_read(c, 999, 1, &got));
      assert_true(got == 999.0f);
    }
    sw_carrier_release(c);

    FAILS_ONCE_THEN_SUCCEEDS(rt, c, sw_carrier_create_host(rt, SW_DTYPE_I32, n, (sw_carrier_t**)&c), "Host carrier");
    assert_int_equal(slots(c), n);
    sw_carrier_release(c);

    sw_zstd_carrier_desc_t zd;
    sw_zstd_carrier_desc_init(&zd);
    FAILS_ONCE_THEN_SUCCEEDS(rt, c, sw_carrier_create_zstd(rt, SW_DTYPE_F32, n, &zd, (sw_carrier_t**)&c),
                             "Zstd carrier");
    assert_int_equal(slots(c), n);
    sw_carrier_release(c);
  }
}

static void tensors_with_a_new_carrier(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t ext[2] = {3, 4};
  const double values[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  sw_tensor_t* t = NULL;
  FAILS_ONCE_THEN_SUCCEEDS(rt, t, sw_tensor_from_data(rt, SW_DTYPE_F64, ext, 2, values, (sw_tensor_t**)&t),
                           "CPU carrier");
  double got[12];
  SW_OK_(sw_tensor_read(t, got, sizeof got));
  assert_memory_equal(got, values, sizeof values);
  sw_tensor_release(t);
  FAILS_ONCE_THEN_SUCCEEDS(rt, t, sw_tensor_zeros(rt, SW_DTYPE_F32, ext, 2, (sw_tensor_t**)&t), "CPU carrier");
  sw_tensor_release(t);
}

static int count_files(const char* dir) {
  DIR* d = opendir(dir);
  int n = 0;
  for (struct dirent* e; d && (e = readdir(d));)
    if (e->d_name[0] != '.') ++n;
  if (d) closedir(d);
  return n;
}

/* A file carrier's creation fails before the file exists: none is left. */
static void file_carriers(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  char dir[] = "/tmp/sw_alloc_faults_XXXXXX";
  assert_non_null(mkdtemp(dir));
  sw_file_carrier_desc_t d;
  sw_file_carrier_desc_init(&d);
  d.directory = dir;
  sw_carrier_t* c = NULL;
  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_ALLOCATION, 1));
  c = SENTINEL;
  SW_FAILS(sw_carrier_create_file(rt, SW_DTYPE_F32, 256, &d, &c), SW_ERROR_OUT_OF_MEMORY, "File carrier");
  assert_ptr_equal(c, SENTINEL);
  assert_int_equal(count_files(dir), 0);
  c = NULL;
  SW_OK_(sw_carrier_create_file(rt, SW_DTYPE_F32, 256, &d, &c));
  assert_int_equal(count_files(dir), 0); /* the scratch file is unlinked at creation */
  assert_int_equal(slots(c), 256);

  /* Opening an existing file allocates nothing: the armed fault waits for
   * the next allocation. */
  char path[256];
  snprintf(path, sizeof path, "%s/weights.bin", dir);
  FILE* f = fopen(path, "wb");
  const float w[4] = {1, 2, 3, 4};
  fwrite(w, sizeof w, 1, f);
  fclose(f);
  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_ALLOCATION, 1));
  sw_carrier_t* opened = NULL;
  SW_OK_(sw_carrier_open_file(rt, SW_DTYPE_F32, path, 0, 4, NULL, &opened));
  sw_carrier_t* cpu = SENTINEL;
  SW_FAILS(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 4, &cpu), SW_ERROR_OUT_OF_MEMORY, "injected");
  assert_ptr_equal(cpu, SENTINEL);
  sw_carrier_release(opened);
  sw_carrier_release(c);
  assert_int_equal(count_files(dir), 1); /* the user's file, which is never removed */
  unlink(path);
  rmdir(dir);
}

/* The second allocation, the third: the count runs over creations. */
static void nth_creation_fails(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_ALLOCATION, 3));
  sw_carrier_t *a = NULL, *b = NULL, *c = SENTINEL, *d = NULL;
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 4, &a));
  SW_OK_(sw_carrier_create_host(rt, SW_DTYPE_F32, 4, &b));
  SW_FAILS(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 4, &c), SW_ERROR_OUT_OF_MEMORY, "injected");
  assert_ptr_equal(c, SENTINEL);
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 4, &d));
  /* Disarmed with 0: nothing fails. */
  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_ALLOCATION, 1));
  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_ALLOCATION, 0));
  c = NULL;
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 4, &c));
  sw_carrier_release(a);
  sw_carrier_release(b);
  sw_carrier_release(c);
  sw_carrier_release(d);
}

/* Argument errors win over an armed fault, which then stays armed. */
static void argument_errors_come_first(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_ALLOCATION, 1));
  sw_carrier_t* c = SENTINEL;
  SW_FAILS(sw_carrier_create_cpu(rt, (sw_dtype_t)77, 4, &c), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_carrier_create_cpu_from(rt, SW_DTYPE_F32, NULL, 4, &c), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 4, &c), SW_ERROR_OUT_OF_MEMORY, "injected");
  assert_ptr_equal(c, SENTINEL);
}

typedef struct destroy_log_t {
  int plans;
  int destroyed;
} destroy_log_t;

static sw_error_t* plan_required(void* user, const sw_tile_set_t* required, sw_residency_purpose_t purpose,
                                 sw_residency_plan_t** out) {
  (void)purpose;
  ((destroy_log_t*)user)->plans += 1;
  return sw_residency_plan_create(required, NULL, NULL, out);
}

static void count_destroy(void* user) { __atomic_add_fetch(&((destroy_log_t*)user)->destroyed, 1, __ATOMIC_SEQ_CST); }

static int destroyed(destroy_log_t* log, int expect) {
  for (int i = 0; i < 10000 && __atomic_load_n(&log->destroyed, __ATOMIC_SEQ_CST) != expect; ++i) usleep(1000);
  return __atomic_load_n(&log->destroyed, __ATOMIC_SEQ_CST);
}

/* sw_tiled_create counts once, and once per tile buffer of a full primary
 * seed: a failure at any of them claims nothing, keeps the seed's values and
 * leaves the policy the caller's (its destroy does not run). */
static void tiled_creation(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t grid[2] = {2, 2}, tile[2] = {2, 3};
  float seed[24];
  for (int i = 0; i < 24; ++i) seed[i] = (float)(i * 3 - 7);
  destroy_log_t log = {0, 0};
  sw_residency_policy_t policy;
  sw_residency_policy_init(&policy);
  policy.user_data = &log;
  policy.plan = plan_required;
  policy.destroy = count_destroy;
  /* nth 1 is the TiledEvictable itself, 2..5 its four tile buffers. */
  for (uint64_t nth = 1; nth <= 5; ++nth) {
    sw_carrier_t *primary = NULL, *secondary = NULL;
    SW_OK_(sw_carrier_create_cpu_from(rt, SW_DTYPE_F32, seed, 24, &primary));
    SW_OK_(sw_carrier_create_host(rt, SW_DTYPE_F32, 0, &secondary));
    SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_ALLOCATION, nth));
    sw_carrier_t* te = SENTINEL;
    SW_FAILS(sw_tiled_create(primary, secondary, grid, tile, 2, &policy, &te), SW_ERROR_OUT_OF_MEMORY,
             nth == 1 ? "injected allocation failure: TiledEvictable" : "injected allocation failure: tile buffer");
    assert_ptr_equal(te, SENTINEL);
    assert_false(owned(primary));
    assert_false(owned(secondary));
    assert_int_equal(slots(primary), 24);
    float got[24];
    SW_OK_(sw_carrier_read(primary, 0, 24, got));
    assert_memory_equal(got, seed, sizeof seed);
    assert_int_equal(log.destroyed, (int)nth - 1); /* only the earlier successes */
    /* Retry: the same call succeeds, with every tile primary. */
    te = NULL;
    SW_OK_(sw_tiled_create(primary, secondary, grid, tile, 2, &policy, &te));
    sw_tensor_t* full = NULL;
    SW_OK_(sw_tiled_full_tensor(te, &full));
    sw_tensor_t* sum = NULL;
    SW_OK_(sw_reduce_sum(full, NULL, 0, false, &sum));
    float total = 0;
    SW_OK_(sw_tensor_read(sum, &total, sizeof total));
    float want = 0;
    for (int i = 0; i < 24; ++i) want += seed[i];
    assert_true(total == want);
    sw_tensor_release(sum);
    sw_tensor_release(full);
    sw_carrier_release(te);
    assert_int_equal(destroyed(&log, (int)nth), (int)nth);
    sw_carrier_release(primary);
    sw_carrier_release(secondary);
  }
  /* Empty tiers: only the TiledEvictable counts. */
  sw_carrier_t *primary = NULL, *secondary = NULL;
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 0, &primary));
  SW_OK_(sw_carrier_create_host(rt, SW_DTYPE_F32, 24, &secondary));
  sw_carrier_t* te = NULL;
  FAILS_ONCE_THEN_SUCCEEDS(rt, te, sw_tiled_create(primary, secondary, grid, tile, 2, NULL, (sw_carrier_t**)&te),
                           "TiledEvictable");
  sw_carrier_release(te);
  sw_carrier_release(primary);
  sw_carrier_release(secondary);
}

/* An armed fault belongs to its runtime: another runtime in the process
 * allocates as usual, and the armed one still fails its own next allocation. */
static void faults_stay_in_their_runtime(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_runtime_t* other = NULL;
  SW_OK_(sw_runtime_create(NULL, &other));
  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_ALLOCATION, 1));
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_cpu(other, SW_DTYPE_F32, 16, &c));
  sw_carrier_release(c);
  uint64_t reached = 99, injected = 99;
  SW_OK_(sw_testing_fault_counts(other, SW_FAULT_ALLOCATION, &reached, &injected));
  assert_int_equal(injected, 0);
  c = SENTINEL;
  SW_FAILS(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 16, &c), SW_ERROR_OUT_OF_MEMORY, "injected");
  assert_ptr_equal(c, SENTINEL);
  sw_runtime_release(other);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(memory_carriers),
      cmocka_unit_test(tensors_with_a_new_carrier),
      cmocka_unit_test(file_carriers),
      cmocka_unit_test(nth_creation_fails),
      cmocka_unit_test(argument_errors_come_first),
      cmocka_unit_test(tiled_creation),
      cmocka_unit_test(faults_stay_in_their_runtime),
  };
  return cmocka_run_group_tests(tests, sw_test_runtime_setup, sw_test_runtime_teardown);
}
