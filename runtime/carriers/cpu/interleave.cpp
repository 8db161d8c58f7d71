// Interleaving copies between S separate arrays and one array that holds
// them element by element (see interleave.hpp).
#include "carriers/cpu/interleave.hpp"

#include <algorithm>
#include <cstdint>

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
// Groups of four parts at a time as 4x4 transposes of 4 or 2 byte elements:
// four vector loads from the parts become four rows of the packed array (or
// back: the transpose is its own inverse). Steps of `kStep` elements keep the
// S/4 groups' writes to one packed stretch while it is in cache.
constexpr int64_t kStep = 256;

inline void transpose4x32(__m128i& a, __m128i& b, __m128i& c, __m128i& d) {
  const __m128i ab0 = _mm_unpacklo_epi32(a, b), ab1 = _mm_unpackhi_epi32(a, b);
  const __m128i cd0 = _mm_unpacklo_epi32(c, d), cd1 = _mm_unpackhi_epi32(c, d);
  a = _mm_unpacklo_epi64(ab0, cd0);
  b = _mm_unpackhi_epi64(ab0, cd0);
  c = _mm_unpacklo_epi64(ab1, cd1);
  d = _mm_unpackhi_epi64(ab1, cd1);
}

// Non-temporal stores for transfers much larger than the caches: the
// destination is written whole, so skipping its read-for-ownership saves a
// third of the memory traffic.
inline void store128(__m128i* p, __m128i v, bool stream) {
  if (stream && (reinterpret_cast<uintptr_t>(p) & 15) == 0)
    _mm_stream_si128(p, v);
  else
    _mm_storeu_si128(p, v);
}

inline void store64(void* p, __m128i v, bool stream) {
  if (stream && (reinterpret_cast<uintptr_t>(p) & 7) == 0)
    _mm_stream_si64(static_cast<long long*>(p), _mm_cvtsi128_si64(v));
  else
    _mm_storel_epi64(static_cast<__m128i*>(p), v);
}

void interleave_sse_32(uint32_t* packed, uint32_t* const* parts, int64_t S, int64_t lo, int64_t hi, bool to_packed,
                       bool stream) {
  for (int64_t i0 = lo; i0 < hi; i0 += kStep) {
    const int64_t i1 = std::min(hi, i0 + kStep);
    const int64_t vec_end = i0 + ((i1 - i0) & ~int64_t{3});
    for (int64_t i = i0; i < vec_end; i += 4) {
      for (int64_t s = 0; s < S; s += 4) {
        uint32_t *t0 = parts[s], *t1 = parts[s + 1], *t2 = parts[s + 2], *t3 = parts[s + 3];
        auto* r0 = reinterpret_cast<__m128i*>(packed + i * S + s);
        auto* r1 = reinterpret_cast<__m128i*>(packed + (i + 1) * S + s);
        auto* r2 = reinterpret_cast<__m128i*>(packed + (i + 2) * S + s);
        auto* r3 = reinterpret_cast<__m128i*>(packed + (i + 3) * S + s);
        if (to_packed) {
          __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(t0 + i));
          __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(t1 + i));
          __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(t2 + i));
          __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(t3 + i));
          transpose4x32(a, b, c, d);
          store128(r0, a, stream);
          store128(r1, b, stream);
          store128(r2, c, stream);
          store128(r3, d, stream);
        } else {
          __m128i a = _mm_loadu_si128(r0), b = _mm_loadu_si128(r1), c = _mm_loadu_si128(r2), d = _mm_loadu_si128(r3);
          transpose4x32(a, b, c, d);
          store128(reinterpret_cast<__m128i*>(t0 + i), a, stream);
          store128(reinterpret_cast<__m128i*>(t1 + i), b, stream);
          store128(reinterpret_cast<__m128i*>(t2 + i), c, stream);
          store128(reinterpret_cast<__m128i*>(t3 + i), d, stream);
        }
      }
    }
    if (vec_end < i1) interleave(packed, parts, S, vec_end, i1, to_packed);
  }
}

void interleave_sse_16(uint16_t* packed, uint16_t* const* parts, int64_t S, int64_t lo, int64_t hi, bool to_packed,
                       bool stream) {
  for (int64_t i0 = lo; i0 < hi; i0 += kStep) {
    const int64_t i1 = std::min(hi, i0 + kStep);
    const int64_t vec_end = i0 + ((i1 - i0) & ~int64_t{3});
    for (int64_t i = i0; i < vec_end; i += 4) {
      for (int64_t s = 0; s < S; s += 4) {
        uint16_t *t0 = parts[s], *t1 = parts[s + 1], *t2 = parts[s + 2], *t3 = parts[s + 3];
        // Rows i..i+3 of four 16-bit values each: 8 bytes per row.
        uint16_t* r0 = packed + i * S + s;
        uint16_t* r1 = packed + (i + 1) * S + s;
        uint16_t* r2 = packed + (i + 2) * S + s;
        uint16_t* r3 = packed + (i + 3) * S + s;
        if (to_packed) {
          const __m128i a = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(t0 + i));
          const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(t1 + i));
          const __m128i c = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(t2 + i));
          const __m128i d = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(t3 + i));
          const __m128i ab = _mm_unpacklo_epi16(a, b), cd = _mm_unpacklo_epi16(c, d);
          const __m128i rows01 = _mm_unpacklo_epi32(ab, cd), rows23 = _mm_unpackhi_epi32(ab, cd);
          store64(r0, rows01, stream);
          store64(r1, _mm_unpackhi_epi64(rows01, rows01), stream);
          store64(r2, rows23, stream);
          store64(r3, _mm_unpackhi_epi64(rows23, rows23), stream);
        } else {
          const __m128i a = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(r0));
          const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(r1));
          const __m128i c = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(r2));
          const __m128i d = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(r3));
          const __m128i ab = _mm_unpacklo_epi16(a, b), cd = _mm_unpacklo_epi16(c, d);
          const __m128i cols01 = _mm_unpacklo_epi32(ab, cd), cols23 = _mm_unpackhi_epi32(ab, cd);
          store64(t0 + i, cols01, stream);
          store64(t1 + i, _mm_unpackhi_epi64(cols01, cols01), stream);
          store64(t2 + i, cols23, stream);
          store64(t3 + i, _mm_unpackhi_epi64(cols23, cols23), stream);
        }
      }
    }
    if (vec_end < i1) interleave(packed, parts, S, vec_end, i1, to_packed);
  }
}
#endif

}  // namespace

void interleave_elements(std::byte* packed, std::byte* const* parts, int64_t S, int64_t lo, int64_t hi, size_t es,
                         bool to_packed, bool stream) {
#if defined(__SSE2__)
  if (S % 4 == 0 && es == 4) {
    interleave_sse_32(reinterpret_cast<uint32_t*>(packed), reinterpret_cast<uint32_t* const*>(parts), S, lo, hi,
                      to_packed, stream);
    if (stream) _mm_sfence();
    return;
  }
  if (S % 4 == 0 && es == 2) {
    interleave_sse_16(reinterpret_cast<uint16_t*>(packed), reinterpret_cast<uint16_t* const*>(parts), S, lo, hi,
                      to_packed, stream);
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
    default: internal_error("interleave_elements: unsupported element size");
  }
}

}  // namespace sw
