/* sw_move_async through the public ABI: CPU and host carriers in both
 * directions, strided and nested sources, destinations allocated to fit or
 * larger, validation before submission, claims while pending, an injected
 * allocation failure, autograd across a move and many concurrent moves. */
#include "sw_async_test.h"

#define BIG ((size_t)64 << 20) /* 256 MiB of f32 */

static sw_carrier_t* empty_carrier(sw_runtime_t* rt, sw_carrier_kind_t kind, sw_dtype_t dtype) {
  sw_carrier_t* c = NULL;
  if (kind == SW_CARRIER_HOST)
    SW_OK_(sw_carrier_create_host(rt, dtype, 0, &c));
  else
    SW_OK_(sw_carrier_create_cpu(rt, dtype, 0, &c));
  return c;
}

static sw_tensor_t* tensor_over(sw_carrier_t* c, int64_t offset, const char* layout) {
  sw_layout_t* l = NULL;
  SW_OK_(sw_layout_parse(layout, &l));
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_create(c, offset, l, &t));
  sw_layout_release(l);
  return t;
}

/* Submits the move, waits for it and returns its result. */
static sw_tensor_t* move_and_wait(sw_tensor_t* t, sw_carrier_t* dst) {
  sw_await_t* a = NULL;
  SW_OK_(sw_move_async(t, dst, &a));
  SW_OK_(sw_await_wait(a, -1));
  sw_tensor_t* r = NULL;
  SW_OK_(sw_await_result(a, &r));
  assert_non_null(r);
  sw_await_release(a);
  return r;
}

/* Asserts that `t` is a dense tensor of `extents` at slot 0 of `carrier`. */
static void expect_dense_at_zero(const sw_tensor_t* t, const sw_carrier_t* carrier, const int64_t* extents,
                                 size_t rank) {
  sw_carrier_t* c = sw_async_carrier_of(t);
  assert_ptr_equal(c, carrier);
  sw_carrier_release(c);
  int64_t offset = -1;
  SW_OK_(sw_tensor_offset(t, &offset));
  assert_int_equal(offset, 0);
  size_t r = 99;
  SW_OK_(sw_tensor_rank(t, &r));
  assert_int_equal(r, rank);
  int64_t shape[SW_MAX_RANK];
  SW_OK_(sw_tensor_shape(t, shape, SW_MAX_RANK));
  for (size_t i = 0; i < rank; ++i) assert_int_equal(shape[i], extents[i]);
  sw_layout_t *got = NULL, *dense = NULL;
  SW_OK_(sw_tensor_layout(t, &got));
  SW_OK_(sw_layout_dense(extents, rank, &dense));
  bool equal = false;
  SW_OK_(sw_layout_equal(got, dense, &equal));
  assert_true(equal);
  sw_layout_release(dense);
  sw_layout_release(got);
}

/* ---- directions ------------------------------------------------------------ */

static void move_cpu_to_host_every_width(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const sw_dtype_t dtypes[4] = {SW_DTYPE_F32, SW_DTYPE_F64, SW_DTYPE_I32, SW_DTYPE_U8};
  const int64_t extents[2] = {3, 4};
  for (int d = 0; d < 4; ++d) {
    const size_t es = sw_dtype_size(dtypes[d]);
    unsigned char data[12 * 8], back[12 * 8];
    for (size_t i = 0; i < sizeof data; ++i) data[i] = (unsigned char)(i * 37 + 5 + d);
    sw_tensor_t* t = NULL;
    SW_OK_(sw_tensor_from_data(rt, dtypes[d], extents, 2, data, &t));
    sw_carrier_t* src = sw_async_carrier_of(t);
    sw_carrier_t* dst = empty_carrier(rt, SW_CARRIER_HOST, dtypes[d]);
    sw_await_t* a = NULL;
    SW_OK_(sw_move_async(t, dst, &a));
    sw_await_kind_t kind = SW_AWAIT_KIND_FORCE32;
    SW_OK_(sw_await_kind(a, &kind));
    assert_int_equal(kind, SW_AWAIT_MOVE);
    SW_OK_(sw_await_wait(a, -1));
    sw_tensor_t* r = NULL;
    SW_OK_(sw_await_result(a, &r));
    expect_dense_at_zero(r, dst, extents, 2);
    sw_carrier_kind_t k = (sw_carrier_kind_t)0;
    SW_OK_(sw_carrier_kind(dst, &k));
    assert_int_equal(k, SW_CARRIER_HOST);
    assert_int_equal(sw_async_size(dst), 12);
    assert_int_equal(sw_async_version(dst), 1);
    SW_OK_(sw_tensor_read(r, back, 12 * es));
    assert_memory_equal(back, data, 12 * es);
    SW_OK_(sw_carrier_read(dst, 0, 12, back));
    assert_memory_equal(back, data, 12 * es);
    /* The source carrier is disposed; its handle still answers. */
    assert_true(sw_async_disposed(src));
    assert_false(sw_async_owned(src));
    assert_int_equal(sw_async_size(src), 12);
    SW_FAILS(sw_tensor_read(t, back, 12 * es), SW_ERROR_STATE, NULL);
    SW_FAILS(sw_carrier_read(src, 0, 1, back), SW_ERROR_STATE, NULL);
    sw_tensor_release(r);
    sw_await_release(a);
    sw_carrier_release(dst);
    sw_carrier_release(src);
    sw_tensor_release(t);
  }
}

