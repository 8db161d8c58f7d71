// The CPU GEMM. f32 runs on oneDNN's sgemm and bf16 on oneDNN's matmul
// primitive (AMX or AVX512_BF16 where the CPU has them: oneDNN picks its
// kernels by the ISA it finds at run time, never by the CPU model). Vector
// products (M = 1 or N = 1: decoding one token) are memory bound and run on
// our own kernels, which stream the weights once. f64, f16, and bf16 where
// oneDNN has only its reference kernel, run on our kernels or on sgemm over
// f32 panels widened in L2-sized blocks, the way a BLAS packs, never a whole
// f32 copy of an operand.
//
// Threads: Debian builds oneDNN on OpenMP. We split C over our own pool and
// call oneDNN on each of its threads with that thread's OpenMP thread count
// at 1, so libgomp never starts a team; the caller's setting is restored.
#include "carriers/cpu/gemm.hpp"

// GCC ships omp.h; clang (the fuzzing build) finds it only with LLVM's
// OpenMP installed. The two calls below are the standard OpenMP API, which
// libgomp exports, so they are declared here when the header is missing.
#if __has_include(<omp.h>)
#include <omp.h>
#else
extern "C" int omp_get_max_threads(void);
extern "C" void omp_set_num_threads(int);
#endif

#include <algorithm>
#include <atomic>
#include <bit>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SW_HAVE_DPBF16 1
#endif

#include "base/error.hpp"
#include "core/dtype.hpp"

// Our kernels in several ISA variants, chosen when the library loads
// (through an ifunc). Not under ThreadSanitizer, whose runtime is not up yet
// when the loader runs the resolvers: that build runs the baseline variant,
// the one a CPU without AVX2 gets.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define SW_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SW_CLONES
#endif
#define SW_INLINE inline __attribute__((always_inline))

namespace sw::gemm {
namespace {

// ---- element types -------------------------------------------------------------

struct Bf16 {
  uint16_t bits;
};
struct F16 {
  uint16_t bits;
};

SW_INLINE float widen(float v) { return v; }
SW_INLINE double widen(double v) { return v; }
SW_INLINE float widen(Bf16 v) { return std::bit_cast<float>(static_cast<uint32_t>(v.bits) << 16); }
#if defined(__FLT16_MAX__)
SW_INLINE float widen(F16 v) { return static_cast<float>(std::bit_cast<_Float16>(v.bits)); }
#else
SW_INLINE float widen(F16 v) { return f16_to_f32(v.bits); }
#endif

inline void narrow(float v, float* o) { *o = v; }
inline void narrow(double v, double* o) { *o = v; }
inline void narrow(float v, Bf16* o) { o->bits = f32_to_bf16(v); }
inline void narrow(float v, F16* o) { o->bits = f32_to_f16(v); }

template <typename T>
const T* at(const Matrix& x, int64_t i, int64_t j) {
  const T* p = static_cast<const T*>(x.data);
  return x.transposed ? p + j + i * x.ld : p + i + j * x.ld;
}

// The (row, column) strides of a matrix operand.
int64_t row_stride(const Matrix& x) { return x.transposed ? x.ld : 1; }
int64_t col_stride(const Matrix& x) { return x.transposed ? 1 : x.ld; }

Matrix transpose(const Matrix& x) { return Matrix{x.data, !x.transposed, x.ld}; }

// ---- our kernels: vector products and panel widening ----------------------------

// y[j] += sum_p x[p] w(p, j), j < n, with w(p, j) at w[p + j * ldw]: the
// contraction contiguous, eight columns per pass over x. Eight weight
// streams keep enough reads in flight for the memory bound case (one token):
// with four, bf16 columns (8 KiB at K = 4096) end before the prefetchers
// have ramped up.
template <typename W, typename Acc>
SW_INLINE void dot_form(const W* w, int64_t ldw, int64_t k, int64_t n, const Acc* __restrict x, Acc* __restrict y) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const W* __restrict w0 = w + j * ldw;
    const W* __restrict w1 = w0 + ldw;
    const W* __restrict w2 = w1 + ldw;
    const W* __restrict w3 = w2 + ldw;
    const W* __restrict w4 = w3 + ldw;
    const W* __restrict w5 = w4 + ldw;
    const W* __restrict w6 = w5 + ldw;
    const W* __restrict w7 = w6 + ldw;
    Acc s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3, s4, s5, s6, s7)
    for (int64_t p = 0; p < k; ++p) {
      const Acc v = x[p];
      s0 += v * widen(w0[p]);
      s1 += v * widen(w1[p]);
      s2 += v * widen(w2[p]);
      s3 += v * widen(w3[p]);
      s4 += v * widen(w4[p]);
      s5 += v * widen(w5[p]);
      s6 += v * widen(w6[p]);
      s7 += v * widen(w7[p]);
    }
    y[j] += s0;
    y[j + 1] += s1;
    y[j + 2] += s2;
    y[j + 3] += s3;
    y[j + 4] += s4;
    y[j + 5] += s5;
    y[j + 6] += s6;
    y[j + 7] += s7;
  }
  for (; j < n; ++j) {
    const W* __restrict w0 = w + j * ldw;
    Acc s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t p = 0; p < k; ++p) s += x[p] * widen(w0[p]);
    y[j] += s;
  }
}

