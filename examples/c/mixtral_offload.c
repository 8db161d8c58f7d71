/*
 * mixtral_offload: the C twin of examples/python/mixtral_offload.py, the
 * offloaded decoder of a Mixtral-architecture stack of sparse-MoE blocks,
 * through the public C ABI only.
 *
 *   mixtral_offload --model FILE.safetensors --stream FILE.npy [--topk 2]
 *                   [--budget 0.25] [--warmup 2] [--tokens N]
 *                   [--tier direct|page-cache] [--verify] [--quiet]
 *   mixtral_offload [--layers 2] [--experts 8] [--hidden 64] [--ffn 96]
 *                   [--tokens 6] [--dtype f32|bf16] [--seed 1234] ...
 *
 * The model file is a Hugging Face Mixtral-layout .safetensors checkpoint
 * (per layer l: model.layers.{l}.post_attention_layernorm.weight (H),
 * block_sparse_moe.gate.weight (E, H), and per expert e
 * block_sparse_moe.experts.{e}.w1/w3.weight (F, H) and w2.weight (H, F),
 * f32 or bf16), as mixtral_offload.py writes it; the stream is the
 * (tokens, H) float32 .npy of decoded inputs that the Python demo writes
 * with --save-stream. The number of layers, E, H, F and the dtype are read
 * from the file; --topk must be the Python run's.
 *
 * Each token runs through every layer as in the Python demo:
 *   n      = RMSNorm(h): f32, rounded to the dtype, times the weight
 *            (sw_tensor_to_dtype, sw_binary, sw_reduce MEAN, sw_unary RSQRT)
 *   probs  = softmax(f32(n @ gate^T))                 (sw_matmul, sw_softmax)
 *   ids    = top-k of probs, gates = their values / their sum      (sw_topk)
 *   y      = w2(silu(w1 n) * w3 n) per chosen expert, each matrix a
 *            TiledEvictable of one expert per tile over the file's regions
 *            (sw_carrier_open_safetensors_stack), an LRU budget of --budget
 *            of each layer's experts (sw_lru_policy), the products computed
 *            on the cached tiles, gated and summed in one call
 *            (sw_tiled_expert_ffn: each y[j] rounded to the dtype, their
 *            gated sum in f32, rounded once)
 *   h      = h + that sum
 * where PyTorch rounds (the dtype after the norm, the router's and the
 * experts' products, silu and the product, the gated sum, the residual add)
 * this program rounds too, so the two agree on the routing exactly; equal
 * probabilities (bf16 logits tie often) go to the lower expert index, as
 * sw_topk and the Python demo's route() break ties. The final states then
 * agree to a few f32 ulps in f32 (exp and the accumulation orders differ)
 * and are bit-identical in bf16 but for an occasional element one bf16 ulp
 * away. The stream is an .npy beside the model rather than a tensor in it,
 * so one model file serves any stream; float32, as NumPy has no bf16 (the
 * Python demo rounds it to the dtype first, so the conversion is exact).
 *
 * Output: one "TRACE ..." line per token and layer with its experts, one
 * per token with the sum and absolute sum of its final hidden state, the
 * totals with the FNV-1a hash of the final states' bytes, and the LRU hit
 * rate of the w1 matrices after --warmup untimed tokens; then one line with
 * the hit rate, the bytes read and the decode's wall time per token (the
 * timed tokens only, the warm-up and the verification excluded); mixtral_offload.py
 * --trace prints the same lines from its offloaded run (docs/moe-offload.md,
 * "The C twin", gives the format and how tests/python/test_examples.py
 * compares them). --quiet keeps only the totals and the hit rate.
 *
 * Without --model the program writes a small model and stream of its own
 * (random weights from --seed, sw_save_safetensors and sw_save_npy) to a
 * temporary directory and verifies itself: with --verify (implied then) the
 * stream is decoded a second time with every expert resident and no budget,
 * and any difference in routing or in the final states' bytes exits 1, as
 * does every failed call. So it is a test as well as an example.
 */
/* mkdtemp */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "strideweave/strideweave.h"

static void check(sw_error_t* error, const char* call, int line) {
  if (!error) return;
  fprintf(stderr, "mixtral_offload.c:%d: %s failed: %s (%s)\n", line, call, sw_error_message(error),
          sw_error_code_name(sw_error_code(error)));
  sw_error_free(error);
  exit(1);
}
#define CHECK(call) check((call), #call, __LINE__)

