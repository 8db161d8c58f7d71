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
} pc;

#ifdef SW_F64
#define VALUE_FMT FMT_F64
#define SCALAR packDouble2x32(uvec2(pc.scalar_lo, pc.scalar_hi))
#else
#define VALUE_FMT FMT_F32
#define SCALAR uintBitsToFloat(pc.scalar_lo)
#endif
