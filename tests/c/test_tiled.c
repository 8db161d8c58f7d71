/* TiledEvictable through the public ABI, one test per scenario of the
 * tiled-carrier-composition spec: geometry and tile footprints, TileSelection
 * order, projection (async, repeated observation, gather order), autograd
 * through projection, residency (promote, evict, prefetch, races, refusal of
 * hidden waits), direct ops on the full tensor, and release. Scatter, the
 * policy and the error rules have their own suites. */
#include "sw_tiled_test.h"

/* ---- shared fixtures ---------------------------------------------------- */

/* An expert weight (experts, 3, 2) with one whole expert per tile, seeded in
 * the secondary tier of `kind`. */
static void make_experts(tt_fix_t* f, sw_runtime_t* rt, int64_t experts, sw_carrier_kind_t kind) {
  const int64_t grid[3] = {experts, 1, 1}, tile[3] = {1, 3, 2};
  tt_make(f, rt, SW_DTYPE_F32, 3, grid, tile, false, kind, true, NULL);
}

/* A 4x4 tensor of 2x2 tiles seeded in a host secondary tier. */
static void make_4x4(tt_fix_t* f, sw_runtime_t* rt) {
  const int64_t grid[2] = {2, 2}, tile[2] = {2, 2};
  tt_make(f, rt, SW_DTYPE_F32, 2, grid, tile, false, SW_CARRIER_HOST, true, NULL);
}

static double* full_seed_values(const tt_fix_t* f) { return tt_canon_seed(f, 0.0); }

static void expect_full_seeded(const tt_fix_t* f) {
  double* e = full_seed_values(f);
  tt_expect_values(f->full, e, f->n);
  free(e);
}

static void expect_all(const tt_fix_t* f, sw_tile_location_t loc, bool dirty) {
  for (int64_t k = 0; k < f->ntiles; ++k) tt_expect_tile(f, k, loc, dirty);
}

/* Asserts that the full tensor handle still denotes the whole logical tensor
 * over f->te: carrier, shape, dense layout at offset 0. */
static void expect_full_tensor_intact(const tt_fix_t* f) {
  sw_carrier_t* c = tt_carrier_of(f->full);
  assert_ptr_equal(c, f->te);
  sw_carrier_release(c);
  tt_expect_shape(f->full, f->logical, f->rank);
  tt_expect_dense_layout(f->full);
  sw_dtype_t d;
  SW_OK_(sw_tensor_dtype(f->full, &d));
  assert_int_equal(d, f->dtype);
  size_t size = 0;
  SW_OK_(sw_carrier_size(f->te, &size));
  assert_int_equal(size, (size_t)f->n);
}

/* ---- the interleaving gather kernels ---------------------------------------- */

/* Raw bit pattern of element w of expert k, unique per (k, w) for the sizes
 * used here; copied bit for bit, never converted. */
static uint32_t pattern32(int64_t k, int64_t w) { return 0x3f000000u + (uint32_t)(k << 20) + (uint32_t)w; }
static uint16_t pattern16(int64_t k, int64_t w) { return (uint16_t)(0x3c00u + (uint16_t)((k * 251 + w * 7) & 0x3ff)); }

/* Whether element `o` of `buf` (elements of `es` bytes) holds the pattern of
 * element w of expert k. */
static bool holds_pattern(const unsigned char* buf, size_t o, size_t es, int64_t k, int64_t w) {
  return es == 4 ? ((const uint32_t*)buf)[o] == pattern32(k, w) : ((const uint16_t*)buf)[o] == pattern16(k, w);
}

/* Projects `count` experts out of (E, R, C) tiles of 1 x R x C held in a full
 * primary tier, checks every compact element bit for bit (the compact tensor
 * interleaves the experts element by element), then scatters the compact
 * tensor back with its experts reversed and checks the full result. Covers
 * the vector kernels (count a multiple of 4, f32 and bf16), their scalar
 * tails (R*C not a multiple of 4), the scalar path (other counts) and, for
 * transfers beyond the last-level cache, non-temporal stores. */
static void check_interleaved_gather(sw_runtime_t* rt, sw_dtype_t dtype, int64_t E, int64_t R, int64_t C,
                                     const int64_t* experts, size_t count) {
  const size_t es = dtype == SW_DTYPE_F32 ? 4 : 2;
  const int64_t T = R * C, n = E * T;
  unsigned char* tiles = malloc((size_t)n * es);
  for (int64_t k = 0; k < E; ++k)
    for (int64_t w = 0; w < T; ++w) {
      if (es == 4) ((uint32_t*)tiles)[k * T + w] = pattern32(k, w);
      else ((uint16_t*)tiles)[k * T + w] = pattern16(k, w);
    }
  sw_carrier_t *p = NULL, *sec = NULL, *te = NULL;
  p = tt_carrier(rt, TT_PRIMARY, dtype, (size_t)n);
  SW_OK_(sw_carrier_write(p, 0, (size_t)n, tiles));
  SW_OK_(sw_carrier_create_host(rt, dtype, 0, &sec));
  const int64_t grid[3] = {E, 1, 1}, tile[3] = {1, R, C};
  SW_OK_(sw_tiled_create(p, sec, grid, tile, 3, NULL, &te));
  sw_tensor_t* full = NULL;
  SW_OK_(sw_tiled_full_tensor(te, &full));
  const int64_t zero = 0;
  const int64_t* axes[3] = {experts, &zero, &zero};
  const size_t counts[3] = {count, 1, 1};
  sw_tile_selection_t* sel = NULL;
  SW_OK_(sw_tile_selection_create(axes, counts, 3, &sel));
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_project(te, full, sel, NULL, &a));
  sw_tensor_t* compact = tt_wait_result(a);
  sw_await_release(a);
  const size_t cn = count * (size_t)T;
  unsigned char* got = malloc(cn * es);
  SW_OK_(sw_tensor_read(compact, got, cn * es));
  size_t wrong = 0;
  for (int64_t w = 0; w < T; ++w)
    for (size_t s = 0; s < count; ++s) {
      const size_t o = (size_t)w * count + s; /* expert mode fastest */
      if (!holds_pattern(got, o, es, experts[s], w))
        ++wrong;
    }
  assert_int_equal(wrong, 0);

  /* Scatter back with the experts reversed: expert experts[count-1-s] gets
   * what the projection gathered from experts[s]. */
  int64_t reversed[64];
  for (size_t s = 0; s < count; ++s) reversed[s] = experts[count - 1 - s];
  const int64_t* raxes[3] = {reversed, &zero, &zero};
  sw_tile_selection_t* rsel = NULL;
  SW_OK_(sw_tile_selection_create(raxes, counts, 3, &rsel));
  SW_OK_(sw_tiled_scatter(te, compact, full, rsel, SW_SCATTER_REPLACE, &a));
  sw_tensor_t* result = tt_wait_result(a);
  sw_await_release(a);
  /* Only the scattered tiles are valid in the result: project them back. */
  sw_carrier_t* rte = tt_carrier_of(result);
  SW_OK_(sw_tiled_project(rte, result, rsel, NULL, &a));
  sw_tensor_t* again = tt_wait_result(a);
  sw_await_release(a);
  unsigned char* back = malloc(cn * es);
  SW_OK_(sw_tensor_read(again, back, cn * es));
  assert_memory_equal(back, got, cn * es);
  free(back);
  sw_tensor_release(again);
  sw_carrier_release(rte);
  /* The whole tensor read element order: canonical, expert mode fastest. */
  unsigned char* all = malloc((size_t)n * es);
  SW_OK_(sw_tensor_read(full, all, (size_t)n * es));
  wrong = 0;
  for (int64_t k = 0; k < E; ++k)
    for (int64_t w = 0; w < T; ++w) {
      const size_t o = (size_t)(w * E + k);
      if (!holds_pattern(all, o, es, k, w)) ++wrong;
    }
  assert_int_equal(wrong, 0);
  free(all);
  free(got);
  free(tiles);
  sw_tensor_release(result);
  sw_tensor_release(compact);
  sw_tile_selection_release(rsel);
  sw_tile_selection_release(sel);
  sw_tensor_release(full);
  sw_carrier_release(te);
  sw_carrier_release(p);
  sw_carrier_release(sec);
}

static void interleaved_gathers_copy_bit_for_bit(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  const int64_t four[4] = {5, 1, 6, 2}, eight[8] = {3, 7, 0, 5, 1, 6, 2, 4}, six[6] = {6, 0, 4, 1, 7, 3};
  const sw_dtype_t dtypes[2] = {SW_DTYPE_F32, SW_DTYPE_BF16};
  for (int d = 0; d < 2; ++d) {
    check_interleaved_gather(rt, dtypes[d], 8, 3, 5, four, 4);    /* 15 elements: a vector step and a tail */
    check_interleaved_gather(rt, dtypes[d], 8, 33, 31, eight, 8); /* several steps, tail of 3 */
    check_interleaved_gather(rt, dtypes[d], 8, 7, 9, six, 6);     /* scalar path */
  }
  /* 8 x 3 MiB of f32: past the streaming threshold. */
  check_interleaved_gather(rt, SW_DTYPE_F32, 8, 1024, 776, eight, 8);
  sw_runtime_release(rt);
}

/* ---- creation ----------------------------------------------------------- */

static void seeds_decide_initial_residency(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  const int64_t grid[2] = {3, 2}, tile[2] = {2, 3};
  tt_fix_t f;

  /* Secondary seed only: every tile secondary, clean. */
  tt_make(&f, rt, SW_DTYPE_F32, 2, grid, tile, false, SW_CARRIER_HOST, true, NULL);
  expect_all(&f, SW_TILE_SECONDARY, false);
  tt_expect_tile_sets_consistent(&f);
  expect_full_seeded(&f);
  assert_int_equal(tt_version(f.te), 0);
  tt_free(&f);

  /* Primary seed only: every tile primary and dirty (no copy elsewhere). */
  tt_make(&f, rt, SW_DTYPE_F32, 2, grid, tile, true, SW_CARRIER_HOST, false, NULL);
  expect_all(&f, SW_TILE_PRIMARY, true);
  tt_expect_tile_sets_consistent(&f);
  expect_full_seeded(&f);
  sw_carrier_t *p = NULL, *s = NULL;
  SW_OK_(sw_tiled_primary(f.te, &p));
  SW_OK_(sw_tiled_secondary(f.te, &s));
  assert_true(tt_owned(p));
  assert_true(tt_owned(s));
  assert_int_equal(tt_kind(p), TT_PRIMARY);
  assert_int_equal(tt_kind(s), SW_CARRIER_HOST);
  sw_carrier_release(p);
  sw_carrier_release(s);
  /* Evicting keeps the values: they are written to the secondary tier. */
  sw_tile_set_t* all = NULL;
  {
    int64_t ks[6] = {0, 1, 2, 3, 4, 5};
    all = tt_set_ordinals(&f, ks, 6);
  }
  SW_OK_(sw_tiled_evict(f.te, all));
  expect_all(&f, SW_TILE_SECONDARY, false);
  expect_full_seeded(&f);
  assert_int_equal(tt_version(f.te), 0);
  sw_tile_set_release(all);
  tt_free(&f);

  /* Both seeds: the primary values win and are dirty. */
  tt_make(&f, rt, SW_DTYPE_F32, 2, grid, tile, true, SW_CARRIER_FILE, true, NULL);
  expect_all(&f, SW_TILE_PRIMARY, true);
  expect_full_seeded(&f);
  tt_free(&f);

  /* No seed: every tile invalid, and reading fails STATE. */
  tt_make(&f, rt, SW_DTYPE_F32, 2, grid, tile, false, SW_CARRIER_ZSTD, false, NULL);
  expect_all(&f, SW_TILE_INVALID, false);
  tt_expect_tile_sets_consistent(&f);
  float buf[36];
  SW_FAILS(sw_tensor_read(f.full, buf, sizeof buf), SW_ERROR_STATE, "invalid");
  tt_free(&f);

  /* Tier kinds: zstd and file secondaries, f64. */
  tt_make(&f, rt, SW_DTYPE_F64, 2, grid, tile, false, SW_CARRIER_ZSTD, true, NULL);
  expect_all(&f, SW_TILE_SECONDARY, false);
  expect_full_seeded(&f);
  tt_free(&f);
  sw_runtime_release(rt);
}

