/* Every public function given NULL handles (TYPE), NULL out-parameters
 * (VALUE), handles of the wrong kind (TYPE) and unknown dtypes (TYPE); after
 * each failure nothing has changed: out-parameters keep their sentinel and
 * the fixture's carrier keeps its values, version and state. */
#include "sw_test.h"

#define EXPECT_TYPE(expr) SW_FAILS(expr, SW_ERROR_TYPE, NULL)
#define EXPECT_VALUE(expr) SW_FAILS(expr, SW_ERROR_VALUE, NULL)
/* A handle reinterpreted as another kind. */
#define AS(type, handle) ((type*)(void*)(handle))
#define SENTINEL ((void*)(uintptr_t)0x5151)

typedef struct fixture {
  sw_runtime_t* rt;
  sw_tensor_t* t; /* f32 (2, 3), values 1..6 */
  sw_carrier_t* c; /* t's carrier */
  sw_layout_t* l; /* "(2,3):(1,2)" */
} fixture;

static const float kInit[6] = {1, 2, 3, 4, 5, 6};

static int setup(void** state) {
  fixture* f = (fixture*)calloc(1, sizeof *f);
  if (!f) return -1;
  sw_error_t* e = sw_runtime_create(NULL, &f->rt);
  const int64_t ext[2] = {2, 3};
  if (!e) e = sw_tensor_from_data(f->rt, SW_DTYPE_F32, ext, 2, kInit, &f->t);
  if (!e) e = sw_tensor_carrier(f->t, &f->c);
  if (!e) e = sw_layout_parse("(2,3):(1,2)", &f->l);
  if (e) {
    sw_error_free(e);
    return -1;
  }
  *state = f;
  return 0;
}

static int teardown(void** state) {
  fixture* f = (fixture*)*state;
  sw_layout_release(f->l);
  sw_carrier_release(f->c);
  sw_tensor_release(f->t);
  sw_runtime_release(f->rt);
  free(f);
  return 0;
}

/* The fixture's carrier holds its initial values at version 0, live and
 * unowned; its tensor and layout are what they were. */
static void expect_unchanged(const fixture* f) {
  uint64_t v = 99;
  SW_OK_(sw_carrier_version(f->c, &v));
  assert_int_equal(v, 0);
  float now[6];
  SW_OK_(sw_carrier_read(f->c, 0, 6, now));
  assert_memory_equal(now, kInit, sizeof kInit);
  bool b = true;
  SW_OK_(sw_carrier_is_disposed(f->c, &b));
  assert_false(b);
  SW_OK_(sw_carrier_is_owned(f->c, &b));
  assert_false(b);
  SW_OK_(sw_tensor_requires_grad(f->t, &b));
  assert_false(b);
  char text[32];
  size_t len = 0;
  SW_OK_(sw_layout_to_string(f->l, text, sizeof text, &len));
  assert_string_equal(text, "(2,3):(1,2)");
}

/* ---- runtime -------------------------------------------------------------- */

static void runtime_functions(void** state) {
  fixture* f = (fixture*)*state;
  EXPECT_VALUE(sw_runtime_create(NULL, NULL));
  uint32_t n = 777;
  EXPECT_TYPE(sw_runtime_compute_threads(NULL, &n));
  EXPECT_TYPE(sw_runtime_compute_threads(AS(sw_runtime_t, f->l), &n));
  EXPECT_TYPE(sw_runtime_compute_threads(AS(sw_runtime_t, f->t), &n));
  EXPECT_TYPE(sw_runtime_compute_threads(AS(sw_runtime_t, f->c), &n));
  assert_int_equal(n, 777);
  EXPECT_VALUE(sw_runtime_compute_threads(f->rt, NULL));
  expect_unchanged(f);
}

/* ---- layouts -------------------------------------------------------------- */

