/* TiledEvictable entry points driven by fuzzed structure: geometries,
 * selections, tile sets, tensors over the carrier with fuzzed layouts (the
 * tile-footprint rule), and residency plans returned by a fuzzed policy
 * (out of range, wrong rank, overlapping, errors, no plan, a handle of
 * another kind). A model of every tile's values and validity follows what
 * succeeded: projections must return exactly the model's values, and a
 * refused request must leave every tile state and the version unchanged. */
#include "fuzz.h"

#define MAXR 3
#define MAXT 64

typedef struct model {
  sw_carrier_t* te;
  sw_tensor_t* full;
  size_t rank;
  int64_t grid[MAXR], tile[MAXR], ntiles, T, n;
  float* values;  /* per canonical slot */
  bool valid[MAXT];
} model;

static fz_in* policy_in; /* the policy reads the same input */

static sw_tile_set_t* fuzz_set(fz_in* in, size_t rank, int64_t bound) {
  const size_t count = (size_t)fz_range(in, 0, 6);
  int64_t coords[6 * (MAXR + 1)];
  const size_t r = fz_u8(in) == 0xff ? rank + 1 : rank; /* now and then the wrong rank */
  for (size_t i = 0; i < count * r; ++i) coords[i] = fz_range(in, 0, bound);
  sw_tile_set_t* s = NULL;
  if (FZ_CHECK(sw_tile_set_create(coords, count, r, &s)) != SW_OK) return NULL;
  return s;
}

static size_t policy_rank;
static sw_error_t* fuzz_plan(void* user, const sw_tile_set_t* required, sw_residency_purpose_t purpose,
                             sw_residency_plan_t** out) {
  (void)user, (void)purpose;
  fz_in* in = policy_in;
  switch (fz_u8(in) % 8) {
    /* Any code a policy may return (an invalid one is INTERNAL, by design). */
    case 0: return sw_error_create((sw_error_code_t)fz_range(in, SW_ERROR_TYPE, SW_ERROR_CANCELLED), "the fuzzed policy refuses");
    case 1: *out = NULL; return NULL;
    case 2: { /* a TileSet handle where a plan belongs */
      sw_tile_set_t* s = NULL;
      sw_error_t* e = sw_tile_set_create(NULL, 0, 0, &s);
      *out = (sw_residency_plan_t*)(void*)s;
      return e;
    }
    case 3: return sw_residency_plan_create(required, NULL, NULL, out);
    default: {
      sw_tile_set_t* sets[3];
      for (int i = 0; i < 3; ++i) sets[i] = fz_bool(in) ? fuzz_set(in, policy_rank, 4) : NULL;
      if (fz_bool(in)) {
        sw_tile_set_release(sets[0]);
        sw_tile_set_retain((sw_tile_set_t*)required);
        sets[0] = (sw_tile_set_t*)required;
      }
      sw_error_t* e = sw_residency_plan_create(sets[0], sets[1], sets[2], out);
      for (int i = 0; i < 3; ++i) sw_tile_set_release(sets[i]);
      return e;
    }
  }
}

/* Canonical slot of logical ordinal o is o; its tile and in-tile index. */
static void locate(const model* m, int64_t slot, int64_t* k, int64_t* w) {
  int64_t kk = 0, ww = 0, ks = 1, ws = 1;
  for (size_t i = 0; i < m->rank; ++i) {
    const int64_t ext = m->grid[i] * m->tile[i];
    const int64_t x = slot % ext;
    slot /= ext;
    kk += (x / m->tile[i]) * ks;
    ww += (x % m->tile[i]) * ws;
    ks *= m->grid[i];
    ws *= m->tile[i];
  }
  *k = kk;
  *w = ww;
}

typedef struct snap {
  sw_tile_state_t st[MAXT];
  uint64_t version;
} snap;

