/* Helpers shared by the TiledEvictable suites (tiled, tiled_errors,
 * tiled_scatter, tiled_policy, tiled_model): carriers seeded tile-major, a
 * reference for canonical slot values, selections and tile sets from arrays,
 * and snapshots of every tile's state, versions and tier claims. */
#ifndef SW_TILED_TEST_H_
#define SW_TILED_TEST_H_

#include "sw_async_test.h"

/* The primary tier's kind. Each tiled suite builds twice: with a CPU primary,
 * and with TT_PRIMARY_VULKAN defined, with a Vulkan primary on the device of
 * whatever ICD is present (Mesa lavapipe in CI), so that every scenario holds
 * on both. Compact tensors made by tt_dense and destinations made with
 * TT_PRIMARY live on the primary kind too. */
#ifdef TT_PRIMARY_VULKAN
#include "sw_vulkan_test.h"
#define TT_PRIMARY SW_CARRIER_VULKAN

/* One device per runtime, made on first use and released with the runtime
 * (sw_runtime_release is routed through tt_runtime_release below). */
static sw_runtime_t* tt_device_rt;
static sw_device_t* tt_device_handle;

static inline sw_device_t* tt_device(sw_runtime_t* rt) {
  if (tt_device_rt != rt) {
    sw_device_release(tt_device_handle);
    tt_device_handle = NULL;
    SW_OK_(sw_device_create_vulkan(rt, NULL, &tt_device_handle));
    tt_device_rt = rt;
  }
  return tt_device_handle;
}

static inline void tt_runtime_release(sw_runtime_t* rt) {
  if (rt && rt == tt_device_rt) {
    sw_device_release(tt_device_handle);
    tt_device_handle = NULL;
    tt_device_rt = NULL;
  }
  (sw_runtime_release)(rt);
}
#define sw_runtime_release(rt) tt_runtime_release(rt)

/* Call first in main(): false (the suite then exits 77, a skip) without a
 * Vulkan ICD. */
static inline bool tt_primary_available(void) {
  sw_vulkan_test_keep_driver();
  sw_runtime_t* rt = NULL;
  sw_device_t* dev = NULL;
  SW_OK_((sw_runtime_create)(NULL, &rt));
  sw_error_t* e = sw_device_create_vulkan(rt, NULL, &dev);
  if (e) {
    fprintf(stderr, "no Vulkan device (%s: %s); the Vulkan-primary run of this suite skips\n",
            sw_error_code_name(sw_error_code(e)), sw_error_message(e));
    sw_error_free(e);
  }
  sw_device_release(dev);
  (sw_runtime_release)(rt);
  return dev != NULL;
}
#else
#define TT_PRIMARY SW_CARRIER_CPU
static inline bool tt_primary_available(void) { return true; }
#endif

#define TT_MAXR 4
#define TT_MAXTILES 128

typedef struct tt_fix_t {
  sw_runtime_t* rt;
  sw_carrier_t* te;
  sw_tensor_t* full; /* the full logical tensor (dense, offset 0) */
  sw_dtype_t dtype;
  size_t rank;
  int64_t grid[TT_MAXR], tile[TT_MAXR], logical[TT_MAXR];
  int64_t ntiles, T, n;
} tt_fix_t;

/* Seed value of within-tile index w of tile ordinal k: exact in f32. */
static inline double tt_seed(int64_t k, int64_t w) { return (double)((k + 1) * 100 + w); }

/* Tile-major seed for the secondary tier when the primary also holds one:
 * distinguishable from the primary's values. */
#define TT_OTHER_BIAS 50000.0