// y[j] += sum_p x[p] w(p, j), j < n, with w(p, j) at w[p * ldw + j]: the
// output contiguous. Rows are added four at a time (their four products
// summed, then added to y), sixteen rows per pass over y: sixteen row
// streams keep enough reads in flight for a weight read from DRAM (with
// four, one thread reads a row-major bf16 weight at about 70 % of the rate,
// two threads at about 75 %). A pass adds its four groups to y one after
// another, so the sums are the same, bit for bit, as four rows per pass.
template <typename W, typename Acc>
SW_INLINE void axpy_form(const W* w, int64_t ldw, int64_t k, int64_t n, const Acc* __restrict x, Acc* __restrict y) {
  int64_t p = 0;
  for (; p + 16 <= k; p += 16) {
    const W* __restrict r0 = w + p * ldw;
    const W* __restrict r1 = r0 + ldw;
    const W* __restrict r2 = r1 + ldw;
    const W* __restrict r3 = r2 + ldw;
    const W* __restrict r4 = r3 + ldw;
    const W* __restrict r5 = r4 + ldw;
    const W* __restrict r6 = r5 + ldw;
    const W* __restrict r7 = r6 + ldw;
    const W* __restrict r8 = r7 + ldw;
    const W* __restrict r9 = r8 + ldw;
    const W* __restrict r10 = r9 + ldw;
    const W* __restrict r11 = r10 + ldw;
    const W* __restrict r12 = r11 + ldw;
    const W* __restrict r13 = r12 + ldw;
    const W* __restrict r14 = r13 + ldw;
    const W* __restrict r15 = r14 + ldw;
    const Acc x0 = x[p], x1 = x[p + 1], x2 = x[p + 2], x3 = x[p + 3], x4 = x[p + 4], x5 = x[p + 5], x6 = x[p + 6],
              x7 = x[p + 7], x8 = x[p + 8], x9 = x[p + 9], x10 = x[p + 10], x11 = x[p + 11], x12 = x[p + 12],
              x13 = x[p + 13], x14 = x[p + 14], x15 = x[p + 15];
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      Acc t = y[j];
      t += x0 * widen(r0[j]) + x1 * widen(r1[j]) + x2 * widen(r2[j]) + x3 * widen(r3[j]);
      t += x4 * widen(r4[j]) + x5 * widen(r5[j]) + x6 * widen(r6[j]) + x7 * widen(r7[j]);
      t += x8 * widen(r8[j]) + x9 * widen(r9[j]) + x10 * widen(r10[j]) + x11 * widen(r11[j]);
      t += x12 * widen(r12[j]) + x13 * widen(r13[j]) + x14 * widen(r14[j]) + x15 * widen(r15[j]);
      y[j] = t;
    }
  }
  for (; p + 4 <= k; p += 4) {
    const W* __restrict r0 = w + p * ldw;
    const W* __restrict r1 = r0 + ldw;
    const W* __restrict r2 = r1 + ldw;
    const W* __restrict r3 = r2 + ldw;
    const Acc x0 = x[p], x1 = x[p + 1], x2 = x[p + 2], x3 = x[p + 3];
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
      y[j] += x0 * widen(r0[j]) + x1 * widen(r1[j]) + x2 * widen(r2[j]) + x3 * widen(r3[j]);
  }
  for (; p < k; ++p) {
    const W* __restrict r0 = w + p * ldw;
    const Acc x0 = x[p];
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[j] += x0 * widen(r0[j]);
  }
}

