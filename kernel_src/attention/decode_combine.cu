// attention_combine: attention_decode's splits summed into O and LSE.
//
// Problem:  row r (entry b, head h, query i) has, per split s, its O
//           (divided by the split's own sum) and LSE_s (log2 units; -inf:
//           the split saw no key).  O = sum_s w_s O_s / sum_s w_s with
//           w_s = 2^(LSE_s - max LSE), LSE = (max + log2 sum_s w_s) ln 2;
//           a row no split saw gives O = 0 and LSE = -inf.
// Policy:   a warp per row, the splits in order (no atomics: the result
//           does not depend on which split finished first); lanes over
//           O's columns, 4 at a time.  Grid-stride over the rows.
// Kernel argument: ckjit_attention_combine_args (abi/attention_args.h), by value.
#include "core/prelude.h"
#include "abi/attention_args.h"
// @PARAMETERS@

typedef DTYPE T;

#define ROWS CKJIT_ATTENTION_COMBINE_ROWS

extern "C" __global__ void __launch_bounds__(32 * ROWS)
ckjit_attention_combine(const CKJIT_GRID_CONSTANT ckjit_attention_combine_args x) {
  const ckjit_attention_args &a = x.p;
  const int lane = threadIdx.x % 32;
  for (long long r = blockIdx.x * (long long)ROWS + threadIdx.x / 32; r < x.rows;
       r += gridDim.x * (long long)ROWS) {
    const int i = (int)(r % a.seqlen_q), h = (int)(r / a.seqlen_q % a.heads_q);
    const int b = (int)(r / a.seqlen_q / a.heads_q);
    long long o_row, lse_row;
    if (a.cu_seqlens_q) {
      const int q0 = a.cu_seqlens_q[b];
      if (i >= a.cu_seqlens_q[b + 1] - q0) continue; // not a query of this entry
      o_row = (q0 + i) * a.o_stride.s;
      lse_row = (q0 + i) * a.lse_stride.s;
    } else {
      o_row = b * a.o_stride.b + i * a.o_stride.s;
      lse_row = b * a.lse_stride.b + i * a.lse_stride.s;
    }
    float top = -CKJIT_INF, sum = 0.0f;
    for (int s = 0; s < x.splits; s++) top = fmaxf(top, x.part_lse[s * x.rows + r]);
    for (int s = 0; s < x.splits; s++) {
      const float lse = x.part_lse[s * x.rows + r];
      if (lse != -CKJIT_INF) sum += exp2f(lse - top);
    }
    const float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
    for (int c = 4 * lane; c < HDIM_V; c += 128) {
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (int s = 0; s < x.splits; s++) {
        const float lse = x.part_lse[s * x.rows + r];
        if (lse == -CKJIT_INF) continue;
        const float w = exp2f(lse - top);
        const float4 v = *reinterpret_cast<const float4 *>(x.part_o + (s * x.rows + r) * HDIM_V + c);
        acc[0] += w * v.x, acc[1] += w * v.y, acc[2] += w * v.z, acc[3] += w * v.w;
      }
      T *out = static_cast<T *>(a.o) + o_row + h * a.o_stride.h + c * a.o_stride.d;
#pragma unroll
      for (int e = 0; e < 4; e++) out[e * a.o_stride.d] = ckjit_from_float<T>(acc[e] * inv);
    }
    if (a.lse && lane == 0)
      a.lse[lse_row + h * a.lse_stride.h] = sum == 0.0f ? -CKJIT_INF : (top + log2f(sum)) * 0.6931471805599453f;
  }
}
