/* TiledEvictable scatter through the public ABI: the spec scenarios (scatter
 * a compact result, project after replace scatter, reject a compact shape
 * mismatch, differentiate replace scatter), add semantics and its adjoint,
 * inputs that never change, failure after submission, and every scatter
 * error rule with a check that nothing changed. */
#include "sw_tiled_test.h"

static void make_experts(tt_fix_t* f, sw_runtime_t* rt, int64_t experts, sw_carrier_kind_t kind) {
  const int64_t grid[3] = {experts, 1, 1}, tile[3] = {1, 3, 2};
  tt_make(f, rt, SW_DTYPE_F32, 3, grid, tile, false, kind, true, NULL);
}

/* A dense (count, 3, 2) compact tensor: element i holds base + i. */
static sw_tensor_t* compact_experts(sw_runtime_t* rt, int64_t count, double base, double* values) {
  const int64_t shape[3] = {count, 3, 2};
  for (int64_t i = 0; i < count * 6; ++i) values[i] = base + (double)i;
  return tt_dense(rt, shape, 3, values);
}

/* The fixture view of a scatter result: its carrier and full tensor. */
static tt_fix_t result_view(const tt_fix_t* f, sw_tensor_t* r) {
  tt_fix_t rf = *f;
  rf.te = tt_carrier_of(r);
  rf.full = r;
  return rf;
}

static void expect_same_geometry(const tt_fix_t* f, const sw_carrier_t* te) {
  int64_t g[TT_MAXR], t[TT_MAXR];
  SW_OK_(sw_tiled_grid_shape(te, g, TT_MAXR));
  SW_OK_(sw_tiled_tile_shape(te, t, TT_MAXR));
  for (size_t i = 0; i < f->rank; ++i) {
    assert_int_equal(g[i], f->grid[i]);
    assert_int_equal(t[i], f->tile[i]);
  }
  sw_carrier_t *p = NULL, *s = NULL, *fp = NULL, *fs = NULL;
  SW_OK_(sw_tiled_primary(te, &p));
  SW_OK_(sw_tiled_secondary(te, &s));
  SW_OK_(sw_tiled_primary(f->te, &fp));
  SW_OK_(sw_tiled_secondary(f->te, &fs));
  assert_int_equal(tt_kind(p), tt_kind(fp));
  assert_int_equal(tt_kind(s), tt_kind(fs));
  assert_ptr_not_equal(p, fp);
  assert_ptr_not_equal(s, fs);
  sw_dtype_t d1, d2;
  SW_OK_(sw_carrier_dtype(te, &d1));
  SW_OK_(sw_carrier_dtype(f->te, &d2));
  assert_int_equal(d1, d2);
  bool has = true;
  SW_OK_(sw_tiled_has_policy(te, &has));
  assert_false(has);
  sw_carrier_release(p);
  sw_carrier_release(s);
  sw_carrier_release(fp);
  sw_carrier_release(fs);
}