/* Requirement: TiledEvictable owns one flat logical storage extent. */
static void promote_one_expert_tile(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 4, SW_CARRIER_HOST);
  int64_t rank_out = 0;
  size_t rank = 0;
  SW_OK_(sw_tiled_rank(f.te, &rank));
  assert_int_equal(rank, 3);
  int64_t g[3], t[3];
  SW_OK_(sw_tiled_grid_shape(f.te, g, 3));
  SW_OK_(sw_tiled_tile_shape(f.te, t, 3));
  assert_int_equal(g[0], 4);
  assert_int_equal(t[1], 3);
  (void)rank_out;
  expect_all(&f, SW_TILE_SECONDARY, false);
  sw_layout_t* before = NULL;
  SW_OK_(sw_tensor_layout(f.full, &before));

  const int64_t expert2[3] = {2, 0, 0};
  sw_tile_set_t* one = tt_set(expert2, 1, 3);
  SW_OK_(sw_tiled_promote(f.te, one));

  for (int64_t k = 0; k < 4; ++k) tt_expect_tile(&f, k, k == 2 ? SW_TILE_PRIMARY : SW_TILE_SECONDARY, false);
  tt_expect_tile_sets_consistent(&f);
  expect_full_tensor_intact(&f);
  sw_layout_t* after = NULL;
  SW_OK_(sw_tensor_layout(f.full, &after));
  bool same = false;
  SW_OK_(sw_layout_equal(before, after, &same));
  assert_true(same);
  assert_int_equal(tt_version(f.te), 0);
  expect_full_seeded(&f);

  /* Repeating the satisfied request is idempotent. */
  SW_OK_(sw_tiled_promote(f.te, one));
  for (int64_t k = 0; k < 4; ++k) tt_expect_tile(&f, k, k == 2 ? SW_TILE_PRIMARY : SW_TILE_SECONDARY, false);
  assert_int_equal(tt_version(f.te), 0);

  /* A fresh full-tensor handle denotes the same logical tensor. */
  sw_tensor_t* again = NULL;
  SW_OK_(sw_tiled_full_tensor(f.te, &again));
  double* e = full_seed_values(&f);
  tt_expect_values(again, e, f.n);
  free(e);
  sw_tensor_release(again);

  sw_layout_release(before);
  sw_layout_release(after);
  sw_tile_set_release(one);
  tt_free(&f);
  sw_runtime_release(rt);
}

/* ---- tile footprints ---------------------------------------------------- */

/* Requirement: Tensor Layout compatibility preserves exact tile footprints. */
static void accept_within_tile_permutation(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_4x4(&f, rt);
  sw_tensor_t* p = tt_tensor_over(f.te, 0, "((2,2),(2,2)):((4,2),(1,8))");
  double* canon = full_seed_values(&f);
  double* lp = tt_logical_of(&f, canon, p);
  /* The permutation is real: it differs from the canonical full tensor. */
  assert_true(memcmp(lp, canon, sizeof(double) * (size_t)f.n) != 0);
  tt_expect_values(p, lp, f.n);

  /* Projection gathers through P's layout. */
  const int64_t a0[2] = {1, 0}, a1[2] = {1, 0}, one[1] = {1};
  sw_tile_selection_t* sel = tt_sel2(a0, 2, a1, 2);
  sw_tensor_t* c = tt_project(&f, p, sel, NULL);
  int64_t cn = 0;
  double* ce = tt_compact_expect(&f, lp, sel, &cn);
  tt_expect_values(c, ce, cn);
  tt_expect_dense_layout(c);
  free(ce);
  sw_tensor_release(c);

  /* Direct execution consumes the logical values defined by the layout. */
  sw_tensor_t* sum = NULL;
  const int64_t axis0 = 0;
  SW_OK_(sw_reduce_sum(p, &axis0, 1, false, &sum));
  double col[4] = {0, 0, 0, 0};
  for (int64_t o = 0; o < 16; ++o) col[o / 4] += lp[o];
  tt_expect_values(sum, col, 4);
  sw_tensor_release(sum);
  sw_tensor_t* added = NULL;
  SW_OK_(sw_add(p, f.full, &added));
  double both[16];
  for (int64_t o = 0; o < 16; ++o) both[o] = lp[o] + canon[o];
  tt_expect_values(added, both, 16);
  sw_tensor_release(added);

  /* Scatter writes through the template's layout; projecting back with the
   * same selection reproduces compact. */
  sw_tile_selection_t* part = tt_sel2(one, 1, a1, 2);
  double cv[8];
  for (int i = 0; i < 8; ++i) cv[i] = 1000 + i;
  const int64_t cshape[2] = {2, 4};
  sw_tensor_t* compact = tt_dense(rt, cshape, 2, cv);
  sw_tensor_t* r = tt_scatter(&f, compact, p, part, SW_SCATTER_REPLACE);
  sw_layout_t *rl = NULL, *pl = NULL;
  SW_OK_(sw_tensor_layout(r, &rl));
  SW_OK_(sw_tensor_layout(p, &pl));
  bool eq = false;
  SW_OK_(sw_layout_equal(rl, pl, &eq));
  assert_true(eq);
  sw_carrier_t* rte = tt_carrier_of(r);
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_project(rte, r, part, NULL, &a));
  sw_tensor_t* back = tt_wait_result(a);
  tt_expect_values(back, cv, 8);
  sw_tensor_release(back);
  sw_await_release(a);
  sw_carrier_release(rte);
  sw_layout_release(rl);
  sw_layout_release(pl);
  sw_tensor_release(r);
  sw_tensor_release(compact);

  /* Backward through projection scatter-adds at P's logical positions. */
  SW_OK_(sw_tensor_set_requires_grad(p, true));
  sw_tensor_t* proj = tt_project(&f, p, part, NULL);
  double wv[8];
  for (int i = 0; i < 8; ++i) wv[i] = 0.5 * (i + 1);
  sw_tensor_t* w = tt_dense(rt, cshape, 2, wv);
  sw_tensor_t *y = NULL, *loss = NULL;
  SW_OK_(sw_elementwise_mul(proj, w, &y));
  SW_OK_(sw_reduce_sum(y, NULL, 0, false, &loss));
  SW_OK_(sw_backward(loss, NULL, false));
  sw_tensor_t* g = NULL;
  SW_OK_(sw_tensor_grad(p, &g));
  assert_non_null(g);
  double zeros[16] = {0};
  double* ge = tt_scatter_expect(&f, zeros, part, wv, false);
  tt_expect_values(g, ge, 16);
  free(ge);
  sw_tensor_release(g);
  sw_tensor_release(loss);
  sw_tensor_release(y);
  sw_tensor_release(w);
  sw_tensor_release(proj);

  /* Backward through a direct op on P. */
  SW_OK_(sw_tensor_clear_grad(p));
  double vv[16];
  for (int i = 0; i < 16; ++i) vv[i] = i - 3;
  const int64_t full_shape[2] = {4, 4};
  sw_tensor_t* v = tt_dense(rt, full_shape, 2, vv);
  SW_OK_(sw_elementwise_mul(p, v, &y));
  SW_OK_(sw_reduce_sum(y, NULL, 0, false, &loss));
  SW_OK_(sw_backward(loss, NULL, false));
  SW_OK_(sw_tensor_grad(p, &g));
  tt_expect_values(g, vv, 16);
  sw_tensor_release(g);
  sw_tensor_release(loss);
  sw_tensor_release(y);
  sw_tensor_release(v);

  /* The source values never changed. */
  tt_expect_values(p, lp, 16);
  assert_int_equal(tt_version(f.te), 0);
  sw_tile_selection_release(sel);
  sw_tile_selection_release(part);
  free(lp);
  free(canon);
  sw_tensor_release(p);
  tt_free(&f);
  sw_runtime_release(rt);
}

/* Every accepting entry point refuses `layout` over a 4x4 / 2x2 carrier with
 * VALUE before any state changes. */
static void expect_footprints_refused(const char* layout) {
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_4x4(&f, rt);
  const int64_t tile00[2] = {0, 0};
  sw_tile_set_t* t00 = tt_set(tile00, 1, 2);
  SW_OK_(sw_tiled_promote(f.te, t00)); /* mixed residency */
  sw_tile_set_release(t00);
  sw_tensor_t* t = tt_tensor_over(f.te, 0, layout);
  SW_OK_(sw_tensor_set_requires_grad(t, true));
  const tt_snap_t snap = tt_snapshot(&f);
  const int64_t ax[2] = {0, 1};
  sw_tile_selection_t* all = tt_sel2(ax, 2, ax, 2);
  sw_carrier_t* dst = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 0);
  sw_await_t* a = NULL;

  SW_FAILS(sw_tiled_project(f.te, t, all, NULL, &a), SW_ERROR_VALUE, "footprint");
  SW_FAILS(sw_tiled_project(f.te, t, all, dst, &a), SW_ERROR_VALUE, "footprint");
  assert_null(a);
  assert_false(tt_owned(dst));
  assert_int_equal(sw_async_size(dst), 0);
  assert_int_equal(tt_version(dst), 0);

  const int64_t shape[2] = {4, 4};
  double zeros[16] = {0};
  sw_tensor_t* compact = tt_dense(rt, shape, 2, zeros);
  SW_FAILS(sw_tiled_scatter(f.te, compact, t, all, SW_SCATTER_REPLACE, &a), SW_ERROR_VALUE, "footprint");
  SW_FAILS(sw_tiled_scatter(f.te, compact, t, all, SW_SCATTER_ADD, &a), SW_ERROR_VALUE, "footprint");
  assert_null(a);

  sw_tensor_t* out = NULL;
  SW_FAILS(sw_reduce_sum(t, NULL, 0, false, &out), SW_ERROR_VALUE, "footprint");
  SW_FAILS(sw_add(t, compact, &out), SW_ERROR_VALUE, "footprint");
  SW_FAILS(sw_add(compact, t, &out), SW_ERROR_VALUE, "footprint");
  SW_FAILS(sw_elementwise_mul(t, compact, &out), SW_ERROR_VALUE, "footprint");
  SW_FAILS(sw_mul(t, compact, &out), SW_ERROR_VALUE, "footprint");
  SW_FAILS(sw_mul_scalar(t, 2.0, &out), SW_ERROR_VALUE, "footprint");
  SW_FAILS(sw_scalar_mul(2.0, t, &out), SW_ERROR_VALUE, "footprint");
  SW_FAILS(sw_relu(t, &out), SW_ERROR_VALUE, "footprint");
  SW_FAILS(sw_matmul(t, compact, &out), SW_ERROR_VALUE, "footprint");
  SW_FAILS(sw_matmul(compact, t, &out), SW_ERROR_VALUE, "footprint");
  assert_null(out);

  /* Nothing changed: residency, versions, claims, autograd. */
  tt_expect_snapshot(&f, &snap);
  bool leaf = false;
  SW_OK_(sw_tensor_is_leaf(t, &leaf));
  assert_true(leaf);
  sw_tensor_t* g = NULL;
  SW_OK_(sw_tensor_grad(t, &g));
  assert_null(g);
  assert_false(tt_owned(compact == NULL ? dst : dst));
  expect_full_seeded(&f);

  sw_tensor_release(compact);
  sw_carrier_release(dst);
  sw_tile_selection_release(all);
  sw_tensor_release(t);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void reject_logical_tile_spanning_tiles(void** state) {
  (void)state;
  /* Logical rows {0,1} reach canonical rows {0,2}: two carrier tiles. */
  expect_footprints_refused("((2,2),4):((2,1),4)");
}

