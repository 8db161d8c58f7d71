/* sw_tiled_expert_matmul through the C ABI: exact values of ungated, gated
 * and per-choice products against a reference computed here, with experts
 * resident, missing or mixed, under an LRU budget smaller than the experts a
 * call uses, the pending-request rules it shares with projection, and every
 * argument error with its code and no state changed. All values are small
 * integers and binary fractions, so f32 sums are exact. */
#include "sw_async_test.h"
#include "sw_tiled_test.h"

#define E 5
#define K 3
#define NO 4 /* N, the experts' output extent */
#define TOK 3
#define KK 2

static const int64_t kIds[TOK * KK] = {/* (T, k) first mode fastest: ids[t + T*j] */
                                       0, 3, 1, /* first choices of tokens 0, 1, 2 */
                                       3, 4, 1};
static const double kGates[TOK * KK] = {0.5, 0.25, 1.0, -0.5, 0.75, 2.0};

static void make_experts(tt_fix_t* f, sw_runtime_t* rt, sw_carrier_kind_t secondary, const sw_residency_policy_t* p) {
  const int64_t grid[3] = {1, 1, E}, tile[3] = {K, NO, 1};
  tt_make(f, rt, SW_DTYPE_F32, 3, grid, tile, false, secondary, true, p);
}

/* W_e[c, n] as seeded: tile e, within-tile index c + K*n. */
static double weight(int64_t e, int64_t c, int64_t n) { return tt_seed(e, c + K * n); }
static double input(int64_t t, int64_t j, int64_t c) { return (double)((t * 7 + j * 3 + c) % 5) - 2.0; }

static sw_tensor_t* x_tensor(sw_runtime_t* rt, bool per_choice) {
  double v[TOK * KK * K];
  if (per_choice) {
    for (int64_t c = 0; c < K; ++c)
      for (int64_t j = 0; j < KK; ++j)
        for (int64_t t = 0; t < TOK; ++t) v[t + TOK * (j + KK * c)] = input(t, j, c);
    const int64_t shape[3] = {TOK, KK, K};
    return sw_test_tensor(rt, SW_DTYPE_F32, shape, 3, v);
  }
  for (int64_t c = 0; c < K; ++c)
    for (int64_t t = 0; t < TOK; ++t) v[t + TOK * c] = input(t, 0, c);
  const int64_t shape[2] = {TOK, K};
  return sw_test_tensor(rt, SW_DTYPE_F32, shape, 2, v);
}

static sw_tensor_t* ids_tensor(sw_runtime_t* rt, const int64_t* ids, int64_t tokens) {
  const int64_t shape[2] = {tokens, KK};
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_I64, shape, 2, ids, &t));
  return t;
}

static sw_tensor_t* gates_tensor(sw_runtime_t* rt) {
  const int64_t shape[2] = {TOK, KK};
  return sw_test_tensor(rt, SW_DTYPE_F32, shape, 2, kGates);
}

/* The expected result: (T, k, N) ungated, (T, N) gated. */
static void expected(const int64_t* ids, int64_t tokens, bool per_choice, bool gated, double* out) {
  for (int64_t n = 0; n < NO; ++n)
    for (int64_t t = 0; t < tokens; ++t) {
      double sum = 0;
      for (int64_t j = 0; j < KK; ++j) {
        double y = 0;
        for (int64_t c = 0; c < K; ++c) y += input(t, per_choice ? j : 0, c) * weight(ids[t + tokens * j], c, n);
        if (gated)
          sum += kGates[t + tokens * j] * y;
        else
          out[t + tokens * (j + KK * n)] = y;
      }
      if (gated) out[t + tokens * n] = sum;
    }
}

static sw_tensor_t* run(const tt_fix_t* f, sw_tensor_t* x, sw_tensor_t* ids, sw_tensor_t* gates) {
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_expert_matmul(f->te, f->full, x, ids, gates, NULL, &a));
  sw_await_kind_t kind;
  SW_OK_(sw_await_kind(a, &kind));
  assert_int_equal(kind, SW_AWAIT_PROJECTION);
  sw_tensor_t* r = tt_wait_result(a);
  sw_await_release(a);
  return r;
}

