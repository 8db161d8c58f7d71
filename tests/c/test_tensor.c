/* Tensors: (carrier, offset, layout) with element c at slot
 * offset + layout.index(c); bulk access is first mode fastest. */
#include "sw_test.h"

/* ---- helpers -------------------------------------------------------------- */

/* An f32 carrier whose slot k holds base + k. */
static sw_carrier_t* iota_carrier(sw_runtime_t* rt, size_t n, float base) {
  float* v = (float*)malloc(sizeof(float) * (n ? n : 1));
  for (size_t k = 0; k < n; ++k) v[k] = base + (float)k;
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_cpu_from(rt, SW_DTYPE_F32, v, n, &c));
  free(v);
  return c;
}

static sw_layout_t* parse(const char* text) {
  sw_layout_t* l = NULL;
  SW_OK_(sw_layout_parse(text, &l));
  return l;
}

static sw_tensor_t* tensor_on(sw_carrier_t* c, int64_t offset, const char* layout) {
  sw_layout_t* l = parse(layout);
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_create(c, offset, l, &t));
  sw_layout_release(l);
  assert_non_null(t);
  return t;
}

static float slot(const sw_carrier_t* c, size_t k) {
  float v = -12345.0f;
  SW_OK_(sw_carrier_read(c, k, 1, &v));
  return v;
}

static double get(const sw_tensor_t* t, const int64_t* coord, size_t count) {
  double v = -12345.0;
  SW_OK_(sw_tensor_get(t, coord, count, &v));
  return v;
}

static uint64_t version_of(const sw_tensor_t* t) {
  uint64_t v = 0xdeadbeef;
  SW_OK_(sw_tensor_version(t, &v));
  return v;
}

/* Fails unless creating a tensor over `c` with `layout` at `offset` is INDEX
 * and leaves the out-parameter alone. */
static void expect_create_index(sw_carrier_t* c, int64_t offset, const char* layout) {
  sw_layout_t* l = parse(layout);
  sw_tensor_t* t = (sw_tensor_t*)(uintptr_t)0x5151;
  sw_error_t* e = sw_tensor_create(c, offset, l, &t);
  if (!e) fail_msg("tensor_create(offset %lld, %s) succeeded", (long long)offset, layout);
  if (sw_error_code(e) != SW_ERROR_INDEX)
    fail_msg("tensor_create(offset %lld, %s) failed with %s: %s", (long long)offset, layout,
             sw_error_code_name(sw_error_code(e)), sw_error_message(e));
  sw_error_free(e);
  assert_ptr_equal(t, (sw_tensor_t*)(uintptr_t)0x5151);
  sw_layout_release(l);
}

/* ---- creation ------------------------------------------------------------- */

static void create_checks_bounds(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_carrier_t* c = iota_carrier(rt, 12, 0);

  /* Exactly filling the carrier is fine... */
  sw_tensor_t* t = tensor_on(c, 0, "(3,4):(1,3)");
  sw_tensor_release(t);
  t = tensor_on(c, 0, "(3,4):(4,1)");
  sw_tensor_release(t);
  t = tensor_on(c, 11, "(1):(1)");
  sw_tensor_release(t);
  t = tensor_on(c, 11, "(5):(0)"); /* broadcast: one slot reached */
  sw_tensor_release(t);
  t = tensor_on(c, 3, "(4):(-1)"); /* slots 3 2 1 0 */
  sw_tensor_release(t);
  t = tensor_on(c, 5, "(2,3):(-1,3)"); /* slots 4..11 */
  sw_tensor_release(t);
  t = tensor_on(c, 0, "((2,2),(3)):((1,6),(2))"); /* max 1+6+4 = 11 */
  sw_tensor_release(t);

  /* ...one slot more is not. */
  expect_create_index(c, 1, "(3,4):(1,3)");
  expect_create_index(c, 0, "(3,4):(1,4)");
  expect_create_index(c, 12, "(1):(1)");
  expect_create_index(c, 11, "(2):(1)");
  expect_create_index(c, 0, "((2,2),(3)):((1,7),(2))");
  /* Negative offsets and negative strides that reach below slot 0. */
  expect_create_index(c, -1, "(2):(1)");
  expect_create_index(c, -1, "(1):(1)");
  expect_create_index(c, 2, "(4):(-1)");
  expect_create_index(c, 0, "(2,3):(-1,3)");
  expect_create_index(c, 6, "(2,3):(-1,3)");
  expect_create_index(c, 0, "(2):(-1)");
  /* Offsets so large that offset + index overflows. */
  expect_create_index(c, INT64_MAX, "(2):(1)");
  expect_create_index(c, INT64_MAX, "(1):(1)");
  expect_create_index(c, INT64_MIN, "(2):(-1)");
  expect_create_index(c, INT64_MIN, "(2):(1)");
  expect_create_index(c, 2, "(2):(9223372036854775806)");
  sw_carrier_release(c);
}

