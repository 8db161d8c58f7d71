/* A randomized model-based test of TiledEvictable: fixed seeds drive random
 * sequences of promote / evict (blocking and async), projections (random
 * permuted selections, destinations), scatter (replace / add) followed by
 * using the result, public writes, direct ops on the full tensor and backward
 * through projection and direct ops, over host, file and zstd secondary tiers
 * and canonical or within-tile permuted layouts. A plain reference model
 * (double arrays and per-tile metadata) predicts every value, tile state,
 * version, gradient and refusal; it is checked after every step.
 *
 * SW_TILED_MODEL_SEEDS / SW_TILED_MODEL_STEPS override the defaults (30 x 300). */
#include "sw_tiled_test.h"

#define MAXN 1024

enum { LOC_PRIMARY = SW_TILE_PRIMARY, LOC_SECONDARY = SW_TILE_SECONDARY, LOC_INVALID = SW_TILE_INVALID };

typedef struct rng_t {
  uint64_t s;
} rng_t;

static uint64_t rng_next(rng_t* r) {
  uint64_t x = r->s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  r->s = x;
  return x * 0x2545F4914F6CDD1DULL;
}

/* Uniform in [0, n). */
static int64_t rng_below(rng_t* r, int64_t n) { return (int64_t)(rng_next(r) % (uint64_t)n); }

static bool rng_chance(rng_t* r, int percent) { return rng_below(r, 100) < percent; }

typedef struct model_t {
  sw_runtime_t* rt;
  rng_t rng;
  tt_fix_t f; /* f.full is the current tensor (canonical or permuted layout) */
  sw_carrier_kind_t kind;
  int loc[TT_MAXTILES];
  bool dirty[TT_MAXTILES];
  double canon[MAXN];     /* canonical slot values (meaningful for valid tiles) */
  int64_t slot_of[MAXN];  /* logical ordinal -> canonical slot */
  uint64_t version;
  bool requires_grad;
  bool has_grad;
  double grad[MAXN]; /* logical */
  int steps, refusals, valid_steps;
} model_t;

/* ---- helpers ---------------------------------------------------------------- */

static int trace_enabled = -1;

