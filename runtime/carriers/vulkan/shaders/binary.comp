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
    // VEC4 x 4 elements per invocation, 16-byte loads and stores for the
    // output and FLAT operands (offsets multiples of 4); other operands are
    // read element by element.
    const uint per = 4u * VEC4;
    if (per * i >= pc.n) return;
    if (per * i + per <= pc.n) {
      for (uint v = 0u; v < VEC4; ++v) {
        uint q = VEC4 * i + v, e = 4u * q;
        vec4 a, b;
        if (MODE_A == MODE_FLAT) a = uintBitsToFloat(a_vec4[pc.a_offset / 4u + q]);
        else if (MODE_A == MODE_SCALAR) a = vec4(uintBitsToFloat(a_words[pc.a_offset]));
        else a = vec4(load_a(VALUE_FMT, a_slot(e)), load_a(VALUE_FMT, a_slot(e + 1u)),
                      load_a(VALUE_FMT, a_slot(e + 2u)), load_a(VALUE_FMT, a_slot(e + 3u)));
        if (MODE_B == MODE_FLAT) b = uintBitsToFloat(b_vec4[pc.b_offset / 4u + q]);
        else if (MODE_B == MODE_SCALAR) b = vec4(uintBitsToFloat(b_words[pc.b_offset]));
        else b = vec4(load_b(VALUE_FMT, b_slot(e)), load_b(VALUE_FMT, b_slot(e + 1u)),
                      load_b(VALUE_FMT, b_slot(e + 2u)), load_b(VALUE_FMT, b_slot(e + 3u)));
        o_vec4[pc.out_offset / 4u + q] = floatBitsToUint(vec4(apply(a.x, b.x), apply(a.y, b.y), apply(a.z, b.z), apply(a.w, b.w)));
      }
      return;
    }
    for (uint e = per * i; e < pc.n; ++e)
      store_out(pc.out_offset + e, apply(load_a(VALUE_FMT, a_slot(e)), load_b(VALUE_FMT, b_slot(e))));
    return;
  }
#endif
  if (i >= pc.n) return;
  T a = load_a(VALUE_FMT, a_slot(i));
  T b = load_b(VALUE_FMT, b_slot(i));
  store_out(pc.out_offset + i, apply(a, b));
}