static void reject_aliasing(void** state) {
  (void)state;
  /* Within-tile column coordinate has stride 0: slots repeat. */
  expect_footprints_refused("((2,2),(2,2)):((1,2),(0,8))");
}

static void reject_incomplete_coverage(void** state) {
  (void)state;
  /* The first within-tile row coordinate has stride 0: each logical tile
   * misses half of its carrier tile's slots. */
  expect_footprints_refused("((2,2),(2,2)):((0,2),(4,8))");
}

static void reject_tile_coordinate_remapping(void** state) {
  (void)state;
  /* A transpose: logical tile (1,0) reaches exactly carrier tile (0,1). */
  expect_footprints_refused("(4,4):(4,1)");
}

/* Offsets count too: a shifted tensor is refused. */
static void reject_shifted_offset(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  const int64_t grid[1] = {4}, tile[1] = {2};
  tt_make(&f, rt, SW_DTYPE_F32, 1, grid, tile, false, SW_CARRIER_HOST, true, NULL);
  /* Slots 1..7 reversed... simply: 8 logical values at stride -1 from 7. */
  sw_tensor_t* rev = tt_tensor_over(f.te, 7, "8:-1");
  const int64_t ax[4] = {0, 1, 2, 3};
  sw_tile_selection_t* all = tt_sel1(ax, 4);
  sw_await_t* a = NULL;
  SW_FAILS(sw_tiled_project(f.te, rev, all, NULL, &a), SW_ERROR_VALUE, "footprint");
  expect_all(&f, SW_TILE_SECONDARY, false);
  sw_tile_selection_release(all);
  sw_tensor_release(rev);
  tt_free(&f);
  sw_runtime_release(rt);
}

/* ---- TileSelection ------------------------------------------------------ */

static void select_three_experts_in_router_order(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 20, SW_CARRIER_HOST);
  const int64_t router[3] = {2, 7, 19};
  sw_tile_selection_t* sel = tt_sel_experts(&f, router, 3);
  size_t rank = 0, count = 0;
  SW_OK_(sw_tile_selection_rank(sel, &rank));
  SW_OK_(sw_tile_selection_count(sel, &count));
  assert_int_equal(rank, 3);
  assert_int_equal(count, 3);
  int64_t cg[3];
  SW_OK_(sw_tile_selection_compact_grid_shape(sel, cg, 3));
  assert_int_equal(cg[0], 3);
  assert_int_equal(cg[1], 1);
  assert_int_equal(cg[2], 1);
  int64_t ax[3];
  SW_OK_(sw_tile_selection_axis(sel, 0, ax, 3));
  assert_int_equal(ax[0], 2);
  assert_int_equal(ax[1], 7);
  assert_int_equal(ax[2], 19);
  int64_t coords[9];
  SW_OK_(sw_tile_selection_coordinates(sel, coords, 9));
  const int64_t want[9] = {2, 0, 0, 7, 0, 0, 19, 0, 0};
  for (int i = 0; i < 9; ++i) assert_int_equal(coords[i], want[i]);

  /* The compact expert axis holds tiles 2, 7 and 19 in that order. */
  sw_tensor_t* c = tt_project(&f, f.full, sel, NULL);
  const int64_t cshape[3] = {3, 3, 2};
  tt_expect_shape(c, cshape, 3);
  for (int64_t e = 0; e < 3; ++e)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t coord[3] = {e, i, j};
        double v = 0;
        SW_OK_(sw_tensor_get(c, coord, 3, &v));
        assert_true(v == tt_seed(router[e], i + 3 * j));
      }
  sw_tensor_release(c);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void include_every_recombined_corner(void** state) {
  (void)state;
  const int64_t a[2] = {0, 1};
  sw_tile_selection_t* sel = tt_sel2(a, 2, a, 2);
  size_t count = 0;
  SW_OK_(sw_tile_selection_count(sel, &count));
  assert_int_equal(count, 4);
  int64_t c[8];
  SW_OK_(sw_tile_selection_coordinates(sel, c, 8));
  const int64_t want[8] = {0, 0, 1, 0, 0, 1, 1, 1};
  for (int i = 0; i < 8; ++i) assert_int_equal(c[i], want[i]);
  sw_tile_set_t* set = NULL;
  SW_OK_(sw_tile_selection_tile_set(sel, &set));
  const int64_t corners[8] = {1, 1, 0, 0, 0, 1, 1, 0};
  sw_tile_set_t* expect = tt_set(corners, 4, 2);
  bool eq = false;
  SW_OK_(sw_tile_set_equal(set, expect, &eq));
  assert_true(eq);
  sw_tile_set_release(expect);
  sw_tile_set_release(set);
  sw_tile_selection_release(sel);
}

static void enumerate_multi_axis_selection(void** state) {
  (void)state;
  const int64_t a0[2] = {7, 2}, a1[2] = {4, 9};
  sw_tile_selection_t* sel = tt_sel2(a0, 2, a1, 2);
  int64_t c[8];
  SW_OK_(sw_tile_selection_coordinates(sel, c, 8));
  const int64_t want[8] = {7, 4, 2, 4, 7, 9, 2, 9};
  for (int i = 0; i < 8; ++i) assert_int_equal(c[i], want[i]);
  /* The caller's order is kept per axis; the tile set is sorted. */
  int64_t ax[2];
  SW_OK_(sw_tile_selection_axis(sel, 0, ax, 2));
  assert_int_equal(ax[0], 7);
  assert_int_equal(ax[1], 2);
  sw_tile_set_t* set = NULL;
  SW_OK_(sw_tile_selection_tile_set(sel, &set));
  int64_t s[8];
  SW_OK_(sw_tile_set_coordinates(set, s, 8));
  const int64_t sorted[8] = {2, 4, 7, 4, 2, 9, 7, 9};
  for (int i = 0; i < 8; ++i) assert_int_equal(s[i], sorted[i]);
  /* Selections compare by per-axis order. */
  const int64_t b0[2] = {2, 7};
  sw_tile_selection_t* other = tt_sel2(b0, 2, a1, 2);
  bool eq = true;
  SW_OK_(sw_tile_selection_equal(sel, other, &eq));
  assert_false(eq);
  sw_tile_selection_release(other);
  sw_tile_set_release(set);
  sw_tile_selection_release(sel);
}

static void represent_non_product_cache_set(void** state) {
  (void)state;
  const int64_t coords[6] = {0, 1, 1, 0, 0, 0};
  sw_tile_set_t* set = tt_set(coords, 3, 2);
  size_t count = 0, rank = 0;
  SW_OK_(sw_tile_set_count(set, &count));
  SW_OK_(sw_tile_set_rank(set, &rank));
  assert_int_equal(count, 3);
  assert_int_equal(rank, 2);
  int64_t c[6];
  SW_OK_(sw_tile_set_coordinates(set, c, 6));
  const int64_t sorted[6] = {0, 0, 1, 0, 0, 1};
  for (int i = 0; i < 6; ++i) assert_int_equal(c[i], sorted[i]);
  /* It is a valid residency request too. */
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_4x4(&f, rt);
  SW_OK_(sw_tiled_promote(f.te, set));
  tt_expect_tile(&f, 0, SW_TILE_PRIMARY, false);
  tt_expect_tile(&f, 1, SW_TILE_PRIMARY, false);
  tt_expect_tile(&f, 2, SW_TILE_PRIMARY, false);
  tt_expect_tile(&f, 3, SW_TILE_SECONDARY, false);
  tt_expect_tile_sets_consistent(&f);
  SW_OK_(sw_tiled_evict(f.te, set));
  expect_all(&f, SW_TILE_SECONDARY, false);
  /* The empty set is rank-agnostic and valid. */
  sw_tile_set_t* empty = tt_set(NULL, 0, 0);
  SW_OK_(sw_tile_set_rank(empty, &rank));
  assert_int_equal(rank, 0);
  SW_OK_(sw_tiled_promote(f.te, empty));
  SW_OK_(sw_tiled_evict(f.te, empty));
  expect_all(&f, SW_TILE_SECONDARY, false);
  sw_tile_set_release(empty);
  tt_free(&f);
  sw_runtime_release(rt);
  sw_tile_set_release(set);
}

/* ---- projection --------------------------------------------------------- */

/* A file-tier expert tensor with tiles big enough that reading them takes a
 * moment. */
static void make_big_file_experts(tt_fix_t* f, sw_runtime_t* rt, int64_t experts, int64_t rows) {
  const int64_t grid[2] = {experts, 1}, tile[2] = {1, rows};
  tt_make(f, rt, SW_DTYPE_F32, 2, grid, tile, false, SW_CARRIER_FILE, true, NULL);
}

