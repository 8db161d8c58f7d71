/* NumPy broadcasting in the binary elementwise ops: trailing modes align,
 * extent 1 stretches on either side, missing leading modes count as 1. */
#include "sw_ops_test.h"

typedef struct shape_case {
  size_t ra;
  int64_t a[4];
  size_t rb;
  int64_t b[4];
} shape_case;

static const shape_case kBroadcasts[] = {
    {2, {3, 1}, 2, {1, 4}},        /* both stretch: (3,4) */
    {1, {5}, 2, {2, 5}},           /* missing leading mode: (2,5) */
    {0, {0}, 3, {2, 3, 4}},        /* rank 0 with rank 3 */
    {3, {2, 3, 4}, 0, {0}},        /* rank 3 with rank 0 */
    {3, {3, 1, 5}, 3, {1, 4, 5}},  /* extent-1 stretch on both sides */
    {3, {1, 4, 1}, 2, {4, 3}},     /* (1,4,3) */
    {2, {3, 4}, 1, {1}},           /* (1,) stretches to everything */
    {3, {1, 1, 1}, 1, {4}},        /* leading ones stay: (1,1,4) */
    {2, {1, 1}, 2, {1, 1}},        /* nothing to stretch */
    {1, {0}, 1, {1}},              /* extent 1 stretches to 0 */
    {2, {1, 3}, 3, {0, 2, 1}},     /* (0,2,3) */
    {4, {2, 1, 3, 1}, 3, {5, 1, 4}}, /* (2,5,3,4) */
};

static const sw_dtype_t kFloat[] = {SW_DTYPE_F32, SW_DTYPE_F64};

static void check_pair(const operand* a, const operand* b, sw_dtype_t dtype) {
  int64_t shape[SW_MAX_RANK];
  size_t rank = 0;
  sw_tensor_t* r = NULL;
  double* want = ref_binary(REF_ADD, a, b, dtype, shape, &rank);
  SW_OK_(sw_add(a->t, b->t, &r));
  check_exact("add", r, dtype, shape, rank, want);
  free(want);
  want = ref_binary(REF_MUL, a, b, dtype, shape, &rank);
  SW_OK_(sw_mul(a->t, b->t, &r));
  check_exact("mul", r, dtype, shape, rank, want);
  SW_OK_(sw_elementwise_mul(a->t, b->t, &r));
  check_exact("elementwise_mul", r, dtype, shape, rank, want);
  free(want);
}

static void broadcast_dense_operands(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  for (size_t d = 0; d < 2; ++d)
    for (size_t c = 0; c < sizeof kBroadcasts / sizeof kBroadcasts[0]; ++c) {
      const shape_case* k = &kBroadcasts[c];
      operand a = op_dense(rt, kFloat[d], k->a, k->ra, pat_int, 1);
      operand b = op_dense(rt, kFloat[d], k->b, k->rb, pat_int, 2);
      print_message("  %s case %zu\n", sw_dtype_name(kFloat[d]), c);
      check_pair(&a, &b, kFloat[d]);
      check_pair(&b, &a, kFloat[d]);
      operand_free(&a);
      operand_free(&b);
    }
}

