/* The tensor surface beyond the six ops: views and their element order,
 * constructors, dtype conversion and promotion, unary / binary / reduction /
 * selection / indexing ops with their VJPs, in-place ops and their
 * version-counter rules. Values are checked against plain loops. */
#include "sw_test.h"

/* Every element (first mode fastest) as doubles, for any dtype. */
static int64_t values_of(const sw_tensor_t* t, double* out, int64_t capacity) {
  size_t rank = 0;
  SW_OK_(sw_tensor_rank(t, &rank));
  int64_t ext[SW_MAX_RANK] = {0}, n = 0;
  SW_OK_(sw_tensor_shape(t, ext, SW_MAX_RANK));
  SW_OK_(sw_tensor_numel(t, &n));
  assert_true(n <= capacity);
  for (int64_t o = 0; o < n; ++o) {
    int64_t c[SW_MAX_RANK], rest = o;
    for (size_t m = 0; m < rank; ++m) {
      c[m] = rest % ext[m];
      rest /= ext[m];
    }
    SW_OK_(sw_tensor_get(t, c, rank, &out[o]));
  }
  return n;
}

static void expect_values(const sw_tensor_t* t, const double* want, int64_t n, double tol) {
  double got[256];
  assert_int_equal(values_of(t, got, 256), n);
  for (int64_t i = 0; i < n; ++i) {
    const bool same = isnan(want[i]) ? isnan(got[i]) : fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i]));
    if (!same) fail_msg("element %lld = %.12g, expected %.12g", (long long)i, got[i], want[i]);
  }
}

static void expect_shape(const sw_tensor_t* t, const int64_t* want, size_t rank) {
  size_t r = 0;
  SW_OK_(sw_tensor_rank(t, &r));
  assert_int_equal(r, rank);
  int64_t ext[SW_MAX_RANK];
  SW_OK_(sw_tensor_shape(t, ext, SW_MAX_RANK));
  for (size_t i = 0; i < rank; ++i) assert_int_equal(ext[i], want[i]);
}

static sw_dtype_t dtype_of(const sw_tensor_t* t) {
  sw_dtype_t d;
  SW_OK_(sw_tensor_dtype(t, &d));
  return d;
}

/* A tensor of `dtype` holding values[i] at ordinal i. */
static sw_tensor_t* make(sw_runtime_t* rt, sw_dtype_t dtype, const int64_t* ext, size_t rank, const double* values) {
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_zeros(rt, dtype, ext, rank, &t));
  int64_t n = 1;
  for (size_t i = 0; i < rank; ++i) n *= ext[i];
  for (int64_t o = 0; o < n; ++o) {
    int64_t c[SW_MAX_RANK], rest = o;
    for (size_t m = 0; m < rank; ++m) {
      c[m] = rest % ext[m];
      rest /= ext[m];
    }
    SW_OK_(sw_tensor_set(t, c, rank, values[o]));
  }
  return t;
}

static double iota[64];

static int setup(void** state) {
  for (int i = 0; i < 64; ++i) iota[i] = i;
  return sw_test_runtime_setup(state);
}

/* ---- views ---------------------------------------------------------------- */

static void test_reshape_is_first_mode_fastest(void** state) {
  sw_runtime_t* rt = *state;
  const int64_t e23[] = {2, 3}, e32[] = {3, 2};
  sw_tensor_t* a = make(rt, SW_DTYPE_F32, e23, 2, iota);
  sw_tensor_t* r = NULL;
  SW_OK_(sw_tensor_reshape(a, e32, 2, &r));
  expect_shape(r, e32, 2);
  /* Ordinal order is kept: (2, 0) of the result is ordinal 2, (0, 1) of a. */
  expect_values(r, iota, 6, 0);
  double v;
  const int64_t c20[] = {2, 0};
  SW_OK_(sw_tensor_get(r, c20, 2, &v));
  assert_true(v == 2.0);
  /* A dense reshape is a view: a write through it is seen by the base. */
  SW_OK_(sw_tensor_set(r, c20, 2, 40.0));
  const int64_t c01[] = {0, 1};
  SW_OK_(sw_tensor_get(a, c01, 2, &v));
  assert_true(v == 40.0);
  sw_tensor_release(r);
  /* -1 is inferred; a second -1 or a wrong count is VALUE. */
  const int64_t inferred[] = {-1}, two[] = {-1, -1}, wrong[] = {4, 2};
  SW_OK_(sw_tensor_reshape(a, inferred, 1, &r));
  const int64_t e6[] = {6};
  expect_shape(r, e6, 1);
  sw_tensor_release(r);
  r = NULL;
  SW_FAILS(sw_tensor_reshape(a, two, 2, &r), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_tensor_reshape(a, wrong, 2, &r), SW_ERROR_VALUE, NULL);
  assert_null(r);
  sw_tensor_release(a);
}

