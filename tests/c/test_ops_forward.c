/* Forward values of the elementwise ops and reduce_sum against plain-loop
 * references, on odd shapes and on every kind of input layout. Integer-valued
 * inputs keep f32 arithmetic exact, so values are compared exactly. */
#include "sw_ops_test.h"

/* A pair of layouts of one logical shape: a is paired with b in binary ops.
 * Offsets are extra slots past the smallest valid offset. */
typedef struct layout_pair {
  const char* name;
  const char* a;
  int64_t a_offset;
  const char* b;
  int64_t b_offset;
} layout_pair;

static const layout_pair kPairs[] = {
    {"dense 3x5x7 with C order", "(3,5,7):(1,3,15)", 0, "(3,5,7):(35,7,1)", 0},
    {"1x1", "(1,1):(1,1)", 0, "(1,1):(5,3)", 2},
    {"rank 1 odd", "7:1", 0, "7:3", 1},
    {"zero extent in the middle", "(3,0,2):(1,3,3)", 0, "(3,0,2):(2,1,7)", 0},
    {"zero extent first", "(0,4):(1,1)", 0, "(0,4):(4,1)", 0},
    {"non-unit strides", "(3,5):(2,7)", 0, "(3,5):(1,3)", 11},
    {"offset into a larger carrier", "(3,5):(1,3)", 13, "(3,5):(5,1)", 6},
    {"negative strides", "(3,5):(-1,-3)", 0, "(3,5):(5,-1)", 4},
    {"stride-0 broadcast layouts", "(3,5):(0,1)", 0, "(3,5):(1,0)", 1},
    {"all stride 0", "(4,3):(0,0)", 2, "(4,3):(1,4)", 0},
    {"nested against flat", "((2,3),5):((1,10),2)", 0, "(6,5):(1,6)", 0},
    {"nested without a common refinement", "((2,3),5):((1,10),2)", 0, "((3,2),5):((2,1),6)", 3},
    {"within-tile permutation", "((2,2),(2,2)):((4,2),(1,8))", 0, "(4,4):(4,1)", 0},
    {"two within-tile permutations", "((2,2),(2,2)):((4,2),(1,8))", 1, "((2,2),(2,2)):((1,8),(4,2))", 0},
    {"nested negative strides", "((2,3),(2,2)):((-1,-2),(6,-12))", 0, "((3,2),4):((1,3),6)", 5},
    {"rank 3 nested", "(3,(2,2),5):(20,(1,10),2)", 0, "(3,4,5):(1,3,12)", 0},
    /* Row-major operands against the dense result: walked in transposed 4x4
     * tiles, with partial tiles at both edges. */
    {"row-major pair", "(9,7):(7,1)", 2, "(9,7):(7,1)", 5},
    {"row-major, padded rows", "(6,9):(11,1)", 1, "(6,9):(9,1)", 0},
    {"row-major rows reversed", "(5,8):(-8,1)", 0, "(5,8):(8,1)", 3},
    {"row-major and a broadcast row", "(7,6):(6,1)", 0, "(7,6):(0,1)", 2},
    {"row-major and a broadcast column", "(7,6):(6,1)", 1, "(7,6):(1,0)", 0},
    {"row-major and a broadcast scalar", "(6,9):(9,1)", 0, "(6,9):(0,0)", 3},
    {"rank 3 row-major", "(5,3,6):(18,6,1)", 0, "(5,3,6):(18,6,1)", 4},
    {"rank 3, rows along the middle mode", "(6,5,2):(5,1,30)", 0, "(6,5,2):(10,1,50)", 1},
};

static const sw_dtype_t kFloat[] = {SW_DTYPE_F32, SW_DTYPE_F64};

static void check_binary(const char* what, ref_binary_op op, const operand* a, const operand* b, sw_dtype_t dtype,
                         sw_tensor_t* result) {
  int64_t shape[SW_MAX_RANK];
  size_t rank = 0;
  double* want = ref_binary(op, a, b, dtype, shape, &rank);
  check_exact(what, result, dtype, shape, rank, want);
  free(want);
}

