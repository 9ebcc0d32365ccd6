// GEMM on wgmma (gemm/wgmma.cu), the math of one tile, shared by the TMA
// and the cp.async pipelines: the stage layout, one K step of wgmma on a
// stage, and the accumulators' register epilogue.
//
// Needs TA, BM, BN, BK, A_KCONTIG, B_KCONTIG (and gemm/epilogue.h).
#pragma once
#include "core/async_copy.h"
#include "core/ptx.h"
#include "core/wgmma.h"
#include "gemm/epilogue.h"

// A stage: BM rows of A, then BN rows of B, each a 128-byte row of K in
// the 128-byte swizzle (or, M/N-contiguous, panels of BK columns: 64
// 16-bit or 32 f32 elements, one 128-byte row of each of the BK K rows).
#define A_TILE (BM * BK)
#define B_TILE (BN * BK)
#define STAGE_ELEMS (A_TILE + B_TILE)
#define A_BYTES (A_TILE * (int)sizeof(TA)) // where a stage's B starts
#define STAGE_BYTES (STAGE_ELEMS * (int)sizeof(TA))

template <typename T> struct is_f32 { static const bool value = false; };
template <> struct is_f32<float> { static const bool value = true; };

#define ACC (BN / 2) // accumulators per thread

CKJIT_INLINE void wgmma(float (&d)[ACC], ckjit_u64 da, ckjit_u64 db) {
  const int ta = A_KCONTIG ? 0 : 1, tb = B_KCONTIG ? 0 : 1;
#if BN == 64
  if (is_f32<TA>::value) wgmma_tf32_n64(d, da, db);
  else if (is_bf16<TA>::value) wgmma_bf16_n64<ta, tb>(d, da, db);
  else wgmma_f16_n64<ta, tb>(d, da, db);
#elif BN == 128
  if (is_f32<TA>::value) wgmma_tf32_n128(d, da, db);
  else if (is_bf16<TA>::value) wgmma_bf16_n128<ta, tb>(d, da, db);
  else wgmma_f16_n128<ta, tb>(d, da, db);
#else
  if (is_f32<TA>::value) wgmma_tf32_n256(d, da, db);
  else if (is_bf16<TA>::value) wgmma_bf16_n256<ta, tb>(d, da, db);
  else wgmma_f16_n256<ta, tb>(d, da, db);
#endif
}

// This warpgroup's descriptors for K step kk of the stage at sa / sb: rows
// 64 wg.. of a K-contiguous A, or panel wg of an M-contiguous one.  A
// wgmma step (16 deep for 16-bit types, 8 for tf32) is 32 bytes into each
// K-contiguous row, or 16 rows of 128 bytes further.
#define K_STEP (32 / (int)sizeof(TA))
CKJIT_INLINE void step(float (&acc)[ACC], unsigned sa, unsigned sb, int wg) {
  const int rows = BM == 64 ? 0 : wg; // A half
#pragma unroll
  for (int kk = 0; kk < BK; kk += K_STEP) {
#if A_KCONTIG
    const ckjit_u64 da = wgmma_smem_desc(sa + rows * 64 * 128 + kk * (int)sizeof(TA), 16, 1024);
#else
    const ckjit_u64 da = wgmma_smem_desc(sa + rows * BK * 128 + kk * 128, BK * 128, 1024);
#endif
#if B_KCONTIG
    const ckjit_u64 db = wgmma_smem_desc(sb + kk * (int)sizeof(TA), 16, 1024);
#else
    const ckjit_u64 db = wgmma_smem_desc(sb + kk * 128, BK * 128, 1024);
#endif
    wgmma(acc, da, db);
  }
}

// tf32 with an M-major A (A_REGS): wgmma's tf32 reads only K-major shared
// memory, so A comes from registers, loaded from the stage's M-major
// panels (BK columns of M, BK rows of K, each row 128 bytes in the 128-byte
// swizzle: 16-byte chunk c of row k sits at chunk c ^ (k % 8)).  Each warp
// holds its 16 rows of the warpgroup's 64 for every 8-deep K slice
// (wgmma_rs_tf32's layout).
#define A_REGS (is_f32<TA>::value && !A_KCONTIG) // a C++ constant, not for #if
#define K_SLICES (BK / K_STEP)
CKJIT_INLINE void load_a_regs(unsigned (&a)[K_SLICES][4], unsigned sa, int wg) {
  const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  const int m = (BM == 64 ? 0 : wg) * 64 + ((threadIdx.x / 32) % 4) * 16 + g;
#pragma unroll
  for (int e = 0; e < 4; e++) {
    const int r = m + (e & 1) * 8, kq = q + (e >> 1) * 4; // row; K within the slice (and mod 8)
    const unsigned at = sa + (unsigned)((r / BK) * BK * 128 + kq * 128 + ((((r % BK) / 4) ^ kq) * 16) + (r % 4) * 4);
#pragma unroll
    for (int s = 0; s < K_SLICES; s++) a[s][e] = ld_shared_u32(at + s * K_STEP * 128);
  }
}
CKJIT_INLINE void step_regs(float (&acc)[ACC], const unsigned (&a)[K_SLICES][4], unsigned sb) {
#pragma unroll
  for (int s = 0; s < K_SLICES; s++) {
    const ckjit_u64 db = wgmma_smem_desc(sb + s * 32, 16, 1024);
#if BN == 64
    wgmma_rs_tf32_n64(acc, a[s], db);
#elif BN == 128
    wgmma_rs_tf32_n128(acc, a[s], db);
#else
    wgmma_rs_tf32_n256(acc, a[s], db);
#endif
  }
}

// Accumulator 4j + e: row 16 w + lane / 4 (+8 for e >= 2) of warpgroup
// wg's half, columns 8 j + 2 (lane % 4) + {0, 1}.
CKJIT_INLINE void store_acc(const gemm_problem &p, const gemm_tile &t, const float (&acc)[ACC], int wg) {
  const int w = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const long long m = t.m0 + wg * 64 + w * 16 + lane / 4;
#pragma unroll
  for (int j = 0; j < BN / 8; j++) {
    const long long n = t.n0 + j * 8 + 2 * (lane % 4);
    const float frag[4] = {acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]};
    store_frag(p, t, m, n, frag);
  }
}

CKJIT_INLINE unsigned align_1k(unsigned char *raw, TA *&smem) {
  // Swizzled atoms must start on 1 KiB boundaries (the host adds the slack).
  const unsigned a = smem_addr(raw), base = (a + 1023) & ~1023u;
  smem = reinterpret_cast<TA *>(raw + (base - a));
  return base;
}
