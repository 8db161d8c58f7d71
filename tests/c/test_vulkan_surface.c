/* The tensor surface on the Vulkan carrier against the CPU carrier: every
 * unary op, every binary op and comparison (tensor-tensor, broadcast, and
 * scalar forms), where, sum / mean / max / min reductions, softmax and
 * log_softmax on dense and transposed f32 operands; views stay on the
 * device; the ops without a shader fail UNSUPPORTED naming the op and the
 * carrier. Skips, saying why, without an ICD. */
#include "sw_vulkan_test.h"

static const char* carrier_name(sw_tensor_t* t) {
  sw_carrier_t* c = NULL;
  SW_OK_(sw_tensor_carrier(t, &c));
  sw_carrier_kind_t kind;
  SW_OK_(sw_carrier_kind(c, &kind));
  sw_carrier_release(c);
  return kind == SW_CARRIER_VULKAN ? "vulkan" : "other";
}

static vk_pair_t operand(vk_fixture_t* f, const int64_t* shape, size_t rank, float seed, bool positive) {
  size_t n = 1;
  for (size_t i = 0; i < rank; ++i) n *= (size_t)shape[i];
  float* x = malloc(sizeof(float) * n);
  vk_fill(x, n, seed);
  if (positive)
    for (size_t i = 0; i < n; ++i) x[i] = fabsf(x[i]) + 0.25f;
  vk_pair_t p = vk_pair(f, SW_DTYPE_F32, shape, rank, x);
  free(x);
  return p;
}

static vk_pair_t transposed(vk_pair_t p) {
  vk_pair_t t;
  SW_OK_(sw_tensor_transpose(p.cpu, 0, 1, &t.cpu));
  SW_OK_(sw_tensor_transpose(p.vk, 0, 1, &t.vk));
  return t;
}

static void test_unary_ops(void** state) {
  vk_fixture_t* f = *state;
  NEED_DEVICE(f);
  const sw_unary_op_t ops[] = {SW_UNARY_NEG, SW_UNARY_ABS, SW_UNARY_EXP, SW_UNARY_LOG, SW_UNARY_SQRT, SW_UNARY_RSQRT,
                               SW_UNARY_SILU, SW_UNARY_GELU, SW_UNARY_SIGMOID, SW_UNARY_TANH, SW_UNARY_RELU};
  const int64_t shape[] = {37, 19};
  for (int pos = 0; pos < 2; ++pos) {
    vk_pair_t a = operand(f, shape, 2, 0.7f, pos);
    vk_pair_t at = transposed(a);
    for (size_t k = 0; k < sizeof ops / sizeof *ops; ++k) {
      const bool needs_positive = ops[k] == SW_UNARY_LOG || ops[k] == SW_UNARY_SQRT || ops[k] == SW_UNARY_RSQRT;
      if (needs_positive != (bool)pos) continue;
      for (int v = 0; v < 2; ++v) {
        vk_pair_t x = v ? at : a;
        sw_tensor_t *rc = NULL, *rv = NULL;
        SW_OK_(sw_unary(ops[k], x.cpu, &rc));
        SW_OK_(sw_unary(ops[k], x.vk, &rv));
        vk_assert_matches(rc, rv, 2e-6);
        sw_tensor_release(rc);
        sw_tensor_release(rv);
      }
    }
    vk_pair_release(at);
    vk_pair_release(a);
  }
}

static void test_binary_ops_and_comparisons(void** state) {
  vk_fixture_t* f = *state;
  NEED_DEVICE(f);
  const sw_binary_op_t ops[] = {SW_BINARY_ADD, SW_BINARY_SUB, SW_BINARY_MUL, SW_BINARY_DIV, SW_BINARY_POW,
                                SW_BINARY_MAXIMUM, SW_BINARY_MINIMUM, SW_BINARY_EQ, SW_BINARY_NE, SW_BINARY_LT,
                                SW_BINARY_LE, SW_BINARY_GT, SW_BINARY_GE};
  const int64_t sa[] = {23, 9}, sb[] = {1, 9};
  vk_pair_t a = operand(f, sa, 2, 0.2f, true), b = operand(f, sb, 2, 1.9f, false);
  for (size_t k = 0; k < sizeof ops / sizeof *ops; ++k) {
    sw_tensor_t *rc = NULL, *rv = NULL;
    SW_OK_(sw_binary(ops[k], a.cpu, b.cpu, &rc));
    SW_OK_(sw_binary(ops[k], a.vk, b.vk, &rv));
    vk_assert_matches(rc, rv, 2e-6);
    sw_tensor_release(rc);
    sw_tensor_release(rv);
    SW_OK_(sw_binary_scalar(ops[k], a.cpu, 0.5, &rc));
    SW_OK_(sw_binary_scalar(ops[k], a.vk, 0.5, &rv));
    vk_assert_matches(rc, rv, 2e-6);
    sw_tensor_release(rc);
    sw_tensor_release(rv);
    SW_OK_(sw_scalar_binary(ops[k], 1.5, a.cpu, &rc));
    SW_OK_(sw_scalar_binary(ops[k], 1.5, a.vk, &rv));
    vk_assert_matches(rc, rv, 2e-6);
    sw_tensor_release(rc);
    sw_tensor_release(rv);
  }
  /* where on bool conditions computed on the device. */
  sw_tensor_t *cc = NULL, *cv = NULL, *rc = NULL, *rv = NULL;
  SW_OK_(sw_binary(SW_BINARY_GT, a.cpu, b.cpu, &cc));
  SW_OK_(sw_binary(SW_BINARY_GT, a.vk, b.vk, &cv));
  SW_OK_(sw_where(cc, a.cpu, b.cpu, &rc));
  SW_OK_(sw_where(cv, a.vk, b.vk, &rv));
  vk_assert_matches(rc, rv, 0);
  sw_tensor_release(rc);
  sw_tensor_release(rv);
  sw_tensor_release(cc);
  sw_tensor_release(cv);
  vk_pair_release(a);
  vk_pair_release(b);
}