/* The result of every elementwise op and reduce_sum over all axes on a and b. */
static void check_all_ops(const operand* a, const operand* b, sw_dtype_t dtype) {
  sw_tensor_t* r = NULL;
  SW_OK_(sw_add(a->t, b->t, &r));
  check_binary("add", REF_ADD, a, b, dtype, r);
  SW_OK_(sw_add(b->t, a->t, &r));
  check_binary("add reversed", REF_ADD, b, a, dtype, r);
  SW_OK_(sw_elementwise_mul(a->t, b->t, &r));
  check_binary("elementwise_mul", REF_MUL, a, b, dtype, r);
  SW_OK_(sw_mul(a->t, b->t, &r));
  check_binary("mul", REF_MUL, a, b, dtype, r);
  SW_OK_(sw_mul(a->t, a->t, &r));
  check_binary("mul by itself", REF_MUL, a, a, dtype, r);

  double* want = (double*)malloc(sizeof(double) * (size_t)(a->n ? a->n : 1));
  const double scalars[] = {-2.5, 0.1, 3.0};
  for (size_t s = 0; s < sizeof scalars / sizeof scalars[0]; ++s) {
    /* The weak scalar takes the tensor's dtype before multiplying. */
    const double k = round_to(dtype, scalars[s]);
    for (int64_t i = 0; i < a->n; ++i) want[i] = round_to(dtype, a->v[i] * k);
    SW_OK_(sw_mul_scalar(a->t, scalars[s], &r));
    check_exact("mul_scalar", r, dtype, a->shape, a->rank, want);
    SW_OK_(sw_scalar_mul(scalars[s], a->t, &r));
    check_exact("scalar_mul", r, dtype, a->shape, a->rank, want);
  }
  for (int64_t i = 0; i < a->n; ++i) want[i] = a->v[i] > 0 ? a->v[i] : 0.0;
  SW_OK_(sw_relu(a->t, &r));
  check_exact("relu", r, dtype, a->shape, a->rank, want);
  free(want);

  int64_t shape[SW_MAX_RANK];
  size_t rank = 0;
  const unsigned all = (1u << a->rank) - 1u;
  double* sum = ref_reduce_sum(a, all, false, shape, &rank);
  SW_OK_(sw_reduce_sum(a->t, NULL, 0, false, &r));
  check_exact("reduce_sum over every axis", r, dtype, shape, rank, sum);
  free(sum);
  sum = ref_reduce_sum(a, all, true, shape, &rank);
  SW_OK_(sw_reduce_sum(a->t, NULL, 0, true, &r));
  check_exact("reduce_sum over every axis, keepdims", r, dtype, shape, rank, sum);
  free(sum);
}

static void ops_on_every_layout_pair(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  for (size_t d = 0; d < 2; ++d) {
    for (size_t p = 0; p < sizeof kPairs / sizeof kPairs[0]; ++p) {
      print_message("  %s, %s\n", sw_dtype_name(kFloat[d]), kPairs[p].name);
      operand a = op_strided(rt, kFloat[d], kPairs[p].a, kPairs[p].a_offset, pat_int, 1);
      operand b = op_strided(rt, kFloat[d], kPairs[p].b, kPairs[p].b_offset, pat_int, 2);
      check_all_ops(&a, &b, kFloat[d]);
      check_all_ops(&b, &a, kFloat[d]);
      operand_free(&a);
      operand_free(&b);
    }
  }
}

/* Non-integer values: f32 results must be the correctly rounded f32 result,
 * which is what one rounding of the exact double result gives. */
