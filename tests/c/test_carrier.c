/* CPU carriers: slots of one dtype, a version counter, ownership claims and
 * dispose. */
#include "sw_test.h"

static const struct {
  sw_dtype_t dtype;
  size_t size;
  const char* name;
} kDtypes[] = {
    {SW_DTYPE_F32, 4, "f32"}, {SW_DTYPE_F64, 8, "f64"}, {SW_DTYPE_F16, 2, "f16"}, {SW_DTYPE_BF16, 2, "bf16"},
    {SW_DTYPE_I32, 4, "i32"}, {SW_DTYPE_I64, 8, "i64"}, {SW_DTYPE_U8, 1, "u8"},   {SW_DTYPE_BOOL, 1, "bool"},
};
#define N_DTYPES (sizeof kDtypes / sizeof kDtypes[0])

static uint64_t version_of(const sw_carrier_t* c) {
  uint64_t v = 0xdeadbeef;
  SW_OK_(sw_carrier_version(c, &v));
  return v;
}

static size_t size_of(const sw_carrier_t* c) {
  size_t s = 0xdeadbeef;
  SW_OK_(sw_carrier_size(c, &s));
  return s;
}

static void expect_flags(const sw_carrier_t* c, bool mutable_, bool owned, bool disposed) {
  bool m = !mutable_, o = !owned, d = !disposed;
  SW_OK_(sw_carrier_is_mutable(c, &m));
  SW_OK_(sw_carrier_is_owned(c, &o));
  SW_OK_(sw_carrier_is_disposed(c, &d));
  assert_int_equal(m, mutable_);
  assert_int_equal(o, owned);
  assert_int_equal(d, disposed);
}

static sw_carrier_t* f32_carrier(sw_runtime_t* rt, const float* values, size_t n) {
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_cpu_from(rt, SW_DTYPE_F32, values, n, &c));
  assert_non_null(c);
  return c;
}

/* ---- dtypes ------------------------------------------------------------ */

static void dtype_sizes_and_names(void** state) {
  (void)state;
  for (size_t i = 0; i < N_DTYPES; ++i) {
    assert_int_equal(sw_dtype_size(kDtypes[i].dtype), kDtypes[i].size);
    assert_string_equal(sw_dtype_name(kDtypes[i].dtype), kDtypes[i].name);
  }
  /* The numbers are part of the ABI. */
  assert_int_equal(SW_DTYPE_INVALID, 0);
  assert_int_equal(SW_DTYPE_F32, 1);
  assert_int_equal(SW_DTYPE_BOOL, 8);
  assert_int_equal(SW_DTYPE_MXFP4, 13);
  assert_int_equal(SW_CARRIER_CPU, 1);
  assert_int_equal(sw_dtype_size(SW_DTYPE_INVALID), 0);
  assert_int_equal(sw_dtype_size((sw_dtype_t)14), 0);
  assert_int_equal(sw_dtype_size(SW_DTYPE_FORCE32), 0);
  assert_string_equal(sw_dtype_name(SW_DTYPE_INVALID), "invalid");
  assert_string_equal(sw_dtype_name((sw_dtype_t)14), "invalid");
}

/* ---- creation ------------------------------------------------------------ */

static void zeros_every_dtype(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  for (size_t i = 0; i < N_DTYPES; ++i) {
    sw_carrier_t* c = NULL;
    SW_OK_(sw_carrier_create_cpu(rt, kDtypes[i].dtype, 5, &c));
    assert_non_null(c);
    assert_int_equal(size_of(c), 5);
    sw_dtype_t d = SW_DTYPE_INVALID;
    SW_OK_(sw_carrier_dtype(c, &d));
    assert_int_equal(d, kDtypes[i].dtype);
    sw_carrier_kind_t k = (sw_carrier_kind_t)0;
    SW_OK_(sw_carrier_kind(c, &k));
    assert_int_equal(k, SW_CARRIER_CPU);
    assert_int_equal(version_of(c), 0);
    expect_flags(c, true, false, false);
    unsigned char raw[5 * 8];
    memset(raw, 0xab, sizeof raw);
    SW_OK_(sw_carrier_read(c, 0, 5, raw));
    for (size_t b = 0; b < 5 * kDtypes[i].size; ++b) assert_int_equal(raw[b], 0);
    for (size_t b = 5 * kDtypes[i].size; b < sizeof raw; ++b) assert_int_equal(raw[b], 0xab);
    sw_carrier_release(c);
  }
}