static void test_view_fails_where_reshape_copies(void** state) {
  sw_runtime_t* rt = *state;
  const int64_t e23[] = {2, 3}, e6[] = {6};
  sw_tensor_t* a = make(rt, SW_DTYPE_F64, e23, 2, iota);
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_transpose(a, 0, 1, &t)); /* (3, 2), strides (2, 1) */
  /* Flattening the transpose is a view (a nested mode). */
  sw_tensor_t* flat = NULL;
  SW_OK_(sw_tensor_view(t, e6, 1, &flat));
  const double flat_want[] = {0, 2, 4, 1, 3, 5};
  expect_values(flat, flat_want, 6, 0);
  sw_tensor_release(flat);
  /* (3, 2)^T to (2, 3): mode 0 would take 2 of the extent-3 mode. */
  sw_tensor_t* v = NULL;
  SW_FAILS(sw_tensor_view(t, e23, 2, &v), SW_ERROR_VALUE, NULL);
  assert_null(v);
  sw_tensor_t* r = NULL;
  SW_OK_(sw_tensor_reshape(t, e23, 2, &r));
  expect_values(r, flat_want, 6, 0); /* same ordinal order, now a copy */
  const int64_t c00[] = {0, 0};
  SW_OK_(sw_tensor_set(r, c00, 2, 99.0));
  double x;
  SW_OK_(sw_tensor_get(a, c00, 2, &x));
  assert_true(x == 0.0); /* the copy does not alias */
  sw_tensor_release(r);
  sw_tensor_release(t);
  sw_tensor_release(a);
}

static void test_slice_select_alias(void** state) {
  sw_runtime_t* rt = *state;
  const int64_t e[] = {6, 4};
  sw_tensor_t* a = make(rt, SW_DTYPE_F32, e, 2, iota);
  /* a[1:5:2] along axis 0: rows 1 and 3. */
  sw_tensor_t* s = NULL;
  SW_OK_(sw_tensor_slice(a, 0, 1, 5, 2, &s));
  const int64_t es[] = {2, 4};
  expect_shape(s, es, 2);
  const double sw_[] = {1, 3, 7, 9, 13, 15, 19, 21};
  expect_values(s, sw_, 8, 0);
  /* Negative step and negative start: a[-1::-2] = rows 5, 3, 1. */
  sw_tensor_t* back = NULL;
  SW_OK_(sw_tensor_slice(a, 0, -1, INT64_MIN, -2, &back));
  const int64_t eb[] = {3, 4};
  expect_shape(back, eb, 2);
  double bv[12];
  values_of(back, bv, 12);
  assert_true(bv[0] == 5 && bv[1] == 3 && bv[2] == 1 && bv[3] == 11);
  sw_tensor_release(back);
  /* a[:, 1] and a[-1]. */
  sw_tensor_t *col = NULL, *last = NULL;
  SW_OK_(sw_tensor_select(a, 1, 1, &col));
  const double colv[] = {6, 7, 8, 9, 10, 11};
  expect_values(col, colv, 6, 0);
  SW_OK_(sw_tensor_select(a, 0, -1, &last));
  const double lastv[] = {5, 11, 17, 23};
  expect_values(last, lastv, 4, 0);
  sw_tensor_t* none = NULL;
  SW_FAILS(sw_tensor_select(a, 0, 6, &none), SW_ERROR_INDEX, NULL);
  SW_FAILS(sw_tensor_slice(a, 0, 0, 6, 0, &none), SW_ERROR_VALUE, NULL);
  assert_null(none);
  /* Writes through views reach the base, and bump the shared version. */
  uint64_t before = 0, after = 0;
  SW_OK_(sw_tensor_version(a, &before));
  SW_OK_(sw_tensor_fill(s, -1.0));
  SW_OK_(sw_tensor_version(a, &after));
  assert_true(after == before + 1);
  double v;
  const int64_t c30[] = {3, 0};
  SW_OK_(sw_tensor_get(a, c30, 2, &v));
  assert_true(v == -1.0);
  SW_OK_(sw_tensor_get(last, (const int64_t[]){0}, 1, &v));
  assert_true(v == 5.0);
  sw_tensor_release(col);
  sw_tensor_release(last);
  sw_tensor_release(s);
  sw_tensor_release(a);
}

static void test_unsqueeze_squeeze_expand(void** state) {
  sw_runtime_t* rt = *state;
  const int64_t e3[] = {3};
  sw_tensor_t* a = make(rt, SW_DTYPE_F32, e3, 1, iota);
  sw_tensor_t *u = NULL, *x = NULL, *sq = NULL;
  SW_OK_(sw_tensor_unsqueeze(a, 0, &u)); /* (1, 3) */
  const int64_t e13[] = {1, 3}, e43[] = {4, 3}, e_43[] = {4, -1};
  expect_shape(u, e13, 2);
  SW_OK_(sw_tensor_expand(u, e_43, 2, &x));
  expect_shape(x, e43, 2);
  const double xv[] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2};
  expect_values(x, xv, 12, 0);
  /* An expanded view reaches slots several times: no in-place write. */
  SW_FAILS(sw_tensor_fill(x, 1.0), SW_ERROR_VALUE, NULL);
  const int64_t e23[] = {2, 3};
  sw_tensor_t* bad = NULL;
  SW_FAILS(sw_tensor_expand(a, (const int64_t[]){2}, 1, &bad), SW_ERROR_VALUE, NULL);
  SW_OK_(sw_tensor_squeeze(u, NULL, 0, &sq));
  expect_shape(sq, e3, 1);
  sw_tensor_release(sq);
  (void)e23;
  sw_tensor_release(x);
  sw_tensor_release(u);
  sw_tensor_release(a);
}

