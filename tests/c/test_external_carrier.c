/* CPU carriers over caller-owned memory (sw_carrier_create_cpu_external):
 * no copy either way, release exactly once whatever drops the memory
 * (release, dispose, a move out, a TiledEvictable seed), every op, moves in
 * and out, read-only memory, and argument checks that change nothing. */
#include <pthread.h>

#include "sw_async_test.h"
#include "sw_test.h"

typedef struct release_log_t {
  int calls;
  void* last_user;
} release_log_t;

/* May run on the loop thread: last_user is written before the count that
 * the test thread waits for, so seeing the count orders it. */
static void count_release(void* user_data) {
  release_log_t* log = (release_log_t*)user_data;
  log->last_user = user_data;
  __atomic_add_fetch(&log->calls, 1, __ATOMIC_SEQ_CST);
}

static int released(release_log_t* log) { return __atomic_load_n(&log->calls, __ATOMIC_SEQ_CST); }

/* The release count once it settles: after a move, the loop thread may hold
 * the last reference for a moment after the await completed (up to 10 s). */
static int settled(release_log_t* log, int expect) {
  for (int i = 0; i < 10000 && released(log) != expect; ++i) sw_async_sleep_ms(1);
  return released(log);
}

static sw_carrier_t* external(sw_runtime_t* rt, sw_dtype_t dtype, void* data, size_t bytes, bool read_only,
                              release_log_t* log) {
  sw_external_memory_desc_t d;
  sw_external_memory_desc_init(&d);
  d.data = data;
  d.bytes = bytes;
  d.read_only = read_only;
  d.release = log ? count_release : NULL;
  d.user_data = log;
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_cpu_external(rt, dtype, &d, &c));
  return c;
}

static sw_tensor_t* dense(sw_carrier_t* c, const int64_t* extents, size_t rank) {
  sw_layout_t* l = NULL;
  SW_OK_(sw_layout_dense(extents, rank, &l));
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_create(c, 0, l, &t));
  sw_layout_release(l);
  return t;
}

static void read_f32(const sw_tensor_t* t, float* out, size_t n) { SW_OK_(sw_tensor_read(t, out, n * sizeof(float))); }

static bool flag(sw_error_t* (*get)(const sw_carrier_t*, bool*), const sw_carrier_t* c) {
  bool v = false;
  SW_OK_(get(c, &v));
  return v;
}

/* ---- values and sharing ------------------------------------------------- */

static void shares_memory_both_ways(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  float data[6] = {1, 2, 3, 4, 5, 6};
  release_log_t log = {0, NULL};
  sw_carrier_t* c = external(rt, SW_DTYPE_F32, data, sizeof data, false, &log);
  sw_carrier_kind_t kind = 0;
  SW_OK_(sw_carrier_kind(c, &kind));
  assert_int_equal(kind, SW_CARRIER_CPU);
  size_t size = 0;
  SW_OK_(sw_carrier_size(c, &size));
  assert_int_equal(size, 6);
  void* p = NULL;
  SW_OK_(sw_carrier_host_pointer(c, &p));
  assert_ptr_equal(p, data);
  assert_true(flag(sw_carrier_is_mutable, c));
  assert_false(flag(sw_carrier_is_read_only, c));

  float got[6];
  SW_OK_(sw_carrier_read(c, 0, 6, got));
  assert_memory_equal(got, data, sizeof data);
  data[2] = -7.5f; /* the caller's writes are what the carrier holds */
  SW_OK_(sw_carrier_read(c, 2, 1, got));
  assert_true(got[0] == -7.5f);
  const float w[2] = {40, 50};
  SW_OK_(sw_carrier_write(c, 3, 2, w)); /* and the library's land in the caller's memory */
  assert_true(data[3] == 40 && data[4] == 50);
  uint64_t version = 0;
  SW_OK_(sw_carrier_version(c, &version));
  assert_int_equal(version, 1);

  const int64_t ext[2] = {2, 3};
  sw_tensor_t* t = dense(c, ext, 2);
  const int64_t coord[2] = {1, 2};
  SW_OK_(sw_tensor_set(t, coord, 2, 9.0));
  assert_true(data[5] == 9.0f);
  sw_tensor_release(t);

  assert_int_equal(released(&log), 0);
  sw_carrier_release(c);
  assert_int_equal(released(&log), 1);
  assert_ptr_equal(log.last_user, &log);
}

