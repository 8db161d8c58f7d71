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
  const float d = mxfp4_scale(byte_at(b, 0));
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
  const float d = mxfp4_scale(static_cast<uint8_t>(e));
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

// The nearest integer to `v`, halves to even, as the reference k-quant
// quantizers round: adding 1.5 * 2^23 leaves round-to-nearest-even of `v`
// in the sum's low 23 mantissa bits (offset by 2^22) while |v| < 2^22. The
// same f32 addition is done here, so that values outside that range (a
// non-finite input's) give the reference's integers too.
inline int nearest_int(float v) {
  const float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, 4);
  return (bits & 0x007fffff) - 0x00400000;
}

// Q4_K's fit of one 32-value sub-block as scale * L + lo (L in [0, 15], lo
// <= 0) under the weights `w`: the grid of the block's range, then 21 trial
// grids, (15 - 1 + 0.1 * k) steps over the range from the best `lo` so far,
// each refit by weighted least squares (lo clamped to 0 and the scale refit
// when the fit puts it above 0); a trial replaces the best when its weighted
// squared error is smaller. Sets L and *neg_min = -lo; returns the scale.
float q4k_fit(const float* x, const float* w, uint8_t* L, float* neg_min) {
  constexpr int n = 32;
  float lo = x[0], hi = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < lo) lo = x[i];
    if (x[i] > hi) hi = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (lo > 0.0f) lo = 0.0f;
  if (hi == lo) {
    std::memset(L, 0, n);
    *neg_min = -lo;
    return 0.0f;
  }
  float iscale = 15.0f / (hi - lo);
  float scale = 1.0f / iscale;
  float best_error = 0.0f;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * (x[i] - lo)), 0, 15));
    const float fit = scale * static_cast<float>(L[i]);
    float diff = fit + lo;
    diff = diff - x[i];
    diff = diff * diff;
    best_error += w[i] * diff;
  }
  uint8_t trial[n];
  for (int k = 0; k <= 20; ++k) {
    const float step = 0.1f * static_cast<float>(k);
    const float levels = (-1.0f + step) + 15.0f;
    iscale = levels / (hi - lo);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - lo)), 0, 15);
      trial[i] = static_cast<uint8_t>(l);
      const float wl = w[i] * static_cast<float>(l);
      sum_l += wl;
      sum_l2 += wl * static_cast<float>(l);
      sum_xl += wl * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (!(D > 0.0f)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
    if (this_min > 0.0f) {
      this_min = 0.0f;
      this_scale = sum_xl / sum_l2;
    }
    float error = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float fit = this_scale * static_cast<float>(trial[i]);
      float diff = fit + this_min;
      diff = diff - x[i];
      diff = diff * diff;
      error += w[i] * diff;
    }
    if (error < best_error) {
      std::memcpy(L, trial, n);
      best_error = error;
      scale = this_scale;
      lo = this_min;
    }
  }
  *neg_min = -lo;
  return scale;
}

