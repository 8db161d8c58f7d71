/* The built-in LRU policy's budget holds for every request: projections and
 * direct ops larger than it stream through it (tiles beyond it are read for
 * the request only), explicit promotions make room or are refused VALUE,
 * updates make room, public writes go through to the secondary tier, and a
 * byte budget becomes whole tiles when a TiledEvictable attaches. */
#include "sw_async_test.h"
#include "sw_tiled_test.h"

#define GRID 10
#define BUDGET 3

static void make_fix(tt_fix_t* f, sw_runtime_t* rt, sw_lru_policy_t* lru, sw_carrier_kind_t kind) {
  sw_residency_policy_t vt;
  SW_OK_(sw_lru_policy_as_residency_policy(lru, &vt));
  const int64_t grid[3] = {GRID, 1, 1}, tile[3] = {1, 3, 2};
  tt_make(f, rt, SW_DTYPE_F32, 3, grid, tile, false, kind, true, &vt);
}

static size_t primary_count(const tt_fix_t* f) {
  sw_tile_set_t* prim = NULL;
  SW_OK_(sw_tiled_tiles(f->te, SW_TILES_PRIMARY, &prim));
  size_t n = 0;
  SW_OK_(sw_tile_set_count(prim, &n));
  sw_tile_set_release(prim);
  return n;
}

/* Promotes the tiles of these ordinals by hand; fails the test unless it succeeds. */
static void promote_tiles(const tt_fix_t* f, const int64_t* ks, size_t count) {
  sw_tile_set_t* set = tt_set_ordinals(f, ks, count);
  SW_OK_(sw_tiled_promote(f->te, set));
  sw_tile_set_release(set);
}

static sw_lru_stats_t stats_of(const sw_lru_policy_t* lru) {
  sw_lru_stats_t st;
  sw_lru_stats_init(&st);
  SW_OK_(sw_lru_policy_stats(lru, &st));
  return st;
}

/* `count` distinct tile ordinals drawn from [0, GRID). */
static void draw_tiles(uint64_t* rng, int64_t* out, int count) {
  bool used[GRID] = {false};
  for (int i = 0; i < count; ++i) {
    int64_t k = (int64_t)(sw_test_random(rng) % GRID);
    while (used[k]) k = (k + 1) % GRID;
    used[k] = true;
    out[i] = k;
  }
}

static double total_of(const double* canon, int64_t n) {
  double t = 0;
  for (int64_t i = 0; i < n; ++i) t += canon[i];
  return t;
}

/* A compact CPU tensor of ones for a selection of `count` experts. */
static sw_tensor_t* ones_compact(const tt_fix_t* f, int count) {
  const int64_t shape[3] = {count * f->tile[0], f->tile[1], f->tile[2]};
  const int64_t n = shape[0] * shape[1] * shape[2];
  double* v = (double*)malloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; ++i) v[i] = 1.0;
  sw_tensor_t* t = tt_tensor(f->rt, SW_DTYPE_F32, shape, 3, v);
  free(v);
  return t;
}

/* Adds one to every value of tile k in the canonical reference. */
static void add_one_to_tile(const tt_fix_t* f, double* canon, int64_t k) {
  for (int64_t slot = 0; slot < f->n; ++slot) {
    int64_t kk, w;
    tt_locate(f, slot, &kk, &w);
    if (kk == k) canon[slot] += 1.0;
  }
}

/* A randomized sequence of every kind of request; after each one the
 * primary tier holds at most the budget, the tile sets agree, and every
 * value read equals the reference. */