/* The shapes NumPy gives, spelled out, so the reference cannot drift. */
static void broadcast_result_shapes(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  static const struct {
    size_t ra;
    int64_t a[4];
    size_t rb;
    int64_t b[4];
    size_t rr;
    int64_t r[4];
  } cases[] = {
      {2, {3, 1}, 2, {1, 4}, 2, {3, 4}},
      {1, {5}, 2, {2, 5}, 2, {2, 5}},
      {0, {0}, 3, {2, 3, 4}, 3, {2, 3, 4}},
      {3, {3, 1, 5}, 3, {1, 4, 5}, 3, {3, 4, 5}},
      {3, {1, 4, 1}, 2, {4, 3}, 3, {1, 4, 3}},
      {3, {1, 1, 1}, 1, {4}, 3, {1, 1, 4}},
      {1, {0}, 1, {1}, 1, {0}},
      {2, {1, 3}, 3, {0, 2, 1}, 3, {0, 2, 3}},
      {4, {2, 1, 3, 1}, 3, {5, 1, 4}, 4, {2, 5, 3, 4}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    operand a = op_dense(rt, SW_DTYPE_F32, cases[c].a, cases[c].ra, pat_int, 1);
    operand b = op_dense(rt, SW_DTYPE_F32, cases[c].b, cases[c].rb, pat_int, 2);
    sw_tensor_t* r = NULL;
    SW_OK_(sw_add(a.t, b.t, &r));
    free(result_values(r, SW_DTYPE_F32, cases[c].r, cases[c].rr));
    sw_tensor_release(r);
    SW_OK_(sw_mul(b.t, a.t, &r));
    free(result_values(r, SW_DTYPE_F32, cases[c].r, cases[c].rr));
    sw_tensor_release(r);
    operand_free(&a);
    operand_free(&b);
  }
}

/* (3,1) + (1,4) with the values written out. */
static void broadcast_outer_sum_values(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t s31[2] = {3, 1}, s14[2] = {1, 4}, s34[2] = {3, 4};
  const double col[3] = {0, 10, 20}, row[4] = {1, 2, 3, 4};
  /* result[i, j] = col[i] + row[j], first mode fastest */
  const double sum[12] = {1, 11, 21, 2, 12, 22, 3, 13, 23, 4, 14, 24};
  const double prod[12] = {0, 10, 20, 0, 20, 40, 0, 30, 60, 0, 40, 80};
  operand a = op_values(rt, SW_DTYPE_F32, s31, 2, col);
  operand b = op_values(rt, SW_DTYPE_F32, s14, 2, row);
  sw_tensor_t* r = NULL;
  SW_OK_(sw_add(a.t, b.t, &r));
  check_exact("(3,1)+(1,4)", r, SW_DTYPE_F32, s34, 2, sum);
  SW_OK_(sw_add(b.t, a.t, &r));
  check_exact("(1,4)+(3,1)", r, SW_DTYPE_F32, s34, 2, sum);
  SW_OK_(sw_mul(a.t, b.t, &r));
  check_exact("(3,1)*(1,4)", r, SW_DTYPE_F32, s34, 2, prod);
  operand_free(&a);
  operand_free(&b);
}

/* Broadcasting composes with strided, offset, negative-stride, stride-0 and
 * nested operand layouts and with transposed views. */
static void broadcast_strided_operands(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  static const struct {
    const char* a;
    int64_t a_offset;
    const char* b;
    int64_t b_offset;
  } cases[] = {
      {"(3,1):(2,9)", 4, "(1,4):(7,-3)", 0},
      {"5:-2", 0, "(2,5):(5,1)", 3},
      {"():()", 6, "((2,2),3,(1,5)):((1,6),2,(9,12))", 0},
      {"(3,1,5):(0,4,1)", 1, "(1,4,5):(3,5,-20)", 0},
      {"((2,2),(2,2)):((4,2),(1,8))", 0, "(1,4):(100,0)", 2},
      {"(4,(2,3)):(1,(12,4))", 0, "(4,1):(-1,1)", 0},
  };
  for (size_t d = 0; d < 2; ++d)
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
      operand a = op_strided(rt, kFloat[d], cases[c].a, cases[c].a_offset, pat_int, 3);
      operand b = op_strided(rt, kFloat[d], cases[c].b, cases[c].b_offset, pat_int, 4);
      check_pair(&a, &b, kFloat[d]);
      check_pair(&b, &a, kFloat[d]);
      operand_free(&a);
      operand_free(&b);
    }
  /* A transposed (1,3) view is a (3,1) column. */
  const int64_t s13[2] = {1, 3}, s4[1] = {4}, s24[2] = {2, 4};
  operand row = op_dense(rt, SW_DTYPE_F32, s13, 2, pat_int, 5);
  const size_t swap[2] = {1, 0};
  operand col = op_permute(&row, swap);
  operand v = op_dense(rt, SW_DTYPE_F32, s4, 1, pat_int, 6);
  check_pair(&col, &v, SW_DTYPE_F32);
  check_pair(&v, &col, SW_DTYPE_F32);
  /* A transposed (2,4) matrix is (4,2); a transposed (1,4) row stretches along it. */
  const int64_t s14[2] = {1, 4};
  operand m = op_dense(rt, SW_DTYPE_F32, s24, 2, pat_int, 7);
  operand mt = op_permute(&m, swap);
  operand row4 = op_dense(rt, SW_DTYPE_F32, s14, 2, pat_int, 8);
  operand col4 = op_permute(&row4, swap);
  check_pair(&mt, &col4, SW_DTYPE_F32);
  check_pair(&col4, &mt, SW_DTYPE_F32);
  operand_free(&col4);
  operand_free(&row4);
  operand_free(&mt);
  operand_free(&m);
  operand_free(&v);
  operand_free(&col);
  operand_free(&row);
}

