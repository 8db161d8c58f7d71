/* The Vulkan device and compute carrier on whatever ICD is present (Mesa
 * lavapipe in CI): exact-range round trips at offsets, every op against the
 * CPU carrier's result, moves both ways, batched submission and cached
 * pipelines, dtypes. Skips, saying why, without an ICD. */
#include "sw_vulkan_test.h"

typedef vk_fixture_t fixture_t;

static void test_round_trip_at_offsets(void** state) {
  fixture_t* f = *state;
  NEED_DEVICE(f);
  sw_object_spec_t s;
  sw_object_spec_init(&s);
  s.dtype = SW_DTYPE_U8;
  s.rank = 1;
  s.shape[0] = 1000;
  sw_device_allocation_t* a = NULL;
  SW_OK_(sw_device_alloc(f->dev, &s, 1000, &a));
  uint8_t in[333], out[1000];
  for (int i = 0; i < 333; ++i) in[i] = (uint8_t)(i * 7 + 1);
  SW_OK_(sw_device_host_to_device(a, 13, in, 333, false, NULL));
  SW_OK_(sw_device_device_to_host(a, 0, out, 1000, false, NULL));
  for (int i = 0; i < 1000; ++i) assert_int_equal(out[i], (i >= 13 && i < 346) ? in[i - 13] : 0);
  /* Asynchronous: host bytes are released at submission, valid at completion. */
  sw_copy_event_t e1, e2;
  sw_copy_event_init(&e1);
  sw_copy_event_init(&e2);
  SW_OK_(sw_device_host_to_device(a, 501, in, 100, true, &e1));
  bool released = false, complete = false;
  SW_OK_(sw_device_event_query(f->dev, &e1, &released, &complete));
  assert_true(released);
  SW_OK_(sw_device_event_wait(f->dev, &e1, -1));
  uint8_t back[7] = {0};
  SW_OK_(sw_device_device_to_host(a, 503, back, 7, true, &e2));
  SW_OK_(sw_device_event_wait(f->dev, &e2, -1));
  SW_OK_(sw_device_event_query(f->dev, &e2, &released, &complete));
  assert_true(released && complete);
  assert_memory_equal(back, in + 2, 7);
  SW_FAILS(sw_device_host_to_device(a, 990, in, 11, false, NULL), SW_ERROR_INDEX, NULL);
  SW_OK_(sw_device_free(a));
  sw_device_allocation_release(a);
}

static sw_tensor_t* vk_tensor(fixture_t* f, const int64_t* shape, size_t rank, const float* data) {
  size_t n = 1;
  for (size_t i = 0; i < rank; ++i) n *= (size_t)shape[i];
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_vulkan(f->rt, f->dev, SW_DTYPE_F32, n, &c));
  SW_OK_(sw_carrier_write(c, 0, n, data));
  sw_layout_t* l = NULL;
  SW_OK_(sw_layout_dense(shape, rank, &l));
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_create(c, 0, l, &t));
  sw_layout_release(l);
  sw_carrier_release(c);
  return t;
}

static void assert_close(sw_tensor_t* cpu, sw_tensor_t* vk) {
  int64_t n = 0, m = 0;
  SW_OK_(sw_tensor_numel(cpu, &n));
  SW_OK_(sw_tensor_numel(vk, &m));
  assert_int_equal(n, m);
  float* a = malloc(sizeof(float) * (size_t)(n ? n : 1));
  float* b = malloc(sizeof(float) * (size_t)(n ? n : 1));
  SW_OK_(sw_tensor_read(cpu, a, sizeof(float) * (size_t)n));
  SW_OK_(sw_tensor_read(vk, b, sizeof(float) * (size_t)n));
  sw_carrier_t* c = NULL;
  SW_OK_(sw_tensor_carrier(vk, &c));
  sw_carrier_kind_t kind;
  SW_OK_(sw_carrier_kind(c, &kind));
  assert_int_equal(kind, SW_CARRIER_VULKAN);
  sw_carrier_release(c);
  for (int64_t i = 0; i < n; ++i) {
    float tol = 1e-4f * (1.0f + fabsf(a[i]));
    if (fabsf(a[i] - b[i]) > tol) fail_msg("element %lld: cpu %g vulkan %g", (long long)i, a[i], b[i]);
  }
  free(a);
  free(b);
}

static void fill(float* x, size_t n, float seed) {
  for (size_t i = 0; i < n; ++i) x[i] = sinf(seed + (float)i * 0.37f) * 3.0f;
}