static void scatter_compact_result(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  const sw_carrier_kind_t kinds[3] = {SW_CARRIER_HOST, SW_CARRIER_FILE, SW_CARRIER_ZSTD};
  for (int i = 0; i < 3; ++i) {
    tt_fix_t f;
    make_experts(&f, rt, 6, kinds[i]);
    const int64_t one[3] = {1, 0, 0};
    sw_tile_set_t* s1 = tt_set(one, 1, 3);
    SW_OK_(sw_tiled_promote(f.te, s1)); /* mixed template residency */
    sw_tile_set_release(s1);
    const tt_snap_t snap = tt_snapshot(&f);
    const int64_t pick[3] = {4, 1, 3};
    sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 3);
    double cv[18];
    sw_tensor_t* compact = compact_experts(rt, 3, 1000, cv);
    sw_carrier_t* cc = tt_carrier_of(compact);
    const uint64_t cver = tt_version(cc);

    sw_await_t* a = NULL;
    SW_OK_(sw_tiled_scatter(f.te, compact, f.full, sel, SW_SCATTER_REPLACE, &a));
    sw_await_kind_t kind;
    SW_OK_(sw_await_kind(a, &kind));
    assert_int_equal(kind, SW_AWAIT_MOVE);
    sw_tensor_t* r = tt_wait_result(a);
    sw_tensor_t* r2 = NULL;
    SW_OK_(sw_await_result(a, &r2));
    assert_ptr_equal(r, r2);
    sw_tensor_release(r2);
    sw_await_release(a);

    /* A fresh full-shaped TiledEvictable with the template's geometry. */
    tt_fix_t rf = result_view(&f, r);
    assert_ptr_not_equal(rf.te, f.te);
    assert_int_equal(tt_kind(rf.te), SW_CARRIER_TILED);
    expect_same_geometry(&f, rf.te);
    tt_expect_shape(r, f.logical, 3);
    tt_expect_dense_layout(r);
    /* Exactly the three selected tiles: valid, dirty; the others invalid. */
    for (int64_t k = 0; k < 6; ++k) {
      const bool selected = k == 4 || k == 1 || k == 3;
      tt_expect_tile(&rf, k, selected ? SW_TILE_PRIMARY : SW_TILE_INVALID, selected);
    }
    tt_expect_tile_sets_consistent(&rf);
    assert_int_equal(tt_version(rf.te), 1);
    /* Values at the selected tiles; reading an invalid tile fails. */
    for (int64_t e = 0; e < 3; ++e)
      for (int64_t w = 0; w < 6; ++w) {
        const int64_t at[3] = {pick[e], w % 3, w / 3};
        double v = 0;
        SW_OK_(sw_tensor_get(r, at, 3, &v));
        assert_true(v == cv[e + 3 * w]);
      }
    const int64_t bad[3] = {0, 0, 0};
    double v = 0;
    SW_FAILS(sw_tensor_get(r, bad, 3, &v), SW_ERROR_STATE, "invalid");
    /* Neither input changed. */
    tt_expect_snapshot(&f, &snap);
    double* canon = tt_canon_seed(&f, 0);
    tt_expect_values(f.full, canon, f.n);
    free(canon);
    tt_expect_values(compact, cv, 18);
    assert_int_equal(tt_version(cc), cver);
    assert_false(tt_owned(cc));
    assert_false(tt_disposed(cc));

    sw_carrier_release(rf.te);
    sw_tensor_release(r);
    sw_carrier_release(cc);
    sw_tensor_release(compact);
    sw_tile_selection_release(sel);
    tt_free(&f);
  }
  sw_runtime_release(rt);
}

static void project_after_replace_scatter(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  const int64_t grid[2] = {4, 5}, tile[2] = {2, 3};
  tt_make(&f, rt, SW_DTYPE_F32, 2, grid, tile, false, SW_CARRIER_FILE, true, NULL);
  const int64_t a0[3] = {3, 0, 2}, a1[2] = {4, 1};
  sw_tile_selection_t* sel = tt_sel2(a0, 3, a1, 2);
  const int64_t cshape[2] = {6, 6};
  double cv[36];
  for (int i = 0; i < 36; ++i) cv[i] = -0.5 * i;
  sw_tensor_t* compact = tt_dense(rt, cshape, 2, cv);
  sw_tensor_t* r = tt_scatter(&f, compact, f.full, sel, SW_SCATTER_REPLACE);
  tt_fix_t rf = result_view(&f, r);
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_project(rf.te, r, sel, NULL, &a));
  sw_tensor_t* back = tt_wait_result(a);
  tt_expect_values(back, cv, 36);
  /* A permuted sub-selection of the written tiles projects consistently. */
  const int64_t b0[2] = {2, 3}, b1[1] = {1};
  sw_tile_selection_t* sub = tt_sel2(b0, 2, b1, 1);
  sw_tensor_t* part = tt_project(&rf, r, sub, NULL);
  double* logical = tt_scatter_expect(&f, (double[120]){0}, sel, cv, false);
  int64_t n = 0;
  double* want = tt_compact_expect(&f, logical, sub, &n);
  tt_expect_values(part, want, n);
  free(want);
  free(logical);
  /* The result's own residency works like any TiledEvictable's. */
  sw_tile_set_t* written = NULL;
  SW_OK_(sw_tile_selection_tile_set(sel, &written));
  SW_OK_(sw_tiled_evict(rf.te, written));
  for (int64_t k = 0; k < 20; ++k) {
    const sw_tile_state_t s = tt_state(&rf, k);
    if (s.valid) assert_int_equal(s.location, SW_TILE_SECONDARY);
  }
  sw_tensor_t* again = tt_project(&rf, r, sel, NULL);
  tt_expect_values(again, cv, 36);
  assert_int_equal(tt_version(rf.te), 1);
  sw_tensor_release(again);
  sw_tile_set_release(written);
  sw_tensor_release(part);
  sw_tile_selection_release(sub);
  sw_tensor_release(back);
  sw_await_release(a);
  sw_carrier_release(rf.te);
  sw_tensor_release(r);
  sw_tensor_release(compact);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

