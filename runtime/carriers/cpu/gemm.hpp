// The CPU carrier's matrix multiply: one column-major C = A B over f32, f64,
// bf16 and f16 operands, run on the runtime's compute threads. The library
// behind it (oneDNN) stays inside gemm.cpp; nothing else includes it.
#pragma once

#include <cstdint>

#include "base/thread_pool.hpp"
#include "strideweave/strideweave.h"

namespace sw::gemm {

// A matrix operand, column major: element (i, j) at data[i + j * ld], or at
// data[j + i * ld] when `transposed` (row major). ld >= the extent of the
// unit-stride mode, and >= 1.
struct Matrix {
  const void* data;
  bool transposed;
  int64_t ld;
};

// C (m x n, column major, leading dimension ldc >= max(1, m), dtype `out`) =
// A (m x k) B (k x n), both of dtype `in`: f32 -> f32, f64 -> f64, bf16 and
// f16 -> themselves or f32. Products accumulate in f32 (f64
// for f64); a half `out` is rounded once from that. Every element of C is
// written, K = 0 giving zeros whatever C held; C's padding is left alone. The
// work splits over `pool`'s threads and runs inline on the caller when it is
// small; no other threads are used. m, n, k < 2^31.
void multiply(ThreadPool& pool, sw_dtype_t in, const Matrix& a, const Matrix& b, int64_t m, int64_t n, int64_t k,
              sw_dtype_t out, void* c, int64_t ldc);

// One product of multiply_all: C (m x n, ldc) = A (m x k) B (k x n).
struct Product {
  Matrix a, b;
  int64_t m, n, k;
  void* c;
  int64_t ldc;
};

// Independent products (their C's disjoint), each as multiply computes it,
// all of dtype `in` into `out`. The vector products among them (m or n 1:
// a token's expert products in decoding) share one parallel region, their
// 64-wide units claimed across all of them, instead of one region each;
// the others run one after another.
void multiply_all(ThreadPool& pool, sw_dtype_t in, sw_dtype_t out, const Product* products, size_t count);

}  // namespace sw::gemm