static void ops_round_like_the_dtype(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  for (size_t d = 0; d < 2; ++d) {
    operand a = op_strided(rt, kFloat[d], "(3,(2,2),5):(20,(1,10),2)", 3, pat_smooth, 1);
    operand b = op_strided(rt, kFloat[d], "(3,4,5):(-1,-3,12)", 0, pat_smooth, 2);
    sw_tensor_t* r = NULL;
    SW_OK_(sw_add(a.t, b.t, &r));
    check_binary("add", REF_ADD, &a, &b, kFloat[d], r);
    SW_OK_(sw_mul(a.t, b.t, &r));
    check_binary("mul", REF_MUL, &a, &b, kFloat[d], r);
    double* want = (double*)malloc(sizeof(double) * (size_t)a.n);
    const double k = round_to(kFloat[d], 0.1);
    for (int64_t i = 0; i < a.n; ++i) want[i] = round_to(kFloat[d], a.v[i] * k);
    SW_OK_(sw_mul_scalar(a.t, 0.1, &r));
    check_exact("mul_scalar 0.1", r, kFloat[d], a.shape, a.rank, want);
    free(want);
    operand_free(&a);
    operand_free(&b);
  }
}

/* Transposed and permuted views made by the library rather than by hand. */
static void ops_on_transposed_views(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t s573[3] = {5, 7, 3}, s357[3] = {3, 5, 7}, s53[2] = {5, 3};
  for (size_t d = 0; d < 2; ++d) {
    operand base = op_dense(rt, kFloat[d], s573, 3, pat_int, 3);
    const size_t perm[3] = {2, 0, 1}; /* (3,5,7) */
    operand p = op_permute(&base, perm);
    operand dense = op_dense(rt, kFloat[d], s357, 3, pat_int, 4);
    check_all_ops(&p, &dense, kFloat[d]);
    check_all_ops(&dense, &p, kFloat[d]);
    check_all_ops(&p, &p, kFloat[d]);

    operand m = op_dense(rt, kFloat[d], s53, 2, pat_int, 5);
    const size_t swap[2] = {1, 0};
    operand mt = op_permute(&m, swap); /* sw_tensor_transpose: (3,5) */
    operand nested = op_strided(rt, kFloat[d], "(3,(1,5)):(5,(7,1))", 2, pat_int, 6);
    check_all_ops(&mt, &nested, kFloat[d]);
    /* A transpose of a transpose is the original layout again. */
    operand mtt = op_permute(&mt, swap);
    check_all_ops(&mtt, &m, kFloat[d]);
    operand_free(&mtt);
    operand_free(&nested);
    operand_free(&mt);
    operand_free(&m);
    operand_free(&dense);
    operand_free(&p);
    operand_free(&base);
  }
}

/* Rank-0 operands: each op keeps rank 0, reduce_sum of a scalar is itself. */
static void ops_on_rank0_scalars(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  for (size_t d = 0; d < 2; ++d) {
    const double x = -3.0, y = 4.0;
    operand a = op_values(rt, kFloat[d], NULL, 0, &x);
    operand b = op_values(rt, kFloat[d], NULL, 0, &y);
    check_all_ops(&a, &b, kFloat[d]);
    check_all_ops(&b, &a, kFloat[d]);
    /* A scalar view into the middle of a carrier. */
    operand c = op_strided(rt, kFloat[d], "():()", 5, pat_int, 7);
    check_all_ops(&c, &a, kFloat[d]);
    sw_tensor_t* r = NULL;
    SW_OK_(sw_reduce_sum(a.t, NULL, 0, true, &r));
    check_exact("reduce_sum(scalar, keepdims)", r, kFloat[d], NULL, 0, &x);
    operand_free(&a);
    operand_free(&b);
    operand_free(&c);
  }
}