static void move_cpu_to_empty_cpu_allocates_to_fit(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t extents[2] = {2, 3};
  const double v[6] = {1.5, -2, 3.25, 4, -5.5, 6};
  sw_tensor_t* t = sw_test_tensor(rt, SW_DTYPE_F32, extents, 2, v);
  sw_carrier_t* src = sw_async_carrier_of(t);
  sw_carrier_t* dst = empty_carrier(rt, SW_CARRIER_CPU, SW_DTYPE_F32);
  sw_tensor_t* r = move_and_wait(t, dst);
  expect_dense_at_zero(r, dst, extents, 2);
  assert_int_equal(sw_async_size(dst), 6);
  assert_int_equal(sw_async_version(dst), 1);
  assert_true(sw_async_disposed(src));
  /* The result is a compute tensor like any other. */
  sw_tensor_t* twice = NULL;
  SW_OK_(sw_add(r, r, &twice));
  double* got = sw_test_values(twice, NULL);
  for (int i = 0; i < 6; ++i) assert_true(got[i] == 2 * v[i]);
  free(got);
  sw_tensor_release(twice);
  sw_tensor_release(r);
  sw_carrier_release(dst);
  sw_carrier_release(src);
  sw_tensor_release(t);
}

static void move_into_bigger_destination_writes_slot_zero(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const sw_carrier_kind_t kinds[2] = {SW_CARRIER_CPU, SW_CARRIER_HOST};
  for (int k = 0; k < 2; ++k) {
    sw_carrier_t* dst = NULL;
    if (kinds[k] == SW_CARRIER_CPU)
      SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 10, &dst));
    else
      SW_OK_(sw_carrier_create_host(rt, SW_DTYPE_F32, 10, &dst));
    float sentinel[10];
    for (int i = 0; i < 10; ++i) sentinel[i] = 100.0f + (float)i;
    SW_OK_(sw_carrier_write(dst, 0, 10, sentinel));
    assert_int_equal(sw_async_version(dst), 1);
    const int64_t extent = 4;
    const double v[4] = {-1, -2, -3, -4};
    sw_tensor_t* t = sw_test_tensor(rt, SW_DTYPE_F32, &extent, 1, v);
    sw_carrier_t* src = sw_async_carrier_of(t);
    sw_tensor_t* r = move_and_wait(t, dst);
    expect_dense_at_zero(r, dst, &extent, 1);
    assert_int_equal(sw_async_size(dst), 10);
    assert_int_equal(sw_async_version(dst), 2); /* one version step */
    float got[10];
    SW_OK_(sw_carrier_read(dst, 0, 10, got));
    for (int i = 0; i < 4; ++i) assert_true(got[i] == (float)v[i]);
    for (int i = 4; i < 10; ++i) assert_true(got[i] == sentinel[i]);
    assert_true(sw_async_disposed(src));
    sw_tensor_release(r);
    sw_carrier_release(src);
    sw_tensor_release(t);
    sw_carrier_release(dst);
  }
}

static void move_host_to_cpu(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_carrier_t* host = NULL;
  SW_OK_(sw_carrier_create_host(rt, SW_DTYPE_F64, 6, &host));
  const double v[6] = {0.5, 1, 2, 4, 8, 16};
  SW_OK_(sw_carrier_write(host, 0, 6, v));
  sw_tensor_t* t = tensor_over(host, 0, "(2,3):(1,2)");
  sw_carrier_t* dst = empty_carrier(rt, SW_CARRIER_CPU, SW_DTYPE_F64);
  sw_tensor_t* r = move_and_wait(t, dst);
  const int64_t extents[2] = {2, 3};
  expect_dense_at_zero(r, dst, extents, 2);
  assert_true(sw_async_disposed(host));
  sw_tensor_t* scaled = NULL;
  SW_OK_(sw_mul_scalar(r, 3.0, &scaled));
  double* got = sw_test_values(scaled, NULL);
  for (int i = 0; i < 6; ++i) assert_true(got[i] == 3 * v[i]);
  free(got);
  /* And back to a fresh host carrier. */
  sw_carrier_t* host2 = empty_carrier(rt, SW_CARRIER_HOST, SW_DTYPE_F64);
  sw_tensor_t* r2 = move_and_wait(r, host2);
  double back[6];
  SW_OK_(sw_carrier_read(host2, 0, 6, back));
  assert_memory_equal(back, v, sizeof v);
  assert_true(sw_async_disposed(dst));
  sw_tensor_release(r2);
  sw_carrier_release(host2);
  sw_tensor_release(scaled);
  sw_tensor_release(r);
  sw_carrier_release(dst);
  sw_tensor_release(t);
  sw_carrier_release(host);
}

