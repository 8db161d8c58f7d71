// Shared by every kernel: bindings, storage formats and operand indexing.
//
// Buffers are bound as 32-bit words, so one shader reads every storage
// format: f32, f16 and bf16 (two per word, element 2w in the low half), f64
// (two words, low first), and raw 8/16/32/64-bit elements for bit copies.
// T is the arithmetic type: float, or double when built with SW_F64 (that
// variant needs shaderFloat64 and is only created on devices that have it).
//
// An operand is FLAT (slot = offset + i), SCALAR (slot = offset: every
// stride 0) or GENERAL: its coalesced leaves are in the meta words at `desc`
// as [leaves, then extent, stride, magic, shift per leaf], first leaf
// fastest, and element i decodes over them. Modes are specialization
// constants, so a FLAT operand costs no decoding; GENERAL ones divide by a
// multiply (see divide()), since vector integer division is slow on CPUs.
// The elementwise kernels also take MODE_2D: two leaves in push constants.
#extension GL_GOOGLE_include_directive : enable

#ifdef SW_F64
#define T double
#else
#define T float
#endif

layout(std430, binding = 0) buffer Out { uint o_words[]; };
layout(std430, binding = 1) readonly buffer A { uint a_words[]; };
layout(std430, binding = 2) readonly buffer B { uint b_words[]; };
// The dispatch's meta words: a uniform buffer window (16 KiB, the smallest
// maxUniformBufferRange guaranteed), read at invocation-uniform indices.
layout(std140, binding = 3) uniform Meta { ivec4 meta4[1024]; };
int meta_at(uint i) { return meta4[i >> 2][i & 3u]; }

// Storage formats (FMT_*): value formats convert, raw ones copy bits.
const uint FMT_F32 = 0u;
const uint FMT_F16 = 1u;
const uint FMT_BF16 = 2u;
const uint FMT_F64 = 3u;
const uint FMT_RAW8 = 4u;
const uint FMT_RAW16 = 5u;
const uint FMT_RAW32 = 6u;
const uint FMT_RAW64 = 7u;

const uint MODE_FLAT = 0u;
const uint MODE_SCALAR = 1u;
const uint MODE_GENERAL = 2u;
const uint MODE_2D = 3u;  // two leaves, described in push constants (elementwise.glsl)

// r / e for r < 2^31 and e >= 2: (r * magic) >> (32 + shift), where the
// host computed magic = ceil(2^(31 + l) / e) and shift = l - 1 for
// l = ceil(log2(e)) (Granlund and Montgomery).
uint divide(uint r, uint magic, uint shift) {
  uint hi, lo;
  umulExtended(r, magic, hi, lo);
  return hi >> shift;
}

// The slot of element i of a GENERAL description at meta word `desc`, from
// slot `base`.
uint decode_slot(uint base, uint desc, uint i) {
  int slot = int(base);
  int leaves = meta_at(desc);
  uint r = i;
  for (int l = 0; l < leaves; ++l) {
    uint at = desc + 1u + 4u * uint(l);
    uint e = uint(meta_at(at));
    uint q = divide(r, uint(meta_at(at + 2u)), uint(meta_at(at + 3u)));
    slot += int(r - q * e) * meta_at(at + 1u);
    r = q;
  }
  return uint(slot);
}

uint operand_slot(uint mode, uint offset, uint desc, uint i) {
  if (mode == MODE_FLAT) return offset + i;
  if (mode == MODE_SCALAR) return offset;
  return decode_slot(offset, desc, i);
}

// Global invocation index of a 1-D problem dispatched as (x, y) workgroups.
uint linear_invocation() {
  return gl_GlobalInvocationID.x + gl_NumWorkGroups.x * gl_WorkGroupSize.x * gl_GlobalInvocationID.y;
}

float half_at(uint w, uint s) { return unpackHalf2x16((s & 1u) != 0u ? w >> 16 : w).x; }
float bf16_at(uint w, uint s) { return uintBitsToFloat((s & 1u) != 0u ? w & 0xffff0000u : w << 16); }

#ifdef SW_F64
#define LOAD_F64(words, s) packDouble2x32(uvec2(words[2u * (s)], words[2u * (s) + 1u]))
#else
#define LOAD_F64(words, s) T(0)
#endif

// The value of slot `s` in format `fmt` (a value format).
#define DEFINE_LOAD(name, words)                                   \
  T name(uint fmt, uint s) {                                       \
    if (fmt == FMT_F32) return T(uintBitsToFloat(words[s]));       \
    if (fmt == FMT_F16) return T(half_at(words[s >> 1], s));       \
    if (fmt == FMT_BF16) return T(bf16_at(words[s >> 1], s));     \
    return LOAD_F64(words, s);                                     \
  }
DEFINE_LOAD(load_a, a_words)
DEFINE_LOAD(load_b, b_words)

// Stores a T result into an f32 (or, for SW_F64, f64) output slot.
void store_out(uint s, T v) {
#ifdef SW_F64
  uvec2 w = unpackDouble2x32(v);
  o_words[2u * s] = w.x;
  o_words[2u * s + 1u] = w.y;
#else
  o_words[s] = floatBitsToUint(v);
#endif
}
