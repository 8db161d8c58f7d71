/* Helpers shared by the op suites (ops_forward, ops_broadcast, matmul,
 * autograd): operands on arbitrary layouts with their logical values computed
 * independently of the library, plain-loop reference ops in double, and
 * checks that results are fresh dense tensors. Public ABI only. */
#ifndef SW_OPS_TEST_H_
#define SW_OPS_TEST_H_

#include <stdbool.h>

#include "sw_test.h"

#define REF_MAX_LEAVES 8

/* ------------------------------------------------------------------------ */
/* A reference layout evaluator                                             */
/* ------------------------------------------------------------------------ */

/* The leaves of each top-level mode, in order (first leaf fastest). */
typedef struct ref_layout {
  size_t rank;
  int64_t extent[SW_MAX_RANK];
  size_t leaves[SW_MAX_RANK];
  int64_t leaf_extent[SW_MAX_RANK][REF_MAX_LEAVES];
  int64_t leaf_stride[SW_MAX_RANK][REF_MAX_LEAVES];
} ref_layout;

static inline void ref_skip(const char** p) {
  while (**p == ' ') ++*p;
}

/* Appends every integer of one tree, depth first, to values[*count]. */
static inline void ref_flatten(const char** p, int64_t* values, size_t* count) {
  ref_skip(p);
  if (**p == '(') {
    ++*p;
    ref_skip(p);
    if (**p == ')') {
      ++*p;
      return;
    }
    for (;;) {
      ref_flatten(p, values, count);
      ref_skip(p);
      const char c = *(*p)++;
      if (c == ')') return;
      if (c != ',') fail_msg("reference layout parser: unexpected '%c'", c);
    }
  }
  char* end = NULL;
  const long long v = strtoll(*p, &end, 10);
  if (end == *p) fail_msg("reference layout parser: expected an integer at \"%s\"", *p);
  if (*count >= REF_MAX_LEAVES) fail_msg("reference layout parser: too many leaves in one mode");
  values[(*count)++] = (int64_t)v;
  *p = end;
}

/* Parses one side of "shape:stride" into the top-level modes' leaf values. */
static inline size_t ref_parse_side(const char** p, int64_t out[SW_MAX_RANK][REF_MAX_LEAVES], size_t* leaves) {
  ref_skip(p);
  if (**p != '(') { /* a single leaf: rank 1 */
    leaves[0] = 0;
    ref_flatten(p, out[0], &leaves[0]);
    return 1;
  }
  ++*p;
  size_t rank = 0;
  ref_skip(p);
  if (**p == ')') {
    ++*p;
    return 0;
  }
  for (;;) {
    leaves[rank] = 0;
    ref_flatten(p, out[rank], &leaves[rank]);
    ++rank;
    ref_skip(p);
    const char c = *(*p)++;
    if (c == ')') return rank;
    if (c != ',') fail_msg("reference layout parser: unexpected '%c'", c);
  }
}

static inline ref_layout ref_layout_parse(const char* text) {
  ref_layout r;
  memset(&r, 0, sizeof r);
  size_t stride_leaves[SW_MAX_RANK];
  const char* p = text;
  r.rank = ref_parse_side(&p, r.leaf_extent, r.leaves);
  ref_skip(&p);
  if (*p++ != ':') fail_msg("reference layout parser: expected ':' in \"%s\"", text);
  const size_t srank = ref_parse_side(&p, r.leaf_stride, stride_leaves);
  if (srank != r.rank) fail_msg("reference layout parser: ranks differ in \"%s\"", text);
  for (size_t m = 0; m < r.rank; ++m) {
    if (stride_leaves[m] != r.leaves[m]) fail_msg("reference layout parser: leaves differ in \"%s\"", text);
    r.extent[m] = 1;
    for (size_t k = 0; k < r.leaves[m]; ++k) r.extent[m] *= r.leaf_extent[m][k];
  }
  return r;
}

static inline int64_t ref_layout_size(const ref_layout* l) {
  int64_t n = 1;
  for (size_t m = 0; m < l->rank; ++m) n *= l->extent[m];
  return n;
}