static void overlap_projection_with_computation(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_big_file_experts(&f, rt, 8, 1 << 16);
  const int64_t pick[3] = {5, 1, 6}, zero[1] = {0};
  sw_tile_selection_t* sel = tt_sel2(pick, 3, zero, 1);
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_project(f.te, f.full, sel, NULL, &a));
  sw_await_kind_t kind;
  SW_OK_(sw_await_kind(a, &kind));
  assert_int_equal(kind, SW_AWAIT_PROJECTION);
  const sw_await_status_t st = sw_async_status(a);
  assert_true(st == SW_AWAIT_PENDING || st == SW_AWAIT_SUCCEEDED);
  /* Unrelated computation while the projection runs. */
  const int64_t shape[1] = {4};
  const double x[4] = {1, 2, 3, 4}, y[4] = {10, 20, 30, 40}, z[4] = {11, 22, 33, 44};
  sw_tensor_t* tx = tt_dense(rt, shape, 1, x);
  sw_tensor_t* ty = tt_dense(rt, shape, 1, y);
  sw_tensor_t* tz = NULL;
  SW_OK_(sw_add(tx, ty, &tz));
  tt_expect_values(tz, z, 4);
  /* The source is not blocked for readers meanwhile. */
  const int64_t c0[2] = {0, 0};
  double v = 0;
  SW_OK_(sw_tensor_get(f.full, c0, 2, &v));
  assert_true(v == tt_seed(0, 0));

  sw_tensor_t* r = tt_wait_result(a);
  const int64_t rows = 1 << 16;
  const int64_t cshape[2] = {3, rows};
  tt_expect_shape(r, cshape, 2);
  tt_expect_dense_layout(r);
  double* canon = full_seed_values(&f);
  int64_t n = 0;
  double* e = tt_compact_expect(&f, canon, sel, &n);
  tt_expect_values(r, e, n);
  free(e);
  free(canon);
  for (int64_t k = 0; k < 8; ++k)
    tt_expect_tile(&f, k, (k == 5 || k == 1 || k == 6) ? SW_TILE_PRIMARY : SW_TILE_SECONDARY, false);
  sw_tensor_release(r);
  sw_tensor_release(tx);
  sw_tensor_release(ty);
  sw_tensor_release(tz);
  sw_await_release(a);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void observe_completed_projection_repeatedly(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 5, SW_CARRIER_ZSTD);
  const int64_t pick[2] = {4, 0};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 2);
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_project(f.te, f.full, sel, NULL, &a));
  SW_OK_(sw_await_wait(a, -1));
  SW_OK_(sw_await_wait(a, -1));
  SW_OK_(sw_await_wait(a, 0));
  sw_tensor_t *r1 = NULL, *r2 = NULL, *r3 = NULL;
  SW_OK_(sw_await_result(a, &r1));
  SW_OK_(sw_await_result(a, &r2));
  SW_OK_(sw_await_wait(a, -1));
  SW_OK_(sw_await_result(a, &r3));
  assert_non_null(r1);
  assert_ptr_equal(r1, r2);
  assert_ptr_equal(r1, r3);
  assert_int_equal(sw_async_status(a), SW_AWAIT_SUCCEEDED);
  /* The destination was written once. */
  sw_carrier_t* c = tt_carrier_of(r1);
  assert_int_equal(tt_version(c), 1);
  assert_false(tt_owned(c));
  assert_int_equal(tt_kind(c), TT_PRIMARY);
  sw_carrier_release(c);
  sw_tensor_release(r1);
  sw_tensor_release(r2);
  sw_tensor_release(r3);
  sw_await_release(a);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void keep_full_tensor_unchanged(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 6, SW_CARRIER_HOST);
  SW_OK_(sw_tensor_set_requires_grad(f.full, true));
  const int64_t pick[3] = {3, 0, 5};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 3);
  sw_tensor_t* c = tt_project(&f, f.full, sel, NULL);
  expect_full_tensor_intact(&f);
  expect_full_seeded(&f);
  assert_int_equal(tt_version(f.te), 0);
  bool leaf = false, rg = false;
  SW_OK_(sw_tensor_is_leaf(f.full, &leaf));
  SW_OK_(sw_tensor_requires_grad(f.full, &rg));
  assert_true(leaf);
  assert_true(rg);
  /* Only residency metadata differs: the selected tiles stay primary. */
  for (int64_t k = 0; k < 6; ++k)
    tt_expect_tile(&f, k, (k == 3 || k == 0 || k == 5) ? SW_TILE_PRIMARY : SW_TILE_SECONDARY, false);
  tt_expect_tile_sets_consistent(&f);
  /* Projection result: not a leaf (one gather node), its own CPU carrier. */
  SW_OK_(sw_tensor_is_leaf(c, &leaf));
  assert_false(leaf);
  sw_tensor_release(c);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void gather_permuted_selection(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 20, SW_CARRIER_FILE);
  const int64_t pick[3] = {7, 2, 19};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 3);
  sw_tensor_t* c = tt_project(&f, f.full, sel, NULL);
  tt_expect_dense_layout(c);
  /* Successive compact experts hold tiles 7, 2, 19. */
  int64_t n = 0;
  double* got = sw_test_values(c, &n);
  assert_int_equal(n, 18);
  for (int64_t e = 0; e < 3; ++e)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 2; ++j) assert_true(got[e + 3 * (i + 3 * j)] == tt_seed(pick[e], i + 3 * j));
  free(got);
  sw_tensor_release(c);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void gather_multi_axis_selection(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  const int64_t grid[2] = {8, 10}, tile[2] = {2, 3};
  tt_make(&f, rt, SW_DTYPE_F32, 2, grid, tile, false, SW_CARRIER_ZSTD, true, NULL);
  const int64_t a0[2] = {7, 2}, a1[2] = {4, 9};
  sw_tile_selection_t* sel = tt_sel2(a0, 2, a1, 2);
  sw_tensor_t* c = tt_project(&f, f.full, sel, NULL);
  const int64_t cshape[2] = {4, 6};
  tt_expect_shape(c, cshape, 2);
  /* Compact tile j (first mode fastest) holds source tile coords[j]. */
  const int64_t src[4][2] = {{7, 4}, {2, 4}, {7, 9}, {2, 9}};
  for (int64_t j = 0; j < 4; ++j) {
    const int64_t cy0 = (j % 2) * 2, cy1 = (j / 2) * 3;
    const int64_t k = src[j][0] + 8 * src[j][1];
    for (int64_t u = 0; u < 2; ++u)
      for (int64_t v = 0; v < 3; ++v) {
        const int64_t coord[2] = {cy0 + u, cy1 + v};
        double x = 0;
        SW_OK_(sw_tensor_get(c, coord, 2, &x));
        if (x != tt_seed(k, u + 2 * v))
          fail_msg("compact tile %lld element (%lld,%lld): %g, expected %g", (long long)j, (long long)u,
                   (long long)v, x, tt_seed(k, u + 2 * v));
      }
  }
  sw_tensor_release(c);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

/* Projection into caller destinations: empty (allocated to fit) or larger. */
static void project_into_destinations(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 4, SW_CARRIER_HOST);
  const int64_t pick[2] = {3, 1};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 2);
  double* canon = full_seed_values(&f);
  int64_t n = 0;
  double* e = tt_compact_expect(&f, canon, sel, &n);

  sw_carrier_t* empty = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 0);
  sw_tensor_t* r = tt_project(&f, f.full, sel, empty);
  sw_carrier_t* rc = tt_carrier_of(r);
  assert_ptr_equal(rc, empty);
  assert_int_equal(sw_async_size(empty), (size_t)n);
  assert_int_equal(tt_version(empty), 1);
  tt_expect_values(r, e, n);
  sw_carrier_release(rc);
  sw_tensor_release(r);

  sw_carrier_t* big = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 100);
  r = tt_project(&f, f.full, sel, big);
  tt_expect_dense_layout(r);
  tt_expect_values(r, e, n);
  assert_int_equal(tt_version(big), 1);
  assert_false(tt_owned(big));
  sw_tensor_release(r);

  sw_carrier_release(empty);
  sw_carrier_release(big);
  free(e);
  free(canon);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

/* ---- autograd through projection ----------------------------------------- */

static void backpropagate_through_project_then_operation(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 5, SW_CARRIER_HOST);
  SW_OK_(sw_tensor_set_requires_grad(f.full, true));
  const int64_t pick[2] = {4, 1};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 2);
  sw_tensor_t* c = tt_project(&f, f.full, sel, NULL);
  const int64_t cshape[3] = {2, 3, 2};
  double wv[12];
  for (int i = 0; i < 12; ++i) wv[i] = i + 1;
  sw_tensor_t* w = tt_dense(rt, cshape, 3, wv);
  SW_OK_(sw_tensor_set_requires_grad(w, true));
  sw_tensor_t *y = NULL, *loss = NULL;
  SW_OK_(sw_elementwise_mul(c, w, &y));
  SW_OK_(sw_reduce_sum(y, NULL, 0, false, &loss));
  SW_OK_(sw_backward(loss, NULL, false));

  /* The op's VJP gave w the compact values. */
  sw_tensor_t* gw = NULL;
  SW_OK_(sw_tensor_grad(w, &gw));
  double* canon = full_seed_values(&f);
  int64_t n = 0;
  double* ce = tt_compact_expect(&f, canon, sel, &n);
  tt_expect_values(gw, ce, n);
  sw_tensor_release(gw);

  /* The gather node scatter-added w into a fresh TiledEvictable gradient. */
  sw_tensor_t* g = NULL;
  SW_OK_(sw_tensor_grad(f.full, &g));
  assert_non_null(g);
  sw_carrier_t* gc = tt_carrier_of(g);
  assert_int_equal(tt_kind(gc), SW_CARRIER_TILED);
  assert_ptr_not_equal(gc, f.te);
  int64_t gg[3], gt[3];
  SW_OK_(sw_tiled_grid_shape(gc, gg, 3));
  SW_OK_(sw_tiled_tile_shape(gc, gt, 3));
  for (int i = 0; i < 3; ++i) {
    assert_int_equal(gg[i], f.grid[i]);
    assert_int_equal(gt[i], f.tile[i]);
  }
  sw_carrier_t *gp = NULL, *gs = NULL;
  SW_OK_(sw_tiled_primary(gc, &gp));
  SW_OK_(sw_tiled_secondary(gc, &gs));
  assert_int_equal(tt_kind(gp), TT_PRIMARY);
  assert_int_equal(tt_kind(gs), SW_CARRIER_HOST);
  sw_carrier_release(gp);
  sw_carrier_release(gs);
  tt_expect_shape(g, f.logical, 3);
  tt_expect_dense_layout(g);
  double zeros[30] = {0};
  double* ge = tt_scatter_expect(&f, zeros, sel, wv, false);
  tt_expect_values(g, ge, f.n);
  /* Untouched gradient tiles are valid implicit zeros. */
  tt_fix_t gf = f;
  gf.te = gc;
  for (int64_t k = 0; k < 5; ++k) {
    const sw_tile_state_t s = tt_state(&gf, k);
    assert_true(s.valid);
    if (k != 4 && k != 1) assert_int_equal(s.location, SW_TILE_IMPLICIT);
  }
  free(ge);
  free(ce);
  free(canon);
  sw_carrier_release(gc);
  sw_tensor_release(g);
  sw_tensor_release(loss);
  sw_tensor_release(y);
  sw_tensor_release(w);
  sw_tensor_release(c);
  sw_tile_selection_release(sel);
  assert_int_equal(tt_version(f.te), 0);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void accumulate_overlapping_projections(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 4, SW_CARRIER_ZSTD);
  SW_OK_(sw_tensor_set_requires_grad(f.full, true));
  const int64_t p1[2] = {0, 1}, p2[2] = {2, 1};
  sw_tile_selection_t* s1 = tt_sel_experts(&f, p1, 2);
  sw_tile_selection_t* s2 = tt_sel_experts(&f, p2, 2);
  sw_tensor_t* c1 = tt_project(&f, f.full, s1, NULL);
  sw_tensor_t* c2 = tt_project(&f, f.full, s2, NULL);
  const int64_t cshape[3] = {2, 3, 2};
  double av[12], bv[12];
  for (int i = 0; i < 12; ++i) {
    av[i] = i + 1;
    bv[i] = 100 * (i + 1);
  }
  sw_tensor_t* a = tt_dense(rt, cshape, 3, av);
  sw_tensor_t* b = tt_dense(rt, cshape, 3, bv);
  sw_tensor_t *y1 = NULL, *y2 = NULL, *l1 = NULL, *l2 = NULL, *loss = NULL;
  SW_OK_(sw_elementwise_mul(c1, a, &y1));
  SW_OK_(sw_elementwise_mul(c2, b, &y2));
  SW_OK_(sw_reduce_sum(y1, NULL, 0, false, &l1));
  SW_OK_(sw_reduce_sum(y2, NULL, 0, false, &l2));
  SW_OK_(sw_add(l1, l2, &loss));
  SW_OK_(sw_backward(loss, NULL, false));
  sw_tensor_t* g = NULL;
  SW_OK_(sw_tensor_grad(f.full, &g));
  double zeros[24] = {0};
  double* e1 = tt_scatter_expect(&f, zeros, s1, av, true);
  double* e2 = tt_scatter_expect(&f, e1, s2, bv, true);
  tt_expect_values(g, e2, f.n);
  /* Tile 3 was untouched: implicit zero. */
  sw_carrier_t* gc = tt_carrier_of(g);
  tt_fix_t gf = f;
  gf.te = gc;
  tt_expect_tile(&gf, 3, SW_TILE_IMPLICIT, false);
  sw_carrier_release(gc);

  /* A second backward (a new projection) accumulates into the same leaf
   * gradient. */
  sw_tensor_t *y3 = NULL, *l3 = NULL;
  sw_tensor_t* c3 = tt_project(&f, f.full, s1, NULL);
  SW_OK_(sw_elementwise_mul(c3, a, &y3));
  SW_OK_(sw_reduce_sum(y3, NULL, 0, false, &l3));
  SW_OK_(sw_backward(l3, NULL, false));
  sw_tensor_t* g2 = NULL;
  SW_OK_(sw_tensor_grad(f.full, &g2));
  double* e3 = tt_scatter_expect(&f, e2, s1, av, true);
  tt_expect_values(g2, e3, f.n);
  free(e1);
  free(e2);
  free(e3);
  sw_tensor_release(g);
  sw_tensor_release(g2);
  sw_tensor_release(y3);
  sw_tensor_release(l3);
  sw_tensor_release(c3);
  sw_tensor_release(y1);
  sw_tensor_release(y2);
  sw_tensor_release(l1);
  sw_tensor_release(l2);
  sw_tensor_release(loss);
  sw_tensor_release(a);
  sw_tensor_release(b);
  sw_tensor_release(c1);
  sw_tensor_release(c2);
  sw_tile_selection_release(s1);
  sw_tile_selection_release(s2);
  tt_free(&f);
  sw_runtime_release(rt);
}

