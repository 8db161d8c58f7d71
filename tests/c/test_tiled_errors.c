/* TiledEvictable error rules, one test per TypeError / ValueError /
 * RuntimeError sentence of the tiled-carrier-composition spec (TYPE, VALUE,
 * STATE here). Every refusal is checked to change nothing: tile states,
 * versions, tier claims, destination claims and sizes, autograd. Scatter and
 * policy errors live in their own suites. */
#include <unistd.h>

#include "sw_tiled_test.h"

static void make_experts(tt_fix_t* f, sw_runtime_t* rt, int64_t experts, sw_carrier_kind_t kind) {
  const int64_t grid[3] = {experts, 1, 1}, tile[3] = {1, 3, 2};
  tt_make(f, rt, SW_DTYPE_F32, 3, grid, tile, false, kind, true, NULL);
}

/* Tile 0 primary and dirty, tile 1 primary and clean, the rest secondary. */
static void mix_residency(tt_fix_t* f) {
  const int64_t ks[2] = {0, 1};
  sw_tile_set_t* s = tt_set_ordinals(f, ks, 2);
  SW_OK_(sw_tiled_promote(f->te, s));
  sw_tile_set_release(s);
  int64_t at[TT_MAXR] = {0};
  SW_OK_(sw_tensor_set(f->full, at, f->rank, -5.0));
}

/* ---- construction --------------------------------------------------------- */

typedef struct tier_pair_t {
  sw_carrier_t* primary;
  sw_carrier_t* secondary;
} tier_pair_t;

/* Asserts that a refused creation left both tiers live and unclaimed. */
static void expect_tiers_untouched(const sw_carrier_t* p, const sw_carrier_t* s) {
  assert_false(tt_owned(p));
  assert_false(tt_owned(s));
  assert_false(tt_disposed(p));
  assert_false(tt_disposed(s));
}

static void create_fails(sw_carrier_t* p, sw_carrier_t* s, const int64_t* grid, const int64_t* tile, size_t rank,
                         const sw_residency_policy_t* policy, sw_error_code_t code, const char* needle) {
  sw_carrier_t* te = NULL;
  SW_FAILS(sw_tiled_create(p, s, grid, tile, rank, policy, &te), code, needle);
  assert_null(te);
}

static void create_rejects_wrong_tier_kinds(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  const int64_t grid[2] = {2, 2}, tile[2] = {2, 1};
  sw_carrier_t* cpu = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 8);
  sw_carrier_t* cpu2 = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 0);
  sw_carrier_t* host = tt_carrier(rt, SW_CARRIER_HOST, SW_DTYPE_F32, 8);
  sw_carrier_t* file = tt_carrier(rt, SW_CARRIER_FILE, SW_DTYPE_F32, 0);
  sw_carrier_t* zstd = tt_carrier(rt, SW_CARRIER_ZSTD, SW_DTYPE_F32, 0);
  /* A storage carrier is no primary tier; a compute carrier no secondary. */
  create_fails(host, file, grid, tile, 2, NULL, SW_ERROR_TYPE, "primary");
  create_fails(zstd, host, grid, tile, 2, NULL, SW_ERROR_TYPE, "primary");
  create_fails(cpu, cpu2, grid, tile, 2, NULL, SW_ERROR_TYPE, "secondary");
  create_fails(cpu, cpu, grid, tile, 2, NULL, SW_ERROR_TYPE, "secondary");
  /* A TiledEvictable is neither. */
  tt_fix_t f;
  tt_make(&f, rt, SW_DTYPE_F32, 2, grid, tile, false, SW_CARRIER_HOST, true, NULL);
  create_fails(f.te, host, grid, tile, 2, NULL, SW_ERROR_TYPE, NULL);
  create_fails(cpu, f.te, grid, tile, 2, NULL, SW_ERROR_TYPE, NULL);
  /* Non-carrier handles. */
  create_fails((sw_carrier_t*)(void*)f.full, host, grid, tile, 2, NULL, SW_ERROR_TYPE, "tensor");
  create_fails(cpu, (sw_carrier_t*)(void*)f.full, grid, tile, 2, NULL, SW_ERROR_TYPE, "tensor");
  create_fails(NULL, host, grid, tile, 2, NULL, SW_ERROR_TYPE, NULL);
  create_fails(cpu, NULL, grid, tile, 2, NULL, SW_ERROR_TYPE, NULL);
  /* Tier dtypes differ. */
  sw_carrier_t* host64 = tt_carrier(rt, SW_CARRIER_HOST, SW_DTYPE_F64, 8);
  create_fails(cpu, host64, grid, tile, 2, NULL, SW_ERROR_TYPE, "dtype");
  expect_tiers_untouched(cpu, host64);
  expect_tiers_untouched(host, file);
  expect_tiers_untouched(cpu2, zstd);
  sw_carrier_release(host64);
  tt_free(&f);
  sw_carrier_release(cpu);
  sw_carrier_release(cpu2);
  sw_carrier_release(host);
  sw_carrier_release(file);
  sw_carrier_release(zstd);
  sw_runtime_release(rt);
}

static void create_rejects_partial_tier(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  const int64_t grid[2] = {2, 2}, tile[2] = {2, 1};
  sw_carrier_t* p7 = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 7);
  sw_carrier_t* p0 = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 0);
  sw_carrier_t* s9 = tt_carrier(rt, SW_CARRIER_HOST, SW_DTYPE_F32, 9);
  sw_carrier_t* s0 = tt_carrier(rt, SW_CARRIER_HOST, SW_DTYPE_F32, 0);
  create_fails(p7, s0, grid, tile, 2, NULL, SW_ERROR_VALUE, "empty or hold the full extent");
  create_fails(p0, s9, grid, tile, 2, NULL, SW_ERROR_VALUE, "empty or hold the full extent");
  expect_tiers_untouched(p7, s0);
  expect_tiers_untouched(p0, s9);
  sw_carrier_release(p7);
  sw_carrier_release(p0);
  sw_carrier_release(s9);
  sw_carrier_release(s0);
  sw_runtime_release(rt);
}