/* ---- constructors and dtypes --------------------------------------------- */

static void test_constructors(void** state) {
  sw_runtime_t* rt = *state;
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_arange(rt, SW_DTYPE_I32, 1, 10, 3, &t));
  const double av[] = {1, 4, 7};
  expect_values(t, av, 3, 0);
  assert_int_equal(dtype_of(t), SW_DTYPE_I32);
  sw_tensor_release(t);
  SW_FAILS(sw_tensor_arange(rt, SW_DTYPE_F32, 0, 1, 0, &t), SW_ERROR_VALUE, NULL);
  const int64_t e[] = {2, 2};
  SW_OK_(sw_tensor_full(rt, SW_DTYPE_F64, e, 2, 2.5, &t));
  const double fv[] = {2.5, 2.5, 2.5, 2.5};
  expect_values(t, fv, 4, 0);
  sw_tensor_release(t);
  SW_FAILS(sw_tensor_full(rt, SW_DTYPE_I32, e, 2, 2.5, &t), SW_ERROR_VALUE, NULL);
  /* Random: the same seed gives the same values; uniform stays in range. */
  sw_random_desc_t d;
  sw_random_desc_init(&d);
  d.seed = 7;
  d.low = -2;
  d.high = 3;
  const int64_t e64[] = {64};
  sw_tensor_t *r1 = NULL, *r2 = NULL;
  SW_OK_(sw_tensor_random(rt, &d, e64, 1, &r1));
  SW_OK_(sw_tensor_random(rt, &d, e64, 1, &r2));
  double v1[64], v2[64];
  values_of(r1, v1, 64);
  values_of(r2, v2, 64);
  for (int i = 0; i < 64; ++i) {
    assert_true(v1[i] == v2[i]);
    assert_true(v1[i] >= -2 && v1[i] < 3);
  }
  sw_tensor_release(r2);
  d.seed = 8;
  SW_OK_(sw_tensor_random(rt, &d, e64, 1, &r2));
  values_of(r2, v2, 64);
  assert_true(v1[0] != v2[0] || v1[1] != v2[1]);
  sw_tensor_release(r1);
  sw_tensor_release(r2);
  d.dtype = SW_DTYPE_I32;
  SW_FAILS(sw_tensor_random(rt, &d, e64, 1, &r1), SW_ERROR_TYPE, NULL);
  d.dtype = SW_DTYPE_F32;
  d.struct_size = 3;
  SW_FAILS(sw_tensor_random(rt, &d, e64, 1, &r1), SW_ERROR_VALUE, NULL);
}

static void test_to_dtype_and_promotion(void** state) {
  sw_runtime_t* rt = *state;
  const int64_t e4[] = {4};
  const double fv[] = {2.7, -2.7, 1e10, NAN};
  sw_tensor_t* f = make(rt, SW_DTYPE_F64, e4, 1, fv);
  sw_tensor_t* i = NULL;
  SW_OK_(sw_tensor_to_dtype(f, SW_DTYPE_I32, &i));
  const double iv[] = {2, -2, 2147483647.0, 0}; /* truncate, saturate, NaN 0 */
  expect_values(i, iv, 4, 0);
  /* i32 + f32 is f32; i32 / i32 is f32; u8 + bool is u8. */
  sw_tensor_t* f32 = make(rt, SW_DTYPE_F32, e4, 1, (const double[]){0.5, 0.5, 0.5, 0.5});
  sw_tensor_t* s = NULL;
  SW_OK_(sw_binary(SW_BINARY_ADD, i, f32, &s));
  assert_int_equal(dtype_of(s), SW_DTYPE_F32);
  expect_values(s, (const double[]){2.5, -1.5, 2147483647.5, 0.5}, 4, 1e-7);
  sw_tensor_release(s);
  SW_OK_(sw_binary(SW_BINARY_DIV, i, i, &s));
  assert_int_equal(dtype_of(s), SW_DTYPE_F32);
  sw_tensor_release(s);
  sw_tensor_t* u8 = make(rt, SW_DTYPE_U8, e4, 1, (const double[]){250, 1, 2, 3});
  sw_tensor_t* b = make(rt, SW_DTYPE_BOOL, e4, 1, (const double[]){1, 0, 1, 0});
  SW_OK_(sw_binary(SW_BINARY_ADD, u8, b, &s));
  assert_int_equal(dtype_of(s), SW_DTYPE_U8);
  expect_values(s, (const double[]){251, 1, 3, 3}, 4, 0);
  sw_tensor_release(s);
  SW_FAILS(sw_binary(SW_BINARY_SUB, b, b, &s), SW_ERROR_TYPE, NULL);
  /* f16 with bf16 is f32; a weak scalar keeps the tensor's dtype. */
  sw_tensor_t *h = NULL, *bh = NULL;
  SW_OK_(sw_tensor_to_dtype(f32, SW_DTYPE_F16, &h));
  SW_OK_(sw_tensor_to_dtype(f32, SW_DTYPE_BF16, &bh));
  SW_OK_(sw_binary(SW_BINARY_MUL, h, bh, &s));
  assert_int_equal(dtype_of(s), SW_DTYPE_F32);
  expect_values(s, (const double[]){0.25, 0.25, 0.25, 0.25}, 4, 0);
  sw_tensor_release(s);
  SW_OK_(sw_binary_scalar(SW_BINARY_ADD, h, 0.25, &s));
  assert_int_equal(dtype_of(s), SW_DTYPE_F16);
  sw_tensor_release(s);
  SW_FAILS(sw_binary_scalar(SW_BINARY_ADD, i, 0.5, &s), SW_ERROR_VALUE, NULL);
  /* Integer arithmetic wraps. */
  SW_OK_(sw_binary_scalar(SW_BINARY_ADD, u8, 10, &s));
  expect_values(s, (const double[]){4, 11, 12, 13}, 4, 0);
  sw_tensor_release(s);
  sw_tensor_release(h);
  sw_tensor_release(bh);
  sw_tensor_release(u8);
  sw_tensor_release(b);
  sw_tensor_release(f32);
  sw_tensor_release(i);
  sw_tensor_release(f);
}

