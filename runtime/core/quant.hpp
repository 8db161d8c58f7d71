// The block-quantized dtypes' formats (GGUF's, byte for byte): whole blocks
// to and from f32. Pure functions over host memory, no threads.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "strideweave/strideweave.h"

namespace sw::quant {

// Half of 2^(e - 127): the scale of an MXFP4 block with exponent byte e,
// for its e2m1 codes doubled to integers.
constexpr float mxfp4_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? uint32_t{0x00200000} << e : static_cast<uint32_t>(e - 1) << 23;
  return std::bit_cast<float>(bits);
}

// Dequantizes `blocks` consecutive blocks of `dtype` at `src` into
// blocks * dtype_block_elements(dtype) floats at `dst`, with the f32
// operations of the reference dequantizers in their order (no fused
// multiply-add), so that the values equal theirs bit for bit.
void dequantize(sw_dtype_t dtype, const std::byte* src, int64_t blocks, float* dst);

// UNSUPPORTED unless `dtype` has a quantizer here (every block-quantized
// dtype does: Q8_0, Q4_0, Q4_K, Q6_K, MXFP4).
void check_quantizer(sw_dtype_t dtype);
// Quantizes blocks * dtype_block_elements(dtype) floats into `blocks` blocks,
// with the reference quantizers' f32 operations in their order, so that the
// bytes equal theirs (docs/quantization.md). UNSUPPORTED for a dtype without
// a quantizer.
void quantize(sw_dtype_t dtype, const float* src, int64_t blocks, std::byte* dst);

}  // namespace sw::quant
