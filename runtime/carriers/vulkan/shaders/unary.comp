#version 450
// out = a > 0 ? a : 0 (OP 0: relu), a * scalar (OP 1).
#include "common.glsl"
#include "elementwise.glsl"

T apply(T a) { return OP == 0u ? (a > T(0) ? a : T(0)) : a * SCALAR; }

void main() {
  uint i = linear_invocation();
#ifndef SW_F64
  if (VEC4 != 0u) {
    // VEC4 x 4 elements per invocation, 16-byte stores (and loads, for a
    // FLAT operand; offsets multiples of 4).
    const uint per = 4u * VEC4;
    if (per * i >= pc.n) return;
    if (per * i + per <= pc.n) {
      for (uint v = 0u; v < VEC4; ++v) {
        uint q = VEC4 * i + v, e = 4u * q;
        vec4 a = MODE_A == MODE_FLAT ? uintBitsToFloat(a_vec4[pc.a_offset / 4u + q])
                                     : vec4(load_a(VALUE_FMT, a_slot(e)), load_a(VALUE_FMT, a_slot(e + 1u)),
                                            load_a(VALUE_FMT, a_slot(e + 2u)), load_a(VALUE_FMT, a_slot(e + 3u)));
        o_vec4[pc.out_offset / 4u + q] = floatBitsToUint(vec4(apply(a.x), apply(a.y), apply(a.z), apply(a.w)));
      }
      return;
    }
    for (uint e = per * i; e < pc.n; ++e) store_out(pc.out_offset + e, apply(load_a(VALUE_FMT, a_slot(e))));
    return;
  }
#endif
  if (i >= pc.n) return;
  store_out(pc.out_offset + i, apply(load_a(VALUE_FMT, a_slot(i))));
}
