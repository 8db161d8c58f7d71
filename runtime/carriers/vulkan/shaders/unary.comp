#version 450
// out = a > 0 ? a : 0 (OP 0: relu), a * scalar (OP 1).
#include "common.glsl"
#include "elementwise.glsl"

T apply(T a) { return OP == 0u ? (a > T(0) ? a : T(0)) : a * SCALAR; }

void main() {
  uint i = linear_invocation();
#ifndef SW_F64
  if (VEC4 != 0u) {
    // VEC4 x 4 elements per invocation with 16-byte loads: a FLAT and both
    // offsets multiples of 4.
    const uint per = 4u * VEC4;
    if (per * i >= pc.n) return;
    if (per * i + per <= pc.n) {
      for (uint v = 0u; v < VEC4; ++v) {
        uint q = VEC4 * i + v;
        vec4 a = uintBitsToFloat(a_vec4[pc.a_offset / 4u + q]);
        o_vec4[pc.out_offset / 4u + q] = floatBitsToUint(vec4(apply(a.x), apply(a.y), apply(a.z), apply(a.w)));
      }
      return;
    }
    for (uint e = per * i; e < pc.n; ++e) store_out(pc.out_offset + e, apply(load_a(VALUE_FMT, pc.a_offset + e)));
    return;
  }
#endif
  if (i >= pc.n) return;
  store_out(pc.out_offset + i, apply(load_a(VALUE_FMT, operand_slot(MODE_A, pc.a_offset, pc.meta_base + pc.a_desc, i))));
}