/* Backward validates the saved version: a public write after projection
 * fails "modified in-place". */
static void projection_backward_checks_saved_version(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 3, SW_CARRIER_HOST);
  SW_OK_(sw_tensor_set_requires_grad(f.full, true));
  const int64_t pick[1] = {1};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 1);
  sw_tensor_t* c = tt_project(&f, f.full, sel, NULL);
  sw_tensor_t* loss = NULL;
  SW_OK_(sw_reduce_sum(c, NULL, 0, false, &loss));
  const int64_t at[3] = {0, 0, 0};
  SW_OK_(sw_tensor_set(f.full, at, 3, 5.0));
  assert_int_equal(tt_version(f.te), 1);
  SW_FAILS(sw_backward(loss, NULL, false), SW_ERROR_STATE, "in-place");
  sw_tensor_t* g = NULL;
  SW_OK_(sw_tensor_grad(f.full, &g));
  assert_null(g);
  sw_tensor_release(loss);
  sw_tensor_release(c);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

/* ---- residency ----------------------------------------------------------- */

static void prefetch_without_changing_autograd(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 5, SW_CARRIER_FILE);
  SW_OK_(sw_tensor_set_requires_grad(f.full, true));
  const int64_t pick[2] = {2, 3};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 2);
  sw_await_t* a = NULL;
  SW_OK_(tt_promote_sel_async(f.te, sel, &a));
  sw_await_kind_t kind;
  SW_OK_(sw_await_kind(a, &kind));
  assert_int_equal(kind, SW_AWAIT_RESIDENCY);
  SW_OK_(sw_await_wait(a, -1));
  sw_tensor_t* none = (sw_tensor_t*)1;
  SW_OK_(sw_await_result(a, &none));
  assert_null(none);
  sw_await_release(a);
  for (int64_t k = 0; k < 5; ++k)
    tt_expect_tile(&f, k, (k == 2 || k == 3) ? SW_TILE_PRIMARY : SW_TILE_SECONDARY, false);
  /* Identity and autograd unchanged: still a leaf with no gradient. */
  expect_full_tensor_intact(&f);
  bool leaf = false, rg = false;
  SW_OK_(sw_tensor_is_leaf(f.full, &leaf));
  SW_OK_(sw_tensor_requires_grad(f.full, &rg));
  assert_true(leaf);
  assert_true(rg);
  sw_tensor_t* g = NULL;
  SW_OK_(sw_tensor_grad(f.full, &g));
  assert_null(g);
  assert_int_equal(tt_version(f.te), 0);
  /* The projection that follows records its gather node as usual. */
  sw_tensor_t* c = tt_project(&f, f.full, sel, NULL);
  sw_tensor_t* loss = NULL;
  SW_OK_(sw_reduce_sum(c, NULL, 0, false, &loss));
  SW_OK_(sw_backward(loss, NULL, false));
  SW_OK_(sw_tensor_grad(f.full, &g));
  double ones[12];
  for (int i = 0; i < 12; ++i) ones[i] = 1;
  double zeros[30] = {0};
  double* e = tt_scatter_expect(&f, zeros, sel, ones, false);
  tt_expect_values(g, e, f.n);
  free(e);
  sw_tensor_release(g);
  sw_tensor_release(loss);
  sw_tensor_release(c);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void evict_selected_dirty_tile_set(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 4, SW_CARRIER_FILE);
  double* canon = full_seed_values(&f);
  const int64_t pick[2] = {1, 3};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 2);
  SW_OK_(tt_promote_sel(f.te, sel));
  /* Public writes make tiles 1 and 3 dirty: one version step each. */
  const int64_t at1[3] = {1, 2, 1}, at3[3] = {3, 0, 0};
  SW_OK_(sw_tensor_set(f.full, at1, 3, -7.0));
  SW_OK_(sw_tensor_set(f.full, at3, 3, -9.0));
  assert_int_equal(tt_version(f.te), 2);
  canon[1 + 4 * (2 + 3 * 1)] = -7.0;
  canon[3] = -9.0;
  tt_expect_tile(&f, 1, SW_TILE_PRIMARY, true);
  tt_expect_tile(&f, 3, SW_TILE_PRIMARY, true);
  tt_expect_tile_sets_consistent(&f);
  tt_expect_values(f.full, canon, f.n);

  SW_OK_(tt_evict_sel(f.te, sel));
  expect_all(&f, SW_TILE_SECONDARY, false);
  tt_expect_tile_sets_consistent(&f);
  assert_int_equal(tt_version(f.te), 2);
  tt_expect_values(f.full, canon, f.n);
  /* The secondary tier holds the written values tile-major. */
  sw_carrier_t* s = NULL;
  SW_OK_(sw_tiled_secondary(f.te, &s));
  float tilev[6];
  SW_OK_(sw_carrier_read(s, 1 * 6, 6, tilev));
  assert_true(tilev[2 + 3 * 1] == -7.0f);
  SW_OK_(sw_carrier_read(s, 3 * 6, 6, tilev));
  assert_true(tilev[0] == -9.0f);
  sw_carrier_release(s);
  /* Idempotent. */
  SW_OK_(tt_evict_sel(f.te, sel));
  expect_all(&f, SW_TILE_SECONDARY, false);
  /* Promoting again reads the preserved values. */
  SW_OK_(tt_promote_sel(f.te, sel));
  tt_expect_tile(&f, 1, SW_TILE_PRIMARY, false);
  tt_expect_values(f.full, canon, f.n);
  free(canon);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

/* Reads every value of the full tensor and checks them against canon. */
static void expect_canon(const tt_fix_t* f, const double* canon) { tt_expect_values(f->full, canon, f->n); }

/* Checks the secondary tier tile-major: every tile seeded, except slot 0
 * which holds `first`. */
static void expect_secondary_tier(const tt_fix_t* f, float first) {
  sw_carrier_t* s = NULL;
  SW_OK_(sw_tiled_secondary(f->te, &s));
  float* v = (float*)malloc(sizeof(float) * (size_t)f->n);
  SW_OK_(sw_carrier_read(s, 0, (size_t)f->n, v));
  for (int64_t k = 0; k < f->ntiles; ++k)
    for (int64_t w = 0; w < f->T; ++w) {
      const float want = k == 0 && w == 0 ? first : (float)tt_seed(k, w);
      if (v[k * f->T + w] != want) fail_msg("secondary slot %lld: %g, expected %g", (long long)(k * f->T + w), v[k * f->T + w], want);
    }
  free(v);
  sw_carrier_release(s);
}

/* Records, on the loop thread at the eviction's completion, whether the
 * projection's gather had already filled its destination. */
typedef struct race_probe_t {
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  int fired;
  sw_carrier_t* dst;
  const float* want;
  size_t n;
  bool gathered;
} race_probe_t;

static void race_probe_fire(void* user, sw_await_t* a, sw_error_code_t code, const char* message) {
  (void)a;
  (void)message;
  race_probe_t* p = (race_probe_t*)user;
  bool all = code == SW_OK;
  float* got = (float*)malloc(sizeof(float) * p->n);
  sw_error_t* err = all ? sw_carrier_read(p->dst, 0, p->n, got) : NULL;
  if (err) all = false;
  sw_error_free(err);
  for (size_t i = 0; i < p->n && all; ++i) all = got[i] == p->want[i];
  free(got);
  pthread_mutex_lock(&p->mutex);
  p->gathered = all;
  p->fired = 1;
  pthread_cond_broadcast(&p->cond);
  pthread_mutex_unlock(&p->mutex);
}