static void check_products(const tt_fix_t* f, bool per_choice) {
  sw_tensor_t* x = x_tensor(f->rt, per_choice);
  sw_tensor_t* ids = ids_tensor(f->rt, kIds, TOK);
  sw_tensor_t* gates = gates_tensor(f->rt);
  double want[TOK * KK * NO];

  sw_tensor_t* y = run(f, x, ids, NULL);
  const int64_t yshape[3] = {TOK, KK, NO};
  tt_expect_shape(y, yshape, 3);
  expected(kIds, TOK, per_choice, false, want);
  tt_expect_values(y, want, TOK * KK * NO);
  sw_tensor_release(y);

  sw_tensor_t* o = run(f, x, ids, gates);
  const int64_t oshape[2] = {TOK, NO};
  tt_expect_shape(o, oshape, 2);
  expected(kIds, TOK, per_choice, true, want);
  tt_expect_values(o, want, TOK * NO);
  sw_tensor_release(o);
  sw_tensor_release(gates);
  sw_tensor_release(ids);
  sw_tensor_release(x);
}

static void products_from_every_tier(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const sw_carrier_kind_t tiers[3] = {SW_CARRIER_HOST, SW_CARRIER_FILE, SW_CARRIER_ZSTD};
  for (int i = 0; i < 3; ++i) {
    tt_fix_t f;
    make_experts(&f, rt, tiers[i], NULL);
    check_products(&f, false);  /* missing at first, resident after */
    check_products(&f, true);
    /* Without a policy the experts used stay primary, the others untouched. */
    const bool used[E] = {true, true, false, true, true};
    for (int64_t e = 0; e < E; ++e) tt_expect_tile(&f, e, used[e] ? SW_TILE_PRIMARY : SW_TILE_SECONDARY, false);
    tt_free(&f);
  }
}

static void resident_and_missing_experts_mix(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  tt_fix_t f;
  make_experts(&f, rt, SW_CARRIER_FILE, NULL);
  const int64_t resident[2] = {3, 1};
  sw_tile_set_t* set = tt_set_ordinals(&f, resident, 2);
  SW_OK_(sw_tiled_promote(f.te, set));
  sw_tile_set_release(set);
  check_products(&f, false);
  tt_free(&f);
}

/* Twenty calls of random routing under an LRU budget of two experts (each
 * call uses up to four): every result is exact and the budget holds. */
static void an_lru_budget_holds_across_calls(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_lru_policy_t* lru = NULL;
  SW_OK_(sw_lru_policy_create(2, &lru));
  sw_residency_policy_t vt;
  SW_OK_(sw_lru_policy_as_residency_policy(lru, &vt));
  tt_fix_t f;
  make_experts(&f, rt, SW_CARRIER_FILE, &vt);
  sw_tensor_t* x = x_tensor(rt, false);
  sw_tensor_t* gates = gates_tensor(rt);
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  for (int step = 0; step < 20; ++step) {
    int64_t ids[TOK * KK];
    for (int i = 0; i < TOK * KK; ++i) {
      seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
      ids[i] = (int64_t)(seed % E);
    }
    sw_tensor_t* idt = ids_tensor(rt, ids, TOK);
    sw_tensor_t* o = run(&f, x, idt, gates);
    double want[TOK * NO];
    expected(ids, TOK, false, true, want);
    tt_expect_values(o, want, TOK * NO);
    sw_tensor_release(o);
    sw_tensor_release(idt);
    sw_tile_set_t* prim = NULL;
    size_t count = 0;
    SW_OK_(sw_tiled_tiles(f.te, SW_TILES_PRIMARY, &prim));
    SW_OK_(sw_tile_set_count(prim, &count));
    sw_tile_set_release(prim);
    assert_true(count <= 2);
    tt_expect_tile_sets_consistent(&f);
  }
  sw_lru_stats_t st;
  sw_lru_stats_init(&st);
  SW_OK_(sw_lru_policy_stats(lru, &st));
  assert_int_equal(st.requests, 20);
  assert_true(st.transient > 0); /* calls of more than two experts read the rest for the call only */
  sw_tensor_release(gates);
  sw_tensor_release(x);
  tt_free(&f);
  sw_lru_policy_release(lru);
}

/* While a call waits for an expert's read, the carrier cannot be released
 * and an eviction waits for it; the result is exact. */
