/* sw_tiled_expert_ffn through the C ABI: exact values of the gated expert
 * feed-forward (relu activation on small integers, so every f32 value is
 * exact) with experts resident, missing or mixed in each of the three
 * TiledEvictables, under LRU budgets smaller than the experts a call uses;
 * silu values equal to the unfused layer (three sw_tiled_expert_matmul
 * calls, sw_unary, sw_binary) bit for bit in bf16 and f32; the rules it
 * shares with projection (pins, policies, the await terminal on return when
 * nothing moves, refusals before anything is submitted); failures in any of
 * the three requests; grad mode; and every argument error with its code and
 * nothing changed. The fused form (one gate_up TiledEvictable, tile (H, 2F,
 * 1), up and up_experts NULL) gives the three-carrier form's values bit for
 * bit, and follows the same rules with its two requests. */
#include <pthread.h>

#include "sw_async_test.h"
#include "sw_tiled_test.h"

#define E 5
#define H 3
#define F 4
#define TOK 3
#define KK 2

/* (T, k) first mode fastest: ids[t + T*j]. */
static const int64_t kIds[TOK * KK] = {0, 3, 1, 3, 4, 1};
static const double kGates[TOK * KK] = {0.5, 0.25, 1.0, -0.5, 0.75, 2.0};

/* Expert e's matrices, first mode fastest within the tile: gate and up
 * (H, F) at c + H*f, down (F, H) at f + F*n. */
static double gate_w(int64_t e, int64_t c, int64_t f) { return (double)((e * 7 + c * 3 + f) % 5) - 2.0; }
static double up_w(int64_t e, int64_t c, int64_t f) { return (double)((e * 5 + c + 2 * f) % 7) - 3.0; }
static double down_w(int64_t e, int64_t f, int64_t n) { return (double)((e * 3 + f * 2 + n) % 5) - 2.0; }
static double input(int64_t t, int64_t j, int64_t c) { return (double)((t * 7 + j * 3 + c) % 5) - 2.0; }

typedef enum { GATE, UP, DOWN } which_t;

/* The fused form: te[GATE] is the gate_up TiledEvictable and te[UP] and
 * full[UP] are NULL. */
typedef struct ffn_fix_t {
  sw_runtime_t* rt;
  sw_carrier_t* te[3];
  sw_tensor_t* full[3];
  bool fused;
} ffn_fix_t;

/* Whether the fixture has TiledEvictable w (the fused form has no up). */
static bool has(const ffn_fix_t* f, int w) { return f->te[w] != NULL; }

/* Element (i, j) of expert e's matrix; a fused gate's columns j < F are
 * the gate's, the next F the up's. */
static double weight(which_t w, bool fused, int64_t e, int64_t i, int64_t j) {
  if (w == GATE && fused && j >= F) return up_w(e, i, j - F);
  return w == GATE ? gate_w(e, i, j) : w == UP ? up_w(e, i, j) : down_w(e, i, j);
}

/* One of the three: a CPU primary (empty) over a `secondary` tier holding
 * every expert, tile (H, F, 1), for down (F, H, 1), for a fused gate_up
 * (H, 2F, 1). */
static void make_one(ffn_fix_t* f, which_t w, sw_carrier_kind_t secondary, const sw_residency_policy_t* policy) {
  const int64_t K = w == DOWN ? F : H, N = w == DOWN ? H : w == GATE && f->fused ? 2 * F : F;
  const size_t n = (size_t)(E * K * N);
  double v[E * H * 2 * F];
  for (int64_t e = 0; e < E; ++e)
    for (int64_t j = 0; j < N; ++j)
      for (int64_t i = 0; i < K; ++i) v[e * K * N + i + K * j] = weight(w, f->fused, e, i, j);
  sw_carrier_t* p = tt_carrier(f->rt, SW_CARRIER_CPU, SW_DTYPE_F32, 0);
  sw_carrier_t* s = tt_carrier(f->rt, secondary, SW_DTYPE_F32, n);
  tt_write_doubles(s, SW_DTYPE_F32, v, n);
  const int64_t grid[3] = {1, 1, E}, tile[3] = {K, N, 1};
  SW_OK_(sw_tiled_create(p, s, grid, tile, 3, policy, &f->te[w]));
  sw_carrier_release(p);
  sw_carrier_release(s);
  SW_OK_(sw_tiled_full_tensor(f->te[w], &f->full[w]));
}

/* The three TiledEvictables, or with `fused` gate_up and down. */
static void make_ffn_as(ffn_fix_t* f, sw_runtime_t* rt, sw_carrier_kind_t secondary,
                        const sw_residency_policy_t* const* p, bool fused) {
  memset(f, 0, sizeof *f);
  f->rt = rt;
  f->fused = fused;
  for (int w = 0; w < 3; ++w)
    if (!(fused && w == UP)) make_one(f, (which_t)w, secondary, p ? p[w] : NULL);
}

static void make_ffn(ffn_fix_t* f, sw_runtime_t* rt, sw_carrier_kind_t secondary, const sw_residency_policy_t* const* p) {
  make_ffn_as(f, rt, secondary, p, false);
}

static void free_ffn(ffn_fix_t* f) {
  for (int w = 0; w < 3; ++w) {
    sw_tensor_release(f->full[w]);
    sw_carrier_release(f->te[w]);
  }
}

static sw_tile_location_t location(const ffn_fix_t* f, which_t w, int64_t e) {
  const int64_t c[3] = {0, 0, e};
  sw_tile_state_t st;
  sw_tile_state_init(&st);
  SW_OK_(sw_tiled_tile_state(f->te[w], c, 3, &st));
  return st.location;
}

static void set_residency(const ffn_fix_t* f, which_t w, int64_t e, bool primary) {
  const int64_t c[3] = {0, 0, e};
  sw_tile_set_t* set = NULL;
  SW_OK_(sw_tile_set_create(c, 1, 3, &set));
  SW_OK_(primary ? sw_tiled_promote(f->te[w], set) : sw_tiled_evict(f->te[w], set));
  sw_tile_set_release(set);
}

static sw_tensor_t* x_tensor(sw_runtime_t* rt, bool per_choice) {
  double v[TOK * KK * H];
  if (per_choice) {
    for (int64_t c = 0; c < H; ++c)
      for (int64_t j = 0; j < KK; ++j)
        for (int64_t t = 0; t < TOK; ++t) v[t + TOK * (j + KK * c)] = input(t, j, c);
    const int64_t shape[3] = {TOK, KK, H};
    return sw_test_tensor(rt, SW_DTYPE_F32, shape, 3, v);
  }
  for (int64_t c = 0; c < H; ++c)
    for (int64_t t = 0; t < TOK; ++t) v[t + TOK * c] = input(t, 0, c);
  const int64_t shape[2] = {TOK, H};
  return sw_test_tensor(rt, SW_DTYPE_F32, shape, 2, v);
}

static sw_tensor_t* ids_tensor(sw_runtime_t* rt, const int64_t* ids) {
  const int64_t shape[2] = {TOK, KK};
  sw_tensor_t* t = NULL;
  SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_I64, shape, 2, ids, &t));
  return t;
}

static sw_tensor_t* gates_tensor(sw_runtime_t* rt) {
  const int64_t shape[2] = {TOK, KK};
  return sw_test_tensor(rt, SW_DTYPE_F32, shape, 2, kGates);
}

/* The expected result with relu: (T, k, H) ungated, (T, H) gated. */
static void expected(const int64_t* ids, bool per_choice, bool gated, double* out) {
  for (int64_t n = 0; n < H; ++n)
    for (int64_t t = 0; t < TOK; ++t) {
      double sum = 0;
      for (int64_t j = 0; j < KK; ++j) {
        const int64_t e = ids[t + TOK * j];
        double y = 0;
        for (int64_t f = 0; f < F; ++f) {
          double a = 0, b = 0;
          for (int64_t c = 0; c < H; ++c) {
            a += input(t, per_choice ? j : 0, c) * gate_w(e, c, f);
            b += input(t, per_choice ? j : 0, c) * up_w(e, c, f);
          }
          y += (a > 0 ? a : 0) * b * down_w(e, f, n);
        }
        if (gated)
          sum += kGates[t + TOK * j] * y;
        else
          out[t + TOK * (j + KK * n)] = y;
      }
      if (gated) out[t + TOK * n] = sum;
    }
}

static sw_error_t* start(const ffn_fix_t* f, sw_tensor_t* x, sw_tensor_t* ids, sw_tensor_t* gates,
                         const sw_expert_ffn_desc_t* desc, sw_await_t** out) {
  return sw_tiled_expert_ffn(f->te[GATE], f->full[GATE], f->te[UP], f->full[UP], f->te[DOWN], f->full[DOWN], x, ids,
                             gates, desc, out);
}

