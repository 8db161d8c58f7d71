/* Residency policies through the public ABI: the spec scenarios (cache
 * unrelated tiles, skip an unreachable branch, reject an invalid policy
 * result), the callback contract (purposes, required sets, once per request,
 * on the requesting thread, errors passed through unchanged, destroy once),
 * plan effects (promote, evict after the request), and the built-in LRU
 * policy against a reference model (budget, hits, misses, hints). */
#include "sw_tiled_test.h"

typedef enum policy_mode_t {
  MODE_PROMOTE_REQUIRED = 0, /* promote what is required, never evict */
  MODE_EMPTY_PLAN,           /* an empty plan: fetch on demand, no residency change */
  MODE_NO_PLAN,              /* success without a plan */
  MODE_WRONG_HANDLE,         /* a TileSet instead of a plan */
  MODE_OUTSIDE_GRID,         /* a plan naming a tile outside the grid */
  MODE_WRONG_RANK,           /* a plan of another rank */
  MODE_ERROR,                /* an error of its own */
  MODE_EVICT_LISTED,         /* promote what is required, evict `evict` */
  MODE_EVICT_ONLY,           /* evict `evict`, promote nothing */
} policy_mode_t;

typedef struct rec_policy_t {
  policy_mode_t mode;
  int calls;
  int by_purpose[5];
  sw_residency_purpose_t last_purpose;
  sw_tile_set_t* last_required;
  sw_tile_set_t* evict;
  pthread_t caller;
  bool wrong_thread;
  int destroyed;
  char error_message[256];
  sw_error_code_t error_code;
} rec_policy_t;

static sw_error_t* rec_plan(void* user, const sw_tile_set_t* required, sw_residency_purpose_t purpose,
                            sw_residency_plan_t** out) {
  rec_policy_t* p = (rec_policy_t*)user;
  p->calls += 1;
  if (purpose >= 1 && purpose <= 4) p->by_purpose[purpose] += 1;
  p->last_purpose = purpose;
  if (!pthread_equal(pthread_self(), p->caller)) p->wrong_thread = true;
  sw_tile_set_release(p->last_required);
  /* `required` is borrowed; keep a copy. */
  size_t n = 0, r = 0;
  sw_tile_set_count(required, &n);
  sw_tile_set_rank(required, &r);
  int64_t* c = (int64_t*)malloc(sizeof(int64_t) * (n * r + 1));
  sw_tile_set_coordinates(required, c, n * r);
  sw_tile_set_create(c, n, r, &p->last_required);
  free(c);
  switch (p->mode) {
    case MODE_PROMOTE_REQUIRED: return sw_residency_plan_create(required, NULL, NULL, out);
    case MODE_EMPTY_PLAN: return sw_residency_plan_create(NULL, NULL, NULL, out);
    case MODE_NO_PLAN: *out = NULL; return NULL;
    case MODE_WRONG_HANDLE: {
      sw_tile_set_t* s = NULL;
      sw_error_t* e = sw_tile_set_create(NULL, 0, 0, &s);
      *out = (sw_residency_plan_t*)(void*)s;
      return e;
    }
    case MODE_OUTSIDE_GRID: {
      const int64_t far[3] = {99, 0, 0};
      sw_tile_set_t* s = NULL;
      sw_tile_set_create(far, 1, 3, &s);
      sw_error_t* e = sw_residency_plan_create(NULL, NULL, s, out);
      sw_tile_set_release(s);
      return e;
    }
    case MODE_WRONG_RANK: {
      const int64_t two[2] = {0, 0};
      sw_tile_set_t* s = NULL;
      sw_tile_set_create(two, 1, 2, &s);
      sw_error_t* e = sw_residency_plan_create(s, NULL, NULL, out);
      sw_tile_set_release(s);
      return e;
    }
    case MODE_ERROR: {
      /* An error of the policy's own, with a code the request itself would
       * never produce. */
      sw_error_t* e = sw_error_create(SW_ERROR_IO, "policy: the expert store is offline");
      p->error_code = sw_error_code(e);
      snprintf(p->error_message, sizeof p->error_message, "%s", sw_error_message(e));
      *out = NULL;
      return e;
    }
    case MODE_EVICT_LISTED: return sw_residency_plan_create(required, NULL, p->evict, out);
    case MODE_EVICT_ONLY: return sw_residency_plan_create(NULL, NULL, p->evict, out);
  }
  return NULL;
}

/* May run on the loop thread: in-flight work that just completed can hold
 * the last reference to the TiledEvictable for a moment. */
static void rec_destroy(void* user) { __atomic_add_fetch(&((rec_policy_t*)user)->destroyed, 1, __ATOMIC_SEQ_CST); }

/* The destroy count once it settles (up to 10 s for a pending one). */
static int rec_destroyed(rec_policy_t* p, int expect) {
  for (int i = 0; i < 10000 && __atomic_load_n(&p->destroyed, __ATOMIC_SEQ_CST) != expect; ++i) sw_async_sleep_ms(1);
  return __atomic_load_n(&p->destroyed, __ATOMIC_SEQ_CST);
}

static sw_residency_policy_t rec_vtable(rec_policy_t* p, policy_mode_t mode) {
  memset(p, 0, sizeof *p);
  p->mode = mode;
  p->caller = pthread_self();
  sw_residency_policy_t v;
  sw_residency_policy_init(&v);
  v.user_data = p;
  v.plan = rec_plan;
  v.destroy = rec_destroy;
  return v;
}

/* After the TiledEvictable was released: destroy ran exactly once (so the
 * stack record is no longer referenced). */
static void rec_done(rec_policy_t* p) {
  assert_int_equal(rec_destroyed(p, 1), 1);
  sw_tile_set_release(p->last_required);
  sw_tile_set_release(p->evict);
  p->last_required = NULL;
  p->evict = NULL;
}

static void make_experts(tt_fix_t* f, sw_runtime_t* rt, int64_t experts, sw_carrier_kind_t kind,
                         const sw_residency_policy_t* policy) {
  const int64_t grid[3] = {experts, 1, 1}, tile[3] = {1, 3, 2};
  tt_make(f, rt, SW_DTYPE_F32, 3, grid, tile, false, kind, true, policy);
}

