/* Reverse mode through the public ABI: every op's VJP against central finite
 * differences in f64, cotangent rules, accumulation, graph retention, the
 * saved-version check and per-thread grad mode. */
#include <pthread.h>

#include "sw_ops_test.h"

/* ------------------------------------------------------------------------ */
/* Finite-difference gradient checks                                        */
/* ------------------------------------------------------------------------ */

/* A differentiable function of `in` (dense f64 leaves); returns a new tensor
 * and releases every intermediate it made. */
typedef sw_tensor_t* (*graph_fn)(sw_tensor_t* const* in, const void* ctx);

/* <out, w> in double. */
static double dot_with(const sw_tensor_t* out, const double* w, int64_t n) {
  double* v = (double*)malloc(sizeof(double) * (size_t)(n ? n : 1));
  int64_t m = 0;
  SW_OK_(sw_tensor_numel(out, &m));
  assert_int_equal(m, n);
  SW_OK_(sw_tensor_read(out, v, sizeof(double) * (size_t)n));
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += v[i] * w[i];
  free(v);
  return s;
}

/* Checks the gradients that sw_backward leaves on each input of `fn` against
 * central differences (eps 1e-6) of L = <fn(in), W> for a fixed cotangent W. */
static void gradcheck(sw_runtime_t* rt, const char* what, graph_fn fn, const void* ctx, operand* in, size_t count) {
  sw_tensor_t* leaves[4];
  for (size_t i = 0; i < count; ++i) {
    SW_OK_(sw_tensor_set_requires_grad(in[i].t, true));
    leaves[i] = in[i].t;
  }
  sw_tensor_t* out = fn(leaves, ctx);
  bool rg = false;
  SW_OK_(sw_tensor_requires_grad(out, &rg));
  assert_true(rg);
  size_t rank = 0;
  int64_t shape[SW_MAX_RANK];
  SW_OK_(sw_tensor_rank(out, &rank));
  SW_OK_(sw_tensor_shape(out, shape, SW_MAX_RANK));
  operand w = op_dense(rt, SW_DTYPE_F64, shape, rank, pat_smooth, 99);
  SW_OK_(sw_backward(out, w.t, false));
  sw_tensor_release(out);

  const double eps = 1e-6;
  const bool previous = sw_set_grad_enabled(false);
  for (size_t i = 0; i < count; ++i) {
    sw_tensor_t* g = NULL;
    SW_OK_(sw_tensor_grad(in[i].t, &g));
    if (!g) fail_msg("%s: input %zu has no gradient", what, i);
    double* got = result_values(g, SW_DTYPE_F64, in[i].shape, in[i].rank);
    sw_tensor_release(g);
    for (int64_t j = 0; j < in[i].n; ++j) {
      double lp = 0, lm = 0;
      for (int side = 0; side < 2; ++side) {
        operand moved = operand_alloc(in[i].rank, in[i].shape);
        memcpy(moved.v, in[i].v, sizeof(double) * (size_t)in[i].n);
        moved.v[j] += side == 0 ? eps : -eps;
        operand fresh = op_values(rt, SW_DTYPE_F64, in[i].shape, in[i].rank, moved.v);
        sw_tensor_t* args[4];
        for (size_t k = 0; k < count; ++k) args[k] = k == i ? fresh.t : in[k].t;
        sw_tensor_t* y = fn(args, ctx);
        *(side == 0 ? &lp : &lm) = dot_with(y, w.v, w.n);
        sw_tensor_release(y);
        operand_free(&fresh);
        operand_free(&moved);
      }
      const double fd = (lp - lm) / (2 * eps);
      if (!(fabs(got[j] - fd) <= 1e-6 * (1.0 + fabs(fd))))
        fail_msg("%s: d/d input %zu [%lld] is %.12g, finite differences give %.12g", what, i, (long long)j, got[j],
                 fd);
    }
    free(got);
  }
  sw_set_grad_enabled(previous);
  operand_free(&w);
}

/* The graph functions. ctx carries op parameters where needed. */
static sw_tensor_t* f_add(sw_tensor_t* const* in, const void* ctx) {
  (void)ctx;
  sw_tensor_t* r = NULL;
  SW_OK_(sw_add(in[0], in[1], &r));
  return r;
}

static sw_tensor_t* f_mul(sw_tensor_t* const* in, const void* ctx) {
  (void)ctx;
  sw_tensor_t* r = NULL;
  SW_OK_(sw_mul(in[0], in[1], &r));
  return r;
}

static sw_tensor_t* f_elementwise_mul(sw_tensor_t* const* in, const void* ctx) {
  (void)ctx;
  sw_tensor_t* r = NULL;
  SW_OK_(sw_elementwise_mul(in[0], in[1], &r));
  return r;
}

static sw_tensor_t* f_mul_scalar(sw_tensor_t* const* in, const void* ctx) {
  sw_tensor_t* r = NULL;
  SW_OK_(sw_mul_scalar(in[0], *(const double*)ctx, &r));
  return r;
}

static sw_tensor_t* f_scalar_mul(sw_tensor_t* const* in, const void* ctx) {
  sw_tensor_t* r = NULL;
  SW_OK_(sw_scalar_mul(*(const double*)ctx, in[0], &r));
  return r;
}

static sw_tensor_t* f_relu(sw_tensor_t* const* in, const void* ctx) {
  (void)ctx;
  sw_tensor_t* r = NULL;
  SW_OK_(sw_relu(in[0], &r));
  return r;
}

typedef struct reduce_args {
  const int64_t* axes;
  size_t count;
  bool keepdims;
} reduce_args;

static sw_tensor_t* f_reduce_sum(sw_tensor_t* const* in, const void* ctx) {
  const reduce_args* a = (const reduce_args*)ctx;
  sw_tensor_t* r = NULL;
  SW_OK_(sw_reduce_sum(in[0], a->axes, a->count, a->keepdims, &r));
  return r;
}