static inline sw_carrier_t* tt_carrier(sw_runtime_t* rt, sw_carrier_kind_t kind, sw_dtype_t dtype, size_t n) {
  sw_carrier_t* c = NULL;
  switch (kind) {
    case SW_CARRIER_CPU: SW_OK_(sw_carrier_create_cpu(rt, dtype, n, &c)); break;
    case SW_CARRIER_HOST: SW_OK_(sw_carrier_create_host(rt, dtype, n, &c)); break;
    case SW_CARRIER_FILE: SW_OK_(sw_carrier_create_file(rt, dtype, n, NULL, &c)); break;
    case SW_CARRIER_ZSTD: SW_OK_(sw_carrier_create_zstd(rt, dtype, n, NULL, &c)); break;
#ifdef TT_PRIMARY_VULKAN
    case SW_CARRIER_VULKAN: SW_OK_(sw_carrier_create_vulkan(rt, tt_device(rt), dtype, n, &c)); break;
#endif
    default: fail_msg("tt_carrier: unexpected kind %d", (int)kind);
  }
  return c;
}

/* Writes `values` (n doubles) into slots [0, n) of `c` converted to dtype. */
static inline void tt_write_doubles(sw_carrier_t* c, sw_dtype_t dtype, const double* values, size_t n) {
  if (n == 0) return;
  if (dtype == SW_DTYPE_F64) {
    SW_OK_(sw_carrier_write(c, 0, n, values));
    return;
  }
  float* f = (float*)malloc(sizeof(float) * n);
  for (size_t i = 0; i < n; ++i) f[i] = (float)values[i];
  SW_OK_(sw_carrier_write(c, 0, n, f));
  free(f);
}

/* Fills a tier carrier tile-major: slot k*T + w holds tt_seed(k, w) + bias. */
static inline void tt_fill_tier(sw_carrier_t* c, sw_dtype_t dtype, int64_t ntiles, int64_t T, double bias) {
  const size_t n = (size_t)(ntiles * T);
  double* v = (double*)malloc(sizeof(double) * (n ? n : 1));
  for (int64_t k = 0; k < ntiles; ++k)
    for (int64_t w = 0; w < T; ++w) v[k * T + w] = tt_seed(k, w) + bias;
  tt_write_doubles(c, dtype, v, n);
  free(v);
}

static inline void tt_geometry(tt_fix_t* f, size_t rank, const int64_t* grid, const int64_t* tile) {
  f->rank = rank;
  f->ntiles = 1;
  f->T = 1;
  for (size_t i = 0; i < rank; ++i) {
    f->grid[i] = grid[i];
    f->tile[i] = tile[i];
    f->logical[i] = grid[i] * tile[i];
    f->ntiles *= grid[i];
    f->T *= tile[i];
  }
  f->n = f->ntiles * f->T;
}

/* A TiledEvictable with a primary CPU tier (full: seeded, else empty) and a
 * secondary tier of `secondary_kind` (full: seeded, else empty). When both
 * are full the secondary seed is offset by TT_OTHER_BIAS. */
static inline void tt_make(tt_fix_t* f, sw_runtime_t* rt, sw_dtype_t dtype, size_t rank, const int64_t* grid,
                           const int64_t* tile, bool primary_full, sw_carrier_kind_t secondary_kind,
                           bool secondary_full, const sw_residency_policy_t* policy) {
  memset(f, 0, sizeof *f);
  f->rt = rt;
  f->dtype = dtype;
  tt_geometry(f, rank, grid, tile);
  assert_true(f->ntiles <= TT_MAXTILES);
  sw_carrier_t* p = tt_carrier(rt, TT_PRIMARY, dtype, primary_full ? (size_t)f->n : 0);
  sw_carrier_t* s = tt_carrier(rt, secondary_kind, dtype, secondary_full ? (size_t)f->n : 0);
  if (primary_full) tt_fill_tier(p, dtype, f->ntiles, f->T, 0.0);
  if (secondary_full) tt_fill_tier(s, dtype, f->ntiles, f->T, primary_full ? TT_OTHER_BIAS : 0.0);
  SW_OK_(sw_tiled_create(p, s, grid, tile, rank, policy, &f->te));
  SW_OK_(sw_tiled_full_tensor(f->te, &f->full));
  sw_carrier_release(p);
  sw_carrier_release(s);
}