// Each sub-block fit by q4k_fit, weighted by sqrt(mean(x^2)) + |x|; the
// eight scales and the eight mins quantized to 6 bits against the largest
// of each (d = max_scale / 63, dmin = max_min / 63, stored as f16); then
// each value requantized against its sub-block's stored scale and min, q =
// round((x + dmin * m) / (d * sc)) in [0, 15] (a sub-block whose stored
// scale is 0 keeps the fit's levels).
void quantize_q4_k(const float* x, std::byte* b) {
  float scales[8], mins[8], weights[32];
  uint8_t L[256];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32.0f);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = q4k_fit(xs, weights, L + 32 * j, &mins[j]);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  uint8_t packed[12] = {};
  for (int j = 0; j < 8; ++j) {
    // The reference keeps the low byte of the rounded value, then caps it.
    const uint8_t ls = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    const uint8_t lm = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
    if (j < 4) {
      packed[j] = ls;
      packed[j + 4] = lm;
    } else {
      packed[j + 4] = static_cast<uint8_t>((ls & 0x0f) | ((lm & 0x0f) << 4));
      packed[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      packed[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  store_half(b, max_scale / 63.0f);
  store_half(b + 2, max_min / 63.0f);
  std::memcpy(b + 4, packed, 12);
  const float d_all = half_at(b), dmin_all = half_at(b + 2);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    q4k_scale_min(b + 4, j, &sc, &m);
    const float d = d_all * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = dmin_all * static_cast<float>(m);
    for (int i = 0; i < 32; ++i) {
      const float shifted = x[32 * j + i] + dm;
      L[32 * j + i] = static_cast<uint8_t>(std::clamp(nearest_int(shifted / d), 0, 15));
    }
  }
  for (int g = 0; g < 4; ++g)
    for (int l = 0; l < 32; ++l)
      b[16 + 32 * g + l] = static_cast<std::byte>(L[64 * g + l] | (L[64 * g + 32 + l] << 4));
}

// Q6_K's fit of one 16-value sub-block as scale * q, q in [-32, 31], under
// the weights x^2: the grid that maps the value of largest magnitude (the
// first such) to -32, then the grids mapping it to -(32 + 0.1 * k) for k =
// -9..9 (k != 0), each with the least-squares scale of its levels; a grid
// replaces the best when it explains more of the weighted sum of squares
// (sumlx^2 / suml2). Sets L = q + 32; returns the scale (0, L = 0, for a
// sub-block whose largest magnitude is below 1e-15).
float q6k_fit(const float* x, int8_t* L) {
  constexpr int n = 16;
  float max = 0.0f, amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < 1e-15f) {
    std::memset(L, 0, n);
    return 0.0f;
  }
  auto level = [](float iscale, float v) { return std::clamp(nearest_int(iscale * v), -32, 31); };
  auto sums = [&](float iscale, float* sumlx, float* suml2) {
    *sumlx = 0.0f;
    *suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float l = static_cast<float>(level(iscale, x[i]));
      const float w = x[i] * x[i];
      const float wx = w * x[i];
      *sumlx += wx * l;
      const float wl = w * l;
      *suml2 += wl * l;
    }
  };
  float iscale = -32.0f / max;
  float sumlx, suml2;
  sums(iscale, &sumlx, &suml2);
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(level(iscale, x[i]) + 32);
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int k = -9; k <= 9; ++k) {
    if (k == 0) continue;
    const float levels = 32.0f + 0.1f * static_cast<float>(k);
    iscale = -levels / max;
    sums(iscale, &sumlx, &suml2);
    if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(level(iscale, x[i]) + 32);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Each 16-value sub-block fit by q6k_fit; the sixteen scales quantized to
// int8 against the one of largest magnitude (the first such), which maps to
// -128 (d = max_scale / -128, stored as f16; a scale rounding to 128 is
// capped at 127); then each value requantized, q = round(x / (d * sc)) in
// [-32, 31] (a sub-block whose stored scale is 0 keeps the fit's levels).
// A block whose scales are all below 1e-15 in magnitude is all zero bytes.
void quantize_q6_k(const float* x, std::byte* b) {
  float scales[16];
  int8_t L[256];
  float max_scale = 0.0f, max_abs_scale = 0.0f;
  for (int s = 0; s < 16; ++s) {
    scales[s] = q6k_fit(x + 16 * s, L + 16 * s);
    const float abs_scale = std::fabs(scales[s]);
    if (abs_scale > max_abs_scale) {
      max_abs_scale = abs_scale;
      max_scale = scales[s];
    }
  }
  if (max_abs_scale < 1e-15f) {
    std::memset(b, 0, 210);
    return;
  }
  const float iscale = -128.0f / max_scale;
  store_half(b + 208, 1.0f / iscale);
  int8_t sc[16];
  for (int s = 0; s < 16; ++s) {
    sc[s] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[s])));
    b[192 + s] = static_cast<std::byte>(sc[s]);
  }
  const float d_all = half_at(b + 208);
  for (int s = 0; s < 16; ++s) {
    const float d = d_all * static_cast<float>(sc[s]);
    if (d == 0.0f) continue;
    for (int i = 0; i < 16; ++i)
      L[16 * s + i] = static_cast<int8_t>(std::clamp(nearest_int(x[16 * s + i] / d), -32, 31) + 32);
  }
  for (int h = 0; h < 2; ++h) {
    const int8_t* q = L + 128 * h;
    for (int l = 0; l < 32; ++l) {
      const int q0 = q[l], q1 = q[l + 32], q2 = q[l + 64], q3 = q[l + 96];
      b[64 * h + l] = static_cast<std::byte>((q0 & 0x0f) | ((q2 & 0x0f) << 4));
      b[64 * h + 32 + l] = static_cast<std::byte>((q1 & 0x0f) | ((q3 & 0x0f) << 4));
      b[128 + 32 * h + l] = static_cast<std::byte>((q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) | ((q3 >> 4) << 6));
    }
  }
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
  if (!dtype_is_quantized(dtype))
    unsupported_error(std::string("quantizing to ") + dtype_name(dtype) +
                      " is not supported: it is not a block-quantized dtype (q8_0, q4_0, q4_k, q6_k and mxfp4 are)");
}

void quantize(sw_dtype_t dtype, const float* src, int64_t blocks, std::byte* dst) {
  const size_t bytes = dtype_block_bytes(dtype);
  const int64_t n = dtype_block_elements(dtype);
  void (*one)(const float*, std::byte*) = nullptr;
  switch (dtype) {
    case SW_DTYPE_Q8_0: one = quantize_q8_0; break;
    case SW_DTYPE_Q4_0: one = quantize_q4_0; break;
    case SW_DTYPE_Q4_K: one = quantize_q4_k; break;
    case SW_DTYPE_Q6_K: one = quantize_q6_k; break;
    case SW_DTYPE_MXFP4: one = quantize_mxfp4; break;
    default: check_quantizer(dtype); internal_error("quantize: no quantizer");
  }
  for (int64_t i = 0; i < blocks; ++i) one(src + i * n, dst + static_cast<size_t>(i) * bytes);
}

}  // namespace sw::quant