static sw_tensor_t* f_matmul(sw_tensor_t* const* in, const void* ctx) {
  (void)ctx;
  sw_tensor_t* r = NULL;
  SW_OK_(sw_matmul(in[0], in[1], &r));
  return r;
}

/* matmul(transpose(a), b). */
static sw_tensor_t* f_matmul_at(sw_tensor_t* const* in, const void* ctx) {
  (void)ctx;
  sw_tensor_t *t = NULL, *r = NULL;
  SW_OK_(sw_tensor_transpose(in[0], 0, 1, &t));
  SW_OK_(sw_matmul(t, in[1], &r));
  sw_tensor_release(t);
  return r;
}

/* mul(permute(a, perm), b). */
static sw_tensor_t* f_permute_mul(sw_tensor_t* const* in, const void* ctx) {
  const size_t* perm = (const size_t*)ctx;
  sw_tensor_t *p = NULL, *r = NULL;
  SW_OK_(sw_tensor_permute(in[0], perm, 3, &p));
  SW_OK_(sw_mul(p, in[1], &r));
  sw_tensor_release(p);
  return r;
}

/* sum(relu(x @ w + bias) * 0.5), a one-element result. */
static sw_tensor_t* f_layer(sw_tensor_t* const* in, const void* ctx) {
  (void)ctx;
  sw_tensor_t *h = NULL, *hb = NULL, *a = NULL, *s = NULL, *r = NULL;
  SW_OK_(sw_matmul(in[0], in[1], &h));
  SW_OK_(sw_add(h, in[2], &hb));
  SW_OK_(sw_relu(hb, &a));
  SW_OK_(sw_mul_scalar(a, 0.5, &s));
  SW_OK_(sw_reduce_sum(s, NULL, 0, false, &r));
  sw_tensor_release(h);
  sw_tensor_release(hb);
  sw_tensor_release(a);
  sw_tensor_release(s);
  return r;
}

static void free_all(operand* in, size_t count) {
  for (size_t i = 0; i < count; ++i) operand_free(&in[i]);
}

/* Two f64 operands of the given shapes with smooth values. */
static void make2(sw_runtime_t* rt, operand* in, const int64_t* sa, size_t ra, const int64_t* sb, size_t rb) {
  in[0] = op_dense(rt, SW_DTYPE_F64, sa, ra, pat_smooth, 1);
  in[1] = op_dense(rt, SW_DTYPE_F64, sb, rb, pat_smooth, 2);
}

static void vjp_add_and_mul(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  static const struct {
    size_t ra;
    int64_t a[3];
    size_t rb;
    int64_t b[3];
  } shapes[] = {
      {2, {2, 3}, 2, {2, 3}},  {2, {3, 1}, 2, {1, 4}},  {1, {5}, 2, {2, 5}},
      {0, {0}, 3, {2, 3, 2}},  {3, {3, 1, 2}, 2, {4, 1}}, {1, {1}, 2, {3, 2}},
  };
  const graph_fn fns[3] = {f_add, f_mul, f_elementwise_mul};
  const char* names[3] = {"add", "mul", "elementwise_mul"};
  for (size_t f = 0; f < 3; ++f)
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; ++c) {
      operand in[2];
      make2(rt, in, shapes[c].a, shapes[c].ra, shapes[c].b, shapes[c].rb);
      char what[64];
      snprintf(what, sizeof what, "%s case %zu", names[f], c);
      gradcheck(rt, what, fns[f], NULL, in, 2);
      free_all(in, 2);
    }
  /* The same tensor on both sides. */
  const int64_t s[2] = {2, 3};
  operand x = op_dense(rt, SW_DTYPE_F64, s, 2, pat_smooth, 3);
  SW_OK_(sw_tensor_set_requires_grad(x.t, true));
  sw_tensor_t* y = NULL;
  SW_OK_(sw_mul(x.t, x.t, &y));
  operand w = op_dense(rt, SW_DTYPE_F64, s, 2, pat_smooth, 4);
  SW_OK_(sw_backward(y, w.t, false));
  sw_tensor_t* g = NULL;
  SW_OK_(sw_tensor_grad(x.t, &g));
  double want[6], tol[6];
  for (int i = 0; i < 6; ++i) {
    want[i] = 2 * x.v[i] * w.v[i];
    tol[i] = 1e-15 * (1 + fabs(want[i]));
  }
  double* got = result_values(g, SW_DTYPE_F64, s, 2);
  expect_within("d(x*x)", got, want, tol, 6);
  free(got);
  sw_tensor_release(g);
  sw_tensor_release(y);
  operand_free(&w);
  operand_free(&x);
}

static void vjp_scalar_mul_and_relu(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t s[3] = {2, 3, 2};
  const double k = -1.7, k2 = 2.5;
  operand in = op_dense(rt, SW_DTYPE_F64, s, 3, pat_smooth, 1);
  gradcheck(rt, "mul_scalar", f_mul_scalar, &k, &in, 1);
  operand_free(&in);
  in = op_dense(rt, SW_DTYPE_F64, s, 3, pat_smooth, 2);
  gradcheck(rt, "scalar_mul", f_scalar_mul, &k2, &in, 1);
  operand_free(&in);
  /* relu away from 0: every value is at least 0.25 from it. */
  in = op_dense(rt, SW_DTYPE_F64, s, 3, pat_quarter, 3);
  gradcheck(rt, "relu", f_relu, NULL, &in, 1);
  operand_free(&in);
  in = op_strided(rt, SW_DTYPE_F64, "():()", 0, pat_quarter, 4);
  gradcheck(rt, "relu of a scalar", f_relu, NULL, &in, 1);
  operand_free(&in);
}

static void vjp_reduce_sum(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t s[3] = {2, 3, 4};
  const int64_t ax1[1] = {1}, ax02[2] = {0, 2}, axneg[2] = {-1, -3}, ax012[3] = {2, 1, 0};
  const reduce_args cases[] = {
      {ax1, 1, false}, {ax1, 1, true},   {ax02, 2, false}, {ax02, 2, true}, {axneg, 2, false},
      {NULL, 0, false}, {NULL, 0, true}, {ax012, 3, true}, {ax1, 0, false},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    operand in = op_dense(rt, SW_DTYPE_F64, s, 3, pat_smooth, (int)c);
    char what[64];
    snprintf(what, sizeof what, "reduce_sum case %zu", c);
    gradcheck(rt, what, f_reduce_sum, &cases[c], &in, 1);
    operand_free(&in);
  }
}

