// The CPU backend's shared kernel machinery, for its translation units
// (cpu_backend.cpp: copies, reductions, matmul, indexing and the backend;
// cpu_elementwise.cpp and cpu_compare.cpp: the elementwise op tables, kept
// apart so the compiler instantiates them in parallel): typed element
// access and dtype dispatch, the iteration over operands, and the
// elementwise walkers every op table instantiates.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "base/error.hpp"
#include "core/dtype.hpp"
#include "core/iteration.hpp"
#include "ops/backend.hpp"

namespace sw::cpu {

inline constexpr int64_t kGrain = 1 << 15;  // elements per thread below which work runs inline

// Iterates a set of tensors over the same logical shape. If their nested
// layouts share no refinement, `inputs` are first copied to dense buffers
// (the output is always dense) and kept alive in `holders`.
inline Iteration iterate(std::vector<const Tensor*>& operands, std::vector<Ref<Tensor>>& holders,
                  void (*materialise)(const Tensor&, std::vector<Ref<Tensor>>&)) {
  std::vector<const Layout*> layouts;
  for (const Tensor* t : operands) layouts.push_back(&t->layout());
  Iteration it;
  if (build_iteration(layouts, &it)) return it;
  for (size_t k = 1; k < operands.size(); ++k) {
    materialise(*operands[k], holders);
    operands[k] = holders.back().get();
  }
  layouts.clear();
  for (const Tensor* t : operands) layouts.push_back(&t->layout());
  if (!build_iteration(layouts, &it)) internal_error("dense operands failed to iterate");
  return it;
}

// ---- typed element access ------------------------------------------------

template <sw_dtype_t D> struct Elem;
template <> struct Elem<SW_DTYPE_F32> { using T = float; static double get(T v) { return v; } static T put(double v) { return static_cast<T>(v); } };
template <> struct Elem<SW_DTYPE_F64> { using T = double; static double get(T v) { return v; } static T put(double v) { return v; } };
template <> struct Elem<SW_DTYPE_F16> { using T = uint16_t; static double get(T v) { return f16_to_f32(v); } static T put(double v) { return f32_to_f16(static_cast<float>(v)); } };
template <> struct Elem<SW_DTYPE_BF16> { using T = uint16_t; static double get(T v) { return bf16_to_f32(v); } static T put(double v) { return f32_to_bf16(static_cast<float>(v)); } };
template <> struct Elem<SW_DTYPE_I32> { using T = int32_t; static double get(T v) { return v; } static T put(double v) { return static_cast<T>(v); } };
template <> struct Elem<SW_DTYPE_I64> { using T = int64_t; static double get(T v) { return static_cast<double>(v); } static T put(double v) { return static_cast<T>(v); } };
template <> struct Elem<SW_DTYPE_U8> { using T = uint8_t; static double get(T v) { return v; } static T put(double v) { return static_cast<T>(v); } };
template <> struct Elem<SW_DTYPE_BOOL> { using T = uint8_t; static double get(T v) { return v ? 1.0 : 0.0; } static T put(double v) { return v != 0.0; } };

template <sw_dtype_t D> inline constexpr bool kIsInteger = D == SW_DTYPE_I32 || D == SW_DTYPE_I64 || D == SW_DTYPE_U8;
template <sw_dtype_t D> inline constexpr bool kIsHalf = D == SW_DTYPE_F16 || D == SW_DTYPE_BF16;

template <typename F>
void dispatch_dtype(sw_dtype_t d, F&& f) {
  switch (d) {
    case SW_DTYPE_F32: f(std::integral_constant<sw_dtype_t, SW_DTYPE_F32>{}); return;
    case SW_DTYPE_F64: f(std::integral_constant<sw_dtype_t, SW_DTYPE_F64>{}); return;
    case SW_DTYPE_F16: f(std::integral_constant<sw_dtype_t, SW_DTYPE_F16>{}); return;
    case SW_DTYPE_BF16: f(std::integral_constant<sw_dtype_t, SW_DTYPE_BF16>{}); return;
    case SW_DTYPE_I32: f(std::integral_constant<sw_dtype_t, SW_DTYPE_I32>{}); return;
    case SW_DTYPE_I64: f(std::integral_constant<sw_dtype_t, SW_DTYPE_I64>{}); return;
    case SW_DTYPE_U8: f(std::integral_constant<sw_dtype_t, SW_DTYPE_U8>{}); return;
    case SW_DTYPE_BOOL: f(std::integral_constant<sw_dtype_t, SW_DTYPE_BOOL>{}); return;
    default: internal_error("kernel: bad dtype");
  }
}

// The dtypes kernels compute in (the op definitions widen f16 and bf16).
template <typename F>
void dispatch_compute(sw_dtype_t d, const char* op, F&& f) {
  switch (d) {
    case SW_DTYPE_F32: f(std::integral_constant<sw_dtype_t, SW_DTYPE_F32>{}); return;
    case SW_DTYPE_F64: f(std::integral_constant<sw_dtype_t, SW_DTYPE_F64>{}); return;
    case SW_DTYPE_I32: f(std::integral_constant<sw_dtype_t, SW_DTYPE_I32>{}); return;
    case SW_DTYPE_I64: f(std::integral_constant<sw_dtype_t, SW_DTYPE_I64>{}); return;
    case SW_DTYPE_U8: f(std::integral_constant<sw_dtype_t, SW_DTYPE_U8>{}); return;
    case SW_DTYPE_BOOL: f(std::integral_constant<sw_dtype_t, SW_DTYPE_BOOL>{}); return;
    default: internal_error(std::string(op) + ": CPU kernel has no " + dtype_name(d) + " variant");
  }
}

template <typename T>
T* base_of(const Tensor& t) {
  std::byte* p = t.host_base();
  if (!p && t.numel() != 0) internal_error("CPU kernel given a tensor without host storage");
  return reinterpret_cast<T*>(p);
}

// Copies `t` into a new dense CPU tensor kept alive in `holders`
// (cpu_backend.cpp): iterate()'s fallback for operands that share no refinement.
void materialise_dense(const Tensor& t, std::vector<Ref<Tensor>>& holders);

// ---- element helpers ----------------------------------------------------------

template <typename T>
bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(x);
  else return false;
}