static void random_requests(sw_lru_policy_t* lru, sw_carrier_kind_t kind, uint64_t seed, int steps) {
  sw_runtime_t* rt = sw_async_runtime();
  tt_fix_t f;
  make_fix(&f, rt, lru, kind);
  size_t budget = 0;
  SW_OK_(sw_lru_policy_budget_tiles(lru, &budget));
  assert_int_equal(budget, BUDGET);
  double* canon = tt_canon_seed(&f, 0);
  uint64_t rng = seed;
  int refused = 0, transient_steps = 0;
  for (int step = 0; step < steps; ++step) {
    int64_t ks[GRID];
    const int op = (int)(sw_test_random(&rng) % 6);
    if (op == 0) { /* a projection of one to six experts, often more than the budget */
      const int count = 1 + (int)(sw_test_random(&rng) % 6);
      draw_tiles(&rng, ks, count);
      sw_tile_selection_t* sel = tt_sel_experts(&f, ks, (size_t)count);
      sw_tensor_t* c = tt_project(&f, f.full, sel, NULL);
      int64_t n = 0;
      double* want = tt_compact_expect(&f, canon, sel, &n);
      tt_expect_values(c, want, n);
      free(want);
      sw_tensor_release(c);
      sw_tile_selection_release(sel);
      if (count > BUDGET) ++transient_steps;
    } else if (op == 1) { /* an explicit promotion, refused beyond the budget */
      const int count = 1 + (int)(sw_test_random(&rng) % (BUDGET + 2));
      draw_tiles(&rng, ks, count);
      sw_tile_set_t* set = tt_set_ordinals(&f, ks, (size_t)count);
      if (count > BUDGET) {
        const tt_snap_t before = tt_snapshot(&f);
        const sw_lru_stats_t st0 = stats_of(lru);
        SW_FAILS(sw_tiled_promote(f.te, set), SW_ERROR_VALUE, "exceed the LRU budget");
        tt_expect_snapshot(&f, &before);
        const sw_lru_stats_t st1 = stats_of(lru);
        assert_memory_equal(&st0, &st1, sizeof st0);
        ++refused;
      } else {
        SW_OK_(sw_tiled_promote(f.te, set));
        for (int i = 0; i < count; ++i) tt_expect_tile(&f, ks[i], SW_TILE_PRIMARY, tt_state(&f, ks[i]).dirty);
      }
      sw_tile_set_release(set);
    } else if (op == 2) { /* an explicit eviction */
      const int count = 1 + (int)(sw_test_random(&rng) % 4);
      draw_tiles(&rng, ks, count);
      sw_tile_set_t* set = tt_set_ordinals(&f, ks, (size_t)count);
      SW_OK_(sw_tiled_evict(f.te, set));
      for (int i = 0; i < count; ++i) tt_expect_tile(&f, ks[i], SW_TILE_SECONDARY, false);
      sw_tile_set_release(set);
    } else if (op == 3) { /* a direct op on the whole tensor */
      sw_tensor_t* r = NULL;
      SW_OK_(sw_reduce_sum(f.full, NULL, 0, false, &r));
      const double total = total_of(canon, f.n);
      tt_expect_values(r, &total, 1);
      sw_tensor_release(r);
      ++transient_steps;
    } else if (op == 4) { /* an update (an optimiser step), refused beyond the budget */
      const int count = 1 + (int)(sw_test_random(&rng) % (BUDGET + 1));
      draw_tiles(&rng, ks, count);
      sw_tile_selection_t* sel = tt_sel_experts(&f, ks, (size_t)count);
      sw_tensor_t* ones = ones_compact(&f, count);
      sw_await_t* a = NULL;
      if (count > BUDGET) {
        const tt_snap_t before = tt_snapshot(&f);
        SW_FAILS(sw_tiled_update_async(f.te, f.full, ones, sel, SW_SCATTER_ADD, &a), SW_ERROR_VALUE,
                 "exceed the LRU budget");
        tt_expect_snapshot(&f, &before);
        ++refused;
      } else {
        SW_OK_(sw_tiled_update_async(f.te, f.full, ones, sel, SW_SCATTER_ADD, &a));
        SW_OK_(sw_await_wait(a, -1));
        sw_await_release(a);
        for (int i = 0; i < count; ++i) {
          add_one_to_tile(&f, canon, ks[i]);
          tt_expect_tile(&f, ks[i], SW_TILE_PRIMARY, true);
        }
      }
      sw_tensor_release(ones);
      sw_tile_selection_release(sel);
    } else { /* a public write of one element */
      const int64_t e = (int64_t)(sw_test_random(&rng) % GRID);
      const int64_t coord[3] = {e, (int64_t)(sw_test_random(&rng) % 3), (int64_t)(sw_test_random(&rng) % 2)};
      const double v = (double)(step + 1) * 0.5;
      const bool was_primary = tt_state(&f, e).location == SW_TILE_PRIMARY;
      SW_OK_(sw_tensor_set(f.full, coord, 3, v));
      canon[coord[0] + GRID * (coord[1] + 3 * coord[2])] = v; /* the canonical slot, first mode fastest */
      /* Off the primary tier it is written through and stays there. */
      if (!was_primary) tt_expect_tile(&f, e, SW_TILE_SECONDARY, false);
      double back = 0;
      SW_OK_(sw_tensor_get(f.full, coord, 3, &back));
      assert_true(back == v);
    }
    if (primary_count(&f) > BUDGET)
      fail_msg("step %d (op %d): %zu tiles primary, budget %d", step, op, primary_count(&f), BUDGET);
    tt_expect_tile_sets_consistent(&f);
  }
  assert_true(refused > 0 && transient_steps > 0);
  const sw_lru_stats_t st = stats_of(lru);
  assert_true(st.transient > 0);
  /* Every value survives: evict everything, read it back. */
  int64_t all[GRID];
  for (int64_t k = 0; k < GRID; ++k) all[k] = k;
  sw_tile_set_t* every = tt_set_ordinals(&f, all, GRID);
  SW_OK_(sw_tiled_evict(f.te, every));
  sw_tile_set_release(every);
  assert_int_equal(primary_count(&f), 0);
  tt_expect_values(f.full, canon, f.n);
  print_message("seed %llu: %d steps, %d refused, %llu transient tile reads\n", (unsigned long long)seed, steps,
                refused, (unsigned long long)st.transient);
  free(canon);
  tt_free(&f);
  sw_runtime_release(rt);
}