/* Source views over a carrier whose slot s holds 1000 + s; `expect` lists the
 * slot of each element in first-mode-fastest order. */
static const struct {
  const char* layout;
  int64_t offset;
  size_t carrier_size;
  size_t rank;
  int64_t extents[2];
  int64_t expect[12];
} kViews[] = {
    /* (3,4) dense, transposed: element (i,j) at slot 3i + j. */
    {"(4,3):(3,1)", 0, 12, 2, {4, 3}, {0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11}},
    /* strided with an offset: (i,j) at 2 + 2i + 7j. */
    {"(3,2):(2,7)", 2, 14, 2, {3, 2}, {2, 4, 6, 9, 11, 13}},
    /* nested: mode 0 is (2,2):(1,6), mode 1 is 3:2, from slot 1. */
    {"((2,2),3):((1,6),2)", 1, 13, 2, {4, 3}, {1, 2, 7, 8, 3, 4, 9, 10, 5, 6, 11, 12}},
    /* a negative stride: reversed. */
    {"5:-1", 4, 5, 1, {5, 0}, {4, 3, 2, 1, 0}},
    /* a broadcast mode (stride 0): not injective, still readable. */
    {"(3,2):(0,1)", 0, 2, 2, {3, 2}, {0, 0, 0, 1, 1, 1}},
};

static void strided_and_nested_sources_move_dense(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const sw_carrier_kind_t kinds[2] = {SW_CARRIER_CPU, SW_CARRIER_HOST};
  for (size_t v = 0; v < sizeof kViews / sizeof kViews[0]; ++v) {
    for (int k = 0; k < 2; ++k) {
      float slots[16];
      for (size_t s = 0; s < kViews[v].carrier_size; ++s) slots[s] = 1000.0f + (float)s;
      sw_carrier_t* src = NULL;
      SW_OK_(sw_carrier_create_cpu_from(rt, SW_DTYPE_F32, slots, kViews[v].carrier_size, &src));
      sw_tensor_t* t = tensor_over(src, kViews[v].offset, kViews[v].layout);
      int64_t n = 0;
      SW_OK_(sw_tensor_numel(t, &n));
      sw_carrier_t* dst = empty_carrier(rt, kinds[k], SW_DTYPE_F32);
      sw_tensor_t* r = move_and_wait(t, dst);
      expect_dense_at_zero(r, dst, kViews[v].extents, kViews[v].rank);
      assert_int_equal(sw_async_size(dst), (size_t)n);
      float got[12];
      SW_OK_(sw_carrier_read(dst, 0, (size_t)n, got));
      for (int64_t i = 0; i < n; ++i) {
        if (got[i] != 1000.0f + (float)kViews[v].expect[i])
          fail_msg("layout %s into kind %d: element %lld is %g, expected %g", kViews[v].layout, (int)kinds[k],
                   (long long)i, (double)got[i], 1000.0 + (double)kViews[v].expect[i]);
      }
      assert_true(sw_async_disposed(src));
      sw_tensor_release(r);
      sw_carrier_release(dst);
      sw_tensor_release(t);
      sw_carrier_release(src);
    }
  }
}

static void empty_tensor_moves(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t extents[2] = {3, 0};
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_zeros(rt, SW_DTYPE_F32, extents, 2, &t));
  sw_carrier_t* src = sw_async_carrier_of(t);
  sw_carrier_t* dst = empty_carrier(rt, SW_CARRIER_HOST, SW_DTYPE_F32);
  sw_tensor_t* r = move_and_wait(t, dst);
  expect_dense_at_zero(r, dst, extents, 2);
  assert_int_equal(sw_async_size(dst), 0);
  assert_int_equal(sw_async_version(dst), 1);
  assert_true(sw_async_disposed(src));
  sw_tensor_release(r);
  sw_carrier_release(dst);
  sw_carrier_release(src);
  sw_tensor_release(t);
}

/* ---- validation before submission --------------------------------------------- */

typedef struct snapshot_t {
  uint64_t version;
  size_t size;
  bool owned, disposed;
} snapshot_t;

static snapshot_t snapshot(const sw_carrier_t* c) {
  snapshot_t s = {sw_async_version(c), sw_async_size(c), sw_async_owned(c), sw_async_disposed(c)};
  return s;
}

static void expect_snapshot(const sw_carrier_t* c, snapshot_t s) {
  snapshot_t now = snapshot(c);
  assert_int_equal(now.version, s.version);
  assert_int_equal(now.size, s.size);
  assert_int_equal(now.owned, s.owned);
  assert_int_equal(now.disposed, s.disposed);
}