static void test_ops_match_cpu(void** state) {
  fixture_t* f = *state;
  NEED_DEVICE(f);
  int64_t sa[3] = {3, 4, 5}, sb[2] = {4, 5}, sm[2] = {5, 6};
  float xa[60], xb[20], xm[30];
  fill(xa, 60, 0.1f);
  fill(xb, 20, 1.3f);
  fill(xm, 30, 2.2f);
  sw_tensor_t *ca, *cb, *cm, *va, *vb, *vm;
  SW_OK_(sw_tensor_from_data(f->rt, SW_DTYPE_F32, sa, 3, xa, &ca));
  SW_OK_(sw_tensor_from_data(f->rt, SW_DTYPE_F32, sb, 2, xb, &cb));
  SW_OK_(sw_tensor_from_data(f->rt, SW_DTYPE_F32, sm, 2, xm, &cm));
  va = vk_tensor(f, sa, 3, xa);
  vb = vk_tensor(f, sb, 2, xb);
  vm = vk_tensor(f, sm, 2, xm);
  sw_tensor_t *r1, *r2;
#define BOTH(call_cpu, call_vk)   \
  SW_OK_(call_cpu);               \
  SW_OK_(call_vk);                \
  assert_close(r1, r2);           \
  sw_tensor_release(r1);          \
  sw_tensor_release(r2)
  BOTH(sw_add(ca, cb, &r1), sw_add(va, vb, &r2));                 /* broadcast */
  BOTH(sw_elementwise_mul(ca, cb, &r1), sw_elementwise_mul(va, vb, &r2));
  BOTH(sw_mul(ca, ca, &r1), sw_mul(va, va, &r2));
  BOTH(sw_mul_scalar(ca, -1.5, &r1), sw_mul_scalar(va, -1.5, &r2));
  BOTH(sw_scalar_mul(2.0, cb, &r1), sw_scalar_mul(2.0, vb, &r2));
  BOTH(sw_relu(ca, &r1), sw_relu(va, &r2));
  int64_t axes[2] = {0, 2};
  BOTH(sw_reduce_sum(ca, axes, 2, false, &r1), sw_reduce_sum(va, axes, 2, false, &r2));
  BOTH(sw_reduce_sum(ca, NULL, 0, true, &r1), sw_reduce_sum(va, NULL, 0, true, &r2));
  BOTH(sw_matmul(cb, cm, &r1), sw_matmul(vb, vm, &r2));            /* (4,5)@(5,6) */
  BOTH(sw_matmul(ca, cm, &r1), sw_matmul(va, vm, &r2));            /* batched */
  sw_tensor_t *ct, *vt;
  SW_OK_(sw_tensor_transpose(cb, 0, 1, &ct));
  SW_OK_(sw_tensor_transpose(vb, 0, 1, &vt));
  BOTH(sw_matmul(ct, cb, &r1), sw_matmul(vt, vb, &r2));            /* strided operand */
  BOTH(sw_relu(ct, &r1), sw_relu(vt, &r2));
  sw_tensor_release(ct);
  sw_tensor_release(vt);
  sw_tensor_release(ca); sw_tensor_release(cb); sw_tensor_release(cm);
  sw_tensor_release(va); sw_tensor_release(vb); sw_tensor_release(vm);
}

/* Backward kernels: the gradients of relu(a * b + a) @ m summed. */
static void grads(fixture_t* f, int vulkan, float* out_ga, float* out_gb) {
  int64_t sa[2] = {4, 5}, sm[2] = {5, 3};
  float xa[20], xb[20], xm[15];
  fill(xa, 20, 0.5f);
  fill(xb, 20, 1.7f);
  fill(xm, 15, 2.9f);
  sw_tensor_t *a, *b, *m;
  if (vulkan) {
    a = vk_tensor(f, sa, 2, xa);
    b = vk_tensor(f, sa, 2, xb);
    m = vk_tensor(f, sm, 2, xm);
  } else {
    SW_OK_(sw_tensor_from_data(f->rt, SW_DTYPE_F32, sa, 2, xa, &a));
    SW_OK_(sw_tensor_from_data(f->rt, SW_DTYPE_F32, sa, 2, xb, &b));
    SW_OK_(sw_tensor_from_data(f->rt, SW_DTYPE_F32, sm, 2, xm, &m));
  }
  SW_OK_(sw_tensor_set_requires_grad(a, true));
  SW_OK_(sw_tensor_set_requires_grad(b, true));
  sw_tensor_t *p, *q, *r, *s, *t;
  SW_OK_(sw_elementwise_mul(a, b, &p));
  SW_OK_(sw_add(p, a, &q));
  SW_OK_(sw_relu(q, &r));
  SW_OK_(sw_matmul(r, m, &s));
  SW_OK_(sw_reduce_sum(s, NULL, 0, false, &t));
  SW_OK_(sw_backward(t, NULL, false));
  sw_tensor_t *ga, *gb;
  SW_OK_(sw_tensor_grad(a, &ga));
  SW_OK_(sw_tensor_grad(b, &gb));
  SW_OK_(sw_tensor_read(ga, out_ga, sizeof(float) * 20));
  SW_OK_(sw_tensor_read(gb, out_gb, sizeof(float) * 20));
  sw_tensor_t* all[] = {a, b, m, p, q, r, s, t, ga, gb};
  for (size_t i = 0; i < sizeof all / sizeof *all; ++i) sw_tensor_release(all[i]);
}

