#version 450
// out = a OP b, elementwise, for a BinaryOp; OP is its code, OP_<Name>,
// from the op table (runtime/ops/op_table.def, which describes each op):
// the arithmetic ops, the relu VJP (b > 0 ? a : 0), the comparisons OP_Eq to
// OP_Ge (out bool, four per word), the unary VJPs with a the cotangent and b
// the input x or output y, and OP_WHERE, a masked copy (out = a where b, a
// bool, is true; out keeps its value elsewhere).
// The f64 variant has no pow, silu or gelu VJP (GLSL has no double exp).
#include "common.glsl"
#include "elementwise.glsl"
#include "math.glsl"
#include "op_table.def"

#define SW_OP_CODE(Name, what, vk) const uint OP_##Name = uint(vk);
SW_KERNEL_BINARY_OPS(SW_OP_CODE)
const uint OP_WHERE = uint(SW_VULKAN_WHERE_CODE);

bool compare(T a, T b) {
  if (OP == OP_Eq) return a == b;
  if (OP == OP_Ne) return !(a == b);
  if (OP == OP_Lt) return a < b;
  if (OP == OP_Le) return a <= b;
  if (OP == OP_Gt) return a > b;
  return a >= b;
}

T apply(T a, T b) {
  if (OP == OP_Add) return a + b;
  if (OP == OP_Mul) return a * b;
  if (OP == OP_ReluGrad) return b > T(0) ? a : T(0);
  if (OP == OP_Sub) return a - b;
  if (OP == OP_Div) return a / b;
  if (OP == OP_Maximum) return (a > b || isnan(a)) ? a : b;
  if (OP == OP_Minimum) return (a < b || isnan(a)) ? a : b;
  if (OP == OP_AbsGrad) return b > T(0) ? a : (b < T(0) ? -a : T(0));
  if (OP == OP_SigmoidGrad) return a * (b * (T(1) - b));
  if (OP == OP_TanhGrad) return a * (T(1) - b * b);
  if (OP == OP_SqrtGrad) return a / (T(2) * b);
  if (OP == OP_RsqrtGrad) return T(-0.5) * a * (b * b * b);
#ifndef SW_F64
  if (OP == OP_Pow) return pow_f(a, b);
  if (OP == OP_SiluGrad) {
    float s = sigmoid_f(b);
    return a * (s * (1.0 + b * (1.0 - s)));
  }
  if (OP == OP_GeluGrad) {
    float cdf = 0.5 * (1.0 + erf_f(b * 0.70710678118654752));
    float pdf = exp(-0.5 * b * b) * 0.3989422804014327;
    return a * (cdf + b * pdf);
  }
#endif
  return T(0);
}

uint bool_at(uint s) { return (b_words[s >> 2] >> (8u * (s & 3u))) & 0xffu; }

void main() {
  uint i = linear_invocation();
  if (OP >= OP_Eq && OP <= OP_Ge) {
    // One invocation per output word of four bools; a word the output only
    // partly covers keeps its other bytes.
    uint word = pc.out_offset / 4u + i, first = 4u * word, end = pc.out_offset + pc.n;
    if (first >= end) return;
    uint r = first >= pc.out_offset && first + 4u <= end ? 0u : o_words[word];
    for (uint k = 0u; k < 4u; ++k) {
      uint s = first + k;
      if (s < pc.out_offset || s >= end) continue;
      uint e = s - pc.out_offset;
      uint v = compare(load_a(VALUE_FMT, a_slot(e)), load_b(VALUE_FMT, b_slot(e))) ? 1u : 0u;
      r = (r & ~(0xffu << (8u * k))) | (v << (8u * k));
    }
    o_words[word] = r;
    return;
  }
  if (OP == OP_WHERE) {
    if (i >= pc.n) return;
    if (bool_at(b_slot(i)) != 0u) store_out(pc.out_offset + i, load_a(VALUE_FMT, a_slot(i)));
    return;
  }
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