enum { kMaxLayers = 256, kMaxExperts = 256, kMatrices = 3 };
static const char* const kMatrixNames[kMatrices] = {"w1", "w2", "w3"};
enum { W1 = 0, W2 = 1, W3 = 2 };

typedef struct options {
  const char* model;
  const char* stream;
  int topk, warmup, tokens, verify, quiet, direct_io;
  double budget;
  /* The model this program writes without --model. */
  int layers, experts, hidden, ffn, seed;
  sw_dtype_t dtype;
} options;

/* ---- names and small helpers ---------------------------------------------------------------- */

static void expert_name(char* out, size_t n, int layer, int e, const char* matrix) {
  snprintf(out, n, "model.layers.%d.block_sparse_moe.experts.%d.%s.weight", layer, e, matrix);
}

static void gate_name(char* out, size_t n, int layer) {
  snprintf(out, n, "model.layers.%d.block_sparse_moe.gate.weight", layer);
}

static void norm_name(char* out, size_t n, int layer) {
  snprintf(out, n, "model.layers.%d.post_attention_layernorm.weight", layer);
}

static void* xmalloc(size_t bytes) {
  void* p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "mixtral_offload: out of memory\n");
    exit(1);
  }
  return p;
}

static float bf16_to_f32(uint16_t h) {
  const uint32_t bits = (uint32_t)h << 16;
  float v;
  memcpy(&v, &bits, 4);
  return v;
}

/* result = op(a) and a released: for chains of ops on intermediates. */
static sw_tensor_t* take(sw_tensor_t* a, sw_tensor_t* result) {
  sw_tensor_release(a);
  return result;
}

static sw_tensor_t* to_dtype(sw_tensor_t* t, sw_dtype_t dtype) {
  sw_tensor_t* out = NULL;
  CHECK(sw_tensor_to_dtype(t, dtype, &out));
  return out;
}

static sw_tensor_t* binary(sw_binary_op_t op, sw_tensor_t* a, sw_tensor_t* b) {
  sw_tensor_t* out = NULL;
  CHECK(sw_binary(op, a, b, &out));
  return out;
}

static sw_tensor_t* wait_result(sw_await_t* a) {
  sw_tensor_t* out = NULL;
  CHECK(sw_await_wait(a, -1));
  CHECK(sw_await_result(a, &out));
  sw_await_release(a);
  return out;
}

/* Every slot of a file tensor's carrier, read into `out` (row-major, as the
 * file stores it); returns the info. */
static void read_tensor(sw_runtime_t* rt, const char* path, const char* name, sw_file_tensor_info_t* info, void** out) {
  sw_file_tensor_info_init(info);
  sw_carrier_t* c = NULL;
  CHECK(sw_carrier_open_safetensors(rt, path, name, NULL, info, &c));
  size_t n = 0;
  CHECK(sw_carrier_size(c, &n));
  *out = xmalloc(n * sw_dtype_size(info->dtype));
  CHECK(sw_carrier_read(c, 0, n, *out));
  sw_carrier_release(c);
}

/* ---- the model ------------------------------------------------------------------------------- */

typedef struct matrix {
  sw_carrier_t* tiled; /* one expert per tile: grid (1, 1, E), tile (K, N, 1) */
  sw_tensor_t* full;   /* its full tensor (K, N, E) */
  sw_lru_policy_t* lru;
  sw_lru_stats_t before; /* the counters when the timed pass started */
} matrix;

typedef struct layer {
  sw_tensor_t* norm;  /* (H) */
  sw_tensor_t* gateT; /* (H, E): the file's row-major (E, H) as it lies */
  matrix w[kMatrices];
} layer;

typedef struct model {
  int layers, experts, hidden, ffn, budget_tiles;
  sw_dtype_t dtype;
  layer layer[kMaxLayers];
} model;