static void budget_holds_for_every_request(void** state) {
  (void)state;
  const sw_carrier_kind_t kinds[3] = {SW_CARRIER_FILE, SW_CARRIER_ZSTD, SW_CARRIER_HOST};
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    sw_lru_policy_t* lru = NULL;
    SW_OK_(sw_lru_policy_create(BUDGET, &lru));
    random_requests(lru, kinds[seed % 3], seed * 0x9e3779b97f4a7c15ull, 150);
    sw_lru_policy_release(lru);
  }
}

/* The same with the budget given in bytes: 3.5 tiles of 6 f32 values are
 * three whole tiles. */
static void byte_budget_becomes_whole_tiles(void** state) {
  (void)state;
  sw_lru_policy_desc_t d;
  sw_lru_policy_desc_init(&d);
  d.budget_bytes = 6 * 4 * 7 / 2;
  sw_lru_policy_t* lru = NULL;
  SW_OK_(sw_lru_policy_create_ex(&d, &lru));
  size_t budget = 99;
  SW_OK_(sw_lru_policy_budget_tiles(lru, &budget));
  assert_int_equal(budget, 0); /* not attached yet */
  random_requests(lru, SW_CARRIER_FILE, 77, 120);
  sw_lru_policy_release(lru);
}

static void byte_budget_smaller_than_a_tile_fails_creation(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  sw_lru_policy_desc_t d;
  sw_lru_policy_desc_init(&d);
  d.budget_bytes = 23; /* a tile is 24 bytes */
  sw_lru_policy_t* lru = NULL;
  SW_OK_(sw_lru_policy_create_ex(&d, &lru));
  sw_residency_policy_t vt;
  SW_OK_(sw_lru_policy_as_residency_policy(lru, &vt));
  sw_carrier_t* p = tt_carrier(rt, SW_CARRIER_CPU, SW_DTYPE_F32, 0);
  sw_carrier_t* s = tt_carrier(rt, SW_CARRIER_HOST, SW_DTYPE_F32, 0);
  const int64_t grid[3] = {GRID, 1, 1}, tile[3] = {1, 3, 2};
  sw_carrier_t* te = (sw_carrier_t*)0x1;
  SW_FAILS(sw_tiled_create(p, s, grid, tile, 3, &vt, &te), SW_ERROR_VALUE, "23 bytes holds no tile of 24 bytes");
  assert_ptr_equal(te, (sw_carrier_t*)0x1);
  /* Nothing was taken: the tiers are free again, the vtable is still ours. */
  assert_false(tt_owned(p));
  assert_false(tt_owned(s));
  vt.destroy(vt.user_data);
  /* Smaller tiles fit: 23 bytes hold five 4-byte tiles. */
  SW_OK_(sw_lru_policy_as_residency_policy(lru, &vt));
  const int64_t small[3] = {1, 1, 1};
  SW_OK_(sw_tiled_create(p, s, grid, small, 3, &vt, &te));
  size_t budget = 0;
  SW_OK_(sw_lru_policy_budget_tiles(lru, &budget));
  assert_int_equal(budget, 5);
  sw_carrier_release(te);
  sw_carrier_release(p);
  sw_carrier_release(s);
  sw_lru_policy_release(lru);
  sw_runtime_release(rt);
}