// Integers wrap modulo 2^bits (as two's complement hardware does), without
// the undefined behaviour of signed overflow.
template <typename T>
T wrap_add(T x, T y) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(x) + static_cast<U>(y));
  } else {
    return x + y;
  }
}
template <typename T>
T wrap_sub(T x, T y) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(x) - static_cast<U>(y));
}
template <typename T>
T wrap_mul(T x, T y) {
  using U = std::make_unsigned_t<T>;
  if constexpr (sizeof(T) < sizeof(unsigned)) {
    return static_cast<T>(static_cast<unsigned>(x) * static_cast<unsigned>(y));
  } else {
    return static_cast<T>(static_cast<U>(x) * static_cast<U>(y));
  }
}

// ---- elementwise ------------------------------------------------------------

// Writes a 4x4 tile transposed: element (r, c) of `t` goes to o[r + c * column_stride].
template <typename T>
void store_transposed(const T (&t)[4][4], T* o, int64_t column_stride) {
#if defined(__SSE2__)
  if constexpr (std::is_same_v<T, float>) {
    __m128 r0 = _mm_load_ps(t[0]), r1 = _mm_load_ps(t[1]), r2 = _mm_load_ps(t[2]), r3 = _mm_load_ps(t[3]);
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    _mm_storeu_ps(o, r0);
    _mm_storeu_ps(o + column_stride, r1);
    _mm_storeu_ps(o + 2 * column_stride, r2);
    _mm_storeu_ps(o + 3 * column_stride, r3);
    return;
  } else if constexpr (std::is_same_v<T, double>) {
    for (int c = 0; c < 4; c += 2)
      for (int r = 0; r < 4; r += 2) {
        const __m128d x = _mm_load_pd(&t[r][c]), y = _mm_load_pd(&t[r + 1][c]);
        _mm_storeu_pd(o + r + c * column_stride, _mm_unpacklo_pd(x, y));
        _mm_storeu_pd(o + r + (c + 1) * column_stride, _mm_unpackhi_pd(x, y));
      }
    return;
  }
#endif
  for (int c = 0; c < 4; ++c)
    for (int r = 0; r < 4; ++r) o[r + c * column_stride] = t[r][c];
}