static inline void tt_free(tt_fix_t* f) {
  sw_tensor_release(f->full);
  sw_carrier_release(f->te);
  f->full = NULL;
  f->te = NULL;
}

/* Tile ordinal <-> coordinate, first grid mode fastest. */
static inline void tt_tile_coord(const tt_fix_t* f, int64_t k, int64_t* c) {
  for (size_t i = 0; i < f->rank; ++i) {
    c[i] = k % f->grid[i];
    k /= f->grid[i];
  }
}

static inline int64_t tt_tile_ordinal(const tt_fix_t* f, const int64_t* c) {
  int64_t k = 0, s = 1;
  for (size_t i = 0; i < f->rank; ++i) {
    k += c[i] * s;
    s *= f->grid[i];
  }
  return k;
}

/* Canonical slot -> (tile ordinal, within-tile index). */
static inline void tt_locate(const tt_fix_t* f, int64_t slot, int64_t* k, int64_t* w) {
  int64_t kk = 0, ww = 0, ks = 1, ws = 1;
  for (size_t i = 0; i < f->rank; ++i) {
    const int64_t x = slot % f->logical[i];
    slot /= f->logical[i];
    kk += (x / f->tile[i]) * ks;
    ww += (x % f->tile[i]) * ws;
    ks *= f->grid[i];
    ws *= f->tile[i];
  }
  *k = kk;
  *w = ww;
}

/* canon[s] = the seeded value at canonical slot s (plus bias). */
static inline double* tt_canon_seed(const tt_fix_t* f, double bias) {
  double* c = (double*)malloc(sizeof(double) * (size_t)f->n);
  for (int64_t s = 0; s < f->n; ++s) {
    int64_t k, w;
    tt_locate(f, s, &k, &w);
    c[s] = tt_seed(k, w) + bias;
  }
  return c;
}

/* The logical values (first mode fastest) of a tensor `t` over the tiled
 * carrier whose canonical slots hold `canon`. */
static inline double* tt_logical_of(const tt_fix_t* f, const double* canon, const sw_tensor_t* t) {
  sw_layout_t* l = NULL;
  SW_OK_(sw_tensor_layout(t, &l));
  int64_t off = 0;
  SW_OK_(sw_tensor_offset(t, &off));
  double* out = (double*)malloc(sizeof(double) * (size_t)f->n);
  int64_t x[TT_MAXR];
  for (int64_t o = 0; o < f->n; ++o) {
    int64_t r = o;
    for (size_t i = 0; i < f->rank; ++i) {
      x[i] = r % f->logical[i];
      r /= f->logical[i];
    }
    int64_t idx = -1;
    SW_OK_(sw_layout_index(l, x, f->rank, &idx));
    out[o] = canon[off + idx];
  }
  sw_layout_release(l);
  return out;
}

/* Asserts that `t` holds exactly `expect` (numel values, first mode fastest). */
static inline void tt_expect_values(const sw_tensor_t* t, const double* expect, int64_t numel) {
  int64_t n = -1;
  double* got = sw_test_values(t, &n);
  assert_int_equal(n, numel);
  for (int64_t i = 0; i < n; ++i)
    if (got[i] != expect[i]) fail_msg("element %lld: got %.17g, expected %.17g", (long long)i, got[i], expect[i]);
  free(got);
}

/* ---- selections and tile sets ------------------------------------------ */

/* A selection from `rank` axes given as arrays with counts. */
static inline sw_tile_selection_t* tt_sel(size_t rank, const int64_t* const* axes, const size_t* counts) {
  sw_tile_selection_t* s = NULL;
  SW_OK_(sw_tile_selection_create(axes, counts, rank, &s));
  return s;
}

static inline sw_tile_selection_t* tt_sel1(const int64_t* a0, size_t n0) {
  const int64_t* axes[1] = {a0};
  const size_t counts[1] = {n0};
  return tt_sel(1, axes, counts);
}