/* The index of the coordinate whose first-mode-fastest ordinal is `ordinal`. */
static inline int64_t ref_layout_index(const ref_layout* l, int64_t ordinal) {
  int64_t index = 0;
  for (size_t m = 0; m < l->rank; ++m) {
    int64_t c = ordinal % l->extent[m];
    ordinal /= l->extent[m];
    for (size_t k = 0; k < l->leaves[m]; ++k) {
      index += (c % l->leaf_extent[m][k]) * l->leaf_stride[m][k];
      c /= l->leaf_extent[m][k];
    }
  }
  return index;
}

/* Smallest and largest index reached by a non-empty layout. */
static inline void ref_layout_span(const ref_layout* l, int64_t* lo, int64_t* hi) {
  *lo = *hi = 0;
  for (size_t m = 0; m < l->rank; ++m)
    for (size_t k = 0; k < l->leaves[m]; ++k) {
      const int64_t reach = (l->leaf_extent[m][k] - 1) * l->leaf_stride[m][k];
      if (reach < 0) *lo += reach;
      else *hi += reach;
    }
}

/* ------------------------------------------------------------------------ */
/* Element conversion                                                        */
/* ------------------------------------------------------------------------ */

/* f16 bits of a value exactly representable as a normal f16 (or zero). */
static inline uint16_t f16_bits(double v) {
  if (v == 0) return signbit(v) ? 0x8000 : 0;
  const uint16_t sign = v < 0 ? 0x8000 : 0;
  int e = 0;
  const double m = frexp(fabs(v), &e); /* |v| = m * 2^e, m in [0.5, 1) */
  const int biased = e - 1 + 15;
  const double frac = (m * 2.0 - 1.0) * 1024.0;
  if (biased < 1 || biased > 30 || frac != floor(frac)) fail_msg("%g is not an exact normal f16", v);
  return (uint16_t)(sign | (uint16_t)(biased << 10) | (uint16_t)frac);
}

/* bf16 bits of a value exactly representable in bf16. */
static inline uint16_t bf16_bits(double v) {
  const float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0xffffu) != 0 || (double)f != v) fail_msg("%g is not an exact bf16", v);
  return (uint16_t)(u >> 16);
}

/* Encodes `n` doubles as `dtype` elements (exactly, or failing the test for
 * f16/bf16; f32 rounds). */
static inline void encode_elements(sw_dtype_t dtype, const double* v, int64_t n, void* out) {
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
      case SW_DTYPE_F32: ((float*)out)[i] = (float)v[i]; break;
      case SW_DTYPE_F64: ((double*)out)[i] = v[i]; break;
      case SW_DTYPE_F16: ((uint16_t*)out)[i] = f16_bits(v[i]); break;
      case SW_DTYPE_BF16: ((uint16_t*)out)[i] = bf16_bits(v[i]); break;
      case SW_DTYPE_I32: ((int32_t*)out)[i] = (int32_t)v[i]; break;
      default: fail_msg("encode_elements: unsupported dtype %s", sw_dtype_name(dtype));
    }
  }
}

/* `v` rounded to nearest even at `bits` significant bits (normal range). */
static inline double round_bits(double v, int bits) {
  if (v == 0 || !isfinite(v)) return v;
  int e = 0;
  const double m = frexp(v, &e);
  return ldexp(nearbyint(ldexp(m, bits)), e - bits);
}

/* `v` rounded to the precision of a float result dtype; half results are
 * rounded from f32, as the kernels round their f32 sums. */
static inline double round_to(sw_dtype_t dtype, double v) {
  switch (dtype) {
    case SW_DTYPE_F32: return (double)(float)v;
    case SW_DTYPE_F16: return round_bits((double)(float)v, 11);
    case SW_DTYPE_BF16: return round_bits((double)(float)v, 8);
    default: return v;
  }
}

/* The value of f16 or bf16 bits. */
static inline double half_value(sw_dtype_t dtype, uint16_t h) {
  if (dtype == SW_DTYPE_BF16) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  const int e = (h >> 10) & 31, m = h & 1023;
  const double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0) return s * ldexp(m, -24);
  if (e == 31) return m ? NAN : s * INFINITY;
  return s * ldexp(1024 + m, e - 25);
}

/* ------------------------------------------------------------------------ */
/* Operands: a tensor plus its logical values                               */
/* ------------------------------------------------------------------------ */

typedef struct operand {
  sw_tensor_t* t;
  double* v; /* logical values, first mode fastest */
  int64_t n;
  size_t rank;
  int64_t shape[SW_MAX_RANK];
} operand;