static void create_rejects_bad_grid_or_tile(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  sw_carrier_t* p = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 0);
  sw_carrier_t* s = tt_carrier(rt, SW_CARRIER_HOST, SW_DTYPE_F32, 0);
  const int64_t ok[2] = {2, 2}, zero[2] = {2, 0}, neg[2] = {-1, 2};
  create_fails(p, s, ok, ok, 0, NULL, SW_ERROR_VALUE, "at least one mode");
  create_fails(p, s, zero, ok, 2, NULL, SW_ERROR_VALUE, "grid extent");
  create_fails(p, s, neg, ok, 2, NULL, SW_ERROR_VALUE, "grid extent");
  create_fails(p, s, ok, zero, 2, NULL, SW_ERROR_VALUE, "tile extent");
  create_fails(p, s, ok, neg, 2, NULL, SW_ERROR_VALUE, "tile extent");
  create_fails(p, s, NULL, ok, 2, NULL, SW_ERROR_VALUE, NULL);
  int64_t ones[SW_MAX_RANK + 1];
  for (int i = 0; i <= SW_MAX_RANK; ++i) ones[i] = 1;
  create_fails(p, s, ones, ones, SW_MAX_RANK + 1, NULL, SW_ERROR_VALUE, "rank");
  /* Overflowing extents. */
  const int64_t huge[2] = {INT64_MAX / 2, 4};
  create_fails(p, s, huge, ok, 2, NULL, SW_ERROR_VALUE, "overflow");
  expect_tiers_untouched(p, s);
  sw_carrier_release(p);
  sw_carrier_release(s);
  sw_runtime_release(rt);
}

static void create_rejects_disposed_or_owned_tiers(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  const int64_t grid[2] = {2, 2}, tile[2] = {2, 1};
  for (int which = 0; which < 2; ++which) {
    /* Owned: claimed by in-flight work (or a composite). */
    sw_carrier_t* p = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 8);
    sw_carrier_t* s = tt_carrier(rt, SW_CARRIER_FILE, SW_DTYPE_F32, 8);
    sw_carrier_t* claimed = which == 0 ? p : s;
    sw_carrier_t* other = which == 0 ? s : p;
    SW_OK_(sw_testing_claim(claimed));
    create_fails(p, s, grid, tile, 2, NULL, SW_ERROR_STATE, "owned");
    assert_true(tt_owned(claimed));
    assert_false(tt_owned(other));
    assert_false(tt_disposed(other));
    SW_OK_(sw_testing_unclaim(claimed));
    /* Disposed. */
    SW_OK_(sw_carrier_dispose(claimed));
    create_fails(p, s, grid, tile, 2, NULL, SW_ERROR_STATE, "released");
    assert_false(tt_owned(other));
    assert_false(tt_disposed(other));
    assert_false(tt_owned(claimed));
    sw_carrier_release(p);
    sw_carrier_release(s);
  }
  /* A tier already claimed by another TiledEvictable. */
  tt_fix_t f;
  tt_make(&f, rt, SW_DTYPE_F32, 2, grid, tile, false, SW_CARRIER_HOST, true, NULL);
  sw_carrier_t *fp = NULL, *fs = NULL;
  SW_OK_(sw_tiled_primary(f.te, &fp));
  SW_OK_(sw_tiled_secondary(f.te, &fs));
  sw_carrier_t* p = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 0);
  sw_carrier_t* s = tt_carrier(rt, SW_CARRIER_HOST, SW_DTYPE_F32, 0);
  create_fails(fp, s, grid, tile, 2, NULL, SW_ERROR_STATE, "owned");
  create_fails(p, fs, grid, tile, 2, NULL, SW_ERROR_STATE, "owned");
  expect_tiers_untouched(p, s);
  for (int64_t k = 0; k < f.ntiles; ++k) tt_expect_tile(&f, k, SW_TILE_SECONDARY, false);
  sw_carrier_release(p);
  sw_carrier_release(s);
  sw_carrier_release(fp);
  sw_carrier_release(fs);
  tt_free(&f);
  sw_runtime_release(rt);
}

static sw_error_t* no_plan(void* user, const sw_tile_set_t* required, sw_residency_purpose_t purpose,
                           sw_residency_plan_t** out) {
  (void)user;
  (void)required;
  (void)purpose;
  *out = NULL;
  return NULL;
}

static void create_rejects_policy_without_protocol(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  const int64_t grid[2] = {2, 2}, tile[2] = {2, 1};
  sw_carrier_t* p = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 0);
  sw_carrier_t* s = tt_carrier(rt, SW_CARRIER_HOST, SW_DTYPE_F32, 8);
  sw_residency_policy_t policy;
  sw_residency_policy_init(&policy);
  create_fails(p, s, grid, tile, 2, &policy, SW_ERROR_TYPE, "plan");
  policy.plan = no_plan;
  policy.struct_size = 3;
  create_fails(p, s, grid, tile, 2, &policy, SW_ERROR_VALUE, "struct_size");
  expect_tiers_untouched(p, s);
  /* A conforming policy is accepted. */
  sw_residency_policy_init(&policy);
  policy.plan = no_plan;
  sw_carrier_t* te = NULL;
  SW_OK_(sw_tiled_create(p, s, grid, tile, 2, &policy, &te));
  bool has = false;
  SW_OK_(sw_tiled_has_policy(te, &has));
  assert_true(has);
  sw_carrier_release(te);
  sw_carrier_release(p);
  sw_carrier_release(s);
  sw_runtime_release(rt);
}

/* ---- projection ------------------------------------------------------------ */

/* Asserts that a refused projection changed nothing. */
static void project_fails(const tt_fix_t* f, const tt_snap_t* snap, sw_tensor_t* t, const sw_tile_selection_t* sel,
                          sw_carrier_t* dst, sw_error_code_t code, const char* needle) {
  sw_await_t* a = NULL;
  size_t size_before = 0;
  uint64_t version_before = 0;
  bool owned_before = false;
  if (dst) {
    SW_OK_(sw_carrier_size(dst, &size_before));
    version_before = tt_version(dst);
    owned_before = tt_owned(dst);
  }
  SW_FAILS(sw_tiled_project(f->te, t, sel, dst, &a), code, needle);
  assert_null(a);
  tt_expect_snapshot(f, snap);
  if (dst) {
    size_t size_after = 0;
    SW_OK_(sw_carrier_size(dst, &size_after));
    assert_int_equal(size_after, size_before);
    assert_int_equal(tt_version(dst), version_before);
    assert_int_equal(tt_owned(dst), owned_before);
  }
}