static void test_backward_matches_cpu(void** state) {
  fixture_t* f = *state;
  NEED_DEVICE(f);
  float ga_c[20], gb_c[20], ga_v[20], gb_v[20];
  grads(f, 0, ga_c, gb_c);
  grads(f, 1, ga_v, gb_v);
  for (int i = 0; i < 20; ++i) {
    assert_true(fabsf(ga_c[i] - ga_v[i]) <= 1e-4f * (1 + fabsf(ga_c[i])));
    assert_true(fabsf(gb_c[i] - gb_v[i]) <= 1e-4f * (1 + fabsf(gb_c[i])));
  }
}

static void test_move_between_cpu_and_vulkan(void** state) {
  fixture_t* f = *state;
  NEED_DEVICE(f);
  int64_t shape[2] = {3, 7};
  float x[21];
  fill(x, 21, 0.9f);
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_from_data(f->rt, SW_DTYPE_F32, shape, 2, x, &t));
  sw_carrier_t* vc = NULL;
  SW_OK_(sw_carrier_create_vulkan(f->rt, f->dev, SW_DTYPE_F32, 0, &vc));
  sw_await_t* aw = NULL;
  SW_OK_(sw_move_async(t, vc, &aw));
  SW_OK_(sw_await_wait(aw, -1));
  sw_tensor_t* on_vk = NULL;
  SW_OK_(sw_await_result(aw, &on_vk));
  sw_await_release(aw);
  sw_tensor_t* doubled = NULL;
  SW_OK_(sw_mul_scalar(on_vk, 2.0, &doubled));
  sw_carrier_t* cc = NULL;
  SW_OK_(sw_carrier_create_cpu(f->rt, SW_DTYPE_F32, 0, &cc));
  SW_OK_(sw_move_async(doubled, cc, &aw));
  SW_OK_(sw_await_wait(aw, -1));
  sw_tensor_t* back = NULL;
  SW_OK_(sw_await_result(aw, &back));
  float y[21];
  SW_OK_(sw_tensor_read(back, y, sizeof y));
  for (int i = 0; i < 21; ++i) assert_true(y[i] == 2.0f * x[i]);
  sw_await_release(aw);
  sw_tensor_release(back);
  sw_tensor_release(doubled);
  sw_tensor_release(on_vk);
  sw_tensor_release(t);
  sw_carrier_release(vc);
  sw_carrier_release(cc);
}

static void test_wrong_device(void** state) {
  fixture_t* f = *state;
  NEED_DEVICE(f);
  sw_device_t* fake = NULL;
  SW_OK_(sw_device_create_fake(f->rt, NULL, &fake));
  sw_carrier_t* c = NULL;
  SW_FAILS(sw_carrier_create_vulkan(f->rt, fake, SW_DTYPE_F32, 4, &c), SW_ERROR_TYPE, "not a Vulkan device");
  sw_vulkan_counters_t counters;
  sw_vulkan_counters_init(&counters);
  SW_FAILS(sw_testing_vulkan_counters(fake, &counters), SW_ERROR_TYPE, "not a Vulkan device");
  sw_device_release(fake);
}

/* Vulkan carriers allocate through the device bridge: once the device
 * restarts, every carrier, tensor and TiledEvictable tile of the old
 * generation fails STALE_HANDLE on use (never a crash, never old values),
 * and new carriers work. */