static void layout_constructors(void** state) {
  fixture* f = (fixture*)*state;
  const int64_t shape[2] = {2, 3}, stride[2] = {1, 2};
  const size_t perm[2] = {1, 0};
  sw_layout_t* out = SENTINEL;
  EXPECT_VALUE(sw_layout_create(NULL, stride, 2, &out));
  EXPECT_VALUE(sw_layout_create(shape, NULL, 2, &out));
  EXPECT_VALUE(sw_layout_create(shape, stride, 2, NULL));
  EXPECT_VALUE(sw_layout_dense(NULL, 2, &out));
  EXPECT_VALUE(sw_layout_dense(shape, 2, NULL));
  EXPECT_VALUE(sw_layout_parse(NULL, &out));
  EXPECT_VALUE(sw_layout_parse("4:1", NULL));

  const sw_layout_t* with_null[2] = {f->l, NULL};
  const sw_layout_t* with_tensor[2] = {f->l, AS(const sw_layout_t, f->t)};
  const sw_layout_t* with_carrier[1] = {AS(const sw_layout_t, f->c)};
  const sw_layout_t* fine[2] = {f->l, f->l};
  EXPECT_VALUE(sw_layout_group(NULL, 2, &out));
  EXPECT_TYPE(sw_layout_group(with_null, 2, &out));
  EXPECT_TYPE(sw_layout_group(with_tensor, 2, &out));
  EXPECT_TYPE(sw_layout_group(with_carrier, 1, &out));
  EXPECT_VALUE(sw_layout_group(fine, 2, NULL));

  EXPECT_TYPE(sw_layout_permute(NULL, perm, 2, &out));
  EXPECT_TYPE(sw_layout_permute(AS(sw_layout_t, f->t), perm, 2, &out));
  EXPECT_TYPE(sw_layout_permute(AS(sw_layout_t, f->rt), perm, 2, &out));
  EXPECT_VALUE(sw_layout_permute(f->l, NULL, 2, &out));
  EXPECT_VALUE(sw_layout_permute(f->l, perm, 2, NULL));
  assert_ptr_equal(out, SENTINEL);
  expect_unchanged(f);
}

static void layout_queries(void** state) {
  fixture* f = (fixture*)*state;
  const sw_layout_t* wrong[4] = {NULL, AS(const sw_layout_t, f->t), AS(const sw_layout_t, f->c),
                                 AS(const sw_layout_t, f->rt)};
  const int64_t coord[2] = {1, 1};
  for (int i = 0; i < 4; ++i) {
    const sw_layout_t* w = wrong[i];
    size_t r = 777, len = 777;
    int64_t v = 777, ext[2] = {777, 777};
    bool b = true;
    char buf[32];
    memset(buf, '#', sizeof buf);
    EXPECT_TYPE(sw_layout_rank(w, &r));
    EXPECT_TYPE(sw_layout_extents(w, ext, 2));
    EXPECT_TYPE(sw_layout_size(w, &v));
    EXPECT_TYPE(sw_layout_cosize(w, &v));
    EXPECT_TYPE(sw_layout_is_injective(w, &b));
    EXPECT_TYPE(sw_layout_equal(w, f->l, &b));
    EXPECT_TYPE(sw_layout_equal(f->l, w, &b));
    EXPECT_TYPE(sw_layout_index(w, coord, 2, &v));
    EXPECT_TYPE(sw_layout_encode(w, coord, 2, &v));
    EXPECT_TYPE(sw_layout_decode(w, 0, ext, 2));
    EXPECT_TYPE(sw_layout_to_string(w, buf, sizeof buf, &len));
    assert_int_equal(r, 777);
    assert_int_equal(len, 777);
    assert_int_equal(v, 777);
    assert_int_equal(ext[0], 777);
    assert_int_equal(ext[1], 777);
    assert_true(b);
    assert_int_equal(buf[0], '#');
  }
  int64_t v = 777;
  char buf[32];
  EXPECT_VALUE(sw_layout_rank(f->l, NULL));
  EXPECT_VALUE(sw_layout_extents(f->l, NULL, 2));
  EXPECT_VALUE(sw_layout_size(f->l, NULL));
  EXPECT_VALUE(sw_layout_cosize(f->l, NULL));
  EXPECT_VALUE(sw_layout_is_injective(f->l, NULL));
  EXPECT_VALUE(sw_layout_equal(f->l, f->l, NULL));
  EXPECT_VALUE(sw_layout_index(f->l, NULL, 2, &v));
  EXPECT_VALUE(sw_layout_index(f->l, coord, 2, NULL));
  EXPECT_VALUE(sw_layout_encode(f->l, NULL, 2, &v));
  EXPECT_VALUE(sw_layout_encode(f->l, coord, 2, NULL));
  EXPECT_VALUE(sw_layout_decode(f->l, 0, NULL, 2));
  EXPECT_VALUE(sw_layout_to_string(f->l, buf, sizeof buf, NULL));
  assert_int_equal(v, 777);
  expect_unchanged(f);
}

/* ---- carriers ------------------------------------------------------------- */

