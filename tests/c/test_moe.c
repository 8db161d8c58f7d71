/* The done-when test of the tensor surface: a Mixtral-style mixture-of-experts
 * block (router linear, softmax, per-token top-2, renormalised gates, SwiGLU
 * experts w2(silu(w1 x) * w3 x), weighted sum) written with StrideWeave ops
 * alone, checked against a plain C loop in double: the forward values (f64
 * and f32) and every gradient (x, router, w1, w2, w3) against central finite
 * differences of the reference loop. */
#include "sw_test.h"

enum { T = 7, D = 5, H = 6, E = 4, K = 2 };

/* Column-major (first mode fastest) storage, as the library's dense order:
 * x (T, D), wr (D, E), w1 and w3 (E, D, H), w2 (E, H, D), r (T, D). */
typedef struct moe_params {
  double x[T * D], wr[D * E], w1[E * D * H], w3[E * D * H], w2[E * H * D];
} moe_params;

static double silu(double v) { return v / (1.0 + exp(-v)); }

/* out (T, D) of the block; returns sum(out * r). */
static double moe_reference(const moe_params* p, const double* r, double* out) {
  double loss = 0;
  for (int t = 0; t < T; ++t) {
    double logits[E], prob[E], mx = -INFINITY, sum = 0;
    for (int e = 0; e < E; ++e) {
      logits[e] = 0;
      for (int d = 0; d < D; ++d) logits[e] += p->x[t + T * d] * p->wr[d + D * e];
      if (logits[e] > mx) mx = logits[e];
    }
    for (int e = 0; e < E; ++e) sum += (prob[e] = exp(logits[e] - mx));
    for (int e = 0; e < E; ++e) prob[e] /= sum;
    int pick[K];
    bool used[E] = {false};
    for (int k = 0; k < K; ++k) { /* largest first, ties to the lower index */
      int best = -1;
      for (int e = 0; e < E; ++e)
        if (!used[e] && (best < 0 || prob[e] > prob[best])) best = e;
      used[best] = true;
      pick[k] = best;
    }
    double gsum = 0;
    for (int k = 0; k < K; ++k) gsum += prob[pick[k]];
    double y[D] = {0};
    for (int k = 0; k < K; ++k) {
      const int e = pick[k];
      const double g = prob[e] / gsum;
      for (int d = 0; d < D; ++d) {
        double acc = 0;
        for (int h = 0; h < H; ++h) {
          double a1 = 0, a3 = 0;
          for (int i = 0; i < D; ++i) {
            a1 += p->x[t + T * i] * p->w1[e + E * i + E * D * h];
            a3 += p->x[t + T * i] * p->w3[e + E * i + E * D * h];
          }
          acc += silu(a1) * a3 * p->w2[e + E * h + E * H * d];
        }
        y[d] += g * acc;
      }
    }
    for (int d = 0; d < D; ++d) {
      if (out) out[t + T * d] = y[d];
      loss += y[d] * r[t + T * d];
    }
  }
  return loss;
}

static void fill(double* v, int n, unsigned* state, double scale) {
  for (int i = 0; i < n; ++i) {
    *state = *state * 1103515245u + 12345u;
    v[i] = scale * (((double)((*state >> 8) & 0xffff) / 65535.0) * 2.0 - 1.0);
  }
}

static void make_params(moe_params* p, double* r) {
  unsigned s = 20261201u;
  fill(p->x, T * D, &s, 1.0);
  fill(p->wr, D * E, &s, 1.5);
  fill(p->w1, E * D * H, &s, 0.8);
  fill(p->w3, E * D * H, &s, 0.8);
  fill(p->w2, E * H * D, &s, 0.8);
  fill(r, T * D, &s, 1.0);
}

/* Consumes a reference to `b` (and to `a` when not NULL). */
static sw_tensor_t* bin(sw_binary_op_t op, sw_tensor_t* a, sw_tensor_t* b) {
  sw_tensor_t* out = NULL;
  SW_OK_(sw_binary(op, a, b, &out));
  sw_tensor_release(a);
  sw_tensor_release(b);
  return out;
}

