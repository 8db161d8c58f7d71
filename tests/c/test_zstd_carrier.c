/* Zstd carriers: values held compressed, one checksummed frame per
 * frame_elements chunk, byte shuffle for float dtypes; partial-frame reads and
 * writes, corrupt frames and injected decompression faults reported as
 * DATA_CORRUPT, failed writes changing nothing, and asynchronous transfers
 * through sw_move_async. */
#include <pthread.h>

#include "sw_test.h"

static const sw_dtype_t kDtypes[] = {SW_DTYPE_F32, SW_DTYPE_F64, SW_DTYPE_F16, SW_DTYPE_BF16,
                                     SW_DTYPE_I32, SW_DTYPE_I64, SW_DTYPE_U8,  SW_DTYPE_BOOL};
#define N_DTYPES (sizeof kDtypes / sizeof kDtypes[0])

/* ---- helpers -------------------------------------------------------------- */

/* `count` elements of `dtype` at `out`: valid bools, random bytes otherwise. */
static void fill_random(sw_dtype_t dtype, void* out, size_t count, uint64_t seed) {
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  unsigned char* p = (unsigned char*)out;
  const size_t bytes = count * sw_dtype_size(dtype);
  for (size_t i = 0; i < bytes; ++i) p[i] = (unsigned char)(sw_test_random(&s) >> 24);
  if (dtype == SW_DTYPE_BOOL)
    for (size_t i = 0; i < count; ++i) p[i] &= 1;
}

/* Smooth f32 values that compress well: a slow ramp of small integers. */
static float* smooth_f32(size_t n) {
  float* v = (float*)malloc(n * sizeof(float));
  for (size_t i = 0; i < n; ++i) v[i] = (float)(i / 64 % 100);
  return v;
}

static sw_carrier_t* make_zstd(sw_runtime_t* rt, sw_dtype_t dtype, size_t size, size_t frame_elements,
                               int32_t shuffle) {
  sw_zstd_carrier_desc_t desc;
  sw_zstd_carrier_desc_init(&desc);
  desc.frame_elements = frame_elements;
  desc.shuffle = shuffle;
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_zstd(rt, dtype, size, &desc, &c));
  assert_non_null(c);
  return c;
}

static uint64_t version_of(const sw_carrier_t* c) {
  uint64_t v = 0xdeadbeef;
  SW_OK_(sw_carrier_version(c, &v));
  return v;
}

static uint64_t stored_of(const sw_carrier_t* c) {
  uint64_t b = 0xdeadbeef;
  SW_OK_(sw_carrier_stored_bytes(c, &b));
  return b;
}

static size_t size_of(const sw_carrier_t* c) {
  size_t s = 0xdeadbeef;
  SW_OK_(sw_carrier_size(c, &s));
  return s;
}

/* Asserts that the whole carrier reads back as `expected`. */
static void expect_contents(const sw_carrier_t* c, sw_dtype_t dtype, const void* expected, size_t n) {
  const size_t es = sw_dtype_size(dtype);
  void* got = malloc(n * es + 1);
  SW_OK_(sw_carrier_read(c, 0, n, got));
  assert_memory_equal(got, expected, n * es);
  free(got);
}

static sw_tensor_t* dense_tensor(sw_carrier_t* c, int64_t offset, int64_t n) {
  sw_layout_t* l = NULL;
  SW_OK_(sw_layout_dense(&n, 1, &l));
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_create(c, offset, l, &t));
  sw_layout_release(l);
  return t;
}

/* Moves `t` into `destination` and waits; returns the await's error. */
static sw_error_t* move_and_wait(sw_tensor_t* t, sw_carrier_t* destination, sw_tensor_t** out_result) {
  sw_await_t* a = NULL;
  sw_error_t* e = sw_move_async(t, destination, &a);
  if (e) return e;
  e = sw_await_wait(a, -1);
  if (!e && out_result) SW_OK_(sw_await_result(a, out_result));
  sw_await_release(a);
  return e;
}

/* Each test gets its own runtime, so an armed fault never leaks. */
static int setup(void** state) { return sw_test_runtime_setup(state); }
static int teardown(void** state) { return sw_test_runtime_teardown(state); }

/* ---- creation and validation ----------------------------------------------- */

static void desc_defaults(void** state) {
  (void)state;
  sw_zstd_carrier_desc_t d;
  memset(&d, 0x5a, sizeof d);
  sw_zstd_carrier_desc_init(&d);
  assert_int_equal(d.struct_size, sizeof(sw_zstd_carrier_desc_t));
  assert_int_equal(d.level, 1);
  assert_int_equal(d.frame_elements, 0);
  assert_int_equal(d.shuffle, -1);
  sw_zstd_carrier_desc_init(NULL); /* harmless */
}