/* Layers, E, H, F and the dtype, from the file's tensors. */
static void read_shapes(sw_runtime_t* rt, const char* path, model* m) {
  char name[128];
  sw_file_tensor_info_t info;
  void* data = NULL;
  gate_name(name, sizeof name, 0);
  read_tensor(rt, path, name, &info, &data);
  free(data);
  if (info.rank != 2 || info.shape[0] < 1 || info.shape[0] > kMaxExperts) {
    fprintf(stderr, "mixtral_offload: %s: %s is not (E, H) with 1 <= E <= %d\n", path, name, kMaxExperts);
    exit(2);
  }
  m->experts = (int)info.shape[0];
  m->hidden = (int)info.shape[1];
  m->dtype = info.dtype;
  if (m->dtype != SW_DTYPE_F32 && m->dtype != SW_DTYPE_BF16) {
    fprintf(stderr, "mixtral_offload: %s: weights are %s; the demo's are f32 or bf16\n", path,
            sw_dtype_name(m->dtype));
    exit(2);
  }
  expert_name(name, sizeof name, 0, 0, "w1");
  read_tensor(rt, path, name, &info, &data);
  free(data);
  m->ffn = (int)info.shape[0];
  /* The layers: norm weights 0, 1, ... until the file lacks one (VALUE). */
  m->layers = 0;
  for (; m->layers < kMaxLayers; ++m->layers) {
    sw_file_tensor_info_t one;
    sw_file_tensor_info_init(&one);
    sw_carrier_t* c = NULL;
    norm_name(name, sizeof name, m->layers);
    sw_error_t* e = sw_carrier_open_safetensors(rt, path, name, NULL, &one, &c);
    if (e && sw_error_code(e) == SW_ERROR_VALUE) {
      sw_error_free(e);
      break;
    }
    CHECK(e);
    sw_carrier_release(c);
  }
  if (m->layers == 0) {
    fprintf(stderr, "mixtral_offload: %s has no %s\n", path, name);
    exit(2);
  }
}

/* Opens the model: the norm and router weights as CPU tensors, each expert
 * matrix as a TiledEvictable over the file (budgeted: an LRU policy of
 * m->budget_tiles; else every expert promoted). */
static void open_model(sw_runtime_t* rt, const options* o, model* m, int budgeted) {
  const sw_dtype_t dtype = m->dtype;
  for (int l = 0; l < m->layers; ++l) {
    layer* L = &m->layer[l];
    char name[128];
    sw_file_tensor_info_t info;
    void* data = NULL;
    norm_name(name, sizeof name, l);
    read_tensor(rt, o->model, name, &info, &data);
    const int64_t h_ext[1] = {m->hidden};
    CHECK(sw_tensor_from_data(rt, dtype, h_ext, 1, data, &L->norm));
    free(data);
    gate_name(name, sizeof name, l);
    read_tensor(rt, o->model, name, &info, &data);
    const int64_t g_ext[2] = {m->hidden, m->experts};
    CHECK(sw_tensor_from_data(rt, dtype, g_ext, 2, data, &L->gateT));
    free(data);

    for (int w = 0; w < kMatrices; ++w) {
      matrix* M = &L->w[w];
      char names[kMaxExperts][128];
      const char* ptrs[kMaxExperts];
      for (int e = 0; e < m->experts; ++e) {
        expert_name(names[e], sizeof names[e], l, e, kMatrixNames[w]);
        ptrs[e] = names[e];
      }
      sw_file_carrier_desc_t desc;
      sw_file_carrier_desc_init(&desc);
      desc.direct_io = o->direct_io;
      sw_file_tensor_info_t st;
      sw_file_tensor_info_init(&st);
      sw_carrier_t* file = NULL;
      CHECK(sw_carrier_open_safetensors_stack(rt, o->model, ptrs, (size_t)m->experts, &desc, &st, &file));
      sw_carrier_t* cpu = NULL;
      CHECK(sw_carrier_create_cpu(rt, dtype, 0, &cpu));
      sw_residency_policy_t policy;
      M->lru = NULL;
      if (budgeted) {
        CHECK(sw_lru_policy_create((size_t)m->budget_tiles, &M->lru));
        CHECK(sw_lru_policy_as_residency_policy(M->lru, &policy));
      }
      CHECK(sw_tiled_create(cpu, file, st.grid_shape, st.tile_shape, st.rank, budgeted ? &policy : NULL, &M->tiled));
      sw_carrier_release(cpu);
      sw_carrier_release(file);
      CHECK(sw_tiled_full_tensor(M->tiled, &M->full));
      if (!budgeted) {
        sw_tile_set_t* all = NULL;
        CHECK(sw_tiled_tiles(M->tiled, SW_TILES_VALID, &all));
        CHECK(sw_tiled_promote(M->tiled, all));
        sw_tile_set_release(all);
      }
    }
  }
}

static void close_model(model* m) {
  for (int l = 0; l < m->layers; ++l) {
    layer* L = &m->layer[l];
    for (int w = 0; w < kMatrices; ++w) {
      sw_tensor_release(L->w[w].full);
      sw_carrier_release(L->w[w].tiled);
      sw_lru_policy_release(L->w[w].lru);
    }
    sw_tensor_release(L->norm);
    sw_tensor_release(L->gateT);
  }
}

/* ---- one token through the stack ------------------------------------------------------------- */