/* ---- ops: forward and VJPs ------------------------------------------------ */

static double ref_unary(sw_unary_op_t op, double x) {
  switch (op) {
    case SW_UNARY_NEG: return -x;
    case SW_UNARY_ABS: return fabs(x);
    case SW_UNARY_EXP: return exp(x);
    case SW_UNARY_LOG: return log(x);
    case SW_UNARY_SQRT: return sqrt(x);
    case SW_UNARY_RSQRT: return 1 / sqrt(x);
    case SW_UNARY_SILU: return x / (1 + exp(-x));
    case SW_UNARY_GELU: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case SW_UNARY_SIGMOID: return 1 / (1 + exp(-x));
    case SW_UNARY_TANH: return tanh(x);
    case SW_UNARY_RELU: return x > 0 ? x : 0;
    default: return NAN;
  }
}

/* Forward on a permuted (strided) f64 operand, and the VJP against central
 * differences of the reference. */
static void test_unary_forward_and_vjp(void** state) {
  sw_runtime_t* rt = *state;
  const sw_unary_op_t ops[] = {SW_UNARY_NEG, SW_UNARY_ABS, SW_UNARY_EXP, SW_UNARY_LOG, SW_UNARY_SQRT, SW_UNARY_RSQRT,
                               SW_UNARY_SILU, SW_UNARY_GELU, SW_UNARY_SIGMOID, SW_UNARY_TANH, SW_UNARY_RELU};
  const int64_t e[] = {3, 5};
  double base[15], positive[15];
  for (int i = 0; i < 15; ++i) {
    base[i] = -1.7 + 0.23 * i + (i == 7 ? 0.05 : 0); /* no element is 0 */
    positive[i] = 0.3 + 0.17 * i;
  }
  for (size_t k = 0; k < sizeof ops / sizeof ops[0]; ++k) {
    const sw_unary_op_t op = ops[k];
    const bool pos = op == SW_UNARY_LOG || op == SW_UNARY_SQRT || op == SW_UNARY_RSQRT;
    const double* v = pos ? positive : base;
    sw_tensor_t* a = make(rt, SW_DTYPE_F64, e, 2, v);
    SW_OK_(sw_tensor_set_requires_grad(a, true));
    sw_tensor_t* at = NULL;
    SW_OK_(sw_tensor_transpose(a, 0, 1, &at)); /* (5, 3): element (j, i) is a(i, j) */
    sw_tensor_t* y = NULL;
    SW_OK_(sw_unary(op, at, &y));
    double want[15];
    for (int j = 0; j < 5; ++j)
      for (int i = 0; i < 3; ++i) want[j + 5 * i] = ref_unary(op, v[i + 3 * j]);
    expect_values(y, want, 15, 1e-12);
    sw_tensor_t* loss = NULL;
    SW_OK_(sw_reduce(SW_REDUCE_SUM, y, NULL, 0, false, &loss));
    SW_OK_(sw_backward(loss, NULL, false));
    sw_tensor_t* g = NULL;
    SW_OK_(sw_tensor_grad(a, &g));
    double fd[15];
    for (int i = 0; i < 15; ++i) fd[i] = (ref_unary(op, v[i] + 1e-6) - ref_unary(op, v[i] - 1e-6)) / 2e-6;
    expect_values(g, fd, 15, 1e-6);
    sw_tensor_release(g);
    sw_tensor_release(loss);
    sw_tensor_release(y);
    sw_tensor_release(at);
    sw_tensor_release(a);
  }
  /* Bool takes no neg; unknown ops are VALUE. */
  double bits[15];
  for (int k = 0; k < 15; ++k) bits[k] = k % 2;
  sw_tensor_t* b = make(rt, SW_DTYPE_BOOL, e, 2, bits);
  sw_tensor_t* y = NULL;
  SW_FAILS(sw_unary(SW_UNARY_NEG, b, &y), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_unary((sw_unary_op_t)999, b, &y), SW_ERROR_VALUE, NULL);
  /* exp of an integer tensor is f32. */
  sw_tensor_t* i = NULL;
  SW_OK_(sw_tensor_to_dtype(b, SW_DTYPE_I32, &i));
  SW_OK_(sw_unary(SW_UNARY_EXP, i, &y));
  assert_int_equal(dtype_of(y), SW_DTYPE_F32);
  sw_tensor_release(y);
  sw_tensor_release(i);
  sw_tensor_release(b);
}