static sw_tensor_t* run(const ffn_fix_t* f, sw_tensor_t* x, sw_tensor_t* ids, sw_tensor_t* gates,
                        sw_unary_op_t activation) {
  sw_expert_ffn_desc_t desc;
  sw_expert_ffn_desc_init(&desc);
  desc.activation = activation;
  sw_await_t* a = NULL;
  SW_OK_(start(f, x, ids, gates, &desc, &a));
  sw_await_kind_t kind;
  SW_OK_(sw_await_kind(a, &kind));
  assert_int_equal(kind, SW_AWAIT_PROJECTION);
  sw_tensor_t* r = tt_wait_result(a);
  sw_await_release(a);
  return r;
}

static void check_values(const ffn_fix_t* f, const int64_t* ids_v, bool per_choice) {
  sw_tensor_t* x = x_tensor(f->rt, per_choice);
  sw_tensor_t* ids = ids_tensor(f->rt, ids_v);
  sw_tensor_t* gates = gates_tensor(f->rt);
  double want[TOK * KK * H];
  sw_tensor_t* y = run(f, x, ids, NULL, SW_UNARY_RELU);
  const int64_t yshape[3] = {TOK, KK, H};
  tt_expect_shape(y, yshape, 3);
  expected(ids_v, per_choice, false, want);
  tt_expect_values(y, want, TOK * KK * H);
  sw_tensor_release(y);
  sw_tensor_t* o = run(f, x, ids, gates, SW_UNARY_RELU);
  const int64_t oshape[2] = {TOK, H};
  tt_expect_shape(o, oshape, 2);
  expected(ids_v, per_choice, true, want);
  tt_expect_values(o, want, TOK * H);
  sw_tensor_release(o);
  sw_tensor_release(gates);
  sw_tensor_release(ids);
  sw_tensor_release(x);
}

static void values_from_every_tier(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const sw_carrier_kind_t tiers[3] = {SW_CARRIER_HOST, SW_CARRIER_FILE, SW_CARRIER_ZSTD};
  for (int i = 0; i < 6; ++i) {
    ffn_fix_t f;
    make_ffn_as(&f, rt, tiers[i % 3], NULL, i >= 3);
    check_values(&f, kIds, false); /* missing at first, resident after */
    check_values(&f, kIds, true);
    /* Without a policy the experts used stay primary in all three (both), the others untouched. */
    const bool used[E] = {true, true, false, true, true};
    for (int w = 0; w < 3; ++w)
      for (int64_t e = 0; e < E && has(&f, w); ++e)
        assert_int_equal(location(&f, (which_t)w, e), used[e] ? SW_TILE_PRIMARY : SW_TILE_SECONDARY);
    free_ffn(&f);
  }
}

/* Every mix of an expert resident in some of the three (of the fused
 * form's two) and missing in the others gives the same exact values. */
static void every_mix_of_resident_and_missing(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  for (int mask = 0; mask < 16; ++mask) {
    const bool fused = mask >= 8;
    if (fused && (mask & (1 << UP))) continue;
    ffn_fix_t f;
    make_ffn_as(&f, rt, SW_CARRIER_FILE, NULL, fused);
    /* Expert 3 (used by two tokens) resident where the mask says; expert 1 the other way round. */
    for (int w = 0; w < 3; ++w) {
      if (!has(&f, w)) continue;
      if (mask & (1 << w)) set_residency(&f, (which_t)w, 3, true);
      else set_residency(&f, (which_t)w, 1, true);
    }
    check_values(&f, kIds, false);
    free_ffn(&f);
  }
}

/* Twenty calls of random routing under an LRU budget of two experts in
 * each of the three (a call uses up to four): every result is exact, the
 * budgets hold and each policy saw every call. */
static void lru_budgets_hold_across_calls(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_lru_policy_t* lru[3];
  sw_residency_policy_t vt[3];
  const sw_residency_policy_t* p[3];
  for (int w = 0; w < 3; ++w) {
    SW_OK_(sw_lru_policy_create(2, &lru[w]));
    SW_OK_(sw_lru_policy_as_residency_policy(lru[w], &vt[w]));
    p[w] = &vt[w];
  }
  ffn_fix_t f;
  make_ffn(&f, rt, SW_CARRIER_FILE, p);
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  for (int step = 0; step < 20; ++step) {
    int64_t ids[TOK * KK];
    for (int i = 0; i < TOK * KK; ++i) ids[i] = (int64_t)(sw_test_random(&seed) % E);
    sw_tensor_t* x = x_tensor(rt, false);
    sw_tensor_t* idt = ids_tensor(rt, ids);
    sw_tensor_t* gates = gates_tensor(rt);
    sw_tensor_t* o = run(&f, x, idt, gates, SW_UNARY_RELU);
    double want[TOK * H];
    expected(ids, false, true, want);
    tt_expect_values(o, want, TOK * H);
    sw_tensor_release(o);
    sw_tensor_release(gates);
    sw_tensor_release(idt);
    sw_tensor_release(x);
    for (int w = 0; w < 3; ++w) {
      sw_tile_set_t* prim = NULL;
      size_t count = 0;
      SW_OK_(sw_tiled_tiles(f.te[w], SW_TILES_PRIMARY, &prim));
      SW_OK_(sw_tile_set_count(prim, &count));
      sw_tile_set_release(prim);
      assert_true(count <= 2);
    }
  }
  for (int w = 0; w < 3; ++w) {
    sw_lru_stats_t st;
    sw_lru_stats_init(&st);
    SW_OK_(sw_lru_policy_stats(lru[w], &st));
    assert_int_equal(st.requests, 20);
    assert_true(st.transient > 0);
    sw_lru_policy_release(lru[w]);
  }
  free_ffn(&f);
}

/* ---- silu against the unfused layer, bit for bit ------------------------- */

#define BE 4
#define BH 200
#define BF 72