/* Mixtral's RMSNorm as the Python twin computes it: in f32,
 * h * rsqrt(mean(h^2) + 1e-5), rounded to the weight's dtype, times it. */
static sw_tensor_t* rms_norm(sw_tensor_t* h, sw_tensor_t* weight, sw_dtype_t dtype) {
  sw_tensor_t* h32 = to_dtype(h, SW_DTYPE_F32);
  sw_tensor_t* sq = binary(SW_BINARY_MUL, h32, h32);
  const int64_t last = -1;
  sw_tensor_t* mean = NULL;
  CHECK(sw_reduce(SW_REDUCE_MEAN, sq, &last, 1, true, &mean));
  sw_tensor_release(sq);
  sw_tensor_t* t = NULL;
  CHECK(sw_binary_scalar(SW_BINARY_ADD, mean, 1e-5, &t));
  sw_tensor_release(mean);
  sw_tensor_t* r = NULL;
  CHECK(sw_unary(SW_UNARY_RSQRT, t, &r));
  sw_tensor_release(t);
  sw_tensor_t* scaled = binary(SW_BINARY_MUL, h32, r);
  sw_tensor_release(r);
  sw_tensor_release(h32);
  sw_tensor_t* rounded = take(scaled, to_dtype(scaled, dtype));
  return take(rounded, binary(SW_BINARY_MUL, rounded, weight));
}

/* One token (h: (1, H), taken) through every layer; writes its routing to
 * ids_out[layer * k + j]. Returns the final hidden state (1, H). */
static sw_tensor_t* step(const options* o, model* m, sw_tensor_t* h, int64_t* ids_out) {
  const int k = o->topk;
  for (int l = 0; l < m->layers; ++l) {
    layer* L = &m->layer[l];
    sw_tensor_t* n = rms_norm(h, L->norm, m->dtype);
    /* The router: the dtype's product (f32 sums rounded once), softmax in f32. */
    sw_tensor_t* logits = NULL;
    CHECK(sw_matmul(n, L->gateT, &logits)); /* (1, E) */
    sw_tensor_t* logits32 = take(logits, to_dtype(logits, SW_DTYPE_F32));
    sw_tensor_t* probs = NULL;
    CHECK(sw_softmax(logits32, -1, &probs));
    sw_tensor_release(logits32);
    sw_tensor_t *values = NULL, *ids = NULL;
    CHECK(sw_topk(probs, k, -1, &values, &ids)); /* (1, k) f32 and i64 */
    sw_tensor_release(probs);
    const int64_t last = -1;
    sw_tensor_t* total = NULL;
    CHECK(sw_reduce(SW_REDUCE_SUM, values, &last, 1, true, &total));
    sw_tensor_t* gates = binary(SW_BINARY_DIV, values, total); /* (1, k) */
    sw_tensor_release(total);
    sw_tensor_release(values);
    int64_t chosen[kMaxExperts];
    CHECK(sw_tensor_read(ids, chosen, sizeof chosen));
    memcpy(ids_out + (size_t)l * (size_t)k, chosen, sizeof(int64_t) * (size_t)k);

    /* As the Python twin: the layer's experts in one call, each expert's
     * products computed on its tiles as they are there (a missing expert's
     * w1, w3 and w2 tiles read in that order), each expert's output rounded
     * to the dtype and their gated sum taken in f32, rounded once. */
    sw_await_t* call = NULL;
    CHECK(sw_tiled_expert_ffn(L->w[W1].tiled, L->w[W1].full, L->w[W3].tiled, L->w[W3].full, L->w[W2].tiled,
                              L->w[W2].full, n, ids, gates, NULL, &call));
    sw_tensor_t* moe = wait_result(call); /* (1, H) */
    sw_tensor_release(gates);
    sw_tensor_release(ids);
    sw_tensor_t* next = binary(SW_BINARY_ADD, h, moe);
    sw_tensor_release(moe);
    sw_tensor_release(n);
    sw_tensor_release(h);
    h = next;
  }
  return h;
}

/* ---- a decode of the stream ------------------------------------------------------------------ */

typedef struct run_result {
  int64_t* routes;         /* tokens x layers x k */
  unsigned char* finals;   /* tokens x H elements of the dtype, row-major */
  uint64_t hits, required; /* w1's, after the warm-up */
  double seconds;          /* the timed tokens' wall time, the warm-up excluded */
  uint64_t bytes_read;     /* every tile read from the file after the warm-up (the three LRUs' plans) */
} run_result;