static void create_zero_filled_every_dtype(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  for (size_t i = 0; i < N_DTYPES; ++i) {
    sw_carrier_t* c = NULL;
    SW_OK_(sw_carrier_create_zstd(rt, kDtypes[i], 2500, NULL, &c)); /* NULL desc: defaults */
    sw_carrier_kind_t k = (sw_carrier_kind_t)0;
    SW_OK_(sw_carrier_kind(c, &k));
    assert_int_equal(k, SW_CARRIER_ZSTD);
    sw_dtype_t d = SW_DTYPE_INVALID;
    SW_OK_(sw_carrier_dtype(c, &d));
    assert_int_equal(d, kDtypes[i]);
    assert_int_equal(size_of(c), 2500);
    assert_int_equal(version_of(c), 0);
    const size_t es = sw_dtype_size(kDtypes[i]);
    unsigned char* zeros = (unsigned char*)calloc(2500, es);
    expect_contents(c, kDtypes[i], zeros, 2500);
    free(zeros);
    sw_carrier_release(c);
  }
}

static void create_validates_arguments(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_zstd_carrier_desc_t d;
  sw_zstd_carrier_desc_init(&d);
  sw_carrier_t* c = (sw_carrier_t*)0x1;
  SW_FAILS(sw_carrier_create_zstd(NULL, SW_DTYPE_F32, 10, &d, &c), SW_ERROR_TYPE, "runtime");
  SW_FAILS(sw_carrier_create_zstd(rt, SW_DTYPE_INVALID, 10, &d, &c), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_carrier_create_zstd(rt, (sw_dtype_t)42, 10, &d, &c), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_carrier_create_zstd(rt, SW_DTYPE_F32, 10, &d, NULL), SW_ERROR_VALUE, "out_carrier");

  d.struct_size = 3;
  SW_FAILS(sw_carrier_create_zstd(rt, SW_DTYPE_F32, 10, &d, &c), SW_ERROR_VALUE, "struct_size");
  sw_zstd_carrier_desc_init(&d);
  d.level = 1000;
  SW_FAILS(sw_carrier_create_zstd(rt, SW_DTYPE_F32, 10, &d, &c), SW_ERROR_VALUE, "level");
  d.level = -1000000000;
  SW_FAILS(sw_carrier_create_zstd(rt, SW_DTYPE_F32, 10, &d, &c), SW_ERROR_VALUE, "level");
  sw_zstd_carrier_desc_init(&d);
  d.shuffle = 2;
  SW_FAILS(sw_carrier_create_zstd(rt, SW_DTYPE_F32, 10, &d, &c), SW_ERROR_VALUE, "shuffle");
  d.shuffle = -2;
  SW_FAILS(sw_carrier_create_zstd(rt, SW_DTYPE_F32, 10, &d, &c), SW_ERROR_VALUE, "shuffle");
  SW_FAILS(sw_carrier_create_zstd(rt, SW_DTYPE_F64, SIZE_MAX / 4, NULL, &c), SW_ERROR_VALUE, "overflow");
  assert_ptr_equal(c, (sw_carrier_t*)0x1); /* failures write nothing */

  /* Levels at both ends of zstd's range are accepted; negative levels are fast modes. */
  const int32_t levels[] = {-5, 0, 3, 19};
  for (size_t i = 0; i < sizeof levels / sizeof levels[0]; ++i) {
    sw_zstd_carrier_desc_init(&d);
    d.level = levels[i];
    d.frame_elements = 100;
    sw_carrier_t* ok = NULL;
    SW_OK_(sw_carrier_create_zstd(rt, SW_DTYPE_F32, 250, &d, &ok));
    float v[250];
    for (int j = 0; j < 250; ++j) v[j] = (float)j * 0.5f;
    SW_OK_(sw_carrier_write(ok, 0, 250, v));
    expect_contents(ok, SW_DTYPE_F32, v, 250);
    sw_carrier_release(ok);
  }
}

/* ---- round trips --------------------------------------------------------- */

/* Writes random values at odd offsets and sizes spanning several 1000-element
 * frames and checks every read against a plain model of the carrier. */
