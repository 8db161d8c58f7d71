/* The fault sweep: for each injectable fault kind and each workload that
 * reaches it, fail the n-th occurrence of the kind, for every n the workload
 * reaches, one run (a fresh runtime) per n. After each failure:
 *  - the failed step reports the injected error (its code, "injected" in the
 *    message), and exactly one fault was injected;
 *  - it changed nothing: every tile's state, the versions, the tiers'
 *    ownership, the gradient, the LRU policy's statistics and every value
 *    are what they were before it (a failed step 0 made nothing and left no
 *    file descriptor open);
 *  - a retry of the same step succeeds, and the rest of the workload runs;
 *  - no dirty value is lost: after evicting everything and reading every
 *    value back from the secondary tier, and again after promoting
 *    everything (in batches the LRU budget holds), the full tensor equals
 *    the reference model;
 *  - every handle is released (LeakSanitizer checks the rest at exit).
 * A direct I/O refusal (SW_FAULT_DIRECT_IO) is no error: the step succeeds
 * on buffered I/O with the same values, and so does the rest.
 * The workloads are tables of steps (struct workload below): a new tier is
 * a new table. The read-only model-file tier (weights opened in place from a
 * .npy file or a stack of .safetensors tensors of one file or of several,
 * with and without direct I/O)
 * has one, of read-only steps; it never writes, and its final check
 * compares every value with the file, which must be unchanged. The sweep
 * prints the (kind, n) points it covered. The remote tier's points (each
 * chunk's reply, each commit, a transaction sent in part, each commit's
 * reply) are swept by the remote suite
 * (test_remote.c), which starts the redis-server they need: this suite runs
 * in builds without the remote carrier and on machines without a server. */
#include <dirent.h>
#include <unistd.h>

#include "sw_tiled_test.h"

/* ---- the tiled workload ------------------------------------------------- */

/* Grid (4, 2) of (2, 8) tiles: 8 tiles of 16 f32 each. */
#define GR 2
static const int64_t kGrid[GR] = {4, 2}, kTile[GR] = {2, 8};
#define NT 8
#define TE 16
#define NE (NT * TE)

struct workload;

typedef struct ctx {
  sw_runtime_t* rt;
  const struct workload* w;
  sw_lru_policy_t* lru;
  tt_fix_t f;           /* f.te and f.full once step 0 ran */
  double model[NE];     /* logical values of the full tensor */
  sw_tensor_t* loss;    /* the recorded sum of a projection, between a
                           recording step and its backward step */
  sw_file_tensor_info_t info; /* what the model-file opener reported */
} ctx;

typedef sw_error_t* (*step_fn)(ctx*);

/* The secondary tier of a workload over a model file. */
typedef enum model_file_t {
  MF_NONE = 0, /* a scratch tier (file or zstd) seeded by step 0 */
  MF_NPY,      /* a .npy file */
  MF_STACK,    /* tensors of one .safetensors file, stacked */
  MF_SHARDS,   /* tensors of several .safetensors files, stacked */
} model_file_t;

/* A workload: its steps, in order; step 0 makes the carrier, and
 * model_after(c, s) follows what step s changed in the values. */
typedef struct workload {
  const char* name;
  sw_carrier_kind_t secondary;
  model_file_t file;
  bool direct_io;
  bool policy;
  void (*model_after)(ctx* c, int step);
  size_t steps;
  step_fn step[12];
} workload;

/* A selection of grid rows `rows` (axis 0) and columns `cols` (axis 1). */
static sw_tile_selection_t* sel_of(const int64_t* rows, size_t nr, const int64_t* cols, size_t nc) {
  const int64_t* axes[2] = {rows, cols};
  const size_t counts[2] = {nr, nc};
  sw_tile_selection_t* s = NULL;
  SW_OK_(sw_tile_selection_create(axes, counts, 2, &s));
  return s;
}

/* The error of `e` if any, else of waiting on `a`; releases `a`. */
static sw_error_t* wait_release(sw_error_t* e, sw_await_t* a, sw_tensor_t** out_result) {
  if (!e) e = sw_await_wait(a, -1);
  if (!e && out_result) e = sw_await_result(a, out_result);
  sw_await_release(a);
  return e;
}

static void fix_init(ctx* c) {
  memset(&c->f, 0, sizeof c->f);
  c->f.rt = c->rt;
  c->f.dtype = SW_DTYPE_F32;
}

/* The end of step 0 on every tier, after `e` (the error so far): the LRU
 * policy if the workload has one, the TiledEvictable over an empty CPU
 * primary `p` and the secondary `s`, its full tensor. Undoes the partial
 * work on failure; releases p and s. */
static sw_error_t* make_tiled(ctx* c, sw_error_t* e, sw_carrier_t* p, sw_carrier_t* s, const int64_t* grid,
                              const int64_t* tile, size_t rank);

/* Step 0: the seeded tiled carrier (an empty CPU primary, a full secondary
 * seeded tile-major). Undoes its partial work on failure. */
static sw_error_t* step_create(ctx* c) {
  fix_init(c);
  tt_geometry(&c->f, GR, kGrid, kTile);
  sw_carrier_t *p = NULL, *s = NULL;
  sw_error_t* e = sw_carrier_create_cpu(c->rt, SW_DTYPE_F32, 0, &p);
  if (!e) {
    if (c->w->secondary == SW_CARRIER_ZSTD) {
      sw_zstd_carrier_desc_t d;
      sw_zstd_carrier_desc_init(&d);
      d.frame_elements = TE; /* one frame per tile */
      e = sw_carrier_create_zstd(c->rt, SW_DTYPE_F32, NE, &d, &s);
    } else {
      sw_file_carrier_desc_t d;
      sw_file_carrier_desc_init(&d);
      d.chunk_bytes = 32; /* several requests per tile */
      e = sw_carrier_create_file(c->rt, SW_DTYPE_F32, NE, &d, &s);
    }
  }
  if (!e) {
    float v[NE];
    for (int64_t k = 0; k < NT; ++k)
      for (int64_t w = 0; w < TE; ++w) v[k * TE + w] = (float)tt_seed(k, w);
    e = sw_carrier_write(s, 0, NE, v);
  }
  return make_tiled(c, e, p, s, kGrid, kTile, GR);
}

/* The LRU budget of the workloads with a policy, in tiles. */
#define BUDGET 3

static sw_error_t* make_tiled(ctx* c, sw_error_t* e, sw_carrier_t* p, sw_carrier_t* s, const int64_t* grid,
                              const int64_t* tile, size_t rank) {
  tt_fix_t* f = &c->f;
  sw_residency_policy_t pol;
  bool vtable = false;
  if (!e && c->w->policy) {
    e = sw_lru_policy_create(BUDGET, &c->lru);
    if (!e) e = sw_lru_policy_as_residency_policy(c->lru, &pol);
    vtable = !e;
  }
  if (!e) {
    e = sw_tiled_create(p, s, grid, tile, rank, c->w->policy ? &pol : NULL, &f->te);
    /* A refused policy stays the caller's: its destroy drops the vtable's
     * reference. */
    if (e && vtable && pol.destroy) pol.destroy(pol.user_data);
  }
  if (!e) e = sw_tiled_full_tensor(f->te, &f->full);
  if (e) {
    sw_lru_policy_release(c->lru);
    c->lru = NULL;
    sw_tensor_release(f->full);
    sw_carrier_release(f->te);
    f->full = NULL;
    f->te = NULL;
  }
  sw_carrier_release(p);
  sw_carrier_release(s);
  return e;
}

static void model_create(ctx* c) {
  double* canon = tt_canon_seed(&c->f, 0.0);
  memcpy(c->model, canon, sizeof c->model);
  free(canon);
}

/* A compact tensor of the selection's shape, element o = base + o. Making it
 * is an allocation of the workload too: its error is the step's. */
static sw_error_t* compact_for(ctx* c, const sw_tile_selection_t* sel, double base, double* out_values,
                               sw_tensor_t** out) {
  int64_t cg[GR], shape[GR], n = 1;
  SW_OK_(sw_tile_selection_compact_grid_shape(sel, cg, GR));
  for (int i = 0; i < GR; ++i) {
    shape[i] = cg[i] * kTile[i];
    n *= shape[i];
  }
  float f[NE];
  for (int64_t o = 0; o < n; ++o) {
    out_values[o] = base + (double)o;
    f[o] = (float)out_values[o];
  }
  *out = NULL;
  return sw_tensor_from_data(c->rt, SW_DTYPE_F32, shape, GR, f, out);
}