static void create_accessors(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_carrier_t* c = iota_carrier(rt, 20, 0);
  sw_layout_t* l = parse("(4,(2,2)):(1,(4,8))");
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_create(c, 3, l, &t));

  size_t rank = 0;
  SW_OK_(sw_tensor_rank(t, &rank));
  assert_int_equal(rank, 2);
  int64_t shape[3] = {-1, -1, -1};
  SW_OK_(sw_tensor_shape(t, shape, 3));
  assert_int_equal(shape[0], 4);
  assert_int_equal(shape[1], 4);
  assert_int_equal(shape[2], -1);
  int64_t numel = 0;
  SW_OK_(sw_tensor_numel(t, &numel));
  assert_int_equal(numel, 16);
  int64_t offset = 0;
  SW_OK_(sw_tensor_offset(t, &offset));
  assert_int_equal(offset, 3);
  sw_dtype_t d = SW_DTYPE_INVALID;
  SW_OK_(sw_tensor_dtype(t, &d));
  assert_int_equal(d, SW_DTYPE_F32);
  assert_int_equal(version_of(t), 0);

  sw_layout_t* got = NULL;
  SW_OK_(sw_tensor_layout(t, &got));
  bool eq = false;
  SW_OK_(sw_layout_equal(got, l, &eq));
  assert_true(eq);
  sw_layout_release(got);

  sw_carrier_t* gc = NULL;
  SW_OK_(sw_tensor_carrier(t, &gc));
  assert_ptr_equal(gc, c);
  sw_carrier_release(gc);

  int64_t small[1] = {-1};
  SW_FAILS(sw_tensor_shape(t, small, 1), SW_ERROR_VALUE, NULL);
  assert_int_equal(small[0], -1);

  /* The tensor keeps its carrier and layout alive. */
  sw_layout_release(l);
  sw_carrier_release(c);
  const int64_t coord[2] = {1, 3};
  assert_true(get(t, coord, 2) == 3 + 1 + 4 + 8);
  sw_tensor_release(t);
}

static void from_data_and_zeros(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t ext[2] = {2, 3};
  const int32_t data[6] = {10, 20, 30, 40, 50, 60};
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_I32, ext, 2, data, &t));
  size_t rank = 0;
  SW_OK_(sw_tensor_rank(t, &rank));
  assert_int_equal(rank, 2);
  int64_t shape[2] = {0, 0};
  SW_OK_(sw_tensor_shape(t, shape, 2));
  assert_int_equal(shape[0], 2);
  assert_int_equal(shape[1], 3);
  int64_t off = -1;
  SW_OK_(sw_tensor_offset(t, &off));
  assert_int_equal(off, 0);
  sw_dtype_t d = SW_DTYPE_INVALID;
  SW_OK_(sw_tensor_dtype(t, &d));
  assert_int_equal(d, SW_DTYPE_I32);
  sw_layout_t* l = NULL;
  SW_OK_(sw_tensor_layout(t, &l));
  sw_layout_t* dense = parse("(2,3):(1,2)");
  bool eq = false;
  SW_OK_(sw_layout_equal(l, dense, &eq));
  assert_true(eq);
  sw_layout_release(dense);
  sw_layout_release(l);
  /* Data is given first mode fastest: (i, j) is data[i + 2 j]. */
  for (int64_t j = 0; j < 3; ++j)
    for (int64_t i = 0; i < 2; ++i) {
      const int64_t c[2] = {i, j};
      assert_true(get(t, c, 2) == data[i + 2 * j]);
    }
  sw_carrier_t* car = NULL;
  SW_OK_(sw_tensor_carrier(t, &car));
  size_t n = 0;
  SW_OK_(sw_carrier_size(car, &n));
  assert_int_equal(n, 6);
  sw_carrier_release(car);
  sw_tensor_release(t);

  const int64_t e3[3] = {2, 1, 3};
  SW_OK_(sw_tensor_zeros(rt, SW_DTYPE_F64, e3, 3, &t));
  int64_t numel = 0;
  SW_OK_(sw_tensor_numel(t, &numel));
  assert_int_equal(numel, 6);
  double vals[6];
  for (int i = 0; i < 6; ++i) vals[i] = 1.0;
  SW_OK_(sw_tensor_read(t, vals, sizeof vals));
  for (int i = 0; i < 6; ++i) assert_true(vals[i] == 0.0);
  assert_int_equal(version_of(t), 0);
  sw_tensor_release(t);
}

static void rank_zero_and_empty_tensors(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const float v = 2.5f;
  sw_tensor_t* s = NULL;
  SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_F32, NULL, 0, &v, &s));
  size_t rank = 9;
  SW_OK_(sw_tensor_rank(s, &rank));
  assert_int_equal(rank, 0);
  int64_t numel = 0;
  SW_OK_(sw_tensor_numel(s, &numel));
  assert_int_equal(numel, 1);
  assert_true(get(s, NULL, 0) == 2.5);
  SW_OK_(sw_tensor_set(s, NULL, 0, -4.0));
  assert_true(get(s, NULL, 0) == -4.0);
  assert_int_equal(version_of(s), 1);
  SW_OK_(sw_tensor_shape(s, NULL, 0));
  sw_tensor_release(s);

  const int64_t ext[2] = {3, 0};
  sw_tensor_t* e = NULL;
  SW_OK_(sw_tensor_zeros(rt, SW_DTYPE_F32, ext, 2, &e));
  SW_OK_(sw_tensor_numel(e, &numel));
  assert_int_equal(numel, 0);
  SW_OK_(sw_tensor_read(e, NULL, 0));
  SW_OK_(sw_tensor_write(e, NULL, 0));
  const int64_t c[2] = {0, 0};
  double out = 7;
  SW_FAILS(sw_tensor_get(e, c, 2, &out), SW_ERROR_INDEX, NULL);
  assert_true(out == 7);
  sw_tensor_release(e);
  SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_F32, ext, 2, NULL, &e));
  sw_tensor_release(e);
}