static void round_trip_one(sw_runtime_t* rt, sw_dtype_t dtype, int32_t shuffle) {
  const size_t n = 5317, fe = 1000, es = sw_dtype_size(dtype);
  sw_carrier_t* c = make_zstd(rt, dtype, n, fe, shuffle);
  unsigned char* model = (unsigned char*)calloc(n, es);
  unsigned char* buf = (unsigned char*)malloc(n * es);
  const struct {
    size_t first, count;
  } writes[] = {
      {0, 5317},   /* whole carrier, last frame short */
      {17, 2345},  /* partial first and last frames */
      {999, 2},    /* straddles a frame boundary */
      {3000, 1000},/* exactly one frame */
      {5316, 1},   /* last element */
      {1234, 0},   /* nothing */
      {4001, 1316},/* to the end */
  };
  uint64_t expected_version = 0;
  for (size_t w = 0; w < sizeof writes / sizeof writes[0]; ++w) {
    fill_random(dtype, buf, writes[w].count, w + 100 * (uint64_t)dtype);
    SW_OK_(sw_carrier_write(c, writes[w].first, writes[w].count, writes[w].count ? buf : NULL));
    memcpy(model + writes[w].first * es, buf, writes[w].count * es);
    assert_int_equal(version_of(c), ++expected_version);
    expect_contents(c, dtype, model, n);
  }
  const size_t reads[][2] = {{0, 1}, {1, 998}, {999, 1002}, {2500, 2817}, {5316, 1}, {3, 0}, {4000, 1000}};
  for (size_t r = 0; r < sizeof reads / sizeof reads[0]; ++r) {
    memset(buf, 0xcd, n * es);
    SW_OK_(sw_carrier_read(c, reads[r][0], reads[r][1], buf));
    assert_memory_equal(buf, model + reads[r][0] * es, reads[r][1] * es);
  }
  assert_int_equal(version_of(c), expected_version); /* reads step nothing */
  SW_FAILS(sw_carrier_read(c, 5000, 318, buf), SW_ERROR_INDEX, NULL);
  SW_FAILS(sw_carrier_write(c, 5317, 1, buf), SW_ERROR_INDEX, NULL);
  assert_int_equal(version_of(c), expected_version);
  free(buf);
  free(model);
  sw_carrier_release(c);
}

static void round_trips_every_dtype_and_shuffle_mode(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  for (size_t i = 0; i < N_DTYPES; ++i)
    for (int32_t shuffle = -1; shuffle <= 1; ++shuffle) round_trip_one(rt, kDtypes[i], shuffle);
}

static void frame_sizes_at_the_edges(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  /* One element per frame, a frame larger than the carrier, and the default. */
  const size_t frame_elements[] = {1, 7, 100000, 0};
  for (size_t i = 0; i < sizeof frame_elements / sizeof frame_elements[0]; ++i) {
    sw_carrier_t* c = make_zstd(rt, SW_DTYPE_F64, 61, frame_elements[i], -1);
    double v[61];
    for (int j = 0; j < 61; ++j) v[j] = j * 1.25 - 7;
    SW_OK_(sw_carrier_write(c, 0, 61, v));
    double w[5] = {-1, -2, -3, -4, -5};
    SW_OK_(sw_carrier_write(c, 13, 5, w));
    memcpy(v + 13, w, sizeof w);
    expect_contents(c, SW_DTYPE_F64, v, 61);
    sw_carrier_release(c);
  }
}

static void shuffle_modes_hold_identical_values(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const size_t n = 20000;
  float* v = (float*)malloc(n * sizeof(float));
  uint64_t s = 7;
  /* Weight-like values: a narrow spread around zero. */
  for (size_t i = 0; i < n; ++i) v[i] = ((float)(sw_test_random(&s) % 20001) - 10000.0f) * 1e-6f;
  sw_carrier_t* c[3];
  uint64_t stored[3];
  for (int m = 0; m < 3; ++m) {
    c[m] = make_zstd(rt, SW_DTYPE_F32, n, 4096, m - 1);
    SW_OK_(sw_carrier_write(c[m], 0, n, v));
    expect_contents(c[m], SW_DTYPE_F32, v, n);
    stored[m] = stored_of(c[m]);
  }
  /* auto is on for f32: the same frames as explicit on, and smaller than off. */
  assert_int_equal(stored[0], stored[2]);
  assert_true(stored[2] < stored[1]);
  for (int m = 0; m < 3; ++m) sw_carrier_release(c[m]);

  /* auto is off for integers: the same frames as explicit off. */
  int32_t* iv = (int32_t*)malloc(n * sizeof(int32_t));
  for (size_t i = 0; i < n; ++i) iv[i] = (int32_t)(i * 7919 % 100003);
  for (int m = 0; m < 3; ++m) {
    c[m] = make_zstd(rt, SW_DTYPE_I32, n, 4096, m - 1);
    SW_OK_(sw_carrier_write(c[m], 0, n, iv));
    expect_contents(c[m], SW_DTYPE_I32, iv, n);
    stored[m] = stored_of(c[m]);
  }
  assert_int_equal(stored[0], stored[1]);
  for (int m = 0; m < 3; ++m) sw_carrier_release(c[m]);
  free(iv);
  free(v);
}

