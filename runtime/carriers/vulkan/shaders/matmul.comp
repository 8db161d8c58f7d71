#version 450
// out[b, m, n] = sum_k a[b, m, k] * b[b, k, n] over workgroup tiles: each
// workgroup computes a BM x BN tile of one batch, stepping through K in
// slices of BK that its invocations first stage in shared memory; each
// invocation then accumulates TM x TN outputs in registers, reading its
// operands from shared memory four at a time. Operands and output are
// strided matrices (a transposed operand is a stride swap, not a copy);
// batch b decodes over the batch leaves at batch_desc as [leaves, (extent,
// a stride, b stride, out stride) per leaf], first leaf fastest. f16 and
// bf16 operands (FMT_IN) are widened to f32 as they are staged.
//
// TM x TN = 8 x 8 keeps 64 accumulators per invocation: on GPUs the classic
// register blocking, and on CPU implementations (lavapipe), where every
// shared-memory read is a per-lane load, it does 64 multiply-adds per 4
// vector reads.
#include "common.glsl"

#define BM 64
#define BN 64
#define BK 16
#define TM 8
#define TN 8
#define WX (BM / TM)
#define WY (BN / TN)
layout(local_size_x = WX, local_size_y = WY) in;

layout(constant_id = 0) const uint FMT_IN = 0u;

layout(push_constant) uniform Push {
  uint meta_base;
  uint M, N, K;
  uint a_offset;
  int a_row, a_col;  // strides of a's m and k
  uint b_offset;
  int b_row, b_col;  // strides of b's k and n
  uint out_offset;
  int out_row, out_col;
  uint batch_desc;
  uint batches;
} pc;

#ifdef SW_F64
#define T4 dvec4
#else
#define T4 vec4
#endif

shared T4 As[BK][BM / 4];  // a[m0 + 4q + c, k0 + k] at As[k][q][c]
shared T4 Bs[BK][BN / 4];  // b[k0 + k, n0 + 4q + c] at Bs[k][q][c]

void main() {
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  const uint t = tx + WX * ty;
  const uint m0 = gl_WorkGroupID.x * BM, n0 = gl_WorkGroupID.y * BN;
  for (uint bi = gl_WorkGroupID.z; bi < pc.batches; bi += gl_NumWorkGroups.z) {
    int ao = int(pc.a_offset), bo = int(pc.b_offset), oo = int(pc.out_offset);
    uint d = pc.meta_base + pc.batch_desc;
    uint r = bi;
    for (int l = 0; l < meta_at(d); ++l) {
      uint base = d + 1u + 4u * uint(l);
      uint e = uint(meta_at(base));
      int c = int(r % e);
      r /= e;
      ao += c * meta_at(base + 1u);
      bo += c * meta_at(base + 2u);
      oo += c * meta_at(base + 3u);
    }
    T4 acc[TM][TN / 4];
    for (int i = 0; i < TM; ++i)
      for (int j = 0; j < TN / 4; ++j) acc[i][j] = T4(0);
    for (uint k0 = 0u; k0 < pc.K; k0 += BK) {
      // Stage the slices, zero past the edges.
      for (uint e = t; e < BK * BM / 4; e += WX * WY) {
        uint q = e % (BM / 4), kk = e / (BM / 4), gk = k0 + kk;
        T4 v;
        for (int c = 0; c < 4; ++c) {
          uint gm = m0 + 4u * q + uint(c);
          v[c] = gm < pc.M && gk < pc.K ? load_a(FMT_IN, uint(ao + int(gm) * pc.a_row + int(gk) * pc.a_col)) : T(0);
        }
        As[kk][q] = v;
      }
      for (uint e = t; e < BK * BN / 4; e += WX * WY) {
        uint kk = e % BK, q = e / BK, gk = k0 + kk;
        T4 v;
        for (int c = 0; c < 4; ++c) {
          uint gn = n0 + 4u * q + uint(c);
          v[c] = gk < pc.K && gn < pc.N ? load_b(FMT_IN, uint(bo + int(gk) * pc.b_row + int(gn) * pc.b_col)) : T(0);
        }
        Bs[kk][q] = v;
      }
      barrier();
      for (uint kk = 0u; kk < BK; ++kk) {
        T4 av[TM / 4], bv[TN / 4];
        for (int i = 0; i < TM / 4; ++i) av[i] = As[kk][tx * (TM / 4) + uint(i)];
        for (int j = 0; j < TN / 4; ++j) bv[j] = Bs[kk][ty * (TN / 4) + uint(j)];
        for (int i = 0; i < TM; ++i)
          for (int j = 0; j < TN / 4; ++j) acc[i][j] += av[i / 4][i % 4] * bv[j];
      }
      barrier();
    }
    for (int i = 0; i < TM; ++i) {
      uint gm = m0 + tx * TM + uint(i);
      if (gm >= pc.M) continue;
      for (int j = 0; j < TN; ++j) {
        uint gn = n0 + ty * TN + uint(j);
        if (gn < pc.N) store_out(uint(oo + int(gm) * pc.out_row + int(gn) * pc.out_col), acc[i][j / 4][j % 4]);
      }
    }
  }
}
