/* sw_matmul with NumPy semantics against a plain-loop double reference:
 * batches, batch broadcasting, rank-1 promotion, empty contractions, strided
 * and nested operands, half inputs and the BLAS-sized path. */
#include "sw_ops_test.h"

static const sw_dtype_t kFloat[] = {SW_DTYPE_F32, SW_DTYPE_F64};

/* a @ b (sw_matmul_ex with `desc`, or sw_matmul when NULL) must equal the
 * reference rounded once to `out_dtype` (small integers keep every partial
 * sum exact in f32). */
static void check_matmul_exact_ex(const char* what, const operand* a, const operand* b,
                                  const sw_matmul_desc_t* desc, sw_dtype_t out_dtype) {
  int64_t shape[SW_MAX_RANK];
  size_t rank = 0;
  double* want = ref_matmul(a, b, shape, &rank, NULL);
  if (!want) fail_msg("%s: the reference rejects these shapes", what);
  int64_t n = 1;
  for (size_t i = 0; i < rank; ++i) n *= shape[i];
  for (int64_t i = 0; i < n; ++i) want[i] = round_to(out_dtype, want[i]);
  sw_tensor_t* r = NULL;
  if (desc)
    SW_OK_(sw_matmul_ex(a->t, b->t, desc, &r));
  else
    SW_OK_(sw_matmul(a->t, b->t, &r));
  check_exact(what, r, out_dtype, shape, rank, want);
  free(want);
}

static void check_matmul_exact(const char* what, const operand* a, const operand* b, sw_dtype_t out_dtype) {
  check_matmul_exact_ex(what, a, b, NULL, out_dtype);
}

/* a @ b within rtol * sum_k |a_ik b_kj| of the reference. */
static void check_matmul_close(const char* what, const operand* a, const operand* b, sw_dtype_t dtype, double rtol) {
  int64_t shape[SW_MAX_RANK];
  size_t rank = 0;
  double* scale = NULL;
  double* want = ref_matmul(a, b, shape, &rank, &scale);
  if (!want) fail_msg("%s: the reference rejects these shapes", what);
  int64_t n = 1;
  for (size_t i = 0; i < rank; ++i) n *= shape[i];
  for (int64_t i = 0; i < n; ++i) scale[i] = rtol * (scale[i] > 1e-30 ? scale[i] : 1e-30);
  sw_tensor_t* r = NULL;
  SW_OK_(sw_matmul(a->t, b->t, &r));
  double* got = result_values(r, dtype, shape, rank);
  expect_within(what, got, want, scale, n);
  free(got);
  free(want);
  free(scale);
  sw_tensor_release(r);
}

typedef struct mm_case {
  const char* name;
  size_t ra;
  int64_t a[4];
  size_t rb;
  int64_t b[4];
  size_t rr; /* expected result rank and shape, written out */
  int64_t r[4];
} mm_case;

static const mm_case kShapes[] = {
    {"2-D", 2, {3, 4}, 2, {4, 5}, 2, {3, 5}},
    {"1x1", 2, {1, 1}, 2, {1, 1}, 2, {1, 1}},
    {"outer product (K = 1)", 2, {7, 1}, 2, {1, 9}, 2, {7, 9}},
    {"row times column", 2, {1, 6}, 2, {6, 1}, 2, {1, 1}},
    {"odd sizes", 2, {5, 7}, 2, {7, 3}, 2, {5, 3}},
    {"batched", 3, {2, 3, 4}, 3, {2, 4, 5}, 3, {2, 3, 5}},
    {"batch broadcast", 4, {2, 1, 3, 4}, 3, {3, 4, 5}, 4, {2, 3, 3, 5}},
    {"batch broadcast, both sides stretch", 3, {1, 3, 2}, 4, {4, 1, 2, 3}, 4, {4, 1, 3, 3}},
    {"batch against a matrix", 3, {4, 2, 3}, 2, {3, 2}, 3, {4, 2, 2}},
    {"matrix against a batch", 2, {2, 3}, 3, {4, 3, 2}, 3, {4, 2, 2}},
    {"vector @ matrix", 1, {4}, 2, {4, 5}, 1, {5}},
    {"matrix @ vector", 2, {3, 4}, 1, {4}, 1, {3}},
    {"batch @ vector", 3, {2, 3, 4}, 1, {4}, 2, {2, 3}},
    {"vector @ batch", 1, {4}, 3, {2, 4, 5}, 2, {2, 5}},
    {"dot product", 1, {6}, 1, {6}, 0, {0}},
    {"dot product of one element", 1, {1}, 1, {1}, 0, {0}},
    {"K = 0", 2, {3, 0}, 2, {0, 5}, 2, {3, 5}},
    {"K = 0 batched", 3, {2, 3, 0}, 3, {1, 0, 4}, 3, {2, 3, 4}},
    {"empty dot product", 1, {0}, 1, {0}, 0, {0}},
    {"M = 0", 2, {0, 4}, 2, {4, 5}, 2, {0, 5}},
    {"N = 0", 2, {3, 4}, 2, {4, 0}, 2, {3, 0}},
    {"empty batch", 3, {0, 3, 4}, 2, {4, 5}, 3, {0, 3, 5}},
};