static void test_restart_makes_carriers_stale(void** state) {
  fixture_t* f = *state;
  NEED_DEVICE(f);
  const int64_t shape[1] = {16};
  float x[16], y[16];
  vk_fill(x, 16, 0.25f);
  vk_pair_t a = vk_pair(f, SW_DTYPE_F32, shape, 1, x);
  sw_tensor_t* r = NULL;
  SW_OK_(sw_relu(a.vk, &r));
  SW_OK_(sw_tensor_read(r, y, sizeof y));
  sw_carrier_t* c = NULL;
  SW_OK_(sw_tensor_carrier(a.vk, &c));
  /* A TiledEvictable whose tiles live on the device. */
  sw_carrier_t *prim = NULL, *sec = NULL, *te = NULL;
  SW_OK_(sw_carrier_create_vulkan(f->rt, f->dev, SW_DTYPE_F32, 16, &prim));
  SW_OK_(sw_carrier_write(prim, 0, 16, x));
  SW_OK_(sw_carrier_create_host(f->rt, SW_DTYPE_F32, 0, &sec));
  const int64_t grid[1] = {4}, tile[1] = {4}, k0 = 0;
  SW_OK_(sw_tiled_create(prim, sec, grid, tile, 1, NULL, &te));
  sw_tensor_t* full = NULL;
  SW_OK_(sw_tiled_full_tensor(te, &full));
  const int64_t* axes[1] = {&k0};
  const size_t counts[1] = {1};
  sw_tile_selection_t* sel = NULL;
  SW_OK_(sw_tile_selection_create(axes, counts, 1, &sel));

  SW_OK_(sw_device_restart(f->dev));
  SW_FAILS(sw_carrier_read(c, 0, 16, y), SW_ERROR_STALE_HANDLE, "generation");
  SW_FAILS(sw_carrier_write(c, 0, 16, x), SW_ERROR_STALE_HANDLE, "generation");
  SW_FAILS(sw_tensor_read(a.vk, y, sizeof y), SW_ERROR_STALE_HANDLE, "generation");
  sw_tensor_t* out = NULL;
  SW_FAILS(sw_relu(r, &out), SW_ERROR_STALE_HANDLE, "generation");
  assert_null(out);
  sw_carrier_t* cpu = NULL;
  SW_OK_(sw_carrier_create_cpu(f->rt, SW_DTYPE_F32, 0, &cpu));
  sw_await_t* m = NULL;
  SW_OK_(sw_move_async(r, cpu, &m));
  SW_FAILS(sw_await_wait(m, -1), SW_ERROR_STALE_HANDLE, "generation");
  sw_await_release(m);
  sw_await_t* p = NULL;
  SW_OK_(sw_tiled_project(te, full, sel, NULL, &p));
  SW_FAILS(sw_await_wait(p, -1), SW_ERROR_STALE_HANDLE, "generation");
  sw_await_release(p);
  /* Old handles release cleanly; the device works at its new generation. */
  SW_OK_(sw_carrier_dispose(c));
  sw_carrier_t* fresh = NULL;
  SW_OK_(sw_carrier_create_vulkan(f->rt, f->dev, SW_DTYPE_F32, 16, &fresh));
  SW_OK_(sw_carrier_write(fresh, 0, 16, x));
  SW_OK_(sw_carrier_read(fresh, 0, 16, y));
  for (int i = 0; i < 16; ++i) assert_true(y[i] == x[i]);
  sw_carrier_release(fresh);
  sw_carrier_release(cpu);
  sw_tile_selection_release(sel);
  sw_tensor_release(full);
  sw_carrier_release(te);
  sw_carrier_release(prim);
  sw_carrier_release(sec);
  sw_carrier_release(c);
  sw_tensor_release(r);
  vk_pair_release(a);
}

/* Freed device memory goes back to the device's pool and is reused. */
static void test_device_buffers_are_pooled(void** state) {
  fixture_t* f = *state;
  NEED_DEVICE(f);
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_vulkan(f->rt, f->dev, SW_DTYPE_F32, 1 << 18, &c));
  SW_OK_(sw_carrier_dispose(c));
  sw_carrier_release(c);
  const sw_vulkan_counters_t before = vk_counters(f);
  SW_OK_(sw_carrier_create_vulkan(f->rt, f->dev, SW_DTYPE_F32, 1 << 18, &c));
  const sw_vulkan_counters_t after = vk_counters(f);
  assert_int_equal(after.buffers_made, before.buffers_made);
  assert_int_equal(after.buffers_reused, before.buffers_reused + 1);
  sw_carrier_release(c);
}

/* Ops are recorded, not run: one submission carries them all when a value
 * is read, and each kernel variant's pipeline is made once. */