/* The move is refused with `code` and neither carrier nor *out changes. */
static void expect_refused(sw_tensor_t* t, sw_carrier_t* dst, sw_error_code_t code, const char* needle) {
  sw_carrier_t* src = sw_async_carrier_of(t);
  const snapshot_t s = snapshot(src), d = snapshot(dst);
  sw_await_t* a = (sw_await_t*)(uintptr_t)0x1;
  SW_FAILS(sw_move_async(t, dst, &a), code, needle);
  assert_ptr_equal(a, (sw_await_t*)(uintptr_t)0x1);
  expect_snapshot(src, s);
  expect_snapshot(dst, d);
  sw_carrier_release(src);
}

static void refused_moves_change_nothing(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_tensor_t* t = sw_async_source(rt, 4, 201);
  sw_carrier_t* src = sw_async_carrier_of(t);

  sw_carrier_t *f64_empty = NULL, *f64_full = NULL, *small = NULL, *big = NULL, *gone = NULL, *gone_empty = NULL;
  SW_OK_(sw_carrier_create_host(rt, SW_DTYPE_F64, 0, &f64_empty));
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F64, 4, &f64_full));
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 3, &small));
  SW_OK_(sw_carrier_create_host(rt, SW_DTYPE_F32, 4, &big));
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 4, &gone));
  SW_OK_(sw_carrier_create_host(rt, SW_DTYPE_F32, 0, &gone_empty));
  SW_OK_(sw_carrier_dispose(gone));
  SW_OK_(sw_carrier_dispose(gone_empty));

  expect_refused(t, f64_empty, SW_ERROR_TYPE, "dtype");
  expect_refused(t, f64_full, SW_ERROR_TYPE, "dtype");
  expect_refused(t, small, SW_ERROR_VALUE, NULL);
  expect_refused(t, src, SW_ERROR_VALUE, NULL); /* the tensor's own carrier */
  expect_refused(t, gone, SW_ERROR_STATE, NULL);
  expect_refused(t, gone_empty, SW_ERROR_STATE, NULL);

  /* Owned carriers, either side. */
  SW_OK_(sw_testing_claim(big));
  expect_refused(t, big, SW_ERROR_STATE, "owned");
  SW_OK_(sw_testing_unclaim(big));
  SW_OK_(sw_testing_claim(src));
  expect_refused(t, big, SW_ERROR_STATE, "owned");
  SW_OK_(sw_testing_unclaim(src));

  /* A destination of another runtime. */
  sw_runtime_t* other = sw_async_runtime();
  sw_carrier_t* foreign = NULL;
  SW_OK_(sw_carrier_create_host(other, SW_DTYPE_F32, 0, &foreign));
  expect_refused(t, foreign, SW_ERROR_VALUE, "runtime");
  sw_carrier_release(foreign);
  sw_runtime_release(other);

  /* Bad handles. */
  sw_await_t* a = (sw_await_t*)(uintptr_t)0x1;
  SW_FAILS(sw_move_async(NULL, big, &a), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_move_async(t, NULL, &a), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_move_async(t, (sw_carrier_t*)(void*)t, &a), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_move_async((sw_tensor_t*)(void*)big, big, &a), SW_ERROR_TYPE, NULL);
  assert_ptr_equal(a, (sw_await_t*)(uintptr_t)0x1);
  const snapshot_t s = snapshot(src), d = snapshot(big);
  SW_FAILS(sw_move_async(t, big, NULL), SW_ERROR_VALUE, NULL);
  expect_snapshot(src, s);
  expect_snapshot(big, d);

  /* After all that, the move goes through. */
  sw_tensor_t* r = move_and_wait(t, big);
  assert_true(sw_async_carrier_holds(big, 4, 201));
  assert_int_equal(sw_async_version(big), 1);
  sw_tensor_release(r);

  /* A disposed source is refused too. */
  sw_tensor_t* t2 = sw_async_source(rt, 4, 202);
  sw_carrier_t* src2 = sw_async_carrier_of(t2);
  SW_OK_(sw_carrier_dispose(src2));
  sw_carrier_t* fresh = empty_carrier(rt, SW_CARRIER_HOST, SW_DTYPE_F32);
  expect_refused(t2, fresh, SW_ERROR_STATE, NULL);
  /* The source of a finished move is disposed: moving it again is refused. */
  expect_refused(t, fresh, SW_ERROR_STATE, NULL);

  sw_carrier_release(fresh);
  sw_carrier_release(src2);
  sw_tensor_release(t2);
  sw_carrier_release(gone_empty);
  sw_carrier_release(gone);
  sw_carrier_release(big);
  sw_carrier_release(small);
  sw_carrier_release(f64_full);
  sw_carrier_release(f64_empty);
  sw_carrier_release(src);
  sw_tensor_release(t);
}

/* ---- claims while pending ---------------------------------------------------- */

static sw_error_code_t code_of(sw_error_t* e) {
  const sw_error_code_t c = sw_error_code(e);
  sw_error_free(e);
  return c;
}