static void from_data_every_dtype(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  for (size_t i = 0; i < N_DTYPES; ++i) {
    const size_t n = 7, bytes = n * kDtypes[i].size;
    unsigned char src[7 * 8];
    for (size_t b = 0; b < bytes; ++b) src[b] = (unsigned char)(b * 37 + 11);
    if (kDtypes[i].dtype == SW_DTYPE_BOOL)
      for (size_t b = 0; b < bytes; ++b) src[b] &= 1;
    sw_carrier_t* c = NULL;
    SW_OK_(sw_carrier_create_cpu_from(rt, kDtypes[i].dtype, src, n, &c));
    /* The carrier holds a copy: changing the source afterwards is invisible. */
    unsigned char expect[7 * 8];
    memcpy(expect, src, bytes);
    memset(src, 0x5a, sizeof src);
    unsigned char back[7 * 8];
    memset(back, 0, sizeof back);
    SW_OK_(sw_carrier_read(c, 0, n, back));
    assert_memory_equal(back, expect, bytes);
    assert_int_equal(size_of(c), n);
    sw_dtype_t d = SW_DTYPE_INVALID;
    SW_OK_(sw_carrier_dtype(c, &d));
    assert_int_equal(d, kDtypes[i].dtype);
    assert_int_equal(version_of(c), 0);
    sw_carrier_release(c);
  }
}

static void from_data_null_needs_size_zero(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_carrier_t* c = (sw_carrier_t*)(uintptr_t)0x5151;
  SW_FAILS(sw_carrier_create_cpu_from(rt, SW_DTYPE_F32, NULL, 3, &c), SW_ERROR_VALUE, "data");
  assert_ptr_equal(c, (sw_carrier_t*)(uintptr_t)0x5151);
}

/* ---- read / write ---------------------------------------------------------- */

static void read_write_ranges(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const float init[6] = {0, 1, 2, 3, 4, 5};
  sw_carrier_t* c = f32_carrier(rt, init, 6);
  const float w[3] = {-1.5f, 2.25f, 8.0f};
  SW_OK_(sw_carrier_write(c, 2, 3, w));
  float all[6];
  SW_OK_(sw_carrier_read(c, 0, 6, all));
  const float want[6] = {0, 1, -1.5f, 2.25f, 8.0f, 5};
  assert_memory_equal(all, want, sizeof want);
  float part[2] = {0, 0};
  SW_OK_(sw_carrier_read(c, 4, 2, part));
  assert_true(part[0] == 8.0f && part[1] == 5.0f);
  /* The last slot alone, and an empty range at the very end. */
  SW_OK_(sw_carrier_read(c, 5, 1, part));
  assert_true(part[0] == 5.0f);
  SW_OK_(sw_carrier_read(c, 6, 0, part));
  SW_OK_(sw_carrier_read(c, 0, 0, NULL));
  sw_carrier_release(c);
}

static void read_out_of_bounds_is_index(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const float init[4] = {1, 2, 3, 4};
  sw_carrier_t* c = f32_carrier(rt, init, 4);
  float dst[8];
  for (int i = 0; i < 8; ++i) dst[i] = -9.0f;
  SW_FAILS(sw_carrier_read(c, 0, 5, dst), SW_ERROR_INDEX, NULL);
  SW_FAILS(sw_carrier_read(c, 3, 2, dst), SW_ERROR_INDEX, NULL);
  SW_FAILS(sw_carrier_read(c, 4, 1, dst), SW_ERROR_INDEX, NULL);
  SW_FAILS(sw_carrier_read(c, 5, 0, dst), SW_ERROR_INDEX, NULL);
  SW_FAILS(sw_carrier_read(c, SIZE_MAX, 2, dst), SW_ERROR_INDEX, NULL);
  SW_FAILS(sw_carrier_read(c, 2, SIZE_MAX, dst), SW_ERROR_INDEX, NULL); /* first + count wraps */
  SW_FAILS(sw_carrier_read(c, 1, SIZE_MAX / 4 + 1, dst), SW_ERROR_INDEX, NULL);
  for (int i = 0; i < 8; ++i) assert_true(dst[i] == -9.0f); /* nothing copied */
  assert_int_equal(version_of(c), 0);
  sw_carrier_release(c);
}