/* Projection steps check their result against the model. Releases `sel`. */
static sw_error_t* project_sel_check(ctx* c, sw_tile_selection_t* sel) {
  sw_await_t* a = NULL;
  sw_tensor_t* r = NULL;
  sw_error_t* e = sw_tiled_project(c->f.te, c->f.full, sel, NULL, &a);
  e = wait_release(e, a, &r);
  if (!e) {
    int64_t n = 0;
    double* expect = tt_compact_expect(&c->f, c->model, sel, &n);
    tt_expect_values(r, expect, n);
    free(expect);
  }
  sw_tensor_release(r);
  sw_tile_selection_release(sel);
  return e;
}

static sw_error_t* project_check(ctx* c, const int64_t* rows, size_t nr, const int64_t* cols, size_t nc) {
  return project_sel_check(c, sel_of(rows, nr, cols, nc));
}

static const int64_t kR01[2] = {0, 1}, kR23[2] = {2, 3}, kR12[2] = {1, 2}, kR3[1] = {3}, kR0[1] = {0},
                     kC0[1] = {0}, kC1[1] = {1}, kC01[2] = {0, 1}, kRall[4] = {0, 1, 2, 3};

/* Step 1: a policy-driven projection (promotions from the secondary tier). */
static sw_error_t* step_project_a(ctx* c) { return project_check(c, kR01, 2, kC0, 1); }

/* Steps 2 and 7: updates (scatter-add, then replace) of the carrier itself. */
static sw_error_t* update(ctx* c, const int64_t* rows, size_t nr, const int64_t* cols, size_t nc, bool add,
                          double base) {
  sw_tile_selection_t* sel = sel_of(rows, nr, cols, nc);
  double v[NE];
  sw_tensor_t* compact = NULL;
  sw_await_t* a = NULL;
  sw_error_t* e = compact_for(c, sel, base, v, &compact);
  if (!e) e = sw_tiled_update_async(c->f.te, c->f.full, compact, sel, add ? SW_SCATTER_ADD : SW_SCATTER_REPLACE, &a);
  e = wait_release(e, a, NULL);
  sw_tensor_release(compact);
  sw_tile_selection_release(sel);
  return e;
}
static sw_error_t* step_update_add(ctx* c) { return update(c, kR0, 1, kC01, 2, true, 1000.0); }

/* Step 3: a functional scatter-add into a fresh TiledEvictable, checked by
 * projecting the result back. */
static sw_error_t* step_scatter_add(ctx* c) {
  sw_tile_selection_t* sel = sel_of(kR12, 2, kC1, 1);
  double v[NE];
  sw_tensor_t* compact = NULL;
  sw_await_t* a = NULL;
  sw_tensor_t* result = NULL;
  sw_error_t* e = compact_for(c, sel, 7.0, v, &compact);
  if (!e) e = sw_tiled_scatter(c->f.te, compact, c->f.full, sel, SW_SCATTER_ADD, &a);
  e = wait_release(e, a, &result);
  if (!e) {
    sw_carrier_t* rte = tt_carrier_of(result);
    sw_await_t* p = NULL;
    sw_tensor_t* back = NULL;
    e = sw_tiled_project(rte, result, sel, NULL, &p);
    e = wait_release(e, p, &back);
    if (!e) {
      int64_t m = 0;
      double* base = tt_compact_expect(&c->f, c->model, sel, &m);
      for (int64_t i = 0; i < m; ++i) base[i] += v[i];
      tt_expect_values(back, base, m);
      free(base);
    }
    sw_tensor_release(back);
    sw_carrier_release(rte);
  }
  sw_tensor_release(result);
  sw_tensor_release(compact);
  sw_tile_selection_release(sel);
  return e;
}

/* Step 4: a projection whose plan evicts the dirty tiles of step 2 (the LRU
 * budget is 3 tiles). */
static sw_error_t* step_project_b(ctx* c) { return project_check(c, kR23, 2, kC01, 2); }

/* Steps 5 and 6: backward through a projection, as two requests: the
 * recorded projection, then the backward pass (its gradient of sum(project)
 * is one on the selected tiles). The graph is retained, so a failed
 * backward can be retried. */
static sw_error_t* grad_project(ctx* c, sw_tile_selection_t* sel) {
  SW_OK_(sw_tensor_set_requires_grad(c->f.full, true));
  sw_await_t* a = NULL;
  sw_tensor_t* r = NULL;
  sw_error_t* e = sw_tiled_project(c->f.te, c->f.full, sel, NULL, &a);
  e = wait_release(e, a, &r);
  if (!e) e = sw_reduce_sum(r, NULL, 0, false, &c->loss);
  sw_tensor_release(r);
  sw_tile_selection_release(sel);
  if (e) SW_OK_(sw_tensor_set_requires_grad(c->f.full, false));
  return e;
}

static sw_error_t* step_grad_project(ctx* c) { return grad_project(c, sel_of(kR12, 2, kC1, 1)); }

/* The gradient `g` is tile-sparse: a TiledEvictable of the full tensor's
 * geometry whose selected tiles hold values and whose other tiles are valid
 * implicit zeros. */
static void expect_tile_sparse(ctx* c, sw_tensor_t* g, const sw_tile_selection_t* sel) {
  sw_carrier_t* gc = tt_carrier_of(g);
  assert_int_equal(tt_kind(gc), SW_CARRIER_TILED);
  assert_ptr_not_equal(gc, c->f.te);
  bool selected[TT_MAXTILES] = {false};
  size_t count = 0;
  SW_OK_(sw_tile_selection_count(sel, &count));
  int64_t coords[TT_MAXTILES * TT_MAXR];
  SW_OK_(sw_tile_selection_coordinates(sel, coords, sizeof coords / sizeof coords[0]));
  for (size_t j = 0; j < count; ++j) selected[tt_tile_ordinal(&c->f, coords + j * c->f.rank)] = true;
  tt_fix_t gf = c->f;
  gf.te = gc;
  for (int64_t k = 0; k < c->f.ntiles; ++k) {
    const sw_tile_state_t st = tt_state(&gf, k);
    if (!st.valid || (st.location == SW_TILE_IMPLICIT) == selected[k])
      fail_msg("gradient tile %lld is %s valid=%d; expected %s", (long long)k, tt_location_name(st.location),
               (int)st.valid, selected[k] ? "a stored value" : "an implicit zero");
  }
  sw_carrier_release(gc);
}

/* The backward pass of the recorded sum of a projection of `sel`: its
 * gradient is one on the selected tiles, zero elsewhere, and tile-sparse.
 * Releases `sel`. */
static sw_error_t* backward_check(ctx* c, sw_tile_selection_t* sel) {
  sw_error_t* e = sw_backward(c->loss, NULL, true);
  sw_tensor_t* g = NULL;
  if (!e) e = sw_tensor_grad(c->f.full, &g);
  if (!e) {
    double ones[NE], zeros[NE] = {0};
    for (int i = 0; i < NE; ++i) ones[i] = 1.0;
    double* expect = tt_scatter_expect(&c->f, zeros, sel, ones, false);
    float got[NE];
    e = sw_tensor_read(g, got, sizeof got);
    for (int i = 0; !e && i < NE; ++i)
      if (got[i] != expect[i]) fail_msg("gradient element %d: %g, expected %g", i, got[i], expect[i]);
    free(expect);
    if (!e) expect_tile_sparse(c, g, sel);
  }
  sw_tile_selection_release(sel);
  sw_tensor_release(g);
  if (!e) {
    /* Done with the graph: the leaf goes back to what it was. */
    sw_tensor_release(c->loss);
    c->loss = NULL;
    SW_OK_(sw_tensor_clear_grad(c->f.full));
    SW_OK_(sw_tensor_set_requires_grad(c->f.full, false));
  }
  return e;
}

static sw_error_t* step_backward(ctx* c) { return backward_check(c, sel_of(kR12, 2, kC1, 1)); }

static sw_error_t* step_update_replace(ctx* c) { return update(c, kR3, 1, kC1, 1, false, -500.0); }

/* Step 8: an explicit eviction of every dirty tile. */
static sw_error_t* step_evict_dirty(ctx* c) {
  sw_tile_set_t* dirty = NULL;
  SW_OK_(sw_tiled_tiles(c->f.te, SW_TILES_DIRTY, &dirty));
  sw_await_t* a = NULL;
  sw_error_t* e = sw_tiled_evict_async(c->f.te, dirty, &a);
  e = wait_release(e, a, NULL);
  sw_tile_set_release(dirty);
  return e;
}

/* Step 9: a direct op on the full tensor (every tile made available; under
 * the LRU budget the tiles that do not fit are read for this op only). */
