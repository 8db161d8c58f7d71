/* TileSets, TileSelections and ResidencyPlans from fuzzed coordinates,
 * including duplicates, negative entries, empty axes and huge products.
 * What is accepted must read back as documented: a set sorted first
 * coordinate fastest without duplicates, a selection that enumerates its
 * Cartesian product first mode fastest in the caller's order, plans whose
 * three sets are disjoint. */
#include "fuzz.h"

#define MAXC 24
#define MAXR 6

/* Whether a sorts before b: reversed tuples compared lexicographically. */
static int rev_cmp(const int64_t* a, const int64_t* b, size_t rank) {
  for (size_t i = rank; i-- > 0;)
    if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
  return 0;
}

static sw_tile_set_t* make_set(fz_in* in, size_t* out_rank) {
  const size_t rank = (size_t)fz_range(in, 0, MAXR);
  const size_t count = (size_t)fz_range(in, 0, MAXC);
  int64_t coords[MAXC * MAXR];
  for (size_t i = 0; i < count * rank; ++i) coords[i] = fz_bool(in) ? fz_range(in, 0, 3) : fz_i64(in);
  sw_tile_set_t* s = NULL;
  const bool null_coords = fz_u8(in) == 0xff;
  if (FZ_CHECK(sw_tile_set_create(null_coords ? NULL : coords, count, rank, &s)) != SW_OK) {
    FZ_REQUIRE(s == NULL, "a failed create wrote its out-parameter");
    return NULL;
  }
  size_t n = 99, r = 99;
  FZ_OK(sw_tile_set_count(s, &n));
  FZ_OK(sw_tile_set_rank(s, &r));
  FZ_REQUIRE(n == count, "count %zu of %zu coordinates", n, count);
  FZ_REQUIRE(count == 0 ? r == 0 : r == rank, "rank %zu, made with %zu", r, rank);
  int64_t back[MAXC * MAXR];
  FZ_OK(sw_tile_set_coordinates(s, back, MAXC * MAXR));
  for (size_t i = 0; i < n * r; ++i) FZ_REQUIRE(back[i] >= 0, "negative coordinate accepted");
  for (size_t i = 1; i < n; ++i)
    FZ_REQUIRE(rev_cmp(back + (i - 1) * r, back + i * r, r) < 0, "coordinates %zu and %zu out of order", i - 1, i);
  if (n * r > 0) FZ_REQUIRE(FZ_CHECK(sw_tile_set_coordinates(s, back, n * r - 1)) == SW_ERROR_VALUE, "short capacity");
  *out_rank = r;
  return s;
}

static void selection(fz_in* in) {
  const size_t rank = (size_t)fz_range(in, 0, MAXR + 12);
  int64_t axes[MAXR + 12][8];
  const int64_t* per_axis[MAXR + 12];
  size_t counts[MAXR + 12];
  for (size_t i = 0; i < rank; ++i) {
    /* Up to 8 per axis over up to 18 axes: products far past SW_MAX_TILES. */
    counts[i] = (size_t)(fz_u8(in) % 9);
    for (size_t j = 0; j < counts[i]; ++j) axes[i][j] = fz_bool(in) ? fz_range(in, 0, 9) : fz_i64(in);
    per_axis[i] = axes[i];
  }
  sw_tile_selection_t* s = NULL;
  if (FZ_CHECK(sw_tile_selection_create(per_axis, counts, rank, &s)) != SW_OK) {
    FZ_REQUIRE(s == NULL, "a failed create wrote its out-parameter");
    return;
  }
  size_t r = 0, n = 0;
  FZ_OK(sw_tile_selection_rank(s, &r));
  FZ_OK(sw_tile_selection_count(s, &n));
  FZ_REQUIRE(r == rank, "rank %zu of %zu", r, rank);
  size_t product = 1;
  for (size_t i = 0; i < rank; ++i) {
    product *= counts[i];
    int64_t got[8];
    FZ_OK(sw_tile_selection_axis(s, i, got, 8));
    FZ_REQUIRE(memcmp(got, axes[i], counts[i] * sizeof(int64_t)) == 0, "axis %zu reordered", i);
  }
  FZ_REQUIRE(n == product, "count %zu, product %zu", n, product);
  if (n <= 4096) {
    int64_t* all = (int64_t*)malloc(sizeof(int64_t) * n * r);
    FZ_OK(sw_tile_selection_coordinates(s, all, n * r));
    /* First mode fastest over the caller's per-axis order. */
    for (size_t j = 0; j < n; ++j) {
      size_t rest = j;
      for (size_t i = 0; i < r; ++i) {
        FZ_REQUIRE(all[j * r + i] == axes[i][rest % counts[i]], "coordinate %zu mode %zu", j, i);
        rest /= counts[i];
      }
    }
    free(all);
    sw_tile_set_t* set = NULL;
    FZ_OK(sw_tile_selection_tile_set(s, &set));
    size_t sn = 0;
    FZ_OK(sw_tile_set_count(set, &sn));
    FZ_REQUIRE(sn == n, "tile set of %zu tiles for %zu selected", sn, n);
    sw_tile_set_release(set);
  }
  bool eq = false;
  FZ_OK(sw_tile_selection_equal(s, s, &eq));
  FZ_REQUIRE(eq, "a selection differs from itself");
  sw_tile_selection_release(s);
}

