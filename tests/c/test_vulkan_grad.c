/* Autograd through Vulkan tensors: every op's backward runs as shaders on
 * the device (relu's mask, the broadcast sums of add and mul gradients by
 * reduce_sum, matmul's transposed products by the matmul shader reading
 * transposed views, reduce_sum's broadcast back by the copy kernel), with no
 * read of device memory and no submission until a gradient is read; the
 * gradients equal the CPU carrier's (values are small integers, so matmul
 * and reduce sums are exact too; one smooth case is compared within f32
 * tolerance). The same holds for tiled work on a Vulkan primary tier.
 * Skips, saying why, without an ICD. */
#include "sw_vulkan_test.h"

typedef enum { ADD, MUL, SCALE, RELU, MATMUL, REDUCE, REDUCE_KEEP } op_t;

/* y = op(a, b) on one side; cotangent `cot` for y. */
static sw_tensor_t* apply(op_t op, sw_tensor_t* a, sw_tensor_t* b) {
  sw_tensor_t* y = NULL;
  int64_t axes[2] = {0, 2};
  switch (op) {
    case ADD: SW_OK_(sw_add(a, b, &y)); break;
    case MUL: SW_OK_(sw_elementwise_mul(a, b, &y)); break;
    case SCALE: SW_OK_(sw_mul_scalar(a, -2.5, &y)); break;
    case RELU: SW_OK_(sw_relu(a, &y)); break;
    case MATMUL: SW_OK_(sw_matmul(a, b, &y)); break;
    case REDUCE: SW_OK_(sw_reduce_sum(a, axes, 2, false, &y)); break;
    case REDUCE_KEEP: SW_OK_(sw_reduce_sum(a, axes + 1, 1, true, &y)); break;
  }
  return y;
}

/* A pair of `shape` filled with small integers, or smooth values. */
static vk_pair_t filled(vk_fixture_t* f, const int64_t* shape, size_t rank, int seed, bool smooth) {
  size_t n = 1;
  for (size_t i = 0; i < rank; ++i) n *= (size_t)shape[i];
  float* x = malloc(sizeof(float) * (n ? n : 1));
  if (smooth)
    vk_fill(x, n, (float)seed);
  else
    vk_fill_ints(x, n, seed);
  vk_pair_t p = vk_pair(f, SW_DTYPE_F32, shape, rank, x);
  free(x);
  return p;
}

static vk_pair_t leaf(vk_fixture_t* f, const int64_t* shape, size_t rank, int seed, bool smooth) {
  vk_pair_t p = filled(f, shape, rank, seed, smooth);
  SW_OK_(sw_tensor_set_requires_grad(p.cpu, true));
  SW_OK_(sw_tensor_set_requires_grad(p.vk, true));
  return p;
}

/* The cotangent of y: a pair of y's shape. */
static vk_pair_t cotangent_for(vk_fixture_t* f, sw_tensor_t* y, int seed, bool smooth) {
  size_t rank = 0;
  int64_t shape[SW_MAX_RANK];
  SW_OK_(sw_tensor_rank(y, &rank));
  SW_OK_(sw_tensor_shape(y, shape, SW_MAX_RANK));
  return filled(f, shape, rank, seed, smooth);
}

static void expect_grad(sw_tensor_t* cpu_leaf, sw_tensor_t* vk_leaf, double tol) {
  sw_tensor_t *gc = NULL, *gv = NULL;
  SW_OK_(sw_tensor_grad(cpu_leaf, &gc));
  SW_OK_(sw_tensor_grad(vk_leaf, &gv));
  assert_non_null(gc);
  assert_non_null(gv);
  vk_assert_matches(gc, gv, tol);
  sw_tensor_release(gc);
  sw_tensor_release(gv);
}

/* Runs op on both sides from (a, b) (b may be unused), backward with a
 * cotangent, checks that Vulkan's backward only recorded work, then
 * compares the leaves' gradients. `ta`/`tb` view the leaves transposed first. */