/* Value patterns for slot `s`. Integer patterns keep f32 arithmetic exact. */
static inline double pat_int(int64_t s, int seed) { return (double)(((s * 37 + seed * 11 + 5) % 17 + 17) % 17 - 8); }
/* Never zero: integers plus a quarter. */
static inline double pat_quarter(int64_t s, int seed) { return pat_int(s, seed) + 0.25; }
/* Irrational-looking values for finite differences. */
static inline double pat_smooth(int64_t s, int seed) { return sin(0.7 * (double)s + 1.3 * seed) * 1.5 + 0.1 * seed; }

typedef double (*pattern_fn)(int64_t slot, int seed);

static inline operand operand_alloc(size_t rank, const int64_t* shape) {
  operand o;
  memset(&o, 0, sizeof o);
  o.rank = rank;
  o.n = 1;
  for (size_t i = 0; i < rank; ++i) {
    o.shape[i] = shape[i];
    o.n *= shape[i];
  }
  o.v = (double*)calloc((size_t)(o.n ? o.n : 1), sizeof(double));
  return o;
}

static inline void operand_free(operand* o) {
  sw_tensor_release(o->t);
  free(o->v);
  memset(o, 0, sizeof *o);
}

/* A dense tensor of `dtype` holding pattern values (rounded to the dtype). */
static inline operand op_dense(sw_runtime_t* rt, sw_dtype_t dtype, const int64_t* shape, size_t rank, pattern_fn pat,
                        int seed) {
  operand o = operand_alloc(rank, shape);
  for (int64_t i = 0; i < o.n; ++i) o.v[i] = round_to(dtype, pat(i, seed));
  void* raw = malloc(8 * (size_t)(o.n ? o.n : 1));
  encode_elements(dtype, o.v, o.n, raw);
  SW_OK_(sw_tensor_from_data(rt, dtype, shape, rank, raw, &o.t));
  free(raw);
  return o;
}

/* A dense tensor holding exactly `values` (first mode fastest). */
static inline operand op_values(sw_runtime_t* rt, sw_dtype_t dtype, const int64_t* shape, size_t rank, const double* values) {
  operand o = operand_alloc(rank, shape);
  for (int64_t i = 0; i < o.n; ++i) o.v[i] = values[i];
  void* raw = malloc(8 * (size_t)(o.n ? o.n : 1));
  encode_elements(dtype, o.v, o.n, raw);
  SW_OK_(sw_tensor_from_data(rt, dtype, shape, rank, raw, &o.t));
  free(raw);
  return o;
}

/* A tensor over a fresh carrier with the layout written as `text` (parsed by
 * sw_layout_parse), placed `extra_offset` slots past the smallest offset that
 * keeps negative strides in range. Every carrier slot holds pat(slot, seed),
 * so unreachable slots are garbage the result must not see. */
static inline operand op_strided(sw_runtime_t* rt, sw_dtype_t dtype, const char* text, int64_t extra_offset,
                          pattern_fn pat, int seed) {
  const ref_layout rl = ref_layout_parse(text);
  operand o = operand_alloc(rl.rank, rl.extent);
  int64_t lo = 0, hi = 0;
  if (o.n) ref_layout_span(&rl, &lo, &hi);
  const int64_t offset = extra_offset - lo;
  const int64_t slots = offset + hi + 1 + 3;
  double* slot_values = (double*)malloc(sizeof(double) * (size_t)slots);
  for (int64_t s = 0; s < slots; ++s) slot_values[s] = round_to(dtype, pat(s, seed));
  void* raw = malloc(8 * (size_t)slots);
  encode_elements(dtype, slot_values, slots, raw);
  sw_carrier_t* carrier = NULL;
  SW_OK_(sw_carrier_create_cpu_from(rt, dtype, raw, (size_t)slots, &carrier));
  sw_layout_t* layout = NULL;
  SW_OK_(sw_layout_parse(text, &layout));
  SW_OK_(sw_tensor_create(carrier, offset, layout, &o.t));
  for (int64_t i = 0; i < o.n; ++i) o.v[i] = slot_values[offset + ref_layout_index(&rl, i)];
  sw_layout_release(layout);
  sw_carrier_release(carrier);
  free(raw);
  free(slot_values);
  return o;
}