/* ---- get / set --------------------------------------------------------------- */

/* The 2x2-tile permutation of a 4x4 tensor: (i, j) lives at slot
 * 4 (i%2) + 2 (i/2) + (j%2) + 8 (j/2). */
static int64_t tile_slot(int64_t i, int64_t j) { return (i % 2) * 4 + (i / 2) * 2 + (j % 2) + (j / 2) * 8; }

static void get_set_nested(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_carrier_t* c = iota_carrier(rt, 16, 100);
  sw_tensor_t* t = tensor_on(c, 0, "((2,2),(2,2)):((4,2),(1,8))");
  for (int64_t j = 0; j < 4; ++j)
    for (int64_t i = 0; i < 4; ++i) {
      const int64_t coord[2] = {i, j};
      assert_true(get(t, coord, 2) == 100.0 + (double)tile_slot(i, j));
    }

  const int64_t c31[2] = {3, 1}; /* slot 4 + 2 + 1 = 7 */
  SW_OK_(sw_tensor_set(t, c31, 2, -1.25));
  assert_int_equal(version_of(t), 1);
  assert_true(slot(c, 7) == -1.25f);
  assert_true(get(t, c31, 2) == -1.25);
  /* Only that slot changed. */
  for (size_t k = 0; k < 16; ++k)
    if (k != 7) assert_true(slot(c, k) == 100.0f + (float)k);

  const int64_t c02[2] = {0, 2}; /* slot 8 */
  SW_OK_(sw_tensor_set(t, c02, 2, 9.5));
  assert_int_equal(version_of(t), 2);
  assert_true(slot(c, 8) == 9.5f);

  /* With an offset and a different nesting. */
  sw_tensor_t* u = tensor_on(c, 1, "(3,(2,2)):(1,(4,8))");
  const int64_t c13[2] = {1, 3}; /* 1 + 1 + 4 + 8 = 14 */
  assert_true(get(u, c13, 2) == 114.0);
  SW_OK_(sw_tensor_set(u, c13, 2, 0.5));
  assert_true(slot(c, 14) == 0.5f);
  assert_int_equal(version_of(t), 3); /* one carrier, one version */
  sw_tensor_release(u);
  sw_tensor_release(t);
  sw_carrier_release(c);
}

static void get_set_errors(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_carrier_t* c = iota_carrier(rt, 12, 0);
  sw_tensor_t* t = tensor_on(c, 0, "(3,4):(1,3)");
  double out = 77;
  const int64_t bad0[2] = {3, 0}, bad1[2] = {0, -1}, ok[2] = {1, 1};
  SW_FAILS(sw_tensor_get(t, bad0, 2, &out), SW_ERROR_INDEX, "3");
  SW_FAILS(sw_tensor_get(t, bad1, 2, &out), SW_ERROR_INDEX, "-1");
  SW_FAILS(sw_tensor_get(t, ok, 1, &out), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_tensor_get(t, ok, 3, &out), SW_ERROR_VALUE, NULL);
  assert_true(out == 77);
  SW_FAILS(sw_tensor_set(t, bad0, 2, 1.0), SW_ERROR_INDEX, NULL);
  SW_FAILS(sw_tensor_set(t, ok, 1, 1.0), SW_ERROR_VALUE, NULL);
  assert_int_equal(version_of(t), 0);
  for (size_t k = 0; k < 12; ++k) assert_true(slot(c, k) == (float)k);
  sw_tensor_release(t);
  sw_carrier_release(c);
}

/* ---- bulk read / write ---------------------------------------------------- */

/* Reads `t` (f32, n elements) and compares with the carrier slots listed in
 * first-mode-fastest order. */
static void expect_read_slots(const sw_tensor_t* t, const sw_carrier_t* c, const int64_t* slots, size_t n) {
  float got[64];
  for (size_t i = 0; i < 64; ++i) got[i] = -999.0f;
  SW_OK_(sw_tensor_read(t, got, n * sizeof(float)));
  for (size_t o = 0; o < n; ++o) {
    const float want = slot(c, (size_t)slots[o]);
    if (got[o] != want) fail_msg("element %zu: read %g, slot %lld holds %g", o, got[o], (long long)slots[o], want);
  }
  assert_true(got[n] == -999.0f); /* nothing written past numel */
}

static void read_strided(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_carrier_t* c = iota_carrier(rt, 12, 0);
  sw_tensor_t* t = tensor_on(c, 1, "(2,3):(2,4)"); /* (i, j) at 1 + 2 i + 4 j */
  const int64_t want[6] = {1, 3, 5, 7, 9, 11};
  expect_read_slots(t, c, want, 6);
  sw_tensor_release(t);

  t = tensor_on(c, 3, "(4):(-1)");
  const int64_t rev[4] = {3, 2, 1, 0};
  expect_read_slots(t, c, rev, 4);
  sw_tensor_release(t);

  t = tensor_on(c, 2, "(3,2):(0,5)"); /* broadcast mode */
  const int64_t bc[6] = {2, 2, 2, 7, 7, 7};
  expect_read_slots(t, c, bc, 6);
  sw_tensor_release(t);
  sw_carrier_release(c);
}