// dst (rows x cols, column major, ld rows) = src(i, j) at src[i * sr + j * sc], widened.
template <typename W, typename Acc>
SW_INLINE void widen_form(const W* src, int64_t sr, int64_t sc, int64_t rows, int64_t cols, Acc* __restrict dst) {
  for (int64_t j = 0; j < cols; ++j) {
    const W* __restrict s = src + j * sc;
    Acc* __restrict d = dst + j * rows;
    if (sr == 1) {
#pragma omp simd
      for (int64_t i = 0; i < rows; ++i) d[i] = widen(s[i]);
    } else {
      for (int64_t i = 0; i < rows; ++i) d[i] = widen(s[i * sr]);
    }
  }
}

// One set of ISA variants per (weight, accumulator) type pair.
#define SW_GEMM_KERNELS(W, Acc)                                                                           \
  SW_CLONES void kernel_dot(const W* w, int64_t ldw, int64_t k, int64_t n, const Acc* x, Acc* y) {        \
    dot_form(w, ldw, k, n, x, y);                                                                        \
  }                                                                                                      \
  SW_CLONES void kernel_axpy(const W* w, int64_t ldw, int64_t k, int64_t n, const Acc* x, Acc* y) {       \
    axpy_form(w, ldw, k, n, x, y);                                                                       \
  }                                                                                                      \
  SW_CLONES void kernel_widen(const W* s, int64_t sr, int64_t sc, int64_t rows, int64_t cols, Acc* d) {   \
    widen_form(s, sr, sc, rows, cols, d);                                                                \
  }
SW_GEMM_KERNELS(float, float)
SW_GEMM_KERNELS(double, double)
SW_GEMM_KERNELS(Bf16, float)
SW_GEMM_KERNELS(F16, float)
#undef SW_GEMM_KERNELS

#if SW_HAVE_DPBF16
// The bf16 dot form on AVX512_BF16: vdpbf16ps multiplies 32 bf16 pairs and
// adds them into 16 f32 lanes in one instruction, so the weights are read
// as they lie, never widened in registers (the widening form spends two
// more instructions per 16 weights, which caps a core well below its cache
// bandwidth). x is k bf16 values, contiguous. Products are exact in f32;
// sums round to nearest even, denormals flush to zero (the instruction's
// rules). Eight columns per pass over x, as dot_form.
#define SW_DPBF16_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))
SW_DPBF16_TARGET SW_INLINE __m512 dpbf16(__m512 acc, __m512i w, __m512i x) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(w), reinterpret_cast<__m512bh>(x));
}

// The columns' first `head` values go through one masked load, so that the
// 64-byte loads after it are aligned when the columns share an alignment
// (ldw a multiple of 32): a tile that a direct-I/O read filled in place
// starts wherever the file put it (a safetensors header leaves any even
// remainder), and a load split across two cache lines costs two.
template <int C>
SW_DPBF16_TARGET SW_INLINE void dpbf16_columns(const Bf16* w, int64_t ldw, int64_t k, const uint16_t* x, float* y) {
  __m512 acc[C];
  for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
  int64_t p = 0;
  const uintptr_t phase = reinterpret_cast<uintptr_t>(w) % 64;
  if (phase && phase % 2 == 0 && ldw % 32 == 0) {
    const int64_t head = std::min<int64_t>(k, static_cast<int64_t>((64 - phase) / 2));
    const __mmask32 m = static_cast<__mmask32>((uint64_t{1} << head) - 1);
    const __m512i xv = _mm512_maskz_loadu_epi16(m, x);
    for (int c = 0; c < C; ++c) acc[c] = dpbf16(acc[c], _mm512_maskz_loadu_epi16(m, w + c * ldw), xv);
    p = head;
  }
  for (; p + 32 <= k; p += 32) {
    const __m512i xv = _mm512_loadu_si512(x + p);
    // The next pass's columns, line for line, into L2: its streams start
    // warm (a prefetch past the weights' end is dropped, never a fault).
    // One token times (4096, 1024) bf16 from DRAM went from 13.2-13.6 to
    // 15.2-15.6 GB/s on one core of an Intel Xeon, weights in huge pages.
    for (int c = 0; c < C; ++c) _mm_prefetch(reinterpret_cast<const char*>(w + (C + c) * ldw + p), _MM_HINT_T1);
    for (int c = 0; c < C; ++c) acc[c] = dpbf16(acc[c], _mm512_loadu_si512(w + c * ldw + p), xv);
  }
  if (p < k) {
    const __mmask32 m = static_cast<__mmask32>((uint64_t{1} << (k - p)) - 1);
    const __m512i xv = _mm512_maskz_loadu_epi16(m, x + p);
    for (int c = 0; c < C; ++c) acc[c] = dpbf16(acc[c], _mm512_maskz_loadu_epi16(m, w + c * ldw + p), xv);
  }
  for (int c = 0; c < C; ++c) {  // (a store, not _mm512_reduce_add_ps: GCC 12 warns on its header there)
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, acc[c]);
    float sum = 0;
    for (float v : lanes) sum += v;
    y[c] += sum;
  }
}