static void carrier_constructors(void** state) {
  fixture* f = (fixture*)*state;
  const float data[4] = {1, 2, 3, 4};
  sw_carrier_t* out = SENTINEL;
  EXPECT_TYPE(sw_carrier_create_cpu(NULL, SW_DTYPE_F32, 4, &out));
  EXPECT_TYPE(sw_carrier_create_cpu(AS(sw_runtime_t, f->l), SW_DTYPE_F32, 4, &out));
  EXPECT_TYPE(sw_carrier_create_cpu(AS(sw_runtime_t, f->t), SW_DTYPE_F32, 4, &out));
  EXPECT_VALUE(sw_carrier_create_cpu(f->rt, SW_DTYPE_F32, 4, NULL));
  EXPECT_TYPE(sw_carrier_create_cpu_from(NULL, SW_DTYPE_F32, data, 4, &out));
  EXPECT_TYPE(sw_carrier_create_cpu_from(AS(sw_runtime_t, f->c), SW_DTYPE_F32, data, 4, &out));
  EXPECT_VALUE(sw_carrier_create_cpu_from(f->rt, SW_DTYPE_F32, NULL, 4, &out));
  EXPECT_VALUE(sw_carrier_create_cpu_from(f->rt, SW_DTYPE_F32, data, 4, NULL));
  assert_ptr_equal(out, SENTINEL);
  expect_unchanged(f);
}

static void carrier_queries(void** state) {
  fixture* f = (fixture*)*state;
  const sw_carrier_t* wrong[4] = {NULL, AS(const sw_carrier_t, f->t), AS(const sw_carrier_t, f->l),
                                  AS(const sw_carrier_t, f->rt)};
  for (int i = 0; i < 4; ++i) {
    const sw_carrier_t* w = wrong[i];
    sw_carrier_kind_t k = (sw_carrier_kind_t)777;
    sw_dtype_t d = (sw_dtype_t)777;
    size_t n = 777;
    uint64_t v = 777;
    bool b = true;
    EXPECT_TYPE(sw_carrier_kind(w, &k));
    EXPECT_TYPE(sw_carrier_dtype(w, &d));
    EXPECT_TYPE(sw_carrier_size(w, &n));
    EXPECT_TYPE(sw_carrier_version(w, &v));
    EXPECT_TYPE(sw_carrier_is_mutable(w, &b));
    EXPECT_TYPE(sw_carrier_is_read_only(w, &b));
    EXPECT_TYPE(sw_carrier_is_owned(w, &b));
    EXPECT_TYPE(sw_carrier_is_disposed(w, &b));
    assert_int_equal(k, 777);
    assert_int_equal(d, 777);
    assert_int_equal(n, 777);
    assert_int_equal(v, 777);
    assert_true(b);
  }
  EXPECT_VALUE(sw_carrier_kind(f->c, NULL));
  EXPECT_VALUE(sw_carrier_dtype(f->c, NULL));
  EXPECT_VALUE(sw_carrier_size(f->c, NULL));
  EXPECT_VALUE(sw_carrier_version(f->c, NULL));
  EXPECT_VALUE(sw_carrier_is_mutable(f->c, NULL));
  EXPECT_VALUE(sw_carrier_is_read_only(f->c, NULL));
  EXPECT_VALUE(sw_carrier_is_owned(f->c, NULL));
  EXPECT_VALUE(sw_carrier_is_disposed(f->c, NULL));
  expect_unchanged(f);
}

static void carrier_mutators(void** state) {
  fixture* f = (fixture*)*state;
  sw_carrier_t* wrong[4] = {NULL, AS(sw_carrier_t, f->t), AS(sw_carrier_t, f->l), AS(sw_carrier_t, f->rt)};
  const float src[2] = {9, 9};
  for (int i = 0; i < 4; ++i) {
    sw_carrier_t* w = wrong[i];
    float dst[2] = {-1, -1};
    void* p = SENTINEL;
    EXPECT_TYPE(sw_carrier_read(w, 0, 2, dst));
    EXPECT_TYPE(sw_carrier_write(w, 0, 2, src));
    EXPECT_TYPE(sw_carrier_dispose(w));
    EXPECT_TYPE(sw_carrier_host_pointer(w, &p));
    EXPECT_TYPE(sw_testing_claim(w));
    EXPECT_TYPE(sw_testing_unclaim(w));
    assert_true(dst[0] == -1.0f && dst[1] == -1.0f);
    assert_ptr_equal(p, SENTINEL);
  }
  EXPECT_VALUE(sw_carrier_read(f->c, 0, 2, NULL));
  EXPECT_VALUE(sw_carrier_write(f->c, 0, 2, NULL));
  EXPECT_VALUE(sw_carrier_host_pointer(f->c, NULL));
  /* Disposing the tensor as if it were a carrier must not touch the tensor's
   * carrier: expect_unchanged checks it is live. */
  expect_unchanged(f);
}

/* ---- tensors -------------------------------------------------------------- */