static void matmul_shapes(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  for (size_t d = 0; d < 2; ++d)
    for (size_t c = 0; c < sizeof kShapes / sizeof kShapes[0]; ++c) {
      const mm_case* k = &kShapes[c];
      operand a = op_dense(rt, kFloat[d], k->a, k->ra, pat_int, 1);
      operand b = op_dense(rt, kFloat[d], k->b, k->rb, pat_int, 2);
      /* The result shape is what NumPy gives. */
      int64_t shape[SW_MAX_RANK];
      size_t rank = 0;
      double* want = ref_matmul(&a, &b, shape, &rank, NULL);
      assert_non_null(want);
      assert_int_equal(rank, k->rr);
      for (size_t i = 0; i < rank; ++i) assert_int_equal(shape[i], k->r[i]);
      free(want);
      char what[128];
      snprintf(what, sizeof what, "%s %s", sw_dtype_name(kFloat[d]), k->name);
      check_matmul_exact(what, &a, &b, kFloat[d]);
      operand_free(&a);
      operand_free(&b);
    }
}

/* [[1,2,3],[4,5,6]] @ [[1,0],[0,1],[-1,1]] = [[-2,5],[-2,11]], written out. */
static void matmul_known_values(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s22[2] = {2, 2}, s3[1] = {3};
  const double av[6] = {1, 4, 2, 5, 3, 6}, bv[6] = {1, 0, -1, 0, 1, 1};
  const double cv[4] = {-2, -2, 5, 11};
  const double u[3] = {1, 2, 3}, w[3] = {4, -5, 6};
  for (size_t d = 0; d < 2; ++d) {
    operand a = op_values(rt, kFloat[d], s23, 2, av);
    operand b = op_values(rt, kFloat[d], s32, 2, bv);
    sw_tensor_t* r = NULL;
    SW_OK_(sw_matmul(a.t, b.t, &r));
    check_exact("2x3 @ 3x2", r, kFloat[d], s22, 2, cv);
    operand x = op_values(rt, kFloat[d], s3, 1, u);
    operand y = op_values(rt, kFloat[d], s3, 1, w);
    const double dot = 1 * 4 - 2 * 5 + 3 * 6;
    SW_OK_(sw_matmul(x.t, y.t, &r));
    check_exact("dot", r, kFloat[d], NULL, 0, &dot);
    const double av_x[2] = {1 * 1 + 2 * 2 + 3 * 3, 4 * 1 + 5 * 2 + 6 * 3};
    const int64_t s2[1] = {2};
    SW_OK_(sw_matmul(a.t, x.t, &r));
    check_exact("matrix @ vector", r, kFloat[d], s2, 1, av_x);
    operand_free(&a);
    operand_free(&b);
    operand_free(&x);
    operand_free(&y);
  }
}

/* Operands that are views: transposes, offsets, non-unit and negative
 * strides, stride-0 broadcast layouts and nested layouts that BLAS cannot
 * take directly. */
