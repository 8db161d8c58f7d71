// GGUF's block formats. Every product and difference is its own f32
// operation, as in the reference code (a fused multiply-add would round
// once where it rounds twice): the build compiles C++ as ISO C++, which
// keeps GCC from contracting, and the pragma does the same for Clang.
#include "core/quant.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "base/error.hpp"
#include "core/dtype.hpp"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

namespace sw::quant {
namespace {

inline float half_at(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

inline void store_half(std::byte* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

inline uint8_t byte_at(const std::byte* p, int i) { return static_cast<uint8_t>(p[i]); }

// MXFP4's e2m1 values, doubled (the scale is halved to match).
constexpr int8_t kFp4Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// Half of 2^(e - 127), the scale of an MXFP4 block with exponent byte e.
inline float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? uint32_t{0x00200000} << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Q4_K's eight 6-bit scales and mins, packed in 12 bytes.
inline void q4k_scale_min(const std::byte* s, int j, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = byte_at(s, j) & 63;
    *m = byte_at(s, j + 4) & 63;
  } else {
    *sc = (byte_at(s, j + 4) & 0x0f) | ((byte_at(s, j - 4) >> 6) << 4);
    *m = (byte_at(s, j + 4) >> 4) | ((byte_at(s, j) >> 6) << 4);
  }
}

void dequantize_q8_0(const std::byte* b, float* y) {
  const float d = half_at(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(byte_at(b, 2 + j))) * d;
}

void dequantize_q4_0(const std::byte* b, float* y) {
  const float d = half_at(b);
  for (int j = 0; j < 16; ++j) {
    const uint8_t q = byte_at(b, 2 + j);
    y[j] = d * static_cast<float>((q & 0x0f) - 8);
    y[j + 16] = d * static_cast<float>((q >> 4) - 8);
  }
}

void dequantize_q4_k(const std::byte* b, float* y) {
  const float d = half_at(b), dmin = half_at(b + 2);
  const std::byte* scales = b + 4;
  const std::byte* q = b + 16;
  for (int g = 0; g < 4; ++g) {
    uint8_t sc, m;
    q4k_scale_min(scales, 2 * g, &sc, &m);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
    q4k_scale_min(scales, 2 * g + 1, &sc, &m);
    const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      const uint8_t v = byte_at(q, 32 * g + l);
      const float lo = d1 * static_cast<float>(v & 0x0f);
      y[64 * g + l] = lo - m1;
      const float hi = d2 * static_cast<float>(v >> 4);
      y[64 * g + 32 + l] = hi - m2;
    }
  }
}

void dequantize_q6_k(const std::byte* b, float* y) {
  const std::byte* ql = b;
  const std::byte* qh = b + 128;
  const std::byte* sc = b + 192;
  const float d = half_at(b + 208);
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t a = byte_at(ql, 64 * h + l), c = byte_at(ql, 64 * h + 32 + l), hb = byte_at(qh, 32 * h + l);
      const int q[4] = {((a & 0x0f) | ((hb & 3) << 4)) - 32, ((c & 0x0f) | (((hb >> 2) & 3) << 4)) - 32,
                        ((a >> 4) | (((hb >> 4) & 3) << 4)) - 32, ((c >> 4) | (((hb >> 6) & 3) << 4)) - 32};
      for (int s = 0; s < 4; ++s) {
        const int v = 128 * h + 32 * s + l;
        const float scale = d * static_cast<float>(static_cast<int8_t>(byte_at(sc, v / 16)));
        y[v] = scale * static_cast<float>(q[s]);
      }
    }
  }
}

void dequantize_mxfp4(const std::byte* b, float* y) {
  const float d = e8m0_half(byte_at(b, 0));
  for (int j = 0; j < 16; ++j) {
    const uint8_t q = byte_at(b, 1 + j);
    y[j] = d * static_cast<float>(kFp4Doubled[q & 0x0f]);
    y[j + 16] = d * static_cast<float>(kFp4Doubled[q >> 4]);
  }
}