static void read_transposed(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_carrier_t* c = iota_carrier(rt, 12, 0);
  sw_tensor_t* base = tensor_on(c, 0, "(3,4):(1,3)");
  sw_tensor_t* tr = NULL;
  SW_OK_(sw_tensor_transpose(base, 0, 1, &tr));
  int64_t shape[2] = {0, 0};
  SW_OK_(sw_tensor_shape(tr, shape, 2));
  assert_int_equal(shape[0], 4);
  assert_int_equal(shape[1], 3);
  /* (a, b) of the transpose is (b, a) of the base: slot b + 3 a. */
  int64_t want[12];
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t a = 0; a < 4; ++a) want[a + 4 * b] = b + 3 * a;
  expect_read_slots(tr, c, want, 12);
  sw_tensor_release(tr);
  sw_tensor_release(base);
  sw_carrier_release(c);
}

static void read_nested(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_carrier_t* c = iota_carrier(rt, 16, 0.5f);
  sw_tensor_t* t = tensor_on(c, 0, "((2,2),(2,2)):((4,2),(1,8))");
  int64_t want[16];
  for (int64_t j = 0; j < 4; ++j)
    for (int64_t i = 0; i < 4; ++i) want[i + 4 * j] = tile_slot(i, j);
  expect_read_slots(t, c, want, 16);
  sw_tensor_release(t);
  sw_carrier_release(c);

  /* Nested with an offset: (i, j) at 2 + i + 4 (j%2) + 8 (j/2). */
  c = iota_carrier(rt, 18, 0);
  t = tensor_on(c, 2, "(4,(2,2)):(1,(4,8))");
  for (int64_t j = 0; j < 4; ++j)
    for (int64_t i = 0; i < 4; ++i) want[i + 4 * j] = 2 + i + 4 * (j % 2) + 8 * (j / 2);
  expect_read_slots(t, c, want, 16);
  sw_tensor_release(t);
  sw_carrier_release(c);
}

static void read_capacity(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_carrier_t* c = iota_carrier(rt, 6, 1);
  sw_tensor_t* t = tensor_on(c, 0, "(2,3):(1,2)");
  float dst[6] = {-1, -1, -1, -1, -1, -1};
  SW_FAILS(sw_tensor_read(t, dst, 5 * sizeof(float)), SW_ERROR_VALUE, NULL);
  for (int i = 0; i < 6; ++i) assert_true(dst[i] == -1.0f);
  float big[8];
  SW_OK_(sw_tensor_read(t, big, sizeof big)); /* more room is fine */
  assert_true(big[5] == 6.0f);
  sw_tensor_release(t);
  sw_carrier_release(c);
}

/* Writes 1000 + ordinal through `layout` at `offset` over a carrier of `n`
 * slots holding -1, then checks each slot. */
static void expect_write_slots(sw_runtime_t* rt, size_t n, int64_t offset, const char* layout, const int64_t* slots,
                               size_t count) {
  float* init = (float*)malloc(sizeof(float) * n);
  for (size_t k = 0; k < n; ++k) init[k] = -1.0f;
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_cpu_from(rt, SW_DTYPE_F32, init, n, &c));
  free(init);
  sw_tensor_t* t = tensor_on(c, offset, layout);
  float src[64];
  for (size_t o = 0; o < count; ++o) src[o] = 1000.0f + (float)o;
  SW_OK_(sw_tensor_write(t, src, count * sizeof(float)));
  assert_int_equal(version_of(t), 1); /* one step for the whole write */
  float* expect = (float*)malloc(sizeof(float) * n);
  for (size_t k = 0; k < n; ++k) expect[k] = -1.0f;
  for (size_t o = 0; o < count; ++o) expect[slots[o]] = 1000.0f + (float)o;
  for (size_t k = 0; k < n; ++k)
    if (slot(c, k) != expect[k]) fail_msg("%s: slot %zu holds %g, expected %g", layout, k, slot(c, k), expect[k]);
  free(expect);
  sw_tensor_release(t);
  sw_carrier_release(c);
}

static void write_strided_transposed_nested(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t strided[6] = {1, 3, 5, 7, 9, 11};
  expect_write_slots(rt, 13, 1, "(2,3):(2,4)", strided, 6);
  const int64_t transposed[6] = {0, 3, 1, 4, 2, 5}; /* (a, b) at 3 a + b */
  expect_write_slots(rt, 6, 0, "(2,3):(3,1)", transposed, 6);
  const int64_t reversed[4] = {4, 3, 2, 1};
  expect_write_slots(rt, 6, 4, "(4):(-1)", reversed, 4);
  int64_t tiled[16];
  for (int64_t j = 0; j < 4; ++j)
    for (int64_t i = 0; i < 4; ++i) tiled[i + 4 * j] = tile_slot(i, j);
  expect_write_slots(rt, 16, 0, "((2,2),(2,2)):((4,2),(1,8))", tiled, 16);
  int64_t nested[16];
  for (int64_t j = 0; j < 4; ++j)
    for (int64_t i = 0; i < 4; ++i) nested[i + 4 * j] = 3 + i + 4 * (j % 2) + 8 * (j / 2);
  expect_write_slots(rt, 20, 3, "(4,(2,2)):(1,(4,8))", nested, 16);
}