/* SW_TILED_MODEL_TRACE=1 prints every step. */
static void trace(const model_t* m, const char* fmt, ...) {
  if (trace_enabled < 0) trace_enabled = getenv("SW_TILED_MODEL_TRACE") != NULL;
  if (!trace_enabled) return;
  fprintf(stderr, "[step %d] ", m->steps);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

static int64_t tile_of_slot(const model_t* m, int64_t slot) {
  int64_t k, w;
  tt_locate(&m->f, slot, &k, &w);
  return k;
}

static double logical_value(const model_t* m, int64_t o) { return m->canon[m->slot_of[o]]; }

static void logical_coord(const model_t* m, int64_t o, int64_t* x) {
  for (size_t i = 0; i < m->f.rank; ++i) {
    x[i] = o % m->f.logical[i];
    o /= m->f.logical[i];
  }
}

static sw_tensor_t* dense_of(const model_t* m, const int64_t* extents, size_t rank, const double* values) {
  return tt_tensor(m->rt, m->f.dtype, extents, rank, values);
}

static void expect_error(sw_error_t* e, sw_error_code_t code, const char* what) {
  if (!e) fail_msg("%s succeeded; expected %s", what, sw_error_code_name(code));
  if (sw_error_code(e) != code)
    fail_msg("%s failed with %s (%s); expected %s", what, sw_error_code_name(sw_error_code(e)), sw_error_message(e),
             sw_error_code_name(code));
  sw_error_free(e);
}

/* A small integer, exact in f32 sums and products. */
static double small_value(model_t* m) { return (double)(rng_below(&m->rng, 1001) - 500); }

/* Fills slot_of from the current tensor's offset and layout. */
static void compute_slots(model_t* m) {
  sw_layout_t* l = NULL;
  SW_OK_(sw_tensor_layout(m->f.full, &l));
  int64_t off = 0;
  SW_OK_(sw_tensor_offset(m->f.full, &off));
  int64_t x[TT_MAXR];
  for (int64_t o = 0; o < m->f.n; ++o) {
    logical_coord(m, o, x);
    int64_t idx = 0;
    SW_OK_(sw_layout_index(l, x, m->f.rank, &idx));
    m->slot_of[o] = off + idx;
  }
  sw_layout_release(l);
}

/* A tensor over the carrier: canonical dense, within-tile reversed, or (rank
 * 2 with square tiles) within-tile transposed. All are footprint compatible. */
static sw_tensor_t* make_view(model_t* m, int variant) {
  const tt_fix_t* f = &m->f;
  if (variant == 0) {
    sw_tensor_t* t = NULL;
    SW_OK_(sw_tiled_full_tensor(f->te, &t));
    return t;
  }
  int64_t S[TT_MAXR], s = 1;
  for (size_t i = 0; i < f->rank; ++i) {
    S[i] = s;
    s *= f->logical[i];
  }
  char text[512];
  char shape[256] = "(", stride[256] = "(";
  int64_t offset = 0;
  const bool transpose = variant == 2 && f->rank == 2 && f->tile[0] == f->tile[1];
  for (size_t i = 0; i < f->rank; ++i) {
    char a[64], b[64];
    int64_t within;
    if (transpose) {
      within = S[1 - i]; /* a_i moves along the other axis inside the tile */
    } else {
      within = -S[i];
      offset += (f->tile[i] - 1) * S[i];
    }
    snprintf(a, sizeof a, "%s(%lld,%lld)", i ? "," : "", (long long)f->tile[i], (long long)f->grid[i]);
    snprintf(b, sizeof b, "%s(%lld,%lld)", i ? "," : "", (long long)within, (long long)(f->tile[i] * S[i]));
    strcat(shape, a);
    strcat(stride, b);
  }
  /* A rank-1 layout is "((t,g)):((a,b))": one nested mode. */
  strcat(shape, ")");
  strcat(stride, ")");
  snprintf(text, sizeof text, "%s:%s", shape, stride);
  return tt_tensor_over(f->te, offset, text);
}

/* A fresh TiledEvictable with random geometry, tier kind, seeds and layout. */
static void model_new(model_t* m, sw_carrier_kind_t kind, sw_dtype_t dtype) {
  if (m->f.te) tt_free(&m->f);
  m->kind = kind;
  int64_t grid[TT_MAXR], tile[TT_MAXR];
  size_t rank;
  int64_t ntiles, T;
  do {
    rank = (size_t)(1 + rng_below(&m->rng, 3));
    ntiles = 1;
    T = 1;
    for (size_t i = 0; i < rank; ++i) {
      grid[i] = 1 + rng_below(&m->rng, 4);
      tile[i] = 1 + rng_below(&m->rng, 3);
      ntiles *= grid[i];
      T *= tile[i];
    }
  } while (ntiles > 12 || T > 8 || ntiles * T > MAXN);
  /* Seeds: mostly secondary, sometimes primary, both, or none. */
  const int64_t pick = rng_below(&m->rng, 10);
  const bool primary_full = pick >= 6 && pick <= 8, secondary_full = pick <= 5 || pick == 8;
  tt_make(&m->f, m->rt, dtype, rank, grid, tile, primary_full, kind, secondary_full, NULL);
  for (int64_t k = 0; k < m->f.ntiles; ++k) {
    m->loc[k] = primary_full ? LOC_PRIMARY : secondary_full ? LOC_SECONDARY : LOC_INVALID;
    m->dirty[k] = primary_full;
  }
  double* c = tt_canon_seed(&m->f, 0.0);
  memcpy(m->canon, c, sizeof(double) * (size_t)m->f.n);
  free(c);
  m->version = 0;
  /* Maybe a within-tile permuted view as the current tensor. */
  const int variant = (int)rng_below(&m->rng, 3);
  if (variant) {
    sw_tensor_t* v = make_view(m, variant);
    sw_tensor_release(m->f.full);
    m->f.full = v;
  }
  compute_slots(m);
  m->requires_grad = rng_chance(&m->rng, 60);
  {
    char geo[128] = "";
    for (size_t i = 0; i < rank; ++i)
      snprintf(geo + strlen(geo), sizeof geo - strlen(geo), " %lldx%lld", (long long)grid[i], (long long)tile[i]);
    trace(m, "new: kind %d dtype %d grid x tile%s seeds %lld view %d grad %d", (int)kind, (int)dtype, geo,
          (long long)pick, variant, (int)m->requires_grad);
  }
  if (m->requires_grad) SW_OK_(sw_tensor_set_requires_grad(m->f.full, true));
  m->has_grad = false;
  memset(m->grad, 0, sizeof m->grad);
}

static bool all_valid(const model_t* m) {
  for (int64_t k = 0; k < m->f.ntiles; ++k)
    if (m->loc[k] == LOC_INVALID) return false;
  return true;
}

/* ---- the check after every step ---------------------------------------------- */

static void model_check(model_t* m) {
  const tt_fix_t* f = &m->f;
  for (int64_t k = 0; k < f->ntiles; ++k) tt_expect_tile(f, k, (sw_tile_location_t)m->loc[k], m->dirty[k]);
  tt_expect_tile_sets_consistent(f);
  assert_int_equal(tt_version(f->te), m->version);
  if (all_valid(m)) {
    int64_t n = 0;
    double* got = sw_test_values(f->full, &n);
    assert_int_equal(n, f->n);
    for (int64_t o = 0; o < n; ++o)
      if (got[o] != logical_value(m, o))
        fail_msg("step %d: element %lld is %.17g, model %.17g", m->steps, (long long)o, got[o], logical_value(m, o));
    free(got);
  } else {
    int64_t x[TT_MAXR];
    bool probed[TT_MAXTILES] = {false};
    for (int64_t o = 0; o < f->n; ++o) {
      logical_coord(m, o, x);
      const int64_t k = tile_of_slot(m, m->slot_of[o]);
      double v = 0;
      if (m->loc[k] != LOC_INVALID) {
        SW_OK_(sw_tensor_get(f->full, x, f->rank, &v));
        if (v != logical_value(m, o))
          fail_msg("step %d: element %lld is %.17g, model %.17g", m->steps, (long long)o, v, logical_value(m, o));
      } else if (!probed[k]) {
        probed[k] = true;
        expect_error(sw_tensor_get(f->full, x, f->rank, &v), SW_ERROR_STATE, "reading an invalid tile");
      }
    }
  }
  sw_tensor_t* g = NULL;
  SW_OK_(sw_tensor_grad(f->full, &g));
  if (!m->has_grad) {
    assert_null(g);
    return;
  }
  assert_non_null(g);
  int64_t n = 0;
  double* got = sw_test_values(g, &n);
  for (int64_t o = 0; o < n; ++o)
    if (got[o] != m->grad[o]) fail_msg("step %d: grad %lld is %g, model %g", m->steps, (long long)o, got[o], m->grad[o]);
  free(got);
  sw_tensor_release(g);
}

/* ---- random arguments ----------------------------------------------------------- */

/* A random selection (a random non-empty subset per axis, shuffled). */
static sw_tile_selection_t* random_selection(model_t* m, int64_t axes[TT_MAXR][16], size_t counts[TT_MAXR]) {
  const int64_t* ptrs[TT_MAXR];
  for (size_t i = 0; i < m->f.rank; ++i) {
    const int64_t g = m->f.grid[i];
    int64_t perm[16];
    for (int64_t c = 0; c < g; ++c) perm[c] = c;
    for (int64_t c = g - 1; c > 0; --c) {
      const int64_t j = rng_below(&m->rng, c + 1);
      const int64_t t = perm[c];
      perm[c] = perm[j];
      perm[j] = t;
    }
    counts[i] = (size_t)(1 + rng_below(&m->rng, g));
    memcpy(axes[i], perm, sizeof(int64_t) * counts[i]);
    ptrs[i] = axes[i];
  }
  return tt_sel(m->f.rank, ptrs, counts);
}

/* Tile ordinals of a selection in its order. */
static size_t selection_tiles(const model_t* m, int64_t axes[TT_MAXR][16], const size_t counts[TT_MAXR], int64_t* ks) {
  size_t total = 1;
  for (size_t i = 0; i < m->f.rank; ++i) total *= counts[i];
  for (size_t j = 0; j < total; ++j) {
    size_t r = j;
    int64_t c[TT_MAXR];
    for (size_t i = 0; i < m->f.rank; ++i) {
      c[i] = axes[i][r % counts[i]];
      r /= counts[i];
    }
    ks[j] = tt_tile_ordinal(&m->f, c);
  }
  return total;
}

/* A random subset of tiles as a TileSet (possibly empty). */
static sw_tile_set_t* random_tile_set(model_t* m, bool* in) {
  int64_t ks[TT_MAXTILES];
  size_t n = 0;
  const int percent = (int)rng_below(&m->rng, 101);
  for (int64_t k = 0; k < m->f.ntiles; ++k) {
    in[k] = rng_chance(&m->rng, percent);
    if (in[k]) ks[n++] = k;
  }
  /* Any order: the set sorts itself. */
  for (size_t i = n; i > 1; --i) {
    const size_t j = (size_t)rng_below(&m->rng, (int64_t)i);
    const int64_t t = ks[i - 1];
    ks[i - 1] = ks[j];
    ks[j] = t;
  }
  return tt_set_ordinals(&m->f, ks, n);
}

/* Logical values of the current tensor. */
static double* logical_values(const model_t* m) {
  double* v = (double*)malloc(sizeof(double) * (size_t)m->f.n);
  for (int64_t o = 0; o < m->f.n; ++o) v[o] = logical_value(m, o);
  return v;
}

/* ---- steps ------------------------------------------------------------------------ */

static void step_residency(model_t* m, bool promote) {
  bool in[TT_MAXTILES];
  sw_tile_set_t* set = random_tile_set(m, in);
  bool refused = false;
  if (promote)
    for (int64_t k = 0; k < m->f.ntiles; ++k) refused = refused || (in[k] && m->loc[k] == LOC_INVALID);
  const bool async = rng_chance(&m->rng, 50);
  {
    char list[256] = "";
    for (int64_t k = 0; k < m->f.ntiles; ++k)
      if (in[k]) snprintf(list + strlen(list), sizeof list - strlen(list), " %lld", (long long)k);
    trace(m, "%s%s {%s }", promote ? "promote" : "evict", async ? "_async" : "", list);
  }
  sw_error_t* e;
  if (async) {
    sw_await_t* a = NULL;
    e = promote ? sw_tiled_promote_async(m->f.te, set, &a) : sw_tiled_evict_async(m->f.te, set, &a);
    if (!e) {
      e = sw_await_wait(a, -1);
      sw_await_release(a);
    }
  } else {
    e = promote ? sw_tiled_promote(m->f.te, set) : sw_tiled_evict(m->f.te, set);
  }
  if (refused) {
    expect_error(e, SW_ERROR_STATE, promote ? "promote of an invalid tile" : "evict");
    m->refusals += 1;
  } else {
    if (e) fail_msg("step %d: %s failed: %s", m->steps, promote ? "promote" : "evict", sw_error_message(e));
    for (int64_t k = 0; k < m->f.ntiles; ++k) {
      if (!in[k]) continue;
      if (promote) {
        if (m->loc[k] == LOC_SECONDARY) {
          m->loc[k] = LOC_PRIMARY;
          m->dirty[k] = false;
        }
      } else if (m->loc[k] == LOC_PRIMARY) {
        m->loc[k] = LOC_SECONDARY;
        m->dirty[k] = false;
      }
    }
  }
  sw_tile_set_release(set);
}

/* Projects a random selection into a random destination and checks it. With
 * `grad_w` non-NULL (and a tensor requiring grad), also runs backward through
 * elementwise_mul by random weights, optionally after an in-place write. */
static void step_project(model_t* m, bool backward, bool write_in_between) {
  int64_t axes[TT_MAXR][16];
  size_t counts[TT_MAXR];
  sw_tile_selection_t* sel = random_selection(m, axes, counts);
  int64_t ks[TT_MAXTILES];
  const size_t nt = selection_tiles(m, axes, counts, ks);
  bool refused = false;
  for (size_t j = 0; j < nt; ++j) refused = refused || m->loc[ks[j]] == LOC_INVALID;
  sw_carrier_t* dst = NULL;
  const int64_t need = (int64_t)nt * m->f.T;
  const int64_t d = rng_below(&m->rng, 3);
  {
    char list[256] = "";
    for (size_t j = 0; j < nt; ++j) snprintf(list + strlen(list), sizeof list - strlen(list), " %lld", (long long)ks[j]);
    trace(m, "project%s%s dst=%lld tiles {%s }", backward ? " +backward" : "", write_in_between ? " +write" : "",
          (long long)d, list);
  }
  if (d == 1) dst = tt_carrier(m->rt, TT_PRIMARY, m->f.dtype, 0);
  if (d == 2) dst = tt_carrier(m->rt, TT_PRIMARY, m->f.dtype, (size_t)(need + rng_below(&m->rng, 5)));
  sw_await_t* a = NULL;
  sw_error_t* e = sw_tiled_project(m->f.te, m->f.full, sel, dst, &a);
  if (refused) {
    expect_error(e, SW_ERROR_STATE, "projection of an invalid tile");
    assert_null(a);
    if (dst) assert_false(tt_owned(dst));
    m->refusals += 1;
    sw_carrier_release(dst);
    sw_tile_selection_release(sel);
    return;
  }
  if (e) fail_msg("step %d: project failed: %s", m->steps, sw_error_message(e));
  sw_tensor_t* c = tt_wait_result(a);
  sw_await_release(a);
  double* lv = logical_values(m);
  int64_t n = 0;
  double* want = tt_compact_expect(&m->f, lv, sel, &n);
  assert_int_equal(n, need);
  tt_expect_values(c, want, n);
  tt_expect_dense_layout(c);
  if (dst) {
    sw_carrier_t* cc = tt_carrier_of(c);
    assert_ptr_equal(cc, dst);
    assert_int_equal(tt_version(dst), 1);
    sw_carrier_release(cc);
  }
  /* Without a policy the projected tiles stay primary. */
  for (size_t j = 0; j < nt; ++j)
    if (m->loc[ks[j]] == LOC_SECONDARY) {
      m->loc[ks[j]] = LOC_PRIMARY;
      m->dirty[ks[j]] = false;
    }
  if (backward && m->requires_grad) {
    double* wv = (double*)malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; ++i) wv[i] = (double)(rng_below(&m->rng, 17) - 8);
    int64_t cshape[TT_MAXR];
    SW_OK_(sw_tensor_shape(c, cshape, TT_MAXR));
    sw_tensor_t* w = dense_of(m, cshape, m->f.rank, wv);
    sw_tensor_t *y = NULL, *loss = NULL;
    SW_OK_(sw_elementwise_mul(c, w, &y));
    SW_OK_(sw_reduce_sum(y, NULL, 0, false, &loss));
    if (write_in_between) {
      /* A public write of a valid element: the saved version is stale. */
      int64_t o = rng_below(&m->rng, m->f.n);
      while (m->loc[tile_of_slot(m, m->slot_of[o])] == LOC_INVALID) o = (o + 1) % m->f.n;
      int64_t x[TT_MAXR];
      logical_coord(m, o, x);
      const double v = small_value(m);
      SW_OK_(sw_tensor_set(m->f.full, x, m->f.rank, v));
      m->canon[m->slot_of[o]] = v;
      const int64_t k = tile_of_slot(m, m->slot_of[o]);
      m->loc[k] = LOC_PRIMARY;
      m->dirty[k] = true;
      m->version += 1;
      expect_error(sw_backward(loss, NULL, false), SW_ERROR_STATE, "backward after an in-place write");
    } else {
      SW_OK_(sw_backward(loss, NULL, false));
      double* g = tt_scatter_expect(&m->f, m->grad, sel, wv, true);
      memcpy(m->grad, g, sizeof(double) * (size_t)m->f.n);
      free(g);
      m->has_grad = true;
    }
    sw_tensor_release(loss);
    sw_tensor_release(y);
    sw_tensor_release(w);
    free(wv);
  }
  free(want);
  free(lv);
  sw_tensor_release(c);
  sw_carrier_release(dst);
  sw_tile_selection_release(sel);
}