static inline sw_tile_selection_t* tt_sel2(const int64_t* a0, size_t n0, const int64_t* a1, size_t n1) {
  const int64_t* axes[2] = {a0, a1};
  const size_t counts[2] = {n0, n1};
  return tt_sel(2, axes, counts);
}

/* An expert selection: `experts` on axis 0, every tile of the other axes. */
static inline sw_tile_selection_t* tt_sel_experts(const tt_fix_t* f, const int64_t* experts, size_t count) {
  int64_t rest[TT_MAXR][64];
  const int64_t* axes[TT_MAXR];
  size_t counts[TT_MAXR];
  axes[0] = experts;
  counts[0] = count;
  for (size_t i = 1; i < f->rank; ++i) {
    for (int64_t c = 0; c < f->grid[i]; ++c) rest[i][c] = c;
    axes[i] = rest[i];
    counts[i] = (size_t)f->grid[i];
  }
  return tt_sel(f->rank, axes, counts);
}

/* A tile set of `count` coordinates of `rank` entries, row after row. */
static inline sw_tile_set_t* tt_set(const int64_t* coords, size_t count, size_t rank) {
  sw_tile_set_t* s = NULL;
  SW_OK_(sw_tile_set_create(coords, count, rank, &s));
  return s;
}

/* The set of the given tile ordinals of f's grid. */
static inline sw_tile_set_t* tt_set_ordinals(const tt_fix_t* f, const int64_t* ks, size_t count) {
  int64_t* c = (int64_t*)malloc(sizeof(int64_t) * (count * f->rank + 1));
  for (size_t j = 0; j < count; ++j) tt_tile_coord(f, ks[j], c + j * f->rank);
  sw_tile_set_t* s = tt_set(c, count, f->rank);
  free(c);
  return s;
}

/* Residency calls on a selection's tiles (the calls take TileSets; a
 * selection converts with sw_tile_selection_tile_set). Return the call's
 * error, for SW_OK_ or SW_FAILS. */
typedef enum { TT_PROMOTE, TT_EVICT } tt_residency_t;
static inline sw_error_t* tt_residency_sel(sw_carrier_t* te, const sw_tile_selection_t* sel, tt_residency_t what,
                                           sw_await_t** out_await) {
  sw_tile_set_t* set = NULL;
  sw_error_t* e = sw_tile_selection_tile_set(sel, &set);
  if (e) return e;
  if (out_await)
    e = what == TT_PROMOTE ? sw_tiled_promote_async(te, set, out_await) : sw_tiled_evict_async(te, set, out_await);
  else
    e = what == TT_PROMOTE ? sw_tiled_promote(te, set) : sw_tiled_evict(te, set);
  sw_tile_set_release(set);
  return e;
}
static inline sw_error_t* tt_promote_sel(sw_carrier_t* te, const sw_tile_selection_t* sel) {
  return tt_residency_sel(te, sel, TT_PROMOTE, NULL);
}
static inline sw_error_t* tt_evict_sel(sw_carrier_t* te, const sw_tile_selection_t* sel) {
  return tt_residency_sel(te, sel, TT_EVICT, NULL);
}
static inline sw_error_t* tt_promote_sel_async(sw_carrier_t* te, const sw_tile_selection_t* sel, sw_await_t** out) {
  return tt_residency_sel(te, sel, TT_PROMOTE, out);
}
static inline sw_error_t* tt_evict_sel_async(sw_carrier_t* te, const sw_tile_selection_t* sel, sw_await_t** out) {
  return tt_residency_sel(te, sel, TT_EVICT, out);
}