/* Every dtype: bytes / dtype size slots, values read back exactly. */
static void every_dtype_reads_back(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const sw_dtype_t dtypes[8] = {SW_DTYPE_F32, SW_DTYPE_F64, SW_DTYPE_F16, SW_DTYPE_BF16,
                                SW_DTYPE_I32, SW_DTYPE_I64, SW_DTYPE_U8,  SW_DTYPE_BOOL};
  _Alignas(16) unsigned char raw[64];
  for (size_t i = 0; i < sizeof raw; ++i) raw[i] = (unsigned char)(i * 7 + 1);
  for (int k = 0; k < 8; ++k) {
    const size_t es = sw_dtype_size(dtypes[k]);
    if (dtypes[k] == SW_DTYPE_BOOL)
      for (size_t i = 0; i < sizeof raw; ++i) raw[i] = (unsigned char)(i % 3 == 0);
    release_log_t log = {0, NULL};
    sw_carrier_t* c = external(rt, dtypes[k], raw, sizeof raw, false, &log);
    size_t size = 0;
    SW_OK_(sw_carrier_size(c, &size));
    assert_int_equal(size, sizeof raw / es);
    unsigned char back[64];
    SW_OK_(sw_carrier_read(c, 0, size, back));
    assert_memory_equal(back, raw, sizeof raw);
    sw_carrier_release(c);
    assert_int_equal(released(&log), 1);
  }
}

/* ---- release exactly once ----------------------------------------------- */

static void dispose_releases_once(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  double data[4] = {1, 2, 3, 4};
  release_log_t log = {0, NULL};
  sw_carrier_t* c = external(rt, SW_DTYPE_F64, data, sizeof data, false, &log);
  const int64_t ext[1] = {4};
  sw_tensor_t* t = dense(c, ext, 1); /* a tensor keeps the carrier, not the memory, past dispose */
  SW_OK_(sw_carrier_dispose(c));
  assert_int_equal(released(&log), 1);
  SW_OK_(sw_carrier_dispose(c)); /* idempotent */
  assert_int_equal(released(&log), 1);
  assert_true(flag(sw_carrier_is_disposed, c));
  double v[4];
  SW_FAILS(sw_carrier_read(c, 0, 1, v), SW_ERROR_STATE, "released");
  SW_FAILS(sw_tensor_read(t, v, sizeof v), SW_ERROR_STATE, NULL);
  sw_tensor_t* r = NULL;
  SW_FAILS(sw_add(t, t, &r), SW_ERROR_STATE, NULL);
  size_t size = 0;
  SW_OK_(sw_carrier_size(c, &size)); /* still answers */
  assert_int_equal(size, 4);
  sw_tensor_release(t);
  sw_carrier_release(c);
  assert_int_equal(released(&log), 1);
}

/* An owned carrier refuses dispose (STATE) and keeps its memory. */
static void owned_carrier_keeps_its_memory(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  float data[2] = {1, 2};
  release_log_t log = {0, NULL};
  sw_carrier_t* c = external(rt, SW_DTYPE_F32, data, sizeof data, false, &log);
  SW_OK_(sw_testing_claim(c));
  SW_FAILS(sw_carrier_dispose(c), SW_ERROR_STATE, "owned");
  assert_int_equal(released(&log), 0);
  SW_OK_(sw_testing_unclaim(c));
  sw_carrier_release(c);
  assert_int_equal(released(&log), 1);
}

/* Release comes last: every tensor, op result's graph and handle that
 * retains the carrier keeps the memory. */