static sw_tensor_t* mm(sw_tensor_t* a, sw_tensor_t* b) {
  sw_tensor_t* out = NULL;
  SW_OK_(sw_matmul(a, b, &out));
  return out;
}

/* The block with StrideWeave ops: returns out (T, D). */
static sw_tensor_t* moe_block(sw_runtime_t* rt, sw_dtype_t dtype, sw_tensor_t* x, sw_tensor_t* wr, sw_tensor_t* w1,
                              sw_tensor_t* w3, sw_tensor_t* w2) {
  sw_tensor_t* logits = mm(x, wr); /* (T, E) */
  sw_tensor_t* prob = NULL;
  SW_OK_(sw_softmax(logits, 1, &prob));
  sw_tensor_release(logits);
  sw_tensor_t *top = NULL, *idx = NULL;
  SW_OK_(sw_topk(prob, K, 1, &top, &idx)); /* (T, K) values, i64 indices */
  sw_tensor_release(prob);
  sw_tensor_t* total = NULL;
  const int64_t axis1[] = {1};
  SW_OK_(sw_reduce(SW_REDUCE_SUM, top, axis1, 1, true, &total)); /* (T, 1) */
  sw_tensor_retain(top);
  sw_tensor_t* gates = bin(SW_BINARY_DIV, top, total); /* renormalised, (T, K) */
  sw_tensor_release(top);
  /* The dense gate matrix (T, E): zero where an expert is not picked. */
  const int64_t te[] = {T, E};
  sw_tensor_t *zero = NULL, *g = NULL;
  SW_OK_(sw_tensor_zeros(rt, dtype, te, 2, &zero));
  SW_OK_(sw_scatter_add(zero, 1, idx, gates, &g));
  sw_tensor_release(zero);
  sw_tensor_release(gates);
  sw_tensor_release(idx);

  sw_tensor_t* out = NULL;
  for (int e = 0; e < E; ++e) {
    sw_tensor_t *w1e = NULL, *w3e = NULL, *w2e = NULL;
    SW_OK_(sw_tensor_select(w1, 0, e, &w1e)); /* (D, H) views */
    SW_OK_(sw_tensor_select(w3, 0, e, &w3e));
    SW_OK_(sw_tensor_select(w2, 0, e, &w2e)); /* (H, D) */
    sw_tensor_t* a1 = mm(x, w1e);
    sw_tensor_t* a3 = mm(x, w3e);
    sw_tensor_t* act = NULL;
    SW_OK_(sw_unary(SW_UNARY_SILU, a1, &act));
    sw_tensor_release(a1);
    sw_tensor_t* hidden = bin(SW_BINARY_MUL, act, a3);
    sw_tensor_t* y = mm(hidden, w2e); /* (T, D) */
    sw_tensor_release(hidden);
    sw_tensor_release(w1e);
    sw_tensor_release(w3e);
    sw_tensor_release(w2e);
    sw_tensor_t *ge = NULL, *ge1 = NULL;
    SW_OK_(sw_tensor_select(g, 1, e, &ge)); /* (T) */
    SW_OK_(sw_tensor_unsqueeze(ge, 1, &ge1)); /* (T, 1) */
    sw_tensor_release(ge);
    sw_tensor_t* part = bin(SW_BINARY_MUL, y, ge1);
    out = out ? bin(SW_BINARY_ADD, out, part) : part;
  }
  sw_tensor_release(g);
  return out;
}

static sw_tensor_t* leaf(sw_runtime_t* rt, sw_dtype_t dtype, const int64_t* ext, size_t rank, const double* v) {
  sw_tensor_t* t = sw_test_tensor(rt, dtype, ext, rank, v);
  SW_OK_(sw_tensor_set_requires_grad(t, true));
  return t;
}