static void check(vk_fixture_t* f, op_t op, vk_pair_t a, vk_pair_t b, bool ta, bool tb, double tol, bool smooth) {
  vk_pair_t x = a, y = b;
  if (ta) {
    SW_OK_(sw_tensor_transpose(a.cpu, 0, 1, &x.cpu));
    SW_OK_(sw_tensor_transpose(a.vk, 0, 1, &x.vk));
  }
  if (tb) {
    SW_OK_(sw_tensor_transpose(b.cpu, 0, 1, &y.cpu));
    SW_OK_(sw_tensor_transpose(b.vk, 0, 1, &y.vk));
  }
  sw_tensor_t* rc = apply(op, x.cpu, y.cpu);
  sw_tensor_t* rv = apply(op, x.vk, y.vk);
  vk_pair_t cot = cotangent_for(f, rc, 5, smooth);
  SW_OK_(sw_backward(rc, cot.cpu, false));
  sw_vulkan_counters_t before = vk_counters(f);
  SW_OK_(sw_backward(rv, cot.vk, false));
  sw_vulkan_counters_t after = vk_counters(f);
  /* All of it recorded on the device: nothing read back, nothing waited for. */
  assert_int_equal(after.host_reads, before.host_reads);
  assert_int_equal(after.host_writes, before.host_writes);
  assert_int_equal(after.submits, before.submits);
  assert_true(after.dispatches + after.copies > before.dispatches + before.copies);
  expect_grad(a.cpu, a.vk, tol);
  if (op == ADD || op == MUL || op == MATMUL) expect_grad(b.cpu, b.vk, tol);
  SW_OK_(sw_tensor_clear_grad(a.cpu));
  SW_OK_(sw_tensor_clear_grad(a.vk));
  SW_OK_(sw_tensor_clear_grad(b.cpu));
  SW_OK_(sw_tensor_clear_grad(b.vk));
  if (ta) vk_pair_release(x);
  if (tb) vk_pair_release(y);
  vk_pair_release(cot);
  sw_tensor_release(rc);
  sw_tensor_release(rv);
}

static void test_elementwise_grads(void** state) {
  vk_fixture_t* f = *state;
  NEED_DEVICE(f);
  int64_t s3[3] = {3, 4, 5}, s2[2] = {4, 5}, col[3] = {3, 1, 5}, big[2] = {300, 70}, bias[1] = {70};
  vk_pair_t a = leaf(f, s3, 3, 1, false), b = leaf(f, s2, 2, 2, false), c = leaf(f, col, 3, 3, false);
  vk_pair_t a2 = leaf(f, s3, 3, 4, false);
  vk_pair_t m = leaf(f, big, 2, 5, false), v = leaf(f, bias, 1, 6, false);
  check(f, ADD, a, a2, false, false, 0, false);
  check(f, ADD, a, b, false, false, 0, false);  /* b's gradient sums over a leading mode */
  check(f, ADD, c, a, false, false, 0, false);  /* c's over a middle one */
  check(f, ADD, m, v, false, false, 0, false);  /* a bias over 300 rows */
  check(f, MUL, a, b, false, false, 0, false);
  check(f, MUL, c, a, false, false, 0, false);
  check(f, MUL, m, v, false, false, 0, false);
  check(f, SCALE, a, a, false, false, 0, false);
  check(f, RELU, a, a, false, false, 0, false);
  check(f, RELU, m, m, true, false, 0, false);  /* through a transposed view */
  vk_pair_t all[] = {a, b, c, a2, m, v};
  for (size_t i = 0; i < sizeof all / sizeof *all; ++i) vk_pair_release(all[i]);
}

static void test_reduce_grads(void** state) {
  vk_fixture_t* f = *state;
  NEED_DEVICE(f);
  int64_t s3[3] = {6, 7, 9};
  vk_pair_t a = leaf(f, s3, 3, 1, false);
  check(f, REDUCE, a, a, false, false, 0, false);
  check(f, REDUCE_KEEP, a, a, false, false, 0, false);
  vk_pair_release(a);
}

static void test_matmul_grads(void** state) {
  vk_fixture_t* f = *state;
  NEED_DEVICE(f);
  int64_t sa[2] = {70, 33}, sb[2] = {33, 45}, sat[2] = {33, 70}, sbt[2] = {45, 33};
  int64_t ba[3] = {3, 20, 9}, bb[2] = {9, 11}, v[1] = {9};
  vk_pair_t a = leaf(f, sa, 2, 1, false), b = leaf(f, sb, 2, 2, false);
  vk_pair_t at = leaf(f, sat, 2, 3, false), bt = leaf(f, sbt, 2, 4, false);
  vk_pair_t x = leaf(f, ba, 3, 5, false), w = leaf(f, bb, 2, 6, false), u = leaf(f, v, 1, 7, false);
  check(f, MATMUL, a, b, false, false, 0, false);
  check(f, MATMUL, at, b, true, false, 0, false);  /* a is a transposed view of a leaf */
  check(f, MATMUL, a, bt, false, true, 0, false);
  check(f, MATMUL, x, w, false, false, 0, false);  /* w's gradient sums over the batch */
  check(f, MATMUL, u, w, false, false, 0, false);  /* a vector operand */
  check(f, MATMUL, x, u, false, false, 0, false);
  vk_pair_release(a);
  vk_pair_release(b);
  /* Fractions: within f32 tolerance (the summation orders differ). */
  a = leaf(f, sa, 2, 1, true);
  b = leaf(f, sb, 2, 2, true);
  check(f, MATMUL, a, b, false, false, 1e-4, true);
  vk_pair_t all[] = {a, b, at, bt, x, w, u};
  for (size_t i = 0; i < sizeof all / sizeof *all; ++i) vk_pair_release(all[i]);
}