/* Whether `set` holds exactly the tiles whose ordinals have mask[k] set. */
static inline void tt_expect_set_mask(const tt_fix_t* f, const sw_tile_set_t* set, const bool* mask) {
  size_t count = 0, rank = 0;
  SW_OK_(sw_tile_set_count(set, &count));
  SW_OK_(sw_tile_set_rank(set, &rank));
  size_t want = 0;
  for (int64_t k = 0; k < f->ntiles; ++k) want += mask[k];
  if (count != want) fail_msg("tile set holds %zu tiles, expected %zu", count, want);
  if (count == 0) return;
  assert_int_equal(rank, f->rank);
  int64_t* c = (int64_t*)malloc(sizeof(int64_t) * count * rank);
  SW_OK_(sw_tile_set_coordinates(set, c, count * rank));
  for (size_t j = 0; j < count; ++j) {
    const int64_t k = tt_tile_ordinal(f, c + j * rank);
    if (!mask[k]) fail_msg("tile set holds tile %lld unexpectedly", (long long)k);
    /* Sorted first coordinate fastest: ordinals increase. */
    if (j > 0) assert_true(tt_tile_ordinal(f, c + (j - 1) * rank) < k);
  }
  free(c);
}

/* ---- tile state --------------------------------------------------------- */

static inline sw_tile_state_t tt_state(const tt_fix_t* f, int64_t k) {
  int64_t c[TT_MAXR];
  tt_tile_coord(f, k, c);
  sw_tile_state_t s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  SW_OK_(sw_tiled_tile_state(f->te, c, f->rank, &s));
  return s;
}

static inline const char* tt_location_name(sw_tile_location_t l) {
  switch (l) {
    case SW_TILE_PRIMARY: return "PRIMARY";
    case SW_TILE_SECONDARY: return "SECONDARY";
    case SW_TILE_IMPLICIT: return "IMPLICIT";
    case SW_TILE_INVALID: return "INVALID";
    default: return "?";
  }
}

/* Asserts tile k's location and dirty flag (valid follows the location). */
static inline void tt_expect_tile(const tt_fix_t* f, int64_t k, sw_tile_location_t location, bool dirty) {
  const sw_tile_state_t s = tt_state(f, k);
  if (s.location != location || s.dirty != dirty || s.valid != (location != SW_TILE_INVALID))
    fail_msg("tile %lld: %s valid=%d dirty=%d; expected %s dirty=%d", (long long)k, tt_location_name(s.location),
             (int)s.valid, (int)s.dirty, tt_location_name(location), (int)dirty);
}

/* Asserts the four sw_tiled_tiles kinds agree with tile_state for every tile. */
static inline void tt_expect_tile_sets_consistent(const tt_fix_t* f) {
  bool prim[TT_MAXTILES], sec[TT_MAXTILES], valid[TT_MAXTILES], dirty[TT_MAXTILES];
  for (int64_t k = 0; k < f->ntiles; ++k) {
    const sw_tile_state_t s = tt_state(f, k);
    prim[k] = s.location == SW_TILE_PRIMARY;
    sec[k] = s.location == SW_TILE_SECONDARY;
    valid[k] = s.valid;
    dirty[k] = s.dirty;
    assert_true(s.valid == (s.location != SW_TILE_INVALID));
    if (s.dirty) assert_true(s.location == SW_TILE_PRIMARY);
  }
  const sw_tile_set_kind_t kinds[4] = {SW_TILES_PRIMARY, SW_TILES_SECONDARY, SW_TILES_VALID, SW_TILES_DIRTY};
  const bool* masks[4] = {prim, sec, valid, dirty};
  for (int i = 0; i < 4; ++i) {
    sw_tile_set_t* set = NULL;
    SW_OK_(sw_tiled_tiles(f->te, kinds[i], &set));
    tt_expect_set_mask(f, set, masks[i]);
    sw_tile_set_release(set);
  }
}

static inline uint64_t tt_version(const sw_carrier_t* c) {
  uint64_t v = UINT64_MAX;
  SW_OK_(sw_carrier_version(c, &v));
  return v;
}

static inline bool tt_owned(const sw_carrier_t* c) {
  bool o = false;
  SW_OK_(sw_carrier_is_owned(c, &o));
  return o;
}