static void non_broadcastable_shapes_are_value_errors(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  static const shape_case cases[] = {
      {1, {3}, 1, {4}},
      {2, {2, 3}, 2, {3, 2}},
      {1, {0}, 1, {2}},
      {3, {2, 3, 4}, 2, {2, 4}},
      {2, {3, 1}, 3, {2, 4, 2}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    operand a = op_dense(rt, SW_DTYPE_F32, cases[c].a, cases[c].ra, pat_int, 1);
    operand b = op_dense(rt, SW_DTYPE_F32, cases[c].b, cases[c].rb, pat_int, 2);
    sw_tensor_t* r = NULL;
    SW_FAILS(sw_add(a.t, b.t, &r), SW_ERROR_VALUE, NULL);
    SW_FAILS(sw_add(b.t, a.t, &r), SW_ERROR_VALUE, NULL);
    SW_FAILS(sw_mul(a.t, b.t, &r), SW_ERROR_VALUE, NULL);
    SW_FAILS(sw_elementwise_mul(b.t, a.t, &r), SW_ERROR_VALUE, NULL);
    assert_null(r);
    operand_free(&a);
    operand_free(&b);
  }
}

/* Operands from two runtimes never meet in one op, even when the shapes and
 * dtypes would fit. */
static void operands_of_different_runtimes_are_value_errors(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_runtime_t* other = NULL;
  SW_OK_(sw_runtime_create(NULL, &other));
  const int64_t s[2] = {2, 3}, s1[1] = {3};
  operand a = op_dense(rt, SW_DTYPE_F32, s, 2, pat_int, 1);
  operand b = op_dense(other, SW_DTYPE_F32, s, 2, pat_int, 2);
  operand c = op_dense(other, SW_DTYPE_F32, s1, 1, pat_int, 3);
  sw_tensor_t* r = NULL;
  SW_FAILS(sw_add(a.t, b.t, &r), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_add(b.t, a.t, &r), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_mul(a.t, b.t, &r), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_elementwise_mul(a.t, c.t, &r), SW_ERROR_VALUE, NULL);
  assert_null(r);
  /* Each runtime still computes on its own operands. */
  SW_OK_(sw_add(b.t, c.t, &r));
  sw_tensor_release(r);
  operand_free(&a);
  operand_free(&b);
  operand_free(&c);
  sw_runtime_release(other);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(broadcast_dense_operands),
      cmocka_unit_test(broadcast_result_shapes),
      cmocka_unit_test(broadcast_outer_sum_values),
      cmocka_unit_test(broadcast_strided_operands),
      cmocka_unit_test(non_broadcastable_shapes_are_value_errors),
      cmocka_unit_test(operands_of_different_runtimes_are_value_errors),
  };
  return cmocka_run_group_tests(tests, sw_test_runtime_setup, sw_test_runtime_teardown);
}