static void step_scatter(model_t* m) {
  int64_t axes[TT_MAXR][16];
  size_t counts[TT_MAXR];
  sw_tile_selection_t* sel = random_selection(m, axes, counts);
  int64_t ks[TT_MAXTILES];
  const size_t nt = selection_tiles(m, axes, counts, ks);
  const bool add = rng_chance(&m->rng, 50);
  bool refused = false;
  if (add)
    for (size_t j = 0; j < nt; ++j) refused = refused || m->loc[ks[j]] == LOC_INVALID;
  int64_t cshape[TT_MAXR];
  int64_t n = 1;
  for (size_t i = 0; i < m->f.rank; ++i) {
    cshape[i] = (int64_t)counts[i] * m->f.tile[i];
    n *= cshape[i];
  }
  double* cv = (double*)malloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; ++i) cv[i] = small_value(m);
  sw_tensor_t* compact = dense_of(m, cshape, m->f.rank, cv);
  {
    char list[256] = "";
    for (size_t j = 0; j < nt; ++j) snprintf(list + strlen(list), sizeof list - strlen(list), " %lld", (long long)ks[j]);
    trace(m, "scatter %s tiles {%s }", add ? "add" : "replace", list);
  }
  /* Scatter autograd has its own suite; here the result is a plain leaf. */
  const bool previous = sw_set_grad_enabled(false);
  sw_await_t* a = NULL;
  sw_error_t* e = sw_tiled_scatter(m->f.te, compact, m->f.full, sel, add ? SW_SCATTER_ADD : SW_SCATTER_REPLACE, &a);
  sw_set_grad_enabled(previous);
  if (refused) {
    expect_error(e, SW_ERROR_STATE, "add scatter over an invalid tile");
    assert_null(a);
    m->refusals += 1;
    free(cv);
    sw_tensor_release(compact);
    sw_tile_selection_release(sel);
    return;
  }
  if (e) fail_msg("step %d: scatter failed: %s", m->steps, sw_error_message(e));
  sw_tensor_t* r = tt_wait_result(a);
  sw_await_release(a);
  /* The template is unchanged (no policy: its tiles do not move). */
  model_check(m);
  /* Use the result: its tiles, version and a projection with the same
   * selection. */
  tt_fix_t rf = m->f;
  rf.te = tt_carrier_of(r);
  rf.full = r;
  bool selected[TT_MAXTILES] = {false};
  for (size_t j = 0; j < nt; ++j) selected[ks[j]] = true;
  for (int64_t k = 0; k < m->f.ntiles; ++k)
    tt_expect_tile(&rf, k, selected[k] ? SW_TILE_PRIMARY : SW_TILE_INVALID, selected[k]);
  assert_int_equal(tt_version(rf.te), 1);
  double* lv = logical_values(m);
  double* after = tt_scatter_expect(&m->f, lv, sel, cv, add);
  int64_t cn = 0;
  double* want = tt_compact_expect(&m->f, after, sel, &cn);
  sw_await_t* pa = NULL;
  SW_OK_(sw_tiled_project(rf.te, r, sel, NULL, &pa));
  sw_tensor_t* back = tt_wait_result(pa);
  sw_await_release(pa);
  tt_expect_values(back, want, cn);
  sw_tensor_release(back);
  if (rng_chance(&m->rng, 25)) {
    /* Continue with the result as the current tensor. */
    trace(m, "  adopt the scatter result");
    sw_tensor_retain(r);
    sw_carrier_retain(rf.te);
    tt_free(&m->f);
    m->f.te = rf.te;
    m->f.full = r;
    for (int64_t k = 0; k < m->f.ntiles; ++k) {
      m->loc[k] = selected[k] ? LOC_PRIMARY : LOC_INVALID;
      m->dirty[k] = selected[k];
    }
    for (int64_t o = 0; o < m->f.n; ++o) m->canon[m->slot_of[o]] = after[o];
    m->version = 1;
    m->requires_grad = rng_chance(&m->rng, 60);
    if (m->requires_grad) SW_OK_(sw_tensor_set_requires_grad(m->f.full, true));
    m->has_grad = false;
    memset(m->grad, 0, sizeof m->grad);
  }
  free(want);
  free(after);
  free(lv);
  sw_carrier_release(rf.te);
  sw_tensor_release(r);
  free(cv);
  sw_tensor_release(compact);
  sw_tile_selection_release(sel);
}