// Round half away from zero, as roundf.
void quantize_q8_0(const float* x, std::byte* b) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_half(b, d);
  for (int j = 0; j < 32; ++j) {
    const float v = x[j] * id;
    b[2 + j] = static_cast<std::byte>(static_cast<int8_t>(std::roundf(v)));
  }
}

// The scale maps the value of largest magnitude (the first such) to -8;
// q = trunc(x / d + 8.5), at most 15.
void quantize_q4_0(const float* x, std::byte* b) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  if (amax == 0.0f) max = x[0];  // every value is a zero: the first one's sign
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_half(b, d);
  uint8_t q[32];
  for (int j = 0; j < 32; ++j) {
    const float v = x[j] * id;
    const float t = std::trunc(v + 8.5f);
    q[j] = static_cast<uint8_t>(std::min(15.0f, std::max(0.0f, t)));
  }
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<std::byte>(q[j] | (q[j + 16] << 4));
}

// The shared exponent puts the largest magnitude in [4, 8) times the
// element scale (e = floor(log2(amax)) - 2 + 127); each value takes the
// nearest fp4 value, the first of equally near ones.
void quantize_mxfp4(const float* x, std::byte* b) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  int e = 0;
  if (amax > 0.0f) e = std::clamp(static_cast<int>(std::floor(std::log2(amax))) - 2 + 127, 0, 255);
  const float d = e8m0_half(static_cast<uint8_t>(e));
  b[0] = static_cast<std::byte>(e);
  uint8_t q[32];
  for (int j = 0; j < 32; ++j) {
    int best = 0;
    float best_err = INFINITY;
    for (int k = 0; k < 16; ++k) {
      const float p = d * static_cast<float>(kFp4Doubled[k]);
      const float err = std::fabs(p - x[j]);
      if (err < best_err) {
        best_err = err;
        best = k;
      }
    }
    q[j] = static_cast<uint8_t>(best);
  }
  for (int j = 0; j < 16; ++j) b[1 + j] = static_cast<std::byte>(q[j] | (q[j + 16] << 4));
}

}  // namespace

void dequantize(sw_dtype_t dtype, const std::byte* src, int64_t blocks, float* dst) {
  const size_t bytes = dtype_block_bytes(dtype);
  const int64_t n = dtype_block_elements(dtype);
  void (*one)(const std::byte*, float*) = nullptr;
  switch (dtype) {
    case SW_DTYPE_Q8_0: one = dequantize_q8_0; break;
    case SW_DTYPE_Q4_0: one = dequantize_q4_0; break;
    case SW_DTYPE_Q4_K: one = dequantize_q4_k; break;
    case SW_DTYPE_Q6_K: one = dequantize_q6_k; break;
    case SW_DTYPE_MXFP4: one = dequantize_mxfp4; break;
    default: internal_error(std::string("dequantize: ") + dtype_name(dtype) + " is not a quantized dtype");
  }
  for (int64_t i = 0; i < blocks; ++i) one(src + static_cast<size_t>(i) * bytes, dst + i * n);
}

void check_quantizer(sw_dtype_t dtype) {
  if (dtype != SW_DTYPE_Q8_0 && dtype != SW_DTYPE_Q4_0 && dtype != SW_DTYPE_MXFP4)
    unsupported_error(std::string("quantizing to ") + dtype_name(dtype) +
                      " is not supported (q8_0, q4_0 and mxfp4 are); bring its blocks from a GGUF file");
}

void quantize(sw_dtype_t dtype, const float* src, int64_t blocks, std::byte* dst) {
  const size_t bytes = dtype_block_bytes(dtype);
  const int64_t n = dtype_block_elements(dtype);
  void (*one)(const float*, std::byte*) = nullptr;
  switch (dtype) {
    case SW_DTYPE_Q8_0: one = quantize_q8_0; break;
    case SW_DTYPE_Q4_0: one = quantize_q4_0; break;
    case SW_DTYPE_MXFP4: one = quantize_mxfp4; break;
    default: check_quantizer(dtype); internal_error("quantize: no quantizer");
  }
  for (int64_t i = 0; i < blocks; ++i) one(src + i * n, dst + static_cast<size_t>(i) * bytes);
}

}  // namespace sw::quant