static void a_pending_call_pins_its_experts(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  tt_fix_t f;
  make_experts(&f, rt, SW_CARRIER_FILE, NULL);
  sw_tensor_t* x = x_tensor(rt, false);
  sw_tensor_t* ids = ids_tensor(rt, kIds, TOK);
  SW_OK_(sw_testing_hold(rt, SW_FAULT_READ, 1));
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_expert_matmul(f.te, f.full, x, ids, NULL, NULL, &a));
  SW_OK_(sw_testing_wait_held(rt, 10LL * 1000 * 1000 * 1000));
  sw_await_status_t status;
  SW_OK_(sw_await_query(a, &status));
  assert_int_equal(status, SW_AWAIT_PENDING);
  SW_FAILS(sw_carrier_dispose(f.te), SW_ERROR_STATE, "not terminal");
  const int64_t zero = 0;
  sw_tile_set_t* set = tt_set_ordinals(&f, &zero, 1);
  sw_await_t* ev = NULL;
  SW_OK_(sw_tiled_evict_async(f.te, set, &ev));
  SW_OK_(sw_testing_hold(rt, SW_FAULT_READ, 0));
  SW_OK_(sw_testing_release_hold(rt));
  sw_tensor_t* y = tt_wait_result(a);
  SW_OK_(sw_await_wait(ev, -1));
  double want[TOK * KK * NO];
  expected(kIds, TOK, false, false, want);
  tt_expect_values(y, want, TOK * KK * NO);
  tt_expect_tile(&f, 0, SW_TILE_SECONDARY, false);
  sw_tensor_release(y);
  sw_await_release(ev);
  sw_await_release(a);
  sw_tile_set_release(set);
  sw_tensor_release(ids);
  sw_tensor_release(x);
  tt_free(&f);
}

/* ---- the resident path: computed on the calling thread ------------------ */

static void evict_ordinals(const tt_fix_t* f, const int64_t* ks, size_t count) {
  sw_tile_set_t* set = tt_set_ordinals(f, ks, count);
  SW_OK_(sw_tiled_evict(f->te, set));
  sw_tile_set_release(set);
}

/* A call whose experts are all resident and whose plan moves nothing is
 * computed before it returns: its await is terminal at once. A call with a
 * missing expert still returns while the read is in flight. */
static void a_resident_call_is_terminal_on_return(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  tt_fix_t f;
  make_experts(&f, rt, SW_CARRIER_FILE, NULL);
  sw_tensor_t* x = x_tensor(rt, false);
  sw_tensor_t* ids = ids_tensor(rt, kIds, TOK);
  double want[TOK * KK * NO];
  expected(kIds, TOK, false, false, want);
  sw_tensor_release(run(&f, x, ids, NULL)); /* reads experts 0, 1, 3, 4: they stay primary */

  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_expert_matmul(f.te, f.full, x, ids, NULL, NULL, &a));
  assert_int_equal(sw_async_status(a), SW_AWAIT_SUCCEEDED);
  sw_tensor_t* y = tt_wait_result(a);
  tt_expect_values(y, want, TOK * KK * NO);
  sw_tensor_release(y);
  sw_await_release(a);

  const int64_t four = 4;
  evict_ordinals(&f, &four, 1);
  SW_OK_(sw_testing_hold(rt, SW_FAULT_READ, 1));
  SW_OK_(sw_tiled_expert_matmul(f.te, f.full, x, ids, NULL, NULL, &a));
  SW_OK_(sw_testing_wait_held(rt, 10LL * 1000 * 1000 * 1000));
  assert_int_equal(sw_async_status(a), SW_AWAIT_PENDING);
  SW_OK_(sw_testing_release_hold(rt));
  y = tt_wait_result(a);
  tt_expect_values(y, want, TOK * KK * NO);
  tt_expect_tile(&f, 4, SW_TILE_PRIMARY, false);
  sw_tensor_release(y);
  sw_await_release(a);
  sw_tensor_release(ids);
  sw_tensor_release(x);
  tt_free(&f);
}

typedef struct call_t {
  const tt_fix_t* f;
  sw_tensor_t *x, *ids;
  sw_error_t* error;
  sw_await_t* await;
  sw_await_status_t on_return;
} call_t;

static void* call_on_thread(void* p) {
  call_t* c = (call_t*)p;
  c->error = sw_tiled_expert_matmul(c->f->te, c->f->full, c->x, c->ids, NULL, NULL, &c->await);
  if (!c->error) c->on_return = sw_async_status(c->await);
  return NULL;
}

/* While a resident call computes on its thread (held there), its experts are
 * pinned as on the loop's path: the carrier cannot be released, an update of
 * an expert in use is refused, and an eviction waits for the call; the call
 * returns its result already terminal once the work goes on. */