static void vjp_matmul(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  static const struct {
    size_t ra;
    int64_t a[4];
    size_t rb;
    int64_t b[4];
  } shapes[] = {
      {2, {3, 4}, 2, {4, 2}},          /* 2-D */
      {3, {2, 3, 4}, 3, {2, 4, 2}},    /* batched */
      {4, {2, 1, 2, 3}, 3, {3, 3, 2}}, /* batch broadcast */
      {3, {2, 2, 3}, 2, {3, 2}},       /* batch against a matrix */
      {1, {4}, 2, {4, 3}},             /* rank-1 left */
      {2, {3, 4}, 1, {4}},             /* rank-1 right */
      {1, {5}, 1, {5}},                /* dot product */
      {3, {2, 3, 4}, 1, {4}},          /* batch @ vector */
      {1, {4}, 3, {2, 4, 3}},          /* vector @ batch */
      {2, {1, 1}, 2, {1, 1}},
  };
  for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; ++c) {
    operand in[2];
    make2(rt, in, shapes[c].a, shapes[c].ra, shapes[c].b, shapes[c].rb);
    char what[64];
    snprintf(what, sizeof what, "matmul case %zu", c);
    gradcheck(rt, what, f_matmul, NULL, in, 2);
    free_all(in, 2);
  }
}

/* Gradients flow back through permute views to the leaf's own layout. */
static void vjp_through_permute_views(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  operand in[3];
  const int64_t s43[2] = {4, 3}, s45[2] = {4, 5};
  make2(rt, in, s43, 2, s45, 2);
  gradcheck(rt, "matmul(a^T, b)", f_matmul_at, NULL, in, 2);
  free_all(in, 2);
  const int64_t s234[3] = {2, 3, 4}, s21[2] = {2, 1};
  const size_t perm[3] = {2, 0, 1}; /* (4,2,3) */
  const int64_t s423[3] = {4, 2, 3};
  make2(rt, in, s234, 3, s423, 3);
  gradcheck(rt, "mul(permute(a), b)", f_permute_mul, perm, in, 2);
  free_all(in, 2);
  make2(rt, in, s234, 3, s21, 2); /* (2,1) stretches against the permuted (4,2,3) */
  gradcheck(rt, "mul(permute(a), broadcast b)", f_permute_mul, perm, in, 2);
  free_all(in, 2);
  /* A small network whose loss has one element. */
  const int64_t sx[2] = {3, 4}, sw[2] = {4, 2}, sb[1] = {2};
  in[0] = op_dense(rt, SW_DTYPE_F64, sx, 2, pat_smooth, 5);
  in[1] = op_dense(rt, SW_DTYPE_F64, sw, 2, pat_smooth, 6);
  in[2] = op_dense(rt, SW_DTYPE_F64, sb, 1, pat_smooth, 7);
  gradcheck(rt, "relu(x @ w + b)", f_layer, NULL, in, 3);
  free_all(in, 3);
}

/* Leaves on strided, offset, negative-stride and nested layouts get dense
 * gradients of their shape. */
static void vjp_of_strided_leaves(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  operand in[2];
  in[0] = op_strided(rt, SW_DTYPE_F64, "(3,4):(-1,-3)", 2, pat_smooth, 1);
  in[1] = op_strided(rt, SW_DTYPE_F64, "((2,2),(2,2)):((4,2),(1,8))", 5, pat_smooth, 2);
  gradcheck(rt, "matmul of strided leaves", f_matmul, NULL, in, 2);
  free_all(in, 2);
  in[0] = op_strided(rt, SW_DTYPE_F64, "((2,3),5):((1,10),2)", 1, pat_smooth, 3);
  in[1] = op_strided(rt, SW_DTYPE_F64, "(1,5):(9,-3)", 0, pat_smooth, 4);
  gradcheck(rt, "mul of strided leaves", f_mul, NULL, in, 2);
  free_all(in, 2);
  const int64_t ax0[1] = {0};
  const reduce_args r = {ax0, 1, true};
  in[0] = op_strided(rt, SW_DTYPE_F64, "(3,(2,2)):(7,(-1,2))", 4, pat_smooth, 5);
  gradcheck(rt, "reduce_sum of a nested leaf", f_reduce_sum, &r, in, 1);
  free_all(in, 1);
}

/* ------------------------------------------------------------------------ */
/* Cotangents                                                                */
/* ------------------------------------------------------------------------ */

static double* grad_values(const operand* x, sw_dtype_t dtype) {
  sw_tensor_t* g = NULL;
  SW_OK_(sw_tensor_grad(x->t, &g));
  if (!g) fail_msg("no gradient");
  double* v = result_values(g, dtype, x->shape, x->rank);
  sw_tensor_release(g);
  return v;
}

static void assert_no_grad(const operand* x) {
  sw_tensor_t* g = (sw_tensor_t*)(uintptr_t)1;
  SW_OK_(sw_tensor_grad(x->t, &g));
  assert_null(g);
}