static void relu_at_exactly_zero(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t s[1] = {7};
  const double v[7] = {0.0, -0.0, 1e-30, -1e-30, 2.5, -2.5, 0.0};
  const double want[7] = {0.0, 0.0, 1e-30, 0.0, 2.5, 0.0, 0.0};
  for (size_t d = 0; d < 2; ++d) {
    operand a = op_values(rt, kFloat[d], s, 1, v);
    sw_tensor_t* r = NULL;
    SW_OK_(sw_relu(a.t, &r));
    double w[7];
    for (int i = 0; i < 7; ++i) w[i] = round_to(kFloat[d], want[i]);
    check_exact("relu around 0", r, kFloat[d], s, 1, w);
    operand_free(&a);
  }
}

/* reduce_sum over every subset of the axes of a rank-3 tensor, with and
 * without keepdims, with axes given positive, negative and out of order. */
static void reduce_sum_every_axis_subset(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const char* layouts[] = {"(3,5,7):(1,3,15)", "(3,5,7):(-35,7,-1)", "(3,(5),(7,1)):(1,(3),(15,99))",
                           "((3,1),(5),7):((35,0),(-7),1)", "(3,5,7):(0,1,5)"};
  for (size_t d = 0; d < 2; ++d)
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; ++l) {
      operand a = op_strided(rt, kFloat[d], layouts[l], 2, pat_int, (int)l);
      for (unsigned mask = 0; mask < 8; ++mask)
        for (int keep = 0; keep < 2; ++keep)
          for (int spelling = 0; spelling < 3; ++spelling) {
            int64_t axes[3];
            size_t count = 0;
            for (int i = 2; i >= 0; --i) { /* descending: out of order on purpose */
              if (!((mask >> i) & 1u)) continue;
              const bool negative = spelling == 1 || (spelling == 2 && count % 2 == 1);
              axes[count++] = negative ? i - 3 : i;
            }
            int64_t shape[SW_MAX_RANK];
            size_t rank = 0;
            double* want = ref_reduce_sum(&a, mask, keep != 0, shape, &rank);
            sw_tensor_t* r = NULL;
            SW_OK_(sw_reduce_sum(a.t, axes, count, keep != 0, &r));
            char what[128];
            snprintf(what, sizeof what, "reduce_sum %s mask %u keepdims %d", layouts[l], mask, keep);
            check_exact(what, r, kFloat[d], shape, rank, want);
            free(want);
          }
      operand_free(&a);
    }
}

static void reduce_sum_over_empty_modes(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t s[3] = {3, 0, 2};
  for (size_t d = 0; d < 2; ++d) {
    operand a = op_dense(rt, kFloat[d], s, 3, pat_int, 0);
    for (unsigned mask = 0; mask < 8; ++mask)
      for (int keep = 0; keep < 2; ++keep) {
        int64_t axes[3];
        size_t count = 0;
        for (int i = 0; i < 3; ++i)
          if ((mask >> i) & 1u) axes[count++] = i;
        int64_t shape[SW_MAX_RANK];
        size_t rank = 0;
        double* want = ref_reduce_sum(&a, mask, keep != 0, shape, &rank); /* zeros where non-empty */
        sw_tensor_t* r = NULL;
        SW_OK_(sw_reduce_sum(a.t, axes, count, keep != 0, &r));
        check_exact("reduce_sum over an empty mode", r, kFloat[d], shape, rank, want);
        free(want);
      }
    operand_free(&a);
  }
}

/* axes non-NULL with count 0 names no axis: nothing is summed (NumPy axis=()). */
static void reduce_sum_with_no_axes_is_a_copy(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  operand a = op_strided(rt, SW_DTYPE_F32, "(3,4):(-4,1)", 0, pat_int, 3);
  const int64_t unused = 0;
  sw_tensor_t* r = NULL;
  SW_OK_(sw_reduce_sum(a.t, &unused, 0, false, &r));
  check_exact("reduce_sum(axes=())", r, SW_DTYPE_F32, a.shape, a.rank, a.v);
  operand_free(&a);
}

