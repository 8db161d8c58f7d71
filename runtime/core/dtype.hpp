#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "strideweave/strideweave.h"

namespace sw {

bool dtype_is_valid(sw_dtype_t dtype);
bool dtype_is_float(sw_dtype_t dtype);
// Bytes per element of a plain dtype; INTERNAL for a block-quantized one,
// whose sizes go through dtype_bytes.
size_t dtype_size(sw_dtype_t dtype);

// Storage units. A plain dtype stores each element in a unit of its own; a
// block-quantized dtype (Q8_0, Q4_0, Q4_K, Q6_K, MXFP4) stores
// dtype_block_elements consecutive elements of the first mode in one block of
// dtype_block_bytes. Every byte count of a carrier, buffer or tile goes
// through dtype_bytes, so slots stay elements everywhere and a quantized
// range is whole blocks.
bool dtype_is_quantized(sw_dtype_t dtype);
// 1 for a plain dtype, 0 for an unknown one.
int64_t dtype_block_elements(sw_dtype_t dtype);
// The unit's bytes: dtype_size for a plain dtype, 0 for an unknown one.
size_t dtype_block_bytes(sw_dtype_t dtype);
// Bytes of `count` elements; INTERNAL when `count` is not whole blocks (the
// callers checked their ranges), VALUE when the product overflows.
size_t dtype_bytes(sw_dtype_t dtype, size_t count);
// VALUE, naming `what`, when `count` elements are not whole blocks of a
// quantized dtype.
void check_whole_blocks(sw_dtype_t dtype, uint64_t count, const char* what);
// TYPE, naming `what`, for a block-quantized dtype: what works element by
// element (arithmetic, element access, fills) refuses one; moves, views that
// keep whole blocks and conversions (sw_tensor_to_dtype) take it.
void refuse_quantized(sw_dtype_t dtype, const char* what);
// Elements in the whole units of `bytes` bytes (a remainder is dropped).
uint64_t dtype_elements_in(sw_dtype_t dtype, uint64_t bytes);
const char* dtype_name(sw_dtype_t dtype);
// Throws TYPE for an unknown dtype.
void check_dtype(sw_dtype_t dtype, const char* what);

// Type promotion, as PyTorch's for tensors of the same rank class: the
// categories bool < integer (u8, i32, i64) < floating (f16, bf16, f32, f64);
// the higher category wins, within one the wider type, with u8 and i32 giving
// i32 and f16 and bf16 giving f32.
// Block-quantized dtypes have no category: ops refuse them before promoting.
enum class DtypeCategory { kBool = 0, kInteger = 1, kFloat = 2 };
DtypeCategory dtype_category(sw_dtype_t dtype);
sw_dtype_t promote_types(sw_dtype_t a, sw_dtype_t b);
// The dtype kernels compute in: f32 for f16 and bf16 (rounded once to the
// half type afterwards), the dtype itself otherwise.
inline sw_dtype_t compute_dtype(sw_dtype_t d) { return d == SW_DTYPE_F16 || d == SW_DTYPE_BF16 ? SW_DTYPE_F32 : d; }

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// Element <-> double for the generic accessors. to_element throws VALUE when
// the value does not fit the dtype exactly (integers) .
double element_to_double(sw_dtype_t dtype, const void* p);
void double_to_element(sw_dtype_t dtype, double value, void* p);

}  // namespace sw