static void test_binary_compare_where(void** state) {
  sw_runtime_t* rt = *state;
  const int64_t e31[] = {3, 1}, e4[] = {4};
  const double av[] = {1, 2, 3}, bv[] = {0.5, 2, 4, -1};
  sw_tensor_t* a = make(rt, SW_DTYPE_F64, e31, 2, av);
  sw_tensor_t* b = make(rt, SW_DTYPE_F64, e4, 1, bv);
  SW_OK_(sw_tensor_set_requires_grad(a, true));
  SW_OK_(sw_tensor_set_requires_grad(b, true));
  sw_tensor_t *q = NULL, *p = NULL, *lt = NULL, *w = NULL;
  SW_OK_(sw_binary(SW_BINARY_DIV, a, b, &q)); /* (3, 4) broadcast */
  double want[12];
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 3; ++i) want[i + 3 * j] = av[i] / bv[j];
  expect_values(q, want, 12, 1e-15);
  SW_OK_(sw_binary(SW_BINARY_LT, a, b, &lt));
  assert_int_equal(dtype_of(lt), SW_DTYPE_BOOL);
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 3; ++i) want[i + 3 * j] = av[i] < bv[j];
  expect_values(lt, want, 12, 0);
  SW_OK_(sw_where(lt, a, b, &w));
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 3; ++i) want[i + 3 * j] = av[i] < bv[j] ? av[i] : bv[j];
  expect_values(w, want, 12, 0);
  SW_FAILS(sw_where(a, a, b, &p), SW_ERROR_TYPE, NULL);
  /* d/da sum(a / b + where) = sum_j 1 / b_j + count(a < b); d/db. */
  sw_tensor_t *s = NULL, *loss = NULL;
  SW_OK_(sw_binary(SW_BINARY_ADD, q, w, &s));
  SW_OK_(sw_reduce(SW_REDUCE_SUM, s, NULL, 0, false, &loss));
  SW_OK_(sw_backward(loss, NULL, false));
  sw_tensor_t *ga = NULL, *gb = NULL;
  SW_OK_(sw_tensor_grad(a, &ga));
  SW_OK_(sw_tensor_grad(b, &gb));
  double wa[3], wb[4];
  for (int i = 0; i < 3; ++i) {
    wa[i] = 0;
    for (int j = 0; j < 4; ++j) wa[i] += 1 / bv[j] + (av[i] < bv[j]);
  }
  for (int j = 0; j < 4; ++j) {
    wb[j] = 0;
    for (int i = 0; i < 3; ++i) wb[j] += -av[i] / (bv[j] * bv[j]) + !(av[i] < bv[j]);
  }
  expect_values(ga, wa, 3, 1e-14);
  expect_values(gb, wb, 4, 1e-14);
  /* pow and its gradient in the exponent. */
  sw_tensor_t* pw = NULL;
  SW_OK_(sw_binary_scalar(SW_BINARY_POW, b, 2.0, &pw));
  expect_values(pw, (const double[]){0.25, 4, 16, 1}, 4, 1e-15);
  sw_tensor_release(pw);
  sw_tensor_release(ga);
  sw_tensor_release(gb);
  sw_tensor_release(s);
  sw_tensor_release(loss);
  sw_tensor_release(w);
  sw_tensor_release(lt);
  sw_tensor_release(q);
  sw_tensor_release(a);
  sw_tensor_release(b);
}