static void tensor_constructors(void** state) {
  fixture* f = (fixture*)*state;
  const int64_t ext[2] = {2, 3}, neg[2] = {2, -3};
  const float data[6] = {0};
  sw_tensor_t* out = SENTINEL;
  EXPECT_TYPE(sw_tensor_create(NULL, 0, f->l, &out));
  EXPECT_TYPE(sw_tensor_create(AS(sw_carrier_t, f->l), 0, f->l, &out));
  EXPECT_TYPE(sw_tensor_create(AS(sw_carrier_t, f->t), 0, f->l, &out));
  EXPECT_TYPE(sw_tensor_create(f->c, 0, NULL, &out));
  EXPECT_TYPE(sw_tensor_create(f->c, 0, AS(const sw_layout_t, f->c), &out));
  EXPECT_TYPE(sw_tensor_create(f->c, 0, AS(const sw_layout_t, f->t), &out));
  EXPECT_VALUE(sw_tensor_create(f->c, 0, f->l, NULL));

  EXPECT_TYPE(sw_tensor_from_data(NULL, SW_DTYPE_F32, ext, 2, data, &out));
  EXPECT_TYPE(sw_tensor_from_data(AS(sw_runtime_t, f->t), SW_DTYPE_F32, ext, 2, data, &out));
  EXPECT_VALUE(sw_tensor_from_data(f->rt, SW_DTYPE_F32, NULL, 2, data, &out));
  EXPECT_VALUE(sw_tensor_from_data(f->rt, SW_DTYPE_F32, ext, 2, NULL, &out));
  EXPECT_VALUE(sw_tensor_from_data(f->rt, SW_DTYPE_F32, neg, 2, data, &out));
  EXPECT_VALUE(sw_tensor_from_data(f->rt, SW_DTYPE_F32, ext, 2, data, NULL));

  EXPECT_TYPE(sw_tensor_zeros(NULL, SW_DTYPE_F32, ext, 2, &out));
  EXPECT_TYPE(sw_tensor_zeros(AS(sw_runtime_t, f->l), SW_DTYPE_F32, ext, 2, &out));
  EXPECT_VALUE(sw_tensor_zeros(f->rt, SW_DTYPE_F32, NULL, 2, &out));
  EXPECT_VALUE(sw_tensor_zeros(f->rt, SW_DTYPE_F32, neg, 2, &out));
  EXPECT_VALUE(sw_tensor_zeros(f->rt, SW_DTYPE_F32, ext, 2, NULL));
  assert_ptr_equal(out, SENTINEL);
  expect_unchanged(f);
}

static void tensor_queries(void** state) {
  fixture* f = (fixture*)*state;
  const sw_tensor_t* wrong[4] = {NULL, AS(const sw_tensor_t, f->l), AS(const sw_tensor_t, f->c),
                                 AS(const sw_tensor_t, f->rt)};
  for (int i = 0; i < 4; ++i) {
    const sw_tensor_t* w = wrong[i];
    sw_carrier_t* c = SENTINEL;
    sw_layout_t* l = SENTINEL;
    sw_tensor_t* g = SENTINEL;
    int64_t off = 777, numel = 777, shape[2] = {777, 777};
    sw_dtype_t d = (sw_dtype_t)777;
    size_t r = 777;
    uint64_t v = 777;
    bool b = true;
    EXPECT_TYPE(sw_tensor_carrier(w, &c));
    EXPECT_TYPE(sw_tensor_layout(w, &l));
    EXPECT_TYPE(sw_tensor_offset(w, &off));
    EXPECT_TYPE(sw_tensor_dtype(w, &d));
    EXPECT_TYPE(sw_tensor_rank(w, &r));
    EXPECT_TYPE(sw_tensor_shape(w, shape, 2));
    EXPECT_TYPE(sw_tensor_numel(w, &numel));
    EXPECT_TYPE(sw_tensor_version(w, &v));
    EXPECT_TYPE(sw_tensor_requires_grad(w, &b));
    EXPECT_TYPE(sw_tensor_is_leaf(w, &b));
    EXPECT_TYPE(sw_tensor_grad(w, &g));
    assert_ptr_equal(c, SENTINEL);
    assert_ptr_equal(l, SENTINEL);
    assert_ptr_equal(g, SENTINEL);
    assert_int_equal(off, 777);
    assert_int_equal(numel, 777);
    assert_int_equal(shape[0], 777);
    assert_int_equal(d, 777);
    assert_int_equal(r, 777);
    assert_int_equal(v, 777);
    assert_true(b);
  }
  EXPECT_VALUE(sw_tensor_carrier(f->t, NULL));
  EXPECT_VALUE(sw_tensor_layout(f->t, NULL));
  EXPECT_VALUE(sw_tensor_offset(f->t, NULL));
  EXPECT_VALUE(sw_tensor_dtype(f->t, NULL));
  EXPECT_VALUE(sw_tensor_rank(f->t, NULL));
  EXPECT_VALUE(sw_tensor_shape(f->t, NULL, 2));
  EXPECT_VALUE(sw_tensor_numel(f->t, NULL));
  EXPECT_VALUE(sw_tensor_version(f->t, NULL));
  EXPECT_VALUE(sw_tensor_requires_grad(f->t, NULL));
  EXPECT_VALUE(sw_tensor_is_leaf(f->t, NULL));
  EXPECT_VALUE(sw_tensor_grad(f->t, NULL));
  expect_unchanged(f);
}