static void lru_stats(const sw_lru_policy_t* lru, sw_lru_stats_t* s) {
  sw_lru_stats_init(s);
  CHECK(sw_lru_policy_stats(lru, s));
}

/* Token t of the stream as a (1, H) tensor of the model's dtype. */
static sw_tensor_t* token(sw_runtime_t* rt, sw_carrier_t* stream, const model* m, int t, float* row) {
  CHECK(sw_carrier_read(stream, (size_t)t * (size_t)m->hidden, (size_t)m->hidden, row));
  const int64_t ext[2] = {1, m->hidden};
  sw_tensor_t* x = NULL;
  CHECK(sw_tensor_from_data(rt, SW_DTYPE_F32, ext, 2, row, &x));
  return take(x, to_dtype(x, m->dtype));
}

static run_result decode(sw_runtime_t* rt, const options* o, model* m, sw_carrier_t* stream, int budgeted) {
  run_result r;
  memset(&r, 0, sizeof r);
  const size_t es = sw_dtype_size(m->dtype), k = (size_t)o->topk;
  r.routes = xmalloc(sizeof(int64_t) * (size_t)o->tokens * (size_t)m->layers * k);
  r.finals = xmalloc((size_t)o->tokens * (size_t)m->hidden * es);
  float* row = xmalloc(sizeof(float) * (size_t)m->hidden);
  int64_t* scratch = xmalloc(sizeof(int64_t) * (size_t)m->layers * k);
  /* The warm-up (first-use costs, the LRU's first fills), as the Python demo
   * runs it; then the counters restart and the stream is decoded from its start. */
  for (int t = 0; t < o->warmup && t < o->tokens; ++t)
    sw_tensor_release(step(o, m, token(rt, stream, m, t, row), scratch));
  if (budgeted)
    for (int l = 0; l < m->layers; ++l)
      for (int w = 0; w < kMatrices; ++w) lru_stats(m->layer[l].w[w].lru, &m->layer[l].w[w].before);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int t = 0; t < o->tokens; ++t) {
    int64_t* ids = r.routes + (size_t)t * (size_t)m->layers * k;
    sw_tensor_t* h = step(o, m, token(rt, stream, m, t, row), ids);
    CHECK(sw_tensor_read(h, r.finals + (size_t)t * (size_t)m->hidden * es, (size_t)m->hidden * es));
    sw_tensor_release(h);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  r.seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  if (budgeted) {
    const uint64_t tile_bytes = (uint64_t)m->hidden * (uint64_t)m->ffn * es;
    for (int l = 0; l < m->layers; ++l)
      for (int w = 0; w < kMatrices; ++w) {
        sw_lru_stats_t s;
        const sw_lru_stats_t* b = &m->layer[l].w[w].before;
        lru_stats(m->layer[l].w[w].lru, &s);
        r.bytes_read += (s.promoted - b->promoted + s.transient - b->transient) * tile_bytes;
        if (w == W1) {
          r.hits += s.hits - b->hits;
          r.required += (s.hits - b->hits) + (s.misses - b->misses);
        }
      }
  }
  free(scratch);
  free(row);
  return r;
}

/* Element i of a final-states buffer as a double (f32 or bf16). */
static double element(const run_result* r, sw_dtype_t dtype, size_t i) {
  if (dtype == SW_DTYPE_F32) {
    float v;
    memcpy(&v, r->finals + 4 * i, 4);
    return v;
  }
  uint16_t b;
  memcpy(&b, r->finals + 2 * i, 2);
  return bf16_to_f32(b);
}

/* The TRACE lines: documented in docs/moe-offload.md, printed identically
 * by mixtral_offload.py --trace. */
static void print_trace(const options* o, const model* m, const run_result* r) {
  const size_t k = (size_t)o->topk, H = (size_t)m->hidden;
  double total = 0, total_abs = 0;
  for (int t = 0; t < o->tokens; ++t) {
    for (int l = 0; l < m->layers; ++l) {
      const int64_t* ids = r->routes + ((size_t)t * (size_t)m->layers + (size_t)l) * k;
      if (!o->quiet) {
        printf("TRACE route token=%d layer=%d experts=", t, l);
        for (size_t j = 0; j < k; ++j) printf("%s%lld", j ? "," : "", (long long)ids[j]);
        printf("\n");
      }
    }
    double s = 0, a = 0;
    for (size_t i = 0; i < H; ++i) {
      const double v = element(r, m->dtype, (size_t)t * H + i);
      s += v;
      a += fabs(v);
    }
    if (!o->quiet) printf("TRACE final token=%d sum=%.17g abs=%.17g\n", t, s, a);
    total += s;
    total_abs += a;
  }
  const size_t bytes = (size_t)o->tokens * H * sw_dtype_size(m->dtype);
  uint64_t hash = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < bytes; ++i) hash = (hash ^ r->finals[i]) * 0x100000001b3ull;
  printf("TRACE checksum tokens=%d hidden=%d dtype=%s sum=%.17g abs=%.17g fnv1a=%016llx\n", o->tokens, m->hidden,
         m->dtype == SW_DTYPE_BF16 ? "bf16" : "f32", total, total_abs, (unsigned long long)hash);
  printf("TRACE hit_rate hits=%llu required=%llu rate=%.6f\n", (unsigned long long)r->hits,
         (unsigned long long)r->required, r->required ? (double)r->hits / (double)r->required : 0.0);
}