static void last_reference_releases(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  float data[3] = {1, -2, 3};
  release_log_t log = {0, NULL};
  sw_carrier_t* c = external(rt, SW_DTYPE_F32, data, sizeof data, false, &log);
  const int64_t ext[1] = {3};
  sw_tensor_t* t = dense(c, ext, 1);
  sw_carrier_release(c);
  assert_int_equal(released(&log), 0);
  sw_tensor_t* r = NULL;
  SW_OK_(sw_relu(t, &r));
  float got[3];
  read_f32(r, got, 3);
  assert_true(got[0] == 1 && got[1] == 0 && got[2] == 3);
  sw_tensor_release(t);
  assert_int_equal(released(&log), 1);
  read_f32(r, got, 3); /* results live on their own carriers */
  assert_true(got[2] == 3);
  sw_tensor_release(r);
}

/* NULL release is allowed; empty memory is an empty carrier. */
static void without_release_and_empty(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  int32_t data[2] = {5, 6};
  sw_carrier_t* c = external(rt, SW_DTYPE_I32, data, sizeof data, false, NULL);
  SW_OK_(sw_carrier_dispose(c));
  sw_carrier_release(c);
  release_log_t log = {0, NULL};
  sw_carrier_t* e = external(rt, SW_DTYPE_F32, NULL, 0, false, &log);
  size_t size = 7;
  SW_OK_(sw_carrier_size(e, &size));
  assert_int_equal(size, 0);
  sw_carrier_release(e);
  assert_int_equal(released(&log), 1);
}

/* ---- ops ------------------------------------------------------------------ */

static void every_op_takes_it(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  /* a (2, 3) first mode fastest, b (3, 2); a row-major view of `a` too. */
  float a_data[6] = {1, 2, 3, 4, 5, 6};
  float b_data[6] = {1, 0, -1, 2, 0.5f, -3};
  release_log_t la = {0, NULL}, lb = {0, NULL};
  sw_carrier_t* ca = external(rt, SW_DTYPE_F32, a_data, sizeof a_data, false, &la);
  sw_carrier_t* cb = external(rt, SW_DTYPE_F32, b_data, sizeof b_data, true, &lb);
  const int64_t ea[2] = {2, 3}, eb[2] = {3, 2};
  sw_tensor_t* a = dense(ca, ea, 2);
  sw_tensor_t* b = dense(cb, eb, 2);
  sw_tensor_t* r = NULL;
  float got[9];

  SW_OK_(sw_add(a, a, &r));
  read_f32(r, got, 6);
  for (int i = 0; i < 6; ++i) assert_true(got[i] == 2 * a_data[i]);
  sw_tensor_release(r);

  SW_OK_(sw_elementwise_mul(a, a, &r));
  read_f32(r, got, 6);
  for (int i = 0; i < 6; ++i) assert_true(got[i] == a_data[i] * a_data[i]);
  sw_tensor_release(r);

  SW_OK_(sw_mul_scalar(b, 2.0, &r));
  read_f32(r, got, 6);
  for (int i = 0; i < 6; ++i) assert_true(got[i] == 2 * b_data[i]);
  sw_tensor_release(r);

  SW_OK_(sw_relu(b, &r));
  read_f32(r, got, 6);
  for (int i = 0; i < 6; ++i) assert_true(got[i] == (b_data[i] > 0 ? b_data[i] : 0));
  sw_tensor_release(r);

  SW_OK_(sw_reduce_sum(a, NULL, 0, false, &r));
  read_f32(r, got, 1);
  assert_true(got[0] == 21);
  sw_tensor_release(r);

  /* (2, 3) @ (3, 2): element (i, j) = sum_k a[i + 2k] * b[k + 3j]. */
  SW_OK_(sw_matmul(a, b, &r));
  read_f32(r, got, 4);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      float want = 0;
      for (int k = 0; k < 3; ++k) want += a_data[i + 2 * k] * b_data[k + 3 * j];
      assert_true(got[i + 2 * j] == want);
    }
  sw_tensor_release(r);

  /* A strided view (the transpose) works like any other. */
  sw_tensor_t* at = NULL;
  SW_OK_(sw_tensor_transpose(a, 0, 1, &at));
  SW_OK_(sw_add(at, b, &r));
  read_f32(r, got, 6);
  for (int k = 0; k < 3; ++k)
    for (int j = 0; j < 2; ++j) assert_true(got[k + 3 * j] == a_data[j + 2 * k] + b_data[k + 3 * j]);
  sw_tensor_release(r);
  sw_tensor_release(at);

  /* The caller's later writes are what the next op reads. */
  a_data[0] = 100;
  SW_OK_(sw_add(a, a, &r));
  read_f32(r, got, 6);
  assert_true(got[0] == 200);
  sw_tensor_release(r);

  /* Autograd: a leaf on external memory gets its gradient on a CPU carrier. */
  SW_OK_(sw_tensor_set_requires_grad(a, true));
  sw_tensor_t* prod = NULL;
  SW_OK_(sw_elementwise_mul(a, a, &prod));
  SW_OK_(sw_reduce_sum(prod, NULL, 0, false, &r));
  SW_OK_(sw_backward(r, NULL, false));
  sw_tensor_t* g = NULL;
  SW_OK_(sw_tensor_grad(a, &g));
  read_f32(g, got, 6);
  for (int i = 0; i < 6; ++i) assert_true(got[i] == 2 * a_data[i]);
  sw_tensor_release(g);
  sw_tensor_release(r);
  sw_tensor_release(prod);

  sw_tensor_release(a);
  sw_tensor_release(b);
  sw_carrier_release(ca);
  sw_carrier_release(cb);
  assert_int_equal(released(&la), 1);
  assert_int_equal(released(&lb), 1);
}

