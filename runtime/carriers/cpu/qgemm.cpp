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

using Columns = void (*)(sw_dtype_t, const std::byte*, int64_t, int64_t, const void*, int64_t, int64_t, float*,
                         int64_t, int64_t);

// ---- plain C++: a weight unit decoded to f32 (on the stack), times X ----------------

void portable_columns(sw_dtype_t wt, const std::byte* w, int64_t ldw, int64_t n, const void* x, int64_t per_row,
                      int64_t m, float* c, int64_t rsc, int64_t csc) {
  const int64_t unit = dtype_block_elements(wt);
  const size_t bytes = dtype_block_bytes(wt);
  const bool k = wants_k_blocks(wt);
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
#endif
namespace vnni {
namespace {
#define SW_QGEMM_VNNI 1
#include "carriers/cpu/qgemm_simd.inc"
#undef SW_QGEMM_VNNI
}  // namespace
Columns kernel() { return columns; }
}  // namespace vnni
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif  // SW_QGEMM_X86

namespace {

struct Kernels {
  const char* name;
  Columns columns;
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
    return {"avx512-vnni", vnni::kernel()};
  // F16C comes with AVX2 on every CPU that has both (x86-64-v3 has all three).
  if (allow_avx2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return {"avx2", avx2::kernel()};
#else
  (void)allow_avx2;
#endif
  return {"portable", portable_columns};
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

namespace {
// n values at stride cs: their scale amax / 127 and codes q = nearest(x / d).
float quantize_run(const float* x, int64_t cs, int n, int8_t* q) {
  float amax = 0.0f;
  for (int l = 0; l < n; ++l) amax = std::max(amax, std::fabs(x[l * cs]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int l = 0; l < n; ++l) q[l] = static_cast<int8_t>(std::nearbyint(std::clamp(x[l * cs] * id, -127.0f, 127.0f)));
  return d;
}
}  // namespace

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
  for (int64_t i = 0; i < m; ++i)
    for (int64_t b = 0; b < out->per_row; ++b) {
      const float* xs = x + i * rs + group * b * cs;
      const size_t at = static_cast<size_t>(i * out->per_row + b);
      if (kq) {
        XBlockK& xb = out->kblocks[at];
        xb.d = quantize_run(xs, cs, 256, xb.q);
        for (int h = 0; h < 16; ++h) {
          int sum = 0;
          for (int l = 0; l < 16; ++l) sum += xb.q[16 * h + l];
          xb.bsums[h] = static_cast<int16_t>(sum);
        }
        for (int h = 0; h < 8; ++h) xb.bsums32[h] = static_cast<int16_t>(xb.bsums[2 * h] + xb.bsums[2 * h + 1]);
      } else {
        XBlock& xb = out->blocks[at];
        xb.d = quantize_run(xs, cs, 32, xb.q);
        int sum = 0;
        for (int l = 0; l < 32; ++l) sum += xb.q[l];
        xb.ds = xb.d * static_cast<float>(sum);
      }
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
      const void* x = wants_k_blocks(p.wtype) ? static_cast<const void*>(p.x->kblocks.data())
                                              : static_cast<const void*>(p.x->blocks.data());
      columns(p.wtype, p.w + lo * p.ldw, p.ldw, hi - lo, x, p.x->per_row, p.x->rows,
              p.c + lo * p.csc, p.rsc, p.csc);
      return;
    }
  };
  const int64_t parts = bytes < kParallelBytes ? 1 : std::min<int64_t>(pool.threads(), units);
  if (parts <= 1) {
    for (int64_t u = 0; u < units; ++u) unit(u);
    return;
  }
  std::atomic<int64_t> next{0};
  pool.parallel_for(parts, 1, [&](int64_t, int64_t) {
    for (int64_t u; (u = next.fetch_add(1, std::memory_order_relaxed)) < units;) unit(u);
  });
}

}  // namespace sw::qgemm