static void project_rejects_tensor_of_another_carrier(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f, g;
  make_experts(&f, rt, 3, SW_CARRIER_HOST);
  make_experts(&g, rt, 3, SW_CARRIER_HOST);
  mix_residency(&f);
  SW_OK_(sw_tensor_set_requires_grad(f.full, true));
  const tt_snap_t snap = tt_snapshot(&f);
  const int64_t pick[1] = {1};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 1);
  /* A dense CPU tensor of the same shape. */
  double zeros[18] = {0};
  sw_tensor_t* dense = tt_dense(rt, f.logical, 3, zeros);
  project_fails(&f, &snap, dense, sel, NULL, SW_ERROR_TYPE, "not by this TiledEvictable");
  /* A tensor over another TiledEvictable of the same geometry. */
  project_fails(&f, &snap, g.full, sel, NULL, SW_ERROR_TYPE, "not by this TiledEvictable");
  /* Not a tensor at all, and NULL. */
  project_fails(&f, &snap, (sw_tensor_t*)(void*)sel, sel, NULL, SW_ERROR_TYPE, "tensor");
  project_fails(&f, &snap, NULL, sel, NULL, SW_ERROR_TYPE, "tensor");
  /* The carrier argument must be a TiledEvictable. */
  sw_await_t* a = NULL;
  sw_carrier_t* dc = tt_carrier_of(dense);
  SW_FAILS(sw_tiled_project(dc, dense, sel, NULL, &a), SW_ERROR_TYPE, "TiledEvictable");
  SW_FAILS(sw_tiled_project(g.te, f.full, sel, NULL, &a), SW_ERROR_TYPE, "not by this TiledEvictable");
  assert_null(a);
  tt_expect_snapshot(&f, &snap);
  sw_carrier_release(dc);
  sw_tensor_release(dense);
  sw_tile_selection_release(sel);
  tt_free(&g);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void project_rejects_non_selection(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 3, SW_CARRIER_FILE);
  mix_residency(&f);
  const tt_snap_t snap = tt_snapshot(&f);
  const int64_t c[3] = {2, 0, 0};
  sw_tile_set_t* set = tt_set(c, 1, 3);
  sw_carrier_t* dst = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 0);
  project_fails(&f, &snap, f.full, (const sw_tile_selection_t*)(const void*)set, dst, SW_ERROR_TYPE, "TileSelection");
  project_fails(&f, &snap, f.full, NULL, dst, SW_ERROR_TYPE, "TileSelection");
  project_fails(&f, &snap, f.full, (const sw_tile_selection_t*)(const void*)f.full, dst, SW_ERROR_TYPE,
                "TileSelection");
  sw_carrier_release(dst);
  sw_tile_set_release(set);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void project_rejects_incompatible_selection(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 3, SW_CARRIER_ZSTD);
  mix_residency(&f);
  const tt_snap_t snap = tt_snapshot(&f);
  sw_carrier_t* dst = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 0);
  /* Rank 1 and rank 2 selections over a rank-3 grid. */
  const int64_t e[1] = {0}, z[1] = {0};
  sw_tile_selection_t* r1 = tt_sel1(e, 1);
  sw_tile_selection_t* r2 = tt_sel2(e, 1, z, 1);
  project_fails(&f, &snap, f.full, r1, dst, SW_ERROR_VALUE, "rank");
  project_fails(&f, &snap, f.full, r2, NULL, SW_ERROR_VALUE, "rank");
  /* Out of range on the expert axis and on a trailing axis. */
  const int64_t bad[2] = {1, 3};
  sw_tile_selection_t* out0 = tt_sel_experts(&f, bad, 2);
  project_fails(&f, &snap, f.full, out0, dst, SW_ERROR_VALUE, "outside the grid");
  const int64_t one[1] = {1};
  const int64_t* axes[3] = {e, one, z};
  const size_t counts[3] = {1, 1, 1};
  sw_tile_selection_t* out1 = tt_sel(3, axes, counts);
  project_fails(&f, &snap, f.full, out1, dst, SW_ERROR_VALUE, "outside the grid");
  sw_tile_selection_release(r1);
  sw_tile_selection_release(r2);
  sw_tile_selection_release(out0);
  sw_tile_selection_release(out1);
  sw_carrier_release(dst);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void project_rejects_wrong_destination_kind(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f, g;
  make_experts(&f, rt, 3, SW_CARRIER_HOST);
  make_experts(&g, rt, 3, SW_CARRIER_HOST);
  mix_residency(&f);
  const tt_snap_t snap = tt_snapshot(&f);
  const int64_t pick[1] = {2};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 1);
  const sw_carrier_kind_t kinds[3] = {SW_CARRIER_HOST, SW_CARRIER_FILE, SW_CARRIER_ZSTD};
  for (int i = 0; i < 3; ++i) {
    sw_carrier_t* d = tt_carrier(rt, kinds[i], SW_DTYPE_F32, 0);
    project_fails(&f, &snap, f.full, sel, d, SW_ERROR_TYPE, "destination");
    sw_carrier_release(d);
  }
  /* A TiledEvictable (this one or another) is no destination. */
  project_fails(&f, &snap, f.full, sel, g.te, SW_ERROR_TYPE, "destination");
  project_fails(&f, &snap, f.full, sel, f.te, SW_ERROR_TYPE, "destination");
  /* A non-carrier handle. */
  sw_await_t* a = NULL;
  SW_FAILS(sw_tiled_project(f.te, f.full, sel, (sw_carrier_t*)(void*)g.full, &a), SW_ERROR_TYPE, "carrier");
  assert_null(a);
  tt_expect_snapshot(&f, &snap);
  sw_tile_selection_release(sel);
  tt_free(&g);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void project_rejects_released_or_owned_destination(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 3, SW_CARRIER_HOST);
  mix_residency(&f);
  const tt_snap_t snap = tt_snapshot(&f);
  const int64_t pick[1] = {2};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 1);
  sw_carrier_t* owned = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 6);
  SW_OK_(sw_testing_claim(owned));
  project_fails(&f, &snap, f.full, sel, owned, SW_ERROR_STATE, "owned");
  assert_true(tt_owned(owned));
  SW_OK_(sw_testing_unclaim(owned));
  sw_carrier_t* released = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 6);
  SW_OK_(sw_carrier_dispose(released));
  project_fails(&f, &snap, f.full, sel, released, SW_ERROR_STATE, "released");
  /* A destination held by a pending projection is owned too. */
  sw_carrier_t* busy = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 0);
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_project(f.te, f.full, sel, busy, &a));
  const tt_snap_t snap2 = tt_snapshot(&f);
  sw_await_t* b = NULL;
  sw_error_t* err = sw_tiled_project(f.te, f.full, sel, busy, &b);
  if (err) {
    assert_int_equal(sw_error_code(err), SW_ERROR_STATE);
    sw_error_free(err);
    assert_null(b);
  } else {
    /* Only if the first one had completed. */
    SW_OK_(sw_await_wait(b, -1));
    sw_await_release(b);
  }
  (void)snap2;
  SW_OK_(sw_await_wait(a, -1));
  sw_await_release(a);
  sw_carrier_release(busy);
  sw_carrier_release(owned);
  sw_carrier_release(released);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void project_rejects_destination_dtype(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 3, SW_CARRIER_HOST);
  mix_residency(&f);
  const tt_snap_t snap = tt_snapshot(&f);
  const int64_t pick[1] = {0};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 1);
  const sw_dtype_t dts[3] = {SW_DTYPE_F64, SW_DTYPE_I32, SW_DTYPE_BF16};
  for (int i = 0; i < 3; ++i) {
    sw_carrier_t* d = tt_carrier(rt, TT_PRIMARY, dts[i], 0);
    project_fails(&f, &snap, f.full, sel, d, SW_ERROR_TYPE, "dtype");
    sw_carrier_release(d);
    d = tt_carrier(rt, TT_PRIMARY, dts[i], 64);
    project_fails(&f, &snap, f.full, sel, d, SW_ERROR_TYPE, "dtype");
    sw_carrier_release(d);
  }
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void project_rejects_too_small_destination(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 3, SW_CARRIER_HOST);
  mix_residency(&f);
  const tt_snap_t snap = tt_snapshot(&f);
  const int64_t pick[2] = {0, 2};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 2); /* 12 elements */
  sw_carrier_t* d = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 11);
  project_fails(&f, &snap, f.full, sel, d, SW_ERROR_VALUE, "slots");
  sw_carrier_t* one = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 1);
  project_fails(&f, &snap, f.full, sel, one, SW_ERROR_VALUE, "slots");
  /* Exactly large enough works. */
  sw_carrier_t* fit = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 12);
  sw_tensor_t* r = tt_project(&f, f.full, sel, fit);
  sw_tensor_release(r);
  sw_carrier_release(fit);
  sw_carrier_release(one);
  sw_carrier_release(d);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void project_rejects_released_carrier(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 3, SW_CARRIER_HOST);
  const int64_t pick[1] = {0};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 1);
  sw_tensor_t* t = tt_tensor_over(f.te, 0, "(3,3,2):(1,0,0)");
  SW_OK_(sw_carrier_dispose(f.te));
  sw_carrier_t* d = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 0);
  sw_await_t* a = NULL;
  SW_FAILS(sw_tiled_project(f.te, f.full, sel, d, &a), SW_ERROR_STATE, "released");
  SW_FAILS(sw_tiled_project(f.te, f.full, sel, NULL, &a), SW_ERROR_STATE, "released");
  /* Released wins over a bad tensor layout. */
  SW_FAILS(sw_tiled_project(f.te, t, sel, NULL, &a), SW_ERROR_STATE, "released");
  assert_null(a);
  assert_false(tt_owned(d));
  assert_int_equal(sw_async_size(d), 0);
  sw_carrier_release(d);
  sw_tensor_release(t);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void project_rejects_invalid_tiles(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  const int64_t grid[2] = {3, 1}, tile[2] = {1, 4};
  tt_make(&f, rt, SW_DTYPE_F32, 2, grid, tile, false, SW_CARRIER_HOST, false, NULL);
  const tt_snap_t snap = tt_snapshot(&f);
  const int64_t pick[1] = {1}, z[1] = {0};
  sw_tile_selection_t* sel = tt_sel2(pick, 1, z, 1);
  sw_carrier_t* d = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 0);
  project_fails(&f, &snap, f.full, sel, d, SW_ERROR_STATE, "invalid");
  sw_tensor_t* out = NULL;
  SW_FAILS(sw_reduce_sum(f.full, NULL, 0, false, &out), SW_ERROR_STATE, "invalid");
  SW_FAILS(tt_promote_sel(f.te, sel), SW_ERROR_STATE, "invalid");
  const int64_t at[2] = {0, 0};
  SW_FAILS(sw_tensor_set(f.full, at, 2, 1.0), SW_ERROR_STATE, "invalid");
  tt_expect_snapshot(&f, &snap);
  sw_carrier_release(d);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

