#version 450
// out = a + b (op 0), a * b (op 1), a * (b > 0) (op 2: the relu VJP).
#include "common.glsl"

void main() {
  uint i = gl_GlobalInvocationID.x + gl_NumWorkGroups.x * gl_WorkGroupSize.x * gl_GlobalInvocationID.y;
  if (i >= pc.n) return;
  float a = a_data[operand_index(pc.meta_a, i)];
  float b = b_data[operand_index(pc.meta_b, i)];
  float r;
  if (pc.op == 0u) r = a + b;
  else if (pc.op == 1u) r = a * b;
  else r = b > 0.0 ? a : 0.0;
  o_data[pc.out_offset + i] = r;
}
