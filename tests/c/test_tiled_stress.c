/* A bounded multi-thread mix against one TiledEvictable under the built-in
 * LRU policy: projections, promotions, evictions, updates (replace and add),
 * scatters and unpinned full reads, with the values checked as they go.
 *
 * Tile k only ever holds a uniform value k * 100000 + s, where s counts the
 * updates committed to it; each tile has one thread that updates it, so its
 * committed sequence is known exactly. Every read of tile k must be
 * uniform (never torn) and hold a sequence at least the one committed
 * before the read began, and at most the last one issued. At the end every
 * tile, evicted and reloaded, holds exactly its last committed value.
 * Refusals the contract allows (STATE: a conflicting request, a tile in use)
 * are counted, not treated as failures. */
#include "sw_tiled_test.h"

#define GRID 12
#define TILE 2048
#define BUDGET 4
#define SEQ_SCALE 100000.0

typedef struct shared_t {
  tt_fix_t f;
  int threads;
  int ops;
  int64_t committed[GRID]; /* atomic: last sequence whose update completed */
  int64_t issued[GRID];    /* atomic: last sequence submitted */
  int64_t refusals;        /* atomic */
  int64_t checks;          /* atomic: tile values checked */
  int64_t updates;         /* atomic: updates committed */
  char failure[512];       /* first failure, set once */
  int failed;              /* atomic */
} shared_t;

typedef struct worker_t {
  shared_t* sh;
  int index;
  uint64_t rng;
} worker_t;