static sw_error_t* step_direct(ctx* c) {
  sw_tensor_t* r = NULL;
  sw_error_t* e = sw_mul_scalar(c->f.full, 2.0, &r);
  if (!e) {
    double expect[NE];
    for (int i = 0; i < NE; ++i) expect[i] = 2.0 * c->model[i];
    tt_expect_values(r, expect, NE);
  }
  sw_tensor_release(r);
  return e;
}

/* Step 10: an explicit promotion of three tiles of a column (within the
 * LRU budget, which refuses a larger one). */
static sw_error_t* step_promote(ctx* c) {
  sw_tile_selection_t* sel = sel_of(kRall, 3, kC0, 1);
  sw_tile_set_t* set = NULL;
  SW_OK_(sw_tile_selection_tile_set(sel, &set));
  sw_await_t* a = NULL;
  sw_error_t* e = sw_tiled_promote_async(c->f.te, set, &a);
  e = wait_release(e, a, NULL);
  sw_tile_set_release(set);
  sw_tile_selection_release(sel);
  return e;
}

/* The model after each step that changes values. */
static void model_after(ctx* c, int step) {
  if (step == 0) model_create(c);
  if (step == 2 || step == 7) {
    const bool add = step == 2;
    sw_tile_selection_t* sel = add ? sel_of(kR0, 1, kC01, 2) : sel_of(kR3, 1, kC1, 1);
    double v[NE];
    int64_t cg[GR], n = 1;
    SW_OK_(sw_tile_selection_compact_grid_shape(sel, cg, GR));
    for (int i = 0; i < GR; ++i) n *= cg[i] * kTile[i];
    for (int64_t o = 0; o < n; ++o) v[o] = (add ? 1000.0 : -500.0) + (double)o;
    double* next = tt_scatter_expect(&c->f, c->model, sel, v, add);
    memcpy(c->model, next, sizeof c->model);
    free(next);
    sw_tile_selection_release(sel);
  }
}

/* ---- the model-file workload ---------------------------------------------- */

/* The secondary tier is a model file opened in place, read-only: a row-major
 * (E, O, I) = (8, 2, 8) f32 array, as a .npy file, as eight (O, I) tensors
 * "expert.<e>" of one .safetensors file, saved out of order (so the stack's
 * segments are not in tile order) and opened as a stack, and as the same
 * tensors spread over three .safetensors files (a sharded checkpoint:
 * expert e in shard kShardOf[e], each shard in the same save order) and
 * opened as one stack over them. Its full tensor is (I, O, E) = (8, 2, 8),
 * grid (1, 1, 8), tile (8, 2, 1): tile e is expert e, 16 values, one block
 * of a file. File element [e, o, i] holds tt_seed(e, o * 8 + i), so the full
 * tensor's canonical slots hold tt_canon_seed's values, as in the tiled
 * workload. The files are written once, before any fault is armed. */
#define ME 8
#define MO 2
#define MI 8
#define NSHARDS 3
static const int64_t kModelShape[3] = {ME, MO, MI}, kModelLogical[3] = {MI, MO, ME}, kModelGrid[3] = {1, 1, ME},
                     kModelTile[3] = {MI, MO, 1};
static const size_t kStackSaveOrder[ME] = {3, 0, 7, 1, 6, 2, 5, 4};
static const size_t kShardOf[ME] = {2, 0, 1, 0, 2, 1, 0, 1};

static char g_model_dir[256];
/* File f of model m (f = 0 for the one-file models). */
static char g_paths[MF_SHARDS + 1][NSHARDS][320];
static char g_stack_names[ME][16];
static const char* g_stack_name_ptrs[ME];
/* Each file's bytes as written, to check that nothing wrote to it. */
static unsigned char* g_file_bytes[MF_SHARDS + 1][NSHARDS];
static size_t g_file_size[MF_SHARDS + 1][NSHARDS];

static unsigned char* file_bytes(const char* path, size_t* out_n) {
  FILE* fp = fopen(path, "rb");
  if (!fp) fail_msg("cannot open '%s'", path);
  fseek(fp, 0, SEEK_END);
  const long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  unsigned char* data = (unsigned char*)malloc((size_t)n + 1);
  assert_int_equal(fread(data, 1, (size_t)n, fp), (size_t)n);
  fclose(fp);
  *out_n = (size_t)n;
  return data;
}

static size_t model_files(model_file_t m) { return m == MF_SHARDS ? NSHARDS : 1; }

/* The file of model m that holds expert e. */
static size_t model_file_of(model_file_t m, int64_t e) { return m == MF_SHARDS ? kShardOf[e] : 0; }

static uint64_t le_bytes(const unsigned char* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

/* The byte offset of the full tensor's canonical slot s in its file of
 * model m, from the formats' own rules: an npy 1.0 array starts after its
 * header (its length at bytes 8-9); the safetensors data start after the
 * 8-byte header length and the header, each (2, 8) tensor of the file in
 * the order it was saved. */
static uint64_t model_offset(model_file_t m, int64_t s) {
  const int64_t e = s / TE;
  const unsigned char* bytes = g_file_bytes[m][model_file_of(m, e)];
  if (m == MF_NPY) return 10 + le_bytes(bytes + 8, 2) + 4 * (uint64_t)s;
  uint64_t j = 0;
  for (size_t k = 0; kStackSaveOrder[k] != (size_t)e; ++k)
    if (model_file_of(m, (int64_t)kStackSaveOrder[k]) == model_file_of(m, e)) ++j;
  return 8 + le_bytes(bytes, 8) + j * TE * 4 + 4 * (uint64_t)(s % TE);
}

/* The value of canonical slot s as model m's file holds it. */
static double model_file_value(model_file_t m, int64_t s) {
  float v;
  memcpy(&v, g_file_bytes[m][model_file_of(m, s / TE)] + model_offset(m, s), sizeof v);
  return v;
}

static void write_model_files(void) {
  if (g_file_bytes[MF_NPY][0]) return;
  const char* tmp = getenv("TMPDIR");
  snprintf(g_model_dir, sizeof g_model_dir, "%s/sw_fault_sweep_XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(g_model_dir)) fail_msg("cannot make a directory for the model files under %s", g_model_dir);
  snprintf(g_paths[MF_NPY][0], sizeof g_paths[MF_NPY][0], "%s/experts.npy", g_model_dir);
  snprintf(g_paths[MF_STACK][0], sizeof g_paths[MF_STACK][0], "%s/experts.safetensors", g_model_dir);
  for (size_t f = 0; f < NSHARDS; ++f)
    snprintf(g_paths[MF_SHARDS][f], sizeof g_paths[MF_SHARDS][f], "%s/model-%05zu-of-%05d.safetensors", g_model_dir,
             f + 1, NSHARDS);
  sw_runtime_t* rt = NULL;
  SW_OK_(sw_runtime_create(NULL, &rt));
  float v[NE];
  for (int64_t s = 0; s < NE; ++s) v[s] = (float)tt_seed(s / TE, s % TE);
  /* The (I, O, E) tensor saved through its (E, O, I) view. */
  sw_tensor_t *t = NULL, *view = NULL;
  SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_F32, kModelLogical, 3, v, &t));
  const size_t reverse[3] = {2, 1, 0};
  SW_OK_(sw_tensor_permute(t, reverse, 3, &view));
  SW_OK_(sw_save_npy(g_paths[MF_NPY][0], view));
  sw_tensor_release(view);
  sw_tensor_release(t);
  /* Expert e as its own (O, I) tensor: its (I, O) values, permuted. */
  sw_tensor_t* parts[ME];
  const char* names[ME];
  for (size_t e = 0; e < ME; ++e) {
    snprintf(g_stack_names[e], sizeof g_stack_names[e], "expert.%zu", e);
    g_stack_name_ptrs[e] = g_stack_names[e];
  }
  for (size_t j = 0; j < ME; ++j) {
    const size_t e = kStackSaveOrder[j];
    const int64_t io[2] = {MI, MO};
    const size_t swap[2] = {1, 0};
    sw_tensor_t* p = NULL;
    SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_F32, io, 2, v + e * TE, &p));
    SW_OK_(sw_tensor_permute(p, swap, 2, &parts[j]));
    sw_tensor_release(p);
    names[j] = g_stack_name_ptrs[e];
  }
  SW_OK_(sw_save_safetensors(g_paths[MF_STACK][0], names, parts, ME, NULL));
  /* Each shard: its experts, in the same save order. */
  for (size_t f = 0; f < NSHARDS; ++f) {
    sw_tensor_t* shard_parts[ME];
    const char* shard_names[ME];
    size_t n = 0;
    for (size_t j = 0; j < ME; ++j)
      if (kShardOf[kStackSaveOrder[j]] == f) {
        shard_parts[n] = parts[j];
        shard_names[n++] = names[j];
      }
    SW_OK_(sw_save_safetensors(g_paths[MF_SHARDS][f], shard_names, shard_parts, n, NULL));
  }
  for (size_t j = 0; j < ME; ++j) sw_tensor_release(parts[j]);
  sw_runtime_release(rt);
  /* The files hold what the workload's model says. */
  for (model_file_t m = MF_NPY; m <= MF_SHARDS; ++m) {
    for (size_t f = 0; f < model_files(m); ++f) g_file_bytes[m][f] = file_bytes(g_paths[m][f], &g_file_size[m][f]);
    for (int64_t s = 0; s < NE; ++s)
      if (model_file_value(m, s) != tt_seed(s / TE, s % TE))
        fail_msg("%s: slot %lld holds %g, expected %g", g_paths[m][model_file_of(m, s / TE)], (long long)s,
                 model_file_value(m, s), tt_seed(s / TE, s % TE));
  }
}