static void null_cotangent_for_one_element(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t s23[2] = {2, 3}, s11[2] = {1, 1};
  /* sum over everything: rank 0, d/dx = 1 everywhere. */
  operand x = op_dense(rt, SW_DTYPE_F32, s23, 2, pat_int, 1);
  SW_OK_(sw_tensor_set_requires_grad(x.t, true));
  sw_tensor_t* y = NULL;
  SW_OK_(sw_reduce_sum(x.t, NULL, 0, false, &y));
  SW_OK_(sw_backward(y, NULL, false));
  double* g = grad_values(&x, SW_DTYPE_F32);
  const double ones[6] = {1, 1, 1, 1, 1, 1};
  expect_exact("d sum / dx", g, ones, 6);
  free(g);
  sw_tensor_release(y);
  /* A (1,1) result also takes NULL: d(x*x)/dx = 2x. */
  operand z = op_dense(rt, SW_DTYPE_F64, s11, 2, pat_int, 2);
  SW_OK_(sw_tensor_set_requires_grad(z.t, true));
  SW_OK_(sw_mul(z.t, z.t, &y));
  SW_OK_(sw_backward(y, NULL, false));
  g = grad_values(&z, SW_DTYPE_F64);
  const double want = 2 * z.v[0];
  expect_exact("d(z*z)/dz", g, &want, 1);
  free(g);
  sw_tensor_release(y);
  /* NULL for a multi-element tensor is VALUE, and writes nothing. */
  operand u = op_dense(rt, SW_DTYPE_F32, s23, 2, pat_int, 3);
  SW_OK_(sw_tensor_set_requires_grad(u.t, true));
  SW_OK_(sw_mul_scalar(u.t, 2.0, &y));
  SW_FAILS(sw_backward(y, NULL, false), SW_ERROR_VALUE, NULL);
  assert_no_grad(&u);
  /* The graph is intact after the failure. */
  operand w = op_dense(rt, SW_DTYPE_F32, s23, 2, pat_int, 4);
  SW_OK_(sw_backward(y, w.t, false));
  g = grad_values(&u, SW_DTYPE_F32);
  double want2[6];
  for (int i = 0; i < 6; ++i) want2[i] = 2 * w.v[i];
  expect_exact("d(2u)/du", g, want2, 6);
  free(g);
  sw_tensor_release(y);
  operand_free(&w);
  operand_free(&u);
  operand_free(&z);
  operand_free(&x);
}

static void cotangent_must_match(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s6[1] = {6}, s123[3] = {1, 2, 3};
  operand x = op_dense(rt, SW_DTYPE_F64, s23, 2, pat_int, 1);
  SW_OK_(sw_tensor_set_requires_grad(x.t, true));
  sw_tensor_t* y = NULL;
  SW_OK_(sw_relu(x.t, &y));
  operand bad_shape = op_dense(rt, SW_DTYPE_F64, s32, 2, pat_int, 2);
  operand flat = op_dense(rt, SW_DTYPE_F64, s6, 1, pat_int, 3);
  operand extra = op_dense(rt, SW_DTYPE_F64, s123, 3, pat_int, 4);
  operand bad_dtype = op_dense(rt, SW_DTYPE_F32, s23, 2, pat_int, 5);
  SW_FAILS(sw_backward(y, bad_shape.t, true), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_backward(y, flat.t, true), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_backward(y, extra.t, true), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_backward(y, bad_dtype.t, true), SW_ERROR_TYPE, NULL);
  /* A cotangent from another runtime would put the gradient there. */
  sw_runtime_t* other = NULL;
  SW_OK_(sw_runtime_create(NULL, &other));
  operand foreign = op_dense(other, SW_DTYPE_F64, s23, 2, pat_int, 6);
  SW_FAILS(sw_backward(y, foreign.t, true), SW_ERROR_VALUE, NULL);
  operand_free(&foreign);
  sw_runtime_release(other);
  assert_no_grad(&x);
  /* A strided cotangent of the right shape and dtype is fine. */
  const size_t swap[2] = {1, 0};
  operand ct = op_permute(&bad_shape, swap); /* (2,3) view */
  SW_OK_(sw_backward(y, ct.t, false));
  double* g = grad_values(&x, SW_DTYPE_F64);
  double want[6];
  for (int i = 0; i < 6; ++i) want[i] = x.v[i] > 0 ? ct.v[i] : 0;
  expect_exact("relu' * strided cotangent", g, want, 6);
  free(g);
  operand_free(&ct);
  operand_free(&bad_shape);
  operand_free(&flat);
  operand_free(&extra);
  operand_free(&bad_dtype);
  sw_tensor_release(y);
  operand_free(&x);
}

/* backward from a leaf itself leaves a copy of the cotangent, not an alias. */
static void backward_from_a_leaf(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t s[2] = {2, 2};
  operand x = op_dense(rt, SW_DTYPE_F32, s, 2, pat_int, 1);
  operand w = op_dense(rt, SW_DTYPE_F32, s, 2, pat_int, 2);
  SW_OK_(sw_tensor_set_requires_grad(x.t, true));
  SW_OK_(sw_backward(x.t, w.t, false));
  const int64_t c[2] = {0, 0};
  SW_OK_(sw_tensor_set(w.t, c, 2, 1000.0));
  double* g = grad_values(&x, SW_DTYPE_F32);
  expect_exact("grad of a leaf", g, w.v, 4);
  free(g);
  operand_free(&w);
  operand_free(&x);
}

/* ------------------------------------------------------------------------ */
/* Accumulation and graph lifetime                                          */
/* ------------------------------------------------------------------------ */