static void tensor_access(void** state) {
  fixture* f = (fixture*)*state;
  sw_tensor_t* wrong[4] = {NULL, AS(sw_tensor_t, f->l), AS(sw_tensor_t, f->c), AS(sw_tensor_t, f->rt)};
  const int64_t coord[2] = {1, 1};
  const size_t perm[2] = {1, 0};
  const float src[6] = {9, 9, 9, 9, 9, 9};
  for (int i = 0; i < 4; ++i) {
    sw_tensor_t* w = wrong[i];
    double v = 777;
    float dst[6] = {-1, -1, -1, -1, -1, -1};
    sw_tensor_t* view = SENTINEL;
    EXPECT_TYPE(sw_tensor_get(w, coord, 2, &v));
    EXPECT_TYPE(sw_tensor_set(w, coord, 2, 1.0));
    EXPECT_TYPE(sw_tensor_read(w, dst, sizeof dst));
    EXPECT_TYPE(sw_tensor_write(w, src, sizeof src));
    EXPECT_TYPE(sw_tensor_permute(w, perm, 2, &view));
    EXPECT_TYPE(sw_tensor_transpose(w, 0, 1, &view));
    assert_true(v == 777);
    assert_true(dst[0] == -1.0f && dst[5] == -1.0f);
    assert_ptr_equal(view, SENTINEL);
  }
  double v = 777;
  sw_tensor_t* view = SENTINEL;
  EXPECT_VALUE(sw_tensor_get(f->t, NULL, 2, &v));
  EXPECT_VALUE(sw_tensor_get(f->t, coord, 2, NULL));
  EXPECT_VALUE(sw_tensor_set(f->t, NULL, 2, 1.0));
  EXPECT_VALUE(sw_tensor_read(f->t, NULL, 6 * sizeof(float)));
  EXPECT_VALUE(sw_tensor_write(f->t, NULL, 6 * sizeof(float)));
  EXPECT_VALUE(sw_tensor_permute(f->t, NULL, 2, &view));
  EXPECT_VALUE(sw_tensor_permute(f->t, perm, 2, NULL));
  EXPECT_VALUE(sw_tensor_transpose(f->t, 0, 1, NULL));
  assert_true(v == 777);
  assert_ptr_equal(view, SENTINEL);
  expect_unchanged(f);
}

/* ---- autograd and ops ---------------------------------------------------- */

static void autograd_functions(void** state) {
  fixture* f = (fixture*)*state;
  sw_tensor_t* wrong[4] = {NULL, AS(sw_tensor_t, f->l), AS(sw_tensor_t, f->c), AS(sw_tensor_t, f->rt)};
  for (int i = 0; i < 4; ++i) {
    EXPECT_TYPE(sw_tensor_set_requires_grad(wrong[i], true));
    EXPECT_TYPE(sw_tensor_clear_grad(wrong[i]));
    EXPECT_TYPE(sw_backward(wrong[i], NULL, false));
    if (wrong[i]) EXPECT_TYPE(sw_backward(f->t, wrong[i], false)); /* NULL cotangent is allowed */
  }
  /* Only floating point tensors can require gradients. */
  const int64_t ext[1] = {2};
  sw_tensor_t* ints = NULL;
  SW_OK_(sw_tensor_zeros(f->rt, SW_DTYPE_I32, ext, 1, &ints));
  EXPECT_TYPE(sw_tensor_set_requires_grad(ints, true));
  bool b = true;
  SW_OK_(sw_tensor_requires_grad(ints, &b));
  assert_false(b);
  sw_tensor_release(ints);
  expect_unchanged(f);
}