static void remove_model_files(void) {
  if (!g_file_bytes[MF_NPY][0]) return;
  for (model_file_t m = MF_NPY; m <= MF_SHARDS; ++m)
    for (size_t f = 0; f < model_files(m); ++f) {
      unlink(g_paths[m][f]);
      free(g_file_bytes[m][f]);
      g_file_bytes[m][f] = NULL;
    }
  rmdir(g_model_dir);
}

/* Every file of the workload's model is as it was written. */
static void expect_files_unchanged(ctx* c, const char* when) {
  const model_file_t m = c->w->file;
  for (size_t f = 0; f < model_files(m); ++f) {
    size_t n = 0;
    unsigned char* bytes = file_bytes(g_paths[m][f], &n);
    if (n != g_file_size[m][f] || memcmp(bytes, g_file_bytes[m][f], n) != 0)
      fail_msg("%s: %s changed", when, g_paths[m][f]);
    free(bytes);
  }
}

/* Every value of the full tensor equals the file's, and the files are as
 * they were written. */
static void expect_file(ctx* c, const char* when) {
  const model_file_t m = c->w->file;
  expect_files_unchanged(c, when);
  float got[NE];
  SW_OK_(sw_tensor_read(c->f.full, got, sizeof got));
  for (int64_t s = 0; s < NE; ++s)
    if (got[s] != model_file_value(m, s))
      fail_msg("%s: element %lld is %g, the file holds %g", when, (long long)s, got[s], model_file_value(m, s));
}

/* The opener's report: the file's (E, O, I), the (I, O, E) full tensor and
 * one expert per tile. */
static void expect_model_info(ctx* c) {
  const sw_file_tensor_info_t* in = &c->info;
  const model_file_t m = c->w->file;
  assert_int_equal(in->dtype, SW_DTYPE_F32);
  assert_int_equal(in->rank, 3);
  assert_int_equal(in->order, SW_FILE_ORDER_ROW_MAJOR);
  assert_int_equal(in->segments, m == MF_NPY ? 1 : ME);
  assert_int_equal(in->data_offset, model_offset(m, 0));
  assert_int_equal(in->data_bytes, NE * sizeof(float));
  for (int i = 0; i < 3; ++i) {
    assert_int_equal(in->shape[i], kModelShape[i]);
    assert_int_equal(in->logical_shape[i], kModelLogical[i]);
    assert_int_equal(in->grid_shape[i], kModelGrid[i]);
    assert_int_equal(in->tile_shape[i], kModelTile[i]);
    assert_int_equal(in->permutation[i], 2 - i);
  }
}

/* Step 0: open the file (its header read, the read-only File carrier, with
 * direct I/O if the workload asks) and build the TiledEvictable over it. A
 * failure leaves no carrier, file descriptor or policy behind. */
static sw_error_t* mstep_open(ctx* c) {
  fix_init(c);
  sw_file_carrier_desc_t d;
  sw_file_carrier_desc_init(&d);
  d.direct_io = c->w->direct_io;
  d.chunk_bytes = 32; /* two buffered read requests per tile */
  sw_file_tensor_info_init(&c->info);
  sw_carrier_t *p = NULL, *s = NULL;
  const char* shard_paths[ME];
  for (size_t k = 0; k < ME; ++k) shard_paths[k] = g_paths[MF_SHARDS][kShardOf[k]];
  sw_error_t* e = NULL;
  if (c->w->file == MF_NPY) {
    e = sw_carrier_open_npy(c->rt, g_paths[MF_NPY][0], &d, &c->info, &s);
  } else if (c->w->file == MF_STACK) {
    e = sw_carrier_open_safetensors_stack(c->rt, g_paths[MF_STACK][0], g_stack_name_ptrs, ME, &d, &c->info, &s);
  } else {
    e = sw_carrier_open_safetensors_stack_files(c->rt, shard_paths, g_stack_name_ptrs, ME, &d, &c->info, &s);
  }
  if (e) {
    assert_null(s);
  } else {
    expect_model_info(c);
    tt_geometry(&c->f, c->info.rank, c->info.grid_shape, c->info.tile_shape);
    bool read_only = false;
    SW_OK_(sw_carrier_is_read_only(s, &read_only));
    assert_true(read_only);
    e = sw_carrier_create_cpu(c->rt, SW_DTYPE_F32, 0, &p);
  }
  return make_tiled(c, e, p, s, c->info.grid_shape, c->info.tile_shape, c->info.rank);
}

static sw_tile_selection_t* sel_experts(const int64_t* experts, size_t count) {
  static const int64_t zero[1] = {0};
  const int64_t* axes[3] = {zero, zero, experts};
  const size_t counts[3] = {1, 1, count};
  sw_tile_selection_t* s = NULL;
  SW_OK_(sw_tile_selection_create(axes, counts, 3, &s));
  return s;
}

static sw_lru_stats_t lru_stats(const ctx* c) {
  sw_lru_stats_t st;
  sw_lru_stats_init(&st);
  SW_OK_(sw_lru_policy_stats(c->lru, &st));
  return st;
}

static void expect_primary(ctx* c, const int64_t* ks, size_t count) {
  bool mask[TT_MAXTILES] = {false};
  for (size_t j = 0; j < count; ++j) mask[ks[j]] = true;
  sw_tile_set_t* primary = NULL;
  SW_OK_(sw_tiled_tiles(c->f.te, SW_TILES_PRIMARY, &primary));
  tt_expect_set_mask(&c->f, primary, mask);
  sw_tile_set_release(primary);
  /* Nothing is ever dirty on this tier. */
  sw_tile_set_t* dirty = NULL;
  SW_OK_(sw_tiled_tiles(c->f.te, SW_TILES_DIRTY, &dirty));
  size_t n = 99;
  SW_OK_(sw_tile_set_count(dirty, &n));
  assert_int_equal(n, 0);
  sw_tile_set_release(dirty);
}

/* A policy-driven projection of `experts`, checked against the model, with
 * the LRU's hits, misses and evictions it must count and the primary tiles
 * it leaves. */
static sw_error_t* project_experts(ctx* c, const int64_t* experts, size_t count, uint64_t hits, uint64_t misses,
                                   uint64_t evicted, const int64_t* primary_after, size_t primary_count) {
  const sw_lru_stats_t before = lru_stats(c);
  sw_error_t* e = project_sel_check(c, sel_experts(experts, count));
  if (!e) {
    const sw_lru_stats_t after = lru_stats(c);
    assert_int_equal(after.requests - before.requests, 1);
    assert_int_equal(after.hits - before.hits, hits);
    assert_int_equal(after.misses - before.misses, misses);
    assert_int_equal(after.evicted - before.evicted, evicted);
    expect_primary(c, primary_after, primary_count);
  }
  return e;
}

static const int64_t kE01[2] = {0, 1}, kE12[2] = {1, 2}, kE012[3] = {0, 1, 2}, kE567[3] = {5, 6, 7},
                     kE26[2] = {2, 6}, kE034[3] = {0, 3, 4}, kE34[2] = {3, 4}, kE0[1] = {0};

/* Steps 1-3: misses (1: experts 0 and 1), a hit and a miss (2: experts 1 and
 * 2, which fills the budget), misses whose plan evicts the three clean tiles
 * (3: experts 5 to 7; nothing to write back). */
static sw_error_t* mstep_project_a(ctx* c) { return project_experts(c, kE01, 2, 0, 2, 0, kE01, 2); }
static sw_error_t* mstep_project_b(ctx* c) { return project_experts(c, kE12, 2, 1, 1, 0, kE012, 3); }
static sw_error_t* mstep_project_c(ctx* c) { return project_experts(c, kE567, 3, 0, 3, 3, kE567, 3); }

