/* The Vulkan kernels' paths against the CPU carrier, exactly: elementwise
 * ops on dense operands (16-byte paths and their tails), offsets that break
 * 16-byte alignment, broadcasts, transposed, reversed and nested views;
 * reduce_sum by one invocation per output and by workgroups (with parts);
 * tiled matmul across tile edges, batches, broadcasts and transposed
 * operands. Values are small integers, so every sum is exact in any order.
 * Skips, saying why, without an ICD. */
#include "sw_vulkan_test.h"

typedef enum { ADD, MUL, RELU, SCALE } elementwise_t;

static void check_elementwise(elementwise_t op, vk_pair_t a, vk_pair_t b) {
  sw_tensor_t *rc = NULL, *rv = NULL;
  switch (op) {
    case ADD:
      SW_OK_(sw_add(a.cpu, b.cpu, &rc));
      SW_OK_(sw_add(a.vk, b.vk, &rv));
      break;
    case MUL:
      SW_OK_(sw_elementwise_mul(a.cpu, b.cpu, &rc));
      SW_OK_(sw_elementwise_mul(a.vk, b.vk, &rv));
      break;
    case RELU:
      SW_OK_(sw_relu(a.cpu, &rc));
      SW_OK_(sw_relu(a.vk, &rv));
      break;
    case SCALE:
      SW_OK_(sw_mul_scalar(a.cpu, -1.25, &rc));
      SW_OK_(sw_mul_scalar(a.vk, -1.25, &rv));
      break;
  }
  vk_assert_matches(rc, rv, 0);
  sw_tensor_release(rc);
  sw_tensor_release(rv);
}

static void check_all_elementwise(vk_pair_t a, vk_pair_t b) {
  check_elementwise(ADD, a, b);
  check_elementwise(MUL, a, b);
  check_elementwise(RELU, a, b);
  check_elementwise(SCALE, a, b);
  check_elementwise(ADD, b, a);
  check_elementwise(RELU, b, b);
}

static void test_elementwise_dense_lengths(void** state) {
  vk_fixture_t* f = *state;
  NEED_DEVICE(f);
  static const int64_t lengths[] = {1, 3, 4, 5, 8, 17, 1027, 70001};
  for (size_t k = 0; k < sizeof lengths / sizeof *lengths; ++k) {
    int64_t n = lengths[k];
    float* x = malloc(sizeof(float) * (size_t)n);
    float* y = malloc(sizeof(float) * (size_t)n);
    vk_fill(x, (size_t)n, 0.3f);
    vk_fill(y, (size_t)n, 1.1f);
    vk_pair_t a = vk_pair(f, SW_DTYPE_F32, &n, 1, x), b = vk_pair(f, SW_DTYPE_F32, &n, 1, y);
    check_all_elementwise(a, b);
    vk_pair_release(a);
    vk_pair_release(b);
    free(x);
    free(y);
  }
}

static void test_elementwise_offsets(void** state) {
  vk_fixture_t* f = *state;
  NEED_DEVICE(f);
  /* Views at offsets 1, 2 and 4 of one carrier: 16-byte loads only where
   * every offset is a multiple of 4. */
  float x[1040];
  vk_fill(x, 1040, 0.7f);
  int64_t n = 1030, one = 1;
  sw_layout_t* l = vk_layout(&n, &one, 1);
  vk_pair_t a1 = vk_pair_view(f, SW_DTYPE_F32, 1040, x, 1, l);
  vk_pair_t a2 = vk_pair_view(f, SW_DTYPE_F32, 1040, x, 2, l);
  vk_pair_t a4 = vk_pair_view(f, SW_DTYPE_F32, 1040, x, 4, l);
  vk_pair_t a8 = vk_pair_view(f, SW_DTYPE_F32, 1040, x, 8, l);
  check_all_elementwise(a1, a4);
  check_all_elementwise(a2, a1);
  check_all_elementwise(a4, a8);
  vk_pair_release(a1);
  vk_pair_release(a2);
  vk_pair_release(a4);
  vk_pair_release(a8);
  sw_layout_release(l);
}