/* Reads of several MiB take the streaming-store path: every destination
 * alignment, element-aligned or not, must give the same bytes. */
static void large_reads_at_any_alignment(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const sw_dtype_t dtypes[] = {SW_DTYPE_F32, SW_DTYPE_BF16, SW_DTYPE_F64};
  for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; ++d) {
    const size_t es = sw_dtype_size(dtypes[d]), n = ((size_t)10 << 20) / es + 3;
    sw_carrier_t* c = make_zstd(rt, dtypes[d], n, 0, -1);
    unsigned char* v = (unsigned char*)malloc(n * es);
    fill_random(dtypes[d], v, n, 77 + d);
    SW_OK_(sw_carrier_write(c, 0, n, v));
    unsigned char* raw = (unsigned char*)malloc(n * es + 64);
    const size_t offsets[] = {0, 1, es, 16 + es, 48};
    for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; ++o) {
      memset(raw, 0xee, n * es + 64);
      SW_OK_(sw_carrier_read(c, 0, n, raw + offsets[o]));
      assert_memory_equal(raw + offsets[o], v, n * es);
      memset(raw, 0xee, n * es + 64);
      SW_OK_(sw_carrier_read(c, 5, n - 7, raw + offsets[o]));
      assert_memory_equal(raw + offsets[o], v + 5 * es, (n - 7) * es);
      /* Nothing written outside the range. */
      if (offsets[o]) assert_int_equal(raw[offsets[o] - 1], 0xee);
      assert_int_equal(raw[offsets[o] + (n - 7) * es], 0xee);
    }
    free(raw);
    free(v);
    sw_carrier_release(c);
  }
}

/* ---- compression --------------------------------------------------------- */

static void compression_happens(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const size_t n = (size_t)1 << 20; /* 4 MiB of f32 */
  sw_carrier_t* c = make_zstd(rt, SW_DTYPE_F32, n, 1 << 16, -1);
  const uint64_t zero_bytes = stored_of(c);
  assert_true(zero_bytes > 0);
  assert_true(zero_bytes < n * 4 / 1000);

  float* v = smooth_f32(n);
  SW_OK_(sw_carrier_write(c, 0, n, v));
  const uint64_t smooth_bytes = stored_of(c);
  assert_true(smooth_bytes < n * 4 / 10);
  assert_true(smooth_bytes > zero_bytes);
  expect_contents(c, SW_DTYPE_F32, v, n);

  /* Random bytes do not compress: zstd stores them raw, barely larger. */
  fill_random(SW_DTYPE_F32, v, n, 3);
  SW_OK_(sw_carrier_write(c, 0, n, v));
  assert_true(stored_of(c) > n * 4 * 9 / 10);
  assert_true(stored_of(c) < n * 4 * 11 / 10);
  free(v);

  /* Disposed storage occupies nothing. */
  SW_OK_(sw_carrier_dispose(c));
  assert_int_equal(stored_of(c), 0);
  sw_carrier_release(c);
}

/* ---- versions, dispose, empty carriers ----------------------------------- */

static void versions_dispose_and_empty(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_carrier_t* c = make_zstd(rt, SW_DTYPE_I64, 3000, 1000, -1);
  int64_t v[3] = {1, -2, 3};
  assert_int_equal(version_of(c), 0);
  SW_OK_(sw_carrier_write(c, 998, 3, v));
  assert_int_equal(version_of(c), 1);
  SW_OK_(sw_carrier_write(c, 0, 0, NULL));
  assert_int_equal(version_of(c), 2);
  int64_t back[3];
  SW_OK_(sw_carrier_read(c, 998, 3, back));
  assert_memory_equal(back, v, sizeof v);
  assert_int_equal(version_of(c), 2);

  SW_OK_(sw_testing_claim(c));
  SW_FAILS(sw_carrier_write(c, 0, 3, v), SW_ERROR_STATE, "owned");
  SW_OK_(sw_carrier_read(c, 998, 3, back)); /* reads stay allowed */
  SW_OK_(sw_testing_unclaim(c));
  assert_int_equal(version_of(c), 2);

  SW_OK_(sw_carrier_dispose(c));
  SW_OK_(sw_carrier_dispose(c));
  SW_FAILS(sw_carrier_read(c, 0, 3, back), SW_ERROR_STATE, NULL);
  SW_FAILS(sw_carrier_write(c, 0, 3, v), SW_ERROR_STATE, NULL);
  SW_FAILS(sw_testing_corrupt_frame(c, 0), SW_ERROR_STATE, NULL);
  assert_int_equal(size_of(c), 3000);
  sw_carrier_release(c);

  sw_carrier_t* e = make_zstd(rt, SW_DTYPE_F32, 0, 0, -1);
  assert_int_equal(size_of(e), 0);
  assert_int_equal(stored_of(e), 0);
  SW_OK_(sw_carrier_read(e, 0, 0, NULL));
  SW_FAILS(sw_carrier_read(e, 0, 1, back), SW_ERROR_INDEX, NULL);
  SW_FAILS(sw_testing_corrupt_frame(e, 0), SW_ERROR_INDEX, NULL);
  sw_carrier_release(e);
}