static snap take(const model* m) {
  snap s;
  memset(&s, 0, sizeof s);
  for (int64_t k = 0; k < m->ntiles; ++k) {
    int64_t c[MAXR], r = k;
    for (size_t i = 0; i < m->rank; ++i) {
      c[i] = r % m->grid[i];
      r /= m->grid[i];
    }
    sw_tile_state_init(&s.st[k]);
    FZ_OK(sw_tiled_tile_state(m->te, c, m->rank, &s.st[k]));
  }
  FZ_OK(sw_carrier_version(m->te, &s.version));
  return s;
}

static void same(const model* m, const snap* a, const char* what) {
  snap b = take(m);
  FZ_REQUIRE(a->version == b.version, "%s: refused, yet the version moved", what);
  for (int64_t k = 0; k < m->ntiles; ++k)
    FZ_REQUIRE(a->st[k].location == b.st[k].location && a->st[k].valid == b.st[k].valid &&
                   a->st[k].dirty == b.st[k].dirty,
               "%s: refused, yet tile %lld changed", what, (long long)k);
}

static sw_tile_selection_t* fuzz_selection(fz_in* in, const model* m, int64_t* ks, size_t* nks) {
  const size_t rank = fz_u8(in) == 0xff ? m->rank + 1 : m->rank;
  int64_t axes[MAXR + 1][4];
  const int64_t* per[MAXR + 1];
  size_t counts[MAXR + 1];
  for (size_t i = 0; i < rank; ++i) {
    counts[i] = (size_t)fz_range(in, 1, 3);
    const int64_t bound = i < m->rank ? m->grid[i] : 2;
    for (size_t j = 0; j < counts[i]; ++j) axes[i][j] = fz_range(in, 0, bound); /* bound itself is out of range */
    per[i] = axes[i];
  }
  sw_tile_selection_t* s = NULL;
  if (FZ_CHECK(sw_tile_selection_create(per, counts, rank, &s)) != SW_OK) return NULL;
  *nks = 0;
  if (rank != m->rank) return s;
  size_t total = 1;
  for (size_t i = 0; i < rank; ++i) total *= counts[i];
  for (size_t j = 0; j < total; ++j) {
    size_t r = j;
    int64_t k = 0, scale = 1;
    for (size_t i = 0; i < rank; ++i) {
      k += axes[i][r % counts[i]] * scale;
      r /= counts[i];
      scale *= m->grid[i];
    }
    ks[(*nks)++] = k;
  }
  return s;
}

static bool in_range(const model* m, const sw_tile_selection_t* s) {
  size_t rank = 0;
  FZ_OK(sw_tile_selection_rank(s, &rank));
  if (rank != m->rank) return false;
  for (size_t i = 0; i < rank; ++i) {
    int64_t a[4];
    size_t cnt[MAXR + 1];
    (void)cnt;
    int64_t shape[MAXR + 1];
    FZ_OK(sw_tile_selection_compact_grid_shape(s, shape, MAXR + 1));
    FZ_OK(sw_tile_selection_axis(s, i, a, 4));
    for (int64_t j = 0; j < shape[i]; ++j)
      if (a[j] >= m->grid[i]) return false;
  }
  return true;
}

/* The compact values of a projection of selected tiles ks from the model. */
static void expect_compact(const model* m, const sw_tile_selection_t* sel, const sw_tensor_t* compact) {
  int64_t cgrid[MAXR], axes[MAXR][4];
  FZ_OK(sw_tile_selection_compact_grid_shape(sel, cgrid, MAXR));
  int64_t cshape[MAXR], n = 1;
  for (size_t i = 0; i < m->rank; ++i) {
    FZ_OK(sw_tile_selection_axis(sel, i, axes[i], 4));
    cshape[i] = cgrid[i] * m->tile[i];
    n *= cshape[i];
  }
  float* got = (float*)malloc(sizeof(float) * (size_t)n);
  FZ_OK(sw_tensor_read(compact, got, sizeof(float) * (size_t)n));
  for (int64_t o = 0; o < n; ++o) {
    int64_t r = o, x = 0, scale = 1;
    for (size_t i = 0; i < m->rank; ++i) {
      const int64_t y = r % cshape[i];
      r /= cshape[i];
      x += (axes[i][y / m->tile[i]] * m->tile[i] + y % m->tile[i]) * scale;
      scale *= m->grid[i] * m->tile[i];
    }
    FZ_REQUIRE(got[o] == m->values[x], "compact element %lld: %g, expected %g", (long long)o, got[o], m->values[x]);
  }
  free(got);
}