static uint16_t bf16_of(float v) { /* round to nearest even */
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static float f32_of_bf16(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float v;
  memcpy(&v, &u, sizeof v);
  return v;
}
static float irregular(uint32_t i) { return (float)((i * 2654435761u) % 2001u) / 1000.0f - 1.0f; }

static void* read_all(const sw_tensor_t* t, size_t* bytes) {
  int64_t n = 0;
  SW_OK_(sw_tensor_numel(t, &n));
  sw_dtype_t d;
  SW_OK_(sw_tensor_dtype(t, &d));
  *bytes = (size_t)n * sw_dtype_size(d);
  void* buf = malloc(*bytes);
  SW_OK_(sw_tensor_read(t, buf, *bytes));
  return buf;
}

/* Element i of matrix w's experts (tile after tile) in make_irregular. */
static float irregular_weight(int w, size_t i) { return irregular((uint32_t)(i + 100003u * (uint32_t)w)) * 0.2f; }

/* Irregular experts of `dt` (bf16 or f32) in a host tier, no policy. With
 * `fused`, gate is the gate_up TiledEvictable of the same experts (tile
 * (BH, 2 BF, 1): tile e holds the gate's tile e, then the up's) and there is
 * no up. */
static void make_irregular_as(ffn_fix_t* f, sw_runtime_t* rt, sw_dtype_t dt, bool fused) {
  memset(f, 0, sizeof *f);
  f->rt = rt;
  f->fused = fused;
  for (int w = 0; w < 3; ++w) {
    if (fused && w == UP) continue;
    const int64_t K = w == DOWN ? BF : BH, N = w == DOWN ? BH : fused && w == GATE ? 2 * BF : BF;
    const size_t n = (size_t)(BE * K * N), half = (size_t)(BH * BF);
    sw_carrier_t* p = tt_carrier(rt, SW_CARRIER_CPU, dt, 0);
    sw_carrier_t* s = tt_carrier(rt, SW_CARRIER_HOST, dt, n);
    float* v = (float*)malloc(n * sizeof *v);
    for (size_t i = 0; i < n; ++i) {
      if (fused && w == GATE) /* expert i / (2 half): its gate tile's element, then its up tile's */
        v[i] = irregular_weight((i / half) % 2 ? UP : GATE, (i / (2 * half)) * half + i % half);
      else
        v[i] = irregular_weight(w, i);
    }
    if (dt == SW_DTYPE_BF16) {
      uint16_t* b = (uint16_t*)malloc(n * sizeof *b);
      for (size_t i = 0; i < n; ++i) b[i] = bf16_of(v[i]);
      SW_OK_(sw_carrier_write(s, 0, n, b));
      free(b);
    } else {
      SW_OK_(sw_carrier_write(s, 0, n, v));
    }
    free(v);
    const int64_t grid[3] = {1, 1, BE}, tile[3] = {K, N, 1};
    SW_OK_(sw_tiled_create(p, s, grid, tile, 3, NULL, &f->te[w]));
    sw_carrier_release(p);
    sw_carrier_release(s);
    SW_OK_(sw_tiled_full_tensor(f->te[w], &f->full[w]));
  }
}

static void make_irregular(ffn_fix_t* f, sw_runtime_t* rt, sw_dtype_t dt) { make_irregular_as(f, rt, dt, false); }

static sw_tensor_t* expert_matmul(const ffn_fix_t* f, which_t w, sw_tensor_t* x, sw_tensor_t* ids, sw_dtype_t out) {
  sw_matmul_desc_t desc;
  sw_matmul_desc_init(&desc);
  desc.out_dtype = out;
  sw_await_t* a = NULL;
  SW_OK_(sw_tiled_expert_matmul(f->te[w], f->full[w], x, ids, NULL, &desc, &a));
  sw_tensor_t* r = tt_wait_result(a);
  sw_await_release(a);
  return r;
}

/* The unfused layer: Y (T, k, H) of `out`, or its gated sum over j in
 * order, in f32, rounded once to `out`, written as raw bytes into *bytes. */
static void* unfused(const ffn_fix_t* f, sw_dtype_t dt, sw_tensor_t* x, sw_tensor_t* ids, const float* gates,
                     int64_t tokens, sw_dtype_t out, size_t* bytes) {
  sw_tensor_t* a = expert_matmul(f, GATE, x, ids, dt);
  sw_tensor_t* b = expert_matmul(f, UP, x, ids, dt);
  sw_tensor_t *s = NULL, *h = NULL;
  SW_OK_(sw_unary(SW_UNARY_SILU, a, &s));
  SW_OK_(sw_binary(SW_BINARY_MUL, s, b, &h));
  sw_tensor_t* y = expert_matmul(f, DOWN, h, ids, out);
  void* raw = read_all(y, bytes);
  sw_tensor_release(y);
  sw_tensor_release(h);
  sw_tensor_release(s);
  sw_tensor_release(b);
  sw_tensor_release(a);
  if (!gates) return raw;
  const size_t es = out == SW_DTYPE_BF16 ? 2 : 4;
  const int64_t S = tokens * 2;
  void* sum = malloc((size_t)(tokens * BH) * es);
  for (int64_t n = 0; n < BH; ++n)
    for (int64_t t = 0; t < tokens; ++t) {
      float acc = 0;
      for (int64_t j = 0; j < 2; ++j) {
        const size_t i = (size_t)(t + tokens * j + S * n);
        float yv;
        if (es == 2) yv = f32_of_bf16(((const uint16_t*)raw)[i]);
        else memcpy(&yv, (const char*)raw + i * 4, 4);
        const float term = gates[t + tokens * j] * yv;
        acc = j == 0 ? term : acc + term;
      }
      if (es == 2) ((uint16_t*)sum)[t + tokens * n] = bf16_of(acc);
      else memcpy((char*)sum + (size_t)(t + tokens * n) * 4, &acc, 4);
    }
  free(raw);
  *bytes = (size_t)(tokens * BH) * es;
  return sum;
}

static void evict_all(const ffn_fix_t* f) {
  for (int w = 0; w < 3; ++w)
    for (int64_t e = 0; e < BE && has(f, w); ++e)
      if (location(f, (which_t)w, e) == SW_TILE_PRIMARY) set_residency(f, (which_t)w, e, false);
}

/* The irregular inputs of `tokens` tokens (1 to 3), two choices each: x
 * (tokens, BH) of `dt`, ids (tokens, 2) and f32 gates, whose values go to
 * gv. */
static void irregular_inputs(sw_runtime_t* rt, sw_dtype_t dt, int64_t tokens, sw_tensor_t** x, sw_tensor_t** ids,
                             sw_tensor_t** gates, float* gv) {
  const size_t xes = dt == SW_DTYPE_BF16 ? 2 : 4;
  void* xs = malloc((size_t)(tokens * BH) * xes);
  for (int64_t i = 0; i < tokens * BH; ++i) {
    const float v = irregular((uint32_t)(7919 + i));
    if (dt == SW_DTYPE_BF16) ((uint16_t*)xs)[i] = bf16_of(v);
    else ((float*)xs)[i] = v;
  }
  const int64_t xshape[2] = {tokens, BH};
  SW_OK_(sw_tensor_from_data(rt, dt, xshape, 2, xs, x));
  free(xs);
  /* Tokens 0 and 2 share expert 1 (rows of one expert that are not consecutive). */
  const int64_t idv[6] = {1, 3, 1, 2, 0, 3};
  int64_t ids_data[6];
  for (int64_t t = 0; t < tokens; ++t) {
    ids_data[t] = idv[t];
    ids_data[t + tokens] = idv[3 + t];
  }
  const int64_t ishape[2] = {tokens, 2};
  SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_I64, ishape, 2, ids_data, ids));
  for (int i = 0; i < 6; ++i) gv[i] = 0.3f + 0.17f * (float)i;
  SW_OK_(sw_tensor_from_data(rt, SW_DTYPE_F32, ishape, 2, gv, gates));
}

static void silu_equals_the_unfused_layer_bit_for_bit(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const sw_dtype_t dts[2] = {SW_DTYPE_BF16, SW_DTYPE_F32};
  for (int d = 0; d < 2; ++d) {
    const sw_dtype_t dt = dts[d];
    ffn_fix_t f;
    make_irregular(&f, rt, dt);
    for (int64_t tokens = 1; tokens <= 3; tokens += 2) {
      sw_tensor_t *x = NULL, *ids = NULL, *gates = NULL;
      float gv[6];
      irregular_inputs(rt, dt, tokens, &x, &ids, &gates, gv);
      const sw_dtype_t outs[2] = {dt, SW_DTYPE_F32};
      for (int o = 0; o < (dt == SW_DTYPE_BF16 ? 2 : 1); ++o)
        for (int gated = 0; gated < 2; ++gated)
          for (int residency = 0; residency < 3; ++residency) {
            /* 0: every expert read; 1: every expert resident (inline); 2: expert 3 missing in down only. */
            if (residency == 0) evict_all(&f);
            if (residency == 2) set_residency(&f, DOWN, 3, false);
            sw_expert_ffn_desc_t desc;
            sw_expert_ffn_desc_init(&desc);
            desc.out_dtype = o ? SW_DTYPE_F32 : SW_DTYPE_INVALID;
            sw_await_t* a = NULL;
            SW_OK_(start(&f, x, ids, gated ? gates : NULL, &desc, &a));
            if (residency == 1) assert_int_equal(sw_async_status(a), SW_AWAIT_SUCCEEDED);
            sw_tensor_t* r = tt_wait_result(a);
            sw_await_release(a);
            size_t got_bytes = 0, want_bytes = 0;
            void* got = read_all(r, &got_bytes);
            sw_tensor_release(r);
            void* want = unfused(&f, dt, x, ids, gated ? gv : NULL, tokens, outs[o], &want_bytes);
            assert_int_equal(got_bytes, want_bytes);
            assert_memory_equal(got, want, got_bytes);
            free(got);
            free(want);
          }
      sw_tensor_release(gates);
      sw_tensor_release(ids);
      sw_tensor_release(x);
    }
    free_ffn(&f);
  }
}

/* The result bytes of one call (`desc` NULL for the defaults); with
 * `inline_call` its await is terminal on return. */
static void* call_bytes(const ffn_fix_t* f, sw_tensor_t* x, sw_tensor_t* ids, sw_tensor_t* gates,
                        const sw_expert_ffn_desc_t* desc, bool inline_call, size_t* bytes) {
  sw_await_t* a = NULL;
  SW_OK_(start(f, x, ids, gates, desc, &a));
  if (inline_call) assert_int_equal(sw_async_status(a), SW_AWAIT_SUCCEEDED);
  sw_tensor_t* r = tt_wait_result(a);
  sw_await_release(a);
  void* raw = read_all(r, bytes);
  sw_tensor_release(r);
  return raw;
}

/* The fused form (a gate_up TiledEvictable whose tile e stacks the gate's
 * tile e and the up's, transformers' gate_up_proj) against the three
 * TiledEvictables of the same experts: the same bytes, bf16 (with its
 * result in bf16 and in f32) and f32, gated and not, x shared by a token's
 * choices or one row per choice, with every expert read, every expert
 * resident (the inline path: terminal on return) and mixed (expert 1
 * missing in gate_up only, expert 3 in down only). */
