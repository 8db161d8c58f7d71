/* The first promise under a residency policy: a dirty value is never lost and
 * a failed request changes nothing, the policy's view included. Every test is
 * deterministic: a testing hold keeps a storage transfer in flight while the
 * test acts (sw_testing_hold), and injected faults fail a chosen transfer. */
#include "sw_tiled_test.h"

/* Tiles of this many f32 elements: small enough to be quick, large enough to
 * need several vector blocks in every kernel. */
#define T_ELEMS 4096

/* A one-mode TiledEvictable of `tiles` tiles: slot k * T + w is element w of
 * tile k, so the full tensor reads tile after tile. */
static void make_line(tt_fix_t* f, sw_runtime_t* rt, int64_t tiles, sw_carrier_kind_t secondary,
                      const sw_residency_policy_t* policy) {
  const int64_t grid[1] = {tiles}, tile[1] = {T_ELEMS};
  tt_make(f, rt, SW_DTYPE_F32, 1, grid, tile, false, secondary, true, policy);
}

/* An LRU policy of `budget` tiles as a vtable; the handle stays the caller's. */
static sw_lru_policy_t* lru_vtable(size_t budget, sw_residency_policy_t* out) {
  sw_lru_policy_t* lru = NULL;
  SW_OK_(sw_lru_policy_create(budget, &lru));
  SW_OK_(sw_lru_policy_as_residency_policy(lru, out));
  return lru;
}

static sw_lru_stats_t lru_stats(const sw_lru_policy_t* lru) {
  sw_lru_stats_t s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  SW_OK_(sw_lru_policy_stats(lru, &s));
  return s;
}

static void expect_stats(const sw_lru_policy_t* lru, uint64_t requests, uint64_t hits, uint64_t misses,
                         uint64_t promoted, uint64_t evicted) {
  const sw_lru_stats_t s = lru_stats(lru);
  if (s.requests != requests || s.hits != hits || s.misses != misses || s.promoted != promoted ||
      s.evicted != evicted)
    fail_msg("LRU stats requests=%llu hits=%llu misses=%llu promoted=%llu evicted=%llu; expected %llu %llu %llu %llu %llu",
             (unsigned long long)s.requests, (unsigned long long)s.hits, (unsigned long long)s.misses,
             (unsigned long long)s.promoted, (unsigned long long)s.evicted, (unsigned long long)requests,
             (unsigned long long)hits, (unsigned long long)misses, (unsigned long long)promoted,
             (unsigned long long)evicted);
}

static sw_tile_selection_t* one_tile(int64_t k) { return tt_sel1(&k, 1); }

/* A compact tensor of one tile, every element `value`. */
static sw_tensor_t* tile_of(sw_runtime_t* rt, double value) {
  double* v = (double*)malloc(sizeof(double) * T_ELEMS);
  for (int i = 0; i < T_ELEMS; ++i) v[i] = value;
  const int64_t extent = T_ELEMS;
  sw_tensor_t* t = tt_dense(rt, &extent, 1, v);
  free(v);
  return t;
}

/* Replaces tile k of f's full tensor by `value` everywhere, and waits. */
static void update_tile(tt_fix_t* f, int64_t k, double value) {
  sw_tile_selection_t* s = one_tile(k);
  sw_tensor_t* c = tile_of(f->rt, value);
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_update_async(f->te, f->full, c, s, SW_SCATTER_REPLACE, &a));
  SW_OK_(sw_await_wait(a, -1));
  sw_await_release(a);
  sw_tensor_release(c);
  sw_tile_selection_release(s);
}

/* Projects tile k and waits; fails the test unless it succeeds. */
static void project_tile(tt_fix_t* f, int64_t k) {
  sw_tile_selection_t* s = one_tile(k);
  sw_tensor_t* c = tt_project(f, f->full, s, NULL);
  sw_tensor_release(c);
  sw_tile_selection_release(s);
}

/* Asserts that every element of tile k reads `value` (through the full
 * tensor, which consults no policy and changes no residency). */
static void expect_tile_value(const tt_fix_t* f, int64_t k, double value) {
  int64_t n = 0;
  double* all = sw_test_values(f->full, &n);
  assert_int_equal(n, f->n);
  int64_t wrong = 0;
  for (int64_t w = 0; w < T_ELEMS; ++w) wrong += all[k * T_ELEMS + w] != value;
  if (wrong)
    fail_msg("tile %lld: %lld of %d elements differ from %g (element 0 is %g)", (long long)k, (long long)wrong,
             T_ELEMS, value, all[k * T_ELEMS]);
  free(all);
}