static void write_out_of_bounds_is_index(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const float init[4] = {1, 2, 3, 4};
  sw_carrier_t* c = f32_carrier(rt, init, 4);
  const float src[8] = {9, 9, 9, 9, 9, 9, 9, 9};
  SW_FAILS(sw_carrier_write(c, 0, 5, src), SW_ERROR_INDEX, NULL);
  SW_FAILS(sw_carrier_write(c, 3, 2, src), SW_ERROR_INDEX, NULL);
  SW_FAILS(sw_carrier_write(c, 4, 1, src), SW_ERROR_INDEX, NULL);
  SW_FAILS(sw_carrier_write(c, 5, 0, src), SW_ERROR_INDEX, NULL);
  SW_FAILS(sw_carrier_write(c, SIZE_MAX, 1, src), SW_ERROR_INDEX, NULL);
  SW_FAILS(sw_carrier_write(c, 2, SIZE_MAX, src), SW_ERROR_INDEX, NULL);
  /* No partial write, no version step. */
  float back[4];
  SW_OK_(sw_carrier_read(c, 0, 4, back));
  assert_memory_equal(back, init, sizeof init);
  assert_int_equal(version_of(c), 0);
  sw_carrier_release(c);
}

static void version_counts_successful_writes(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_I64, 8, &c));
  assert_int_equal(version_of(c), 0);
  const int64_t v[4] = {1, 2, 3, 4};
  SW_OK_(sw_carrier_write(c, 0, 4, v)); /* one step for several slots */
  assert_int_equal(version_of(c), 1);
  SW_OK_(sw_carrier_write(c, 7, 1, v));
  assert_int_equal(version_of(c), 2);
  SW_OK_(sw_carrier_write(c, 0, 4, v)); /* same values still count */
  assert_int_equal(version_of(c), 3);

  int64_t back[8];
  SW_OK_(sw_carrier_read(c, 0, 8, back));
  SW_OK_(sw_carrier_read(c, 3, 2, back));
  assert_int_equal(version_of(c), 3); /* reads never step */

  SW_FAILS(sw_carrier_write(c, 6, 3, v), SW_ERROR_INDEX, NULL);
  assert_int_equal(version_of(c), 3); /* failed writes never step */
  SW_FAILS(sw_carrier_write(c, 0, 1, NULL), SW_ERROR_VALUE, NULL);
  assert_int_equal(version_of(c), 3);

  SW_OK_(sw_testing_claim(c));
  SW_FAILS(sw_carrier_write(c, 0, 1, v), SW_ERROR_STATE, NULL);
  assert_int_equal(version_of(c), 3);
  SW_OK_(sw_testing_unclaim(c));
  SW_OK_(sw_carrier_write(c, 1, 1, v));
  assert_int_equal(version_of(c), 4);
  sw_carrier_release(c);
}

/* ---- dispose ------------------------------------------------------------ */

static void dispose_is_idempotent(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const float init[3] = {1, 2, 3};
  sw_carrier_t* c = f32_carrier(rt, init, 3);
  SW_OK_(sw_carrier_write(c, 0, 1, init));
  SW_OK_(sw_carrier_dispose(c));
  expect_flags(c, false, false, true);
  SW_OK_(sw_carrier_dispose(c));
  SW_OK_(sw_carrier_dispose(c));
  expect_flags(c, false, false, true);
  sw_carrier_release(c);
}

