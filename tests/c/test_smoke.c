/* End-to-end smoke: create, compute, differentiate, through the public ABI. */
#include "sw_test.h"

static void matmul_add_relu_backward(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t s23[2] = {2, 3}, s32[2] = {3, 2};
  /* a = [[1,2,3],[4,5,6]] given first mode fastest: a[0,0]=1, a[1,0]=4, a[0,1]=2 ... */
  const double av[6] = {1, 4, 2, 5, 3, 6};
  const double bv[6] = {1, 0, -1, 0, 1, 1}; /* b = [[1,0],[0,1],[-1,1]] */
  sw_tensor_t* a = sw_test_tensor(rt, SW_DTYPE_F32, s23, 2, av);
  sw_tensor_t* b = sw_test_tensor(rt, SW_DTYPE_F32, s32, 2, bv);
  SW_OK_(sw_tensor_set_requires_grad(a, true));
  sw_tensor_t *c = NULL, *r = NULL, *s = NULL;
  SW_OK_(sw_matmul(a, b, &c)); /* [[-2, 5], [-2, 11]] */
  SW_OK_(sw_relu(c, &r));
  SW_OK_(sw_reduce_sum(r, NULL, 0, false, &s));
  double v = 0;
  SW_OK_(sw_tensor_get(s, NULL, 0, &v));
  assert_true(v == 16.0);
  SW_OK_(sw_backward(s, NULL, false));
  sw_tensor_t* g = NULL;
  SW_OK_(sw_tensor_grad(a, &g));
  assert_non_null(g);
  /* dL/da = relu'(c) @ b^T = [[0,1],[0,1]] @ b^T = [[0,1,1],[0,1,1]] */
  int64_t n = 0;
  double* gv = sw_test_values(g, &n);
  const double expect[6] = {0, 0, 1, 1, 1, 1};
  assert_int_equal(n, 6);
  for (int i = 0; i < 6; ++i) assert_true(gv[i] == expect[i]);
  free(gv);
  sw_tensor_release(g);
  sw_tensor_release(s);
  sw_tensor_release(r);
  sw_tensor_release(c);
  sw_tensor_release(b);
  sw_tensor_release(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(matmul_add_relu_backward),
  };
  return cmocka_run_group_tests(tests, sw_test_runtime_setup, sw_test_runtime_teardown);
}