SW_DPBF16_TARGET void kernel_dot_dpbf16(const Bf16* w, int64_t ldw, int64_t k, int64_t n, const uint16_t* x,
                                        float* y) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) dpbf16_columns<8>(w + j * ldw, ldw, k, x, y + j);
  for (; j < n; ++j) dpbf16_columns<1>(w + j * ldw, ldw, k, x, y + j);
}

// The CPU has vdpbf16ps and the process allows it: ONEDNN_MAX_CPU_ISA, the
// variable that caps oneDNN's kernels, caps this one too when it names an
// ISA without bf16 instructions (the test suite runs again under AVX2 so).
bool cpu_has_dpbf16() {
  static const bool has = [] {
    if (!__builtin_cpu_supports("avx512bf16") || !__builtin_cpu_supports("avx512bw")) return false;
    const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
    if (!cap || !*cap) return true;
    std::string isa(cap);
    for (char& ch : isa) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    return isa == "ALL" || isa.rfind("AVX512_CORE_BF16", 0) == 0 || isa.rfind("AVX512_CORE_FP16", 0) == 0 ||
           isa.rfind("AVX512_CORE_AMX", 0) == 0 || isa.rfind("AVX10", 0) == 0;
  }();
  return has;
}
#endif

template <typename T> struct AccOf { using type = float; };
template <> struct AccOf<double> { using type = double; };

// y (n values at stride ys, type O) = x (k values at stride xs) W, W(p, j) at
// w + p * sk + j * sj with sk == 1 or sj == 1.
template <typename T, typename O>
void vector_product(const T* x, int64_t xs, const T* w, int64_t sk, int64_t sj, int64_t k, int64_t n, O* y,
                    int64_t ys) {
  using Acc = typename AccOf<T>::type;
#if SW_HAVE_DPBF16
  if constexpr (std::is_same_v<T, Bf16>) {
    if (sk == 1 && cpu_has_dpbf16()) {
      std::unique_ptr<float[]> ya(new float[n]());
      std::unique_ptr<uint16_t[]> xc;
      const uint16_t* xb = reinterpret_cast<const uint16_t*>(x);
      if (xs != 1) {
        xc.reset(new uint16_t[k]);
        for (int64_t p = 0; p < k; ++p) xc[p] = x[p * xs].bits;
        xb = xc.get();
      }
      kernel_dot_dpbf16(w, sj, k, n, xb, ya.get());
      for (int64_t j = 0; j < n; ++j) narrow(ya[j], y + j * ys);
      return;
    }
  }
#endif
  std::unique_ptr<Acc[]> buf(new Acc[k + n]);
  Acc *xa = buf.get(), *ya = buf.get() + k;
  kernel_widen(x, xs, 0, k, 1, xa);
  std::fill(ya, ya + n, Acc(0));
  if (sk == 1)
    kernel_dot(w, sj, k, n, xa, ya);
  else
    kernel_axpy(w, sk, k, n, xa, ya);
  for (int64_t j = 0; j < n; ++j) narrow(ya[j], y + j * ys);
}

// ---- oneDNN ---------------------------------------------------------------------

// libgomp keeps one thread count per thread: oneDNN reads it to size its
// parallel regions, and with 1 it runs the region on the calling thread.
class OneOmpThread {
 public:
  OneOmpThread() : saved_(omp_get_max_threads()) {
    if (saved_ != 1) omp_set_num_threads(1);
  }
  ~OneOmpThread() {
    if (saved_ != 1) omp_set_num_threads(saved_);
  }
  OneOmpThread(const OneOmpThread&) = delete;
  OneOmpThread& operator=(const OneOmpThread&) = delete;

 private:
  int saved_;
};

void check_dnnl(dnnl_status_t s, const char* what) {
  if (s != dnnl_success) internal_error(std::string("oneDNN ") + what + " failed with status " + std::to_string(s));
}