static int64_t load(const int64_t* p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
static void store(int64_t* p, int64_t v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }
static void bump(int64_t* p) { __atomic_add_fetch(p, 1, __ATOMIC_SEQ_CST); }

static void record_failure(shared_t* sh, const char* fmt, ...) {
  if (__atomic_exchange_n(&sh->failed, 1, __ATOMIC_SEQ_CST)) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(sh->failure, sizeof sh->failure, fmt, ap);
  va_end(ap);
}

static double value_of(int64_t k, int64_t s) { return (double)k * SEQ_SCALE + (double)s; }

/* Checks that `vals` (TILE floats) hold tile k uniformly at a sequence in
 * [lo, issued[k]]. */
static void check_tile(shared_t* sh, int64_t k, const float* vals, int64_t lo, const char* what) {
  for (int i = 1; i < TILE; ++i)
    if (vals[i] != vals[0]) {
      record_failure(sh, "%s: tile %lld is torn: element 0 is %.1f, element %d is %.1f", what, (long long)k,
                     (double)vals[0], i, (double)vals[i]);
      return;
    }
  const double s = (double)vals[0] - (double)k * SEQ_SCALE;
  const int64_t hi = load(&sh->issued[k]);
  if (s != (double)(int64_t)s || s < (double)lo || s > (double)hi)
    record_failure(sh, "%s: tile %lld holds %.1f (sequence %.1f), expected a sequence in [%lld, %lld]", what,
                   (long long)k, (double)vals[0], s, (long long)lo, (long long)hi);
  bump(&sh->checks);
}

/* Treats STATE as an allowed refusal; anything else fails the run. */
static bool accepted(shared_t* sh, sw_error_t* e, const char* what) {
  if (!e) return true;
  if (sw_error_code(e) == SW_ERROR_STATE) {
    bump(&sh->refusals);
  } else {
    record_failure(sh, "%s failed: %s: %s", what, sw_error_code_name(sw_error_code(e)), sw_error_message(e));
  }
  sw_error_free(e);
  return false;
}

static sw_tensor_t* uniform_tile(sw_runtime_t* rt, double v) {
  float* x = (float*)malloc(sizeof(float) * TILE);
  for (int i = 0; i < TILE; ++i) x[i] = (float)v;
  const int64_t extent = TILE;
  sw_tensor_t* t = tt_tensor_from_data(rt, SW_DTYPE_F32, &extent, 1, x);
  free(x);
  return t;
}

static void do_update(worker_t* w) {
  shared_t* sh = w->sh;
  /* One of this worker's own tiles. */
  const int64_t mine = (GRID + sh->threads - 1 - w->index) / sh->threads;
  if (mine == 0) return;
  const int64_t k = w->index + sh->threads * (int64_t)(sw_test_random(&w->rng) % (uint64_t)mine);
  const int64_t s = load(&sh->committed[k]) + 1;
  const bool add = sw_test_random(&w->rng) % 2;
  sw_tensor_t* c = uniform_tile(sh->f.rt, add ? 1.0 : value_of(k, s));
  sw_tile_selection_t* sel = tt_sel1(&k, 1);
  sw_await_t* a = NULL;
  store(&sh->issued[k], s);
  if (accepted(sh, sw_tiled_update_async(sh->f.te, sh->f.full, c, sel, add ? SW_SCATTER_ADD : SW_SCATTER_REPLACE, &a),
               "update")) {
    sw_error_t* e = sw_await_wait(a, -1);
    if (e) {
      record_failure(sh, "update of tile %lld failed: %s", (long long)k, sw_error_message(e));
      sw_error_free(e);
    } else {
      store(&sh->committed[k], s);
      bump(&sh->updates);
    }
    sw_await_release(a);
  } else {
    store(&sh->issued[k], s - 1);
  }
  sw_tile_selection_release(sel);
  sw_tensor_release(c);
}

/* 1 to 3 distinct tiles in random order. */
static size_t random_tiles(worker_t* w, int64_t* ks) {
  const size_t n = 1 + sw_test_random(&w->rng) % 3;
  size_t got = 0;
  while (got < n) {
    const int64_t k = (int64_t)(sw_test_random(&w->rng) % GRID);
    bool seen = false;
    for (size_t j = 0; j < got; ++j) seen = seen || ks[j] == k;
    if (!seen) ks[got++] = k;
  }
  return n;
}

static void check_compact(shared_t* sh, sw_tensor_t* r, const int64_t* ks, size_t n, const int64_t* lo,
                          const char* what) {
  float* vals = (float*)malloc(sizeof(float) * TILE * n);
  sw_error_t* e = sw_tensor_read(r, vals, sizeof(float) * TILE * n);
  if (e) {
    record_failure(sh, "%s: reading the result failed: %s", what, sw_error_message(e));
    sw_error_free(e);
  } else {
    for (size_t j = 0; j < n; ++j) check_tile(sh, ks[j], vals + j * TILE, lo[j], what);
  }
  free(vals);
}

static void do_project(worker_t* w) {
  shared_t* sh = w->sh;
  int64_t ks[3], lo[3];
  const size_t n = random_tiles(w, ks);
  for (size_t j = 0; j < n; ++j) lo[j] = load(&sh->committed[ks[j]]);
  sw_tile_selection_t* sel = tt_sel1(ks, n);
  sw_await_t* a = NULL;
  if (accepted(sh, sw_tiled_project(sh->f.te, sh->f.full, sel, NULL, &a), "project")) {
    sw_error_t* e = sw_await_wait(a, -1);
    if (e) {
      record_failure(sh, "project failed: %s", sw_error_message(e));
      sw_error_free(e);
    } else {
      sw_tensor_t* r = NULL;
      SW_OK_(sw_await_result(a, &r));
      check_compact(sh, r, ks, n, lo, "project");
      sw_tensor_release(r);
    }
    sw_await_release(a);
  }
  sw_tile_selection_release(sel);
}

static void do_scatter(worker_t* w) {
  shared_t* sh = w->sh;
  int64_t ks[3], lo[3];
  const size_t n = random_tiles(w, ks);
  for (size_t j = 0; j < n; ++j) lo[j] = load(&sh->committed[ks[j]]);
  sw_tile_selection_t* sel = tt_sel1(ks, n);
  /* Adding zeros: the result's selected tiles are the template's values. */
  const int64_t extent = (int64_t)n * TILE;
  sw_carrier_t* zc = tt_carrier(sh->f.rt, TT_PRIMARY, SW_DTYPE_F32, (size_t)extent);
  sw_layout_t* l = NULL;
  SW_OK_(sw_layout_dense(&extent, 1, &l));
  sw_tensor_t* zeros = NULL;
  SW_OK_(sw_tensor_create(zc, 0, l, &zeros));
  sw_await_t* a = NULL;
  if (accepted(sh, sw_tiled_scatter(sh->f.te, zeros, sh->f.full, sel, SW_SCATTER_ADD, &a), "scatter")) {
    sw_error_t* e = sw_await_wait(a, -1);
    if (e) {
      record_failure(sh, "scatter failed: %s", sw_error_message(e));
      sw_error_free(e);
    } else {
      sw_tensor_t* full = NULL;
      SW_OK_(sw_await_result(a, &full));
      sw_carrier_t* rte = tt_carrier_of(full);
      sw_await_t* p = NULL;
      SW_OK_(sw_tiled_project(rte, full, sel, NULL, &p));
      sw_tensor_t* r = tt_wait_result(p);
      check_compact(sh, r, ks, n, lo, "scatter");
      sw_tensor_release(r);
      sw_await_release(p);
      sw_carrier_release(rte);
      sw_tensor_release(full);
    }
    sw_await_release(a);
  }
  sw_tensor_release(zeros);
  sw_layout_release(l);
  sw_carrier_release(zc);
  sw_tile_selection_release(sel);
}

static void do_residency(worker_t* w, bool promote) {
  shared_t* sh = w->sh;
  int64_t ks[3];
  const size_t n = random_tiles(w, ks);
  sw_tile_set_t* set = tt_set_ordinals(&sh->f, ks, n);
  sw_await_t* a = NULL;
  sw_error_t* e = promote ? sw_tiled_promote_async(sh->f.te, set, &a) : sw_tiled_evict_async(sh->f.te, set, &a);
  if (accepted(sh, e, promote ? "promote" : "evict")) {
    sw_error_t* we = sw_await_wait(a, -1);
    if (we) {
      record_failure(sh, "%s failed: %s", promote ? "promote" : "evict", sw_error_message(we));
      sw_error_free(we);
    }
    sw_await_release(a);
  }
  sw_tile_set_release(set);
}

/* An unpinned read of the whole tensor: consistent tile by tile. */
static void do_read(worker_t* w) {
  shared_t* sh = w->sh;
  int64_t lo[GRID];
  for (int64_t k = 0; k < GRID; ++k) lo[k] = load(&sh->committed[k]);
  float* vals = (float*)malloc(sizeof(float) * GRID * TILE);
  sw_error_t* e = sw_tensor_read(sh->f.full, vals, sizeof(float) * GRID * TILE);
  if (accepted(sh, e, "read"))
    for (int64_t k = 0; k < GRID; ++k) check_tile(sh, k, vals + k * TILE, lo[k], "read");
  free(vals);
}

static void* worker_main(void* arg) {
  worker_t* w = (worker_t*)arg;
  for (int i = 0; i < w->sh->ops && !__atomic_load_n(&w->sh->failed, __ATOMIC_SEQ_CST); ++i) {
    switch (sw_test_random(&w->rng) % 8) {
      case 0:
      case 1: do_update(w); break;
      case 2:
      case 3: do_project(w); break;
      case 4: do_residency(w, true); break;
      case 5: do_residency(w, false); break;
      case 6: do_scatter(w); break;
      default: do_read(w); break;
    }
  }
  return NULL;
}

static void run_mix(sw_carrier_kind_t secondary, int threads, int ops) {
  sw_runtime_t* rt = sw_async_runtime();
  sw_lru_policy_t* lru = NULL;
  SW_OK_(sw_lru_policy_create(BUDGET, &lru));
  sw_residency_policy_t vt;
  SW_OK_(sw_lru_policy_as_residency_policy(lru, &vt));
  shared_t* sh = (shared_t*)calloc(1, sizeof *sh);
  sh->threads = threads;
  sh->ops = ops;
  const int64_t grid[1] = {GRID}, tile[1] = {TILE};
  /* Seed every tile with sequence 0 on the secondary tier. */
  tt_geometry(&sh->f, 1, grid, tile);
  sh->f.rt = rt;
  sh->f.dtype = SW_DTYPE_F32;
  sw_carrier_t* p = tt_carrier(rt, TT_PRIMARY, SW_DTYPE_F32, 0);
  sw_carrier_t* s = tt_carrier(rt, secondary, SW_DTYPE_F32, GRID * TILE);
  float* seed = (float*)malloc(sizeof(float) * GRID * TILE);
  for (int64_t k = 0; k < GRID; ++k)
    for (int i = 0; i < TILE; ++i) seed[k * TILE + i] = (float)value_of(k, 0);
  SW_OK_(sw_carrier_write(s, 0, GRID * TILE, seed));
  free(seed);
  SW_OK_(sw_tiled_create(p, s, grid, tile, 1, &vt, &sh->f.te));
  SW_OK_(sw_tiled_full_tensor(sh->f.te, &sh->f.full));
  sw_carrier_release(p);
  sw_carrier_release(s);

  pthread_t* ts = (pthread_t*)malloc(sizeof(pthread_t) * (size_t)threads);
  worker_t* ws = (worker_t*)malloc(sizeof(worker_t) * (size_t)threads);
  const int64_t t0 = sw_async_now_ns();
  for (int i = 0; i < threads; ++i) {
    ws[i].sh = sh;
    ws[i].index = i;
    ws[i].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
    assert_int_equal(pthread_create(&ts[i], NULL, worker_main, &ws[i]), 0);
  }
  for (int i = 0; i < threads; ++i) pthread_join(ts[i], NULL);
  const double seconds = (double)(sw_async_now_ns() - t0) * 1e-9;
  if (sh->failed) fail_msg("%s", sh->failure);

  /* Every tile holds its last committed value, on the secondary tier and
   * back on the primary. */
  int64_t all[GRID];
  for (int64_t k = 0; k < GRID; ++k) all[k] = k;
  sw_tile_set_t* every = tt_set_ordinals(&sh->f, all, GRID);
  SW_OK_(sw_tiled_evict(sh->f.te, every));
  float* vals = (float*)malloc(sizeof(float) * GRID * TILE);
  SW_OK_(sw_tensor_read(sh->f.full, vals, sizeof(float) * GRID * TILE));
  for (int64_t k = 0; k < GRID; ++k) {
    tt_expect_tile(&sh->f, k, SW_TILE_SECONDARY, false);
    for (int i = 0; i < TILE; ++i)
      if (vals[k * TILE + i] != (float)value_of(k, sh->committed[k]))
        fail_msg("after eviction tile %lld element %d is %.1f, expected %.1f (sequence %lld)", (long long)k, i,
                 (double)vals[k * TILE + i], value_of(k, sh->committed[k]), (long long)sh->committed[k]);
  }
  /* Back on the primary, a budget's worth at a time (the LRU refuses a
   * promotion larger than its budget). */
  for (int64_t first = 0; first < GRID; first += BUDGET) {
    const int64_t n = first + BUDGET <= GRID ? BUDGET : GRID - first;
    sw_tile_set_t* some = tt_set_ordinals(&sh->f, all + first, (size_t)n);
    SW_OK_(sw_tiled_promote(sh->f.te, some));
    sw_tile_set_release(some);
    for (int64_t k = first; k < first + n; ++k) tt_expect_tile(&sh->f, k, SW_TILE_PRIMARY, false);
    SW_OK_(sw_tensor_read(sh->f.full, vals, sizeof(float) * GRID * TILE));
    for (int64_t k = first; k < first + n; ++k)
      if (vals[k * TILE] != (float)value_of(k, sh->committed[k]))
        fail_msg("after reloading tile %lld is %.1f, expected %.1f", (long long)k, (double)vals[k * TILE],
                 value_of(k, sh->committed[k]));
  }
  print_message("%d threads, %d ops each: %lld updates committed, %lld tile values checked, %lld refusals, %.2f s\n",
                threads, ops, (long long)sh->updates, (long long)sh->checks, (long long)sh->refusals, seconds);
  assert_true(sh->updates > 0);
  assert_true(sh->checks > 0);
  free(vals);
  sw_tile_set_release(every);
  free(ts);
  free(ws);
  tt_free(&sh->f);
  free(sh);
  sw_lru_policy_release(lru);
  sw_runtime_release(rt);
}

static void mix_4_threads_file(void** state) {
  (void)state;
  run_mix(SW_CARRIER_FILE, 4, 1500);
}

static void mix_16_threads_file(void** state) {
  (void)state;
  run_mix(SW_CARRIER_FILE, 16, 400);
}

static void mix_4_threads_zstd(void** state) {
  (void)state;
  run_mix(SW_CARRIER_ZSTD, 4, 1500);
}

static void mix_8_threads_host(void** state) {
  (void)state;
  run_mix(SW_CARRIER_HOST, 8, 800);
}

int main(void) {
  if (!tt_primary_available()) return 77;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(mix_4_threads_file),
      cmocka_unit_test(mix_16_threads_file),
      cmocka_unit_test(mix_4_threads_zstd),
      cmocka_unit_test(mix_8_threads_host),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