/* Step 4 is step_direct: a direct op on every tile, streamed through the
 * budget. Steps 5 and 6: a recorded projection of experts 2 and 6, and the
 * backward pass (a tile-sparse gradient on those two tiles). */
static sw_error_t* mstep_grad_project(ctx* c) { return grad_project(c, sel_experts(kE26, 2)); }
static sw_error_t* mstep_backward(ctx* c) { return backward_check(c, sel_experts(kE26, 2)); }

/* Step 7: an explicit promotion within the budget (the LRU evicts the clean
 * tiles it replaces). Step 8: an explicit eviction of clean tiles. */
static sw_error_t* residency(ctx* c, const int64_t* ks, size_t count, bool promote) {
  sw_tile_set_t* set = tt_set_ordinals(&c->f, ks, count);
  sw_await_t* a = NULL;
  sw_error_t* e = promote ? sw_tiled_promote_async(c->f.te, set, &a) : sw_tiled_evict_async(c->f.te, set, &a);
  e = wait_release(e, a, NULL);
  sw_tile_set_release(set);
  return e;
}

static sw_error_t* mstep_promote(ctx* c) {
  sw_error_t* e = residency(c, kE034, 3, true);
  if (!e) expect_primary(c, kE034, 3);
  return e;
}

static sw_error_t* mstep_evict(ctx* c) {
  sw_error_t* e = residency(c, kE34, 2, false);
  if (!e) expect_primary(c, kE0, 1);
  return e;
}

/* Step 9: nothing writes into the file. A public write to the tier carrier
 * and a move into it are refused STATE, naming the read-only carrier, and
 * change nothing; the step returns any other error. */
static sw_error_t* refused_read_only(sw_error_t* e, const char* what) {
  if (!e) fail_msg("%s onto the read-only model-file tier succeeded", what);
  if (sw_error_code(e) != SW_ERROR_STATE || !strstr(sw_error_message(e), "read-only")) return e;
  sw_error_free(e);
  return NULL;
}

static sw_error_t* mstep_refuse_writes(ctx* c) {
  const tt_snap_t before = tt_snapshot(&c->f);
  sw_carrier_t* s = NULL;
  SW_OK_(sw_tiled_secondary(c->f.te, &s));
  const float v = -1.0f;
  sw_error_t* e = refused_read_only(sw_carrier_write(s, 0, 1, &v), "a carrier write");
  if (!e) {
    sw_tensor_t* t = NULL;
    const int64_t shape[1] = {NE};
    e = sw_tensor_zeros(c->rt, SW_DTYPE_F32, shape, 1, &t);
    sw_await_t* a = NULL;
    if (!e) e = refused_read_only(sw_move_async(t, s, &a), "a move");
    if (!e) assert_null(a);
    sw_tensor_release(t);
  }
  sw_carrier_release(s);
  if (!e) {
    tt_expect_snapshot(&c->f, &before);
    expect_files_unchanged(c, "after the refused writes");
  }
  return e;
}

/* Step 10: a hit (expert 0 stayed primary). */
static sw_error_t* mstep_project_hit(ctx* c) { return project_experts(c, kE0, 1, 1, 0, 0, kE0, 1); }

/* Nothing the workload does changes a value. */
static void model_after_read_only(ctx* c, int step) {
  if (step == 0) model_create(c);
}

#define MODEL_STEPS                                                                                         \
  model_after_read_only, 11, {mstep_open,     mstep_project_a,    mstep_project_b, mstep_project_c,          \
                              step_direct,    mstep_grad_project, mstep_backward,  mstep_promote,            \
                              mstep_evict,    mstep_refuse_writes, mstep_project_hit}

#define TILED_STEPS                                                                                       \
  model_after, 11, {step_create, step_project_a, step_update_add, step_scatter_add, step_project_b, step_grad_project,   \
       step_backward, step_update_replace, step_evict_dirty, step_direct, step_promote}
static const workload kWorkloads[] = {
    {"file tier, LRU policy", SW_CARRIER_FILE, MF_NONE, false, true, TILED_STEPS},
    {"zstd tier, LRU policy", SW_CARRIER_ZSTD, MF_NONE, false, true, TILED_STEPS},
    {"file tier, no policy", SW_CARRIER_FILE, MF_NONE, false, false, TILED_STEPS},
    /* The read-only model-file tier: weights opened in place. */
    {"npy file, direct I/O, LRU", SW_CARRIER_FILE, MF_NPY, true, true, MODEL_STEPS},
    {"npy file, buffered, LRU", SW_CARRIER_FILE, MF_NPY, false, true, MODEL_STEPS},
    {"safetensors stack, direct I/O, LRU", SW_CARRIER_FILE, MF_STACK, true, true, MODEL_STEPS},
    {"sharded stack, direct I/O, LRU", SW_CARRIER_FILE, MF_SHARDS, true, true, MODEL_STEPS},
    {"sharded stack, buffered, LRU", SW_CARRIER_FILE, MF_SHARDS, false, true, MODEL_STEPS},
};
#define NWORKLOADS (sizeof kWorkloads / sizeof kWorkloads[0])

static const sw_fault_kind_t kStorageKinds[] = {SW_FAULT_ALLOCATION, SW_FAULT_READ, SW_FAULT_WRITE, SW_FAULT_DECOMPRESS};

static const char* kind_name(sw_fault_kind_t k) {
  switch (k) {
    case SW_FAULT_ALLOCATION: return "allocation";
    case SW_FAULT_READ: return "storage read";
    case SW_FAULT_WRITE: return "storage write";
    case SW_FAULT_DECOMPRESS: return "decompression";
    case SW_FAULT_DEVICE_ALLOCATION: return "device allocation";
    case SW_FAULT_DEVICE_COPY: return "device copy";
    case SW_FAULT_DEVICE_LOST: return "device loss";
    case SW_FAULT_DIRECT_IO: return "direct I/O refusal";
    default: return "?";
  }
}

static sw_error_code_t injected_code(sw_fault_kind_t k) {
  switch (k) {
    case SW_FAULT_ALLOCATION:
    case SW_FAULT_DEVICE_ALLOCATION: return SW_ERROR_OUT_OF_MEMORY;
    case SW_FAULT_DECOMPRESS: return SW_ERROR_DATA_CORRUPT;
    case SW_FAULT_DEVICE_LOST: return SW_ERROR_DEVICE_LOST;
    default: return SW_ERROR_IO;
  }
}

static uint64_t reached(sw_runtime_t* rt, sw_fault_kind_t k) {
  uint64_t r = 0;
  SW_OK_(sw_testing_fault_counts(rt, k, &r, NULL));
  return r;
}

static uint64_t injected(sw_runtime_t* rt, sw_fault_kind_t k) {
  uint64_t i = 0;
  SW_OK_(sw_testing_fault_counts(rt, k, NULL, &i));
  return i;
}

static sw_runtime_t* new_runtime(void) {
  sw_runtime_desc_t d;
  sw_runtime_desc_init(&d);
  d.compute_threads = 2;
  d.worker_threads = 2;
  sw_runtime_t* rt = NULL;
  SW_OK_(sw_runtime_create(&d, &rt));
  return rt;
}

static void run_ok(ctx* c, const workload* w, size_t i) {
  sw_error_t* e = w->step[i](c);
  if (e) fail_msg("%s: step %zu failed without an injected fault: %s: %s", w->name, i,
                  sw_error_code_name(sw_error_code(e)), sw_error_message(e));
  w->model_after(c, (int)i);
}

/* Every value of the full tensor (read through it: consults no policy). */
static void expect_model(ctx* c, const char* when) {
  float got[NE];
  SW_OK_(sw_tensor_read(c->f.full, got, sizeof got));
  for (int i = 0; i < NE; ++i)
    if (got[i] != c->model[i]) fail_msg("%s: element %d is %g, expected %g", when, i, got[i], c->model[i]);
}

static void expect_primary_count(ctx* c, size_t want) {
  sw_tile_set_t* primary = NULL;
  SW_OK_(sw_tiled_tiles(c->f.te, SW_TILES_PRIMARY, &primary));
  size_t n = 99;
  SW_OK_(sw_tile_set_count(primary, &n));
  assert_int_equal(n, want);
  sw_tile_set_release(primary);
}

/* No dirty value lost: evict everything, read it all from the secondary
 * tier; promote everything (in batches the LRU budget holds: it refuses a
 * larger promotion), read it all again. On a model-file tier every value is
 * also compared with the file, which must be as it was written. */