static void eviction_races_with_execution(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  const int64_t rows = 1 << 16;
  int overlapped = 0;
  for (int round = 0; round < 8 && (round < 3 || overlapped < 2); ++round) {
    tt_fix_t f;
    make_big_file_experts(&f, rt, 8, rows);
    double* canon = full_seed_values(&f);
    /* Tile 0 primary and dirty; the others only in the file tier. */
    const int64_t z[2] = {0, 0};
    sw_tile_set_t* t0 = tt_set(z, 1, 2);
    SW_OK_(sw_tiled_promote(f.te, t0));
    const double first = -1.0 - round;
    SW_OK_(sw_tensor_set(f.full, z, 2, first));
    canon[0] = first;
    tt_expect_tile(&f, 0, SW_TILE_PRIMARY, true);

    static const int64_t orders[3][7] = {{0, 1, 2, 3, 4, 5, 6}, {6, 5, 4, 3, 2, 1, 0}, {3, 0, 5, 0, 0, 0, 0}};
    const size_t counts[3] = {7, 7, 3};
    const int64_t zero[1] = {0};
    sw_tile_selection_t* sel = tt_sel2(orders[round % 3], counts[round % 3], zero, 1);
    int64_t n = 0;
    double* want = tt_compact_expect(&f, canon, sel, &n);
    float* wantf = (float*)malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; ++i) wantf[i] = (float)want[i];
    sw_carrier_t* dst = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, (size_t)n);

    sw_await_t *p = NULL, *e = NULL;
    SW_OK_(sw_tiled_project(f.te, f.full, sel, dst, &p));
    const sw_await_status_t before = sw_async_status(p);
    /* Evict every tile the projection still needs. */
    sw_tile_set_t* set = NULL;
    SW_OK_(sw_tile_selection_tile_set(sel, &set));
    SW_OK_(sw_tiled_evict_async(f.te, set, &e));
    race_probe_t probe;
    memset(&probe, 0, sizeof probe);
    pthread_mutex_init(&probe.mutex, NULL);
    pthread_cond_init(&probe.cond, NULL);
    probe.dst = dst;
    probe.want = wantf;
    probe.n = (size_t)n;
    sw_await_callback_info_t info;
    sw_await_callback_info_init(&info);
    info.mode = SW_CALLBACK_MODE_LOOP_THREAD;
    info.callback = race_probe_fire;
    info.user_data = &probe;
    SW_OK_(sw_await_set_callback(e, &info));
    for (int i = 0; i < 100 && sw_async_status(e) == SW_AWAIT_PENDING; ++i) assert_true(tt_state(&f, 0).valid);
    SW_OK_(sw_await_wait(e, -1));
    pthread_mutex_lock(&probe.mutex);
    while (!probe.fired) pthread_cond_wait(&probe.cond, &probe.mutex);
    pthread_mutex_unlock(&probe.mutex);
    /* The eviction completed only after the gather had read every value. */
    assert_true(probe.gathered);
    if (before == SW_AWAIT_PENDING) ++overlapped;

    sw_tensor_t* r = tt_wait_result(p);
    tt_expect_values(r, want, n);
    /* Both terminal: the eviction, issued last, has the last word. */
    for (int64_t k = 0; k < 8; ++k) tt_expect_tile(&f, k, SW_TILE_SECONDARY, false);
    tt_expect_tile_sets_consistent(&f);
    expect_secondary_tier(&f, (float)first);
    assert_int_equal(tt_version(f.te), 1);

    pthread_cond_destroy(&probe.cond);
    pthread_mutex_destroy(&probe.mutex);
    sw_tensor_release(r);
    sw_tile_set_release(set);
    sw_await_release(p);
    sw_await_release(e);
    sw_carrier_release(dst);
    sw_tile_selection_release(sel);
    sw_tile_set_release(t0);
    free(wantf);
    free(want);
    free(canon);
    tt_free(&f);
  }
  assert_true(overlapped >= 1);
  sw_runtime_release(rt);
}

/* An op needing a tile covered by another caller's incomplete evict_async
 * fails STATE instead of waiting. A testing hold keeps the eviction's write
 * of dirty tile 0 to the secondary tier in flight throughout. */
static void refuse_hidden_waiting_on_external_transition(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  const sw_carrier_kind_t kinds[2] = {SW_CARRIER_ZSTD, SW_CARRIER_FILE};
  for (int round = 0; round < 2; ++round) {
    const int64_t rows = 4096;
    tt_fix_t f;
    const int64_t grid[2] = {2, 1}, tile[2] = {1, rows};
    tt_make(&f, rt, SW_DTYPE_F32, 2, grid, tile, true, kinds[round], false, NULL);
    const int64_t z[2] = {0, 0};
    sw_tile_set_t* t0 = tt_set(z, 1, 2);
    const int64_t first[1] = {0}, zero[1] = {0};
    sw_tile_selection_t* sel0 = tt_sel2(first, 1, zero, 1);
    sw_carrier_t* cz = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, (size_t)rows);
    const int64_t cshape[2] = {1, rows};
    sw_layout_t* cl = NULL;
    SW_OK_(sw_layout_dense(cshape, 2, &cl));
    sw_tensor_t* compact = NULL;
    SW_OK_(sw_tensor_create(cz, 0, cl, &compact));
    sw_layout_release(cl);

    SW_OK_(sw_testing_hold(rt, SW_FAULT_WRITE, 1));
    sw_await_t* e = NULL;
    SW_OK_(sw_tiled_evict_async(f.te, t0, &e));
    SW_OK_(sw_testing_wait_held(rt, (int64_t)60 * 1000000000));
    /* Every kind of request that needs tile 0 is refused, and none waits. */
    sw_await_t *a0 = NULL, *a3 = NULL, *a4 = NULL, *a5 = NULL;
    sw_tensor_t* out = NULL;
    sw_error_t* errs[6];
    errs[0] = sw_tiled_project(f.te, f.full, sel0, NULL, &a0);
    errs[1] = sw_reduce_sum(f.full, NULL, 0, false, &out);
    errs[2] = sw_tensor_set(f.full, z, 2, 1.0);
    errs[3] = sw_tiled_promote_async(f.te, t0, &a3);
    errs[4] = tt_evict_sel_async(f.te, sel0, &a4);
    errs[5] = sw_tiled_scatter(f.te, compact, f.full, sel0, SW_SCATTER_ADD, &a5);
    assert_int_equal(sw_async_status(e), SW_AWAIT_PENDING);
    for (int i = 0; i < 6; ++i) {
      if (!errs[i]) fail_msg("request %d was accepted while the eviction of its tile was pending", i);
      if (sw_error_code(errs[i]) != SW_ERROR_STATE || !strstr(sw_error_message(errs[i]), "wait"))
        fail_msg("request %d failed with %s: %s", i, sw_error_code_name(sw_error_code(errs[i])),
                 sw_error_message(errs[i]));
      sw_error_free(errs[i]);
    }
    /* No handle was produced and nothing was written. */
    assert_null(a0);
    assert_null(a3);
    assert_null(a4);
    assert_null(a5);
    assert_null(out);
    assert_int_equal(tt_version(f.te), 0);
    SW_OK_(sw_testing_release_hold(rt));
    SW_OK_(sw_await_wait(e, -1));
    tt_expect_tile(&f, 0, SW_TILE_SECONDARY, false);
    tt_expect_tile(&f, 1, SW_TILE_PRIMARY, true);
    double v = 0;
    SW_OK_(sw_tensor_get(f.full, z, 2, &v));
    assert_true(v == tt_seed(0, 0));
    sw_await_release(e);
    sw_tensor_release(compact);
    sw_carrier_release(cz);
    sw_tile_selection_release(sel0);
    sw_tile_set_release(t0);
    tt_free(&f);
  }
  sw_runtime_release(rt);
}

/* Eviction writes many dirty tiles that share one zstd frame (and one file):
 * none of the writes may be lost, within one request or across two. */
static void evictions_keep_every_dirty_tile_of_a_shared_frame(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  const sw_carrier_kind_t kinds[3] = {SW_CARRIER_ZSTD, SW_CARRIER_FILE, SW_CARRIER_HOST};
  for (int round = 0; round < 12; ++round) {
    tt_fix_t f;
    const int64_t grid[2] = {16, 1}, tile[2] = {1, 4};
    tt_make(&f, rt, SW_DTYPE_F32, 2, grid, tile, true, kinds[round % 3], false, NULL);
    expect_all(&f, SW_TILE_PRIMARY, true);
    if (round % 2 == 0) {
      int64_t ks[16];
      for (int k = 0; k < 16; ++k) ks[k] = k;
      sw_tile_set_t* all = tt_set_ordinals(&f, ks, 16);
      SW_OK_(sw_tiled_evict(f.te, all));
      sw_tile_set_release(all);
    } else {
      /* Two requests at once, over interleaved halves. */
      int64_t even[8], odd[8];
      for (int k = 0; k < 8; ++k) {
        even[k] = 2 * k;
        odd[k] = 2 * k + 1;
      }
      sw_tile_set_t* a = tt_set_ordinals(&f, even, 8);
      sw_tile_set_t* b = tt_set_ordinals(&f, odd, 8);
      sw_await_t *wa = NULL, *wb = NULL;
      SW_OK_(sw_tiled_evict_async(f.te, a, &wa));
      SW_OK_(sw_tiled_evict_async(f.te, b, &wb));
      SW_OK_(sw_await_wait(wa, -1));
      SW_OK_(sw_await_wait(wb, -1));
      sw_await_release(wa);
      sw_await_release(wb);
      sw_tile_set_release(a);
      sw_tile_set_release(b);
    }
    expect_all(&f, SW_TILE_SECONDARY, false);
    expect_secondary_tier(&f, (float)tt_seed(0, 0));
    expect_full_seeded(&f);
    tt_free(&f);
  }
  sw_runtime_release(rt);
}

/* Projections from several threads while the main thread promotes and
 * evicts: every completed projection holds exact values; a projection may
 * only be refused (STATE) for a tile covered by a pending residency request. */
typedef struct stress_arg_t {
  const tt_fix_t* f;
  const double* canon;
  uint64_t seed;
  int done, refused, wrong;
  char message[256];
} stress_arg_t;

static void* stress_projections(void* p) {
  stress_arg_t* a = (stress_arg_t*)p;
  uint64_t x = a->seed;
  for (int i = 0; i < 60; ++i) {
    int64_t axes[2][8];
    size_t counts[2];
    for (int ax = 0; ax < 2; ++ax) {
      const int64_t g = a->f->grid[ax];
      int64_t perm[8];
      for (int64_t c = 0; c < g; ++c) perm[c] = c;
      for (int64_t c = g - 1; c > 0; --c) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        const int64_t j = (int64_t)((x >> 33) % (uint64_t)(c + 1));
        const int64_t t = perm[c];
        perm[c] = perm[j];
        perm[j] = t;
      }
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      counts[ax] = 1 + (size_t)((x >> 33) % (uint64_t)g);
      memcpy(axes[ax], perm, sizeof(int64_t) * counts[ax]);
    }
    const int64_t* ptrs[2] = {axes[0], axes[1]};
    sw_tile_selection_t* sel = NULL;
    sw_error_t* e = sw_tile_selection_create(ptrs, counts, 2, &sel);
    sw_await_t* aw = NULL;
    if (!e) e = sw_tiled_project(a->f->te, a->f->full, sel, NULL, &aw);
    if (e) {
      if (sw_error_code(e) == SW_ERROR_STATE && strstr(sw_error_message(e), "residency request")) {
        a->refused += 1;
      } else if (!a->wrong) {
        a->wrong = 1;
        snprintf(a->message, sizeof a->message, "project: %s", sw_error_message(e));
      }
      sw_error_free(e);
      sw_tile_selection_release(sel);
      continue;
    }
    e = sw_await_wait(aw, -1);
    sw_tensor_t* r = NULL;
    if (!e) e = sw_await_result(aw, &r);
    if (e) {
      if (!a->wrong) {
        a->wrong = 1;
        snprintf(a->message, sizeof a->message, "wait: %s", sw_error_message(e));
      }
      sw_error_free(e);
    } else {
      /* Compare with the seed values. */
      const int64_t n = (int64_t)(counts[0] * counts[1]) * a->f->T;
      float* got = (float*)malloc(sizeof(float) * (size_t)n);
      e = sw_tensor_read(r, got, sizeof(float) * (size_t)n);
      if (e) sw_error_free(e);
      const int64_t cs0 = (int64_t)counts[0] * a->f->tile[0];
      for (int64_t o = 0; o < n && !a->wrong; ++o) {
        const int64_t y0 = o % cs0, y1 = o / cs0;
        const int64_t x0 = axes[0][y0 / a->f->tile[0]] * a->f->tile[0] + y0 % a->f->tile[0];
        const int64_t x1 = axes[1][y1 / a->f->tile[1]] * a->f->tile[1] + y1 % a->f->tile[1];
        const double want = a->canon[x0 + a->f->logical[0] * x1];
        if (got[o] != (float)want) {
          a->wrong = 1;
          snprintf(a->message, sizeof a->message, "element %lld: %g, expected %g", (long long)o, got[o], want);
        }
      }
      free(got);
      a->done += 1;
    }
    sw_tensor_release(r);
    sw_await_release(aw);
    sw_tile_selection_release(sel);
  }
  return NULL;
}