// f32 on oneDNN's sgemm, which speaks row major: C^T = B^T A^T, where
// B^T and A^T are B's and A's memory read row major.
void sgemm(const Matrix& a, const Matrix& b, int64_t m, int64_t n, int64_t k, float beta, float* c, int64_t ldc) {
  OneOmpThread one;
  check_dnnl(dnnl_sgemm(b.transposed ? 'T' : 'N', a.transposed ? 'T' : 'N', n, m, k, 1.0f,
                        static_cast<const float*>(b.data), b.ld, static_cast<const float*>(a.data), a.ld, beta, c,
                        ldc),
             "sgemm");
}

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);  // immutable once made
  return engine;
}

dnnl::memory::desc matrix_desc(int64_t rows, int64_t cols, dnnl::memory::data_type dt, const Matrix& x) {
  return dnnl::memory::desc({rows, cols}, dt, {row_stride(x), col_stride(x)});
}

// oneDNN matmul primitives, made once per thread and product geometry.
// Making one (its descriptor, then the primitive out of oneDNN's own cache)
// costs about 2.5 us, more than a 64^3 product computes in: so each thread
// keeps the primitives it made, keyed on everything a primitive depends on,
// the strides included (dtypes, extents, each operand's orientation and
// leading dimension), with memory objects whose data pointers are set per
// call. A key oneDNN has only its reference kernel for is kept too, as
// such. Primitives are immutable and per thread, so nothing is shared.
struct PrimitiveKey {
  sw_dtype_t in, out;
  int64_t m, n, k;
  bool a_transposed, b_transposed;
  int64_t lda, ldb, ldc;
  bool operator==(const PrimitiveKey&) const = default;
};

struct PrimitiveEntry {
  PrimitiveKey key;
  bool fast = false;     // false: only oneDNN's reference kernel takes it
  bool swapped = false;  // computed as C^T = B^T A^T
  dnnl::matmul primitive;
  dnnl::memory src, wei, dst;
};

class PrimitiveCache {
 public:
  static constexpr size_t kCapacity = 32;  // a model's few shapes, split over a few threads

  // The entry of `key`, made by `make` when missing, moved to the front.
  template <typename Make>
  PrimitiveEntry& find(const PrimitiveKey& key, Make&& make) {
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (!(entries_[i].key == key)) continue;
      if (i) std::rotate(entries_.begin(), entries_.begin() + i, entries_.begin() + i + 1);
      return entries_.front();
    }
    if (entries_.size() == kCapacity) entries_.pop_back();
    entries_.insert(entries_.begin(), make());
    return entries_.front();
  }

  dnnl::stream& stream() {
    if (!stream_) stream_ = dnnl::stream(cpu_engine());
    return stream_;
  }

 private:
  std::vector<PrimitiveEntry> entries_;
  dnnl::stream stream_;
};

PrimitiveCache& primitive_cache() {
  thread_local PrimitiveCache cache;
  return cache;
}