static void a_call_computing_inline_pins_its_experts(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  tt_fix_t f;
  make_experts(&f, rt, SW_CARRIER_FILE, NULL);
  sw_tensor_t* x = x_tensor(rt, false);
  sw_tensor_t* ids = ids_tensor(rt, kIds, TOK);
  sw_tensor_release(run(&f, x, ids, NULL));
  const tt_snap_t before = tt_snapshot(&f);

  SW_OK_(sw_testing_hold(rt, SW_FAULT_TILE_WORK, 1));
  call_t c = {&f, x, ids, NULL, NULL, SW_AWAIT_PENDING};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, call_on_thread, &c), 0);
  SW_OK_(sw_testing_wait_held(rt, 10LL * 1000 * 1000 * 1000));

  SW_FAILS(sw_carrier_dispose(f.te), SW_ERROR_STATE, "not terminal");
  const int64_t zero = 0;
  const int64_t* axes[3] = {&zero, &zero, &zero};
  const size_t counts[3] = {1, 1, 1};
  sw_tile_selection_t* sel = tt_sel(3, axes, counts);
  const int64_t cshape[3] = {K, NO, 1};
  double vals[K * NO] = {0};
  sw_tensor_t* compact = sw_test_tensor(rt, SW_DTYPE_F32, cshape, 3, vals);
  sw_await_t* up = NULL;
  SW_FAILS(sw_tiled_update_async(f.te, f.full, compact, sel, SW_SCATTER_REPLACE, &up), SW_ERROR_STATE,
           "in use by pending tiled work");
  sw_tile_set_t* set = tt_set_ordinals(&f, &zero, 1);
  sw_await_t* ev = NULL;
  SW_OK_(sw_tiled_evict_async(f.te, set, &ev));
  /* The eviction cannot finish while the call holds the pin, however long it waits. */
  sw_async_sleep_ms(20);
  assert_int_equal(sw_async_status(ev), SW_AWAIT_PENDING);
  tt_expect_snapshot(&f, &before);
  /* An expert the call does not use is not held. */
  tt_expect_tile(&f, 2, SW_TILE_SECONDARY, false);

  SW_OK_(sw_testing_release_hold(rt));
  assert_int_equal(pthread_join(th, NULL), 0);
  if (c.error) fail_msg("the call failed: %s", sw_error_message(c.error));
  assert_int_equal(c.on_return, SW_AWAIT_SUCCEEDED);
  sw_tensor_t* y = tt_wait_result(c.await);
  double want[TOK * KK * NO];
  expected(kIds, TOK, false, false, want);
  tt_expect_values(y, want, TOK * KK * NO);
  SW_OK_(sw_await_wait(ev, -1));
  tt_expect_tile(&f, 0, SW_TILE_SECONDARY, false);
  sw_tensor_release(y);
  sw_await_release(c.await);
  sw_await_release(ev);
  sw_tile_set_release(set);
  sw_tensor_release(compact);
  sw_tile_selection_release(sel);
  sw_tensor_release(ids);
  sw_tensor_release(x);
  tt_free(&f);
}

/* The policy is consulted as before on the resident path: an LRU of room
 * for every expert counts the first call's misses and the second call's
 * hits, both committed, and evicts nothing. */
static void the_policy_sees_resident_calls_as_hits(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_lru_policy_t* lru = NULL;
  SW_OK_(sw_lru_policy_create(E, &lru));
  sw_residency_policy_t vt;
  SW_OK_(sw_lru_policy_as_residency_policy(lru, &vt));
  tt_fix_t f;
  make_experts(&f, rt, SW_CARRIER_FILE, &vt);
  sw_tensor_t* x = x_tensor(rt, false);
  sw_tensor_t* ids = ids_tensor(rt, kIds, TOK);
  double want[TOK * KK * NO];
  expected(kIds, TOK, false, false, want);
  for (int call = 0; call < 3; ++call) {
    sw_await_t* a = NULL;
    SW_OK_(sw_tiled_expert_matmul(f.te, f.full, x, ids, NULL, NULL, &a));
    if (call > 0) assert_int_equal(sw_async_status(a), SW_AWAIT_SUCCEEDED);
    sw_tensor_t* y = tt_wait_result(a);
    tt_expect_values(y, want, TOK * KK * NO);
    sw_tensor_release(y);
    sw_await_release(a);
  }
  sw_lru_stats_t st;
  sw_lru_stats_init(&st);
  SW_OK_(sw_lru_policy_stats(lru, &st));
  assert_int_equal(st.requests, 3);
  assert_int_equal(st.misses, 4);
  assert_int_equal(st.hits, 8);
  assert_int_equal(st.promoted, 4);
  assert_int_equal(st.evicted, 0);
  sw_tensor_release(ids);
  sw_tensor_release(x);
  tt_free(&f);
  sw_lru_policy_release(lru);
}

/* A failing computation is the await's failure on either path, with nothing
 * committed: the call itself succeeds. */