static void test_elementwise_broadcasts(void** state) {
  vk_fixture_t* f = *state;
  NEED_DEVICE(f);
  float x[37 * 41], y[41], z[37], w[1];
  vk_fill(x, 37 * 41, 0.2f);
  vk_fill(y, 41, 2.0f);
  vk_fill(z, 37, 3.0f);
  w[0] = -0.5f;
  int64_t sm[2] = {37, 41}, sr[1] = {41}, sc[2] = {37, 1}, ss[1] = {1};
  vk_pair_t m = vk_pair(f, SW_DTYPE_F32, sm, 2, x);
  vk_pair_t row = vk_pair(f, SW_DTYPE_F32, sr, 1, y);
  vk_pair_t col = vk_pair(f, SW_DTYPE_F32, sc, 2, z);
  vk_pair_t s = vk_pair(f, SW_DTYPE_F32, ss, 1, w);
  check_all_elementwise(m, row);  /* a bias: stride 0 on the fast mode */
  check_all_elementwise(m, col);  /* stride 0 on the slow mode */
  check_all_elementwise(m, s);    /* every stride 0 */
  check_all_elementwise(col, row);
  vk_pair_release(m);
  vk_pair_release(row);
  vk_pair_release(col);
  vk_pair_release(s);
}

static void test_elementwise_strided_views(void** state) {
  vk_fixture_t* f = *state;
  NEED_DEVICE(f);
  float x[64];
  vk_fill(x, 64, 1.9f);
  /* Transposed (3, 5) of a dense (5, 3) at offset 2, a reversed run, and a
   * nested mode ((2, 2), 3):((1, 6), 2). */
  int64_t ts[2] = {3, 5}, tt[2] = {5, 1}, rs[1] = {12}, rt[1] = {-3};
  sw_layout_t* lt = vk_layout(ts, tt, 2);
  sw_layout_t* lr = vk_layout(rs, rt, 1);
  sw_layout_t* ln = NULL;
  SW_OK_(sw_layout_parse("((2,2),3):((1,6),2)", &ln));
  sw_layout_t* lr12 = NULL;
  int64_t d12[2] = {4, 3};
  SW_OK_(sw_layout_dense(d12, 2, &lr12));
  vk_pair_t t = vk_pair_view(f, SW_DTYPE_F32, 64, x, 2, lt);
  vk_pair_t t2 = vk_pair_view(f, SW_DTYPE_F32, 64, x, 20, lt);
  vk_pair_t r = vk_pair_view(f, SW_DTYPE_F32, 64, x, 40, lr);
  vk_pair_t n = vk_pair_view(f, SW_DTYPE_F32, 64, x, 5, ln);
  vk_pair_t d = vk_pair_view(f, SW_DTYPE_F32, 64, x, 3, lr12);
  check_all_elementwise(t, t2);
  check_elementwise(ADD, r, r);
  check_elementwise(RELU, r, r);
  check_all_elementwise(n, d);
  /* Transposed views large enough for the 16-element paths, with a tail. */
  float* y = malloc(sizeof(float) * 3000);
  vk_fill(y, 3000, 0.9f);
  int64_t bs[2] = {43, 67}, bt[2] = {67, 1};
  sw_layout_t* lb = vk_layout(bs, bt, 2);
  vk_pair_t u = vk_pair_view(f, SW_DTYPE_F32, 3000, y, 0, lb);
  vk_pair_t u2 = vk_pair_view(f, SW_DTYPE_F32, 3000, y, 7, lb);
  check_all_elementwise(u, u2);
  vk_pair_release(u);
  vk_pair_release(u2);
  sw_layout_release(lb);
  free(y);
  vk_pair_release(t);
  vk_pair_release(t2);
  vk_pair_release(r);
  vk_pair_release(n);
  vk_pair_release(d);
  sw_layout_release(lt);
  sw_layout_release(lr);
  sw_layout_release(ln);
  sw_layout_release(lr12);
}

static void check_reduce(vk_pair_t a, const int64_t* axes, size_t count, bool keepdims) {
  sw_tensor_t *rc = NULL, *rv = NULL;
  SW_OK_(sw_reduce_sum(a.cpu, axes, count, keepdims, &rc));
  SW_OK_(sw_reduce_sum(a.vk, axes, count, keepdims, &rv));
  vk_assert_matches(rc, rv, 0);
  sw_tensor_release(rc);
  sw_tensor_release(rv);
}