static void after_dispose(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const float init[3] = {1, 2, 3};
  sw_carrier_t* c = f32_carrier(rt, init, 3);
  SW_OK_(sw_carrier_write(c, 0, 1, init));
  SW_OK_(sw_carrier_dispose(c));

  float dst[3] = {-1, -1, -1};
  SW_FAILS(sw_carrier_read(c, 0, 3, dst), SW_ERROR_STATE, NULL);
  SW_FAILS(sw_carrier_read(c, 0, 1, dst), SW_ERROR_STATE, NULL);
  assert_true(dst[0] == -1.0f && dst[1] == -1.0f && dst[2] == -1.0f);
  SW_FAILS(sw_carrier_write(c, 0, 1, init), SW_ERROR_STATE, NULL);
  void* p = (void*)(uintptr_t)0x5151;
  SW_FAILS(sw_carrier_host_pointer(c, &p), SW_ERROR_STATE, NULL);
  assert_ptr_equal(p, (void*)(uintptr_t)0x5151);
  SW_FAILS(sw_testing_claim(c), SW_ERROR_STATE, NULL);

  /* Metadata still answers. */
  assert_int_equal(size_of(c), 3);
  sw_dtype_t d = SW_DTYPE_INVALID;
  SW_OK_(sw_carrier_dtype(c, &d));
  assert_int_equal(d, SW_DTYPE_F32);
  sw_carrier_kind_t k = (sw_carrier_kind_t)0;
  SW_OK_(sw_carrier_kind(c, &k));
  assert_int_equal(k, SW_CARRIER_CPU);
  assert_int_equal(version_of(c), 1);
  expect_flags(c, false, false, true);
  sw_carrier_release(c);
}

/* ---- claims -------------------------------------------------------------- */

static void claimed_carrier_refuses_writes_and_dispose(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const float init[4] = {1, 2, 3, 4};
  sw_carrier_t* c = f32_carrier(rt, init, 4);
  SW_OK_(sw_testing_claim(c));
  expect_flags(c, false, true, false);

  const float w[2] = {7, 8};
  SW_FAILS(sw_carrier_write(c, 0, 2, w), SW_ERROR_STATE, NULL);
  SW_FAILS(sw_carrier_dispose(c), SW_ERROR_STATE, NULL);
  expect_flags(c, false, true, false); /* the failed dispose changed nothing */
  SW_FAILS(sw_testing_claim(c), SW_ERROR_STATE, NULL);

  /* Reads are still allowed; values and version are unchanged. */
  float back[4];
  SW_OK_(sw_carrier_read(c, 0, 4, back));
  assert_memory_equal(back, init, sizeof init);
  assert_int_equal(version_of(c), 0);

  SW_OK_(sw_testing_unclaim(c));
  expect_flags(c, true, false, false);
  SW_FAILS(sw_testing_unclaim(c), SW_ERROR_STATE, NULL);
  SW_OK_(sw_carrier_write(c, 0, 2, w));
  assert_int_equal(version_of(c), 1);
  SW_OK_(sw_carrier_read(c, 0, 4, back));
  assert_true(back[0] == 7.0f && back[1] == 8.0f && back[2] == 3.0f);

  /* A second claim after an unclaim works, and dispose after unclaim. */
  SW_OK_(sw_testing_claim(c));
  SW_OK_(sw_testing_unclaim(c));
  SW_OK_(sw_carrier_dispose(c));
  expect_flags(c, false, false, true);
  sw_carrier_release(c);
}

static void unclaim_without_claim_is_state(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_U8, 2, &c));
  SW_FAILS(sw_testing_unclaim(c), SW_ERROR_STATE, NULL);
  expect_flags(c, true, false, false);
  sw_carrier_release(c);
}

/* ---- host pointer -------------------------------------------------------- */

static void host_pointer(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const double init[4] = {1.5, 2.5, 3.5, 4.5};
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_cpu_from(rt, SW_DTYPE_F64, init, 4, &c));
  void* p = NULL;
  SW_OK_(sw_carrier_host_pointer(c, &p));
  assert_non_null(p);
  assert_int_equal((uintptr_t)p % sizeof(double), 0);
  double* d = (double*)p;
  assert_true(d[0] == 1.5 && d[3] == 4.5); /* slot 0 onwards */

  /* Public writes are visible through the pointer. */
  const double w = -7.0;
  SW_OK_(sw_carrier_write(c, 2, 1, &w));
  assert_true(d[2] == -7.0);
  assert_int_equal(version_of(c), 1);

  /* Writes through the pointer are visible to reads but bypass the version. */
  d[1] = 42.0;
  double back[4];
  SW_OK_(sw_carrier_read(c, 0, 4, back));
  assert_true(back[1] == 42.0);
  assert_int_equal(version_of(c), 1);

  /* The pointer is stable. */
  void* q = NULL;
  SW_OK_(sw_carrier_host_pointer(c, &q));
  assert_ptr_equal(p, q);
  sw_carrier_release(c);
}