static void create_ex_rejects_bad_arguments(void** state) {
  (void)state;
  sw_lru_policy_t* lru = (sw_lru_policy_t*)0x1;
  sw_lru_policy_desc_t d;
  sw_lru_policy_desc_init(&d);
  assert_int_equal(d.struct_size, sizeof d);
  assert_int_equal(d.budget_tiles, 0);
  assert_int_equal(d.budget_bytes, 0);
  SW_FAILS(sw_lru_policy_create_ex(NULL, &lru), SW_ERROR_VALUE, "desc");
  SW_FAILS(sw_lru_policy_create_ex(&d, &lru), SW_ERROR_VALUE, "exactly one of budget_tiles and budget_bytes");
  d.budget_tiles = 2;
  d.budget_bytes = 100;
  SW_FAILS(sw_lru_policy_create_ex(&d, &lru), SW_ERROR_VALUE, "exactly one of budget_tiles and budget_bytes");
  d.budget_bytes = 0;
  SW_FAILS(sw_lru_policy_create_ex(&d, NULL), SW_ERROR_VALUE, "out_policy");
  d.struct_size = 12;
  SW_FAILS(sw_lru_policy_create_ex(&d, &lru), SW_ERROR_VALUE, "struct_size");
  assert_ptr_equal(lru, (sw_lru_policy_t*)0x1);
  SW_FAILS(sw_lru_policy_budget_tiles(NULL, &(size_t){0}), SW_ERROR_TYPE, "LRU");
  d.struct_size = sizeof d;
  SW_OK_(sw_lru_policy_create_ex(&d, &lru));
  size_t budget = 0;
  SW_OK_(sw_lru_policy_budget_tiles(lru, &budget));
  assert_int_equal(budget, 2);
  SW_FAILS(sw_lru_policy_budget_tiles(lru, NULL), SW_ERROR_VALUE, "out_tiles");
  sw_lru_policy_release(lru);
}