static void pending_move_claims_both_carriers(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  /* A testing hold keeps the move's write into the destination in flight, so
   * every observation below is made while it is pending. */
  const size_t n = (size_t)1 << 20;
  const uint32_t seed = 301;
  sw_tensor_t* t = sw_async_source(rt, n, seed);
  sw_carrier_t* src = sw_async_carrier_of(t);
  sw_carrier_t* dst = empty_carrier(rt, SW_CARRIER_HOST, SW_DTYPE_F32);
  sw_carrier_t* other = empty_carrier(rt, SW_CARRIER_HOST, SW_DTYPE_F32);
  SW_OK_(sw_testing_hold(rt, SW_FAULT_WRITE, 1));
  sw_await_t* a = NULL;
  SW_OK_(sw_move_async(t, dst, &a));
  SW_OK_(sw_testing_wait_held(rt, (int64_t)60 * 1000000000));
  assert_int_equal(sw_async_status(a), SW_AWAIT_PENDING);
  bool src_owned = false, dst_owned = false, src_mutable = true, dst_mutable = true;
  SW_OK_(sw_carrier_is_owned(src, &src_owned));
  SW_OK_(sw_carrier_is_owned(dst, &dst_owned));
  SW_OK_(sw_carrier_is_mutable(src, &src_mutable));
  SW_OK_(sw_carrier_is_mutable(dst, &dst_mutable));
  assert_true(src_owned);
  assert_true(dst_owned);
  assert_false(src_mutable);
  assert_false(dst_mutable);
  const float one = 1.0f;
  const int64_t at[1] = {0};
  assert_int_equal(code_of(sw_carrier_write(src, 0, 1, &one)), SW_ERROR_STATE);
  assert_int_equal(code_of(sw_tensor_set(t, at, 1, 5.0)), SW_ERROR_STATE);
  assert_int_equal(code_of(sw_carrier_dispose(src)), SW_ERROR_STATE);
  assert_int_equal(code_of(sw_testing_claim(src)), SW_ERROR_STATE);
  assert_int_equal(code_of(sw_carrier_write(dst, 0, 0, &one)), SW_ERROR_STATE);
  assert_int_equal(code_of(sw_carrier_dispose(dst)), SW_ERROR_STATE);
  sw_await_t* again = NULL;
  assert_int_equal(code_of(sw_move_async(t, other, &again)), SW_ERROR_STATE);
  assert_null(again);
  assert_int_equal(sw_async_size(other), 0);
  assert_int_equal(sw_async_status(a), SW_AWAIT_PENDING);
  SW_OK_(sw_testing_release_hold(rt));
  SW_OK_(sw_await_wait(a, -1));
  /* Refused writes left nothing behind: the pattern arrived intact. */
  assert_true(sw_async_carrier_holds(dst, n, seed));
  assert_int_equal(sw_async_version(dst), 1);
  assert_true(sw_async_disposed(src));
  assert_false(sw_async_owned(src));
  assert_false(sw_async_owned(dst));
  sw_await_release(a);
  sw_carrier_release(other);
  sw_carrier_release(dst);
  sw_carrier_release(src);
  sw_tensor_release(t);
}

typedef struct reader_t {
  sw_carrier_t* carrier;
  size_t n;
  uint32_t seed;
  int stop; /* atomic */
  int reads, refused, wrong;
  sw_error_code_t other;
} reader_t;

static void* read_until_disposed(void* arg) {
  reader_t* r = (reader_t*)arg;
  float* buf = (float*)malloc(sizeof(float) * r->n);
  while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
    sw_error_t* e = sw_carrier_read(r->carrier, 0, r->n, buf);
    if (e) {
      if (sw_error_code(e) == SW_ERROR_STATE)
        ++r->refused;
      else
        r->other = sw_error_code(e);
      sw_error_free(e);
      break;
    }
    ++r->reads;
    for (size_t i = 0; i < r->n; ++i)
      if (buf[i] != sw_async_pattern(r->seed, i)) {
        ++r->wrong;
        break;
      }
  }
  free(buf);
  return NULL;
}

static void source_reads_race_the_disposal_at_commit(void** state) {
  (void)state;
  /* Reads of a claimed carrier are allowed; the move's commit disposes the
   * source on the loop thread while this thread may be inside a read of it.
   * The read pins the storage: it completes on intact values or is refused. */
  sw_runtime_desc_t desc;
  sw_runtime_desc_init(&desc);
  desc.pool_limit_bytes = 0; /* freed storage goes straight back to the system */
  sw_runtime_t* rt = NULL;
  SW_OK_(sw_runtime_create(&desc, &rt));
  for (int attempt = 0; attempt < 4; ++attempt) {
    const size_t n = (size_t)16 << 20;
    reader_t r = {NULL, n, 501 + (uint32_t)attempt, 0, 0, 0, 0, SW_OK};
    sw_tensor_t* t = sw_async_source(rt, n, r.seed);
    r.carrier = sw_async_carrier_of(t);
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, read_until_disposed, &r), 0);
    sw_carrier_t* dst = empty_carrier(rt, SW_CARRIER_HOST, SW_DTYPE_F32);
    sw_tensor_t* moved = move_and_wait(t, dst);
    __atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
    pthread_join(thread, NULL);
    /* Every read either saw the whole pattern or was refused as disposed. */
    assert_int_equal(r.wrong, 0);
    assert_int_equal(r.other, SW_OK);
    assert_true(sw_async_carrier_holds(dst, n, r.seed));
    sw_tensor_release(moved);
    sw_carrier_release(dst);
    sw_carrier_release(r.carrier);
    sw_tensor_release(t);
  }
  sw_runtime_release(rt);
}