// C = A B on oneDNN's matmul primitive, f32 or bf16 operands (`in`), the
// matrices' memory descriptors stating each operand's strides as it lies
// (a row-major operand is its (rows, cols) matrix with strides (ld, 1), a
// column-major one (1, ld)), so nothing is copied or re-laid out first.
// False, with nothing written, when oneDNN offers only its reference kernel
// for them here (a CPU without the instructions, or strides its kernels do
// not take). oneDNN's fast (brgemm) kernels need a row-major destination:
// C column major (ldc) is C^T = B^T A^T row major, and a C that is row major
// is C = A B itself; the form whose destination is row major comes first,
// the other is tried too. Their sources take either orientation, so
// transposed operands cost nothing: measured here, f32 products of row- or
// column-major A and B all run at 90-110 GFLOP/s on one thread, where sgemm
// runs 63-78 when A is row major (its 'T' kernels). A source that is a
// column block of a transposed matrix (padded: B^T of a row-major B split
// by columns over threads) is one the bf16 brgemm kernels refuse, and oneDNN
// takes its slower gemm kernel for it (docs/matmul.md).
bool primitive_matmul(sw_dtype_t in, const Matrix& a, const Matrix& b, int64_t m, int64_t n, int64_t k,
                      sw_dtype_t out, void* c, int64_t ldc) {
  using dt = dnnl::memory::data_type;
  OneOmpThread one;
  const Matrix cm{c, false, ldc};
  PrimitiveCache& cache = primitive_cache();
  const PrimitiveKey key{in, out, m, n, k, a.transposed, b.transposed, a.ld, b.ld, ldc};
  PrimitiveEntry& e = cache.find(key, [&] {
    const dt in_dt = in == SW_DTYPE_F32 ? dt::f32 : dt::bf16;
    const dt out_dt = out == SW_DTYPE_F32 ? dt::f32 : dt::bf16;
    const dnnl::engine& engine = cpu_engine();
    PrimitiveEntry made;
    made.key = key;
    for (const bool swapped : {true, false}) {
      const Matrix fa = swapped ? transpose(b) : a, fb = swapped ? transpose(a) : b, fc = swapped ? transpose(cm) : cm;
      const int64_t fm = swapped ? n : m, fn = swapped ? m : n;
      dnnl::memory::desc src = matrix_desc(fm, k, in_dt, fa), wei = matrix_desc(k, fn, in_dt, fb),
                         dst = matrix_desc(fm, fn, out_dt, fc);
      dnnl::matmul::primitive_desc pd;
      try {
        pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, dst), engine);
      } catch (const dnnl::error&) {
        continue;
      }
      if (std::strncmp(pd.impl_info_str(), "ref", 3) == 0) continue;
      made.fast = true;
      made.swapped = swapped;
      made.primitive = dnnl::matmul(pd);
      made.src = dnnl::memory(src, engine, DNNL_MEMORY_NONE);
      made.wei = dnnl::memory(wei, engine, DNNL_MEMORY_NONE);
      made.dst = dnnl::memory(dst, engine, DNNL_MEMORY_NONE);
      break;
    }
    return made;
  });
  if (!e.fast) return false;
  e.src.set_data_handle(const_cast<void*>(e.swapped ? b.data : a.data));
  e.wei.set_data_handle(const_cast<void*>(e.swapped ? a.data : b.data));
  e.dst.set_data_handle(c);
  dnnl::stream& stream = cache.stream();
  e.primitive.execute(stream, {{DNNL_ARG_SRC, e.src}, {DNNL_ARG_WEIGHTS, e.wei}, {DNNL_ARG_DST, e.dst}});
  stream.wait();
  return true;
}

// ---- blocks of C -----------------------------------------------------------------

constexpr int64_t kPanel = 256;            // K per widened panel
constexpr double kParallelFlops = 1 << 21;  // below this a product runs on the caller alone
constexpr int64_t kSmallProduct = 1 << 15;  // m n k below which f32 skips sgemm (a 4x4 call costs 1 us there)

// Half operands on sgemm: A's and B's K panels widened to f32, accumulated
// into C (f32) or an f32 block rounded into C once at the end.
template <typename T>
void widened_sgemm(const Matrix& a, const Matrix& b, int64_t m, int64_t n, int64_t k, sw_dtype_t out, void* c,
                   int64_t ldc) {
  const int64_t kb = std::min(k, kPanel);
  const bool direct = out == SW_DTYPE_F32;
  std::vector<float> pa(m * kb), pb(kb * n), pc(direct ? 0 : m * n);
  float* acc = direct ? static_cast<float*>(c) : pc.data();
  const int64_t ldacc = direct ? ldc : m;
  for (int64_t p0 = 0; p0 < k; p0 += kPanel) {
    const int64_t pk = std::min(kPanel, k - p0);
    kernel_widen(at<T>(a, 0, p0), row_stride(a), col_stride(a), m, pk, pa.data());
    kernel_widen(at<T>(b, p0, 0), row_stride(b), col_stride(b), pk, n, pb.data());
    sgemm(Matrix{pa.data(), false, m}, Matrix{pb.data(), false, pk}, m, n, pk, p0 ? 1.0f : 0.0f, acc, ldacc);
  }
  if (direct) return;
  T* o = static_cast<T*>(c);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) narrow(pc[i + j * m], o + i + j * ldc);
}

// C's columns as vector products over A, K in panels so that A's panel
// stays in cache across the columns: f64, and f32 products too small for
// sgemm's setup to pay (kSmallProduct).
template <typename T>
void column_products(const Matrix& a, const Matrix& b, int64_t m, int64_t n, int64_t k, T* c, int64_t ldc) {
  T x[kPanel];  // one panel of B's column
  for (int64_t j = 0; j < n; ++j) std::fill(c + j * ldc, c + j * ldc + m, T(0));
  for (int64_t p0 = 0; p0 < k; p0 += kPanel) {
    const int64_t pk = std::min(kPanel, k - p0);
    const T* ap = at<T>(a, 0, p0);  // W(p, i) = A(i, p)
    for (int64_t j = 0; j < n; ++j) {
      kernel_widen(at<T>(b, p0, j), row_stride(b), 0, pk, 1, x);
      if (a.transposed)
        kernel_dot(ap, a.ld, pk, m, x, c + j * ldc);
      else
        kernel_axpy(ap, a.ld, pk, m, x, c + j * ldc);
    }
  }
}