static void op_functions(void** state) {
  fixture* f = (fixture*)*state;
  sw_tensor_t* wrong[4] = {NULL, AS(sw_tensor_t, f->l), AS(sw_tensor_t, f->c), AS(sw_tensor_t, f->rt)};
  typedef sw_error_t* (*binary_fn)(sw_tensor_t*, sw_tensor_t*, sw_tensor_t**);
  const binary_fn binaries[4] = {sw_add, sw_elementwise_mul, sw_mul, sw_matmul};
  const int64_t axes[1] = {0};
  sw_tensor_t* out = SENTINEL;
  for (int i = 0; i < 4; ++i) {
    sw_tensor_t* w = wrong[i];
    for (int k = 0; k < 4; ++k) {
      EXPECT_TYPE(binaries[k](w, f->t, &out));
      EXPECT_TYPE(binaries[k](f->t, w, &out));
    }
    EXPECT_TYPE(sw_mul_scalar(w, 2.0, &out));
    EXPECT_TYPE(sw_scalar_mul(2.0, w, &out));
    EXPECT_TYPE(sw_relu(w, &out));
    EXPECT_TYPE(sw_reduce_sum(w, axes, 1, false, &out));
  }
  for (int k = 0; k < 4; ++k) EXPECT_VALUE(binaries[k](f->t, f->t, NULL));
  EXPECT_VALUE(sw_mul_scalar(f->t, 2.0, NULL));
  EXPECT_VALUE(sw_scalar_mul(2.0, f->t, NULL));
  EXPECT_VALUE(sw_relu(f->t, NULL));
  EXPECT_VALUE(sw_reduce_sum(f->t, axes, 1, false, NULL));
  EXPECT_VALUE(sw_reduce_sum(f->t, NULL, 1, false, &out));
  assert_ptr_equal(out, SENTINEL);
  expect_unchanged(f);
}

/* ---- runtime events, awaits and moves -------------------------------------- */

static void runtime_event_functions(void** state) {
  fixture* f = (fixture*)*state;
  sw_runtime_t* wrong[4] = {NULL, AS(sw_runtime_t, f->l), AS(sw_runtime_t, f->t), AS(sw_runtime_t, f->c)};
  for (int i = 0; i < 4; ++i) {
    int fd = 777;
    size_t fired = 777;
    EXPECT_TYPE(sw_runtime_shutdown(wrong[i]));
    EXPECT_TYPE(sw_runtime_event_fd(wrong[i], &fd));
    EXPECT_TYPE(sw_runtime_process_events(wrong[i], &fired));
    EXPECT_TYPE(sw_testing_inject_fault(wrong[i], SW_FAULT_ALLOCATION, 1));
    assert_int_equal(fd, 777);
    assert_int_equal(fired, 777);
  }
  EXPECT_VALUE(sw_runtime_event_fd(f->rt, NULL));
  EXPECT_VALUE(sw_testing_inject_fault(f->rt, (sw_fault_kind_t)0, 1));
  EXPECT_VALUE(sw_testing_inject_fault(f->rt, (sw_fault_kind_t)99, 1));
  /* None of the failures above shut the runtime down or armed a fault: a
   * fresh carrier can still be allocated. */
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_cpu(f->rt, SW_DTYPE_F32, 4, &c));
  sw_carrier_release(c);
  expect_unchanged(f);
}

static void await_and_move_functions(void** state) {
  fixture* f = (fixture*)*state;
  sw_await_t* wrong[4] = {NULL, AS(sw_await_t, f->l), AS(sw_await_t, f->t), AS(sw_await_t, f->c)};
  sw_await_callback_info_t info;
  sw_await_callback_info_init(&info);
  sw_await_callback_info_init(NULL); /* must not crash */
  for (int i = 0; i < 4; ++i) {
    sw_await_kind_t k = (sw_await_kind_t)777;
    sw_await_status_t st = (sw_await_status_t)777;
    sw_tensor_t* r = SENTINEL;
    EXPECT_TYPE(sw_await_kind(wrong[i], &k));
    EXPECT_TYPE(sw_await_query(wrong[i], &st));
    EXPECT_TYPE(sw_await_wait(wrong[i], 0));
    EXPECT_TYPE(sw_await_result(wrong[i], &r));
    EXPECT_TYPE(sw_await_set_callback(wrong[i], &info));
    assert_int_equal(k, 777);
    assert_int_equal(st, 777);
    assert_ptr_equal(r, SENTINEL);
  }
  sw_await_retain(NULL);
  sw_await_release(NULL);

  /* A scratch move, so the await's own out-parameters can be checked. */
  const int64_t ext[1] = {3};
  const float v[3] = {1, 2, 3};
  sw_tensor_t* src = NULL;
  SW_OK_(sw_tensor_from_data(f->rt, SW_DTYPE_F32, ext, 1, v, &src));
  sw_carrier_t* dst = NULL;
  SW_OK_(sw_carrier_create_cpu(f->rt, SW_DTYPE_F32, 3, &dst));
  sw_await_t* a = SENTINEL;
  EXPECT_TYPE(sw_move_async(NULL, dst, &a));
  EXPECT_TYPE(sw_move_async(AS(sw_tensor_t, f->c), dst, &a));
  EXPECT_TYPE(sw_move_async(src, NULL, &a));
  EXPECT_TYPE(sw_move_async(src, AS(sw_carrier_t, f->t), &a));
  EXPECT_VALUE(sw_move_async(src, dst, NULL));
  assert_ptr_equal(a, SENTINEL);
  /* The failed moves claimed nothing and moved nothing. */
  bool owned = true, disposed = true;
  SW_OK_(sw_carrier_is_owned(dst, &owned));
  assert_false(owned);
  uint64_t ver = 99;
  SW_OK_(sw_carrier_version(dst, &ver));
  assert_int_equal(ver, 0);
  sw_carrier_t* sc = NULL;
  SW_OK_(sw_tensor_carrier(src, &sc));
  SW_OK_(sw_carrier_is_disposed(sc, &disposed));
  assert_false(disposed);
  SW_OK_(sw_carrier_is_owned(sc, &owned));
  assert_false(owned);

  SW_OK_(sw_move_async(src, dst, &a));
  SW_OK_(sw_await_wait(a, -1));
  EXPECT_VALUE(sw_await_kind(a, NULL));
  EXPECT_VALUE(sw_await_query(a, NULL));
  EXPECT_VALUE(sw_await_result(a, NULL));
  EXPECT_VALUE(sw_await_set_callback(a, NULL));
  sw_await_release(a);
  sw_carrier_release(sc);
  sw_carrier_release(dst);
  sw_tensor_release(src);
  expect_unchanged(f);
}