/* y = x*x + x: the two paths into x are summed, d/dx = (2x + 1) w. */
static void two_paths_are_summed(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t s[2] = {3, 2};
  for (int d = 0; d < 2; ++d) {
    const sw_dtype_t dt = d ? SW_DTYPE_F64 : SW_DTYPE_F32;
    operand x = op_dense(rt, dt, s, 2, pat_int, 1);
    operand w = op_dense(rt, dt, s, 2, pat_int, 2);
    SW_OK_(sw_tensor_set_requires_grad(x.t, true));
    sw_tensor_t *xx = NULL, *y = NULL;
    SW_OK_(sw_mul(x.t, x.t, &xx));
    SW_OK_(sw_add(xx, x.t, &y));
    SW_OK_(sw_backward(y, w.t, false));
    double* g = grad_values(&x, dt);
    double want[6];
    for (int i = 0; i < 6; ++i) want[i] = (2 * x.v[i] + 1) * w.v[i];
    expect_exact("d(x*x + x)", g, want, 6);
    free(g);
    sw_tensor_release(xx);
    sw_tensor_release(y);
    operand_free(&w);
    operand_free(&x);
  }
  /* A diamond: b = 3a, c = relu(a); y = b * c. Both paths reach a through
   * intermediate nodes, not just through the leaf. */
  const int64_t s4[1] = {4};
  const double av[4] = {1, -2, 3, -4};
  operand a = op_values(rt, SW_DTYPE_F64, s4, 1, av);
  SW_OK_(sw_tensor_set_requires_grad(a.t, true));
  sw_tensor_t *a2 = NULL, *b = NULL, *c = NULL, *y = NULL;
  SW_OK_(sw_mul_scalar(a.t, 1.0, &a2));
  SW_OK_(sw_mul_scalar(a2, 3.0, &b));
  SW_OK_(sw_relu(a2, &c));
  SW_OK_(sw_mul(b, c, &y));
  sw_tensor_t* total = NULL;
  SW_OK_(sw_reduce_sum(y, NULL, 0, false, &total));
  SW_OK_(sw_backward(total, NULL, false));
  double* g = grad_values(&a, SW_DTYPE_F64);
  /* y = 3a * relu(a): dy/da = 6a where a > 0, else 0. */
  const double want[4] = {6, 0, 18, 0};
  expect_exact("diamond", g, want, 4);
  free(g);
  sw_tensor_release(total);
  sw_tensor_release(y);
  sw_tensor_release(c);
  sw_tensor_release(b);
  sw_tensor_release(a2);
  operand_free(&a);
}

static void leaf_gradients_accumulate(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t s[2] = {2, 3};
  operand x = op_dense(rt, SW_DTYPE_F32, s, 2, pat_int, 1);
  operand w = op_dense(rt, SW_DTYPE_F32, s, 2, pat_int, 2);
  SW_OK_(sw_tensor_set_requires_grad(x.t, true));
  double want[6];
  /* Two separate graphs. */
  for (int round = 1; round <= 2; ++round) {
    sw_tensor_t* y = NULL;
    SW_OK_(sw_mul_scalar(x.t, 3.0, &y));
    SW_OK_(sw_backward(y, w.t, false));
    sw_tensor_release(y);
    for (int i = 0; i < 6; ++i) want[i] = 3.0 * w.v[i] * round;
    double* g = grad_values(&x, SW_DTYPE_F32);
    expect_exact("accumulated over graphs", g, want, 6);
    free(g);
  }
  /* The same graph twice with retain_graph. */
  SW_OK_(sw_tensor_clear_grad(x.t));
  assert_no_grad(&x);
  sw_tensor_t* y = NULL;
  SW_OK_(sw_mul(x.t, w.t, &y));
  SW_OK_(sw_backward(y, w.t, true));
  SW_OK_(sw_backward(y, w.t, false));
  for (int i = 0; i < 6; ++i) want[i] = 2.0 * w.v[i] * w.v[i];
  double* g = grad_values(&x, SW_DTYPE_F32);
  expect_exact("accumulated over one retained graph", g, want, 6);
  free(g);
  sw_tensor_release(y);
  operand_free(&w);
  operand_free(&x);
}

static void clear_grad_drops_the_gradient(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t s[1] = {3};
  operand x = op_dense(rt, SW_DTYPE_F64, s, 1, pat_int, 1);
  SW_OK_(sw_tensor_set_requires_grad(x.t, true));
  assert_no_grad(&x);
  SW_OK_(sw_tensor_clear_grad(x.t)); /* nothing to clear is fine */
  sw_tensor_t *y = NULL, *s0 = NULL;
  SW_OK_(sw_mul_scalar(x.t, -2.0, &y));
  SW_OK_(sw_reduce_sum(y, NULL, 0, false, &s0));
  SW_OK_(sw_backward(s0, NULL, true));
  sw_tensor_t* kept = NULL;
  SW_OK_(sw_tensor_grad(x.t, &kept));
  assert_non_null(kept);
  SW_OK_(sw_tensor_clear_grad(x.t));
  assert_no_grad(&x);
  /* A handle taken before the clear stays valid and unchanged. */
  const double m2[3] = {-2, -2, -2};
  double* kv = result_values(kept, SW_DTYPE_F64, s, 1);
  expect_exact("old gradient handle", kv, m2, 3);
  free(kv);
  /* The next backward starts from zero. */
  SW_OK_(sw_backward(s0, NULL, false));
  double* g = grad_values(&x, SW_DTYPE_F64);
  expect_exact("after clear", g, m2, 3);
  free(g);
  kv = result_values(kept, SW_DTYPE_F64, s, 1);
  expect_exact("old gradient handle after backward", kv, m2, 3);
  free(kv);
  sw_tensor_release(kept);
  sw_tensor_release(s0);
  sw_tensor_release(y);
  operand_free(&x);
}

static void retain_graph_rules(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t s[2] = {2, 2};
  operand x = op_dense(rt, SW_DTYPE_F64, s, 2, pat_int, 1);
  operand w = op_dense(rt, SW_DTYPE_F64, s, 2, pat_int, 2);
  SW_OK_(sw_tensor_set_requires_grad(x.t, true));
  /* Without retain_graph the second backward fails and changes nothing. */
  sw_tensor_t *y = NULL, *z = NULL;
  SW_OK_(sw_matmul(x.t, w.t, &y));
  SW_OK_(sw_relu(y, &z));
  SW_OK_(sw_backward(z, w.t, false));
  double* before = grad_values(&x, SW_DTYPE_F64);
  SW_FAILS(sw_backward(z, w.t, false), SW_ERROR_STATE, NULL);
  SW_FAILS(sw_backward(z, w.t, true), SW_ERROR_STATE, NULL);
  double* after = grad_values(&x, SW_DTYPE_F64);
  expect_exact("gradient after a refused backward", after, before, 4);
  free(after);
  /* Ops without saved tensors are freed too. */
  sw_tensor_t *a = NULL, *b = NULL;
  SW_OK_(sw_add(x.t, x.t, &a));
  SW_OK_(sw_reduce_sum(a, NULL, 0, false, &b));
  SW_OK_(sw_backward(b, NULL, false));
  SW_FAILS(sw_backward(b, NULL, false), SW_ERROR_STATE, NULL);
  sw_tensor_release(a);
  sw_tensor_release(b);
  sw_tensor_release(z);
  sw_tensor_release(y);
  /* With retain_graph the graph runs again, and again. */
  SW_OK_(sw_tensor_clear_grad(x.t));
  SW_OK_(sw_matmul(x.t, w.t, &y));
  SW_OK_(sw_relu(y, &z));
  SW_OK_(sw_backward(z, w.t, true));
  double* once = grad_values(&x, SW_DTYPE_F64);
  SW_OK_(sw_backward(z, w.t, true));
  SW_OK_(sw_backward(z, w.t, false));
  double* thrice = grad_values(&x, SW_DTYPE_F64);
  for (int i = 0; i < 4; ++i) once[i] *= 3;
  expect_exact("three backward calls", thrice, once, 4);
  SW_FAILS(sw_backward(z, w.t, false), SW_ERROR_STATE, NULL);
  free(once);
  free(thrice);
  free(before);
  sw_tensor_release(z);
  sw_tensor_release(y);
  operand_free(&w);
  operand_free(&x);
}

