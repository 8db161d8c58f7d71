#version 450
// Reduces a over its reduced slots into dense out: ROP is the ReduceOp's
// code from the op table (runtime/ops/op_table.def): OP_Sum sums, OP_Max
// takes the max, OP_Min the min (NaN if any is; VEC4 only for sums). Output o starts at slot
// a_offset + kept(o): kept_stride * o (KEPT_MODE FLAT) or o decoded over the
// kept leaves at kept_desc (GENERAL; meta words as in common.glsl). Its reduced slots are
// inner(j) + outer(r): j < inner_extent at stride inner_stride (no division)
// and r over the outer reduced leaves at outer_desc (OUTER 1), or r = 0.
//
// SPLIT 0: one invocation sums one output.
// SPLIT 1: workgroup w sums part w % groups of output w / groups, its 256
//          invocations reading neighbouring slots, then adding in shared
//          memory; with groups > 1 `out` receives the parts (o * groups + g),
//          which a second SPLIT 0 pass adds up.
#include "common.glsl"
#include "op_table.def"

#define SW_OP_CODE(Name, what, vk) const uint OP_##Name = uint(vk);
SW_KERNEL_REDUCE_OPS(SW_OP_CODE)

layout(local_size_x = 256) in;

layout(constant_id = 0) const uint SPLIT = 0u;
layout(constant_id = 1) const uint KEPT_MODE = 0u;
layout(constant_id = 2) const uint OUTER = 0u;
// The reduced slots of each output are one dense run (OUTER 0, inner stride
// 1) starting at a multiple of 4: 16-byte loads.
layout(constant_id = 3) const uint VEC4 = 0u;
layout(constant_id = 4) const uint ROP = 0u;

T identity() {
  if (ROP == OP_Sum) return T(0);
  float inf = uintBitsToFloat(0x7f800000u);
  return T(ROP == OP_Max ? -inf : inf);
}

T combine(T acc, T x) {
  if (ROP == OP_Sum) return acc + x;
  if (ROP == OP_Max) return (x > acc || isnan(x)) ? x : acc;
  return (x < acc || isnan(x)) ? x : acc;
}

layout(std430, binding = 1) readonly buffer A4 { uvec4 a_vec4[]; };

layout(push_constant) uniform Push {
  uint meta_base;
  uint n_out;
  uint a_offset;
  uint out_offset;
  uint kept_desc;
  uint outer_desc;
  uint inner_extent;
  int inner_stride;
  uint reduced;       // inner_extent * outer count
  uint groups;
  int kept_stride;
  uint inner_magic;   // divide() by inner_extent
  uint inner_shift;
} pc;

#ifdef SW_F64
#define VALUE_FMT FMT_F64
#else
#define VALUE_FMT FMT_F32
#endif

uint kept_slot(uint o) {
  if (KEPT_MODE == MODE_FLAT) return uint(int(pc.a_offset) + int(o) * pc.kept_stride);
  return decode_slot(pc.a_offset, pc.meta_base + pc.kept_desc, o);
}

uint outer_slot(uint r) {
  if (OUTER == 0u) return 0u;
  return decode_slot(0u, pc.meta_base + pc.outer_desc, r);
}

shared T partial[256];

void main() {
  if (SPLIT == 0u) {
    uint o = linear_invocation();
    if (o >= pc.n_out) return;
    uint base = kept_slot(o);
    uint outer = pc.reduced / max(pc.inner_extent, 1u);
    T s = identity();
#ifndef SW_F64
    if (VEC4 != 0u) {
      vec4 s4 = vec4(0);
      uint v0 = base / 4u, vend = (base + pc.reduced) / 4u;
      for (uint v = v0; v < vend; ++v) s4 += uintBitsToFloat(a_vec4[v]);
      s = (s4.x + s4.y) + (s4.z + s4.w);
      for (uint q = 4u * vend; q < base + pc.reduced; ++q) s += load_a(VALUE_FMT, q);
    } else
#endif
    for (uint r = 0u; r < outer; ++r) {
      int at = int(base + outer_slot(r));
      for (uint j = 0u; j < pc.inner_extent; ++j) s = combine(s, load_a(VALUE_FMT, uint(at + int(j) * pc.inner_stride)));
    }
    store_out(pc.out_offset + o, s);
    return;
  }
  uint w = gl_WorkGroupID.x + gl_NumWorkGroups.x * gl_WorkGroupID.y;
  uint o = w / pc.groups, g = w % pc.groups;
  if (o >= pc.n_out) return;  // uniform over the workgroup
  uint base = kept_slot(o);
  uint chunk = (pc.reduced + pc.groups - 1u) / pc.groups;
  if (VEC4 != 0u) chunk = (chunk + 3u) & ~3u;
  uint start = g * chunk, end = min(start + chunk, pc.reduced);
  uint t = gl_LocalInvocationID.x;
  T s = identity();
#ifndef SW_F64
  if (VEC4 != 0u) {
    // start and end are multiples of 4 except the last part's end.
    uint v0 = (base + start) / 4u, vend = (base + end) / 4u;
    vec4 s4 = vec4(0);
    for (uint v = v0 + t; v < vend; v += 256u) s4 += uintBitsToFloat(a_vec4[v]);
    s = (s4.x + s4.y) + (s4.z + s4.w);
    for (uint q = 4u * vend - base + t; q < end; q += 256u) s += load_a(VALUE_FMT, base + q);
  } else
#endif
  for (uint q = start + t; q < end; q += 256u) {
    uint r = OUTER == 0u ? 0u : divide(q, pc.inner_magic, pc.inner_shift);
    uint j = q - r * pc.inner_extent;
    s = combine(s, load_a(VALUE_FMT, uint(int(base + outer_slot(r)) + int(j) * pc.inner_stride)));
  }
  // 256 partial sums: 32 invocations add eight each, then one adds those.
  partial[t] = s;
  barrier();
  if (t < 32u) {
    T p = identity();
    for (uint k = 0u; k < 8u; ++k) p = combine(p, partial[8u * t + k]);
    partial[8u * t] = p;
  }
  barrier();
  if (t == 0u) {
    T p = identity();
    for (uint k = 0u; k < 32u; ++k) p = combine(p, partial[8u * k]);
    store_out(pc.out_offset + o * pc.groups + g, p);
  }
}