static inline bool tt_disposed(const sw_carrier_t* c) {
  bool d = false;
  SW_OK_(sw_carrier_is_disposed(c, &d));
  return d;
}

/* Everything a refused request must leave unchanged. */
typedef struct tt_snap_t {
  int64_t ntiles;
  sw_tile_state_t st[TT_MAXTILES];
  uint64_t version, primary_version, secondary_version;
  bool primary_owned, secondary_owned;
  bool full_requires_grad, full_is_leaf, full_has_grad;
} tt_snap_t;

static inline tt_snap_t tt_snapshot(const tt_fix_t* f) {
  tt_snap_t s;
  memset(&s, 0, sizeof s);
  s.ntiles = f->ntiles;
  for (int64_t k = 0; k < f->ntiles; ++k) s.st[k] = tt_state(f, k);
  s.version = tt_version(f->te);
  sw_carrier_t *p = NULL, *q = NULL;
  SW_OK_(sw_tiled_primary(f->te, &p));
  SW_OK_(sw_tiled_secondary(f->te, &q));
  s.primary_version = tt_version(p);
  s.secondary_version = tt_version(q);
  s.primary_owned = tt_owned(p);
  s.secondary_owned = tt_owned(q);
  sw_carrier_release(p);
  sw_carrier_release(q);
  SW_OK_(sw_tensor_requires_grad(f->full, &s.full_requires_grad));
  SW_OK_(sw_tensor_is_leaf(f->full, &s.full_is_leaf));
  sw_tensor_t* g = NULL;
  SW_OK_(sw_tensor_grad(f->full, &g));
  s.full_has_grad = g != NULL;
  sw_tensor_release(g);
  return s;
}

/* Every statistic of an LRU policy equals `want`'s. */
static inline void tt_expect_lru_stats(sw_lru_policy_t* lru, const sw_lru_stats_t* want) {
  sw_lru_stats_t st;
  sw_lru_stats_init(&st);
  SW_OK_(sw_lru_policy_stats(lru, &st));
  assert_int_equal(st.requests, want->requests);
  assert_int_equal(st.hits, want->hits);
  assert_int_equal(st.misses, want->misses);
  assert_int_equal(st.promoted, want->promoted);
  assert_int_equal(st.evicted, want->evicted);
  assert_int_equal(st.transient, want->transient);
}

static inline void tt_expect_snapshot(const tt_fix_t* f, const tt_snap_t* want) {
  const tt_snap_t got = tt_snapshot(f);
  for (int64_t k = 0; k < f->ntiles; ++k) {
    const sw_tile_state_t* a = &got.st[k];
    const sw_tile_state_t* b = &want->st[k];
    if (a->location != b->location || a->valid != b->valid || a->dirty != b->dirty)
      fail_msg("tile %lld changed: %s valid=%d dirty=%d, was %s valid=%d dirty=%d", (long long)k,
               tt_location_name(a->location), (int)a->valid, (int)a->dirty, tt_location_name(b->location),
               (int)b->valid, (int)b->dirty);
  }
  assert_int_equal(got.version, want->version);
  assert_int_equal(got.primary_version, want->primary_version);
  assert_int_equal(got.secondary_version, want->secondary_version);
  assert_int_equal(got.primary_owned, want->primary_owned);
  assert_int_equal(got.secondary_owned, want->secondary_owned);
  assert_int_equal(got.full_requires_grad, want->full_requires_grad);
  assert_int_equal(got.full_is_leaf, want->full_is_leaf);
  assert_int_equal(got.full_has_grad, want->full_has_grad);
}

/* ---- awaits ------------------------------------------------------------- */

static inline sw_tensor_t* tt_wait_result(sw_await_t* a) {
  SW_OK_(sw_await_wait(a, -1));
  sw_tensor_t* r = NULL;
  SW_OK_(sw_await_result(a, &r));
  return r;
}

