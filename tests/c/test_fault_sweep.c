/* The fault sweep: for each injectable fault kind and each workload that
 * reaches it, fail the n-th occurrence of the kind, for every n the workload
 * reaches, one run (a fresh runtime) per n. After each failure:
 *  - the failed step reports the injected error (its code, "injected" in the
 *    message), and exactly one fault was injected;
 *  - it changed nothing: every tile's state, the versions, the tiers'
 *    ownership, the gradient and every value are what they were before it;
 *  - a retry of the same step succeeds, and the rest of the workload runs;
 *  - no dirty value is lost: after evicting everything and reading every
 *    value back from the secondary tier, and again after promoting
 *    everything, the full tensor equals the reference model;
 *  - every handle is released (LeakSanitizer checks the rest at exit).
 * The workloads are tables of steps (struct workload below): a new tier (the
 * model-file tier, say) is a new table. The sweep prints the (kind, n)
 * points it covered. */
#include "sw_tiled_test.h"

/* ---- the tiled workload ------------------------------------------------- */

/* Grid (4, 2) of (2, 8) tiles: 8 tiles of 16 f32 each. */
#define GR 2
static const int64_t kGrid[GR] = {4, 2}, kTile[GR] = {2, 8};
#define NT 8
#define TE 16
#define NE (NT * TE)

typedef struct ctx {
  sw_runtime_t* rt;
  sw_carrier_kind_t secondary_kind;
  bool with_policy;
  sw_lru_policy_t* lru;
  tt_fix_t f;           /* f.te and f.full once step 0 ran */
  double model[NE];     /* logical values of the full tensor */
  sw_tensor_t* loss;    /* the recorded sum of a projection, between steps 5 and 6 */
} ctx;

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

/* Step 0: the seeded tiled carrier (an empty CPU primary, a full secondary
 * seeded tile-major). Undoes its partial work on failure. */
