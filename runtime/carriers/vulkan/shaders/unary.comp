#version 450
// out = f(a). OP (UnaryOp's order after copy): 0 relu, 1 a * scalar, 2 -a,
// 3 |a|, 4 exp, 5 log, 6 sqrt, 7 1 / sqrt, 8 silu, 9 gelu (erf form),
// 10 sigmoid, 11 tanh. The f64 variant has 0-3, 6 and 7 (GLSL has no
// double exp or log).
#include "common.glsl"
#include "elementwise.glsl"
#include "math.glsl"

T apply(T a) {
  if (OP == 0u) return a > T(0) ? a : T(0);
  if (OP == 1u) return a * SCALAR;
  if (OP == 2u) return -a;
  if (OP == 3u) return abs(a);
  if (OP == 6u) return sqrt(a);
  if (OP == 7u) return T(1) / sqrt(a);
#ifndef SW_F64
  if (OP == 4u) return exp(a);
  if (OP == 5u) return log(a);
  if (OP == 8u) return a / (1.0 + exp(-a));
  if (OP == 9u) return a * 0.5 * (1.0 + erf_f(a * 0.70710678118654752));
  if (OP == 10u) return sigmoid_f(a);
  if (OP == 11u) return tanh_f(a);
#endif
  return T(0);
}

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