/* Write through a transpose view made by sw_tensor_transpose. */
static void write_through_transpose_view(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t ext[2] = {2, 3};
  sw_tensor_t* base = NULL;
  SW_OK_(sw_tensor_zeros(rt, SW_DTYPE_F32, ext, 2, &base));
  sw_tensor_t* tr = NULL;
  SW_OK_(sw_tensor_transpose(base, 1, 0, &tr)); /* shape (3, 2) */
  const float src[6] = {0, 1, 2, 3, 4, 5};      /* tr(a, b) = a + 3 b */
  SW_OK_(sw_tensor_write(tr, src, sizeof src));
  assert_int_equal(version_of(base), 1);
  float got[6];
  SW_OK_(sw_tensor_read(base, got, sizeof got)); /* base(i, j) = tr(j, i) = j + 3 i */
  const float want[6] = {0, 3, 1, 4, 2, 5};
  assert_memory_equal(got, want, sizeof want);
  sw_tensor_release(tr);
  sw_tensor_release(base);
}

static void write_non_injective_is_value(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_carrier_t* c = iota_carrier(rt, 8, 0);
  static const char* layouts[] = {"(3,2):(0,1)", "(2,2):(1,1)", "((2,2)):((1,1))", "(4):(0)"};
  const float src[6] = {9, 9, 9, 9, 9, 9};
  for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; ++i) {
    sw_tensor_t* t = tensor_on(c, 0, layouts[i]);
    int64_t numel = 0;
    SW_OK_(sw_tensor_numel(t, &numel));
    SW_FAILS(sw_tensor_write(t, src, (size_t)numel * sizeof(float)), SW_ERROR_VALUE, "injective");
    assert_int_equal(version_of(t), 0);
    for (size_t k = 0; k < 8; ++k) assert_true(slot(c, k) == (float)k);
    sw_tensor_release(t);
  }
  sw_carrier_release(c);
}

static void write_size_mismatch_is_value(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_carrier_t* c = iota_carrier(rt, 6, 0);
  sw_tensor_t* t = tensor_on(c, 0, "(2,3):(1,2)");
  const float src[7] = {9, 9, 9, 9, 9, 9, 9};
  SW_FAILS(sw_tensor_write(t, src, 5 * sizeof(float)), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_tensor_write(t, src, 7 * sizeof(float)), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_tensor_write(t, src, 6 * sizeof(float) - 1), SW_ERROR_VALUE, NULL);
  assert_int_equal(version_of(t), 0);
  for (size_t k = 0; k < 6; ++k) assert_true(slot(c, k) == (float)k);
  sw_tensor_release(t);
  sw_carrier_release(c);
}

/* ---- dtypes -------------------------------------------------------------- */

static sw_tensor_t* scalar_of(sw_runtime_t* rt, sw_dtype_t dtype) {
  const int64_t ext[1] = {2};
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_zeros(rt, dtype, ext, 1, &t));
  return t;
}

static void raw_slot(const sw_tensor_t* t, size_t k, void* out, size_t bytes) {
  sw_carrier_t* c = NULL;
  SW_OK_(sw_tensor_carrier(t, &c));
  unsigned char buf[16];
  SW_OK_(sw_carrier_read(c, k, 1, buf));
  memcpy(out, buf, bytes);
  sw_carrier_release(c);
}

static void set_half_precision(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t c1[1] = {1};
  sw_tensor_t* h = scalar_of(rt, SW_DTYPE_F16);
  uint16_t bits = 0;
  SW_OK_(sw_tensor_set(h, c1, 1, 0.1));
  raw_slot(h, 1, &bits, 2);
  assert_int_equal(bits, 0x2e66);
  assert_true(get(h, c1, 1) == 0.0999755859375);
  SW_OK_(sw_tensor_set(h, c1, 1, -2.25));
  raw_slot(h, 1, &bits, 2);
  assert_int_equal(bits, 0xc080);
  SW_OK_(sw_tensor_set(h, c1, 1, 65504.0));
  raw_slot(h, 1, &bits, 2);
  assert_int_equal(bits, 0x7bff);
  SW_OK_(sw_tensor_set(h, c1, 1, 1e6)); /* floats overflow to infinity, not VALUE */
  raw_slot(h, 1, &bits, 2);
  assert_int_equal(bits, 0x7c00);
  assert_true(isinf(get(h, c1, 1)));
  assert_int_equal(version_of(h), 4);
  raw_slot(h, 0, &bits, 2);
  assert_int_equal(bits, 0); /* the other element is untouched */
  sw_tensor_release(h);

  sw_tensor_t* b = scalar_of(rt, SW_DTYPE_BF16);
  SW_OK_(sw_tensor_set(b, c1, 1, 0.1));
  raw_slot(b, 1, &bits, 2);
  assert_int_equal(bits, 0x3dcd);
  assert_true(get(b, c1, 1) == 0.10009765625);
  SW_OK_(sw_tensor_set(b, c1, 1, 1.0 / 3.0));
  raw_slot(b, 1, &bits, 2);
  assert_int_equal(bits, 0x3eab);
  assert_true(get(b, c1, 1) == 0.333984375);
  SW_OK_(sw_tensor_set(b, c1, 1, -2.25));
  raw_slot(b, 1, &bits, 2);
  assert_int_equal(bits, 0xc010);
  assert_int_equal(version_of(b), 3);
  sw_tensor_release(b);
}

