#version 450
// out = a + b (OP 0), a * b (OP 1), b > 0 ? a : 0 (OP 2: the relu VJP, a the
// cotangent and b the input).
#include "common.glsl"
#include "elementwise.glsl"

T apply(T a, T b) {
  if (OP == 0u) return a + b;
  if (OP == 1u) return a * b;
  return b > T(0) ? a : T(0);
}

void main() {
  uint i = linear_invocation();
#ifndef SW_F64
  if (VEC4 != 0u) {
    // VEC4 x 4 elements per invocation with 16-byte loads: every operand
    // FLAT (or SCALAR) and every offset a multiple of 4.
    const uint per = 4u * VEC4;
    if (per * i >= pc.n) return;
    if (per * i + per <= pc.n) {
      for (uint v = 0u; v < VEC4; ++v) {
        uint q = VEC4 * i + v;
        vec4 a = MODE_A == MODE_SCALAR ? vec4(uintBitsToFloat(a_words[pc.a_offset])) : uintBitsToFloat(a_vec4[pc.a_offset / 4u + q]);
        vec4 b = MODE_B == MODE_SCALAR ? vec4(uintBitsToFloat(b_words[pc.b_offset])) : uintBitsToFloat(b_vec4[pc.b_offset / 4u + q]);
        o_vec4[pc.out_offset / 4u + q] = floatBitsToUint(vec4(apply(a.x, b.x), apply(a.y, b.y), apply(a.z, b.z), apply(a.w, b.w)));
      }
      return;
    }
    for (uint e = per * i; e < pc.n; ++e)
      store_out(pc.out_offset + e, apply(load_a(VALUE_FMT, operand_slot(MODE_A, pc.a_offset, 0u, e)),
                                         load_b(VALUE_FMT, operand_slot(MODE_B, pc.b_offset, 0u, e))));
    return;
  }
#endif
  if (i >= pc.n) return;
  T a = load_a(VALUE_FMT, operand_slot(MODE_A, pc.a_offset, pc.meta_base + pc.a_desc, i));
  T b = load_b(VALUE_FMT, operand_slot(MODE_B, pc.b_offset, pc.meta_base + pc.b_desc, i));
  store_out(pc.out_offset + i, apply(a, b));
}