/* One LRU policy serves one TiledEvictable at a time. */
static void second_tiled_evictable_is_refused(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  sw_lru_policy_t* lru = NULL;
  SW_OK_(sw_lru_policy_create(BUDGET, &lru));
  tt_fix_t f;
  make_fix(&f, rt, lru, SW_CARRIER_HOST);
  sw_residency_policy_t vt;
  SW_OK_(sw_lru_policy_as_residency_policy(lru, &vt));
  sw_carrier_t* p = tt_carrier(rt, SW_CARRIER_CPU, SW_DTYPE_F32, 0);
  sw_carrier_t* s = tt_carrier(rt, SW_CARRIER_HOST, SW_DTYPE_F32, 0);
  const int64_t grid[3] = {GRID, 1, 1}, tile[3] = {1, 3, 2};
  sw_carrier_t* te = NULL;
  SW_FAILS(sw_tiled_create(p, s, grid, tile, 3, &vt, &te), SW_ERROR_STATE, "already serves a TiledEvictable");
  assert_false(tt_owned(p));
  /* Undoing the failed creation does not detach the first user. */
  vt.destroy(vt.user_data);
  SW_OK_(sw_lru_policy_as_residency_policy(lru, &vt));
  SW_FAILS(sw_tiled_create(p, s, grid, tile, 3, &vt, &te), SW_ERROR_STATE, "already serves a TiledEvictable");
  /* Once the first is gone, the policy is free. */
  tt_free(&f);
  SW_OK_(sw_tiled_create(p, s, grid, tile, 3, &vt, &te));
  sw_carrier_release(te);
  sw_carrier_release(p);
  sw_carrier_release(s);
  sw_lru_policy_release(lru);
  sw_runtime_release(rt);
}

/* A tile promoted by hand counts as a use, not a miss; a promotion makes
 * room by evicting the least recently used tiles. */
static void promotion_is_a_use_and_makes_room(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  sw_lru_policy_t* lru = NULL;
  SW_OK_(sw_lru_policy_create(BUDGET, &lru));
  tt_fix_t f;
  make_fix(&f, rt, lru, SW_CARRIER_FILE);
  const int64_t first[3] = {0, 1, 2};
  promote_tiles(&f, first, 3);
  sw_lru_stats_t st = stats_of(lru);
  assert_int_equal(st.requests, 0);
  assert_int_equal(st.misses, 0);
  /* Projecting them: three hits. */
  sw_tile_selection_t* sel = tt_sel_experts(&f, first, 3);
  sw_tensor_release(tt_project(&f, f.full, sel, NULL));
  sw_tile_selection_release(sel);
  st = stats_of(lru);
  assert_int_equal(st.requests, 1);
  assert_int_equal(st.hits, 3);
  assert_int_equal(st.misses, 0);
  /* Use 2 then 0: 1 is the least recent. Promoting 7 evicts it. */
  const int64_t two[1] = {2}, zero[1] = {0}, seven[1] = {7};
  sel = tt_sel_experts(&f, two, 1);
  sw_tensor_release(tt_project(&f, f.full, sel, NULL));
  sw_tile_selection_release(sel);
  sel = tt_sel_experts(&f, zero, 1);
  sw_tensor_release(tt_project(&f, f.full, sel, NULL));
  sw_tile_selection_release(sel);
  promote_tiles(&f, seven, 1);
  tt_expect_tile(&f, 1, SW_TILE_SECONDARY, false);
  tt_expect_tile(&f, 0, SW_TILE_PRIMARY, false);
  tt_expect_tile(&f, 2, SW_TILE_PRIMARY, false);
  tt_expect_tile(&f, 7, SW_TILE_PRIMARY, false);
  assert_int_equal(primary_count(&f), BUDGET);
  /* Most recent first: 7, 0, 2. Promoting 2, already primary, is a use too:
   * then 0 is the least recent, and promoting 5 evicts it, not 2. */
  const int64_t five[1] = {5};
  promote_tiles(&f, two, 1);
  promote_tiles(&f, five, 1);
  tt_expect_tile(&f, 0, SW_TILE_SECONDARY, false);
  tt_expect_tile(&f, 2, SW_TILE_PRIMARY, false);
  tt_expect_tile(&f, 5, SW_TILE_PRIMARY, false);
  tt_expect_tile(&f, 7, SW_TILE_PRIMARY, false);
  st = stats_of(lru);
  assert_int_equal(st.requests, 3);  /* the projections alone */
  assert_int_equal(st.misses, 0);
  tt_free(&f);
  sw_lru_policy_release(lru);
  sw_runtime_release(rt);
}

