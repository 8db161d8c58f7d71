/* The concurrency soak: N threads run a randomized mix of projections,
 * scatters, promotions, evictions, direct ops, updates and backward passes
 * against shared TiledEvictables (host, zstd and file secondary tiers) under
 * randomized residency policies, one of which refuses some plans, for a
 * bounded time.
 *
 *   soak [--threads N] [--seconds S] [--ops N] [--seed X] [--watchdog S] [--quiet]
 *
 * Expected refusals (overlapping requests, a policy's refusal, release while
 * pending) are counted, never failures. Every value is checked: each tile
 * holds its seed plus one offset (updates are uniform per tile), so a
 * projection, a direct op or a scatter must return, per tile, one offset
 * that tile held while the request was pending; updates commit in the order
 * their loop-thread callbacks run, which the soak logs. At the end no
 * request may be pending, and every carrier (evicted whole, then promoted
 * whole) must equal a sequential replay of the logged updates on a fresh
 * carrier. A watchdog prints every thread's stack and aborts when the run
 * does not finish in time (a deadlock). Exit status 0 on success.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "strideweave/strideweave.h"

/* ---- options, failure ------------------------------------------------------ */

static int opt_threads = 4;
static double opt_seconds = 5.0;
static long opt_ops = 0; /* per thread; 0 = until the time is up */
static uint64_t opt_seed = 1;
static double opt_watchdog = 0; /* 0 = 60 + 10 * seconds */
static bool opt_quiet = false;

static void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "soak: FAILED: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  fflush(stderr);
  abort();
}