static void test_reductions_and_softmax(void** state) {
  vk_fixture_t* f = *state;
  NEED_DEVICE(f);
  const sw_reduce_op_t ops[] = {SW_REDUCE_SUM, SW_REDUCE_MEAN, SW_REDUCE_MAX, SW_REDUCE_MIN};
  const int64_t shape[] = {31, 17};
  vk_pair_t a = operand(f, shape, 2, 0.4f, false);
  const int64_t axes0[] = {0}, axes1[] = {-1};
  for (size_t k = 0; k < sizeof ops / sizeof *ops; ++k) {
    const int64_t* axes[] = {axes0, axes1, NULL};
    for (int w = 0; w < 3; ++w) {
      sw_tensor_t *rc = NULL, *rv = NULL;
      SW_OK_(sw_reduce(ops[k], a.cpu, axes[w], axes[w] ? 1 : 0, w == 1, &rc));
      SW_OK_(sw_reduce(ops[k], a.vk, axes[w], axes[w] ? 1 : 0, w == 1, &rv));
      vk_assert_matches(rc, rv, 1e-5);
      sw_tensor_release(rc);
      sw_tensor_release(rv);
    }
  }
  for (int64_t axis = 0; axis < 2; ++axis) {
    sw_tensor_t *rc = NULL, *rv = NULL;
    SW_OK_(sw_softmax(a.cpu, axis, &rc));
    SW_OK_(sw_softmax(a.vk, axis, &rv));
    vk_assert_matches(rc, rv, 1e-5);
    sw_tensor_release(rc);
    sw_tensor_release(rv);
    SW_OK_(sw_log_softmax(a.cpu, axis, &rc));
    SW_OK_(sw_log_softmax(a.vk, axis, &rv));
    vk_assert_matches(rc, rv, 1e-5);
    sw_tensor_release(rc);
    sw_tensor_release(rv);
  }
  vk_pair_release(a);
}

static void test_views_stay_and_unsupported_ops_say_so(void** state) {
  vk_fixture_t* f = *state;
  NEED_DEVICE(f);
  const int64_t shape[] = {6, 4}, flat[] = {24};
  vk_pair_t a = operand(f, shape, 2, 0.1f, false);
  sw_tensor_t *vc = NULL, *vv = NULL;
  SW_OK_(sw_tensor_slice(a.cpu, 0, 1, 5, 2, &vc));
  SW_OK_(sw_tensor_slice(a.vk, 0, 1, 5, 2, &vv));
  assert_string_equal(carrier_name(vv), "vulkan");
  sw_tensor_t *cc = NULL, *cv = NULL;
  SW_OK_(sw_tensor_contiguous(vc, &cc));
  SW_OK_(sw_tensor_contiguous(vv, &cv));
  vk_assert_matches(cc, cv, 0);
  sw_tensor_release(cc);
  sw_tensor_release(cv);
  sw_tensor_t* r = NULL;
  SW_OK_(sw_tensor_reshape(a.vk, flat, 1, &r));
  assert_string_equal(carrier_name(r), "vulkan");
  sw_tensor_release(r);
  /* No shader: topk and index ops name the op and the carrier. */
  sw_tensor_t *v = NULL, *i = NULL;
  SW_FAILS(sw_topk(a.vk, 2, 1, &v, &i), SW_ERROR_UNSUPPORTED, "topk");
  SW_FAILS(sw_topk(a.vk, 2, 1, &v, &i), SW_ERROR_UNSUPPORTED, "Vulkan");
  assert_null(v);
  assert_null(i);
  sw_tensor_release(vc);
  sw_tensor_release(vv);
  vk_pair_release(a);
}

int main(void) {
  sw_vulkan_test_keep_driver();
  if (!sw_vulkan_test_available()) return 77;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_unary_ops, vk_setup, vk_teardown),
      cmocka_unit_test_setup_teardown(test_binary_ops_and_comparisons, vk_setup, vk_teardown),
      cmocka_unit_test_setup_teardown(test_reductions_and_softmax, vk_setup, vk_teardown),
      cmocka_unit_test_setup_teardown(test_views_stay_and_unsupported_ops_say_so, vk_setup, vk_teardown),
  };
  return sw_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