/* A direct op on a tensor larger than the budget streams through it. */
static void direct_op_streams_through_the_budget(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  sw_lru_policy_t* lru = NULL;
  SW_OK_(sw_lru_policy_create(BUDGET, &lru));
  tt_fix_t f;
  make_fix(&f, rt, lru, SW_CARRIER_ZSTD);
  double* canon = tt_canon_seed(&f, 0);
  sw_tensor_t* r = NULL;
  SW_OK_(sw_relu(f.full, &r));
  tt_expect_values(r, canon, f.n);
  sw_tensor_release(r);
  assert_int_equal(primary_count(&f), BUDGET);
  const sw_lru_stats_t st = stats_of(lru);
  assert_int_equal(st.requests, 1);
  assert_int_equal(st.misses, GRID);
  assert_int_equal(st.promoted, BUDGET);
  assert_int_equal(st.transient, GRID - BUDGET);
  free(canon);
  tt_free(&f);
  sw_lru_policy_release(lru);
  sw_runtime_release(rt);
}

/* A public write under a budgeting policy: a tile off the primary tier is
 * written through and stays there; a primary tile is written in place. */
static void public_write_goes_through(void** state) {
  (void)state;
  sw_runtime_t* rt = sw_async_runtime();
  sw_lru_policy_t* lru = NULL;
  SW_OK_(sw_lru_policy_create(BUDGET, &lru));
  tt_fix_t f;
  make_fix(&f, rt, lru, SW_CARRIER_FILE);
  const int64_t four[1] = {4};
  promote_tiles(&f, four, 1);
  const int64_t off[3] = {6, 2, 1}, on[3] = {4, 0, 1};
  SW_OK_(sw_tensor_set(f.full, off, 3, -3.5));
  SW_OK_(sw_tensor_set(f.full, on, 3, 9.25));
  tt_expect_tile(&f, 6, SW_TILE_SECONDARY, false);
  tt_expect_tile(&f, 4, SW_TILE_PRIMARY, true);
  assert_int_equal(primary_count(&f), 1);
  double v = 0;
  SW_OK_(sw_tensor_get(f.full, off, 3, &v));
  assert_true(v == -3.5);
  SW_OK_(sw_tensor_get(f.full, on, 3, &v));
  assert_true(v == 9.25);
  /* A whole-tensor write of a tensor larger than the budget. */
  float* all = (float*)malloc(sizeof(float) * (size_t)f.n);
  for (int64_t i = 0; i < f.n; ++i) all[i] = (float)(i % 17) - 8.0f;
  SW_OK_(sw_tensor_write(f.full, all, sizeof(float) * (size_t)f.n));
  assert_true(primary_count(&f) <= BUDGET);
  float* back = (float*)malloc(sizeof(float) * (size_t)f.n);
  SW_OK_(sw_tensor_read(f.full, back, sizeof(float) * (size_t)f.n));
  assert_memory_equal(all, back, sizeof(float) * (size_t)f.n);
  free(all);
  free(back);
  tt_free(&f);
  sw_lru_policy_release(lru);
  sw_runtime_release(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(budget_holds_for_every_request),
      cmocka_unit_test(byte_budget_becomes_whole_tiles),
      cmocka_unit_test(byte_budget_smaller_than_a_tile_fails_creation),
      cmocka_unit_test(create_ex_rejects_bad_arguments),
      cmocka_unit_test(second_tiled_evictable_is_refused),
      cmocka_unit_test(promotion_is_a_use_and_makes_room),
      cmocka_unit_test(direct_op_streams_through_the_budget),
      cmocka_unit_test(public_write_goes_through),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