static void reduce_sum_axis_errors(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t s[3] = {2, 3, 4};
  operand a = op_dense(rt, SW_DTYPE_F32, s, 3, pat_int, 0);
  sw_tensor_t* r = NULL;
  const int64_t dup[2] = {1, 1}, dup_neg[2] = {1, -2}, dup3[3] = {0, 2, -1};
  SW_FAILS(sw_reduce_sum(a.t, dup, 2, false, &r), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_reduce_sum(a.t, dup_neg, 2, true, &r), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_reduce_sum(a.t, dup3, 3, false, &r), SW_ERROR_VALUE, NULL);
  const int64_t big = 3, neg = -4, huge = INT64_MAX, tiny = INT64_MIN;
  SW_FAILS(sw_reduce_sum(a.t, &big, 1, false, &r), SW_ERROR_INDEX, NULL);
  SW_FAILS(sw_reduce_sum(a.t, &neg, 1, false, &r), SW_ERROR_INDEX, NULL);
  SW_FAILS(sw_reduce_sum(a.t, &huge, 1, false, &r), SW_ERROR_INDEX, NULL);
  SW_FAILS(sw_reduce_sum(a.t, &tiny, 1, false, &r), SW_ERROR_INDEX, NULL);
  SW_FAILS(sw_reduce_sum(a.t, NULL, 1, false, &r), SW_ERROR_VALUE, NULL);
  assert_null(r);
  /* A rank-0 tensor has no axis 0. */
  const double x = 1;
  operand s0 = op_values(rt, SW_DTYPE_F32, NULL, 0, &x);
  const int64_t zero = 0;
  SW_FAILS(sw_reduce_sum(s0.t, &zero, 1, false, &r), SW_ERROR_INDEX, NULL);
  operand_free(&s0);
  operand_free(&a);
}

static void dtype_errors(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t s[2] = {2, 3};
  operand f = op_dense(rt, SW_DTYPE_F32, s, 2, pat_int, 0);
  operand g = op_dense(rt, SW_DTYPE_F64, s, 2, pat_int, 1);
  operand i = op_dense(rt, SW_DTYPE_I32, s, 2, pat_int, 2);
  operand h = op_dense(rt, SW_DTYPE_F16, s, 2, pat_int, 3);
  sw_tensor_t* r = NULL;
  SW_FAILS(sw_add(f.t, g.t, &r), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_add(g.t, f.t, &r), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_mul(f.t, g.t, &r), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_elementwise_mul(g.t, f.t, &r), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_add(i.t, i.t, &r), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_add(f.t, i.t, &r), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_mul(i.t, i.t, &r), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_mul_scalar(i.t, 2.0, &r), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_scalar_mul(2.0, i.t, &r), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_relu(i.t, &r), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_reduce_sum(i.t, NULL, 0, false, &r), SW_ERROR_TYPE, NULL);
  /* f16 is a storage dtype: only matmul computes on it. */
  SW_FAILS(sw_add(h.t, h.t, &r), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_relu(h.t, &r), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_mul_scalar(h.t, 2.0, &r), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_reduce_sum(h.t, NULL, 0, false, &r), SW_ERROR_TYPE, NULL);
  assert_null(r);
  operand_free(&f);
  operand_free(&g);
  operand_free(&i);
  operand_free(&h);
}

static void shape_errors(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t s23[2] = {2, 3}, s32[2] = {3, 2};
  operand a = op_dense(rt, SW_DTYPE_F32, s23, 2, pat_int, 0);
  operand b = op_dense(rt, SW_DTYPE_F32, s32, 2, pat_int, 1);
  sw_tensor_t* r = NULL;
  SW_FAILS(sw_add(a.t, b.t, &r), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_mul(a.t, b.t, &r), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_elementwise_mul(b.t, a.t, &r), SW_ERROR_VALUE, NULL);
  assert_null(r);
  operand_free(&a);
  operand_free(&b);
}

/* Past the inline grain the kernels split work across threads: blocks that
 * start mid-row of a strided operand and partial sums must still be exact. */