template <typename T>
void vector_block(const Matrix& a, const Matrix& b, int64_t m, int64_t n, int64_t k, sw_dtype_t out, void* c,
                  int64_t ldc) {
  auto run = [&](auto* y) {
    if (m == 1)  // y = a's row 0 times B
      vector_product(at<T>(a, 0, 0), col_stride(a), at<T>(b, 0, 0), row_stride(b), col_stride(b), k, n, y, ldc);
    else  // n == 1: y^T = b's column 0 times A^T
      vector_product(at<T>(b, 0, 0), row_stride(b), at<T>(a, 0, 0), col_stride(a), row_stride(a), k, m, y, 1);
  };
  if (out == SW_DTYPE_F32 || out == SW_DTYPE_F64)
    run(static_cast<typename AccOf<T>::type*>(c));
  else
    run(static_cast<T*>(c));
}

// One block of C, all on the calling thread.
void multiply_block(sw_dtype_t in, const Matrix& a, const Matrix& b, int64_t m, int64_t n, int64_t k, sw_dtype_t out,
                    void* c, int64_t ldc) {
  const bool vector = m == 1 || n == 1;
  switch (in) {
    case SW_DTYPE_F32:
      if (vector) return vector_block<float>(a, b, m, n, k, out, c, ldc);
      if (m * n * k < kSmallProduct) return column_products(a, b, m, n, k, static_cast<float*>(c), ldc);
      if (primitive_matmul(in, a, b, m, n, k, out, c, ldc)) return;
      return sgemm(a, b, m, n, k, 0.0f, static_cast<float*>(c), ldc);
    case SW_DTYPE_F64:
      if (vector) return vector_block<double>(a, b, m, n, k, out, c, ldc);
      return column_products(a, b, m, n, k, static_cast<double*>(c), ldc);
    case SW_DTYPE_BF16:
      if (vector) return vector_block<Bf16>(a, b, m, n, k, out, c, ldc);
      if (primitive_matmul(in, a, b, m, n, k, out, c, ldc)) return;
      return widened_sgemm<Bf16>(a, b, m, n, k, out, c, ldc);
    case SW_DTYPE_F16:
      if (vector) return vector_block<F16>(a, b, m, n, k, out, c, ldc);
      return widened_sgemm<F16>(a, b, m, n, k, out, c, ldc);
    default:
      internal_error(std::string("gemm: no ") + dtype_name(in) + " kernel");
  }
}

bool supports(sw_dtype_t in, sw_dtype_t out) {
  switch (in) {
    case SW_DTYPE_F32:
    case SW_DTYPE_F64: return out == in;
    case SW_DTYPE_BF16:
    case SW_DTYPE_F16: return out == in || out == SW_DTYPE_F32;
    default: return false;
  }
}

// A product of a vector (M or N 1): multiply_all streams these together.
bool is_vector(const Product& p) { return p.m == 1 || p.n == 1; }

// A product's C split along its longer side (N when M = 1, M when N = 1)
// into units of `width` (a multiple of 64), so that every block keeps whole
// kernel tiles. 64 wide, except for a vector product whose weights are
// contiguous along that side (a row-major (K, N) weight times one token):
// a 64-wide unit would read 64 values of each weight row and jump to the
// next, which the hardware prefetchers follow badly (two threads read less
// than one), so those units span kRowUnit values of each row. The split
// never changes a sum: every kernel adds up each output along K in the same
// order whatever the block.
constexpr int64_t kRowUnit = 512;

struct Split {
  const Product* p;
  bool along_n;
  int64_t side, width, units;
  double flops;
};

Split split(const Product& p) {
  const bool along_n = p.m == 1 || (p.n != 1 && p.n >= p.m);
  const int64_t side = along_n ? p.n : p.m;
  // The weights of a vector product: B when M = 1 (contiguous along N when
  // row major), A when N = 1 (contiguous along M when column major).
  const bool rows = is_vector(p) && (along_n ? p.b.transposed : !p.a.transposed);
  const int64_t width = rows ? kRowUnit : 64;
  return {&p, along_n, side, width, (side + width - 1) / width,
          2.0 * static_cast<double>(p.m) * static_cast<double>(p.n) * static_cast<double>(p.k)};
}