static void matmul_strided_operands(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  static const struct {
    const char* a;
    int64_t a_offset;
    const char* b;
    int64_t b_offset;
  } cases[] = {
      {"(3,4):(4,1)", 0, "(4,5):(5,1)", 0},                          /* both row major */
      {"(3,4):(1,3)", 9, "(4,5):(1,6)", 5},                          /* offsets, padded ld */
      {"(3,4):(2,7)", 0, "(4,5):(3,13)", 1},                         /* non-unit strides */
      {"(3,4):(-1,-3)", 0, "(4,5):(5,-1)", 2},                       /* negative strides */
      {"(3,4):(0,1)", 0, "(4,5):(1,0)", 0},                          /* stride-0 layouts */
      {"(3,4):(0,0)", 4, "(4,5):(0,0)", 0},                          /* all one value */
      {"((2,2),(2,2)):((4,2),(1,8))", 0, "(4,(2,3)):(1,(12,4))", 0}, /* nested */
      {"((2,2),4):((1,8),2)", 1, "((2,2),3):((3,1),6)", 0},           /* nested, not affine */
      {"(2,(3,2),4):(1,(2,6),12)", 0, "(2,4,(1,5)):(20,5,(7,1))", 3}, /* batched nested */
      {"(2,3,4):(12,4,1)", 0, "(1,4,5):(0,-5,1)", 0},                 /* batched C order */
      {"(3,1,4):(4,9,1)", 0, "(1,4,1):(1,1,1)", 0},                   /* extent-1 modes with odd strides */
      {"(1,4):(7,2)", 0, "(4,1):(3,5)", 2},                            /* row times column views */
      {"7:-2", 0, "(7,3):(3,1)", 0},                                   /* strided vector */
      {"(3,7):(7,1)", 0, "((7)):((-3))", 0},                           /* nested vector */
  };
  for (size_t d = 0; d < 2; ++d)
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
      operand a = op_strided(rt, kFloat[d], cases[c].a, cases[c].a_offset, pat_int, 3);
      operand b = op_strided(rt, kFloat[d], cases[c].b, cases[c].b_offset, pat_int, 4);
      char what[160];
      snprintf(what, sizeof what, "%s %s @ %s", sw_dtype_name(kFloat[d]), cases[c].a, cases[c].b);
      check_matmul_exact(what, &a, &b, kFloat[d]);
      operand_free(&a);
      operand_free(&b);
    }
}

/* Transposes made with sw_tensor_transpose, on either side and both, and a
 * batched transpose of the last two modes. */
static void matmul_transposed_views(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t s43[2] = {4, 3}, s54[2] = {5, 4}, s34[2] = {3, 4}, s45[2] = {4, 5};
  const int64_t s243[3] = {2, 4, 3}, s254[3] = {2, 5, 4};
  const size_t swap[2] = {1, 0}, swap12[3] = {0, 2, 1};
  for (size_t d = 0; d < 2; ++d) {
    operand at_src = op_dense(rt, kFloat[d], s43, 2, pat_int, 1);
    operand bt_src = op_dense(rt, kFloat[d], s54, 2, pat_int, 2);
    operand at = op_permute(&at_src, swap); /* (3,4) */
    operand bt = op_permute(&bt_src, swap); /* (4,5) */
    operand a = op_dense(rt, kFloat[d], s34, 2, pat_int, 3);
    operand b = op_dense(rt, kFloat[d], s45, 2, pat_int, 4);
    check_matmul_exact("a^T @ b", &at, &b, kFloat[d]);
    check_matmul_exact("a @ b^T", &a, &bt, kFloat[d]);
    check_matmul_exact("a^T @ b^T", &at, &bt, kFloat[d]);
    /* (a^T)^T @ a^T: (4,3) @ (3,4) */
    operand att = op_permute(&at, swap);
    check_matmul_exact("a^T^T @ a^T", &att, &at, kFloat[d]);
    operand ab_src = op_dense(rt, kFloat[d], s243, 3, pat_int, 5);
    operand bb_src = op_dense(rt, kFloat[d], s254, 3, pat_int, 6);
    operand abt = op_permute(&ab_src, swap12); /* (2,3,4) */
    operand bbt = op_permute(&bb_src, swap12); /* (2,4,5) */
    check_matmul_exact("batched a^T @ b^T", &abt, &bbt, kFloat[d]);
    check_matmul_exact("batched a^T @ b", &abt, &b, kFloat[d]);
    /* Moving the batch mode: (4,2,3) viewed as (2,3,4)... via permute (1,2,0). */
    const size_t rot[3] = {1, 2, 0};
    operand rot_src = op_dense(rt, kFloat[d], (const int64_t[3]){4, 2, 3}, 3, pat_int, 7);
    operand rotv = op_permute(&rot_src, rot); /* (2,3,4) */
    check_matmul_exact("batch mode moved last in memory", &rotv, &bbt, kFloat[d]);
    operand_free(&rotv);
    operand_free(&rot_src);
    operand_free(&abt);
    operand_free(&bbt);
    operand_free(&ab_src);
    operand_free(&bb_src);
    operand_free(&att);
    operand_free(&a);
    operand_free(&b);
    operand_free(&at);
    operand_free(&bt);
    operand_free(&at_src);
    operand_free(&bt_src);
  }
}