static void the_fused_form_equals_three_carriers_bit_for_bit(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  const sw_dtype_t dts[2] = {SW_DTYPE_BF16, SW_DTYPE_F32};
  for (int d = 0; d < 2; ++d) {
    const sw_dtype_t dt = dts[d];
    ffn_fix_t three, fused;
    make_irregular_as(&three, rt, dt, false);
    make_irregular_as(&fused, rt, dt, true);
    for (int64_t tokens = 1; tokens <= 3; tokens += 2) {
      sw_tensor_t *x = NULL, *ids = NULL, *gates = NULL;
      float gv[6];
      irregular_inputs(rt, dt, tokens, &x, &ids, &gates, gv);
      /* One row per choice: (tokens, 2, BH), the shared rows scaled. */
      sw_tensor_t* xk = NULL;
      {
        sw_tensor_t *x2 = NULL, *half = NULL;
        sw_tensor_t* pair[2] = {x, NULL};
        SW_OK_(sw_tensor_full(rt, dt, (const int64_t[]){1}, 1, 0.5, &half));
        SW_OK_(sw_binary(SW_BINARY_MUL, x, half, &x2));
        pair[1] = x2;
        SW_OK_(sw_stack(pair, 2, 1, &xk));
        sw_tensor_release(x2);
        sw_tensor_release(half);
      }
      const sw_dtype_t outs[2] = {SW_DTYPE_INVALID, SW_DTYPE_F32};
      for (int o = 0; o < (dt == SW_DTYPE_BF16 ? 2 : 1); ++o)
        for (int per_choice = 0; per_choice < 2; ++per_choice)
          for (int gated = 0; gated < 2; ++gated)
            for (int residency = 0; residency < 3; ++residency) {
              /* 0: every expert read; 1: every expert resident (inline); 2: mixed. */
              if (residency == 0) {
                evict_all(&three);
                evict_all(&fused);
              }
              if (residency == 2) {
                set_residency(&fused, GATE, 1, false);
                set_residency(&fused, DOWN, 3, false);
              }
              sw_expert_ffn_desc_t desc;
              sw_expert_ffn_desc_init(&desc);
              desc.out_dtype = outs[o];
              sw_tensor_t* xin = per_choice ? xk : x;
              sw_tensor_t* g = gated ? gates : NULL;
              size_t want_bytes = 0, got_bytes = 0;
              void* want = call_bytes(&three, xin, ids, g, &desc, false, &want_bytes);
              void* got = call_bytes(&fused, xin, ids, g, &desc, residency == 1, &got_bytes);
              assert_int_equal(got_bytes, want_bytes);
              assert_memory_equal(got, want, got_bytes);
              free(got);
              free(want);
            }
      sw_tensor_release(xk);
      sw_tensor_release(gates);
      sw_tensor_release(ids);
      sw_tensor_release(x);
    }
    free_ffn(&fused);
    free_ffn(&three);
  }
}

/* ---- the rules it shares with projection ------------------------------ */

/* A call whose experts are resident in all three and whose plans move
 * nothing is computed before it returns; one with a tile still to read
 * returns while the read is in flight, and commits all three before its
 * await completes. */
static void a_resident_call_is_terminal_on_return(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  for (int fused = 0; fused < 2; ++fused) { /* three TiledEvictables, then gate_up and down */
    ffn_fix_t f;
    make_ffn_as(&f, rt, SW_CARRIER_FILE, NULL, fused);
    sw_tensor_t* x = x_tensor(rt, false);
    sw_tensor_t* ids = ids_tensor(rt, kIds);
    double want[TOK * KK * H];
    expected(kIds, false, false, want);
    sw_expert_ffn_desc_t desc;
    sw_expert_ffn_desc_init(&desc);
    desc.activation = SW_UNARY_RELU;
    sw_tensor_release(run(&f, x, ids, NULL, SW_UNARY_RELU));

    sw_await_t* a = NULL;
    SW_OK_(start(&f, x, ids, NULL, &desc, &a));
    assert_int_equal(sw_async_status(a), SW_AWAIT_SUCCEEDED);
    sw_tensor_t* y = tt_wait_result(a);
    tt_expect_values(y, want, TOK * KK * H);
    sw_tensor_release(y);
    sw_await_release(a);

    for (int w = 0; w < 3; ++w) {
      if (!has(&f, w)) continue;
      set_residency(&f, (which_t)w, 4, false);
      SW_OK_(sw_testing_hold(rt, SW_FAULT_READ, 1));
      SW_OK_(start(&f, x, ids, NULL, &desc, &a));
      SW_OK_(sw_testing_wait_held(rt, 10LL * 1000 * 1000 * 1000));
      assert_int_equal(sw_async_status(a), SW_AWAIT_PENDING);
      SW_OK_(sw_testing_release_hold(rt));
      y = tt_wait_result(a);
      tt_expect_values(y, want, TOK * KK * H);
      /* Committed before the await completed. */
      for (int v = 0; v < 3; ++v)
        if (has(&f, v)) assert_int_equal(location(&f, (which_t)v, 4), SW_TILE_PRIMARY);
      sw_tensor_release(y);
      sw_await_release(a);
    }
    sw_tensor_release(ids);
    sw_tensor_release(x);
    free_ffn(&f);
  }
}

/* While a call waits for a read of any of the three, neither that
 * TiledEvictable nor the down one (whose request commits last) can be
 * released, an eviction of an expert the down request uses waits for it,
 * and the result is exact. */
static void a_pending_call_pins_its_experts(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  for (int held = 0; held < 3; ++held) {
    ffn_fix_t f;
    make_ffn(&f, rt, SW_CARRIER_FILE, NULL);
    for (int w = 0; w < 3; ++w)
      if (w != held)
        for (int64_t e = 0; e < E; ++e) set_residency(&f, (which_t)w, e, true);
    sw_tensor_t* x = x_tensor(rt, false);
    sw_tensor_t* ids = ids_tensor(rt, kIds);
    SW_OK_(sw_testing_hold(rt, SW_FAULT_READ, 1));
    sw_expert_ffn_desc_t desc;
    sw_expert_ffn_desc_init(&desc);
    desc.activation = SW_UNARY_RELU;
    sw_await_t* a = NULL;
    SW_OK_(start(&f, x, ids, NULL, &desc, &a));
    SW_OK_(sw_testing_wait_held(rt, 10LL * 1000 * 1000 * 1000));
    assert_int_equal(sw_async_status(a), SW_AWAIT_PENDING);
    SW_FAILS(sw_carrier_dispose(f.te[held]), SW_ERROR_STATE, "not terminal");
    SW_FAILS(sw_carrier_dispose(f.te[DOWN]), SW_ERROR_STATE, "not terminal");
    const int64_t zero = 0;
    sw_tile_set_t* set = NULL;
    const int64_t c[3] = {0, 0, zero};
    SW_OK_(sw_tile_set_create(c, 1, 3, &set));
    sw_await_t* ev = NULL;
    SW_OK_(sw_tiled_evict_async(f.te[DOWN], set, &ev));
    sw_async_sleep_ms(20);
    assert_int_equal(sw_async_status(ev), SW_AWAIT_PENDING);
    SW_OK_(sw_testing_hold(rt, SW_FAULT_READ, 0));
    SW_OK_(sw_testing_release_hold(rt));
    sw_tensor_t* y = tt_wait_result(a);
    SW_OK_(sw_await_wait(ev, -1));
    double want[TOK * KK * H];
    expected(kIds, false, false, want);
    tt_expect_values(y, want, TOK * KK * H);
    assert_int_equal(location(&f, DOWN, 0), SW_TILE_SECONDARY);
    sw_tensor_release(y);
    sw_await_release(ev);
    sw_await_release(a);
    sw_tile_set_release(set);
    sw_tensor_release(ids);
    sw_tensor_release(x);
    free_ffn(&f);
  }
}

/* Each policy is consulted with the experts the call uses, purpose
 * PROJECTION; a call that hits everything counts hits in all three. */
typedef struct seen_t {
  sw_lru_policy_t* lru;
  sw_residency_policy_t inner;
  int calls;
  size_t last_count;
  sw_residency_purpose_t last_purpose;
} seen_t;

static sw_error_t* seen_plan(void* user, const sw_tile_set_t* required, sw_residency_purpose_t purpose,
                             sw_residency_plan_t** out) {
  seen_t* s = (seen_t*)user;
  ++s->calls;
  s->last_purpose = purpose;
  SW_OK_(sw_tile_set_count(required, &s->last_count));
  return s->inner.plan(s->inner.user_data, required, purpose, out);
}
static void seen_outcome(void* user, const sw_residency_plan_t* plan, bool committed, const sw_tile_set_t* promoted,
                         const sw_tile_set_t* evicted) {
  seen_t* s = (seen_t*)user;
  s->inner.outcome(s->inner.user_data, plan, committed, promoted, evicted);
}

static void the_policies_are_consulted_with_the_experts_used(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  seen_t seen[3];
  sw_residency_policy_t vt[3];
  const sw_residency_policy_t* p[3];
  for (int w = 0; w < 3; ++w) {
    memset(&seen[w], 0, sizeof seen[w]);
    SW_OK_(sw_lru_policy_create(E, &seen[w].lru));
    SW_OK_(sw_lru_policy_as_residency_policy(seen[w].lru, &seen[w].inner));
    sw_residency_policy_init(&vt[w]);
    vt[w].user_data = &seen[w];
    vt[w].plan = seen_plan;
    vt[w].outcome = seen_outcome;
    p[w] = &vt[w];
  }
  ffn_fix_t f;
  make_ffn(&f, rt, SW_CARRIER_FILE, p);
  sw_tensor_t* x = x_tensor(rt, false);
  sw_tensor_t* ids = ids_tensor(rt, kIds);
  for (int call = 0; call < 2; ++call) sw_tensor_release(run(&f, x, ids, NULL, SW_UNARY_RELU));
  for (int w = 0; w < 3; ++w) {
    assert_int_equal(seen[w].calls, 2);
    assert_int_equal(seen[w].last_count, 4); /* experts 0, 1, 3 and 4 */
    assert_int_equal(seen[w].last_purpose, SW_PURPOSE_PROJECTION);
    sw_lru_stats_t st;
    sw_lru_stats_init(&st);
    SW_OK_(sw_lru_policy_stats(seen[w].lru, &st));
    assert_int_equal(st.requests, 2);
    assert_int_equal(st.misses, 4);
    assert_int_equal(st.hits, 4);
  }
  sw_tensor_release(ids);
  sw_tensor_release(x);
  free_ffn(&f);
  for (int w = 0; w < 3; ++w) {
    seen[w].inner.destroy(seen[w].inner.user_data);
    sw_lru_policy_release(seen[w].lru);
  }
}