/* ---- the model and stream this program writes without --model ------------------------------- */

/* A (rows, cols) tensor indexed [row, col] of N(0, 1) * scale + shift
 * values rounded to `dtype`, from `seed`. */
static sw_tensor_t* random_matrix(sw_runtime_t* rt, sw_dtype_t dtype, int64_t rows, int64_t cols, uint64_t seed,
                                  double scale, double shift) {
  sw_random_desc_t d;
  sw_random_desc_init(&d);
  d.distribution = SW_RANDOM_NORMAL;
  d.seed = seed;
  d.stddev = scale;
  d.mean = shift;
  const int64_t ext[2] = {rows, cols};
  sw_tensor_t* t = NULL;
  CHECK(sw_tensor_random(rt, &d, ext, cols ? 2 : 1, &t));
  return take(t, to_dtype(t, dtype));
}

static void write_model(sw_runtime_t* rt, const options* o, const char* path) {
  const int E = o->experts, H = o->hidden, F = o->ffn;
  const size_t count = (size_t)o->layers * (2 + 3 * (size_t)E);
  char(*names)[128] = xmalloc(count * sizeof *names);
  const char** ptrs = xmalloc(count * sizeof *ptrs);
  sw_tensor_t** tensors = xmalloc(count * sizeof *tensors);
  uint64_t seed = (uint64_t)o->seed * 1000003u;
  size_t i = 0;
  for (int l = 0; l < o->layers; ++l) {
    norm_name(names[i], sizeof names[i], l);
    tensors[i++] = random_matrix(rt, o->dtype, H, 0, seed++, 0.1, 1.0);
    gate_name(names[i], sizeof names[i], l);
    tensors[i++] = random_matrix(rt, o->dtype, E, H, seed++, 1.0 / sqrt(H), 0.0);
    for (int e = 0; e < E; ++e) {
      expert_name(names[i], sizeof names[i], l, e, "w1");
      tensors[i++] = random_matrix(rt, o->dtype, F, H, seed++, 1.0 / sqrt(H), 0.0);
      expert_name(names[i], sizeof names[i], l, e, "w2");
      tensors[i++] = random_matrix(rt, o->dtype, H, F, seed++, 1.0 / sqrt(F), 0.0);
      expert_name(names[i], sizeof names[i], l, e, "w3");
      tensors[i++] = random_matrix(rt, o->dtype, F, H, seed++, 1.0 / sqrt(H), 0.0);
    }
  }
  for (size_t j = 0; j < count; ++j) ptrs[j] = names[j];
  sw_safetensors_save_desc_t desc;
  sw_safetensors_save_desc_init(&desc);
  const char* keys[1] = {"format"};
  const char* values[1] = {"pt"};
  desc.metadata_keys = keys;
  desc.metadata_values = values;
  desc.metadata_count = 1;
  CHECK(sw_save_safetensors(path, ptrs, tensors, count, &desc));
  for (size_t j = 0; j < count; ++j) sw_tensor_release(tensors[j]);
  free(tensors);
  free(ptrs);
  free(names);
}

/* The Python demo's process, x_t = rho x_{t-1} + sqrt(1 - rho^2) eps_t with
 * rho 0.8 (this program's own normal values), rounded to the dtype, saved
 * as the (tokens, H) float32 .npy the Python demo's --save-stream writes. */