/* Sets `value` at element 1 and expects VALUE with nothing changed. */
static void expect_set_rejected(sw_tensor_t* t, double value) {
  const int64_t c1[1] = {1};
  const uint64_t before = version_of(t);
  const double old = get(t, c1, 1);
  sw_error_t* e = sw_tensor_set(t, c1, 1, value);
  if (!e) fail_msg("set(%g) succeeded", value);
  if (sw_error_code(e) != SW_ERROR_VALUE)
    fail_msg("set(%g) failed with %s", value, sw_error_code_name(sw_error_code(e)));
  sw_error_free(e);
  assert_int_equal(version_of(t), before);
  assert_true(get(t, c1, 1) == old);
}

static void set_integer_dtypes(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t c1[1] = {1};

  sw_tensor_t* i = scalar_of(rt, SW_DTYPE_I32);
  SW_OK_(sw_tensor_set(i, c1, 1, -7.0));
  int32_t i32 = 0;
  raw_slot(i, 1, &i32, 4);
  assert_int_equal(i32, -7);
  assert_true(get(i, c1, 1) == -7.0);
  SW_OK_(sw_tensor_set(i, c1, 1, -2147483648.0));
  raw_slot(i, 1, &i32, 4);
  assert_int_equal(i32, INT32_MIN);
  SW_OK_(sw_tensor_set(i, c1, 1, 2147483647.0));
  raw_slot(i, 1, &i32, 4);
  assert_int_equal(i32, INT32_MAX);
  expect_set_rejected(i, 2.5);
  expect_set_rejected(i, -0.5);
  expect_set_rejected(i, 2147483648.0);
  expect_set_rejected(i, -2147483649.0);
  expect_set_rejected(i, NAN);
  expect_set_rejected(i, INFINITY);
  sw_tensor_release(i);

  sw_tensor_t* l = scalar_of(rt, SW_DTYPE_I64);
  SW_OK_(sw_tensor_set(l, c1, 1, 9007199254740992.0)); /* 2^53 */
  int64_t i64 = 0;
  raw_slot(l, 1, &i64, 8);
  assert_true(i64 == INT64_C(9007199254740992));
  SW_OK_(sw_tensor_set(l, c1, 1, -9223372036854775808.0)); /* -2^63 */
  raw_slot(l, 1, &i64, 8);
  assert_true(i64 == INT64_MIN);
  expect_set_rejected(l, 9223372036854775808.0); /* 2^63 */
  expect_set_rejected(l, 0.25);
  sw_tensor_release(l);

  sw_tensor_t* u = scalar_of(rt, SW_DTYPE_U8);
  SW_OK_(sw_tensor_set(u, c1, 1, 255.0));
  uint8_t u8 = 0;
  raw_slot(u, 1, &u8, 1);
  assert_int_equal(u8, 255);
  assert_true(get(u, c1, 1) == 255.0);
  expect_set_rejected(u, 256.0);
  expect_set_rejected(u, -1.0);
  expect_set_rejected(u, 1.5);
  expect_set_rejected(u, NAN);
  assert_int_equal(version_of(u), 1);
  sw_tensor_release(u);

  sw_tensor_t* b = scalar_of(rt, SW_DTYPE_BOOL);
  SW_OK_(sw_tensor_set(b, c1, 1, 1.0));
  raw_slot(b, 1, &u8, 1);
  assert_int_equal(u8, 1);
  assert_true(get(b, c1, 1) == 1.0);
  expect_set_rejected(b, 2.0);
  expect_set_rejected(b, 0.5);
  expect_set_rejected(b, -1.0);
  SW_OK_(sw_tensor_set(b, c1, 1, 0.0));
  raw_slot(b, 1, &u8, 1);
  assert_int_equal(u8, 0);
  assert_int_equal(version_of(b), 2);
  sw_tensor_release(b);
}

static void get_reads_every_dtype(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t ext[1] = {3};
  const int64_t c0[1] = {0}, c1[1] = {1}, c2[1] = {2};
  sw_tensor_t* t = NULL;

  const int64_t i64[3] = {-5, INT64_C(1) << 40, 0};
  SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_I64, ext, 1, i64, &t));
  assert_true(get(t, c0, 1) == -5.0);
  assert_true(get(t, c1, 1) == 1099511627776.0);
  sw_tensor_release(t);

  const uint8_t u8[3] = {0, 200, 255};
  SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_U8, ext, 1, u8, &t));
  assert_true(get(t, c1, 1) == 200.0);
  assert_true(get(t, c2, 1) == 255.0);
  sw_tensor_release(t);

  const uint8_t bools[3] = {0, 1, 7}; /* any non-zero byte reads as true */
  SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_BOOL, ext, 1, bools, &t));
  assert_true(get(t, c0, 1) == 0.0);
  assert_true(get(t, c1, 1) == 1.0);
  assert_true(get(t, c2, 1) == 1.0);
  sw_tensor_release(t);

  const uint16_t f16[3] = {0x3c00, 0xc000, 0x0001}; /* 1, -2, smallest subnormal */
  SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_F16, ext, 1, f16, &t));
  assert_true(get(t, c0, 1) == 1.0);
  assert_true(get(t, c1, 1) == -2.0);
  assert_true(get(t, c2, 1) == ldexp(1.0, -24));
  sw_tensor_release(t);

  const double f64[3] = {0.1, -1e300, 3.0};
  SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_F64, ext, 1, f64, &t));
  assert_true(get(t, c0, 1) == 0.1);
  assert_true(get(t, c1, 1) == -1e300);
  sw_tensor_release(t);
}