/* Asserts that a refused scatter changed nothing. */
static void scatter_fails(const tt_fix_t* f, const tt_snap_t* snap, sw_tensor_t* compact, sw_tensor_t* tmpl,
                          const sw_tile_selection_t* sel, sw_scatter_reduction_t reduction, sw_error_code_t code,
                          const char* needle) {
  sw_await_t* a = NULL;
  SW_FAILS(sw_tiled_scatter(f->te, compact, tmpl, sel, reduction, &a), code, needle);
  assert_null(a);
  tt_expect_snapshot(f, snap);
}

static void reject_compact_shape_mismatch(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 5, SW_CARRIER_HOST);
  const int64_t z[3] = {0, 0, 0};
  sw_tile_set_t* s0 = tt_set(z, 1, 3);
  SW_OK_(sw_tiled_promote(f.te, s0));
  sw_tile_set_release(s0);
  const tt_snap_t snap = tt_snapshot(&f);
  const int64_t pick[3] = {0, 2, 4};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 3);
  double cv[36];
  /* Fewer experts, more experts, a transposed tile and a flat vector. */
  sw_tensor_t* two = compact_experts(rt, 2, 0, cv);
  sw_tensor_t* four = compact_experts(rt, 4, 0, cv);
  const int64_t tshape[3] = {3, 2, 3}, flat[1] = {18};
  sw_tensor_t* transposed = tt_dense(rt, tshape, 3, cv);
  sw_tensor_t* vec = tt_dense(rt, flat, 1, cv);
  sw_tensor_t* bad[4] = {two, four, transposed, vec};
  for (int i = 0; i < 4; ++i) {
    sw_carrier_t* c = tt_carrier_of(bad[i]);
    const uint64_t v = tt_version(c);
    scatter_fails(&f, &snap, bad[i], f.full, sel, SW_SCATTER_REPLACE, SW_ERROR_VALUE, "shape");
    scatter_fails(&f, &snap, bad[i], f.full, sel, SW_SCATTER_ADD, SW_ERROR_VALUE, "shape");
    assert_int_equal(tt_version(c), v);
    assert_false(tt_owned(c));
    sw_carrier_release(c);
  }
  /* Nothing is pending: the carrier can be released at once. */
  SW_OK_(sw_carrier_dispose(f.te));
  for (int i = 0; i < 4; ++i) sw_tensor_release(bad[i]);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void differentiate_replace_scatter(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 5, SW_CARRIER_ZSTD);
  SW_OK_(sw_tensor_set_requires_grad(f.full, true));
  const int64_t pick[3] = {4, 1, 3};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 3);
  double cv[18];
  sw_tensor_t* compact = compact_experts(rt, 3, 10, cv);
  SW_OK_(sw_tensor_set_requires_grad(compact, true));
  sw_tensor_t* r = tt_scatter(&f, compact, f.full, sel, SW_SCATTER_REPLACE);
  bool leaf = true;
  SW_OK_(sw_tensor_is_leaf(r, &leaf));
  assert_false(leaf);
  tt_fix_t rf = result_view(&f, r);
  /* A loss over tiles 3 and 4 of the result (written by compact). */
  const int64_t sub[2] = {3, 4};
  sw_tile_selection_t* s2 = tt_sel_experts(&f, sub, 2);
  sw_tensor_t* p = tt_project(&rf, r, s2, NULL);
  const int64_t pshape[3] = {2, 3, 2};
  double wv[12];
  for (int i = 0; i < 12; ++i) wv[i] = i - 5;
  sw_tensor_t* w = tt_dense(rt, pshape, 3, wv);
  sw_tensor_t *y = NULL, *loss = NULL;
  SW_OK_(sw_elementwise_mul(p, w, &y));
  SW_OK_(sw_reduce_sum(y, NULL, 0, false, &loss));
  SW_OK_(sw_backward(loss, NULL, false));
  /* compact.grad is the full cotangent projected at the saved selection:
   * w at tiles 3 and 4, zero at tile 1. */
  sw_tensor_t* g = NULL;
  SW_OK_(sw_tensor_grad(compact, &g));
  assert_non_null(g);
  double zeros[30] = {0};
  double* cot = tt_scatter_expect(&f, zeros, s2, wv, false);
  int64_t n = 0;
  double* want = tt_compact_expect(&f, cot, sel, &n);
  tt_expect_values(g, want, n);
  sw_carrier_t* gc = tt_carrier_of(g);
  assert_int_equal(tt_kind(gc), TT_PRIMARY);
  sw_carrier_release(gc);
  /* Replace propagates nothing to the overwritten template. */
  sw_tensor_t* gt = NULL;
  SW_OK_(sw_tensor_grad(f.full, &gt));
  assert_null(gt);
  free(want);
  free(cot);
  sw_tensor_release(g);
  sw_tensor_release(loss);
  sw_tensor_release(y);
  sw_tensor_release(w);
  sw_tensor_release(p);
  sw_tile_selection_release(s2);
  sw_carrier_release(rf.te);
  sw_tensor_release(r);
  sw_tensor_release(compact);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void add_scatter_combines_and_differentiates_both_inputs(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 4, SW_CARRIER_FILE);
  SW_OK_(sw_tensor_set_requires_grad(f.full, true));
  double* canon = tt_canon_seed(&f, 0);
  const int64_t pick[2] = {2, 0};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 2);
  double cv[12];
  sw_tensor_t* compact = compact_experts(rt, 2, 0.5, cv);
  SW_OK_(sw_tensor_set_requires_grad(compact, true));
  sw_tensor_t* r = tt_scatter(&f, compact, f.full, sel, SW_SCATTER_ADD);
  tt_fix_t rf = result_view(&f, r);
  for (int64_t k = 0; k < 4; ++k) {
    const bool selected = k == 2 || k == 0;
    tt_expect_tile(&rf, k, selected ? SW_TILE_PRIMARY : SW_TILE_INVALID, selected);
  }
  assert_int_equal(tt_version(rf.te), 1);
  /* Selected tiles hold template + compact. */
  double* sum = tt_scatter_expect(&f, canon, sel, cv, true);
  sw_tensor_t* back = tt_project(&rf, r, sel, NULL);
  int64_t n = 0;
  double* want = tt_compact_expect(&f, sum, sel, &n);
  tt_expect_values(back, want, n);
  free(want);
  /* Backward: both inputs receive the selected cotangent. */
  double wv[12];
  for (int i = 0; i < 12; ++i) wv[i] = 2 * i + 1;
  const int64_t cshape[3] = {2, 3, 2};
  sw_tensor_t* w = tt_dense(rt, cshape, 3, wv);
  sw_tensor_t *y = NULL, *loss = NULL;
  SW_OK_(sw_elementwise_mul(back, w, &y));
  SW_OK_(sw_reduce_sum(y, NULL, 0, false, &loss));
  SW_OK_(sw_backward(loss, NULL, false));
  sw_tensor_t *gc = NULL, *gt = NULL;
  SW_OK_(sw_tensor_grad(compact, &gc));
  SW_OK_(sw_tensor_grad(f.full, &gt));
  assert_non_null(gc);
  assert_non_null(gt);
  tt_expect_values(gc, wv, 12);
  double zeros[24] = {0};
  double* gte = tt_scatter_expect(&f, zeros, sel, wv, false);
  tt_expect_values(gt, gte, f.n);
  sw_carrier_t* gtc = tt_carrier_of(gt);
  assert_int_equal(tt_kind(gtc), SW_CARRIER_TILED);
  tt_fix_t gf = f;
  gf.te = gtc;
  tt_expect_tile(&gf, 1, SW_TILE_IMPLICIT, false);
  tt_expect_tile(&gf, 3, SW_TILE_IMPLICIT, false);
  sw_carrier_release(gtc);
  free(gte);
  sw_tensor_release(gc);
  sw_tensor_release(gt);
  sw_tensor_release(loss);
  sw_tensor_release(y);
  sw_tensor_release(w);
  sw_tensor_release(back);
  free(sum);
  free(canon);
  sw_carrier_release(rf.te);
  sw_tensor_release(r);
  sw_tensor_release(compact);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