static void concurrent_projections_and_residency(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  const int64_t grid[2] = {4, 3}, tile[2] = {8, 16};
  tt_make(&f, rt, SW_DTYPE_F32, 2, grid, tile, false, SW_CARRIER_FILE, true, NULL);
  double* canon = full_seed_values(&f);
  stress_arg_t args[4];
  pthread_t threads[4];
  for (int i = 0; i < 4; ++i) {
    memset(&args[i], 0, sizeof args[i]);
    args[i].f = &f;
    args[i].canon = canon;
    args[i].seed = 1234567 + 7919 * (uint64_t)i;
    assert_int_equal(pthread_create(&threads[i], NULL, stress_projections, &args[i]), 0);
  }
  /* Meanwhile: residency requests over random tile sets. */
  uint64_t x = 42;
  for (int i = 0; i < 80; ++i) {
    int64_t ks[12];
    size_t n = 0;
    for (int64_t k = 0; k < 12; ++k) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      if ((x >> 40) & 1) ks[n++] = k;
    }
    sw_tile_set_t* set = tt_set_ordinals(&f, ks, n);
    sw_await_t* a = NULL;
    /* Projections neither own tiles nor refuse residency requests. */
    SW_OK_((i % 2) ? sw_tiled_evict_async(f.te, set, &a) : sw_tiled_promote_async(f.te, set, &a));
    SW_OK_(sw_await_wait(a, -1));
    sw_await_release(a);
    sw_tile_set_release(set);
  }
  int done = 0;
  for (int i = 0; i < 4; ++i) {
    assert_int_equal(pthread_join(threads[i], NULL), 0);
    if (args[i].wrong) fail_msg("thread %d: %s", i, args[i].message);
    done += args[i].done;
  }
  assert_true(done > 0);
  tt_expect_tile_sets_consistent(&f);
  for (int64_t k = 0; k < 12; ++k) assert_false(tt_state(&f, k).dirty);
  expect_full_seeded(&f);
  assert_int_equal(tt_version(f.te), 0);
  free(canon);
  tt_free(&f);
  sw_runtime_release(rt);
}

/* ---- direct execution ----------------------------------------------------- */

static void execute_on_partially_resident_full_tensor(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  const int64_t grid[2] = {2, 3}, tile[2] = {2, 2};
  tt_make(&f, rt, SW_DTYPE_F32, 2, grid, tile, false, SW_CARRIER_FILE, true, NULL);
  double* canon = full_seed_values(&f); /* logical (4, 6) */
  const int64_t some[4] = {1, 0, 0, 2};
  sw_tile_set_t* part = tt_set(some, 2, 2);
  SW_OK_(sw_tiled_promote(f.te, part));
  tt_expect_tile(&f, 1, SW_TILE_PRIMARY, false);
  tt_expect_tile(&f, 4, SW_TILE_PRIMARY, false);
  tt_expect_tile(&f, 0, SW_TILE_SECONDARY, false);

  /* reduce_sum over everything and over one axis. */
  sw_tensor_t* r = NULL;
  SW_OK_(sw_reduce_sum(f.full, NULL, 0, false, &r));
  double total = 0;
  for (int64_t o = 0; o < 24; ++o) total += canon[o];
  tt_expect_values(r, &total, 1);
  sw_tensor_release(r);
  const int64_t axis1 = 1;
  SW_OK_(sw_reduce_sum(f.full, &axis1, 1, true, &r));
  double rows[4] = {0};
  for (int64_t o = 0; o < 24; ++o) rows[o % 4] += canon[o];
  const int64_t rshape[2] = {4, 1};
  tt_expect_shape(r, rshape, 2);
  tt_expect_values(r, rows, 4);
  sw_carrier_t* rc = tt_carrier_of(r);
  assert_int_equal(tt_kind(rc), TT_PRIMARY);
  sw_carrier_release(rc);
  sw_tensor_release(r);

  /* Elementwise forms, the scalar overloads and matmul. */
  double e[24];
  SW_OK_(sw_add(f.full, f.full, &r));
  for (int i = 0; i < 24; ++i) e[i] = 2 * canon[i];
  tt_expect_values(r, e, 24);
  sw_tensor_release(r);
  SW_OK_(sw_mul_scalar(f.full, 0.5, &r));
  for (int i = 0; i < 24; ++i) e[i] = 0.5 * canon[i];
  tt_expect_values(r, e, 24);
  sw_tensor_release(r);
  SW_OK_(sw_scalar_mul(-1.0, f.full, &r));
  for (int i = 0; i < 24; ++i) e[i] = -canon[i];
  tt_expect_values(r, e, 24);
  sw_tensor_t* neg = r;
  SW_OK_(sw_relu(neg, &r));
  for (int i = 0; i < 24; ++i) e[i] = 0;
  tt_expect_values(r, e, 24);
  sw_tensor_release(r);
  sw_tensor_release(neg);
  SW_OK_(sw_relu(f.full, &r));
  tt_expect_values(r, canon, 24);
  sw_tensor_release(r);
  SW_OK_(sw_elementwise_mul(f.full, f.full, &r));
  for (int i = 0; i < 24; ++i) e[i] = canon[i] * canon[i];
  tt_expect_values(r, e, 24);
  sw_tensor_release(r);
  SW_OK_(sw_mul(f.full, f.full, &r));
  tt_expect_values(r, e, 24);
  sw_tensor_release(r);
  const int64_t bshape[2] = {6, 2};
  double bv[12];
  for (int i = 0; i < 12; ++i) bv[i] = (i % 3) - 1;
  sw_tensor_t* b = tt_dense(rt, bshape, 2, bv);
  SW_OK_(sw_matmul(f.full, b, &r));
  double mm[8];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j) {
      double s = 0;
      for (int k = 0; k < 6; ++k) s += canon[i + 4 * k] * bv[k + 6 * j];
      mm[i + 4 * j] = s;
    }
  tt_expect_values(r, mm, 8);
  sw_tensor_release(r);
  sw_tensor_release(b);
  /* Every tile was made available; values and version unchanged. */
  for (int64_t k = 0; k < 6; ++k) assert_true(tt_state(&f, k).valid);
  expect_canon(&f, canon);
  assert_int_equal(tt_version(f.te), 0);
  /* Other operations stay unsupported on a raw tiled tensor. */
  const size_t perm[2] = {1, 0};
  sw_tensor_t* view = NULL;
  SW_FAILS(sw_tensor_permute(f.full, perm, 2, &view), SW_ERROR_UNSUPPORTED, NULL);
  free(canon);
  sw_tile_set_release(part);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void reject_pending_projection_operand(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_big_file_experts(&f, rt, 4, 1 << 14);
  const int64_t pick[1] = {2}, zero[1] = {0};
  sw_tile_selection_t* sel = tt_sel2(pick, 1, zero, 1);
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_project(f.te, f.full, sel, NULL, &a));
  sw_tensor_t* as_tensor = (sw_tensor_t*)(void*)a;
  sw_tensor_t* out = NULL;
  SW_FAILS(sw_add(as_tensor, as_tensor, &out), SW_ERROR_TYPE, "await");
  SW_FAILS(sw_relu(as_tensor, &out), SW_ERROR_TYPE, "await");
  SW_FAILS(sw_reduce_sum(as_tensor, NULL, 0, false, &out), SW_ERROR_TYPE, "await");
  SW_FAILS(sw_mul_scalar(as_tensor, 2.0, &out), SW_ERROR_TYPE, "await");
  SW_FAILS(sw_matmul(f.full, as_tensor, &out), SW_ERROR_TYPE, "await");
  assert_null(out);
  /* A residency await is no tensor either. */
  sw_await_t* r = NULL;
  SW_OK_(tt_promote_sel_async(f.te, sel, &r));
  SW_FAILS(sw_relu((sw_tensor_t*)(void*)r, &out), SW_ERROR_TYPE, "await");
  SW_OK_(sw_await_wait(r, -1));
  sw_await_release(r);
  /* After waiting, the result is an ordinary operand. */
  sw_tensor_t* c = tt_wait_result(a);
  SW_OK_(sw_relu(c, &out));
  sw_tensor_release(out);
  sw_tensor_release(c);
  sw_await_release(a);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void execute_on_explicitly_projected_tensor(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 8, SW_CARRIER_HOST);
  SW_OK_(sw_tensor_set_requires_grad(f.full, true));
  const int64_t pick[3] = {6, 0, 3};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 3);
  sw_tensor_t* c = tt_project(&f, f.full, sel, NULL);
  /* Batched matmul over the three compact experts: (3,3,2) @ (2,1). */
  const int64_t xs[2] = {2, 1};
  const double xv[2] = {1, -1};
  sw_tensor_t* x = tt_dense(rt, xs, 2, xv);
  sw_tensor_t* r = NULL;
  SW_OK_(sw_matmul(c, x, &r));
  const int64_t rs[3] = {3, 3, 1};
  tt_expect_shape(r, rs, 3);
  double e[9];
  for (int64_t ex = 0; ex < 3; ++ex)
    for (int64_t i = 0; i < 3; ++i) e[ex + 3 * i] = tt_seed(pick[ex], i) - tt_seed(pick[ex], i + 3);
  tt_expect_values(r, e, 9);
  sw_carrier_t* rc = tt_carrier_of(r);
  assert_int_equal(tt_kind(rc), TT_PRIMARY);
  sw_carrier_release(rc);
  /* Its node follows the gather node; backward reaches the full tensor. */
  bool leaf = true;
  SW_OK_(sw_tensor_is_leaf(r, &leaf));
  assert_false(leaf);
  sw_tensor_t* loss = NULL;
  SW_OK_(sw_reduce_sum(r, NULL, 0, false, &loss));
  SW_OK_(sw_backward(loss, NULL, false));
  sw_tensor_t* g = NULL;
  SW_OK_(sw_tensor_grad(f.full, &g));
  double cg[18];
  for (int64_t ex = 0; ex < 3; ++ex)
    for (int64_t i = 0; i < 3; ++i) {
      cg[ex + 3 * (i + 3 * 0)] = 1;
      cg[ex + 3 * (i + 3 * 1)] = -1;
    }
  double zeros[48] = {0};
  double* ge = tt_scatter_expect(&f, zeros, sel, cg, false);
  tt_expect_values(g, ge, f.n);
  free(ge);
  sw_tensor_release(g);
  sw_tensor_release(loss);
  sw_tensor_release(r);
  sw_tensor_release(x);
  sw_tensor_release(c);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void run_backward_without_policy(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 4, SW_CARRIER_ZSTD);
  double* canon = full_seed_values(&f);
  bool has = true;
  SW_OK_(sw_tiled_has_policy(f.te, &has));
  assert_false(has);
  SW_OK_(sw_tensor_set_requires_grad(f.full, true));
  double wv[24];
  for (int i = 0; i < 24; ++i) wv[i] = (i % 5) - 2;
  sw_tensor_t* w = tt_dense(rt, f.logical, 3, wv);
  SW_OK_(sw_tensor_set_requires_grad(w, true));
  /* Forward with every tile resident; the products save the full tensor. */
  const int64_t all[4] = {0, 1, 2, 3};
  sw_tile_set_t* every = tt_set_ordinals(&f, all, 4);
  SW_OK_(sw_tiled_promote(f.te, every));
  sw_tensor_t *y = NULL, *z = NULL, *s = NULL, *loss = NULL;
  SW_OK_(sw_elementwise_mul(f.full, w, &y));
  SW_OK_(sw_relu(f.full, &z));
  SW_OK_(sw_add(y, z, &s));
  SW_OK_(sw_reduce_sum(s, NULL, 0, false, &loss));
  /* Evict the saved tiles: residency does not bump the version. */
  SW_OK_(sw_tiled_evict(f.te, every));
  expect_all(&f, SW_TILE_SECONDARY, false);
  assert_int_equal(tt_version(f.te), 0);
  SW_OK_(sw_backward(loss, NULL, false));
  sw_tensor_t *gw = NULL, *gf = NULL;
  SW_OK_(sw_tensor_grad(w, &gw));
  SW_OK_(sw_tensor_grad(f.full, &gf));
  tt_expect_values(gw, canon, 24);
  double e[24];
  for (int i = 0; i < 24; ++i) e[i] = wv[i] + (canon[i] > 0 ? 1 : 0);
  tt_expect_values(gf, e, 24);
  sw_carrier_t* gc = tt_carrier_of(gf);
  assert_int_equal(tt_kind(gc), SW_CARRIER_TILED);
  sw_carrier_release(gc);
  for (int64_t k = 0; k < 4; ++k) assert_true(tt_state(&f, k).valid);
  expect_canon(&f, canon);
  sw_tensor_release(gw);
  sw_tensor_release(gf);
  sw_tensor_release(loss);
  sw_tensor_release(s);
  sw_tensor_release(z);
  sw_tensor_release(y);
  sw_tensor_release(w);
  sw_tile_set_release(every);
  free(canon);
  tt_free(&f);
  sw_runtime_release(rt);
}