static void test_reductions_softmax_topk(void** state) {
  sw_runtime_t* rt = *state;
  const int64_t e[] = {2, 4};
  /* rows (first mode): row 0 = 1 3 3 2, row 1 = 5 -1 0 5 */
  const double v[] = {1, 5, 3, -1, 3, 0, 2, 5};
  sw_tensor_t* a = make(rt, SW_DTYPE_F64, e, 2, v);
  SW_OK_(sw_tensor_set_requires_grad(a, true));
  sw_tensor_t *vals = NULL, *idx = NULL;
  SW_OK_(sw_topk(a, 2, 1, &vals, &idx));
  assert_int_equal(dtype_of(idx), SW_DTYPE_I64);
  expect_values(vals, (const double[]){3, 5, 3, 5}, 4, 0);
  expect_values(idx, (const double[]){1, 0, 2, 3}, 4, 0); /* ties to the lower index */
  sw_tensor_t *mx = NULL, *mi = NULL;
  SW_OK_(sw_reduce_index(SW_REDUCE_MAX, a, 1, false, &mx, &mi));
  expect_values(mx, (const double[]){3, 5}, 2, 0);
  expect_values(mi, (const double[]){1, 0}, 2, 0);
  sw_tensor_t* mean = NULL;
  SW_OK_(sw_reduce(SW_REDUCE_MEAN, a, (const int64_t[]){-1}, 1, true, &mean));
  expect_shape(mean, (const int64_t[]){2, 1}, 2);
  expect_values(mean, (const double[]){2.25, 2.25}, 2, 1e-15);
  sw_tensor_t* full_min = NULL;
  SW_OK_(sw_reduce(SW_REDUCE_MIN, a, NULL, 0, false, &full_min));
  expect_values(full_min, (const double[]){-1}, 1, 0);
  sw_tensor_t *sm = NULL, *lsm = NULL;
  SW_OK_(sw_softmax(a, 1, &sm));
  SW_OK_(sw_log_softmax(a, 1, &lsm));
  double want[8], lwant[8];
  for (int r = 0; r < 2; ++r) {
    double mxv = -INFINITY, sum = 0;
    for (int c = 0; c < 4; ++c) mxv = fmax(mxv, v[r + 2 * c]);
    for (int c = 0; c < 4; ++c) sum += exp(v[r + 2 * c] - mxv);
    for (int c = 0; c < 4; ++c) {
      want[r + 2 * c] = exp(v[r + 2 * c] - mxv) / sum;
      lwant[r + 2 * c] = v[r + 2 * c] - mxv - log(sum);
    }
  }
  expect_values(sm, want, 8, 1e-14);
  expect_values(lsm, lwant, 8, 1e-14);
  /* Gradients: topk and max flow to the selected elements. */
  sw_tensor_t *s1 = NULL, *s2 = NULL, *s = NULL;
  SW_OK_(sw_reduce(SW_REDUCE_SUM, vals, NULL, 0, false, &s1));
  SW_OK_(sw_reduce(SW_REDUCE_SUM, mx, NULL, 0, false, &s2));
  SW_OK_(sw_binary(SW_BINARY_ADD, s1, s2, &s));
  SW_OK_(sw_backward(s, NULL, false));
  sw_tensor_t* g = NULL;
  SW_OK_(sw_tensor_grad(a, &g));
  /* row 0: topk picks cols 1, 2, max col 1; row 1: topk cols 0, 3, max col 0 */
  expect_values(g, (const double[]){0, 2, 2, 0, 1, 0, 0, 1}, 8, 0);
  SW_FAILS(sw_topk(a, 5, 1, &vals, &idx), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_reduce(SW_REDUCE_SUM, a, (const int64_t[]){2}, 1, false, &s), SW_ERROR_INDEX, NULL);
  sw_tensor_release(g);
  sw_tensor_release(s);
  sw_tensor_release(s1);
  sw_tensor_release(s2);
  sw_tensor_release(sm);
  sw_tensor_release(lsm);
  sw_tensor_release(full_min);
  sw_tensor_release(mean);
  sw_tensor_release(mx);
  sw_tensor_release(mi);
  sw_tensor_release(vals);
  sw_tensor_release(idx);
  sw_tensor_release(a);
}

static void test_index_ops_cat_stack(void** state) {
  sw_runtime_t* rt = *state;
  const int64_t e[] = {3, 2};
  sw_tensor_t* a = make(rt, SW_DTYPE_F64, e, 2, iota); /* rows (0 3) (1 4) (2 5) */
  SW_OK_(sw_tensor_set_requires_grad(a, true));
  sw_tensor_t* idx = make(rt, SW_DTYPE_I32, (const int64_t[]){3}, 1, (const double[]){2, 0, 2});
  sw_tensor_t* rows = NULL;
  SW_OK_(sw_index_select(a, 0, idx, &rows));
  expect_values(rows, (const double[]){2, 0, 2, 5, 3, 5}, 6, 0);
  sw_tensor_t* loss = NULL;
  SW_OK_(sw_reduce(SW_REDUCE_SUM, rows, NULL, 0, false, &loss));
  SW_OK_(sw_backward(loss, NULL, false));
  sw_tensor_t* g = NULL;
  SW_OK_(sw_tensor_grad(a, &g));
  expect_values(g, (const double[]){1, 0, 2, 1, 0, 2}, 6, 0); /* repeated rows accumulate */
  sw_tensor_release(g);
  sw_tensor_release(loss);
  sw_tensor_t* bad = make(rt, SW_DTYPE_I64, (const int64_t[]){1}, 1, (const double[]){3});
  sw_tensor_t* out = NULL;
  SW_FAILS(sw_index_select(a, 0, bad, &out), SW_ERROR_INDEX, NULL);
  SW_FAILS(sw_index_select(a, 0, a, &out), SW_ERROR_TYPE, NULL);
  /* gather along axis 1 and its adjoint scatter_add. */
  sw_tensor_t* gi = make(rt, SW_DTYPE_I64, e, 2, (const double[]){1, 0, 1, 0, 0, 0});
  sw_tensor_t* gat = NULL;
  SW_OK_(sw_gather(a, 1, gi, &gat));
  expect_values(gat, (const double[]){3, 1, 5, 0, 1, 2}, 6, 0);
  sw_tensor_t* z = NULL;
  SW_OK_(sw_tensor_zeros(rt, SW_DTYPE_F64, e, 2, &z));
  sw_tensor_t* sc = NULL;
  SW_OK_(sw_scatter_add(z, 1, gi, gat, &sc));
  expect_values(sc, (const double[]){0, 2, 2, 3, 0, 5}, 6, 0);
  sw_tensor_t* ia = NULL;
  SW_OK_(sw_index_add(z, 0, idx, rows, &ia));
  expect_values(ia, (const double[]){0, 0, 4, 3, 0, 10}, 6, 0);
  /* cat and stack. */
  sw_tensor_t* pair[] = {a, rows};
  sw_tensor_t *c = NULL, *st = NULL;
  SW_OK_(sw_cat(pair, 2, 0, &c));
  expect_shape(c, (const int64_t[]){6, 2}, 2);
  expect_values(c, (const double[]){0, 1, 2, 2, 0, 2, 3, 4, 5, 5, 3, 5}, 12, 0);
  SW_OK_(sw_stack(pair, 2, -1, &st));
  expect_shape(st, (const int64_t[]){3, 2, 2}, 3);
  SW_FAILS(sw_cat(pair, 0, 0, &out), SW_ERROR_VALUE, NULL);
  sw_tensor_release(st);
  sw_tensor_release(c);
  sw_tensor_release(ia);
  sw_tensor_release(sc);
  sw_tensor_release(z);
  sw_tensor_release(gat);
  sw_tensor_release(gi);
  sw_tensor_release(bad);
  sw_tensor_release(rows);
  sw_tensor_release(idx);
  sw_tensor_release(a);
}

