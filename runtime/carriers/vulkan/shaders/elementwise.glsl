// Push constants of the elementwise kernels (binary, unary): one invocation
// per output element, the output dense from out_offset.
layout(local_size_x = 256) in;

layout(constant_id = 0) const uint OP = 0u;
layout(constant_id = 1) const uint MODE_A = 0u;
layout(constant_id = 2) const uint MODE_B = 0u;
layout(constant_id = 3) const uint VEC4 = 0u;

// The same buffers as 16-byte words, for the VEC4 paths.
layout(std430, binding = 0) buffer Out4 { uvec4 o_vec4[]; };
layout(std430, binding = 1) readonly buffer A4 { uvec4 a_vec4[]; };
layout(std430, binding = 2) readonly buffer B4 { uvec4 b_vec4[]; };

layout(push_constant) uniform Push {
  uint meta_base;
  uint n;           // output elements
  uint a_offset;
  uint b_offset;
  uint out_offset;
  uint a_desc;      // meta word of a's leaves (GENERAL), relative to meta_base
  uint b_desc;
  uint scalar_lo;   // f32 bits, or the low word of f64 bits
  uint scalar_hi;
  // MODE_2D operands: two leaves (e0, s0), (e1, s1) in push constants:
  // [e0, s0, s1, magic, shift] of a, then of b.
  uint a2[5];
  uint b2[5];
} pc;

// Element i of a MODE_2D operand: one multiply-based division, no meta reads.
uint slot_2d(uint offset, uint e0, int s0, int s1, uint magic, uint shift, uint i) {
  uint q = divide(i, magic, shift);
  return uint(int(offset) + int(i - q * e0) * s0 + int(q) * s1);
}

uint a_slot(uint i) {
  if (MODE_A == MODE_2D) return slot_2d(pc.a_offset, pc.a2[0], int(pc.a2[1]), int(pc.a2[2]), pc.a2[3], pc.a2[4], i);
  return operand_slot(MODE_A, pc.a_offset, pc.meta_base + pc.a_desc, i);
}

uint b_slot(uint i) {
  if (MODE_B == MODE_2D) return slot_2d(pc.b_offset, pc.b2[0], int(pc.b2[1]), int(pc.b2[2]), pc.b2[3], pc.b2[4], i);
  return operand_slot(MODE_B, pc.b_offset, pc.meta_base + pc.b_desc, i);
}

#ifdef SW_F64
#define VALUE_FMT FMT_F64
#define SCALAR packDouble2x32(uvec2(pc.scalar_lo, pc.scalar_hi))
#else
#define VALUE_FMT FMT_F32
#define SCALAR uintBitsToFloat(pc.scalar_lo)
#endif