/* ---- versions ------------------------------------------------------------ */

static void public_writes_step_the_version_once(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_4x4(&f, rt);
  double* canon = full_seed_values(&f);
  const int64_t at[2] = {3, 1};
  SW_OK_(sw_tensor_set(f.full, at, 2, 0.25));
  canon[3 + 4 * 1] = 0.25;
  assert_int_equal(tt_version(f.te), 1);
  tt_expect_tile(&f, 1, SW_TILE_PRIMARY, true); /* tile (1,0) */
  float all[16];
  for (int i = 0; i < 16; ++i) all[i] = (float)(i * 2);
  SW_OK_(sw_tensor_write(f.full, all, sizeof all));
  assert_int_equal(tt_version(f.te), 2);
  for (int i = 0; i < 16; ++i) canon[i] = i * 2;
  expect_all(&f, SW_TILE_PRIMARY, true);
  expect_canon(&f, canon);
  /* Residency requests never step it. */
  const int64_t ks[4] = {0, 1, 2, 3};
  sw_tile_set_t* every = tt_set_ordinals(&f, ks, 4);
  SW_OK_(sw_tiled_evict(f.te, every));
  SW_OK_(sw_tiled_promote(f.te, every));
  SW_OK_(sw_tiled_evict(f.te, every));
  assert_int_equal(tt_version(f.te), 2);
  expect_canon(&f, canon);
  /* Neither do projections or direct ops. */
  sw_tile_selection_t* sel = NULL;
  const int64_t ax[2] = {0, 1};
  sel = tt_sel2(ax, 2, ax, 2);
  sw_tensor_t* c = tt_project(&f, f.full, sel, NULL);
  sw_tensor_t* r = NULL;
  SW_OK_(sw_reduce_sum(f.full, NULL, 0, false, &r));
  assert_int_equal(tt_version(f.te), 2);
  sw_tensor_release(r);
  sw_tensor_release(c);
  sw_tile_selection_release(sel);
  sw_tile_set_release(every);
  free(canon);
  tt_free(&f);
  sw_runtime_release(rt);
}

/* ---- release ------------------------------------------------------------- */

static void release_after_completed_tiled_work(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 4, SW_CARRIER_FILE);
  const int64_t pick[2] = {0, 2};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 2);
  sw_tensor_t* c = tt_project(&f, f.full, sel, NULL);
  const int64_t at[3] = {0, 0, 0};
  SW_OK_(sw_tensor_set(f.full, at, 3, 3.0));
  /* Tiles in both tiers, nothing pending. */
  tt_expect_tile(&f, 0, SW_TILE_PRIMARY, true);
  tt_expect_tile(&f, 1, SW_TILE_SECONDARY, false);
  sw_carrier_t *p = NULL, *s = NULL;
  SW_OK_(sw_tiled_primary(f.te, &p));
  SW_OK_(sw_tiled_secondary(f.te, &s));

  SW_OK_(sw_carrier_dispose(f.te));
  assert_true(tt_disposed(f.te));
  assert_true(tt_disposed(p));
  assert_true(tt_disposed(s));
  assert_false(tt_owned(p));
  assert_false(tt_owned(s));
  SW_OK_(sw_carrier_dispose(f.te)); /* idempotent */

  /* Nothing works afterwards. */
  sw_await_t* a = NULL;
  sw_tensor_t* out = NULL;
  const int64_t z[3] = {0, 0, 0};
  sw_tile_set_t* t0 = tt_set(z, 1, 3);
  SW_FAILS(sw_tiled_promote_async(f.te, t0, &a), SW_ERROR_STATE, "released");
  SW_FAILS(sw_tiled_evict_async(f.te, t0, &a), SW_ERROR_STATE, "released");
  SW_FAILS(sw_tiled_promote(f.te, t0), SW_ERROR_STATE, "released");
  SW_FAILS(sw_tiled_evict(f.te, t0), SW_ERROR_STATE, "released");
  SW_FAILS(sw_tiled_project(f.te, f.full, sel, NULL, &a), SW_ERROR_STATE, "released");
  SW_FAILS(sw_tiled_scatter(f.te, c, f.full, sel, SW_SCATTER_REPLACE, &a), SW_ERROR_STATE, "released");
  assert_null(a);
  SW_FAILS(sw_reduce_sum(f.full, NULL, 0, false, &out), SW_ERROR_STATE, "released");
  SW_FAILS(sw_add(f.full, f.full, &out), SW_ERROR_STATE, "released");
  SW_FAILS(sw_relu(f.full, &out), SW_ERROR_STATE, "released");
  assert_null(out);
  double v;
  SW_FAILS(sw_tensor_get(f.full, z, 3, &v), SW_ERROR_STATE, "released");
  SW_FAILS(sw_tensor_set(f.full, z, 3, 1.0), SW_ERROR_STATE, "released");
  float buf[24];
  SW_FAILS(sw_tensor_read(f.full, buf, sizeof buf), SW_ERROR_STATE, "released");
  sw_tile_state_t st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  SW_FAILS(sw_tiled_tile_state(f.te, z, 3, &st), SW_ERROR_STATE, "released");
  sw_tile_set_t* set = NULL;
  SW_FAILS(sw_tiled_tiles(f.te, SW_TILES_PRIMARY, &set), SW_ERROR_STATE, "released");
  sw_tensor_t* again = NULL;
  SW_FAILS(sw_tiled_full_tensor(f.te, &again), SW_ERROR_STATE, "released");
  /* The compact result is independent and still usable. */
  SW_OK_(sw_relu(c, &out));
  sw_tensor_release(out);

  sw_tile_set_release(t0);
  sw_carrier_release(p);
  sw_carrier_release(s);
  sw_tensor_release(c);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

/* Release is refused while a request is pending (its write held back by a
 * testing hold), cancels nothing and releases nothing. */
static void release_refused_while_request_pending(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  for (int round = 0; round < 2; ++round) {
    tt_fix_t f;
    const int64_t rows = 4096;
    const int64_t grid[2] = {2, 1}, tile[2] = {1, rows};
    tt_make(&f, rt, SW_DTYPE_F32, 2, grid, tile, true, round ? SW_CARRIER_FILE : SW_CARRIER_ZSTD, false, NULL);
    const int64_t ks[2] = {0, 1};
    sw_tile_set_t* both = tt_set_ordinals(&f, ks, 2);
    SW_OK_(sw_testing_hold(rt, SW_FAULT_WRITE, 1));
    sw_await_t* e = NULL;
    SW_OK_(sw_tiled_evict_async(f.te, both, &e));
    SW_OK_(sw_testing_wait_held(rt, (int64_t)60 * 1000000000));
    SW_FAILS(sw_carrier_dispose(f.te), SW_ERROR_STATE, "wait");
    /* Nothing was cancelled or released. */
    assert_false(tt_disposed(f.te));
    assert_int_equal(sw_async_status(e), SW_AWAIT_PENDING);
    SW_OK_(sw_testing_release_hold(rt));
    SW_OK_(sw_await_wait(e, -1));
    expect_all(&f, SW_TILE_SECONDARY, false);
    const int64_t last[2] = {1, rows - 1};
    double v = 0;
    SW_OK_(sw_tensor_get(f.full, last, 2, &v));
    assert_true(v == tt_seed(1, rows - 1));
    SW_OK_(sw_carrier_dispose(f.te));
    sw_await_release(e);
    sw_tile_set_release(both);
    tt_free(&f);
  }
  sw_runtime_release(rt);
}

int main(void) {
  if (!tt_primary_available()) return 77;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(seeds_decide_initial_residency),
      cmocka_unit_test(interleaved_gathers_copy_bit_for_bit),
      cmocka_unit_test(promote_one_expert_tile),
      cmocka_unit_test(accept_within_tile_permutation),
      cmocka_unit_test(reject_logical_tile_spanning_tiles),
      cmocka_unit_test(reject_aliasing),
      cmocka_unit_test(reject_incomplete_coverage),
      cmocka_unit_test(reject_tile_coordinate_remapping),
      cmocka_unit_test(reject_shifted_offset),
      cmocka_unit_test(select_three_experts_in_router_order),
      cmocka_unit_test(include_every_recombined_corner),
      cmocka_unit_test(enumerate_multi_axis_selection),
      cmocka_unit_test(represent_non_product_cache_set),
      cmocka_unit_test(overlap_projection_with_computation),
      cmocka_unit_test(observe_completed_projection_repeatedly),
      cmocka_unit_test(keep_full_tensor_unchanged),
      cmocka_unit_test(gather_permuted_selection),
      cmocka_unit_test(gather_multi_axis_selection),
      cmocka_unit_test(project_into_destinations),
      cmocka_unit_test(backpropagate_through_project_then_operation),
      cmocka_unit_test(accumulate_overlapping_projections),
      cmocka_unit_test(projection_backward_checks_saved_version),
      cmocka_unit_test(prefetch_without_changing_autograd),
      cmocka_unit_test(evict_selected_dirty_tile_set),
      cmocka_unit_test(eviction_races_with_execution),
      cmocka_unit_test(evictions_keep_every_dirty_tile_of_a_shared_frame),
      cmocka_unit_test(concurrent_projections_and_residency),
      cmocka_unit_test(refuse_hidden_waiting_on_external_transition),
      cmocka_unit_test(execute_on_partially_resident_full_tensor),
      cmocka_unit_test(reject_pending_projection_operand),
      cmocka_unit_test(execute_on_explicitly_projected_tensor),
      cmocka_unit_test(run_backward_without_policy),
      cmocka_unit_test(public_writes_step_the_version_once),
      cmocka_unit_test(release_after_completed_tiled_work),
      cmocka_unit_test(release_refused_while_request_pending),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
