#version 450
// out = max(a, 0) (op 0), a * scalar (op 1), a (op 2: copy).
#include "common.glsl"

void main() {
  uint i = gl_GlobalInvocationID.x + gl_NumWorkGroups.x * gl_WorkGroupSize.x * gl_GlobalInvocationID.y;
  if (i >= pc.n) return;
  float a = a_data[operand_index(pc.meta_a, i)];
  float r;
  if (pc.op == 0u) r = max(a, 0.0);
  else if (pc.op == 1u) r = a * pc.scalar;
  else r = a;
  o_data[pc.out_offset + i] = r;
}