/* ---- moves ---------------------------------------------------------------- */

static sw_tensor_t* move_and_wait(sw_tensor_t* t, sw_carrier_t* dst) {
  sw_await_t* a = NULL;
  SW_OK_(sw_move_async(t, dst, &a));
  SW_OK_(sw_await_wait(a, -1));
  sw_tensor_t* r = NULL;
  SW_OK_(sw_await_result(a, &r));
  sw_await_release(a);
  return r;
}

/* A move out reads the caller's memory, disposes the carrier (one release,
 * on the loop thread) and never hands that memory to the buffer pool: with
 * heap memory the caller then frees, ASan would see a double free or a use
 * after free otherwise. */
static void move_out_releases_once(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const sw_carrier_kind_t kinds[2] = {SW_CARRIER_HOST, SW_CARRIER_CPU};
  for (int k = 0; k < 2; ++k) {
    const size_t n = 3000;
    float* data = (float*)malloc(n * sizeof(float));
    for (size_t i = 0; i < n; ++i) data[i] = sw_async_pattern(91, i);
    release_log_t log = {0, NULL};
    sw_carrier_t* src = external(rt, SW_DTYPE_F32, data, n * sizeof(float), k == 1, &log);
    const int64_t ext[1] = {(int64_t)n};
    sw_tensor_t* t = dense(src, ext, 1);
    sw_carrier_t* dst = NULL;
    if (kinds[k] == SW_CARRIER_HOST)
      SW_OK_(sw_carrier_create_host(rt, SW_DTYPE_F32, 0, &dst));
    else
      SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 0, &dst));
    sw_tensor_t* r = move_and_wait(t, dst);
    assert_true(sw_async_tensor_holds(r, n, 91));
    assert_true(sw_async_disposed(src));
    assert_int_equal(released(&log), 1);
    free(data); /* the caller's again */
    sw_tensor_release(r);
    sw_tensor_release(t);
    sw_carrier_release(dst);
    sw_carrier_release(src);
    assert_int_equal(settled(&log, 1), 1);
  }
}