static void test_ops_batch_into_one_submission(void** state) {
  fixture_t* f = *state;
  NEED_DEVICE(f);
  int64_t shape[2] = {33, 7};
  float x[231];
  vk_fill(x, 231, 0.4f);
  vk_pair_t a = vk_pair(f, SW_DTYPE_F32, shape, 2, x);
  sw_tensor_t *r = NULL, *s = NULL;
  SW_OK_(sw_relu(a.vk, &r));  /* pipelines for these kernels exist from now on */
  SW_OK_(sw_add(r, a.vk, &s));
  sw_tensor_release(r);
  sw_tensor_release(s);
  sw_vulkan_counters_t before = vk_counters(f);
  sw_tensor_t* t = a.vk;
  sw_tensor_retain(t);
  for (int i = 0; i < 10; ++i) {
    sw_tensor_t *u = NULL, *v = NULL;
    SW_OK_(sw_relu(t, &u));
    SW_OK_(sw_add(u, a.vk, &v));
    sw_tensor_release(u);
    sw_tensor_release(t);
    t = v;
  }
  sw_vulkan_counters_t recorded = vk_counters(f);
  assert_int_equal(recorded.submits, before.submits);
  assert_int_equal(recorded.dispatches, before.dispatches + 20);
  assert_int_equal(recorded.pipelines, before.pipelines);
  assert_int_equal(recorded.host_reads, before.host_reads);
  float y[231];
  SW_OK_(sw_tensor_read(t, y, sizeof y));
  sw_vulkan_counters_t read = vk_counters(f);
  assert_int_equal(read.submits, before.submits + 1);
  /* The CPU carrier agrees. */
  sw_tensor_t* c = a.cpu;
  sw_tensor_retain(c);
  for (int i = 0; i < 10; ++i) {
    sw_tensor_t *u = NULL, *v = NULL;
    SW_OK_(sw_relu(c, &u));
    SW_OK_(sw_add(u, a.cpu, &v));
    sw_tensor_release(u);
    sw_tensor_release(c);
    c = v;
  }
  vk_assert_matches(c, t, 0);
  sw_tensor_release(c);
  sw_tensor_release(t);
  vk_pair_release(a);
}

/* Half-precision storage: small integers encoded exactly. */
static uint16_t half_bits(sw_dtype_t dtype, float v) {
  uint32_t u;
  memcpy(&u, &v, 4);
  if (dtype == SW_DTYPE_BF16) return (uint16_t)(u >> 16);
  if (v == 0) return (uint16_t)((u >> 16) & 0x8000u);
  uint32_t sign = (u >> 16) & 0x8000u, exp = ((u >> 23) & 0xffu) - 127 + 15, mant = (u >> 13) & 0x3ffu;
  return (uint16_t)(sign | (exp << 10) | mant);
}

static vk_pair_t half_pair(fixture_t* f, sw_dtype_t dtype, const int64_t* shape, size_t rank, int seed) {
  size_t n = 1;
  for (size_t i = 0; i < rank; ++i) n *= (size_t)shape[i];
  float* x = malloc(sizeof(float) * (n + 1));
  uint16_t* h = malloc(sizeof(uint16_t) * (n + 1));
  vk_fill_ints(x, n, seed);
  for (size_t i = 0; i < n; ++i) h[i] = half_bits(dtype, x[i]);
  vk_pair_t p = vk_pair(f, dtype, shape, rank, h);
  free(x);
  free(h);
  return p;
}

/* f16 and bf16 operands: stored 16-bit, widened to f32 in the matmul shader,
 * a result of the operands' dtype rounded once from the f32 sums (or those
 * sums, with sw_matmul_ex), as on the CPU; transposed and odd-offset views
 * split 32-bit words. */
static void test_half_matmul_matches_cpu(void** state) {
  fixture_t* f = *state;
  NEED_DEVICE(f);
  const sw_dtype_t dtypes[2] = {SW_DTYPE_F16, SW_DTYPE_BF16};
  for (int k = 0; k < 2; ++k) {
    int64_t sa[2] = {37, 21}, sb[2] = {21, 45}, sbt[2] = {45, 21};
    vk_pair_t a = half_pair(f, dtypes[k], sa, 2, 1), b = half_pair(f, dtypes[k], sb, 2, 2);
    vk_pair_t bt = half_pair(f, dtypes[k], sbt, 2, 3);
    sw_tensor_t *rc = NULL, *rv = NULL;
    SW_OK_(sw_matmul(a.cpu, b.cpu, &rc));
    SW_OK_(sw_matmul(a.vk, b.vk, &rv));
    vk_assert_matches(rc, rv, 0); /* also the dtype: the operands' */
    sw_dtype_t d;
    SW_OK_(sw_tensor_dtype(rv, &d));
    assert_int_equal(d, dtypes[k]);
    sw_tensor_release(rc);
    sw_tensor_release(rv);
    sw_matmul_desc_t f32_result;
    sw_matmul_desc_init(&f32_result);
    f32_result.out_dtype = SW_DTYPE_F32;
    SW_OK_(sw_matmul_ex(a.cpu, b.cpu, &f32_result, &rc));
    SW_OK_(sw_matmul_ex(a.vk, b.vk, &f32_result, &rv));
    vk_assert_matches(rc, rv, 0);
    SW_OK_(sw_tensor_dtype(rv, &d));
    assert_int_equal(d, SW_DTYPE_F32);
    sw_tensor_release(rc);
    sw_tensor_release(rv);
    vk_pair_t t;
    SW_OK_(sw_tensor_transpose(bt.cpu, 0, 1, &t.cpu));
    SW_OK_(sw_tensor_transpose(bt.vk, 0, 1, &t.vk));
    SW_OK_(sw_matmul(a.cpu, t.cpu, &rc));
    SW_OK_(sw_matmul(a.vk, t.vk, &rv));
    vk_assert_matches(rc, rv, 0);
    sw_tensor_release(rc);
    sw_tensor_release(rv);
    /* (5, 3) at offset 1 of a 16-slot carrier. */
    uint16_t h[16];
    for (int i = 0; i < 16; ++i) h[i] = half_bits(dtypes[k], (float)(i % 5) - 2.0f);
    int64_t so[2] = {5, 3}, st[2] = {1, 5}, sm[2] = {3, 4};
    sw_layout_t* l = vk_layout(so, st, 2);
    vk_pair_t o = vk_pair_view(f, dtypes[k], 16, h, 1, l);
    vk_pair_t m = half_pair(f, dtypes[k], sm, 2, 4);
    SW_OK_(sw_matmul(o.cpu, m.cpu, &rc));
    SW_OK_(sw_matmul(o.vk, m.vk, &rv));
    vk_assert_matches(rc, rv, 0);
    sw_tensor_release(rc);
    sw_tensor_release(rv);
    sw_layout_release(l);
    vk_pair_t all[] = {a, b, bt, t, o, m};
    for (size_t i = 0; i < sizeof all / sizeof *all; ++i) vk_pair_release(all[i]);
  }
}