/* A transfer failing after submission publishes nothing and leaves every
 * input usable. */
static void project_failure_after_submission_publishes_nothing(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 4, SW_CARRIER_FILE);
  SW_OK_(sw_tensor_set_requires_grad(f.full, true));
  const tt_snap_t snap = tt_snapshot(&f);
  const int64_t pick[3] = {3, 1, 2};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 3);
  sw_carrier_t* d = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 0);
  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_READ, 2));
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_project(f.te, f.full, sel, d, &a));
  sw_error_t* e = sw_await_wait(a, -1);
  assert_non_null(e);
  assert_int_equal(sw_error_code(e), SW_ERROR_IO);
  sw_error_free(e);
  sw_tensor_t* r = NULL;
  SW_FAILS(sw_await_result(a, &r), SW_ERROR_IO, NULL);
  assert_null(r);
  sw_await_release(a);
  tt_expect_snapshot(&f, &snap);
  assert_false(tt_owned(d));
  assert_int_equal(sw_async_size(d), 0);
  assert_int_equal(tt_version(d), 0);
  /* Everything is usable again. */
  r = tt_project(&f, f.full, sel, d);
  double* canon = tt_canon_seed(&f, 0);
  int64_t n = 0;
  double* want = tt_compact_expect(&f, canon, sel, &n);
  tt_expect_values(r, want, n);
  free(want);
  free(canon);
  sw_tensor_release(r);
  SW_OK_(sw_carrier_dispose(f.te));
  sw_carrier_release(d);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

/* ---- residency requests ---------------------------------------------------- */