/* Whether the policy's last required set holds exactly these ordinals. */
static void expect_required(const tt_fix_t* f, const rec_policy_t* p, const int64_t* ks, size_t count) {
  sw_tile_set_t* want = tt_set_ordinals(f, ks, count);
  bool eq = false;
  SW_OK_(sw_tile_set_equal(p->last_required, want, &eq));
  assert_true(eq);
  sw_tile_set_release(want);
}

/* ---- scenarios ------------------------------------------------------------- */

static void cache_unrelated_tiles(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  rec_policy_t rec;
  sw_residency_policy_t vt = rec_vtable(&rec, MODE_PROMOTE_REQUIRED);
  tt_fix_t f;
  const int64_t grid[2] = {2, 2}, tile[2] = {3, 2};
  tt_make(&f, rt, SW_DTYPE_F32, 2, grid, tile, false, SW_CARRIER_FILE, true, &vt);
  double* canon = tt_canon_seed(&f, 0);
  /* Three single-tile projections: (0,0), (1,0), (0,1). */
  const int64_t coords[3][2] = {{0, 0}, {1, 0}, {0, 1}};
  for (int i = 0; i < 3; ++i) {
    sw_tile_selection_t* s = tt_sel2(&coords[i][0], 1, &coords[i][1], 1);
    sw_tensor_t* c = tt_project(&f, f.full, s, NULL);
    int64_t n = 0;
    double* want = tt_compact_expect(&f, canon, s, &n);
    tt_expect_values(c, want, n);
    free(want);
    sw_tensor_release(c);
    sw_tile_selection_release(s);
  }
  assert_int_equal(rec.calls, 3);
  /* The resident set is no Cartesian product, and that is fine. */
  const bool mask[4] = {true, true, true, false};
  sw_tile_set_t* prim = NULL;
  SW_OK_(sw_tiled_tiles(f.te, SW_TILES_PRIMARY, &prim));
  tt_expect_set_mask(&f, prim, mask);
  sw_tile_set_release(prim);
  tt_expect_tile(&f, 3, SW_TILE_SECONDARY, false);
  tt_expect_tile_sets_consistent(&f);
  tt_expect_values(f.full, canon, f.n);
  /* The three cannot form one selection, but any selection still works. */
  const int64_t ax[2] = {0, 1};
  sw_tile_selection_t* all = tt_sel2(ax, 2, ax, 2);
  sw_tensor_t* c = tt_project(&f, f.full, all, NULL);
  int64_t n = 0;
  double* want = tt_compact_expect(&f, canon, all, &n);
  tt_expect_values(c, want, n);
  free(want);
  sw_tensor_release(c);
  sw_tile_selection_release(all);
  free(canon);
  tt_free(&f);
  assert_int_equal(rec_destroyed(&rec, 1), 1);
  rec_done(&rec);
  sw_runtime_release(rt);
}

static void skip_unreachable_branch(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  rec_policy_t rec;
  sw_residency_policy_t vt = rec_vtable(&rec, MODE_EMPTY_PLAN);
  tt_fix_t f;
  make_experts(&f, rt, 4, SW_CARRIER_ZSTD, &vt);
  double* canon = tt_canon_seed(&f, 0);
  SW_OK_(sw_tensor_set_requires_grad(f.full, true));
  double av[24], bv[24];
  for (int i = 0; i < 24; ++i) {
    av[i] = i % 3;
    bv[i] = -1;
  }
  sw_tensor_t* wa = tt_dense(rt, f.logical, 3, av);
  sw_tensor_t* wb = tt_dense(rt, f.logical, 3, bv);
  SW_OK_(sw_tensor_set_requires_grad(wa, true));
  SW_OK_(sw_tensor_set_requires_grad(wb, true));
  /* Two branches read the full tensor; a projection feeds a third. */
  sw_tensor_t *ya = NULL, *yb = NULL, *la = NULL, *rb = NULL;
  SW_OK_(sw_elementwise_mul(f.full, wa, &ya));
  SW_OK_(sw_elementwise_mul(f.full, wb, &yb));
  const int64_t pick[2] = {1, 2};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 2);
  sw_tensor_t* pc = tt_project(&f, f.full, sel, NULL);
  SW_OK_(sw_relu(pc, &rb));
  assert_int_equal(rec.by_purpose[SW_PURPOSE_OPERATION], 2);
  assert_int_equal(rec.by_purpose[SW_PURPOSE_PROJECTION], 1);
  assert_int_equal(rec.by_purpose[SW_PURPOSE_BACKWARD], 0);
  /* The loss uses branch a only. */
  SW_OK_(sw_reduce_sum(ya, NULL, 0, false, &la));
  const int calls_before = rec.calls;
  SW_OK_(sw_backward(la, NULL, false));
  /* One backward request re-read the full tensor (for wa's gradient); the
   * unreachable branches asked for nothing. */
  assert_int_equal(rec.by_purpose[SW_PURPOSE_BACKWARD], 1);
  assert_int_equal(rec.calls, calls_before + 1);
  assert_int_equal(rec.last_purpose, SW_PURPOSE_BACKWARD);
  const int64_t every[4] = {0, 1, 2, 3};
  expect_required(&f, &rec, every, 4);
  sw_tensor_t *gwa = NULL, *gwb = NULL, *gf = NULL;
  SW_OK_(sw_tensor_grad(wa, &gwa));
  SW_OK_(sw_tensor_grad(wb, &gwb));
  SW_OK_(sw_tensor_grad(f.full, &gf));
  tt_expect_values(gwa, canon, 24);
  assert_null(gwb);
  tt_expect_values(gf, av, 24);
  /* The policy promoted nothing, so residency never changed. */
  for (int64_t k = 0; k < 4; ++k) tt_expect_tile(&f, k, SW_TILE_SECONDARY, false);
  assert_false(rec.wrong_thread);
  sw_tensor_release(gwa);
  sw_tensor_release(gf);
  sw_tensor_release(la);
  sw_tensor_release(rb);
  sw_tensor_release(pc);
  sw_tile_selection_release(sel);
  sw_tensor_release(ya);
  sw_tensor_release(yb);
  sw_tensor_release(wa);
  sw_tensor_release(wb);
  free(canon);
  tt_free(&f);
  rec_done(&rec);
  sw_runtime_release(rt);
}