static sw_error_t* step_create(ctx* c) {
  tt_fix_t* f = &c->f;
  memset(f, 0, sizeof *f);
  f->rt = c->rt;
  f->dtype = SW_DTYPE_F32;
  tt_geometry(f, GR, kGrid, kTile);
  sw_carrier_t *p = NULL, *s = NULL;
  sw_error_t* e = sw_carrier_create_cpu(c->rt, SW_DTYPE_F32, 0, &p);
  if (!e) {
    if (c->secondary_kind == SW_CARRIER_ZSTD) {
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
  sw_residency_policy_t pol;
  bool vtable = false;
  if (!e && c->with_policy) {
    e = sw_lru_policy_create(3, &c->lru);
    if (!e) e = sw_lru_policy_as_residency_policy(c->lru, &pol);
    vtable = !e;
  }
  if (!e) {
    e = sw_tiled_create(p, s, kGrid, kTile, GR, c->with_policy ? &pol : NULL, &f->te);
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

/* Projection steps check their result against the model. */
static sw_error_t* project_check(ctx* c, const int64_t* rows, size_t nr, const int64_t* cols, size_t nc) {
  sw_tile_selection_t* sel = sel_of(rows, nr, cols, nc);
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
static sw_error_t* step_grad_project(ctx* c) {
  SW_OK_(sw_tensor_set_requires_grad(c->f.full, true));
  sw_tile_selection_t* sel = sel_of(kR12, 2, kC1, 1);
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

static sw_error_t* step_backward(ctx* c) {
  sw_error_t* e = sw_backward(c->loss, NULL, true);
  sw_tensor_t* g = NULL;
  if (!e) e = sw_tensor_grad(c->f.full, &g);
  if (!e) {
    sw_tile_selection_t* sel = sel_of(kR12, 2, kC1, 1);
    double ones[NE], zeros[NE] = {0};
    for (int i = 0; i < NE; ++i) ones[i] = 1.0;
    double* expect = tt_scatter_expect(&c->f, zeros, sel, ones, false);
    float got[NE];
    e = sw_tensor_read(g, got, sizeof got);
    for (int i = 0; !e && i < NE; ++i)
      if (got[i] != expect[i]) fail_msg("gradient element %d: %g, expected %g", i, got[i], expect[i]);
    free(expect);
    sw_tile_selection_release(sel);
  }
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

/* Step 9: a direct op on the full tensor (every tile made available). */
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

typedef sw_error_t* (*step_fn)(ctx*);

/* A workload: its steps, in order; step 0 makes the carrier. */
typedef struct workload {
  const char* name;
  sw_carrier_kind_t secondary;
  bool policy;
  size_t steps;
  step_fn step[12];
} workload;

#define TILED_STEPS                                                                                       \
  11, {step_create, step_project_a, step_update_add, step_scatter_add, step_project_b, step_grad_project,   \
       step_backward, step_update_replace, step_evict_dirty, step_direct, step_promote}
static const workload kWorkloads[] = {
    {"file tier, LRU policy", SW_CARRIER_FILE, true, TILED_STEPS},
    {"zstd tier, LRU policy", SW_CARRIER_ZSTD, true, TILED_STEPS},
    {"file tier, no policy", SW_CARRIER_FILE, false, TILED_STEPS},
    /* The model-file tier (weights opened in place) adds its table here. */
};

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
  model_after(c, (int)i);
}

/* Every value of the full tensor (read through it: consults no policy). */
static void expect_model(ctx* c, const char* when) {
  float got[NE];
  SW_OK_(sw_tensor_read(c->f.full, got, sizeof got));
  for (int i = 0; i < NE; ++i)
    if (got[i] != c->model[i]) fail_msg("%s: element %d is %g, expected %g", when, i, got[i], c->model[i]);
}

/* No dirty value lost: evict everything, read it all from the secondary
 * tier; promote everything, read it all again. */
static void final_check(ctx* c) {
  sw_tile_set_t* all = NULL;
  SW_OK_(sw_tiled_tiles(c->f.te, SW_TILES_VALID, &all));
  SW_OK_(sw_tiled_evict(c->f.te, all));
  sw_tile_set_t* primary = NULL;
  SW_OK_(sw_tiled_tiles(c->f.te, SW_TILES_PRIMARY, &primary));
  size_t n = 99;
  SW_OK_(sw_tile_set_count(primary, &n));
  assert_int_equal(n, 0);
  sw_tile_set_release(primary);
  expect_model(c, "after evicting everything");
  /* An LRU budget refuses promoting more than it holds; its projections
   * above streamed everything through it already. */
  if (!c->lru) {
    SW_OK_(sw_tiled_promote(c->f.te, all));
    expect_model(c, "after promoting everything");
  }
  sw_tile_set_release(all);
}

static void teardown_ctx(ctx* c) {
  sw_tensor_release(c->loss);
  tt_free(&c->f);
  sw_lru_policy_release(c->lru);
  c->lru = NULL;
  sw_runtime_release(c->rt);
  c->rt = NULL;
}

static size_t g_points; /* (kind, n) points covered in all */

/* One (kind, n) run: the workload with the n-th occurrence of `kind` failed,
 * where that occurrence is the m-th of step s. */
static void run_point(const workload* w, sw_fault_kind_t kind, size_t s, uint64_t m) {
  /* Named on stderr first, so a failure below says which point it was. */
  fprintf(stderr, "point: %s, %s #%llu of step %zu\n", w->name, kind_name(kind), (unsigned long long)m, s);
  ctx c;
  memset(&c, 0, sizeof c);
  c.rt = new_runtime();
  c.secondary_kind = w->secondary;
  c.with_policy = w->policy;
  for (size_t i = 0; i < s; ++i) run_ok(&c, w, i);
  tt_snap_t before;
  memset(&before, 0, sizeof before);
  if (s > 0) before = tt_snapshot(&c.f);
  const uint64_t injected_before = injected(c.rt, kind);
  SW_OK_(sw_testing_inject_fault(c.rt, kind, m));
  sw_error_t* e = w->step[s](&c);
  const uint64_t fired = injected(c.rt, kind) - injected_before;
  SW_OK_(sw_testing_inject_fault(c.rt, kind, 0));
  if (fired != 1)
    fail_msg("%s, %s #%llu of step %zu: %llu faults injected, expected 1", w->name, kind_name(kind),
             (unsigned long long)m, s, (unsigned long long)fired);
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
  } else {
    assert_null(c.f.te);
  }
  /* The retry succeeds, and so does the rest. */
  for (size_t i = s; i < w->steps; ++i) run_ok(&c, w, i);
  final_check(&c);
  teardown_ctx(&c);
  ++g_points;
}

static void sweep(const workload* w, sw_fault_kind_t kind) {
  /* Count the kind's occurrences per step in a clean run. */
  ctx c;
  memset(&c, 0, sizeof c);
  c.rt = new_runtime();
  c.secondary_kind = w->secondary;
  c.with_policy = w->policy;
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
  final_check(&c);
  teardown_ctx(&c);
  size_t points = 0;
  for (size_t s = 0; s < w->steps; ++s)
    for (uint64_t m = 1; m <= per_step[s]; ++m) {
      run_point(w, kind, s, m);
      ++points;
    }
  printf("fault sweep: %-24s %-18s %3zu points (per step:", w->name, kind_name(kind), points);
  for (size_t s = 0; s < w->steps; ++s) printf(" %llu", (unsigned long long)per_step[s]);
  printf(")\n");
  fflush(stdout);
}

static void test_tiled_sweep(void** state) {
  const workload* w = (const workload*)*state;
  for (size_t k = 0; k < sizeof kStorageKinds / sizeof kStorageKinds[0]; ++k) sweep(w, kStorageKinds[k]);
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
      cmocka_unit_test_prestate(test_device_sweep, NULL),
      cmocka_unit_test_prestate(test_device_sweep, (void*)&yes),
      cmocka_unit_test(test_summary),
  };
  return sw_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