/* Later writes to compact cannot reach a pending scatter; a strided compact
 * is read through its layout. */
static void scatter_is_isolated_from_later_input_writes(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  const int64_t grid[2] = {3, 2}, tile[2] = {2, 2};
  tt_make(&f, rt, SW_DTYPE_F32, 2, grid, tile, false, SW_CARRIER_FILE, true, NULL);
  const int64_t a0[2] = {2, 0}, a1[1] = {1};
  sw_tile_selection_t* sel = tt_sel2(a0, 2, a1, 1); /* compact (4, 2) */
  /* compact is the transpose of a dense (2, 4) tensor. */
  const int64_t tshape[2] = {2, 4};
  double tv[8];
  for (int i = 0; i < 8; ++i) tv[i] = 7 * i + 1;
  sw_tensor_t* base = tt_dense(rt, tshape, 2, tv);
  sw_tensor_t* compact = NULL;
  SW_OK_(sw_tensor_transpose(base, 0, 1, &compact));
  double cv[8];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j) cv[i + 4 * j] = tv[j + 2 * i];
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_scatter(f.te, compact, f.full, sel, SW_SCATTER_ADD, &a));
  const int64_t at[2] = {0, 0};
  SW_OK_(sw_tensor_set(base, at, 2, -999.0));
  sw_tensor_t* r = tt_wait_result(a);
  sw_await_release(a);
  tt_fix_t rf = result_view(&f, r);
  sw_tensor_t* back = tt_project(&rf, r, sel, NULL);
  double* canon = tt_canon_seed(&f, 0);
  double* sum = tt_scatter_expect(&f, canon, sel, cv, true);
  int64_t n = 0;
  double* want = tt_compact_expect(&f, sum, sel, &n);
  tt_expect_values(back, want, n);
  free(want);
  free(sum);
  free(canon);
  sw_tensor_release(back);
  sw_carrier_release(rf.te);
  sw_tensor_release(r);
  sw_tensor_release(compact);
  sw_tensor_release(base);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void scatter_failure_after_submission_publishes_nothing(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 4, SW_CARRIER_FILE);
  const tt_snap_t snap = tt_snapshot(&f);
  const int64_t pick[3] = {1, 3, 2};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 3);
  double cv[18];
  sw_tensor_t* compact = compact_experts(rt, 3, 0, cv);
  SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_READ, 2));
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_scatter(f.te, compact, f.full, sel, SW_SCATTER_ADD, &a));
  sw_error_t* e = sw_await_wait(a, -1);
  assert_non_null(e);
  assert_int_equal(sw_error_code(e), SW_ERROR_IO);
  sw_error_free(e);
  sw_tensor_t* r = NULL;
  SW_FAILS(sw_await_result(a, &r), SW_ERROR_IO, NULL);
  assert_null(r);
  sw_await_release(a);
  tt_expect_snapshot(&f, &snap);
  tt_expect_values(compact, cv, 18);
  /* Both inputs are usable again. */
  r = tt_scatter(&f, compact, f.full, sel, SW_SCATTER_ADD);
  sw_tensor_release(r);
  SW_OK_(sw_carrier_dispose(f.te));
  sw_tensor_release(compact);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