static void test_reduce_paths(void** state) {
  vk_fixture_t* f = *state;
  NEED_DEVICE(f);
  const size_t big = 300000;
  float* x = malloc(sizeof(float) * big);
  vk_fill_ints(x, big, 1);
  int64_t a0 = 0, a1 = 1, a02[2] = {0, 2}, a12[2] = {1, 2};
  /* Everything to one value: workgroups write parts, then one invocation
   * adds them; with a length that is no multiple of 4. */
  int64_t n1[1] = {299999};
  vk_pair_t p = vk_pair(f, SW_DTYPE_F32, n1, 1, x);
  check_reduce(p, NULL, 0, false);
  check_reduce(p, NULL, 0, true);
  vk_pair_release(p);
  /* Contiguous reduced slots per output, many outputs and few. */
  int64_t rows[2] = {1500, 200}, few[2] = {3000, 7};
  p = vk_pair(f, SW_DTYPE_F32, rows, 2, x);
  check_reduce(p, &a0, 1, false);
  check_reduce(p, &a1, 1, true);
  vk_pair_release(p);
  p = vk_pair(f, SW_DTYPE_F32, few, 2, x);
  check_reduce(p, &a0, 1, false);
  check_reduce(p, &a1, 1, false);
  vk_pair_release(p);
  /* Reduced leaves in two places (an outer reduced leaf), kept leaves in two. */
  int64_t cube[3] = {30, 41, 50};
  p = vk_pair(f, SW_DTYPE_F32, cube, 3, x);
  check_reduce(p, a02, 2, false);
  check_reduce(p, a12, 2, true);
  check_reduce(p, &a1, 1, false);
  vk_pair_release(p);
  /* A transposed view at an odd offset, and a row stride that is no
   * multiple of 4. */
  int64_t ts[2] = {300, 999}, tt[2] = {999, 1}, ss[2] = {999, 299}, st[2] = {1, 1001};
  sw_layout_t* lt = vk_layout(ts, tt, 2);
  sw_layout_t* ls = vk_layout(ss, st, 2);
  p = vk_pair_view(f, SW_DTYPE_F32, big, x, 3, lt);
  check_reduce(p, &a0, 1, false);
  check_reduce(p, &a1, 1, false);
  check_reduce(p, NULL, 0, false);
  vk_pair_release(p);
  p = vk_pair_view(f, SW_DTYPE_F32, big, x, 4, ls);
  check_reduce(p, &a0, 1, false);
  check_reduce(p, &a1, 1, false);
  vk_pair_release(p);
  sw_layout_release(lt);
  sw_layout_release(ls);
  /* Nothing to sum: zeros. */
  int64_t empty[2] = {0, 5};
  p = vk_pair(f, SW_DTYPE_F32, empty, 2, x);
  check_reduce(p, &a0, 1, false);
  vk_pair_release(p);
  free(x);
}

static void check_matmul(vk_pair_t a, vk_pair_t b) {
  sw_tensor_t *rc = NULL, *rv = NULL;
  SW_OK_(sw_matmul(a.cpu, b.cpu, &rc));
  SW_OK_(sw_matmul(a.vk, b.vk, &rv));
  vk_assert_matches(rc, rv, 0);
  sw_tensor_release(rc);
  sw_tensor_release(rv);
}

static vk_pair_t ints(vk_fixture_t* f, const int64_t* shape, size_t rank, int seed) {
  size_t n = 1;
  for (size_t i = 0; i < rank; ++i) n *= (size_t)shape[i];
  float* x = malloc(sizeof(float) * (n ? n : 1));
  vk_fill_ints(x, n, seed);
  vk_pair_t p = vk_pair(f, SW_DTYPE_F32, shape, rank, x);
  free(x);
  return p;
}

static vk_pair_t transpose_pair(vk_pair_t p, size_t i, size_t j) {
  vk_pair_t t;
  SW_OK_(sw_tensor_transpose(p.cpu, i, j, &t.cpu));
  SW_OK_(sw_tensor_transpose(p.vk, i, j, &t.vk));
  return t;
}