/* The view of `src` whose mode i is mode perm[i], through sw_tensor_permute
 * (sw_tensor_transpose when perm swaps exactly two modes). */
static inline operand op_permute(const operand* src, const size_t* perm) {
  int64_t shape[SW_MAX_RANK];
  size_t swapped[2], nswapped = 0;
  for (size_t i = 0; i < src->rank; ++i) {
    shape[i] = src->shape[perm[i]];
    if (perm[i] != i && nswapped < 2) swapped[nswapped++] = i;
  }
  operand o = operand_alloc(src->rank, shape);
  bool is_swap = nswapped == 2 && perm[swapped[0]] == swapped[1] && perm[swapped[1]] == swapped[0];
  for (size_t i = 0; i < src->rank; ++i)
    if (i != swapped[0] && i != swapped[1] && perm[i] != i) is_swap = false;
  if (is_swap)
    SW_OK_(sw_tensor_transpose(src->t, swapped[0], swapped[1], &o.t));
  else
    SW_OK_(sw_tensor_permute(src->t, perm, src->rank, &o.t));
  for (int64_t i = 0; i < o.n; ++i) {
    int64_t c[SW_MAX_RANK], sc[SW_MAX_RANK], r = i;
    for (size_t m = 0; m < o.rank; ++m) {
      c[m] = r % o.shape[m];
      r /= o.shape[m];
    }
    for (size_t m = 0; m < o.rank; ++m) sc[perm[m]] = c[m];
    int64_t ord = 0, mul = 1;
    for (size_t m = 0; m < src->rank; ++m) {
      ord += sc[m] * mul;
      mul *= src->shape[m];
    }
    o.v[i] = src->v[ord];
  }
  return o;
}

/* ------------------------------------------------------------------------ */
/* Result checks                                                             */
/* ------------------------------------------------------------------------ */

/* Asserts that `t` is a dense tensor of `dtype` and `shape` (its layout equals
 * sw_layout_dense of the shape) and returns its values, read straight from
 * the carrier's slots. Caller frees. */
static inline double* result_values(const sw_tensor_t* t, sw_dtype_t dtype, const int64_t* shape, size_t rank) {
  sw_dtype_t d = SW_DTYPE_INVALID;
  SW_OK_(sw_tensor_dtype(t, &d));
  if (d != dtype) fail_msg("result dtype %s, expected %s", sw_dtype_name(d), sw_dtype_name(dtype));
  size_t r = 99;
  SW_OK_(sw_tensor_rank(t, &r));
  if (r != rank) fail_msg("result rank %zu, expected %zu", r, rank);
  int64_t got[SW_MAX_RANK];
  SW_OK_(sw_tensor_shape(t, got, SW_MAX_RANK));
  int64_t n = 1;
  for (size_t i = 0; i < rank; ++i) {
    if (got[i] != shape[i])
      fail_msg("result extent %zu is %lld, expected %lld", i, (long long)got[i], (long long)shape[i]);
    n *= shape[i];
  }
  sw_layout_t *have = NULL, *dense = NULL;
  SW_OK_(sw_tensor_layout(t, &have));
  SW_OK_(sw_layout_dense(shape, rank, &dense));
  bool equal = false;
  SW_OK_(sw_layout_equal(have, dense, &equal));
  if (!equal) {
    char text[256] = "";
    size_t len = 0;
    sw_error_free(sw_layout_to_string(have, text, sizeof text, &len));
    fail_msg("result layout %s is not dense", text);
  }
  sw_layout_release(have);
  sw_layout_release(dense);
  sw_carrier_t* c = NULL;
  int64_t offset = -1;
  SW_OK_(sw_tensor_carrier(t, &c));
  SW_OK_(sw_tensor_offset(t, &offset));
  const size_t es = sw_dtype_size(dtype);
  unsigned char* raw = (unsigned char*)malloc(es * (size_t)(n ? n : 1));
  if (n) SW_OK_(sw_carrier_read(c, (size_t)offset, (size_t)n, raw));
  sw_carrier_release(c);
  double* out = (double*)malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == SW_DTYPE_F32) {
      float f;
      memcpy(&f, raw + 4 * i, 4);
      out[i] = f;
    } else if (dtype == SW_DTYPE_F64) {
      memcpy(&out[i], raw + 8 * i, 8);
    } else if (dtype == SW_DTYPE_F16 || dtype == SW_DTYPE_BF16) {
      uint16_t h;
      memcpy(&h, raw + 2 * i, 2);
      out[i] = half_value(dtype, h);
    } else {
      fail_msg("result_values: unexpected dtype %s", sw_dtype_name(dtype));
    }
  }
  free(raw);
  return out;
}