static void large_inputs_use_every_thread(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  for (size_t d = 0; d < 2; ++d) {
    operand a = op_strided(rt, kFloat[d], "(301,299):(299,1)", 7, pat_int, 1);
    operand b = op_strided(rt, kFloat[d], "((7,43),299):((1,7),-301)", 0, pat_int, 2);
    sw_tensor_t* r = NULL;
    SW_OK_(sw_add(a.t, b.t, &r));
    check_binary("large add", REF_ADD, &a, &b, kFloat[d], r);
    SW_OK_(sw_mul(a.t, b.t, &r));
    check_binary("large mul", REF_MUL, &a, &b, kFloat[d], r);
    double* want = (double*)malloc(sizeof(double) * (size_t)a.n);
    for (int64_t i = 0; i < a.n; ++i) want[i] = a.v[i] > 0 ? a.v[i] : 0;
    SW_OK_(sw_relu(a.t, &r));
    check_exact("large relu", r, kFloat[d], a.shape, a.rank, want);
    free(want);
    for (unsigned mask = 0; mask < 4; ++mask) {
      int64_t axes[2], shape[2];
      size_t count = 0, rank = 0;
      for (int i = 0; i < 2; ++i)
        if ((mask >> i) & 1u) axes[count++] = i;
      const operand* src[2] = {&a, &b};
      for (int k = 0; k < 2; ++k) {
        double* sum = ref_reduce_sum(src[k], mask, false, shape, &rank);
        SW_OK_(sw_reduce_sum(src[k]->t, axes, count, false, &r));
        check_exact("large reduce_sum", r, kFloat[d], shape, rank, sum);
        free(sum);
      }
    }
    operand_free(&a);
    operand_free(&b);
  }
}

/* Results are fresh: writing to one never changes the inputs, and inputs
 * keep their versions. */
static void results_are_fresh_tensors(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t s[2] = {2, 2};
  operand a = op_dense(rt, SW_DTYPE_F32, s, 2, pat_int, 0);
  uint64_t v0 = 0, v1 = 0;
  SW_OK_(sw_tensor_version(a.t, &v0));
  sw_tensor_t* r = NULL;
  SW_OK_(sw_mul_scalar(a.t, 1.0, &r));
  sw_carrier_t *ca = NULL, *cr = NULL;
  SW_OK_(sw_tensor_carrier(a.t, &ca));
  SW_OK_(sw_tensor_carrier(r, &cr));
  assert_ptr_not_equal(ca, cr);
  const int64_t c[2] = {0, 0};
  SW_OK_(sw_tensor_set(r, c, 2, 100.0));
  double x = 0;
  SW_OK_(sw_tensor_get(a.t, c, 2, &x));
  assert_true(x == a.v[0]);
  SW_OK_(sw_tensor_version(a.t, &v1));
  assert_true(v0 == v1);
  sw_carrier_release(ca);
  sw_carrier_release(cr);
  sw_tensor_release(r);
  operand_free(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(ops_on_every_layout_pair),
      cmocka_unit_test(ops_round_like_the_dtype),
      cmocka_unit_test(ops_on_transposed_views),
      cmocka_unit_test(ops_on_rank0_scalars),
      cmocka_unit_test(relu_at_exactly_zero),
      cmocka_unit_test(reduce_sum_every_axis_subset),
      cmocka_unit_test(reduce_sum_over_empty_modes),
      cmocka_unit_test(reduce_sum_with_no_axes_is_a_copy),
      cmocka_unit_test(reduce_sum_axis_errors),
      cmocka_unit_test(dtype_errors),
      cmocka_unit_test(shape_errors),
      cmocka_unit_test(large_inputs_use_every_thread),
      cmocka_unit_test(results_are_fresh_tensors),
  };
  return cmocka_run_group_tests(tests, sw_test_runtime_setup, sw_test_runtime_teardown);
}