static sw_tensor_t* dense(const int64_t* shape, size_t rank, float fill_base) {
  int64_t n = 1;
  for (size_t i = 0; i < rank; ++i) n *= shape[i];
  float* v = (float*)malloc(sizeof(float) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; ++i) v[i] = fill_base + (float)i;
  sw_tensor_t* t = NULL;
  FZ_OK(sw_tensor_from_data(fz_runtime(), SW_DTYPE_F32, shape, rank, v, &t));
  free(v);
  return t;
}

static void step(model* m, fz_in* in) {
  int64_t ks[64];
  size_t nks = 0;
  snap before = take(m);
  switch (fz_u8(in) % 7) {
    case 0: { /* project */
      sw_tile_selection_t* sel = fuzz_selection(in, m, ks, &nks);
      if (!sel) break;
      sw_await_t* a = NULL;
      sw_error_code_t code = FZ_CHECK(sw_tiled_project(m->te, m->full, sel, NULL, &a));
      bool all_valid = in_range(m, sel);
      for (size_t i = 0; i < nks && all_valid; ++i) all_valid = m->valid[ks[i]];
      if (code == SW_OK) {
        FZ_REQUIRE(all_valid, "a projection of invalid or out-of-range tiles started");
        if (FZ_CHECK(sw_await_wait(a, -1)) == SW_OK) {
          sw_tensor_t* r = NULL;
          FZ_OK(sw_await_result(a, &r));
          expect_compact(m, sel, r);
          sw_tensor_release(r);
        }
        sw_await_release(a);
      } else {
        same(m, &before, "project");
      }
      sw_tile_selection_release(sel);
      break;
    }
    case 1:
    case 2: { /* update (replace or add) and scatter */
      sw_tile_selection_t* sel = fuzz_selection(in, m, ks, &nks);
      if (!sel) break;
      const bool add = fz_bool(in), scatter = fz_bool(in);
      int64_t cgrid[MAXR + 1] = {1, 1, 1, 1}, cshape[MAXR + 1];
      size_t rank = 0;
      FZ_OK(sw_tile_selection_rank(sel, &rank));
      FZ_OK(sw_tile_selection_compact_grid_shape(sel, cgrid, MAXR + 1));
      for (size_t i = 0; i < rank; ++i) cshape[i] = cgrid[i] * (i < m->rank ? m->tile[i] : 1);
      if (fz_u8(in) == 0xff && rank) cshape[0] += 1; /* the wrong shape */
      sw_tensor_t* c = dense(cshape, rank, (float)fz_range(in, 0, 100));
      sw_await_t* a = NULL;
      sw_error_code_t code = scatter ? FZ_CHECK(sw_tiled_scatter(m->te, c, m->full, sel,
                                                                 add ? SW_SCATTER_ADD : SW_SCATTER_REPLACE, &a))
                                     : FZ_CHECK(sw_tiled_update_async(m->te, m->full, c, sel,
                                                                      add ? SW_SCATTER_ADD : SW_SCATTER_REPLACE, &a));
      if (code != SW_OK) {
        same(m, &before, scatter ? "scatter" : "update");
      } else {
        if (FZ_CHECK(sw_await_wait(a, -1)) == SW_OK) {
          if (scatter) {
            sw_tensor_t* r = NULL;
            FZ_OK(sw_await_result(a, &r));
            sw_tensor_release(r);
          } else {
            /* The model follows: compact element o lands at its slot. */
            int64_t n = 1;
            for (size_t i = 0; i < rank; ++i) n *= cshape[i];
            float* v = (float*)malloc(sizeof(float) * (size_t)n);
            FZ_OK(sw_tensor_read(c, v, sizeof(float) * (size_t)n));
            int64_t axes[MAXR][4];
            for (size_t i = 0; i < rank; ++i) FZ_OK(sw_tile_selection_axis(sel, i, axes[i], 4));
            for (int64_t o = 0; o < n; ++o) {
              int64_t r = o, x = 0, scale = 1;
              for (size_t i = 0; i < rank; ++i) {
                const int64_t y = r % cshape[i];
                r /= cshape[i];
                x += (axes[i][y / m->tile[i]] * m->tile[i] + y % m->tile[i]) * scale;
                scale *= m->grid[i] * m->tile[i];
              }
              m->values[x] = add ? m->values[x] + v[o] : v[o];
            }
            free(v);
            for (size_t i = 0; i < nks; ++i) m->valid[ks[i]] = true;
          }
        }
        sw_await_release(a);
      }
      sw_tensor_release(c);
      sw_tile_selection_release(sel);
      break;
    }
    case 3: { /* promote / evict */
      sw_tile_set_t* s = fuzz_set(in, m->rank, 4);
      if (!s) break;
      const bool promote = fz_bool(in);
      sw_await_t* a = NULL;
      sw_error_code_t code = promote ? FZ_CHECK(sw_tiled_promote_async(m->te, s, &a))
                                     : FZ_CHECK(sw_tiled_evict_async(m->te, s, &a));
      if (code == SW_OK) {
        FZ_CHECK(sw_await_wait(a, -1));
        sw_await_release(a);
      } else {
        same(m, &before, promote ? "promote" : "evict");
      }
      sw_tile_set_release(s);
      break;
    }
    case 4: { /* a tensor over the carrier with a fuzzed layout: the footprint rule */
      int64_t shape[MAXR + 1], stride[MAXR + 1];
      const size_t rank = (size_t)fz_range(in, 0, MAXR + 1);
      for (size_t i = 0; i < rank; ++i) {
        shape[i] = i < m->rank && fz_bool(in) ? m->grid[i] * m->tile[i] : fz_range(in, 0, 8);
        stride[i] = fz_range(in, -4, 16);
      }
      sw_layout_t* l = NULL;
      if (FZ_CHECK(sw_layout_create(shape, stride, rank, &l)) != SW_OK) break;
      sw_tensor_t* t = NULL;
      if (FZ_CHECK(sw_tensor_create(m->te, fz_range(in, 0, 8), l, &t)) == SW_OK) {
        sw_tile_selection_t* sel = fuzz_selection(in, m, ks, &nks);
        if (sel) {
          sw_await_t* a = NULL;
          if (FZ_CHECK(sw_tiled_project(m->te, t, sel, NULL, &a)) == SW_OK) {
            FZ_CHECK(sw_await_wait(a, -1));
            sw_await_release(a);
          } else {
            same(m, &before, "project (fuzzed layout)");
          }
          sw_tile_selection_release(sel);
        }
        sw_tensor_t* r = NULL;
        FZ_CHECK(sw_mul_scalar(t, 2.0, &r));
        sw_tensor_release(r);
        sw_tensor_release(t);
      }
      sw_layout_release(l);
      break;
    }
    case 5: { /* a direct op on the full tensor: every tile, the model's values */
      sw_tensor_t* r = NULL;
      bool all_valid = true;
      for (int64_t k = 0; k < m->ntiles; ++k) all_valid = all_valid && m->valid[k];
      if (FZ_CHECK(sw_mul_scalar(m->full, 1.0, &r)) == SW_OK) {
        FZ_REQUIRE(all_valid, "a direct op read invalid tiles");
        float* got = (float*)malloc(sizeof(float) * (size_t)m->n);
        FZ_OK(sw_tensor_read(r, got, sizeof(float) * (size_t)m->n));
        for (int64_t i = 0; i < m->n; ++i) FZ_REQUIRE(got[i] == m->values[i], "direct op element %lld", (long long)i);
        free(got);
        sw_tensor_release(r);
      }
      break;
    }
    default: { /* tile state of a fuzzed coordinate */
      int64_t c[MAXR + 1];
      const size_t rank = (size_t)fz_range(in, 0, MAXR + 1);
      for (size_t i = 0; i < rank; ++i) c[i] = fz_range(in, -1, 4);
      sw_tile_state_t st;
      sw_tile_state_init(&st);
      FZ_CHECK(sw_tiled_tile_state(m->te, c, rank, &st));
      break;
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fz_in in = {data, size};
  policy_in = &in;
  model m;
  memset(&m, 0, sizeof m);
  m.rank = (size_t)fz_range(&in, 1, MAXR);
  m.ntiles = 1;
  m.T = 1;
  for (size_t i = 0; i < m.rank; ++i) {
    m.grid[i] = fz_range(&in, 1, 4);
    m.tile[i] = fz_range(&in, 1, 4);
    m.ntiles *= m.grid[i];
    m.T *= m.tile[i];
  }
  m.n = m.ntiles * m.T;
  policy_rank = m.rank;
  sw_runtime_t* rt = fz_runtime();
  const bool primary_full = fz_bool(&in);
  const uint8_t secondary_kind = fz_u8(&in) % 3;
  const bool secondary_full = !primary_full || fz_bool(&in);
  sw_carrier_t *p = NULL, *s = NULL;
  FZ_OK(sw_carrier_create_cpu(rt, SW_DTYPE_F32, primary_full ? (size_t)m.n : 0, &p));
  const size_t sn = secondary_full ? (size_t)m.n : 0;
  if (secondary_kind == 0) FZ_OK(sw_carrier_create_host(rt, SW_DTYPE_F32, sn, &s));
  else if (secondary_kind == 1) FZ_OK(sw_carrier_create_zstd(rt, SW_DTYPE_F32, sn, NULL, &s));
  else FZ_OK(sw_carrier_create_file(rt, SW_DTYPE_F32, sn, NULL, &s));
  /* Tile-major seeds: slot k*T + w of a tier is tile k's element w. */
  float* tier = (float*)malloc(sizeof(float) * (size_t)m.n);
  for (int64_t i = 0; i < m.n; ++i) tier[i] = (float)(i + 1);
  if (primary_full) FZ_OK(sw_carrier_write(p, 0, (size_t)m.n, tier));
  if (secondary_full && !primary_full) FZ_OK(sw_carrier_write(s, 0, (size_t)m.n, tier));
  m.values = (float*)malloc(sizeof(float) * (size_t)m.n);
  for (int64_t slot = 0; slot < m.n; ++slot) {
    int64_t k, w;
    locate(&m, slot, &k, &w);
    m.values[slot] = tier[k * m.T + w];
  }
  for (int64_t k = 0; k < m.ntiles; ++k) m.valid[k] = true;
  free(tier);
  sw_residency_policy_t pol;
  sw_residency_policy_init(&pol);
  pol.plan = fuzz_plan;
  const bool with_policy = fz_bool(&in);
  int64_t grid[MAXR + 1], tile[MAXR + 1];
  memcpy(grid, m.grid, sizeof m.grid);
  memcpy(tile, m.tile, sizeof m.tile);
  size_t rank = m.rank;
  const uint8_t bad = fz_u8(&in);
  if (bad == 0xff) grid[0] = 0;                    /* bad geometries are refused */
  if (bad == 0xfe) rank = 0;
  if (bad == 0xfd) tile[m.rank - 1] = -fz_i64(&in);
  if (FZ_CHECK(sw_tiled_create(p, s, grid, tile, rank, with_policy ? &pol : NULL, &m.te)) == SW_OK) {
    FZ_REQUIRE(bad < 0xfd, "a bad geometry was accepted");
    FZ_OK(sw_tiled_full_tensor(m.te, &m.full));
    for (int i = 0; i < 24 && in.n > 0; ++i) step(&m, &in);
    sw_tensor_release(m.full);
    FZ_OK(sw_carrier_dispose(m.te));
    sw_carrier_release(m.te);
  } else {
    bool owned = true;
    FZ_OK(sw_carrier_is_owned(p, &owned));
    FZ_REQUIRE(!owned, "a refused sw_tiled_create kept its primary claimed");
  }
  sw_carrier_release(p);
  sw_carrier_release(s);
  free(m.values);
  return 0;
}