/* A chain: relu(a * b + a) @ m summed, the gradient seeded on the device. */
static void test_chain_grads(void** state) {
  vk_fixture_t* f = *state;
  NEED_DEVICE(f);
  int64_t sa[2] = {40, 50}, sm[2] = {50, 30};
  vk_pair_t a = leaf(f, sa, 2, 1, true), b = leaf(f, sa, 2, 2, true), m = leaf(f, sm, 2, 3, true);
  sw_tensor_t* roots[2];
  for (int side = 0; side < 2; ++side) {
    sw_tensor_t* x = side ? a.vk : a.cpu;
    sw_tensor_t* y = side ? b.vk : b.cpu;
    sw_tensor_t* z = side ? m.vk : m.cpu;
    sw_tensor_t *p, *q, *r, *s, *t;
    SW_OK_(sw_elementwise_mul(x, y, &p));
    SW_OK_(sw_add(p, x, &q));
    SW_OK_(sw_relu(q, &r));
    SW_OK_(sw_matmul(r, z, &s));
    SW_OK_(sw_reduce_sum(s, NULL, 0, false, &t));
    roots[side] = t;
    sw_tensor_release(p);
    sw_tensor_release(q);
    sw_tensor_release(r);
    sw_tensor_release(s);
  }
  SW_OK_(sw_backward(roots[0], NULL, false));
  sw_vulkan_counters_t before = vk_counters(f);
  SW_OK_(sw_backward(roots[1], NULL, false));
  sw_vulkan_counters_t after = vk_counters(f);
  assert_int_equal(after.host_reads, before.host_reads);
  assert_int_equal(after.submits, before.submits);
  assert_true(after.host_writes <= before.host_writes + 1); /* at most the seed's one element */
  expect_grad(a.cpu, a.vk, 1e-4);
  expect_grad(b.cpu, b.vk, 1e-4);
  expect_grad(m.cpu, m.vk, 1e-4);
  sw_tensor_release(roots[0]);
  sw_tensor_release(roots[1]);
  vk_pair_release(a);
  vk_pair_release(b);
  vk_pair_release(m);
}

/* A TiledEvictable per side (a CPU primary, a Vulkan primary) over a host
 * secondary tier holding 6 experts of (4, 3) small integers. */
static sw_carrier_t* experts_on(vk_fixture_t* f, bool vulkan, sw_tensor_t** full) {
  const int64_t grid[3] = {6, 1, 1}, tile[3] = {1, 4, 3};
  float v[72];
  vk_fill_ints(v, 72, 3);
  sw_carrier_t *p = NULL, *s = NULL, *te = NULL;
  if (vulkan)
    SW_OK_(sw_carrier_create_vulkan(f->rt, f->dev, SW_DTYPE_F32, 0, &p));
  else
    SW_OK_(sw_carrier_create_cpu(f->rt, SW_DTYPE_F32, 0, &p));
  SW_OK_(sw_carrier_create_host(f->rt, SW_DTYPE_F32, 72, &s));
  SW_OK_(sw_carrier_write(s, 0, 72, v));
  SW_OK_(sw_tiled_create(p, s, grid, tile, 3, NULL, &te));
  SW_OK_(sw_tiled_full_tensor(te, full));
  SW_OK_(sw_tensor_set_requires_grad(*full, true));
  sw_carrier_release(p);
  sw_carrier_release(s);
  return te;
}

static sw_tensor_t* wait_tensor(sw_await_t* a) {
  SW_OK_(sw_await_wait(a, -1));
  sw_tensor_t* t = NULL;
  SW_OK_(sw_await_result(a, &t));
  sw_await_release(a);
  return t;
}

/* On a Vulkan primary tier, the projection of resident experts, the
 * forward and backward through it (a tiled gradient) and an in-place SGD
 * step on the selected experts all stay on the device: recorded, with no
 * read of device memory and no submission (the backward seed is the one
 * host write). Values equal the CPU primary's; eviction then writes the
 * updated experts to the secondary tier, as on the CPU. */
