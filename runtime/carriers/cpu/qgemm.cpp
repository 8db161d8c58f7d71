// Products with block-quantized weights: X quantized to 8-bit blocks, the
// weights decoded inside the integer dot product (qgemm_simd.inc), the
// column blocks of every product of a call claimed across the compute
// threads. The error against the f32 product of the dequantized weights
// comes from X's rounding alone (each weight block is exact in its codes):
// |c - c_exact| <= sum over X's blocks b of (d_b / 2) * sum_{i in b} |w_i|,
// d_b = max |x_i| / 127 over the block (32 values, 256 for the K-quants),
// plus f32 rounding of the sums (docs/quantization.md).
#include "carriers/cpu/qgemm.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "base/error.hpp"
#include "core/dtype.hpp"
#include "core/quant.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define SW_QGEMM_X86 1
#else
#define SW_QGEMM_X86 0
#endif

namespace sw::qgemm {
namespace {

// quant::mxfp4_scale of each exponent byte.
constexpr std::array<float, 256> kMxfp4Scale = [] {
  std::array<float, 256> t{};
  for (int e = 0; e < 256; ++e) t[static_cast<size_t>(e)] = quant::mxfp4_scale(static_cast<uint8_t>(e));
  return t;
}();

using Columns = void (*)(sw_dtype_t, const std::byte*, int64_t, int64_t, const Activations&, float*, int64_t,
                         int64_t);
// n contiguous values of X (a multiple of 32) to codes: returns the scale,
// and the sums of the codes over each 16 in sums16.
using Quantize = float (*)(const float* x, int n, int8_t* q, int32_t* sums16);
// Lays `count` groups of X's blocks of 32 (and their sums of q) out as
// XGroups for weights of a dtype, for kernels that take them.
using Groups = void (*)(sw_dtype_t, const XBlock*, const int32_t* sums, int64_t count, XGroup*);

// The reference of every Quantize: the scale amax / 127 and the codes
// nearest(x / d), in f32 steps that the SIMD versions repeat exactly.
float quantize_block(const float* x, int n, int8_t* q, int32_t* sums16) {
  float amax = 0.0f;
  for (int l = 0; l < n; ++l) amax = std::max(amax, std::fabs(x[l]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int l = 0; l < n; ++l) q[l] = static_cast<int8_t>(std::nearbyint(std::clamp(x[l] * id, -127.0f, 127.0f)));
  for (int h = 0; h < n / 16; ++h) {
    int32_t sum = 0;
    for (int l = 0; l < 16; ++l) sum += q[16 * h + l];
    sums16[h] = sum;
  }
  return d;
}

// ---- plain C++: a weight unit decoded to f32 (on the stack), times X ----------------

void portable_columns(sw_dtype_t wt, const std::byte* w, int64_t ldw, int64_t n, const Activations& xa, float* c,
                      int64_t rsc, int64_t csc) {
  const int64_t per_row = xa.per_row, m = xa.rows;
  const int64_t unit = dtype_block_elements(wt);
  const size_t bytes = dtype_block_bytes(wt);
  const bool k = wants_k_blocks(wt);
  const void* x = k ? static_cast<const void*>(xa.kblocks.data()) : static_cast<const void*>(xa.blocks.data());
  float v[256];
  for (int64_t j = 0; j < n; ++j) {
    const std::byte* col = w + j * ldw;
    for (int64_t i = 0; i < m; ++i) {
      float sum = 0.0f;
      for (int64_t s = 0; s < per_row; ++s) {
        quant::dequantize(wt, col + s * bytes, 1, v);
        const int8_t* q = k ? static_cast<const XBlockK*>(x)[i * per_row + s].q
                            : static_cast<const XBlock*>(x)[i * per_row + s].q;
        const float d = k ? static_cast<const XBlockK*>(x)[i * per_row + s].d
                          : static_cast<const XBlock*>(x)[i * per_row + s].d;
        float dot = 0.0f;
        for (int64_t l = 0; l < unit; ++l) dot += v[l] * static_cast<float>(q[l]);
        sum += dot * d;
      }
      c[i * rsc + j * csc] = sum;
    }
  }
}

}  // namespace

#if SW_QGEMM_X86
#define SW_QI inline __attribute__((always_inline))

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
namespace avx2 {
namespace {
#define SW_QGEMM_VNNI 0
#include "carriers/cpu/qgemm_simd.inc"
#undef SW_QGEMM_VNNI
}  // namespace
Columns kernel() { return columns; }
Quantize quantizer() { return quantize; }
}  // namespace avx2
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
// GCC 12's AVX-512 headers make their "undefined" vectors from themselves
// (`__m256d __Y = __Y;`), which this warning reports once inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
namespace vnni {
namespace {
#define SW_QGEMM_VNNI 1
#include "carriers/cpu/qgemm_simd.inc"
#undef SW_QGEMM_VNNI
#include "carriers/cpu/qgemm_zmm.inc"
}  // namespace
Columns kernel() { return columns_zmm; }
Quantize quantizer() { return quantize; }
Groups grouper() { return make_groups; }
}  // namespace vnni
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
#endif  // SW_QGEMM_X86

namespace {

struct Kernels {
  const char* name;
  Columns columns;
  Quantize quantize;
  Groups groups = nullptr;  // none: the kernels take X's blocks alone
};

Kernels choose() {
  const char* cap = std::getenv("STRIDEWEAVE_QGEMM_ISA");
  const std::string want = cap ? cap : "";
  const bool allow_vnni = want.empty() || want == "avx512-vnni";
  const bool allow_avx2 = allow_vnni || want == "avx2";
#if SW_QGEMM_X86
  __builtin_cpu_init();
  if (allow_vnni && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw"))
    return {"avx512-vnni", vnni::kernel(), vnni::quantizer(), vnni::grouper()};
  // F16C comes with AVX2 on every CPU that has both (x86-64-v3 has all three).
  if (allow_avx2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return {"avx2", avx2::kernel(), avx2::quantizer()};
#else
  (void)allow_avx2;
#endif
  return {"portable", portable_columns, quantize_block};
}

const Kernels& kernels() {
  static const Kernels k = choose();
  return k;
}

// Column blocks of this many weight bytes: a few per thread in a decode
// step's products, each long enough to stream.
constexpr int64_t kUnitBytes = 64 * 1024;
// Calls reading fewer weight bytes than this run on the calling thread.
constexpr int64_t kParallelBytes = 512 * 1024;

int64_t unit_columns(const Product& p) {
  return std::max<int64_t>(4, (kUnitBytes / std::max<int64_t>(1, p.ldw)) / 4 * 4);
}

}  // namespace

const char* isa() { return kernels().name; }

bool wants_k_blocks(sw_dtype_t wtype) { return wtype == SW_DTYPE_Q4_K || wtype == SW_DTYPE_Q6_K; }

void quantize_rows(sw_dtype_t wtype, const float* x, int64_t rs, int64_t cs, int64_t m, int64_t k, Activations* out) {
  const bool kq = wants_k_blocks(wtype);
  const int group = kq ? 256 : 32;
  if (k % group != 0)
    internal_error("qgemm: the contraction " + std::to_string(k) + " is not whole blocks of " + std::to_string(group));
  out->rows = m;
  out->per_row = k / group;
  const size_t total = static_cast<size_t>(m * out->per_row);
  if (kq)
    out->kblocks.resize(total);
  else
    out->blocks.resize(total);
  const Quantize quantize = kernels().quantize;
  const int64_t whole = out->per_row / 4;
  const bool grouped = !kq && kernels().groups && whole > 0;
  std::vector<int32_t> block_sums(grouped ? total : 0);  // each block's sum of q, for the groups
  float gathered[256];
  int32_t sums[16];
  for (int64_t i = 0; i < m; ++i)
    for (int64_t b = 0; b < out->per_row; ++b) {
      const float* xs = x + i * rs + group * b * cs;
      if (cs != 1) {
        for (int l = 0; l < group; ++l) gathered[l] = xs[l * cs];
        xs = gathered;
      }
      const size_t at = static_cast<size_t>(i * out->per_row + b);
      if (kq) {
        XBlockK& xb = out->kblocks[at];
        xb.d = quantize(xs, 256, xb.q, sums);
        for (int h = 0; h < 16; ++h) xb.bsums[h] = static_cast<int16_t>(sums[h]);
        for (int h = 0; h < 8; ++h) xb.bsums32[h] = static_cast<int16_t>(sums[2 * h] + sums[2 * h + 1]);
      } else {
        XBlock& xb = out->blocks[at];
        xb.d = quantize(xs, 32, xb.q, sums);
        xb.ds = xb.d * static_cast<float>(sums[0] + sums[1]);
        if (grouped) block_sums[at] = sums[0] + sums[1];
      }
    }
  if (grouped) {
    out->groups.resize(static_cast<size_t>(m * whole));
    for (int64_t i = 0; i < m; ++i)
      kernels().groups(wtype, out->blocks.data() + i * out->per_row, block_sums.data() + i * out->per_row, whole,
                       out->groups.data() + i * whole);
  }
}

void multiply_all(ThreadPool& pool, const Product* products, size_t count) {
  const Columns columns = kernels().columns;
  int64_t units = 0, bytes = 0;
  for (size_t i = 0; i < count; ++i) {
    const Product& p = products[i];
    if (p.n == 0 || p.x->rows == 0) continue;
    units += (p.n + unit_columns(p) - 1) / unit_columns(p);
    bytes += p.n * p.ldw;
  }
  auto unit = [&](int64_t u) {
    for (size_t i = 0; i < count; ++i) {
      const Product& p = products[i];
      if (p.n == 0 || p.x->rows == 0) continue;
      const int64_t width = unit_columns(p), own = (p.n + width - 1) / width;
      if (u >= own) {
        u -= own;
        continue;
      }
      const int64_t lo = u * width, hi = std::min(p.n, lo + width);
      columns(p.wtype, p.w + lo * p.ldw, p.ldw, hi - lo, *p.x, p.c + lo * p.csc, p.rsc, p.csc);
      return;
    }
  };
  const int64_t parts = bytes < kParallelBytes ? 1 : std::min<int64_t>(pool.threads(), units);
  if (parts <= 1) {
    for (int64_t u = 0; u < units; ++u) unit(u);
    return;
  }
  // Each thread walks a contiguous run of the units, so that its weights
  // stay one stream its prefetches run ahead of (units claimed in turn, two
  // threads 64 KiB apart, each start a cold stream per unit), then helps
  // finish the others' runs from their fronts.
  struct alignas(64) Run {
    std::atomic<int64_t> next;
    int64_t end;
  };
  std::vector<Run> runs(static_cast<size_t>(parts));
  for (int64_t r = 0; r < parts; ++r) {
    runs[static_cast<size_t>(r)].next.store(units * r / parts, std::memory_order_relaxed);
    runs[static_cast<size_t>(r)].end = units * (r + 1) / parts;
  }
  pool.parallel_for(parts, 1, [&](int64_t first, int64_t) {
    for (int64_t k = 0; k < parts; ++k) {
      Run& run = runs[static_cast<size_t>((first + k) % parts)];
      for (int64_t u; (u = run.next.fetch_add(1, std::memory_order_relaxed)) < run.end;) unit(u);
    }
  });
}

}  // namespace sw::qgemm