/* ---- corruption and injected faults -------------------------------------- */

static void corrupt_frame_reads_as_data_corrupt(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const size_t n = 4500, fe = 1000;
  for (int32_t shuffle = 0; shuffle <= 1; ++shuffle) {
    sw_carrier_t* c = make_zstd(rt, SW_DTYPE_F32, n, fe, shuffle);
    float* v = (float*)malloc(n * sizeof(float));
    fill_random(SW_DTYPE_F32, v, n, 11);
    for (size_t i = 0; i < 2000; ++i) v[i] = (float)(i % 13); /* frames 0, 1 compress */
    SW_OK_(sw_carrier_write(c, 0, n, v));
    const uint64_t version = version_of(c);

    SW_OK_(sw_testing_corrupt_frame(c, 1));
    SW_OK_(sw_testing_corrupt_frame(c, 3)); /* a frame zstd stored raw */
    float* out = (float*)malloc(n * sizeof(float));
    SW_FAILS(sw_carrier_read(c, 0, n, out), SW_ERROR_DATA_CORRUPT, "frame 1");
    SW_FAILS(sw_carrier_read(c, 1500, 1, out), SW_ERROR_DATA_CORRUPT, "frame 1");
    SW_FAILS(sw_carrier_read(c, 3999, 2, out), SW_ERROR_DATA_CORRUPT, "frame 3");
    /* The other frames still read exactly. */
    SW_OK_(sw_carrier_read(c, 0, 1000, out));
    assert_memory_equal(out, v, 1000 * sizeof(float));
    SW_OK_(sw_carrier_read(c, 2000, 1000, out));
    assert_memory_equal(out, v + 2000, 1000 * sizeof(float));
    SW_OK_(sw_carrier_read(c, 4000, 500, out));
    assert_memory_equal(out, v + 4000, 500 * sizeof(float));
    /* Patching part of a corrupt frame must decompress it: it fails. */
    SW_FAILS(sw_carrier_write(c, 1990, 20, v + 1990), SW_ERROR_DATA_CORRUPT, "frame 1");
    assert_int_equal(version_of(c), version);
    /* Overwriting a whole frame replaces it without reading it. */
    SW_OK_(sw_carrier_write(c, 1000, 1000, v + 1000));
    SW_OK_(sw_carrier_read(c, 1000, 1000, out));
    assert_memory_equal(out, v + 1000, 1000 * sizeof(float));
    SW_FAILS(sw_carrier_read(c, 3000, 1000, out), SW_ERROR_DATA_CORRUPT, "frame 3");
    free(out);
    free(v);
    sw_carrier_release(c);
  }
}

static void corrupting_a_shared_zero_frame_breaks_only_that_frame(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_carrier_t* c = make_zstd(rt, SW_DTYPE_BF16, 5000, 1000, -1);
  SW_OK_(sw_testing_corrupt_frame(c, 2));
  uint16_t* out = (uint16_t*)malloc(5000 * 2);
  SW_FAILS(sw_carrier_read(c, 2000, 1000, out), SW_ERROR_DATA_CORRUPT, "frame 2");
  memset(out, 0xff, 5000 * 2);
  SW_OK_(sw_carrier_read(c, 0, 2000, out));
  SW_OK_(sw_carrier_read(c, 3000, 2000, out + 3000));
  for (size_t i = 0; i < 5000; ++i)
    if (i < 2000 || i >= 3000) assert_int_equal(out[i], 0);
  free(out);
  sw_carrier_release(c);
}

static void corrupt_frame_arguments(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_carrier_t* c = make_zstd(rt, SW_DTYPE_F32, 2001, 1000, -1);
  SW_FAILS(sw_testing_corrupt_frame(c, 3), SW_ERROR_INDEX, "frame 3");
  SW_FAILS(sw_testing_corrupt_frame(c, SIZE_MAX), SW_ERROR_INDEX, NULL);
  SW_OK_(sw_testing_corrupt_frame(c, 2)); /* the short last frame */
  SW_FAILS(sw_testing_corrupt_frame(NULL, 0), SW_ERROR_TYPE, NULL);
  sw_carrier_t* cpu = NULL;
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 10, &cpu));
  SW_FAILS(sw_testing_corrupt_frame(cpu, 0), SW_ERROR_UNSUPPORTED, NULL);
  sw_carrier_release(cpu);
  sw_carrier_release(c);
}