/* Projects and waits; the compact result (a new reference). */
static inline sw_tensor_t* tt_project(const tt_fix_t* f, sw_tensor_t* t, const sw_tile_selection_t* sel,
                                      sw_carrier_t* dst) {
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_project(f->te, t, sel, dst, &a));
  sw_tensor_t* r = tt_wait_result(a);
  assert_non_null(r);
  sw_await_release(a);
  return r;
}

/* Scatters and waits; the full result (a new reference). */
static inline sw_tensor_t* tt_scatter(const tt_fix_t* f, sw_tensor_t* compact, sw_tensor_t* tmpl,
                                      const sw_tile_selection_t* sel, sw_scatter_reduction_t reduction) {
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_scatter(f->te, compact, tmpl, sel, reduction, &a));
  sw_tensor_t* r = tt_wait_result(a);
  assert_non_null(r);
  sw_await_release(a);
  return r;
}

/* The compact values a projection of `selection` from a full tensor whose
 * logical values are `logical` must produce (first mode fastest). */
static inline double* tt_compact_expect(const tt_fix_t* f, const double* logical, const sw_tile_selection_t* sel,
                                        int64_t* out_n) {
  size_t rank = 0;
  SW_OK_(sw_tile_selection_rank(sel, &rank));
  assert_int_equal(rank, f->rank);
  int64_t cgrid[TT_MAXR], cshape[TT_MAXR], axes[TT_MAXR][64];
  SW_OK_(sw_tile_selection_compact_grid_shape(sel, cgrid, TT_MAXR));
  int64_t n = 1;
  for (size_t i = 0; i < rank; ++i) {
    SW_OK_(sw_tile_selection_axis(sel, i, axes[i], 64));
    cshape[i] = cgrid[i] * f->tile[i];
    n *= cshape[i];
  }
  double* out = (double*)malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t o = 0; o < n; ++o) {
    int64_t r = o, x = 0, scale = 1;
    for (size_t i = 0; i < rank; ++i) {
      const int64_t y = r % cshape[i];
      r /= cshape[i];
      x += (axes[i][y / f->tile[i]] * f->tile[i] + y % f->tile[i]) * scale;
      scale *= f->logical[i];
    }
    out[o] = logical[x];
  }
  if (out_n) *out_n = n;
  return out;
}

/* Logical values of the dense full tensor whose canonical slots hold canon:
 * the same array (ordinal o is slot o). */
static inline sw_tensor_t* tt_tensor_over(sw_carrier_t* c, int64_t offset, const char* layout) {
  sw_layout_t* l = NULL;
  SW_OK_(sw_layout_parse(layout, &l));
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_create(c, offset, l, &t));
  sw_layout_release(l);
  return t;
}

/* A dense tensor of `dtype` on the primary kind holding `data` (numel
 * elements of dtype). */
static inline sw_tensor_t* tt_tensor_from_data(sw_runtime_t* rt, sw_dtype_t dtype, const int64_t* extents, size_t rank,
                                               const void* data) {
  int64_t n = 1;
  for (size_t i = 0; i < rank; ++i) n *= extents[i];
  sw_carrier_t* c = tt_carrier(rt, TT_PRIMARY, dtype, (size_t)n);
  if (n) SW_OK_(sw_carrier_write(c, 0, (size_t)n, data));
  sw_layout_t* l = NULL;
  SW_OK_(sw_layout_dense(extents, rank, &l));
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_create(c, 0, l, &t));
  sw_layout_release(l);
  sw_carrier_release(c);
  return t;
}

/* As sw_test_tensor (f64 for SW_DTYPE_F64, else f32), on the primary kind. */
static inline sw_tensor_t* tt_tensor(sw_runtime_t* rt, sw_dtype_t dtype, const int64_t* extents, size_t rank,
                                     const double* values) {
  if (TT_PRIMARY == SW_CARRIER_CPU) return sw_test_tensor(rt, dtype, extents, rank, values);
  if (dtype == SW_DTYPE_F64) return tt_tensor_from_data(rt, SW_DTYPE_F64, extents, rank, values);
  int64_t n = 1;
  for (size_t i = 0; i < rank; ++i) n *= extents[i];
  float* f = (float*)malloc(sizeof(float) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; ++i) f[i] = (float)values[i];
  sw_tensor_t* t = tt_tensor_from_data(rt, SW_DTYPE_F32, extents, rank, f);
  free(f);
  return t;
}