static void residency_rejects_non_tile_set(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 3, SW_CARRIER_HOST);
  mix_residency(&f);
  const tt_snap_t snap = tt_snapshot(&f);
  sw_residency_plan_t* plan = NULL;
  SW_OK_(sw_residency_plan_create(NULL, NULL, NULL, &plan));
  const void* bad[4] = {NULL, f.full, f.te, plan};
  for (int i = 0; i < 4; ++i) {
    sw_await_t* a = NULL;
    SW_FAILS(sw_tiled_promote_async(f.te, bad[i], &a), SW_ERROR_TYPE, "TileSet");
    SW_FAILS(sw_tiled_evict_async(f.te, bad[i], &a), SW_ERROR_TYPE, "TileSet");
    SW_FAILS(sw_tiled_promote(f.te, bad[i]), SW_ERROR_TYPE, "TileSet");
    SW_FAILS(sw_tiled_evict(f.te, bad[i]), SW_ERROR_TYPE, "TileSet");
    assert_null(a);
  }
  tt_expect_snapshot(&f, &snap);
  /* The calls take TileSets: a selection handle in their place is TYPE
   * with nothing changed; converted (sw_tile_selection_tile_set) it is its
   * tile set. */
  const int64_t pick[1] = {2};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 1);
  const sw_tile_set_t* not_a_set = (const sw_tile_set_t*)(const void*)sel;
  SW_FAILS(sw_tiled_promote(f.te, not_a_set), SW_ERROR_TYPE, "expected a TileSet, got a TileSelection");
  sw_await_t* none = NULL;
  SW_FAILS(sw_tiled_evict_async(f.te, not_a_set, &none), SW_ERROR_TYPE, "expected a TileSet, got a TileSelection");
  assert_null(none);
  tt_expect_snapshot(&f, &snap);
  SW_OK_(tt_promote_sel(f.te, sel));
  tt_expect_tile(&f, 2, SW_TILE_PRIMARY, false);
  SW_OK_(tt_evict_sel(f.te, sel));
  tt_expect_tile(&f, 2, SW_TILE_SECONDARY, false);
  /* The carrier must be a TiledEvictable. */
  sw_carrier_t* cpu = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 4);
  SW_FAILS(tt_promote_sel(cpu, sel), SW_ERROR_TYPE, "TiledEvictable");
  sw_carrier_release(cpu);
  sw_tile_selection_release(sel);
  sw_residency_plan_release(plan);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void residency_rejects_rank_or_range(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 3, SW_CARRIER_HOST);
  mix_residency(&f);
  const tt_snap_t snap = tt_snapshot(&f);
  const int64_t r2[2] = {0, 0}, far[3] = {3, 0, 0}, side[3] = {0, 1, 0};
  /* A set mixing valid tiles with an out-of-range one is refused whole. */
  const int64_t mixed[9] = {2, 0, 0, 1, 0, 0, 0, 0, 1};
  sw_tile_set_t* sets[4] = {tt_set(r2, 1, 2), tt_set(far, 1, 3), tt_set(side, 1, 3), tt_set(mixed, 3, 3)};
  const char* needles[4] = {"rank", "outside the grid", "outside the grid", "outside the grid"};
  for (int i = 0; i < 4; ++i) {
    sw_await_t* a = NULL;
    SW_FAILS(sw_tiled_promote_async(f.te, sets[i], &a), SW_ERROR_VALUE, needles[i]);
    SW_FAILS(sw_tiled_evict_async(f.te, sets[i], &a), SW_ERROR_VALUE, needles[i]);
    SW_FAILS(sw_tiled_promote(f.te, sets[i]), SW_ERROR_VALUE, needles[i]);
    SW_FAILS(sw_tiled_evict(f.te, sets[i]), SW_ERROR_VALUE, needles[i]);
    assert_null(a);
    sw_tile_set_release(sets[i]);
  }
  /* A selection out of range too. */
  const int64_t bad[1] = {5};
  sw_tile_selection_t* sel = tt_sel_experts(&f, bad, 1);
  SW_FAILS(tt_promote_sel(f.te, sel), SW_ERROR_VALUE, "outside the grid");
  sw_tile_selection_release(sel);
  /* tile_state checks its coordinate the same way. */
  sw_tile_state_t st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  SW_FAILS(sw_tiled_tile_state(f.te, far, 3, &st), SW_ERROR_VALUE, "outside the grid");
  SW_FAILS(sw_tiled_tile_state(f.te, r2, 2, &st), SW_ERROR_VALUE, "rank");
  /* Unknown tile set kinds. */
  sw_tile_set_t* none = NULL;
  SW_FAILS(sw_tiled_tiles(f.te, (sw_tile_set_kind_t)99, &none), SW_ERROR_VALUE, "kind");
  SW_FAILS(sw_tiled_tiles(f.te, (sw_tile_set_kind_t)0, &none), SW_ERROR_VALUE, "kind");
  SW_FAILS(sw_tiled_tiles(f.te, (sw_tile_set_kind_t)-1, &none), SW_ERROR_VALUE, "kind");
  assert_null(none);
  tt_expect_snapshot(&f, &snap);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void residency_rejects_released_carrier(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 3, SW_CARRIER_HOST);
  const int64_t c[3] = {1, 0, 0};
  sw_tile_set_t* set = tt_set(c, 1, 3);
  SW_OK_(sw_carrier_dispose(f.te));
  sw_await_t* a = NULL;
  SW_FAILS(sw_tiled_promote_async(f.te, set, &a), SW_ERROR_STATE, "released");
  SW_FAILS(sw_tiled_evict_async(f.te, set, &a), SW_ERROR_STATE, "released");
  SW_FAILS(sw_tiled_promote(f.te, set), SW_ERROR_STATE, "released");
  SW_FAILS(sw_tiled_evict(f.te, set), SW_ERROR_STATE, "released");
  assert_null(a);
  sw_tile_set_release(set);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void promote_rejects_invalid_tile(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 3, SW_CARRIER_HOST);
  /* A partial scatter result: tile 1 valid, tiles 0 and 2 invalid. */
  const int64_t pick[1] = {1};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 1);
  const int64_t cshape[3] = {1, 3, 2};
  double cv[6] = {1, 2, 3, 4, 5, 6};
  sw_tensor_t* compact = tt_dense(rt, cshape, 3, cv);
  sw_tensor_t* r = tt_scatter(&f, compact, f.full, sel, SW_SCATTER_REPLACE);
  tt_fix_t rf = f;
  rf.te = tt_carrier_of(r);
  rf.full = r;
  tt_expect_tile(&rf, 0, SW_TILE_INVALID, false);
  tt_expect_tile(&rf, 1, SW_TILE_PRIMARY, true);
  const tt_snap_t snap = tt_snapshot(&rf);
  /* The whole set is refused, the valid tile included. */
  const int64_t both[6] = {1, 0, 0, 2, 0, 0};
  sw_tile_set_t* set = tt_set(both, 2, 3);
  sw_await_t* a = NULL;
  SW_FAILS(sw_tiled_promote_async(rf.te, set, &a), SW_ERROR_STATE, "invalid");
  SW_FAILS(sw_tiled_promote(rf.te, set), SW_ERROR_STATE, "invalid");
  assert_null(a);
  tt_expect_snapshot(&rf, &snap);
  /* Evicting an invalid tile is a no-op that succeeds. */
  const int64_t t0[3] = {0, 0, 0};
  sw_tile_set_t* s0 = tt_set(t0, 1, 3);
  SW_OK_(sw_tiled_evict(rf.te, s0));
  tt_expect_snapshot(&rf, &snap);
  sw_tile_set_release(s0);
  sw_tile_set_release(set);
  sw_carrier_release(rf.te);
  sw_tensor_release(r);
  sw_tensor_release(compact);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