static void injected_decompression_fault_then_retry(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const size_t n = 3500;
  sw_carrier_t* c = make_zstd(rt, SW_DTYPE_F32, n, 1000, -1);
  float* v = smooth_f32(n);
  SW_OK_(sw_carrier_write(c, 0, n, v));
  float* out = (float*)malloc(n * sizeof(float));
  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_DECOMPRESS, 3));
  SW_FAILS(sw_carrier_read(c, 0, n, out), SW_ERROR_DATA_CORRUPT, "zstd frame 2");
  /* One-shot: the retry succeeds with exact values. */
  memset(out, 0, n * sizeof(float));
  SW_OK_(sw_carrier_read(c, 0, n, out));
  assert_memory_equal(out, v, n * sizeof(float));
  /* Disarmed faults do not fire. */
  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_DECOMPRESS, 1));
  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_DECOMPRESS, 0));
  SW_OK_(sw_carrier_read(c, 0, n, out));
  free(out);
  free(v);
  sw_carrier_release(c);
}

static void failed_write_changes_nothing(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const size_t n = 5000;
  sw_carrier_t* c = make_zstd(rt, SW_DTYPE_F64, n, 1000, -1);
  double* v = (double*)malloc(n * sizeof(double));
  for (size_t i = 0; i < n; ++i) v[i] = (double)i / 3.0;
  SW_OK_(sw_carrier_write(c, 0, n, v));
  const uint64_t version = version_of(c), stored = stored_of(c);

  /* Slots [1500, 3700): frame 1 partial, frame 2 whole, frame 3 partial. The
   * second decompression (frame 3) fails after frames 1 and 2 were rebuilt. */
  double* w = (double*)malloc(2200 * sizeof(double));
  for (size_t i = 0; i < 2200; ++i) w[i] = -1.0 - (double)i;
  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_DECOMPRESS, 2));
  SW_FAILS(sw_carrier_write(c, 1500, 2200, w), SW_ERROR_DATA_CORRUPT, "zstd frame 3");
  assert_int_equal(version_of(c), version);
  assert_int_equal(stored_of(c), stored);
  expect_contents(c, SW_DTYPE_F64, v, n);

  /* The same write then succeeds. */
  SW_OK_(sw_carrier_write(c, 1500, 2200, w));
  memcpy(v + 1500, w, 2200 * sizeof(double));
  assert_int_equal(version_of(c), version + 1);
  expect_contents(c, SW_DTYPE_F64, v, n);
  free(w);
  free(v);
  sw_carrier_release(c);
}

/* ---- threads ------------------------------------------------------------- */

typedef struct {
  const sw_carrier_t* carrier;
  const float* model;
  size_t n;
  uint64_t seed;
  int failures;
} reader_t;

static void* reader_main(void* arg) {
  reader_t* r = (reader_t*)arg;
  float* buf = (float*)malloc(r->n * sizeof(float));
  for (int k = 0; k < 60; ++k) {
    const size_t first = sw_test_random(&r->seed) % r->n;
    const size_t count = sw_test_random(&r->seed) % (r->n - first) + 1;
    sw_error_t* e = sw_carrier_read(r->carrier, first, count, buf);
    if (e || memcmp(buf, r->model + first, count * sizeof(float)) != 0) ++r->failures;
    sw_error_free(e);
  }
  free(buf);
  return NULL;
}

static void concurrent_reads(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const size_t n = 20000;
  sw_carrier_t* c = make_zstd(rt, SW_DTYPE_F32, n, 1500, -1);
  float* v = smooth_f32(n);
  for (size_t i = 0; i < n; i += 7) v[i] = (float)i * 0.125f;
  SW_OK_(sw_carrier_write(c, 0, n, v));
  pthread_t threads[4];
  reader_t readers[4];
  for (int t = 0; t < 4; ++t) {
    readers[t] = (reader_t){c, v, n, (uint64_t)t + 1, 0};
    assert_int_equal(pthread_create(&threads[t], NULL, reader_main, &readers[t]), 0);
  }
  for (int t = 0; t < 4; ++t) {
    pthread_join(threads[t], NULL);
    assert_int_equal(readers[t].failures, 0);
  }
  free(v);
  sw_carrier_release(c);
}

/* ---- asynchronous transfers (sw_move_async) ------------------------------ */