/* ---- views --------------------------------------------------------------- */

static void permute_view_shares_carrier(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t ext[3] = {2, 3, 4};
  double data[24];
  for (int k = 0; k < 24; ++k) data[k] = k;
  sw_tensor_t* base = NULL;
  SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_F64, ext, 3, data, &base));
  const size_t perm[3] = {2, 0, 1};
  sw_tensor_t* v = NULL;
  SW_OK_(sw_tensor_permute(base, perm, 3, &v));
  int64_t shape[3] = {0, 0, 0};
  SW_OK_(sw_tensor_shape(v, shape, 3));
  assert_int_equal(shape[0], 4);
  assert_int_equal(shape[1], 2);
  assert_int_equal(shape[2], 3);
  /* v(c, a, b) = base(a, b, c) = a + 2 b + 6 c */
  for (int64_t c = 0; c < 4; ++c)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t a = 0; a < 2; ++a) {
        const int64_t vc[3] = {c, a, b};
        assert_true(get(v, vc, 3) == (double)(a + 2 * b + 6 * c));
      }

  sw_carrier_t *cb = NULL, *cv = NULL;
  SW_OK_(sw_tensor_carrier(base, &cb));
  SW_OK_(sw_tensor_carrier(v, &cv));
  assert_ptr_equal(cb, cv);
  int64_t ob = -1, ov = -1;
  SW_OK_(sw_tensor_offset(base, &ob));
  SW_OK_(sw_tensor_offset(v, &ov));
  assert_int_equal(ob, ov);

  /* A write through the view is visible in the base, and the version is the
   * carrier's. */
  const int64_t vc[3] = {3, 1, 2}; /* base (1, 2, 3): ordinal 1 + 4 + 18 = 23 */
  SW_OK_(sw_tensor_set(v, vc, 3, -1.0));
  const int64_t bc[3] = {1, 2, 3};
  assert_true(get(base, bc, 3) == -1.0);
  assert_int_equal(version_of(base), 1);
  assert_int_equal(version_of(v), 1);
  double raw = 0;
  SW_OK_(sw_carrier_read(cb, 23, 1, &raw));
  assert_true(raw == -1.0);
  sw_carrier_release(cb);
  sw_carrier_release(cv);

  /* Permuting back gives the base layout. */
  const size_t inv[3] = {1, 2, 0};
  sw_tensor_t* back = NULL;
  SW_OK_(sw_tensor_permute(v, inv, 3, &back));
  sw_layout_t *lb = NULL, *lback = NULL;
  SW_OK_(sw_tensor_layout(base, &lb));
  SW_OK_(sw_tensor_layout(back, &lback));
  bool eq = false;
  SW_OK_(sw_layout_equal(lb, lback, &eq));
  assert_true(eq);
  sw_layout_release(lb);
  sw_layout_release(lback);
  sw_tensor_release(back);
  sw_tensor_release(v);
  sw_tensor_release(base);
}

static void transpose_view_and_errors(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_carrier_t* c = iota_carrier(rt, 24, 0);
  sw_tensor_t* t = tensor_on(c, 0, "(2,3,4):(1,2,6)");
  sw_tensor_t* v = NULL;
  SW_OK_(sw_tensor_transpose(t, 0, 2, &v));
  sw_layout_t* l = NULL;
  SW_OK_(sw_tensor_layout(v, &l));
  char buf[64];
  size_t len = 0;
  SW_OK_(sw_layout_to_string(l, buf, sizeof buf, &len));
  assert_string_equal(buf, "(4,3,2):(6,2,1)");
  sw_layout_release(l);
  sw_carrier_t* cv = NULL;
  SW_OK_(sw_tensor_carrier(v, &cv));
  assert_ptr_equal(cv, c);
  sw_carrier_release(cv);
  sw_tensor_release(v);

  SW_OK_(sw_tensor_transpose(t, 1, 1, &v)); /* swapping a mode with itself */
  SW_OK_(sw_tensor_layout(v, &l));
  SW_OK_(sw_layout_to_string(l, buf, sizeof buf, &len));
  assert_string_equal(buf, "(2,3,4):(1,2,6)");
  sw_layout_release(l);
  sw_tensor_release(v);

  v = (sw_tensor_t*)(uintptr_t)0x5151;
  SW_FAILS(sw_tensor_transpose(t, 0, 3, &v), SW_ERROR_INDEX, NULL);
  SW_FAILS(sw_tensor_transpose(t, 7, 0, &v), SW_ERROR_INDEX, NULL);
  const size_t dup[3] = {0, 0, 1}, short_perm[2] = {1, 0}, big[3] = {0, 1, 3};
  SW_FAILS(sw_tensor_permute(t, dup, 3, &v), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_tensor_permute(t, short_perm, 2, &v), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_tensor_permute(t, big, 3, &v), SW_ERROR_INDEX, NULL);
  assert_ptr_equal(v, (sw_tensor_t*)(uintptr_t)0x5151);
  sw_tensor_release(t);
  sw_carrier_release(c);
}

