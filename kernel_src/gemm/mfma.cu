// GEMM on AMD matrix cores (MFMA: gfx908 f16, gfx90a and later f16 and
// bf16), f32 accumulation.  Compiled by hipRTC in CI; not yet run on an AMD
// GPU (there is none here).
//
// Problem:  D = epilogue(alpha * A B) per batch entry / group (gemm/problem.h).
// Policy:   a block of four wave64s owns a 128 x 128 tile; each wave a 64 x 64
//           quarter as 2 x 2 MFMA 32x32x8 blocks.  K advances 32 per step.
// Pipeline: per K step the block stages A (128 x 32) and B (as 128 x 32,
//           K-contiguous per column) in LDS, rows padded to 36 elements so
//           that each lane's four K values are one aligned 8-byte read; then
//           four MFMA k-steps.  Loads are bounds-checked element copies.
// Epilogue: gemm/epilogue.h, one output per accumulator (lanes hold adjacent
//           columns, so stores coalesce across the wave).
//
// Kernel argument: gemm_problem p, or (GROUPED) gemm_groups gs, by value
// (abi/gemm_args.h).
#include "core/prelude.h"
#include "abi/gemm_args.h"
// @PARAMETERS@

typedef DTYPE TA;
typedef OUT TC;
#define A_KCONTIG (A_ORDER == A_ROW)
#define B_KCONTIG (B_ORDER == B_COL)
#define BM 128
#define BN 128
#define BK 32

#include "gemm/problem.h"
#include "gemm/epilogue.h"

#if defined(CKJIT_AMD) && (defined(__gfx908__) || defined(__gfx90a__) || defined(__gfx940__) || \
                           defined(__gfx941__) || defined(__gfx942__))

#define THREADS 256
#define LD (BK + 4) // LDS row pitch in elements

typedef float acc16 __attribute__((ext_vector_type(16)));
typedef _Float16 half4 __attribute__((ext_vector_type(4)));
typedef short short4v __attribute__((ext_vector_type(4)));


// acc += a b for one 32x32x8 block; a and b are each lane's four K values.
CKJIT_INLINE acc16 mfma(const unsigned short (&a)[4], const unsigned short (&b)[4], acc16 acc) {
#if defined(__gfx908__)
  // gfx908 has no 32x32x8 bf16 MFMA; the front-end sends its bf16 GEMMs to
  // gemm_simt, and this specialization traps rather than compute wrongly.
  if (is_bf16<TA>::value) __builtin_trap();
  half4 x, y;
  __builtin_memcpy(&x, a, 8);
  __builtin_memcpy(&y, b, 8);
  return __builtin_amdgcn_mfma_f32_32x32x8f16(x, y, acc, 0, 0, 0);
#else
  if (is_bf16<TA>::value) {
    short4v x, y;
    __builtin_memcpy(&x, a, 8);
    __builtin_memcpy(&y, b, 8);
    return __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(x, y, acc, 0, 0, 0);
  }
  half4 x, y;
  __builtin_memcpy(&x, a, 8);
  __builtin_memcpy(&y, b, 8);
  return __builtin_amdgcn_mfma_f32_32x32x8f16(x, y, acc, 0, 0, 0);
#endif
}

extern "C" __global__ void __launch_bounds__(THREADS) ckjit_gemm_mfma(GEMM_PARAMS) {
  // K-contiguous rows: A as [m][k], B as [n][k].
  __shared__ __attribute__((aligned(16))) unsigned short sa[BM * LD], sb[BN * LD];
  GEMM_PROBLEM(p, t);
  const unsigned short *a = static_cast<const unsigned short *>(p.a) + t.batch * p.stride_a;
  const unsigned short *b = static_cast<const unsigned short *>(p.b) + t.batch * p.stride_b;
  const int wave = threadIdx.x / 64, lane = threadIdx.x % 64;
  const int wm0 = (wave / 2) * 64, wn0 = (wave % 2) * 64;
  acc16 acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; i++)
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
      for (int e = 0; e < 16; e++) acc[i][j][e] = 0.0f;

  for (long long k0 = t.k0; k0 < t.k1; k0 += BK) {
    // Consecutive threads read consecutive addresses of each operand.
    for (int i = threadIdx.x; i < BM * BK; i += THREADS) {
      const int kk = A_KCONTIG ? i % BK : i / BM, mm = A_KCONTIG ? i / BK : i % BM;
      const long long m = t.m0 + mm, k = k0 + kk;
      sa[mm * LD + kk] = m < p.m && k < t.k1 ? (A_KCONTIG ? a[m * p.lda + k] : a[k * p.lda + m]) : 0;
    }
    for (int i = threadIdx.x; i < BN * BK; i += THREADS) {
      const int kk = B_KCONTIG ? i % BK : i / BN, nn = B_KCONTIG ? i / BK : i % BN;
      const long long n = t.n0 + nn, k = k0 + kk;
      sb[nn * LD + kk] = n < p.n && k < t.k1 ? (B_KCONTIG ? b[n * p.ldb + k] : b[k * p.ldb + n]) : 0;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 8) {
      // Lane l holds row / column l % 32 and K values 4 (l / 32) .. + 3.
      const int r = lane % 32, kq = kk + 4 * (lane / 32);
      unsigned short af[2][4], bf[2][4];
#pragma unroll
      for (int i = 0; i < 2; i++) __builtin_memcpy(af[i], &sa[(wm0 + 32 * i + r) * LD + kq], 8);
#pragma unroll
      for (int j = 0; j < 2; j++) __builtin_memcpy(bf[j], &sb[(wn0 + 32 * j + r) * LD + kq], 8);
#pragma unroll
      for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 2; j++) acc[i][j] = mfma(af[i], bf[j], acc[i][j]);
    }
    __syncthreads();
  }

  // Accumulator e of block (i, j): row 8 (e / 4) + 4 (lane / 32) + e % 4,
  // column lane % 32.
#pragma unroll
  for (int i = 0; i < 2; i++)
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
      for (int e = 0; e < 16; e++) {
        const long long m = t.m0 + wm0 + 32 * i + 8 * (e / 4) + 4 * (lane / 32) + e % 4;
        const long long n = t.n0 + wn0 + 32 * j + lane % 32;
        if (n < p.n) store_one(p, t, m, n, acc[i][j][e]);
      }
}

#else
extern "C" __global__ void ckjit_gemm_mfma(GEMM_PARAMS) {}
#endif
CKJIT_ABI_KERNEL(ckjit_gemm_mfma, GEMM_PARAM_LIST);
