// GEMM on the plain FP32 pipes: the portable path (any NVIDIA or AMD GPU,
// f32 inputs, and f16/bf16 where there are no tensor cores here).
//
// Problem:  D = epilogue(alpha * A B) per batch entry / group (gemm_common.h).
// Policy:   a block of (BM / TM) x (BN / TN) threads owns a BM x BN tile;
//           each thread a TM x TN block of it, spread with a stride so that
//           neighbouring threads write neighbouring columns.
// Pipeline: per BK step, the block stages A (as BK x BM) and B (BK x BN)
//           in shared memory as f32, then every thread accumulates its
//           outer products from registers.  Loads are bounds-checked.
// Epilogue: as the tensor-core pipelines (gemm_common.h).
#include "ckjit_prelude.h"

typedef @DTYPE@ TA;
typedef @OUT@ TC;
#define A_KCONTIG @A@
#define B_KCONTIG @B@
#define BM @BM@
#define BN @BN@
#define BK @BK@
#define TM @TM@
#define TN @TN@
#define BIAS @BIAS@
#define ACT @ACT@
#define HAS_C @C@
#define HAS_D0 @D0@
#define HAS_D1 @D1@
#define SPLIT @SPLIT@
#define GROUPED @GROUPED@

#include "gemm_common.h"

#define TX (BN / TN) // threads along N
#define TY (BM / TM)
#define THREADS (TX * TY)

extern "C" __global__ void __launch_bounds__(THREADS)
ckjit_gemm_simt(GEMM_PARAMS) {
  __shared__ float sa[BK][BM + 1], sb[BK][BN + 1];
  GEMM_PROBLEM(p, t);
  const TA *a = static_cast<const TA *>(p.a) + t.batch * p.stride_a;
  const TA *b = static_cast<const TA *>(p.b) + t.batch * p.stride_b;
  const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; i++)
#pragma unroll
    for (int j = 0; j < TN; j++) acc[i][j] = 0.0f;

  for (long long k0 = t.k0; k0 < t.k1; k0 += BK) {
    // Consecutive threads read consecutive addresses of each operand.
    for (int i = threadIdx.x; i < BK * BM; i += THREADS) {
#if A_KCONTIG
      const int kk = i % BK, mm = i / BK;
#else
      const int mm = i % BM, kk = i / BM;
#endif
      const long long m = t.m0 + mm, k = k0 + kk;
      float v = 0.0f;
      if (m < p.m && k < t.k1) v = ckjit_to_float(A_KCONTIG ? a[m * p.lda + k] : a[k * p.lda + m]);
      sa[kk][mm] = v;
    }
    for (int i = threadIdx.x; i < BK * BN; i += THREADS) {
#if B_KCONTIG
      const int kk = i % BK, nn = i / BK;
#else
      const int nn = i % BN, kk = i / BN;
#endif
      const long long n = t.n0 + nn, k = k0 + kk;
      float v = 0.0f;
      if (n < p.n && k < t.k1) v = ckjit_to_float(B_KCONTIG ? b[n * p.ldb + k] : b[k * p.ldb + n]);
      sb[kk][nn] = v;
    }
    __syncthreads();
#pragma unroll 4
    for (int kk = 0; kk < BK; kk++) {
      float ar[TM], br[TN];
#pragma unroll
      for (int i = 0; i < TM; i++) ar[i] = sa[kk][ty + i * TY];
#pragma unroll
      for (int j = 0; j < TN; j++) br[j] = sb[kk][tx + j * TX];
#pragma unroll
      for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) acc[i][j] = fmaf(ar[i], br[j], acc[i][j]);
    }
    __syncthreads();
  }

  // Columns tx + j * TX are not adjacent: one element per store.
#pragma unroll
  for (int i = 0; i < TM; i++)
#pragma unroll
    for (int j = 0; j < TN; j++) {
      const long long m = t.m0 + ty + i * TY, n = t.n0 + tx + j * TX;
      if (n < p.n) store_one(p, t, m, n, acc[i][j]);
    }
}