/* f16 and bf16 inputs accumulate in f32 and give a result of their own
 * dtype, rounded once (as PyTorch), or the f32 sums through sw_matmul_ex;
 * small integers and quarters are exact in every f32 step. */
static void matmul_half_inputs(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const sw_dtype_t halves[2] = {SW_DTYPE_F16, SW_DTYPE_BF16};
  sw_matmul_desc_t f32_result;
  sw_matmul_desc_init(&f32_result);
  f32_result.out_dtype = SW_DTYPE_F32;
  for (size_t h = 0; h < 2; ++h) {
    for (size_t c = 0; c < sizeof kShapes / sizeof kShapes[0]; ++c) {
      const mm_case* k = &kShapes[c];
      operand a = op_dense(rt, halves[h], k->a, k->ra, pat_int, 1);
      operand b = op_dense(rt, halves[h], k->b, k->rb, pat_int, 2);
      char what[128];
      snprintf(what, sizeof what, "%s %s", sw_dtype_name(halves[h]), k->name);
      check_matmul_exact(what, &a, &b, halves[h]);
      check_matmul_exact_ex(what, &a, &b, &f32_result, SW_DTYPE_F32);
      operand_free(&a);
      operand_free(&b);
    }
    /* Quarter values, strided and nested half operands. */
    operand a = op_strided(rt, halves[h], "((2,2),5):((1,10),2)", 3, pat_quarter, 3);
    operand b = op_strided(rt, halves[h], "(5,3):(-1,5)", 0, pat_quarter, 4);
    check_matmul_exact("half strided", &a, &b, halves[h]);
    check_matmul_exact_ex("half strided", &a, &b, &f32_result, SW_DTYPE_F32);
    const size_t swap[2] = {1, 0};
    operand bt = op_permute(&b, swap); /* (3,5) */
    operand at = op_permute(&a, swap); /* (5,4) */
    check_matmul_exact_ex("half transposed", &bt, &at, &f32_result, SW_DTYPE_F32);
    operand_free(&at);
    operand_free(&bt);
    operand_free(&a);
    operand_free(&b);
    /* Sums beyond the half range are exact in the f32 accumulator. */
    const int64_t s1k[2] = {1, 64}, sk1[2] = {64, 1}, s11[2] = {1, 1};
    double big[64];
    for (int i = 0; i < 64; ++i) big[i] = 256.0;
    operand x = op_values(rt, halves[h], s1k, 2, big);
    operand y = op_values(rt, halves[h], sk1, 2, big);
    sw_tensor_t* r = NULL;
    SW_OK_(sw_matmul_ex(x.t, y.t, &f32_result, &r));
    const double want = 64.0 * 256.0 * 256.0; /* 2^22: overflows f16, exact in f32 */
    check_exact("half sum past the half range", r, SW_DTYPE_F32, s11, 2, &want);
    operand_free(&x);
    operand_free(&y);
  }
}

