// GEMM on the plain FP32 pipes: the portable path (any NVIDIA or AMD GPU,
// f32 inputs, and f16/bf16 where there are no tensor cores here).
//
// Problem:  D = epilogue(alpha * A B) per batch entry / group (gemm/problem.h).
// Policy:   a block of (BM / 8) x (BN / 8) threads owns a BM x BN tile; each
//           thread an 8 x 8 block of it, as 2 x 2 sub-blocks of 4 x 4 half
//           a tile apart, so that its shared-memory reads are 16-byte
//           vectors that neighbouring threads take side by side.
// Pipeline: per BK step, A (as BK x BM) and B (BK x BN) in shared memory as
//           f32, double-buffered: the next step's global loads (VEC elements
//           each, bounds-checked) wait in registers while this step's outer
//           products run.
// Epilogue: as the tensor-core pipelines (gemm/epilogue.h).
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
// VEC: elements per global load (pointers and leading dimensions allow it)

#include "gemm/problem.h"
#include "gemm/epilogue.h"

#define TX (BN / 8) // threads along N
#define TY (BM / 8)
#define THREADS (TX * TY)
#define PAD 4 // floats after each shared row: transposed stores hit distinct banks
#define A_LOADS (BM * BK / VEC / THREADS)
#define B_LOADS (BN * BK / VEC / THREADS)

// VEC elements of row r, columns c.. of a matrix with leading dimension ld;
// past r_end / c_end they read 0.
CKJIT_INLINE void load_vec(const TA *src, long long ld, long long r, long long c, long long r_end,
                           long long c_end, float *out) {
  if (r < r_end && c + VEC <= c_end) {
    const ckjit_vec<TA, VEC> v = ckjit_load<TA, VEC>(src + r * ld + c);
#pragma unroll
    for (int e = 0; e < VEC; e++) out[e] = ckjit_to_float(v.v[e]);
  } else {
#pragma unroll
    for (int e = 0; e < VEC; e++) out[e] = r < r_end && c + e < c_end ? ckjit_to_float(src[r * ld + c + e]) : 0.0f;
  }
}

// Two blocks per multiprocessor: at 256 threads that caps registers at 128
// (unbounded, ptxas takes more and one block of 8 warps fits), which
// measured faster on the H100 (bench/NOTES.md #73).
extern "C" __global__ void __launch_bounds__(THREADS, 2) ckjit_gemm_simt(GEMM_PARAMS) {
  __shared__ __align__(16) float sa[2][BK][BM + PAD], sb[2][BK][BN + PAD];
  GEMM_PROBLEM(p, t);
  const TA *a = static_cast<const TA *>(p.a) + t.batch * p.stride_a;
  const TA *b = static_cast<const TA *>(p.b) + t.batch * p.stride_b;
  const int tid = threadIdx.x, tx = tid % TX, ty = tid / TX;

  float ra[A_LOADS][VEC], rb[B_LOADS][VEC];
  // Global -> registers for the K step at k0.  Vector v of A covers VEC
  // consecutive elements along A's contiguous dimension (likewise B).
  auto fetch = [&](long long k0) {
#pragma unroll
    for (int i = 0; i < A_LOADS; i++) {
      const int v = i * THREADS + tid;
#if A_KCONTIG
      load_vec(a, p.lda, t.m0 + v / (BK / VEC), k0 + (v % (BK / VEC)) * VEC, p.m, t.k1, ra[i]);
#else
      load_vec(a, p.lda, k0 + v / (BM / VEC), t.m0 + (v % (BM / VEC)) * VEC, t.k1, p.m, ra[i]);
#endif
    }
#pragma unroll
    for (int i = 0; i < B_LOADS; i++) {
      const int v = i * THREADS + tid;
#if B_KCONTIG
      load_vec(b, p.ldb, t.n0 + v / (BK / VEC), k0 + (v % (BK / VEC)) * VEC, p.n, t.k1, rb[i]);
#else
      load_vec(b, p.ldb, k0 + v / (BN / VEC), t.n0 + (v % (BN / VEC)) * VEC, t.k1, p.n, rb[i]);
#endif
    }
  };
  // Registers -> shared buffer `s`, as k-major rows.
  auto stage = [&](int s) {
#pragma unroll
    for (int i = 0; i < A_LOADS; i++) {
      const int v = i * THREADS + tid;
#pragma unroll
      for (int e = 0; e < VEC; e++) {
#if A_KCONTIG
        sa[s][(v % (BK / VEC)) * VEC + e][v / (BK / VEC)] = ra[i][e];
#else
        sa[s][v / (BM / VEC)][(v % (BM / VEC)) * VEC + e] = ra[i][e];
#endif
      }
    }
#pragma unroll
    for (int i = 0; i < B_LOADS; i++) {
      const int v = i * THREADS + tid;
#pragma unroll
      for (int e = 0; e < VEC; e++) {
#if B_KCONTIG
        sb[s][(v % (BK / VEC)) * VEC + e][v / (BK / VEC)] = rb[i][e];
#else
        sb[s][v / (BN / VEC)][(v % (BN / VEC)) * VEC + e] = rb[i][e];
#endif
      }
    }
  };

  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; i++)
#pragma unroll
    for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;

  int s = 0;
  if (t.k0 < t.k1) {
    fetch(t.k0);
    stage(0);
  }
  __syncthreads();
  for (long long k0 = t.k0; k0 < t.k1; k0 += BK) {
    const bool next = k0 + BK < t.k1;
    if (next) fetch(k0 + BK);
#pragma unroll
    for (int kk = 0; kk < BK; kk++) {
      float av[8], bv[8];
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const ckjit_vec<float, 4> x = ckjit_load<float, 4>(&sa[s][kk][h * (BM / 2) + ty * 4]);
        const ckjit_vec<float, 4> y = ckjit_load<float, 4>(&sb[s][kk][h * (BN / 2) + tx * 4]);
#pragma unroll
        for (int e = 0; e < 4; e++) av[h * 4 + e] = x.v[e], bv[h * 4 + e] = y.v[e];
      }
#pragma unroll
      for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    if (next) stage(s ^ 1);
    __syncthreads();
    s ^= 1;
  }

  // Row i: (i / 4) half, row ty * 4 + i % 4; columns likewise, in pairs.
#pragma unroll
  for (int i = 0; i < 8; i++)
#pragma unroll
    for (int j = 0; j < 8; j += 2) {
      const long long m = t.m0 + (i / 4) * (BM / 2) + ty * 4 + i % 4;
      const long long n = t.n0 + (j / 4) * (BN / 2) + tx * 4 + j % 4;
      store_pair(p, t, m, n, acc[i][j], acc[i][j + 1]);
    }
}
CKJIT_ABI_KERNEL(ckjit_gemm_simt, GEMM_PARAM_LIST);