/* A strided view moves out too (gathered from the caller's memory). */
static void strided_move_out(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  float data[6] = {0, 1, 2, 3, 4, 5};
  release_log_t log = {0, NULL};
  sw_carrier_t* src = external(rt, SW_DTYPE_F32, data, sizeof data, false, &log);
  const int64_t ext[2] = {2, 3};
  sw_tensor_t* t = dense(src, ext, 2);
  sw_tensor_t* tt = NULL;
  SW_OK_(sw_tensor_transpose(t, 0, 1, &tt));
  sw_carrier_t* dst = NULL;
  SW_OK_(sw_carrier_create_host(rt, SW_DTYPE_F32, 0, &dst));
  sw_tensor_t* r = move_and_wait(tt, dst);
  float got[6];
  SW_OK_(sw_carrier_read(dst, 0, 6, got));
  const float want[6] = {0, 2, 4, 1, 3, 5};
  assert_memory_equal(got, want, sizeof want);
  assert_int_equal(released(&log), 1);
  sw_tensor_release(r);
  sw_tensor_release(tt);
  sw_tensor_release(t);
  sw_carrier_release(dst);
  sw_carrier_release(src);
  assert_int_equal(released(&log), 1);
}

/* A move into external memory writes the caller's memory in place; an empty
 * external carrier cannot be allocated to fit. */
static void move_into(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const size_t n = 500;
  sw_tensor_t* t = sw_async_source(rt, n, 17);
  sw_carrier_t* src = sw_async_carrier_of(t);
  float* data = (float*)calloc(n + 4, sizeof(float));
  release_log_t log = {0, NULL};
  sw_carrier_t* dst = external(rt, SW_DTYPE_F32, data, (n + 4) * sizeof(float), false, &log);
  sw_tensor_t* r = move_and_wait(t, dst);
  for (size_t i = 0; i < n; ++i) assert_true(data[i] == sw_async_pattern(17, i));
  assert_true(data[n] == 0);
  assert_int_equal(sw_async_version(dst), 1);
  assert_int_equal(released(&log), 0);
  sw_tensor_release(r);
  sw_tensor_release(t);
  sw_carrier_release(src);

  t = sw_async_source(rt, n, 18);
  src = sw_async_carrier_of(t);
  release_log_t elog = {0, NULL};
  sw_carrier_t* empty = external(rt, SW_DTYPE_F32, NULL, 0, false, &elog);
  sw_await_t* a = NULL;
  SW_FAILS(sw_move_async(t, empty, &a), SW_ERROR_VALUE, "cannot be allocated");
  assert_null(a);
  assert_false(sw_async_owned(src));
  assert_false(sw_async_owned(empty));
  sw_carrier_release(empty);
  assert_int_equal(released(&elog), 1);
  sw_tensor_release(t);
  sw_carrier_release(src);
  sw_carrier_release(dst);
  assert_int_equal(settled(&log, 1), 1);
  free(data);
}

/* A full external primary seeds a TiledEvictable: its values go into tile
 * buffers and the memory is released then, not at the end. */
static void seeds_a_tiled_primary(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  release_log_t log = {0, NULL};
  sw_carrier_t* primary = external(rt, SW_DTYPE_F32, data, sizeof data, false, &log);
  sw_carrier_t* secondary = NULL;
  SW_OK_(sw_carrier_create_host(rt, SW_DTYPE_F32, 0, &secondary));
  const int64_t grid[1] = {4}, tile[1] = {2};
  sw_carrier_t* te = NULL;
  SW_OK_(sw_tiled_create(primary, secondary, grid, tile, 1, NULL, &te));
  assert_int_equal(released(&log), 1);
  memset(data, 0, sizeof data);
  sw_tensor_t* full = NULL;
  SW_OK_(sw_tiled_full_tensor(te, &full));
  float got[8];
  read_f32(full, got, 8);
  for (int i = 0; i < 8; ++i) assert_true(got[i] == (float)(i + 1));
  sw_tensor_release(full);
  sw_carrier_release(te);
  sw_carrier_release(secondary);
  sw_carrier_release(primary);
  assert_int_equal(released(&log), 1);
}

