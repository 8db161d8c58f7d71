/*
 * MoE expert offloading with StrideWeave: the main demo.
 *
 * A synthetic mixture-of-experts feed-forward layer keeps its expert weights
 * (experts x dim x dim) in one TiledEvictable, one expert per tile. The
 * secondary tier (a file, zstd-compressed memory or host memory) holds every
 * expert; the primary tier (CPU memory, or with --compute vulkan the device
 * memory of a Vulkan device, where the experts are gathered and multiplied)
 * holds at most a budget of them. A
 * router picks top-k experts per token batch from a skewed, repeatable
 * distribution. The built-in LRU policy decides what stays resident and
 * prefetches the next batch's experts, and the projection of batch b+1's
 * experts runs while batch b computes.
 *
 * The same router sequence then runs with every expert resident and with
 * naive synchronous loading (project, wait, compute, evict), and the final
 * table compares them. With --train the layer is trained instead: backward
 * through the projection gives tile-sparse expert gradients, an SGD step adds
 * them back into the tiles in place, and evicted dirty experts are verified
 * after reloading them from the secondary tier.
 *
 *   moe_offload [--experts 64] [--dim 1024] [--topk 4] [--tokens 32]
 *               [--batches 48] [--tier file|zstd|host] [--budget 0.25]
 *               [--dtype f32|bf16] [--policy lru|none] [--train]
 *               [--compute cpu|vulkan] [--csv FILE] [--dir DIR] [--quiet]
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "strideweave/strideweave.h"

#define CHECK(expr)                                                                                   \
  do {                                                                                                \
    sw_error_t* e_ = (expr);                                                                          \
    if (e_) {                                                                                         \
      fprintf(stderr, "moe_offload: %s failed: %s: %s\n", #expr, sw_error_code_name(sw_error_code(e_)), \
              sw_error_message(e_));                                                                  \
      exit(1);                                                                                        \
    }                                                                                                 \
  } while (0)

typedef struct options {
  int experts, dim, topk, tokens, batches;
  const char* tier;
  double budget;
  sw_dtype_t dtype;
  int use_policy, train, quiet;
  const char* csv;
  const char* dir;
  sw_device_t* device; /* --compute vulkan: the primary tier's device; NULL for CPU */
} options;