static void matmul_errors(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t s34[2] = {3, 4}, s54[2] = {5, 4}, s3[1] = {3}, s4[1] = {4};
  const int64_t s234[3] = {2, 3, 4}, s345[3] = {3, 4, 5};
  operand a = op_dense(rt, SW_DTYPE_F32, s34, 2, pat_int, 1);
  operand b = op_dense(rt, SW_DTYPE_F32, s54, 2, pat_int, 2);
  operand v3 = op_dense(rt, SW_DTYPE_F32, s3, 1, pat_int, 3);
  operand v4 = op_dense(rt, SW_DTYPE_F32, s4, 1, pat_int, 4);
  operand ba = op_dense(rt, SW_DTYPE_F32, s234, 3, pat_int, 5);
  operand bb = op_dense(rt, SW_DTYPE_F32, s345, 3, pat_int, 6);
  const double one = 1;
  operand s0 = op_values(rt, SW_DTYPE_F32, NULL, 0, &one);
  operand a64 = op_dense(rt, SW_DTYPE_F64, s34, 2, pat_int, 7);
  operand b16 = op_dense(rt, SW_DTYPE_F16, s54, 2, pat_int, 8);
  operand bbf = op_dense(rt, SW_DTYPE_BF16, s54, 2, pat_int, 9);
  operand ai = op_dense(rt, SW_DTYPE_I32, s34, 2, pat_int, 10);
  operand bi = op_dense(rt, SW_DTYPE_I32, (const int64_t[2]){4, 2}, 2, pat_int, 11);
  sw_tensor_t* r = NULL;
  /* Mismatched contraction extents. */
  SW_FAILS(sw_matmul(a.t, b.t, &r), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_matmul(v3.t, v4.t, &r), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_matmul(a.t, v3.t, &r), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_matmul(v4.t, a.t, &r), SW_ERROR_VALUE, NULL);
  /* Batch modes that do not broadcast: (2,) against (3,). */
  SW_FAILS(sw_matmul(ba.t, bb.t, &r), SW_ERROR_VALUE, NULL);
  /* Rank-0 operands. */
  SW_FAILS(sw_matmul(s0.t, a.t, &r), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_matmul(a.t, s0.t, &r), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_matmul(s0.t, s0.t, &r), SW_ERROR_VALUE, NULL);
  /* Mixed dtypes, even where the shapes fit. */
  const int64_t s45[2] = {4, 5};
  operand b32 = op_dense(rt, SW_DTYPE_F32, s45, 2, pat_int, 12);
  operand b64 = op_dense(rt, SW_DTYPE_F64, s45, 2, pat_int, 13);
  operand h16 = op_dense(rt, SW_DTYPE_F16, s34, 2, pat_int, 14);
  operand hbf = op_dense(rt, SW_DTYPE_BF16, s45, 2, pat_int, 15);
  SW_FAILS(sw_matmul(a.t, b64.t, &r), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_matmul(a64.t, b32.t, &r), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_matmul(h16.t, b32.t, &r), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_matmul(h16.t, hbf.t, &r), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_matmul(a.t, hbf.t, &r), SW_ERROR_TYPE, NULL);
  /* Integer operands. */
  SW_FAILS(sw_matmul(ai.t, bi.t, &r), SW_ERROR_TYPE, NULL);
  /* Result dtypes sw_matmul_ex refuses, and a desc of an unknown size. */
  sw_matmul_desc_t desc;
  sw_matmul_desc_init(&desc);
  desc.out_dtype = SW_DTYPE_F64;
  SW_FAILS(sw_matmul_ex(a.t, b32.t, &desc, &r), SW_ERROR_TYPE, "the result of f32 operands is f32, not f64");
  desc.out_dtype = SW_DTYPE_F16;
  SW_FAILS(sw_matmul_ex(a.t, b32.t, &desc, &r), SW_ERROR_TYPE, "not f16");
  SW_FAILS(sw_matmul_ex(b16.t, h16.t, &desc, &r), SW_ERROR_VALUE, "contraction");
  desc.out_dtype = SW_DTYPE_BF16;
  SW_FAILS(sw_matmul_ex(h16.t, b16.t, &desc, &r), SW_ERROR_TYPE, "the result of f16 operands is f16 or f32, not bf16");
  desc.out_dtype = SW_DTYPE_I32;
  SW_FAILS(sw_matmul_ex(ai.t, bi.t, &desc, &r), SW_ERROR_TYPE, NULL);
  sw_matmul_desc_init(&desc);
  desc.struct_size = 1000;
  SW_FAILS(sw_matmul_ex(a.t, b32.t, &desc, &r), SW_ERROR_VALUE, "struct_size");
  /* Sizes that end inside a field, or before the first, are no version of
   * the struct either (found by tests/fuzz/fuzz_descriptors.c). */
  const uint32_t partial[] = {0, 4, 5, 6, 7, (uint32_t)sizeof(sw_matmul_desc_t) - 1};
  for (size_t i = 0; i < sizeof partial / sizeof partial[0]; ++i) {
    sw_matmul_desc_init(&desc);
    desc.struct_size = partial[i];
    SW_FAILS(sw_matmul_ex(a.t, b32.t, &desc, &r), SW_ERROR_VALUE, "struct_size");
  }
  sw_matmul_desc_init(&desc);
  SW_FAILS(sw_matmul_ex(a.t, b32.t, &desc, NULL), SW_ERROR_VALUE, NULL);
  assert_null(r);
  operand* all[] = {&a, &b, &v3, &v4, &ba, &bb, &s0, &a64, &b16, &bbf, &ai, &bi, &b32, &b64, &h16, &hbf};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) operand_free(all[i]);
}