/* ---- in-place ops ----------------------------------------------------------- */

static void test_inplace_rules(void** state) {
  sw_runtime_t* rt = *state;
  const int64_t e[] = {3};
  sw_tensor_t* x = make(rt, SW_DTYPE_F64, e, 1, (const double[]){1, 2, 3});
  SW_OK_(sw_tensor_set_requires_grad(x, true));
  /* A leaf that requires grad is refused; nothing changes. */
  uint64_t v0 = 0, v1 = 0;
  SW_OK_(sw_tensor_version(x, &v0));
  SW_FAILS(sw_binary_scalar_inplace(SW_BINARY_ADD, x, 1.0), SW_ERROR_STATE, NULL);
  SW_FAILS(sw_tensor_fill(x, 0.0), SW_ERROR_STATE, NULL);
  SW_OK_(sw_tensor_version(x, &v1));
  assert_true(v0 == v1);
  expect_values(x, (const double[]){1, 2, 3}, 3, 0);
  /* Under no-grad it is allowed (an optimiser step) and bumps the version. */
  const bool prev = sw_set_grad_enabled(false);
  SW_OK_(sw_binary_scalar_inplace(SW_BINARY_MUL, x, 2.0));
  sw_set_grad_enabled(prev);
  SW_OK_(sw_tensor_version(x, &v1));
  assert_true(v1 == v0 + 1);
  expect_values(x, (const double[]){2, 4, 6}, 3, 0);
  /* A saved tensor modified in place makes backward fail STATE. */
  sw_tensor_t *y = NULL, *z = NULL, *loss = NULL;
  SW_OK_(sw_unary(SW_UNARY_EXP, x, &y));
  SW_OK_(sw_binary(SW_BINARY_MUL, y, y, &z)); /* saves y */
  SW_OK_(sw_binary_scalar_inplace(SW_BINARY_ADD, y, 1.0));
  SW_OK_(sw_reduce(SW_REDUCE_SUM, z, NULL, 0, false, &loss));
  SW_FAILS(sw_backward(loss, NULL, false), SW_ERROR_STATE, "modified in-place");
  sw_tensor_release(loss);
  sw_tensor_release(z);
  /* An in-place op on a non-leaf records: d/dx sum((x + x) * 3 - 1) = 6
   * (exp would not do: it saves its output, which PyTorch also refuses). */
  SW_OK_(sw_binary(SW_BINARY_ADD, x, x, &z));
  SW_OK_(sw_binary_scalar_inplace(SW_BINARY_MUL, z, 3.0));
  SW_OK_(sw_binary_scalar_inplace(SW_BINARY_SUB, z, 1.0));
  SW_OK_(sw_reduce(SW_REDUCE_SUM, z, NULL, 0, false, &loss));
  SW_OK_(sw_backward(loss, NULL, false));
  sw_tensor_t* g = NULL;
  SW_OK_(sw_tensor_grad(x, &g));
  expect_values(g, (const double[]){6, 6, 6}, 3, 0);
  /* Type rules: an integer tensor cannot take a float result in place. */
  sw_tensor_t* i = make(rt, SW_DTYPE_I32, e, 1, (const double[]){1, 2, 3});
  SW_FAILS(sw_binary_inplace(SW_BINARY_ADD, i, x), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_binary_scalar_inplace(SW_BINARY_DIV, i, 2.0), SW_ERROR_TYPE, NULL);
  SW_OK_(sw_binary_scalar_inplace(SW_BINARY_ADD, i, 2.0));
  expect_values(i, (const double[]){3, 4, 5}, 3, 0);
  /* copy_from broadcasts and converts. */
  sw_tensor_t* one = make(rt, SW_DTYPE_F64, (const int64_t[]){1}, 1, (const double[]){7.9});
  SW_OK_(sw_tensor_copy_from(i, one));
  expect_values(i, (const double[]){7, 7, 7}, 3, 0);
  sw_tensor_release(one);
  sw_tensor_release(i);
  sw_tensor_release(g);
  sw_tensor_release(loss);
  sw_tensor_release(z);
  sw_tensor_release(y);
  sw_tensor_release(x);
}