static int64_t primary_count(const tt_fix_t* f) {
  int64_t n = 0;
  for (int64_t k = 0; k < f->ntiles; ++k) n += tt_state(f, k).location == SW_TILE_PRIMARY;
  return n;
}

static void evict_all(tt_fix_t* f) {
  int64_t all[TT_MAXTILES];
  for (int64_t k = 0; k < f->ntiles; ++k) all[k] = k;
  sw_tile_set_t* s = tt_set_ordinals(f, all, (size_t)f->ntiles);
  SW_OK_(sw_tiled_evict(f->te, s));
  sw_tile_set_release(s);
}

#define SECOND ((int64_t)1000000000)

/* Two tiles under an LRU policy of one, tile 1 primary and dirty with the
 * value 7 everywhere: the next projection of tile 0 evicts it. */
typedef struct dirty_fix_t {
  sw_runtime_t* rt;
  sw_lru_policy_t* lru;
  tt_fix_t f;
} dirty_fix_t;

static void dirty_setup(dirty_fix_t* d, sw_carrier_kind_t secondary) {
  d->rt = sw_async_runtime();
  sw_residency_policy_t vt;
  d->lru = lru_vtable(1, &vt);
  make_line(&d->f, d->rt, 2, secondary, &vt);
  project_tile(&d->f, 1);
  update_tile(&d->f, 1, 7.0);
  tt_expect_tile(&d->f, 1, SW_TILE_PRIMARY, true);
}

static void dirty_teardown(dirty_fix_t* d) {
  tt_free(&d->f);
  sw_lru_policy_release(d->lru);
  sw_runtime_release(d->rt);
}

/* ---- 1. a dirty value is never lost ---------------------------------------- */

/* Tile 1 is dirty; a projection of tile 0 makes the LRU policy evict it,
 * and while that eviction's write is in flight an update replaces tile 1.
 * The update's value must survive: the eviction sees that the tile changed
 * under it and keeps it primary and dirty. */
static void update_during_policy_eviction_survives(sw_carrier_kind_t secondary) {
  dirty_fix_t d;
  dirty_setup(&d, secondary);
  sw_runtime_t* rt = d.rt;
  tt_fix_t f = d.f; /* the same handles: dirty_teardown releases them */

  SW_OK_(sw_testing_hold(rt, SW_FAULT_WRITE, 1));
  sw_tile_selection_t* s0 = one_tile(0);
  sw_await_t* p = NULL;
  SW_OK_(sw_tiled_project(f.te, f.full, s0, NULL, &p));
  /* The eviction of tile 1 is writing it: its completion is held. */
  SW_OK_(sw_testing_wait_held(rt, 60 * SECOND));
  assert_int_equal(sw_async_status(p), SW_AWAIT_PENDING);

  sw_tile_selection_t* s1 = one_tile(1);
  sw_tensor_t* c = tile_of(rt, 9.0);
  sw_await_t* u = NULL;
  sw_error_t* e = sw_tiled_update_async(f.te, f.full, c, s1, SW_SCATTER_REPLACE, &u);
  double expect = 7.0;
  if (e) {
    /* A refusal is allowed, but only as STATE and with nothing changed. */
    assert_int_equal(sw_error_code(e), SW_ERROR_STATE);
    sw_error_free(e);
  } else {
    SW_OK_(sw_await_wait(u, -1));
    sw_await_release(u);
    expect = 9.0;
  }
  SW_OK_(sw_testing_release_hold(rt));
  sw_tensor_t* r = tt_wait_result(p);
  sw_tensor_release(r);
  sw_await_release(p);

  /* The last committed value is what tile 1 holds, on primary or off it. */
  expect_tile_value(&f, 1, expect);
  if (expect == 9.0) tt_expect_tile(&f, 1, SW_TILE_PRIMARY, true);
  tt_expect_tile_sets_consistent(&f);
  /* And after everything went to the secondary tier and came back. */
  evict_all(&f);
  tt_expect_tile(&f, 1, SW_TILE_SECONDARY, false);
  expect_tile_value(&f, 1, expect);
  project_tile(&f, 1);
  expect_tile_value(&f, 1, expect);

  sw_tensor_release(c);
  sw_tile_selection_release(s0);
  sw_tile_selection_release(s1);
  dirty_teardown(&d);
}

