#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "strideweave/strideweave.h"

namespace sw {

bool dtype_is_valid(sw_dtype_t dtype);
bool dtype_is_float(sw_dtype_t dtype);
size_t dtype_size(sw_dtype_t dtype);
const char* dtype_name(sw_dtype_t dtype);
// Throws TYPE for an unknown dtype.
void check_dtype(sw_dtype_t dtype, const char* what);

// Type promotion, as PyTorch's for tensors of the same rank class: the
// categories bool < integer (u8, i32, i64) < floating (f16, bf16, f32, f64);
// the higher category wins, within one the wider type, with u8 and i32 giving
// i32 and f16 and bf16 giving f32.
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