static void move_cpu_to_zstd_to_cpu_every_dtype(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const size_t n = 10007;
  for (size_t i = 0; i < N_DTYPES; ++i) {
    const sw_dtype_t dtype = kDtypes[i];
    const size_t es = sw_dtype_size(dtype);
    unsigned char* v = (unsigned char*)malloc(n * es);
    fill_random(dtype, v, n, 40 + i);
    sw_carrier_t* cpu = NULL;
    SW_OK_(sw_carrier_create_cpu_from(rt, dtype, v, n, &cpu));
    sw_tensor_t* t = dense_tensor(cpu, 0, (int64_t)n);

    /* Into an empty zstd carrier, which is allocated to fit. */
    sw_carrier_t* z = make_zstd(rt, dtype, 0, 1000, -1);
    sw_tensor_t* on_zstd = NULL;
    SW_OK_(move_and_wait(t, z, &on_zstd));
    assert_int_equal(size_of(z), n);
    assert_int_equal(version_of(z), 1);
    bool disposed = false;
    SW_OK_(sw_carrier_is_disposed(cpu, &disposed));
    assert_true(disposed);
    expect_contents(z, dtype, v, n);

    /* And back into an empty CPU carrier. */
    sw_carrier_t* back = NULL;
    SW_OK_(sw_carrier_create_cpu(rt, dtype, 0, &back));
    sw_tensor_t* on_cpu = NULL;
    SW_OK_(move_and_wait(on_zstd, back, &on_cpu));
    unsigned char* got = (unsigned char*)malloc(n * es);
    SW_OK_(sw_tensor_read(on_cpu, got, n * es));
    assert_memory_equal(got, v, n * es);
    SW_OK_(sw_carrier_is_disposed(z, &disposed));
    assert_true(disposed);
    assert_int_equal(stored_of(z), 0);

    free(got);
    sw_tensor_release(on_cpu);
    sw_tensor_release(on_zstd);
    sw_tensor_release(t);
    sw_carrier_release(back);
    sw_carrier_release(z);
    sw_carrier_release(cpu);
    free(v);
  }
}

/* A move into a larger zstd carrier rewrites slots [0, n) and keeps the rest:
 * its last frame is patched, not replaced. */
static void move_into_part_of_a_zstd_carrier(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const size_t n = 2500, size = 3800;
  sw_carrier_t* z = make_zstd(rt, SW_DTYPE_F32, size, 1000, -1);
  float* model = (float*)malloc(size * sizeof(float));
  for (size_t i = 0; i < size; ++i) model[i] = 1000.0f + (float)i;
  SW_OK_(sw_carrier_write(z, 0, size, model));
  for (size_t i = 0; i < n; ++i) model[i] = -(float)i;
  sw_carrier_t* cpu = NULL;
  SW_OK_(sw_carrier_create_cpu_from(rt, SW_DTYPE_F32, model, n, &cpu));
  sw_tensor_t* t = dense_tensor(cpu, 0, (int64_t)n);
  sw_tensor_t* r = NULL;
  SW_OK_(move_and_wait(t, z, &r));
  assert_int_equal(version_of(z), 2);
  expect_contents(z, SW_DTYPE_F32, model, size);
  sw_tensor_release(r);
  sw_tensor_release(t);
  sw_carrier_release(cpu);
  free(model);
  sw_carrier_release(z);
}

static void move_from_zstd_with_decompression_fault(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const size_t n = 9000;
  sw_carrier_t* z = make_zstd(rt, SW_DTYPE_BF16, n, 1000, -1);
  uint16_t* v = (uint16_t*)malloc(n * 2);
  for (size_t i = 0; i < n; ++i) v[i] = (uint16_t)(0x3c00 + i % 512);
  SW_OK_(sw_carrier_write(z, 0, n, v));
  const uint64_t version = version_of(z);
  /* A view at offset 500 covers partial first and last frames. */
  sw_tensor_t* t = dense_tensor(z, 500, (int64_t)(n - 1000));
  sw_carrier_t* cpu = NULL;
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_BF16, 0, &cpu));

  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_DECOMPRESS, 4));
  SW_FAILS(move_and_wait(t, cpu, NULL), SW_ERROR_DATA_CORRUPT, "zstd frame");
  /* Both carriers usable and unchanged. */
  bool flag = true;
  SW_OK_(sw_carrier_is_disposed(z, &flag));
  assert_false(flag);
  SW_OK_(sw_carrier_is_owned(z, &flag));
  assert_false(flag);
  SW_OK_(sw_carrier_is_owned(cpu, &flag));
  assert_false(flag);
  assert_int_equal(version_of(z), version);
  assert_int_equal(size_of(cpu), 0);
  expect_contents(z, SW_DTYPE_BF16, v, n);

  /* The retry succeeds with exact values. */
  sw_tensor_t* r = NULL;
  SW_OK_(move_and_wait(t, cpu, &r));
  uint16_t* got = (uint16_t*)malloc((n - 1000) * 2);
  SW_OK_(sw_tensor_read(r, got, (n - 1000) * 2));
  assert_memory_equal(got, v + 500, (n - 1000) * 2);
  free(got);
  sw_tensor_release(r);
  sw_tensor_release(t);
  sw_carrier_release(cpu);
  sw_carrier_release(z);
  free(v);
}