// Elementwise results are dense first mode fastest, so the iteration's
// dims[0] is the output's contiguous one; with row-major inputs it steps the
// inputs by a whole row, one element at a time. When every input is
// contiguous along another dimension j (or broadcast along it, stride 0, as
// a weak scalar is), elementwise kernels walk 4x4 tiles of (dims[0],
// dims[j]) instead (transposed_tiles). Returns that j, or 0 when there is
// none. Elementwise ops may visit elements in any order, so the results are
// the same as the plain walk's.
inline size_t tile_dim(const Iteration& it) {
  if (it.dims.size() < 2 || it.dims[0].stride[0] != 1 || it.dims[0].extent < 4) return 0;
  for (size_t d = 1; d < it.dims.size(); ++d) {
    bool rows = it.dims[d].extent >= 4, contiguous = false;
    for (int k = 1; k < it.operands; ++k) {
      rows = rows && (it.dims[d].stride[k] == 1 || it.dims[d].stride[k] == 0);
      contiguous = contiguous || it.dims[d].stride[k] == 1;
    }
    if (rows && contiguous) return d;
  }
  return 0;
}

// Walks 4x4 tiles of (dims[0], dims[j]), j from tile_dim: four input rows
// read along j, a register transpose, four output columns written
// contiguously. `value(p, e)` computes the element at column e from the
// inputs' row pointers p, each at the tile's first column; the caller knows
// each input's step along j (1, or 0 when broadcast).
// Every dimension of `it` but dims[0] and dims[j] (j from tile_dim): the
// positions of the tiles of (dims[0], dims[j]), walked with walk().
inline Iteration tile_positions(const Iteration& it, size_t j) {
  Iteration rest;
  rest.operands = it.operands;
  rest.total = 1;
  for (size_t d = 1; d < it.dims.size(); ++d)
    if (d != j) {
      rest.dims.push_back(it.dims[d]);
      rest.total *= it.dims[d].extent;
    }
  return rest;
}

template <typename T, int Inputs, typename Value>
void transposed_tiles(const Iteration& it, size_t j, T* o0, const T* const (&in0)[Inputs], ThreadPool& pool,
                      Value value) {
  const IterDim d0 = it.dims[0], dj = it.dims[j];
  const Iteration rest = tile_positions(it, j);
  const int64_t row_blocks = (d0.extent + 3) / 4;
  pool.parallel_for(rest.total * row_blocks, std::max<int64_t>(1, kGrain / (4 * dj.extent)), [&](int64_t lo, int64_t hi) {
    for (int64_t q = lo; q < hi; ++q) {
      const int64_t i = (q % row_blocks) * 4, rows = std::min<int64_t>(4, d0.extent - i);
      walk(rest, q / row_blocks, q / row_blocks + 1, [&](const int64_t* off, int64_t, const int64_t*) {
        T* o = o0 + off[0] + i;
        const T* row[4][Inputs];
        for (int r = 0; r < rows; ++r)
          for (int k = 0; k < Inputs; ++k) row[r][k] = in0[k] + off[k + 1] + (i + r) * d0.stride[k + 1];
        int64_t c = 0;
        if (rows == 4) {
          for (; c + 4 <= dj.extent; c += 4) {
            alignas(16) T t[4][4];
            for (int r = 0; r < 4; ++r) {
              const T* p[Inputs];
              for (int k = 0; k < Inputs; ++k) p[k] = row[r][k] + c * dj.stride[k + 1];
              for (int e = 0; e < 4; ++e) t[r][e] = value(p, e);
            }
            store_transposed(t, o + c * dj.stride[0], dj.stride[0]);
          }
        }
        for (; c < dj.extent; ++c)
          for (int r = 0; r < rows; ++r) {
            const T* p[Inputs];
            for (int k = 0; k < Inputs; ++k) p[k] = row[r][k] + c * dj.stride[k + 1];
            o[r + c * dj.stride[0]] = value(p, 0);
          }
      });
    }
  });
}