/* Asserts got[i] == want[i] for every i (bitwise equal values, -0 == 0). */
static inline void expect_exact(const char* what, const double* got, const double* want, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!(got[i] == want[i]))
      fail_msg("%s: element %lld is %.17g, expected %.17g", what, (long long)i, got[i], want[i]);
}

/* Asserts |got - want| <= tol[i] for every i. */
static inline void expect_within(const char* what, const double* got, const double* want, const double* tol, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!(fabs(got[i] - want[i]) <= tol[i]))
      fail_msg("%s: element %lld is %.17g, expected %.17g (tolerance %.3g)", what, (long long)i, got[i], want[i],
               tol[i]);
}

/* Checks `t` against an exact reference of `shape`, then releases `t`. */
static inline void check_exact(const char* what, sw_tensor_t* t, sw_dtype_t dtype, const int64_t* shape, size_t rank,
                        const double* want) {
  int64_t n = 1;
  for (size_t i = 0; i < rank; ++i) n *= shape[i];
  double* got = result_values(t, dtype, shape, rank);
  expect_exact(what, got, want, n);
  free(got);
  sw_tensor_release(t);
}

/* ------------------------------------------------------------------------ */
/* Reference ops (plain loops in double)                                    */
/* ------------------------------------------------------------------------ */

/* NumPy broadcast of two shapes; false if they do not broadcast. */
static inline bool ref_broadcast_shape(const int64_t* a, size_t ra, const int64_t* b, size_t rb, int64_t* out,
                                size_t* rout) {
  const size_t r = ra > rb ? ra : rb;
  for (size_t i = 0; i < r; ++i) {
    const int64_t x = i + ra >= r ? a[i + ra - r] : 1;
    const int64_t y = i + rb >= r ? b[i + rb - r] : 1;
    if (x != y && x != 1 && y != 1) return false;
    out[i] = x == 1 ? y : x;
  }
  *rout = r;
  return true;
}

/* Decodes ordinal `o` of `shape` (first mode fastest). */
static inline void ref_decode(int64_t o, const int64_t* shape, size_t rank, int64_t* coord) {
  for (size_t i = 0; i < rank; ++i) {
    coord[i] = o % shape[i];
    o /= shape[i];
  }
}

/* The ordinal in a tensor of `shape` (rank `rank`) read by output coordinate
 * `c` of rank `rout` under broadcasting. */
static inline int64_t ref_broadcast_ordinal(const int64_t* c, size_t rout, const int64_t* shape, size_t rank) {
  int64_t ord = 0, mul = 1;
  for (size_t i = 0; i < rank; ++i) {
    const int64_t ci = shape[i] == 1 ? 0 : c[i + rout - rank];
    ord += ci * mul;
    mul *= shape[i];
  }
  return ord;
}

typedef enum ref_binary_op { REF_ADD, REF_MUL } ref_binary_op;

/* a (op) b with broadcasting, each result rounded to `dtype`. */
static inline double* ref_binary(ref_binary_op op, const operand* a, const operand* b, sw_dtype_t dtype, int64_t* shape,
                          size_t* rank) {
  if (!ref_broadcast_shape(a->shape, a->rank, b->shape, b->rank, shape, rank)) fail_msg("ref_binary: no broadcast");
  int64_t n = 1;
  for (size_t i = 0; i < *rank; ++i) n *= shape[i];
  double* out = (double*)malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t o = 0; o < n; ++o) {
    int64_t c[SW_MAX_RANK];
    ref_decode(o, shape, *rank, c);
    const double x = a->v[ref_broadcast_ordinal(c, *rank, a->shape, a->rank)];
    const double y = b->v[ref_broadcast_ordinal(c, *rank, b->shape, b->rank)];
    out[o] = round_to(dtype, op == REF_ADD ? x + y : x * y);
  }
  return out;
}