/* Buffers from 1 MiB on start on a 2 MiB boundary, where the system can
 * back them with huge pages: a 1.55 MiB Q4_K expert tile (1024 x 2816) as
 * well as a 5.5 MiB bf16 one. Smaller ones on a page or on 64 bytes; every
 * byte reads back as zero and takes a write at its end. */
static void large_buffers_start_on_huge_pages(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const struct {
    size_t bytes;
    uintptr_t alignment;
  } cases[] = {{1000, 64}, {65536, 4096}, {(size_t)1 << 20, (uintptr_t)2 << 20},
               {1622016, (uintptr_t)2 << 20}, {5767168, (uintptr_t)2 << 20}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    sw_carrier_t* c = NULL;
    SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_U8, cases[i].bytes, &c));
    void* p = NULL;
    SW_OK_(sw_carrier_host_pointer(c, &p));
    assert_int_equal((uintptr_t)p % cases[i].alignment, 0);
    const unsigned char* b = (const unsigned char*)p;
    assert_int_equal(b[0], 0);
    assert_int_equal(b[cases[i].bytes - 1], 0);
    const uint8_t last = 7;
    SW_OK_(sw_carrier_write(c, cases[i].bytes - 1, 1, &last));
    assert_int_equal(b[cases[i].bytes - 1], 7);
    sw_carrier_release(c);
  }
}

/* ---- size 0 ------------------------------------------------------------- */

static void size_zero_carriers(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_carrier_t* a = NULL;
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 0, &a));
  sw_carrier_t* b = NULL;
  SW_OK_(sw_carrier_create_cpu_from(rt, SW_DTYPE_I32, NULL, 0, &b));
  const int32_t dummy = 5;
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_cpu_from(rt, SW_DTYPE_BOOL, &dummy, 0, &c));
  sw_carrier_t* all[3] = {a, b, c};
  for (int i = 0; i < 3; ++i) {
    assert_int_equal(size_of(all[i]), 0);
    assert_int_equal(version_of(all[i]), 0);
    expect_flags(all[i], true, false, false);
    SW_OK_(sw_carrier_read(all[i], 0, 0, NULL));
    int64_t buf = 0x1122334455667788;
    SW_FAILS(sw_carrier_read(all[i], 0, 1, &buf), SW_ERROR_INDEX, NULL);
    assert_true(buf == 0x1122334455667788);
    SW_FAILS(sw_carrier_write(all[i], 0, 1, &buf), SW_ERROR_INDEX, NULL);
    SW_FAILS(sw_carrier_read(all[i], 1, 0, NULL), SW_ERROR_INDEX, NULL);
    void* p = NULL;
    SW_OK_(sw_carrier_host_pointer(all[i], &p));
    SW_OK_(sw_carrier_dispose(all[i]));
    expect_flags(all[i], false, false, true);
    assert_int_equal(size_of(all[i]), 0);
    sw_carrier_release(all[i]);
  }
}

static void retain_release_carrier(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const float init[2] = {3, 4};
  sw_carrier_t* c = f32_carrier(rt, init, 2);
  sw_carrier_retain(c);
  sw_carrier_release(c);
  float back[2];
  SW_OK_(sw_carrier_read(c, 0, 2, back));
  assert_true(back[0] == 3.0f && back[1] == 4.0f);
  sw_carrier_release(c);
  sw_carrier_retain(NULL);
  sw_carrier_release(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(dtype_sizes_and_names),
      cmocka_unit_test(zeros_every_dtype),
      cmocka_unit_test(from_data_every_dtype),
      cmocka_unit_test(from_data_null_needs_size_zero),
      cmocka_unit_test(read_write_ranges),
      cmocka_unit_test(read_out_of_bounds_is_index),
      cmocka_unit_test(write_out_of_bounds_is_index),
      cmocka_unit_test(version_counts_successful_writes),
      cmocka_unit_test(dispose_is_idempotent),
      cmocka_unit_test(after_dispose),
      cmocka_unit_test(claimed_carrier_refuses_writes_and_dispose),
      cmocka_unit_test(unclaim_without_claim_is_state),
      cmocka_unit_test(host_pointer),
      cmocka_unit_test(large_buffers_start_on_huge_pages),
      cmocka_unit_test(size_zero_carriers),
      cmocka_unit_test(retain_release_carrier),
  };
  return cmocka_run_group_tests(tests, sw_test_runtime_setup, sw_test_runtime_teardown);
}