static void write_stream(sw_runtime_t* rt, const options* o, const char* path) {
  const int H = o->hidden, T = o->tokens;
  sw_random_desc_t d;
  sw_random_desc_init(&d);
  d.distribution = SW_RANDOM_NORMAL;
  d.seed = (uint64_t)o->seed + 1;
  const int64_t ext[2] = {H, T}; /* first mode fastest: token t's values are contiguous */
  sw_tensor_t* eps = NULL;
  CHECK(sw_tensor_random(rt, &d, ext, 2, &eps));
  float* x = xmalloc(sizeof(float) * (size_t)H * (size_t)T);
  CHECK(sw_tensor_read(eps, x, sizeof(float) * (size_t)H * (size_t)T));
  sw_tensor_release(eps);
  const float rho = 0.8f, c = sqrtf(1.0f - rho * rho);
  for (size_t t = 1; t < (size_t)T; ++t)
    for (size_t i = 0; i < (size_t)H; ++i)
      x[t * (size_t)H + i] = rho * x[(t - 1) * (size_t)H + i] + c * x[t * (size_t)H + i];
  sw_tensor_t* xs = NULL;
  CHECK(sw_tensor_from_data(rt, SW_DTYPE_F32, ext, 2, x, &xs));
  free(x);
  sw_tensor_t* rounded = take(xs, to_dtype(xs, o->dtype));
  sw_tensor_t* back = take(rounded, to_dtype(rounded, SW_DTYPE_F32));
  sw_tensor_t* rows = NULL; /* (T, H), indexed as the file will be */
  CHECK(sw_tensor_transpose(back, 0, 1, &rows));
  CHECK(sw_save_npy(path, rows));
  sw_tensor_release(rows);
  sw_tensor_release(back);
}

/* ---- main ------------------------------------------------------------------------------------ */

static void usage(void) {
  fprintf(stderr,
          "usage: mixtral_offload [--model FILE.safetensors --stream FILE.npy] [--topk K] [--budget F]\n"
          "                       [--warmup N] [--tokens N] [--tier direct|page-cache] [--verify] [--quiet]\n"
          "       without --model: [--layers L] [--experts E] [--hidden H] [--ffn F] [--tokens T]\n"
          "                        [--dtype f32|bf16] [--seed S]\n");
  exit(2);
}