static void update_during_policy_eviction_survives_file(void** state) {
  (void)state;
  update_during_policy_eviction_survives(SW_CARRIER_FILE);
}

static void update_during_policy_eviction_survives_zstd(void** state) {
  (void)state;
  update_during_policy_eviction_survives(SW_CARRIER_ZSTD);
}

static void update_during_policy_eviction_survives_host(void** state) {
  (void)state;
  update_during_policy_eviction_survives(SW_CARRIER_HOST);
}

/* The same with a public write (sw_tensor_write) of tile 1 in the window. */
static void tensor_write_during_policy_eviction_survives(void** state) {
  (void)state;
  dirty_fix_t d;
  dirty_setup(&d, SW_CARRIER_FILE);
  sw_runtime_t* rt = d.rt;
  tt_fix_t f = d.f; /* the same handles: dirty_teardown releases them */
  SW_OK_(sw_testing_hold(rt, SW_FAULT_WRITE, 1));
  sw_tile_selection_t* s0 = one_tile(0);
  sw_await_t* p = NULL;
  SW_OK_(sw_tiled_project(f.te, f.full, s0, NULL, &p));
  SW_OK_(sw_testing_wait_held(rt, 60 * SECOND));
  /* Write the whole tensor: tile 0 keeps its seed, tile 1 becomes 5. */
  float* all = (float*)malloc(sizeof(float) * (size_t)f.n);
  for (int64_t w = 0; w < T_ELEMS; ++w) {
    all[w] = (float)tt_seed(0, w);
    all[T_ELEMS + w] = 5.0f;
  }
  sw_error_t* e = sw_tensor_write(f.full, all, sizeof(float) * (size_t)f.n);
  double expect = 7.0;
  if (e) {
    assert_int_equal(sw_error_code(e), SW_ERROR_STATE);
    sw_error_free(e);
  } else {
    expect = 5.0;
  }
  SW_OK_(sw_testing_release_hold(rt));
  sw_tensor_t* r = tt_wait_result(p);
  sw_tensor_release(r);
  sw_await_release(p);
  expect_tile_value(&f, 1, expect);
  evict_all(&f);
  expect_tile_value(&f, 1, expect);
  free(all);
  sw_tile_selection_release(s0);
  dirty_teardown(&d);
}

/* Two evictions of the same dirty tile at once: whichever writes last, the
 * secondary tier ends with the tile's last value. An explicit evict waits for
 * the policy eviction that is still writing the tile. */
static void explicit_evict_during_policy_eviction(void** state) {
  (void)state;
  dirty_fix_t d;
  dirty_setup(&d, SW_CARRIER_FILE);
  sw_runtime_t* rt = d.rt;
  tt_fix_t f = d.f; /* the same handles: dirty_teardown releases them */
  SW_OK_(sw_testing_hold(rt, SW_FAULT_WRITE, 1));
  sw_tile_selection_t* s0 = one_tile(0);
  sw_await_t* p = NULL;
  SW_OK_(sw_tiled_project(f.te, f.full, s0, NULL, &p));
  SW_OK_(sw_testing_wait_held(rt, 60 * SECOND));
  update_tile(&f, 1, 9.0);
  const int64_t one = 1;
  sw_tile_set_t* t1 = tt_set_ordinals(&f, &one, 1);
  sw_await_t* ev = NULL;
  SW_OK_(sw_tiled_evict_async(f.te, t1, &ev));
  SW_OK_(sw_testing_release_hold(rt));
  SW_OK_(sw_await_wait(ev, -1));
  sw_tensor_t* r = tt_wait_result(p);
  sw_tensor_release(r);
  tt_expect_tile(&f, 1, SW_TILE_SECONDARY, false);
  expect_tile_value(&f, 1, 9.0);
  project_tile(&f, 1);
  expect_tile_value(&f, 1, 9.0);
  sw_await_release(ev);
  sw_await_release(p);
  sw_tile_set_release(t1);
  sw_tile_selection_release(s0);
  dirty_teardown(&d);
}

/* ---- 2. a failed request changes nothing ---------------------------------- */

/* The LRU's eviction of dirty tile 1 inside a projection of tile 0 fails (an
 * injected write fault). The projection fails with it and commits nothing:
 * tile 0 stays secondary, tile 1 primary and dirty, the destination empty at
 * version 0 and unowned. A retry then behaves as a first attempt. */