/* ------------------------------------------------------------------------ */
/* Saved-version checks                                                     */
/* ------------------------------------------------------------------------ */

typedef sw_error_t* (*binary_op_fn)(sw_tensor_t*, sw_tensor_t*, sw_tensor_t**);

static void in_place_modification_is_detected(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t s[2] = {2, 2};
  const int64_t c[2] = {1, 0};
  /* Ops that save their inputs: mul, matmul; relu saves its input. */
  const binary_op_fn ops[3] = {sw_mul, sw_matmul, sw_elementwise_mul};
  for (int k = 0; k < 3; ++k)
    for (int which = 0; which < 2; ++which) {
      operand a = op_dense(rt, SW_DTYPE_F64, s, 2, pat_int, 1);
      operand b = op_dense(rt, SW_DTYPE_F64, s, 2, pat_int, 2);
      SW_OK_(sw_tensor_set_requires_grad(a.t, true));
      SW_OK_(sw_tensor_set_requires_grad(b.t, true));
      operand w = op_dense(rt, SW_DTYPE_F64, s, 2, pat_int, 5);
      sw_tensor_t* y = NULL;
      SW_OK_(ops[k](a.t, b.t, &y));
      SW_OK_(sw_tensor_set(which ? b.t : a.t, c, 2, 42.0));
      SW_FAILS(sw_backward(y, w.t, false), SW_ERROR_STATE, "modified in-place");
      assert_no_grad(&a);
      assert_no_grad(&b);
      /* It stays refused: the check runs before anything else. */
      SW_FAILS(sw_backward(y, w.t, true), SW_ERROR_STATE, "modified in-place");
      assert_no_grad(&a);
      assert_no_grad(&b);
      operand_free(&w);
      sw_tensor_release(y);
      operand_free(&a);
      operand_free(&b);
    }
  /* A saved input deep in the graph, changed through another view of its
   * carrier: nothing runs, not even the nodes above it. */
  operand x = op_dense(rt, SW_DTYPE_F64, s, 2, pat_int, 3);
  operand u = op_dense(rt, SW_DTYPE_F64, s, 2, pat_int, 4);
  SW_OK_(sw_tensor_set_requires_grad(x.t, true));
  SW_OK_(sw_tensor_set_requires_grad(u.t, true));
  sw_tensor_t *r = NULL, *m = NULL, *y = NULL, *xt = NULL;
  SW_OK_(sw_relu(x.t, &r));
  SW_OK_(sw_add(r, u.t, &m));
  SW_OK_(sw_reduce_sum(m, NULL, 0, false, &y));
  sw_set_grad_enabled(false);
  SW_OK_(sw_tensor_transpose(x.t, 0, 1, &xt));
  sw_set_grad_enabled(true);
  SW_OK_(sw_tensor_set(xt, c, 2, -1.0));
  SW_FAILS(sw_backward(y, NULL, false), SW_ERROR_STATE, "modified in-place");
  assert_no_grad(&x);
  assert_no_grad(&u);
  sw_tensor_release(xt);
  sw_tensor_release(y);
  sw_tensor_release(m);
  sw_tensor_release(r);
  /* add saves nothing, so changing its inputs does not stop backward. */
  SW_OK_(sw_add(x.t, u.t, &m));
  SW_OK_(sw_tensor_set(u.t, c, 2, 5.0));
  SW_OK_(sw_reduce_sum(m, NULL, 0, false, &y));
  SW_OK_(sw_backward(y, NULL, false));
  const double ones[4] = {1, 1, 1, 1};
  double* g = grad_values(&u, SW_DTYPE_F64);
  expect_exact("add ignores versions", g, ones, 4);
  free(g);
  sw_tensor_release(y);
  sw_tensor_release(m);
  operand_free(&x);
  operand_free(&u);
}

/* ------------------------------------------------------------------------ */
/* Grad mode and requires_grad                                              */
/* ------------------------------------------------------------------------ */

