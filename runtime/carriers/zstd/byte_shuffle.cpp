#include "carriers/zstd/byte_shuffle.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

// Unshuffling sits on the decompression hot path, so the 2-, 4- and 8-byte
// cases are written as transposes of 16-byte vectors: log2(E) rounds of byte
// interleaves (punpck*bw on x86, zip1/zip2 on Arm) and, the other way,
// even/odd byte extractions. Generic vector extensions keep this portable.
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#define SW_BYTE_SHUFFLE_VECTORS 1
#endif
#if defined(SW_BYTE_SHUFFLE_VECTORS) && defined(__SSE2__)
#include <emmintrin.h>
#define SW_BYTE_SHUFFLE_STREAMING 1
#endif

namespace sw {
namespace {

using u8 = uint8_t;

template <size_t E>
void shuffle_scalar(const u8* __restrict in, size_t count, u8* __restrict planes, size_t stride) {
  for (size_t i = 0; i < count; ++i)
    for (size_t b = 0; b < E; ++b) planes[b * stride + i] = in[i * E + b];
}

template <size_t E>
void unshuffle_scalar(const u8* __restrict planes, size_t stride, size_t count, u8* __restrict out) {
  for (size_t i = 0; i < count; ++i)
    for (size_t b = 0; b < E; ++b) out[i * E + b] = planes[b * stride + i];
}

#ifdef SW_BYTE_SHUFFLE_VECTORS
typedef u8 Bytes16 __attribute__((vector_size(16)));

inline Bytes16 interleave_low(Bytes16 a, Bytes16 b) {
  return __builtin_shufflevector(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
}
inline Bytes16 interleave_high(Bytes16 a, Bytes16 b) {
  return __builtin_shufflevector(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
}
inline Bytes16 even_bytes(Bytes16 a, Bytes16 b) {
  return __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
}
inline Bytes16 odd_bytes(Bytes16 a, Bytes16 b) {
  return __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
}

// 16 elements per step. Each round splits every vector pair into its even
// and odd bytes; after log2(E) rounds vector b holds byte b of the elements.
template <size_t E>
void shuffle_vectors(const u8* __restrict in, size_t count, u8* __restrict planes, size_t stride) {
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    Bytes16 v[E];
    for (size_t m = 0; m < E; ++m) std::memcpy(&v[m], in + i * E + 16 * m, 16);
    for (size_t round = 1; round < E; round *= 2) {
      Bytes16 w[E];
      for (size_t m = 0; m < E / 2; ++m) {
        w[m] = even_bytes(v[2 * m], v[2 * m + 1]);
        w[m + E / 2] = odd_bytes(v[2 * m], v[2 * m + 1]);
      }
      for (size_t m = 0; m < E; ++m) v[m] = w[m];
    }
    for (size_t b = 0; b < E; ++b) std::memcpy(planes + b * stride + i, &v[b], 16);
  }
  shuffle_scalar<E>(in + i * E, count - i, planes + i, stride);
}

template <bool kStream>
inline void store16(u8* p, Bytes16 v) {
#ifdef SW_BYTE_SHUFFLE_STREAMING
  if constexpr (kStream) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), reinterpret_cast<__m128i>(v));
    return;
  }
#endif
  std::memcpy(p, &v, 16);
}

// The inverse rounds: interleaving vector m with vector m + E/2, log2(E)
// times, turns E planes of 16 bytes into 16 consecutive elements. Streaming
// stores need 16-byte aligned targets, so a scalar head of elements first
// brings `out` there (the caller checked that `out` is E-byte aligned).
template <size_t E, bool kStream = false>
void unshuffle_vectors(const u8* __restrict planes, size_t stride, size_t count, u8* __restrict out) {
  size_t i = 0;
  if constexpr (kStream) {
    const size_t misaligned = reinterpret_cast<uintptr_t>(out) & 15;
    i = std::min(count, misaligned ? (16 - misaligned) / E : 0);
    unshuffle_scalar<E>(planes, stride, i, out);
  }
  for (; i + 16 <= count; i += 16) {
    Bytes16 v[E];
    for (size_t b = 0; b < E; ++b) std::memcpy(&v[b], planes + b * stride + i, 16);
    for (size_t round = 1; round < E; round *= 2) {
      Bytes16 w[E];
      for (size_t m = 0; m < E / 2; ++m) {
        w[2 * m] = interleave_low(v[m], v[m + E / 2]);
        w[2 * m + 1] = interleave_high(v[m], v[m + E / 2]);
      }
      for (size_t m = 0; m < E; ++m) v[m] = w[m];
    }
    for (size_t m = 0; m < E; ++m) store16<kStream>(out + i * E + 16 * m, v[m]);
  }
#ifdef SW_BYTE_SHUFFLE_STREAMING
  // Streaming stores are weakly ordered: fence them before the caller
  // publishes the result to another thread.
  if constexpr (kStream) _mm_sfence();
#endif
  unshuffle_scalar<E>(planes + i, stride, count - i, out + i * E);
}
#else
template <size_t E>
void shuffle_vectors(const u8* in, size_t count, u8* planes, size_t stride) {
  shuffle_scalar<E>(in, count, planes, stride);
}
template <size_t E, bool kStream = false>
void unshuffle_vectors(const u8* planes, size_t stride, size_t count, u8* out) {
  unshuffle_scalar<E>(planes, stride, count, out);
}
#endif

}  // namespace

void shuffle_bytes(const std::byte* elements, size_t count, size_t element_size, std::byte* planes,
                   size_t plane_stride) {
  const auto* in = reinterpret_cast<const u8*>(elements);
  auto* out = reinterpret_cast<u8*>(planes);
  switch (element_size) {
    case 1: std::memcpy(out, in, count); return;
    case 2: return shuffle_vectors<2>(in, count, out, plane_stride);
    case 4: return shuffle_vectors<4>(in, count, out, plane_stride);
    case 8: return shuffle_vectors<8>(in, count, out, plane_stride);
    default:
      for (size_t i = 0; i < count; ++i)
        for (size_t b = 0; b < element_size; ++b) out[b * plane_stride + i] = in[i * element_size + b];
  }
}

void unshuffle_bytes(const std::byte* planes, size_t plane_stride, size_t count, size_t element_size,
                     std::byte* elements, bool streaming) {
  const auto* in = reinterpret_cast<const u8*>(planes);
  auto* out = reinterpret_cast<u8*>(elements);
  // A head of whole elements can only align an element-aligned target.
  streaming = streaming && element_size > 1 && reinterpret_cast<uintptr_t>(out) % element_size == 0;
  switch (element_size) {
    case 1: std::memcpy(out, in, count); return;
    case 2:
      return streaming ? unshuffle_vectors<2, true>(in, plane_stride, count, out)
                       : unshuffle_vectors<2>(in, plane_stride, count, out);
    case 4:
      return streaming ? unshuffle_vectors<4, true>(in, plane_stride, count, out)
                       : unshuffle_vectors<4>(in, plane_stride, count, out);
    case 8:
      return streaming ? unshuffle_vectors<8, true>(in, plane_stride, count, out)
                       : unshuffle_vectors<8>(in, plane_stride, count, out);
    default:
      for (size_t i = 0; i < count; ++i)
        for (size_t b = 0; b < element_size; ++b) out[i * element_size + b] = in[b * plane_stride + i];
  }
}

}  // namespace sw
