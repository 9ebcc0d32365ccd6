// Split-K GEMM, second kernel: sums the f32 partials of the K slices in
// slice order (so results do not depend on scheduling), then applies the
// epilogue.  Partials are [splits][batch][m][n]; each thread reads VEC
// adjacent columns of every slice as one access (16 bytes at VEC 4).
//
// Kernel arguments: gemm_problem p (partials, splits and the epilogue
// operands as for the first kernel).
#include "ckjit_prelude.h"

typedef float TA; // unused by the epilogue
typedef @OUT@ TC;
#define BM 1
#define BN 1
#define VEC @VEC@ // divides n
#define BIAS @BIAS@
#define ACT @ACT@
#define HAS_C @C@
#define HAS_D0 @D0@
#define HAS_D1 @D1@
#define SPLIT 0
#define GROUPED 0

#include "gemm_common.h"

extern "C" __global__ void __launch_bounds__(256) ckjit_gemm_reduce(gemm_problem p) {
  const long long row_vecs = p.n / VEC, total = p.batch * p.m * row_vecs;
  const long long slice_stride = p.batch * p.m * p.n;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const long long row = i / row_vecs, n = (i - row * row_vecs) * VEC;
    const long long batch = row / p.m, m = row - batch * p.m;
    const float *src = p.partials + row * p.n + n;
    float s[VEC];
#pragma unroll
    for (int e = 0; e < VEC; e++) s[e] = 0.0f;
    for (long long sl = 0; sl < p.splits; sl++) {
      ckjit_vec<float, VEC> v = ckjit_load<float, VEC>(src + sl * slice_stride);
#pragma unroll
      for (int e = 0; e < VEC; e++) s[e] += v.v[e];
    }
#pragma unroll
    for (int e = 0; e < VEC; e += 2) {
      if (e + 1 < VEC) epilogue(p, batch, m, n + e, s[e], s[e + 1], true);
      else epilogue(p, batch, m, n + e, s[e], 0.0f, false);
    }
  }
}