static void check_close(const double* got, const double* want, int n, double tol, const char* what) {
  for (int i = 0; i < n; ++i)
    if (!(fabs(got[i] - want[i]) <= tol * (1.0 + fabs(want[i]))))
      fail_msg("%s[%d] = %.12g, expected %.12g", what, i, got[i], want[i]);
}

static void run_block(sw_runtime_t* rt, sw_dtype_t dtype, double tol, bool grads) {
  moe_params p;
  double r[T * D], want[T * D];
  make_params(&p, r);
  moe_reference(&p, r, want);

  const int64_t ext_x[] = {T, D}, ext_wr[] = {D, E}, ext_w1[] = {E, D, H}, ext_w2[] = {E, H, D};
  sw_tensor_t* x = leaf(rt, dtype, ext_x, 2, p.x);
  sw_tensor_t* wr = leaf(rt, dtype, ext_wr, 2, p.wr);
  sw_tensor_t* w1 = leaf(rt, dtype, ext_w1, 3, p.w1);
  sw_tensor_t* w3 = leaf(rt, dtype, ext_w1, 3, p.w3);
  sw_tensor_t* w2 = leaf(rt, dtype, ext_w2, 3, p.w2);
  sw_tensor_t* out = moe_block(rt, dtype, x, wr, w1, w3, w2);
  double* got = sw_test_values(out, NULL);
  check_close(got, want, T * D, tol, "out");
  free(got);

  if (grads) {
    sw_tensor_t* rt_r = sw_test_tensor(rt, dtype, ext_x, 2, r);
    sw_tensor_retain(out);
    sw_tensor_t* weighted = bin(SW_BINARY_MUL, out, rt_r);
    sw_tensor_t* loss = NULL;
    SW_OK_(sw_reduce(SW_REDUCE_SUM, weighted, NULL, 0, false, &loss));
    sw_tensor_release(weighted);
    SW_OK_(sw_backward(loss, NULL, false));
    sw_tensor_release(loss);

    struct {
      sw_tensor_t* t;
      double* v;
      int n;
      const char* name;
    } leaves[] = {{x, p.x, T * D, "dx"},
                  {wr, p.wr, D * E, "drouter"},
                  {w1, p.w1, E * D * H, "dw1"},
                  {w3, p.w3, E * D * H, "dw3"},
                  {w2, p.w2, E * H * D, "dw2"}};
    for (size_t l = 0; l < sizeof leaves / sizeof leaves[0]; ++l) {
      sw_tensor_t* grad = NULL;
      SW_OK_(sw_tensor_grad(leaves[l].t, &grad));
      assert_non_null(grad);
      double* g = sw_test_values(grad, NULL);
      double* fd = malloc(sizeof(double) * (size_t)leaves[l].n);
      for (int i = 0; i < leaves[l].n; ++i) {
        const double keep = leaves[l].v[i], eps = 1e-6;
        leaves[l].v[i] = keep + eps;
        const double up = moe_reference(&p, r, NULL);
        leaves[l].v[i] = keep - eps;
        const double down = moe_reference(&p, r, NULL);
        leaves[l].v[i] = keep;
        fd[i] = (up - down) / (2 * eps);
      }
      check_close(g, fd, leaves[l].n, dtype == SW_DTYPE_F64 ? 1e-6 : 1e-4, leaves[l].name);
      free(fd);
      free(g);
      sw_tensor_release(grad);
    }
  }
  sw_tensor_release(out);
  sw_tensor_release(x);
  sw_tensor_release(wr);
  sw_tensor_release(w1);
  sw_tensor_release(w3);
  sw_tensor_release(w2);
}

static void test_moe_block_f64(void** state) { run_block((sw_runtime_t*)*state, SW_DTYPE_F64, 1e-12, true); }

static void test_moe_block_f32(void** state) { run_block((sw_runtime_t*)*state, SW_DTYPE_F32, 1e-5, true); }

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_moe_block_f64),
      cmocka_unit_test(test_moe_block_f32),
  };
  return sw_test_result(cmocka_run_group_tests(tests, sw_test_runtime_setup, sw_test_runtime_teardown));
}