/* A dense f32 tensor on the primary kind holding `values`. */
static inline sw_tensor_t* tt_dense(sw_runtime_t* rt, const int64_t* extents, size_t rank, const double* values) {
  return tt_tensor(rt, SW_DTYPE_F32, extents, rank, values);
}

static inline void tt_expect_shape(const sw_tensor_t* t, const int64_t* extents, size_t rank) {
  size_t r = 99;
  SW_OK_(sw_tensor_rank(t, &r));
  assert_int_equal(r, rank);
  int64_t s[SW_MAX_RANK];
  SW_OK_(sw_tensor_shape(t, s, SW_MAX_RANK));
  for (size_t i = 0; i < rank; ++i) assert_int_equal(s[i], extents[i]);
}

static inline void tt_expect_dense_layout(const sw_tensor_t* t) {
  size_t r = 0;
  SW_OK_(sw_tensor_rank(t, &r));
  int64_t s[SW_MAX_RANK];
  SW_OK_(sw_tensor_shape(t, s, SW_MAX_RANK));
  sw_layout_t *got = NULL, *dense = NULL;
  SW_OK_(sw_tensor_layout(t, &got));
  SW_OK_(sw_layout_dense(s, r, &dense));
  bool eq = false;
  SW_OK_(sw_layout_equal(got, dense, &eq));
  assert_true(eq);
  int64_t off = -1;
  SW_OK_(sw_tensor_offset(t, &off));
  assert_int_equal(off, 0);
  sw_layout_release(got);
  sw_layout_release(dense);
}

static inline sw_carrier_kind_t tt_kind(const sw_carrier_t* c) {
  sw_carrier_kind_t k = SW_CARRIER_KIND_FORCE32;
  SW_OK_(sw_carrier_kind(c, &k));
  return k;
}

static inline sw_carrier_t* tt_carrier_of(const sw_tensor_t* t) {
  sw_carrier_t* c = NULL;
  SW_OK_(sw_tensor_carrier(t, &c));
  return c;
}

/* The logical values of a full result after writing compact values `c` at
 * `selection` over `base` (replace, or add when `add`). */
static inline double* tt_scatter_expect(const tt_fix_t* f, const double* base, const sw_tile_selection_t* sel,
                                        const double* c, bool add) {
  size_t rank = 0;
  SW_OK_(sw_tile_selection_rank(sel, &rank));
  int64_t cgrid[TT_MAXR], cshape[TT_MAXR], axes[TT_MAXR][64];
  SW_OK_(sw_tile_selection_compact_grid_shape(sel, cgrid, TT_MAXR));
  int64_t n = 1;
  for (size_t i = 0; i < rank; ++i) {
    SW_OK_(sw_tile_selection_axis(sel, i, axes[i], 64));
    cshape[i] = cgrid[i] * f->tile[i];
    n *= cshape[i];
  }
  double* out = (double*)malloc(sizeof(double) * (size_t)f->n);
  memcpy(out, base, sizeof(double) * (size_t)f->n);
  for (int64_t o = 0; o < n; ++o) {
    int64_t r = o, x = 0, scale = 1;
    for (size_t i = 0; i < rank; ++i) {
      const int64_t y = r % cshape[i];
      r /= cshape[i];
      x += (axes[i][y / f->tile[i]] * f->tile[i] + y % f->tile[i]) * scale;
      scale *= f->logical[i];
    }
    out[x] = add ? out[x] + c[o] : c[o];
  }
  return out;
}

#endif /* SW_TILED_TEST_H_ */