/* ---- carrier state --------------------------------------------------------- */

static void access_after_dispose_is_state(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_carrier_t* c = iota_carrier(rt, 6, 0);
  sw_tensor_t* t = tensor_on(c, 0, "(2,3):(1,2)");
  SW_OK_(sw_tensor_set(t, (const int64_t[2]){0, 0}, 2, 5.0));
  SW_OK_(sw_carrier_dispose(c));

  const int64_t coord[2] = {1, 1};
  double out = 77;
  SW_FAILS(sw_tensor_get(t, coord, 2, &out), SW_ERROR_STATE, NULL);
  assert_true(out == 77);
  SW_FAILS(sw_tensor_set(t, coord, 2, 1.0), SW_ERROR_STATE, NULL);
  float buf[6] = {-1, -1, -1, -1, -1, -1};
  SW_FAILS(sw_tensor_read(t, buf, sizeof buf), SW_ERROR_STATE, NULL);
  assert_true(buf[0] == -1.0f);
  SW_FAILS(sw_tensor_write(t, buf, sizeof buf), SW_ERROR_STATE, NULL);
  sw_tensor_t* v = (sw_tensor_t*)(uintptr_t)0x5151;
  SW_FAILS(sw_tensor_transpose(t, 0, 1, &v), SW_ERROR_STATE, NULL);
  const size_t perm[2] = {1, 0};
  SW_FAILS(sw_tensor_permute(t, perm, 2, &v), SW_ERROR_STATE, NULL);
  assert_ptr_equal(v, (sw_tensor_t*)(uintptr_t)0x5151);
  sw_layout_t* l = parse("(2):(1)");
  SW_FAILS(sw_tensor_create(c, 0, l, &v), SW_ERROR_STATE, NULL);
  assert_ptr_equal(v, (sw_tensor_t*)(uintptr_t)0x5151);
  sw_layout_release(l);
  assert_int_equal(version_of(t), 1);

  /* Metadata still answers. */
  int64_t numel = 0;
  SW_OK_(sw_tensor_numel(t, &numel));
  assert_int_equal(numel, 6);
  int64_t shape[2] = {0, 0};
  SW_OK_(sw_tensor_shape(t, shape, 2));
  assert_int_equal(shape[1], 3);
  sw_dtype_t d = SW_DTYPE_INVALID;
  SW_OK_(sw_tensor_dtype(t, &d));
  assert_int_equal(d, SW_DTYPE_F32);
  sw_tensor_release(t);
  sw_carrier_release(c);
}

static void claimed_carrier_refuses_tensor_writes(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_carrier_t* c = iota_carrier(rt, 4, 0);
  sw_tensor_t* t = tensor_on(c, 0, "(4):(1)");
  SW_OK_(sw_testing_claim(c));
  const int64_t c1[1] = {1};
  SW_FAILS(sw_tensor_set(t, c1, 1, 8.0), SW_ERROR_STATE, NULL);
  const float src[4] = {9, 9, 9, 9};
  SW_FAILS(sw_tensor_write(t, src, sizeof src), SW_ERROR_STATE, NULL);
  assert_int_equal(version_of(t), 0);
  assert_true(get(t, c1, 1) == 1.0); /* reads are still allowed */
  float back[4];
  SW_OK_(sw_tensor_read(t, back, sizeof back));
  assert_true(back[3] == 3.0f);
  SW_OK_(sw_testing_unclaim(c));
  SW_OK_(sw_tensor_set(t, c1, 1, 8.0));
  assert_int_equal(version_of(t), 1);
  sw_tensor_release(t);
  sw_carrier_release(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(create_checks_bounds),
      cmocka_unit_test(create_accessors),
      cmocka_unit_test(from_data_and_zeros),
      cmocka_unit_test(rank_zero_and_empty_tensors),
      cmocka_unit_test(get_set_nested),
      cmocka_unit_test(get_set_errors),
      cmocka_unit_test(read_strided),
      cmocka_unit_test(read_transposed),
      cmocka_unit_test(read_nested),
      cmocka_unit_test(read_capacity),
      cmocka_unit_test(write_strided_transposed_nested),
      cmocka_unit_test(write_through_transpose_view),
      cmocka_unit_test(write_non_injective_is_value),
      cmocka_unit_test(write_size_mismatch_is_value),
      cmocka_unit_test(set_half_precision),
      cmocka_unit_test(set_integer_dtypes),
      cmocka_unit_test(get_reads_every_dtype),
      cmocka_unit_test(permute_view_shares_carrier),
      cmocka_unit_test(transpose_view_and_errors),
      cmocka_unit_test(access_after_dispose_is_state),
      cmocka_unit_test(claimed_carrier_refuses_tensor_writes),
  };
  return cmocka_run_group_tests(tests, sw_test_runtime_setup, sw_test_runtime_teardown);
}