static void a_failure_reaches_the_await_on_either_path(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  tt_fix_t f;
  make_experts(&f, rt, SW_CARRIER_FILE, NULL);
  sw_tensor_t* x = x_tensor(rt, false);
  sw_tensor_t* ids = ids_tensor(rt, kIds, TOK);
  sw_tensor_release(run(&f, x, ids, NULL));
  const int64_t four = 4;
  for (int missing = 0; missing < 2; ++missing) {
    if (missing) evict_ordinals(&f, &four, 1);
    const tt_snap_t before = tt_snapshot(&f);
    SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_TILE_WORK, 1));
    sw_await_t* a = NULL;
    SW_OK_(sw_tiled_expert_matmul(f.te, f.full, x, ids, NULL, NULL, &a));
    if (!missing) assert_int_equal(sw_async_status(a), SW_AWAIT_FAILED);
    SW_FAILS(sw_await_wait(a, -1), SW_ERROR_OUT_OF_MEMORY, "injected tile work failure");
    sw_tensor_t* r = NULL;
    SW_FAILS(sw_await_result(a, &r), SW_ERROR_OUT_OF_MEMORY, "injected tile work failure");
    sw_await_release(a);
    tt_expect_snapshot(&f, &before);
    uint64_t injected = 0;
    SW_OK_(sw_testing_fault_counts(rt, SW_FAULT_TILE_WORK, NULL, &injected));
    assert_int_equal(injected, (uint64_t)missing + 1);
  }
  /* And the next call computes. */
  sw_tensor_t* y = run(&f, x, ids, NULL);
  double want[TOK * KK * NO];
  expected(kIds, TOK, false, false, want);
  tt_expect_values(y, want, TOK * KK * NO);
  sw_tensor_release(y);
  sw_tensor_release(ids);
  sw_tensor_release(x);
  tt_free(&f);
}

/* bf16 experts of irregular values: a call computed on the calling thread
 * (all resident), one with every expert read, and one with a miss give the
 * same bits, for one token (products written in place) and several (rows
 * gathered), gated or not. */
#define BE 4
#define BK 200
#define BN 72
static uint16_t bf16_of(float v) {
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  return (uint16_t)(u >> 16);
}
static float irregular(uint32_t i) { return (float)((i * 2654435761u) % 2001u) / 1000.0f - 1.0f; }

static void* read_all(const sw_tensor_t* t, size_t* bytes) {
  int64_t n = 0;
  SW_OK_(sw_tensor_numel(t, &n));
  *bytes = (size_t)n * 4;
  void* buf = malloc(*bytes);
  SW_OK_(sw_tensor_read(t, buf, *bytes));
  return buf;
}

static sw_tensor_t* call_f32(sw_carrier_t* te, sw_tensor_t* full, sw_tensor_t* x, sw_tensor_t* ids, sw_tensor_t* g) {
  sw_matmul_desc_t desc;
  sw_matmul_desc_init(&desc);
  desc.out_dtype = SW_DTYPE_F32;
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_expert_matmul(te, full, x, ids, g, &desc, &a));
  sw_tensor_t* r = tt_wait_result(a);
  sw_await_release(a);
  return r;
}