/* Copies and conversions of transposed views (a row-major array seen first
 * mode fastest), which the CPU backend makes in tiles: every element lands
 * where the plain walk puts it, across ragged tile edges (extents not
 * multiples of the tile), an outer mode, a reversed mode and element sizes
 * of 1, 2, 4 and 8 bytes. The expected conversion is that of a dense copy
 * (whose strides match the result's, so no tiles). */
static void test_transposed_copies(void** state) {
  sw_runtime_t* rt = *state;
  enum { A = 70, B = 3, C = 131 };
  const int64_t ext[3] = {A, B, C};
  double* data = malloc(sizeof(double) * A * B * C);
  assert_non_null(data);
  for (int64_t i = 0; i < A * B * C; ++i) data[i] = (double)((i * 37) % 251) - 100.0 + 0.25;
  sw_tensor_t* base = NULL;
  SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_F64, ext, 3, data, &base));
  const sw_dtype_t from[] = {SW_DTYPE_F64, SW_DTYPE_F32, SW_DTYPE_I32, SW_DTYPE_BF16, SW_DTYPE_U8};
  const sw_dtype_t to[] = {SW_DTYPE_F32, SW_DTYPE_F64, SW_DTYPE_F16, SW_DTYPE_U8, SW_DTYPE_BOOL, SW_DTYPE_I64};
  const size_t order[3] = {2, 1, 0}; /* (C, B, A): mode 0 runs along the base's last mode */
  for (size_t f = 0; f < sizeof from / sizeof from[0]; ++f) {
    sw_tensor_t *typed = NULL, *perm = NULL, *view = NULL, *dense = NULL;
    SW_OK_(sw_tensor_to_dtype(base, from[f], &typed));
    SW_OK_(sw_tensor_permute(typed, order, 3, &perm));
    SW_OK_(sw_tensor_slice(perm, 1, INT64_MAX, INT64_MIN, -1, &view)); /* B reversed */
    SW_OK_(sw_tensor_contiguous(view, &dense));
    for (int64_t c = 0; c < C; ++c)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t a = 0; a < A; ++a) {
          const int64_t at[3] = {c, b, a}, src[3] = {a, B - 1 - b, c};
          double got = 0, want = 0;
          SW_OK_(sw_tensor_get(dense, at, 3, &got));
          SW_OK_(sw_tensor_get(typed, src, 3, &want));
          if (got != want)
            fail_msg("%s copy: element (%lld, %lld, %lld) = %g, expected %g", sw_dtype_name(from[f]), (long long)c,
                     (long long)b, (long long)a, got, want);
        }
    for (size_t t = 0; t < sizeof to / sizeof to[0]; ++t) {
      sw_tensor_t *out = NULL, *expected = NULL;
      SW_OK_(sw_tensor_to_dtype(view, to[t], &out));
      SW_OK_(sw_tensor_to_dtype(dense, to[t], &expected));
      for (int64_t c = 0; c < C; ++c)
        for (int64_t b = 0; b < B; ++b)
          for (int64_t a = 0; a < A; ++a) {
            const int64_t at[3] = {c, b, a};
            double got = 0, want = 0;
            SW_OK_(sw_tensor_get(out, at, 3, &got));
            SW_OK_(sw_tensor_get(expected, at, 3, &want));
            if (got != want)
              fail_msg("%s -> %s: element (%lld, %lld, %lld) = %g, expected %g", sw_dtype_name(from[f]),
                       sw_dtype_name(to[t]), (long long)c, (long long)b, (long long)a, got, want);
          }
      sw_tensor_release(expected);
      sw_tensor_release(out);
    }
    sw_tensor_release(dense);
    sw_tensor_release(view);
    sw_tensor_release(perm);
    sw_tensor_release(typed);
  }
  sw_tensor_release(base);
  free(data);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reshape_is_first_mode_fastest),
      cmocka_unit_test(test_view_fails_where_reshape_copies),
      cmocka_unit_test(test_slice_select_alias),
      cmocka_unit_test(test_unsqueeze_squeeze_expand),
      cmocka_unit_test(test_constructors),
      cmocka_unit_test(test_to_dtype_and_promotion),
      cmocka_unit_test(test_transposed_copies),
      cmocka_unit_test(test_unary_forward_and_vjp),
      cmocka_unit_test(test_binary_compare_where),
      cmocka_unit_test(test_reductions_softmax_topk),
      cmocka_unit_test(test_index_ops_cat_stack),
      cmocka_unit_test(test_inplace_rules),
  };
  return sw_test_result(cmocka_run_group_tests(tests, setup, sw_test_runtime_teardown));
}