// C's rows or columns [lo, hi) of one product along its split side.
void span(sw_dtype_t in, sw_dtype_t out, const Split& s, int64_t lo, int64_t hi) {
  if (lo >= hi) return;
  const Product& p = *s.p;
  const size_t es = dtype_size(out), ei = dtype_size(in);
  if (s.along_n) {
    const Matrix bj{static_cast<const std::byte*>(p.b.data) + (p.b.transposed ? lo : lo * p.b.ld) * ei, p.b.transposed,
                    p.b.ld};
    multiply_block(in, p.a, bj, p.m, hi - lo, p.k, out, static_cast<std::byte*>(p.c) + lo * p.ldc * es, p.ldc);
  } else {
    const Matrix ai{static_cast<const std::byte*>(p.a.data) + (p.a.transposed ? lo * p.a.ld : lo) * ei,
                    p.a.transposed, p.a.ld};
    multiply_block(in, ai, p.b, hi - lo, p.n, p.k, out, static_cast<std::byte*>(p.c) + lo * es, p.ldc);
  }
}

// A product with something to multiply (C not empty, K > 0).
bool nonempty(const Product& p) { return p.m != 0 && p.n != 0 && p.k != 0; }

// nonempty(p); zeros C when K = 0 (oneDNN's sgemm would leave it as it was).
bool has_work(const Product& p, sw_dtype_t out) {
  if (p.m == 0 || p.n == 0) return false;
  if (p.k != 0) return true;
  const size_t es = dtype_size(out);
  for (int64_t j = 0; j < p.n; ++j) std::memset(static_cast<std::byte*>(p.c) + j * p.ldc * es, 0, p.m * es);
  return false;
}

}  // namespace

void multiply_all(ThreadPool& pool, sw_dtype_t in, sw_dtype_t out, const Product* products, size_t count) {
  if (!supports(in, out))
    internal_error(std::string("gemm: ") + dtype_name(in) + " operands do not give a " + dtype_name(out) + " result");
  // A product's units are recomputed where they are needed (split() is a
  // few multiplies), so the call allocates nothing: it runs for every
  // matmul, however small.
  auto live_vector = [](const Product& p) { return is_vector(p) && nonempty(p); };
  int64_t vector_units = 0;
  double vector_flops = 0;
  for (size_t i = 0; i < count; ++i) {
    const Product& p = products[i];
    if (!has_work(p, out)) continue;
    const Split s = split(p);
    if (is_vector(p)) {
      vector_units += s.units;
      vector_flops += s.flops;
      continue;
    }
    const int64_t parts = s.flops < kParallelFlops ? 1 : std::min<int64_t>(pool.threads(), s.units);
    auto block = [&](int64_t part) {
      span(in, out, s, s.units * part / parts * s.width, std::min(s.side, s.units * (part + 1) / parts * s.width));
    };
    if (parts == 1) {
      block(0);
      continue;
    }
    pool.parallel_for(parts, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t part = lo; part < hi; ++part) block(part);
    });
  }
  if (vector_units == 0) return;
  const int64_t parts = vector_flops < kParallelFlops ? 1 : std::min<int64_t>(pool.threads(), vector_units);
  if (parts == 1) {
    for (size_t i = 0; i < count; ++i)
      if (live_vector(products[i])) {
        const Split s = split(products[i]);
        span(in, out, s, 0, s.side);
      }
    return;
  }
  // A vector product is a stream of the weights: the threads claim units
  // one at a time, across every product, so a thread that starts late (a
  // worker waking up, a core shared with another process) takes fewer of
  // them instead of holding the others up at the end.
  auto unit = [&](int64_t u) {
    for (size_t i = 0; i < count; ++i) {
      if (!live_vector(products[i])) continue;
      const Split s = split(products[i]);
      if (u < s.units) return span(in, out, s, u * s.width, std::min(s.side, (u + 1) * s.width));
      u -= s.units;
    }
  };
  std::atomic<int64_t> next{0};
  pool.parallel_for(parts, 1, [&](int64_t, int64_t) {
    for (int64_t u; (u = next.fetch_add(1, std::memory_order_relaxed)) < vector_units;) unit(u);
  });
}

void multiply(ThreadPool& pool, sw_dtype_t in, const Matrix& a, const Matrix& b, int64_t m, int64_t n, int64_t k,
              sw_dtype_t out, void* c, int64_t ldc) {
  const Product p{a, b, m, n, k, c, ldc};
  multiply_all(pool, in, out, &p, 1);
}

}  // namespace sw::gemm