static void step_write(model_t* m) {
  /* A whole-tensor write over invalid tiles is refused only after writing
   * the elements before the first invalid one (see tiled_errors,
   * whole_write_over_invalid_tiles_changes_nothing): not exercised here. */
  if (rng_chance(&m->rng, 80) || !all_valid(m)) {
    const int64_t o = rng_below(&m->rng, m->f.n);
    int64_t x[TT_MAXR];
    logical_coord(m, o, x);
    const double v = small_value(m);
    const int64_t k = tile_of_slot(m, m->slot_of[o]);
    trace(m, "set element %lld (tile %lld) = %g", (long long)o, (long long)k, v);
    sw_error_t* e = sw_tensor_set(m->f.full, x, m->f.rank, v);
    if (m->loc[k] == LOC_INVALID) {
      expect_error(e, SW_ERROR_STATE, "write to an invalid tile");
      m->refusals += 1;
      return;
    }
    if (e) fail_msg("step %d: set failed: %s", m->steps, sw_error_message(e));
    m->canon[m->slot_of[o]] = v;
    m->loc[k] = LOC_PRIMARY;
    m->dirty[k] = true;
    m->version += 1;
    return;
  }
  /* The whole tensor at once. */
  const size_t es = sw_dtype_size(m->f.dtype);
  unsigned char* buf = (unsigned char*)malloc(es * (size_t)m->f.n);
  double* vals = (double*)malloc(sizeof(double) * (size_t)m->f.n);
  for (int64_t o = 0; o < m->f.n; ++o) {
    vals[o] = small_value(m);
    if (m->f.dtype == SW_DTYPE_F64) {
      memcpy(buf + o * 8, &vals[o], 8);
    } else {
      const float fv = (float)vals[o];
      memcpy(buf + o * 4, &fv, 4);
    }
  }
  trace(m, "write every element");
  sw_error_t* e = sw_tensor_write(m->f.full, buf, es * (size_t)m->f.n);
  if (e) fail_msg("step %d: write failed: %s", m->steps, sw_error_message(e));
  for (int64_t o = 0; o < m->f.n; ++o) m->canon[m->slot_of[o]] = vals[o];
  for (int64_t k = 0; k < m->f.ntiles; ++k) {
    m->loc[k] = LOC_PRIMARY;
    m->dirty[k] = true;
  }
  m->version += 1;
  free(vals);
  free(buf);
}