static void no_grad_results_are_leaves(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t s[2] = {2, 2};
  operand x = op_dense(rt, SW_DTYPE_F32, s, 2, pat_int, 1);
  SW_OK_(sw_tensor_set_requires_grad(x.t, true));
  assert_true(sw_is_grad_enabled());
  const bool previous = sw_set_grad_enabled(false);
  assert_true(previous);
  assert_false(sw_is_grad_enabled());
  assert_false(sw_set_grad_enabled(false)); /* returns the previous mode */
  sw_tensor_t* results[7] = {NULL};
  SW_OK_(sw_add(x.t, x.t, &results[0]));
  SW_OK_(sw_mul(x.t, x.t, &results[1]));
  SW_OK_(sw_mul_scalar(x.t, 2.0, &results[2]));
  SW_OK_(sw_relu(x.t, &results[3]));
  SW_OK_(sw_reduce_sum(x.t, NULL, 0, false, &results[4]));
  SW_OK_(sw_matmul(x.t, x.t, &results[5]));
  SW_OK_(sw_tensor_transpose(x.t, 0, 1, &results[6]));
  sw_set_grad_enabled(previous);
  assert_true(sw_is_grad_enabled());
  for (int i = 0; i < 7; ++i) {
    bool rg = true, leaf = false;
    SW_OK_(sw_tensor_requires_grad(results[i], &rg));
    SW_OK_(sw_tensor_is_leaf(results[i], &leaf));
    assert_false(rg);
    assert_true(leaf);
    SW_FAILS(sw_backward(results[i], NULL, false), SW_ERROR_STATE, NULL);
    sw_tensor_release(results[i]);
  }
  /* With grad mode back on, ops record again. */
  sw_tensor_t* y = NULL;
  SW_OK_(sw_relu(x.t, &y));
  bool rg = false, leaf = true;
  SW_OK_(sw_tensor_requires_grad(y, &rg));
  SW_OK_(sw_tensor_is_leaf(y, &leaf));
  assert_true(rg);
  assert_false(leaf);
  sw_tensor_release(y);
  operand_free(&x);
}

typedef struct thread_probe {
  sw_tensor_t* x; /* requires grad */
  bool enabled_at_start;
  bool result_requires_grad;
  bool enabled_after_disable;
  sw_error_code_t code;
} thread_probe;

static void* probe_grad_mode(void* arg) {
  thread_probe* p = (thread_probe*)arg;
  p->enabled_at_start = sw_is_grad_enabled();
  sw_tensor_t* y = NULL;
  sw_error_t* e = sw_relu(p->x, &y);
  p->code = sw_error_code(e);
  sw_error_free(e);
  if (y) sw_tensor_requires_grad(y, &p->result_requires_grad);
  sw_tensor_release(y);
  sw_set_grad_enabled(false);
  p->enabled_after_disable = sw_is_grad_enabled();
  return NULL;
}

static void grad_mode_is_per_thread(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t s[1] = {3};
  operand x = op_dense(rt, SW_DTYPE_F64, s, 1, pat_int, 1);
  SW_OK_(sw_tensor_set_requires_grad(x.t, true));
  const bool previous = sw_set_grad_enabled(false);
  thread_probe p = {x.t, false, false, true, SW_OK};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, probe_grad_mode, &p), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(p.code, SW_OK);
  assert_true(p.enabled_at_start);
  assert_true(p.result_requires_grad);
  assert_false(p.enabled_after_disable);
  /* This thread's mode is its own, before and after. */
  assert_false(sw_is_grad_enabled());
  sw_set_grad_enabled(true);
  memset(&p, 0, sizeof p);
  p.x = x.t;
  assert_int_equal(pthread_create(&th, NULL, probe_grad_mode, &p), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_true(p.enabled_at_start);
  assert_true(sw_is_grad_enabled()); /* the thread's disable did not leak here */
  sw_set_grad_enabled(previous);
  operand_free(&x);
}

static void requires_grad_rules(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t s[1] = {3};
  operand i = op_dense(rt, SW_DTYPE_I32, s, 1, pat_int, 1);
  operand f = op_dense(rt, SW_DTYPE_F32, s, 1, pat_int, 2);
  operand h = op_dense(rt, SW_DTYPE_F16, s, 1, pat_int, 3);
  bool rg = true, leaf = false;
  SW_OK_(sw_tensor_requires_grad(f.t, &rg));
  assert_false(rg);
  SW_OK_(sw_tensor_is_leaf(f.t, &leaf));
  assert_true(leaf);
  /* Integers cannot require grad. */
  SW_FAILS(sw_tensor_set_requires_grad(i.t, true), SW_ERROR_TYPE, NULL);
  SW_OK_(sw_tensor_requires_grad(i.t, &rg));
  assert_false(rg);
  SW_OK_(sw_tensor_set_requires_grad(h.t, true));
  SW_OK_(sw_tensor_set_requires_grad(f.t, true));
  sw_tensor_t* y = NULL;
  SW_OK_(sw_mul_scalar(f.t, 2.0, &y));
  /* A recorded result is not a leaf: VALUE either way. */
  SW_FAILS(sw_tensor_set_requires_grad(y, false), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_tensor_set_requires_grad(y, true), SW_ERROR_VALUE, NULL);
  SW_OK_(sw_tensor_requires_grad(y, &rg));
  assert_true(rg);
  sw_tensor_release(y);
  /* Turning it off again: results no longer record. */
  SW_OK_(sw_tensor_set_requires_grad(f.t, false));
  SW_OK_(sw_mul_scalar(f.t, 2.0, &y));
  SW_OK_(sw_tensor_is_leaf(y, &leaf));
  assert_true(leaf);
  SW_FAILS(sw_backward(y, f.t, false), SW_ERROR_STATE, NULL);
  SW_FAILS(sw_backward(f.t, f.t, false), SW_ERROR_STATE, NULL);
  sw_tensor_release(y);
  operand_free(&i);
  operand_free(&f);
  operand_free(&h);
}