/* An expert covered by an incomplete residency request in any of the three
 * refuses the call before anything is submitted: no tile of the others
 * moves. */
static void a_residency_request_refuses_the_call_with_nothing_changed(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  for (int w = 0; w < 3; ++w) {
    ffn_fix_t f;
    make_ffn(&f, rt, SW_CARRIER_FILE, NULL);
    sw_tensor_t* x = x_tensor(rt, false);
    sw_tensor_t* ids = ids_tensor(rt, kIds);
    SW_OK_(sw_testing_hold(rt, SW_FAULT_READ, 1));
    const int64_t c[3] = {0, 0, 3};
    sw_tile_set_t* set = NULL;
    SW_OK_(sw_tile_set_create(c, 1, 3, &set));
    sw_await_t* pr = NULL;
    SW_OK_(sw_tiled_promote_async(f.te[w], set, &pr));
    SW_OK_(sw_testing_wait_held(rt, 10LL * 1000 * 1000 * 1000));
    sw_await_t* a = NULL;
    SW_FAILS(start(&f, x, ids, NULL, NULL, &a), SW_ERROR_STATE, "incomplete residency request");
    SW_OK_(sw_testing_release_hold(rt));
    SW_OK_(sw_await_wait(pr, -1));
    for (int v = 0; v < 3; ++v)
      for (int64_t e = 0; e < E; ++e)
        assert_int_equal(location(&f, (which_t)v, e), v == w && e == 3 ? SW_TILE_PRIMARY : SW_TILE_SECONDARY);
    sw_await_release(pr);
    sw_tile_set_release(set);
    sw_tensor_release(ids);
    sw_tensor_release(x);
    free_ffn(&f);
  }
}

/* A read failing in any of the three fails the call with its error, and
 * nothing of the down request commits; the next call computes. A failing
 * computation fails it likewise, on either path. */
static void failures_reach_the_await(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_tensor_t* x = x_tensor(rt, false);
  sw_tensor_t* ids = ids_tensor(rt, kIds);
  double want[TOK * KK * H];
  expected(kIds, false, false, want);
  sw_expert_ffn_desc_t desc;
  sw_expert_ffn_desc_init(&desc);
  desc.activation = SW_UNARY_RELU;
  /* Four experts are read in each of the three: reads 1, 6 and 12 fall in
   * the gate's, the up's and the down's. */
  const uint64_t nth[3] = {1, 6, 12};
  for (int i = 0; i < 3; ++i) {
    ffn_fix_t f;
    make_ffn(&f, rt, SW_CARRIER_FILE, NULL);
    SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_READ, nth[i]));
    sw_await_t* a = NULL;
    SW_OK_(start(&f, x, ids, NULL, &desc, &a));
    SW_FAILS(sw_await_wait(a, -1), SW_ERROR_IO, "injected read failure");
    sw_await_release(a);
    for (int64_t e = 0; e < E; ++e) assert_int_equal(location(&f, DOWN, e), SW_TILE_SECONDARY);
    sw_tensor_t* y = run(&f, x, ids, NULL, SW_UNARY_RELU);
    tt_expect_values(y, want, TOK * KK * H);
    sw_tensor_release(y);
    free_ffn(&f);
  }
  for (int missing = 0; missing < 2; ++missing) {
    ffn_fix_t f;
    make_ffn(&f, rt, SW_CARRIER_HOST, NULL);
    sw_tensor_release(run(&f, x, ids, NULL, SW_UNARY_RELU));
    if (missing) set_residency(&f, UP, 4, false);
    SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_TILE_WORK, 2));
    sw_await_t* a = NULL;
    SW_OK_(start(&f, x, ids, NULL, &desc, &a));
    if (!missing) assert_int_equal(sw_async_status(a), SW_AWAIT_FAILED);
    SW_FAILS(sw_await_wait(a, -1), SW_ERROR_OUT_OF_MEMORY, "injected tile work failure");
    sw_await_release(a);
    sw_tensor_t* y = run(&f, x, ids, NULL, SW_UNARY_RELU);
    tt_expect_values(y, want, TOK * KK * H);
    sw_tensor_release(y);
    free_ffn(&f);
  }
  sw_tensor_release(ids);
  sw_tensor_release(x);
}

/* Every allocation of a call with every expert missing in the three, failed
 * in turn: the call or its await fails OUT_OF_MEMORY, the down experts stay
 * secondary, and a call after it gives the exact values; past the last
 * allocation the call succeeds. */
static void an_allocation_failure_anywhere_fails_the_call(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_tensor_t* x = x_tensor(rt, false);
  sw_tensor_t* ids = ids_tensor(rt, kIds);
  sw_tensor_t* gates = gates_tensor(rt);
  double want[TOK * H];
  expected(kIds, false, true, want);
  sw_expert_ffn_desc_t desc;
  sw_expert_ffn_desc_init(&desc);
  desc.activation = SW_UNARY_RELU;
  int failed = 0;
  for (uint64_t n = 1;; ++n) {
    ffn_fix_t f;
    make_ffn(&f, rt, SW_CARRIER_FILE, NULL);
    uint64_t before = 0, after = 0;
    SW_OK_(sw_testing_fault_counts(rt, SW_FAULT_ALLOCATION, NULL, &before));
    SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_ALLOCATION, n));
    sw_await_t* a = NULL;
    sw_error_t* e = start(&f, x, ids, gates, &desc, &a);
    if (!e) e = sw_await_wait(a, -1);
    SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_ALLOCATION, 0));
    SW_OK_(sw_testing_fault_counts(rt, SW_FAULT_ALLOCATION, NULL, &after));
    if (after == before) { /* past the last allocation: the call succeeded */
      if (e) fail_msg("no fault injected, yet the call failed: %s", sw_error_message(e));
      sw_tensor_t* o = tt_wait_result(a);
      tt_expect_values(o, want, TOK * H);
      sw_tensor_release(o);
      sw_await_release(a);
      free_ffn(&f);
      break;
    }
    if (!e) fail_msg("allocation %llu failed, yet the call succeeded", (unsigned long long)n);
    assert_int_equal(sw_error_code(e), SW_ERROR_OUT_OF_MEMORY);
    sw_error_free(e);
    sw_await_release(a);
    for (int64_t x_e = 0; x_e < E; ++x_e) assert_int_equal(location(&f, DOWN, x_e), SW_TILE_SECONDARY);
    sw_tensor_t* o = run(&f, x, ids, gates, SW_UNARY_RELU);
    tt_expect_values(o, want, TOK * H);
    sw_tensor_release(o);
    free_ffn(&f);
    ++failed;
  }
  assert_true(failed > 10);
  sw_tensor_release(gates);
  sw_tensor_release(ids);
  sw_tensor_release(x);
}

/* With grad mode on and x requiring grad the call runs the unfused layer:
 * the same values, and x's gradient equals the unfused layer's. In the
 * fused form too: its gate and up products are the two halves of the
 * gate_up expert matmul, sliced, and the gradient flows back through both. */