/* Gradients of half leaves, of an f32 result (sw_matmul_ex, f32 cotangent)
 * and of a half one (half cotangent): the gradients are rounded to 16 bits
 * on the device, bit for bit as the CPU does. */
static void test_half_matmul_grads(void** state) {
  fixture_t* f = *state;
  NEED_DEVICE(f);
  const sw_dtype_t dtypes[2] = {SW_DTYPE_F16, SW_DTYPE_BF16};
  for (int k = 0; k < 2; ++k) {
    int64_t sa[2] = {33, 20}, sb[2] = {20, 45}, so[2] = {33, 45};
    vk_pair_t a = half_pair(f, dtypes[k], sa, 2, 1), b = half_pair(f, dtypes[k], sb, 2, 2);
    float* c = malloc(sizeof(float) * 33 * 45);
    vk_fill_ints(c, 33 * 45, 3);
    vk_pair_t cot = vk_pair(f, SW_DTYPE_F32, so, 2, c);
    free(c);
    vk_pair_t cot_half = half_pair(f, dtypes[k], so, 2, 3);
    sw_matmul_desc_t f32_result;
    sw_matmul_desc_init(&f32_result);
    f32_result.out_dtype = SW_DTYPE_F32;
    sw_tensor_t* r[2];
    for (int side = 0; side < 2; ++side) {
      SW_OK_(sw_tensor_set_requires_grad(side ? a.vk : a.cpu, true));
      SW_OK_(sw_tensor_set_requires_grad(side ? b.vk : b.cpu, true));
      SW_OK_(sw_matmul_ex(side ? a.vk : a.cpu, side ? b.vk : b.cpu, &f32_result, &r[side]));
      SW_OK_(sw_backward(r[side], side ? cot.vk : cot.cpu, false));
      sw_tensor_release(r[side]);
      SW_OK_(sw_matmul(side ? a.vk : a.cpu, side ? b.vk : b.cpu, &r[side]));
      SW_OK_(sw_backward(r[side], side ? cot_half.vk : cot_half.cpu, false));
    }
    for (int which = 0; which < 2; ++which) {
      vk_pair_t leaf = which ? b : a;
      sw_tensor_t *gc = NULL, *gv = NULL;
      SW_OK_(sw_tensor_grad(leaf.cpu, &gc));
      SW_OK_(sw_tensor_grad(leaf.vk, &gv));
      vk_assert_matches(gc, gv, 0);
      sw_tensor_release(gc);
      sw_tensor_release(gv);
    }
    sw_tensor_release(r[0]);
    sw_tensor_release(r[1]);
    vk_pair_release(a);
    vk_pair_release(b);
    vk_pair_release(cot);
    vk_pair_release(cot_half);
  }
}

/* f64 on a device with shaderFloat64 (lavapipe has it): every op, and a
 * backward, in double arithmetic. */
