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