static void grad_mode_records_the_unfused_layer(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  ffn_fix_t f, ff;
  make_ffn(&f, rt, SW_CARRIER_HOST, NULL);
  make_ffn_as(&ff, rt, SW_CARRIER_HOST, NULL, true);
  sw_tensor_t* gates = gates_tensor(rt);
  double grads[3][TOK * H];
  /* 0: the unfused layer; 1: the call; 2: the call in the fused form. */
  for (int fused = 0; fused < 3; ++fused) {
    sw_tensor_t* x = x_tensor(rt, false);
    sw_tensor_t* ids = ids_tensor(rt, kIds);
    SW_OK_(sw_tensor_set_requires_grad(x, true));
    sw_tensor_t* out = NULL;
    if (fused) {
      out = run(fused == 2 ? &ff : &f, x, ids, gates, SW_UNARY_RELU);
    } else {
      sw_tensor_t* a = expert_matmul(&f, GATE, x, ids, SW_DTYPE_INVALID);
      sw_tensor_t* b = expert_matmul(&f, UP, x, ids, SW_DTYPE_INVALID);
      sw_tensor_t *r = NULL, *h = NULL;
      SW_OK_(sw_unary(SW_UNARY_RELU, a, &r));
      SW_OK_(sw_binary(SW_BINARY_MUL, r, b, &h));
      sw_matmul_desc_t md;
      sw_matmul_desc_init(&md);
      sw_await_t* aw = NULL;
      SW_OK_(sw_tiled_expert_matmul(f.te[DOWN], f.full[DOWN], h, ids, gates, &md, &aw));
      out = tt_wait_result(aw);
      sw_await_release(aw);
      sw_tensor_release(h);
      sw_tensor_release(r);
      sw_tensor_release(b);
      sw_tensor_release(a);
    }
    double want[TOK * H];
    expected(kIds, false, true, want);
    tt_expect_values(out, want, TOK * H);
    double ones[TOK * H];
    for (int i = 0; i < TOK * H; ++i) ones[i] = 1.0 + (i % 3);
    const int64_t oshape[2] = {TOK, H};
    sw_tensor_t* cot = sw_test_tensor(rt, SW_DTYPE_F32, oshape, 2, ones);
    SW_OK_(sw_backward(out, cot, false));
    sw_tensor_release(cot);
    sw_tensor_t* g = NULL;
    SW_OK_(sw_tensor_grad(x, &g));
    assert_non_null(g);
    int64_t n = 0;
    double* v = sw_test_values(g, &n);
    assert_int_equal(n, TOK * H);
    memcpy(grads[fused], v, sizeof grads[fused]);
    free(v);
    sw_tensor_release(g);
    sw_tensor_release(out);
    sw_tensor_release(ids);
    sw_tensor_release(x);
  }
  for (int i = 0; i < TOK * H; ++i) {
    assert_true(grads[0][i] == grads[1][i]);
    assert_true(grads[0][i] == grads[2][i]);
  }
  sw_tensor_release(gates);
  free_ffn(&ff);
  free_ffn(&f);
}

/* ---- errors --------------------------------------------------------------- */

static void bad_arguments_change_nothing(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  ffn_fix_t f;
  make_ffn(&f, rt, SW_CARRIER_HOST, NULL);
  sw_tensor_t* x = x_tensor(rt, false);
  sw_tensor_t* ids = ids_tensor(rt, kIds);
  sw_tensor_t* gates = gates_tensor(rt);
  sw_await_t* a = NULL;
  sw_expert_ffn_desc_t desc;
  sw_expert_ffn_desc_init(&desc);
  assert_int_equal(desc.activation, SW_UNARY_SILU);
  assert_int_equal(desc.out_dtype, SW_DTYPE_INVALID);

  const int64_t bad_ids[TOK * KK] = {0, 3, 1, 3, 5, 1};
  sw_tensor_t* out_of_range = ids_tensor(rt, bad_ids);
  SW_FAILS(start(&f, x, out_of_range, NULL, NULL, &a), SW_ERROR_INDEX,
           "expert_ffn: expert id 5 at (token 1, slot 1) is outside [0, 5)");
  sw_tensor_release(out_of_range);
  const int64_t x64_shape[2] = {TOK, H};
  double zeros[TOK * KK * H] = {0};
  sw_tensor_t* x64 = sw_test_tensor(rt, SW_DTYPE_F64, x64_shape, 2, zeros);
  SW_FAILS(start(&f, x64, ids, NULL, NULL, &a), SW_ERROR_TYPE, "x is f64, the experts f32");
  sw_tensor_release(x64);
  SW_FAILS(start(&f, x, gates, NULL, NULL, &a), SW_ERROR_TYPE, "ids must be i32 or i64");
  SW_FAILS(start(&f, x, ids, ids, NULL, &a), SW_ERROR_TYPE, "gates must be a float tensor");
  const int64_t short_shape[2] = {TOK, H - 1};
  sw_tensor_t* short_x = sw_test_tensor(rt, SW_DTYPE_F32, short_shape, 2, zeros);
  SW_FAILS(start(&f, short_x, ids, NULL, NULL, &a), SW_ERROR_VALUE,
           "x must be (tokens, H) = (3, 3) or (tokens, k, H) = (3, 2, 3), not (3, 2)");
  sw_tensor_release(short_x);
  SW_FAILS(start(&f, x, ids, x, NULL, &a), SW_ERROR_VALUE, "gates must be (tokens, k) = (3, 2), not (3, 3)");
  desc.activation = SW_UNARY_EXP;
  SW_FAILS(start(&f, x, ids, NULL, &desc, &a), SW_ERROR_VALUE,
           "the activation must be silu, gelu, relu, sigmoid or tanh, not exp");
  desc.activation = (sw_unary_op_t)99;
  SW_FAILS(start(&f, x, ids, NULL, &desc, &a), SW_ERROR_VALUE, "unknown sw_unary_op_t 99");
  desc.activation = SW_UNARY_SILU;
  desc.out_dtype = SW_DTYPE_F16;
  SW_FAILS(start(&f, x, ids, NULL, &desc, &a), SW_ERROR_TYPE, "the result of f32 experts is f32, not f16");
  desc.out_dtype = SW_DTYPE_INVALID;
  desc.struct_size = 3;
  SW_FAILS(start(&f, x, ids, NULL, &desc, &a), SW_ERROR_VALUE, "struct_size 3");
  SW_FAILS(start(&f, x, ids, NULL, NULL, NULL), SW_ERROR_VALUE, "out_await");
  /* The three swapped: up where down belongs is the wrong geometry. */
  SW_FAILS(sw_tiled_expert_ffn(f.te[GATE], f.full[GATE], f.te[UP], f.full[UP], f.te[UP], f.full[UP], x, ids, NULL,
                               NULL, &a),
           SW_ERROR_VALUE, "the down experts must be grid (1, 1, 5) and tile (4, 3, 1)");
  SW_FAILS(sw_tiled_expert_ffn(f.te[GATE], f.full[GATE], f.te[DOWN], f.full[DOWN], f.te[DOWN], f.full[DOWN], x, ids,
                               NULL, NULL, &a),
           SW_ERROR_VALUE, "the up experts must have the gate experts' geometry");
  SW_FAILS(sw_tiled_expert_ffn(f.te[GATE], f.full[UP], f.te[UP], f.full[UP], f.te[DOWN], f.full[DOWN], x, ids, NULL,
                               NULL, &a),
           SW_ERROR_TYPE, NULL);
  SW_FAILS(sw_tiled_expert_ffn(f.te[GATE], f.full[GATE], f.te[UP], f.full[UP], f.te[DOWN], NULL, x, ids, NULL, NULL,
                               &a),
           SW_ERROR_TYPE, "down_experts");
  /* A view of the experts that is not the full tensor itself. */
  sw_tensor_t* view = tt_tensor_over(f.te[UP], 0, "(3,4,5):(4,1,12)");
  SW_FAILS(sw_tiled_expert_ffn(f.te[GATE], f.full[GATE], f.te[UP], view, f.te[DOWN], f.full[DOWN], x, ids, NULL, NULL,
                               &a),
           SW_ERROR_VALUE, "the up experts tensor must be the TiledEvictable's full tensor");
  sw_tensor_release(view);
  /* Experts of another dtype. */
  ffn_fix_t g;
  make_irregular(&g, rt, SW_DTYPE_BF16);
  SW_FAILS(sw_tiled_expert_ffn(f.te[GATE], f.full[GATE], f.te[UP], f.full[UP], g.te[DOWN], g.full[DOWN], x, ids, NULL,
                               NULL, &a),
           SW_ERROR_VALUE, "the down experts must be grid (1, 1, 5)");
  free_ffn(&g);
  for (int w = 0; w < 3; ++w)
    for (int64_t e = 0; e < E; ++e) assert_int_equal(location(&f, (which_t)w, e), SW_TILE_SECONDARY);
  SW_OK_(sw_carrier_dispose(f.te[DOWN]));
  SW_FAILS(start(&f, x, ids, NULL, NULL, &a), SW_ERROR_STATE, NULL);
  for (int w = 0; w < 2; ++w)
    for (int64_t e = 0; e < E; ++e) assert_int_equal(location(&f, (which_t)w, e), SW_TILE_SECONDARY);
  sw_tensor_release(gates);
  sw_tensor_release(ids);
  sw_tensor_release(x);
  free_ffn(&f);
}

/* The fused form's own errors, before any work and with nothing changed:
 * exactly one of up and up_experts NULL (VALUE naming it), a gate_up tile
 * whose second extent is odd, a gate_up whose H or F disagrees with down's,
 * an up given with a gate_up, and gate_up and down of different dtypes. */
