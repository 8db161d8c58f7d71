#version 450
// out = f(a) for a UnaryOp but copy; OP is its code, OP_<Name>, from the op
// table (runtime/ops/op_table.def). The f64 variant has relu, scale, neg,
// abs, sqrt and rsqrt (GLSL has no double exp or log).
#include "common.glsl"
#include "elementwise.glsl"
#include "math.glsl"
#include "op_table.def"

#define SW_OP_CODE(Name, what, vk) const uint OP_##Name = uint(vk);
SW_KERNEL_UNARY_OPS(SW_OP_CODE)

T apply(T a) {
  if (OP == OP_Relu) return a > T(0) ? a : T(0);
  if (OP == OP_Scale) return a * SCALAR;
  if (OP == OP_Neg) return -a;
  if (OP == OP_Abs) return abs(a);
  if (OP == OP_Sqrt) return sqrt(a);
  if (OP == OP_Rsqrt) return T(1) / sqrt(a);
#ifndef SW_F64
  if (OP == OP_Exp) return exp(a);
  if (OP == OP_Log) return log(a);
  if (OP == OP_Silu) return a / (1.0 + exp(-a));
  if (OP == OP_Gelu) return a * 0.5 * (1.0 + erf_f(a * 0.70710678118654752));
  if (OP == OP_Sigmoid) return sigmoid_f(a);
  if (OP == OP_Tanh) return tanh_f(a);
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