int main(int argc, char** argv) {
  options o = {NULL, NULL, 2, 2, -1, 0, 0, 1, 0.25, 2, 8, 64, 96, 1234, SW_DTYPE_F32};
  for (int a = 1; a < argc; ++a) {
    const char* arg = argv[a];
    if (!strcmp(arg, "--verify")) { o.verify = 1; continue; }
    if (!strcmp(arg, "--quiet")) { o.quiet = 1; continue; }
    if (a + 1 >= argc) usage();
    const char* v = argv[++a];
    if (!strcmp(arg, "--model")) o.model = v;
    else if (!strcmp(arg, "--stream")) o.stream = v;
    else if (!strcmp(arg, "--topk")) o.topk = atoi(v);
    else if (!strcmp(arg, "--budget")) o.budget = atof(v);
    else if (!strcmp(arg, "--warmup")) o.warmup = atoi(v);
    else if (!strcmp(arg, "--tokens")) o.tokens = atoi(v);
    else if (!strcmp(arg, "--tier") && (!strcmp(v, "direct") || !strcmp(v, "page-cache"))) o.direct_io = !strcmp(v, "direct");
    else if (!strcmp(arg, "--layers")) o.layers = atoi(v);
    else if (!strcmp(arg, "--experts")) o.experts = atoi(v);
    else if (!strcmp(arg, "--hidden")) o.hidden = atoi(v);
    else if (!strcmp(arg, "--ffn")) o.ffn = atoi(v);
    else if (!strcmp(arg, "--seed")) o.seed = atoi(v);
    else if (!strcmp(arg, "--dtype") && (!strcmp(v, "f32") || !strcmp(v, "bf16")))
      o.dtype = !strcmp(v, "bf16") ? SW_DTYPE_BF16 : SW_DTYPE_F32;
    else usage();
  }
  if (!o.model != !o.stream) {
    fprintf(stderr, "mixtral_offload: --model and --stream go together\n");
    return 2;
  }
  if (!(o.budget > 0 && o.budget <= 1) || o.warmup < 0 || o.tokens == 0 || o.tokens < -1 ||
      (!o.model && (o.layers < 1 || o.layers > kMaxLayers || o.experts < 1 || o.experts > kMaxExperts ||
                    o.hidden < 1 || o.ffn < 1)))
    usage();

  sw_runtime_t* rt = NULL;
  CHECK(sw_runtime_create(NULL, &rt));
  char dir[] = "/tmp/sw_mixtral_offload_XXXXXX";
  char model_path[128], stream_path[128];
  const int own = !o.model;
  if (own) {
    if (!mkdtemp(dir)) {
      perror("mkdtemp");
      return 1;
    }
    if (o.tokens < 0) o.tokens = 6;
    snprintf(model_path, sizeof model_path, "%s/model.safetensors", dir);
    snprintf(stream_path, sizeof stream_path, "%s/stream.npy", dir);
    write_model(rt, &o, model_path);
    write_stream(rt, &o, stream_path);
    o.model = model_path;
    o.stream = stream_path;
    o.verify = 1;
  }

  model* m = xmalloc(sizeof *m);
  memset(m, 0, sizeof *m);
  read_shapes(rt, o.model, m);
  /* Python's round() of budget * E: halves to even, as rint does. */
  m->budget_tiles = (int)rint(o.budget * m->experts);
  if (m->budget_tiles < 1) m->budget_tiles = 1;
  if (o.topk < 1 || o.topk > m->experts) {
    fprintf(stderr, "mixtral_offload: --topk must be between 1 and the model's %d experts\n", m->experts);
    return 2;
  }

  sw_file_tensor_info_t si;
  sw_file_tensor_info_init(&si);
  sw_carrier_t* stream = NULL;
  CHECK(sw_carrier_open_npy(rt, o.stream, NULL, &si, &stream));
  if (si.dtype != SW_DTYPE_F32 || si.rank != 2 || si.shape[1] != m->hidden || si.order != SW_FILE_ORDER_ROW_MAJOR) {
    fprintf(stderr, "mixtral_offload: %s is not a C-order (tokens, %d) float32 array\n", o.stream, m->hidden);
    return 2;
  }
  if (o.tokens < 0 || o.tokens > si.shape[0]) o.tokens = (int)si.shape[0];

  printf("StrideWeave %s: Mixtral-architecture MoE decoding in C, %d layers x %d experts (top-%d), hidden %d, "
         "ffn %d, %s; primary budget %d of %d experts per layer and matrix; %d tokens after %d warm-up%s\n",
         sw_version_string(), m->layers, m->experts, o.topk, m->hidden, m->ffn, sw_dtype_name(m->dtype),
         m->budget_tiles, m->experts, o.tokens, o.warmup, own ? "; a model of its own" : "");
  fflush(stdout);

  bool grad = sw_set_grad_enabled(false); /* inference */
  open_model(rt, &o, m, 1);
  run_result off = decode(rt, &o, m, stream, 1);
  close_model(m);
  print_trace(&o, m, &off);
  printf("offloaded: hit rate %.1f%% (%llu of %llu w1 expert uses), %.1f MiB read from the model file; "
         "%.3f ms per token (%.2f tokens/s)\n",
         off.required ? 100.0 * (double)off.hits / (double)off.required : 0.0, (unsigned long long)off.hits,
         (unsigned long long)off.required, (double)off.bytes_read / (1 << 20), 1000.0 * off.seconds / o.tokens,
         off.seconds > 0 ? o.tokens / off.seconds : 0.0);

  int status = 0;
  if (o.verify) {
    /* The same stream with every expert resident and no budget: the budget
     * decides where the bytes come from, never what is computed. */
    open_model(rt, &o, m, 0);
    run_result res = decode(rt, &o, m, stream, 0);
    close_model(m);
    const size_t route_bytes = sizeof(int64_t) * (size_t)o.tokens * (size_t)m->layers * (size_t)o.topk;
    const size_t final_bytes = (size_t)o.tokens * (size_t)m->hidden * sw_dtype_size(m->dtype);
    const int same_routes = !memcmp(off.routes, res.routes, route_bytes);
    const int same_finals = !memcmp(off.finals, res.finals, final_bytes);
    const int counted = off.required == (uint64_t)o.tokens * (uint64_t)m->layers * (uint64_t)o.topk;
    printf("verify: resident run %s routing, %s final states; %llu w1 expert uses counted (%s)\n",
           same_routes ? "same" : "DIFFERENT", same_finals ? "bit-identical" : "DIFFERENT",
           (unsigned long long)off.required, counted ? "every use" : "WRONG COUNT");
    if (!same_routes || !same_finals || !counted) status = 1;
    free(res.routes);
    free(res.finals);
  }
  sw_set_grad_enabled(grad);
  free(off.routes);
  free(off.finals);
  free(m);
  sw_carrier_release(stream);
  CHECK(sw_runtime_shutdown(rt));
  sw_runtime_release(rt);
  if (own) {
    unlink(model_path);
    unlink(stream_path);
    rmdir(dir);
  }
  return status;
}