/* Every request kind refuses the policy's bad result before any work. */
static void expect_policy_result_refused(policy_mode_t mode, sw_error_code_t code, const char* needle) {
  sw_runtime_t* rt = sw_async_runtime();
  rec_policy_t rec;
  sw_residency_policy_t vt = rec_vtable(&rec, mode);
  tt_fix_t f;
  make_experts(&f, rt, 3, SW_CARRIER_FILE, &vt);
  /* Mixed residency first (residency requests do not consult the policy). */
  const int64_t z[3] = {0, 0, 0};
  sw_tile_set_t* s0 = tt_set(z, 1, 3);
  SW_OK_(sw_tiled_promote(f.te, s0));
  SW_OK_(sw_tensor_set(f.full, z, 3, -4.0));
  sw_tile_set_release(s0);
  assert_int_equal(rec.calls, 0);
  SW_OK_(sw_tensor_set_requires_grad(f.full, true));
  const tt_snap_t snap = tt_snapshot(&f);
  const int64_t pick[2] = {2, 1};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 2);
  sw_carrier_t* dst = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 0);
  double cv[12] = {0};
  const int64_t cshape[3] = {2, 3, 2};
  sw_tensor_t* compact = tt_dense(rt, cshape, 3, cv);
  sw_await_t* a = NULL;
  sw_tensor_t* out = NULL;

  SW_FAILS(sw_tiled_project(f.te, f.full, sel, dst, &a), code, needle);
  assert_int_equal(rec.last_purpose, SW_PURPOSE_PROJECTION);
  SW_FAILS(sw_tiled_scatter(f.te, compact, f.full, sel, SW_SCATTER_ADD, &a), code, needle);
  assert_int_equal(rec.last_purpose, SW_PURPOSE_SCATTER);
  SW_FAILS(sw_reduce_sum(f.full, NULL, 0, false, &out), code, needle);
  assert_int_equal(rec.last_purpose, SW_PURPOSE_OPERATION);
  assert_int_equal(rec.calls, 3);
  assert_null(a);
  assert_null(out);
  tt_expect_snapshot(&f, &snap);
  assert_false(tt_owned(dst));
  assert_int_equal(sw_async_size(dst), 0);
  assert_int_equal(tt_version(dst), 0);
  tt_expect_values(compact, cv, 12);
  /* Nothing is pending. */
  SW_OK_(sw_carrier_dispose(f.te));
  sw_tensor_release(compact);
  sw_carrier_release(dst);
  sw_tile_selection_release(sel);
  tt_free(&f);
  assert_int_equal(rec_destroyed(&rec, 1), 1);
  rec_done(&rec);
  sw_runtime_release(rt);
}

static void reject_invalid_policy_result(void** state) {
  (void)state;
  expect_policy_result_refused(MODE_NO_PLAN, SW_ERROR_TYPE, "ResidencyPlan");
  expect_policy_result_refused(MODE_WRONG_HANDLE, SW_ERROR_TYPE, "ResidencyPlan");
}

static void reject_policy_plan_outside_grid(void** state) {
  (void)state;
  expect_policy_result_refused(MODE_OUTSIDE_GRID, SW_ERROR_VALUE, "outside the grid");
  expect_policy_result_refused(MODE_WRONG_RANK, SW_ERROR_VALUE, "rank");
}

/* The callback's own error reaches the caller with the same code and
 * message. */
static void pass_policy_error_through_unchanged(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  rec_policy_t rec;
  sw_residency_policy_t vt = rec_vtable(&rec, MODE_ERROR);
  tt_fix_t f;
  make_experts(&f, rt, 3, SW_CARRIER_HOST, &vt);
  const tt_snap_t snap = tt_snapshot(&f);
  const int64_t pick[1] = {1};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 1);
  double cv[6] = {0};
  const int64_t cshape[3] = {1, 3, 2};
  sw_tensor_t* compact = tt_dense(rt, cshape, 3, cv);
  sw_await_t* a = NULL;
  sw_tensor_t* out = NULL;
  sw_error_t* errs[3];
  errs[0] = sw_tiled_project(f.te, f.full, sel, NULL, &a);
  errs[1] = sw_tiled_scatter(f.te, compact, f.full, sel, SW_SCATTER_REPLACE, &a);
  errs[2] = sw_add(f.full, f.full, &out);
  for (int i = 0; i < 3; ++i) {
    assert_non_null(errs[i]);
    assert_int_equal(rec.error_code, SW_ERROR_IO);
    assert_string_equal(rec.error_message, "policy: the expert store is offline");
    assert_int_equal(sw_error_code(errs[i]), rec.error_code);
    assert_string_equal(sw_error_message(errs[i]), rec.error_message);
    sw_error_free(errs[i]);
  }
  assert_int_equal(rec.calls, 3);
  assert_null(a);
  assert_null(out);
  tt_expect_snapshot(&f, &snap);
  /* Backward requests pass it through too. */
  rec.mode = MODE_EMPTY_PLAN;
  SW_OK_(sw_tensor_set_requires_grad(f.full, true));
  double wv[18];
  for (int i = 0; i < 18; ++i) wv[i] = i;
  sw_tensor_t* w = tt_dense(rt, f.logical, 3, wv);
  SW_OK_(sw_tensor_set_requires_grad(w, true));
  sw_tensor_t *y = NULL, *loss = NULL;
  SW_OK_(sw_elementwise_mul(f.full, w, &y));
  SW_OK_(sw_reduce_sum(y, NULL, 0, false, &loss));
  rec.mode = MODE_ERROR;
  sw_error_t* e = sw_backward(loss, NULL, true);
  assert_non_null(e);
  assert_int_equal(sw_error_code(e), rec.error_code);
  assert_string_equal(sw_error_message(e), rec.error_message);
  sw_error_free(e);
  assert_int_equal(rec.last_purpose, SW_PURPOSE_BACKWARD);
  sw_tensor_t* g = NULL;
  SW_OK_(sw_tensor_grad(w, &g));
  assert_null(g);
  /* And the retained graph runs once the policy agrees. */
  rec.mode = MODE_EMPTY_PLAN;
  SW_OK_(sw_backward(loss, NULL, false));
  SW_OK_(sw_tensor_grad(w, &g));
  double* canon = tt_canon_seed(&f, 0);
  tt_expect_values(g, canon, 18);
  free(canon);
  sw_tensor_release(g);
  sw_tensor_release(loss);
  sw_tensor_release(y);
  sw_tensor_release(w);
  sw_tensor_release(compact);
  sw_tile_selection_release(sel);
  tt_free(&f);
  rec_done(&rec);
  sw_runtime_release(rt);
}