/* ---- injected failure ------------------------------------------------------- */

static void allocation_fault_fails_the_await_and_restores(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const sw_carrier_kind_t kinds[2] = {SW_CARRIER_HOST, SW_CARRIER_CPU};
  for (int k = 0; k < 2; ++k) {
    const size_t n = 1000;
    sw_tensor_t* t = sw_async_source(rt, n, 401 + (uint32_t)k);
    sw_carrier_t* src = sw_async_carrier_of(t);
    sw_carrier_t* dst = empty_carrier(rt, kinds[k], SW_DTYPE_F32);
    SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_ALLOCATION, 1));
    sw_await_t* a = NULL;
    SW_OK_(sw_move_async(t, dst, &a)); /* the allocation happens after submission */
    SW_FAILS(sw_await_wait(a, -1), SW_ERROR_OUT_OF_MEMORY, "injected");
    assert_int_equal(sw_async_status(a), SW_AWAIT_FAILED);
    sw_tensor_t* r = NULL;
    SW_FAILS(sw_await_result(a, &r), SW_ERROR_OUT_OF_MEMORY, NULL);
    assert_null(r);
    sw_await_release(a);
    /* Source intact and usable, destination still empty. */
    assert_false(sw_async_disposed(src));
    assert_false(sw_async_owned(src));
    assert_int_equal(sw_async_version(src), 0);
    assert_true(sw_async_tensor_holds(t, n, 401 + (uint32_t)k));
    assert_false(sw_async_disposed(dst));
    assert_false(sw_async_owned(dst));
    assert_int_equal(sw_async_size(dst), 0);
    assert_int_equal(sw_async_version(dst), 0);
    /* The fault was one-shot: a retry succeeds. */
    r = move_and_wait(t, dst);
    assert_true(sw_async_tensor_holds(r, n, 401 + (uint32_t)k));
    assert_int_equal(sw_async_size(dst), n);
    assert_true(sw_async_disposed(src));
    sw_tensor_release(r);
    sw_carrier_release(dst);
    sw_carrier_release(src);
    sw_tensor_release(t);
  }
}

/* ---- autograd ---------------------------------------------------------------- */

static bool is_leaf(const sw_tensor_t* t) {
  bool leaf = false;
  SW_OK_(sw_tensor_is_leaf(t, &leaf));
  return leaf;
}

static bool requires_grad(const sw_tensor_t* t) {
  bool r = false;
  SW_OK_(sw_tensor_requires_grad(t, &r));
  return r;
}

static void gradient_flows_back_through_moves(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  assert_true(sw_is_grad_enabled());
  const int64_t extents[2] = {2, 3};
  const double xv[6] = {1, 2, 3, 4, 5, 6}, wv[6] = {0.5, -1, 2, 3, -4, 8};
  sw_tensor_t* x = sw_test_tensor(rt, SW_DTYPE_F32, extents, 2, xv);
  sw_tensor_t* w = sw_test_tensor(rt, SW_DTYPE_F32, extents, 2, wv);
  SW_OK_(sw_tensor_set_requires_grad(x, true));
  /* x (CPU) -> host -> CPU, then loss = sum(moved * w): dloss/dx = w. */
  sw_carrier_t* host = empty_carrier(rt, SW_CARRIER_HOST, SW_DTYPE_F32);
  sw_tensor_t* on_host = move_and_wait(x, host);
  assert_false(is_leaf(on_host));
  assert_true(requires_grad(on_host));
  sw_carrier_t* cpu = empty_carrier(rt, SW_CARRIER_CPU, SW_DTYPE_F32);
  sw_tensor_t* back = move_and_wait(on_host, cpu);
  assert_false(is_leaf(back));
  sw_tensor_t *prod = NULL, *loss = NULL;
  SW_OK_(sw_mul(back, w, &prod));
  SW_OK_(sw_reduce_sum(prod, NULL, 0, false, &loss));
  double value = 0;
  SW_OK_(sw_tensor_get(loss, NULL, 0, &value));
  assert_true(value == 0.5 - 2 + 6 + 12 - 20 + 48);
  SW_OK_(sw_backward(loss, NULL, false));
  sw_tensor_t* g = NULL;
  SW_OK_(sw_tensor_grad(x, &g));
  assert_non_null(g);
  int64_t shape[2] = {0, 0};
  SW_OK_(sw_tensor_shape(g, shape, 2));
  assert_int_equal(shape[0], 2);
  assert_int_equal(shape[1], 3);
  int64_t n = 0;
  double* gv = sw_test_values(g, &n);
  assert_int_equal(n, 6);
  for (int i = 0; i < 6; ++i) assert_true(gv[i] == wv[i]);
  free(gv);
  /* Intermediate results get no gradient. */
  sw_tensor_t* none = (sw_tensor_t*)(uintptr_t)0x1;
  SW_OK_(sw_tensor_grad(back, &none));
  assert_null(none);
  sw_tensor_release(g);
  sw_tensor_release(loss);
  sw_tensor_release(prod);
  sw_tensor_release(back);
  sw_carrier_release(cpu);
  sw_tensor_release(on_host);
  sw_carrier_release(host);
  sw_tensor_release(w);
  sw_tensor_release(x);
}