// Inputs of type T; the output's type O is what `fn` returns (uint8_t for
// comparisons, whose results are bool).
template <typename T, typename Fn>
void binary_typed(const Tensor& a, const Tensor& b, const Tensor& out, Fn fn) {
  using O = decltype(fn(T(), T()));
  std::vector<const Tensor*> ops{&out, &a, &b};
  std::vector<Ref<Tensor>> holders;
  Iteration it = iterate(ops, holders, materialise_dense);
  O* o0 = base_of<O>(*ops[0]);
  const T* a0 = base_of<T>(*ops[1]);
  const T* b0 = base_of<T>(*ops[2]);
  if constexpr (std::is_same_v<O, T>) if (const size_t j = tile_dim(it)) {
    // One instantiation per broadcast pattern along the rows, so the column
    // loop has constant steps.
    const T* const inputs[2] = {a0, b0};
    auto tiles = [&](auto sa, auto sb) {
      transposed_tiles<T, 2>(it, j, o0, inputs, out.runtime().compute(), [f = fn](const T* const* p, int64_t e) {
        return f(p[0][e * decltype(sa)::value], p[1][e * decltype(sb)::value]);
      });
    };
    using one = std::integral_constant<int64_t, 1>;
    using zero = std::integral_constant<int64_t, 0>;
    if (it.dims[j].stride[1] == 0)
      tiles(zero{}, one{});
    else if (it.dims[j].stride[2] == 0)
      tiles(one{}, zero{});
    else
      tiles(one{}, one{});
    return;
  }
  out.runtime().compute().parallel_for(it.total, kGrain, [&](int64_t lo, int64_t hi) {
    walk(it, lo, hi, [&](const int64_t* off, int64_t n, const int64_t* st) {
      // A local copy: what `fn` captures (a scalar) stays in a register
      // instead of being reloaded after every store, so the loops vectorise.
      const Fn f = fn;
      O* __restrict o = o0 + off[0];
      const T* __restrict x = a0 + off[1];
      const T* __restrict y = b0 + off[2];
      if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
        for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
      } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
        const T yv = *y;
        for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], yv);
      } else if (st[0] == 1 && st[1] == 0 && st[2] == 1) {
        const T xv = *x;
        for (int64_t i = 0; i < n; ++i) o[i] = f(xv, y[i]);
      } else {
        for (int64_t i = 0; i < n; ++i) o[i * st[0]] = f(x[i * st[1]], y[i * st[2]]);
      }
    });
  });
}

template <typename T, typename Fn>
void unary_typed(const Tensor& a, const Tensor& out, Fn fn) {
  std::vector<const Tensor*> ops{&out, &a};
  std::vector<Ref<Tensor>> holders;
  Iteration it = iterate(ops, holders, materialise_dense);
  T* o0 = base_of<T>(*ops[0]);
  const T* a0 = base_of<T>(*ops[1]);
  if (const size_t j = tile_dim(it)) {  // the one input is contiguous along j
    const T* const inputs[1] = {a0};
    transposed_tiles<T, 1>(it, j, o0, inputs, out.runtime().compute(),
                           [f = fn](const T* const* p, int64_t e) { return f(p[0][e]); });
    return;
  }
  out.runtime().compute().parallel_for(it.total, kGrain, [&](int64_t lo, int64_t hi) {
    walk(it, lo, hi, [&](const int64_t* off, int64_t n, const int64_t* st) {
      const Fn f = fn;  // in a register, as in binary_typed
      T* __restrict o = o0 + off[0];
      const T* __restrict x = a0 + off[1];
      if (st[0] == 1 && st[1] == 1) {
        for (int64_t i = 0; i < n; ++i) o[i] = f(x[i]);
      } else {
        for (int64_t i = 0; i < n; ++i) o[i * st[0]] = f(x[i * st[1]]);
      }
    });
  });
}

// ---- the elementwise op tables ------------------------------------------------------

// Every binary op but the comparisons (cpu_elementwise.cpp).
void binary_kernel(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
// The comparisons, whose results are bool (cpu_compare.cpp).
void compare_kernel(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
// Every unary op but the copy (cpu_elementwise.cpp).
void unary_kernel(UnaryOp op, const Tensor& a, double scalar, const Tensor& out);

}  // namespace sw::cpu