/* Sizes past any small-matrix shortcut: the BLAS path, against a double
 * reference, directly and through transposed, offset and batched operands. */
static void matmul_blas_sized(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t sa[2] = {130, 70}, sb[2] = {70, 90}, sat[2] = {70, 130}, sbt[2] = {90, 70};
  const double rtol[2] = {1e-4, 1e-12};
  const size_t swap[2] = {1, 0};
  for (size_t d = 0; d < 2; ++d) {
    operand a = op_dense(rt, kFloat[d], sa, 2, pat_smooth, 1);
    operand b = op_dense(rt, kFloat[d], sb, 2, pat_smooth, 2);
    check_matmul_close("130x70 @ 70x90", &a, &b, kFloat[d], rtol[d]);
    operand at_src = op_dense(rt, kFloat[d], sat, 2, pat_smooth, 3);
    operand bt_src = op_dense(rt, kFloat[d], sbt, 2, pat_smooth, 4);
    operand at = op_permute(&at_src, swap);
    operand bt = op_permute(&bt_src, swap);
    check_matmul_close("transposed 130x70 @ transposed 70x90", &at, &bt, kFloat[d], rtol[d]);
    operand ao = op_strided(rt, kFloat[d], "(130,70):(1,131)", 17, pat_smooth, 5);
    operand bn = op_strided(rt, kFloat[d], "(70,(10,9)):(1,(70,700))", 0, pat_smooth, 6);
    check_matmul_close("padded 130x70 @ nested 70x90", &ao, &bn, kFloat[d], rtol[d]);
    operand bb = op_strided(rt, kFloat[d], "(3,70,90):(6300,1,70)", 0, pat_smooth, 7);
    check_matmul_close("130x70 @ batched (3,70,90)", &a, &bb, kFloat[d], rtol[d]);
    operand v = op_strided(rt, kFloat[d], "70:-2", 0, pat_smooth, 8);
    check_matmul_close("130x70 @ vector", &a, &v, kFloat[d], rtol[d]);
    check_matmul_close("vector @ 70x90", &v, &b, kFloat[d], rtol[d]);
    operand* all[] = {&a, &b, &at_src, &bt_src, &at, &bt, &ao, &bn, &bb, &v};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) operand_free(all[i]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(matmul_shapes),
      cmocka_unit_test(matmul_known_values),
      cmocka_unit_test(matmul_strided_operands),
      cmocka_unit_test(matmul_transposed_views),
      cmocka_unit_test(matmul_half_inputs),
      cmocka_unit_test(matmul_errors),
      cmocka_unit_test(matmul_blas_sized),
  };
  return cmocka_run_group_tests(tests, sw_test_runtime_setup, sw_test_runtime_teardown);
}