static void no_node_without_grad(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const int64_t extent = 3;
  const double v[3] = {1, 2, 3};
  /* Grad mode off: no node even though the source requires grad. */
  sw_tensor_t* x = sw_test_tensor(rt, SW_DTYPE_F32, &extent, 1, v);
  SW_OK_(sw_tensor_set_requires_grad(x, true));
  const bool previous = sw_set_grad_enabled(false);
  sw_carrier_t* dst = empty_carrier(rt, SW_CARRIER_CPU, SW_DTYPE_F32);
  sw_tensor_t* r = move_and_wait(x, dst);
  sw_set_grad_enabled(previous);
  assert_true(is_leaf(r));
  assert_false(requires_grad(r));
  sw_tensor_t* sum = NULL;
  SW_OK_(sw_reduce_sum(r, NULL, 0, false, &sum));
  assert_true(is_leaf(sum));
  SW_FAILS(sw_backward(sum, NULL, false), SW_ERROR_STATE, NULL);
  sw_tensor_release(sum);
  sw_tensor_release(r);
  sw_carrier_release(dst);
  sw_tensor_release(x);

  /* Grad mode on, source not requiring grad: no node either. */
  sw_tensor_t* y = sw_test_tensor(rt, SW_DTYPE_F32, &extent, 1, v);
  sw_carrier_t* dst2 = empty_carrier(rt, SW_CARRIER_HOST, SW_DTYPE_F32);
  sw_tensor_t* r2 = move_and_wait(y, dst2);
  assert_true(is_leaf(r2));
  assert_false(requires_grad(r2));
  sw_tensor_release(r2);
  sw_carrier_release(dst2);
  sw_tensor_release(y);
}

/* ---- concurrency ---------------------------------------------------------- */

#define SUBMITTERS 4
#define MOVES_PER_SUBMITTER 16

/* Runs on submitter threads: no cmocka assertions, just the first failure. */
typedef struct submitter_t {
  sw_runtime_t* rt;
  uint32_t index;
  char failure[256];
} submitter_t;

#define TRY(expr)                                                                              \
  do {                                                                                         \
    sw_error_t* e_ = (expr);                                                                   \
    if (e_) {                                                                                  \
      if (!s->failure[0])                                                                      \
        snprintf(s->failure, sizeof s->failure, "%s: %s: %s", #expr,                           \
                 sw_error_code_name(sw_error_code(e_)), sw_error_message(e_));                 \
      sw_error_free(e_);                                                                       \
      goto out;                                                                                \
    }                                                                                          \
  } while (0)

typedef struct one_move_t {
  sw_tensor_t* source;
  sw_carrier_t* destination;
  sw_await_t* await;
  int64_t rows, cols; /* a (rows, cols) source, transposed when `strided` */
  bool strided;
  size_t extra; /* destination slots beyond the tensor, holding -1 */
  uint32_t seed;
} one_move_t;

static uint32_t next_random(uint32_t* x) {
  *x ^= *x << 13;
  *x ^= *x >> 17;
  *x ^= *x << 5;
  return *x;
}

/* Value of dense result ordinal k of move `m`. */
static float expected_value(const one_move_t* m, int64_t k) {
  if (!m->strided) return sw_async_pattern(m->seed, (size_t)k);
  /* The transposed view has shape (cols, rows); its element (i, j) is the
   * base element (j, i) at slot j + rows * i. */
  const int64_t i = k % m->cols, j = k / m->cols;
  return sw_async_pattern(m->seed, (size_t)(j + m->rows * i));
}