/* A whole-tensor write that reaches an invalid tile is refused and, like
 * every refused call, changes nothing. */
static void whole_write_over_invalid_tiles_changes_nothing(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 3, SW_CARRIER_HOST);
  /* A partial scatter result: tiles 0 and 1 valid, tile 2 invalid. */
  const int64_t pick[2] = {0, 1};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 2);
  const int64_t cshape[3] = {2, 3, 2};
  double cv[12];
  for (int i = 0; i < 12; ++i) cv[i] = i + 1;
  sw_tensor_t* compact = tt_dense(rt, cshape, 3, cv);
  sw_tensor_t* r = tt_scatter(&f, compact, f.full, sel, SW_SCATTER_REPLACE);
  tt_fix_t rf = f;
  rf.te = tt_carrier_of(r);
  rf.full = r;
  SW_OK_(tt_evict_sel(rf.te, sel)); /* tiles 0 and 1 clean in the secondary tier */
  const tt_snap_t snap = tt_snapshot(&rf);
  float all[18];
  for (int i = 0; i < 18; ++i) all[i] = -1.0f;
  SW_FAILS(sw_tensor_write(r, all, sizeof all), SW_ERROR_STATE, "invalid");
  const tt_snap_t after = tt_snapshot(&rf);
  const int64_t first[3] = {0, 0, 0};
  double v = 0;
  SW_OK_(sw_tensor_get(r, first, 3, &v));
  assert_int_equal(after.st[0].location, snap.st[0].location);
  assert_int_equal(after.st[0].dirty, snap.st[0].dirty);
  assert_true(v == cv[0]);
  tt_expect_snapshot(&rf, &snap);
  sw_carrier_release(rf.te);
  sw_tensor_release(r);
  sw_tensor_release(compact);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

/* A write whose slots start and end in one tile but pass through another
 * (canonical slots step to the next expert every slot) checks the tile in
 * between too: refused for the invalid tile, nothing changed. */
static void write_passing_through_an_invalid_tile_changes_nothing(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 3, SW_CARRIER_HOST);
  const int64_t pick[2] = {0, 1};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 2);
  const int64_t cshape[3] = {2, 3, 2};
  double cv[12];
  for (int i = 0; i < 12; ++i) cv[i] = i + 1;
  sw_tensor_t* compact = tt_dense(rt, cshape, 3, cv);
  sw_tensor_t* r = tt_scatter(&f, compact, f.full, sel, SW_SCATTER_REPLACE); /* tile 2 invalid */
  tt_fix_t rf = f;
  rf.te = tt_carrier_of(r);
  rf.full = r;
  const tt_snap_t snap = tt_snapshot(&rf);
  /* Slots 0..3: tiles 0, 1, 2 and 0 again. */
  sw_tensor_t* span = tt_tensor_over(rf.te, 0, "(4):(1)");
  const float four[4] = {-1.0f, -2.0f, -3.0f, -4.0f};
  SW_FAILS(sw_tensor_write(span, four, sizeof four), SW_ERROR_STATE, "invalid");
  tt_expect_snapshot(&rf, &snap);
  double v = 0;
  const int64_t first[3] = {0, 0, 0};
  SW_OK_(sw_tensor_get(r, first, 3, &v));
  assert_true(v == cv[0]);
  sw_tensor_release(span);
  sw_carrier_release(rf.te);
  sw_tensor_release(r);
  sw_tensor_release(compact);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

/* A temporary file holding `n` f32 values tile-major seeded; removed by the
 * caller. */
static void write_seed_file(char* path, size_t cap, int64_t ntiles, int64_t T) {
  snprintf(path, cap, "/tmp/sw_tiled_ro_XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  for (int64_t k = 0; k < ntiles; ++k)
    for (int64_t w = 0; w < T; ++w) {
      const float v = (float)tt_seed(k, w);
      assert_int_equal(write(fd, &v, sizeof v), (ssize_t)sizeof v);
    }
  close(fd);
}

static void evict_rejects_dirty_tile_into_read_only_secondary(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  char path[64];
  const int64_t grid[2] = {3, 1}, tile[2] = {1, 4};
  write_seed_file(path, sizeof path, 3, 4);
  sw_carrier_t* ro = NULL;
  SW_OK_(sw_carrier_open_file(rt, SW_DTYPE_F32, path, 0, 12, NULL, &ro));
  sw_carrier_t* p = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 0);
  tt_fix_t f;
  memset(&f, 0, sizeof f);
  f.rt = rt;
  f.dtype = SW_DTYPE_F32;
  tt_geometry(&f, 2, grid, tile);
  SW_OK_(sw_tiled_create(p, ro, grid, tile, 2, NULL, &f.te));
  SW_OK_(sw_tiled_full_tensor(f.te, &f.full));
  for (int64_t k = 0; k < 3; ++k) tt_expect_tile(&f, k, SW_TILE_SECONDARY, false);
  /* Tile 0 dirty, tile 1 primary and clean. */
  const int64_t ks[2] = {0, 1};
  sw_tile_set_t* s01 = tt_set_ordinals(&f, ks, 2);
  SW_OK_(sw_tiled_promote(f.te, s01));
  const int64_t at[2] = {0, 2};
  SW_OK_(sw_tensor_set(f.full, at, 2, -3.0));
  const tt_snap_t snap = tt_snapshot(&f);
  sw_await_t* a = NULL;
  SW_FAILS(sw_tiled_evict_async(f.te, s01, &a), SW_ERROR_STATE, "read-only");
  SW_FAILS(sw_tiled_evict(f.te, s01), SW_ERROR_STATE, "read-only");
  assert_null(a);
  tt_expect_snapshot(&f, &snap);
  double v = 0;
  SW_OK_(sw_tensor_get(f.full, at, 2, &v));
  assert_true(v == -3.0);
  /* Clean tiles can still be evicted. */
  const int64_t k1[1] = {1};
  sw_tile_set_t* s1 = tt_set_ordinals(&f, k1, 1);
  SW_OK_(sw_tiled_evict(f.te, s1));
  tt_expect_tile(&f, 1, SW_TILE_SECONDARY, false);
  tt_expect_tile(&f, 0, SW_TILE_PRIMARY, true);
  /* The user's file is untouched. */
  float raw[12];
  FILE* fp = fopen(path, "rb");
  assert_non_null(fp);
  assert_int_equal(fread(raw, sizeof(float), 12, fp), 12);
  fclose(fp);
  for (int i = 0; i < 12; ++i) assert_true(raw[i] == (float)tt_seed(i / 4, i % 4));
  sw_tile_set_release(s1);
  sw_tile_set_release(s01);
  sw_carrier_release(p);
  sw_carrier_release(ro);
  tt_free(&f);
  unlink(path);
  sw_runtime_release(rt);
}