#define OK(expr)                                                                                    \
  do {                                                                                              \
    sw_error_t* ok_e_ = (expr);                                                                     \
    if (ok_e_)                                                                                      \
      die("%s:%d: %s: %s: %s", __FILE__, __LINE__, #expr, sw_error_code_name(sw_error_code(ok_e_)), \
          sw_error_message(ok_e_));                                                                 \
  } while (0)

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t rng_next(uint64_t* s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static int rng_below(uint64_t* s, int n) { return (int)(rng_next(s) % (uint64_t)n); }

/* ---- the watchdog ------------------------------------------------------------ */

static void dump_stack(int sig) {
  (void)sig;
  char head[64];
  const int n = snprintf(head, sizeof head, "--- thread %ld ---\n", (long)syscall(SYS_gettid));
  if (write(2, head, (size_t)n) < 0) return;
  void* frames[64];
  const int depth = backtrace(frames, 64);
  backtrace_symbols_fd(frames, depth, 2);
}

static atomic_bool finished;

static void* watchdog(void* arg) {
  const double limit = *(const double*)arg, start = now_s();
  while (!atomic_load(&finished)) {
    if (now_s() - start > limit) {
      fprintf(stderr, "soak: FAILED: not finished after %.0f s (a deadlock?); the stacks of every thread:\n", limit);
      fflush(stderr);
      DIR* d = opendir("/proc/self/task");
      const long self = (long)syscall(SYS_gettid);
      struct dirent* e;
      while (d && (e = readdir(d)) != NULL) {
        const long tid = atol(e->d_name);
        if (tid <= 0 || tid == self) continue;
        syscall(SYS_tgkill, getpid(), tid, SIGUSR2);
        usleep(200000); /* one stack at a time */
      }
      if (d) closedir(d);
      dump_stack(0);
      abort();
    }
    usleep(50000);
  }
  return NULL;
}

/* ---- the shared carriers and their model -------------------------------------- */

#define GRID0 6
#define GRID1 2
#define TILE0 4
#define TILE1 8
#define NT (GRID0 * GRID1)
#define TE (TILE0 * TILE1)
#define NE (NT * TE)
#define NCARRIERS 3
#define MAXHIST 65536

typedef struct shared {
  const char* name;
  sw_carrier_t* te;
  sw_tensor_t* full;
  sw_lru_policy_t* lru;
  /* Per tile: the offsets it held, in commit order (guarded by model_mutex). */
  int32_t* history[NT];
  size_t hist_len[NT];
} shared;

static shared g_carriers[NCARRIERS];
static pthread_mutex_t model_mutex = PTHREAD_MUTEX_INITIALIZER;

/* The log of committed updates, in commit order (guarded by model_mutex). */
typedef struct update_rec {
  int carrier;
  bool add;
  int ntiles;
  int tiles[NT];
  int32_t amount[NT];
} update_rec;
static update_rec* g_log;
static size_t g_log_len, g_log_cap;

/* Seed value of element w of tile k (exact in f32). */
static float seed_of(int k, int w) { return (float)((k + 1) * 1000 + w); }

/* Canonical slot -> (tile, in-tile index); the full tensor is dense. */
static void locate(int slot, int* k, int* w) {
  const int x0 = slot % (GRID0 * TILE0), x1 = slot / (GRID0 * TILE0);
  *k = (x0 / TILE0) + GRID0 * (x1 / TILE1);
  *w = (x0 % TILE0) + TILE0 * (x1 % TILE1);
}

/* ---- a residency policy that randomises and sometimes refuses ----------------- */

typedef struct chaos {
  pthread_mutex_t mutex;
  uint64_t rng;
  sw_residency_policy_t inner; /* an LRU vtable, or none */
  int refuse_per_mille;
  atomic_long refused;
} chaos;

static chaos g_chaos[NCARRIERS];

static sw_error_t* chaos_plan(void* user, const sw_tile_set_t* required, sw_residency_purpose_t purpose,
                              sw_residency_plan_t** out) {
  chaos* c = (chaos*)user;
  pthread_mutex_lock(&c->mutex);
  const bool refuse = rng_below(&c->rng, 1000) < c->refuse_per_mille;
  const int extra = rng_below(&c->rng, 4);
  int64_t evict[2][2];
  for (int i = 0; i < 2; ++i) {
    evict[i][0] = rng_below(&c->rng, GRID0);
    evict[i][1] = rng_below(&c->rng, GRID1);
  }
  pthread_mutex_unlock(&c->mutex);
  if (refuse) {
    atomic_fetch_add(&c->refused, 1);
    return sw_error_create(SW_ERROR_IO, "the soak's chaos policy refuses this plan");
  }
  if (c->inner.plan) return c->inner.plan(c->inner.user_data, required, purpose, out);
  /* Promote what is required; now and then also evict a random tile that is
   * not required (a tile may appear in one field only). */
  sw_tile_set_t* ev = NULL;
  if (extra == 0) {
    size_t n = 0;
    int64_t coords[4];
    sw_tile_set_count(required, &n);
    int64_t req[NT * 2];
    size_t cnt = 0;
    if (n <= NT) sw_tile_set_coordinates(required, req, NT * 2);
    for (int i = 0; i < 2; ++i) {
      bool in = false;
      for (size_t j = 0; j < n && j < NT; ++j) in = in || (req[2 * j] == evict[i][0] && req[2 * j + 1] == evict[i][1]);
      if (i == 1 && evict[1][0] == evict[0][0] && evict[1][1] == evict[0][1]) in = true;
      if (!in) {
        coords[2 * cnt] = evict[i][0];
        coords[2 * cnt + 1] = evict[i][1];
        ++cnt;
      }
    }
    if (cnt) {
      sw_error_t* e = sw_tile_set_create(coords, cnt, 2, &ev);
      if (e) return e;
    }
  }
  sw_error_t* e = sw_residency_plan_create(required, NULL, ev, out);
  sw_tile_set_release(ev);
  return e;
}

static void chaos_outcome(void* user, const sw_residency_plan_t* plan, bool committed, const sw_tile_set_t* promoted,
                          const sw_tile_set_t* evicted) {
  chaos* c = (chaos*)user;
  if (c->inner.outcome) c->inner.outcome(c->inner.user_data, plan, committed, promoted, evicted);
}

static void chaos_destroy(void* user) {
  chaos* c = (chaos*)user;
  if (c->inner.destroy) c->inner.destroy(c->inner.user_data);
}

/* ---- counters ---------------------------------------------------------------- */

enum { OP_PROJECT, OP_SCATTER, OP_PROMOTE, OP_EVICT, OP_DIRECT, OP_UPDATE, OP_BACKWARD, OP_RELEASE, OP_KINDS };
static const char* kOpNames[OP_KINDS] = {"project", "scatter", "promote", "evict", "direct", "update", "backward",
                                         "release-while-pending"};
static atomic_long g_done[OP_KINDS], g_refused[OP_KINDS];

/* Whether an error is an expected refusal; frees it. Anything else fails. */
static bool refused(sw_error_t* e, int op, const char* what) {
  if (!e) return false;
  const sw_error_code_t code = sw_error_code(e);
  const char* m = sw_error_message(e);
  const bool expected =
      (code == SW_ERROR_STATE && (strstr(m, "incomplete residency request") || strstr(m, "in use by pending") ||
                                  strstr(m, "not terminal") || strstr(m, "kept changing"))) ||
      /* An update committed between a recorded projection and its backward:
       * the saved tensor's version moved, which autograd refuses. */
      (op == OP_BACKWARD && code == SW_ERROR_STATE && strstr(m, "modified in-place")) ||
      (code == SW_ERROR_IO && strstr(m, "chaos policy refuses"));
  if (!expected) die("%s: unexpected error %s: %s", what, sw_error_code_name(code), m);
  atomic_fetch_add(&g_refused[op], 1);
  sw_error_free(e);
  return true;
}

/* ---- checks of values ------------------------------------------------------------ */

/* The history length of every tile of carrier c, now. */
static void hist_lengths(int c, size_t* out) {
  pthread_mutex_lock(&model_mutex);
  for (int k = 0; k < NT; ++k) out[k] = g_carriers[c].hist_len[k];
  pthread_mutex_unlock(&model_mutex);
}

/* Tile k of carrier c read `values` (TE floats in in-tile order) minus
 * `bias`: one offset, one the tile held at or after history entry lo-1 (the
 * value when the request started). An update whose completion callback was
 * set after it committed logs a moment late: allow the log to catch up. */
static void check_tile(int c, int k, const float* values, const int32_t* bias, size_t lo, const char* what) {
  const float off = values[0] - seed_of(k, 0) - (float)(bias ? bias[0] : 0);
  for (int w = 1; w < TE; ++w)
    if (values[w] - seed_of(k, w) - (float)(bias ? bias[0] : 0) != off)
      die("%s on %s: tile %d is torn (element %d offset %g, element 0 offset %g)", what, g_carriers[c].name, k, w,
          values[w] - seed_of(k, w), off);
  const double until = now_s() + 5.0;
  for (size_t from = lo ? lo - 1 : 0;;) {
    pthread_mutex_lock(&model_mutex);
    const size_t len = g_carriers[c].hist_len[k];
    bool found = false;
    for (size_t i = from; i < len && !found; ++i) found = (float)g_carriers[c].history[k][i] == off;
    pthread_mutex_unlock(&model_mutex);
    if (found) return;
    if (now_s() > until)
      die("%s on %s: tile %d holds offset %g, which it never held since the request started", what, g_carriers[c].name,
          k, off);
    usleep(1000);
  }
}

/* A full dense tensor's values, checked tile by tile. */
static void check_full_values(int c, const float* v, const size_t* lo, const char* what) {
  float tile[NT][TE];
  for (int s = 0; s < NE; ++s) {
    int k, w;
    locate(s, &k, &w);
    tile[k][w] = v[s];
  }
  for (int k = 0; k < NT; ++k) check_tile(c, k, tile[k], NULL, lo[k], what);
}

/* ---- the operations --------------------------------------------------------------- */

typedef struct worker {
  int id;
  uint64_t rng;
  sw_runtime_t* rt;
  sw_tensor_t* leaf[NCARRIERS];     /* this thread's own handles, for backward */
  int32_t grad_count[NCARRIERS][NT]; /* expected gradient per tile */
  long ops;
} worker;

/* A random selection: rows from grid axis 0, columns from axis 1, distinct. */
typedef struct sel {
  sw_tile_selection_t* s;
  int nr, nc, rows[GRID0], cols[GRID1];
  int tiles[NT]; /* in selection order */
  int n;
} sel;

static sel random_sel(worker* w, int max_rows) {
  sel r;
  memset(&r, 0, sizeof r);
  int perm[GRID0];
  for (int i = 0; i < GRID0; ++i) perm[i] = i;
  for (int i = GRID0 - 1; i > 0; --i) {
    const int j = rng_below(&w->rng, i + 1), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  r.nr = 1 + rng_below(&w->rng, max_rows);
  for (int i = 0; i < r.nr; ++i) r.rows[i] = perm[i];
  r.nc = 1 + rng_below(&w->rng, GRID1);
  const int first = rng_below(&w->rng, GRID1);
  for (int i = 0; i < r.nc; ++i) r.cols[i] = (first + i) % GRID1;
  int64_t a0[GRID0], a1[GRID1];
  for (int i = 0; i < r.nr; ++i) a0[i] = r.rows[i];
  for (int i = 0; i < r.nc; ++i) a1[i] = r.cols[i];
  const int64_t* axes[2] = {a0, a1};
  const size_t counts[2] = {(size_t)r.nr, (size_t)r.nc};
  OK(sw_tile_selection_create(axes, counts, 2, &r.s));
  for (int j = 0; j < r.nc; ++j)
    for (int i = 0; i < r.nr; ++i) r.tiles[r.n++] = r.rows[i] + GRID0 * r.cols[j];
  return r;
}

/* The compact tile values of a compact tensor of selection `s`: out[t][w]. */
static void compact_tiles(const sel* s, const float* v, float out[][TE]) {
  const int c0 = s->nr * TILE0;
  for (int o = 0; o < s->n * TE; ++o) {
    const int y0 = o % c0, y1 = o / c0;
    const int t = (y0 / TILE0) + s->nr * (y1 / TILE1);
    out[t][(y0 % TILE0) + TILE0 * (y1 % TILE1)] = v[o];
  }
}

/* A compact tensor whose tile t is seed(tile) * seeded + amount[t]. */
static sw_tensor_t* compact_of(worker* w, const sel* s, const int32_t* amount, bool seeded) {
  const int c0 = s->nr * TILE0;
  float v[NE];
  for (int o = 0; o < s->n * TE; ++o) {
    const int y0 = o % c0, y1 = o / c0;
    const int t = (y0 / TILE0) + s->nr * (y1 / TILE1);
    const int in = (y0 % TILE0) + TILE0 * (y1 % TILE1);
    v[o] = (seeded ? seed_of(s->tiles[t], in) : 0.0f) + (float)amount[t];
  }
  const int64_t shape[2] = {c0, (int64_t)s->nc * TILE1};
  sw_tensor_t* t = NULL;
  OK(sw_tensor_from_data(w->rt, SW_DTYPE_F32, shape, 2, v, &t));
  return t;
}

static void op_project(worker* w, int c) {
  sel s = random_sel(w, 3);
  size_t lo[NT];
  hist_lengths(c, lo);
  sw_await_t* a = NULL;
  if (!refused(sw_tiled_project(g_carriers[c].te, g_carriers[c].full, s.s, NULL, &a), OP_PROJECT, "project")) {
    sw_error_t* e = sw_await_wait(a, -1);
    if (!refused(e, OP_PROJECT, "project (wait)")) {
      sw_tensor_t* r = NULL;
      OK(sw_await_result(a, &r));
      float v[NE], tiles[NT][TE];
      OK(sw_tensor_read(r, v, sizeof(float) * (size_t)(s.n * TE)));
      compact_tiles(&s, v, tiles);
      for (int t = 0; t < s.n; ++t) check_tile(c, s.tiles[t], tiles[t], NULL, lo[s.tiles[t]], "project");
      sw_tensor_release(r);
      atomic_fetch_add(&g_done[OP_PROJECT], 1);
    }
    sw_await_release(a);
  }
  sw_tile_selection_release(s.s);
}

static void op_scatter(worker* w, int c) {
  sel s = random_sel(w, 2);
  int32_t amount[NT];
  for (int t = 0; t < s.n; ++t) amount[t] = rng_below(&w->rng, 9) - 4;
  sw_tensor_t* compact = compact_of(w, &s, amount, false);
  size_t lo[NT];
  hist_lengths(c, lo);
  sw_await_t* a = NULL;
  if (!refused(sw_tiled_scatter(g_carriers[c].te, compact, g_carriers[c].full, s.s, SW_SCATTER_ADD, &a), OP_SCATTER,
               "scatter")) {
    if (!refused(sw_await_wait(a, -1), OP_SCATTER, "scatter (wait)")) {
      sw_tensor_t* result = NULL;
      OK(sw_await_result(a, &result));
      sw_carrier_t* rte = NULL;
      OK(sw_tensor_carrier(result, &rte));
      sw_await_t* p = NULL;
      sw_tensor_t* back = NULL;
      OK(sw_tiled_project(rte, result, s.s, NULL, &p));
      OK(sw_await_wait(p, -1));
      OK(sw_await_result(p, &back));
      float v[NE], tiles[NT][TE];
      OK(sw_tensor_read(back, v, sizeof(float) * (size_t)(s.n * TE)));
      compact_tiles(&s, v, tiles);
      for (int t = 0; t < s.n; ++t)
        check_tile(c, s.tiles[t], tiles[t], &amount[t], lo[s.tiles[t]], "scatter");
      sw_tensor_release(back);
      sw_await_release(p);
      sw_carrier_release(rte);
      sw_tensor_release(result);
      atomic_fetch_add(&g_done[OP_SCATTER], 1);
    }
    sw_await_release(a);
  }
  sw_tensor_release(compact);
  sw_tile_selection_release(s.s);
}

static void op_residency(worker* w, int c, bool promote) {
  sel s = random_sel(w, GRID0);
  sw_tile_set_t* set = NULL;
  OK(sw_tile_selection_tile_set(s.s, &set));
  const int op = promote ? OP_PROMOTE : OP_EVICT;
  sw_await_t* a = NULL;
  sw_error_t* e = promote ? sw_tiled_promote_async(g_carriers[c].te, set, &a) : sw_tiled_evict_async(g_carriers[c].te, set, &a);
  if (!refused(e, op, promote ? "promote" : "evict")) {
    if (!refused(sw_await_wait(a, -1), op, promote ? "promote (wait)" : "evict (wait)")) atomic_fetch_add(&g_done[op], 1);
    sw_await_release(a);
  }
  sw_tile_set_release(set);
  sw_tile_selection_release(s.s);
}

static void op_direct(worker* w, int c) {
  (void)w;
  size_t lo[NT];
  hist_lengths(c, lo);
  sw_tensor_t* r = NULL;
  if (refused(sw_mul_scalar(g_carriers[c].full, 1.0, &r), OP_DIRECT, "direct op")) return;
  float v[NE];
  OK(sw_tensor_read(r, v, sizeof v));
  check_full_values(c, v, lo, "direct op");
  sw_tensor_release(r);
  atomic_fetch_add(&g_done[OP_DIRECT], 1);
}

/* An update's record reaches the log from its loop-thread callback, so the
 * log is in commit order. */
static atomic_long g_callbacks, g_submitted_updates;
/* Update submissions take this lock with their callback's installation: an
 * update that completed before its callback was set logs from a posted
 * callback, and a later conflicting update can only be submitted (and so
 * commit, and log) after that post. */
static pthread_mutex_t submit_mutex = PTHREAD_MUTEX_INITIALIZER;

static void on_update(void* user, sw_await_t* a, sw_error_code_t code, const char* message) {
  (void)a, (void)message;
  update_rec* r = (update_rec*)user;
  atomic_fetch_add(&g_callbacks, 1);
  if (code == SW_OK) {
    pthread_mutex_lock(&model_mutex);
    shared* s = &g_carriers[r->carrier];
    for (int t = 0; t < r->ntiles; ++t) {
      const int k = r->tiles[t];
      if (s->hist_len[k] == MAXHIST) die("the history of tile %d is full", k);
      const int32_t cur = s->history[k][s->hist_len[k] - 1];
      s->history[k][s->hist_len[k]++] = r->add ? cur + r->amount[t] : r->amount[t];
    }
    if (g_log_len == g_log_cap) {
      g_log_cap = g_log_cap ? g_log_cap * 2 : 1024;
      g_log = (update_rec*)realloc(g_log, g_log_cap * sizeof *g_log);
      if (!g_log) die("out of memory");
    }
    g_log[g_log_len++] = *r;
    pthread_mutex_unlock(&model_mutex);
  }
  free(r);
}

static void op_update(worker* w, int c) {
  sel s = random_sel(w, 2);
  update_rec* r = (update_rec*)calloc(1, sizeof *r);
  r->carrier = c;
  r->add = rng_below(&w->rng, 2);
  r->ntiles = s.n;
  for (int t = 0; t < s.n; ++t) {
    r->tiles[t] = s.tiles[t];
    r->amount[t] = r->add ? rng_below(&w->rng, 9) - 4 : rng_below(&w->rng, 201) - 100;
  }
  sw_tensor_t* compact = compact_of(w, &s, r->amount, !r->add);
  sw_await_t* a = NULL;
  pthread_mutex_lock(&submit_mutex);
  sw_error_t* e = sw_tiled_update_async(g_carriers[c].te, g_carriers[c].full, compact, s.s,
                                        r->add ? SW_SCATTER_ADD : SW_SCATTER_REPLACE, &a);
  if (!e) {
    sw_await_callback_info_t info;
    sw_await_callback_info_init(&info);
    info.mode = SW_CALLBACK_MODE_LOOP_THREAD;
    info.callback = on_update;
    info.user_data = r;
    OK(sw_await_set_callback(a, &info));
    r = NULL; /* the callback's now */
    atomic_fetch_add(&g_submitted_updates, 1);
  }
  pthread_mutex_unlock(&submit_mutex);
  if (!refused(e, OP_UPDATE, "update")) {
    OK(sw_await_wait(a, -1));
    atomic_fetch_add(&g_done[OP_UPDATE], 1);
    sw_await_release(a);
  }
  free(r);
  sw_tensor_release(compact);
  sw_tile_selection_release(s.s);
}

/* sum(project(leaf, sel)) backward: the thread's own leaf's gradient grows by
 * one on every selected tile. */
static void op_backward(worker* w, int c) {
  sel s = random_sel(w, 2);
  sw_await_t* a = NULL;
  if (!refused(sw_tiled_project(g_carriers[c].te, w->leaf[c], s.s, NULL, &a), OP_BACKWARD, "backward (project)")) {
    if (!refused(sw_await_wait(a, -1), OP_BACKWARD, "backward (project wait)")) {
      sw_tensor_t *r = NULL, *sum = NULL;
      OK(sw_await_result(a, &r));
      OK(sw_reduce_sum(r, NULL, 0, false, &sum));
      if (!refused(sw_backward(sum, NULL, false), OP_BACKWARD, "backward")) {
        for (int t = 0; t < s.n; ++t) ++w->grad_count[c][s.tiles[t]];
        sw_tensor_t* g = NULL;
        OK(sw_tensor_grad(w->leaf[c], &g));
        float v[NE];
        OK(sw_tensor_read(g, v, sizeof v));
        for (int slot = 0; slot < NE; ++slot) {
          int k, in;
          locate(slot, &k, &in);
          if (v[slot] != (float)w->grad_count[c][k])
            die("backward on %s: gradient of tile %d is %g, expected %d", g_carriers[c].name, k, v[slot],
                w->grad_count[c][k]);
        }
        sw_tensor_release(g);
        atomic_fetch_add(&g_done[OP_BACKWARD], 1);
      }
      sw_tensor_release(sum);
      sw_tensor_release(r);
    }
    sw_await_release(a);
  }
  sw_tile_selection_release(s.s);
}

/* A private carrier released while its request is pending: refused (or the
 * request was already done). */
static void op_release(worker* w) {
  sw_carrier_t *p = NULL, *q = NULL, *te = NULL;
  OK(sw_carrier_create_cpu(w->rt, SW_DTYPE_F32, 0, &p));
  OK(sw_carrier_create_host(w->rt, SW_DTYPE_F32, 64, &q));
  const int64_t grid[1] = {4}, tile[1] = {16};
  OK(sw_tiled_create(p, q, grid, tile, 1, NULL, &te));
  sw_tile_set_t* all = NULL;
  OK(sw_tiled_tiles(te, SW_TILES_VALID, &all));
  sw_await_t* a = NULL;
  OK(sw_tiled_promote_async(te, all, &a));
  sw_error_t* e = sw_carrier_dispose(te);
  if (!refused(e, OP_RELEASE, "release while pending")) atomic_fetch_add(&g_done[OP_RELEASE], 1);
  OK(sw_await_wait(a, -1));
  sw_await_release(a);
  OK(sw_carrier_dispose(te));
  sw_tile_set_release(all);
  sw_carrier_release(te);
  sw_carrier_release(p);
  sw_carrier_release(q);
}

static double g_deadline;

static void* run_worker(void* arg) {
  worker* w = (worker*)arg;
  for (int c = 0; c < NCARRIERS; ++c) {
    OK(sw_tiled_full_tensor(g_carriers[c].te, &w->leaf[c]));
    OK(sw_tensor_set_requires_grad(w->leaf[c], true));
  }
  while ((opt_ops == 0 || w->ops < opt_ops) && now_s() < g_deadline) {
    const int c = rng_below(&w->rng, NCARRIERS);
    const int pick = rng_below(&w->rng, 100);
    if (pick < 24) op_project(w, c);
    else if (pick < 34) op_scatter(w, c);
    else if (pick < 44) op_residency(w, c, true);
    else if (pick < 56) op_residency(w, c, false);
    else if (pick < 62) op_direct(w, c);
    else if (pick < 86) op_update(w, c);
    else if (pick < 97) op_backward(w, c);
    else op_release(w);
    ++w->ops;
  }
  for (int c = 0; c < NCARRIERS; ++c) sw_tensor_release(w->leaf[c]);
  return NULL;
}

/* ---- setup, the final check ----------------------------------------------------------- */

static sw_carrier_t* make_tiled(sw_runtime_t* rt, int kind, const sw_residency_policy_t* policy) {
  sw_carrier_t *p = NULL, *s = NULL, *te = NULL;
  OK(sw_carrier_create_cpu(rt, SW_DTYPE_F32, 0, &p));
  if (kind == 0) OK(sw_carrier_create_host(rt, SW_DTYPE_F32, NE, &s));
  if (kind == 1) {
    sw_zstd_carrier_desc_t d;
    sw_zstd_carrier_desc_init(&d);
    d.frame_elements = TE * 3; /* frames spanning tiles: rewritten whole */
    OK(sw_carrier_create_zstd(rt, SW_DTYPE_F32, NE, &d, &s));
  }
  if (kind == 2) OK(sw_carrier_create_file(rt, SW_DTYPE_F32, NE, NULL, &s));
  float v[NE];
  for (int k = 0; k < NT; ++k)
    for (int w = 0; w < TE; ++w) v[k * TE + w] = seed_of(k, w);
  OK(sw_carrier_write(s, 0, NE, v));
  const int64_t grid[2] = {GRID0, GRID1}, tile[2] = {TILE0, TILE1};
  OK(sw_tiled_create(p, s, grid, tile, 2, policy, &te));
  sw_carrier_release(p);
  sw_carrier_release(s);
  return te;
}

/* Every value of carrier c must be its seed plus its last committed offset,
 * and equal to `replay` (a sequential replay of the log). */
static void final_values(sw_carrier_t* te, sw_tensor_t* full, int c, const float* replay, const char* when) {
  float v[NE];
  OK(sw_tensor_read(full, v, sizeof v));
  for (int s = 0; s < NE; ++s) {
    int k, w;
    locate(s, &k, &w);
    const float expect = seed_of(k, w) + (float)g_carriers[c].history[k][g_carriers[c].hist_len[k] - 1];
    if (v[s] != expect) die("%s: %s slot %d (tile %d) is %g, expected %g", when, g_carriers[c].name, s, k, v[s], expect);
    if (replay && v[s] != replay[s])
      die("%s: %s slot %d is %g, the sequential replay gives %g", when, g_carriers[c].name, s, v[s], replay[s]);
  }
  (void)te;
}

static void evict_promote_check(sw_carrier_t* te, sw_tensor_t* full, int c, const float* replay) {
  sw_tile_set_t* all = NULL;
  OK(sw_tiled_tiles(te, SW_TILES_VALID, &all));
  OK(sw_tiled_evict(te, all));
  final_values(te, full, c, replay, "after evicting everything");
  OK(sw_tiled_promote(te, all));
  final_values(te, full, c, replay, "after promoting everything");
  sw_tile_set_release(all);
}

static void usage(void) {
  fprintf(stderr, "usage: soak [--threads N] [--seconds S] [--ops N] [--seed X] [--watchdog S] [--quiet]\n");
  exit(2);
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) opt_threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) opt_seconds = atof(argv[++i]);
    else if (!strcmp(argv[i], "--ops") && i + 1 < argc) opt_ops = atol(argv[++i]);
    else if (!strcmp(argv[i], "--seed") && i + 1 < argc) opt_seed = strtoull(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--watchdog") && i + 1 < argc) opt_watchdog = atof(argv[++i]);
    else if (!strcmp(argv[i], "--quiet")) opt_quiet = true;
    else usage();
  }
  if (opt_threads < 1 || opt_threads > 256 || opt_seconds <= 0) usage();
  /* Load the unwinder now: the first backtrace() may allocate. */
  void* warm[4];
  backtrace(warm, 4);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = dump_stack;
  sigaction(SIGUSR2, &sa, NULL);
  double limit = opt_watchdog > 0 ? opt_watchdog : 60.0 + 10.0 * opt_seconds;
  pthread_t dog;
  pthread_create(&dog, NULL, watchdog, &limit);

  sw_runtime_t* rt = NULL;
  OK(sw_runtime_create(NULL, &rt));
  static const char* names[NCARRIERS] = {"host tier (LRU)", "zstd tier (randomised)", "file tier (LRU)"};
  for (int c = 0; c < NCARRIERS; ++c) {
    chaos* ch = &g_chaos[c];
    pthread_mutex_init(&ch->mutex, NULL);
    ch->rng = opt_seed * 7919 + (uint64_t)c;
    ch->refuse_per_mille = c == 1 ? 40 : 15;
    if (c != 1) {
      OK(sw_lru_policy_create(c == 0 ? 4 : 6, &g_carriers[c].lru));
      OK(sw_lru_policy_as_residency_policy(g_carriers[c].lru, &ch->inner));
    }
    sw_residency_policy_t pol;
    sw_residency_policy_init(&pol);
    pol.user_data = ch;
    pol.plan = chaos_plan;
    pol.outcome = chaos_outcome;
    pol.destroy = chaos_destroy;
    g_carriers[c].name = names[c];
    g_carriers[c].te = make_tiled(rt, c, &pol);
    OK(sw_tiled_full_tensor(g_carriers[c].te, &g_carriers[c].full));
    for (int k = 0; k < NT; ++k) {
      g_carriers[c].history[k] = (int32_t*)malloc(sizeof(int32_t) * MAXHIST);
      g_carriers[c].history[k][0] = 0;
      g_carriers[c].hist_len[k] = 1;
    }
  }

  const double start = now_s();
  g_deadline = start + opt_seconds;
  worker* ws = (worker*)calloc((size_t)opt_threads, sizeof *ws);
  pthread_t* ts = (pthread_t*)calloc((size_t)opt_threads, sizeof *ts);
  for (int i = 0; i < opt_threads; ++i) {
    ws[i].id = i;
    ws[i].rng = opt_seed * 1000003u + (uint64_t)i;
    ws[i].rt = rt;
    pthread_create(&ts[i], NULL, run_worker, &ws[i]);
  }
  long ops = 0;
  for (int i = 0; i < opt_threads; ++i) {
    pthread_join(ts[i], NULL);
    ops += ws[i].ops;
  }
  const double elapsed = now_s() - start;
  /* Every update's callback has run (a posted one may still be queued). */
  while (atomic_load(&g_callbacks) != atomic_load(&g_submitted_updates)) usleep(1000);

  /* Nothing is pending now: every carrier releases. Check, then replay the
   * log sequentially on fresh carriers and compare. */
  for (int c = 0; c < NCARRIERS; ++c) {
    float replay[NE];
    sw_carrier_t* fresh = make_tiled(rt, c, NULL);
    sw_tensor_t* ffull = NULL;
    OK(sw_tiled_full_tensor(fresh, &ffull));
    for (size_t i = 0; i < g_log_len; ++i) {
      const update_rec* r = &g_log[i];
      if (r->carrier != c) continue;
      sel s;
      memset(&s, 0, sizeof s);
      /* Rebuild the selection: tiles are rows x cols in row-fastest order. */
      int rows[GRID0], nr = 0, cols[GRID1], nc = 0;
      for (int t = 0; t < r->ntiles; ++t) {
        const int row = r->tiles[t] % GRID0, col = r->tiles[t] / GRID0;
        bool seen = false;
        for (int j = 0; j < nr; ++j) seen = seen || rows[j] == row;
        if (!seen) rows[nr++] = row;
        seen = false;
        for (int j = 0; j < nc; ++j) seen = seen || cols[j] == col;
        if (!seen) cols[nc++] = col;
      }
      int64_t a0[GRID0], a1[GRID1];
      for (int j = 0; j < nr; ++j) a0[j] = rows[j];
      for (int j = 0; j < nc; ++j) a1[j] = cols[j];
      const int64_t* axes[2] = {a0, a1};
      const size_t counts[2] = {(size_t)nr, (size_t)nc};
      OK(sw_tile_selection_create(axes, counts, 2, &s.s));
      s.nr = nr;
      s.nc = nc;
      for (int j = 0; j < nc; ++j)
        for (int q = 0; q < nr; ++q) s.tiles[s.n++] = rows[q] + GRID0 * cols[j];
      worker tmp = {.rt = rt};
      sw_tensor_t* compact = compact_of(&tmp, &s, r->amount, !r->add);
      sw_await_t* a = NULL;
      OK(sw_tiled_update_async(fresh, ffull, compact, s.s, r->add ? SW_SCATTER_ADD : SW_SCATTER_REPLACE, &a));
      OK(sw_await_wait(a, -1));
      sw_await_release(a);
      sw_tensor_release(compact);
      sw_tile_selection_release(s.s);
    }
    OK(sw_tensor_read(ffull, replay, sizeof replay));
    evict_promote_check(g_carriers[c].te, g_carriers[c].full, c, replay);
    sw_tensor_release(ffull);
    OK(sw_carrier_dispose(fresh));
    sw_carrier_release(fresh);
    OK(sw_carrier_dispose(g_carriers[c].te));
    sw_tensor_release(g_carriers[c].full);
    sw_carrier_release(g_carriers[c].te);
    sw_lru_policy_release(g_carriers[c].lru);
    for (int k = 0; k < NT; ++k) free(g_carriers[c].history[k]);
  }
  long refusals = 0, policy_refusals = 0;
  for (int k = 0; k < OP_KINDS; ++k) refusals += atomic_load(&g_refused[k]);
  for (int c = 0; c < NCARRIERS; ++c) policy_refusals += atomic_load(&g_chaos[c].refused);
  if (!opt_quiet) {
    printf("soak: per operation (done / refused):");
    for (int k = 0; k < OP_KINDS; ++k)
      printf(" %s %ld/%ld", kOpNames[k], atomic_load(&g_done[k]), atomic_load(&g_refused[k]));
    printf("\n");
  }
  printf("soak: %d threads, %ld operations (%ld refused as expected, %ld by the policy), %zu updates replayed, "
         "%.1f s: values match the sequential replay\n",
         opt_threads, ops, refusals, policy_refusals, g_log_len, elapsed);
  free(g_log);
  free(ws);
  free(ts);
  OK(sw_runtime_shutdown(rt));
  sw_runtime_release(rt);
  atomic_store(&finished, true);
  pthread_join(dog, NULL);
  return 0;
}