static void test_tiled_work_stays_on_the_device(void** state) {
  vk_fixture_t* f = *state;
  NEED_DEVICE(f);
  const int64_t pick[3] = {4, 1, 3}, zero = 0;
  const int64_t* axes[3] = {pick, &zero, &zero};
  const size_t counts[3] = {3, 1, 1};
  sw_tile_selection_t* sel = NULL;
  SW_OK_(sw_tile_selection_create(axes, counts, 3, &sel));
  sw_tile_set_t* set = NULL;
  SW_OK_(sw_tile_selection_tile_set(sel, &set));
  const int64_t xshape[3] = {1, 3, 5};
  float xv[15];
  vk_fill_ints(xv, 15, 8);
  vk_pair_t x = vk_pair(f, SW_DTYPE_F32, xshape, 3, xv);
  sw_tensor_t *full[2], *grad[2], *step[2];
  sw_carrier_t* te[2];
  sw_vulkan_counters_t before = vk_counters(f), after = before;
  for (int side = 0; side < 2; ++side) {
    te[side] = experts_on(f, side == 1, &full[side]);
    SW_OK_(sw_tiled_promote(te[side], set));
    if (side == 1) before = vk_counters(f);
    sw_await_t* a = NULL;
    SW_OK_(sw_tiled_project(te[side], full[side], sel, NULL, &a));
    sw_tensor_t* w = wait_tensor(a);
    sw_tensor_t *y = NULL, *loss = NULL;
    SW_OK_(sw_matmul(w, side ? x.vk : x.cpu, &y));
    SW_OK_(sw_reduce_sum(y, NULL, 0, false, &loss));
    SW_OK_(sw_backward(loss, NULL, false));
    SW_OK_(sw_tensor_grad(full[side], &grad[side]));
    sw_carrier_t* gt = NULL;
    SW_OK_(sw_tensor_carrier(grad[side], &gt));
    bool prev = sw_set_grad_enabled(false);
    SW_OK_(sw_tiled_project(gt, grad[side], sel, NULL, &a));
    sw_tensor_t* g = wait_tensor(a);
    SW_OK_(sw_mul_scalar(g, -0.5, &step[side]));
    SW_OK_(sw_tiled_update_async(te[side], full[side], step[side], sel, SW_SCATTER_ADD, &a));
    SW_OK_(sw_await_wait(a, -1));
    sw_await_release(a);
    sw_set_grad_enabled(prev);
    if (side == 1) after = vk_counters(f);
    sw_tensor_release(g);
    sw_carrier_release(gt);
    sw_tensor_release(loss);
    sw_tensor_release(y);
    sw_tensor_release(w);
  }
  assert_int_equal(after.host_reads, before.host_reads);
  assert_int_equal(after.submits, before.submits);
  assert_true(after.host_writes <= before.host_writes + 1); /* at most the backward seed */
  assert_true(after.dispatches + after.copies > before.dispatches + before.copies);
  vk_assert_matches(step[0], step[1], 0);
  /* The gradient's tiles live on the device too. */
  sw_carrier_t *gt = NULL, *gp = NULL;
  SW_OK_(sw_tensor_carrier(grad[1], &gt));
  SW_OK_(sw_tiled_primary(gt, &gp));
  sw_carrier_kind_t kind;
  SW_OK_(sw_carrier_kind(gp, &kind));
  assert_int_equal(kind, SW_CARRIER_VULKAN);
  sw_carrier_release(gp);
  sw_carrier_release(gt);
  /* Evicted, the updated experts reach the secondary tier alike. */
  float stored[2][72];
  for (int side = 0; side < 2; ++side) {
    SW_OK_(sw_tiled_evict(te[side], set));
    sw_carrier_t* s = NULL;
    SW_OK_(sw_tiled_secondary(te[side], &s));
    SW_OK_(sw_carrier_read(s, 0, 72, stored[side]));
    sw_carrier_release(s);
  }
  assert_memory_equal(stored[0], stored[1], sizeof stored[0]);
  float seed[72];
  vk_fill_ints(seed, 72, 3);
  assert_true(memcmp(stored[0], seed, sizeof seed) != 0); /* the step changed them */
  for (int side = 0; side < 2; ++side) {
    sw_tensor_release(step[side]);
    sw_tensor_release(grad[side]);
    sw_tensor_release(full[side]);
    SW_OK_(sw_carrier_dispose(te[side]));
    sw_carrier_release(te[side]);
  }
  vk_pair_release(x);
  sw_tile_set_release(set);
  sw_tile_selection_release(sel);
}

int main(void) {
  sw_vulkan_test_keep_driver();
  if (!sw_vulkan_test_available()) return 77;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_elementwise_grads, vk_setup, vk_teardown),
      cmocka_unit_test_setup_teardown(test_reduce_grads, vk_setup, vk_teardown),
      cmocka_unit_test_setup_teardown(test_matmul_grads, vk_setup, vk_teardown),
      cmocka_unit_test_setup_teardown(test_chain_grads, vk_setup, vk_teardown),
      cmocka_unit_test_setup_teardown(test_tiled_work_stays_on_the_device, vk_setup, vk_teardown),
  };
  return sw_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