static void final_check(ctx* c) {
  sw_tile_set_t* all = NULL;
  SW_OK_(sw_tiled_tiles(c->f.te, SW_TILES_VALID, &all));
  SW_OK_(sw_tiled_evict(c->f.te, all));
  sw_tile_set_release(all);
  expect_primary_count(c, 0);
  expect_model(c, "after evicting everything");
  if (c->w->file != MF_NONE) expect_file(c, "after evicting everything");
  const int64_t batch = c->lru ? BUDGET : c->f.ntiles;
  for (int64_t first = 0; first < c->f.ntiles; first += batch) {
    int64_t ks[TT_MAXTILES];
    size_t n = 0;
    for (int64_t k = first; k < first + batch && k < c->f.ntiles; ++k) ks[n++] = k;
    sw_tile_set_t* set = tt_set_ordinals(&c->f, ks, n);
    SW_OK_(sw_tiled_promote(c->f.te, set));
    sw_tile_set_release(set);
    for (size_t j = 0; j < n; ++j) tt_expect_tile(&c->f, ks[j], SW_TILE_PRIMARY, false);
    expect_model(c, "after promoting tiles again");
    if (c->w->file != MF_NONE) expect_file(c, "after promoting tiles again");
  }
}

static void teardown_ctx(ctx* c) {
  sw_tensor_release(c->loss);
  tt_free(&c->f);
  sw_lru_policy_release(c->lru);
  c->lru = NULL;
  sw_runtime_release(c->rt);
  c->rt = NULL;
}

/* Open file descriptors of this process. */
static int open_fds(void) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  while (readdir(d)) ++n;
  closedir(d);
  return n;
}

static void expect_lru_stats(const sw_lru_stats_t* got, const sw_lru_stats_t* want) {
  assert_int_equal(got->requests, want->requests);
  assert_int_equal(got->hits, want->hits);
  assert_int_equal(got->misses, want->misses);
  assert_int_equal(got->promoted, want->promoted);
  assert_int_equal(got->evicted, want->evicted);
  assert_int_equal(got->transient, want->transient);
}

static size_t g_points; /* (kind, n) points covered in all */

/* One (kind, n) run: the workload with the n-th occurrence of `kind` failed,
 * where that occurrence is the m-th of step s. A direct I/O refusal is not
 * an error: the step succeeds on buffered reads, and the carrier stays
 * buffered. */
static void run_point(const workload* w, sw_fault_kind_t kind, size_t s, uint64_t m) {
  /* Named on stderr first, so a failure below says which point it was. */
  fprintf(stderr, "point: %s, %s #%llu of step %zu\n", w->name, kind_name(kind), (unsigned long long)m, s);
  ctx c;
  memset(&c, 0, sizeof c);
  c.rt = new_runtime();
  c.w = w;
  for (size_t i = 0; i < s; ++i) run_ok(&c, w, i);
  tt_snap_t before;
  memset(&before, 0, sizeof before);
  if (s > 0) before = tt_snapshot(&c.f);
  sw_lru_stats_t stats_before;
  memset(&stats_before, 0, sizeof stats_before);
  if (c.lru) stats_before = lru_stats(&c);
  const int fds_before = open_fds();
  const uint64_t injected_before = injected(c.rt, kind);
  SW_OK_(sw_testing_inject_fault(c.rt, kind, m));
  sw_error_t* e = w->step[s](&c);
  const uint64_t fired = injected(c.rt, kind) - injected_before;
  SW_OK_(sw_testing_inject_fault(c.rt, kind, 0));
  if (fired != 1)
    fail_msg("%s, %s #%llu of step %zu: %llu faults injected, expected 1", w->name, kind_name(kind),
             (unsigned long long)m, s, (unsigned long long)fired);
  if (kind == SW_FAULT_DIRECT_IO) {
    if (e)
      fail_msg("%s, direct I/O refused at #%llu of step %zu: the step failed with %s \"%s\"", w->name,
               (unsigned long long)m, s, sw_error_code_name(sw_error_code(e)), sw_error_message(e));
    w->model_after(&c, (int)s);
    /* The refusal may be another file carrier's (a gradient's scratch
     * tier is one); at the open it can only be the model file's, which
     * then reads buffered for good. */
    if (s == 0) {
      sw_carrier_t* sec = NULL;
      SW_OK_(sw_tiled_secondary(c.f.te, &sec));
      sw_file_io_stats_t io;
      sw_file_io_stats_init(&io);
      SW_OK_(sw_testing_file_io_stats(sec, &io));
      sw_carrier_release(sec);
      if (io.direct_open) fail_msg("%s: O_DIRECT still in use after its refusal at the open", w->name);
    }
    ++s;
  } else {
    if (!e)
      fail_msg("%s, %s #%llu of step %zu: the fault was injected, yet the step succeeded", w->name, kind_name(kind),
               (unsigned long long)m, s);
    if (sw_error_code(e) != injected_code(kind) || !strstr(sw_error_message(e), "injected"))
      fail_msg("%s, %s #%llu of step %zu failed with %s \"%s\", not the injected %s", w->name, kind_name(kind),
               (unsigned long long)m, s, sw_error_code_name(sw_error_code(e)), sw_error_message(e),
               sw_error_code_name(injected_code(kind)));
    sw_error_free(e);
    if (s > 0) {
      tt_expect_snapshot(&c.f, &before);
      expect_model(&c, "after the failed step");
      if (c.lru) {
        const sw_lru_stats_t now = lru_stats(&c);
        expect_lru_stats(&now, &stats_before);
      }
    } else {
      /* Nothing made, nothing left open. */
      assert_null(c.f.te);
      assert_null(c.f.full);
      assert_null(c.lru);
      assert_int_equal(open_fds(), fds_before);
    }
  }
  /* The retry succeeds, and so does the rest. */
  for (size_t i = s; i < w->steps; ++i) run_ok(&c, w, i);
  final_check(&c);
  teardown_ctx(&c);
  ++g_points;
}

/* A model-file tier read its tiles as the workload asked: through O_DIRECT
 * (via bounce buffers: its tiles are not 4096-aligned), or buffered. A file
 * system that refuses O_DIRECT makes a direct-I/O workload buffered (said
 * on stdout). */
static void expect_tier_io(ctx* c) {
  sw_carrier_t* s = NULL;
  SW_OK_(sw_tiled_secondary(c->f.te, &s));
  sw_file_io_stats_t io;
  sw_file_io_stats_init(&io);
  SW_OK_(sw_testing_file_io_stats(s, &io));
  sw_carrier_release(s);
  if (c->w->direct_io && io.direct_open) {
    assert_true(io.bounce_bytes > 0);
  } else {
    if (c->w->direct_io) printf("note: %s: O_DIRECT is unavailable in %s, reads were buffered\n", c->w->name, g_model_dir);
    assert_false(io.direct_open);
    assert_int_equal(io.bounce_bytes + io.direct_bytes, 0);
    assert_true(io.buffered_bytes > 0);
  }
}

/* Sweeps `kind` over workload w; returns the points covered. */
static size_t sweep(const workload* w, sw_fault_kind_t kind) {
  /* Count the kind's occurrences per step in a clean run. */
  ctx c;
  memset(&c, 0, sizeof c);
  c.rt = new_runtime();
  c.w = w;
  uint64_t per_step[12] = {0};
  SW_OK_(sw_testing_inject_fault(c.rt, kind, UINT64_MAX));
  uint64_t last = 0;
  for (size_t i = 0; i < w->steps; ++i) {
    run_ok(&c, w, i);
    const uint64_t now = reached(c.rt, kind);
    per_step[i] = now - last;
    last = now;
  }
  SW_OK_(sw_testing_inject_fault(c.rt, kind, 0));
  if (w->file != MF_NONE) expect_tier_io(&c);
  final_check(&c);
  teardown_ctx(&c);
  /* The model-file open is swept too: its header reads and allocations. */
  if (w->file != MF_NONE && (kind == SW_FAULT_READ || kind == SW_FAULT_ALLOCATION) && per_step[0] == 0)
    fail_msg("%s: the open reaches no %s", w->name, kind_name(kind));
  size_t points = 0;
  for (size_t s = 0; s < w->steps; ++s)
    for (uint64_t m = 1; m <= per_step[s]; ++m) {
      run_point(w, kind, s, m);
      ++points;
    }
  printf("fault sweep: %-34s %-18s %3zu points (per step:", w->name, kind_name(kind), points);
  for (size_t s = 0; s < w->steps; ++s) printf(" %llu", (unsigned long long)per_step[s]);
  printf(")\n");
  fflush(stdout);
  return points;
}

