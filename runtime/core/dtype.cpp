#include "core/dtype.hpp"

#include <cmath>
#include <limits>

#include "base/error.hpp"

namespace sw {

bool dtype_is_valid(sw_dtype_t d) { return d >= SW_DTYPE_F32 && d <= SW_DTYPE_MXFP4; }

bool dtype_is_quantized(sw_dtype_t d) { return d >= SW_DTYPE_Q8_0 && d <= SW_DTYPE_MXFP4; }

int64_t dtype_block_elements(sw_dtype_t d) {
  switch (d) {
    case SW_DTYPE_Q8_0: case SW_DTYPE_Q4_0: case SW_DTYPE_MXFP4: return 32;
    case SW_DTYPE_Q4_K: case SW_DTYPE_Q6_K: return 256;
    default: return dtype_is_valid(d) ? 1 : 0;
  }
}

size_t dtype_block_bytes(sw_dtype_t d) {
  switch (d) {
    case SW_DTYPE_Q8_0: return 34;
    case SW_DTYPE_Q4_0: return 18;
    case SW_DTYPE_Q4_K: return 144;
    case SW_DTYPE_Q6_K: return 210;
    case SW_DTYPE_MXFP4: return 17;
    case SW_DTYPE_F32: case SW_DTYPE_I32: return 4;
    case SW_DTYPE_F64: case SW_DTYPE_I64: return 8;
    case SW_DTYPE_F16: case SW_DTYPE_BF16: return 2;
    case SW_DTYPE_U8: case SW_DTYPE_BOOL: return 1;
    default: return 0;
  }
}

size_t dtype_bytes(sw_dtype_t d, size_t count) {
  const auto block = static_cast<size_t>(dtype_block_elements(d));
  if (block == 0) internal_error(std::string("dtype_bytes: unknown dtype ") + std::to_string(static_cast<int>(d)));
  if (count % block)
    internal_error(std::to_string(count) + " elements of " + dtype_name(d) + " are not whole blocks of " +
                   std::to_string(block));
  size_t bytes;
  if (__builtin_mul_overflow(count / block, dtype_block_bytes(d), &bytes))
    value_error(std::to_string(count) + " elements of " + dtype_name(d) + " overflow the byte count");
  return bytes;
}

uint64_t dtype_elements_in(sw_dtype_t d, uint64_t bytes) {
  const size_t unit = dtype_block_bytes(d);
  if (unit == 0) internal_error(std::string("dtype_elements_in: unknown dtype ") + std::to_string(static_cast<int>(d)));
  return bytes / unit * static_cast<uint64_t>(dtype_block_elements(d));
}

void refuse_quantized(sw_dtype_t d, const char* what) {
  if (dtype_is_quantized(d))
    type_error(std::string(what) + " does not take " + dtype_name(d) +
               " tensors: a block-quantized dtype is only moved, viewed and converted; convert it first "
               "(sw_tensor_to_dtype)");
}

void check_whole_blocks(sw_dtype_t d, uint64_t count, const char* what) {
  const auto block = static_cast<uint64_t>(dtype_block_elements(d));
  if (block > 1 && count % block)
    value_error(std::string(what) + ": " + std::to_string(count) + " elements of " + dtype_name(d) +
                " are not whole blocks of " + std::to_string(block) + " elements");
}

bool dtype_is_float(sw_dtype_t d) {
  return d == SW_DTYPE_F32 || d == SW_DTYPE_F64 || d == SW_DTYPE_F16 || d == SW_DTYPE_BF16;
}

size_t dtype_size(sw_dtype_t d) {
  switch (d) {
    case SW_DTYPE_F32: case SW_DTYPE_I32: return 4;
    case SW_DTYPE_F64: case SW_DTYPE_I64: return 8;
    case SW_DTYPE_F16: case SW_DTYPE_BF16: return 2;
    case SW_DTYPE_U8: case SW_DTYPE_BOOL: return 1;
    default:
      if (dtype_is_quantized(d))
        internal_error(std::string("dtype_size: ") + dtype_name(d) + " elements have no size of their own");
      return 0;
  }
}

const char* dtype_name(sw_dtype_t d) {
  switch (d) {
    case SW_DTYPE_F32: return "f32";
    case SW_DTYPE_F64: return "f64";
    case SW_DTYPE_F16: return "f16";
    case SW_DTYPE_BF16: return "bf16";
    case SW_DTYPE_I32: return "i32";
    case SW_DTYPE_I64: return "i64";
    case SW_DTYPE_U8: return "u8";
    case SW_DTYPE_BOOL: return "bool";
    case SW_DTYPE_Q8_0: return "q8_0";
    case SW_DTYPE_Q4_0: return "q4_0";
    case SW_DTYPE_Q4_K: return "q4_k";
    case SW_DTYPE_Q6_K: return "q6_k";
    case SW_DTYPE_MXFP4: return "mxfp4";
    default: return "invalid";
  }
}

void check_dtype(sw_dtype_t d, const char* what) {
  if (!dtype_is_valid(d))
    type_error(std::string(what) + ": unknown dtype " + std::to_string(static_cast<int>(d)));
}

DtypeCategory dtype_category(sw_dtype_t d) {
  if (d == SW_DTYPE_BOOL) return DtypeCategory::kBool;
  return dtype_is_float(d) ? DtypeCategory::kFloat : DtypeCategory::kInteger;
}

sw_dtype_t promote_types(sw_dtype_t a, sw_dtype_t b) {
  if (a == b) return a;
  const DtypeCategory ca = dtype_category(a), cb = dtype_category(b);
  if (ca != cb) return ca > cb ? a : b;
  auto rank = [](sw_dtype_t d) {
    switch (d) {
      case SW_DTYPE_U8: return 0;
      case SW_DTYPE_I32: return 1;
      case SW_DTYPE_I64: return 2;
      case SW_DTYPE_F16: case SW_DTYPE_BF16: return 0;
      case SW_DTYPE_F32: return 1;
      default: return 2;  // f64
    }
  };
  if (ca == DtypeCategory::kFloat && rank(a) == 0 && rank(b) == 0) return SW_DTYPE_F32;  // f16 with bf16
  return rank(a) >= rank(b) ? a : b;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while (!(mant & 0x400u)) { mant <<= 1; --exp; }
      bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: infinity
  if (ax < 0x38800000u) {                         // subnormal or zero in f16
    if (ax < 0x33000000u) return sign;            // below half the smallest subnormal
    const uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 113 - e + 13
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t r = ax - 0x38000000u;  // rebias exponent 127 -> 15
  r += 0xfffu + ((r >> 13) & 1u);
  return sign | static_cast<uint16_t>(r >> 13);
}

double element_to_double(sw_dtype_t d, const void* p) {
  switch (d) {
    case SW_DTYPE_F32: { float v; std::memcpy(&v, p, 4); return v; }
    case SW_DTYPE_F64: { double v; std::memcpy(&v, p, 8); return v; }
    case SW_DTYPE_F16: { uint16_t v; std::memcpy(&v, p, 2); return f16_to_f32(v); }
    case SW_DTYPE_BF16: { uint16_t v; std::memcpy(&v, p, 2); return bf16_to_f32(v); }
    case SW_DTYPE_I32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case SW_DTYPE_I64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case SW_DTYPE_U8: return *static_cast<const uint8_t*>(p);
    case SW_DTYPE_BOOL: return *static_cast<const uint8_t*>(p) ? 1.0 : 0.0;
    default:
      refuse_quantized(d, "element access");
      internal_error("element_to_double: bad dtype");
  }
}

static void check_integral(double v, double lo, double hi, sw_dtype_t d) {
  if (!std::isfinite(v) || v != std::floor(v) || v < lo || v > hi)
    value_error(std::string("value ") + std::to_string(v) + " does not fit dtype " + dtype_name(d));
}

void double_to_element(sw_dtype_t d, double v, void* p) {
  switch (d) {
    case SW_DTYPE_F32: { float x = static_cast<float>(v); std::memcpy(p, &x, 4); return; }
    case SW_DTYPE_F64: std::memcpy(p, &v, 8); return;
    case SW_DTYPE_F16: { uint16_t x = f32_to_f16(static_cast<float>(v)); std::memcpy(p, &x, 2); return; }
    case SW_DTYPE_BF16: { uint16_t x = f32_to_bf16(static_cast<float>(v)); std::memcpy(p, &x, 2); return; }
    case SW_DTYPE_I32: {
      check_integral(v, -2147483648.0, 2147483647.0, d);
      int32_t x = static_cast<int32_t>(v); std::memcpy(p, &x, 4); return;
    }
    case SW_DTYPE_I64: {
      check_integral(v, -9223372036854775808.0, 9223372036854774784.0, d);
      int64_t x = static_cast<int64_t>(v); std::memcpy(p, &x, 8); return;
    }
    case SW_DTYPE_U8: check_integral(v, 0, 255, d); *static_cast<uint8_t*>(p) = static_cast<uint8_t>(v); return;
    case SW_DTYPE_BOOL: check_integral(v, 0, 1, d); *static_cast<uint8_t*>(p) = static_cast<uint8_t>(v); return;
    default:
      refuse_quantized(d, "element access");
      internal_error("double_to_element: bad dtype");
  }
}

}  // namespace sw