static void move_from_corrupt_zstd_frame(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const size_t n = 4000;
  sw_carrier_t* z = make_zstd(rt, SW_DTYPE_F32, n, 1000, -1);
  float* v = smooth_f32(n);
  SW_OK_(sw_carrier_write(z, 0, n, v));
  SW_OK_(sw_testing_corrupt_frame(z, 2));
  sw_tensor_t* t = dense_tensor(z, 0, (int64_t)n);
  sw_carrier_t* cpu = NULL;
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 0, &cpu));
  SW_FAILS(move_and_wait(t, cpu, NULL), SW_ERROR_DATA_CORRUPT, "frame 2");
  bool disposed = true;
  SW_OK_(sw_carrier_is_disposed(z, &disposed));
  assert_false(disposed);
  /* Repair the frame by overwriting it whole; the move then succeeds. */
  SW_OK_(sw_carrier_write(z, 2000, 1000, v + 2000));
  sw_tensor_t* r = NULL;
  SW_OK_(move_and_wait(t, cpu, &r));
  float* got = (float*)malloc(n * sizeof(float));
  SW_OK_(sw_tensor_read(r, got, n * sizeof(float)));
  assert_memory_equal(got, v, n * sizeof(float));
  free(got);
  sw_tensor_release(r);
  sw_tensor_release(t);
  sw_carrier_release(cpu);
  sw_carrier_release(z);
  free(v);
}

/* Whichever decompression of a move into a zstd carrier fails (a backup read
 * or the patch of its partial last frame), the carrier ends unchanged. */
static void move_into_zstd_with_decompression_faults(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const size_t n = 2300, size = 3000;
  sw_carrier_t* z = make_zstd(rt, SW_DTYPE_I32, size, 1000, -1);
  int32_t* model = (int32_t*)malloc(size * sizeof(int32_t));
  for (size_t i = 0; i < size; ++i) model[i] = (int32_t)(i * 31);
  SW_OK_(sw_carrier_write(z, 0, size, model));
  int32_t* src = (int32_t*)malloc(n * sizeof(int32_t));
  for (size_t i = 0; i < n; ++i) src[i] = -(int32_t)i;
  int failures = 0;
  for (uint64_t nth = 1; nth < 20; ++nth) {
    const uint64_t version = version_of(z);
    sw_carrier_t* cpu = NULL;
    SW_OK_(sw_carrier_create_cpu_from(rt, SW_DTYPE_I32, src, n, &cpu));
    sw_tensor_t* t = dense_tensor(cpu, 0, (int64_t)n);
    SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_DECOMPRESS, nth));
    sw_tensor_t* r = NULL;
    sw_error_t* e = move_and_wait(t, z, &r);
    SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_DECOMPRESS, 0));
    if (e) {
      assert_int_equal(sw_error_code(e), SW_ERROR_DATA_CORRUPT);
      sw_error_free(e);
      ++failures;
      assert_int_equal(version_of(z), version);
      expect_contents(z, SW_DTYPE_I32, model, size);
      bool owned = true;
      SW_OK_(sw_carrier_is_owned(z, &owned));
      assert_false(owned);
    } else {
      memcpy(model, src, n * sizeof(int32_t));
      assert_int_equal(version_of(z), version + 1);
      expect_contents(z, SW_DTYPE_I32, model, size);
      sw_tensor_release(r);
      nth = 20; /* the fault no longer fires: done */
    }
    sw_tensor_release(t);
    sw_carrier_release(cpu);
  }
  assert_true(failures >= 1);
  free(src);
  free(model);
  sw_carrier_release(z);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(desc_defaults),
      T(create_zero_filled_every_dtype),
      T(create_validates_arguments),
      T(round_trips_every_dtype_and_shuffle_mode),
      T(frame_sizes_at_the_edges),
      T(shuffle_modes_hold_identical_values),
      T(large_reads_at_any_alignment),
      T(compression_happens),
      T(versions_dispose_and_empty),
      T(corrupt_frame_reads_as_data_corrupt),
      T(corrupting_a_shared_zero_frame_breaks_only_that_frame),
      T(corrupt_frame_arguments),
      T(injected_decompression_fault_then_retry),
      T(failed_write_changes_nothing),
      T(concurrent_reads),
      T(move_cpu_to_zstd_to_cpu_every_dtype),
      T(move_into_part_of_a_zstd_carrier),
      T(move_from_zstd_with_decompression_fault),
      T(move_from_corrupt_zstd_frame),
      T(move_into_zstd_with_decompression_faults),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