static void resident_and_missing_calls_agree_bit_for_bit(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const size_t n = (size_t)BE * BK * BN;
  uint16_t* w = (uint16_t*)malloc(n * sizeof *w);
  for (size_t i = 0; i < n; ++i) w[i] = bf16_of(irregular((uint32_t)i));
  sw_carrier_t* p = tt_carrier(rt, SW_CARRIER_CPU, SW_DTYPE_BF16, 0);
  sw_carrier_t* s = tt_carrier(rt, SW_CARRIER_HOST, SW_DTYPE_BF16, n);
  SW_OK_(sw_carrier_write(s, 0, n, w));
  free(w);
  const int64_t grid[3] = {1, 1, BE}, tile[3] = {BK, BN, 1};
  sw_carrier_t* te = NULL;
  SW_OK_(sw_tiled_create(p, s, grid, tile, 3, NULL, &te));
  sw_carrier_release(p);
  sw_carrier_release(s);
  sw_tensor_t* full = NULL;
  SW_OK_(sw_tiled_full_tensor(te, &full));
  for (int64_t tokens = 1; tokens <= 3; tokens += 2) {
    uint16_t xs[3 * BK];
    for (int64_t i = 0; i < tokens * BK; ++i) xs[i] = bf16_of(irregular((uint32_t)(7919 + i)));
    const int64_t xshape[2] = {tokens, BK};
    sw_tensor_t* x = NULL;
    SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_BF16, xshape, 2, xs, &x));
    const int64_t idv[6] = {1, 3, 0, 2, 1, 3}; /* (tokens, 2): first column, then second */
    int64_t ids_data[6];
    for (int64_t t = 0; t < tokens; ++t) {
      ids_data[t] = idv[t];
      ids_data[t + tokens] = idv[3 + t];
    }
    const int64_t ishape[2] = {tokens, 2};
    sw_tensor_t* ids = NULL;
    SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_I64, ishape, 2, ids_data, &ids));
    double gv[6];
    for (int i = 0; i < 6; ++i) gv[i] = 0.3 + 0.17 * i;
    sw_tensor_t* gates = sw_test_tensor(rt, SW_DTYPE_F32, ishape, 2, gv);
    for (int gated = 0; gated < 2; ++gated) {
      sw_tensor_t* g = gated ? gates : NULL;
      for (int64_t e = 0; e < BE; ++e) {
        sw_tile_set_t* set = NULL;
        const int64_t coord[3] = {0, 0, e};
        SW_OK_(sw_tile_set_create(coord, 1, 3, &set));
        SW_OK_(sw_tiled_evict(te, set));
        sw_tile_set_release(set);
      }
      size_t b_read, b_res, b_miss;
      sw_tensor_t* r = call_f32(te, full, x, ids, g); /* every expert read */
      void* read = read_all(r, &b_read);
      sw_tensor_release(r);
      r = call_f32(te, full, x, ids, g); /* every expert resident: on this thread */
      void* resident = read_all(r, &b_res);
      sw_tensor_release(r);
      sw_tile_set_t* set = NULL;
      const int64_t three[3] = {0, 0, 3};
      SW_OK_(sw_tile_set_create(three, 1, 3, &set));
      SW_OK_(sw_tiled_evict(te, set));
      sw_tile_set_release(set);
      r = call_f32(te, full, x, ids, g); /* expert 3 missing */
      void* miss = read_all(r, &b_miss);
      sw_tensor_release(r);
      assert_int_equal(b_read, b_res);
      assert_int_equal(b_read, b_miss);
      assert_memory_equal(read, resident, b_read);
      assert_memory_equal(read, miss, b_read);
      free(read);
      free(resident);
      free(miss);
    }
    sw_tensor_release(gates);
    sw_tensor_release(ids);
    sw_tensor_release(x);
  }
  sw_tensor_release(full);
  sw_carrier_release(te);
}