/* A residency request failing after submission keeps the whole set's prior
 * state. */
static void residency_failure_after_submission_keeps_prior_state(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 4, SW_CARRIER_FILE);
  const int64_t ks[3] = {0, 2, 3};
  sw_tile_set_t* set = tt_set_ordinals(&f, ks, 3);
  tt_snap_t snap = tt_snapshot(&f);
  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_READ, 2));
  SW_FAILS(sw_tiled_promote(f.te, set), SW_ERROR_IO, NULL);
  tt_expect_snapshot(&f, &snap);
  SW_OK_(sw_tiled_promote(f.te, set));
  /* Dirty tiles and a failing write: eviction keeps all three primary. */
  for (int i = 0; i < 3; ++i) {
    int64_t c[3];
    tt_tile_coord(&f, ks[i], c);
    const int64_t at[3] = {c[0], 1, 1};
    SW_OK_(sw_tensor_set(f.full, at, 3, -1.0 - i));
  }
  snap = tt_snapshot(&f);
  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_WRITE, 2));
  SW_FAILS(sw_tiled_evict(f.te, set), SW_ERROR_IO, NULL);
  tt_expect_snapshot(&f, &snap);
  for (int i = 0; i < 3; ++i) {
    const int64_t at[3] = {ks[i], 1, 1};
    double v = 0;
    SW_OK_(sw_tensor_get(f.full, at, 3, &v));
    assert_true(v == -1.0 - i);
  }
  /* And succeeds once the fault is gone. */
  SW_OK_(sw_tiled_evict(f.te, set));
  for (int i = 0; i < 3; ++i) tt_expect_tile(&f, ks[i], SW_TILE_SECONDARY, false);
  for (int i = 0; i < 3; ++i) {
    const int64_t at[3] = {ks[i], 1, 1};
    double v = 0;
    SW_OK_(sw_tensor_get(f.full, at, 3, &v));
    assert_true(v == -1.0 - i);
  }
  sw_tile_set_release(set);
  tt_free(&f);
  sw_runtime_release(rt);
}

/* ---- tile values ----------------------------------------------------------- */

static void tile_set_rejects_bad_coordinates(void** state) {
  (void)state;
  sw_tile_set_t* s = NULL;
  const int64_t neg[4] = {0, 1, 2, -1};
  SW_FAILS(sw_tile_set_create(neg, 2, 2, &s), SW_ERROR_VALUE, "negative");
  const int64_t dup[6] = {1, 2, 0, 0, 1, 2};
  SW_FAILS(sw_tile_set_create(dup, 3, 2, &s), SW_ERROR_VALUE, "repeated");
  /* Coordinates of rank 0 cannot be non-empty, and NULL needs count 0. */
  SW_FAILS(sw_tile_set_create(neg, 2, 0, &s), SW_ERROR_VALUE, "rank");
  SW_FAILS(sw_tile_set_create(NULL, 2, 2, &s), SW_ERROR_VALUE, NULL);
  assert_null(s);
  /* Mixed ranks: through a plan whose fields disagree. */
  const int64_t a[2] = {0, 0}, b[3] = {1, 1, 1};
  sw_tile_set_t* r2 = tt_set(a, 1, 2);
  sw_tile_set_t* r3 = tt_set(b, 1, 3);
  sw_residency_plan_t* plan = NULL;
  SW_FAILS(sw_residency_plan_create(r2, r3, NULL, &plan), SW_ERROR_VALUE, "rank");
  SW_FAILS(sw_residency_plan_create(NULL, r2, r3, &plan), SW_ERROR_VALUE, "rank");
  assert_null(plan);
  sw_tile_set_release(r2);
  sw_tile_set_release(r3);
}

static void tile_selection_rejects_bad_axes(void** state) {
  (void)state;
  sw_tile_selection_t* s = NULL;
  const int64_t ok[2] = {0, 1}, dup[3] = {2, 0, 2}, neg[2] = {1, -3};
  /* No axes. */
  SW_FAILS(sw_tile_selection_create(NULL, NULL, 0, &s), SW_ERROR_VALUE, "at least one axis");
  /* An empty axis. */
  {
    const int64_t* axes[2] = {ok, ok};
    const size_t counts[2] = {2, 0};
    SW_FAILS(sw_tile_selection_create(axes, counts, 2, &s), SW_ERROR_VALUE, "empty");
  }
  /* A duplicate within an axis. */
  {
    const int64_t* axes[2] = {ok, dup};
    const size_t counts[2] = {2, 3};
    SW_FAILS(sw_tile_selection_create(axes, counts, 2, &s), SW_ERROR_VALUE, "repeats");
  }
  /* A negative coordinate. */
  {
    const int64_t* axes[1] = {neg};
    const size_t counts[1] = {2};
    SW_FAILS(sw_tile_selection_create(axes, counts, 1, &s), SW_ERROR_VALUE, "negative");
  }
  /* The same coordinate on different axes is fine. */
  {
    const int64_t* axes[2] = {ok, ok};
    const size_t counts[2] = {2, 2};
    SW_OK_(sw_tile_selection_create(axes, counts, 2, &s));
    sw_tile_selection_release(s);
  }
}

