#version 450
// Copies a (any layout) into out, converting between value formats
// (FMT_IN != FMT_OUT) or copying bits (raw formats, or equal ones).
// A dense out (MODE_OUT FLAT) takes one invocation per output word: an
// element of 8 bytes, or the one to four elements sharing a 32-bit word, so
// no two invocations write one word. A strided out (MODE_OUT GENERAL, an
// injective layout: a tile's place in a compact tensor) takes one invocation
// per element; elements narrower than a word are merged into it with atomic
// and/or on their own bits, so neighbours written by other invocations keep
// theirs. Slots outside the output keep their bits.
#include "common.glsl"

layout(local_size_x = 256) in;

layout(constant_id = 0) const uint FMT_IN = 0u;
layout(constant_id = 1) const uint FMT_OUT = 0u;
layout(constant_id = 2) const uint MODE_A = 0u;
layout(constant_id = 3) const uint MODE_OUT = 0u;  // MODE_FLAT or MODE_GENERAL

layout(push_constant) uniform Push {
  uint meta_base;
  uint n;           // output elements
  uint a_offset;
  uint out_offset;
  uint a_desc;
  uint words;       // invocations: output words (or elements, for 8 bytes), or elements (GENERAL out)
  uint out_desc;    // meta word of out's leaves (GENERAL out)
} pc;

uint bytes_of(uint fmt) {
  if (fmt == FMT_F32 || fmt == FMT_RAW32) return 4u;
  if (fmt == FMT_F16 || fmt == FMT_BF16 || fmt == FMT_RAW16) return 2u;
  if (fmt == FMT_RAW8) return 1u;
  return 8u;
}

// Raw bits of slot s (low word first for 8-byte formats).
uvec2 bits_at(uint s) {
  uint es = bytes_of(FMT_IN);
  if (es == 8u) return uvec2(a_words[2u * s], a_words[2u * s + 1u]);
  if (es == 4u) return uvec2(a_words[s], 0u);
  if (es == 2u) return uvec2((a_words[s >> 1] >> (16u * (s & 1u))) & 0xffffu, 0u);
  return uvec2((a_words[s >> 2] >> (8u * (s & 3u))) & 0xffu, 0u);
}

T value_of(uvec2 b) {
  if (FMT_IN == FMT_F32) return T(uintBitsToFloat(b.x));
  if (FMT_IN == FMT_F16) return T(unpackHalf2x16(b.x).x);
  if (FMT_IN == FMT_BF16) return T(uintBitsToFloat(b.x << 16));
#ifdef SW_F64
  return packDouble2x32(b);
#else
  return T(0);
#endif
}

// Round to nearest even, quiet NaNs: as the CPU carrier's f32_to_bf16.
uint bf16_bits(float f) {
  uint u = floatBitsToUint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
  u += 0x7fffu + ((u >> 16) & 1u);
  return u >> 16;
}

// Round to nearest even, NaN 0x7e00: as the CPU carrier's f32_to_f16.
uint f16_bits(float f) {
  uint x = floatBitsToUint(f);
  uint sign = (x >> 16) & 0x8000u;
  uint ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (ax >= 0x477ff000u) return sign | 0x7c00u;
  if (ax < 0x38800000u) {
    if (ax < 0x33000000u) return sign;
    uint e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
    uint shift = 126u - e;
    uint r = m >> shift;
    uint rem = m & ((1u << shift) - 1u), half_ = 1u << (shift - 1u);
    if (rem > half_ || (rem == half_ && (r & 1u) != 0u)) ++r;
    return sign | r;
  }
  uint r = ax - 0x38000000u;
  r += 0xfffu + ((r >> 13) & 1u);
  return sign | (r >> 13);
}

uvec2 bits_of(T v) {
  // Narrow formats round through f32, as the CPU carrier does.
  if (FMT_OUT == FMT_F32) return uvec2(floatBitsToUint(float(v)), 0u);
  if (FMT_OUT == FMT_F16) return uvec2(f16_bits(float(v)), 0u);
  if (FMT_OUT == FMT_BF16) return uvec2(bf16_bits(float(v)), 0u);
#ifdef SW_F64
  return unpackDouble2x32(v);
#else
  return uvec2(0u);
#endif
}

uvec2 converted(uint i) {
  uvec2 b = bits_at(operand_slot(MODE_A, pc.a_offset, pc.meta_base + pc.a_desc, i));
  if (FMT_IN == FMT_OUT || FMT_IN >= FMT_RAW8) return b;
  return bits_of(value_of(b));
}

void main() {
  uint w = linear_invocation();
  if (w >= pc.words) return;
  uint es = bytes_of(FMT_OUT);
  if (MODE_OUT == MODE_GENERAL) {
    uint s = decode_slot(pc.out_offset, pc.meta_base + pc.out_desc, w);
    uvec2 b = converted(w);
    if (es == 8u) {
      o_words[2u * s] = b.x;
      o_words[2u * s + 1u] = b.y;
    } else if (es == 4u) {
      o_words[s] = b.x;
    } else {
      uint per = 4u / es, shift = 8u * es * (s % per), mask = ((1u << (8u * es)) - 1u) << shift;
      atomicAnd(o_words[s / per], ~mask);
      atomicOr(o_words[s / per], (b.x << shift) & mask);
    }
    return;
  }
  if (es == 8u) {
    uvec2 b = converted(w);
    o_words[2u * (pc.out_offset + w)] = b.x;
    o_words[2u * (pc.out_offset + w) + 1u] = b.y;
    return;
  }
  uint per = 4u / es;
  uint word = pc.out_offset / per + w;
  uint first = word * per;
  bool whole = first >= pc.out_offset && first + per <= pc.out_offset + pc.n;
  uint r = whole ? 0u : o_words[word];
  uint mask = es == 4u ? 0xffffffffu : (1u << (8u * es)) - 1u;
  for (uint k = 0u; k < per; ++k) {
    uint s = first + k;
    if (s < pc.out_offset || s >= pc.out_offset + pc.n) continue;
    uint shift = 8u * es * k;
    r = (r & ~(mask << shift)) | ((converted(s - pc.out_offset).x & mask) << shift);
  }
  o_words[word] = r;
}