/* Purposes, required sets, one call per request on the requesting thread,
 * and destroy once the last TiledEvictable is gone. */
static void policy_sees_each_request_once(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  rec_policy_t rec;
  sw_residency_policy_t vt = rec_vtable(&rec, MODE_PROMOTE_REQUIRED);
  tt_fix_t f;
  make_experts(&f, rt, 5, SW_CARRIER_HOST, &vt);
  const int64_t pick[2] = {4, 2};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 2);
  sw_tensor_t* c = tt_project(&f, f.full, sel, NULL);
  assert_int_equal(rec.calls, 1);
  assert_int_equal(rec.last_purpose, SW_PURPOSE_PROJECTION);
  const int64_t req[2] = {2, 4};
  expect_required(&f, &rec, req, 2);
  /* The plan promoted the required tiles. */
  for (int64_t k = 0; k < 5; ++k)
    tt_expect_tile(&f, k, (k == 2 || k == 4) ? SW_TILE_PRIMARY : SW_TILE_SECONDARY, false);
  sw_tensor_t* r = tt_scatter(&f, c, f.full, sel, SW_SCATTER_REPLACE);
  assert_int_equal(rec.calls, 2);
  assert_int_equal(rec.last_purpose, SW_PURPOSE_SCATTER);
  expect_required(&f, &rec, req, 2);
  /* Residency requests and tile queries do not consult the policy. */
  SW_OK_(tt_evict_sel(f.te, sel));
  SW_OK_(tt_promote_sel(f.te, sel));
  tt_expect_tile_sets_consistent(&f);
  assert_int_equal(rec.calls, 2);
  sw_tensor_t* s = NULL;
  SW_OK_(sw_mul_scalar(f.full, 2.0, &s));
  assert_int_equal(rec.calls, 3);
  assert_int_equal(rec.last_purpose, SW_PURPOSE_OPERATION);
  const int64_t every[5] = {0, 1, 2, 3, 4};
  expect_required(&f, &rec, every, 5);
  assert_false(rec.wrong_thread);
  /* The scatter result has no policy; its carrier does not keep it alive. */
  sw_carrier_t* rc = tt_carrier_of(r);
  bool has = true;
  SW_OK_(sw_tiled_has_policy(rc, &has));
  assert_false(has);
  sw_carrier_release(rc);
  sw_tensor_release(s);
  sw_tensor_release(r);
  sw_tensor_release(c);
  sw_tile_selection_release(sel);
  assert_int_equal(__atomic_load_n(&rec.destroyed, __ATOMIC_SEQ_CST), 0);
  tt_free(&f);
  assert_int_equal(rec_destroyed(&rec, 1), 1);
  rec_done(&rec);
  sw_runtime_release(rt);
}

/* Plan evictions happen after the request no longer needs the tiles; a tile
 * other work still needs is left alone. */
static void policy_evictions_follow_the_request(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  rec_policy_t rec;
  sw_residency_policy_t vt = rec_vtable(&rec, MODE_PROMOTE_REQUIRED);
  tt_fix_t f;
  make_experts(&f, rt, 4, SW_CARRIER_FILE, &vt);
  double* canon = tt_canon_seed(&f, 0);
  const int64_t p01[2] = {0, 1};
  sw_tile_selection_t* s01 = tt_sel_experts(&f, p01, 2);
  sw_tensor_t* c = tt_project(&f, f.full, s01, NULL);
  sw_tensor_release(c);
  /* Tile 0 dirty. */
  const int64_t z[3] = {0, 0, 0};
  SW_OK_(sw_tensor_set(f.full, z, 3, -8.0));
  canon[0] = -8.0;
  /* Project tile 2 with a plan that evicts tiles 0 and 1. */
  rec.mode = MODE_EVICT_LISTED;
  rec.evict = tt_set_ordinals(&f, p01, 2);
  const int64_t p2[1] = {2};
  sw_tile_selection_t* s2 = tt_sel_experts(&f, p2, 1);
  c = tt_project(&f, f.full, s2, NULL);
  int64_t n = 0;
  double* want = tt_compact_expect(&f, canon, s2, &n);
  tt_expect_values(c, want, n);
  free(want);
  sw_tensor_release(c);
  tt_expect_tile(&f, 0, SW_TILE_SECONDARY, false);
  tt_expect_tile(&f, 1, SW_TILE_SECONDARY, false);
  tt_expect_tile(&f, 2, SW_TILE_PRIMARY, false);
  tt_expect_tile(&f, 3, SW_TILE_SECONDARY, false);
  tt_expect_values(f.full, canon, f.n); /* the dirty value was written back */
  assert_int_equal(tt_version(f.te), 1);
  /* A plan evicting a tile its own request requires: evicted afterwards,
   * the request still sees the value. */
  sw_tile_set_release(rec.evict);
  rec.evict = tt_set_ordinals(&f, p2, 1);
  rec.mode = MODE_EVICT_ONLY;
  c = tt_project(&f, f.full, s2, NULL);
  want = tt_compact_expect(&f, canon, s2, &n);
  tt_expect_values(c, want, n);
  free(want);
  sw_tensor_release(c);
  tt_expect_tile(&f, 2, SW_TILE_SECONDARY, false);
  tt_expect_tile_sets_consistent(&f);
  sw_tile_selection_release(s01);
  sw_tile_selection_release(s2);
  free(canon);
  tt_free(&f);
  rec_done(&rec);
  sw_runtime_release(rt);
}

/* ---- the built-in LRU policy ----------------------------------------------- */

/* A reference LRU over tile ordinals: most recent last. */
typedef struct lru_model_t {
  int64_t order[TT_MAXTILES];
  int size;
  size_t budget;
  uint64_t requests, hits, misses, promoted, evicted, transient;
} lru_model_t;

static int lru_find(const lru_model_t* m, int64_t k) {
  for (int i = 0; i < m->size; ++i)
    if (m->order[i] == k) return i;
  return -1;
}

static void lru_touch(lru_model_t* m, int64_t k) {
  const int at = lru_find(m, k);
  if (at >= 0) {
    memmove(&m->order[at], &m->order[at + 1], sizeof(int64_t) * (size_t)(m->size - at - 1));
    m->size -= 1;
  }
  m->order[m->size++] = k;
}