static void* submit_and_check(void* arg) {
  submitter_t* s = (submitter_t*)arg;
  one_move_t moves[MOVES_PER_SUBMITTER];
  memset(moves, 0, sizeof moves);
  uint32_t x = 0x9e3779b9u ^ (s->index * 7919u + 1);
  float* values = NULL;
  for (int i = 0; i < MOVES_PER_SUBMITTER; ++i) {
    one_move_t* m = &moves[i];
    m->seed = s->index * 1000 + (uint32_t)i;
    m->rows = 1 + (int64_t)(next_random(&x) % 600);
    m->cols = 1 + (int64_t)(next_random(&x) % 400);
    m->strided = next_random(&x) % 4 == 0;
    const uint32_t kind = next_random(&x) % 3;
    const size_t n = (size_t)(m->rows * m->cols);
    values = (float*)malloc(sizeof(float) * n);
    for (size_t k = 0; k < n; ++k) values[k] = sw_async_pattern(m->seed, k);
    sw_tensor_t* base = NULL;
    const int64_t extents[2] = {m->rows, m->cols};
    TRY(sw_tensor_from_data(s->rt, SW_DTYPE_F32, extents, 2, values, &base));
    free(values);
    values = NULL;
    if (m->strided) {
      sw_error_t* e = sw_tensor_transpose(base, 0, 1, &m->source);
      sw_tensor_release(base);
      TRY(e);
    } else {
      m->source = base;
    }
    if (kind == 0) {
      TRY(sw_carrier_create_host(s->rt, SW_DTYPE_F32, 0, &m->destination));
    } else if (kind == 1) {
      TRY(sw_carrier_create_cpu(s->rt, SW_DTYPE_F32, 0, &m->destination));
    } else {
      m->extra = 1 + next_random(&x) % 100;
      TRY(sw_carrier_create_cpu(s->rt, SW_DTYPE_F32, n + m->extra, &m->destination));
      float* minus = (float*)malloc(sizeof(float) * m->extra);
      for (size_t k = 0; k < m->extra; ++k) minus[k] = -1.0f;
      sw_error_t* e = sw_carrier_write(m->destination, n, m->extra, minus);
      free(minus);
      TRY(e);
    }
    TRY(sw_move_async(m->source, m->destination, &m->await));
  }
  for (int i = 0; i < MOVES_PER_SUBMITTER; ++i) {
    one_move_t* m = &moves[i];
    const size_t n = (size_t)(m->rows * m->cols);
    TRY(sw_await_wait(m->await, -1));
    values = (float*)malloc(sizeof(float) * (n + m->extra));
    TRY(sw_carrier_read(m->destination, 0, n + m->extra, values));
    for (size_t k = 0; k < n + m->extra; ++k) {
      const float want = k < n ? expected_value(m, (int64_t)k) : -1.0f;
      if (values[k] != want) {
        snprintf(s->failure, sizeof s->failure, "submitter %u move %d (%lldx%lld%s, +%zu): slot %zu is %g, expected %g",
                 s->index, i, (long long)m->rows, (long long)m->cols, m->strided ? " transposed" : "", m->extra, k,
                 (double)values[k], (double)want);
        goto out;
      }
    }
    free(values);
    values = NULL;
    uint64_t version = 0;
    TRY(sw_carrier_version(m->destination, &version));
    if (version != (m->extra ? 2u : 1u)) {
      snprintf(s->failure, sizeof s->failure, "submitter %u move %d: destination version %llu", s->index, i,
               (unsigned long long)version);
      goto out;
    }
  }
out:
  free(values);
  for (int i = 0; i < MOVES_PER_SUBMITTER; ++i) {
    if (moves[i].await) sw_error_free(sw_await_wait(moves[i].await, -1));
    sw_await_release(moves[i].await);
    sw_carrier_release(moves[i].destination);
    sw_tensor_release(moves[i].source);
  }
  return NULL;
}

static void many_concurrent_moves_from_four_threads(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  submitter_t s[SUBMITTERS];
  pthread_t threads[SUBMITTERS];
  for (uint32_t i = 0; i < SUBMITTERS; ++i) {
    s[i].rt = rt;
    s[i].index = i;
    s[i].failure[0] = '\0';
    assert_int_equal(pthread_create(&threads[i], NULL, submit_and_check, &s[i]), 0);
  }
  for (int i = 0; i < SUBMITTERS; ++i) pthread_join(threads[i], NULL);
  for (int i = 0; i < SUBMITTERS; ++i)
    if (s[i].failure[0]) fail_msg("%s", s[i].failure);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(move_cpu_to_host_every_width),
      cmocka_unit_test(move_cpu_to_empty_cpu_allocates_to_fit),
      cmocka_unit_test(move_into_bigger_destination_writes_slot_zero),
      cmocka_unit_test(move_host_to_cpu),
      cmocka_unit_test(strided_and_nested_sources_move_dense),
      cmocka_unit_test(empty_tensor_moves),
      cmocka_unit_test(refused_moves_change_nothing),
      cmocka_unit_test(pending_move_claims_both_carriers),
      cmocka_unit_test(source_reads_race_the_disposal_at_commit),
      cmocka_unit_test(allocation_fault_fails_the_await_and_restores),
      cmocka_unit_test(gradient_flows_back_through_moves),
      cmocka_unit_test(no_node_without_grad),
      cmocka_unit_test(many_concurrent_moves_from_four_threads),
  };
  return cmocka_run_group_tests(tests, sw_test_runtime_setup, sw_test_runtime_teardown);
}