static void plan(fz_in* in) {
  size_t ranks[3] = {0, 0, 0};
  sw_tile_set_t* sets[3] = {NULL, NULL, NULL};
  for (int i = 0; i < 3; ++i)
    if (fz_bool(in)) sets[i] = make_set(in, &ranks[i]);
  sw_residency_plan_t* p = NULL;
  if (FZ_CHECK(sw_residency_plan_create(sets[0], sets[1], sets[2], &p)) == SW_OK) {
    sw_tile_set_t* got[3] = {NULL, NULL, NULL};
    FZ_OK(sw_residency_plan_promote(p, &got[0]));
    FZ_OK(sw_residency_plan_retain_set(p, &got[1]));
    FZ_OK(sw_residency_plan_evict(p, &got[2]));
    size_t rank = 0;
    for (int i = 0; i < 3; ++i) {
      size_t n = 0, r = 0;
      FZ_OK(sw_tile_set_count(got[i], &n));
      FZ_OK(sw_tile_set_rank(got[i], &r));
      if (n && rank) FZ_REQUIRE(r == rank, "the plan's sets disagree on rank");
      if (n) rank = r;
      if (sets[i]) {
        bool eq = false;
        FZ_OK(sw_tile_set_equal(got[i], sets[i], &eq));
        FZ_REQUIRE(eq, "field %d of the plan is not the set it was made with", i);
      }
    }
    /* Disjoint: no coordinate of one field in another. */
    for (int a = 0; a < 3; ++a)
      for (int b = a + 1; b < 3; ++b) {
        size_t na = 0, nb = 0;
        FZ_OK(sw_tile_set_count(got[a], &na));
        FZ_OK(sw_tile_set_count(got[b], &nb));
        if (!na || !nb) continue;
        int64_t ca[MAXC * MAXR], cb[MAXC * MAXR];
        FZ_OK(sw_tile_set_coordinates(got[a], ca, MAXC * MAXR));
        FZ_OK(sw_tile_set_coordinates(got[b], cb, MAXC * MAXR));
        for (size_t i = 0; i < na; ++i)
          for (size_t j = 0; j < nb; ++j)
            FZ_REQUIRE(rev_cmp(ca + i * rank, cb + j * rank, rank) != 0, "fields %d and %d share a tile", a, b);
      }
    for (int i = 0; i < 3; ++i) sw_tile_set_release(got[i]);
    sw_residency_plan_release(p);
  } else {
    FZ_REQUIRE(p == NULL, "a failed create wrote its out-parameter");
  }
  for (int i = 0; i < 3; ++i) sw_tile_set_release(sets[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fz_in in = {data, size};
  while (in.n > 0) {
    switch (fz_u8(&in) % 3) {
      case 0: {
        size_t r = 0;
        sw_tile_set_release(make_set(&in, &r));
        break;
      }
      case 1: selection(&in); break;
      default: plan(&in); break;
    }
  }
  return 0;
}
