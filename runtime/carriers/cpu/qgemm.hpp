// Products with block-quantized weights (Q8_0, Q4_0, Q4_K, Q6_K, MXFP4):
// C (m x n, f32) = X (m x k, f32) W (k x n), W's columns stored as GGUF rows
// of blocks. X is quantized once per call to 8-bit blocks (of 32 values, of
// 256 for the K-quants; a f32 scale each); every weight block is decoded in registers inside the
// integer dot product, never into a dequantized copy. Kernels for AVX-512
// VNNI, AVX2 and plain C++, chosen at run time (docs/quantization.md gives
// the error bound they share).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/thread_pool.hpp"
#include "strideweave/strideweave.h"

namespace sw::qgemm {

// 32 values of one row of X: x_i ~ d * q[i], q in [-127, 127], and
// ds = d * (the sum of q), for the weights' offsets. Weights in blocks of 32
// (Q8_0, Q4_0, MXFP4) meet these.
struct XBlock {
  float d, ds;
  int8_t q[32];
};
static_assert(sizeof(XBlock) == 40);

// 256 values of one row of X under one scale, with the sums of q over each
// 16 and each 32: the K-quants' super-blocks (Q4_K, Q6_K) meet these, their sub-block
// scales applied to integer sums (one f32 step per 256 values).
struct XBlockK {
  float d;
  int16_t bsums[16];
  int16_t bsums32[8];  // over each 32
  int8_t q[256];
};
static_assert(sizeof(XBlockK) == 308);

// Four XBlocks laid out for the AVX-512 kernels of the blocks of 32, which
// take four weight blocks (Q4_0, MXFP4) or two (Q8_0) per 512-bit step:
// their products land in i32 lanes that start from `off` (the weights'
// offset term, -offset * the block's sum of q, in the block's first lane)
// and are scaled per lane by `d`. Q4_0 and MXFP4: q holds each block's
// first 16 values, then each block's last 16, and [0] covers the four
// blocks, four lanes each; Q8_0: q holds the blocks in order, and [h]
// covers blocks 2h and 2h + 1, eight lanes each.
struct XGroup {
  int8_t q[128];
  int32_t off[2][16];
  float d[2][16];
};
static_assert(sizeof(XGroup) == 384);

// X quantized for weights of `wtype`: row i's blocks at [i * per_row, ...)
// of `blocks` (blocks of 32) or `kblocks` (K-quant weights); where the
// kernel in use takes them, row i's whole groups of four blocks also at
// [i * (per_row / 4), ...) of `groups`.
struct Activations {
  int64_t rows = 0, per_row = 0;
  std::vector<XBlock> blocks;
  std::vector<XBlockK> kblocks;
  std::vector<XGroup> groups;
};

// True for the weight dtypes whose X is in blocks of 256 (XBlockK).
bool wants_k_blocks(sw_dtype_t wtype);

// Quantizes the m x k values x[i * rs + p * cs] for weights of `wtype` (k a
// whole number of its blocks).
void quantize_rows(sw_dtype_t wtype, const float* x, int64_t rs, int64_t cs, int64_t m, int64_t k, Activations* out);

// One product: C(i, j) at c[i * rsc + j * csc] = row i of `x` times column j
// of W, whose blocks of `wtype` start at w + j * ldw (bytes); `x` was
// quantized for `wtype`.
struct Product {
  sw_dtype_t wtype;
  const std::byte* w;
  int64_t ldw, n;
  const Activations* x;
  float* c;
  int64_t rsc, csc;
};

// Independent products (their C's disjoint), their column blocks claimed
// across all of them by the pool's threads (inline when small).
void multiply_all(ThreadPool& pool, const Product* products, size_t count);

// The kernel set in use: "avx512-vnni", "avx2" or "portable". The variable
// STRIDEWEAVE_QGEMM_ISA (the same names) caps it, for tests of the lower
// paths on a CPU that has the higher ones.
const char* isa();

}  // namespace sw::qgemm
