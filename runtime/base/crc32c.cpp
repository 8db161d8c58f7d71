#include "base/crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace sw {

namespace {

constexpr uint32_t kPolynomial = 0x82F63B78u;

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPolynomial : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kTable = make_table();

uint32_t crc32c_table(uint32_t crc, const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) crc = kTable[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42_one(uint32_t crc, const unsigned char* p, size_t n) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, sizeof word);
    c = _mm_crc32_u64(c, word);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

// Three streams at once: the crc32 instruction has a latency of three
// cycles and a throughput of one per cycle, so a single chain of them runs
// at a third of the instruction's rate. A stripe of 3 * kStream bytes is
// cut into three runs, each folded into its own register (the first
// starting from the running value, the others from 0); the CRC register is
// linear in its state, so the value over the stripe is
//   shift(shift(a) ^ b) ^ c
// where shift() advances a register over kStream zero bytes, a linear map of
// 32 bits applied by four byte tables.
constexpr size_t kStream = 4096;

struct ZeroShift {
  uint32_t table[4][256];
};

__attribute__((target("sse4.2"))) uint32_t crc32c_sse42_zeros(uint32_t crc, size_t n) {
  uint64_t c = crc;
  for (size_t i = 0; i < n / 8; ++i) c = _mm_crc32_u64(c, 0);
  return static_cast<uint32_t>(c);
}

const ZeroShift& zero_shift() {
  static const ZeroShift shift = [] {
    ZeroShift z{};
    uint32_t basis[32];
    for (int bit = 0; bit < 32; ++bit) basis[bit] = crc32c_sse42_zeros(uint32_t{1} << bit, kStream);
    for (int byte = 0; byte < 4; ++byte)
      for (uint32_t v = 0; v < 256; ++v) {
        uint32_t out = 0;
        for (int bit = 0; bit < 8; ++bit)
          if (v & (1u << bit)) out ^= basis[8 * byte + bit];
        z.table[byte][v] = out;
      }
    return z;
  }();
  return shift;
}

inline uint32_t shift_stream(const ZeroShift& z, uint32_t c) {
  return z.table[0][c & 0xFF] ^ z.table[1][(c >> 8) & 0xFF] ^ z.table[2][(c >> 16) & 0xFF] ^ z.table[3][c >> 24];
}

// The three streams, each word stored to `dst` as it is folded in (with
// Copy), or not.
template <bool Copy>
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42_streams(uint32_t crc, const unsigned char*& p,
                                                                unsigned char*& dst, size_t& n) {
  const ZeroShift& z = zero_shift();
  uint32_t c32 = crc;
  while (n >= 3 * kStream) {
    uint64_t a = c32, b = 0, c = 0;
    for (size_t i = 0; i < kStream; i += 8) {
      uint64_t wa, wb, wc;
      std::memcpy(&wa, p + i, 8);
      std::memcpy(&wb, p + kStream + i, 8);
      std::memcpy(&wc, p + 2 * kStream + i, 8);
      a = _mm_crc32_u64(a, wa);
      b = _mm_crc32_u64(b, wb);
      c = _mm_crc32_u64(c, wc);
      if constexpr (Copy) {
        std::memcpy(dst + i, &wa, 8);
        std::memcpy(dst + kStream + i, &wb, 8);
        std::memcpy(dst + 2 * kStream + i, &wc, 8);
      }
    }
    c32 = shift_stream(z, shift_stream(z, static_cast<uint32_t>(a)) ^ static_cast<uint32_t>(b)) ^
          static_cast<uint32_t>(c);
    p += 3 * kStream;
    if constexpr (Copy) dst += 3 * kStream;
    n -= 3 * kStream;
  }
  return c32;
}

__attribute__((target("sse4.2"))) uint32_t crc32c_sse42_copy(uint32_t crc, unsigned char* dst,
                                                             const unsigned char* p, size_t n) {
  if (n >= 3 * kStream) crc = crc32c_sse42_streams<true>(crc, p, dst, n);  // advances p, dst, n
  std::memcpy(dst, p, n);
  return crc32c_sse42_one(crc, p, n);
}

__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(uint32_t crc, const unsigned char* p, size_t n) {
  unsigned char* none = nullptr;
  if (n >= 3 * kStream) crc = crc32c_sse42_streams<false>(crc, p, none, n);  // advances p, n
  return crc32c_sse42_one(crc, p, n);
}

bool have_sse42() {
  static const bool have = __builtin_cpu_supports("sse4.2");
  return have;
}
#endif

}  // namespace

uint32_t crc32c_copy(uint32_t crc, void* dst, const void* src, size_t length) {
  const auto* p = static_cast<const unsigned char*>(src);
  auto* d = static_cast<unsigned char*>(dst);
#if defined(__x86_64__)
  if (have_sse42()) return ~crc32c_sse42_copy(~crc, d, p, length);
#endif
  std::memcpy(d, p, length);
  return ~crc32c_table(~crc, p, length);
}

uint32_t crc32c(uint32_t crc, const void* data, size_t length) {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
#if defined(__x86_64__)
  if (have_sse42()) return ~crc32c_sse42(crc, p, length);
#endif
  return ~crc32c_table(crc, p, length);
}

}  // namespace sw