static void test_matmul_tiles(void** state) {
  vk_fixture_t* f = *state;
  NEED_DEVICE(f);
  /* Across the 64 x 64 workgroup tiles and the 16-deep K slices. */
  int64_t shapes[][3] = {{1, 1, 1}, {4, 5, 6}, {64, 16, 64}, {70, 33, 129}, {65, 17, 1}, {1, 300, 70}, {130, 0, 3}};
  for (size_t k = 0; k < sizeof shapes / sizeof *shapes; ++k) {
    int64_t sa[2] = {shapes[k][0], shapes[k][1]}, sb[2] = {shapes[k][1], shapes[k][2]};
    vk_pair_t a = ints(f, sa, 2, 1), b = ints(f, sb, 2, 2);
    check_matmul(a, b);
    vk_pair_t at = ints(f, (int64_t[2]){sa[1], sa[0]}, 2, 3), bt = ints(f, (int64_t[2]){sb[1], sb[0]}, 2, 4);
    vk_pair_t at_t = transpose_pair(at, 0, 1), bt_t = transpose_pair(bt, 0, 1);
    check_matmul(at_t, b);     /* a transposed view */
    check_matmul(a, bt_t);     /* b transposed */
    check_matmul(at_t, bt_t);  /* both */
    vk_pair_t all[] = {a, b, at, bt, at_t, bt_t};
    for (size_t i = 0; i < 6; ++i) vk_pair_release(all[i]);
  }
}

static void test_matmul_batches_and_vectors(void** state) {
  vk_fixture_t* f = *state;
  NEED_DEVICE(f);
  int64_t a3[3] = {3, 20, 9}, b2[2] = {9, 11}, a4[4] = {2, 1, 5, 7}, b4[4] = {1, 3, 7, 66}, v[1] = {9};
  vk_pair_t a = ints(f, a3, 3, 1), b = ints(f, b2, 2, 2), c = ints(f, a4, 4, 3), d = ints(f, b4, 4, 4);
  vk_pair_t u = ints(f, v, 1, 5);
  check_matmul(a, b);  /* batch of a, b broadcast */
  check_matmul(c, d);  /* batch modes broadcast both ways */
  check_matmul(u, b);  /* (K) @ (K, N) */
  check_matmul(a, u);  /* (B, M, K) @ (K) */
  check_matmul(u, u);  /* a dot product */
  vk_pair_t bt = transpose_pair(a, 0, 2);  /* (9, 20, 3): batch stride 1 of an odd layout */
  vk_pair_t w = ints(f, (int64_t[2]){3, 4}, 2, 6);
  check_matmul(bt, w);
  /* A nested operand is copied densely first. */
  float x[64];
  vk_fill_ints(x, 64, 7);
  sw_layout_t* ln = NULL;
  SW_OK_(sw_layout_parse("((2,2),3):((1,6),2)", &ln));
  vk_pair_t n = vk_pair_view(f, SW_DTYPE_F32, 64, x, 5, ln);
  vk_pair_t m = ints(f, (int64_t[2]){3, 5}, 2, 8);
  check_matmul(n, m);
  vk_pair_t all[] = {a, b, c, d, u, bt, w, n, m};
  for (size_t i = 0; i < sizeof all / sizeof *all; ++i) vk_pair_release(all[i]);
  sw_layout_release(ln);
}

int main(void) {
  sw_vulkan_test_keep_driver();
  if (!sw_vulkan_test_available()) return 77;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_elementwise_dense_lengths, vk_setup, vk_teardown),
      cmocka_unit_test_setup_teardown(test_elementwise_offsets, vk_setup, vk_teardown),
      cmocka_unit_test_setup_teardown(test_elementwise_broadcasts, vk_setup, vk_teardown),
      cmocka_unit_test_setup_teardown(test_elementwise_strided_views, vk_setup, vk_teardown),
      cmocka_unit_test_setup_teardown(test_reduce_paths, vk_setup, vk_teardown),
      cmocka_unit_test_setup_teardown(test_matmul_tiles, vk_setup, vk_teardown),
      cmocka_unit_test_setup_teardown(test_matmul_batches_and_vectors, vk_setup, vk_teardown),
  };
  return sw_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