/* ---- storage carriers ----------------------------------------------------- */

static void storage_carrier_functions(void** state) {
  fixture* f = (fixture*)*state;
  sw_runtime_t* wrong_rt[4] = {NULL, AS(sw_runtime_t, f->l), AS(sw_runtime_t, f->t), AS(sw_runtime_t, f->c)};
  sw_file_carrier_desc_init(NULL); /* must not crash */
  sw_zstd_carrier_desc_init(NULL);
  for (int i = 0; i < 4; ++i) {
    sw_carrier_t* c = SENTINEL;
    EXPECT_TYPE(sw_carrier_create_host(wrong_rt[i], SW_DTYPE_F32, 4, &c));
    EXPECT_TYPE(sw_carrier_create_file(wrong_rt[i], SW_DTYPE_F32, 4, NULL, &c));
    EXPECT_TYPE(sw_carrier_open_file(wrong_rt[i], SW_DTYPE_F32, "/dev/null", 0, 0, NULL, &c));
    EXPECT_TYPE(sw_carrier_create_zstd(wrong_rt[i], SW_DTYPE_F32, 4, NULL, &c));
    assert_ptr_equal(c, SENTINEL);
  }
  sw_carrier_t* c = SENTINEL;
  EXPECT_TYPE(sw_carrier_create_host(f->rt, (sw_dtype_t)14, 4, &c));
  EXPECT_TYPE(sw_carrier_create_file(f->rt, (sw_dtype_t)14, 4, NULL, &c));
  EXPECT_TYPE(sw_carrier_open_file(f->rt, (sw_dtype_t)14, "/dev/null", 0, 0, NULL, &c));
  EXPECT_TYPE(sw_carrier_create_zstd(f->rt, (sw_dtype_t)14, 4, NULL, &c));
  EXPECT_VALUE(sw_carrier_create_host(f->rt, SW_DTYPE_F32, 4, NULL));
  EXPECT_VALUE(sw_carrier_create_file(f->rt, SW_DTYPE_F32, 4, NULL, NULL));
  EXPECT_VALUE(sw_carrier_open_file(f->rt, SW_DTYPE_F32, NULL, 0, 0, NULL, &c));
  EXPECT_VALUE(sw_carrier_open_file(f->rt, SW_DTYPE_F32, "/dev/null", 0, 0, NULL, NULL));
  EXPECT_VALUE(sw_carrier_create_zstd(f->rt, SW_DTYPE_F32, 4, NULL, NULL));
  assert_ptr_equal(c, SENTINEL);

  const sw_carrier_t* wrong_c[4] = {NULL, AS(const sw_carrier_t, f->l), AS(const sw_carrier_t, f->t),
                                    AS(const sw_carrier_t, f->rt)};
  for (int i = 0; i < 4; ++i) {
    uint64_t bytes = 777;
    EXPECT_TYPE(sw_carrier_stored_bytes(wrong_c[i], &bytes));
    EXPECT_TYPE(sw_testing_corrupt_frame((sw_carrier_t*)wrong_c[i], 0));
    assert_int_equal(bytes, 777);
  }
  EXPECT_VALUE(sw_carrier_stored_bytes(f->c, NULL));
  /* A CPU carrier has no zstd frames. */
  SW_FAILS(sw_testing_corrupt_frame(f->c, 0), SW_ERROR_UNSUPPORTED, NULL);
  expect_unchanged(f);
}