/* ---- error rules ---------------------------------------------------------- */

static void scatter_rejects_non_tensors_and_wrong_carriers(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f, g;
  make_experts(&f, rt, 3, SW_CARRIER_HOST);
  make_experts(&g, rt, 3, SW_CARRIER_HOST);
  const int64_t z[3] = {0, 0, 0};
  sw_tile_set_t* s0 = tt_set(z, 1, 3);
  SW_OK_(sw_tiled_promote(f.te, s0));
  sw_tile_set_release(s0);
  const tt_snap_t snap = tt_snapshot(&f);
  const int64_t pick[1] = {1};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 1);
  double cv[6];
  sw_tensor_t* compact = compact_experts(rt, 1, 0, cv);
  /* Non-tensor compact or template. */
  scatter_fails(&f, &snap, (sw_tensor_t*)(void*)sel, f.full, sel, SW_SCATTER_REPLACE, SW_ERROR_TYPE, "tensor");
  scatter_fails(&f, &snap, NULL, f.full, sel, SW_SCATTER_REPLACE, SW_ERROR_TYPE, "tensor");
  scatter_fails(&f, &snap, compact, (sw_tensor_t*)(void*)f.te, sel, SW_SCATTER_REPLACE, SW_ERROR_TYPE, "tensor");
  scatter_fails(&f, &snap, compact, NULL, sel, SW_SCATTER_REPLACE, SW_ERROR_TYPE, "tensor");
  /* compact backed by a dependent carrier (a TiledEvictable) or by a storage
   * carrier. */
  sw_tensor_t* tiny = NULL;
  {
    const int64_t tg[3] = {1, 1, 1}, tt[3] = {1, 3, 2};
    tt_fix_t h;
    tt_make(&h, rt, SW_DTYPE_F32, 3, tg, tt, false, SW_CARRIER_HOST, true, NULL);
    tiny = h.full;
    sw_tensor_retain(tiny);
    tt_free(&h);
  }
  scatter_fails(&f, &snap, tiny, f.full, sel, SW_SCATTER_REPLACE, SW_ERROR_TYPE, "compact");
  sw_carrier_t* host = tt_carrier(rt, SW_CARRIER_HOST, SW_DTYPE_F32, 6);
  sw_tensor_t* on_host = tt_tensor_over(host, 0, "(1,3,2):(6,1,3)");
  scatter_fails(&f, &snap, on_host, f.full, sel, SW_SCATTER_REPLACE, SW_ERROR_TYPE, "compact");
  /* Template backed by another carrier. */
  double zeros[18] = {0};
  sw_tensor_t* dense = tt_dense(rt, f.logical, 3, zeros);
  scatter_fails(&f, &snap, compact, dense, sel, SW_SCATTER_REPLACE, SW_ERROR_TYPE, "not by this TiledEvictable");
  scatter_fails(&f, &snap, compact, g.full, sel, SW_SCATTER_ADD, SW_ERROR_TYPE, "not by this TiledEvictable");
  /* Non-TileSelection. */
  const int64_t c1[3] = {1, 0, 0};
  sw_tile_set_t* set = tt_set(c1, 1, 3);
  scatter_fails(&f, &snap, compact, f.full, (const sw_tile_selection_t*)(const void*)set, SW_SCATTER_REPLACE,
                SW_ERROR_TYPE, "TileSelection");
  scatter_fails(&f, &snap, compact, f.full, NULL, SW_SCATTER_REPLACE, SW_ERROR_TYPE, "TileSelection");
  /* The carrier argument must be a TiledEvictable. */
  sw_await_t* a = NULL;
  SW_FAILS(sw_tiled_scatter(host, compact, f.full, sel, SW_SCATTER_REPLACE, &a), SW_ERROR_TYPE, "TiledEvictable");
  assert_null(a);
  tt_expect_snapshot(&f, &snap);
  sw_tile_set_release(set);
  sw_tensor_release(dense);
  sw_tensor_release(on_host);
  sw_carrier_release(host);
  sw_tensor_release(tiny);
  sw_tensor_release(compact);
  sw_tile_selection_release(sel);
  tt_free(&g);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void scatter_rejects_released_inputs_or_carrier(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 3, SW_CARRIER_HOST);
  const tt_snap_t snap = tt_snapshot(&f);
  const int64_t pick[1] = {2};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 1);
  double cv[6];
  sw_tensor_t* compact = compact_experts(rt, 1, 0, cv);
  sw_carrier_t* cc = tt_carrier_of(compact);
  SW_OK_(sw_carrier_dispose(cc));
  scatter_fails(&f, &snap, compact, f.full, sel, SW_SCATTER_REPLACE, SW_ERROR_STATE, "released");
  scatter_fails(&f, &snap, compact, f.full, sel, SW_SCATTER_ADD, SW_ERROR_STATE, "released");
  /* A released carrier (and so a released template). */
  sw_tensor_t* live = compact_experts(rt, 1, 0, cv);
  SW_OK_(sw_carrier_dispose(f.te));
  sw_await_t* a = NULL;
  SW_FAILS(sw_tiled_scatter(f.te, live, f.full, sel, SW_SCATTER_REPLACE, &a), SW_ERROR_STATE, "released");
  SW_FAILS(sw_tiled_scatter(f.te, live, f.full, sel, SW_SCATTER_ADD, &a), SW_ERROR_STATE, "released");
  assert_null(a);
  tt_expect_values(live, cv, 6);
  sw_tensor_release(live);
  sw_carrier_release(cc);
  sw_tensor_release(compact);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void scatter_rejects_compact_dtype(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 3, SW_CARRIER_HOST);
  const tt_snap_t snap = tt_snapshot(&f);
  const int64_t pick[1] = {2};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 1);
  const int64_t cshape[3] = {1, 3, 2};
  double cv[6] = {1, 2, 3, 4, 5, 6};
  sw_tensor_t* c64 = tt_tensor(rt, SW_DTYPE_F64, cshape, 3, cv);
  scatter_fails(&f, &snap, c64, f.full, sel, SW_SCATTER_REPLACE, SW_ERROR_TYPE, "dtype");
  scatter_fails(&f, &snap, c64, f.full, sel, SW_SCATTER_ADD, SW_ERROR_TYPE, "dtype");
  const int32_t iv[6] = {1, 2, 3, 4, 5, 6};
  sw_tensor_t* ci = tt_tensor_from_data(rt, SW_DTYPE_I32, cshape, 3, iv);
  scatter_fails(&f, &snap, ci, f.full, sel, SW_SCATTER_REPLACE, SW_ERROR_TYPE, "dtype");
  sw_tensor_release(ci);
  sw_tensor_release(c64);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void scatter_rejects_selection_rank_range_or_geometry(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 3, SW_CARRIER_HOST);
  const tt_snap_t snap = tt_snapshot(&f);
  double cv[6];
  sw_tensor_t* compact = compact_experts(rt, 1, 0, cv);
  /* Rank. */
  const int64_t e[1] = {1}, z[1] = {0};
  sw_tile_selection_t* r2 = tt_sel2(e, 1, z, 1);
  scatter_fails(&f, &snap, compact, f.full, r2, SW_SCATTER_REPLACE, SW_ERROR_VALUE, "rank");
  /* Range. */
  const int64_t far[1] = {3};
  sw_tile_selection_t* out = tt_sel_experts(&f, far, 1);
  scatter_fails(&f, &snap, compact, f.full, out, SW_SCATTER_ADD, SW_ERROR_VALUE, "outside the grid");
  /* Tile geometry: a template that is not footprint compatible. */
  const int64_t ok[1] = {1};
  sw_tile_selection_t* sel = tt_sel_experts(&f, ok, 1);
  sw_tensor_t* remapped = tt_tensor_over(f.te, 0, "(3,3,2):(6,1,3)"); /* dense */
  sw_tensor_t* swapped = tt_tensor_over(f.te, 0, "(3,3,2):(1,3,9)"); /* canonical */
  sw_tensor_t* bad = tt_tensor_over(f.te, 0, "(3,3,2):(2,6,1)");
  scatter_fails(&f, &snap, compact, bad, sel, SW_SCATTER_REPLACE, SW_ERROR_VALUE, "footprint");
  scatter_fails(&f, &snap, compact, remapped, sel, SW_SCATTER_REPLACE, SW_ERROR_VALUE, "footprint");
  /* The canonical layout is accepted. */
  sw_tensor_t* r = tt_scatter(&f, compact, swapped, sel, SW_SCATTER_REPLACE);
  sw_tensor_release(r);
  sw_tensor_release(bad);
  sw_tensor_release(swapped);
  sw_tensor_release(remapped);
  sw_tile_selection_release(sel);
  sw_tile_selection_release(out);
  sw_tile_selection_release(r2);
  sw_tensor_release(compact);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void scatter_rejects_unknown_reduction(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_experts(&f, rt, 3, SW_CARRIER_HOST);
  const tt_snap_t snap = tt_snapshot(&f);
  const int64_t pick[1] = {0};
  sw_tile_selection_t* sel = tt_sel_experts(&f, pick, 1);
  double cv[6];
  sw_tensor_t* compact = compact_experts(rt, 1, 0, cv);
  const int bad[4] = {0, 3, -1, 99};
  for (int i = 0; i < 4; ++i)
    scatter_fails(&f, &snap, compact, f.full, sel, (sw_scatter_reduction_t)bad[i], SW_ERROR_VALUE, "reduction");
  sw_tensor_release(compact);
  sw_tile_selection_release(sel);
  tt_free(&f);
  sw_runtime_release(rt);
}