/* Evicts the least recent tiles not in `keep` until at most `limit` stay;
 * false if it runs out of such tiles first. */
static bool lru_shrink(lru_model_t* m, const bool* keep, size_t limit) {
  while ((size_t)m->size > limit) {
    int v = 0;
    while (v < m->size && keep[m->order[v]]) ++v;
    if (v == m->size) return false;
    memmove(&m->order[v], &m->order[v + 1], sizeof(int64_t) * (size_t)(m->size - v - 1));
    m->size -= 1;
    m->evicted += 1;
  }
  return true;
}

/* `required` sorted first coordinate fastest (ascending ordinals here). The
 * budget holds for every request: back within it first, then room for each
 * miss in turn, and a miss that finds no room (every primary tile is
 * required too) is read for this request only. */
static void lru_plan(lru_model_t* m, const int64_t* required, int count, const int64_t* hints, int nhints) {
  m->requests += 1;
  bool keep[TT_MAXTILES] = {false};
  for (int i = 0; i < count; ++i) keep[required[i]] = true;
  lru_shrink(m, keep, m->budget);
  int promoted = 0;
  for (int i = 0; i < count; ++i) {
    if (lru_find(m, required[i]) >= 0) {
      m->hits += 1;
      continue;
    }
    m->misses += 1;
    if (lru_shrink(m, keep, m->budget - 1)) {
      promoted += 1;
      lru_touch(m, required[i]);
    } else {
      m->transient += 1;
    }
  }
  for (int i = 0; i < count; ++i)
    if (lru_find(m, required[i]) >= 0) lru_touch(m, required[i]);
  for (int i = 0; i < nhints; ++i) {
    const bool present = lru_find(m, hints[i]) >= 0;
    if ((size_t)m->size >= m->budget && !present) break;
    if (keep[hints[i]] || present) continue;
    promoted += 1;
    keep[hints[i]] = true;
    lru_touch(m, hints[i]);
  }
  m->promoted += (uint64_t)promoted;
}

static int cmp_i64(const void* a, const void* b) {
  const int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
  return (x > y) - (x < y);
}

static void expect_lru_stats(sw_lru_policy_t* lru, const lru_model_t* m) {
  sw_lru_stats_t st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  SW_OK_(sw_lru_policy_stats(lru, &st));
  assert_int_equal(st.requests, m->requests);
  assert_int_equal(st.hits, m->hits);
  assert_int_equal(st.misses, m->misses);
  assert_int_equal(st.promoted, m->promoted);
  assert_int_equal(st.evicted, m->evicted);
  assert_int_equal(st.transient, m->transient);
}

static void expect_primary_is_model(const tt_fix_t* f, const lru_model_t* m) {
  bool mask[TT_MAXTILES] = {false};
  for (int i = 0; i < m->size; ++i) mask[m->order[i]] = true;
  sw_tile_set_t* prim = NULL;
  SW_OK_(sw_tiled_tiles(f->te, SW_TILES_PRIMARY, &prim));
  tt_expect_set_mask(f, prim, mask);
  size_t n = 0;
  SW_OK_(sw_tile_set_count(prim, &n));
  assert_true(n <= m->budget);
  sw_tile_set_release(prim);
}

static void lru_policy_keeps_the_budget(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  sw_lru_policy_t* lru = NULL;
  SW_OK_(sw_lru_policy_create(3, &lru));
  sw_residency_policy_t vt;
  SW_OK_(sw_lru_policy_as_residency_policy(lru, &vt));
  tt_fix_t f;
  make_experts(&f, rt, 8, SW_CARRIER_FILE, &vt);
  double* canon = tt_canon_seed(&f, 0);
  lru_model_t m;
  memset(&m, 0, sizeof m);
  m.budget = 3;
  /* A router-like sequence of one to three experts per batch. */
  static const int64_t batches[][3] = {{0, -1, -1}, {1, -1, -1}, {2, -1, -1}, {3, -1, -1}, {1, -1, -1},
                                        {4, 5, -1},  {5, 4, 6},  {7, 0, -1},  {0, -1, -1}, {2, 6, 3},
                                        {6, -1, -1}, {1, 2, -1}, {5, 3, 7}};
  const int nb = (int)(sizeof batches / sizeof batches[0]);
  for (int b = 0; b < nb; ++b) {
    int64_t pick[3];
    int count = 0;
    for (int i = 0; i < 3; ++i)
      if (batches[b][i] >= 0) pick[count++] = batches[b][i];
    sw_tile_selection_t* sel = tt_sel_experts(&f, pick, (size_t)count);
    sw_tensor_t* c = tt_project(&f, f.full, sel, NULL);
    int64_t n = 0;
    double* want = tt_compact_expect(&f, canon, sel, &n);
    tt_expect_values(c, want, n);
    free(want);
    sw_tensor_release(c);
    sw_tile_selection_release(sel);
    int64_t sorted[3];
    memcpy(sorted, pick, sizeof(int64_t) * (size_t)count);
    qsort(sorted, (size_t)count, sizeof(int64_t), cmp_i64);
    lru_plan(&m, sorted, count, NULL, 0);
    expect_primary_is_model(&f, &m);
    expect_lru_stats(lru, &m);
    for (int i = 0; i < count; ++i) tt_expect_tile(&f, pick[i], SW_TILE_PRIMARY, false);
  }
  assert_true(m.hits > 0 && m.evicted > 0);
  /* A direct op needs every tile: the three primary ones stay, the other
   * five are read for it alone, and the budget holds throughout. */
  sw_tensor_t* r = NULL;
  SW_OK_(sw_reduce_sum(f.full, NULL, 0, false, &r));
  double total = 0;
  for (int64_t i = 0; i < f.n; ++i) total += canon[i];
  tt_expect_values(r, &total, 1);
  sw_tensor_release(r);
  const int64_t all[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  lru_plan(&m, all, 8, NULL, 0);
  expect_primary_is_model(&f, &m);
  expect_lru_stats(lru, &m);
  assert_int_equal(m.transient, 5);
  const int64_t one[1] = {4};
  sw_tile_selection_t* sel = tt_sel_experts(&f, one, 1);
  sw_tensor_t* c = tt_project(&f, f.full, sel, NULL);
  sw_tensor_release(c);
  sw_tile_selection_release(sel);
  lru_plan(&m, one, 1, NULL, 0);
  expect_primary_is_model(&f, &m);
  expect_lru_stats(lru, &m);
  assert_int_equal(tt_version(f.te), 0);
  free(canon);
  tt_free(&f);
  sw_lru_policy_release(lru);
  sw_runtime_release(rt);
}

static void lru_policy_prefetches_hints(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  sw_lru_policy_t* lru = NULL;
  SW_OK_(sw_lru_policy_create(3, &lru));
  sw_residency_policy_t vt;
  SW_OK_(sw_lru_policy_as_residency_policy(lru, &vt));
  tt_fix_t f;
  make_experts(&f, rt, 8, SW_CARRIER_ZSTD, &vt);
  lru_model_t m;
  memset(&m, 0, sizeof m);
  m.budget = 3;
  const int64_t next[3] = {6, 7, 5};
  sw_tile_set_t* hint = tt_set_ordinals(&f, next, 3);
  SW_OK_(sw_lru_policy_hint(lru, hint));
  const int64_t pick[1] = {0};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 1);
  sw_tensor_t* c = tt_project(&f, f.full, sel, NULL);
  sw_tensor_release(c);
  /* Hints in set order (5, 6, 7) while the budget allows: 5 and 6. */
  const int64_t sorted_hints[3] = {5, 6, 7};
  lru_plan(&m, pick, 1, sorted_hints, 3);
  expect_primary_is_model(&f, &m);
  expect_lru_stats(lru, &m);
  tt_expect_tile(&f, 0, SW_TILE_PRIMARY, false);
  tt_expect_tile(&f, 5, SW_TILE_PRIMARY, false);
  tt_expect_tile(&f, 6, SW_TILE_PRIMARY, false);
  /* Hints are used once. */
  const int64_t pick2[1] = {6};
  sw_tile_selection_t* sel2 = tt_sel_experts(&f, pick2, 1);
  c = tt_project(&f, f.full, sel2, NULL);
  sw_tensor_release(c);
  lru_plan(&m, pick2, 1, NULL, 0);
  expect_primary_is_model(&f, &m);
  expect_lru_stats(lru, &m);
  sw_tile_selection_release(sel2);
  sw_tile_selection_release(sel);
  sw_tile_set_release(hint);
  tt_free(&f);
  sw_lru_policy_release(lru);
  sw_runtime_release(rt);
}