/* Direct ops on the full tensor: every tile, any residency. */
static void step_direct(model_t* m, bool backward) {
  const bool valid = all_valid(m);
  double* lv = logical_values(m);
  const int64_t which = rng_below(&m->rng, 4);
  sw_tensor_t* r = NULL;
  sw_tensor_t* other = NULL;
  double* ov = NULL;
  sw_error_t* e = NULL;
  double* want = NULL;
  int64_t wn = 0;
  trace(m, "direct %s %lld", backward ? "backward" : "op", (long long)which);
  if (backward) {
    if (!m->requires_grad) {
      free(lv);
      return;
    }
    ov = (double*)malloc(sizeof(double) * (size_t)m->f.n);
    for (int64_t o = 0; o < m->f.n; ++o) ov[o] = (double)(rng_below(&m->rng, 9) - 4);
    other = dense_of(m, m->f.logical, m->f.rank, ov);
    sw_tensor_t* y = NULL;
    e = sw_elementwise_mul(m->f.full, other, &y);
    if (!e) {
      SW_OK_(sw_reduce_sum(y, NULL, 0, false, &r));
      sw_tensor_release(y);
      SW_OK_(sw_backward(r, NULL, false));
      for (int64_t o = 0; o < m->f.n; ++o) m->grad[o] += ov[o];
      m->has_grad = true;
      want = (double*)malloc(sizeof(double));
      want[0] = 0;
      for (int64_t o = 0; o < m->f.n; ++o) want[0] += lv[o] * ov[o];
      wn = 1;
    }
  } else if (which == 0) {
    e = sw_reduce_sum(m->f.full, NULL, 0, false, &r);
    want = (double*)malloc(sizeof(double));
    want[0] = 0;
    for (int64_t o = 0; o < m->f.n; ++o) want[0] += lv[o];
    wn = 1;
  } else if (which == 1) {
    /* Sum over one axis. */
    const int64_t axis = rng_below(&m->rng, (int64_t)m->f.rank);
    e = sw_reduce_sum(m->f.full, &axis, 1, true, &r);
    wn = m->f.n / m->f.logical[axis];
    want = (double*)calloc((size_t)wn, sizeof(double));
    int64_t x[TT_MAXR];
    for (int64_t o = 0; o < m->f.n; ++o) {
      logical_coord(m, o, x);
      int64_t ro = 0, s = 1;
      for (size_t i = 0; i < m->f.rank; ++i) {
        const int64_t ext = (int64_t)i == axis ? 1 : m->f.logical[i];
        ro += ((int64_t)i == axis ? 0 : x[i]) * s;
        s *= ext;
      }
      want[ro] += lv[o];
    }
  } else if (which == 2) {
    ov = (double*)malloc(sizeof(double) * (size_t)m->f.n);
    for (int64_t o = 0; o < m->f.n; ++o) ov[o] = small_value(m);
    other = dense_of(m, m->f.logical, m->f.rank, ov);
    e = rng_chance(&m->rng, 50) ? sw_add(m->f.full, other, &r) : sw_add(other, m->f.full, &r);
    wn = m->f.n;
    want = (double*)malloc(sizeof(double) * (size_t)wn);
    for (int64_t o = 0; o < wn; ++o) want[o] = lv[o] + ov[o];
  } else {
    e = sw_mul_scalar(m->f.full, -2.0, &r);
    wn = m->f.n;
    want = (double*)malloc(sizeof(double) * (size_t)wn);
    for (int64_t o = 0; o < wn; ++o) want[o] = -2.0 * lv[o];
  }
  if (!valid) {
    expect_error(e, SW_ERROR_STATE, "a direct op over invalid tiles");
    assert_null(r);
    m->refusals += 1;
  } else {
    if (e) fail_msg("step %d: direct op %lld failed: %s", m->steps, (long long)which, sw_error_message(e));
    tt_expect_values(r, want, wn);
    sw_carrier_t* rc = tt_carrier_of(r);
    assert_int_equal(tt_kind(rc), TT_PRIMARY);
    sw_carrier_release(rc);
    /* Every tile was made available; without a policy they stay primary. */
    for (int64_t k = 0; k < m->f.ntiles; ++k)
      if (m->loc[k] == LOC_SECONDARY) {
        m->loc[k] = LOC_PRIMARY;
        m->dirty[k] = false;
      }
  }
  sw_tensor_release(r);
  sw_tensor_release(other);
  free(ov);
  free(want);
  free(lv);
}