static void failed_policy_eviction_commits_nothing(void** state) {
  (void)state;
  dirty_fix_t d;
  dirty_setup(&d, SW_CARRIER_FILE);
  sw_runtime_t* rt = d.rt;
  sw_lru_policy_t* lru = d.lru;
  tt_fix_t f = d.f; /* the same handles: dirty_teardown releases them */
  expect_stats(lru, 1, 0, 1, 1, 0);
  const tt_snap_t snap = tt_snapshot(&f);

  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_WRITE, 1));
  sw_tile_selection_t* s0 = one_tile(0);
  sw_carrier_t* dst = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 0);
  sw_await_t* p = NULL;
  SW_OK_(sw_tiled_project(f.te, f.full, s0, dst, &p));
  SW_FAILS(sw_await_wait(p, -1), SW_ERROR_IO, "injected write failure");
  sw_await_release(p);
  tt_expect_snapshot(&f, &snap);
  assert_false(tt_owned(dst));
  assert_int_equal(sw_async_size(dst), 0);
  assert_int_equal(tt_version(dst), 0);
  expect_tile_value(&f, 1, 7.0);
  /* The policy saw nothing happen. */
  expect_stats(lru, 1, 0, 1, 1, 0);

  /* The retry: tile 0 is a miss and is promoted, tile 1 is evicted. */
  SW_OK_(sw_tiled_project(f.te, f.full, s0, dst, &p));
  sw_tensor_t* r = tt_wait_result(p);
  assert_int_equal(tt_version(dst), 1);
  sw_tensor_release(r);
  sw_await_release(p);
  tt_expect_tile(&f, 0, SW_TILE_PRIMARY, false);
  tt_expect_tile(&f, 1, SW_TILE_SECONDARY, false);
  expect_stats(lru, 2, 0, 2, 2, 1);
  expect_tile_value(&f, 1, 7.0);
  for (int64_t w = 0; w < 3; ++w) {
    const int64_t c[1] = {w};
    double v = 0;
    SW_OK_(sw_tensor_get(f.full, c, 1, &v));
    assert_true(v == tt_seed(0, w));
  }
  sw_carrier_release(dst);
  sw_tile_selection_release(s0);
  dirty_teardown(&d);
}

/* The same inside a scatter, whose result must not appear either. */
static void failed_policy_eviction_in_scatter_commits_nothing(void** state) {
  (void)state;
  dirty_fix_t d;
  dirty_setup(&d, SW_CARRIER_FILE);
  sw_runtime_t* rt = d.rt;
  sw_lru_policy_t* lru = d.lru;
  tt_fix_t f = d.f; /* the same handles: dirty_teardown releases them */
  const tt_snap_t snap = tt_snapshot(&f);
  const sw_lru_stats_t before = lru_stats(lru);
  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_WRITE, 1));
  sw_tile_selection_t* s0 = one_tile(0);
  sw_tensor_t* c = tile_of(rt, 3.0);
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_scatter(f.te, c, f.full, s0, SW_SCATTER_ADD, &a));
  SW_FAILS(sw_await_wait(a, -1), SW_ERROR_IO, "injected write failure");
  sw_tensor_t* none = NULL;
  SW_FAILS(sw_await_result(a, &none), SW_ERROR_IO, "injected write failure");
  assert_null(none);
  sw_await_release(a);
  tt_expect_snapshot(&f, &snap);
  const sw_lru_stats_t after = lru_stats(lru);
  assert_int_equal(after.requests, before.requests);
  assert_int_equal(after.misses, before.misses);
  /* The retry succeeds. */
  sw_tensor_t* res = tt_scatter(&f, c, f.full, s0, SW_SCATTER_ADD);
  sw_tensor_release(res);
  tt_expect_tile(&f, 1, SW_TILE_SECONDARY, false);
  expect_tile_value(&f, 1, 7.0);
  sw_tensor_release(c);
  sw_tile_selection_release(s0);
  dirty_teardown(&d);
}

/* A policy that evicts a fixed set and promotes what is required. */
typedef struct evict_policy_t {
  sw_tile_set_t* evict;
} evict_policy_t;

static sw_error_t* evict_plan(void* user, const sw_tile_set_t* required, sw_residency_purpose_t purpose,
                              sw_residency_plan_t** out) {
  (void)purpose;
  return sw_residency_plan_create(required, NULL, ((evict_policy_t*)user)->evict, out);
}

