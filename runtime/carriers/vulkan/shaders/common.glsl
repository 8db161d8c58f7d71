// Shared by every kernel: bindings, push constants and strided operand
// indexing. An operand is described in the meta buffer at `base` as
// [offset, leaves, extent x16, stride x16]; element `i` (first mode fastest)
// decodes over the leaves.
#extension GL_GOOGLE_include_directive : enable
layout(local_size_x = 256) in;

layout(std430, binding = 0) buffer Out { float o_data[]; };
layout(std430, binding = 1) readonly buffer A { float a_data[]; };
layout(std430, binding = 2) readonly buffer B { float b_data[]; };
layout(std430, binding = 3) readonly buffer Meta { int meta[]; };

layout(push_constant) uniform Push {
  uint n;          // output elements
  uint op;         // kernel-specific selector
  float scalar;
  uint meta_a;     // meta base of operand a
  uint meta_b;     // meta base of operand b
  uint out_offset; // output's first slot
  uint p0;
  uint p1;
} pc;

uint operand_index(uint base, uint i) {
  int idx = meta[base];
  int leaves = meta[base + 1];
  uint r = i;
  for (int l = 0; l < leaves; ++l) {
    uint e = uint(meta[base + 2 + l]);
    idx += int(r % e) * meta[base + 18 + l];
    r /= e;
  }
  return uint(idx);
}