/* A dense (n,) tensor of `dtype` over a new carrier of `kind` whose element
 * i holds values[i] (set one by one, converted to dtype). */
static sw_tensor_t* vector_of(sw_runtime_t* rt, sw_carrier_kind_t kind, sw_dtype_t dtype, int64_t n,
                              const double* values) {
  sw_carrier_t* c = tt_carrier(rt, kind, dtype, (size_t)n);
  sw_layout_t* l = NULL;
  SW_OK_(sw_layout_dense(&n, 1, &l));
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_create(c, 0, l, &t));
  for (int64_t i = 0; i < n; ++i) SW_OK_(sw_tensor_set(t, &i, 1, values[i]));
  sw_layout_release(l);
  sw_carrier_release(c);
  return t;
}

/* Elements [first, first + count) of a dense vector hold want[first...]. */
static void expect_range(const sw_tensor_t* t, int64_t first, int64_t count, const double* want) {
  for (int64_t i = first; i < first + count; ++i) {
    double v = -1;
    SW_OK_(sw_tensor_get(t, &i, 1, &v));
    if (v != want[i]) fail_msg("element %lld: got %.17g, expected %.17g", (long long)i, v, want[i]);
  }
}

/* Add reductions (scatter and in-place update) in every dtype a tile sum
 * takes: f32 on the primary's backend, f16 and bf16 widened to f32 and
 * rounded once, f64 and integers. Four tiles of 6 slots; tiles 2 and 0
 * receive 10, 20, ..., 120 (sums stay exact in every dtype). */