/* A zstd frame holds two tiles, so evicting a dirty tile rewrites its frame:
 * decompress, patch, compress. A decompression fault there fails the
 * projection that planned the eviction, with nothing committed. */
static void failed_zstd_eviction_commits_nothing(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  memset(&f, 0, sizeof f);
  const int64_t grid[1] = {4}, tile[1] = {T_ELEMS};
  tt_geometry(&f, 1, grid, tile);
  f.rt = rt;
  f.dtype = SW_DTYPE_F32;
  sw_zstd_carrier_desc_t zd;
  sw_zstd_carrier_desc_init(&zd);
  zd.frame_elements = 2 * T_ELEMS;
  sw_carrier_t* sec = NULL;
  SW_OK_(sw_carrier_create_zstd(rt, SW_DTYPE_F32, (size_t)f.n, &zd, &sec));
  tt_fill_tier(sec, SW_DTYPE_F32, f.ntiles, f.T, 0.0);
  sw_carrier_t* prim = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 0);
  evict_policy_t ep = {NULL};
  const int64_t three = 3;
  ep.evict = tt_set_ordinals(&f, &three, 1);
  sw_residency_policy_t vt;
  sw_residency_policy_init(&vt);
  vt.user_data = &ep;
  vt.plan = evict_plan;
  SW_OK_(sw_tiled_create(prim, sec, grid, tile, 1, &vt, &f.te));
  SW_OK_(sw_tiled_full_tensor(f.te, &f.full));
  sw_carrier_release(prim);
  sw_carrier_release(sec);
  /* Tile 0 primary and clean (a hit later: no decompression), tile 3 dirty. */
  const int64_t zero = 0;
  sw_tile_set_t* t0 = tt_set_ordinals(&f, &zero, 1);
  SW_OK_(sw_tiled_promote(f.te, t0));
  sw_tile_set_release(t0);
  sw_tile_set_t* t3 = tt_set_ordinals(&f, &three, 1);
  SW_OK_(sw_tiled_promote(f.te, t3));
  sw_tile_set_release(t3);
  update_tile(&f, 3, 4.0);
  const tt_snap_t snap = tt_snapshot(&f);

  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_DECOMPRESS, 1));
  sw_tile_selection_t* s0 = one_tile(0);
  sw_carrier_t* dst = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 0);
  sw_await_t* p = NULL;
  SW_OK_(sw_tiled_project(f.te, f.full, s0, dst, &p));
  SW_FAILS(sw_await_wait(p, -1), SW_ERROR_DATA_CORRUPT, "injected decompression failure");
  sw_await_release(p);
  tt_expect_snapshot(&f, &snap);
  assert_int_equal(tt_version(dst), 0);
  assert_false(tt_owned(dst));
  expect_tile_value(&f, 3, 4.0);
  /* The retry evicts tile 3 with its value. */
  SW_OK_(sw_tiled_project(f.te, f.full, s0, dst, &p));
  sw_tensor_t* r = tt_wait_result(p);
  sw_tensor_release(r);
  sw_await_release(p);
  tt_expect_tile(&f, 3, SW_TILE_SECONDARY, false);
  expect_tile_value(&f, 3, 4.0);
  sw_carrier_release(dst);
  sw_tile_selection_release(s0);
  tt_free(&f);
  sw_tile_set_release(ep.evict);
  sw_runtime_release(rt);
}

/* ---- 3. the LRU policy follows what was committed ------------------------- */

/* A projection whose fetch fails leaves the policy as it was: the retry is a
 * miss that promotes, not a hit on a tile that never arrived. */
static void lru_forgets_a_failed_request(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  sw_residency_policy_t vt;
  sw_lru_policy_t* lru = lru_vtable(2, &vt);
  tt_fix_t f;
  make_line(&f, rt, 3, SW_CARRIER_FILE, &vt);
  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_READ, 1));
  sw_tile_selection_t* s0 = one_tile(0);
  sw_await_t* p = NULL;
  SW_OK_(sw_tiled_project(f.te, f.full, s0, NULL, &p));
  SW_FAILS(sw_await_wait(p, -1), SW_ERROR_IO, "injected read failure");
  sw_await_release(p);
  tt_expect_tile(&f, 0, SW_TILE_SECONDARY, false);
  expect_stats(lru, 0, 0, 0, 0, 0);
  project_tile(&f, 0);
  tt_expect_tile(&f, 0, SW_TILE_PRIMARY, false);
  expect_stats(lru, 1, 0, 1, 1, 0);
  project_tile(&f, 0);
  expect_stats(lru, 2, 1, 1, 1, 0);
  sw_tile_selection_release(s0);
  tt_free(&f);
  sw_lru_policy_release(lru);
  sw_runtime_release(rt);
}