/* A one-mode f32 TiledEvictable over a file tier read in requests of 4 KiB
 * (each tile's values canonical), without a policy; returns the file
 * carrier (a new reference). */
static sw_carrier_t* file_tier_fixture(sw_runtime_t* rt, tt_fix_t* f, const int64_t* grid, const int64_t* tile) {
  memset(f, 0, sizeof *f);
  f->rt = rt;
  f->dtype = SW_DTYPE_F32;
  tt_geometry(f, 1, grid, tile);
  sw_file_carrier_desc_t d;
  sw_file_carrier_desc_init(&d);
  d.chunk_bytes = 4096;
  sw_carrier_t* s = NULL;
  SW_OK_(sw_carrier_create_file(rt, SW_DTYPE_F32, (size_t)f->n, &d, &s));
  tt_fill_tier(s, SW_DTYPE_F32, f->ntiles, f->T, 0.0); /* synchronous writes: no request slot */
  sw_carrier_t* p = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 0);
  SW_OK_(sw_tiled_create(p, s, grid, tile, 1, NULL, &f->te));
  SW_OK_(sw_tiled_full_tensor(f->te, &f->full));
  sw_carrier_release(p);
  return s;
}

/* sw_tiled_prefetch_async: a promotion like sw_tiled_promote_async whose
 * file reads take at most two of the runtime's request slots, and a new one
 * only while no demand read waits for a slot. Six tiles are prefetched in
 * requests of 4 KiB while a projection reads a seventh: every value arrives,
 * the demand reads are the projection's alone, and the prefetch never held
 * more than its two slots. */
static void prefetch_reads_yield_to_demand_reads(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  sw_io_queue_stats_t q0, q1;
  sw_io_queue_stats_init(&q0);
  sw_io_queue_stats_init(&q1);
  tt_fix_t f;
  const int64_t grid[1] = {8}, tile[1] = {16384}; /* 64 KiB tiles: 16 requests each */
  sw_carrier_release(file_tier_fixture(rt, &f, grid, tile));
  double* canon = tt_canon_seed(&f, 0);
  SW_OK_(sw_testing_io_queue_stats(rt, &q0));

  const int64_t ahead[6] = {0, 1, 2, 3, 4, 5}, now[1] = {7};
  sw_tile_set_t* set = tt_set_ordinals(&f, ahead, 6);
  sw_await_t* pa = NULL;
  /* Its first tile's read is held, so that it cannot commit before the check below. */
  SW_OK_(sw_testing_hold(rt, SW_FAULT_READ, 1));
  SW_OK_(sw_tiled_prefetch_async(f.te, set, &pa));
  sw_await_kind_t kind;
  SW_OK_(sw_await_kind(pa, &kind));
  assert_int_equal(kind, SW_AWAIT_RESIDENCY);
  /* Its tiles are owned like a promotion's until it commits. */
  SW_FAILS(sw_tiled_promote_async(f.te, set, &(sw_await_t*){NULL}), SW_ERROR_STATE, "residency request");
  SW_OK_(sw_testing_wait_held(rt, (int64_t)60 * 1000000000));
  SW_OK_(sw_testing_release_hold(rt));
  sw_tile_selection_t* sel = tt_sel1(now, 1);
  sw_tensor_t* c = tt_project(&f, f.full, sel, NULL);
  int64_t n = 0;
  double* want = tt_compact_expect(&f, canon, sel, &n);
  tt_expect_values(c, want, n);
  SW_OK_(sw_await_wait(pa, -1));
  assert_int_equal(sw_async_status(pa), SW_AWAIT_SUCCEEDED);
  for (int64_t k = 0; k < 6; ++k) tt_expect_tile(&f, k, SW_TILE_PRIMARY, false);
  tt_expect_tile(&f, 6, SW_TILE_SECONDARY, false);
  tt_expect_tile(&f, 7, SW_TILE_PRIMARY, false); /* no policy: a projection promotes what it reads */
  tt_expect_values(f.full, canon, f.n);

  SW_OK_(sw_testing_io_queue_stats(rt, &q1));
  assert_true(q1.slots >= 1);
  assert_int_equal(q1.prefetch_slots, q1.slots < 2 ? q1.slots : 2);
  assert_int_equal(q1.prefetch_requests - q0.prefetch_requests, 6 * 16);
  assert_int_equal(q1.demand_requests - q0.demand_requests, 16);
  assert_int_equal(q1.max_prefetch_in_flight, q1.prefetch_slots);
  assert_true(q1.max_in_flight <= q1.slots && q1.max_demand_in_flight >= 1);

  /* Validation as promote_async's, with the call named. */
  SW_FAILS(sw_tiled_prefetch_async(f.te, NULL, &(sw_await_t*){NULL}), SW_ERROR_TYPE, "tiles");
  sw_tile_set_t* wrong = NULL;
  const int64_t two[2] = {0, 0};
  SW_OK_(sw_tile_set_create(two, 1, 2, &wrong));
  SW_FAILS(sw_tiled_prefetch_async(f.te, wrong, &(sw_await_t*){NULL}), SW_ERROR_VALUE, "prefetch");
  SW_FAILS(sw_tiled_prefetch_async((sw_carrier_t*)(void*)sel, set, &(sw_await_t*){NULL}), SW_ERROR_TYPE, "tiled");
  sw_tile_set_release(wrong);

  sw_await_release(pa);
  free(want);
  free(canon);
  sw_tensor_release(c);
  sw_tile_selection_release(sel);
  sw_tile_set_release(set);
  tt_free(&f);
  sw_runtime_release(rt);
}