static void step_clear_grad(model_t* m) {
  trace(m, "clear grad");
  SW_OK_(sw_tensor_clear_grad(m->f.full));
  m->has_grad = false;
  memset(m->grad, 0, sizeof m->grad);
}

static void model_step(model_t* m) {
  /* Adopted partial scatter results leave invalid tiles, which refuse most
   * requests: start over now and then so that most steps see valid data. */
  if (!all_valid(m) && rng_chance(&m->rng, 8)) {
    model_new(m, m->kind, m->f.dtype);
    return;
  }
  const int64_t r = rng_below(&m->rng, 100);
  if (r < 12)
    step_residency(m, true);
  else if (r < 24)
    step_residency(m, false);
  else if (r < 40)
    step_project(m, false, false);
  else if (r < 52)
    step_scatter(m);
  else if (r < 64)
    step_write(m);
  else if (r < 76)
    step_direct(m, false);
  else if (r < 88)
    step_project(m, true, false);
  else if (r < 92)
    step_direct(m, true);
  else if (r < 95)
    step_project(m, true, true);
  else if (r < 98)
    step_clear_grad(m);
  else
    model_new(m, m->kind, m->f.dtype);
}

static int env_int(const char* name, int fallback) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : fallback;
}

static void randomized_tiled_model(void** state) {
  (void)state;
  const int seeds = env_int("SW_TILED_MODEL_SEEDS", 30);
  const int steps = env_int("SW_TILED_MODEL_STEPS", 300);
  const sw_carrier_kind_t kinds[3] = {SW_CARRIER_HOST, SW_CARRIER_FILE, SW_CARRIER_ZSTD};
  const int64_t start = sw_async_now_ns();
  int total_refusals = 0, total_valid = 0;
  for (int seed = 0; seed < seeds; ++seed) {
    model_t* m = (model_t*)calloc(1, sizeof(model_t));
    m->rt = sw_async_runtime();
    m->rng.s = 0x9E3779B97F4A7C15ULL * (uint64_t)(seed + 1);
    model_new(m, kinds[seed % 3], seed % 4 == 3 ? SW_DTYPE_F64 : SW_DTYPE_F32);
    model_check(m);
    for (m->steps = 1; m->steps <= steps; ++m->steps) {
      model_step(m);
      model_check(m);
      m->valid_steps += all_valid(m);
    }
    total_refusals += m->refusals;
    total_valid += m->valid_steps;
    tt_free(&m->f);
    sw_runtime_release(m->rt);
    free(m);
  }
  const double seconds = (double)(sw_async_now_ns() - start) / 1e9;
  print_message("tiled model: %d seeds x %d steps in %.2f s (%d refusals checked, %d steps with every tile valid)\n",
                seeds, steps, seconds, total_refusals, total_valid);
}

int main(void) {
  if (!tt_primary_available()) return 77;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(randomized_tiled_model),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