/* Half leaves get half gradients from matmul, and they accumulate. */
static void half_matmul_gradients(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const sw_dtype_t halves[2] = {SW_DTYPE_F16, SW_DTYPE_BF16};
  const int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s22[2] = {2, 2};
  sw_matmul_desc_t f32_result;
  sw_matmul_desc_init(&f32_result);
  f32_result.out_dtype = SW_DTYPE_F32;
  for (int h = 0; h < 2; ++h) {
    operand a = op_dense(rt, halves[h], s23, 2, pat_int, 1);
    operand b = op_dense(rt, halves[h], s32, 2, pat_int, 2);
    operand w = op_dense(rt, SW_DTYPE_F32, s22, 2, pat_int, 3);
    SW_OK_(sw_tensor_set_requires_grad(a.t, true));
    /* An f32 result (sw_matmul_ex) takes an f32 cotangent. */
    sw_tensor_t* y = NULL;
    SW_OK_(sw_matmul_ex(a.t, b.t, &f32_result, &y));
    SW_OK_(sw_backward(y, w.t, true));
    sw_tensor_t* g = NULL;
    SW_OK_(sw_tensor_grad(a.t, &g));
    assert_non_null(g);
    sw_dtype_t gd = SW_DTYPE_INVALID;
    SW_OK_(sw_tensor_dtype(g, &gd));
    assert_int_equal(gd, halves[h]);
    /* dL/da = w @ b^T: small integers, exact in half. */
    double want[6];
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 3; ++k) {
        double s = 0;
        for (int j = 0; j < 2; ++j) s += w.v[i + 2 * j] * b.v[k + 3 * j];
        want[i + 2 * k] = s;
      }
    double got[6];
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 3; ++k) {
        const int64_t c[2] = {i, k};
        SW_OK_(sw_tensor_get(g, c, 2, &got[i + 2 * k]));
      }
    expect_exact("half dL/da", got, want, 6);
    sw_tensor_release(g);
    /* A second backward adds to the half gradient. */
    SW_OK_(sw_backward(y, w.t, false));
    SW_OK_(sw_tensor_grad(a.t, &g));
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 3; ++k) {
        const int64_t c[2] = {i, k};
        SW_OK_(sw_tensor_get(g, c, 2, &got[i + 2 * k]));
        want[i + 2 * k] *= 2;
      }
    expect_exact("half dL/da accumulated", got, want, 6);
    sw_tensor_release(g);
    sw_tensor_release(y);
    /* Two paths into one half leaf in one backward: y = a @ a^T, so
     * dL/da = w a + w^T a. */
    SW_OK_(sw_tensor_clear_grad(a.t));
    sw_tensor_t* at = NULL;
    SW_OK_(sw_tensor_transpose(a.t, 0, 1, &at));
    SW_OK_(sw_matmul_ex(a.t, at, &f32_result, &y));
    SW_OK_(sw_backward(y, w.t, false));
    SW_OK_(sw_tensor_grad(a.t, &g));
    assert_non_null(g);
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 3; ++k) {
        double s = 0;
        for (int j = 0; j < 2; ++j) s += (w.v[i + 2 * j] + w.v[j + 2 * i]) * a.v[j + 2 * k];
        want[i + 2 * k] = s;
        const int64_t c[2] = {i, k};
        SW_OK_(sw_tensor_get(g, c, 2, &got[i + 2 * k]));
      }
    expect_exact("half dL/da through two paths", got, want, 6);
    sw_tensor_release(g);
    sw_tensor_release(y);
    sw_tensor_release(at);
    /* The default half result takes a half cotangent; dL/db = a^T w. */
    SW_OK_(sw_tensor_set_requires_grad(b.t, true));
    operand wh = op_dense(rt, halves[h], s22, 2, pat_int, 3);
    SW_OK_(sw_matmul(a.t, b.t, &y));
    sw_dtype_t yd = SW_DTYPE_INVALID;
    SW_OK_(sw_tensor_dtype(y, &yd));
    assert_int_equal(yd, halves[h]);
    SW_FAILS(sw_backward(y, w.t, true), SW_ERROR_TYPE, "cotangent dtype");
    SW_OK_(sw_backward(y, wh.t, false));
    SW_OK_(sw_tensor_grad(b.t, &g));
    SW_OK_(sw_tensor_dtype(g, &gd));
    assert_int_equal(gd, halves[h]);
    double want_b[6], got_b[6];
    for (int k = 0; k < 3; ++k)
      for (int j = 0; j < 2; ++j) {
        double s = 0;
        for (int i = 0; i < 2; ++i) s += a.v[i + 2 * k] * w.v[i + 2 * j];
        want_b[k + 3 * j] = s;
        const int64_t c[2] = {k, j};
        SW_OK_(sw_tensor_get(g, c, 2, &got_b[k + 3 * j]));
      }
    expect_exact("half dL/db", got_b, want_b, 6);
    sw_tensor_release(g);
    sw_tensor_release(y);
    operand_free(&wh);
    operand_free(&a);
    operand_free(&b);
    operand_free(&w);
  }
}

/* A failed check can leave gradcheck's no-grad scope open; every test starts
 * with grad mode on so one failure does not cascade. */
static int grad_mode_on(void** state) {
  (void)state;
  sw_set_grad_enabled(true);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(vjp_add_and_mul, grad_mode_on),
      cmocka_unit_test_setup(vjp_scalar_mul_and_relu, grad_mode_on),
      cmocka_unit_test_setup(vjp_reduce_sum, grad_mode_on),
      cmocka_unit_test_setup(vjp_matmul, grad_mode_on),
      cmocka_unit_test_setup(vjp_through_permute_views, grad_mode_on),
      cmocka_unit_test_setup(vjp_of_strided_leaves, grad_mode_on),
      cmocka_unit_test_setup(null_cotangent_for_one_element, grad_mode_on),
      cmocka_unit_test_setup(cotangent_must_match, grad_mode_on),
      cmocka_unit_test_setup(backward_from_a_leaf, grad_mode_on),
      cmocka_unit_test_setup(two_paths_are_summed, grad_mode_on),
      cmocka_unit_test_setup(leaf_gradients_accumulate, grad_mode_on),
      cmocka_unit_test_setup(clear_grad_drops_the_gradient, grad_mode_on),
      cmocka_unit_test_setup(retain_graph_rules, grad_mode_on),
      cmocka_unit_test_setup(in_place_modification_is_detected, grad_mode_on),
      cmocka_unit_test_setup(no_grad_results_are_leaves, grad_mode_on),
      cmocka_unit_test_setup(grad_mode_is_per_thread, grad_mode_on),
      cmocka_unit_test_setup(requires_grad_rules, grad_mode_on),
      cmocka_unit_test_setup(half_matmul_gradients, grad_mode_on),
  };
  return cmocka_run_group_tests(tests, sw_test_runtime_setup, sw_test_runtime_teardown);
}