static void residency_plan_rejects_overlap_and_non_sets(void** state) {
  (void)state;
  const int64_t a[4] = {0, 0, 1, 0}, b[4] = {1, 0, 1, 1}, c[2] = {0, 1};
  sw_tile_set_t* sa = tt_set(a, 2, 2);
  sw_tile_set_t* sb = tt_set(b, 2, 2);
  sw_tile_set_t* sc = tt_set(c, 1, 2);
  sw_residency_plan_t* plan = NULL;
  SW_FAILS(sw_residency_plan_create(sa, sb, NULL, &plan), SW_ERROR_VALUE, "promote and retain");
  SW_FAILS(sw_residency_plan_create(sa, NULL, sb, &plan), SW_ERROR_VALUE, "promote and evict");
  SW_FAILS(sw_residency_plan_create(NULL, sa, sb, &plan), SW_ERROR_VALUE, "retain and evict");
  SW_FAILS(sw_residency_plan_create(sb, sc, sb, &plan), SW_ERROR_VALUE, NULL);
  /* A non-TileSet field. */
  sw_tile_selection_t* sel = tt_sel2(c, 2, c, 1);
  SW_FAILS(sw_residency_plan_create((const sw_tile_set_t*)(const void*)sel, NULL, NULL, &plan), SW_ERROR_TYPE,
           "TileSet");
  SW_FAILS(sw_residency_plan_create(NULL, NULL, (const sw_tile_set_t*)(const void*)sel, &plan), SW_ERROR_TYPE,
           "TileSet");
  assert_null(plan);
  /* Disjoint fields are fine; omitted ones are empty sets. */
  SW_OK_(sw_residency_plan_create(sa, sc, NULL, &plan));
  sw_tile_set_t* ev = NULL;
  SW_OK_(sw_residency_plan_evict(plan, &ev));
  size_t n = 9;
  SW_OK_(sw_tile_set_count(ev, &n));
  assert_int_equal(n, 0);
  sw_tile_set_t* pr = NULL;
  SW_OK_(sw_residency_plan_promote(plan, &pr));
  bool eq = false;
  SW_OK_(sw_tile_set_equal(pr, sa, &eq));
  assert_true(eq);
  sw_tile_set_release(pr);
  sw_tile_set_release(ev);
  sw_residency_plan_release(plan);
  sw_tile_selection_release(sel);
  sw_tile_set_release(sa);
  sw_tile_set_release(sb);
  sw_tile_set_release(sc);
}

/* A claimed primary seed stays a carrier: it reports its size, and public
 * access to the values the TiledEvictable took over fails STATE. */
static void claimed_seed_stays_a_carrier(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  const int64_t grid[1] = {2}, tile[1] = {4};
  sw_carrier_t* seed = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 8);
  sw_carrier_t* sec = tt_carrier(rt, SW_CARRIER_HOST, SW_DTYPE_F32, 0);
  tt_fill_tier(seed, SW_DTYPE_F32, 2, 4, 0.0);
  sw_carrier_t* te = NULL;
  SW_OK_(sw_tiled_create(seed, sec, grid, tile, 1, NULL, &te));
  assert_int_equal(sw_async_size(seed), 8);
  assert_true(tt_owned(seed));
  assert_false(tt_disposed(seed));
  float v[8];
  SW_FAILS(sw_carrier_read(seed, 0, 1, v), SW_ERROR_STATE, "owned by a TiledEvictable");
  SW_FAILS(sw_carrier_write(seed, 0, 1, v), SW_ERROR_STATE, "owned by a TiledEvictable");
  const int64_t extent = 8;
  sw_layout_t* l = NULL;
  SW_OK_(sw_layout_dense(&extent, 1, &l));
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_create(seed, 0, l, &t));
  SW_FAILS(sw_tensor_read(t, v, sizeof v), SW_ERROR_STATE, "owned by a TiledEvictable");
  sw_tensor_t* r = NULL;
  SW_FAILS(sw_relu(t, &r), SW_ERROR_STATE, "owned by a TiledEvictable");
  assert_null(r);
  if (TT_PRIMARY == SW_CARRIER_CPU) {
    void* p = NULL;
    SW_FAILS(sw_carrier_host_pointer(seed, &p), SW_ERROR_STATE, "owned by a TiledEvictable");
  }
  /* The values are the TiledEvictable's. */
  sw_tensor_t* full = NULL;
  SW_OK_(sw_tiled_full_tensor(te, &full));
  SW_OK_(sw_tensor_read(full, v, sizeof v));
  for (int i = 0; i < 8; ++i) assert_true(v[i] == (float)tt_seed(i / 4, i % 4));
  sw_tensor_release(full);
  sw_tensor_release(t);
  sw_layout_release(l);
  sw_carrier_release(te);
  sw_carrier_release(seed);
  sw_carrier_release(sec);
  sw_runtime_release(rt);
}

int main(void) {
  if (!tt_primary_available()) return 77;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(claimed_seed_stays_a_carrier),
      cmocka_unit_test(create_rejects_wrong_tier_kinds),
      cmocka_unit_test(create_rejects_partial_tier),
      cmocka_unit_test(create_rejects_bad_grid_or_tile),
      cmocka_unit_test(create_rejects_disposed_or_owned_tiers),
      cmocka_unit_test(create_rejects_policy_without_protocol),
      cmocka_unit_test(project_rejects_tensor_of_another_carrier),
      cmocka_unit_test(project_rejects_non_selection),
      cmocka_unit_test(project_rejects_incompatible_selection),
      cmocka_unit_test(project_rejects_wrong_destination_kind),
      cmocka_unit_test(project_rejects_released_or_owned_destination),
      cmocka_unit_test(project_rejects_destination_dtype),
      cmocka_unit_test(project_rejects_too_small_destination),
      cmocka_unit_test(project_rejects_released_carrier),
      cmocka_unit_test(project_rejects_invalid_tiles),
      cmocka_unit_test(project_failure_after_submission_publishes_nothing),
      cmocka_unit_test(residency_rejects_non_tile_set),
      cmocka_unit_test(residency_rejects_rank_or_range),
      cmocka_unit_test(residency_rejects_released_carrier),
      cmocka_unit_test(promote_rejects_invalid_tile),
      cmocka_unit_test(whole_write_over_invalid_tiles_changes_nothing),
      cmocka_unit_test(write_passing_through_an_invalid_tile_changes_nothing),
      cmocka_unit_test(evict_rejects_dirty_tile_into_read_only_secondary),
      cmocka_unit_test(residency_failure_after_submission_keeps_prior_state),
      cmocka_unit_test(tile_set_rejects_bad_coordinates),
      cmocka_unit_test(tile_selection_rejects_bad_axes),
      cmocka_unit_test(residency_plan_rejects_overlap_and_non_sets),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
