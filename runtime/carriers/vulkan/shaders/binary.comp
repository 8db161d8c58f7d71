#version 450
// out = a OP b, elementwise. OP (BinaryOp's order): 0 a + b, 1 a * b, 2 the
// relu VJP (b > 0 ? a : 0), 3 a - b, 4 a / b, 5 a ** b, 6 max, 7 min (NaN if
// either is), 8-13 the comparisons eq ne lt le gt ge (out bool, four per
// word), 14-20 unary VJPs with a the cotangent and b the input x or output y
// (abs: a * sign(x); silu, gelu: a * f'(x); sigmoid: a * y * (1 - y); tanh:
// a * (1 - y^2); sqrt: a / (2y); rsqrt: -a y^3 / 2), 21 a masked copy
// (out = a where b, a bool, is true; out keeps its value elsewhere).
// The f64 variant has no pow, silu or gelu VJP (GLSL has no double exp).
#include "common.glsl"
#include "elementwise.glsl"
#include "math.glsl"

const uint OP_EQ = 8u, OP_GE = 13u, OP_WHERE = 21u;

bool compare(T a, T b) {
  if (OP == 8u) return a == b;
  if (OP == 9u) return !(a == b);
  if (OP == 10u) return a < b;
  if (OP == 11u) return a <= b;
  if (OP == 12u) return a > b;
  return a >= b;
}

T apply(T a, T b) {
  if (OP == 0u) return a + b;
  if (OP == 1u) return a * b;
  if (OP == 2u) return b > T(0) ? a : T(0);
  if (OP == 3u) return a - b;
  if (OP == 4u) return a / b;
  if (OP == 6u) return (a > b || isnan(a)) ? a : b;
  if (OP == 7u) return (a < b || isnan(a)) ? a : b;
  if (OP == 14u) return b > T(0) ? a : (b < T(0) ? -a : T(0));
  if (OP == 17u) return a * (b * (T(1) - b));
  if (OP == 18u) return a * (T(1) - b * b);
  if (OP == 19u) return a / (T(2) * b);
  if (OP == 20u) return T(-0.5) * a * (b * b * b);
#ifndef SW_F64
  if (OP == 5u) return pow_f(a, b);
  if (OP == 15u) {
    float s = sigmoid_f(b);
    return a * (s * (1.0 + b * (1.0 - s)));
  }
  if (OP == 16u) {
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
  if (OP >= OP_EQ && OP <= OP_GE) {
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