static void test_tiled_sweep(void** state) {
  const workload* w = (const workload*)*state;
  if (w->file != MF_NONE) write_model_files();
  for (size_t k = 0; k < sizeof kStorageKinds / sizeof kStorageKinds[0]; ++k) {
    const size_t points = sweep(w, kStorageKinds[k]);
    /* A model file is never written (every tile stays clean) and never
     * decompressed; its header reads and tile reads are all swept. */
    if (w->file != MF_NONE) {
      if (kStorageKinds[k] == SW_FAULT_WRITE || kStorageKinds[k] == SW_FAULT_DECOMPRESS) assert_int_equal(points, 0);
      else assert_true(points > 0);
    }
  }
  if (w->direct_io) assert_true(sweep(w, SW_FAULT_DIRECT_IO) > 0);
}

/* ---- the device workload -------------------------------------------------- */

/* The bridge on a host or fake device: allocations, synchronous and
 * asynchronous copies both ways, a view, compute marks and a free. A model of
 * each allocation's bytes follows what succeeded. */
#define DB 256
typedef struct dctx {
  sw_runtime_t* rt;
  sw_device_t* dev;
  bool fake;
  sw_device_allocation_t* a[2];
  uint8_t model[2][DB];
  uint8_t host[2][DB];
  uint64_t generation;
} dctx;

static sw_error_t* complete(dctx* d, const sw_copy_event_t* ev) {
  if (d->fake) return sw_fake_device_complete(d->dev, ev);
  return sw_device_event_wait(d->dev, ev, -1);
}

/* Steps over allocations 0 and 1; each leaves the model exact on success. */
static sw_error_t* dstep(dctx* d, int s) {
  sw_object_spec_t spec;
  sw_object_spec_init(&spec);
  spec.dtype = SW_DTYPE_U8;
  spec.rank = 1;
  spec.shape[0] = DB;
  sw_copy_event_t ev;
  sw_copy_event_init(&ev);
  sw_error_t* e = NULL;
  switch (s) {
    case 0:
    case 1: {
      sw_device_allocation_t* a = NULL;
      e = sw_device_alloc(d->dev, &spec, DB, &a);
      if (!e) {
        d->a[s] = a;
        memset(d->model[s], 0, DB);
      }
      return e;
    }
    case 2: /* synchronous upload into 0 */
      for (int i = 0; i < DB; ++i) d->host[0][i] = (uint8_t)(i * 3 + 1);
      e = sw_device_host_to_device(d->a[0], 16, d->host[0], 128, false, NULL);
      if (!e) memcpy(d->model[0] + 16, d->host[0], 128);
      return e;
    case 3: /* asynchronous upload into 1 */
      for (int i = 0; i < DB; ++i) d->host[1][i] = (uint8_t)(i * 5 + 2);
      e = sw_device_host_to_device(d->a[1], 0, d->host[1], DB, true, &ev);
      if (!e) e = complete(d, &ev);
      if (!e) memcpy(d->model[1], d->host[1], DB);
      return e;
    case 4: { /* a view of 0 reads what was uploaded */
      int64_t shape[1] = {DB};
      sw_device_view_t* v = NULL;
      e = sw_device_view(d->a[0], SW_DTYPE_U8, shape, 1, &v);
      if (!e) {
        sw_view_info_t info;
        sw_view_info_init(&info);
        SW_OK_(sw_device_view_describe(v, &info));
        if (info.pointer) assert_memory_equal(info.pointer, d->model[0], DB);
      }
      sw_device_view_release(v);
      return e;
    }
    case 5: { /* synchronous download of 0 */
      uint8_t back[DB];
      e = sw_device_device_to_host(d->a[0], 0, back, DB, false, NULL);
      if (!e) assert_memory_equal(back, d->model[0], DB);
      return e;
    }
    case 6: { /* asynchronous download of 1 under a compute mark */
      static uint8_t back[DB];
      SW_OK_(sw_device_compute_begin(d->a[1]));
      e = sw_device_device_to_host(d->a[1], 0, back, DB, true, &ev);
      if (!e) e = complete(d, &ev);
      if (!e) assert_memory_equal(back, d->model[1], DB);
      /* After a lost device the mark went with the old generation. */
      sw_error_t* end = sw_device_compute_end(d->a[1]);
      if (!e) SW_OK_(end);
      sw_error_free(end);
      return e;
    }
    default: { /* a new allocation in place of 0 (made first: a failure keeps the old one) */
      sw_device_allocation_t* fresh = NULL;
      e = sw_device_alloc(d->dev, &spec, DB, &fresh);
      if (e) return e;
      SW_OK_(sw_device_free(d->a[0]));
      sw_device_allocation_release(d->a[0]);
      d->a[0] = fresh;
      memset(d->model[0], 0, DB);
      return NULL;
    }
  }
}
#define DSTEPS 8

static void dsetup(dctx* d, bool fake) {
  memset(d, 0, sizeof *d);
  d->rt = new_runtime();
  d->fake = fake;
  if (fake)
    SW_OK_(sw_device_create_fake(d->rt, NULL, &d->dev));
  else
    SW_OK_(sw_device_create_host(d->rt, &d->dev));
}

static void dteardown(dctx* d) {
  for (int i = 0; i < 2; ++i) sw_device_allocation_release(d->a[i]);
  sw_device_release(d->dev);
  sw_runtime_release(d->rt);
}

static void dstep_ok(dctx* d, int s) {
  sw_error_t* e = dstep(d, s);
  if (e) fail_msg("device step %d failed without an injected fault: %s: %s", s, sw_error_code_name(sw_error_code(e)),
                  sw_error_message(e));
}

/* What every allocation holds, through a synchronous download. */
static void dexpect_model(dctx* d) {
  for (int i = 0; i < 2; ++i) {
    if (!d->a[i]) continue;
    uint8_t back[DB];
    SW_OK_(sw_device_device_to_host(d->a[i], 0, back, DB, false, NULL));
    assert_memory_equal(back, d->model[i], DB);
  }
}

static void drun_point(bool fake, sw_fault_kind_t kind, int s, uint64_t m) {
  fprintf(stderr, "point: %s device, %s #%llu of step %d\n", fake ? "fake" : "host", kind_name(kind),
          (unsigned long long)m, s);
  dctx d;
  dsetup(&d, fake);
  for (int i = 0; i < s; ++i) dstep_ok(&d, i);
  uint64_t gen = 0;
  SW_OK_(sw_device_generation(d.dev, &gen));
  SW_OK_(sw_testing_inject_fault(d.rt, kind, m));
  sw_error_t* e = dstep(&d, s);
  const uint64_t fired = injected(d.rt, kind);
  SW_OK_(sw_testing_inject_fault(d.rt, kind, 0));
  if (fired != 1) fail_msg("%s device, %s #%llu of step %d: %llu faults injected", fake ? "fake" : "host",
                           kind_name(kind), (unsigned long long)m, s, (unsigned long long)fired);
  if (!e || sw_error_code(e) != injected_code(kind) || !strstr(sw_error_message(e), "injected"))
    fail_msg("%s device, %s #%llu of step %d: %s \"%s\", not the injected %s", fake ? "fake" : "host", kind_name(kind),
             (unsigned long long)m, s, e ? sw_error_code_name(sw_error_code(e)) : "success", e ? sw_error_message(e) : "",
             sw_error_code_name(injected_code(kind)));
  sw_error_free(e);
  uint64_t now = 0;
  SW_OK_(sw_device_generation(d.dev, &now));
  if (kind == SW_FAULT_DEVICE_LOST) {
    /* The device restarted: every handle of the old generation is stale,
     * the rest of the workload runs again on the new one. */
    assert_int_equal(now, gen + 1);
    for (int i = 0; i < 2; ++i) {
      if (!d.a[i]) continue;
      uint8_t b[1] = {0};
      SW_FAILS(sw_device_host_to_device(d.a[i], 0, b, 1, false, NULL), SW_ERROR_STALE_HANDLE, "generation");
      SW_FAILS(sw_device_free(d.a[i]), SW_ERROR_STALE_HANDLE, NULL);
      sw_device_allocation_release(d.a[i]);
      d.a[i] = NULL;
    }
    for (int i = 0; i < DSTEPS; ++i) dstep_ok(&d, i);
  } else {
    /* Nothing changed: same generation, same bytes; the retry succeeds. */
    assert_int_equal(now, gen);
    dexpect_model(&d);
    for (int i = s; i < DSTEPS; ++i) dstep_ok(&d, i);
  }
  dexpect_model(&d);
  dteardown(&d);
  ++g_points;
}

