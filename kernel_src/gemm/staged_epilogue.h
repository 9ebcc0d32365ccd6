// GEMM epilogue of the mma.sync pipelines (mma.cu, tf32.cu) through shared
// memory: the warps write their accumulator fragments into an f32 copy of
// the block's BM x BN tile, then every thread walks it four columns at a
// time in a rolled loop, through the epilogue's pair path (or, SPLIT, the
// partials).  Why: stored from the fragments, the epilogue is straight-line
// code per fragment (32 to 64 copies a thread), and that code was a
// quarter of these kernels' cold compile time; rolled, it is one copy.
// The stores also become row-contiguous across a warp.
//
// Needs BM, BN, THREADS, TC (and gemm/epilogue.h).
#pragma once
#include "gemm/epilogue.h"

#define STAGED_LD (BN + CKJIT_GEMM_STAGED_PAD) // f32 row stride of the copy

// Fragment (i, j) of an mt x nt warp tile at rows wm0 + 16 i + lane / 4
// (+ 8), columns wn0 + 8 j + 2 (lane % 4) (+ 1): the mma.sync accumulator
// layout.  `write`: this warp holds a part of the tile (not a K warp whose
// sums were added into another's).  Every thread of the block calls it;
// the caller has synchronized the block after its last read of the stages
// (the copy overlays them).
template <int mt, int nt> // (lower case: MT and NT are the kernels' macros)
CKJIT_INLINE void store_tile_staged(const gemm_problem &p, const gemm_tile &t, const float (&acc)[mt][nt][4],
                                    float *tile, int wm0, int wn0, bool write) {
  const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  if (write) {
#pragma unroll
    for (int i = 0; i < mt; i++)
#pragma unroll
      for (int j = 0; j < nt; j++) {
        float *at = tile + (wm0 + 16 * i + g) * STAGED_LD + wn0 + 8 * j + 2 * q;
        *reinterpret_cast<float2 *>(at) = make_float2(acc[i][j][0], acc[i][j][1]);
        *reinterpret_cast<float2 *>(at + 8 * STAGED_LD) = make_float2(acc[i][j][2], acc[i][j][3]);
      }
  }
  __syncthreads();
#pragma unroll 1
  for (int idx = threadIdx.x; idx < BM * (BN / 4); idx += THREADS) {
    const int r = idx / (BN / 4), c = idx % (BN / 4) * 4;
    const float4 v = *reinterpret_cast<const float4 *>(tile + r * STAGED_LD + c);
    const long long m = t.m0 + r, n = t.n0 + c;
    if (m >= p.m || n >= p.n) continue;
    store_pair(p, t, m, n, v.x, v.y);
    if (n + 2 < p.n) store_pair(p, t, m, n + 2, v.z, v.w);
  }
}