/* ---- dtypes --------------------------------------------------------------- */

static void unknown_dtypes(void** state) {
  fixture* f = (fixture*)*state;
  /* Unknown but within the enum's range (negative numbers are outside the
   * range of the C++ enum the library sees). */
  const sw_dtype_t bad[4] = {SW_DTYPE_INVALID, (sw_dtype_t)14, (sw_dtype_t)1000, SW_DTYPE_FORCE32};
  const int64_t ext[2] = {2, 3};
  const unsigned char data[64] = {0};
  for (int i = 0; i < 4; ++i) {
    sw_carrier_t* c = SENTINEL;
    sw_tensor_t* t = SENTINEL;
    EXPECT_TYPE(sw_carrier_create_cpu(f->rt, bad[i], 4, &c));
    EXPECT_TYPE(sw_carrier_create_cpu(f->rt, bad[i], 0, &c));
    EXPECT_TYPE(sw_carrier_create_cpu_from(f->rt, bad[i], data, 4, &c));
    EXPECT_TYPE(sw_tensor_from_data(f->rt, bad[i], ext, 2, data, &t));
    EXPECT_TYPE(sw_tensor_zeros(f->rt, bad[i], ext, 2, &t));
    assert_ptr_equal(c, SENTINEL);
    assert_ptr_equal(t, SENTINEL);
    assert_int_equal(sw_dtype_size(bad[i]), 0);
    assert_string_equal(sw_dtype_name(bad[i]), "invalid");
  }
  expect_unchanged(f);
}

/* ---- failures with valid handles change nothing --------------------------- */

static void failed_calls_change_nothing(void** state) {
  fixture* f = (fixture*)*state;
  const float src[8] = {9, 9, 9, 9, 9, 9, 9, 9};
  const int64_t out_of_range[2] = {2, 0};
  SW_FAILS(sw_carrier_write(f->c, 5, 2, src), SW_ERROR_INDEX, NULL);
  SW_FAILS(sw_tensor_set(f->t, out_of_range, 2, 1.0), SW_ERROR_INDEX, NULL);
  SW_FAILS(sw_tensor_write(f->t, src, 5 * sizeof(float)), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_tensor_write(f->t, src, 8 * sizeof(float)), SW_ERROR_VALUE, NULL);
  SW_FAILS(sw_testing_unclaim(f->c), SW_ERROR_STATE, NULL);
  const int64_t ext[1] = {4};
  sw_tensor_t* u8 = NULL;
  SW_OK_(sw_tensor_zeros(f->rt, SW_DTYPE_U8, ext, 1, &u8));
  const int64_t c0[1] = {0};
  SW_FAILS(sw_tensor_set(u8, c0, 1, 300.0), SW_ERROR_VALUE, NULL);
  uint64_t v = 99;
  SW_OK_(sw_tensor_version(u8, &v));
  assert_int_equal(v, 0);
  sw_tensor_release(u8);
  expect_unchanged(f);
}

/* ---- retain / release ------------------------------------------------------ */

static void retain_release_null(void** state) {
  fixture* f = (fixture*)*state;
  sw_runtime_retain(NULL);
  sw_runtime_release(NULL);
  sw_layout_retain(NULL);
  sw_layout_release(NULL);
  sw_carrier_retain(NULL);
  sw_carrier_release(NULL);
  sw_tensor_retain(NULL);
  sw_tensor_release(NULL);
  sw_error_free(NULL);
  expect_unchanged(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(runtime_functions),
      cmocka_unit_test(layout_constructors),
      cmocka_unit_test(layout_queries),
      cmocka_unit_test(carrier_constructors),
      cmocka_unit_test(carrier_queries),
      cmocka_unit_test(carrier_mutators),
      cmocka_unit_test(tensor_constructors),
      cmocka_unit_test(tensor_queries),
      cmocka_unit_test(tensor_access),
      cmocka_unit_test(autograd_functions),
      cmocka_unit_test(op_functions),
      cmocka_unit_test(runtime_event_functions),
      cmocka_unit_test(await_and_move_functions),
      cmocka_unit_test(storage_carrier_functions),
      cmocka_unit_test(unknown_dtypes),
      cmocka_unit_test(failed_calls_change_nothing),
      cmocka_unit_test(retain_release_null),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