static void the_fused_form_refuses_bad_arguments(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  ffn_fix_t f, ff;
  make_ffn(&f, rt, SW_CARRIER_HOST, NULL);
  make_ffn_as(&ff, rt, SW_CARRIER_HOST, NULL, true);
  sw_tensor_t* x = x_tensor(rt, false);
  sw_tensor_t* ids = ids_tensor(rt, kIds);
  sw_await_t* a = NULL;
  SW_FAILS(sw_tiled_expert_ffn(ff.te[GATE], ff.full[GATE], f.te[UP], NULL, ff.te[DOWN], ff.full[DOWN], x, ids, NULL,
                               NULL, &a),
           SW_ERROR_VALUE, "up_experts is NULL while up is not");
  SW_FAILS(sw_tiled_expert_ffn(ff.te[GATE], ff.full[GATE], NULL, f.full[UP], ff.te[DOWN], ff.full[DOWN], x, ids, NULL,
                               NULL, &a),
           SW_ERROR_VALUE, "up is NULL while up_experts is not");
  /* The down experts, tile (4, 3, 1), as a gate_up: an odd second extent. */
  SW_FAILS(sw_tiled_expert_ffn(f.te[DOWN], f.full[DOWN], NULL, NULL, ff.te[DOWN], ff.full[DOWN], x, ids, NULL, NULL,
                               &a),
           SW_ERROR_VALUE,
           "expert_ffn: the gate_up experts (gate, with up null: the fused form) must be tile (H, 2F, 1), the gate's F "
           "output features then the up's; they have tile (4, 3, 1), an odd second extent");
  /* A gate's (3, 4) as a gate_up: F = 2, not down's 4. */
  SW_FAILS(sw_tiled_expert_ffn(f.te[GATE], f.full[GATE], NULL, NULL, ff.te[DOWN], ff.full[DOWN], x, ids, NULL, NULL,
                               &a),
           SW_ERROR_VALUE,
           "the down experts must be grid (1, 1, 5) and tile (2, 3, 1) (a half of the gate_up's (H, 2F), transposed); "
           "they have grid (1, 1, 5) and tile (4, 3, 1)");
  /* Down's H and F swapped (the up experts, (3, 4)). */
  SW_FAILS(sw_tiled_expert_ffn(ff.te[GATE], ff.full[GATE], NULL, NULL, f.te[UP], f.full[UP], x, ids, NULL, NULL, &a),
           SW_ERROR_VALUE, "the down experts must be grid (1, 1, 5) and tile (4, 3, 1)");
  /* An up beside a gate_up: three carriers of which the gate is (3, 8). */
  SW_FAILS(sw_tiled_expert_ffn(ff.te[GATE], ff.full[GATE], f.te[UP], f.full[UP], ff.te[DOWN], ff.full[DOWN], x, ids,
                               NULL, NULL, &a),
           SW_ERROR_VALUE, "the up experts must have the gate experts' geometry, grid (1, 1, 5) and tile (3, 8, 1)");
  /* A bf16 down of the right geometry. */
  sw_carrier_t* p = tt_carrier(rt, SW_CARRIER_CPU, SW_DTYPE_BF16, 0);
  sw_carrier_t* s = tt_carrier(rt, SW_CARRIER_HOST, SW_DTYPE_BF16, (size_t)(E * F * H));
  const int64_t grid[3] = {1, 1, E}, tile[3] = {F, H, 1};
  sw_carrier_t* bf_down = NULL;
  SW_OK_(sw_tiled_create(p, s, grid, tile, 3, NULL, &bf_down));
  sw_tensor_t* bf_full = NULL;
  SW_OK_(sw_tiled_full_tensor(bf_down, &bf_full));
  SW_FAILS(sw_tiled_expert_ffn(ff.te[GATE], ff.full[GATE], NULL, NULL, bf_down, bf_full, x, ids, NULL, NULL, &a),
           SW_ERROR_TYPE, "expert_ffn: the experts must share one dtype; gate_up f32, down bf16");
  sw_tensor_release(bf_full);
  sw_carrier_release(bf_down);
  sw_carrier_release(s);
  sw_carrier_release(p);
  for (int w = 0; w < 3; ++w)
    for (int64_t e = 0; e < E; ++e) {
      assert_int_equal(location(&f, (which_t)w, e), SW_TILE_SECONDARY);
      if (has(&ff, w)) assert_int_equal(location(&ff, (which_t)w, e), SW_TILE_SECONDARY);
    }
  sw_tensor_release(ids);
  sw_tensor_release(x);
  free_ffn(&ff);
  free_ffn(&f);
}

/* ---- atomicity: a failed call commits nothing, and nothing of it is left
 * once its await is terminal ---------------------------------------------- */

typedef struct ffn_state_t {
  sw_tile_location_t loc[3][E];
  bool dirty[3][E];
  uint64_t version[3];
  sw_lru_stats_t stats[3];
} ffn_state_t;

static void snapshot(const ffn_fix_t* f, sw_lru_policy_t* const* lru, ffn_state_t* s) {
  memset(s, 0, sizeof *s);
  for (int w = 0; w < 3; ++w) {
    if (!has(f, w)) continue; /* the fused form's up: zeros */
    for (int64_t e = 0; e < E; ++e) {
      const int64_t c[3] = {0, 0, e};
      sw_tile_state_t st;
      sw_tile_state_init(&st);
      SW_OK_(sw_tiled_tile_state(f->te[w], c, 3, &st));
      s->loc[w][e] = st.location;
      s->dirty[w][e] = st.dirty;
    }
    SW_OK_(sw_carrier_version(f->te[w], &s->version[w]));
    sw_lru_stats_init(&s->stats[w]);
    if (lru) SW_OK_(sw_lru_policy_stats(lru[w], &s->stats[w]));
  }
}

static void expect_same_state(const ffn_state_t* want, const ffn_state_t* got) {
  for (int w = 0; w < 3; ++w) {
    for (int64_t e = 0; e < E; ++e) {
      assert_int_equal(got->loc[w][e], want->loc[w][e]);
      assert_int_equal(got->dirty[w][e], want->dirty[w][e]);
    }
    assert_int_equal(got->version[w], want->version[w]);
    assert_int_equal(got->stats[w].requests, want->stats[w].requests);
    assert_int_equal(got->stats[w].hits, want->stats[w].hits);
    assert_int_equal(got->stats[w].misses, want->stats[w].misses);
    assert_int_equal(got->stats[w].promoted, want->stats[w].promoted);
    assert_int_equal(got->stats[w].evicted, want->stats[w].evicted);
    assert_int_equal(got->stats[w].transient, want->stats[w].transient);
  }
}

/* The three (or, `fused`, gate_up and down) over the file tier, each under
 * an LRU budget of 3 of the 5 experts, with gate expert 0, up expert 2 and
 * down expert 3 primary at the start: a call over experts 0, 1, 3 and 4
 * hits, misses, evicts and reads some experts for itself alone in each. */
static void make_budgeted(ffn_fix_t* f, sw_runtime_t* rt, sw_lru_policy_t** lru, bool fused) {
  sw_residency_policy_t vt[3];
  const sw_residency_policy_t* p[3];
  for (int w = 0; w < 3; ++w) {
    SW_OK_(sw_lru_policy_create(3, &lru[w]));
    p[w] = NULL;
    if (fused && w == UP) continue; /* no TiledEvictable to take it over: lru[UP] stays unused */
    SW_OK_(sw_lru_policy_as_residency_policy(lru[w], &vt[w]));
    p[w] = &vt[w];
  }
  make_ffn_as(f, rt, SW_CARRIER_FILE, p, fused);
  set_residency(f, GATE, 0, true);
  if (!fused) set_residency(f, UP, 2, true);
  set_residency(f, DOWN, 3, true);
}

static void free_budgeted(ffn_fix_t* f, sw_lru_policy_t** lru) {
  free_ffn(f);
  for (int w = 0; w < 3; ++w) sw_lru_policy_release(lru[w]);
}

static uint64_t injected(sw_runtime_t* rt, sw_fault_kind_t kind) {
  uint64_t n = 0;
  SW_OK_(sw_testing_fault_counts(rt, kind, NULL, &n));
  return n;
}

/* Every fault point of a call, failed in turn (each allocation, each
 * storage read, each tile work job): the call or its await fails with the
 * injected error, and once the await is terminal nothing of the call is
 * left. Right after it every tile state, version and policy statistic is
 * as before the call, and each TiledEvictable can be disposed at once (no
 * request of the call is pending); on a second run of the same point, a
 * retry leaves exactly what one clean call leaves (the failed call counted
 * no request, consumed nothing). Past the last point the call succeeds. */