static void bad_arguments_change_nothing(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  tt_fix_t f;
  make_experts(&f, rt, SW_CARRIER_HOST, NULL);
  const tt_snap_t before = tt_snapshot(&f);
  sw_tensor_t* x = x_tensor(rt, false);
  sw_tensor_t* ids = ids_tensor(rt, kIds, TOK);
  sw_tensor_t* gates = gates_tensor(rt);
  sw_await_t* a = NULL;

  const int64_t bad_ids[TOK * KK] = {0, 3, 1, 3, 5, 1};
  sw_tensor_t* out_of_range = ids_tensor(rt, bad_ids, TOK);
  SW_FAILS(sw_tiled_expert_matmul(f.te, f.full, x, out_of_range, NULL, NULL, &a), SW_ERROR_INDEX,
           "expert id 5 at (token 1, slot 1) is outside [0, 5)");
  sw_tensor_release(out_of_range);

  const int64_t x64_shape[2] = {TOK, K};
  double zeros[TOK * K] = {0};
  sw_tensor_t* x64 = sw_test_tensor(rt, SW_DTYPE_F64, x64_shape, 2, zeros);
  SW_FAILS(sw_tiled_expert_matmul(f.te, f.full, x64, ids, NULL, NULL, &a), SW_ERROR_TYPE, "x is f64, the experts f32");
  sw_tensor_release(x64);
  SW_FAILS(sw_tiled_expert_matmul(f.te, f.full, x, gates, NULL, NULL, &a), SW_ERROR_TYPE, "ids must be i32 or i64");
  SW_FAILS(sw_tiled_expert_matmul(f.te, f.full, x, ids, ids, NULL, &a), SW_ERROR_TYPE, "gates must be a float tensor");
  sw_matmul_desc_t desc;
  sw_matmul_desc_init(&desc);
  desc.out_dtype = SW_DTYPE_F16;
  SW_FAILS(sw_tiled_expert_matmul(f.te, f.full, x, ids, NULL, &desc, &a), SW_ERROR_TYPE, "not f16");
  desc.out_dtype = SW_DTYPE_INVALID;
  desc.struct_size = 3;
  SW_FAILS(sw_tiled_expert_matmul(f.te, f.full, x, ids, NULL, &desc, &a), SW_ERROR_VALUE, "struct_size 3");

  const int64_t short_shape[2] = {TOK, K - 1};
  sw_tensor_t* short_x = sw_test_tensor(rt, SW_DTYPE_F32, short_shape, 2, zeros);
  SW_FAILS(sw_tiled_expert_matmul(f.te, f.full, short_x, ids, NULL, NULL, &a), SW_ERROR_VALUE,
           "x must be (tokens, K) = (3, 3) or (tokens, k, K) = (3, 2, 3), not (3, 2)");
  sw_tensor_release(short_x);
  SW_FAILS(sw_tiled_expert_matmul(f.te, f.full, x, ids, x, NULL, &a), SW_ERROR_VALUE,
           "gates must be (tokens, k) = (3, 2), not (3, 3)");
  /* A view of the experts that is not the full tensor itself. */
  sw_tensor_t* view = tt_tensor_over(f.te, 0, "(3,4,5):(4,1,12)");
  SW_FAILS(sw_tiled_expert_matmul(f.te, view, x, ids, NULL, NULL, &a), SW_ERROR_VALUE, "not a view of it");
  sw_tensor_release(view);
  SW_FAILS(sw_tiled_expert_matmul(f.te, x, x, ids, NULL, NULL, &a), SW_ERROR_TYPE, "not by this TiledEvictable");
  SW_FAILS(sw_tiled_expert_matmul(f.te, f.full, x, ids, NULL, NULL, NULL), SW_ERROR_VALUE, "out_await");
  tt_expect_snapshot(&f, &before);

  /* Another geometry: experts interleaved, tile (1, K, N). */
  tt_fix_t g;
  const int64_t grid[3] = {E, 1, 1}, tile[3] = {1, K, NO};
  tt_make(&g, rt, SW_DTYPE_F32, 3, grid, tile, false, SW_CARRIER_HOST, true, NULL);
  SW_FAILS(sw_tiled_expert_matmul(g.te, g.full, x, ids, NULL, NULL, &a), SW_ERROR_VALUE,
           "grid (1, 1, E) and tile (K, N, 1); this TiledEvictable has grid (5, 1, 1) and tile (1, 3, 4)");
  tt_free(&g);

  SW_OK_(sw_carrier_dispose(f.te));
  SW_FAILS(sw_tiled_expert_matmul(f.te, f.full, x, ids, NULL, NULL, &a), SW_ERROR_STATE, NULL);
  sw_tensor_release(gates);
  sw_tensor_release(ids);
  sw_tensor_release(x);
  tt_free(&f);
}

/* ---- atomicity: every fault point, nothing changed once the await (or the
 * backward pass) is terminal ---------------------------------------------- */

typedef enum { FORWARD, RECORDED, BACKWARD } sweep_step_t;

/* One run of `step` with fault `kind` armed at its n-th point (0: none) on a
 * fresh file tier under an LRU budget of 3 of the 5 experts, expert 2
 * primary at the start. Returns whether a fault was injected; when one was,
 * the step failed with `code`, changed nothing (tile states, version, the
 * policy's statistics) and the experts can be disposed at once; when none
 * was, `clean` receives the statistics the step left. */