typedef struct run_stats {
  const char* name;
  double seconds, wait_seconds, checksum;
  uint64_t hits, misses, promoted, evicted;
  double first_loss, last_loss;
} run_stats;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A small deterministic generator (xorshift64*), so every run is repeatable. */
static uint64_t rng_state;
static double rng_uniform(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (double)((rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

/* Router: top-k distinct experts per batch, Zipf-skewed over a fixed shuffle. */
static int* route_all(const options* o) {
  int* order = malloc(sizeof(int) * o->experts);
  double* weight = malloc(sizeof(double) * o->experts);
  rng_state = 0x5eed1234abcdull;
  for (int e = 0; e < o->experts; ++e) order[e] = e;
  for (int e = o->experts - 1; e > 0; --e) {
    int j = (int)(rng_uniform() * (e + 1));
    int t = order[e];
    order[e] = order[j];
    order[j] = t;
  }
  double total = 0;
  for (int r = 0; r < o->experts; ++r) total += weight[r] = 1.0 / pow(r + 1.0, 1.1);
  int* picks = malloc(sizeof(int) * o->batches * o->topk);
  for (int b = 0; b < o->batches; ++b) {
    int* p = picks + b * o->topk;
    for (int k = 0; k < o->topk;) {
      double u = rng_uniform() * total, acc = 0;
      int r = 0;
      while (r < o->experts - 1 && (acc += weight[r]) < u) ++r;
      int e = order[r], dup = 0;
      for (int j = 0; j < k; ++j) dup |= p[j] == e;
      if (!dup) p[k++] = e;
    }
  }
  free(order);
  free(weight);
  return picks;
}

static sw_tile_selection_t* selection_for(const options* o, const int* experts) {
  int64_t* ax0 = malloc(sizeof(int64_t) * o->topk);
  for (int k = 0; k < o->topk; ++k) ax0[k] = experts[k];
  const int64_t zero = 0;
  const int64_t* axes[3] = {ax0, &zero, &zero};
  const size_t counts[3] = {(size_t)o->topk, 1, 1};
  sw_tile_selection_t* sel = NULL;
  CHECK(sw_tile_selection_create(axes, counts, 3, &sel));
  free(ax0);
  return sel;
}

static sw_tile_set_t* tile_set_for(const options* o, const int* experts) {
  int64_t* coords = calloc((size_t)o->topk * 3, sizeof(int64_t));
  for (int k = 0; k < o->topk; ++k) coords[k * 3] = experts[k];
  sw_tile_set_t* set = NULL;
  CHECK(sw_tile_set_create(coords, (size_t)o->topk, 3, &set));
  free(coords);
  return set;
}

/* The secondary tier holding every expert, tile-major: expert e occupies
 * slots [e*dim*dim, (e+1)*dim*dim), values first mode fastest. */
static uint16_t f32_to_bf16(float v) { /* round to nearest even */
  uint32_t bits;
  memcpy(&bits, &v, 4);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

static float bf16_to_f32(uint16_t h) {
  const uint32_t bits = (uint32_t)h << 16;
  float v;
  memcpy(&v, &bits, 4);
  return v;
}

static sw_carrier_t* make_secondary(sw_runtime_t* rt, const options* o, uint64_t seed) {
  const size_t tile = (size_t)o->dim * o->dim, total = tile * o->experts;
  sw_carrier_t* c = NULL;
  if (strcmp(o->tier, "file") == 0) {
    sw_file_carrier_desc_t d;
    sw_file_carrier_desc_init(&d);
    d.directory = o->dir;
    CHECK(sw_carrier_create_file(rt, o->dtype, total, &d, &c));
  } else if (strcmp(o->tier, "zstd") == 0) {
    sw_zstd_carrier_desc_t d;
    sw_zstd_carrier_desc_init(&d);
    d.frame_elements = tile;
    CHECK(sw_carrier_create_zstd(rt, o->dtype, total, &d, &c));
  } else {
    CHECK(sw_carrier_create_host(rt, o->dtype, total, &c));
  }
  const size_t es = sw_dtype_size(o->dtype);
  unsigned char* buf = malloc(tile * es);
  rng_state = seed;
  const double scale = 1.0 / sqrt((double)o->dim);
  for (int e = 0; e < o->experts; ++e) {
    for (size_t i = 0; i < tile; ++i) {
      float v = (float)((rng_uniform() * 2.0 - 1.0) * scale);
      if (o->dtype == SW_DTYPE_F32) {
        memcpy(buf + i * 4, &v, 4);
      } else {
        const uint16_t h = f32_to_bf16(v);
        memcpy(buf + i * 2, &h, 2);
      }
    }
    CHECK(sw_carrier_write(c, (size_t)e * tile, tile, buf));
  }
  free(buf);
  return c;
}

/* The empty primary tier: CPU memory, or the Vulkan device's. */
static sw_carrier_t* make_primary(sw_runtime_t* rt, const options* o) {
  sw_carrier_t* c = NULL;
  if (o->device)
    CHECK(sw_carrier_create_vulkan(rt, o->device, o->dtype, 0, &c));
  else
    CHECK(sw_carrier_create_cpu(rt, o->dtype, 0, &c));
  return c;
}

/* `t` (a new CPU tensor, taken) moved to the primary tier's compute carrier,
 * where the projected experts are: ops take operands of one carrier kind. */
static sw_tensor_t* on_compute(sw_runtime_t* rt, const options* o, sw_tensor_t* t) {
  if (!o->device) return t;
  sw_dtype_t dtype;
  CHECK(sw_tensor_dtype(t, &dtype));
  sw_carrier_t* c = NULL;
  CHECK(sw_carrier_create_vulkan(rt, o->device, dtype, 0, &c));
  sw_await_t* a = NULL;
  CHECK(sw_move_async(t, c, &a));
  CHECK(sw_await_wait(a, -1));
  sw_tensor_t* out = NULL;
  CHECK(sw_await_result(a, &out));
  sw_await_release(a);
  sw_carrier_release(c);
  sw_tensor_release(t);
  return out;
}

/* factor * g. The CPU carrier's elementwise ops take f32 and f64, so a bf16
 * gradient is scaled on the host in f32 and rounded back once. */
static sw_tensor_t* scaled(sw_runtime_t* rt, const options* o, sw_tensor_t* g, double factor) {
  sw_tensor_t* out = NULL;
  sw_dtype_t dtype;
  CHECK(sw_tensor_dtype(g, &dtype));
  if (dtype != SW_DTYPE_BF16) {
    CHECK(sw_mul_scalar(g, factor, &out));
    return out;
  }
  int64_t n = 0, ext[8];
  size_t rank = 0;
  CHECK(sw_tensor_numel(g, &n));
  CHECK(sw_tensor_rank(g, &rank));
  CHECK(sw_tensor_shape(g, ext, 8));
  uint16_t* h = malloc((size_t)n * 2);
  CHECK(sw_tensor_read(g, h, (size_t)n * 2));
  for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16((float)(bf16_to_f32(h[i]) * factor));
  CHECK(sw_tensor_from_data(rt, SW_DTYPE_BF16, ext, rank, h, &out));
  free(h);
  return on_compute(rt, o, out);
}

static sw_tensor_t* make_tokens(sw_runtime_t* rt, const options* o, int batch) {
  /* x: (1, dim, tokens), broadcast over the selected experts. */
  const size_t n = (size_t)o->dim * o->tokens;
  float* v = malloc(n * sizeof(float));
  rng_state = 0x70c3e5ull + (uint64_t)batch * 7919u;
  for (size_t i = 0; i < n; ++i) v[i] = (float)(rng_uniform() * 2.0 - 1.0);
  const int64_t ext[3] = {1, o->dim, o->tokens};
  sw_tensor_t* t = NULL;
  sw_tensor_t* f32 = NULL;
  CHECK(sw_tensor_from_data(rt, SW_DTYPE_F32, ext, 3, v, &f32));
  if (o->dtype == SW_DTYPE_F32) {
    t = f32;
  } else {
    uint16_t* h = malloc(n * 2);
    for (size_t i = 0; i < n; ++i) h[i] = f32_to_bf16(v[i]);
    CHECK(sw_tensor_from_data(rt, SW_DTYPE_BF16, ext, 3, h, &t));
    free(h);
    sw_tensor_release(f32);
  }
  free(v);
  return on_compute(rt, o, t);
}

static sw_tensor_t* make_target(sw_runtime_t* rt, const options* o, int batch) {
  const size_t n = (size_t)o->dim * o->tokens;
  float* v = malloc(n * sizeof(float));
  rng_state = 0x7a26e7ull + (uint64_t)batch * 104729u;
  for (size_t i = 0; i < n; ++i) v[i] = (float)(rng_uniform() - 0.5);
  const int64_t ext[2] = {o->dim, o->tokens};
  sw_tensor_t* t = NULL;
  CHECK(sw_tensor_from_data(rt, SW_DTYPE_F32, ext, 2, v, &t));
  free(v);
  return on_compute(rt, o, t);
}

/* y = sum over the selected experts of W_e @ x  -> (dim, tokens), f32: bf16
 * weights and tokens give their f32 sums (the elementwise ops and reduce_sum
 * take f32 and f64). */
static sw_tensor_t* expert_layer(sw_tensor_t* w, sw_tensor_t* x) {
  sw_tensor_t *y = NULL, *sum = NULL;
  sw_matmul_desc_t f32_result;
  sw_matmul_desc_init(&f32_result);
  f32_result.out_dtype = SW_DTYPE_F32;
  sw_dtype_t dtype;
  CHECK(sw_tensor_dtype(w, &dtype));
  CHECK(sw_matmul_ex(w, x, dtype == SW_DTYPE_F64 ? NULL : &f32_result, &y)); /* (k, dim, tokens) */
  const int64_t axis0 = 0;
  CHECK(sw_reduce_sum(y, &axis0, 1, false, &sum));
  sw_tensor_release(y);
  return sum;
}

static double scalar_of(sw_tensor_t* t) {
  sw_tensor_t* s = NULL;
  CHECK(sw_reduce_sum(t, NULL, 0, false, &s));
  double v = 0;
  CHECK(sw_tensor_get(s, NULL, 0, &v));
  sw_tensor_release(s);
  return v;
}

/* How many of a batch's experts are primary-resident as its projection is
 * issued: the hits of a run without the LRU policy, which has no counters. */
static int resident_count(const sw_carrier_t* weights, const options* o, const int* experts) {
  int n = 0;
  for (int k = 0; k < o->topk; ++k) {
    const int64_t coord[3] = {experts[k], 0, 0};
    sw_tile_state_t s;
    s.struct_size = sizeof s;
    CHECK(sw_tiled_tile_state(weights, coord, 3, &s));
    n += s.location == SW_TILE_PRIMARY;
  }
  return n;
}

/* Makes the LRU policy's counters the run's; returns the hits since the last call. */
static uint64_t take_lru_counters(sw_lru_policy_t* lru, run_stats* st) {
  sw_lru_stats_t s;
  s.struct_size = sizeof s;
  CHECK(sw_lru_policy_stats(lru, &s));
  const uint64_t hits = s.hits - st->hits;
  st->hits = s.hits;
  st->misses = s.misses;
  st->promoted = s.promoted;
  st->evicted = s.evicted;
  return hits;
}

/* Issues the projection of a batch's experts; without a policy returns how
 * many of them were hits (already primary-resident). The LRU policy counts
 * hits when a request commits: those are read once the projection is waited
 * for (take_lru_counters). */
static int project_batch(sw_carrier_t* weights, sw_tensor_t* full, sw_tile_selection_t* sel, const options* o,
                         const int* experts, sw_lru_policy_t* lru, sw_await_t** out) {
  const int resident = lru ? 0 : resident_count(weights, o, experts);
  CHECK(sw_tiled_project(weights, full, sel, NULL, out));
  return resident;
}

typedef enum { MODE_OFFLOAD, MODE_RESIDENT, MODE_NAIVE } run_mode;

static run_stats run(sw_runtime_t* rt, const options* o, const int* picks, run_mode mode, FILE* csv) {
  static const char* names[] = {"offloaded", "resident", "naive"};
  run_stats st;
  memset(&st, 0, sizeof st);
  st.name = names[mode];
  const int budget_tiles = (int)ceil(o->budget * o->experts);

  sw_carrier_t* secondary = make_secondary(rt, o, 0xa11ce5ull);
  sw_carrier_t* primary = make_primary(rt, o);
  sw_lru_policy_t* lru = NULL;
  sw_residency_policy_t policy;
  const int with_policy = mode == MODE_OFFLOAD && o->use_policy;
  if (with_policy) {
    CHECK(sw_lru_policy_create((size_t)budget_tiles, &lru));
    CHECK(sw_lru_policy_as_residency_policy(lru, &policy));
  }
  const int64_t grid[3] = {o->experts, 1, 1}, tile[3] = {1, o->dim, o->dim};
  sw_carrier_t* weights = NULL;
  CHECK(sw_tiled_create(primary, secondary, grid, tile, 3, with_policy ? &policy : NULL, &weights));
  sw_tensor_t* full = NULL;
  CHECK(sw_tiled_full_tensor(weights, &full));
  if (mode == MODE_RESIDENT) {
    sw_tile_set_t* all = NULL;
    CHECK(sw_tiled_tiles(weights, SW_TILES_VALID, &all));
    CHECK(sw_tiled_promote(weights, all));
    sw_tile_set_release(all);
  }

  const double tile_bytes = (double)o->dim * o->dim * sw_dtype_size(o->dtype);
  const double t0 = now();
  sw_await_t* next = NULL;
  sw_tile_selection_t* next_sel = NULL;
  int next_hits = 0;
  for (int b = 0; b < o->batches; ++b) {
    const int* experts = picks + b * o->topk;
    const double tb = now();
    sw_tile_selection_t* sel = next_sel;
    sw_await_t* pending = next;
    int hits = next_hits;
    if (!pending) {
      sel = selection_for(o, experts);
      hits = project_batch(weights, full, sel, o, experts, lru, &pending);
    }
    next = NULL;
    next_sel = NULL;
    const double tw = now();
    CHECK(sw_await_wait(pending, -1));
    const double waited = now() - tw;
    /* This batch's request is the last one committed: the next is issued below. */
    if (lru) hits = (int)take_lru_counters(lru, &st);
    sw_tensor_t* w = NULL;
    CHECK(sw_await_result(pending, &w));
    sw_await_release(pending);
    if (mode == MODE_OFFLOAD && b + 1 < o->batches) {
      /* Start the next batch's gather now, and hint the one after it. */
      if (lru && b + 2 < o->batches) {
        sw_tile_set_t* hint = tile_set_for(o, picks + (b + 2) * o->topk);
        CHECK(sw_lru_policy_hint(lru, hint));
        sw_tile_set_release(hint);
      }
      next_sel = selection_for(o, picks + (b + 1) * o->topk);
      next_hits = project_batch(weights, full, next_sel, o, picks + (b + 1) * o->topk, lru, &next);
    }
    sw_tensor_t* x = make_tokens(rt, o, b);
    sw_tensor_t* y = expert_layer(w, x);
    const double c = scalar_of(y);
    st.checksum += c;
    sw_tensor_release(y);
    sw_tensor_release(x);
    sw_tensor_release(w);
    if (mode == MODE_NAIVE) {
      sw_tile_set_t* tiles = NULL;
      CHECK(sw_tile_selection_tile_set(sel, &tiles));
      CHECK(sw_tiled_evict(weights, tiles));
      sw_tile_set_release(tiles);
    }
    sw_tile_selection_release(sel);
    const double latency = now() - tb;
    st.wait_seconds += waited;
    const uint64_t hits_now = (uint64_t)hits, misses_now = (uint64_t)(o->topk - hits);
    if (!lru) {
      /* Without a policy a projection promotes what it misses and nothing is
       * evicted but what the naive run evicts after each batch. */
      st.hits += hits_now;
      st.misses += misses_now;
      st.promoted += misses_now;
      if (mode == MODE_NAIVE) st.evicted += (uint64_t)o->topk;
    }
    if (!o->quiet)
      printf("[%-9s] batch %3d/%d  experts %2d,%2d,...  latency %7.2f ms  waited %6.2f ms  hits %llu/%d\n",
             st.name, b + 1, o->batches, experts[0], experts[o->topk > 1 ? 1 : 0], latency * 1e3, waited * 1e3,
             (unsigned long long)hits_now, o->topk);
    if (csv)
      fprintf(csv, "%s,%d,%.4f,%.4f,%.4f\n", st.name, b, latency * 1e3, waited * 1e3,
              (double)hits_now / o->topk);
  }
  st.seconds = now() - t0;
  if (lru) take_lru_counters(lru, &st); /* promotions the last hint started */
  (void)tile_bytes;
  sw_tensor_release(full);
  CHECK(sw_carrier_dispose(weights));
  sw_carrier_release(weights);
  sw_carrier_release(primary);
  sw_carrier_release(secondary);
  if (lru) sw_lru_policy_release(lru);
  return st;
}

/* Training: loss = 0.5 * || sum_e W_e x - target ||^2 with a fixed teacher. */
/* Every weight's bytes, read through the full tensor: an FNV-1a digest, and
 * the sum of the values for the report. */
static uint64_t weights_digest(sw_tensor_t* full, const options* o, double* out_sum) {
  int64_t n = 0;
  CHECK(sw_tensor_numel(full, &n));
  const size_t es = sw_dtype_size(o->dtype);
  unsigned char* bytes = malloc((size_t)n * es);
  CHECK(sw_tensor_read(full, bytes, (size_t)n * es));
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < (size_t)n * es; ++i) h = (h ^ bytes[i]) * 0x100000001b3ull;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    float v;
    if (es == 4) {
      memcpy(&v, bytes + i * 4, 4);
    } else {
      uint16_t b;
      memcpy(&b, bytes + i * 2, 2);
      v = bf16_to_f32(b);
    }
    sum += v;
  }
  free(bytes);
  *out_sum = sum;
  return h;
}

static int train(sw_runtime_t* rt, const options* o, const int* picks) {
  /* An optimiser step updates a batch's experts together, so the budget
   * holds at least those (the LRU refuses an update larger than its budget). */
  int budget_tiles = (int)ceil(o->budget * o->experts);
  if (budget_tiles < o->topk) budget_tiles = o->topk;
  sw_carrier_t* secondary = make_secondary(rt, o, 0xa11ce5ull);
  sw_carrier_t* primary = make_primary(rt, o);
  sw_lru_policy_t* lru = NULL;
  sw_residency_policy_t policy;
  CHECK(sw_lru_policy_create((size_t)budget_tiles, &lru));
  CHECK(sw_lru_policy_as_residency_policy(lru, &policy));
  const int64_t grid[3] = {o->experts, 1, 1}, tile[3] = {1, o->dim, o->dim};
  sw_carrier_t* weights = NULL;
  CHECK(sw_tiled_create(primary, secondary, grid, tile, 3, &policy, &weights));
  sw_tensor_t* full = NULL;
  CHECK(sw_tiled_full_tensor(weights, &full));
  CHECK(sw_tensor_set_requires_grad(full, true));
  const double lr = 1.0 / ((double)o->dim * o->topk);
  double first = 0, last = 0, early = 0, late = 0;
  const int window = o->batches / 4 > 0 ? o->batches / 4 : 1;
  for (int b = 0; b < o->batches; ++b) {
    const int* experts = picks + b * o->topk;
    sw_tile_selection_t* sel = selection_for(o, experts);
    sw_await_t* a = NULL;
    CHECK(sw_tiled_project(weights, full, sel, NULL, &a));
    CHECK(sw_await_wait(a, -1));
    sw_tensor_t* w = NULL;
    CHECK(sw_await_result(a, &w));
    sw_await_release(a);
    sw_tensor_t* x = make_tokens(rt, o, b % 8);
    sw_tensor_t* y = expert_layer(w, x);
    /* A fixed target per input batch: a regression the experts can fit. */
    sw_tensor_t *target = make_target(rt, o, b % 8), *diff = NULL, *sq = NULL, *loss_t = NULL;
    bool prev;
    sw_tensor_t* neg = NULL;
    CHECK(sw_mul_scalar(target, -1.0, &neg));
    CHECK(sw_add(y, neg, &diff));
    CHECK(sw_elementwise_mul(diff, diff, &sq));
    sw_tensor_t* half = NULL;
    CHECK(sw_mul_scalar(sq, 0.5, &half));
    CHECK(sw_reduce_sum(half, NULL, 0, false, &loss_t));
    double loss = 0;
    CHECK(sw_tensor_get(loss_t, NULL, 0, &loss));
    CHECK(sw_backward(loss_t, NULL, false));
    /* SGD on the touched experts only: the gradient is a tiled tensor whose
     * untouched tiles are implicit zeros. */
    sw_tensor_t* grad = NULL;
    CHECK(sw_tensor_grad(full, &grad));
    sw_carrier_t* grad_tiles = NULL;
    CHECK(sw_tensor_carrier(grad, &grad_tiles));
    prev = sw_set_grad_enabled(false);
    sw_await_t* ga = NULL;
    CHECK(sw_tiled_project(grad_tiles, grad, sel, NULL, &ga));
    CHECK(sw_await_wait(ga, -1));
    sw_tensor_t *g = NULL, *step = NULL;
    CHECK(sw_await_result(ga, &g));
    step = scaled(rt, o, g, -lr);
    sw_await_t* ua = NULL;
    CHECK(sw_tiled_update_async(weights, full, step, sel, SW_SCATTER_ADD, &ua));
    CHECK(sw_await_wait(ua, -1));
    sw_set_grad_enabled(prev);
    CHECK(sw_tensor_clear_grad(full));
    if (b == 0) first = loss;
    last = loss;
    if (b < window) early += loss / window;
    if (b >= o->batches - window) late += loss / window;
    if (!o->quiet) printf("[train    ] batch %3d/%d  loss %.6f\n", b + 1, o->batches, loss);
    sw_await_release(ua);
    sw_tensor_release(step);
    sw_tensor_release(g);
    sw_await_release(ga);
    sw_carrier_release(grad_tiles);
    sw_tensor_release(grad);
    sw_tensor_release(half);
    sw_tensor_release(neg);
    sw_tensor_release(loss_t);
    sw_tensor_release(sq);
    sw_tensor_release(diff);
    sw_tensor_release(target);
    sw_tensor_release(y);
    sw_tensor_release(x);
    sw_tensor_release(w);
    sw_tile_selection_release(sel);
  }
  /* Dirty experts must survive eviction: read every expert, evict all, and
   * read them again from the secondary tier. */
  sw_set_grad_enabled(false);
  sw_tile_set_t* dirty = NULL;
  CHECK(sw_tiled_tiles(weights, SW_TILES_DIRTY, &dirty));
  size_t dirty_count = 0;
  CHECK(sw_tile_set_count(dirty, &dirty_count));
  double sum_before = 0, sum_after = 0;
  const uint64_t hash_before = weights_digest(full, o, &sum_before);
  sw_tile_set_t* primary_tiles = NULL;
  CHECK(sw_tiled_tiles(weights, SW_TILES_PRIMARY, &primary_tiles));
  CHECK(sw_tiled_evict(weights, primary_tiles));
  sw_tile_set_t* still_dirty = NULL;
  CHECK(sw_tiled_tiles(weights, SW_TILES_DIRTY, &still_dirty));
  size_t still = 0;
  CHECK(sw_tile_set_count(still_dirty, &still));
  const uint64_t hash_after = weights_digest(full, o, &sum_after);
  printf("\ntraining: loss %.6f -> %.6f (mean of first %d batches %.6f, last %d %.6f)\n", first, last, window, early,
         window, late);
  printf("write-back: %zu dirty experts evicted, %zu still dirty, weight sum %.6f before and %.6f after reload, "
         "%s\n",
         dirty_count, still, sum_before, sum_after,
         hash_before == hash_after ? "every byte identical" : "BYTES DIFFER");
  const int ok = late < early && still == 0 && hash_before == hash_after;
  printf("%s\n", ok ? "training verified: loss fell and every update survived eviction" : "TRAINING CHECK FAILED");
  sw_tile_set_release(still_dirty);
  sw_tile_set_release(primary_tiles);
  sw_tile_set_release(dirty);
  sw_tensor_release(full);
  CHECK(sw_carrier_dispose(weights));
  sw_carrier_release(weights);
  sw_carrier_release(primary);
  sw_carrier_release(secondary);
  sw_lru_policy_release(lru);
  return ok ? 0 : 1;
}

static void usage(void) {
  fprintf(stderr,
          "usage: moe_offload [--experts N] [--dim D] [--topk K] [--tokens T] [--batches B]\n"
          "                   [--tier file|zstd|host] [--budget F] [--dtype f32|bf16]\n"
          "                   [--policy lru|none] [--train] [--compute cpu|vulkan] [--csv FILE] [--dir DIR]\n"
          "                   [--quiet]\n");
  exit(2);
}

int main(int argc, char** argv) {
  options o = {64, 1024, 4, 32, 48, "file", 0.25, SW_DTYPE_F32, 1, 0, 0, NULL, NULL, NULL};
  const char* compute = "cpu";
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--train")) { o.train = 1; continue; }
    if (!strcmp(a, "--quiet")) { o.quiet = 1; continue; }
    if (!v) usage();
    ++i;
    if (!strcmp(a, "--experts")) o.experts = atoi(v);
    else if (!strcmp(a, "--dim")) o.dim = atoi(v);
    else if (!strcmp(a, "--topk")) o.topk = atoi(v);
    else if (!strcmp(a, "--tokens")) o.tokens = atoi(v);
    else if (!strcmp(a, "--batches")) o.batches = atoi(v);
    else if (!strcmp(a, "--tier")) o.tier = v;
    else if (!strcmp(a, "--budget")) o.budget = atof(v);
    else if (!strcmp(a, "--dtype")) o.dtype = !strcmp(v, "bf16") ? SW_DTYPE_BF16 : SW_DTYPE_F32;
    else if (!strcmp(a, "--policy")) o.use_policy = strcmp(v, "none") != 0;
    else if (!strcmp(a, "--csv")) o.csv = v;
    else if (!strcmp(a, "--dir")) o.dir = v;
    else if (!strcmp(a, "--compute")) compute = v;
    else usage();
  }
  if (o.experts < 1 || o.dim < 1 || o.topk < 1 || o.topk > o.experts || o.tokens < 1 || o.batches < 1 ||
      o.budget <= 0 || o.budget > 1 ||
      (strcmp(o.tier, "file") && strcmp(o.tier, "zstd") && strcmp(o.tier, "host")) ||
      (strcmp(compute, "cpu") && strcmp(compute, "vulkan")))
    usage();

  sw_runtime_t* rt = NULL;
  CHECK(sw_runtime_create(NULL, &rt));
  if (!strcmp(compute, "vulkan")) {
    sw_error_t* e = sw_device_create_vulkan(rt, NULL, &o.device);
    if (e) {
      fprintf(stderr, "moe_offload: no Vulkan device for --compute vulkan (%s: %s)\n",
              sw_error_code_name(sw_error_code(e)), sw_error_message(e));
      sw_error_free(e);
      sw_runtime_release(rt);
      return 77; /* a skip, for the test runner */
    }
  }
  const double mib = (double)o.experts * o.dim * o.dim * sw_dtype_size(o.dtype) / (1 << 20);
  printf("StrideWeave %s MoE offload: %d experts of %dx%d %s (%.0f MiB) on the %s tier, top-%d of %d tokens per batch, "
         "primary budget %.0f%% (%d experts) in %s memory, policy %s\n\n",
         sw_version_string(), o.experts, o.dim, o.dim, sw_dtype_name(o.dtype), mib, o.tier, o.topk, o.tokens,
         o.budget * 100, (int)ceil(o.budget * o.experts), o.device ? "Vulkan device" : "CPU",
         o.use_policy ? "LRU + prefetch" : "none");
  int* picks = route_all(&o);
  int status = 0;
  if (o.train) {
    status = train(rt, &o, picks);
  } else {
    FILE* csv = NULL;
    if (o.csv) {
      csv = fopen(o.csv, "w");
      if (!csv) {
        perror(o.csv);
        return 1;
      }
      fprintf(csv, "run,batch,latency_ms,wait_ms,hit_rate\n");
    }
    run_stats r[3];
    r[0] = run(rt, &o, picks, MODE_OFFLOAD, csv);
    r[1] = run(rt, &o, picks, MODE_RESIDENT, csv);
    r[2] = run(rt, &o, picks, MODE_NAIVE, csv);
    if (csv) fclose(csv);
    const double tile_mib = (double)o.dim * o.dim * sw_dtype_size(o.dtype) / (1 << 20);
    printf("\n%-10s %12s %10s %10s %14s %14s %12s\n", "run", "tokens/s", "hit rate", "wait s", "promoted MiB",
           "evicted MiB", "vs resident");
    for (int i = 0; i < 3; ++i) {
      const double hits = (double)r[i].hits, total = (double)(r[i].hits + r[i].misses);
      printf("%-10s %12.0f %9.1f%% %10.3f %14.1f %14.1f %11.2fx\n", r[i].name, o.batches * o.tokens / r[i].seconds,
             total > 0 ? 100.0 * hits / total : 0.0, r[i].wait_seconds, r[i].promoted * tile_mib,
             r[i].evicted * tile_mib, r[1].seconds / r[i].seconds);
    }
    const int same = fabs(r[0].checksum - r[1].checksum) <= 1e-6 * fabs(r[1].checksum) &&
                     fabs(r[2].checksum - r[1].checksum) <= 1e-6 * fabs(r[1].checksum);
    printf("\noffloaded is %.2fx faster than naive loading; outputs %s (checksum %.6g)\n",
           r[2].seconds / r[0].seconds, same ? "identical across runs" : "DIFFER", r[1].checksum);
    if (!same) status = 1;
  }
  free(picks);
  sw_device_release(o.device);
  sw_runtime_release(rt);
  return status;
}