static void sweep_failed_calls(sw_runtime_t* rt, bool record, bool fused) {
  sw_tensor_t* x = x_tensor(rt, false);
  if (record) SW_OK_(sw_tensor_set_requires_grad(x, true)); /* the unfused layer, recorded */
  sw_tensor_t* ids = ids_tensor(rt, kIds);
  sw_tensor_t* gates = gates_tensor(rt);
  double want[TOK * H];
  expected(kIds, false, true, want);
  sw_expert_ffn_desc_t desc;
  sw_expert_ffn_desc_init(&desc);
  desc.activation = SW_UNARY_RELU;
  /* What one clean call leaves. */
  ffn_state_t clean;
  {
    ffn_fix_t f;
    sw_lru_policy_t* lru[3];
    make_budgeted(&f, rt, lru, fused);
    sw_tensor_t* o = run(&f, x, ids, gates, SW_UNARY_RELU);
    tt_expect_values(o, want, TOK * H);
    sw_tensor_release(o);
    snapshot(&f, lru, &clean);
    free_budgeted(&f, lru);
  }
  const sw_fault_kind_t kinds[3] = {SW_FAULT_ALLOCATION, SW_FAULT_READ, SW_FAULT_TILE_WORK};
  const sw_error_code_t codes[3] = {SW_ERROR_OUT_OF_MEMORY, SW_ERROR_IO, SW_ERROR_OUT_OF_MEMORY};
  for (int k = 0; k < 3; ++k) {
    int points = 0;
    for (uint64_t n = 1;; ++n) {
      bool done = false;
      for (int pass = 0; pass < 2 && !done; ++pass) {
        ffn_fix_t f;
        sw_lru_policy_t* lru[3];
        make_budgeted(&f, rt, lru, fused);
        ffn_state_t before, after;
        snapshot(&f, lru, &before);
        const uint64_t injected_before = injected(rt, kinds[k]);
        SW_OK_(sw_testing_inject_fault(rt, kinds[k], n));
        sw_await_t* a = NULL;
        sw_error_t* e = start(&f, x, ids, gates, &desc, &a);
        if (!e) e = sw_await_wait(a, -1);
        SW_OK_(sw_testing_inject_fault(rt, kinds[k], 0));
        if (injected(rt, kinds[k]) == injected_before) { /* past the last point */
          if (e) fail_msg("no fault injected, yet the call failed: %s", sw_error_message(e));
          sw_tensor_t* o = tt_wait_result(a);
          tt_expect_values(o, want, TOK * H);
          sw_tensor_release(o);
          sw_await_release(a);
          free_budgeted(&f, lru);
          done = true;
          break;
        }
        if (!e) fail_msg("fault %d at point %llu injected, yet the call succeeded", (int)kinds[k], (unsigned long long)n);
        assert_int_equal(sw_error_code(e), codes[k]);
        assert_non_null(strstr(sw_error_message(e), "injected"));
        sw_error_free(e);
        sw_await_release(a);
        snapshot(&f, lru, &after);
        expect_same_state(&before, &after);
        if (pass == 0) {
          for (int w = 0; w < 3; ++w)
            if (has(&f, w)) SW_OK_(sw_carrier_dispose(f.te[w]));
        } else {
          sw_tensor_t* o = run(&f, x, ids, gates, SW_UNARY_RELU);
          tt_expect_values(o, want, TOK * H);
          sw_tensor_release(o);
          snapshot(&f, lru, &after);
          expect_same_state(&clean, &after);
        }
        free_budgeted(&f, lru);
      }
      if (done) break;
      ++points;
    }
    assert_true(points >= (kinds[k] == SW_FAULT_READ ? 6 : 3));
  }
  sw_tensor_release(gates);
  sw_tensor_release(ids);
  sw_tensor_release(x);
}

static void a_failed_call_changes_nothing_after_its_await(void** state) {
  sweep_failed_calls((sw_runtime_t*)*state, false, false);
}

/* The same with grad mode on (x requires grad): the call runs the unfused
 * layer's three expert matmuls, recorded, as one step that commits as a
 * whole. */
static void a_failed_recorded_call_changes_nothing(void** state) {
  sweep_failed_calls((sw_runtime_t*)*state, true, false);
}

/* The same in the fused form: its two requests (gate_up, down) commit
 * together or not at all, and nothing of a failed call is left once its
 * await is terminal; recorded, its two expert matmuls are one step. */
static void a_failed_fused_call_changes_nothing_after_its_await(void** state) {
  sweep_failed_calls((sw_runtime_t*)*state, false, true);
}

static void a_failed_recorded_fused_call_changes_nothing(void** state) {
  sweep_failed_calls((sw_runtime_t*)*state, true, true);
}

/* The gate request's first read fails while the up request's first read
 * is held back: the call's await is not terminal while a request of the
 * call is still moving, however early the failure came; once it is, the
 * up request has committed nothing either and the three can be disposed.
 * Then the same with the gate's first tile allocation failing at its start:
 * the up and down requests, started in the same turn, fail before reading. */
static void a_failed_call_waits_for_every_request(void** state) {
  sw_runtime_t* rt = (sw_runtime_t*)*state;
  sw_tensor_t* x = x_tensor(rt, false);
  sw_tensor_t* ids = ids_tensor(rt, kIds);
  sw_expert_ffn_desc_t desc;
  sw_expert_ffn_desc_init(&desc);
  desc.activation = SW_UNARY_RELU;
  {
    ffn_fix_t f;
    sw_lru_policy_t* lru[3];
    make_budgeted(&f, rt, lru, false);
    ffn_state_t before, after;
    snapshot(&f, lru, &before);
    /* The gate reads experts 1, 3 and 4 (reads 1-3), the up 0, 1, 3 and 4
     * (reads 4-7). */
    SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_READ, 1));
    SW_OK_(sw_testing_hold(rt, SW_FAULT_READ, 4));
    sw_await_t* a = NULL;
    SW_OK_(start(&f, x, ids, NULL, &desc, &a));
    SW_OK_(sw_testing_wait_held(rt, 5000000000ll));
    SW_FAILS(sw_await_wait(a, 100000000ll), SW_ERROR_TIMEOUT, "");
    assert_int_equal(sw_async_status(a), SW_AWAIT_PENDING);
    SW_OK_(sw_testing_release_hold(rt));
    SW_FAILS(sw_await_wait(a, -1), SW_ERROR_IO, "injected read failure");
    sw_await_release(a);
    snapshot(&f, lru, &after);
    expect_same_state(&before, &after);
    for (int w = 0; w < 3; ++w) SW_OK_(sw_carrier_dispose(f.te[w]));
    free_budgeted(&f, lru);
  }
  for (uint64_t n = 1;; ++n) {
    ffn_fix_t f;
    sw_lru_policy_t* lru[3];
    make_budgeted(&f, rt, lru, false);
    ffn_state_t before, after;
    snapshot(&f, lru, &before);
    SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_ALLOCATION, n));
    SW_OK_(sw_testing_hold(rt, SW_FAULT_READ, 1));
    sw_await_t* a = NULL;
    sw_error_t* e = start(&f, x, ids, NULL, &desc, &a);
    if (e) { /* an allocation of the call itself, before any request */
      assert_int_equal(sw_error_code(e), SW_ERROR_OUT_OF_MEMORY);
      sw_error_free(e);
      SW_OK_(sw_testing_hold(rt, SW_FAULT_READ, 0));
      SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_ALLOCATION, 0));
      free_budgeted(&f, lru);
      continue;
    }
    SW_FAILS(sw_await_wait(a, 5000000000ll), SW_ERROR_OUT_OF_MEMORY, "injected");
    sw_await_release(a);
    /* No request of the call read anything: the hold caught nothing. */
    SW_FAILS(sw_testing_release_hold(rt), SW_ERROR_STATE, "no transfer is held");
    SW_OK_(sw_testing_hold(rt, SW_FAULT_READ, 0));
    SW_OK_(sw_testing_inject_fault(rt, SW_FAULT_ALLOCATION, 0));
    snapshot(&f, lru, &after);
    expect_same_state(&before, &after);
    for (int w = 0; w < 3; ++w) SW_OK_(sw_carrier_dispose(f.te[w]));
    free_budgeted(&f, lru);
    break;
  }
  sw_tensor_release(ids);
  sw_tensor_release(x);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(values_from_every_tier, sw_test_runtime_setup, sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(every_mix_of_resident_and_missing, sw_test_runtime_setup,
                                      sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(lru_budgets_hold_across_calls, sw_test_runtime_setup, sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(silu_equals_the_unfused_layer_bit_for_bit, sw_test_runtime_setup,
                                      sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(the_fused_form_equals_three_carriers_bit_for_bit, sw_test_runtime_setup,
                                      sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(a_resident_call_is_terminal_on_return, sw_test_runtime_setup,
                                      sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(a_pending_call_pins_its_experts, sw_test_runtime_setup,
                                      sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(the_policies_are_consulted_with_the_experts_used, sw_test_runtime_setup,
                                      sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(a_residency_request_refuses_the_call_with_nothing_changed,
                                      sw_test_runtime_setup, sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(failures_reach_the_await, sw_test_runtime_setup, sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(an_allocation_failure_anywhere_fails_the_call, sw_test_runtime_setup,
                                      sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(a_failed_call_changes_nothing_after_its_await, sw_test_runtime_setup,
                                      sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(a_failed_call_waits_for_every_request, sw_test_runtime_setup,
                                      sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(a_failed_recorded_call_changes_nothing, sw_test_runtime_setup,
                                      sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(a_failed_fused_call_changes_nothing_after_its_await, sw_test_runtime_setup,
                                      sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(a_failed_recorded_fused_call_changes_nothing, sw_test_runtime_setup,
                                      sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(grad_mode_records_the_unfused_layer, sw_test_runtime_setup,
                                      sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(bad_arguments_change_nothing, sw_test_runtime_setup, sw_test_runtime_teardown),
      cmocka_unit_test_setup_teardown(the_fused_form_refuses_bad_arguments, sw_test_runtime_setup,
                                      sw_test_runtime_teardown),
  };
  return sw_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