/* Sums `a` over the modes whose bit is set in `mask`. */
static inline double* ref_reduce_sum(const operand* a, unsigned mask, bool keepdims, int64_t* shape, size_t* rank) {
  int64_t kept[SW_MAX_RANK];
  int64_t n = 1;
  *rank = 0;
  for (size_t i = 0; i < a->rank; ++i) {
    const bool reduced = (mask >> i) & 1u;
    kept[i] = reduced ? 1 : a->shape[i];
    n *= kept[i];
    if (!reduced || keepdims) shape[(*rank)++] = kept[i];
  }
  double* out = (double*)calloc((size_t)(n ? n : 1), sizeof(double));
  for (int64_t o = 0; o < a->n; ++o) {
    int64_t c[SW_MAX_RANK];
    ref_decode(o, a->shape, a->rank, c);
    int64_t ord = 0, mul = 1;
    for (size_t i = 0; i < a->rank; ++i) {
      ord += (kept[i] == 1 ? 0 : c[i]) * mul;
      mul *= kept[i];
    }
    out[ord] += a->v[o];
  }
  return out;
}

/* NumPy matmul in double. `abs_out`, if not NULL, receives sum |a||b| per
 * element (a scale for tolerances). Returns NULL if the shapes do not fit. */
static inline double* ref_matmul(const operand* a, const operand* b, int64_t* shape, size_t* rank, double** abs_out) {
  if (a->rank == 0 || b->rank == 0) return NULL;
  /* Promote rank-1 operands. */
  int64_t as[SW_MAX_RANK + 1], bs[SW_MAX_RANK + 1];
  size_t ra = a->rank, rb = b->rank;
  if (ra == 1) {
    as[0] = 1;
    as[1] = a->shape[0];
    ra = 2;
  } else {
    memcpy(as, a->shape, sizeof(int64_t) * ra);
  }
  if (rb == 1) {
    bs[0] = b->shape[0];
    bs[1] = 1;
    rb = 2;
  } else {
    memcpy(bs, b->shape, sizeof(int64_t) * rb);
  }
  const int64_t M = as[ra - 2], K = as[ra - 1], N = bs[rb - 1];
  if (bs[rb - 2] != K) return NULL;
  int64_t batch[SW_MAX_RANK];
  size_t rbatch = 0;
  if (!ref_broadcast_shape(as, ra - 2, bs, rb - 2, batch, &rbatch)) return NULL;
  int64_t nbatch = 1;
  for (size_t i = 0; i < rbatch; ++i) nbatch *= batch[i];
  /* The result shape drops promoted modes. */
  *rank = 0;
  for (size_t i = 0; i < rbatch; ++i) shape[(*rank)++] = batch[i];
  if (a->rank >= 2) shape[(*rank)++] = M;
  if (b->rank >= 2) shape[(*rank)++] = N;
  const int64_t n = nbatch * M * N;
  double* out = (double*)calloc((size_t)(n ? n : 1), sizeof(double));
  double* abs_acc = abs_out ? (double*)calloc((size_t)(n ? n : 1), sizeof(double)) : NULL;
  /* First mode fastest: batch modes vary fastest, the matrix modes slowest. */
  int64_t abatch = 1, bbatch = 1;
  for (size_t i = 0; i + 2 < ra; ++i) abatch *= as[i];
  for (size_t i = 0; i + 2 < rb; ++i) bbatch *= bs[i];
  for (int64_t bi = 0; bi < nbatch; ++bi) {
    int64_t c[SW_MAX_RANK];
    ref_decode(bi, batch, rbatch, c);
    const int64_t abase = ref_broadcast_ordinal(c, rbatch, as, ra - 2);
    const int64_t bbase = ref_broadcast_ordinal(c, rbatch, bs, rb - 2);
    for (int64_t j = 0; j < N; ++j)
      for (int64_t i = 0; i < M; ++i) {
        double s = 0, sa = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double x = a->v[abase + abatch * (i + M * k)], y = b->v[bbase + bbatch * (k + K * j)];
          s += x * y;
          sa += fabs(x * y);
        }
        out[bi + nbatch * (i + M * j)] = s;
        if (abs_acc) abs_acc[bi + nbatch * (i + M * j)] = sa;
      }
  }
  if (abs_out) *abs_out = abs_acc;
  return out;
}

#endif /* SW_OPS_TEST_H_ */