static void test_f64_ops_match_cpu(void** state) {
  fixture_t* f = *state;
  NEED_DEVICE(f);
  int64_t sa[3] = {5, 6, 7}, sb[2] = {6, 7}, sm[2] = {7, 9};
  double xa[210], xb[42], xm[63];
  for (int i = 0; i < 210; ++i) xa[i] = (double)(i % 11) - 5.0 + 1.0 / 3.0;
  for (int i = 0; i < 42; ++i) xb[i] = (double)(i % 5) - 2.0;
  for (int i = 0; i < 63; ++i) xm[i] = (double)(i % 7) - 3.0;
  vk_pair_t a = vk_pair(f, SW_DTYPE_F64, sa, 3, xa), b = vk_pair(f, SW_DTYPE_F64, sb, 2, xb);
  vk_pair_t m = vk_pair(f, SW_DTYPE_F64, sm, 2, xm);
  sw_tensor_t *rc = NULL, *rv = NULL;
  int64_t axes[2] = {0, 2};
#define BOTH64(expr_cpu, expr_vk, tol) \
  SW_OK_(expr_cpu);                     \
  SW_OK_(expr_vk);                      \
  vk_assert_matches(rc, rv, tol);       \
  sw_tensor_release(rc);                \
  sw_tensor_release(rv)
  BOTH64(sw_add(a.cpu, b.cpu, &rc), sw_add(a.vk, b.vk, &rv), 0);
  BOTH64(sw_elementwise_mul(a.cpu, b.cpu, &rc), sw_elementwise_mul(a.vk, b.vk, &rv), 0);
  BOTH64(sw_mul_scalar(a.cpu, 0.1, &rc), sw_mul_scalar(a.vk, 0.1, &rv), 0);
  BOTH64(sw_relu(a.cpu, &rc), sw_relu(a.vk, &rv), 0);
  BOTH64(sw_reduce_sum(a.cpu, axes, 2, false, &rc), sw_reduce_sum(a.vk, axes, 2, false, &rv), 1e-12);
  BOTH64(sw_reduce_sum(a.cpu, NULL, 0, false, &rc), sw_reduce_sum(a.vk, NULL, 0, false, &rv), 1e-12);
  BOTH64(sw_matmul(a.cpu, m.cpu, &rc), sw_matmul(a.vk, m.vk, &rv), 1e-12);
#undef BOTH64
  for (int side = 0; side < 2; ++side) {
    sw_tensor_t* x = side ? a.vk : a.cpu;
    sw_tensor_t* w = side ? m.vk : m.cpu;
    SW_OK_(sw_tensor_set_requires_grad(x, true));
    SW_OK_(sw_tensor_set_requires_grad(w, true));
    sw_tensor_t *p = NULL, *q = NULL, *s = NULL;
    SW_OK_(sw_matmul(x, w, &p));
    SW_OK_(sw_relu(p, &q));
    SW_OK_(sw_reduce_sum(q, NULL, 0, false, &s));
    SW_OK_(sw_backward(s, NULL, false));
    sw_tensor_release(p);
    sw_tensor_release(q);
    sw_tensor_release(s);
  }
  for (int which = 0; which < 2; ++which) {
    vk_pair_t leaf = which ? m : a;
    sw_tensor_t *gc = NULL, *gv = NULL;
    SW_OK_(sw_tensor_grad(leaf.cpu, &gc));
    SW_OK_(sw_tensor_grad(leaf.vk, &gv));
    vk_assert_matches(gc, gv, 1e-12);
    sw_tensor_release(gc);
    sw_tensor_release(gv);
  }
  vk_pair_release(a);
  vk_pair_release(b);
  vk_pair_release(m);
}

/* What the CPU carrier refuses for a dtype, the Vulkan carrier refuses with
 * the same error code. */