static bool sweep_point(sw_runtime_t* rt, sweep_step_t step, sw_fault_kind_t kind, uint64_t n, sw_error_code_t code,
                        sw_lru_stats_t* clean) {
  sw_lru_policy_t* lru = NULL;
  SW_OK_(sw_lru_policy_create(3, &lru));
  sw_residency_policy_t vt;
  SW_OK_(sw_lru_policy_as_residency_policy(lru, &vt));
  tt_fix_t f;
  make_experts(&f, rt, SW_CARRIER_FILE, &vt);
  const int64_t two = 2;
  sw_tile_set_t* set = tt_set_ordinals(&f, &two, 1);
  SW_OK_(sw_tiled_promote(f.te, set));
  sw_tile_set_release(set);
  sw_tensor_t* x = x_tensor(rt, false);
  if (step != FORWARD) SW_OK_(sw_tensor_set_requires_grad(x, true));
  sw_tensor_t* ids = ids_tensor(rt, kIds, TOK);
  sw_tensor_t* gates = gates_tensor(rt);
  sw_tensor_t* loss = NULL;
  if (step == BACKWARD) {
    /* Two recorded calls: the pass re-reads the experts twice, so a
     * failure can come after one of its reads committed. */
    sw_tensor_t* y1 = run(&f, x, ids, gates);
    sw_tensor_t* y2 = run(&f, x, ids, NULL);
    sw_tensor_t *s1 = NULL, *s2 = NULL;
    SW_OK_(sw_reduce_sum(y1, NULL, 0, false, &s1));
    SW_OK_(sw_reduce_sum(y2, NULL, 0, false, &s2));
    SW_OK_(sw_add(s1, s2, &loss));
    sw_tensor_release(s2);
    sw_tensor_release(s1);
    sw_tensor_release(y2);
    sw_tensor_release(y1);
  }
  sw_lru_stats_t before;
  sw_lru_stats_init(&before);
  SW_OK_(sw_lru_policy_stats(lru, &before));
  const tt_snap_t snap = tt_snapshot(&f);
  uint64_t injected_before = 0, injected_after = 0;
  SW_OK_(sw_testing_fault_counts(rt, kind, NULL, &injected_before));
  if (n) SW_OK_(sw_testing_inject_fault(rt, kind, n));
  sw_error_t* e = NULL;
  sw_await_t* a = NULL;
  if (step == BACKWARD) {
    e = sw_backward(loss, NULL, false);
  } else {
    e = sw_tiled_expert_matmul(f.te, f.full, x, ids, gates, NULL, &a);
    if (!e) e = sw_await_wait(a, -1);
  }
  SW_OK_(sw_testing_inject_fault(rt, kind, 0));
  SW_OK_(sw_testing_fault_counts(rt, kind, NULL, &injected_after));
  const bool hit = injected_after != injected_before;
  if (hit) {
    if (!e) fail_msg("step %d: fault %d at point %llu injected, yet it succeeded", (int)step, (int)kind,
                     (unsigned long long)n);
    assert_int_equal(sw_error_code(e), code);
    sw_error_free(e);
    tt_expect_snapshot(&f, &snap);
    tt_expect_lru_stats(lru, &before);
    SW_OK_(sw_carrier_dispose(f.te));
  } else {
    SW_OK_(e);
    sw_lru_stats_init(clean);
    SW_OK_(sw_lru_policy_stats(lru, clean));
  }
  sw_await_release(a);
  sw_tensor_release(loss);
  sw_tensor_release(gates);
  sw_tensor_release(ids);
  sw_tensor_release(x);
  tt_free(&f);
  sw_lru_policy_release(lru);
  return hit;
}

/* Every allocation, storage read and tile work job of a call (plain, and
 * recorded for autograd) and of its backward pass, failed in turn: the
 * failed step reports the injected error and, once it returned or its
 * await is terminal, nothing of it is left (see sweep_point); past the last
 * point it succeeds. */
static void a_failed_step_changes_nothing(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const sw_fault_kind_t kinds[3] = {SW_FAULT_ALLOCATION, SW_FAULT_READ, SW_FAULT_TILE_WORK};
  const sw_error_code_t codes[3] = {SW_ERROR_OUT_OF_MEMORY, SW_ERROR_IO, SW_ERROR_OUT_OF_MEMORY};
  for (int step = FORWARD; step <= BACKWARD; ++step)
    for (int k = 0; k < 3; ++k) {
      sw_lru_stats_t clean;
      int points = 0;
      for (uint64_t n = 1; sweep_point(rt, (sweep_step_t)step, kinds[k], n, codes[k], &clean); ++n) ++points;
      /* The budget holds three of the call's four experts: each call reads
       * one, each backward pass two. */
      assert_true(points >= (step == BACKWARD && kinds[k] == SW_FAULT_READ ? 2 : 1));
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(products_from_every_tier, sw_test_runtime_setup, sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(resident_and_missing_experts_mix, sw_test_runtime_setup,
                                      sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(an_lru_budget_holds_across_calls, sw_test_runtime_setup,
                                      sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(a_pending_call_pins_its_experts, sw_test_runtime_setup,
                                      sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(a_resident_call_is_terminal_on_return, sw_test_runtime_setup,
                                      sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(a_call_computing_inline_pins_its_experts, sw_test_runtime_setup,
                                      sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(the_policy_sees_resident_calls_as_hits, sw_test_runtime_setup,
                                      sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(a_failure_reaches_the_await_on_either_path, sw_test_runtime_setup,
                                      sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(resident_and_missing_calls_agree_bit_for_bit, sw_test_runtime_setup,
                                      sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(bad_arguments_change_nothing, sw_test_runtime_setup, sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(a_failed_step_changes_nothing, sw_test_runtime_setup, sw_test_runtime_teardown),
  };
  return sw_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