/* Read requests take the runtime's file request slots in the order their
 * transfers were submitted: a promotion submitted first issues all of its
 * pieces before a later one takes a slot, so it lands whole first instead of
 * both landing together at the end. Two promotions of 128 requests each go
 * back to back with the 129th read request armed to fail: it is the second
 * promotion's first, so the first reads its whole tile and succeeds, and the
 * second fails having read nothing (the injected fault fails the request
 * before it is sent). Taking turns, the 129th request would have fallen in
 * the middle of both, with one of them half read. The order in which
 * requests are issued does not depend on when they complete, so this holds
 * however the threads that read them are scheduled. */
static uint64_t bytes_read(const sw_carrier_t* tier) {
  sw_file_io_stats_t st;
  sw_file_io_stats_init(&st);
  SW_OK_(sw_testing_file_io_stats(tier, &st));
  return st.direct_bytes + st.bounce_bytes + st.buffered_bytes;
}

static void reads_are_served_in_submission_order(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  const int64_t grid[1] = {2}, tile[1] = {131072}; /* 512 KiB tiles: 128 requests each */
  sw_carrier_t* s = file_tier_fixture(rt, &f, grid, tile);
  double* canon = tt_canon_seed(&f, 0);
  const uint64_t tile_bytes = (uint64_t)tile[0] * sizeof(float);
  const int64_t first[1] = {0}, second[1] = {1};
  sw_tile_set_t* s0 = tt_set_ordinals(&f, first, 1);
  sw_tile_set_t* s1 = tt_set_ordinals(&f, second, 1);

  const uint64_t before = bytes_read(s);
  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_READ, 129));
  sw_await_t *a0 = NULL, *a1 = NULL;
  SW_OK_(sw_tiled_promote_async(f.te, s0, &a0));
  SW_OK_(sw_tiled_promote_async(f.te, s1, &a1));
  SW_FAILS(sw_await_wait(a1, -1), SW_ERROR_IO, "injected read failure");
  SW_OK_(sw_await_wait(a0, -1));
  uint64_t reached = 0, injected = 0;
  SW_OK_(sw_testing_fault_counts(rt, SW_FAULT_READ, &reached, &injected));
  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_READ, 0));
  assert_int_equal(reached, 129);
  assert_int_equal(injected, 1);
  assert_int_equal(bytes_read(s) - before, tile_bytes);
  tt_expect_tile(&f, 0, SW_TILE_PRIMARY, false);
  tt_expect_tile(&f, 1, SW_TILE_SECONDARY, false); /* the failed promotion changed nothing */
  tt_expect_values(f.full, canon, f.n);

  sw_await_release(a0);
  sw_await_release(a1);
  sw_tile_set_release(s0);
  sw_tile_set_release(s1);
  free(canon);
  sw_carrier_release(s);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void lru_policy_rejects_bad_arguments(void** state) {
  (void)state;
  sw_lru_policy_t* lru = NULL;
  SW_FAILS(sw_lru_policy_create(0, &lru), SW_ERROR_VALUE, "budget");
  assert_null(lru);
  SW_OK_(sw_lru_policy_create(2, &lru));
  sw_lru_stats_t st;
  memset(&st, 0, sizeof st);
  st.struct_size = 4;
  SW_FAILS(sw_lru_policy_stats(lru, &st), SW_ERROR_VALUE, "struct_size");
  const int64_t a[2] = {0, 1};
  sw_tile_selection_t* sel = tt_sel1(a, 2);
  SW_FAILS(sw_lru_policy_hint(lru, (const sw_tile_set_t*)(const void*)sel), SW_ERROR_TYPE, "TileSet");
  SW_FAILS(sw_lru_policy_stats((const sw_lru_policy_t*)(const void*)sel, &st), SW_ERROR_TYPE, "LRU");
  sw_residency_policy_t vt;
  SW_FAILS(sw_lru_policy_as_residency_policy(NULL, &vt), SW_ERROR_TYPE, "LRU");
  sw_tile_selection_release(sel);
  sw_lru_policy_release(lru);
}

/* A request that fails gives back the hints its plan took: the retry
 * prefetches what the first attempt would have, and the statistics count
 * the retry alone. */