static void test_dtype_errors_match_cpu(void** state) {
  fixture_t* f = *state;
  NEED_DEVICE(f);
  const sw_dtype_t dtypes[] = {SW_DTYPE_F16, SW_DTYPE_BF16, SW_DTYPE_I32, SW_DTYPE_I64, SW_DTYPE_U8, SW_DTYPE_BOOL};
  unsigned char zeros[64] = {0};
  int64_t s[2] = {2, 3};
  for (size_t k = 0; k < sizeof dtypes / sizeof *dtypes; ++k) {
    vk_pair_t a = vk_pair(f, dtypes[k], s, 2, zeros);
    vk_pair_t t;
    SW_OK_(sw_tensor_transpose(a.cpu, 0, 1, &t.cpu));
    SW_OK_(sw_tensor_transpose(a.vk, 0, 1, &t.vk));
    for (int op = 0; op < 6; ++op) {
      sw_tensor_t* r[2] = {NULL, NULL};
      sw_error_t* e[2];
      for (int side = 0; side < 2; ++side) {
        sw_tensor_t* x = side ? a.vk : a.cpu;
        sw_tensor_t* y = side ? t.vk : t.cpu;
        switch (op) {
          case 0: e[side] = sw_add(x, x, &r[side]); break;
          case 1: e[side] = sw_elementwise_mul(x, x, &r[side]); break;
          case 2: e[side] = sw_mul_scalar(x, 2.0, &r[side]); break;
          case 3: e[side] = sw_relu(x, &r[side]); break;
          case 4: e[side] = sw_reduce_sum(x, NULL, 0, false, &r[side]); break;
          default: e[side] = sw_matmul(x, y, &r[side]); break;
        }
      }
      if (!e[0]) {
        /* Only matmul of f16 and bf16 computes among these. */
        assert_true(op == 5 && (dtypes[k] == SW_DTYPE_F16 || dtypes[k] == SW_DTYPE_BF16));
        assert_null(e[1]);
        vk_assert_matches(r[0], r[1], 0);
        sw_tensor_release(r[0]);
        sw_tensor_release(r[1]);
        continue;
      }
      assert_non_null(e[1]);
      if (sw_error_code(e[0]) != sw_error_code(e[1]))
        fail_msg("%s op %d: cpu %s (%s), vulkan %s (%s)", sw_dtype_name(dtypes[k]), op,
                 sw_error_code_name(sw_error_code(e[0])), sw_error_message(e[0]),
                 sw_error_code_name(sw_error_code(e[1])), sw_error_message(e[1]));
      sw_error_free(e[0]);
      sw_error_free(e[1]);
    }
    vk_pair_release(t);
    vk_pair_release(a);
  }
  /* Mixed dtypes. */
  vk_pair_t h = vk_pair(f, SW_DTYPE_F16, s, 2, zeros), g = vk_pair(f, SW_DTYPE_BF16, s, 2, zeros);
  sw_tensor_t* r = NULL;
  SW_FAILS(sw_matmul(h.cpu, g.cpu, &r), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_matmul(h.vk, g.vk, &r), SW_ERROR_TYPE, NULL);
  vk_pair_release(h);
  vk_pair_release(g);
}

/* Creating a Vulkan carrier is an allocation for SW_FAULT_ALLOCATION: an
 * injected failure writes nothing and the retry succeeds. */
static void test_allocation_fault_on_creation(void** state) {
  fixture_t* f = *state;
  NEED_DEVICE(f);
  SW_OK_(sw_testing_inject_fault(f->rt, SW_FAULT_ALLOCATION, 1));
  sw_carrier_t* c = (sw_carrier_t*)(uintptr_t)0x1;
  SW_FAILS(sw_carrier_create_vulkan(f->rt, f->dev, SW_DTYPE_F32, 64, &c), SW_ERROR_OUT_OF_MEMORY,
           "injected allocation failure: Vulkan carrier");
  assert_ptr_equal(c, (sw_carrier_t*)(uintptr_t)0x1);
  c = NULL;
  SW_OK_(sw_carrier_create_vulkan(f->rt, f->dev, SW_DTYPE_F32, 64, &c));
  size_t n = 0;
  SW_OK_(sw_carrier_size(c, &n));
  assert_int_equal(n, 64);
  sw_carrier_release(c);
}

int main(void) {
  sw_vulkan_test_keep_driver();
  if (!sw_vulkan_test_available()) return 77;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_round_trip_at_offsets, vk_setup, vk_teardown),
      cmocka_unit_test_setup_teardown(test_ops_match_cpu, vk_setup, vk_teardown),
      cmocka_unit_test_setup_teardown(test_backward_matches_cpu, vk_setup, vk_teardown),
      cmocka_unit_test_setup_teardown(test_move_between_cpu_and_vulkan, vk_setup, vk_teardown),
      cmocka_unit_test_setup_teardown(test_wrong_device, vk_setup, vk_teardown),
      cmocka_unit_test_setup_teardown(test_restart_makes_carriers_stale, vk_setup, vk_teardown),
      cmocka_unit_test_setup_teardown(test_device_buffers_are_pooled, vk_setup, vk_teardown),
      cmocka_unit_test_setup_teardown(test_ops_batch_into_one_submission, vk_setup, vk_teardown),
      cmocka_unit_test_setup_teardown(test_half_matmul_matches_cpu, vk_setup, vk_teardown),
      cmocka_unit_test_setup_teardown(test_half_matmul_grads, vk_setup, vk_teardown),
      cmocka_unit_test_setup_teardown(test_f64_ops_match_cpu, vk_setup, vk_teardown),
      cmocka_unit_test_setup_teardown(test_dtype_errors_match_cpu, vk_setup, vk_teardown),
      cmocka_unit_test_setup_teardown(test_allocation_fault_on_creation, vk_setup, vk_teardown),
  };
  return sw_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
