#version 450
// Sums dense `a` over the reduced modes into dense `out` (extent 1 there).
// meta at meta_a: [rank, extent x16, reduced x16]; p0 = reduced elements.
#include "common.glsl"

void main() {
  uint o = gl_GlobalInvocationID.x + gl_NumWorkGroups.x * gl_WorkGroupSize.x * gl_GlobalInvocationID.y;
  if (o >= pc.n) return;
  uint m0 = pc.meta_a;
  int rank = meta[m0];
  uint r = o;
  uint base = 0u, stride = 1u;
  for (int m = 0; m < rank; ++m) {
    uint e = uint(meta[m0 + 1 + m]);
    if (meta[m0 + 17 + m] == 0) {
      base += (r % e) * stride;
      r /= e;
    }
    stride *= e;
  }
  float s = 0.0;
  for (uint q = 0u; q < pc.p0; ++q) {
    uint t = q;
    uint idx = base;
    uint st = 1u;
    for (int m = 0; m < rank; ++m) {
      uint e = uint(meta[m0 + 1 + m]);
      if (meta[m0 + 17 + m] != 0) {
        idx += (t % e) * st;
        t /= e;
      }
      st *= e;
    }
    s += a_data[idx];
  }
  o_data[pc.out_offset + o] = s;
}