static void test_device_sweep(void** state) {
  const bool fake = *state != NULL;
  const sw_fault_kind_t kinds[3] = {SW_FAULT_DEVICE_ALLOCATION, SW_FAULT_DEVICE_COPY, SW_FAULT_DEVICE_LOST};
  for (int k = 0; k < 3; ++k) {
    dctx d;
    dsetup(&d, fake);
    uint64_t per_step[DSTEPS] = {0}, last = 0;
    SW_OK_(sw_testing_inject_fault(d.rt, kinds[k], UINT64_MAX));
    for (int s = 0; s < DSTEPS; ++s) {
      dstep_ok(&d, s);
      const uint64_t now = reached(d.rt, kinds[k]);
      per_step[s] = now - last;
      last = now;
    }
    SW_OK_(sw_testing_inject_fault(d.rt, kinds[k], 0));
    dexpect_model(&d);
    dteardown(&d);
    size_t points = 0;
    for (int s = 0; s < DSTEPS; ++s)
      for (uint64_t m = 1; m <= per_step[s]; ++m, ++points) drun_point(fake, kinds[k], s, m);
    printf("fault sweep: %-24s %-18s %3zu points\n", fake ? "fake device bridge" : "host device bridge",
           kind_name(kinds[k]), points);
    assert_true(points > 0);
  }
}

/* Outside the sweep: what a write does to the read-only model-file tier. A
 * write into the file carrier is refused STATE, naming it read-only, and
 * changes nothing. An update of the TiledEvictable is a write of its tiles,
 * not of the file: it commits in memory, the tile stays primary and dirty
 * (the LRU budget cannot evict it, so it holds it beyond the budget), an
 * explicit eviction of it is refused STATE with nothing changed, and the
 * file keeps its bytes. */
static void test_model_file_writes(void** state) {
  (void)state;
  write_model_files();
  ctx c;
  memset(&c, 0, sizeof c);
  c.rt = new_runtime();
  c.w = &kWorkloads[4];
  assert_int_equal(c.w->file, MF_NPY);
  run_ok(&c, c.w, 0);
  tt_snap_t before = tt_snapshot(&c.f);
  sw_carrier_t* s = NULL;
  SW_OK_(sw_tiled_secondary(c.f.te, &s));
  const float v = -1.0f;
  SW_FAILS(sw_carrier_write(s, 0, 1, &v), SW_ERROR_STATE, "read-only");
  sw_carrier_release(s);
  tt_expect_snapshot(&c.f, &before);
  expect_file(&c, "after the refused write");

  /* Expert 1 replaced in memory. */
  const int64_t k1[1] = {1}, k5[1] = {5}, k15[2] = {1, 5};
  sw_tile_selection_t* sel = sel_experts(k1, 1);
  float repl[TE];
  double replaced[TE];
  for (int w = 0; w < TE; ++w) replaced[w] = repl[w] = (float)(-7 - w);
  const int64_t shape[3] = {MI, MO, 1};
  sw_tensor_t* compact = NULL;
  SW_OK_(sw_tensor_from_data(c.rt, SW_DTYPE_F32, shape, 3, repl, &compact));
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_update_async(c.f.te, c.f.full, compact, sel, SW_SCATTER_REPLACE, &a));
  SW_OK_(sw_await_wait(a, -1));
  sw_await_release(a);
  sw_tensor_release(compact);
  double* next = tt_scatter_expect(&c.f, c.model, sel, replaced, false);
  memcpy(c.model, next, sizeof c.model);
  free(next);
  sw_tile_selection_release(sel);
  tt_expect_tile(&c.f, 1, SW_TILE_PRIMARY, true);
  expect_model(&c, "after the update");
  expect_files_unchanged(&c, "after the update");

  /* Its eviction is refused, alone or with a clean tile. */
  sw_tile_set_t* set5 = tt_set_ordinals(&c.f, k5, 1);
  SW_OK_(sw_tiled_promote(c.f.te, set5));
  sw_tile_set_release(set5);
  before = tt_snapshot(&c.f);
  for (int i = 0; i < 2; ++i) {
    sw_tile_set_t* set = i ? tt_set_ordinals(&c.f, k15, 2) : tt_set_ordinals(&c.f, k1, 1);
    a = NULL;
    SW_FAILS(sw_tiled_evict_async(c.f.te, set, &a), SW_ERROR_STATE, "read-only");
    assert_null(a);
    SW_FAILS(sw_tiled_evict(c.f.te, set), SW_ERROR_STATE, "read-only");
    sw_tile_set_release(set);
    tt_expect_snapshot(&c.f, &before);
  }

  /* Projections of three other experts fill the budget around it: the LRU
   * evicts the clean tiles and keeps the dirty one. */
  SW_OK_(project_sel_check(&c, sel_experts(kE034, 3)));
  SW_OK_(project_sel_check(&c, sel_experts(kE567, 3)));
  const int64_t primary[4] = {1, 5, 6, 7};
  bool mask[TT_MAXTILES] = {false};
  for (int j = 0; j < 4; ++j) mask[primary[j]] = true;
  sw_tile_set_t* now = NULL;
  SW_OK_(sw_tiled_tiles(c.f.te, SW_TILES_PRIMARY, &now));
  tt_expect_set_mask(&c.f, now, mask);
  sw_tile_set_release(now);
  tt_expect_tile(&c.f, 1, SW_TILE_PRIMARY, true);
  expect_model(&c, "after the projections");
  expect_files_unchanged(&c, "after the projections");
  teardown_ctx(&c);
}

/* A kind armed while nothing reaches it injects nothing; arming counts from
 * zero again; an unknown kind is VALUE. */
static void test_fault_counts(void** state) {
  (void)state;
  sw_runtime_t* rt = new_runtime();
  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_ALLOCATION, UINT64_MAX));
  sw_carrier_t* c = NULL;
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 4, &c));
  sw_carrier_release(c);
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 4, &c));
  sw_carrier_release(c);
  assert_int_equal(reached(rt, SW_FAULT_ALLOCATION), 2);
  assert_int_equal(injected(rt, SW_FAULT_ALLOCATION), 0);
  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_ALLOCATION, 2));
  assert_int_equal(reached(rt, SW_FAULT_ALLOCATION), 0);
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 4, &c));
  sw_carrier_release(c);
  c = NULL;
  SW_FAILS(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 4, &c), SW_ERROR_OUT_OF_MEMORY, "injected allocation failure");
  assert_null(c);
  assert_int_equal(injected(rt, SW_FAULT_ALLOCATION), 1);
  /* Disarmed after it fired: nothing more is counted or injected. */
  SW_OK_(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 4, &c));
  sw_carrier_release(c);
  assert_int_equal(reached(rt, SW_FAULT_ALLOCATION), 2);
  SW_FAILS(sw_testing_fault_counts(rt, (sw_fault_kind_t)10, NULL, NULL), SW_ERROR_VALUE, "unknown fault kind");
  SW_FAILS(sw_testing_inject_fault(rt, (sw_fault_kind_t)0, 1), SW_ERROR_VALUE, "unknown fault kind");
  sw_runtime_release(rt);
}

static void test_summary(void** state) {
  (void)state;
  printf("fault sweep: %zu (kind, n) points covered\n", g_points);
  assert_true(g_points > 0);
}

int main(void) {
  static const bool yes = true;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fault_counts),
      cmocka_unit_test_prestate(test_tiled_sweep, (void*)&kWorkloads[0]),
      cmocka_unit_test_prestate(test_tiled_sweep, (void*)&kWorkloads[1]),
      cmocka_unit_test_prestate(test_tiled_sweep, (void*)&kWorkloads[2]),
      cmocka_unit_test_prestate(test_tiled_sweep, (void*)&kWorkloads[3]),
      cmocka_unit_test_prestate(test_tiled_sweep, (void*)&kWorkloads[4]),
      cmocka_unit_test_prestate(test_tiled_sweep, (void*)&kWorkloads[5]),
      cmocka_unit_test_prestate(test_tiled_sweep, (void*)&kWorkloads[6]),
      cmocka_unit_test_prestate(test_tiled_sweep, (void*)&kWorkloads[7]),
      cmocka_unit_test(test_model_file_writes),
      cmocka_unit_test_prestate(test_device_sweep, NULL),
      cmocka_unit_test_prestate(test_device_sweep, (void*)&yes),
      cmocka_unit_test(test_summary),
  };
  const int failed = cmocka_run_group_tests(tests, NULL, NULL);
  remove_model_files();
  return sw_test_result(failed);
}
