// GEMM, second kernel: sums f32 partials in a fixed order (so results do
// not depend on scheduling), then applies the epilogue.
//
// SK_BN = 0 (split-K): partials are [splits][batch][m][n]; each thread
// reads VEC adjacent columns of every slice as one access (16 bytes at VEC
// 4).  Kernel argument: gemm_problem p (partials, splits and the epilogue
// operands as for the first kernel).
//
// SK_BN = 128 or 256 (Stream-K, 128 x SK_BN tiles): each Stream-K tile has
// a slot per run that touched it (abi/gemm_args.h, ckjit_streamk); 8 blocks
// per tile, 16 rows each, sum its slots in block order, 16 bytes a read.
// Kernel argument: sk_args (ckjit_gemm_reduce_sk_args in abi/gemm_args.h).
#include "core/prelude.h"
#include "abi/gemm_args.h"
// @PARAMETERS@

typedef float TA; // unused by the epilogue
typedef OUT TC;
#define BM (SK_BN ? 128 : 1)
#define BN (SK_BN ? SK_BN : 1)
// VEC: split-K: divides n
#define SPLIT 0
#define GROUPED 0

#include "gemm/problem.h"
#include "gemm/epilogue.h"

#if SK_BN
#define SK_ROWS 16 // rows per block

typedef ckjit_gemm_reduce_sk_args sk_args; // abi/gemm_args.h

extern "C" __global__ void __launch_bounds__(256) ckjit_gemm_reduce(const sk_args x) {
  const gemm_problem &p = x.p;
  const streamk &s = x.sk;
  const long long tr = blockIdx.x / (BM / SK_ROWS), r0 = (blockIdx.x % (BM / SK_ROWS)) * SK_ROWS;
  const gemm_tile t = tile_of(p, s.dp_tiles + tr);
  if (t.m0 + r0 >= p.m) return;
  const long long first = sk_owner(s, tr * s.iters), last = sk_owner(s, (tr + 1) * s.iters - 1);
  const float *src = p.partials + tr * s.slots * (BM * BN);
  for (int i = threadIdx.x; i < SK_ROWS * (BN / 4); i += 256) {
    const int r = (int)r0 + i / (BN / 4), c = (i % (BN / 4)) * 4;
    const long long m = t.m0 + r, n = t.n0 + c;
    if (m >= p.m || n >= p.n) continue;
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 4 // the slots' loads in flight together
    for (long long sl = 0; sl <= last - first; sl++) {
      const ckjit_vec<float, 4> q = ckjit_load<float, 4>(src + sl * (BM * BN) + r * BN + c);
#pragma unroll
      for (int e = 0; e < 4; e++) v[e] += q.v[e];
    }
    epilogue(p, t.batch, m, n, v[0], v[1], n + 1 < p.n);
    epilogue(p, t.batch, m, n + 2, v[2], v[3], n + 3 < p.n);
  }
}

CKJIT_ABI_KERNEL(ckjit_gemm_reduce, CKJIT_GEMM_REDUCE_SK_PARAM);

#else
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
#pragma unroll 4 // the slices' loads in flight together
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
CKJIT_ABI_KERNEL(ckjit_gemm_reduce, CKJIT_GEMM_PROBLEM_PARAM);
#endif