/* ---- read-only ------------------------------------------------------------ */

static void read_only_refuses_writes(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  float data[4] = {1, 2, 3, 4};
  release_log_t log = {0, NULL};
  sw_carrier_t* c = external(rt, SW_DTYPE_F32, data, sizeof data, true, &log);
  assert_true(flag(sw_carrier_is_read_only, c));
  assert_false(flag(sw_carrier_is_mutable, c));
  const float w = 9;
  SW_FAILS(sw_carrier_write(c, 0, 1, &w), SW_ERROR_STATE, "read-only");
  const int64_t ext[1] = {4};
  sw_tensor_t* t = dense(c, ext, 1);
  const int64_t coord[1] = {0};
  SW_FAILS(sw_tensor_set(t, coord, 1, 9.0), SW_ERROR_STATE, "read-only");
  SW_FAILS(sw_tensor_write(t, data, sizeof data), SW_ERROR_STATE, "read-only");
  /* A move into it is refused before any work. */
  sw_tensor_t* s = sw_async_source(rt, 4, 5);
  sw_carrier_t* sc = sw_async_carrier_of(s);
  sw_await_t* a = NULL;
  SW_FAILS(sw_move_async(s, c, &a), SW_ERROR_STATE, "read-only");
  assert_false(sw_async_owned(sc));
  const float want[4] = {1, 2, 3, 4};
  assert_memory_equal(data, want, sizeof want);
  uint64_t version = 9;
  SW_OK_(sw_carrier_version(c, &version));
  assert_int_equal(version, 0);
  /* Reads and ops are fine. */
  sw_tensor_t* r = NULL;
  SW_OK_(sw_add(t, t, &r));
  float got[4];
  read_f32(r, got, 4);
  assert_true(got[3] == 8);
  sw_tensor_release(r);
  sw_tensor_release(s);
  sw_carrier_release(sc);
  sw_tensor_release(t);
  sw_carrier_release(c);
  assert_int_equal(released(&log), 1);
}

/* ---- bad arguments --------------------------------------------------------- */