static void add_reductions_in_every_dtype(void** state) {
  (void)state;
  const sw_dtype_t dtypes[5] = {SW_DTYPE_F32, SW_DTYPE_F64, SW_DTYPE_F16, SW_DTYPE_BF16, SW_DTYPE_I32};
  const int64_t grid[1] = {4}, tile[1] = {6}, n = 24, pick[1][2] = {{2, 0}};
  double base[24], add[12], want[24];
  for (int64_t i = 0; i < n; ++i) base[i] = (double)(i + 1);
  for (int64_t j = 0; j < 12; ++j) add[j] = 10.0 * (double)(j + 1);
  for (int64_t i = 0; i < n; ++i) want[i] = base[i];
  for (int64_t j = 0; j < 6; ++j) {
    want[12 + j] += add[j];
    want[j] += add[6 + j];
  }
  for (size_t d = 0; d < 5; ++d) {
    sw_runtime_t* rt = sw_async_runtime();
    sw_tensor_t* seed = vector_of(rt, SW_CARRIER_HOST, dtypes[d], n, base);
    sw_carrier_t *sec = NULL, *te = NULL;
    SW_OK_(sw_tensor_carrier(seed, &sec));
    sw_carrier_t* prim = tt_carrier(rt, TT_PRIMARY, dtypes[d], 0);
    SW_OK_(sw_tiled_create(prim, sec, grid, tile, 1, NULL, &te));
    sw_tensor_t* full = NULL;
    SW_OK_(sw_tiled_full_tensor(te, &full));
    sw_tensor_t* compact = vector_of(rt, TT_PRIMARY, dtypes[d], 12, add);
    const int64_t* axes[1] = {pick[0]};
    const size_t counts[1] = {2};
    sw_tile_selection_t* sel = tt_sel(1, axes, counts);

    sw_await_t* a = NULL;
    SW_OK_(sw_tiled_scatter(te, compact, full, sel, SW_SCATTER_ADD, &a));
    sw_tensor_t* r = tt_wait_result(a);
    sw_await_release(a);
    /* The result holds the sums at the selected tiles (the others invalid). */
    expect_range(r, 0, 6, want);
    expect_range(r, 12, 6, want);
    SW_OK_(sw_tiled_update_async(te, full, compact, sel, SW_SCATTER_ADD, &a));
    SW_OK_(sw_await_wait(a, -1));
    sw_await_release(a);
    expect_range(full, 0, n, want);
    /* The sums survive eviction to the secondary tier. */
    sw_tile_set_t* all = NULL;
    SW_OK_(sw_tiled_tiles(te, SW_TILES_PRIMARY, &all));
    SW_OK_(sw_tiled_evict(te, all));
    expect_range(seed, 0, n, want);

    sw_tile_set_release(all);
    sw_tensor_release(r);
    sw_tile_selection_release(sel);
    sw_tensor_release(compact);
    sw_tensor_release(full);
    SW_OK_(sw_carrier_dispose(te));
    sw_carrier_release(te);
    sw_carrier_release(prim);
    sw_carrier_release(sec);
    sw_tensor_release(seed);
    sw_runtime_release(rt);
  }
}

int main(void) {
  if (!tt_primary_available()) return 77;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(scatter_compact_result),
      cmocka_unit_test(project_after_replace_scatter),
      cmocka_unit_test(reject_compact_shape_mismatch),
      cmocka_unit_test(differentiate_replace_scatter),
      cmocka_unit_test(add_scatter_combines_and_differentiates_both_inputs),
      cmocka_unit_test(scatter_is_isolated_from_later_input_writes),
      cmocka_unit_test(scatter_failure_after_submission_publishes_nothing),
      cmocka_unit_test(scatter_rejects_non_tensors_and_wrong_carriers),
      cmocka_unit_test(scatter_rejects_released_inputs_or_carrier),
      cmocka_unit_test(scatter_rejects_compact_dtype),
      cmocka_unit_test(scatter_rejects_selection_rank_range_or_geometry),
      cmocka_unit_test(scatter_rejects_unknown_reduction),
      cmocka_unit_test(add_reductions_in_every_dtype),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