/* A projection refused with STATE (its tile is covered by a pending
 * promotion) counts nothing. */
static void lru_ignores_a_refused_request(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  sw_residency_policy_t vt;
  sw_lru_policy_t* lru = lru_vtable(2, &vt);
  tt_fix_t f;
  make_line(&f, rt, 3, SW_CARRIER_FILE, &vt);
  SW_OK_(sw_testing_hold(rt, SW_FAULT_READ, 1));
  const int64_t one = 1;
  sw_tile_set_t* t1 = tt_set_ordinals(&f, &one, 1);
  sw_await_t* pr = NULL;
  SW_OK_(sw_tiled_promote_async(f.te, t1, &pr));
  SW_OK_(sw_testing_wait_held(rt, 60 * SECOND));
  sw_tile_selection_t* s1 = one_tile(1);
  sw_await_t* p = NULL;
  SW_FAILS(sw_tiled_project(f.te, f.full, s1, NULL, &p), SW_ERROR_STATE, "incomplete residency request");
  assert_null(p);
  expect_stats(lru, 0, 0, 0, 0, 0);
  SW_OK_(sw_testing_release_hold(rt));
  SW_OK_(sw_await_wait(pr, -1));
  sw_await_release(pr);
  /* Promoted by hand: a use the policy knows of, so the projection hits. */
  project_tile(&f, 1);
  expect_stats(lru, 1, 1, 0, 0, 0);
  sw_tile_set_release(t1);
  sw_tile_selection_release(s1);
  tt_free(&f);
  sw_lru_policy_release(lru);
  sw_runtime_release(rt);
}

/* After a failed policy eviction the tile is still primary, and the policy
 * still counts it: the budget holds through every later projection. */
static void lru_budget_holds_after_a_failed_eviction(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  sw_residency_policy_t vt;
  sw_lru_policy_t* lru = lru_vtable(2, &vt);
  tt_fix_t f;
  make_line(&f, rt, 5, SW_CARRIER_FILE, &vt);
  project_tile(&f, 0);
  update_tile(&f, 0, 6.0);  /* a use: tile 0, dirty, is then the least recent once 1 is used */
  project_tile(&f, 1);
  assert_int_equal(primary_count(&f), 2);
  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_WRITE, 1));
  sw_tile_selection_t* s2 = one_tile(2);
  sw_await_t* p = NULL;
  SW_OK_(sw_tiled_project(f.te, f.full, s2, NULL, &p));
  SW_FAILS(sw_await_wait(p, -1), SW_ERROR_IO, "injected write failure");
  sw_await_release(p);
  assert_int_equal(primary_count(&f), 2);
  for (int64_t round = 0; round < 3; ++round)
    for (int64_t k = 2; k < 5; ++k) {
      project_tile(&f, k);
      if (primary_count(&f) > 2) fail_msg("%lld tiles primary under a budget of 2 after projecting tile %lld",
                                          (long long)primary_count(&f), (long long)k);
    }
  expect_tile_value(&f, 0, 6.0);
  sw_tile_selection_release(s2);
  tt_free(&f);
  sw_lru_policy_release(lru);
  sw_runtime_release(rt);
}

int main(void) {
  if (!tt_primary_available()) return 77;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(update_during_policy_eviction_survives_file),
      cmocka_unit_test(update_during_policy_eviction_survives_zstd),
      cmocka_unit_test(update_during_policy_eviction_survives_host),
      cmocka_unit_test(tensor_write_during_policy_eviction_survives),
      cmocka_unit_test(explicit_evict_during_policy_eviction),
      cmocka_unit_test(failed_policy_eviction_commits_nothing),
      cmocka_unit_test(failed_policy_eviction_in_scatter_commits_nothing),
      cmocka_unit_test(failed_zstd_eviction_commits_nothing),
      cmocka_unit_test(lru_forgets_a_failed_request),
      cmocka_unit_test(lru_ignores_a_refused_request),
      cmocka_unit_test(lru_budget_holds_after_a_failed_eviction),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
