#version 450
// Dense (batch, M, K) @ (batch, K, N) -> (batch, M, N), first mode fastest
// with the flattened batch fastest. p0 = M, p1 = K, meta[meta_b] = batch.
#include "common.glsl"

void main() {
  uint o = gl_GlobalInvocationID.x + gl_NumWorkGroups.x * gl_WorkGroupSize.x * gl_GlobalInvocationID.y;
  if (o >= pc.n) return;
  uint M = pc.p0, K = pc.p1, batch;
  batch = uint(meta[pc.meta_b]);
  uint b = o % batch;
  uint m = (o / batch) % M;
  uint n = o / (batch * M);
  float s = 0.0;
  for (uint k = 0u; k < K; ++k)
    s += a_data[b + batch * (m + M * k)] * b_data[b + batch * (k + K * n)];
  o_data[pc.out_offset + o] = s;
}
