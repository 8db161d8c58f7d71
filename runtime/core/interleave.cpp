// Interleaving copies between S separate arrays and one array that holds
// them element by element (see interleave.hpp).
#include "core/interleave.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "base/error.hpp"

namespace sw {
namespace {

template <typename T>
void interleave(T* packed, T* const* parts, int64_t S, int64_t lo, int64_t hi, bool to_packed) {
  if (to_packed) {
    for (int64_t i = lo; i < hi; ++i)
      for (int64_t s = 0; s < S; ++s) packed[i * S + s] = parts[s][i];
  } else {
    for (int64_t i = lo; i < hi; ++i)
      for (int64_t s = 0; s < S; ++s) parts[s][i] = packed[i * S + s];
  }
}

#if defined(__SSE2__)
// Groups of four parts at a time as 4x4 transposes of 4- or 2-byte elements:
// four vector loads from the parts become four rows of the packed array, and
// back the same way (the transpose is its own inverse). Rows are written in
// order, so each packed line fills at once.

// Non-temporal stores for transfers much larger than the caches: the
// destination is written whole, so skipping its read-for-ownership saves a
// third of the memory traffic.
inline void store128(void* p, __m128i v, bool stream) {
  if (stream && (reinterpret_cast<uintptr_t>(p) & 15) == 0)
    _mm_stream_si128(static_cast<__m128i*>(p), v);
  else
    _mm_storeu_si128(static_cast<__m128i*>(p), v);
}

inline void store64(void* p, __m128i v, bool stream) {
  if (stream && (reinterpret_cast<uintptr_t>(p) & 7) == 0)
    _mm_stream_si64(static_cast<long long*>(p), _mm_cvtsi128_si64(v));
  else
    _mm_storel_epi64(static_cast<__m128i*>(p), v);
}

// Four vectors of four 32-bit elements at src[0..3], transposed into dst[0..3].
inline void transpose_block32(uint32_t* const* src, uint32_t* const* dst, bool stream) {
  const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src[0]));
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src[1]));
  const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src[2]));
  const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src[3]));
  const __m128i ab0 = _mm_unpacklo_epi32(a, b), ab1 = _mm_unpackhi_epi32(a, b);
  const __m128i cd0 = _mm_unpacklo_epi32(c, d), cd1 = _mm_unpackhi_epi32(c, d);
  store128(dst[0], _mm_unpacklo_epi64(ab0, cd0), stream);
  store128(dst[1], _mm_unpackhi_epi64(ab0, cd0), stream);
  store128(dst[2], _mm_unpacklo_epi64(ab1, cd1), stream);
  store128(dst[3], _mm_unpackhi_epi64(ab1, cd1), stream);
}

// Four vectors of four 16-bit elements (8 bytes each), transposed.
inline void transpose_block16(uint16_t* const* src, uint16_t* const* dst, bool stream) {
  const __m128i a = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src[0]));
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src[1]));
  const __m128i c = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src[2]));
  const __m128i d = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src[3]));
  const __m128i ab = _mm_unpacklo_epi16(a, b), cd = _mm_unpacklo_epi16(c, d);
  const __m128i lo = _mm_unpacklo_epi32(ab, cd), hi = _mm_unpackhi_epi32(ab, cd);
  store64(dst[0], lo, stream);
  store64(dst[1], _mm_unpackhi_epi64(lo, lo), stream);
  store64(dst[2], hi, stream);
  store64(dst[3], _mm_unpackhi_epi64(hi, hi), stream);
}

template <typename T, void (*Transpose)(T* const*, T* const*, bool)>
void interleave_sse(T* packed, T* const* parts, int64_t S, int64_t lo, int64_t hi, bool to_packed, bool stream) {
  const int64_t vec_end = lo + ((hi - lo) & ~int64_t{3});
  for (int64_t i = lo; i < vec_end; i += 4) {
    for (int64_t s = 0; s < S; s += 4) {
      T* const rows[4] = {packed + i * S + s, packed + (i + 1) * S + s, packed + (i + 2) * S + s,
                          packed + (i + 3) * S + s};
      T* const cols[4] = {parts[s] + i, parts[s + 1] + i, parts[s + 2] + i, parts[s + 3] + i};
      if (to_packed)
        Transpose(cols, rows, stream);
      else
        Transpose(rows, cols, stream);
    }
  }
  if (vec_end < hi) interleave(packed, parts, S, vec_end, hi, to_packed);
}
#endif

}  // namespace

void interleave_elements(std::byte* packed, std::byte* const* parts, int64_t S, int64_t lo, int64_t hi, size_t es,
                         bool to_packed, bool stream) {
#if defined(__SSE2__)
  if (S % 4 == 0 && es == 4) {
    interleave_sse<uint32_t, transpose_block32>(reinterpret_cast<uint32_t*>(packed),
                                                reinterpret_cast<uint32_t* const*>(parts), S, lo, hi, to_packed, stream);
    if (stream) _mm_sfence();
    return;
  }
  if (S % 4 == 0 && es == 2) {
    interleave_sse<uint16_t, transpose_block16>(reinterpret_cast<uint16_t*>(packed),
                                                reinterpret_cast<uint16_t* const*>(parts), S, lo, hi, to_packed, stream);
    if (stream) _mm_sfence();
    return;
  }
#else
  (void)stream;
#endif
  switch (es) {
    case 1: return interleave(reinterpret_cast<uint8_t*>(packed), reinterpret_cast<uint8_t* const*>(parts), S, lo, hi, to_packed);
    case 2: return interleave(reinterpret_cast<uint16_t*>(packed), reinterpret_cast<uint16_t* const*>(parts), S, lo, hi, to_packed);
    case 4: return interleave(reinterpret_cast<uint32_t*>(packed), reinterpret_cast<uint32_t* const*>(parts), S, lo, hi, to_packed);
    case 8: return interleave(reinterpret_cast<uint64_t*>(packed), reinterpret_cast<uint64_t* const*>(parts), S, lo, hi, to_packed);
    default: {
      // Units of any other size (a quantized dtype's blocks), byte-wise.
      if (es == 0) internal_error("interleave_elements: zero element size");
      const auto n = static_cast<int64_t>(es);
      for (int64_t i = lo; i < hi; ++i)
        for (int64_t s = 0; s < S; ++s) {
          std::byte* p = packed + (i * S + s) * n;
          std::byte* q = parts[s] + i * n;
          if (to_packed)
            std::memcpy(p, q, es);
          else
            std::memcpy(q, p, es);
        }
    }
  }
}

}  // namespace sw