static void bad_arguments_change_nothing(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  _Alignas(16) unsigned char raw[64] = {0};
  release_log_t log = {0, NULL};
  sw_external_memory_desc_t d;
  sw_external_memory_desc_init(&d);
  assert_int_equal(d.struct_size, sizeof d);
  assert_null(d.data);
  assert_int_equal(d.bytes, 0);
  assert_false(d.read_only);
  assert_null(d.release);
  d.release = count_release;
  d.user_data = &log;
  sw_carrier_t* sentinel = (sw_carrier_t*)(uintptr_t)0x1;
  sw_carrier_t* c = sentinel;

  d.data = NULL;
  d.bytes = 16;
  SW_FAILS(sw_carrier_create_cpu_external(rt, SW_DTYPE_F32, &d, &c), SW_ERROR_VALUE, "NULL");
  d.data = raw + 1;
  d.bytes = 16;
  SW_FAILS(sw_carrier_create_cpu_external(rt, SW_DTYPE_F32, &d, &c), SW_ERROR_VALUE, "aligned");
  d.data = raw + 2; /* 2-byte aligned: enough for f16, not for f64 */
  SW_FAILS(sw_carrier_create_cpu_external(rt, SW_DTYPE_F64, &d, &c), SW_ERROR_VALUE, "aligned");
  d.data = raw;
  d.bytes = 10;
  SW_FAILS(sw_carrier_create_cpu_external(rt, SW_DTYPE_F32, &d, &c), SW_ERROR_VALUE, "10 bytes");
  d.bytes = 16;
  SW_FAILS(sw_carrier_create_cpu_external(rt, SW_DTYPE_INVALID, &d, &c), SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_carrier_create_cpu_external(rt, (sw_dtype_t)99, &d, &c), SW_ERROR_TYPE, "99");
  SW_FAILS(sw_carrier_create_cpu_external(NULL, SW_DTYPE_F32, &d, &c), SW_ERROR_TYPE, "runtime");
  SW_FAILS(sw_carrier_create_cpu_external(rt, SW_DTYPE_F32, NULL, &c), SW_ERROR_VALUE, "desc");
  SW_FAILS(sw_carrier_create_cpu_external(rt, SW_DTYPE_F32, &d, NULL), SW_ERROR_VALUE, "out_carrier");
  d.struct_size = 8;
  SW_FAILS(sw_carrier_create_cpu_external(rt, SW_DTYPE_F32, &d, &c), SW_ERROR_VALUE, "struct_size");
  /* A layout handle is not a runtime. */
  sw_layout_t* l = NULL;
  SW_OK_(sw_layout_parse("4:1", &l));
  d.struct_size = sizeof d;
  SW_FAILS(sw_carrier_create_cpu_external((sw_runtime_t*)(void*)l, SW_DTYPE_F32, &d, &c), SW_ERROR_TYPE, "layout");
  sw_layout_release(l);
  /* Nothing written, nothing released: the memory stays the caller's. */
  assert_ptr_equal(c, sentinel);
  assert_int_equal(released(&log), 0);

  /* Odd sizes that are whole elements are fine: 2-byte aligned f16. */
  d.data = raw + 2;
  d.bytes = 6;
  c = NULL;
  SW_OK_(sw_carrier_create_cpu_external(rt, SW_DTYPE_F16, &d, &c));
  size_t size = 0;
  SW_OK_(sw_carrier_size(c, &size));
  assert_int_equal(size, 3);
  sw_carrier_release(c);
  assert_int_equal(released(&log), 1);
}

/* Release fires once even when the last reference goes on another thread. */
typedef struct drop_args_t {
  sw_carrier_t* carrier;
} drop_args_t;

static void* drop_on_thread(void* p) {
  sw_carrier_release(((drop_args_t*)p)->carrier);
  return NULL;
}

static void release_from_another_thread(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  float data[2] = {1, 2};
  release_log_t log = {0, NULL};
  sw_carrier_t* c = external(rt, SW_DTYPE_F32, data, sizeof data, false, &log);
  drop_args_t args = {c};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, drop_on_thread, &args), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(released(&log), 1);
}

/* An allocation fault does not touch external carriers: they allocate no
 * storage, so the armed fault waits for the next real allocation. */
static void not_counted_as_an_allocation(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  float data[2] = {1, 2};
  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_ALLOCATION, 1));
  release_log_t log = {0, NULL};
  sw_carrier_t* c = external(rt, SW_DTYPE_F32, data, sizeof data, false, &log);
  sw_carrier_t* cpu = NULL;
  SW_FAILS(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 2, &cpu), SW_ERROR_OUT_OF_MEMORY, "injected");
  assert_null(cpu);
  sw_carrier_release(c);
  assert_int_equal(released(&log), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(shares_memory_both_ways),
      cmocka_unit_test(every_dtype_reads_back),
      cmocka_unit_test(dispose_releases_once),
      cmocka_unit_test(owned_carrier_keeps_its_memory),
      cmocka_unit_test(last_reference_releases),
      cmocka_unit_test(without_release_and_empty),
      cmocka_unit_test(every_op_takes_it),
      cmocka_unit_test(move_out_releases_once),
      cmocka_unit_test(strided_move_out),
      cmocka_unit_test(move_into),
      cmocka_unit_test(seeds_a_tiled_primary),
      cmocka_unit_test(read_only_refuses_writes),
      cmocka_unit_test(bad_arguments_change_nothing),
      cmocka_unit_test(release_from_another_thread),
      cmocka_unit_test(not_counted_as_an_allocation),
  };
  return cmocka_run_group_tests(tests, sw_test_runtime_setup, sw_test_runtime_teardown);
}