static void a_failed_request_keeps_the_hints(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  sw_lru_policy_t* lru = NULL;
  SW_OK_(sw_lru_policy_create(3, &lru));
  sw_residency_policy_t vt;
  SW_OK_(sw_lru_policy_as_residency_policy(lru, &vt));
  tt_fix_t f;
  make_experts(&f, rt, 8, SW_CARRIER_FILE, &vt);
  const int64_t next[3] = {6, 7, 5};
  sw_tile_set_t* hint = tt_set_ordinals(&f, next, 3);
  SW_OK_(sw_lru_policy_hint(lru, hint));
  const int64_t pick[1] = {0};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 1);
  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_READ, 1));
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_project(f.te, f.full, sel, NULL, &a));
  SW_FAILS(sw_await_wait(a, -1), SW_ERROR_IO, "injected");
  sw_await_release(a);
  sw_lru_stats_t none;
  memset(&none, 0, sizeof none);
  tt_expect_lru_stats(lru, &none);
  for (int64_t k = 0; k < 8; ++k) tt_expect_tile(&f, k, SW_TILE_SECONDARY, false);
  /* The retry: as the first request of lru_policy_prefetches_hints. */
  sw_tensor_t* c = tt_project(&f, f.full, sel, NULL);
  sw_tensor_release(c);
  lru_model_t m;
  memset(&m, 0, sizeof m);
  m.budget = 3;
  const int64_t sorted_hints[3] = {5, 6, 7};
  lru_plan(&m, pick, 1, sorted_hints, 3);
  expect_primary_is_model(&f, &m);
  expect_lru_stats(lru, &m);
  tt_expect_tile(&f, 5, SW_TILE_PRIMARY, false);
  tt_expect_tile(&f, 6, SW_TILE_PRIMARY, false);
  sw_tile_selection_release(sel);
  sw_tile_set_release(hint);
  tt_free(&f);
  sw_lru_policy_release(lru);
  sw_runtime_release(rt);
}

/* A backward pass re-reads an offloaded operand (the elementwise product's
 * VJP needs it: purpose backward, 4 tiles streamed through a budget of 2,
 * one of them primary at the start); every allocation of the pass, failed
 * in turn. The failed pass reports the injected error and changes nothing:
 * the tile states and the policy's statistics are as before it, even where
 * the re-read had finished before the failure. Its retry leaves exactly
 * what one clean pass leaves. */
static void a_failed_backward_changes_nothing(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  sw_lru_stats_t clean_stats;
  sw_tile_location_t clean_loc[4];
  int points = 0;
  for (uint64_t n = 0;; ++n) {
    sw_lru_policy_t* lru = NULL;
    SW_OK_(sw_lru_policy_create(2, &lru));
    sw_residency_policy_t vt;
    SW_OK_(sw_lru_policy_as_residency_policy(lru, &vt));
    tt_fix_t f;
    make_experts(&f, rt, 4, SW_CARRIER_FILE, &vt);
    const int64_t one[1] = {2};
    sw_tile_set_t* first = tt_set_ordinals(&f, one, 1);
    SW_OK_(sw_tiled_promote(f.te, first));
    sw_tile_set_release(first);
    const int64_t shape[3] = {4, 3, 2};
    double wv[24];
    for (int i = 0; i < 24; ++i) wv[i] = i - 5;
    sw_tensor_t* w = tt_dense(rt, shape, 3, wv);
    SW_OK_(sw_tensor_set_requires_grad(w, true));
    sw_tensor_t *y = NULL, *loss = NULL;
    SW_OK_(sw_elementwise_mul(f.full, w, &y));
    SW_OK_(sw_reduce_sum(y, NULL, 0, false, &loss));
    sw_lru_stats_t before;
    sw_lru_stats_init(&before);
    SW_OK_(sw_lru_policy_stats(lru, &before));
    sw_tile_location_t loc[4];
    for (int64_t k = 0; k < 4; ++k) loc[k] = tt_state(&f, k).location;
    uint64_t injected_before = 0, injected_after = 0;
    SW_OK_(sw_testing_fault_counts(rt, SW_FAULT_ALLOCATION, NULL, &injected_before));
    if (n) SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_ALLOCATION, n));
    sw_error_t* e = sw_backward(loss, NULL, true);
    SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_ALLOCATION, 0));
    SW_OK_(sw_testing_fault_counts(rt, SW_FAULT_ALLOCATION, NULL, &injected_after));
    bool done = false;
    if (n == 0) {
      SW_OK_(e);
      sw_lru_stats_init(&clean_stats);
      SW_OK_(sw_lru_policy_stats(lru, &clean_stats));
      assert_true(clean_stats.requests >= 1);
      for (int64_t k = 0; k < 4; ++k) clean_loc[k] = tt_state(&f, k).location;
    } else if (injected_after == injected_before) {
      SW_OK_(e);
      done = true;
    } else {
      if (!e) fail_msg("allocation %llu failed, yet the backward pass succeeded", (unsigned long long)n);
      assert_int_equal(sw_error_code(e), SW_ERROR_OUT_OF_MEMORY);
      sw_error_free(e);
      tt_expect_lru_stats(lru, &before);
      for (int64_t k = 0; k < 4; ++k) assert_int_equal(tt_state(&f, k).location, loc[k]);
      sw_tensor_t* g = NULL;
      SW_OK_(sw_tensor_grad(w, &g));
      assert_null(g);
      SW_OK_(sw_backward(loss, NULL, true));
      tt_expect_lru_stats(lru, &clean_stats);
      for (int64_t k = 0; k < 4; ++k) assert_int_equal(tt_state(&f, k).location, clean_loc[k]);
      ++points;
    }
    sw_tensor_release(loss);
    sw_tensor_release(y);
    sw_tensor_release(w);
    tt_free(&f);
    sw_lru_policy_release(lru);
    if (done) break;
  }
  assert_true(points >= 1);
  sw_runtime_release(rt);
}

int main(void) {
  if (!tt_primary_available()) return 77;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(cache_unrelated_tiles),
      cmocka_unit_test(skip_unreachable_branch),
      cmocka_unit_test(reject_invalid_policy_result),
      cmocka_unit_test(reject_policy_plan_outside_grid),
      cmocka_unit_test(pass_policy_error_through_unchanged),
      cmocka_unit_test(policy_sees_each_request_once),
      cmocka_unit_test(policy_evictions_follow_the_request),
      cmocka_unit_test(lru_policy_keeps_the_budget),
      cmocka_unit_test(lru_policy_prefetches_hints),
      cmocka_unit_test(lru_policy_rejects_bad_arguments),
      cmocka_unit_test(a_failed_request_keeps_the_hints),
      cmocka_unit_test(a_failed_backward_changes_nothing),
      cmocka_unit_test(prefetch_reads_yield_to_demand_reads),
      cmocka_unit_test(reads_are_served_in_submission_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
